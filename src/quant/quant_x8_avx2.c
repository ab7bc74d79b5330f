/*
 * quant_x8_avx2.c — Q4_0, Q4_1 and Q5_0 against 8-bit activations (AVX2): dot products, gemm
 * with eight weight rows in the lanes of one register, and Q5_0 dequantization; also Q8_0's
 * gemm for several activation rows (its one-row path and dot product: quant_q32_gemm_avx2.c).
 *
 * The gemm keeps eight weight rows in the eight 32-bit lanes of a register: for each group
 * of four consecutive elements, lane r holds row r's four levels. One vpmaddubsw of such a
 * register with the activation's matching four bytes broadcast to every lane multiplies 32
 * weight-activation pairs, and the block's eight groups sum in place (int16, then vpmaddwd),
 * so a block costs no horizontal reduction: per activation row and block it is eight
 * multiplies, seven adds and a few float operations for eight weight rows.
 *
 * Rows are interleaved on the fly (x8_transpose: eight rows' 16 quant bytes as a 4 x 4 table
 * of 32-bit words per register half) and unpacked to levels (nibbles, plus the fifth bit for
 * Q5_0; Q8_0 keeps its signed bytes). With one activation row each block of eight rows is
 * unpacked into registers and used at once, while the next eight rows are prefetched (a
 * one-row pass reads eight rows side by side, too short a stream per row for the hardware
 * prefetcher). With several, a call takes up to 32 weight rows: per pass of GATHER_KB blocks
 * the activation scales are converted once (x8ys), each group of eight rows is unpacked once
 * into a buffer, and block kernels run tiles of four activation rows against one group (8 x 4)
 * or, for levels <= 15, two groups (16 x 4: every broadcast feeds two multiplies), while the
 * next sixteen rows are prefetched. Q8_0 moves each weight's sign onto the activation
 * (vpsignb) so that vpmaddubsw sees |w|; its pair sums reach 2 * 127 * 127, so every group
 * widens to int32 at once.
 *
 * Numerics — every path (gemm at any batch, vec_dot) computes each output element with the
 * same float operations in the same order, so results do not depend on batching (chunked
 * prefill equals one-shot prefill bit for bit; tests/quant/test_gemm_invariance.c). Per
 * weight row, activation row and block i, with isum_i = sum_j q_j y_j exact:
 *   Q4_1:         acc = acc + fma((float)isum_i, d_w * d_a, m_w * s_a)
 *   Q4_0, Q5_0:   acc = fma((float)(isum_i - o * sum_j y_j), d_w * d_a, acc),  o = 8, 16
 *   Q8_0:         per half h of the block (elements 0..15, 16..31) with exact sum isum_ih,
 *                 acc_h = fma((float)isum_ih, d_w * d_a, acc_h); the result is acc_0 + acc_1
 * The Q4_1 block value is formed before it meets the running sum: its two terms are large
 * and of opposite sign for centred weights (m ~ -8 d), and adding them to the sum one at a
 * time measurably hurt accuracy (tests/model/test_smollm.c: logit nrmse vs the reference
 * 0.12 instead of 0.04). int16 partial sums: levels <= 15 give pair sums <= 3810 and eight
 * groups <= 30480; Q5_0 levels <= 31 give 7874, so its groups are summed four at a time.
 */
#include <string.h>

#include "quant/simd_avx2.h"

#define GATHER_KB 64 /* blocks unpacked per pass (64 * 320 bytes = 20 KiB) */
#define MAX_COLS  64 /* activation rows whose accumulators one pass keeps */

/* Block i of eight weight rows, unpacked. */
typedef struct x8blk {
    float d[8], m[8]; /* m: Q4_1 only */
    __m256i q[8];     /* group g: lane r = levels of elements 4g..4g+3 of row r */
} x8blk;

/* ---- shared pieces ---- */

/* Lane r of register k = bytes 4k..4k+3 of the 16 bytes at p[r]. Rows r and r + 4 share a
 * register ([row r | row r + 4]), then a 4 x 4 transpose of 32-bit words per half. */
static inline void x8_transpose(const uint8_t *const *p, __m256i g[4]) {
    __m256i v[4];
    for (int r = 0; r < 4; r++) {
        v[r] = _mm256_loadu2_m128i((const __m128i *)p[r + 4], (const __m128i *)p[r]);
    }
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    g[0] = _mm256_unpacklo_epi64(t0, t2);
    g[1] = _mm256_unpackhi_epi64(t0, t2);
    g[2] = _mm256_unpacklo_epi64(t1, t3);
    g[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Nibble registers -> level groups: group k = low nibbles (elements 4k..), 4 + k = high. */
static inline void x8_nibbles(const __m256i g[4], __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int k = 0; k < 4; k++) {
        q[k] = _mm256_and_si256(g[k], m4);
        q[4 + k] = _mm256_and_si256(_mm256_srli_epi16(g[k], 4), m4);
    }
}

/* Eight f16 values (one per row) as floats in row order. */
static inline __m256 x8_f16(const uint16_t *const *h) {
    return _mm256_cvtph_ps(_mm_setr_epi16((short)*h[0], (short)*h[1], (short)*h[2], (short)*h[3],
                                          (short)*h[4], (short)*h[5], (short)*h[6], (short)*h[7]));
}

/* Broadcast of the four activation bytes at y[at]. */
static inline __m256i y4(const int8_t *y, int at) {
    int32_t v;
    memcpy(&v, y + at, 4);
    return _mm256_set1_epi32(v);
}

/* Exact isum per lane for levels <= 15: the eight groups in int16, then one vpmaddwd. */
static inline __m256i isum_u4(const __m256i *q, const int8_t *y) {
    __m256i s = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(q[g], y4(y, 4 * g)));
    }
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

/* Exact isum per lane for levels <= 31: two int16 sums of four groups. */
static inline __m256i isum_u5(const __m256i *q, const int8_t *y) {
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int g = 0; g < 4; g++) {
        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(q[g], y4(y, 4 * g)));
        s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(q[4 + g], y4(y, 16 + 4 * g)));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));
}

/* sum of 32 signed bytes, exact: sum(y + 128) by vpsadbw, minus 32 * 128. */
static inline int32_t sum_i8x32(const int8_t *y) {
    const __m256i u =
        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    return _mm_cvtsi128_si32(t) - 32 * 128;
}

/* ---- per type: gather eight rows' block i, and fold one isum into the accumulator ---- */

static inline __attribute__((always_inline)) void q4_1_gather(const void *const *w, int64_t i,
                                                              __m256 *d, __m256 *m, __m256i q[8]) {
    const ts_block_q4_1 *b[8];
    const uint8_t *qs[8];
    int32_t dm[8];
    for (int r = 0; r < 8; r++) {
        b[r] = (const ts_block_q4_1 *)w[r] + i;
        qs[r] = b[r]->qs;
        memcpy(&dm[r], b[r], 4); /* (d, m) */
    }
    __m256i g[4];
    x8_transpose(qs, g);
    x8_nibbles(g, q);
    /* [d0 m0 .. d3 m3], [d4 m4 .. d7 m7]; shuffle_ps works per half, so reorder after. */
    const __m256 lo = _mm256_cvtph_ps(_mm_setr_epi32(dm[0], dm[1], dm[2], dm[3]));
    const __m256 hi = _mm256_cvtph_ps(_mm_setr_epi32(dm[4], dm[5], dm[6], dm[7]));
    *d = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
    *m = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __attribute__((always_inline)) void q4_0_gather(const void *const *w, int64_t i,
                                                              __m256 *d, __m256 *m, __m256i q[8]) {
    const uint8_t *qs[8];
    const uint16_t *h[8];
    for (int r = 0; r < 8; r++) {
        const ts_block_q4_0 *b = (const ts_block_q4_0 *)w[r] + i;
        qs[r] = b->qs;
        h[r] = &b->d;
    }
    __m256i g[4];
    x8_transpose(qs, g);
    x8_nibbles(g, q);
    *d = x8_f16(h);
    *m = _mm256_setzero_ps();
}

static inline __attribute__((always_inline)) void q5_0_gather(const void *const *w, int64_t i,
                                                              __m256 *d, __m256 *m, __m256i q[8]) {
    const uint8_t *qs[8];
    const uint16_t *h[8];
    int32_t qh[8];
    for (int r = 0; r < 8; r++) {
        const ts_block_q5_0 *b = (const ts_block_q5_0 *)w[r] + i;
        qs[r] = b->qs;
        h[r] = &b->d;
        memcpy(&qh[r], b->qh, 4);
    }
    __m256i g[4];
    x8_transpose(qs, g);
    x8_nibbles(g, q);
    /* Element j's fifth bit is bit j of row r's qh (lane r). Group k covers elements 4k..4k+3,
     * whose bits sit in byte k / 2 of qh at offset 4 (k % 2): copy that byte to the lane's four
     * bytes, test one bit per byte, and add 16 where set. */
    const __m256i qhv = _mm256_setr_epi32(qh[0], qh[1], qh[2], qh[3], qh[4], qh[5], qh[6], qh[7]);
    const __m256i lane0 = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                           0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    for (int k = 0; k < 8; k++) {
        const __m256i spread =
            _mm256_shuffle_epi8(qhv, _mm256_add_epi8(lane0, _mm256_set1_epi8((char)(k / 2))));
        const __m256i bit = _mm256_set1_epi32(k % 2 ? (int)0x80402010 : 0x08040201);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q[k] = _mm256_or_si256(q[k], _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    *d = x8_f16(h);
    *m = _mm256_setzero_ps();
}

/* What the fold needs of activation block i: its scale d and, for Q4_1, s = d * sum(y) (an f16
 * in the block), for Q4_0 and Q5_0 the exact offset correction o * sum(y). The multi-row
 * gemm converts these once per pass for all its weight rows. */
typedef struct x8ys {
    float d;
    union {
        float s;      /* Q4_1 */
        int32_t corr; /* Q4_0, Q5_0 */
    };
} x8ys;

static inline x8ys q4_1_yscale(const void *yb) {
    const ts_block_q8_1 *y = yb;
    return (x8ys){.d = fp16_hw(y->d), .s = fp16_hw(y->s)};
}

static inline x8ys q4_0_yscale(const void *yb) {
    const ts_block_q8_0 *y = yb;
    return (x8ys){.d = fp16_hw(y->d), .corr = 8 * sum_i8x32(y->qs)};
}

static inline x8ys q5_0_yscale(const void *yb) {
    const ts_block_q8_0 *y = yb;
    return (x8ys){.d = fp16_hw(y->d), .corr = 16 * sum_i8x32(y->qs)};
}

/* Float fold of one block's exact isums (per lane) into the accumulator; the same operations
 * on every path. */
static inline __m256 q4_1_fold(__m256 acc, __m256i isum, __m256 d, __m256 m, const x8ys *e) {
    const __m256 ms = _mm256_mul_ps(m, _mm256_broadcast_ss(&e->s));
    const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e->d));
    return _mm256_add_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, ms));
}

static inline __m256 q4_0_fold(__m256 acc, __m256i isum, __m256 d, __m256 m, const x8ys *e) {
    (void)m;
    const __m256i t = _mm256_sub_epi32(isum, _mm256_set1_epi32(e->corr));
    const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e->d));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), dd, acc);
}
#define q5_0_fold q4_0_fold

/* One block against one activation row. */
#define q4_1_isum isum_u4
#define q4_0_isum isum_u4
#define q5_0_isum isum_u5

/* One block against four activation rows: each level register is loaded once and multiplied
 * with the four rows' broadcasts; `span` groups are summed in int16 before vpmaddwd (8 for
 * levels <= 15, 4 for levels <= 31). */
static inline __attribute__((always_inline)) void isum_x4(const __m256i *q, const int8_t *const *y,
                                                          int64_t off, int span, __m256i out[4]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < 4; j++) {
        out[j] = _mm256_setzero_si256();
    }
    for (int g0 = 0; g0 < 8; g0 += span) {
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
        for (int g = g0; g < g0 + span; g++) {
            const __m256i qg = _mm256_load_si256(&q[g]);
            s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(qg, y4(y[0], (int)off + 4 * g)));
            s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(qg, y4(y[1], (int)off + 4 * g)));
            s2 = _mm256_add_epi16(s2, _mm256_maddubs_epi16(qg, y4(y[2], (int)off + 4 * g)));
            s3 = _mm256_add_epi16(s3, _mm256_maddubs_epi16(qg, y4(y[3], (int)off + 4 * g)));
            /* Keep the sums as running chains: left alone, GCC rebalances them into trees
             * over all 32 products and spills them. */
            __asm__("" : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3));
        }
        out[0] = _mm256_add_epi32(out[0], _mm256_madd_epi16(s0, ones));
        out[1] = _mm256_add_epi32(out[1], _mm256_madd_epi16(s1, ones));
        out[2] = _mm256_add_epi32(out[2], _mm256_madd_epi16(s2, ones));
        out[3] = _mm256_add_epi32(out[3], _mm256_madd_epi16(s3, ones));
    }
}

/* One block of sixteen weight rows (two unpacked eight-row blocks) against four activation
 * rows: each broadcast feeds two multiplies. For levels <= 15 only (span 8): the sixteen
 * running sums of a span of four would not fit in the registers. */
static inline __attribute__((always_inline)) void isum_x4x2(const __m256i *q0, const __m256i *q1,
                                                            const int8_t *const *y, int64_t off,
                                                            __m256i out[8]) {
    __m256i s[8];
    for (int j = 0; j < 8; j++) {
        s[j] = _mm256_setzero_si256();
    }
    for (int g = 0; g < 8; g++) {
        const __m256i a = _mm256_load_si256(&q0[g]), b = _mm256_load_si256(&q1[g]);
        for (int j = 0; j < 4; j++) {
            const __m256i yb = y4(y[j], (int)off + 4 * g);
            s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(a, yb));
            s[4 + j] = _mm256_add_epi16(s[4 + j], _mm256_maddubs_epi16(b, yb));
        }
        __asm__(""
                : "+x"(s[0]), "+x"(s[1]), "+x"(s[2]), "+x"(s[3]), "+x"(s[4]), "+x"(s[5]),
                  "+x"(s[6]), "+x"(s[7]));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < 8; j++) {
        out[j] = _mm256_madd_epi16(s[j], ones);
    }
}

/* ---- Q8_0: signed levels, the sign moved onto the activation; two half sums per block ---- */

static inline __attribute__((always_inline)) void q8_0_gather(const void *const *w, int64_t i,
                                                              __m256 *d, __m256 *m, __m256i q[8]) {
    const uint8_t *lo[8], *hi[8];
    const uint16_t *h[8];
    for (int r = 0; r < 8; r++) {
        const ts_block_q8_0 *b = (const ts_block_q8_0 *)w[r] + i;
        lo[r] = (const uint8_t *)b->qs;
        hi[r] = lo[r] + 16;
        h[r] = &b->d;
    }
    x8_transpose(lo, q);
    x8_transpose(hi, q + 4);
    *d = x8_f16(h);
    *m = _mm256_setzero_ps();
}

static inline x8ys q8_0_yscale(const void *yb) {
    const ts_block_q8_0 *y = yb;
    return (x8ys){.d = fp16_hw(y->d)};
}

/* ---- block kernels: one unpacked block (or two, sixteen rows) against four activation rows,
 * folded into acc[j][0 .. NACC - 1] with column j's scales e[j] ---- */

/* Q4_0, Q4_1, Q5_0: one accumulator per column. */
#define X8_BLOCK4(T, SPAN)                                                                         \
    static inline __attribute__((always_inline)) void T##_block4(                                  \
        const x8blk *b, const int8_t *const *y, int64_t off, const x8ys *const *e,                 \
        __m256 *const *acc) {                                                                      \
        __m256i is[4];                                                                             \
        isum_x4(b->q, y, off, SPAN, is);                                                           \
        const __m256 d = _mm256_load_ps(b->d), m = _mm256_load_ps(b->m);                           \
        for (int j = 0; j < 4; j++) {                                                              \
            acc[j][0] = T##_fold(acc[j][0], is[j], d, m, e[j]);                                    \
        }                                                                                          \
    }
X8_BLOCK4(q4_0, 8)
X8_BLOCK4(q4_1, 8)
X8_BLOCK4(q5_0, 4)

/* Sixteen rows, levels <= 15. */
#define X8_BLOCK4X2(T)                                                                             \
    static inline __attribute__((always_inline)) void T##_block4x2(                                \
        const x8blk *b0, const x8blk *b1, const int8_t *const *y, int64_t off,                     \
        const x8ys *const *e, __m256 *const *acc0, __m256 *const *acc1) {                          \
        __m256i is[8];                                                                             \
        isum_x4x2(b0->q, b1->q, y, off, is);                                                       \
        const __m256 d0 = _mm256_load_ps(b0->d), m0 = _mm256_load_ps(b0->m);                       \
        const __m256 d1 = _mm256_load_ps(b1->d), m1 = _mm256_load_ps(b1->m);                       \
        for (int j = 0; j < 4; j++) {                                                              \
            acc0[j][0] = T##_fold(acc0[j][0], is[j], d0, m0, e[j]);                                \
            acc1[j][0] = T##_fold(acc1[j][0], is[4 + j], d1, m1, e[j]);                            \
        }                                                                                          \
    }
X8_BLOCK4X2(q4_0)
X8_BLOCK4X2(q4_1)

/* Q8_0: per half (elements 0..15, 16..31) the exact sum of |w| * (y with w's sign) per lane,
 * then acc[j][h] = fma(sum, d_w * d_a, acc[j][h]); the result is acc[j][0] + acc[j][1]. The
 * int16 pair sums reach 2 * 127 * 127, so each group goes to int32 at once. */
static inline __attribute__((always_inline)) void
q8_0_half4(const __m256i *q, const int8_t *const *y, int off, __m256i out[4]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (int g = 0; g < 4; g++) {
        const __m256i wg = _mm256_load_si256(&q[g]);
        const __m256i aw = _mm256_sign_epi8(wg, wg);
#define Q8_STEP(sj, j)                                                                             \
    sj = _mm256_add_epi32(                                                                         \
        sj, _mm256_madd_epi16(                                                                     \
                _mm256_maddubs_epi16(aw, _mm256_sign_epi8(y4(y[j], off + 4 * g), wg)), ones))
        Q8_STEP(s0, 0);
        Q8_STEP(s1, 1);
        Q8_STEP(s2, 2);
        Q8_STEP(s3, 3);
#undef Q8_STEP
        __asm__("" : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3));
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}

static inline __attribute__((always_inline)) void q8_0_block4(const x8blk *b,
                                                              const int8_t *const *y, int64_t off,
                                                              const x8ys *const *e,
                                                              __m256 *const *acc) {
    const __m256 d = _mm256_load_ps(b->d);
    __m256 dd[4];
    for (int j = 0; j < 4; j++) {
        dd[j] = _mm256_mul_ps(d, _mm256_broadcast_ss(&e[j]->d));
    }
    for (int h = 0; h < 2; h++) {
        __m256i s[4];
        q8_0_half4(b->q + 4 * h, y, (int)off + 16 * h, s);
        for (int j = 0; j < 4; j++) {
            acc[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), dd[j], acc[j][h]);
        }
    }
}

/* Final value of a column's accumulators. */
#define q4_0_finish(a) ((a)[0])
#define q4_1_finish(a) ((a)[0])
#define q5_0_finish(a) ((a)[0])
#define q8_0_finish(a) _mm256_add_ps((a)[0], (a)[1])

/* ---- gemm drivers ---- */

static inline void store8(__m256 acc, float *c, int rows) {
    if (rows == 8) {
        _mm256_storeu_ps(c, acc);
        return;
    }
    float v[8];
    _mm256_storeu_ps(v, acc);
    memcpy(c, v, (size_t)rows * sizeof(float));
}

#define ROW_GROUPS 4 /* eight-row groups sharing one pass's activation scales */

/* One activation row (Q4_0, Q4_1, Q5_0): blocks unpacked in registers, the next eight rows
 * prefetched meanwhile. */
#define X8_GEMV(T, AB)                                                                             \
    static void T##_col1(int64_t nb, const void *const *w, const AB *y, const char *next,          \
                         size_t next_bytes, float *c, int rows) {                                  \
        prefetch_rows pf;                                                                          \
        prefetch_rows_begin(&pf, next, next_bytes, next_bytes, 1, nb);                             \
        __m256 acc = _mm256_setzero_ps();                                                          \
        for (int64_t i = 0; i < nb; i++) {                                                         \
            prefetch_rows_step(&pf);                                                               \
            __m256 d, m;                                                                           \
            __m256i q[8];                                                                          \
            T##_gather(w, i, &d, &m, q);                                                           \
            const x8ys e = T##_yscale(&y[i]);                                                      \
            acc = T##_fold(acc, T##_isum(q, y[i].qs), d, m, &e);                                   \
        }                                                                                          \
        store8(acc, c, rows);                                                                      \
    }                                                                                              \
                                                                                                   \
    static void T##_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,               \
                         const void *a) {                                                          \
        const int64_t nb = k / TS_QK;                                                              \
        for (int64_t r0 = 0; r0 < nr; r0 += 8) {                                                   \
            const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;                                     \
            const void *wr[8];                                                                     \
            for (int r = 0; r < 8; r++) {                                                          \
                wr[r] = (const char *)w + (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw;          \
            }                                                                                      \
            /* Prefetching past the matrix is harmless: prefetches never fault. */                 \
            T##_col1(nb, wr, a, (const char *)w + (size_t)(r0 + 8) * ldw, 8 * ldw, c + r0, rows);  \
        }                                                                                          \
    }

/* Several activation rows (nc <= MAX_COLS) against up to ROW_GROUPS groups of eight weight
 * rows. Per pass of GATHER_KB blocks the activation scales are converted once; then each
 * group's blocks are unpacked once (two groups at a time where the type has a sixteen-row
 * kernel, PAIRS) and every four activation rows run over them. A last tile of fewer than four
 * columns repeats its final column into spare accumulators. NACC accumulators per column. */
#define X8_GEMM(T, AB, WBS, NACC, PAIRS)                                                           \
    static void T##_cols(int64_t nb, const char *w, size_t ldw, int64_t nr, const char *a,         \
                         size_t lda, int64_t nc, float *c, size_t ldc) {                           \
        x8blk buf[1 + PAIRS][GATHER_KB];                                                           \
        x8ys ys[GATHER_KB][MAX_COLS];                                                              \
        __m256 accs[ROW_GROUPS][MAX_COLS][NACC], spare[2][NACC];                                   \
        const int groups = (int)((nr + 7) / 8);                                                    \
        for (int rg = 0; rg < groups; rg++) {                                                      \
            memset(accs[rg], 0, (size_t)nc * sizeof(accs[rg][0]));                                 \
        }                                                                                          \
        for (int64_t i0 = 0; i0 < nb; i0 += GATHER_KB) {                                           \
            const int64_t kb = nb - i0 < GATHER_KB ? nb - i0 : GATHER_KB;                          \
            for (int64_t j = 0; j < nc; j++) {                                                     \
                const AB *y = (const AB *)(a + (size_t)j * lda) + i0;                              \
                for (int64_t i = 0; i < kb; i++) {                                                 \
                    ys[i][j] = T##_yscale(&y[i]);                                                  \
                }                                                                                  \
            }                                                                                      \
            for (int rg = 0; rg < groups;) {                                                       \
                const int pair = PAIRS && rg + 1 < groups;                                         \
                for (int h = 0; h <= pair; h++) {                                                  \
                    const int64_t base = 8 * (rg + h);                                             \
                    const int rows = nr - base < 8 ? (int)(nr - base) : 8;                         \
                    /* Rows past nr repeat the last one (their results are not stored). */         \
                    const void *wr[8];                                                             \
                    for (int r = 0; r < 8; r++) {                                                  \
                        wr[r] = w + (size_t)(base + (r < rows ? r : rows - 1)) * ldw;              \
                    }                                                                              \
                    for (int64_t i = 0; i < kb; i++) {                                             \
                        __m256 d, m;                                                               \
                        __m256i q[8];                                                              \
                        T##_gather(wr, i0 + i, &d, &m, q);                                         \
                        _mm256_store_ps(buf[h][i].d, d);                                           \
                        _mm256_store_ps(buf[h][i].m, m);                                           \
                        for (int g = 0; g < 8; g++) {                                              \
                            buf[h][i].q[g] = q[g];                                                 \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
                /* While these rows compute, prefetch the next sixteen rows' part of the pass      \
                 * (past this call's rows: the rows the thread most likely takes next). */         \
                prefetch_rows pf;                                                                  \
                prefetch_rows_begin(&pf,                                                           \
                                    w + (size_t)(8 * (rg + 1 + pair)) * ldw + (size_t)i0 * WBS,    \
                                    ldw, (size_t)kb * WBS, 16, ((nc + 3) / 4) * kb);               \
                for (int64_t j0 = 0; j0 < nc; j0 += 4) {                                           \
                    const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;                             \
                    const int8_t *yq[4];                                                           \
                    int64_t jj[4];                                                                 \
                    __m256 *acc0[4], *acc1[4];                                                     \
                    for (int j = 0; j < 4; j++) {                                                  \
                        jj[j] = j0 + (j < cols ? j : cols - 1);                                    \
                        yq[j] = (const int8_t *)((const AB *)(a + (size_t)jj[j] * lda) + i0)->qs;  \
                        acc0[j] = j < cols ? accs[rg][j0 + j] : spare[0];                          \
                        acc1[j] = j < cols && pair ? accs[rg + 1][j0 + j] : spare[1];              \
                    }                                                                              \
                    for (int64_t i = 0; i < kb; i++) {                                             \
                        const x8ys *e[4] = {&ys[i][jj[0]], &ys[i][jj[1]], &ys[i][jj[2]],           \
                                            &ys[i][jj[3]]};                                        \
                        const int64_t off = i * (int64_t)sizeof(AB);                               \
                        prefetch_rows_step(&pf);                                                   \
                        X8_TILE_##PAIRS(T, pair, buf, i, yq, off, e, acc0, acc1);                  \
                    }                                                                              \
                }                                                                                  \
                rg += 1 + pair;                                                                    \
            }                                                                                      \
        }                                                                                          \
        for (int rg = 0; rg < groups; rg++) {                                                      \
            const int rows = nr - 8 * rg < 8 ? (int)(nr - 8 * rg) : 8;                             \
            for (int64_t j = 0; j < nc; j++) {                                                     \
                store8(T##_finish(accs[rg][j]), (float *)((char *)c + (size_t)j * ldc) + 8 * rg,   \
                       rows);                                                                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    void ts_q_gemm_##T##_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,             \
                              const void *w, size_t ldw, const void *a, size_t lda) {              \
        if (nc == 1) {                                                                             \
            T##_gemv(k, nr, c, w, ldw, a);                                                         \
            return;                                                                                \
        }                                                                                          \
        const int64_t nb = k / TS_QK;                                                              \
        for (int64_t r0 = 0; r0 < nr; r0 += 8 * ROW_GROUPS) {                                      \
            const int64_t n_r = nr - r0 < 8 * ROW_GROUPS ? nr - r0 : 8 * ROW_GROUPS;               \
            for (int64_t j0 = 0; j0 < nc; j0 += MAX_COLS) {                                        \
                const int64_t n = nc - j0 < MAX_COLS ? nc - j0 : MAX_COLS;                         \
                T##_cols(nb, (const char *)w + (size_t)r0 * ldw, ldw, n_r,                         \
                         (const char *)a + (size_t)j0 * lda, lda, n,                               \
                         (float *)((char *)c + (size_t)j0 * ldc) + r0, ldc);                       \
            }                                                                                      \
        }                                                                                          \
    }

/* The tile step without and with the sixteen-row kernel. */
#define X8_TILE_0(T, pair, buf, i, yq, off, e, acc0, acc1)                                         \
    do {                                                                                           \
        (void)(acc1);                                                                              \
        T##_block4(&buf[0][i], yq, off, e, acc0);                                                  \
    } while (0)
#define X8_TILE_1(T, pair, buf, i, yq, off, e, acc0, acc1)                                         \
    do {                                                                                           \
        if (pair) {                                                                                \
            T##_block4x2(&buf[0][i], &buf[1][i], yq, off, e, acc0, acc1);                          \
        } else {                                                                                   \
            T##_block4(&buf[0][i], yq, off, e, acc0);                                              \
        }                                                                                          \
    } while (0)

#define q8_0_gemv ts_q_gemv_q8_0_avx2

X8_GEMV(q4_0, ts_block_q8_0)
X8_GEMV(q4_1, ts_block_q8_1)
X8_GEMV(q5_0, ts_block_q8_0)
X8_GEMM(q4_0, ts_block_q8_0, sizeof(ts_block_q4_0), 1, 1)
X8_GEMM(q4_1, ts_block_q8_1, sizeof(ts_block_q4_1), 1, 1)
X8_GEMM(q5_0, ts_block_q8_0, sizeof(ts_block_q5_0), 1, 0)
X8_GEMM(q8_0, ts_block_q8_0, sizeof(ts_block_q8_0), 2, 0)

/* ---- one row, one column: exact block sums, then the gemm's float operations ---- */

/* The 32 five-bit levels of a Q5_0 block, element j in byte j. */
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

/* Exact sum of 32 products of unsigned levels (<= 31) with signed activation bytes. */
static inline int32_t isum1(__m256i q, const int8_t *y) {
    const __m256i p = _mm256_madd_epi16(
        _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y)), _mm256_set1_epi16(1));
    return hsum_epi32_256(p);
}

void ts_q_dot_q4_1_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q4_1 *w = x;
    const ts_block_q8_1 *a = y;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const float isum = (float)isum1(unpack_nibbles32(w[i].qs), a[i].qs);
        const float ms = fp16_hw(w[i].m) * fp16_hw(a[i].s);
        acc += __builtin_fmaf(isum, fp16_hw(w[i].d) * fp16_hw(a[i].d), ms);
    }
    *result = acc;
}

void ts_q_dot_q4_0_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q4_0 *w = x;
    const ts_block_q8_0 *a = y;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const int32_t t = isum1(unpack_nibbles32(w[i].qs), a[i].qs) - 8 * sum_i8x32(a[i].qs);
        acc = __builtin_fmaf((float)t, fp16_hw(w[i].d) * fp16_hw(a[i].d), acc);
    }
    *result = acc;
}

void ts_q_dot_q5_0_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q5_0 *w = x;
    const ts_block_q8_0 *a = y;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const int32_t t = isum1(unpack_q5_0(&w[i]), a[i].qs) - 16 * sum_i8x32(a[i].qs);
        acc = __builtin_fmaf((float)t, fp16_hw(w[i].d) * fp16_hw(a[i].d), acc);
    }
    *result = acc;
}

/* Q5_0 dequantization: x = d * (q - 16), one rounding as in the scalar reference. */
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
