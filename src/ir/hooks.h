/*
 * hooks.h — backend wrappers for debugging and measurement (DESIGN.md decision 8).
 *
 * Each hook is itself a ts_backend that forwards buffers and ops to the backend it wraps
 * and watches graph execution through the per-node callbacks (ts_eval_cb):
 *
 *  dump     prints every node: index, name, op, type, shape, checksum (sum and sum of
 *           absolute values of its f32 reading) and optionally its first values;
 *  profile  measures wall time per node and aggregates per op type; ts_hook_profile_report
 *           prints both tables sorted by time;
 *  compare  runs the graph on a second backend first, keeping every node's output, then on
 *           the wrapped one, and reports the first node whose outputs differ beyond the
 *           tolerance (|a - b| > tol * (1 + |b|) for some element) with max abs/rel errors.
 *
 * Wrapped backends are borrowed: they must outlive the hook, and destroying the hook does not
 * destroy them. The compare hook needs both backends to address the graph's memory (host
 * backends: ref, cpu). Hooks are not thread-safe, like the backends they wrap.
 */
#ifndef TS_IR_HOOKS_H
#define TS_IR_HOOKS_H

#include <stdio.h>

#include "ir/backend.h"

/* Dump hook: writes to out (borrowed); max_values > 0 also prints that many values. */
ts_status ts_hook_dump_create(ts_backend *inner, FILE *out, int64_t max_values,
                              ts_backend **hook, ts_error *err);

/* Profile hook. */
ts_status ts_hook_profile_create(ts_backend *inner, ts_backend **hook, ts_error *err);
/* Prints per-op-type and per-node tables (sorted by total time, descending). */
void ts_hook_profile_report(ts_backend *hook, FILE *out);
/* Total nanoseconds and node executions recorded for op (since the last reset). */
void ts_hook_profile_op(ts_backend *hook, ts_op op, uint64_t *ns, uint64_t *count);
void ts_hook_profile_reset(ts_backend *hook);

typedef struct ts_compare_result {
    bool diverged;      /* a node differed beyond tolerance */
    int32_t node;       /* its index in execution order */
    char name[TS_NAME_MAX];
    ts_op op;
    int64_t index;      /* flat element index of the largest difference */
    double max_abs;     /* largest |a - b| in that node */
    double max_rel;     /* largest |a - b| / max(|b|, 1e-30) in that node */
    int32_t compared;   /* nodes compared in the last run */
} ts_compare_result;

/* Compare hook: `primary` produces the results the caller sees; `other` is the oracle. */
ts_status ts_hook_compare_create(ts_backend *primary, ts_backend *other, double tol,
                                 ts_backend **hook, ts_error *err);
/* Result of the last run (valid until the next run or destroy). */
const ts_compare_result *ts_hook_compare_result(ts_backend *hook);

#endif /* TS_IR_HOOKS_H */
