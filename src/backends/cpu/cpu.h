/*
 * cpu.h — the optimized CPU backend.
 *
 * Executes IR graphs with a persistent thread pool owned by the backend (created once, no
 * globals): each op's work is split across the threads (MUL_MAT by weight rows, row-wise
 * ops by rows, attention by (token, kv head)), with a barrier between nodes. MUL_MAT
 * quantizes the activations once per op into a scratch buffer (to the weight type's
 * vec_dot_type) and then runs the gemm kernels of src/quant, at the instruction-set level that
 * measured fastest on this CPU for the weight type and for one or several activation rows
 * (cpu_tune.h). Results match the reference backend within stated tolerances
 * (tests/backends/).
 *
 * Buffers are host memory; buffer_wrap lets weights be used straight from an mmapped file.
 * Where the measured kernel for a weight type reads the interleaved layout, the backend keeps a
 * repacked copy of each such weight of a constant buffer (cpu_pack.h; made by graph_prepare or
 * the first run; ts_cpu_params.no_repack turns it off).
 * One graph at a time per backend; different backends are independent.
 */
#ifndef TS_BACKENDS_CPU_CPU_H
#define TS_BACKENDS_CPU_CPU_H

#include "ir/backend.h"
#include "quant/quant.h"

typedef struct ts_cpu_params {
    int n_threads; /* 0 = number of physical cores */
    int isa;       /* a ts_isa: every kernel at that level; -1 = ts_quant_detect_isa() for the
                      backend, and MUL_MAT's gemm per weight type and shape class as measured
                      (cpu_tune.h), unless TS_ISA is set, which forces its level everywhere */
    bool retune;   /* with isa -1: measure the types this backend uses again although the
                      kernel cache file has them, and rewrite it (other types' entries stay) */
    bool no_repack; /* never repack weights (cpu_pack.h): MUL_MAT reads them where they lie */
} ts_cpu_params;

/* Parameters with defaults filled in: physical cores, isa -1 (measured choice), no retune,
 * weights repacked where the measured choice says so. */
ts_cpu_params ts_cpu_params_default(void);
/* Creates a CPU backend (params NULL = defaults); free with ts_backend_destroy. Reads the
 * kernel cache file (cpu_tune.h); nothing is measured until a graph or
 * ts_cpu_backend_tune needs a type. */
ts_status ts_cpu_backend_create(const ts_cpu_params *params, ts_backend **out, ts_error *err);
/* Measures now the kernel choice of the given weight types that is not known yet (a graph
 * run would otherwise do it when it first meets them), and updates the cache file.
 * TS_ERR_INVALID_ARG when b is not a CPU backend. */
ts_status ts_cpu_backend_tune(ts_backend *b, const ts_type *types, int n_types, ts_error *err);
/* Describes b's kernel choice for the given types (types NULL: every type chosen so far) into
 * buf ("Q4_1 avx2/avx512, ...": level with one activation row / with several); *notice (may be
 * NULL) gets what went wrong with the cache file ("" when nothing; owned by b, valid until the
 * next call on b), *tune_ms (may be NULL) the time spent measuring. False when b is not a CPU
 * backend (buf "", notice "", 0 ms). */
bool ts_cpu_backend_kernels(const ts_backend *b, const ts_type *types, int n_types, char *buf,
                            size_t size, const char **notice, double *tune_ms);
/* The repacked weights b holds: bytes and the time spent making them. False when b is not a
 * CPU backend (0, 0). */
bool ts_cpu_backend_repacked(const ts_backend *b, size_t *bytes, double *ms);
/* Number of physical cores (distinct core ids) of this machine; at least 1. */
int ts_cpu_physical_cores(void);

#endif /* TS_BACKENDS_CPU_CPU_H */
