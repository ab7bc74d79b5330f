/*
 * views.c — view builders: VIEW, RESHAPE, PERMUTE, TRANSPOSE. A view shares its source's
 * storage (view_src + view_offs) and only changes extents and strides; nothing runs.
 *
 * Dynamic tags follow the dimension they belong to. RESHAPE keeps a dynamic dimension only
 * when it survives intact (same extent and the same product of faster dimensions); merging
 * or splitting a dynamic dimension is an error, because the layout of the maximum would not
 * describe smaller runs.
 */
#include <string.h>

#include "ir/graph_impl.h"

static ts_tensor *view_node(ts_graph *g, ts_op op, ts_tensor *a, int n_dims, const int64_t *ne,
                            const size_t *nb, const int8_t *dyn, size_t offset) {
    ts_tensor *t = ts_graph_new_tensor(g, op, a->type, n_dims, ne);
    if (t == NULL) {
        return NULL;
    }
    if (nb != NULL) {
        memcpy(t->nb, nb, sizeof t->nb);
    }
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        t->dyn[d] = dyn[d];
        t->ne[d] = dyn[d] >= 0 ? ts_graph_dim_value(g, dyn[d]) : t->ne_max[d];
    }
    t->view_src = a;
    t->view_offs = offset;
    t->src[0] = a;
    return t;
}

ts_tensor *ts_op_view(ts_graph *g, ts_tensor *a, int n_dims, const int64_t *ne, const size_t *nb,
                      size_t offset) {
    if (a == NULL) {
        return NULL;
    }
    if (n_dims < 1 || n_dims > TS_MAX_DIMS) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG, "VIEW of '%s': %d dims", a->name, n_dims);
    }
    int64_t full_ne[4] = {1, 1, 1, 1};
    memcpy(full_ne, ne, (size_t)n_dims * sizeof *ne);
    /* strides: given ones for the first n_dims, dense continuation after */
    size_t full_nb[4];
    full_nb[0] = ts_type_unit_bytes(a->type);
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        if (nb != NULL && d < n_dims) {
            full_nb[d] = nb[d];
        } else if (d > 0) {
            size_t prev = d == 1 ? full_nb[0] * (size_t)(full_ne[0] /
                                                         (int64_t)ts_type_block_size(a->type))
                                 : full_nb[d - 1] * (size_t)full_ne[d - 1];
            full_nb[d] = prev;
        }
    }
    /* A view dimension keeps a dynamic tag when it matches a tagged source dimension with the
     * same extent and stride. */
    int8_t dyn[4] = {-1, -1, -1, -1};
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        for (int e = 0; e < TS_MAX_DIMS; e++) {
            if (a->dyn[e] >= 0 && a->ne_max[e] == full_ne[d] && a->nb[e] == full_nb[d] &&
                full_ne[d] > 1) {
                dyn[d] = a->dyn[e];
            }
        }
    }
    ts_tensor *t = view_node(g, TS_OP_VIEW, a, n_dims, full_ne, full_nb, dyn, offset);
    if (t == NULL) {
        return NULL;
    }
    size_t span = ts_tensor_span(t), src_span = ts_tensor_span(a);
    if (offset > src_span || span > src_span - offset) {
        return ts_graph_fail(g, TS_ERR_RANGE,
                             "VIEW of '%s': %zu bytes at offset %zu exceed its %zu bytes",
                             a->name, span, offset, src_span);
    }
    return t;
}

ts_tensor *ts_op_reshape(ts_graph *g, ts_tensor *a, int n_dims, const int64_t *ne) {
    if (a == NULL) {
        return NULL;
    }
    if (n_dims < 1 || n_dims > TS_MAX_DIMS) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG, "RESHAPE of '%s': %d dims", a->name, n_dims);
    }
    if (!ts_tensor_is_contiguous(a)) {
        return ts_graph_fail(g, TS_ERR_UNSUPPORTED,
                             "RESHAPE of '%s': source is not contiguous (use ts_op_cont)",
                             a->name);
    }
    int64_t full[4] = {1, 1, 1, 1};
    memcpy(full, ne, (size_t)n_dims * sizeof *ne);
    int64_t n_new = full[0] * full[1] * full[2] * full[3];
    int64_t n_old = a->ne_max[0] * a->ne_max[1] * a->ne_max[2] * a->ne_max[3];
    if (n_new != n_old) {
        return ts_graph_fail(g, TS_ERR_RANGE, "RESHAPE of '%s': %lld elements into %lld",
                             a->name, (long long)n_old, (long long)n_new);
    }
    int8_t dyn[4] = {-1, -1, -1, -1};
    for (int e = 0; e < TS_MAX_DIMS; e++) {
        if (a->dyn[e] < 0) {
            continue;
        }
        int64_t inner = 1;
        for (int i = 0; i < e; i++) {
            inner *= a->ne_max[i];
        }
        int found = -1;
        int64_t acc = 1;
        for (int d = 0; d < TS_MAX_DIMS; d++) {
            if (acc == inner && full[d] == a->ne_max[e]) {
                found = d;
                break;
            }
            acc *= full[d];
        }
        if (found < 0) {
            return ts_graph_fail(g, TS_ERR_UNSUPPORTED,
                                 "RESHAPE of '%s': would merge or split dynamic dim %d", a->name,
                                 e);
        }
        dyn[found] = a->dyn[e];
    }
    return view_node(g, TS_OP_RESHAPE, a, n_dims, full, NULL, dyn, 0);
}

ts_tensor *ts_op_permute(ts_graph *g, ts_tensor *a, int ax0, int ax1, int ax2, int ax3) {
    if (a == NULL) {
        return NULL;
    }
    int ax[4] = {ax0, ax1, ax2, ax3};
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (ax[i] < 0 || ax[i] > 3 || (seen & (1 << ax[i]))) {
            return ts_graph_fail(g, TS_ERR_INVALID_ARG,
                                 "PERMUTE of '%s': axes (%d, %d, %d, %d) are not a permutation",
                                 a->name, ax0, ax1, ax2, ax3);
        }
        seen |= 1 << ax[i];
    }
    int64_t ne[4];
    size_t nb[4];
    int8_t dyn[4];
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = a->ne_max[i];
        nb[ax[i]] = a->nb[i];
        dyn[ax[i]] = a->dyn[i];
    }
    int n_dims = a->n_dims;
    for (int i = 0; i < 4; i++) {
        if (ne[i] != 1 && i + 1 > n_dims) {
            n_dims = i + 1;
        }
    }
    ts_tensor *t = view_node(g, TS_OP_PERMUTE, a, n_dims, ne, nb, dyn, 0);
    if (t != NULL) {
        memcpy(t->ip, ax, sizeof ax);
    }
    return t;
}

ts_tensor *ts_op_transpose(ts_graph *g, ts_tensor *a) {
    ts_tensor *t = ts_op_permute(g, a, 1, 0, 2, 3);
    if (t != NULL) {
        t->op = TS_OP_TRANSPOSE;
    }
    return t;
}
