/*
 * avx2/q32.c — AVX2 kernels of the 32-element block types: Q4_0, Q4_1, Q5_0, Q8_0 and MXFP4
 * against 8-bit activations (gemm with eight weight rows in the lanes of one register, Q8_0's
 * one-row gemv, the dot products), IQ4_NL's dot product, dequantization and the Q8_0 / Q8_1
 * activation quantizers.
 *
 * The gemm keeps eight weight rows in the eight 32-bit lanes of a register: for each group
 * of four consecutive elements, lane r holds row r's four levels. One vpmaddubsw of such a
 * register with the activation's matching four bytes broadcast to every lane multiplies 32
 * weight-activation pairs, and the block's eight groups sum in place (int16, then vpmaddwd),
 * so a block costs no horizontal reduction: per activation row and block it is eight
 * multiplies, seven adds and a few float operations for eight weight rows.
 *
 * Rows are interleaved on the fly (transpose8x4_epi32: eight rows' 16 quant bytes as a 4 x 4 table
 * of 32-bit words per register half) and unpacked to levels (nibbles, plus the fifth bit for
 * Q5_0; Q8_0 keeps its signed bytes). With one activation row each block of eight rows is
 * unpacked into registers and used at once, while the next eight rows are prefetched (a
 * one-row pass reads eight rows side by side, too short a stream per row for the hardware
 * prefetcher). With several, a call takes up to 32 weight rows: per pass of GATHER_KB blocks
 * the activation scales are converted once (x8ys), each group of eight rows is unpacked once
 * into a buffer, and block kernels run tiles of up to four activation rows against one group
 * (8 x 4) or, for levels <= 15, two groups (16 x 4: every broadcast feeds two multiplies),
 * while the next sixteen rows are prefetched. Q8_0 moves each weight's sign onto the activation
 * (vpsignb) so that vpmaddubsw sees |w|; its pair sums reach 2 * 127 * 127, so every group
 * widens to int32 at once. A tile's accumulators are locals for a whole pass.
 *
 * Q8_0 with one activation row (q8_0_gemv) takes four weight rows per tile instead: the four
 * 8-lane int32 block products are folded by a hadd tree into one vector [r0 r1 r2 r3 | r0 r1
 * r2 r3] (two half sums per row), so converting to float, scaling by d_w * d_a and
 * accumulating cost one instruction each per block for four rows. The next tile's rows are
 * prefetched meanwhile. The products use the sign trick (Q8_0 quants are in -127..127, as
 * every quantizer here and in llama.cpp writes them).
 *
 * Code shape: the gemm and gemv drivers (x8_gemm, x8_gemv) are written once and take a
 * constant table of the type's pieces (x8_type: block sizes, how to gather eight rows' block,
 * the activation terms, the float fold; Q8_0's own block kernel). They are always inlined into
 * the named functions at the end (ts_q_gemm_<type>_avx2 and its one-row <type>_gemv), where
 * the table is a constant, so every call through it becomes a direct, inlined call: each is
 * the kernel specialised for its type, with no indirect call left.
 *
 * Numerics — every path (gemm at any batch, gemv, vec_dot) computes each output element with
 * the same float operations in the same order, so results do not depend on batching (chunked
 * prefill equals one-shot prefill bit for bit; tests/quant/test_gemm_invariance.c). Per
 * weight row, activation row and block i, with isum_i = sum_j q_j y_j exact:
 *   Q4_1:         acc = acc + fma((float)isum_i, d_w * d_a, m_w * s_a)
 *   Q4_0, Q5_0, MXFP4:
 *                 acc = fma((float)(isum_i - o * sum_j y_j), d_w * d_a, acc),  o = 8, 16, 12
 *                 (MXFP4: d_w = 2^(e - 128), the levels the doubled E2M1 values + 12)
 *   Q8_0:         per half h of the block (elements 0..15, 16..31) with exact sum isum_ih,
 *                 acc_h = fma((float)isum_ih, d_w * d_a, acc_h); the result is acc_0 + acc_1
 *                 (one sum per block, tried, moved Gemma 3's KL divergence from f32 on the
 *                 short text of tests/tools/faithfulness_cli.c from 0.0064 to 0.0074)
 * The Q4_1 block value is formed before it meets the running sum: its two terms are large
 * and of opposite sign for centred weights (m ~ -8 d), and adding them to the sum one at a
 * time measurably hurt accuracy (tests/model/test_smollm.c: logit nrmse vs the reference
 * 0.12 instead of 0.04). int16 partial sums: levels <= 15 give pair sums <= 3810 and eight
 * groups <= 30480; Q5_0 levels <= 31 give 7874 and MXFP4's <= 24 give 6144 (against -128), so
 * their groups are summed four at a time.
 *
 * The integer sums are runs of the dot steps of simd_avx2.h (dot4_*): on AVX2 vpmaddubsw pair
 * sums added in int16 and widened by vpmaddwd, exact by the bounds above; in the AVX-VNNI build
 * of this file (avxvnni/q32.c) one vpdpbusd per step into int32, exact always. The sums, and
 * so the results, are the same bits at both levels. (Q8_0's sign trick: with |w| <= 128 after
 * vpsignb the pair sums lie in [-2 * 128 * 128, 2 * 128 * 127], inside int16 even for -128.)
 *
 * Dequantization and activation quantization are bit-exact with the scalar reference (the
 * same single roundings in the same order; rounding half away from zero done exactly).
 * IQ4_NL's dot product computes each block's integer sum exactly and differs from the scalar
 * reference only in the order the per-block float terms are added.
 */
#include <string.h>

#include "quant/simd_avx2.h"

#define GATHER_KB 64 /* blocks unpacked per pass (64 * 320 bytes = 20 KiB) */
#define MAX_COLS  64 /* activation rows whose accumulators one pass keeps */
/* Eight-row groups sharing one pass's activation scales: a call of the CPU backend (128 rows)
 * converts them once (with 4 groups, four times: 2-10% slower gemm). */
#define ROW_GROUPS 16

#define MXFP4_OFFSET 12 /* MXFP4 levels: the doubled E2M1 value + 12, so 0..24 */

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* The one-row paths are functions of their own, not inlined into the gemm: sharing a function
 * with the multi-row path, their loops kept the prefetch state and loop counters in memory
 * (measured 10-25% slower gemv). */
#define NOINLINE static __attribute__((noinline))

/* Block i of eight weight rows, unpacked. */
typedef struct x8blk {
    float d[8], m[8]; /* m: Q4_1 only */
    __m256i q[8];     /* group g: lane r = levels of elements 4g..4g+3 of row r */
} x8blk;

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

/* Where eight rows' blocks come from: the rows themselves (row r at w[r]), or half `half` (rows
 * 8 half .. 8 half + 7) of a sixteen-row group of a packed matrix at pk (quant_pack.c: each run
 * of sixteen words holds these rows' words in its first or second half). */
typedef struct x8src {
    const void *w[8];
    const uint8_t *pk;
    int half;
} x8src;

/* Per-type pieces of the drivers; all are inlined into the named wrappers at the end. */
typedef struct x8_type x8_type;
struct x8_type {
    size_t wbytes; /* weight block bytes */
    size_t abytes; /* activation block bytes */
    size_t aqs;    /* offset of the activation block's quants */
    int span;      /* level groups summed in int16 before vpmaddwd: 8 (levels <= 15), 4 (<= 31) */
    bool pairs;    /* sixteen-row tiles (block4x2_sum): levels <= 15 only */
    bool halves;   /* Q8_0: two accumulators per column, one per block half, added at the end */
    /* Block i of the eight rows of s (packed: from the packed group): levels q, scales d and
     * (Q4_1) offsets m. */
    void (*gather)(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m, __m256i q[8]);
    /* The terms of one activation block. */
    x8ys (*yscale)(const void *ab);
    /* acc with one block's exact isums (per lane) folded in. */
    __m256 (*fold)(__m256 acc, __m256i isum, __m256 d, __m256 m, const x8ys *e);
    /* The type's own kernel of one unpacked block against n <= 4 activation rows (quants at
     * y[j] + off, terms e[j]), folding into acc[j]; NULL: block4_sum, the
     * exact isums of `span` groups at a time, then fold. */
    void (*block4)(const x8blk *b, const int8_t *const *y, int64_t off, const x8ys *const *e,
                   __m256 *acc0, __m256 *acc1, int n);
};

/* ---- shared pieces ---- */

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

/* Exact isum per lane for levels <= 15: the eight groups in one run of dot steps (AVX2: in
 * int16, then one vpmaddwd). */
static inline __m256i isum_u4(const __m256i *q, const int8_t *y) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s = dot4_begin(zero);
    for (int g = 0; g < 8; g++) {
        s = dot4_step(s, q[g], y4(y, 4 * g));
    }
    return dot4_end(zero, s);
}

/* Exact isum per lane for levels <= 31: two runs of four groups. */
static inline __m256i isum_u5(const __m256i *q, const int8_t *y) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s0 = dot4_begin(zero), s1 = dot4_begin(zero);
    for (int g = 0; g < 4; g++) {
        s0 = dot4_step(s0, q[g], y4(y, 4 * g));
        s1 = dot4_step(s1, q[4 + g], y4(y, 16 + 4 * g));
    }
    return _mm256_add_epi32(dot4_end(zero, s0), dot4_end(zero, s1));
}

/* Packed: lane r of g[k] (k < n) = the word at byte b + 4k of row 8 half + r's block i (bs
 * bytes a block): the run of that word starts at byte 16 b of the packed block. */
static inline void x8_pk_words(const x8src *s, size_t bs, int64_t i, size_t b, int n, __m256i *g) {
    const uint8_t *p = s->pk + (size_t)i * 16 * bs + 16 * b + 32 * (size_t)s->half;
    for (int k = 0; k < n; k++) {
        g[k] = _mm256_loadu_si256((const __m256i *)(p + 64 * k));
    }
}

/* Packed: the eight rows' f16 at byte b (a run of sixteen 2-byte words), as floats. */
static inline __m256 x8_pk_f16(const x8src *s, size_t bs, int64_t i, size_t b) {
    const uint8_t *p = s->pk + (size_t)i * 16 * bs + 16 * b + 16 * (size_t)s->half;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* ---- per type: gather eight rows' block i, the activation terms, the fold ---- */

ALWAYS_INLINE void q4_1_gather(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m,
                               __m256i q[8]) {
    if (packed) {
        __m256i g[4], dm;
        x8_pk_words(s, sizeof(ts_block_q4_1), i, offsetof(ts_block_q4_1, qs), 4, g);
        x8_nibbles(g, q);
        x8_pk_words(s, sizeof(ts_block_q4_1), i, 0, 1, &dm); /* lane r: (d, m) of row r */
        /* The low (d) and high (m) halves of the eight words, each gathered into 128 bits. */
        const __m256i lo =
            _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5,
                             8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m256i hi =
            _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6, 7,
                             10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
        *d = _mm256_cvtph_ps(_mm256_castsi256_si128(
            _mm256_permute4x64_epi64(_mm256_shuffle_epi8(dm, lo), _MM_SHUFFLE(3, 1, 2, 0))));
        *m = _mm256_cvtph_ps(_mm256_castsi256_si128(
            _mm256_permute4x64_epi64(_mm256_shuffle_epi8(dm, hi), _MM_SHUFFLE(3, 1, 2, 0))));
        return;
    }
    const void *const *w = s->w;
    const ts_block_q4_1 *b[8];
    const uint8_t *qs[8];
    int32_t dm[8];
    for (int r = 0; r < 8; r++) {
        b[r] = (const ts_block_q4_1 *)w[r] + i;
        qs[r] = b[r]->qs;
        memcpy(&dm[r], b[r], 4); /* (d, m) */
    }
    __m256i g[4];
    transpose8x4_epi32(qs, g);
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

ALWAYS_INLINE void q4_0_gather(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m,
                               __m256i q[8]) {
    *m = _mm256_setzero_ps();
    if (packed) {
        __m256i g[4];
        x8_pk_words(s, sizeof(ts_block_q4_0), i, offsetof(ts_block_q4_0, qs), 4, g);
        x8_nibbles(g, q);
        *d = x8_pk_f16(s, sizeof(ts_block_q4_0), i, 0);
        return;
    }
    const void *const *w = s->w;
    const uint8_t *qs[8];
    const uint16_t *h[8];
    for (int r = 0; r < 8; r++) {
        const ts_block_q4_0 *b = (const ts_block_q4_0 *)w[r] + i;
        qs[r] = b->qs;
        h[r] = &b->d;
    }
    __m256i g[4];
    transpose8x4_epi32(qs, g);
    x8_nibbles(g, q);
    *d = x8_f16(h);
}

ALWAYS_INLINE void q5_0_gather(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m,
                               __m256i q[8]) {
    __m256i g[4], qhv;
    if (packed) {
        x8_pk_words(s, sizeof(ts_block_q5_0), i, offsetof(ts_block_q5_0, qs), 4, g);
        x8_pk_words(s, sizeof(ts_block_q5_0), i, offsetof(ts_block_q5_0, qh), 1, &qhv);
        *d = x8_pk_f16(s, sizeof(ts_block_q5_0), i, 0);
    } else {
        const uint8_t *qs[8];
        const uint16_t *h[8];
        int32_t qh[8];
        for (int r = 0; r < 8; r++) {
            const ts_block_q5_0 *b = (const ts_block_q5_0 *)s->w[r] + i;
            qs[r] = b->qs;
            h[r] = &b->d;
            memcpy(&qh[r], b->qh, 4);
        }
        transpose8x4_epi32(qs, g);
        qhv = _mm256_setr_epi32(qh[0], qh[1], qh[2], qh[3], qh[4], qh[5], qh[6], qh[7]);
        *d = x8_f16(h);
    }
    x8_nibbles(g, q);
    /* Element j's fifth bit is bit j of row r's qh (lane r). Group k covers elements 4k..4k+3,
     * whose bits sit in byte k / 2 of qh at offset 4 (k % 2): copy that byte to the lane's four
     * bytes, test one bit per byte, and add 16 where set. */
    const __m256i lane0 = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                           0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    for (int k = 0; k < 8; k++) {
        const __m256i spread =
            _mm256_shuffle_epi8(qhv, _mm256_add_epi8(lane0, _mm256_set1_epi8((char)(k / 2))));
        const __m256i bit = _mm256_set1_epi32(k % 2 ? (int)0x80402010 : 0x08040201);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q[k] = _mm256_or_si256(q[k], _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    *m = _mm256_setzero_ps();
}

/* Q8_0: signed levels, the sign moved onto the activation by the block kernel. Packed, the
 * 32 quant bytes are eight runs of words after the scale's run (quant_pack.c). */
ALWAYS_INLINE void q8_0_gather(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m,
                               __m256i q[8]) {
    *m = _mm256_setzero_ps();
    if (packed) {
        x8_pk_words(s, sizeof(ts_block_q8_0), i, offsetof(ts_block_q8_0, qs), 8, q);
        *d = x8_pk_f16(s, sizeof(ts_block_q8_0), i, 0);
        return;
    }
    const void *const *w = s->w;
    const uint8_t *lo[8], *hi[8];
    const uint16_t *h[8];
    for (int r = 0; r < 8; r++) {
        const ts_block_q8_0 *b = (const ts_block_q8_0 *)w[r] + i;
        lo[r] = (const uint8_t *)b->qs;
        hi[r] = lo[r] + 16;
        h[r] = &b->d;
    }
    transpose8x4_epi32(lo, q);
    transpose8x4_epi32(hi, q + 4);
    *d = x8_f16(h);
}

/* 2^(e - 128) per lane (ts_e8m0_half) for E8M0 exponents e in 0..255. */
static inline __m256 e8m0_half_ps(__m256i e) {
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e); /* e = 0, 1 */
    const __m256i big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(small, normal, big));
}

/* The doubled E2M1 values + 12 (levels 0..24), indexed by code. */
static inline __m256i mxfp4_levels_table(void) {
    const __m128i t = _mm_add_epi8(_mm_loadu_si128((const __m128i *)ts_mxfp4_values),
                                   _mm_set1_epi8(MXFP4_OFFSET));
    return _mm256_set_m128i(t, t);
}

/* MXFP4: each code indexes the doubled E2M1 values; levels are value + 12 (0..24), the scale
 * 2^(e - 128). The block's one-byte exponent puts its quants at byte 1, so the rows' 16 quant
 * bytes are read unaligned; packed, the exponents are a run of sixteen bytes (quant_pack.c). */
ALWAYS_INLINE void mxfp4_gather(const x8src *s, bool packed, int64_t i, __m256 *d, __m256 *m,
                                __m256i q[8]) {
    __m256i g[4], e;
    if (packed) {
        x8_pk_words(s, sizeof(ts_block_mxfp4), i, offsetof(ts_block_mxfp4, qs), 4, g);
        const uint8_t *p = s->pk + (size_t)i * 16 * sizeof(ts_block_mxfp4) + 8 * (size_t)s->half;
        e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    } else {
        const uint8_t *qs[8];
        int32_t ev[8];
        for (int r = 0; r < 8; r++) {
            const ts_block_mxfp4 *b = (const ts_block_mxfp4 *)s->w[r] + i;
            qs[r] = b->qs;
            ev[r] = b->e;
        }
        transpose8x4_epi32(qs, g);
        e = _mm256_setr_epi32(ev[0], ev[1], ev[2], ev[3], ev[4], ev[5], ev[6], ev[7]);
    }
    x8_nibbles(g, q);
    const __m256i table = mxfp4_levels_table();
    for (int k = 0; k < 8; k++) {
        q[k] = _mm256_shuffle_epi8(table, q[k]);
    }
    *d = e8m0_half_ps(e);
    *m = _mm256_setzero_ps();
}

ALWAYS_INLINE x8ys q4_1_yscale(const void *ab) {
    const ts_block_q8_1 *y = ab;
    return (x8ys){.d = fp16_hw(y->d), .s = fp16_hw(y->s)};
}

ALWAYS_INLINE x8ys q4_0_yscale(const void *ab) {
    const ts_block_q8_0 *y = ab;
    return (x8ys){.d = fp16_hw(y->d), .corr = 8 * sum_i8x32(y->qs)};
}

ALWAYS_INLINE x8ys q5_0_yscale(const void *ab) {
    const ts_block_q8_0 *y = ab;
    return (x8ys){.d = fp16_hw(y->d), .corr = 16 * sum_i8x32(y->qs)};
}

ALWAYS_INLINE x8ys mxfp4_yscale(const void *ab) {
    const ts_block_q8_0 *y = ab;
    return (x8ys){.d = fp16_hw(y->d), .corr = MXFP4_OFFSET * sum_i8x32(y->qs)};
}

ALWAYS_INLINE x8ys q8_0_yscale(const void *ab) {
    const ts_block_q8_0 *y = ab;
    return (x8ys){.d = fp16_hw(y->d)};
}

/* Float fold of one block's exact isums (per lane) into the accumulator; the same operations
 * on every path. Q4_1: acc + fma(isum, d_w * d_a, m_w * s_a). */
ALWAYS_INLINE __m256 fold_min(__m256 acc, __m256i isum, __m256 d, __m256 m, const x8ys *e) {
    const __m256 ms = _mm256_mul_ps(m, _mm256_broadcast_ss(&e->s));
    const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e->d));
    return _mm256_add_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, ms));
}

/* Q4_0, Q5_0: fma(isum - o * sum(y), d_w * d_a, acc). */
ALWAYS_INLINE __m256 fold_offset(__m256 acc, __m256i isum, __m256 d, __m256 m, const x8ys *e) {
    (void)m;
    const __m256i t = _mm256_sub_epi32(isum, _mm256_set1_epi32(e->corr));
    const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e->d));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), dd, acc);
}

/* ---- block kernels: one unpacked block (or two, sixteen rows) against n <= 4 activation
 * rows (n a constant after inlining: x8_tile), folded into acc[j] with column j's scales
 * e[j] ---- */

/* One block against n activation rows: each level register is loaded once and multiplied
 * with the rows' broadcasts; a run of dot steps takes `span` groups (AVX2: summed in int16
 * before vpmaddwd; 8 for levels <= 15, 4 for levels <= 31). */
ALWAYS_INLINE void isum_xn(const __m256i *q, const int8_t *const *y, int64_t off, int span, int n,
                           __m256i out[4]) {
    for (int j = 0; j < n; j++) {
        out[j] = _mm256_setzero_si256();
    }
    for (int g0 = 0; g0 < 8; g0 += span) {
        __m256i s[4];
        for (int j = 0; j < n; j++) {
            s[j] = dot4_begin(out[j]);
        }
        for (int g = g0; g < g0 + span; g++) {
            const __m256i qg = _mm256_load_si256(&q[g]);
            for (int j = 0; j < n; j++) {
                s[j] = dot4_step(s[j], qg, y4(y[j], (int)off + 4 * g));
            }
            /* Keep the sums as running chains: left alone, GCC rebalances them into trees
             * over all 32 products and spills them. */
            for (int j = 0; j < n; j++) {
                __asm__("" : "+x"(s[j]));
            }
        }
        for (int j = 0; j < n; j++) {
            out[j] = dot4_end(out[j], s[j]);
        }
    }
}

/* One block of sixteen weight rows (two unpacked eight-row blocks) against n activation rows:
 * each broadcast feeds two multiplies. For levels <= 15 only (span 8): the sixteen running
 * sums of a span of four would not fit in the registers. */
ALWAYS_INLINE void isum_xnx2(const __m256i *q0, const __m256i *q1, const int8_t *const *y,
                             int64_t off, int n, __m256i out[8]) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[8];
    for (int j = 0; j < n; j++) {
        s[j] = dot4_begin(zero);
        s[4 + j] = dot4_begin(zero);
    }
    for (int g = 0; g < 8; g++) {
        const __m256i a = _mm256_load_si256(&q0[g]), b = _mm256_load_si256(&q1[g]);
        for (int j = 0; j < n; j++) {
            const __m256i yb = y4(y[j], (int)off + 4 * g);
            s[j] = dot4_step(s[j], a, yb);
            s[4 + j] = dot4_step(s[4 + j], b, yb);
        }
        for (int j = 0; j < n; j++) {
            __asm__("" : "+x"(s[j]), "+x"(s[4 + j]));
        }
    }
    for (int j = 0; j < n; j++) {
        out[j] = dot4_end(zero, s[j]);
        out[4 + j] = dot4_end(zero, s[4 + j]);
    }
}

/* Unsigned levels (Q4_0, Q4_1, Q5_0): exact isums, then the type's fold; one accumulator per
 * column. */
ALWAYS_INLINE void block4_sum(const x8_type *t, const x8blk *b, const int8_t *const *y, int64_t off,
                              const x8ys *const *e, __m256 *acc, int n) {
    __m256i is[4];
    isum_xn(b->q, y, off, t->span, n, is);
    const __m256 d = _mm256_load_ps(b->d), m = _mm256_load_ps(b->m);
    for (int j = 0; j < n; j++) {
        acc[j] = t->fold(acc[j], is[j], d, m, e[j]);
    }
}

/* Sixteen rows, levels <= 15. */
ALWAYS_INLINE void block4x2_sum(const x8_type *t, const x8blk *b0, const x8blk *b1,
                                const int8_t *const *y, int64_t off, const x8ys *const *e,
                                __m256 *acc0, __m256 *acc1, int n) {
    __m256i is[8];
    isum_xnx2(b0->q, b1->q, y, off, n, is);
    const __m256 d0 = _mm256_load_ps(b0->d), m0 = _mm256_load_ps(b0->m);
    const __m256 d1 = _mm256_load_ps(b1->d), m1 = _mm256_load_ps(b1->m);
    for (int j = 0; j < n; j++) {
        acc0[j] = t->fold(acc0[j], is[j], d0, m0, e[j]);
        acc1[j] = t->fold(acc1[j], is[4 + j], d1, m1, e[j]);
    }
}

/* Q8_0: per half (elements 0..15, 16..31) the exact sum of |w| * (y with w's sign) per lane,
 * then acc_h[j] = fma(sum, d_w * d_a, acc_h[j]) (acc0: half 0, acc1: half 1); the result is
 * acc0 + acc1. The int16 pair sums reach 2 * 127 * 127, so each group is a run of its own
 * (AVX2: widened to int32 at once). */
ALWAYS_INLINE __m256i q8_0_step(__m256i s, __m256i aw, __m256i wg, const int8_t *y, int at) {
    return dot4(s, aw, _mm256_sign_epi8(y4(y, at), wg));
}

/* The exact sums of half h (groups 4h..4h+3) of block b against n activation rows, in s. */
ALWAYS_INLINE void q8_0_half(const x8blk *b, const int8_t *const *y, int64_t off, int h, __m256i *s,
                             int n) {
    for (int j = 0; j < n; j++) {
        s[j] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int g = 4 * h; g < 4 * h + 4; g++) {
        const __m256i wg = _mm256_load_si256(&b->q[g]);
        const __m256i aw = _mm256_sign_epi8(wg, wg);
        for (int j = 0; j < n; j++) {
            s[j] = q8_0_step(s[j], aw, wg, y[j], (int)off + 4 * g);
        }
        for (int j = 0; j < n; j++) {
            __asm__("" : "+x"(s[j]));
        }
    }
}

/* The halves are written out, not a loop over h: with the accumulator chosen by h, the
 * compiler kept both sets in memory. */
ALWAYS_INLINE void q8_0_block4(const x8blk *b, const int8_t *const *y, int64_t off,
                               const x8ys *const *e, __m256 *acc0, __m256 *acc1, int n) {
    const __m256 d = _mm256_load_ps(b->d);
    __m256i s[4];
    q8_0_half(b, y, off, 0, s, n);
    for (int j = 0; j < n; j++) {
        const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e[j]->d));
        acc0[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), dd, acc0[j]);
    }
    q8_0_half(b, y, off, 1, s, n);
    for (int j = 0; j < n; j++) {
        const __m256 dd = _mm256_mul_ps(d, _mm256_broadcast_ss(&e[j]->d));
        acc1[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), dd, acc1[j]);
    }
}

/* The type tables. */
static const x8_type k_q4_0 = {
    .wbytes = sizeof(ts_block_q4_0),
    .abytes = sizeof(ts_block_q8_0),
    .aqs = offsetof(ts_block_q8_0, qs),
    .span = 8,
    .pairs = true,
    .gather = q4_0_gather,
    .yscale = q4_0_yscale,
    .fold = fold_offset,
};
static const x8_type k_q4_1 = {
    .wbytes = sizeof(ts_block_q4_1),
    .abytes = sizeof(ts_block_q8_1),
    .aqs = offsetof(ts_block_q8_1, qs),
    .span = 8,
    .pairs = true,
    .gather = q4_1_gather,
    .yscale = q4_1_yscale,
    .fold = fold_min,
};
static const x8_type k_q5_0 = {
    .wbytes = sizeof(ts_block_q5_0),
    .abytes = sizeof(ts_block_q8_0),
    .aqs = offsetof(ts_block_q8_0, qs),
    .span = 4,
    .pairs = false,
    .gather = q5_0_gather,
    .yscale = q5_0_yscale,
    .fold = fold_offset,
};
static const x8_type k_mxfp4 = {
    .wbytes = sizeof(ts_block_mxfp4),
    .abytes = sizeof(ts_block_q8_0),
    .aqs = offsetof(ts_block_q8_0, qs),
    .span = 4,
    .pairs = false,
    .gather = mxfp4_gather,
    .yscale = mxfp4_yscale,
    .fold = fold_offset,
};
/* Q8_0: its own block kernel (signed levels); no fold, and its one-row path is q8_0_gemv. */
static const x8_type k_q8_0 = {
    .wbytes = sizeof(ts_block_q8_0),
    .abytes = sizeof(ts_block_q8_0),
    .aqs = offsetof(ts_block_q8_0, qs),
    .pairs = false,
    .gather = q8_0_gather,
    .yscale = q8_0_yscale,
    .halves = true,
    .block4 = q8_0_block4,
};

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

/* Exact isum of one unpacked block against one activation row (quants at y). */
ALWAYS_INLINE __m256i x8_isum(const x8_type *t, const __m256i *q, const int8_t *y) {
    return t->span == 8 ? isum_u4(q, y) : isum_u5(q, y);
}

/* Eight rows (src) against one activation row a: blocks unpacked in registers, the
 * `next_bytes` at next (the next eight rows) prefetched meanwhile. */
ALWAYS_INLINE void x8_col1(const x8_type *t, bool packed, int64_t nb, const x8src *src,
                           const char *a, const char *next, size_t next_bytes, float *c, int rows) {
    prefetch_rows pf;
    prefetch_rows_begin(&pf, next, next_bytes, next_bytes, 1, nb);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        prefetch_rows_step(&pf);
        __m256 d, m;
        __m256i q[8];
        t->gather(src, packed, i, &d, &m, q);
        const char *ab = a + (size_t)i * t->abytes;
        const x8ys e = t->yscale(ab);
        acc = t->fold(acc, x8_isum(t, q, (const int8_t *)(ab + t->aqs)), d, m, &e);
    }
    store8(acc, c, rows);
}

/* Rows base .. base + 7 of the call's (w, ldw), rows past nr repeating the last one (their
 * results are not stored). Packed, base is a multiple of 8 and w starts a group. */
ALWAYS_INLINE void x8_src_init(x8src *s, bool packed, const char *w, size_t ldw, int64_t base,
                               int64_t nr) {
    if (packed) {
        s->pk = (const uint8_t *)w + (size_t)(base / 16) * 16 * ldw;
        s->half = (int)(base / 8) % 2;
        return;
    }
    const int rows = nr - base < 8 ? (int)(nr - base) : 8;
    for (int r = 0; r < 8; r++) {
        s->w[r] = w + (size_t)(base + (r < rows ? r : rows - 1)) * ldw;
    }
}

/* One activation row (Q4_0, Q4_1, Q5_0), eight weight rows at a time. Packed, the next eight
 * rows' bytes are the same half of the next group. */
ALWAYS_INLINE void x8_gemv(const x8_type *t, bool packed, int64_t k, int64_t nr, float *c,
                           const void *w, size_t ldw, const void *a) {
    const int64_t nb = k / TS_QK;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;
        x8src src;
        x8_src_init(&src, packed, w, ldw, r0, nr);
        /* Prefetching past the matrix is harmless: prefetches never fault. */
        const char *next = (const char *)w + (size_t)(r0 + 8) * ldw;
        if (packed) {
            next = (const char *)src.pk + 16 * ldw + (size_t)src.half * 8 * ldw;
        }
        x8_col1(t, packed, nb, &src, a, next, 8 * ldw, c + r0, rows);
    }
}

/* One unpacked block (two with pair: sixteen rows) against n (1..4) activation rows. */
ALWAYS_INLINE void x8_tile_n(const x8_type *t, bool pair, const x8blk *b0, const x8blk *b1,
                             const int8_t *const *y, int64_t off, const x8ys *const *e,
                             __m256 *acc0, __m256 *acc1, int n) {
    if (t->block4 != NULL) {
        t->block4(b0, y, off, e, acc0, acc1, n);
    } else if (pair) {
        block4x2_sum(t, b0, b1, y, off, e, acc0, acc1, n);
    } else {
        block4_sum(t, b0, y, off, e, acc0, n);
    }
}

/* A tile of n activation rows (n a constant: x8_tile) over the pass's kb unpacked blocks,
 * column j0 + j's accumulators at m0[j] (and m1[j]: the second group of a pair, or Q8_0's
 * second half). They are locals for the whole pass, loaded before and stored after it: kept
 * in memory, every block's fold reloaded what the block before had just stored (Q8_0's gemm
 * 63 against 86 GFLOP/s, Q5_0 128 against 143, Q4_0 166 against 178; one thread, 2048 x 2048,
 * 64 columns, bench/gemm_bench). */
ALWAYS_INLINE void x8_tile_pass(const x8_type *t, bool pair, const x8blk *b0, const x8blk *b1,
                                const int8_t *const *y, const x8ys (*ys)[MAX_COLS], int64_t j0,
                                __m256 *m0, __m256 *m1, int64_t kb, prefetch_rows *pf, int n) {
    __m256 a0[4], a1[4];
    for (int j = 0; j < n; j++) {
        a0[j] = m0[j];
        a1[j] = pair || t->halves ? m1[j] : _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < kb; i++) {
        const x8ys *e[4];
        for (int j = 0; j < n; j++) {
            e[j] = &ys[i][j0 + j];
        }
        prefetch_rows_step(pf);
        x8_tile_n(t, pair, &b0[i], &b1[i], y, i * (int64_t)t->abytes, e, a0, a1, n);
    }
    for (int j = 0; j < n; j++) {
        m0[j] = a0[j];
        if (pair || t->halves) {
            m1[j] = a1[j];
        }
    }
}

/* x8_tile_pass with n = cols, a constant in each branch, so that a tile of fewer than four
 * columns computes only those. */
ALWAYS_INLINE void x8_tile(const x8_type *t, bool pair, const x8blk *b0, const x8blk *b1,
                           const int8_t *const *y, const x8ys (*ys)[MAX_COLS], int64_t j0,
                           __m256 *m0, __m256 *m1, int64_t kb, prefetch_rows *pf, int cols) {
    switch (cols) {
    case 4:
        x8_tile_pass(t, pair, b0, b1, y, ys, j0, m0, m1, kb, pf, 4);
        break;
    case 3:
        x8_tile_pass(t, pair, b0, b1, y, ys, j0, m0, m1, kb, pf, 3);
        break;
    case 2:
        x8_tile_pass(t, pair, b0, b1, y, ys, j0, m0, m1, kb, pf, 2);
        break;
    default:
        x8_tile_pass(t, pair, b0, b1, y, ys, j0, m0, m1, kb, pf, 1);
        break;
    }
}

/* What a gemm call runs: the type, and whether its weights are packed. */
typedef struct x8_call {
    const x8_type *t;
    bool packed;
} x8_call;

/* Several activation rows (nc <= MAX_COLS) against up to ROW_GROUPS groups of eight weight
 * rows. Per pass of GATHER_KB blocks the activation scales are converted once; then each
 * group's blocks are unpacked once (two groups at a time where the type has a sixteen-row
 * kernel) and every four activation rows run over them. A tile of fewer than four columns (a
 * decoding step of two or three sequences, a batch's last tile) computes only those: with four
 * always, a step of two sequences cost what four do. Column j of group rg accumulates in
 * accs[rg * MAX_COLS + j]. */
ALWAYS_INLINE void x8_gemm_cols(const void *call, int64_t nb, const char *w, size_t ldw, int64_t nr,
                                const char *a, size_t lda, int64_t nc, float *c, size_t ldc) {
    const x8_type *t = ((const x8_call *)call)->t;
    const bool packed = ((const x8_call *)call)->packed;
    x8blk buf[2][GATHER_KB];
    x8ys ys[GATHER_KB][MAX_COLS];
    /* Q8_0's second-half accumulators: column j of group rg at accs[H + rg * MAX_COLS + j]. */
    enum { H = ROW_GROUPS * MAX_COLS };
    __m256 accs[2 * H];
    const int groups = (int)((nr + 7) / 8);
    for (int rg = 0; rg < groups; rg++) {
        memset(&accs[rg * MAX_COLS], 0, (size_t)nc * sizeof(__m256));
        if (t->halves) {
            memset(&accs[H + rg * MAX_COLS], 0, (size_t)nc * sizeof(__m256));
        }
    }
    for (int64_t i0 = 0; i0 < nb; i0 += GATHER_KB) {
        const int64_t kb = nb - i0 < GATHER_KB ? nb - i0 : GATHER_KB;
        for (int64_t j = 0; j < nc; j++) {
            const char *y = a + (size_t)j * lda + (size_t)i0 * t->abytes;
            for (int64_t i = 0; i < kb; i++) {
                ys[i][j] = t->yscale(y + (size_t)i * t->abytes);
            }
        }
        for (int rg = 0; rg < groups;) {
            const int pair = t->pairs && rg + 1 < groups;
            for (int h = 0; h <= pair; h++) {
                x8src src;
                x8_src_init(&src, packed, w, ldw, 8 * (int64_t)(rg + h), nr);
                for (int64_t i = 0; i < kb; i++) {
                    __m256 d, m;
                    __m256i q[8];
                    t->gather(&src, packed, i0 + i, &d, &m, q);
                    _mm256_store_ps(buf[h][i].d, d);
                    _mm256_store_ps(buf[h][i].m, m);
                    for (int g = 0; g < 8; g++) {
                        buf[h][i].q[g] = q[g];
                    }
                }
            }
            /* While these rows compute, prefetch the next sixteen rows' part of the pass
             * (past this call's rows: the rows the thread most likely takes next). */
            prefetch_rows pf;
            const char *next = w + (size_t)(8 * (rg + 1 + pair)) * ldw;
            if (packed) { /* the group after this pair (or after the group this half is in) */
                prefetch_rows_begin(&pf,
                                    w + (size_t)((8 * (rg + 1 + pair) + 15) / 16) * 16 * ldw +
                                        (size_t)i0 * 16 * t->wbytes,
                                    0, (size_t)kb * 16 * t->wbytes, 1, ((nc + 3) / 4) * kb);
            } else {
                prefetch_rows_begin(&pf, next + (size_t)i0 * t->wbytes, ldw, (size_t)kb * t->wbytes,
                                    16, ((nc + 3) / 4) * kb);
            }
            for (int64_t j0 = 0; j0 < nc; j0 += 4) {
                const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
                const int8_t *yq[4];
                for (int j = 0; j < cols; j++) {
                    yq[j] = (const int8_t *)(a + (size_t)(j0 + j) * lda + (size_t)i0 * t->abytes +
                                             t->aqs);
                }
                x8_tile(t, pair, buf[0], buf[1], yq, (const x8ys(*)[MAX_COLS])ys, j0,
                        &accs[rg * MAX_COLS + j0],
                        pair ? &accs[(rg + 1) * MAX_COLS + j0] : &accs[H + rg * MAX_COLS + j0], kb,
                        &pf, cols);
            }
            rg += 1 + pair;
        }
    }
    for (int rg = 0; rg < groups; rg++) {
        const int rows = nr - 8 * rg < 8 ? (int)(nr - 8 * rg) : 8;
        for (int64_t j = 0; j < nc; j++) {
            const __m256 v =
                t->halves ? _mm256_add_ps(accs[rg * MAX_COLS + j], accs[H + rg * MAX_COLS + j])
                          : accs[rg * MAX_COLS + j];
            store8(v, (float *)((char *)c + (size_t)j * ldc) + 8 * rg, rows);
        }
    }
}

/* Several activation rows: calls of up to 8 * ROW_GROUPS weight rows and MAX_COLS columns
 * (a multiple of 16, so that packed pieces start on a group). */
ALWAYS_INLINE void x8_gemm(const x8_call *call, int64_t k, int64_t nr, int64_t nc, float *c,
                           size_t ldc, const void *w, size_t ldw, const void *a, size_t lda) {
    const int64_t nb = k / TS_QK;
    ts_q_gemm_pieces(x8_gemm_cols, call, nb, 8 * ROW_GROUPS, MAX_COLS, nr, nc, c, ldc, w, ldw, a,
                     lda);
}

/* ---- Q8_0 with one activation row: four weight rows per tile ---- */

/* [c0..c3 | c0..c3]: lane c of each half is a half-sum of p_c. */
static inline __m256i fold4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
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

static inline __m256i sdot(__m256i aw, __m256i w, __m256i yv) {
    return dot4(_mm256_setzero_si256(), aw, _mm256_sign_epi8(yv, w));
}

static inline __m256i sdot_row(const ts_block_q8_0 *b, __m256i yv) {
    const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
    return sdot(_mm256_sign_epi8(q, q), q, yv);
}

ALWAYS_INLINE void q8_0_tile1(int64_t nb, const ts_block_q8_0 *const *w, const ts_block_q8_0 *y,
                              __m256 *acc, prefetch_rows *pf) {
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

/* One activation row: tiles of four weight rows (rows in lanes 0..3 of each half), the next
 * tile prefetched meanwhile. Not inlined into the gemm (see NOINLINE). */
NOINLINE void q8_0_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a) {
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

/* One activation row on packed weights: eight rows in the lanes, per block the two half sums
 * (q8_0_halfn's steps for one column) folded into a half's accumulator, as q8_0_block4 does;
 * the next eight rows (the same half of the next group) prefetched meanwhile. */
NOINLINE void q8_0_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                           const void *a) {
    const int64_t nb = k / TS_QK;
    const ts_block_q8_0 *y = a;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        x8src src;
        x8_src_init(&src, true, w, ldw, r0, nr);
        prefetch_rows pf;
        prefetch_rows_begin(&pf, (const char *)src.pk + 16 * ldw + (size_t)src.half * 8 * ldw,
                            8 * ldw, 8 * ldw, 1, nb);
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t i = 0; i < nb; i++) {
            prefetch_rows_step(&pf);
            __m256 d, m;
            __m256i q[8];
            q8_0_gather(&src, true, i, &d, &m, q);
            const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(fp16_hw(y[i].d)));
            for (int h = 0; h < 2; h++) {
                __m256i sum = _mm256_setzero_si256();
                for (int g = 0; g < 4; g++) {
                    const __m256i wg = q[4 * h + g];
                    sum = q8_0_step(sum, _mm256_sign_epi8(wg, wg), wg, y[i].qs, 16 * h + 4 * g);
                }
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, acc[h]);
            }
        }
        store8(_mm256_add_ps(acc[0], acc[1]), c + r0, nr - r0 < 8 ? (int)(nr - r0) : 8);
    }
}

/* ---- the gemm of each type: a named one-row function and the gemm ---- */

static const x8_call k_q4_0_rows = {&k_q4_0, false}, k_q4_0_pk = {&k_q4_0, true};
static const x8_call k_q4_1_rows = {&k_q4_1, false}, k_q4_1_pk = {&k_q4_1, true};
static const x8_call k_q5_0_rows = {&k_q5_0, false}, k_q5_0_pk = {&k_q5_0, true};
static const x8_call k_q8_0_rows = {&k_q8_0, false}, k_q8_0_pk = {&k_q8_0, true};
static const x8_call k_mxfp4_rows = {&k_mxfp4, false}, k_mxfp4_pk = {&k_mxfp4, true};

NOINLINE void q4_0_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a) {
    x8_gemv(&k_q4_0, false, k, nr, c, w, ldw, a);
}

NOINLINE void q4_1_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a) {
    x8_gemv(&k_q4_1, false, k, nr, c, w, ldw, a);
}

NOINLINE void q5_0_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a) {
    x8_gemv(&k_q5_0, false, k, nr, c, w, ldw, a);
}

NOINLINE void mxfp4_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                         const void *a) {
    x8_gemv(&k_mxfp4, false, k, nr, c, w, ldw, a);
}

NOINLINE void q4_0_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                           const void *a) {
    x8_gemv(&k_q4_0, true, k, nr, c, w, ldw, a);
}

NOINLINE void q4_1_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                           const void *a) {
    x8_gemv(&k_q4_1, true, k, nr, c, w, ldw, a);
}

NOINLINE void q5_0_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                           const void *a) {
    x8_gemv(&k_q5_0, true, k, nr, c, w, ldw, a);
}

NOINLINE void mxfp4_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                            const void *a) {
    x8_gemv(&k_mxfp4, true, k, nr, c, w, ldw, a);
}

void ts_q_gemm_q4_0_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_0_gemv(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q4_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q4_1_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_1_gemv(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q4_1_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q5_0_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q5_0_gemv(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q5_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

/* The same on packed weights (nr a multiple of 16, w at a group). */
void ts_q_gemm_q4_0_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_0_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q4_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q4_1_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_1_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q4_1_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q5_0_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q5_0_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q5_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q8_0_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q8_0_gemv(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q8_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q8_0_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q8_0_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_q8_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_mxfp4_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                          size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        mxfp4_gemv(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_mxfp4_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_mxfp4_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                 const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        mxfp4_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        x8_gemm(&k_mxfp4_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

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
    return hsum_epi32_256(dot4(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)y)));
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

/* Q8_0: the two half sums of each block in the lanes of halves1, as q8_0_gemv keeps them. */
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

/* MXFP4: the gemm's exact block integer (levels - 12 against y), then its float operations. */
void ts_q_dot_mxfp4_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_mxfp4 *w = x;
    const ts_block_q8_0 *a = y;
    const __m256i table = mxfp4_levels_table();
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles32(w[i].qs));
        const int32_t t = isum1(q, a[i].qs) - MXFP4_OFFSET * sum_i8x32(a[i].qs);
        acc = __builtin_fmaf((float)t, ts_e8m0_half(w[i].e) * fp16_hw(a[i].d), acc);
    }
    *result = acc;
}

/* ---- dequantization and activation quantization ----
 * No dot step here: the AVX-VNNI build of this file (avxvnni/q32.c) leaves them out, and its
 * level uses these. */
#ifndef TS_AVXVNNI

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

/* Q5_0: x = d * (q - 16), one rounding as in the scalar reference. */
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

/* MXFP4: x = value * 2^(e - 128), one exact product as in the scalar reference. */
void ts_q_to_float_mxfp4_avx2(const void *src, float *dst, int64_t n) {
    const ts_block_mxfp4 *b = src;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_mxfp4_values));
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const __m256 d = _mm256_set1_ps(ts_e8m0_half(b[i].e));
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles32(b[i].qs));
        const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(dst + 0, _mm256_mul_ps(i8x8_to_ps(lo), d));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), d));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(i8x8_to_ps(hi), d));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), d));
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

#endif /* TS_AVXVNNI */
