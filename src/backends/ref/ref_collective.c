/*
 * ref_collective.c — reference kernels of the collective ops: every element is copied one by
 * one into a dense staging buffer in rank-chunk order, the graph's communicator does the
 * collective on it, and the result is copied element by element into the output. Plain and
 * obviously correct rather than fast (it allocates its staging per call).
 */
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref_internal.h"
#include "parallel/comm.h"
#include "util/error.h"

/* Calls fn for every element index of extents ne in row-major order. */
typedef void (*elem_fn)(const int64_t idx[4], int64_t k, void *user);

static void each(const int64_t ne[4], elem_fn fn, void *user) {
    int64_t idx[4], k = 0;
    for (idx[3] = 0; idx[3] < ne[3]; idx[3]++) {
        for (idx[2] = 0; idx[2] < ne[2]; idx[2]++) {
            for (idx[1] = 0; idx[1] < ne[1]; idx[1]++) {
                for (idx[0] = 0; idx[0] < ne[0]; idx[0]++) {
                    fn(idx, k++, user);
                }
            }
        }
    }
}

typedef struct copy_ctx {
    const ts_tensor *t; /* strided side */
    char *dense;        /* dense side, element k at k * es */
    size_t es;
    int axis;
    int64_t shift; /* added to idx[axis] on the strided side */
    bool to_dense;
} copy_ctx;

static void copy_elem(const int64_t idx[4], int64_t k, void *user) {
    copy_ctx *c = user;
    int64_t i[4] = {idx[0], idx[1], idx[2], idx[3]};
    i[c->axis] += c->shift;
    char *p = ref_at(c->t, i[0], i[1], i[2], i[3]);
    if (c->to_dense) {
        memcpy(c->dense + (size_t)k * c->es, p, c->es);
    } else {
        memcpy(p, c->dense + (size_t)k * c->es, c->es);
    }
}

/* Copies the elements of t at extents ne (axis index shifted by shift) to/from dense. */
static void move(const ts_tensor *t, const int64_t ne[4], int axis, int64_t shift, char *dense,
                 bool to_dense) {
    copy_ctx c = {t, dense, ts_type_unit_bytes(t->type), axis, shift, to_dense};
    each(ne, copy_elem, &c);
}

ts_status ref_collective(ts_graph *g, ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0];
    int axis = n->ip[0];
    ts_comm *comm = ts_graph_comm(g, n->ip[1]);
    if (comm == NULL || comm->size != n->ip[2]) {
        return ts_error_set(
            err, TS_ERR_STATE, "ref: %s '%s': group %d has %s (the graph was built for %d ranks)",
            ts_op_name(n->op), n->name, n->ip[1],
            comm == NULL ? "no communicator" : "a communicator of another size", n->ip[2]);
    }
    int R = comm->size;
    size_t es = ts_type_unit_bytes(a->type);
    size_t na = (size_t)ts_tensor_nelements(a), nn = (size_t)ts_tensor_nelements(n);
    char *send = malloc(na * es + 1);
    char *recv = malloc((n->op == TS_OP_ALL_GATHER ? na * (size_t)R : nn) * es + 1);
    if (send == NULL || recv == NULL) {
        free(send);
        free(recv);
        ts_comm_fail(comm, "ref: out of memory for a collective");
        return ts_error_set(err, TS_ERR_NOMEM, "ref: %s '%s': out of memory", ts_op_name(n->op),
                            n->name);
    }
    ts_status st;
    switch (n->op) {
    case TS_OP_ALL_REDUCE_SUM:
        move(a, a->ne, 0, 0, send, true);
        st = ts_comm_all_reduce_sum(comm, send, recv, na, a->type, err);
        if (st == TS_OK) {
            move(n, n->ne, 0, 0, recv, false);
        }
        break;
    case TS_OP_ALL_GATHER:
        move(a, a->ne, 0, 0, send, true);
        st = ts_comm_all_gather(comm, send, recv, na * es, err);
        for (int k = 0; st == TS_OK && k < R; k++) {
            move(n, a->ne, axis, k * a->ne[axis], recv + (size_t)k * na * es, false);
        }
        break;
    default: /* REDUCE_SCATTER_SUM: rank k's chunk of a, in n's shape, at k * nn */
        for (int k = 0; k < R; k++) {
            move(a, n->ne, axis, k * n->ne[axis], send + (size_t)k * nn * es, true);
        }
        st = ts_comm_reduce_scatter_sum(comm, send, recv, nn, a->type, err);
        if (st == TS_OK) {
            move(n, n->ne, 0, 0, recv, false);
        }
        break;
    }
    free(send);
    free(recv);
    return st;
}
