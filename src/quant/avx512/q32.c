/*
 * avx512/q32.c — Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL and MXFP4 (32-element blocks) against 8-bit
 * activations, AVX-512 with VNNI: gemm and gemv with sixteen weight rows in the lanes of one
 * register, and the dot products of Q8_0, IQ4_NL and MXFP4.
 *
 * Layout in registers (rows in lanes): for each group g of four consecutive elements
 * (4g .. 4g + 3) of a block, lane r of register q[g] holds row r's four levels as unsigned
 * bytes. One vpdpbusd of q[g] with the activation's four bytes broadcast to every lane (an
 * embedded {1to16} memory operand) adds sixteen rows' four products to sixteen int32 sums, so
 * a block costs eight instructions per activation row for sixteen weight rows, with no int16
 * intermediate and no horizontal reduction. Levels: Q4_0, Q4_1 nibbles (0..15), Q5_0 nibble
 * plus fifth bit (0..31), Q8_0 the signed byte plus 128 (0..255; vpdpbusd multiplies unsigned
 * by signed bytes, and AVX-512 has no vpsignb for the sign trick of the AVX2 kernels), IQ4_NL
 * its table value plus 128, MXFP4 its code's doubled E2M1 value plus 128.
 *
 * Rows are interleaved on the fly: four 16-byte row pieces per register (rows r, r + 4, r + 8,
 * r + 12 in its four 128-bit lanes), then a 4 x 4 transpose of 32-bit words inside each
 * 128-bit lane puts row 4L + p in lane 4L + p. The weight scales of sixteen rows come with
 * one gather. With one activation row (decoding) each block of sixteen rows is unpacked in
 * registers and used at once, while the next sixteen rows are prefetched. With several, a
 * call takes up to 128 weight rows: per pass of PASS_KB blocks each activation row is prepared
 * once (its quants + 128, its scales), each group of sixteen rows is unpacked once into a
 * buffer as signed values with their sum (see "gemm" below for why), and tiles of 32 weight
 * rows x 4 activation rows run over it (every broadcast feeds two vpdpbusd).
 *
 * Numerics — each output element gets the same float operations in the same order on every
 * path (gemv, gemm at any batch, the level's vec_dot), so results do not depend on batching
 * (tests/quant/test_gemm_invariance.c). Per weight row, activation row and block, with
 * isum = sum_j q_j y_j over the block's levels (exact int32):
 *   Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4:
 *                      acc = fma((float)(isum - o * sum_j y_j), d_w * d_a, acc),
 *                      o = 8, 16, 128, 128, 128 (the level offset; the int32 starts at
 *                      -o * sum y; MXFP4's d_w is 2^(e - 128))
 *   Q4_1:              acc = acc + fma((float)isum, d_w * d_a, m_w * s_a)
 * These are the AVX2 level's formulas for Q4_0, Q4_1 and Q5_0 (avx2/q32.c), whose dot
 * products this level therefore shares; Q8_0 uses one exact sum per block where the AVX2 level
 * keeps two half sums, and IQ4_NL's AVX2 dot accumulates per lane, so these two have their own
 * dot products here. MXFP4's is its own too, though its AVX2 gemm and dot do the same float
 * operations (the AVX-512 and AVX2 results are the same bits).
 */
#include <assert.h>
#include <string.h>

#include "quant/simd_avx2.h"

#define PASS_KB     32  /* blocks unpacked per pass (2 x 32 x 640 bytes = 40 KiB) */
#define MAX_COLS    64  /* activation rows whose accumulators one pass keeps */
#define GROUPS      2   /* sixteen-row groups per gemm tile (32 rows) */
#define CALL_GROUPS 8   /* sixteen-row groups sharing one pass's prepared activations */
#define GEMV_KB     128 /* activation blocks whose terms a gemv pass computes first */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* What the fold needs of one activation block: its scale d, Q4_1's s = d * sum(y) (an f16
 * in the block), and the int32 the block's sums start from (-o * sum(y); Q4_1: 0). */
typedef struct x16ys {
    float d, s;
    int32_t init;
} x16ys;

/* Where sixteen rows' blocks come from: the rows themselves (row r at p[r]), or a group of a
 * packed matrix (quant_pack.c) at pk. */
typedef struct x16rows {
    const uint8_t *p[16];
    __m512i off; /* lane r: p[r] - p[0], for the scale gathers */
    const uint8_t *pk;
} x16rows;

/* Per-type pieces of the drivers. All are inlined into the named wrappers at the end. */
typedef struct x16_type {
    size_t wbytes; /* weight block bytes */
    size_t abytes; /* activation block bytes */
    size_t aqs;    /* offset of its quants */
    int offset;    /* unpacked level - offset = the weight's value (Q8_0: levels are w + 128) */
    void (*unpack)(const x16rows *rows, bool packed, int64_t i, __m512i q[8], __m512 *d, __m512 *m);
    x16ys (*yscale)(const void *ab);
    __m512 (*fold)(__m512 acc, __m512i isum, __m512 d, __m512 m, const x16ys *e);
} x16_type;

/* ---- shared pieces ---- */

/* The n <= 16 rows at w (ldw bytes apart); packed: the group at w (n is 16). */
ALWAYS_INLINE void rows_init(x16rows *rows, bool packed, const char *w, size_t ldw, int n) {
    if (packed) {
        rows->pk = (const uint8_t *)w;
        return;
    }
    assert(ldw <= (size_t)INT32_MAX / 16);
    int32_t off[16];
    for (int r = 0; r < 16; r++) {
        /* Rows past n repeat the last one (their results are not stored). */
        const int rr = r < n ? r : n - 1;
        rows->p[r] = (const uint8_t *)w + (size_t)rr * ldw;
        off[r] = (int32_t)((size_t)rr * ldw);
    }
    rows->off = _mm512_loadu_si512(off);
}

/* Lane r of register k = bytes 4k .. 4k + 3 of the 16 bytes at p[r] + at. */
ALWAYS_INLINE void x16_transpose(const x16rows *rows, size_t at, __m512i g[4]) {
    __m512i v[4];
    for (int r = 0; r < 4; r++) {
        __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rows->p[r] + at)));
        x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rows->p[r + 4] + at)), 1);
        x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rows->p[r + 8] + at)), 2);
        v[r] = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(rows->p[r + 12] + at)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
    g[0] = _mm512_unpacklo_epi64(t0, t2);
    g[1] = _mm512_unpackhi_epi64(t0, t2);
    g[2] = _mm512_unpacklo_epi64(t1, t3);
    g[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The 32-bit words at byte `at` of sixteen rows. */
ALWAYS_INLINE __m512i x16_gather32(const x16rows *rows, size_t at) {
    return _mm512_i32gather_epi32(rows->off, (const void *)(rows->p[0] + at), 1);
}

/* Sixteen f16 values (the low halves of the words) as floats. */
ALWAYS_INLINE __m512 f16_lo(__m512i v) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

/* Nibble registers -> level groups: group k = low nibbles (elements 4k ..), 4 + k = high. */
ALWAYS_INLINE void x16_nibbles(const __m512i g[4], __m512i q[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; k++) {
        q[k] = _mm512_and_si512(g[k], m4);
        q[4 + k] = _mm512_and_si512(_mm512_srli_epi16(g[k], 4), m4);
    }
}

/* Broadcast of the four activation bytes at y. */
ALWAYS_INLINE __m512i y4(const int8_t *y) {
    int32_t v;
    memcpy(&v, y, 4);
    return _mm512_set1_epi32(v);
}

/* ---- reading sixteen rows' words: from the rows (transposes, gathers) or packed ---- */

/* Lane r of g[k] (k < n, n = 4 or 8) = the 32-bit word at byte b + 4k of row r's block i
 * (bs bytes a block). Packed, that is one load per register (quant_pack.c: the word's run
 * starts at byte 16 * b of the packed block). */
ALWAYS_INLINE void x16_words(const x16rows *rows, bool packed, size_t bs, int64_t i, size_t b,
                             int n, __m512i *g) {
    if (packed) {
        const uint8_t *p = rows->pk + (size_t)i * 16 * bs + 16 * b;
        for (int k = 0; k < n; k++) {
            g[k] = _mm512_loadu_si512(p + 64 * k);
        }
        return;
    }
    for (int k = 0; k < n; k += 4) {
        x16_transpose(rows, (size_t)i * bs + b + 4 * (size_t)k, g + k);
    }
}

/* The word at byte b of sixteen rows' block i, lane r = row r. */
ALWAYS_INLINE __m512i x16_word(const x16rows *rows, bool packed, size_t bs, int64_t i, size_t b) {
    if (packed) {
        return _mm512_loadu_si512(rows->pk + (size_t)i * 16 * bs + 16 * b);
    }
    return x16_gather32(rows, (size_t)i * bs + b);
}

/* The f16 at byte b of sixteen rows' block i, as floats. */
ALWAYS_INLINE __m512 x16_f16(const x16rows *rows, bool packed, size_t bs, int64_t i, size_t b) {
    if (packed) {
        const uint8_t *p = rows->pk + (size_t)i * 16 * bs + 16 * b;
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    }
    return f16_lo(x16_gather32(rows, (size_t)i * bs + b));
}

/* ---- per type: unpack sixteen rows' block i (from either source), the activation terms,
 * the fold ---- */

ALWAYS_INLINE void q4_0_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8], __m512 *d,
                               __m512 *m) {
    __m512i g[4];
    x16_words(rows, packed, sizeof(ts_block_q4_0), i, offsetof(ts_block_q4_0, qs), 4, g);
    x16_nibbles(g, q);
    *d = x16_f16(rows, packed, sizeof(ts_block_q4_0), i, 0);
    *m = _mm512_setzero_ps();
}

ALWAYS_INLINE void q4_1_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8], __m512 *d,
                               __m512 *m) {
    __m512i g[4];
    x16_words(rows, packed, sizeof(ts_block_q4_1), i, offsetof(ts_block_q4_1, qs), 4, g);
    x16_nibbles(g, q);
    const __m512i dm = x16_word(rows, packed, sizeof(ts_block_q4_1), i, 0); /* (d, m) */
    *d = f16_lo(dm);
    *m = f16_lo(_mm512_srli_epi32(dm, 16));
}

ALWAYS_INLINE void q5_0_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8], __m512 *d,
                               __m512 *m) {
    __m512i g[4];
    x16_words(rows, packed, sizeof(ts_block_q5_0), i, offsetof(ts_block_q5_0, qs), 4, g);
    x16_nibbles(g, q);
    /* Element j's fifth bit is bit j of the row's qh (lane r). Group k covers elements
     * 4k .. 4k + 3, whose bits sit in byte k / 2 of qh at offset 4 (k % 2): copy that byte to
     * the lane's four bytes, test one bit per byte, and add 16 where set. */
    const __m512i qh =
        x16_word(rows, packed, sizeof(ts_block_q5_0), i, offsetof(ts_block_q5_0, qh));
    const __m512i lane0 = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0x00000000);
    const __m512i sixteen = _mm512_set1_epi8(0x10);
    for (int k = 0; k < 8; k++) {
        const __m512i spread =
            _mm512_shuffle_epi8(qh, _mm512_add_epi8(lane0, _mm512_set1_epi8((char)(k / 2))));
        const __m512i bit = _mm512_set1_epi32(k % 2 ? (int)0x80402010 : 0x08040201);
        q[k] = _mm512_mask_add_epi8(q[k], _mm512_test_epi8_mask(spread, bit), q[k], sixteen);
    }
    *d = x16_f16(rows, packed, sizeof(ts_block_q5_0), i, 0);
    *m = _mm512_setzero_ps();
}

/* IQ4_NL: each nibble indexes a table of 16 signed values; levels are value + 128. */
ALWAYS_INLINE void iq4_nl_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8],
                                 __m512 *d, __m512 *m) {
    __m512i g[4];
    x16_words(rows, packed, sizeof(ts_block_iq4_nl), i, offsetof(ts_block_iq4_nl, qs), 4, g);
    x16_nibbles(g, q);
    const __m512i table =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ts_iq4nl_values)),
                         _mm512_set1_epi8((char)0x80));
    for (int k = 0; k < 8; k++) {
        q[k] = _mm512_shuffle_epi8(table, q[k]);
    }
    *d = x16_f16(rows, packed, sizeof(ts_block_iq4_nl), i, 0);
    *m = _mm512_setzero_ps();
}

/* 2^(e - 128) per lane (ts_e8m0_half) for E8M0 exponents e in 0..255. */
ALWAYS_INLINE __m512 e8m0_half_ps(__m512i e) {
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e); /* e = 0, 1 */
    const __mmask16 big = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(big, small, normal));
}

/* MXFP4: each code indexes the doubled E2M1 values; levels are value + 128, the scale
 * 2^(e - 128) from the one-byte exponent (the word at the block's start, low byte; packed, a
 * run of sixteen bytes). */
ALWAYS_INLINE void mxfp4_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8],
                                __m512 *d, __m512 *m) {
    __m512i g[4];
    x16_words(rows, packed, sizeof(ts_block_mxfp4), i, offsetof(ts_block_mxfp4, qs), 4, g);
    x16_nibbles(g, q);
    const __m512i table =
        _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ts_mxfp4_values)),
                         _mm512_set1_epi8((char)0x80));
    for (int k = 0; k < 8; k++) {
        q[k] = _mm512_shuffle_epi8(table, q[k]);
    }
    __m512i e;
    if (packed) {
        const uint8_t *p = rows->pk + (size_t)i * 16 * sizeof(ts_block_mxfp4);
        e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    } else {
        e = _mm512_and_si512(x16_gather32(rows, (size_t)i * sizeof(ts_block_mxfp4)),
                             _mm512_set1_epi32(0xFF));
    }
    *d = e8m0_half_ps(e);
    *m = _mm512_setzero_ps();
}

ALWAYS_INLINE void q8_0_unpack(const x16rows *rows, bool packed, int64_t i, __m512i q[8], __m512 *d,
                               __m512 *m) {
    x16_words(rows, packed, sizeof(ts_block_q8_0), i, offsetof(ts_block_q8_0, qs), 8, q);
    const __m512i bias = _mm512_set1_epi8((char)0x80); /* signed -> signed + 128 */
    for (int k = 0; k < 8; k++) {
        q[k] = _mm512_xor_si512(q[k], bias);
    }
    *d = x16_f16(rows, packed, sizeof(ts_block_q8_0), i, 0);
    *m = _mm512_setzero_ps();
}

/* The activation block's scale terms; `init` is filled by the gemv (x16_gemv). */
ALWAYS_INLINE x16ys q8_1_yscale(const void *ab) {
    const ts_block_q8_1 *y = ab;
    return (x16ys){.d = fp16_hw(y->d), .s = fp16_hw(y->s), .init = 0};
}

ALWAYS_INLINE x16ys q8_0_yscale(const void *ab) {
    const ts_block_q8_0 *y = ab;
    return (x16ys){.d = fp16_hw(y->d), .s = 0.0f, .init = 0};
}

/* acc = fma((float)t, d_w * d_a, acc), t = isum - o * sum(y) already. */
ALWAYS_INLINE __m512 fold_offset(__m512 acc, __m512i t, __m512 d, __m512 m, const x16ys *e) {
    (void)m;
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, _mm512_set1_ps(e->d)), acc);
}

/* acc = acc + fma((float)isum, d_w * d_a, m_w * s_a). */
ALWAYS_INLINE __m512 fold_min(__m512 acc, __m512i isum, __m512 d, __m512 m, const x16ys *e) {
    const __m512 ms = _mm512_mul_ps(m, _mm512_set1_ps(e->s));
    const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(e->d));
    return _mm512_add_ps(acc, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dd, ms));
}

#define A8_0 .abytes = sizeof(ts_block_q8_0), .aqs = offsetof(ts_block_q8_0, qs)
#define A8_1 .abytes = sizeof(ts_block_q8_1), .aqs = offsetof(ts_block_q8_1, qs)
static const x16_type k_q4_0 = {.wbytes = sizeof(ts_block_q4_0),
                                A8_0,
                                .offset = 8,
                                .unpack = q4_0_unpack,
                                .yscale = q8_0_yscale,
                                .fold = fold_offset};
static const x16_type k_q4_1 = {.wbytes = sizeof(ts_block_q4_1),
                                A8_1,
                                .offset = 0,
                                .unpack = q4_1_unpack,
                                .yscale = q8_1_yscale,
                                .fold = fold_min};
static const x16_type k_q5_0 = {.wbytes = sizeof(ts_block_q5_0),
                                A8_0,
                                .offset = 16,
                                .unpack = q5_0_unpack,
                                .yscale = q8_0_yscale,
                                .fold = fold_offset};
static const x16_type k_q8_0 = {.wbytes = sizeof(ts_block_q8_0),
                                A8_0,
                                .offset = 128,
                                .unpack = q8_0_unpack,
                                .yscale = q8_0_yscale,
                                .fold = fold_offset};

static const x16_type k_iq4_nl = {.wbytes = sizeof(ts_block_iq4_nl),
                                  A8_0,
                                  .offset = 128,
                                  .unpack = iq4_nl_unpack,
                                  .yscale = q8_0_yscale,
                                  .fold = fold_offset};

static const x16_type k_mxfp4 = {.wbytes = sizeof(ts_block_mxfp4),
                                 A8_0,
                                 .offset = 128,
                                 .unpack = mxfp4_unpack,
                                 .yscale = q8_0_yscale,
                                 .fold = fold_offset};

/* The activation quants of block i of the row at a. */
ALWAYS_INLINE const int8_t *aq(const x16_type *t, const char *a, int64_t i) {
    return (const int8_t *)(a + (size_t)i * t->abytes + t->aqs);
}

/* ---- block sums ---- */

/* One unpacked block against one activation row (its quants at y), from `init`: two chains
 * of four, so that consecutive vpdpbusd do not wait on each other. */
ALWAYS_INLINE __m512i isum1(const __m512i q[8], const int8_t *y, int32_t init) {
    __m512i s0 = _mm512_set1_epi32(init), s1 = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
        s0 = _mm512_dpbusd_epi32(s0, q[g], y4(y + 4 * g));
        s1 = _mm512_dpbusd_epi32(s1, q[4 + g], y4(y + 16 + 4 * g));
    }
    return _mm512_add_epi32(s0, s1);
}

/* ---- gemv: one activation row ---- */

/* Rows [0, nr) (nr <= 16 at a time) against the activation blocks [i0, i0 + kb), whose
 * terms are ys; the next `next_bytes` of rows after these are prefetched meanwhile. */
ALWAYS_INLINE __m512 x16_gemv_pass(const x16_type *t, bool packed, const x16rows *rows, int64_t i0,
                                   int64_t kb, const char *a, const x16ys *ys, __m512 acc,
                                   prefetch_rows *pf) {
    for (int64_t i = 0; i < kb; i++) {
        prefetch_rows_step(pf);
        __m512i q[8];
        __m512 d, m;
        t->unpack(rows, packed, i0 + i, q, &d, &m);
        acc = t->fold(acc, isum1(q, aq(t, a, i0 + i), ys[i].init), d, m, &ys[i]);
    }
    return acc;
}

ALWAYS_INLINE void store16(__m512 v, float *c, int rows) {
    _mm512_mask_storeu_ps(c, (__mmask16)((1u << rows) - 1), v);
}

/* Packed, the next group's part of a pass is one contiguous piece: the rows "row" of the
 * prefetch are then groups. */
ALWAYS_INLINE void x16_prefetch(prefetch_rows *pf, const x16_type *t, bool packed, const char *w,
                                size_t ldw, int64_t r0, int64_t i0, int64_t kb, int64_t rows,
                                int64_t steps) {
    if (packed) {
        prefetch_rows_begin(pf, w + (size_t)r0 * ldw + (size_t)i0 * 16 * t->wbytes, 16 * ldw,
                            (size_t)kb * 16 * t->wbytes, rows / 16, steps);
    } else {
        prefetch_rows_begin(pf, w + (size_t)r0 * ldw + (size_t)i0 * t->wbytes, ldw,
                            (size_t)kb * t->wbytes, rows, steps);
    }
}

ALWAYS_INLINE void x16_gemv(const x16_type *t, bool packed, int64_t k, int64_t nr, float *c,
                            const char *w, size_t ldw, const char *a) {
    const int64_t nb = k / TS_QK;
    x16ys ys[GEMV_KB];
    for (int64_t r0 = 0; r0 < nr; r0 += 16) {
        const int rows = nr - r0 < 16 ? (int)(nr - r0) : 16;
        x16rows rw;
        rows_init(&rw, packed, w + (size_t)r0 * ldw, ldw, rows);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i0 = 0; i0 < nb; i0 += GEMV_KB) {
            const int64_t kb = nb - i0 < GEMV_KB ? nb - i0 : GEMV_KB;
            for (int64_t i = 0; i < kb; i++) {
                ys[i] = t->yscale(a + (size_t)(i0 + i) * t->abytes);
                /* The levels are w + o: start each block's sum at -o * sum(y). */
                ys[i].init = t->offset != 0 ? -(int32_t)t->offset * sum_i8x32(aq(t, a, i0 + i)) : 0;
            }
            /* The next sixteen rows' part of this pass (prefetches never fault). */
            prefetch_rows pf;
            x16_prefetch(&pf, t, packed, w, ldw, r0 + 16, i0, kb, 16, kb);
            acc = x16_gemv_pass(t, packed, &rw, i0, kb, a, ys, acc, &pf);
        }
        store16(acc, c + r0, rows);
    }
}

/* ---- gemm: several activation rows ----
 *
 * Here the roles of the operands swap: per pass each activation row's quants are copied once
 * as y + 128 (unsigned), and each unpacked weight block holds signed values w = level - o
 * (o = 8, 16, 0 and, for Q8_0 whose levels are w + 128, 128), so vpdpbusd sums
 * (y + 128) * w. Starting the sum at -128 * sum(w), computed per row when the block is
 * unpacked, leaves exactly sum(y * w) = isum - o * sum(y): the integer the gemv and the dot
 * product reach through the activation's sum, so the fold sees the same value. The correction
 * is paid once per weight block and pass instead of once per activation block and weight-row
 * group, which is what would otherwise dominate (an exact byte sum per block and column). */

/* Block i of sixteen weight rows for the gemm: signed values and the sums' start. */
typedef struct x16wblk {
    __m512i q[8];       /* group g: lane r = w of elements 4g .. 4g + 3 of row r */
    __m512i init;       /* lane r: -128 * sum of row r's w */
    float d[16], m[16]; /* m: Q4_1 only */
} x16wblk;

/* One pass of one activation row: its quants + 128 and its scales. */
typedef struct x16ablk {
    uint8_t q[PASS_KB][TS_QK];
    float d[PASS_KB], s[PASS_KB];
} x16ablk;

/* Unpacks block i of sixteen rows into signed values (level - o) and their start. */
ALWAYS_INLINE void x16_unpack_signed(const x16_type *t, bool packed, const x16rows *rows, int64_t i,
                                     x16wblk *b) {
    __m512i q[8];
    __m512 d, m;
    t->unpack(rows, packed, i, q, &d, &m);
    const __m512i o = _mm512_set1_epi8((char)t->offset), ones = _mm512_set1_epi8(1);
    __m512i sum = _mm512_setzero_si512();
    for (int g = 0; g < 8; g++) {
        /* Offset 128 as a flip of the top bit (levels up to 255 would wrap a signed byte
         * subtraction, which is fine in hardware but not in the emulated build's C). */
        const __m512i w = t->offset == 128 ? _mm512_xor_si512(q[g], o) : _mm512_sub_epi8(q[g], o);
        sum = _mm512_dpbusd_epi32(sum, ones, w);
        _mm512_store_si512(&b->q[g], w);
    }
    _mm512_store_si512(&b->init,
                       _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
    _mm512_store_ps(b->d, d);
    _mm512_store_ps(b->m, m);
}

/* Activation blocks [i0, i0 + kb) of the row at a, prepared for the tiles. */
ALWAYS_INLINE void x16_prep_act(const x16_type *t, const char *a, int64_t i0, int64_t kb,
                                x16ablk *out) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < kb; i++) {
        const char *blk = a + (size_t)(i0 + i) * t->abytes;
        const __m256i y = _mm256_loadu_si256((const __m256i *)(blk + t->aqs));
        _mm256_store_si256((__m256i *)out->q[i], _mm256_xor_si256(y, bias));
        const x16ys e = t->yscale(blk);
        out->d[i] = e.d;
        out->s[i] = e.s;
    }
}

/* One block of G sixteen-row groups against four activation rows (prepared blocks y[j] at
 * index i); acc[h][j] is group h's accumulator of column j. */
ALWAYS_INLINE void x16_tile(const x16_type *t, int G, const x16wblk *const *b,
                            const x16ablk *const *y, int64_t i, __m512 acc[][4]) {
    __m512i s[GROUPS][4];
    for (int h = 0; h < G; h++) {
        const __m512i init = _mm512_load_si512(&b[h]->init);
        for (int j = 0; j < 4; j++) {
            s[h][j] = init;
        }
    }
    for (int g = 0; g < 8; g++) {
        __m512i wq[GROUPS];
        for (int h = 0; h < G; h++) {
            wq[h] = _mm512_load_si512(&b[h]->q[g]);
        }
        for (int j = 0; j < 4; j++) {
            int32_t v;
            memcpy(&v, y[j]->q[i] + 4 * g, 4);
            const __m512i yb = _mm512_set1_epi32(v);
            for (int h = 0; h < G; h++) {
                s[h][j] = _mm512_dpbusd_epi32(s[h][j], yb, wq[h]);
            }
        }
    }
    for (int h = 0; h < G; h++) {
        const __m512 d = _mm512_load_ps(b[h]->d), m = _mm512_load_ps(b[h]->m);
        for (int j = 0; j < 4; j++) {
            const x16ys e = {.d = y[j]->d[i], .s = y[j]->s[i]};
            acc[h][j] = t->fold(acc[h][j], s[h][j], d, m, &e);
        }
    }
}

/* Columns [j0, j0 + 4) (the last one repeated where fewer remain) over one pass of kb
 * unpacked blocks, for G groups. */
ALWAYS_INLINE void x16_cols4(const x16_type *t, int G, x16wblk (*buf)[PASS_KB], int64_t kb,
                             const x16ablk *ya, int64_t j0, int cols, __m512 (*accs)[MAX_COLS],
                             prefetch_rows *pf) {
    const x16ablk *y[4];
    __m512 acc[GROUPS][4];
    for (int j = 0; j < 4; j++) {
        const int64_t jj = j0 + (j < cols ? j : cols - 1);
        y[j] = &ya[jj];
        for (int h = 0; h < G; h++) {
            acc[h][j] = accs[h][jj];
        }
    }
    for (int64_t i = 0; i < kb; i++) {
        prefetch_rows_step(pf);
        const x16wblk *b[GROUPS];
        for (int h = 0; h < G; h++) {
            b[h] = &buf[h][i];
        }
        x16_tile(t, G, b, y, i, acc);
    }
    for (int j = 0; j < cols; j++) {
        for (int h = 0; h < G; h++) {
            accs[h][j0 + j] = acc[h][j];
        }
    }
}

/* nr <= 16 * CALL_GROUPS weight rows against nc <= MAX_COLS activation rows. Each pass
 * prepares the activation rows once for all the call's rows (re-reading them per 32 rows made
 * the activations, not the weights, the bulk of the memory traffic), then runs the groups in
 * pairs. */
/* What a gemm call runs: the type, and whether its weights are packed. */
typedef struct x16_call {
    const x16_type *t;
    bool packed;
} x16_call;

ALWAYS_INLINE void x16_gemm_cols(const void *call, int64_t nb, const char *w, size_t ldw,
                                 int64_t nr, const char *a, size_t lda, int64_t nc, float *c,
                                 size_t ldc) {
    const x16_type *t = ((const x16_call *)call)->t;
    const bool packed = ((const x16_call *)call)->packed;
    _Alignas(64) x16wblk buf[GROUPS][PASS_KB];
    _Alignas(64) x16ablk ya[MAX_COLS];
    __m512 accs[CALL_GROUPS][MAX_COLS];
    const int groups = (int)((nr + 15) / 16);
    for (int h = 0; h < groups; h++) {
        for (int64_t j = 0; j < nc; j++) {
            accs[h][j] = _mm512_setzero_ps();
        }
    }
    for (int64_t i0 = 0; i0 < nb; i0 += PASS_KB) {
        const int64_t kb = nb - i0 < PASS_KB ? nb - i0 : PASS_KB;
        for (int64_t j = 0; j < nc; j++) {
            x16_prep_act(t, a + (size_t)j * lda, i0, kb, &ya[j]);
        }
        for (int h0 = 0; h0 < groups; h0 += GROUPS) {
            const int g = groups - h0 < GROUPS ? groups - h0 : GROUPS;
            for (int h = 0; h < g; h++) {
                const int64_t base = 16 * (int64_t)(h0 + h);
                x16rows rw;
                rows_init(&rw, packed, w + (size_t)base * ldw, ldw,
                          nr - base < 16 ? (int)(nr - base) : 16);
                for (int64_t i = 0; i < kb; i++) {
                    x16_unpack_signed(t, packed, &rw, i0 + i, &buf[h][i]);
                }
            }
            /* While these rows compute, prefetch the next 32 rows' part of the pass (after
             * the last pair, rows past this call: the rows the thread most likely takes
             * next). */
            prefetch_rows pf;
            x16_prefetch(&pf, t, packed, w, ldw, 16 * (h0 + GROUPS), i0, kb, 16 * GROUPS,
                         ((nc + 3) / 4) * kb);
            for (int64_t j0 = 0; j0 < nc; j0 += 4) {
                const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
                if (g == 2) {
                    x16_cols4(t, 2, buf, kb, ya, j0, cols, accs + h0, &pf);
                } else {
                    x16_cols4(t, 1, buf, kb, ya, j0, cols, accs + h0, &pf);
                }
            }
        }
    }
    for (int h = 0; h < groups; h++) {
        const int rows = nr - 16 * h < 16 ? (int)(nr - 16 * h) : 16;
        for (int64_t j = 0; j < nc; j++) {
            store16(accs[h][j], (float *)((char *)c + (size_t)j * ldc) + 16 * h, rows);
        }
    }
}

/* Packed weights (call->packed) come in whole groups: nr is a multiple of 16. */
ALWAYS_INLINE void x16_gemm(const x16_call *call, int64_t k, int64_t nr, int64_t nc, float *c,
                            size_t ldc, const void *w, size_t ldw, const void *a, size_t lda) {
    assert(!call->packed || nr % 16 == 0);
    if (nc == 1) {
        x16_gemv(call->t, call->packed, k, nr, c, w, ldw, a);
        return;
    }
    const int64_t nb = k / TS_QK;
    ts_q_gemm_pieces(x16_gemm_cols, call, nb, 16 * CALL_GROUPS, MAX_COLS, nr, nc, c, ldc, w, ldw, a,
                     lda);
}

static const x16_call k_q4_0_rows = {&k_q4_0, false};
static const x16_call k_q4_0_pk = {&k_q4_0, true};
static const x16_call k_q4_1_rows = {&k_q4_1, false};
static const x16_call k_q4_1_pk = {&k_q4_1, true};
static const x16_call k_q5_0_rows = {&k_q5_0, false};
static const x16_call k_q5_0_pk = {&k_q5_0, true};
static const x16_call k_q8_0_rows = {&k_q8_0, false};
static const x16_call k_q8_0_pk = {&k_q8_0, true};
static const x16_call k_iq4_nl_rows = {&k_iq4_nl, false};
static const x16_call k_iq4_nl_pk = {&k_iq4_nl, true};
static const x16_call k_mxfp4_rows = {&k_mxfp4, false};
static const x16_call k_mxfp4_pk = {&k_mxfp4, true};

void ts_q_gemm_q4_0_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q4_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q4_0_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q4_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q4_1_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q4_1_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q4_1_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q4_1_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q5_0_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q5_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q5_0_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q5_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q8_0_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q8_0_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q8_0_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_q8_0_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_iq4_nl_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                             size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_iq4_nl_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_iq4_nl_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                    const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_iq4_nl_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_mxfp4_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                            size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_mxfp4_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_mxfp4_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                   const void *w, size_t ldw, const void *a, size_t lda) {
    x16_gemm(&k_mxfp4_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

/* ---- Q8_0's, IQ4_NL's and MXFP4's dot products: one exact sum per block, then the gemm's
 * float operations ---- */

/* Exact sum of the products of 32 signed bytes. */
static inline int32_t dot_i8x32(__m256i w, const int8_t *y) {
    const __m512i p = _mm512_madd_epi16(
        _mm512_cvtepi8_epi16(w), _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)y)));
    return hsum_epi32_256(
        _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1)));
}

void ts_q_dot_q8_0_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q8_0 *w = x;
    const ts_block_q8_0 *b = y;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const int32_t t = dot_i8x32(_mm256_loadu_si256((const __m256i *)w[i].qs), b[i].qs);
        acc = __builtin_fmaf((float)t, fp16_hw(w[i].d) * fp16_hw(b[i].d), acc);
    }
    *result = acc;
}

void ts_q_dot_iq4_nl_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_iq4_nl *w = x;
    const ts_block_q8_0 *b = y;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_iq4nl_values));
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const int32_t t = dot_i8x32(_mm256_shuffle_epi8(table, unpack_nibbles32(w[i].qs)), b[i].qs);
        acc = __builtin_fmaf((float)t, fp16_hw(w[i].d) * fp16_hw(b[i].d), acc);
    }
    *result = acc;
}

void ts_q_dot_mxfp4_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_mxfp4 *w = x;
    const ts_block_q8_0 *b = y;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_mxfp4_values));
    float acc = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const int32_t t = dot_i8x32(_mm256_shuffle_epi8(table, unpack_nibbles32(w[i].qs)), b[i].qs);
        acc = __builtin_fmaf((float)t, ts_e8m0_half(w[i].e) * fp16_hw(b[i].d), acc);
    }
    *result = acc;
}
