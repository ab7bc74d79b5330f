/*
 * graph_impl.h — the graph object's layout, shared by the IR's own files only.
 */
#ifndef TS_IR_GRAPH_IMPL_H
#define TS_IR_GRAPH_IMPL_H

#include "ir/backend.h"
#include "ir/ir.h"
#include "ir/plan.h"

#define TS_GRAPH_CHUNK 256 /* tensors per allocation chunk (pointers stay stable) */

typedef struct ts_tensor_chunk {
    struct ts_tensor_chunk *next;
    int32_t used;
    ts_tensor t[TS_GRAPH_CHUNK];
} ts_tensor_chunk;

struct ts_graph {
    ts_registry *reg; /* borrowed */
    ts_tensor_chunk *chunks;
    ts_tensor **tensors; /* [n_tensors], creation order */
    int32_t n_tensors, cap_tensors;
    ts_tensor **nodes; /* [n_nodes], execution order, compute nodes only */
    int32_t n_nodes;
    bool built;
    /* dynamic symbols */
    int32_t n_dims;
    char dim_name[TS_MAX_DYN_DIMS][TS_NAME_MAX];
    int64_t dim_max[TS_MAX_DYN_DIMS];
    int64_t dim_value[TS_MAX_DYN_DIMS];
    /* first build error */
    ts_error err;
    /* planner result and arena */
    ts_plan plan;
    ts_backend *arena_backend; /* borrowed */
    ts_buffer *arena;
    ts_comm *comm[TS_MAX_GROUPS]; /* borrowed: communicators of the collective ops' groups */
};

/* Records err as the graph's first error (later ones are dropped); returns NULL so builders
 * can `return graph_fail(...)`. */
ts_tensor *ts_graph_fail(ts_graph *g, ts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A new tensor of the graph with dense strides for (type, ne); NULL on allocation failure. */
ts_tensor *ts_graph_new_tensor(ts_graph *g, ts_op op, ts_type type, int n_dims,
                               const int64_t *ne);
/* Checks an op node's shapes against its sources for the current extents. */
ts_status ts_op_check(const ts_tensor *node, ts_error *err);
/* The same for the collective ops (collective.c). */
ts_status ts_op_check_collective(const ts_tensor *node, ts_error *err);
/* Runs the planner over g->nodes (fills g->plan). */
ts_status ts_plan_graph(ts_graph *g, ts_error *err);
/* Storage owner of t (follows view_src). */
ts_tensor *ts_tensor_owner(ts_tensor *t);

#endif /* TS_IR_GRAPH_IMPL_H */
