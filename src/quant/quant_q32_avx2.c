/*
 * quant_q32_avx2.c — AVX2 kernels of the 32-element block types.
 *
 * Dequantization and activation quantization are bit-exact with the scalar reference (the
 * same single roundings in the same order; rounding half away from zero done exactly).
 * Dot products compute each block's integer sum exactly and differ from the scalar
 * reference only in the order the per-block float terms are added.
 *
 * The dot products and gemm of Q4_0, Q4_1 and Q5_0 are in quant_x8_avx2.c, those of Q8_0 in
 * quant_q32_gemm_avx2.c (a type's dot and gemm must round exactly alike, so they live
 * together).
 */
#include "quant/simd_avx2.h"

/* ---- dequantization ---- */

void ts_q_to_float_q4_0_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m256 d = _mm256_set1_ps(fp16_hw(b[i].d));
        const __m256i q = _mm256_sub_epi8(unpack_nibbles32(b[i].qs), _mm256_set1_epi8(8));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(dst + 0, _mm256_mul_ps(i8x8_to_ps(lo), d));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), d));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(i8x8_to_ps(hi), d));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), d));
    }
}

void ts_q_to_float_q4_1_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m256 d = _mm256_set1_ps(fp16_hw(b[i].d));
        const __m256 m = _mm256_set1_ps(fp16_hw(b[i].m));
        const __m256i q = unpack_nibbles32(b[i].qs);
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        /* Multiply then add, not FMA: the scalar reference rounds twice. */
        _mm256_storeu_ps(dst + 0, _mm256_add_ps(_mm256_mul_ps(i8x8_to_ps(lo), d), m));
        _mm256_storeu_ps(dst + 8,
                         _mm256_add_ps(_mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), d), m));
        _mm256_storeu_ps(dst + 16, _mm256_add_ps(_mm256_mul_ps(i8x8_to_ps(hi), d), m));
        _mm256_storeu_ps(dst + 24,
                         _mm256_add_ps(_mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), d), m));
    }
}

void ts_q_to_float_q8_0_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m256 d = _mm256_set1_ps(fp16_hw(b[i].d));
        for (int k = 0; k < 4; k++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(b[i].qs + 8 * k));
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(i8x8_to_ps(q), d));
        }
    }
}

/* ---- activation quantization (exact) ---- */

/* Quantizes 32 floats with scale 1/id; returns the int8 vector. */
static inline __m256i quantize32(const float *x, float *d_out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    const float d = hmax_ps256(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i r[4];
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_cvttps_epi32(round_away_ps256(_mm256_mul_ps(v[k], idv)));
    }
    *d_out = d;
    return pack_i32x32_to_i8(r[0], r[1], r[2], r[3]);
}

void ts_q_from_float_q8_0_avx2(const float *src, void *dst, int64_t n) {
    ts_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float d;
        __m256i q = quantize32(src, &d);
        b[i].d = ts_f32_to_f16(d);
        _mm256_storeu_si256((__m256i *)b[i].qs, q);
    }
}

void ts_q_from_float_q8_1_avx2(const float *src, void *dst, int64_t n) {
    ts_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float d;
        __m256i q = quantize32(src, &d);
        b[i].d = ts_f32_to_f16(d);
        _mm256_storeu_si256((__m256i *)b[i].qs, q);
        /* Sum of the 32 quants: widen through maddubs with ones (|q| <= 127). */
        const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
        const int32_t sum = hsum_epi32_256(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
        b[i].s = ts_f32_to_f16((float)sum * d);
    }
}

/* ---- dot products (Q4_0, Q4_1, Q5_0: quant_x8_avx2.c; Q8_0: quant_q32_gemm_avx2.c) ---- */

void ts_q_dot_iq4_nl_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_iq4_nl *bx = x;
    const ts_block_q8_0 *by = y;
    const __m128i table = _mm_loadu_si128((const __m128i *)ts_iq4nl_values);
    const __m256i table2 = _mm256_set_m128i(table, table);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const __m256i q = _mm256_shuffle_epi8(table2, unpack_nibbles32(bx[i].qs));
        const __m256i yv = _mm256_loadu_si256((const __m256i *)by[i].qs);
        const __m256 s = _mm256_set1_ps(fp16_hw(bx[i].d) * fp16_hw(by[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_i8_i8(q, yv)), s, acc);
    }
    *result = hsum_ps256(acc);
}
