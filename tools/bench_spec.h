/*
 * bench_spec.h — `tessera bench --draft N`: the same greedy generation without and with n-gram
 * speculative decoding (docs/speculative.md), timed, compared token by token.
 */
#ifndef TS_TOOLS_BENCH_SPEC_H
#define TS_TOOLS_BENCH_SPEC_H

#include <stdint.h>

#include "common.h"

typedef struct ts_bench_spec_opts {
    const ts_cli_opts *co; /* the model options; co->ctx.draft_max > 0 is the draft length */
    const char *name;      /* the model's name in the table */
    const int *threads;    /* [n_threads] thread counts, one row each */
    int n_threads;
    int reps;           /* timed repetitions of each mode (one warm-up before them) */
    int64_t n_gen;      /* tokens generated at most (the model may end sooner) */
    const char *prompt; /* the user's turn (through the chat template when the model has one);
                           NULL: the built-in one, a code text to repeat with one change */
    const char *format; /* "md", "csv" or "json" */
} ts_bench_spec_opts;

/* Runs the comparison and prints one row per thread count. Returns the process's exit code:
 * 0, or 1 after an error line on stderr (a failed run, or outputs that differ: speculation
 * must change only the speed). */
int ts_bench_spec(ts_llm *llm, const ts_bench_spec_opts *o);

#endif /* TS_TOOLS_BENCH_SPEC_H */
