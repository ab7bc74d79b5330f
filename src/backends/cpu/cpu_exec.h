/*
 * cpu_exec.h — the bottom of the CPU backend: what a kernel sees of a graph run.
 *
 * A kernel is called on every thread with the same node; it does its share of the work (a
 * fixed share with cpu_split, or chunks taken as threads get free with cpu_take) and may
 * synchronise internally with cpu_barrier(). Scratch memory is sized before the run from the
 * op's descriptor and never allocated inside a kernel. A kernel that finds bad input calls
 * cpu_fail and returns; the executor stops every thread at the next barrier.
 *
 * Op files describe their ops with cpu_op_desc tables; the backend (cpu_backend.c) indexes
 * them by op and calls nothing else of an op file. This header and cpu_exec.c depend on no
 * other CPU file except the thread pool and the kernel choice table (cpu_tune.h, which itself
 * depends on no CPU file), so the files above them form no cycle.
 *
 * Thread safety: one cpu_exec per graph run, shared by all threads of the run; cpu_fail may
 * be called from any of them at once.
 */
#ifndef TS_BACKENDS_CPU_CPU_EXEC_H
#define TS_BACKENDS_CPU_CPU_EXEC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_tune.h"
#include "backends/cpu/threadpool.h"
#include "ir/ir.h"
#include "quant/quant.h"

/* One graph run, shared by all threads. Initialise with cpu_exec_init before the run; read
 * the outcome with cpu_exec_status after it. */
typedef struct cpu_exec {
    ts_threadpool *pool;    /* the backend's pool (borrowed): barriers */
    const ts_graph *graph;  /* the graph being run (borrowed) */
    atomic_int failed_node; /* lowest failing node index, INT_MAX while no failure */
    atomic_flag lock;       /* guards status and msg while a failure is recorded */
    ts_status status;       /* of the failure at failed_node */
    char msg[TS_ERROR_MSG_MAX];
} cpu_exec;

/* What one thread sees while it runs one node. The executor sets node, reuse_conversion,
 * packed and work before each node; the rest is fixed for the run. */
typedef struct cpu_op_ctx {
    int ith, nth;
    ts_isa isa;                 /* the backend's level: conversions, attention, row-wise ops */
    const cpu_kernels *kernels; /* MUL_MAT's gemm level per weight type and shape class */
    void *shared;               /* scratch shared by all threads of a node */
    size_t shared_size;
    void *local; /* this thread's scratch */
    size_t local_size;
    cpu_exec *exec;        /* the run (barrier, failure record, graph) */
    int node;              /* index of the node being run in exec->graph (cpu_fail names it) */
    bool reuse_conversion; /* MUL_MAT: the shared scratch already holds src[1] converted */
    const void *packed;    /* MUL_MAT: src[0] repacked (cpu_pack.h), or NULL: read src[0] */
    atomic_int *work;      /* this node's work counter, 0 when the node starts (cpu_take) */
} cpu_op_ctx;

/* How the CPU backend runs one op. run is called on every thread for each node of the op.
 * scratch, when not NULL, reports the bytes a node needs (shared by all threads, and per
 * thread; both start at 0) at the node's maximum extents; NULL: none. supports, when not
 * NULL, says whether this ISA level can run the node (types, shapes); NULL: every node. */
typedef struct cpu_op_desc {
    ts_op op;
    void (*run)(const cpu_op_ctx *c, ts_tensor *n);
    void (*scratch)(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread);
    bool (*supports)(const ts_tensor *n, ts_isa isa);
} cpu_op_desc;

/* The descriptors of one op file (constant, static storage). */
typedef struct cpu_op_table {
    const cpu_op_desc *ops;
    int n_ops;
} cpu_op_table;

void cpu_exec_init(cpu_exec *e, ts_threadpool *pool, const ts_graph *g);
/* Whether a node at or before index node has failed. Threads that have all passed the same
 * barrier after node agree on the answer, so they stop together. */
static inline bool cpu_exec_failed_by(cpu_exec *e, int node) {
    return atomic_load(&e->failed_node) <= node;
}
/* After the run: TS_OK, or the failure of the lowest failing node with err naming the node
 * ("cpu: node 12 'attn_out' (ATTENTION): ..."). */
ts_status cpu_exec_status(cpu_exec *e, ts_error *err);

/* Blocks until every thread of the run has arrived. */
static inline void cpu_barrier(const cpu_op_ctx *c) {
    ts_threadpool_barrier(c->exec->pool);
}

/* Records a failure of the node c is running. Of several failures of a run, the one of the
 * lowest node is kept (the first recorded among those of that node), so its message always
 * belongs to the node the error names. */
void cpu_fail(const cpu_op_ctx *c, ts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* [lo, hi) of n items for thread ith of nth. */
static inline void cpu_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* Dynamic sharing of n items among the node's threads: claims the next chunk of up to `chunk`
 * items as [*lo, *hi); false when none are left. Threads that run ahead (another program on
 * the core slows its neighbour) take more, so a node ends when its work does. */
static inline bool cpu_take(const cpu_op_ctx *c, int64_t n, int64_t chunk, int64_t *lo,
                            int64_t *hi) {
    int64_t at = atomic_fetch_add_explicit(c->work, (int)chunk, memory_order_relaxed);
    if (at >= n) {
        return false;
    }
    *lo = at;
    *hi = at + chunk < n ? at + chunk : n;
    return true;
}

#endif /* TS_BACKENDS_CPU_CPU_EXEC_H */
