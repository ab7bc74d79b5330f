/*
 * avx2/k.c — AVX2 kernels of the K-quants without a dot product: Q8_K activation quantization
 * (bit-exact with the scalar one) and Q4_K / Q5_K / Q6_K dequantization (bit-exact). The gemm
 * and dot products of Q4_K, Q5_K and Q6_K, eight rows in the lanes, are in avx2/k8.c; the
 * AVX-VNNI level uses these functions as they are.
 */
#include <math.h>
#include <string.h>

#include "quant/simd_avx2.h"

/* ---- unpacking ---- */

static inline void k4_scales(const uint8_t *packed, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 8; j++) {
        ts_k4_scale_min(j, packed, &sc[j], &m[j]);
    }
}

static inline __m256i q5_high(__m256i qh, int bit) {
    /* bit `bit` of every byte, moved to bit 4 */
    const __m256i one = _mm256_set1_epi8(1);
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, bit), one), 4);
}

/* The 32 unsigned 6-bit levels (0..63) of elements 128h + 32s .. +31. */
static inline __m256i q6_levels(const ts_block_q6_k *b, int h, int s) {
    const __m256i mask4 = _mm256_set1_epi8(0x0F), mask2 = _mm256_set1_epi8(0x03);
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (s & 1)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    const __m256i lo =
        s < 2 ? _mm256_and_si256(ql, mask4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), mask4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), mask2);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

/* ---- Q8_K activation quantization and dequantization ---- */

void ts_q_from_float_q8_k_avx2(const float *src, void *dst, int64_t n) {
    ts_block_q8_k *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        __m256 amaxv = _mm256_setzero_ps();
        for (int k = 0; k < TS_QK_K; k += 8) {
            amaxv = _mm256_max_ps(amaxv, _mm256_andnot_ps(sign, _mm256_loadu_ps(src + k)));
        }
        const float amax = hmax_ps256(amaxv);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* The signed extreme is the first element whose magnitude is the maximum, as in the
         * scalar scan. */
        float max = 0.0f;
        for (int k = 0; k < TS_QK_K; k++) {
            if (fabsf(src[k]) == amax) {
                max = src[k];
                break;
            }
        }
        const float is = -127.0f / max;
        const __m256 isv = _mm256_set1_ps(is);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int k = 0; k < TS_QK_K; k += 32) {
            __m256i r[4];
            for (int t = 0; t < 4; t++) {
                /* cvtps rounds to nearest even under the default MXCSR, like the scalar
                 * magic-number rounding. */
                __m256i v =
                    _mm256_cvtps_epi32(_mm256_mul_ps(isv, _mm256_loadu_ps(src + k + 8 * t)));
                r[t] = _mm256_min_epi32(v, cap);
            }
            _mm256_storeu_si256((__m256i *)(b[i].qs + k),
                                pack_i32x32_to_i8(r[0], r[1], r[2], r[3]));
        }
        for (int g = 0; g < 16; g++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(b[i].qs + 16 * g));
            __m128i s16 = _mm_maddubs_epi16(_mm_set1_epi8(1), q);
            __m128i s32 = _mm_madd_epi16(s16, _mm_set1_epi16(1));
            s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0x4E));
            s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0xB1));
            b[i].bsums[g] = (int16_t)_mm_cvtsi128_si32(s32);
        }
        b[i].d = 1.0f / is;
    }
}

/* Stores 32 unsigned levels as dl * q - ml. */
static inline void store_levels_u8(__m256i q, float dl, float ml, float *dst) {
    const __m256 d = _mm256_set1_ps(dl), mm = _mm256_set1_ps(ml);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(v, d), mm));
    }
}

/* 32 signed levels as dl * q. */
static inline void store_levels_i8(__m256i q, float dl, float *dst) {
    const __m256 d = _mm256_set1_ps(dl);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(i8x8_to_ps(parts[k]), d));
    }
}

void ts_q_to_float_q4_k_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q4_k *b = src;
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        uint8_t sc[8], m[8];
        k4_scales(b[i].scales, sc, m);
        const float d = fp16_hw(b[i].d), dmin = fp16_hw(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(raw, mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
            store_levels_u8(lo, d * (float)sc[2 * c], dmin * (float)m[2 * c], dst + 64 * c);
            store_levels_u8(hi, d * (float)sc[2 * c + 1], dmin * (float)m[2 * c + 1],
                            dst + 64 * c + 32);
        }
    }
}

void ts_q_to_float_q5_k_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q5_k *b = src;
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        uint8_t sc[8], m[8];
        k4_scales(b[i].scales, sc, m);
        const float d = fp16_hw(b[i].d), dmin = fp16_hw(b[i].dmin);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)b[i].qh);
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, mask), q5_high(qh, 2 * c));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), mask),
                                               q5_high(qh, 2 * c + 1));
            store_levels_u8(lo, d * (float)sc[2 * c], dmin * (float)m[2 * c], dst + 64 * c);
            store_levels_u8(hi, d * (float)sc[2 * c + 1], dmin * (float)m[2 * c + 1],
                            dst + 64 * c + 32);
        }
    }
}

void ts_q_to_float_q6_k_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q6_k *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++, dst += TS_QK_K) {
        const float d = fp16_hw(b[i].d);
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 4; s++) {
                const __m256i q = _mm256_sub_epi8(q6_levels(&b[i], h, s), _mm256_set1_epi8(32));
                const int j = 8 * h + 2 * s; /* sub-blocks j, j+1 */
                float *out = dst + 128 * h + 32 * s;
                const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
                const __m256 d0 = _mm256_set1_ps(d * (float)b[i].scales[j]);
                const __m256 d1 = _mm256_set1_ps(d * (float)b[i].scales[j + 1]);
                _mm256_storeu_ps(out + 0, _mm256_mul_ps(i8x8_to_ps(lo), d0));
                _mm256_storeu_ps(out + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), d0));
                _mm256_storeu_ps(out + 16, _mm256_mul_ps(i8x8_to_ps(hi), d1));
                _mm256_storeu_ps(out + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), d1));
            }
        }
    }
}
