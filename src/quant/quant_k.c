/*
 * quant_k.c — scalar reference dequantization and dot products of the K-quants
 * (Q2_K .. Q6_K, all against Q8_K activations) and of Q8_K itself.
 *
 * Within a 256-value super-block, element e belongs to sub-block e/16 (Q2_K, Q3_K, Q6_K) or
 * e/32 (Q4_K, Q5_K); the bit packing is described with each block struct in
 * quant_internal.h. Dot products sum integer products per sub-block and apply the scales
 * once per sub-block; the per-16 sums of the activation quants (bsums) carry the min terms.
 */
#include "quant/quant_internal.h"

/* Unpacked signed levels of one super-block, plus integer scales and mins per sub-block. */
typedef struct k_unpacked {
    int8_t q[TS_QK_K];
    int sc[16];
    int m[16];
    float d, dmin;
} k_unpacked;

static void unpack_q2_k(const ts_block_q2_k *b, k_unpacked *u) {
    for (int e = 0; e < TS_QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        u->q[e] = (int8_t)((b->qs[32 * h + l] >> (2 * s)) & 3);
    }
    for (int j = 0; j < 16; j++) {
        u->sc[j] = b->scales[j] & 0xF;
        u->m[j] = b->scales[j] >> 4;
    }
    u->d = ts_fp16_load(b->d);
    u->dmin = ts_fp16_load(b->dmin);
}

static void unpack_q3_k(const ts_block_q3_k *b, k_unpacked *u) {
    for (int e = 0; e < TS_QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        int lo = (b->qs[32 * h + l] >> (2 * s)) & 3;
        int high = (b->hmask[l] >> (e / 32)) & 1;
        u->q[e] = (int8_t)(lo - (high ? 0 : 4));
    }
    int8_t sc[16];
    ts_q3k_scales(b->scales, sc);
    for (int j = 0; j < 16; j++) {
        u->sc[j] = sc[j];
        u->m[j] = 0;
    }
    u->d = ts_fp16_load(b->d);
    u->dmin = 0.0f;
}

static void unpack_q4_k(const ts_block_q4_k *b, k_unpacked *u) {
    for (int e = 0; e < TS_QK_K; e++) {
        int c = e / 64, l = e % 32;
        uint8_t byte = b->qs[32 * c + l];
        u->q[e] = (int8_t)((e % 64) < 32 ? (byte & 0xF) : (byte >> 4));
    }
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ts_k4_scale_min(j, b->scales, &sc, &m);
        u->sc[j] = sc;
        u->m[j] = m;
    }
    u->d = ts_fp16_load(b->d);
    u->dmin = ts_fp16_load(b->dmin);
}

static void unpack_q5_k(const ts_block_q5_k *b, k_unpacked *u) {
    for (int e = 0; e < TS_QK_K; e++) {
        int c = e / 64, l = e % 32;
        uint8_t byte = b->qs[32 * c + l];
        int lo = (e % 64) < 32 ? (byte & 0xF) : (byte >> 4);
        int high = (b->qh[l] >> (e / 32)) & 1;
        u->q[e] = (int8_t)(lo | (high << 4));
    }
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ts_k4_scale_min(j, b->scales, &sc, &m);
        u->sc[j] = sc;
        u->m[j] = m;
    }
    u->d = ts_fp16_load(b->d);
    u->dmin = ts_fp16_load(b->dmin);
}

static void unpack_q6_k(const ts_block_q6_k *b, k_unpacked *u) {
    for (int e = 0; e < TS_QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        uint8_t lo_byte = b->ql[64 * h + 32 * (s & 1) + l];
        int lo = s < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
        int hi = (b->qh[32 * h + l] >> (2 * s)) & 3;
        u->q[e] = (int8_t)((lo | (hi << 4)) - 32);
    }
    for (int j = 0; j < 16; j++) {
        u->sc[j] = b->scales[j];
        u->m[j] = 0;
    }
    u->d = ts_fp16_load(b->d);
    u->dmin = 0.0f;
}

/* x = d * sc * q - dmin * m, with sub-blocks of `sub` elements. */
static void dequant_unpacked(const k_unpacked *u, int sub, float *dst) {
    for (int j = 0; j < TS_QK_K / sub; j++) {
        const float dl = u->d * (float)u->sc[j];
        const float ml = u->dmin * (float)u->m[j];
        for (int l = 0; l < sub; l++) {
            dst[sub * j + l] = dl * (float)u->q[sub * j + l] - ml;
        }
    }
}

/* Dot of one unpacked super-block with one Q8_K block. */
static float dot_unpacked(const k_unpacked *u, int sub, const ts_block_q8_k *y) {
    int32_t sum_q = 0; /* sum over sub-blocks of sc * sum(q * y) */
    int32_t sum_m = 0; /* sum over sub-blocks of m * sum(y) */
    for (int j = 0; j < TS_QK_K / sub; j++) {
        int32_t s = 0;
        for (int l = 0; l < sub; l++) {
            s += u->q[sub * j + l] * y->qs[sub * j + l];
        }
        sum_q += u->sc[j] * s;
        int32_t ysum = 0;
        for (int g = sub * j / 16; g < sub * (j + 1) / 16; g++) {
            ysum += y->bsums[g];
        }
        sum_m += u->m[j] * ysum;
    }
    return y->d * (u->d * (float)sum_q - u->dmin * (float)sum_m);
}

#define K_KERNELS(T, BLOCK, SUB)                                                                   \
    void ts_q_to_float_##T##_scalar(const void *src, float *dst, int64_t n) {                      \
        assert(n % TS_QK_K == 0);                                                                  \
        const BLOCK *b = src;                                                                      \
        k_unpacked u;                                                                              \
        for (int64_t i = 0; i < n / TS_QK_K; i++) {                                                \
            unpack_##T(&b[i], &u);                                                                 \
            dequant_unpacked(&u, SUB, dst + i * TS_QK_K);                                          \
        }                                                                                          \
    }                                                                                              \
    void ts_q_dot_##T##_scalar(int64_t n, float *result, const void *x, const void *y) {           \
        assert(n % TS_QK_K == 0);                                                                  \
        const BLOCK *bx = x;                                                                       \
        const ts_block_q8_k *by = y;                                                               \
        k_unpacked u;                                                                              \
        float sum = 0.0f;                                                                          \
        for (int64_t i = 0; i < n / TS_QK_K; i++) {                                                \
            unpack_##T(&bx[i], &u);                                                                \
            sum += dot_unpacked(&u, SUB, &by[i]);                                                  \
        }                                                                                          \
        *result = sum;                                                                             \
    }

K_KERNELS(q2_k, ts_block_q2_k, 16)
K_KERNELS(q3_k, ts_block_q3_k, 16)
K_KERNELS(q4_k, ts_block_q4_k, 32)
K_KERNELS(q5_k, ts_block_q5_k, 32)
K_KERNELS(q6_k, ts_block_q6_k, 16)

void ts_q_to_float_q8_k_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    const ts_block_q8_k *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        for (int j = 0; j < TS_QK_K; j++) {
            dst[j] = b[i].d * (float)b[i].qs[j];
        }
    }
}

/* Q8_K is an activation type; as a "weight" it pairs with itself. */
void ts_q_dot_q8_k_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK_K == 0);
    const ts_block_q8_k *bx = x;
    const ts_block_q8_k *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        int32_t s = 0;
        for (int j = 0; j < TS_QK_K; j++) {
            s += bx[i].qs[j] * by[i].qs[j];
        }
        sum += (bx[i].d * by[i].d) * (float)s;
    }
    *result = sum;
}
