/*
 * cpu_tune.h — which instruction-set level's gemm the CPU backend runs, per weight type and
 * shape class, chosen by measurement and remembered per CPU model in a cache file.
 *
 * A newer level is not always faster: a type whose AVX-512 kernel predates the AVX2 one's
 * rows-in-lanes layout runs slower at the higher level. So each type's entries hold the level
 * whose gemm measured fastest on this machine over both shape classes (cpu_tune.c times every
 * level the CPU runs on a small matrix that fits in L2, for one activation row and for
 * several, and gives the type one level for both, so that a token's result never depends on
 * its batch), or the forced level when TS_ISA or an explicit ts_cpu_params.isa asks for one.
 * Entries are filled lazily, for the types a model uses, and written to <cache dir>/kernels-<cpu
 * id>.txt (docs/quant.md gives the format); a file that is truncated, from another CPU, or names a
 * level this CPU lacks is ignored with a one-line notice, so no entry ever exceeds what the CPU
 * runs.
 *
 * Every level's table of a type has the same vec_dot_type, and activation conversion always
 * runs at the backend's level (bit-identical at every level, docs/quant.md), so the converted
 * activations of a MUL_MAT never depend on the entry; only its gemm does.
 *
 * Thread safety: one cpu_kernels per backend, changed only between graph runs (by the thread
 * that calls graph_compute or ts_cpu_backend_tune); kernels read it during a run.
 */
#ifndef TS_BACKENDS_CPU_CPU_TUNE_H
#define TS_BACKENDS_CPU_CPU_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/quant.h"
#include "util/error.h"

/* Shape classes: one activation row (decoding) or several (prefill, batched decoding). */
enum { CPU_SHAPE_ROW = 0, CPU_SHAPE_ROWS = 1, CPU_SHAPE_COUNT = 2 };

#define CPU_TUNE_FORMAT 3 /* cache file layout version */

/* The most weight rows MUL_MAT hands one gemm call (cpu_matmul.c), with one activation row and
 * with several; the measurement calls the kernels the same way. */
#define CPU_MM_ROWS_ONE     32
#define CPU_MM_ROWS_SEVERAL 128

typedef struct cpu_kernels {
    ts_isa top;                                 /* no entry is above this level */
    bool forced;                                /* every entry is `top`, nothing is measured */
    int8_t isa[TS_TYPE_COUNT][CPU_SHAPE_COUNT]; /* chosen ts_isa; -1: not chosen yet */
    bool packed[TS_TYPE_COUNT]; /* the chosen level's gemm on repacked weights (cpu_pack.h) */
    bool repack;                /* false: never repack (--no-repack); `packed` is still kept
                                   (and cached) as measured, and runs use the level's gemm on
                                   the original rows, which gives the same bits */
    bool stale[TS_TYPE_COUNT];                  /* retune: measure again though chosen */
    double tune_ms;                             /* wall time spent measuring so far */
    char path[1024];                            /* cache file; "" when there is none */
    char notice[512];                           /* what went wrong with the cache; "" none */
} cpu_kernels;

/* Sets every entry to top when forced; otherwise reads the cache file (a bad file leaves a
 * notice) and, with retune, marks every type stale, so that the types tuned during this
 * backend's life are measured again while the file keeps the entries of the others. Never
 * fails: without a usable cache, entries are measured. */
void cpu_kernels_init(cpu_kernels *k, ts_isa top, bool forced, bool retune, bool repack);

/* Measures the unchosen entries of the types with want[type] set (all of a forced table are
 * chosen) and rewrites the cache file when any were measured. Fails only on memory. */
ts_status cpu_kernels_tune(cpu_kernels *k, const bool want[TS_TYPE_COUNT], ts_error *err);

/* Whether type t is to be measured (not chosen yet, or stale). */
static inline bool cpu_kernels_needs(const cpu_kernels *k, ts_type t) {
    return !k->forced && (unsigned)t < TS_TYPE_COUNT &&
           (k->isa[t][0] < 0 || k->isa[t][1] < 0 || k->stale[t]);
}

/* Whether MUL_MATs of weight type t read repacked weights: the measured choice, or with a
 * forced level, whether that level has a gemm for them. */
static inline bool cpu_kernels_packed(const cpu_kernels *k, ts_type t) {
    return k->repack && (unsigned)t < TS_TYPE_COUNT && k->packed[t];
}

/* The level to run a MUL_MAT of weight type t with `rows` activation rows at; the backend's
 * level for an entry not chosen yet. */
static inline ts_isa cpu_kernels_isa(const cpu_kernels *k, ts_type t, int64_t rows) {
    int8_t v = (unsigned)t < TS_TYPE_COUNT ? k->isa[t][rows > 1] : -1;
    return v < 0 ? k->top : (ts_isa)v;
}

/* "Q4_1 avx512/avx512 packed, Q8_0 avx2/avx2": level per shape class (one row / several) of
 * the chosen types with want[type] set (NULL: all chosen), in type order, "packed" where the
 * gemm reads repacked weights; "" when none. */
void cpu_kernels_describe(const cpu_kernels *k, const bool *want, char *buf, size_t size);

/* cpu_tune_cache.c: reads k->path into the entries (a missing file is no error; a bad one
 * leaves every entry unchosen and a notice), and writes the chosen entries back (tmp file +
 * rename, so a reader never sees half a file; a failure leaves a notice). */
void cpu_tune_load(cpu_kernels *k);
void cpu_tune_save(cpu_kernels *k);

/* The cache directory: $TS_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else $HOME/.cache/tessera.
 * False (buf "") when none of them is set or the path does not fit. */
bool cpu_cache_dir(char *buf, size_t size);
/* Names this CPU: vendor, family, model, stepping and the ISA level it runs
 * ("GenuineIntel-6-143-8-avx512"). */
void cpu_id(char *buf, size_t size);
/* Names this build of the kernels: a hash of the kernel sources and the compiler, made by the
 * build (cmake/kernels_id.cmake). Every program built from the same sources (the tools, the
 * tests, an embedder) shares it, so they share the cache file; a change to any kernel changes
 * it, so choices measured with other kernels are not reused. */
void cpu_build_id(char *buf, size_t size);
/* The first lines of a valid cache file for this CPU and build (format, cpu, build). */
void cpu_cache_head(char *buf, size_t size);

#endif /* TS_BACKENDS_CPU_CPU_TUNE_H */
