/*
 * cpu_collective.c — the collective ops on the CPU backend, and their descriptors.
 *
 * Thread 0 of the pool calls the graph's communicator (a collective is one call per rank,
 * not per thread); the other threads wait at the node's barrier. When the current elements
 * of input and output are dense prefixes of their buffers (the usual case: dynamic tokens
 * in the outermost dimension) and the chunks a rank contributes are contiguous, the
 * communicator works on the tensors' memory directly. Otherwise rows are staged through the
 * shared scratch (collective_scratch sizes it before the run), in the rank-chunk order the
 * communicator expects. Results are identical to the reference kernels (same communicator,
 * same summation); tests/parallel compares them. Failures go through cpu_fail.
 */
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "parallel/comm.h"

/* The current elements form the first nelements of the buffer. */
static bool dense_now(const ts_tensor *t) {
    if (!ts_tensor_is_contiguous(t)) {
        return false;
    }
    int top = 0;
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        top = t->ne[d] > 1 ? d : top;
    }
    for (int d = 0; d < top; d++) {
        if (t->ne[d] != t->ne_max[d]) {
            return false;
        }
    }
    return true;
}

/* Whether every dim above axis has extent 1 (then rank chunks along axis are contiguous). */
static bool outermost(const ts_tensor *t, int axis) {
    for (int d = axis + 1; d < TS_MAX_DIMS; d++) {
        if (t->ne[d] != 1) {
            return false;
        }
    }
    return true;
}

static int64_t nelem_max(const ts_tensor *t) {
    return t->ne_max[0] * t->ne_max[1] * t->ne_max[2] * t->ne_max[3];
}

/* Shared: the staging buffers for input and output at their maximum extents (the output of
 * ALL_GATHER holds every rank's input). */
static void collective_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    const ts_tensor *a = n->src[0];
    size_t es = ts_type_unit_bytes(a->type);
    size_t na = (size_t)nelem_max(a), nn = (size_t)nelem_max(n);
    size_t recv = n->op == TS_OP_ALL_GATHER ? na * (size_t)n->ip[2] : nn;
    *shared = (na + recv) * es + 128;
}

/* Copies rows (ne[0] elements) of extents ne between contiguous tensor t — with the axis
 * index shifted by shift — and the dense buffer. */
static void move_rows(const ts_tensor *t, const int64_t ne[4], int axis, int64_t shift, char *dense,
                      bool to_dense) {
    size_t row = (size_t)ne[0] * ts_type_unit_bytes(t->type);
    int64_t idx[4];
    for (idx[3] = 0; idx[3] < ne[3]; idx[3]++) {
        for (idx[2] = 0; idx[2] < ne[2]; idx[2]++) {
            for (idx[1] = 0; idx[1] < ne[1]; idx[1]++) {
                int64_t i[4] = {0, idx[1], idx[2], idx[3]};
                i[axis] += shift;
                char *p = (char *)t->data + i[0] * t->nb[0] + i[1] * t->nb[1] + i[2] * t->nb[2] +
                          i[3] * t->nb[3];
                if (to_dense) {
                    memcpy(dense, p, row);
                } else {
                    memcpy(p, dense, row);
                }
                dense += row;
            }
        }
    }
}

static ts_status all_reduce(ts_comm *comm, const ts_tensor *a, ts_tensor *n, char *stage,
                            ts_error *err) {
    size_t count = (size_t)ts_tensor_nelements(a);
    if (dense_now(a) && dense_now(n)) {
        return ts_comm_all_reduce_sum(comm, a->data, n->data, count, a->type, err);
    }
    move_rows(a, a->ne, 0, 0, stage, true);
    ts_status st = ts_comm_all_reduce_sum(comm, stage, stage, count, a->type, err);
    if (st == TS_OK) {
        move_rows(n, n->ne, 0, 0, stage, false);
    }
    return st;
}

static ts_status all_gather(ts_comm *comm, const ts_tensor *a, ts_tensor *n, int axis, char *send,
                            char *recv, ts_error *err) {
    size_t bytes = (size_t)ts_tensor_nelements(a) * ts_type_unit_bytes(a->type);
    bool dense = dense_now(a) && dense_now(n);
    if (dense && outermost(n, axis)) {
        return ts_comm_all_gather(comm, a->data, n->data, bytes, err);
    }
    const void *src = a->data;
    if (!dense_now(a)) {
        move_rows(a, a->ne, 0, 0, send, true);
        src = send;
    }
    ts_status st = ts_comm_all_gather(comm, src, recv, bytes, err);
    for (int k = 0; st == TS_OK && k < comm->size; k++) {
        move_rows(n, a->ne, axis, k * a->ne[axis], recv + (size_t)k * bytes, false);
    }
    return st;
}

static ts_status reduce_scatter(ts_comm *comm, const ts_tensor *a, ts_tensor *n, int axis,
                                char *send, char *recv, ts_error *err) {
    size_t count = (size_t)ts_tensor_nelements(n);
    size_t bytes = count * ts_type_unit_bytes(a->type);
    const void *src = a->data;
    if (!(dense_now(a) && outermost(a, axis))) {
        for (int k = 0; k < comm->size; k++) {
            move_rows(a, n->ne, axis, k * n->ne[axis], send + (size_t)k * bytes, true);
        }
        src = send;
    }
    void *dst = dense_now(n) ? n->data : recv;
    ts_status st = ts_comm_reduce_scatter_sum(comm, src, dst, count, a->type, err);
    if (st == TS_OK && dst == recv) {
        move_rows(n, n->ne, 0, 0, recv, false);
    }
    return st;
}

/* Thread 0 calls the communicator; the other threads return at once (the node's barrier
 * holds them). */
static void collective(const cpu_op_ctx *c, ts_tensor *n) {
    if (c->ith != 0) {
        return;
    }
    const ts_tensor *a = n->src[0];
    ts_comm *comm = ts_graph_comm(c->exec->graph, n->ip[1]);
    if (comm == NULL || comm->size != n->ip[2]) {
        cpu_fail(c, TS_ERR_STATE, "group %d has %s (the graph was built for %d ranks)", n->ip[1],
                 comm == NULL ? "no communicator" : "a communicator of another size", n->ip[2]);
        return;
    }
    size_t es = ts_type_unit_bytes(a->type);
    char *send = c->shared;
    char *recv = send + (((size_t)nelem_max(a) * es + 63) / 64) * 64;
    ts_error err = {0};
    ts_status st;
    switch (n->op) {
    case TS_OP_ALL_REDUCE_SUM:
        st = all_reduce(comm, a, n, send, &err);
        break;
    case TS_OP_ALL_GATHER:
        st = all_gather(comm, a, n, n->ip[0], send, recv, &err);
        break;
    default:
        st = reduce_scatter(comm, a, n, n->ip[0], send, recv, &err);
        break;
    }
    if (st != TS_OK) {
        cpu_fail(c, st, "%s", err.msg);
    }
}

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_ALL_REDUCE_SUM, .run = collective, .scratch = collective_scratch},
    {.op = TS_OP_ALL_GATHER, .run = collective, .scratch = collective_scratch},
    {.op = TS_OP_REDUCE_SCATTER_SUM, .run = collective, .scratch = collective_scratch},
};
const cpu_op_table cpu_collective_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
