/*
 * cuda_attn.cu — the paged-KV ops on the GPU: KV_STORE and ATTENTION.
 *
 * ATTENTION reads K and V through the block tables exactly as ir.h describes (key j of
 * sequence s in block table[j / bs, s] at offset j % bs, visible iff j <= pos and, with a
 * window, pos - j < window). Work is split over keys in chunks of CU_ATTN_SPLIT: attn_chunk
 * runs one block per (token, head, chunk) whose four warps take the chunk's keys in turn
 * with an online softmax, merge in warp order and write (max, sum, weighted values) to
 * scratch; attn_combine merges a token's chunks in chunk order, adds the sink's mass and
 * divides. The chunk size is fixed, so a token's result does not depend on the batch it is
 * in (decode and prefill tokens run the same code), and no atomics take part in any sum.
 */
#include "backends/cuda/cuda_common.cuh"

#define ATTN_WARPS   4
#define ACC_PER_LANE (CU_ATTN_MAX_HD / 32)

/* Element dd of K or V row (kv head kh, slot o of block blk): f32, f16 or Q8_0. */
static __device__ __forceinline__ float kv_elem(const cu_tensor &c, int64_t kh, int64_t o,
                                                int64_t blk, int64_t dd) {
    const char *row = c.data + kh * c.nb[1] + o * c.nb[2] + blk * c.nb[3];
    if (c.type == CU_Q8_0) {
        const unsigned char *b = (const unsigned char *)row + (dd / 32) * 34;
        return __fmul_rn((float)(int8_t)b[2 + dd % 32], cu_h2f(b));
    }
    return cu_loadf(row + dd * c.nb[0], c.type);
}

/* ---- KV_STORE ---- */

static __global__ void kv_store(cu_node n, cu_fault *fault) {
    const cu_tensor &d = n.dst, &rows = n.src[1], &slots = n.src[2];
    int64_t bs = d.ne[2], n_slots = d.ne[2] * d.ne[3];
    bool q8 = d.type == CU_Q8_0;
    int64_t per_row = q8 ? rows.ne[0] / 32 : rows.ne[0];
    int64_t total = per_row * rows.ne[1] * rows.ne[2];
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t u = k % per_row, h = (k / per_row) % rows.ne[1], t = k / (per_row * rows.ne[1]);
        int32_t slot = cu_loadi(slots, t, 0, 0);
        if (slot < 0) {
            continue;
        }
        if (slot >= n_slots) {
            cu_set_fault(fault, CU_FAULT_KV_SLOT, n.index, slot, t, n_slots);
            continue;
        }
        if (!q8) {
            float v = cu_loadf(cu_at(rows, u, h, t, 0), rows.type);
            cu_storef(cu_at(d, u, h, slot % bs, slot / bs), d.type, v);
            continue;
        }
        float x[32], amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            x[j] = cu_loadf(cu_at(rows, 32 * u + j, h, t, 0), rows.type);
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        }
        /* As src/quant's Q8_0 from_float: d = amax / 127, q = roundf(x / d) through 1 / d. */
        float dd = __fdiv_rn(amax, 127.0f);
        float id = dd != 0.0f ? __fdiv_rn(1.0f, dd) : 0.0f;
        unsigned char *b = (unsigned char *)cu_at(d, u, h, slot % bs, slot / bs);
        __half_raw hr = __half_raw(__float2half_rn(dd));
        b[0] = (unsigned char)(hr.x & 0xFF);
        b[1] = (unsigned char)(hr.x >> 8);
        for (int j = 0; j < 32; j++) {
            b[2 + j] = (unsigned char)(int8_t)roundf(__fmul_rn(x[j], id));
        }
    }
}

extern "C" int cu_launch_kv_store(const cu_env *env, const cu_node *n) {
    const cu_tensor &rows = n->src[1];
    int64_t total = rows.ne[0] * rows.ne[1] * rows.ne[2];
    if (total == 0) {
        return 0;
    }
    kv_store<<<cu_grid_for(total, 256), 256, 0, (cudaStream_t)env->stream>>>(*n, env->fault);
    return (int)cudaGetLastError();
}

/* ---- ATTENTION ---- */

/* One partial result: the chunk's max logit, sum of exp(z - max), and sum of exp(z - max) v. */
static __device__ __forceinline__ float *part_at(float *scratch, const cu_node &n, int64_t t,
                                                 int64_t h, int64_t c, int64_t n_split) {
    int64_t hd = n.src[0].ne[0], nh = n.src[0].ne[1];
    return scratch + ((t * nh + h) * n_split + c) * (hd + 2);
}

/* Checks token t's sequence; false (fault recorded) when it or its length is out of range. */
static __device__ bool token_seq(const cu_node &n, int64_t t, int64_t cap, int32_t *s, int32_t *len,
                                 cu_fault *fault) {
    const cu_tensor &seq = n.src[4], &lens = n.src[6];
    *s = cu_loadi(seq, t, 0, 0);
    if (*s < 0 || *s >= lens.ne[0]) {
        cu_set_fault(fault, CU_FAULT_SEQ, n.index, *s, t, lens.ne[0]);
        return false;
    }
    *len = cu_loadi(lens, *s, 0, 0);
    if (*len < 0 || *len > cap) {
        cu_set_fault(fault, CU_FAULT_SEQ_LEN, n.index, *len, *s, cap);
        return false;
    }
    return true;
}

/* Grid (token, head, chunk), ATTN_WARPS warps; dynamic shared memory: q [hd] and the warps'
 * partial results [ATTN_WARPS][hd + 2]. */
static __global__ void attn_chunk(cu_node n, float *scratch, int64_t n_split, cu_fault *fault) {
    extern __shared__ float sh[];
    const cu_tensor &q = n.src[0], &kc = n.src[1], &vc = n.src[2], &tab = n.src[3];
    const int64_t t = blockIdx.x, h = blockIdx.y, c = blockIdx.z;
    const int64_t hd = q.ne[0], nh = q.ne[1], nkv = kc.ne[1], bs = kc.ne[2];
    const int64_t cap = tab.ne[0] * bs, kh = h / (nh / nkv);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float scale = n.fp[0], softcap = n.fp[1];
    const int64_t window = n.ip[0];
    float *qs = sh, *wpart = sh + hd;
    float *out = part_at(scratch, n, t, h, c, n_split);

    int32_t s = 0, len = 0;
    bool ok = token_seq(n, t, cap, &s, &len, fault);
    int64_t p = cu_loadi(n.src[5], t, 0, 0);
    int64_t lo = window > 0 ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0;
    int64_t hi = p < (int64_t)len - 1 ? p : (int64_t)len - 1; /* inclusive */
    int64_t c_lo = c * CU_ATTN_SPLIT, c_hi = c_lo + CU_ATTN_SPLIT - 1;
    lo = lo > c_lo ? lo : c_lo;
    hi = hi < c_hi ? hi : c_hi;
    if (!ok) {
        hi = lo - 1;
    }
    for (int64_t dd = threadIdx.x; dd < hd; dd += blockDim.x) {
        qs[dd] = *(const float *)cu_at(q, dd, h, t, 0);
    }
    __syncthreads();

    float m = -INFINITY, l = 0.0f, acc[ACC_PER_LANE];
#pragma unroll
    for (int r = 0; r < ACC_PER_LANE; r++) {
        acc[r] = 0.0f;
    }
    for (int64_t j = lo + warp; j <= hi; j += ATTN_WARPS) {
        int32_t blk = cu_loadi(tab, j / bs, s, 0);
        if (blk < 0 || blk >= kc.ne[3]) {
            cu_set_fault(fault, CU_FAULT_BLOCK, n.index, blk, s, j / bs);
            continue;
        }
        float dot = 0.0f;
        for (int64_t dd = lane; dd < hd; dd += 32) {
            dot += qs[dd] * kv_elem(kc, kh, j % bs, blk, dd);
        }
        float z = cu_warp_sum(dot) * scale;
        if (softcap > 0.0f) {
            z = softcap * tanhf(z / softcap);
        }
        float corr, e;
        cu_online_add(&m, &l, z, &corr, &e);
#pragma unroll
        for (int r = 0; r < ACC_PER_LANE; r++) {
            int64_t dd = lane + 32 * r;
            if (dd < hd) {
                acc[r] = acc[r] * corr + e * kv_elem(vc, kh, j % bs, blk, dd);
            }
        }
    }
    /* Merge the warps in warp order. */
    float *mine = wpart + warp * (hd + 2);
    if (lane == 0) {
        mine[0] = m;
        mine[1] = l;
    }
#pragma unroll
    for (int r = 0; r < ACC_PER_LANE; r++) {
        if (lane + 32 * r < hd) {
            mine[2 + lane + 32 * r] = acc[r];
        }
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int w = 0; w < ATTN_WARPS; w++) {
        mx = fmaxf(mx, wpart[w * (hd + 2)]);
    }
    for (int64_t dd = threadIdx.x; dd < hd + 2; dd += blockDim.x) {
        float v = 0.0f;
        if (dd == 0) {
            v = mx;
        } else {
            for (int w = 0; w < ATTN_WARPS; w++) {
                v += wpart[w * (hd + 2) + dd] * cu_merge_weight(wpart[w * (hd + 2)], mx);
            }
        }
        out[dd] = v;
    }
}

/* Grid (token, head): merges the chunks in order, adds the sink, writes the output row. */
static __global__ void attn_combine(cu_node n, const float *scratch, int64_t n_split) {
    const cu_tensor &q = n.src[0], &sinks = n.src[7], &d = n.dst;
    const int64_t t = blockIdx.x, h = blockIdx.y, hd = q.ne[0];
    const float *base = part_at((float *)scratch, n, t, h, 0, n_split);
    float mx = -INFINITY;
    for (int64_t c = 0; c < n_split; c++) {
        mx = fmaxf(mx, base[c * (hd + 2)]);
    }
    float sink =
        sinks.data != NULL ? cu_loadf(sinks.data + h * sinks.nb[0], sinks.type) : -INFINITY;
    mx = fmaxf(mx, sink);
    float sum = 0.0f;
    for (int64_t c = 0; c < n_split; c++) {
        sum += base[c * (hd + 2) + 1] * cu_merge_weight(base[c * (hd + 2)], mx);
    }
    if (sink != -INFINITY) {
        sum += expf(sink - mx);
    }
    for (int64_t dd = threadIdx.x; dd < hd; dd += blockDim.x) {
        float v = 0.0f;
        for (int64_t c = 0; c < n_split; c++) {
            v += base[c * (hd + 2) + 2 + dd] * cu_merge_weight(base[c * (hd + 2)], mx);
        }
        cu_storef(cu_at(d, dd, h, t, 0), d.type, sum > 0.0f ? v / sum : 0.0f);
    }
}

extern "C" int cu_launch_attention(const cu_env *env, const cu_node *n) {
    const cu_tensor &q = n->src[0], &k = n->src[1], &tab = n->src[3];
    int64_t hd = q.ne[0], nh = q.ne[1], n_tok = q.ne[2];
    int64_t cap = tab.ne[0] * k.ne[2];
    int64_t n_split = (cap + CU_ATTN_SPLIT - 1) / CU_ATTN_SPLIT;
    if (n_tok == 0 || nh == 0) {
        return 0;
    }
    size_t need = (size_t)(n_tok * nh * n_split * (hd + 2)) * sizeof(float);
    if (hd > CU_ATTN_MAX_HD || need > env->scratch_size || n_split > 65535 || nh > 65535) {
        return (int)(hd > CU_ATTN_MAX_HD ? cudaErrorNotSupported : cudaErrorMemoryAllocation);
    }
    cudaStream_t s = (cudaStream_t)env->stream;
    size_t smem = (size_t)(hd + ATTN_WARPS * (hd + 2)) * sizeof(float);
    dim3 g1((unsigned)n_tok, (unsigned)nh, (unsigned)(n_split > 0 ? n_split : 1));
    if (n_split > 0) {
        attn_chunk<<<g1, ATTN_WARPS * 32, smem, s>>>(*n, (float *)env->scratch, n_split,
                                                     env->fault);
    }
    dim3 g2((unsigned)n_tok, (unsigned)nh);
    attn_combine<<<g2, 128, 0, s>>>(*n, (const float *)env->scratch, n_split);
    return (int)cudaGetLastError();
}
