/*
 * cuda_common.cuh — device helpers shared by the CUDA backend's kernels: element loads and
 * stores of F32/F16/BF16, the dequantization of every supported block type, fault records
 * and fixed-order reductions.
 *
 * Dequantization matches src/quant's scalar to_float bit for bit: each value is formed with
 * the same single roundings in the same order (products and sums written with __fmul_rn /
 * __fadd_rn / __fsub_rn so that the compiler cannot fuse them into an FMA, which rounds
 * once instead of twice). Block layouts are those of src/quant/quant_internal.h, read byte
 * by byte (blocks are not aligned: a Q4_0 block is 18 bytes).
 *
 * Everything here is static: the kernels of each translation unit get their own copy and no
 * symbol leaves the object file (tests/check_symbols.sh).
 */
#ifndef TS_BACKENDS_CUDA_CUDA_COMMON_CUH
#define TS_BACKENDS_CUDA_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_kernels.h"

#define CU_QK   32
#define CU_QK_K 256

/* Single-rounding float arithmetic that the compiler may not fuse into an FMA. The
 * dequantization below is also compiled for the host (tests/backends/test_cuda_dequant.cu
 * checks it against src/quant without a GPU), where x86-64 without -mfma never fuses. */
#ifdef __CUDA_ARCH__
#define CU_FMUL(a, b) __fmul_rn((a), (b))
#define CU_FADD(a, b) __fadd_rn((a), (b))
#define CU_FSUB(a, b) __fsub_rn((a), (b))
#else
#define CU_FMUL(a, b) ((a) * (b))
#define CU_FADD(a, b) ((a) + (b))
#define CU_FSUB(a, b) ((a) - (b))
#endif
#define CU_HD static __host__ __device__ __forceinline__

CU_HD float cu_h2f(const unsigned char *p) {
    __half_raw r;
    r.x = (unsigned short)(p[0] | (p[1] << 8));
    return __half2float(__half(r));
}

/* Loads element at byte address p of a float type (F32, F16, BF16). */
static __device__ __forceinline__ float cu_loadf(const char *p, int type) {
    if (type == CU_F16) {
        return __half2float(*(const __half *)p);
    }
    if (type == CU_BF16) {
        return __bfloat162float(*(const __nv_bfloat16 *)p);
    }
    return *(const float *)p;
}

/* Stores v at p as F32, F16 or BF16, rounding to nearest even (as src/quant/fp16.c). */
static __device__ __forceinline__ void cu_storef(char *p, int type, float v) {
    if (type == CU_F16) {
        *(__half *)p = __float2half_rn(v);
    } else if (type == CU_BF16) {
        *(__nv_bfloat16 *)p = __float2bfloat16_rn(v);
    } else {
        *(float *)p = v;
    }
}

static __device__ __forceinline__ int32_t cu_loadi(const cu_tensor &t, int64_t i0, int64_t i1,
                                                   int64_t i2) {
    return *(const int32_t *)(t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2]);
}

static __device__ __forceinline__ char *cu_at(const cu_tensor &t, int64_t i0, int64_t i1,
                                              int64_t i2, int64_t i3) {
    return t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/* Records the first fault of a run (later ones are dropped). */
static __device__ void cu_set_fault(cu_fault *f, int code, int node, int64_t a0, int64_t a1,
                                    int64_t a2) {
    if (atomicCAS(&f->code, 0, code) == 0) {
        f->node = node;
        f->a[0] = a0;
        f->a[1] = a1;
        f->a[2] = a2;
    }
}

static __device__ __host__ __forceinline__ bool cu_is_block_type(int type) {
    return type != CU_F32 && type != CU_F16 && type != CU_BF16 && type != CU_I32;
}

/* Elements and bytes of one block of a block type. */
static __device__ __host__ __forceinline__ int cu_block_elems(int type) {
    switch (type) {
    case CU_Q2_K:
    case CU_Q3_K:
    case CU_Q4_K:
    case CU_Q5_K:
    case CU_Q6_K:
        return CU_QK_K;
    case CU_F32:
    case CU_F16:
    case CU_BF16:
    case CU_I32:
        return 1;
    default:
        return CU_QK;
    }
}

static __device__ __host__ __forceinline__ int cu_block_bytes(int type) {
    switch (type) {
    case CU_Q4_0:
        return 18;
    case CU_Q4_1:
        return 20;
    case CU_Q5_0:
        return 22;
    case CU_Q5_1:
        return 24;
    case CU_Q8_0:
        return 34;
    case CU_IQ4_NL:
        return 18;
    case CU_MXFP4:
        return 17;
    case CU_Q2_K:
        return 84;
    case CU_Q3_K:
        return 110;
    case CU_Q4_K:
        return 144;
    case CU_Q5_K:
        return 176;
    case CU_Q6_K:
        return 210;
    case CU_F16:
    case CU_BF16:
        return 2;
    default:
        return 4;
    }
}

/* The level tables of IQ4_NL and MXFP4 (quant_q32.c), in constant memory on the device and
 * as plain arrays for the host build. */
#define CU_IQ4NL_VALUES                                                                            \
    { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 }
#define CU_MXFP4_VALUES                                                                            \
    { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 }
__constant__ static const int8_t cu_iq4nl_dev[16] = CU_IQ4NL_VALUES;
__constant__ static const int8_t cu_mxfp4_dev[16] = CU_MXFP4_VALUES;
static const int8_t cu_iq4nl_host[16] = CU_IQ4NL_VALUES;
static const int8_t cu_mxfp4_host[16] = CU_MXFP4_VALUES;

CU_HD int cu_iq4nl(int q) {
#ifdef __CUDA_ARCH__
    return cu_iq4nl_dev[q];
#else
    return cu_iq4nl_host[q];
#endif
}

CU_HD int cu_mxfp4(int q) {
#ifdef __CUDA_ARCH__
    return cu_mxfp4_dev[q];
#else
    return cu_mxfp4_host[q];
#endif
}

/* 2^(e - 128), as ts_e8m0_half. */
CU_HD float cu_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* 6-bit scale and min j (0..7) of a Q4_K / Q5_K scale array (ts_k4_scale_min). */
CU_HD void cu_k4_scale_min(int j, const unsigned char *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Signed 6-bit scale j (0..15) of a Q3_K block (ts_q3k_scales). */
CU_HD int cu_q3k_scale(int j, const unsigned char *packed) {
    int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* K-quant value: d*sc*q - dmin*m with src/quant's roundings. */
CU_HD float cu_kval(float d, int sc, float dmin, int m, int q) {
    return CU_FSUB(CU_FMUL(CU_FMUL(d, (float)sc), (float)q), CU_FMUL(dmin, (float)m));
}

/*
 * Dequantizes group g (32 consecutive elements, g = element / 32) of a row of block type T
 * starting at `row` into out[0..31]. For the 32-element types a group is one block; for the
 * K-quants one eighth of a super-block.
 */
template <int T> CU_HD void cu_dequant_group(const unsigned char *row, int64_t g, float out[32]) {
    if (T == CU_Q4_0 || T == CU_Q4_1 || T == CU_IQ4_NL || T == CU_MXFP4 || T == CU_Q5_0 ||
        T == CU_Q5_1 || T == CU_Q8_0) {
        const unsigned char *b = row + g * cu_block_bytes(T);
        if (T == CU_Q8_0) {
            float d = cu_h2f(b);
            for (int j = 0; j < 32; j++) {
                out[j] = CU_FMUL((float)(int8_t)b[2 + j], d);
            }
            return;
        }
        if (T == CU_MXFP4) {
            float d = cu_e8m0_half(b[0]);
            for (int j = 0; j < 16; j++) {
                out[j] = CU_FMUL((float)cu_mxfp4(b[1 + j] & 0xF), d);
                out[j + 16] = CU_FMUL((float)cu_mxfp4(b[1 + j] >> 4), d);
            }
            return;
        }
        float d = cu_h2f(b);
        if (T == CU_Q4_0 || T == CU_IQ4_NL) {
            for (int j = 0; j < 16; j++) {
                int lo = b[2 + j] & 0xF, hi = b[2 + j] >> 4;
                if (T == CU_Q4_0) {
                    out[j] = CU_FMUL((float)(lo - 8), d);
                    out[j + 16] = CU_FMUL((float)(hi - 8), d);
                } else {
                    out[j] = CU_FMUL(d, (float)cu_iq4nl(lo));
                    out[j + 16] = CU_FMUL(d, (float)cu_iq4nl(hi));
                }
            }
            return;
        }
        if (T == CU_Q4_1) {
            float m = cu_h2f(b + 2);
            for (int j = 0; j < 16; j++) {
                out[j] = CU_FADD(CU_FMUL((float)(b[4 + j] & 0xF), d), m);
                out[j + 16] = CU_FADD(CU_FMUL((float)(b[4 + j] >> 4), d), m);
            }
            return;
        }
        /* Q5_0 (d, qh[4], qs[16]) and Q5_1 (d, m, qh[4], qs[16]). */
        const unsigned char *qh8 = b + (T == CU_Q5_0 ? 2 : 4);
        const unsigned char *qs = qh8 + 4;
        uint32_t qh = qh8[0] | (qh8[1] << 8) | (qh8[2] << 16) | ((uint32_t)qh8[3] << 24);
        float m = T == CU_Q5_1 ? cu_h2f(b + 2) : 0.0f;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            if (T == CU_Q5_0) {
                out[j] = CU_FMUL((float)(lo - 16), d);
                out[j + 16] = CU_FMUL((float)(hi - 16), d);
            } else {
                out[j] = CU_FADD(CU_FMUL((float)lo, d), m);
                out[j + 16] = CU_FADD(CU_FMUL((float)hi, d), m);
            }
        }
        return;
    }
    /* K-quants: super-block sb, elements e = 32 * sub + l of it. */
    const unsigned char *b = row + (g / 8) * cu_block_bytes(T);
    const int sub = (int)(g % 8), h = sub / 4, s = sub % 4;
    if (T == CU_Q2_K) { /* scales[16], qs[64], d, dmin */
        float d = cu_h2f(b + 80), dmin = cu_h2f(b + 82);
        for (int l = 0; l < 32; l++) {
            int sc = b[2 * sub + l / 16];
            int q = (b[16 + 32 * h + l] >> (2 * s)) & 3;
            out[l] = cu_kval(d, sc & 0xF, dmin, sc >> 4, q);
        }
    } else if (T == CU_Q3_K) { /* hmask[32], qs[64], scales[12], d */
        float d = cu_h2f(b + 108);
        for (int l = 0; l < 32; l++) {
            int lo = (b[32 + 32 * h + l] >> (2 * s)) & 3;
            int high = (b[l] >> sub) & 1;
            out[l] =
                cu_kval(d, cu_q3k_scale(2 * sub + l / 16, b + 96), 0.0f, 0, lo - (high ? 0 : 4));
        }
    } else if (T == CU_Q4_K || T == CU_Q5_K) { /* d, dmin, scales[12], (qh[32]), qs[128] */
        float d = cu_h2f(b), dmin = cu_h2f(b + 2);
        int sc, m;
        cu_k4_scale_min(sub, b + 4, &sc, &m);
        const unsigned char *qs = b + (T == CU_Q4_K ? 16 : 48);
        for (int l = 0; l < 32; l++) {
            unsigned char byte = qs[32 * (sub / 2) + l];
            int q = (sub % 2) == 0 ? (byte & 0xF) : (byte >> 4);
            if (T == CU_Q5_K) {
                q |= ((b[16 + l] >> sub) & 1) << 4;
            }
            out[l] = cu_kval(d, sc, dmin, m, q);
        }
    } else { /* Q6_K: ql[128], qh[64], scales[16] (int8), d */
        float d = cu_h2f(b + 208);
        for (int l = 0; l < 32; l++) {
            unsigned char lo_byte = b[64 * h + 32 * (s & 1) + l];
            int lo = s < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
            int hi = (b[128 + 32 * h + l] >> (2 * s)) & 3;
            int sc = (int8_t)b[192 + 2 * sub + l / 16];
            out[l] = cu_kval(d, sc, 0.0f, 0, (lo | (hi << 4)) - 32);
        }
    }
}

/* Element i of a row of any readable type (slow path: one group per call). */
static __device__ float cu_row_elem(const char *row, int type, int64_t i) {
    if (!cu_is_block_type(type)) {
        return cu_loadf(row + i * cu_block_bytes(type), type);
    }
    float v[32];
    const unsigned char *r = (const unsigned char *)row;
    switch (type) {
    case CU_Q4_0:
        cu_dequant_group<CU_Q4_0>(r, i / 32, v);
        break;
    case CU_Q4_1:
        cu_dequant_group<CU_Q4_1>(r, i / 32, v);
        break;
    case CU_Q5_0:
        cu_dequant_group<CU_Q5_0>(r, i / 32, v);
        break;
    case CU_Q5_1:
        cu_dequant_group<CU_Q5_1>(r, i / 32, v);
        break;
    case CU_Q8_0:
        cu_dequant_group<CU_Q8_0>(r, i / 32, v);
        break;
    case CU_IQ4_NL:
        cu_dequant_group<CU_IQ4_NL>(r, i / 32, v);
        break;
    case CU_MXFP4:
        cu_dequant_group<CU_MXFP4>(r, i / 32, v);
        break;
    case CU_Q2_K:
        cu_dequant_group<CU_Q2_K>(r, i / 32, v);
        break;
    case CU_Q3_K:
        cu_dequant_group<CU_Q3_K>(r, i / 32, v);
        break;
    case CU_Q4_K:
        cu_dequant_group<CU_Q4_K>(r, i / 32, v);
        break;
    case CU_Q5_K:
        cu_dequant_group<CU_Q5_K>(r, i / 32, v);
        break;
    default:
        cu_dequant_group<CU_Q6_K>(r, i / 32, v);
        break;
    }
    return v[i % 32];
}

/* ---- ATTENTION's softmax merging (host-callable: test_cuda_dequant.cu checks the schedule) ----
 *
 * A partial result is (m, l, acc): the largest logit seen, the sum of exp(z - m) and the sum of
 * exp(z - m) v. cu_online_add folds one more logit z in and returns the factors the running
 * acc and the new value take: acc = acc * corr + e * v. cu_merge_weight is the factor a
 * partial with maximum m_part takes in a merge whose maximum is m_all (0 for an empty one). */
CU_HD void cu_online_add(float *m, float *l, float z, float *corr, float *e) {
    float m_new = fmaxf(*m, z);
    *corr = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    *e = expf(z - m_new);
    *l = *l * *corr + *e;
    *m = m_new;
}

CU_HD float cu_merge_weight(float m_part, float m_all) {
    return m_part == -INFINITY ? 0.0f : expf(m_part - m_all);
}

/* Sum over a warp in a fixed butterfly order (every lane gets the same total). */
static __device__ __forceinline__ float cu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

static __device__ __forceinline__ float cu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

/* Block-wide sum (blockDim.x a multiple of 32, at most 1024) in a fixed order; every thread
 * gets the total. `sh` holds 32 floats; the call ends with the block synchronized. */
static __device__ float cu_block_sum(float v, float *sh) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = cu_warp_sum(v);
    __syncthreads();
    if (lane == 0) {
        sh[warp] = v;
    }
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.0f;
    t = cu_warp_sum(t);
    __syncthreads();
    return t;
}

static __device__ float cu_block_max(float v, float *sh) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = cu_warp_max(v);
    __syncthreads();
    if (lane == 0) {
        sh[warp] = v;
    }
    __syncthreads();
    float t = lane < nw ? sh[lane] : -INFINITY;
    t = cu_warp_max(t);
    __syncthreads();
    return t;
}

/* Grid-stride loop bounds for element-wise kernels. */
static inline unsigned cu_grid_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535 * 8 ? 65535 * 8 : (b > 0 ? b : 1));
}

#endif /* TS_BACKENDS_CUDA_CUDA_COMMON_CUH */
