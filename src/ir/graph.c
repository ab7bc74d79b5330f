/*
 * graph.c — graph objects: tensor allocation, leaves, dynamic symbols, topological order,
 * arena allocation and the compute entry point.
 *
 * Invariants: tensors are never freed before the graph; ids index g->tensors; after
 * ts_graph_build, g->nodes lists every compute node reachable from the outputs with each
 * node after all of its sources (views are resolved, not executed).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "util/error.h"

ts_status ts_graph_create(ts_graph **out, ts_registry *reg, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: create: out is NULL");
    }
    *out = NULL;
    ts_graph *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "graph: create: out of memory");
    }
    g->reg = reg;
    *out = g;
    return TS_OK;
}

void ts_graph_destroy(ts_graph *g) {
    if (g == NULL) {
        return;
    }
    if (g->arena != NULL && g->arena_backend != NULL) {
        ts_backend_buffer_free(g->arena_backend, g->arena);
    }
    ts_tensor_chunk *c = g->chunks;
    while (c != NULL) {
        ts_tensor_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(g->tensors);
    free(g->nodes);
    free(g->plan.entries);
    free(g);
}

ts_registry *ts_graph_registry(const ts_graph *g) {
    return g->reg;
}

ts_tensor *ts_graph_fail(ts_graph *g, ts_status st, const char *fmt, ...) {
    if (g->err.status != TS_OK) {
        return NULL;
    }
    g->err.status = st;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->err.msg, sizeof g->err.msg, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof g->err.msg) {
        memcpy(g->err.msg + sizeof g->err.msg - 4, "...", 4);
    }
    return NULL;
}

ts_status ts_graph_status(const ts_graph *g, ts_error *err) {
    if (g->err.status != TS_OK) {
        *err = g->err;
    }
    return g->err.status;
}

ts_tensor *ts_graph_new_tensor(ts_graph *g, ts_op op, ts_type type, int n_dims,
                               const int64_t *ne) {
    if (g->built) {
        return ts_graph_fail(g, TS_ERR_STATE, "graph: cannot add a %s node after build",
                             ts_op_name(op));
    }
    if (n_dims < 1 || n_dims > TS_MAX_DIMS) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG, "graph: %s: %d dims (want 1..%d)",
                             ts_op_name(op), n_dims, TS_MAX_DIMS);
    }
    if (!ts_type_valid((uint32_t)type)) {
        return ts_graph_fail(g, TS_ERR_TYPE, "graph: %s: invalid type id %d", ts_op_name(op),
                             (int)type);
    }
    int64_t bs = (int64_t)ts_type_block_size((uint32_t)type);
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1 || ne[d] > ((int64_t)1 << 40)) {
            return ts_graph_fail(g, TS_ERR_RANGE, "graph: %s: extent ne[%d] = %lld out of range",
                                 ts_op_name(op), d, (long long)ne[d]);
        }
    }
    if (ne[0] % bs != 0) {
        return ts_graph_fail(g, TS_ERR_RANGE,
                             "graph: %s: ne[0] = %lld is not a multiple of the %s block size %lld",
                             ts_op_name(op), (long long)ne[0], ts_type_name((uint32_t)type),
                             (long long)bs);
    }
    if (g->chunks == NULL || g->chunks->used == TS_GRAPH_CHUNK) {
        ts_tensor_chunk *c = calloc(1, sizeof *c);
        if (c == NULL) {
            return ts_graph_fail(g, TS_ERR_NOMEM, "graph: out of memory for tensors");
        }
        c->next = g->chunks;
        g->chunks = c;
    }
    if (g->n_tensors == g->cap_tensors) {
        int32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 256;
        ts_tensor **p = realloc(g->tensors, (size_t)cap * sizeof *p);
        if (p == NULL) {
            return ts_graph_fail(g, TS_ERR_NOMEM, "graph: out of memory for tensors");
        }
        g->tensors = p;
        g->cap_tensors = cap;
    }
    ts_tensor *t = &g->chunks->t[g->chunks->used++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->op = op;
    t->n_dims = n_dims;
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        t->ne[d] = t->ne_max[d] = d < n_dims ? ne[d] : 1;
        t->dyn[d] = -1;
    }
    t->nb[0] = ts_type_block_bytes((uint32_t)type);
    t->nb[1] = t->nb[0] * (size_t)(t->ne[0] / bs);
    for (int d = 2; d < TS_MAX_DIMS; d++) {
        t->nb[d] = t->nb[d - 1] * (size_t)t->ne[d - 1];
    }
    t->id = g->n_tensors;
    g->tensors[g->n_tensors++] = t;
    snprintf(t->name, sizeof t->name, "%s_%d", ts_op_name(op), (int)t->id);
    return t;
}

int ts_graph_dim(ts_graph *g, const char *name, int64_t max) {
    if (g->n_dims == TS_MAX_DYN_DIMS) {
        ts_graph_fail(g, TS_ERR_LIMIT, "graph: dynamic dim '%s': at most %d symbols", name,
                      TS_MAX_DYN_DIMS);
        return -1;
    }
    if (max < 1) {
        ts_graph_fail(g, TS_ERR_RANGE, "graph: dynamic dim '%s': max %lld < 1", name,
                      (long long)max);
        return -1;
    }
    int sym = g->n_dims++;
    snprintf(g->dim_name[sym], TS_NAME_MAX, "%s", name);
    g->dim_max[sym] = g->dim_value[sym] = max;
    return sym;
}

int64_t ts_graph_dim_value(const ts_graph *g, int sym) {
    return sym >= 0 && sym < g->n_dims ? g->dim_value[sym] : -1;
}

static void apply_dims(ts_graph *g) {
    for (int32_t i = 0; i < g->n_tensors; i++) {
        ts_tensor *t = g->tensors[i];
        for (int d = 0; d < TS_MAX_DIMS; d++) {
            t->ne[d] = t->dyn[d] >= 0 ? g->dim_value[t->dyn[d]] : t->ne_max[d];
        }
    }
}

ts_status ts_graph_set_dim(ts_graph *g, int sym, int64_t value, ts_error *err) {
    if (sym < 0 || sym >= g->n_dims) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: set_dim: no dynamic symbol %d", sym);
    }
    if (value < 1 || value > g->dim_max[sym]) {
        return ts_error_set(err, TS_ERR_RANGE, "graph: set_dim '%s' = %lld: must be in 1..%lld",
                            g->dim_name[sym], (long long)value, (long long)g->dim_max[sym]);
    }
    int64_t old = g->dim_value[sym];
    g->dim_value[sym] = value;
    apply_dims(g);
    for (int32_t i = 0; i < g->n_tensors; i++) {
        ts_tensor *t = g->tensors[i];
        if (t->op == TS_OP_NONE) {
            continue;
        }
        ts_status st = ts_op_check(t, err);
        if (st != TS_OK) {
            g->dim_value[sym] = old;
            apply_dims(g);
            return ts_error_prefix(err, "graph: set_dim '%s' = %lld: ", g->dim_name[sym],
                                   (long long)value);
        }
    }
    return TS_OK;
}

static ts_tensor *new_leaf(ts_graph *g, const char *name, ts_type type, int n_dims,
                           const int64_t *ne, uint32_t flags) {
    ts_tensor *t = ts_graph_new_tensor(g, TS_OP_NONE, type, n_dims, ne);
    if (t == NULL) {
        return NULL;
    }
    t->flags = flags;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "leaf");
    return t;
}

ts_tensor *ts_graph_input(ts_graph *g, const char *name, ts_type type, int n_dims,
                          const int64_t *ne) {
    return new_leaf(g, name, type, n_dims, ne, TS_TENSOR_INPUT);
}

ts_tensor *ts_graph_param(ts_graph *g, const char *name, ts_type type, int n_dims,
                          const int64_t *ne) {
    return new_leaf(g, name, type, n_dims, ne, TS_TENSOR_PARAM);
}

ts_tensor *ts_tensor_dynamic(ts_graph *g, ts_tensor *t, int dim, int sym) {
    if (t == NULL) {
        return NULL;
    }
    if (t->op != TS_OP_NONE) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG,
                             "graph: dynamic dim: '%s' is not a leaf (builders propagate tags)",
                             t->name);
    }
    if (dim < 0 || dim >= TS_MAX_DIMS || sym < 0 || sym >= g->n_dims) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG, "graph: dynamic dim: '%s' dim %d symbol %d "
                             "out of range (%d symbols declared)", t->name, dim, sym,
                             (int)g->n_dims);
    }
    if (t->ne_max[dim] != g->dim_max[sym]) {
        return ts_graph_fail(g, TS_ERR_RANGE,
                             "graph: dynamic dim: '%s' ne[%d] = %lld but '%s' has max %lld",
                             t->name, dim, (long long)t->ne_max[dim], g->dim_name[sym],
                             (long long)g->dim_max[sym]);
    }
    t->dyn[dim] = (int8_t)sym;
    t->ne[dim] = g->dim_value[sym];
    return t;
}

ts_tensor *ts_graph_output(ts_graph *g, ts_tensor *t) {
    if (t == NULL) {
        return NULL;
    }
    t->flags |= TS_TENSOR_OUTPUT;
    return t;
}

ts_status ts_tensor_bind(ts_tensor *t, ts_buffer *buf, size_t offset, ts_error *err) {
    if (t == NULL || buf == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: bind: NULL tensor or buffer");
    }
    if (!(t->flags & TS_TENSOR_PARAM)) {
        return ts_error_set(err, TS_ERR_STATE, "graph: bind '%s': only parameters are bound",
                            t->name);
    }
    size_t span = ts_tensor_span(t);
    if (offset > buf->size || span > buf->size - offset) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "graph: bind '%s': %zu bytes at offset %zu exceed the %zu-byte buffer",
                            t->name, span, offset, buf->size);
    }
    t->buffer = buf;
    t->offset = offset;
    return TS_OK;
}

int ts_graph_n_nodes(const ts_graph *g) {
    return g->n_nodes;
}

ts_tensor *ts_graph_node(const ts_graph *g, int i) {
    return i >= 0 && i < g->n_nodes ? g->nodes[i] : NULL;
}

int ts_graph_n_tensors(const ts_graph *g) {
    return g->n_tensors;
}

ts_tensor *ts_graph_tensor(const ts_graph *g, int i) {
    return i >= 0 && i < g->n_tensors ? g->tensors[i] : NULL;
}

ts_tensor *ts_graph_find(const ts_graph *g, const char *name) {
    for (int32_t i = 0; i < g->n_tensors; i++) {
        if (strcmp(g->tensors[i]->name, name) == 0) {
            return g->tensors[i];
        }
    }
    return NULL;
}

/* Iterative post-order DFS from the outputs: a compute node is appended after everything
 * it reads (sources and view owners). */
static ts_status topo_sort(ts_graph *g, ts_error *err) {
    int32_t n = g->n_tensors;
    uint8_t *state = calloc((size_t)n, 1); /* 0 new, 1 on stack, 2 done */
    ts_tensor **stack = malloc((size_t)n * sizeof *stack);
    int32_t *next = calloc((size_t)n, sizeof *next);
    g->nodes = malloc((size_t)n * sizeof *g->nodes);
    if (state == NULL || stack == NULL || next == NULL || g->nodes == NULL) {
        free(state);
        free(stack);
        free(next);
        return ts_error_set(err, TS_ERR_NOMEM, "graph: build: out of memory");
    }
    g->n_nodes = 0;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        ts_tensor *root = g->tensors[i];
        if (!(root->flags & TS_TENSOR_OUTPUT) || state[root->id] == 2) {
            continue;
        }
        n_out++;
        int32_t sp = 0;
        stack[sp++] = root;
        state[root->id] = 1;
        while (sp > 0) {
            ts_tensor *t = stack[sp - 1];
            /* children: src[0..TS_MAX_SRC-1], then view_src */
            ts_tensor *child = NULL;
            while (next[t->id] <= TS_MAX_SRC && child == NULL) {
                int32_t k = next[t->id]++;
                ts_tensor *c = k < TS_MAX_SRC ? t->src[k] : t->view_src;
                if (c != NULL && state[c->id] == 0) {
                    child = c;
                }
            }
            if (child != NULL) {
                state[child->id] = 1;
                stack[sp++] = child;
                continue;
            }
            sp--;
            state[t->id] = 2;
            if (t->op != TS_OP_NONE && !ts_op_is_view(t->op)) {
                g->nodes[g->n_nodes++] = t;
            }
        }
    }
    free(state);
    free(stack);
    free(next);
    if (n_out == 0) {
        return ts_error_set(err, TS_ERR_STATE, "graph: build: no outputs marked");
    }
    return TS_OK;
}

ts_status ts_graph_build(ts_graph *g, ts_error *err) {
    if (g == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: build: NULL graph");
    }
    if (g->err.status != TS_OK) {
        *err = g->err;
        return g->err.status;
    }
    if (g->built) {
        return ts_error_set(err, TS_ERR_STATE, "graph: build: already built");
    }
    ts_status st = topo_sort(g, err);
    if (st != TS_OK) {
        return st;
    }
    st = ts_plan_graph(g, err);
    if (st != TS_OK) {
        return st;
    }
    g->built = true;
    return TS_OK;
}

ts_status ts_graph_alloc(ts_graph *g, ts_backend *b, ts_error *err) {
    if (g == NULL || b == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: alloc: NULL argument");
    }
    if (!g->built) {
        return ts_error_set(err, TS_ERR_STATE, "graph: alloc: build the graph first");
    }
    ts_graph_free_arena(g);
    size_t size = g->plan.peak_bytes ? g->plan.peak_bytes : TS_PLAN_ALIGN;
    ts_status st = ts_backend_buffer_alloc(b, size, &g->arena, err);
    if (st != TS_OK) {
        return ts_error_prefix(err, "graph: arena of %zu bytes: ", size);
    }
    g->arena_backend = b;
    for (int32_t i = 0; i < g->plan.n_entries; i++) {
        ts_tensor *t = g->tensors[g->plan.entries[i].tensor];
        t->buffer = g->arena;
        t->offset = g->plan.entries[i].offset;
    }
    return TS_OK;
}

void ts_graph_free_arena(ts_graph *g) {
    if (g == NULL || g->arena == NULL) {
        return;
    }
    ts_backend_buffer_free(g->arena_backend, g->arena);
    g->arena = NULL;
    g->arena_backend = NULL;
    for (int32_t i = 0; i < g->plan.n_entries; i++) {
        g->tensors[g->plan.entries[i].tensor]->buffer = NULL;
    }
}

ts_status ts_graph_resolve(ts_graph *g, ts_error *err) {
    for (int32_t i = 0; i < g->n_tensors; i++) {
        ts_tensor *t = g->tensors[i];
        size_t off = 0;
        ts_tensor *o = t;
        while (o->view_src != NULL) {
            off += o->view_offs;
            o = o->view_src;
        }
        t->res_buffer = o->buffer;
        t->res_offset = o->offset + off;
        t->data = o->buffer != NULL && o->buffer->host != NULL
                      ? (char *)o->buffer->host + t->res_offset
                      : NULL;
    }
    return TS_OK;
}

ts_status ts_graph_compute(ts_graph *g, ts_backend *b, const ts_eval_cb *cb, ts_error *err) {
    if (g == NULL || b == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "graph: compute: NULL argument");
    }
    if (!g->built) {
        return ts_error_set(err, TS_ERR_STATE, "graph: compute: build the graph first");
    }
    if (g->arena == NULL && g->plan.n_entries > 0) {
        return ts_error_set(err, TS_ERR_STATE, "graph: compute: call ts_graph_alloc first");
    }
    ts_graph_resolve(g, err);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ts_tensor *node = g->nodes[i];
        for (int k = 0; k < TS_MAX_SRC; k++) {
            ts_tensor *s = node->src[k];
            if (s != NULL && s->res_buffer == NULL) {
                return ts_error_set(err, TS_ERR_STATE,
                                    "graph: node %d '%s' (%s) reads '%s' whose storage owner "
                                    "'%s' has none (unbound parameter?)",
                                    (int)i, node->name, ts_op_name(node->op), s->name,
                                    ts_tensor_owner(s)->name);
            }
        }
        if (!ts_backend_supports_op(b, node)) {
            char shape[96];
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "graph: backend '%s' does not support node %d '%s' (%s, %s %s)",
                                ts_backend_name(b), (int)i, node->name, ts_op_name(node->op),
                                ts_type_name(node->src[0] ? (uint32_t)node->src[0]->type
                                                          : (uint32_t)node->type),
                                ts_tensor_shape_str(node, shape, sizeof shape));
        }
    }
    return b->iface->graph_compute(b->ctx, g, cb, err);
}
