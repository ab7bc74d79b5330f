/*
 * cpu_exec.c — failure recording for a CPU graph run (the bottom of the CPU backend).
 *
 * failed_node only ever decreases, and the executor compares it with the node its threads
 * have just finished after a barrier, so a thread that has run ahead and records a failure
 * of a later node cannot make the others stop early. The message is stored together with
 * the node under a spin lock: failures are rare and the lock is held for one snprintf.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "backends/cpu/cpu_exec.h"
#include "util/error.h"

void cpu_exec_init(cpu_exec *e, ts_threadpool *pool, const ts_graph *g) {
    e->pool = pool;
    e->graph = g;
    atomic_init(&e->failed_node, INT_MAX);
    atomic_flag_clear(&e->lock);
    e->status = TS_OK;
    e->msg[0] = '\0';
}

void cpu_fail(const cpu_op_ctx *c, ts_status st, const char *fmt, ...) {
    char msg[TS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cpu_exec *e = c->exec;
    while (atomic_flag_test_and_set_explicit(&e->lock, memory_order_acquire)) {
    }
    if (c->node < atomic_load_explicit(&e->failed_node, memory_order_relaxed)) {
        e->status = st;
        snprintf(e->msg, sizeof e->msg, "%s", msg);
        atomic_store(&e->failed_node, c->node);
    }
    atomic_flag_clear_explicit(&e->lock, memory_order_release);
}

ts_status cpu_exec_status(cpu_exec *e, ts_error *err) {
    int failed = atomic_load(&e->failed_node);
    if (failed == INT_MAX) {
        return TS_OK;
    }
    const ts_tensor *node = ts_graph_node(e->graph, failed);
    return ts_error_set(err, e->status, "cpu: node %d '%s' (%s): %s", failed, node->name,
                        ts_op_name(node->op), e->msg);
}
