/*
 * collective.c — the collective ops (ALL_REDUCE_SUM, ALL_GATHER, REDUCE_SCATTER_SUM): shape
 * inference, validation, and the graph's table of communicator groups.
 *
 * The IR only records which group an op belongs to and how many ranks the graph was built
 * for; the communicator itself (parallel/comm.h) is attached to the graph and called by the
 * backend kernels, so the transport never appears in a graph.
 */
#include <stdio.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "util/error.h"

bool ts_op_is_collective(ts_op op) {
    return op == TS_OP_ALL_REDUCE_SUM || op == TS_OP_ALL_GATHER || op == TS_OP_REDUCE_SCATTER_SUM;
}

ts_status ts_graph_set_comm(ts_graph *g, int group, ts_comm *c, ts_error *err) {
    if (g == NULL || group < 0 || group >= TS_MAX_GROUPS) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: set_comm: group %d (0..%d)", group,
                            TS_MAX_GROUPS - 1);
    }
    g->comm[group] = c;
    return TS_OK;
}

ts_comm *ts_graph_comm(const ts_graph *g, int group) {
    return g != NULL && group >= 0 && group < TS_MAX_GROUPS ? g->comm[group] : NULL;
}

static bool sum_type(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
}

ts_status ts_op_check_collective(const ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0];
    const char *op = ts_op_name(n->op);
    int axis = n->ip[0], group = n->ip[1], ranks = n->ip[2];
    bool sums = n->op != TS_OP_ALL_GATHER;
    if (sums ? !sum_type(a->type) : !(sum_type(a->type) || a->type == TS_TYPE_I32)) {
        return ts_error_set(err, TS_ERR_TYPE, "%s '%s': input '%s' is %s (want F32, F16, BF16%s)",
                            op, n->name, a->name, ts_type_name(a->type), sums ? "" : " or I32");
    }
    if (!ts_tensor_is_contiguous(a)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "%s '%s': input '%s' must be contiguous (use ts_op_cont)", op, n->name,
                            a->name);
    }
    if (group < 0 || group >= TS_MAX_GROUPS || ranks < 1) {
        return ts_error_set(err, TS_ERR_RANGE, "%s '%s': group %d / %d ranks out of range", op,
                            n->name, group, ranks);
    }
    if (n->op == TS_OP_ALL_REDUCE_SUM) {
        return TS_OK;
    }
    if (axis < 0 || axis >= TS_MAX_DIMS || a->dyn[axis] >= 0) {
        return ts_error_set(err, TS_ERR_RANGE, "%s '%s': axis %d is out of range or dynamic", op,
                            n->name, axis);
    }
    int64_t want = n->op == TS_OP_ALL_GATHER ? a->ne[axis] * ranks : a->ne[axis] / ranks;
    if (n->op == TS_OP_REDUCE_SCATTER_SUM && a->ne[axis] % ranks != 0) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "%s '%s': axis %d of '%s' has %lld entries, not a multiple of %d "
                            "ranks",
                            op, n->name, axis, a->name, (long long)a->ne[axis], ranks);
    }
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        int64_t e = d == axis ? want : a->ne[d];
        if (n->ne[d] != e) {
            return ts_error_set(err, TS_ERR_INTERNAL, "%s '%s': output dim %d is %lld, not %lld",
                                op, n->name, d, (long long)n->ne[d], (long long)e);
        }
    }
    return TS_OK;
}

static ts_tensor *make(ts_graph *g, ts_op op, ts_tensor *a, int axis, int group, int ranks) {
    if (a == NULL) {
        return NULL;
    }
    if (ranks < 1) {
        return ts_graph_fail(g, TS_ERR_RANGE, "%s: %d ranks", ts_op_name(op), ranks);
    }
    int64_t ne[TS_MAX_DIMS];
    memcpy(ne, a->ne_max, sizeof ne);
    int n_dims = a->n_dims;
    if (op != TS_OP_ALL_REDUCE_SUM) {
        if (axis < 0 || axis >= TS_MAX_DIMS) {
            return ts_graph_fail(g, TS_ERR_RANGE, "%s '%s': axis %d out of range", ts_op_name(op),
                                 a->name, axis);
        }
        if (op == TS_OP_ALL_GATHER) {
            ne[axis] *= ranks;
        } else if (ne[axis] % ranks != 0) {
            return ts_graph_fail(g, TS_ERR_RANGE,
                                 "%s '%s': axis %d has %lld entries, not a multiple of %d ranks",
                                 ts_op_name(op), a->name, axis, (long long)ne[axis], ranks);
        } else {
            ne[axis] /= ranks;
        }
        n_dims = axis + 1 > n_dims ? axis + 1 : n_dims;
    }
    ts_tensor *t = ts_graph_new_tensor(g, op, a->type, n_dims, ne);
    if (t == NULL) {
        return NULL;
    }
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        t->dyn[d] = a->dyn[d];
        t->ne[d] = t->dyn[d] >= 0 ? g->dim_value[t->dyn[d]] : t->ne_max[d];
    }
    t->src[0] = a;
    t->ip[0] = axis;
    t->ip[1] = group;
    t->ip[2] = ranks;
    ts_error e = {0};
    if (ts_op_check(t, &e) != TS_OK) {
        return ts_graph_fail(g, e.status, "%s", e.msg);
    }
    return t;
}

ts_tensor *ts_op_all_reduce_sum(ts_graph *g, ts_tensor *a, int group, int n_ranks) {
    return make(g, TS_OP_ALL_REDUCE_SUM, a, 0, group, n_ranks);
}

ts_tensor *ts_op_all_gather(ts_graph *g, ts_tensor *a, int axis, int group, int n_ranks) {
    return make(g, TS_OP_ALL_GATHER, a, axis, group, n_ranks);
}

ts_tensor *ts_op_reduce_scatter_sum(ts_graph *g, ts_tensor *a, int axis, int group, int n_ranks) {
    return make(g, TS_OP_REDUCE_SCATTER_SUM, a, axis, group, n_ranks);
}
