/*
 * cuda_ops.cu — CUDA kernels of the element-wise and row-wise ops: unary and binary
 * arithmetic, the gated activations, RMS_NORM/NORM, SOFTMAX, ROPE, ARGMAX, TOPK, copies and
 * conversions (CPY/CAST/CONT), CONCAT, GET_ROWS, GATHER and ATTN_MASK.
 *
 * Semantics are ir.h's, and the reference backend (src/backends/ref/) is the oracle the
 * tests compare against: element-wise math in f32 (the reference computes in double and
 * rounds once, so results differ by an ulp or so), row reductions in a fixed block-wide order,
 * RoPE angles in double like the reference (an f32 angle at position 100k is off by 1e-2).
 * Every kernel addresses its tensors through their byte strides, so views of any layout work.
 */
#include <math.h>

#include "backends/cuda/cuda_common.cuh"

#define THREADS 256

/* Unravels linear index k over extents ne (ne[0] fastest). */
static __device__ __forceinline__ void unravel(int64_t k, const int64_t *ne, int64_t *i) {
    i[0] = k % ne[0];
    k /= ne[0];
    i[1] = k % ne[1];
    k /= ne[1];
    i[2] = k % ne[2];
    i[3] = k / ne[2];
}

static __device__ __forceinline__ int64_t nelem(const cu_tensor &t) {
    return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
}

static __device__ float gelu(float x, int approx) {
    if (approx == 1) {
        const float c = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    }
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

static __device__ float silu(float x) {
    return x / (1.0f + expf(-x));
}

/* ---- unary, binary and gated ops: one thread per output element ---- */

static __global__ void k_elementwise(cu_node n) {
    const cu_tensor &d = n.dst, &a = n.src[0], &b = n.src[1];
    int64_t total = nelem(d);
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unravel(k, d.ne, i);
        float x = cu_loadf(cu_at(a, i[0], i[1], i[2], i[3]), a.type), y;
        switch (n.op) {
        case CU_OP_ADD:
        case CU_OP_MUL: {
            float v = cu_loadf(
                cu_at(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]), b.type);
            y = n.op == CU_OP_ADD ? x + v : x * v;
            break;
        }
        case CU_OP_SCALE:
            y = x * n.fp[0];
            break;
        case CU_OP_SILU:
            y = silu(x);
            break;
        case CU_OP_GELU:
            y = gelu(x, n.ip[0]);
            break;
        case CU_OP_SIGMOID:
            y = 1.0f / (1.0f + expf(-x));
            break;
        case CU_OP_LOG:
            y = logf(x);
            break;
        case CU_OP_SWIGLU:
        case CU_OP_GEGLU: {
            float u = cu_loadf(cu_at(b, i[0], i[1], i[2], i[3]), b.type);
            y = (n.op == CU_OP_SWIGLU ? silu(x) : gelu(x, n.ip[0])) * u;
            break;
        }
        default: { /* SWIGLU_OAI */
            float u = cu_loadf(cu_at(b, i[0], i[1], i[2], i[3]), b.type);
            float alpha = n.fp[0], limit = n.fp[1];
            x = fminf(x, limit);
            u = fminf(fmaxf(u, -limit), limit);
            y = (u + 1.0f) * x / (1.0f + expf(-alpha * x));
            break;
        }
        }
        cu_storef(cu_at(d, i[0], i[1], i[2], i[3]), d.type, y);
    }
}

extern "C" int cu_launch_elementwise(const cu_env *env, const cu_node *n) {
    cudaStream_t s = (cudaStream_t)env->stream;
    int64_t total = n->dst.ne[0] * n->dst.ne[1] * n->dst.ne[2] * n->dst.ne[3];
    if (total == 0) {
        return 0;
    }
    k_elementwise<<<cu_grid_for(total, THREADS), THREADS, 0, s>>>(*n);
    return (int)cudaGetLastError();
}

/* ---- row ops: one block per row ---- */

static __device__ __forceinline__ void row_index(const cu_tensor &t, int64_t r, int64_t *i) {
    i[1] = r % t.ne[1];
    r /= t.ne[1];
    i[2] = r % t.ne[2];
    i[3] = r / t.ne[2];
}

static __global__ void k_norm(cu_node n) {
    __shared__ float sh[32];
    const cu_tensor &d = n.dst, &a = n.src[0], &w = n.src[1], &bias = n.src[2];
    int64_t i[4], ne0 = d.ne[0];
    row_index(d, blockIdx.x, i);
    const char *ar = cu_at(a, 0, i[1], i[2], i[3]);
    float sum = 0.0f, sq = 0.0f;
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
        float x = cu_loadf(ar + k * a.nb[0], a.type);
        sum += x;
        sq += x * x;
    }
    sum = cu_block_sum(sum, sh);
    float mean = sum / (float)ne0, inv;
    if (n.op == CU_OP_RMS_NORM) {
        sq = cu_block_sum(sq, sh);
        inv = rsqrtf(sq / (float)ne0 + n.fp[0]);
        mean = 0.0f;
    } else {
        float var = 0.0f;
        for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
            float x = cu_loadf(ar + k * a.nb[0], a.type) - mean;
            var += x * x;
        }
        var = cu_block_sum(var, sh);
        inv = rsqrtf(var / (float)ne0 + n.fp[0]);
    }
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
        float y = (cu_loadf(ar + k * a.nb[0], a.type) - mean) * inv;
        if (w.data != NULL) {
            y *= cu_loadf(w.data + k * w.nb[0], w.type);
        }
        if (bias.data != NULL) {
            y += cu_loadf(bias.data + k * bias.nb[0], bias.type);
        }
        cu_storef(cu_at(d, k, i[1], i[2], i[3]), d.type, y);
    }
}

/* z of SOFTMAX element k of a row (scale, cap, mask). */
static __device__ __forceinline__ float softmax_z(const cu_node &n, const char *ar, int64_t k,
                                                  int64_t i1) {
    const cu_tensor &a = n.src[0], &mask = n.src[1];
    float x = cu_loadf(ar + k * a.nb[0], a.type) * n.fp[0];
    if (n.fp[1] > 0.0f) {
        x = n.fp[1] * tanhf(x / n.fp[1]);
    }
    if (mask.data != NULL) {
        x += cu_loadf(mask.data + k * mask.nb[0] + i1 * mask.nb[1], mask.type);
    }
    return x;
}

static __global__ void k_softmax(cu_node n) {
    __shared__ float sh[32];
    const cu_tensor &d = n.dst, &a = n.src[0], &sinks = n.src[2];
    int64_t i[4], ne0 = d.ne[0];
    row_index(d, blockIdx.x, i);
    const char *ar = cu_at(a, 0, i[1], i[2], i[3]);
    float mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
        mx = fmaxf(mx, softmax_z(n, ar, k, i[1]));
    }
    mx = cu_block_max(mx, sh);
    float sink = -INFINITY;
    if (sinks.data != NULL && mx != -INFINITY) {
        sink = cu_loadf(sinks.data + i[2] * sinks.nb[0], sinks.type);
        mx = fmaxf(mx, sink);
    }
    float sum = 0.0f;
    for (int64_t k = threadIdx.x; k < ne0 && mx != -INFINITY; k += blockDim.x) {
        sum += expf(softmax_z(n, ar, k, i[1]) - mx);
    }
    sum = cu_block_sum(sum, sh);
    if (sink != -INFINITY) {
        sum += expf(sink - mx);
    }
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
        float y = mx == -INFINITY ? 0.0f : expf(softmax_z(n, ar, k, i[1]) - mx) / sum;
        cu_storef(cu_at(d, k, i[1], i[2], i[3]), d.type, y);
    }
}

/* ARGMAX: the first maximum, scanning as the reference does (a NaN never wins; a NaN first
 * element stays the answer since nothing compares greater than it). */
static __global__ void k_argmax(cu_node n) {
    __shared__ float shv[1024];
    __shared__ int64_t shi[1024];
    const cu_tensor &a = n.src[0];
    int64_t i[4];
    row_index(a, blockIdx.x, i);
    const char *ar = cu_at(a, 0, i[1], i[2], i[3]);
    float bv = -INFINITY;
    int64_t bi = -1;
    for (int64_t k = threadIdx.x; k < a.ne[0]; k += blockDim.x) {
        float v = cu_loadf(ar + k * a.nb[0], a.type);
        if (!isnan(v) && (bi < 0 || v > bv)) {
            bv = v;
            bi = k;
        }
    }
    shv[threadIdx.x] = bv;
    shi[threadIdx.x] = bi;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            float v = shv[threadIdx.x + o];
            int64_t j = shi[threadIdx.x + o];
            int64_t cur = shi[threadIdx.x];
            if (j >= 0 && (cur < 0 || v > shv[threadIdx.x] || (v == shv[threadIdx.x] && j < cur))) {
                shv[threadIdx.x] = v;
                shi[threadIdx.x] = j;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float first = cu_loadf(ar, a.type);
        int32_t best = isnan(first) || shi[0] < 0 ? 0 : (int32_t)shi[0];
        *(int32_t *)(n.dst.data + i[1] * n.dst.nb[0] + i[2] * n.dst.nb[1] + i[3] * n.dst.nb[2]) =
            best;
    }
}

/* Whether (v, i) comes before (u, j) in TOPK's order: larger first, NaN last, ties by index. */
static __device__ __forceinline__ bool topk_before(float v, int64_t i, float u, int64_t j) {
    if (isnan(v) || isnan(u)) {
        return isnan(v) == isnan(u) ? i < j : !isnan(v);
    }
    return v > u || (v == u && i < j);
}

/* TOPK by rank: element i's rank is the number of elements before it in the (strict, total)
 * order; ranks below k name the output slot. Quadratic in the row length, which supports_op
 * bounds (expert routers have at most a few hundred entries). */
static __global__ void k_topk(cu_node n) {
    const cu_tensor &a = n.src[0], &d = n.dst;
    int64_t i[4];
    row_index(a, blockIdx.x, i);
    const char *ar = cu_at(a, 0, i[1], i[2], i[3]);
    int64_t ne0 = a.ne[0], k = n.ip[0];
    for (int64_t e = threadIdx.x; e < ne0; e += blockDim.x) {
        float v = cu_loadf(ar + e * a.nb[0], a.type);
        int64_t rank = 0;
        for (int64_t j = 0; j < ne0 && rank < k; j++) {
            rank += topk_before(cu_loadf(ar + j * a.nb[0], a.type), j, v, e) ? 1 : 0;
        }
        if (rank < k) {
            *(int32_t *)cu_at(d, rank, i[1], i[2], i[3]) = (int32_t)e;
        }
    }
}

extern "C" int cu_launch_rows(const cu_env *env, const cu_node *n) {
    cudaStream_t s = (cudaStream_t)env->stream;
    const cu_tensor &r = n->op == CU_OP_ARGMAX || n->op == CU_OP_TOPK ? n->src[0] : n->dst;
    int64_t rows = r.ne[1] * r.ne[2] * r.ne[3];
    if (rows == 0 || r.ne[0] == 0) {
        return 0;
    }
    if (rows > INT32_MAX) {
        return (int)cudaErrorInvalidConfiguration;
    }
    switch (n->op) {
    case CU_OP_RMS_NORM:
    case CU_OP_NORM:
        k_norm<<<(unsigned)rows, THREADS, 0, s>>>(*n);
        break;
    case CU_OP_SOFTMAX:
        k_softmax<<<(unsigned)rows, THREADS, 0, s>>>(*n);
        break;
    case CU_OP_ARGMAX:
        k_argmax<<<(unsigned)rows, THREADS, 0, s>>>(*n);
        break;
    default:
        k_topk<<<(unsigned)rows, THREADS, 0, s>>>(*n);
        break;
    }
    return (int)cudaGetLastError();
}

/* ---- ROPE: one thread per (pair or copied dim, head, token) ---- */

static __global__ void k_rope(cu_node n) {
    const cu_tensor &d = n.dst, &a = n.src[0], &pos = n.src[1], &ff = n.src[2];
    int64_t n_rot = n.ip[0], half = n_rot / 2, hd = d.ne[0];
    bool neox = n.ip[1] == 1;
    /* Work items per (head, token): the pairs, then the copied dims. */
    int64_t per = half + (hd - n_rot);
    int64_t total = per * d.ne[1] * d.ne[2];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = k % per, h = (k / per) % d.ne[1], t = k / (per * d.ne[1]);
        if (w >= half) {
            int64_t dd = n_rot + (w - half);
            cu_storef(cu_at(d, dd, h, t, 0), d.type, cu_loadf(cu_at(a, dd, h, t, 0), a.type));
            continue;
        }
        int64_t i = w;
        double p = (double)*(const int32_t *)(pos.data + t * pos.nb[0]);
        double theta_e = p * pow((double)n.fp[0], -2.0 * (double)i / (double)n_rot);
        if (ff.data != NULL) {
            theta_e /= (double)cu_loadf(ff.data + i * ff.nb[0], ff.type);
        }
        double theta = (double)n.fp[1] * theta_e;
        double ext = n.fp[2];
        if (ext != 0.0) {
            double lo = n.fp[4], hi = n.fp[5];
            double y = ((double)i - lo) / fmax(0.001, hi - lo);
            double r = ext * (1.0 - fmin(1.0, fmax(0.0, y)));
            theta = theta * (1.0 - r) + theta_e * r;
        }
        int64_t d0 = neox ? i : 2 * i, d1 = neox ? i + half : 2 * i + 1;
        double x0 = cu_loadf(cu_at(a, d0, h, t, 0), a.type);
        double x1 = cu_loadf(cu_at(a, d1, h, t, 0), a.type);
        double c = (double)n.fp[3] * cos(theta), sn = (double)n.fp[3] * sin(theta);
        cu_storef(cu_at(d, d0, h, t, 0), d.type, (float)(x0 * c - x1 * sn));
        cu_storef(cu_at(d, d1, h, t, 0), d.type, (float)(x0 * sn + x1 * c));
    }
}

extern "C" int cu_launch_rope(const cu_env *env, const cu_node *n) {
    int64_t per = n->ip[0] / 2 + (n->dst.ne[0] - n->ip[0]);
    int64_t total = per * n->dst.ne[1] * n->dst.ne[2];
    if (total == 0) {
        return 0;
    }
    k_rope<<<cu_grid_for(total, THREADS), THREADS, 0, (cudaStream_t)env->stream>>>(*n);
    return (int)cudaGetLastError();
}

/* ---- copies, conversions, concatenation and gathers: one thread per output element ---- */

/* Q8_0 quantization of 32 floats as src/quant's scalar from_float (amax / 127, roundf). */
static __device__ void quantize_q8_0(const float *x, unsigned char *blk) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    }
    float d = __fdiv_rn(amax, 127.0f);
    float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    __half_raw hr = __half_raw(__float2half_rn(d));
    blk[0] = (unsigned char)(hr.x & 0xFF);
    blk[1] = (unsigned char)(hr.x >> 8);
    for (int j = 0; j < 32; j++) {
        blk[2 + j] = (unsigned char)(int8_t)roundf(__fmul_rn(x[j], id));
    }
}

/* CPY/CAST/CONT between float types, or from a block type to a float type: element k of
 * the row-major order goes from a's position to dst's. */
static __global__ void k_copy(cu_node n) {
    const cu_tensor &d = n.dst, &a = n.src[0];
    int64_t total = nelem(d);
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t is[4], id[4];
        unravel(k, a.ne, is);
        unravel(k, d.ne, id);
        float v = cu_is_block_type(a.type)
                      ? cu_row_elem(cu_at(a, 0, is[1], is[2], is[3]), a.type, is[0])
                      : cu_loadf(cu_at(a, is[0], is[1], is[2], is[3]), a.type);
        cu_storef(cu_at(d, id[0], id[1], id[2], id[3]), d.type, v);
    }
}

/* Same type, raw: a block type's blocks, or 4-byte integers, moved unchanged. */
static __global__ void k_copy_raw(cu_node n, int unit) {
    const cu_tensor &d = n.dst, &a = n.src[0];
    int64_t per_row = a.ne[0] / cu_block_elems(a.type);
    int64_t total = per_row * a.ne[1] * a.ne[2] * a.ne[3];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t u = k % per_row, r = k / per_row, i[4];
        row_index(a, r, i);
        const char *src = cu_at(a, u, i[1], i[2], i[3]);
        char *dst = cu_at(d, u, i[1], i[2], i[3]);
        for (int b = 0; b < unit; b++) {
            dst[b] = src[b];
        }
    }
}

/* f32/f16/bf16 -> Q8_0, one thread per destination block (rows of equal length). */
static __global__ void k_copy_to_q8_0(cu_node n) {
    const cu_tensor &d = n.dst, &a = n.src[0];
    int64_t per_row = d.ne[0] / 32;
    int64_t total = per_row * d.ne[1] * d.ne[2] * d.ne[3];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t blk = k % per_row, r = k / per_row, id[4], is[4];
        row_index(d, r, id);
        float x[32];
        for (int j = 0; j < 32; j++) {
            unravel(r * d.ne[0] + blk * 32 + j, a.ne, is);
            x[j] = cu_loadf(cu_at(a, is[0], is[1], is[2], is[3]), a.type);
        }
        quantize_q8_0(x, (unsigned char *)cu_at(d, blk, id[1], id[2], id[3]));
    }
}

static __global__ void k_concat(cu_node n) {
    const cu_tensor &d = n.dst, &a = n.src[0], &b = n.src[1];
    int dim = n.ip[0];
    int64_t total = nelem(d);
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unravel(k, d.ne, i);
        float v;
        if (i[dim] < a.ne[dim]) {
            v = cu_loadf(cu_at(a, i[0], i[1], i[2], i[3]), a.type);
        } else {
            char *out = cu_at(d, i[0], i[1], i[2], i[3]);
            i[dim] -= a.ne[dim];
            v = cu_loadf(cu_at(b, i[0], i[1], i[2], i[3]), b.type);
            cu_storef(out, d.type, v);
            continue;
        }
        cu_storef(cu_at(d, i[0], i[1], i[2], i[3]), d.type, v);
    }
}

/* GET_ROWS: out[:, j0, j1, j2] = row idx[j0, j1, j2] of a (zeros for a negative index). */
static __global__ void k_get_rows(cu_node n, cu_fault *fault) {
    const cu_tensor &d = n.dst, &a = n.src[0], &idx = n.src[1];
    int64_t total = nelem(d);
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unravel(k, d.ne, i);
        int32_t r = cu_loadi(idx, i[1], i[2], i[3]);
        float v = 0.0f;
        if (r >= a.ne[1]) {
            cu_set_fault(fault, CU_FAULT_ROW_INDEX, n.index, r,
                         i[1] + idx.ne[0] * (i[2] + idx.ne[1] * i[3]), a.ne[1]);
        } else if (r >= 0) {
            v = cu_row_elem(a.data + r * a.nb[1], a.type, i[0]);
        }
        cu_storef(cu_at(d, i[0], i[1], i[2], i[3]), d.type, v);
    }
}

static __global__ void k_gather(cu_node n, cu_fault *fault) {
    const cu_tensor &d = n.dst, &a = n.src[0], &idx = n.src[1];
    int64_t total = nelem(d);
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unravel(k, d.ne, i);
        int32_t j = *(const int32_t *)cu_at(idx, i[0], i[1], i[2], i[3]);
        float v = 0.0f;
        if (j < 0 || j >= a.ne[0]) {
            cu_set_fault(fault, CU_FAULT_GATHER, n.index, j, k, a.ne[0]);
        } else {
            v = cu_loadf(cu_at(a, j, i[1], i[2], i[3]), a.type);
        }
        cu_storef(cu_at(d, i[0], i[1], i[2], i[3]), d.type, v);
    }
}

extern "C" int cu_launch_copy(const cu_env *env, const cu_node *n) {
    cudaStream_t s = (cudaStream_t)env->stream;
    const cu_tensor &d = n->dst, &a = n->src[0];
    int64_t total = d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3];
    if (total == 0) {
        return 0;
    }
    unsigned grid = cu_grid_for(total, THREADS);
    switch (n->op) {
    case CU_OP_CONCAT:
        k_concat<<<grid, THREADS, 0, s>>>(*n);
        break;
    case CU_OP_GET_ROWS:
        k_get_rows<<<grid, THREADS, 0, s>>>(*n, env->fault);
        break;
    case CU_OP_GATHER:
        k_gather<<<grid, THREADS, 0, s>>>(*n, env->fault);
        break;
    default:
        if (a.type == d.type && (cu_is_block_type(a.type) || a.type == CU_I32)) {
            k_copy_raw<<<grid, THREADS, 0, s>>>(*n, cu_block_bytes(a.type));
        } else if (d.type == CU_Q8_0) {
            k_copy_to_q8_0<<<cu_grid_for(total / 32, THREADS), THREADS, 0, s>>>(*n);
        } else {
            k_copy<<<grid, THREADS, 0, s>>>(*n);
        }
        break;
    }
    return (int)cudaGetLastError();
}

/* ---- ATTN_MASK: out[s * cap + j, t] = 0 when key j of sequence s is visible to t ---- */

static __global__ void k_attn_mask(cu_node n, cu_fault *fault) {
    const cu_tensor &d = n.dst, &seq = n.src[0], &pos = n.src[1], &lens = n.src[2];
    int64_t cap = n.ip[0], window = n.ip[1];
    int64_t total = d.ne[0] * d.ne[1];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k % d.ne[0], t = k / d.ne[0];
        int32_t s = cu_loadi(seq, t, 0, 0);
        bool ok = false;
        if (s < 0 || s >= lens.ne[0]) {
            cu_set_fault(fault, CU_FAULT_SEQ, n.index, s, t, lens.ne[0]);
        } else {
            int32_t len = cu_loadi(lens, s, 0, 0);
            if (len < 0 || len > cap) {
                cu_set_fault(fault, CU_FAULT_SEQ_LEN, n.index, len, s, cap);
            } else {
                int64_t p = cu_loadi(pos, t, 0, 0), ks = i / cap, j = i % cap;
                ok = ks == s && j < len && j <= p && (window == 0 || p - j < window);
            }
        }
        cu_storef(cu_at(d, i, t, 0, 0), d.type, ok ? 0.0f : -INFINITY);
    }
}

extern "C" int cu_launch_attn_mask(const cu_env *env, const cu_node *n) {
    int64_t total = n->dst.ne[0] * n->dst.ne[1];
    if (total == 0) {
        return 0;
    }
    k_attn_mask<<<cu_grid_for(total, THREADS), THREADS, 0, (cudaStream_t)env->stream>>>(*n,
                                                                                        env->fault);
    return (int)cudaGetLastError();
}

extern "C" const char *cu_error_string(int code) {
    return cudaGetErrorString((cudaError_t)code);
}
