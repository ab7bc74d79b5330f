/*
 * quant_q4_1_avx2.c — Q4_1 x Q8_1 dot product and gemm (AVX2), eight weight rows per register.
 *
 * The gemm keeps eight weight rows in the eight 32-bit lanes of a register: for each group
 * of four consecutive elements, lane r holds row r's four quants. One vpmaddubsw of such a
 * register with the activation's matching four bytes broadcast to every lane multiplies 32
 * weight-activation pairs, and the block's eight groups sum in place (int16, then one
 * vpmaddwd), so a block costs no horizontal reduction at all: per activation row and block
 * it is eight multiplies, eight adds and four float operations for eight weight rows.
 *
 * Rows are interleaved on the fly: eight rows' 16-byte nibble arrays are transposed as 4 x 4
 * tables of 32-bit words (q4_1_gather). With several activation rows (prefill, batched
 * decoding) each block of eight rows is gathered once into a small buffer and reused by every
 * group of four activation rows; with one activation row it is gathered into registers and
 * used at once, while the next eight rows are prefetched.
 *
 * Numerics — every path (gemm at any batch, vec_dot) computes each output element with the
 * same float operations in the same order, so results do not depend on batching (chunked
 * prefill equals one-shot prefill bit for bit; tests/quant/test_gemm_invariance.c):
 *     acc = 0
 *     for each block i:  acc = acc + fma((float)isum_i, d_w * d_a, m_w * s_a)
 * with isum_i = sum_j q_j y_j exact (q in 0..15, |y| <= 127; int16 partial sums stay below
 * 8 * 2 * 15 * 127 = 30480), the products rounded to float, m_w and s_a the f16 fields.
 * The block's value is formed before it meets the running sum: its two terms are large and
 * of opposite sign for centred weights (m ~ -8 d), and adding them to the sum one at a time
 * measurably hurt accuracy (tests/model/test_smollm.c: logit nrmse vs the reference 0.12
 * instead of 0.04).
 */
#include <string.h>

#include "quant/simd_avx2.h"

#define GATHER_KB 64 /* blocks gathered per pass (64 * 192 bytes = 12 KiB, L1-resident) */
#define MAX_COLS  64 /* activation rows whose accumulators one gemm pass keeps */

/* Eight weight rows' block i, interleaved. */
typedef struct q4_1x8 {
    float d[8], m[8];
    uint8_t qs[4][32]; /* group g: lane r = bytes 4g..4g+3 of row r's qs (elements 4g..4g+3
                        * in the low nibbles, 16+4g..16+4g+3 in the high nibbles) */
} q4_1x8;

/* Interleaves block i of rows w[0..7] into scales and four group registers. */
static inline __attribute__((always_inline)) void
q4_1_gather(const ts_block_q4_1 *const *w, int64_t i, __m256 *d, __m256 *m, __m256i g[4]) {
    /* Rows r and r + 4 share a register: [row r | row r + 4]. */
    __m256i v[4];
    for (int r = 0; r < 4; r++) {
        v[r] = _mm256_loadu2_m128i((const __m128i *)w[r + 4][i].qs, (const __m128i *)w[r][i].qs);
    }
    /* 4 x 4 transpose of 32-bit words in each 128-bit half. */
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    g[0] = _mm256_unpacklo_epi64(t0, t2);
    g[1] = _mm256_unpackhi_epi64(t0, t2);
    g[2] = _mm256_unpacklo_epi64(t1, t3);
    g[3] = _mm256_unpackhi_epi64(t1, t3);
    /* (d, m) pairs: [d0 m0 .. d3 m3] and [d4 m4 .. d7 m7] -> d and m in row order. */
    int32_t dm[8];
    for (int r = 0; r < 8; r++) {
        memcpy(&dm[r], &w[r][i], 4);
    }
    const __m256 lo = _mm256_cvtph_ps(_mm_setr_epi32(dm[0], dm[1], dm[2], dm[3]));
    const __m256 hi = _mm256_cvtph_ps(_mm_setr_epi32(dm[4], dm[5], dm[6], dm[7]));
    /* shuffle_ps works per 128-bit half: [d0 d1 d4 d5 | d2 d3 d6 d7], then reorder. */
    *d = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
    *m = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Broadcast of the four activation bytes at offset `at` of a block. */
static inline __m256i y4(const ts_block_q8_1 *y, int at) {
    int32_t v;
    memcpy(&v, y->qs + at, 4);
    return _mm256_set1_epi32(v);
}

/* isum of eight rows (lanes) against one activation block, given the group registers. */
static inline __attribute__((always_inline)) __m256i q4_1_isum(const __m256i g[4],
                                                               const ts_block_q8_1 *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        const __m256i lo = _mm256_and_si256(g[k], m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(g[k], 4), m4);
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo, y4(y, 4 * k)));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi, y4(y, 16 + 4 * k)));
    }
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

/* acc += fma(isum, d_w * d_a, m_w * s_a), lane-wise. */
static inline __m256 q4_1_scale(__m256 acc, __m256i isum, __m256 d, __m256 m,
                                const ts_block_q8_1 *y) {
    const __m256 ms = _mm256_mul_ps(m, _mm256_set1_ps(fp16_hw(y->s)));
    const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(fp16_hw(y->d)));
    return _mm256_add_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, ms));
}

/* Rows of one pass: w[r] for r < rows, the last one repeated (its results are not stored). */
static void rows8(const void *w, size_t ldw, int64_t r0, int rows, const ts_block_q4_1 **out) {
    for (int r = 0; r < 8; r++) {
        out[r] = (const ts_block_q4_1 *)((const char *)w +
                                         (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw);
    }
}

static void store8(__m256 acc, float *c, int rows) {
    float v[8];
    _mm256_storeu_ps(v, acc);
    memcpy(c, v, (size_t)rows * sizeof(float));
}

/* One activation row: gather in registers, prefetching the next eight rows meanwhile. */
static void gemm_col1(int64_t nb, const ts_block_q4_1 *const *w, const ts_block_q8_1 *y,
                      const char *next, size_t next_bytes, float *c, int rows) {
    const size_t per = (next_bytes / 64 + (size_t)nb) / (size_t)nb;
    size_t pf = 0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        for (size_t l = 0; l < per && pf < next_bytes; l++, pf += 64) {
            _mm_prefetch(next + pf, _MM_HINT_T0);
        }
        __m256 d, m;
        __m256i g[4];
        q4_1_gather(w, i, &d, &m, g);
        acc = q4_1_scale(acc, q4_1_isum(g, &y[i]), d, m, &y[i]);
    }
    store8(acc, c, rows);
}

/* Several activation rows: each pass of GATHER_KB blocks is gathered once, then every group
 * of four activation rows runs over it; accumulators persist across passes in accs. */
static void gemm_cols(int64_t nb, const ts_block_q4_1 *const *w, const char *a, size_t lda,
                      int64_t nc, float *c, size_t ldc, int rows) {
    q4_1x8 buf[GATHER_KB];
    __m256 accs[MAX_COLS];
    for (int64_t j = 0; j < nc; j++) {
        accs[j] = _mm256_setzero_ps();
    }
    for (int64_t i0 = 0; i0 < nb; i0 += GATHER_KB) {
        const int64_t kb = nb - i0 < GATHER_KB ? nb - i0 : GATHER_KB;
        for (int64_t i = 0; i < kb; i++) {
            __m256 d, m;
            __m256i g[4];
            q4_1_gather(w, i0 + i, &d, &m, g);
            _mm256_storeu_ps(buf[i].d, d);
            _mm256_storeu_ps(buf[i].m, m);
            for (int k = 0; k < 4; k++) {
                _mm256_storeu_si256((__m256i *)buf[i].qs[k], g[k]);
            }
        }
        for (int64_t j0 = 0; j0 < nc; j0 += 4) {
            const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
            const ts_block_q8_1 *y[4];
            __m256 acc[4];
            for (int j = 0; j < 4; j++) {
                const int64_t jj = j0 + (j < cols ? j : cols - 1);
                y[j] = (const ts_block_q8_1 *)(a + (size_t)jj * lda) + i0;
                acc[j] = accs[jj];
            }
            for (int64_t i = 0; i < kb; i++) {
                const __m256 d = _mm256_loadu_ps(buf[i].d), m = _mm256_loadu_ps(buf[i].m);
                __m256i g[4];
                for (int k = 0; k < 4; k++) {
                    g[k] = _mm256_loadu_si256((const __m256i *)buf[i].qs[k]);
                }
                for (int j = 0; j < 4; j++) {
                    acc[j] = q4_1_scale(acc[j], q4_1_isum(g, &y[j][i]), d, m, &y[j][i]);
                }
            }
            for (int j = 0; j < cols; j++) {
                accs[j0 + j] = acc[j];
            }
        }
    }
    for (int64_t j = 0; j < nc; j++) {
        store8(accs[j], (float *)((char *)c + (size_t)j * ldc), rows);
    }
}

void ts_q_gemm_q4_1_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    const int64_t nb = k / TS_QK;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;
        const ts_block_q4_1 *wr[8];
        rows8(w, ldw, r0, rows, wr);
        if (nc == 1) {
            /* The next eight rows (past the matrix is harmless: prefetches never fault). */
            gemm_col1(nb, wr, a, (const char *)w + (size_t)(r0 + 8) * ldw, 8 * ldw, c + r0, rows);
            continue;
        }
        for (int64_t j0 = 0; j0 < nc; j0 += MAX_COLS) {
            const int64_t n = nc - j0 < MAX_COLS ? nc - j0 : MAX_COLS;
            gemm_cols(nb, wr, (const char *)a + (size_t)j0 * lda, lda, n,
                      (float *)((char *)c + (size_t)j0 * ldc) + r0, ldc, rows);
        }
    }
}

/* One row, one column: the exact block sums, then the same float operations as the gemm. */
void ts_q_dot_q4_1_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q4_1 *w = x;
    const ts_block_q8_1 *a = y;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const __m256i yv = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(unpack_nibbles32(w[i].qs), yv),
                                            _mm256_set1_epi16(1));
        const float isum = (float)hsum_epi32_256(p);
        const float ms = fp16_hw(w[i].m) * fp16_hw(a[i].s);
        acc += __builtin_fmaf(isum, fp16_hw(w[i].d) * fp16_hw(a[i].d), ms);
    }
    *result = acc;
}
