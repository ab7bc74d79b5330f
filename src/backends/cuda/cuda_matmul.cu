/*
 * cuda_matmul.cu — MUL_MAT and MUL_MAT_ID on the GPU.
 *
 * The kernel (mm_rows): one warp per weight row and up to CU_MM_COLS activation columns.
 * Lane l walks the row's 32-element groups l, l + 32, ... (float weights: its elements l,
 * l + 32, ...), dequantizes each group in registers straight from the quantized blocks
 * (cu_dequant_group, bit-exact with src/quant's to_float) and adds the group's products with
 * each column to that column's sum; the lanes then meet in a fixed shuffle tree. Each output
 * is thus one dot product whose order depends only on the row length: the same for one
 * column (decode) as for 512 (prefill), so a sequence's logits do not depend on what else is
 * in the batch. Weights are read once per CU_MM_COLS columns.
 *
 * Optional prefill path (env->cublas_min_cols > 0, 2-D products with at least that many
 * columns): the weight is dequantized to F16 in scratch, the activations converted to F16,
 * and cuBLAS multiplies them on the tensor cores with f32 accumulation. Faster for long
 * prompts, but its reduction order is cuBLAS's and changes with the shape, so batch
 * invariance no longer holds; it is off unless asked for (TS_CUDA_CUBLAS_MIN_COLS).
 *
 * MUL_MAT_ID groups the (slot, token) pairs by expert first (mmid_group: a stable
 * compaction, one block per expert, no atomics), then each warp runs one expert row over the
 * pairs routed to that expert with the same dot code as MUL_MAT.
 */
#include <cublas_v2.h>

#include "backends/cuda/cuda_common.cuh"

#define WARPS 4

template <int T>
static __device__ __forceinline__ void dot_cols_blocks(const char *wrow, int64_t k,
                                                       const char *const *xs, int64_t xnb0, int nc,
                                                       float *acc, int lane);

/* acc[c] += dot(weight row, column c) for c < nc, the lane's share (see the file comment). */
template <int T>
static __device__ __forceinline__ void dot_cols(const char *wrow, int64_t k, int64_t wnb0,
                                                const char *const *xs, int64_t xnb0, int nc,
                                                float *acc) {
    const int lane = threadIdx.x % 32;
    if constexpr (T == CU_F32 || T == CU_F16 || T == CU_BF16) {
        for (int64_t kk = lane; kk < k; kk += 32) {
            float w = cu_loadf(wrow + kk * wnb0, T);
#pragma unroll
            for (int c = 0; c < CU_MM_COLS; c++) {
                if (c < nc) {
                    acc[c] += w * *(const float *)(xs[c] + kk * xnb0);
                }
            }
        }
    } else {
        dot_cols_blocks<T>(wrow, k, xs, xnb0, nc, acc, lane);
    }
}

/* The block-type half of dot_cols: whole 32-element groups, dequantized in registers. */
template <int T>
static __device__ __forceinline__ void dot_cols_blocks(const char *wrow, int64_t k,
                                                       const char *const *xs, int64_t xnb0, int nc,
                                                       float *acc, int lane) {
    float wv[32];
    for (int64_t g = lane; g < k / 32; g += 32) {
        cu_dequant_group<T>((const unsigned char *)wrow, g, wv);
#pragma unroll
        for (int c = 0; c < CU_MM_COLS; c++) {
            if (c < nc) {
                const char *xp = xs[c] + g * 32 * xnb0;
                float s = 0.0f;
                if (xnb0 == 4 && ((uintptr_t)xp & 15) == 0) {
                    /* Dense, aligned activations: four at a time, same order of sums. */
                    const float4 *x4 = (const float4 *)xp;
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        float4 v = x4[e];
                        s += wv[4 * e] * v.x;
                        s += wv[4 * e + 1] * v.y;
                        s += wv[4 * e + 2] * v.z;
                        s += wv[4 * e + 3] * v.w;
                    }
                } else {
#pragma unroll
                    for (int e = 0; e < 32; e++) {
                        s += wv[e] * *(const float *)(xp + e * xnb0);
                    }
                }
                acc[c] += s;
            }
        }
    }
}

/* MUL_MAT: grid (row blocks, column chunks, b2 * b3). */
template <int T> static __global__ void mm_rows(cu_node n) {
    const cu_tensor &d = n.dst, &w = n.src[0], &x = n.src[1];
    int64_t i = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    if (i >= d.ne[0]) {
        return;
    }
    int64_t c2 = blockIdx.z % d.ne[2], c3 = blockIdx.z / d.ne[2];
    int64_t w2 = c2 / (x.ne[2] / w.ne[2]), w3 = c3 / (x.ne[3] / w.ne[3]);
    const char *wrow = w.data + i * w.nb[1] + w2 * w.nb[2] + w3 * w.nb[3];
    int64_t j0 = (int64_t)blockIdx.y * CU_MM_COLS;
    int nc = (int)(d.ne[1] - j0 < CU_MM_COLS ? d.ne[1] - j0 : CU_MM_COLS);
    const char *xs[CU_MM_COLS];
    float acc[CU_MM_COLS];
#pragma unroll
    for (int c = 0; c < CU_MM_COLS; c++) {
        xs[c] = x.data + (j0 + (c < nc ? c : 0)) * x.nb[1] + c2 * x.nb[2] + c3 * x.nb[3];
        acc[c] = 0.0f;
    }
    dot_cols<T>(wrow, w.ne[0], w.nb[0], xs, x.nb[0], nc, acc);
#pragma unroll
    for (int c = 0; c < CU_MM_COLS; c++) {
        float v = cu_warp_sum(acc[c]);
        if (c < nc && threadIdx.x % 32 == 0) {
            *(float *)cu_at(d, i, j0 + c, c2, c3) = v;
        }
    }
}

typedef void (*mm_kernel)(cu_node);

static mm_kernel mm_for(int type) {
    switch (type) {
    case CU_F32:
        return mm_rows<CU_F32>;
    case CU_F16:
        return mm_rows<CU_F16>;
    case CU_BF16:
        return mm_rows<CU_BF16>;
    case CU_Q4_0:
        return mm_rows<CU_Q4_0>;
    case CU_Q4_1:
        return mm_rows<CU_Q4_1>;
    case CU_Q5_0:
        return mm_rows<CU_Q5_0>;
    case CU_Q5_1:
        return mm_rows<CU_Q5_1>;
    case CU_Q8_0:
        return mm_rows<CU_Q8_0>;
    case CU_IQ4_NL:
        return mm_rows<CU_IQ4_NL>;
    case CU_MXFP4:
        return mm_rows<CU_MXFP4>;
    case CU_Q2_K:
        return mm_rows<CU_Q2_K>;
    case CU_Q3_K:
        return mm_rows<CU_Q3_K>;
    case CU_Q4_K:
        return mm_rows<CU_Q4_K>;
    case CU_Q5_K:
        return mm_rows<CU_Q5_K>;
    case CU_Q6_K:
        return mm_rows<CU_Q6_K>;
    default:
        return NULL;
    }
}

/* ---- the cuBLAS prefill path ---- */

/* Weight [k, n] (rows contiguous, any supported type) -> dense F16 [k, n]. */
static __global__ void to_f16_weight(cu_tensor w, __half *out) {
    int64_t total = w.ne[0] * w.ne[1];
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t kk = e % w.ne[0], r = e / w.ne[0];
        out[e] = __float2half_rn(cu_row_elem(w.data + r * w.nb[1], w.type, kk));
    }
}

/* Activations f32 [k, m] (any strides) -> dense F16 [k, m]. */
static __global__ void to_f16_act(cu_tensor x, __half *out) {
    int64_t total = x.ne[0] * x.ne[1];
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t kk = e % x.ne[0], j = e / x.ne[0];
        out[e] = __float2half_rn(*(const float *)(x.data + kk * x.nb[0] + j * x.nb[1]));
    }
}

/* Whether a MUL_MAT goes to cuBLAS: asked for, 2-D, enough columns, dense output rows. */
static bool use_cublas(const cu_env *env, const cu_node *n) {
    const cu_tensor &d = n->dst, &w = n->src[0];
    return env->cublas != NULL && env->cublas_min_cols > 0 && d.ne[1] >= env->cublas_min_cols &&
           d.ne[2] * d.ne[3] == 1 && w.ne[2] * w.ne[3] == 1 && d.nb[0] == 4 && d.nb[1] % 4 == 0 &&
           (size_t)(w.ne[0] * (w.ne[1] + d.ne[1])) * sizeof(__half) <= env->scratch_size;
}

static int mm_cublas(const cu_env *env, const cu_node *n) {
    cudaStream_t s = (cudaStream_t)env->stream;
    const cu_tensor &d = n->dst, &w = n->src[0], &x = n->src[1];
    __half *wh = (__half *)env->scratch, *xh = wh + w.ne[0] * w.ne[1];
    to_f16_weight<<<cu_grid_for(w.ne[0] * w.ne[1], 256), 256, 0, s>>>(w, wh);
    to_f16_act<<<cu_grid_for(x.ne[0] * x.ne[1], 256), 256, 0, s>>>(x, xh);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) {
        return (int)ce;
    }
    const float one = 1.0f, zero = 0.0f;
    int k = (int)w.ne[0], rows = (int)d.ne[0], cols = (int)d.ne[1];
    cublasStatus_t st =
        cublasGemmEx((cublasHandle_t)env->cublas, CUBLAS_OP_T, CUBLAS_OP_N, rows, cols, k, &one, wh,
                     CUDA_R_16F, k, xh, CUDA_R_16F, k, &zero, d.data, CUDA_R_32F,
                     (int)(d.nb[1] / 4), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : (int)cudaErrorUnknown;
}

extern "C" int cu_launch_mul_mat(const cu_env *env, const cu_node *n) {
    const cu_tensor &d = n->dst;
    if (d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3] == 0) {
        return 0;
    }
    if (use_cublas(env, n)) {
        return mm_cublas(env, n);
    }
    mm_kernel k = mm_for(n->src[0].type);
    if (k == NULL) {
        return (int)cudaErrorNotSupported;
    }
    dim3 grid((unsigned)((d.ne[0] + WARPS - 1) / WARPS),
              (unsigned)((d.ne[1] + CU_MM_COLS - 1) / CU_MM_COLS), (unsigned)(d.ne[2] * d.ne[3]));
    k<<<grid, WARPS * 32, 0, (cudaStream_t)env->stream>>>(*n);
    return (int)cudaGetLastError();
}

/* ---- MUL_MAT_ID ---- */

/* One block per expert: the pairs p = e + n_used * t with ids[e, t] == expert, in increasing
 * p (a stable compaction), into list[expert * n_pairs ...]; count[expert] their number. Block
 * 0 also checks every id. */
static __global__ void mmid_group(cu_node n, int32_t *count, int32_t *list, cu_fault *fault) {
    __shared__ int32_t warp_tot[32];
    __shared__ int32_t base;
    const cu_tensor &ids = n.src[2];
    int64_t n_used = ids.ne[0], n_pairs = ids.ne[0] * ids.ne[1];
    int expert = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int64_t n_exp = n.src[0].ne[2];
    if (threadIdx.x == 0) {
        base = 0;
    }
    __syncthreads();
    for (int64_t p0 = 0; p0 < n_pairs; p0 += blockDim.x) {
        int64_t p = p0 + threadIdx.x;
        bool hit = false;
        if (p < n_pairs) {
            int32_t id = cu_loadi(ids, p % n_used, p / n_used, 0);
            hit = id == expert;
            if (expert == 0 && (id < 0 || id >= n_exp)) {
                cu_set_fault(fault, CU_FAULT_EXPERT, n.index, id, p % n_used, p / n_used);
            }
        }
        unsigned ballot = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) {
            warp_tot[warp] = __popc(ballot);
        }
        __syncthreads();
        int32_t before = base;
        for (int w = 0; w < warp; w++) {
            before += warp_tot[w];
        }
        if (hit) {
            list[expert * n_pairs + before + __popc(ballot & ((1u << lane) - 1u))] = (int32_t)p;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 0; w < (int)(blockDim.x / 32); w++) {
                base += warp_tot[w];
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        count[expert] = base;
    }
}

/* Grid (row blocks, experts): each warp runs its expert row over the expert's pairs. */
template <int T>
static __global__ void mmid_rows(cu_node n, const int32_t *count, const int32_t *list) {
    const cu_tensor &d = n.dst, &w = n.src[0], &x = n.src[1];
    int64_t i = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    int expert = blockIdx.y;
    if (i >= d.ne[0]) {
        return;
    }
    int64_t n_used = n.src[2].ne[0], n_pairs = n_used * n.src[2].ne[1];
    const int32_t *mine = list + expert * n_pairs;
    const char *wrow = w.data + i * w.nb[1] + expert * w.nb[2];
    for (int32_t c0 = 0; c0 < count[expert]; c0 += CU_MM_COLS) {
        int nc = count[expert] - c0 < CU_MM_COLS ? count[expert] - c0 : CU_MM_COLS;
        const char *xs[CU_MM_COLS];
        float acc[CU_MM_COLS];
#pragma unroll
        for (int c = 0; c < CU_MM_COLS; c++) {
            int32_t p = mine[c0 + (c < nc ? c : 0)];
            int64_t e = p % n_used, t = p / n_used;
            xs[c] = x.data + (x.ne[1] == 1 ? 0 : e) * x.nb[1] + t * x.nb[2];
            acc[c] = 0.0f;
        }
        dot_cols<T>(wrow, w.ne[0], w.nb[0], xs, x.nb[0], nc, acc);
#pragma unroll
        for (int c = 0; c < CU_MM_COLS; c++) {
            float v = cu_warp_sum(acc[c]);
            if (c < nc && threadIdx.x % 32 == 0) {
                int32_t p = mine[c0 + c];
                *(float *)cu_at(d, i, p % n_used, p / n_used, 0) = v;
            }
        }
    }
}

typedef void (*mmid_kernel)(cu_node, const int32_t *, const int32_t *);

static mmid_kernel mmid_for(int type) {
    switch (type) {
    case CU_F32:
        return mmid_rows<CU_F32>;
    case CU_F16:
        return mmid_rows<CU_F16>;
    case CU_BF16:
        return mmid_rows<CU_BF16>;
    case CU_Q4_0:
        return mmid_rows<CU_Q4_0>;
    case CU_Q4_1:
        return mmid_rows<CU_Q4_1>;
    case CU_Q5_0:
        return mmid_rows<CU_Q5_0>;
    case CU_Q5_1:
        return mmid_rows<CU_Q5_1>;
    case CU_Q8_0:
        return mmid_rows<CU_Q8_0>;
    case CU_IQ4_NL:
        return mmid_rows<CU_IQ4_NL>;
    case CU_MXFP4:
        return mmid_rows<CU_MXFP4>;
    case CU_Q2_K:
        return mmid_rows<CU_Q2_K>;
    case CU_Q3_K:
        return mmid_rows<CU_Q3_K>;
    case CU_Q4_K:
        return mmid_rows<CU_Q4_K>;
    case CU_Q5_K:
        return mmid_rows<CU_Q5_K>;
    case CU_Q6_K:
        return mmid_rows<CU_Q6_K>;
    default:
        return NULL;
    }
}

extern "C" int cu_launch_mul_mat_id(const cu_env *env, const cu_node *n) {
    const cu_tensor &d = n->dst, &w = n->src[0], &ids = n->src[2];
    int64_t n_exp = w.ne[2], n_pairs = ids.ne[0] * ids.ne[1];
    if (d.ne[0] * n_pairs == 0) {
        return 0;
    }
    size_t need = (size_t)(n_exp + n_exp * n_pairs) * sizeof(int32_t);
    mmid_kernel k = mmid_for(w.type);
    if (k == NULL || need > env->scratch_size) {
        return (int)(k == NULL ? cudaErrorNotSupported : cudaErrorMemoryAllocation);
    }
    cudaStream_t s = (cudaStream_t)env->stream;
    int32_t *count = (int32_t *)env->scratch, *list = count + n_exp;
    mmid_group<<<(unsigned)n_exp, 256, 0, s>>>(*n, count, list, env->fault);
    dim3 grid((unsigned)((d.ne[0] + WARPS - 1) / WARPS), (unsigned)n_exp);
    k<<<grid, WARPS * 32, 0, s>>>(*n, count, list);
    return (int)cudaGetLastError();
}
