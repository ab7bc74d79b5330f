/*
 * quant_q32_gemm_avx2.c — Q8_0 with one activation row (gemv) and its dot product, AVX2. With
 * several activation rows Q8_0 runs the rows-in-lanes gemm of quant_x8_avx2.c, as Q4_0, Q4_1
 * and Q5_0 do.
 *
 * The gemv takes four weight rows per tile: the four 8-lane int32 block products are folded by
 * a hadd tree into one vector [r0 r1 r2 r3 | r0 r1 r2 r3] (two half sums per row), so
 * converting to float, scaling by d_w * d_a and accumulating cost one instruction each per
 * block for four rows. The next tile's rows are prefetched meanwhile. The products use the
 * sign trick (Q8_0 quants are in -127..127, as every quantizer here and in llama.cpp writes
 * them).
 *
 * Numerics: every path (this gemv, the rows-in-lanes gemm and vec_dot) computes each output
 * element with the same float operations in the same order, so a result does not depend on
 * how rows and tokens are batched (chunked prefill must match one-shot prefill bit for bit).
 * Per (weight row, activation row) and block i, the exact integer products of the block's two
 * 16-element halves h_lo, h_hi are converted to float and accumulated into two lanes:
 * lo = fma(h_lo, d_w * d_a, lo), likewise hi. The result is lo + hi.
 * tests/quant/test_gemm_invariance.c checks gemm == vec_dot bitwise for every type.
 */
#include <string.h>

#include "quant/simd_avx2.h"

/* [c0..c3 | c0..c3]: lane c of each half is a half-sum of p_c. */
static inline __m256i fold4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
}

static inline __m256i madd1(__m256i v) {
    return _mm256_madd_epi16(v, _mm256_set1_epi16(1));
}

/* Single-column output: c[r0 + r] = low half + high half of acc lane r (rows in lanes). */
static inline void store_rows(__m256 acc, float *c, int64_t r0, int rows) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    float v[4];
    _mm_storeu_ps(v, s);
    for (int r = 0; r < rows; r++) {
        c[r0 + r] = v[r];
    }
}

/* Weight scales of 4 rows as [d0..d3 | d0..d3] (the block's first field). */
static inline __m256 w_d4(uint16_t d0, uint16_t d1, uint16_t d2, uint16_t d3) {
    const __m128 d =
        _mm_cvtph_ps(_mm_setr_epi16((short)d0, (short)d1, (short)d2, (short)d3, 0, 0, 0, 0));
    return _mm256_set_m128(d, d);
}

/* [h_lo x4 | h_hi x4]: the two half sums of one product vector in every lane of its half. */
static inline __m256i halves1(__m256i p) {
    const __m256i h = _mm256_hadd_epi32(p, p);
    return _mm256_hadd_epi32(h, h);
}

/* Result of a one-row, one-column accumulator laid out as halves1: lane 0 + lane 4. */
static inline float finish1(__m256 acc) {
    return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

/* ---- Q8_0 x Q8_0 ---- */

static inline __m256i sdot(__m256i aw, __m256i w, __m256i yv) {
    return madd1(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(yv, w)));
}

static inline __m256i sdot_row(const ts_block_q8_0 *b, __m256i yv) {
    const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
    return sdot(_mm256_sign_epi8(q, q), q, yv);
}

static inline __attribute__((always_inline)) void q8_0_tile1(int64_t nb,
                                                             const ts_block_q8_0 *const *w,
                                                             const ts_block_q8_0 *y, __m256 *acc,
                                                             prefetch_rows *pf) {
    *acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows_step(pf);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 dy = _mm256_set1_ps(fp16_hw(y[i].d));
        const __m256 dx = w_d4(w[0][i].d, w[1][i].d, w[2][i].d, w[3][i].d);
        const __m256i t = fold4(sdot_row(&w[0][i], yv), sdot_row(&w[1][i], yv),
                                sdot_row(&w[2][i], yv), sdot_row(&w[3][i], yv));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(dx, dy), *acc);
    }
}

/* ---- dot products: one weight row, one activation row, the same operations per lane ---- */

void ts_q_dot_q8_0_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q8_0 *w = x;
    const ts_block_q8_0 *a = y;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const __m256i yv = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256 s =
            _mm256_mul_ps(_mm256_set1_ps(fp16_hw(w[i].d)), _mm256_set1_ps(fp16_hw(a[i].d)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(halves1(sdot_row(&w[i], yv))), s, acc);
    }
    *result = finish1(acc);
}

/* One activation row: tiles of four weight rows (rows in lanes 0..3 of each half), the next
 * tile prefetched meanwhile. */
void ts_q_gemv_q8_0_avx2(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                         const void *a) {
    const int64_t nb = k / TS_QK;
    prefetch_rows pf;
    for (int64_t r0 = 0; r0 < nr; r0 += 4) {
        const int rows = nr - r0 < 4 ? (int)(nr - r0) : 4;
        const ts_block_q8_0 *w1[4];
        for (int r = 0; r < 4; r++) {
            w1[r] = (const ts_block_q8_0 *)((const char *)w +
                                            (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw);
        }
        prefetch_rows_begin(&pf, (const char *)w + (size_t)(r0 + 4) * ldw, 4 * ldw, 4 * ldw, 1, nb);
        __m256 acc;
        q8_0_tile1(nb, w1, a, &acc, &pf);
        store_rows(acc, c, r0, rows);
    }
}
