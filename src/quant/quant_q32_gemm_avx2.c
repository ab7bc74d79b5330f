/*
 * quant_q32_gemm_avx2.c — AVX2 gemm register tiles for Q4_0, Q5_0 and Q8_0 weights
 * (Q4_1 has its own layout in quant_q4_1_avx2.c).
 *
 * c[j][r] = dot(weight row r, activation row j). The weights are read where they lie (no
 * repacking). A tile is RM weight rows x 4 activation rows: each weight block is unpacked
 * once per tile and each activation block is loaded from L1 once per weight row. For one
 * weight row the four 8-lane int32 block products are folded by a hadd tree into one
 * vector [c0 c1 c2 c3 | c0 c1 c2 c3] (two half sums per column), so converting to float,
 * scaling by d_w * d_a (one vector multiply for four columns) and accumulating cost one
 * instruction each per block and weight row, not one per column. A single activation row
 * (generation) folds four (Q4_0: eight, two rows per register) weight rows the same way, so
 * the rows share one accumulator vector.
 *
 * Q4_0 and Q5_0 use the unsigned level q in maddubs and subtract 8 (16) * sum(y) per block
 * (the sum of the activation block's quants, computed once per tile); Q8_0 uses the sign
 * trick (its quants are in -127..127, as every quantizer here and in llama.cpp writes them).
 *
 * Numerics: every path (the 4 x 4 tile, the rows-in-lanes tile for one activation row and
 * vec_dot) computes each output element with the same float operations in the same order,
 * so a result does not depend on how rows and tokens are batched (chunked prefill must
 * match one-shot prefill bit for bit). Per (weight row, activation row) and block i, the
 * exact integer products of the block's two 16-element halves h_lo, h_hi are converted to
 * float and accumulated into two lanes: lo = fma(h_lo, d_w * d_a, lo), likewise hi. The
 * result is lo + hi. Only which
 * lane of which register holds an element differs between the paths (columns in lanes for
 * the 4 x 4 tile, rows in lanes for one activation row, a broadcast for vec_dot).
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

/* fold4 of madd1(m_c) for maddubs outputs m_c whose lanes are at most 8191 in magnitude
 * (4-bit weights: 2 * 15 * 127 = 3810), so that four of them still fit int16: two int16
 * hadd levels, then one madd instead of four. */
static inline __m256i fold4_i16(__m256i m0, __m256i m1, __m256i m2, __m256i m3) {
    return madd1(_mm256_hadd_epi16(_mm256_hadd_epi16(m0, m1), _mm256_hadd_epi16(m2, m3)));
}

/* Activation scales of 4 blocks as [d0..d3 | d0..d3]; Q8_0 and Q8_1 both start with d. */
static inline __m256 act_d4(const uint16_t *d0, const uint16_t *d1, const uint16_t *d2,
                            const uint16_t *d3) {
    const __m128 d =
        _mm_cvtph_ps(_mm_setr_epi16((short)*d0, (short)*d1, (short)*d2, (short)*d3, 0, 0, 0, 0));
    return _mm256_set_m128(d, d);
}

/* Per-tile output: out[r][c] = low half + high half of acc[r] lane c. */
static inline void store4(__m256 acc, float *c, size_t ldc, int64_t r, int cols) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    float v[4];
    _mm_storeu_ps(v, s);
    for (int j = 0; j < cols; j++) {
        *((float *)((char *)c + (size_t)j * ldc) + r) = v[j];
    }
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

/* Software prefetch of the next weight tile, spread over the blocks of the current one.
 * A one-row pass reads ROWS1 rows side by side, a few cache lines from each, too short a
 * stream per row for the hardware prefetcher to ramp up on; the next tile's rows are
 * contiguous, so fetching them in order while this tile computes hides the DRAM latency.
 * Prefetching past the matrix is harmless (prefetches never fault). */
typedef struct prefetch_spread {
    const char *p;
    size_t bytes, per_block, next;
} prefetch_spread;

static inline void prefetch_spread_begin(prefetch_spread *pf, const char *p, size_t bytes,
                                         int64_t nb) {
    pf->p = p;
    pf->bytes = bytes;
    pf->per_block = (bytes / 64 + (size_t)nb) / (size_t)nb;
    pf->next = 0;
}

static inline void prefetch_spread_step(prefetch_spread *pf) {
    for (size_t l = 0; l < pf->per_block && pf->next < pf->bytes; l++, pf->next += 64) {
        _mm_prefetch(pf->p + pf->next, _MM_HINT_T0);
    }
}

/* Two weight rows' 32 nibbles per register: [a.qs | b.qs] (16 bytes each) gives the low
 * nibbles (elements 0..15) of a and b in one vector and the high nibbles (16..31) in
 * another, which meet the activation halves [y0..15 | y0..15] and [y16..31 | y16..31]. */
static inline void nib2(const uint8_t *qa, const uint8_t *qb, __m256i *lo, __m256i *hi) {
    const __m256i v = _mm256_loadu2_m128i((const __m128i *)qb, (const __m128i *)qa);
    const __m256i m = _mm256_set1_epi8(0x0F);
    *lo = _mm256_and_si256(v, m);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
}

/* Output of the q4_0_group layout: row a = lane 0 + lane 2, c = 1 + 3, b = 4 + 6, d = 5 + 7
 * (each the low half plus the high half). */
static inline void pair_store_rows(__m256 acc, float *c, int64_t r0, int rows) {
    const __m256 s = _mm256_add_ps(acc, _mm256_permute_ps(acc, _MM_SHUFFLE(1, 0, 3, 2)));
    float v[8];
    _mm256_storeu_ps(v, s);
    const float out[4] = {v[0], v[4], v[1], v[5]};
    for (int r = 0; r < rows; r++) {
        c[r0 + r] = out[r];
    }
}

/* ---- Q4_0 and Q5_0 x Q8_0: unsigned levels q with an offset (x = d * (q - 2^SHIFT)) ---- */

static inline __m256i unpack_q4_0(const ts_block_q4_0 *b) {
    return unpack_nibbles32(b->qs);
}

/* The 32 five-bit levels of a Q5_0 block: nibble | (bit j of qh) << 4, element j in byte j. */
static inline __m256i unpack_q5_0(const ts_block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    /* Byte j gets byte j / 8 of qh, then keeps bit j % 8 of it. */
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(unpack_nibbles32(b->qs), _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}

/* Four weight rows x four activation rows. maddubs of q <= 31 with |y| <= 127 gives pair sums
 * of at most 7874 in magnitude, so fold4_i16's four-pair int16 sums (31496) cannot overflow. */
#define OFFSET_TILES(T, WB, SHIFT)                                                                 \
    static inline __attribute__((always_inline)) void T##_tile4(                                   \
        int rm, int64_t nb, const WB *const *w, const ts_block_q8_0 *const *y, __m256 *acc) {      \
        const __m256i ones8 = _mm256_set1_epi8(1);                                                 \
        for (int r = 0; r < rm; r++) {                                                             \
            acc[r] = _mm256_setzero_ps();                                                          \
        }                                                                                          \
        for (int64_t i = 0; i < nb; i++) {                                                         \
            const __m256 d8 = act_d4(&y[0][i].d, &y[1][i].d, &y[2][i].d, &y[3][i].d);              \
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[0][i].qs);                    \
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[1][i].qs);                    \
            const __m256i y2 = _mm256_loadu_si256((const __m256i *)y[2][i].qs);                    \
            const __m256i y3 = _mm256_loadu_si256((const __m256i *)y[3][i].qs);                    \
            /* 2^SHIFT * sum(y) per column, in the fold4 layout. */                                \
            const __m256i syo = _mm256_slli_epi32(                                                 \
                fold4_i16(_mm256_maddubs_epi16(ones8, y0), _mm256_maddubs_epi16(ones8, y1),        \
                          _mm256_maddubs_epi16(ones8, y2), _mm256_maddubs_epi16(ones8, y3)),       \
                SHIFT);                                                                            \
            for (int r = 0; r < rm; r++) {                                                         \
                const __m256i q = unpack_##T(&w[r][i]);                                            \
                const __m256i t =                                                                  \
                    fold4_i16(_mm256_maddubs_epi16(q, y0), _mm256_maddubs_epi16(q, y1),            \
                              _mm256_maddubs_epi16(q, y2), _mm256_maddubs_epi16(q, y3));           \
                const __m256 dx = _mm256_set1_ps(fp16_hw(w[r][i].d));                              \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(t, syo)),             \
                                         _mm256_mul_ps(dx, d8), acc[r]);                           \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    void ts_q_dot_##T##_avx2(int64_t n, float *result, const void *x, const void *y) {             \
        const WB *w = x;                                                                           \
        const ts_block_q8_0 *a = y;                                                                \
        const __m256i ones8 = _mm256_set1_epi8(1);                                                 \
        __m256 acc = _mm256_setzero_ps();                                                          \
        for (int64_t i = 0; i < n / TS_QK; i++) {                                                  \
            const __m256i yv = _mm256_loadu_si256((const __m256i *)a[i].qs);                       \
            const __m256i syo =                                                                    \
                _mm256_slli_epi32(halves1(madd1(_mm256_maddubs_epi16(ones8, yv))), SHIFT);         \
            const __m256i t = halves1(madd1(_mm256_maddubs_epi16(unpack_##T(&w[i]), yv)));         \
            const __m256 s =                                                                       \
                _mm256_mul_ps(_mm256_set1_ps(fp16_hw(w[i].d)), _mm256_set1_ps(fp16_hw(a[i].d)));   \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(t, syo)), s, acc);           \
        }                                                                                          \
        *result = finish1(acc);                                                                    \
    }

OFFSET_TILES(q4_0, ts_block_q4_0, 3)
OFFSET_TILES(q5_0, ts_block_q5_0, 4)

/* One activation row against four weight rows, rows in lanes 0..3 of each half. */
#define OFFSET_TILE1(T, WB, SHIFT)                                                                 \
    static inline __attribute__((always_inline)) void T##_tile1(                                   \
        int64_t nb, const WB *const *w, const ts_block_q8_0 *y, __m256 *acc,                       \
        prefetch_spread *pf) {                                                                     \
        const __m256i ones8 = _mm256_set1_epi8(1);                                                 \
        *acc = _mm256_setzero_ps();                                                                \
        for (int64_t i = 0; i < nb; i++) {                                                         \
            prefetch_spread_step(pf);                                                              \
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);                       \
            const __m256i syo =                                                                    \
                _mm256_slli_epi32(halves1(madd1(_mm256_maddubs_epi16(ones8, yv))), SHIFT);         \
            const __m256 dy = _mm256_set1_ps(fp16_hw(y[i].d));                                     \
            const __m256 dx = w_d4(w[0][i].d, w[1][i].d, w[2][i].d, w[3][i].d);                    \
            const __m256i t = fold4_i16(_mm256_maddubs_epi16(unpack_##T(&w[0][i]), yv),            \
                                        _mm256_maddubs_epi16(unpack_##T(&w[1][i]), yv),            \
                                        _mm256_maddubs_epi16(unpack_##T(&w[2][i]), yv),            \
                                        _mm256_maddubs_epi16(unpack_##T(&w[3][i]), yv));           \
            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(t, syo)),                   \
                                   _mm256_mul_ps(dx, dy), *acc);                                   \
        }                                                                                          \
    }

OFFSET_TILE1(q5_0, ts_block_q5_0, 4)

/* Q4_0, one activation row against eight weight rows in lanes [a_lo c_lo a_hi c_hi | b_lo d_lo b_hi
 * d_hi] (rows a, b, c, d = w[0..3]). */
static inline __attribute__((always_inline)) __m256 q4_0_group(const ts_block_q4_0 *const *w,
                                                               int64_t i, __m256i ylo, __m256i yhi,
                                                               __m256 dy, __m256i syo, __m256 acc) {
    /* 32-bit loads of (d, first two quant bytes) per row; only the d lanes are kept. */
    int32_t va, vb, vc, vd;
    memcpy(&va, &w[0][i], 4);
    memcpy(&vb, &w[1][i], 4);
    memcpy(&vc, &w[2][i], 4);
    memcpy(&vd, &w[3][i], 4);
    const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32(va, vc, vb, vd));
    const __m256 dx = _mm256_shuffle_ps(f, f, _MM_SHUFFLE(2, 0, 2, 0));
    __m256i ab_lo, ab_hi, cd_lo, cd_hi;
    nib2(w[0][i].qs, w[1][i].qs, &ab_lo, &ab_hi);
    nib2(w[2][i].qs, w[3][i].qs, &cd_lo, &cd_hi);
    const __m256i lo =
        _mm256_hadd_epi16(_mm256_maddubs_epi16(ab_lo, ylo), _mm256_maddubs_epi16(cd_lo, ylo));
    const __m256i hi =
        _mm256_hadd_epi16(_mm256_maddubs_epi16(ab_hi, yhi), _mm256_maddubs_epi16(cd_hi, yhi));
    const __m256i t = _mm256_sub_epi32(madd1(_mm256_hadd_epi16(lo, hi)), syo);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(dx, dy), acc);
}

static inline __attribute__((always_inline)) void q4_0_tile1(int64_t nb,
                                                             const ts_block_q4_0 *const *w,
                                                             const ts_block_q8_0 *y, __m256 *acc,
                                                             prefetch_spread *pf) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    acc[0] = acc[1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_spread_step(pf);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256i ylo = _mm256_permute2x128_si256(yv, yv, 0x00);
        const __m256i yhi = _mm256_permute2x128_si256(yv, yv, 0x11);
        /* 8 * sum(y) of each half: [lo lo hi hi | lo lo hi hi] like the group lanes. */
        const __m256i sh = halves1(madd1(_mm256_maddubs_epi16(ones8, yv)));
        const __m256i syo = _mm256_slli_epi32(
            _mm256_permutevar8x32_epi32(sh, _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4)), 3);
        const __m256 dy = _mm256_set1_ps(fp16_hw(y[i].d));
        acc[0] = q4_0_group(w, i, ylo, yhi, dy, syo, acc[0]);
        acc[1] = q4_0_group(w + 4, i, ylo, yhi, dy, syo, acc[1]);
    }
}

/* Dequantization of Q5_0 (here for unpack_q5_0): x = d * (q - 16), one rounding as in the
 * scalar reference. */
void ts_q_to_float_q5_0_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m256 d = _mm256_set1_ps(fp16_hw(b[i].d));
        const __m256i q = _mm256_sub_epi8(unpack_q5_0(&b[i]), _mm256_set1_epi8(16));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(dst + 0, _mm256_mul_ps(i8x8_to_ps(lo), d));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), d));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(i8x8_to_ps(hi), d));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), d));
    }
}

/* ---- Q8_0 x Q8_0 ---- */

static inline __m256i sdot(__m256i aw, __m256i w, __m256i yv) {
    return madd1(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(yv, w)));
}

static inline __attribute__((always_inline)) void q8_0_tile4(int rm, int64_t nb,
                                                             const ts_block_q8_0 *const *w,
                                                             const ts_block_q8_0 *const *y,
                                                             __m256 *acc) {
    for (int r = 0; r < rm; r++) {
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        const __m256 d8 = act_d4(&y[0][i].d, &y[1][i].d, &y[2][i].d, &y[3][i].d);
        const __m256i y0 = _mm256_loadu_si256((const __m256i *)y[0][i].qs);
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[1][i].qs);
        const __m256i y2 = _mm256_loadu_si256((const __m256i *)y[2][i].qs);
        const __m256i y3 = _mm256_loadu_si256((const __m256i *)y[3][i].qs);
        for (int r = 0; r < rm; r++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)w[r][i].qs);
            const __m256i aq = _mm256_sign_epi8(q, q);
            const __m256i t =
                fold4(sdot(aq, q, y0), sdot(aq, q, y1), sdot(aq, q, y2), sdot(aq, q, y3));
            const __m256 dx = _mm256_set1_ps(fp16_hw(w[r][i].d));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(dx, d8), acc[r]);
        }
    }
}

static inline __m256i sdot_row(const ts_block_q8_0 *b, __m256i yv) {
    const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
    return sdot(_mm256_sign_epi8(q, q), q, yv);
}

static inline __attribute__((always_inline)) void q8_0_tile1(int64_t nb,
                                                             const ts_block_q8_0 *const *w,
                                                             const ts_block_q8_0 *y, __m256 *acc,
                                                             prefetch_spread *pf) {
    *acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_spread_step(pf);
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

/* q4_0 and q8_0 tile1 keep rows in lanes 0..3 of each half. */
#define q4_0_store_rows pair_store_rows
#define q5_0_store_rows store_rows
#define q8_0_store_rows store_rows

/* Weight rows per tile1 call (a multiple of 4; group g of four is stored from acc[g]). */
#define q4_0_ROWS1 8
#define q5_0_ROWS1 4
#define q8_0_ROWS1 4

/* Row tiles of 4 (then 1) against column tiles of 4 (the last one padded by repeating its
 * final activation row; the padded results are not stored) or, for nc == 1, of 1. */
#define Q32_GEMM(T, WB, AB)                                                                        \
    void ts_q_gemm_##T##_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,             \
                              const void *w, size_t ldw, const void *a, size_t lda) {              \
        const int64_t nb = k / TS_QK;                                                              \
        prefetch_spread pf;                                                                        \
        for (int64_t r0 = 0; r0 < nr;) {                                                           \
            const int rm = nr - r0 >= 4 ? 4 : 1;                                                   \
            const WB *wr[4];                                                                       \
            for (int r = 0; r < rm; r++) {                                                         \
                wr[r] = (const WB *)((const char *)w + (size_t)(r0 + r) * ldw);                    \
            }                                                                                      \
            __m256 acc[4];                                                                         \
            if (nc == 1) {                                                                         \
                const int rows = nr - r0 < T##_ROWS1 ? (int)(nr - r0) : T##_ROWS1;                 \
                const WB *w1[T##_ROWS1];                                                           \
                for (int r = 0; r < T##_ROWS1; r++) {                                              \
                    w1[r] = (const WB *)((const char *)w +                                         \
                                         (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw);          \
                }                                                                                  \
                prefetch_spread_begin(&pf, (const char *)w + (size_t)(r0 + T##_ROWS1) * ldw,       \
                                      (size_t)T##_ROWS1 * ldw, nb);                                \
                T##_tile1(nb, w1, (const AB *)a, acc, &pf);                                        \
                for (int g = 0; g * 4 < rows; g++) {                                               \
                    T##_store_rows(acc[g], c, r0 + 4 * g, rows - 4 * g < 4 ? rows - 4 * g : 4);    \
                }                                                                                  \
                r0 += rows;                                                                        \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t j0 = 0; j0 < nc; j0 += 4) {                                               \
                const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;                                 \
                const AB *ap[4];                                                                   \
                for (int j = 0; j < 4; j++) {                                                      \
                    int64_t jj = j0 + (j < cols ? j : cols - 1);                                   \
                    ap[j] = (const AB *)((const char *)a + (size_t)jj * lda);                      \
                }                                                                                  \
                if (rm == 4) {                                                                     \
                    T##_tile4(4, nb, wr, ap, acc);                                                 \
                } else {                                                                           \
                    T##_tile4(1, nb, wr, ap, acc);                                                 \
                }                                                                                  \
                float *cj = (float *)((char *)c + (size_t)j0 * ldc);                               \
                for (int r = 0; r < rm; r++) {                                                     \
                    store4(acc[r], cj, ldc, r0 + r, cols);                                         \
                }                                                                                  \
            }                                                                                      \
            r0 += rm;                                                                              \
        }                                                                                          \
    }

Q32_GEMM(q4_0, ts_block_q4_0, ts_block_q8_0)
Q32_GEMM(q5_0, ts_block_q5_0, ts_block_q8_0)
Q32_GEMM(q8_0, ts_block_q8_0, ts_block_q8_0)
