/*
 * cpu.h — the optimized CPU backend.
 *
 * Executes IR graphs with a persistent thread pool owned by the backend (created once, no
 * globals): each op's work is split across the threads (MUL_MAT by weight rows, row-wise
 * ops by rows, attention by (token, kv head)), with a barrier between nodes. MUL_MAT
 * quantizes the activations once per op into a scratch buffer (to the weight type's
 * vec_dot_type) and then runs the SIMD kernels of src/quant: vec_dot for a single
 * activation row, the batch-aware gemm when there are several. Results match the reference
 * backend within stated tolerances (tests/backends/).
 *
 * Buffers are host memory; buffer_wrap lets weights be used straight from an mmapped file.
 * One graph at a time per backend; different backends are independent.
 */
#ifndef TS_BACKENDS_CPU_CPU_H
#define TS_BACKENDS_CPU_CPU_H

#include "ir/backend.h"
#include "quant/quant.h"

typedef struct ts_cpu_params {
    int n_threads; /* 0 = number of physical cores */
    int isa;       /* a ts_isa, or -1 = ts_quant_detect_isa() (honours TS_ISA) */
} ts_cpu_params;

/* Parameters with defaults filled in: physical cores, detected ISA. */
ts_cpu_params ts_cpu_params_default(void);
/* Creates a CPU backend (params NULL = defaults); free with ts_backend_destroy. */
ts_status ts_cpu_backend_create(const ts_cpu_params *params, ts_backend **out, ts_error *err);
/* Number of physical cores (distinct core ids) of this machine; at least 1. */
int ts_cpu_physical_cores(void);

#endif /* TS_BACKENDS_CPU_CPU_H */
