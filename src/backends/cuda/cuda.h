/*
 * cuda.h — the CUDA backend: IR graphs on one NVIDIA GPU.
 *
 * Buffers are plain device memory (cudaMalloc; never managed memory); a tensor is (buffer,
 * byte offset) like everywhere else, so views are offsets and reading one back to the host
 * works. buffer_wrap, which the model loader uses for the whole GGUF mapping, copies the
 * wrapped bytes to a device buffer once (streamed through a pinned staging buffer) — the
 * caller promises they never change — so weights are uploaded once, when the context is
 * made, at the same offsets as in the file. The KV pools and the graph arena are ordinary
 * device buffers.
 *
 * Kernels cover every op of ir.h's op set except the collectives, with the semantics of the
 * reference backend (tests/backends/test_cuda_ops.c compares them op by op); MUL_MAT reads
 * quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, MXFP4, and F32, F16,
 * BF16) straight from their blocks. What the backend cannot run (a type without a kernel, a
 * head dimension past CU_ATTN_MAX_HD, a collective) is reported by graph_prepare when the
 * context is made — naming the node, the tensor and its type — never by a silent fallback.
 *
 * Batch invariance: see cuda_kernels.h. Asynchrony: graph_compute enqueues the graph on the
 * backend's stream and waits for it before returning (so its errors belong to that step);
 * buffer_set/get are synchronous. One graph at a time per backend; not thread-safe.
 *
 * Built only with -DTS_CUDA=ON. Without it, ts_cuda_backend_create fails with a message
 * saying so and ts_cuda_device_count() is 0. The planning helpers below (what a node needs,
 * whether it fits) are plain C and always built, so they are tested without a GPU.
 */
#ifndef TS_BACKENDS_CUDA_CUDA_H
#define TS_BACKENDS_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/backend.h"

typedef struct ts_cuda_params {
    int device;           /* CUDA device ordinal (--device N); default 0 */
    int cublas_min_cols;  /* MUL_MAT with at least this many activation columns uses cuBLAS
                             on F16 copies (fast prefill, not batch-invariant); 0 = never.
                             Default: the environment variable TS_CUDA_CUBLAS_MIN_COLS, else 0 */
    size_t staging_bytes; /* pinned staging buffer for uploads; default 64 MiB */
} ts_cuda_params;

ts_cuda_params ts_cuda_params_default(void);

/* True when tessera was built with -DTS_CUDA=ON. */
bool ts_cuda_built(void);
/* Number of usable CUDA devices (0 without CUDA, without a driver or without a device). */
int ts_cuda_device_count(void);
/* Creates a backend on params->device (params NULL = defaults). Errors: built without CUDA,
 * no such device, driver or runtime failures, each with what and why. */
ts_status ts_cuda_backend_create(const ts_cuda_params *params, ts_backend **out, ts_error *err);

/* ---- planning (host-side; always built) ---- */

/* Whether the CUDA backend has a kernel for node (op, types, shapes). */
bool ts_cuda_supports_node(const ts_tensor *node);
/* Why it does not, into buf ("" when it does): names the node, the op, the tensor and the
 * type or limit that is missing. Returns buf. */
const char *ts_cuda_unsupported_reason(const ts_tensor *node, char *buf, size_t size);
/* Whether MUL_MAT/MUL_MAT_ID has a kernel for weights of this type. */
bool ts_cuda_weight_type_supported(ts_type type);
/* Scratch bytes node needs at its maximum extents (0 for most ops). cublas_min_cols as in
 * ts_cuda_params. */
size_t ts_cuda_scratch_bytes(const ts_tensor *node, int cublas_min_cols);
/* Number of key chunks ATTENTION splits a sequence of up to cap keys into. */
int64_t ts_cuda_attn_splits(int64_t cap);
/* Checks that `need` bytes (what: "the model's weights", "the KV cache", ...) fit in the
 * device's free memory; TS_ERR_NOMEM with both sizes and the device named when not. */
ts_status ts_cuda_check_fit(size_t need, size_t free_bytes, size_t total_bytes, const char *what,
                            int device, const char *device_name, ts_error *err);

#endif /* TS_BACKENDS_CUDA_CUDA_H */
