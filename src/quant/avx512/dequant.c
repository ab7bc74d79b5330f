/*
 * avx512/dequant.c — AVX-512 (BW/VL + VNNI) dequantization of Q4_0, Q4_1, Q8_0, Q4_K, Q5_K,
 * Q6_K, and Q5_K's dot product (the 32-element block types' gemm and dots: avx512/q32.c;
 * Q4_K's and Q6_K's: avx512/k.c).
 *
 * The K-quants use 512-bit registers to handle two sub-blocks per instruction. Dequantization
 * is bit-exact with the scalar reference; dot products have exact integer sums per block and
 * differ only in float accumulation order.
 */
#include "quant/simd_avx2.h"

/* ---- dequantization: 16 floats per store ---- */

static inline __m512 i8x16_to_ps(__m128i v) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
}

static inline __m512 u8x16_to_ps(__m128i v) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}

void ts_q_to_float_q4_0_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m512 d = _mm512_set1_ps(fp16_hw(b[i].d));
        const __m256i q = _mm256_sub_epi8(unpack_nibbles32(b[i].qs), _mm256_set1_epi8(8));
        _mm512_storeu_ps(dst, _mm512_mul_ps(i8x16_to_ps(_mm256_castsi256_si128(q)), d));
        _mm512_storeu_ps(dst + 16, _mm512_mul_ps(i8x16_to_ps(_mm256_extracti128_si256(q, 1)), d));
    }
}

void ts_q_to_float_q4_1_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m512 d = _mm512_set1_ps(fp16_hw(b[i].d));
        const __m512 m = _mm512_set1_ps(fp16_hw(b[i].m));
        const __m256i q = unpack_nibbles32(b[i].qs);
        const __m512 v0 = u8x16_to_ps(_mm256_castsi256_si128(q));
        const __m512 v1 = u8x16_to_ps(_mm256_extracti128_si256(q, 1));
        _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_mul_ps(v0, d), m));
        _mm512_storeu_ps(dst + 16, _mm512_add_ps(_mm512_mul_ps(v1, d), m));
    }
}

void ts_q_to_float_q8_0_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m512 d = _mm512_set1_ps(fp16_hw(b[i].d));
        const __m128i q0 = _mm_loadu_si128((const __m128i *)b[i].qs);
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(b[i].qs + 16));
        _mm512_storeu_ps(dst, _mm512_mul_ps(i8x16_to_ps(q0), d));
        _mm512_storeu_ps(dst + 16, _mm512_mul_ps(i8x16_to_ps(q1), d));
    }
}

/* 64 unsigned levels (two 32-element sub-blocks) as dl * q - ml, scales per half. */
static inline void store64_u8(__m512i q, float dl0, float ml0, float dl1, float ml1, float *dst) {
    const __m512 d0 = _mm512_set1_ps(dl0), m0 = _mm512_set1_ps(ml0);
    const __m512 d1 = _mm512_set1_ps(dl1), m1 = _mm512_set1_ps(ml1);
    const __m512 v0 = u8x16_to_ps(_mm512_extracti32x4_epi32(q, 0));
    const __m512 v1 = u8x16_to_ps(_mm512_extracti32x4_epi32(q, 1));
    const __m512 v2 = u8x16_to_ps(_mm512_extracti32x4_epi32(q, 2));
    const __m512 v3 = u8x16_to_ps(_mm512_extracti32x4_epi32(q, 3));
    _mm512_storeu_ps(dst + 0, _mm512_sub_ps(_mm512_mul_ps(v0, d0), m0));
    _mm512_storeu_ps(dst + 16, _mm512_sub_ps(_mm512_mul_ps(v1, d0), m0));
    _mm512_storeu_ps(dst + 32, _mm512_sub_ps(_mm512_mul_ps(v2, d1), m1));
    _mm512_storeu_ps(dst + 48, _mm512_sub_ps(_mm512_mul_ps(v3, d1), m1));
}

/* Low nibbles of 32 bytes in the low half, high nibbles in the high half. */
static inline __m512i split_nibbles64(const uint8_t *qs) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(raw, mask);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Bits 2c (low half) and 2c+1 (high half) of each qh byte, moved to bit 4. */
static inline __m512i q5_high64(const uint8_t *qh, int c) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)qh);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2 * c), one), 4);
    const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2 * c + 1), one), 4);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

void ts_q_to_float_q4_k_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q4_k *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        const float d = fp16_hw(b[i].d), dmin = fp16_hw(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t s0, m0, s1, m1;
            ts_k4_scale_min(2 * c, b[i].scales, &s0, &m0);
            ts_k4_scale_min(2 * c + 1, b[i].scales, &s1, &m1);
            store64_u8(split_nibbles64(b[i].qs + 32 * c), d * (float)s0, dmin * (float)m0,
                       d * (float)s1, dmin * (float)m1, dst + 64 * c);
        }
    }
}

void ts_q_to_float_q5_k_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q5_k *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        const float d = fp16_hw(b[i].d), dmin = fp16_hw(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t s0, m0, s1, m1;
            ts_k4_scale_min(2 * c, b[i].scales, &s0, &m0);
            ts_k4_scale_min(2 * c + 1, b[i].scales, &s1, &m1);
            const __m512i q =
                _mm512_or_si512(split_nibbles64(b[i].qs + 32 * c), q5_high64(b[i].qh, c));
            store64_u8(q, d * (float)s0, dmin * (float)m0, d * (float)s1, dmin * (float)m1,
                       dst + 64 * c);
        }
    }
}

/* Unsigned 6-bit levels of elements 128h + 64p .. +63 (p = 0: s = 0,1; p = 1: s = 2,3). */
static inline __m512i q6_levels64(const ts_block_q6_k *b, int h, int p) {
    const __m512i ql = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i nib =
        p == 0 ? _mm512_and_si512(ql, m4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    const __m256i mask2 = _mm256_set1_epi8(3);
    const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 4 * p), mask2);
    const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 4 * p + 2), mask2);
    const __m512i high = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
    return _mm512_or_si512(nib, _mm512_slli_epi16(high, 4));
}

void ts_q_to_float_q6_k_avx512(const void *src, float *dst, int64_t n) {
    const ts_block_q6_k *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        const float d = fp16_hw(b[i].d);
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 2; p++) {
                const __m512i q = _mm512_sub_epi8(q6_levels64(&b[i], h, p), _mm512_set1_epi8(32));
                const int8_t *sc = b[i].scales + 8 * h + 4 * p; /* four sub-blocks of 16 */
                float *out = dst + 128 * h + 64 * p;
                const __m128i parts[4] = {
                    _mm512_extracti32x4_epi32(q, 0), _mm512_extracti32x4_epi32(q, 1),
                    _mm512_extracti32x4_epi32(q, 2), _mm512_extracti32x4_epi32(q, 3)};
                for (int k = 0; k < 4; k++) {
                    const __m512 dl = _mm512_set1_ps(d * (float)sc[k]);
                    _mm512_storeu_ps(out + 16 * k, _mm512_mul_ps(i8x16_to_ps(parts[k]), dl));
                }
            }
        }
    }
}

/* ---- Q5_K's dot product (512-bit: two sub-blocks per instruction) ---- */

static inline int32_t k4_min_sum(const ts_block_q4_k *unused, const uint8_t m[8],
                                 const int16_t *bsums) {
    (void)unused;
    int32_t s = 0;
    for (int j = 0; j < 8; j++) {
        s += m[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    return s;
}

/* int16 scale vector: low 16 lanes s0, high 16 lanes s1. */
static inline __m512i scale_pair(int s0, int s1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((int16_t)s0)),
                              _mm256_set1_epi16((int16_t)s1), 1);
}

void ts_q_dot_q5_k_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q5_k *bx = x;
    const ts_block_q8_k *by = y;
    __m512 acc = _mm512_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            ts_k4_scale_min(j, bx[i].scales, &sc[j], &m[j]);
        }
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            const __m512i q =
                _mm512_or_si512(split_nibbles64(bx[i].qs + 32 * c), q5_high64(bx[i].qh, c));
            const __m512i yv = _mm512_loadu_si512((const void *)(by[i].qs + 64 * c));
            const __m512i p16 = _mm512_maddubs_epi16(q, yv);
            sumi = _mm512_add_epi32(sumi,
                                    _mm512_madd_epi16(p16, scale_pair(sc[2 * c], sc[2 * c + 1])));
        }
        const float d = fp16_hw(bx[i].d), dmin = fp16_hw(bx[i].dmin);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(d * by[i].d), acc);
        mins += dmin * by[i].d * (float)k4_min_sum(NULL, m, by[i].bsums);
    }
    *result = _mm512_reduce_add_ps(acc) - mins;
}
