/*
 * avx2/iq4xs.c — AVX2 kernels of IQ4_XS against Q8_K: dequantization (bit-exact with the
 * scalar one), the dot product, and a gemm tile of one weight row against up to four
 * activation rows. avxvnni/iq4xs.c builds this file again with AVX-VNNI (TS_AVXVNNI).
 *
 * A super-block's 128 index bytes are four chunks of 32: chunk c holds sub-blocks 2c (bytes
 * 0-15) and 2c+1 (bytes 16-31), low nibbles the sub-block's elements 0-15, high nibbles 16-31.
 * So a chunk's low nibbles, looked up in IQ4_NL's table, meet the activations at 64c + 0..15
 * and 64c + 32..47 (one 128-bit lane each), the high nibbles those at 64c + 16..31 and
 * 64c + 48..63. The integer work is exact: |level| <= 127 and |q8| <= 127, so a vpmaddubsw
 * pair sum (after the sign trick) is at most 32258, and the sub-block scale (|ls| <= 32) is
 * applied by vpmaddwd (or vpdpwssd) into int32 lanes, at most 16.5e6 per super-block. Each
 * (weight row, activation row) pair then does the same float operations in the dot and in
 * every gemm tile: per super-block one fused multiply-add of the int32 lanes, converted, by
 * d * d_y into eight f32 lanes, summed at the end. So gemm gives vec_dot's bits whatever the
 * batch, and the AVX-VNNI build gives the AVX2 bits.
 */
#include <string.h>

#include "quant/simd_avx2.h"

#define IQ4XS_MAX_COLS 4

/* The eight signed sub-block scales (ls - 32) as int16 lanes: low nibbles of scales_l
 * interleaved in order, the high bit pairs of scales_h moved to the top of each 16-bit lane
 * by a multiply (h << (14 - 2j)) and down by 14. */
static inline __m128i iq4xs_scales16(const ts_block_iq4_xs *b) {
    uint32_t l;
    memcpy(&l, b->scales_l, sizeof l);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i x = _mm_cvtsi32_si128((int)l);
    const __m128i nib =
        _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
    const __m128i shifts =
        _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1);
    const __m128i hi =
        _mm_srli_epi16(_mm_mullo_epi16(_mm_set1_epi16((short)b->scales_h), shifts), 14);
    return _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(nib), _mm_slli_epi16(hi, 4)),
                         _mm_set1_epi16(32));
}

static inline __attribute__((always_inline)) void
iq4xs_tile(int64_t n, const void *w, const void *const *a, int nc, float *out) {
    const ts_block_iq4_xs *x = w;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[IQ4XS_MAX_COLS];
    for (int j = 0; j < nc; j++) {
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n; i++) {
        __m256i lo[4], hi[4], sc[4];
        const __m256i s16 = _mm256_broadcastsi128_si256(iq4xs_scales16(&x[i]));
        for (int c = 0; c < 4; c++) {
            const __m256i bytes = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            lo[c] = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, m4));
            hi[c] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4));
            /* lane 0: scale 2c in every int16, lane 1: scale 2c + 1 */
            const char b0 = (char)(4 * c), b1 = (char)(4 * c + 1), b2 = (char)(4 * c + 2),
                       b3 = (char)(4 * c + 3);
            sc[c] = _mm256_shuffle_epi8(s16,
                                        _mm256_setr_epi8(b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0,
                                                         b1, b0, b1, b0, b1, b2, b3, b2, b3, b2, b3,
                                                         b2, b3, b2, b3, b2, b3, b2, b3, b2, b3));
        }
        const float dx = fp16_hw(x[i].d);
        for (int j = 0; j < nc; j++) {
            const ts_block_q8_k *y = (const ts_block_q8_k *)a[j] + i;
            __m256i s = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                const __m256i ya = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c));
                const __m256i yb = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32));
                const __m256i ylo = _mm256_permute2x128_si256(ya, yb, 0x20);
                const __m256i yhi = _mm256_permute2x128_si256(ya, yb, 0x31);
                const __m256i plo = _mm256_maddubs_epi16(_mm256_sign_epi8(lo[c], lo[c]),
                                                         _mm256_sign_epi8(ylo, lo[c]));
                const __m256i phi = _mm256_maddubs_epi16(_mm256_sign_epi8(hi[c], hi[c]),
                                                         _mm256_sign_epi8(yhi, hi[c]));
                s = dot2_i16(s, plo, sc[c]);
                s = dot2_i16(s, phi, sc[c]);
            }
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx * y->d), acc[j]);
        }
    }
    for (int j = 0; j < nc; j++) {
        out[j] = hsum_ps256(acc[j]);
    }
}

void ts_q_dot_iq4_xs_avx2(int64_t n, float *result, const void *x, const void *y) {
    const void *ap[1] = {y};
    iq4xs_tile(n / TS_QK_K, x, ap, 1, result);
}

static void iq4xs_rows(int64_t n, const void *w, const void *const *a, int nc, float *out) {
    iq4xs_tile(n, w, a, nc, out);
}

static const ts_q_row_tile k_iq4xs_rows = {.kdiv = TS_QK_K, .tile = iq4xs_rows};

void ts_q_gemm_iq4_xs_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    ts_q_row_tile_gemm(&k_iq4xs_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

/* Dequantization has no dot step: the AVX-VNNI build leaves it out and its level uses this. */
#ifndef TS_AVXVNNI
void ts_q_to_float_iq4_xs_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_iq4_xs *b = src;
    const __m128i table = _mm_loadu_si128((const __m128i *)ts_iq4nl_values);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        const float d = fp16_hw(b[i].d);
        for (int j = 0; j < 8; j++, dst += 32) {
            const __m256 dl = _mm256_set1_ps(d * (float)ts_iq4xs_scale(&b[i], j));
            const __m128i bytes = _mm_loadu_si128((const __m128i *)(b[i].qs + 16 * j));
            const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(bytes, m4));
            const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
            _mm256_storeu_ps(dst, _mm256_mul_ps(dl, i8x8_to_ps(lo)));
            _mm256_storeu_ps(dst + 8, _mm256_mul_ps(dl, i8x8_to_ps(_mm_srli_si128(lo, 8))));
            _mm256_storeu_ps(dst + 16, _mm256_mul_ps(dl, i8x8_to_ps(hi)));
            _mm256_storeu_ps(dst + 24, _mm256_mul_ps(dl, i8x8_to_ps(_mm_srli_si128(hi, 8))));
        }
    }
}
#endif
