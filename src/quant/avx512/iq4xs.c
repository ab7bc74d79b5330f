/*
 * avx512/iq4xs.c — IQ4_XS against Q8_K with AVX-512 BW + VNNI: the dot product and a gemm
 * tile of one weight row against up to four activation rows.
 *
 * A super-block is two halves of 64 index bytes; half h holds sub-blocks 4h..4h+3, one per
 * 128-bit lane (low nibbles the sub-block's elements 0-15, high nibbles 16-31). Looked up in
 * IQ4_NL's table, the low nibbles meet the activations' bytes 32s + 0..15 of each sub-block s,
 * gathered from two 64-byte loads by one vshufi32x4, the high nibbles bytes 32s + 16..31 by
 * another. Products are exact as in avx2/iq4xs.c (sign trick, pair sums <= 32258), the
 * sub-block scale (|ls| <= 32) enters by one vpdpwssd per half and nibble. Per (weight row,
 * activation row) and super-block, the dot and every gemm tile do one fused multiply-add of
 * the sixteen int32 lanes, converted, by d * d_y, and sum the lanes at the end: gemm gives
 * vec_dot's bits at any batch (tests/quant/test_avx512_emu.c).
 */
#include "quant/simd_avx2.h"

#define IQ4XS_MAX_COLS 4

static inline __attribute__((always_inline)) __m512i iq4xs_scales(const ts_block_iq4_xs *b, int h) {
    const int s = 4 * h;
    const __m256i s01 = _mm256_set_m128i(_mm_set1_epi16((short)ts_iq4xs_scale(b, s + 1)),
                                         _mm_set1_epi16((short)ts_iq4xs_scale(b, s)));
    const __m256i s23 = _mm256_set_m128i(_mm_set1_epi16((short)ts_iq4xs_scale(b, s + 3)),
                                         _mm_set1_epi16((short)ts_iq4xs_scale(b, s + 2)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(s01), s23, 1);
}

/* acc + per int32 lane sc * (pair sums of q * y), q signed levels, y signed bytes. */
static inline __attribute__((always_inline)) __m512i iq4xs_step(__m512i acc, __m512i q, __m512i y,
                                                                __m512i sc) {
    const __mmask64 neg = _mm512_movepi8_mask(q);
    const __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(_mm512_abs_epi8(q), sy), sc);
}

static inline __attribute__((always_inline)) void
iq4xs_tile(int64_t n, const void *w, const void *const *a, int nc, float *out) {
    const ts_block_iq4_xs *x = w;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ts_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[IQ4XS_MAX_COLS];
    for (int j = 0; j < nc; j++) {
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n; i++) {
        __m512i lo[2], hi[2], sc[2];
        for (int h = 0; h < 2; h++) {
            const __m512i bytes = _mm512_loadu_si512((const void *)(x[i].qs + 64 * h));
            lo[h] = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, m4));
            hi[h] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), m4));
            sc[h] = iq4xs_scales(&x[i], h);
        }
        const float dx = fp16_hw(x[i].d);
        for (int j = 0; j < nc; j++) {
            const ts_block_q8_k *y = (const ts_block_q8_k *)a[j] + i;
            __m512i s = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const __m512i y0 = _mm512_loadu_si512((const void *)(y->qs + 128 * h));
                const __m512i y1 = _mm512_loadu_si512((const void *)(y->qs + 128 * h + 64));
                s = iq4xs_step(s, lo[h], _mm512_shuffle_i32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                               sc[h]);
                s = iq4xs_step(s, hi[h], _mm512_shuffle_i32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)),
                               sc[h]);
            }
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(dx * y->d), acc[j]);
        }
    }
    for (int j = 0; j < nc; j++) {
        const __m256 h =
            _mm256_add_ps(_mm512_castps512_ps256(acc[j]),
                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j]), 1)));
        out[j] = hsum_ps256(h);
    }
}

void ts_q_dot_iq4_xs_avx512(int64_t n, float *result, const void *x, const void *y) {
    const void *ap[1] = {y};
    iq4xs_tile(n / TS_QK_K, x, ap, 1, result);
}

static void iq4xs_rows(int64_t n, const void *w, const void *const *a, int nc, float *out) {
    iq4xs_tile(n, w, a, nc, out);
}

static const ts_q_row_tile k_iq4xs_rows = {.kdiv = TS_QK_K, .tile = iq4xs_rows};

void ts_q_gemm_iq4_xs_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                             size_t ldw, const void *a, size_t lda) {
    ts_q_row_tile_gemm(&k_iq4xs_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}
