/*
 * k.c — Q4_K and Q6_K against Q8_K activations with AVX-512 VNNI: gemm with sixteen weight
 * rows in the sixteen 32-bit lanes of a register, and dot products that give the gemm's bits.
 *
 * Layout. A 16-row super-block is unpacked (transposed) into 64 registers q[g], one per group
 * of four consecutive elements 4g..4g+3: lane r holds row r's four unsigned levels (Q4_K
 * 0..15, Q6_K 0..63). One vpdpbusd of q[g] with the activation's bytes 4g..4g+3 broadcast to
 * every lane adds those four exact products to each row's int32 sum, so a super-block costs
 * 64 multiplies per activation row for sixteen rows and no horizontal reduction. Sixteen rows'
 * 32-byte pieces are transposed by loading two rows per register (256-bit halves), two unpack
 * stages within 128-bit lanes and one 128-bit lane shuffle (t16x8); 16-byte pieces with four
 * rows per register and the in-lane stages only (t16x4). The block headers go through the
 * same transposes (Q4_K: its first 16 bytes, d, dmin and the 12 scale bytes; Q6_K: its last
 * 32, scales and d), so scales, mins and d arrive per lane and are decoded there with vector
 * shifts and byte shuffles.
 *
 * Exact integers per super-block, per lane (row) and activation row:
 *   Q4_K:  S = sum_s sc_s * isum_s (8 sub-blocks of 32, isum_s = sum q * y),
 *          M = sum_s m_s * (bsums[2s] + bsums[2s+1]).
 *          The scale is applied without a 32-bit multiply: each half of a sub-block (16
 *          products, |half| <= 16 * 15 * 128 = 30720) fits the low int16 of its lane, so a
 *          vpdpwssd with the int16 pair (sc_s, 0) adds sc_s * half. Per sub-block that is
 *          two vpdpwssd for eight vpdpbusd, and the halves are independent chains of four.
 *          M is four vpdpwssd of (m_2t, m_2t+1) pairs with the activation's int16 pairs
 *          (bsum_2t, bsum_2t+1).
 *   Q6_K:  T = sum_j sc_j * (isum_j - 32 * bsums[j]) (16 sub-blocks of 16, int8 scales): each
 *          sub-block's sum starts from -32 * bsums[j] (broadcast), so the levels' bias of 32
 *          costs no instruction; then one vpmulld by sc_j (|isum_j| reaches 128016: no int16
 *          trick fits) and an add. |T| < 4e8.
 *
 * Numerics — per lane and super-block, with d_w, dmin_w the row's f16 scales (exact in f32)
 * and d_a the activation's f32 scale, every path (gemm at any batch, vec_dot) runs
 *   Q4_K:  acc = acc + fmsub((float)S, d_w * d_a, (float)M * (dmin_w * d_a))
 *   Q6_K:  acc = fma((float)T, d_w * d_a, acc)
 * starting from acc = 0, super-blocks in order, so results do not depend on batching
 * (tests/quant/test_gemm_invariance.c). The Q4_K block value is formed before it meets the
 * running sum: its two terms are large and of opposite sign when the mins are (see the Q4_1
 * note in avx2/q32.c). vec_dot computes S, M and T its own way (elements in lanes) and runs
 * the same fold functions on a broadcast, so the two agree by construction, in the emulated
 * build too (tests/quant/test_avx512_emu.c), however its FMA is emulated.
 *
 * Drivers. With several activation rows, a call takes up to K16_GROUPS groups of sixteen
 * weight rows and K16_COLS activation rows; per pass of K16_KB super-blocks the activation
 * terms (d_a, the bsum pairs or -32 * bsums) are converted once, each group is unpacked once
 * into an aligned buffer, and tiles of four activation rows run over it (per group of four
 * levels: one load, four broadcasts of activation bytes, which are loads only, and four
 * vpdpbusd) while the next sixteen rows are prefetched. With one activation row (decoding) each
 * super-block of sixteen rows is unpacked in registers and used at once, and the next sixteen rows
 * are prefetched. Both drivers are written once and take a constant table of the type's inline
 * block functions, which GCC inlines through (the exported wrappers contain no indirect call).
 */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "quant/simd_avx2.h"

#define K16_INLINE static inline __attribute__((always_inline))

enum {
    K16_KB = 4,     /* super-blocks unpacked per pass (Q6_K: 4 * 5.5 KiB of buffer) */
    K16_COLS = 64,  /* activation rows sharing one pass (MUL_MAT calls with at most 64) */
    K16_GROUPS = 8, /* groups of sixteen weight rows sharing one pass's activation terms
                       (MUL_MAT calls with up to 128 rows when there are several columns) */
};

/* One super-block of sixteen weight rows, unpacked; lane r belongs to row r throughout. */
typedef struct k16blk {
    __m512i q[64];  /* group g: the unsigned levels of elements 4g..4g+3 */
    __m512i sc[16]; /* scale of sub-block s as int32 (Q4_K: s < 8, read as the int16 pair
                       (scale, 0) by vpdpwssd) */
    __m512i m[4];   /* Q4_K: (min 2t, min 2t+1) as int16 pair */
    __m512 d, dmin; /* f16 scales as floats (Q6_K: d only) */
} k16blk;

/* What the integer sums and the fold need of one activation super-block. */
typedef struct k16ys {
    int32_t x[16]; /* Q4_K: x[t] = (bsum 2t, bsum 2t+1) as int16 pair, t < 4, with bsum s =
                      bsums[2s] + bsums[2s+1]; Q6_K: x[j] = -32 * bsums[j] */
    float d;
} k16ys;

/* A type's block functions; the drivers below are instantiated per table by inlining. */
typedef struct k16_type {
    size_t wbs; /* bytes per weight super-block */
    /* Super-block i of the sixteen rows at w[0..15] (packed: of the group at w[0]) into *b. */
    void (*unpack)(const char *const *w, bool packed, int64_t i, k16blk *b);
    /* The activation terms of one Q8_K super-block. */
    void (*yprep)(const ts_block_q8_k *y, k16ys *e);
    /* One unpacked super-block against four activation rows (their quants y[j], terms e[j]),
     * folded into acc[j]. */
    void (*tile4)(const k16blk *b, const int8_t *const *y, const k16ys *const *e, __m512 *acc);
    /* Super-block i of the sixteen rows at w (as for unpack) against one activation row,
     * unpacked in registers, folded into acc. */
    __m512 (*col1)(const char *const *w, bool packed, int64_t i, const int8_t *y, const k16ys *e,
                   __m512 acc);
} k16_type;

/* ---- shared pieces ---- */

/* The four activation bytes at p, broadcast to every lane (one vpbroadcastd from memory). */
K16_INLINE __m512i y4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* Lane r of out[k] = dword k of the 16 bytes at p[r] + off. Register i holds rows i, i + 4,
 * i + 8, i + 12 in its 128-bit lanes; a 4 x 4 dword transpose within the lanes follows. */
K16_INLINE void t16x4(const char *const *p, size_t off, __m512i out[4]) {
    __m512i z[4];
    for (int i = 0; i < 4; i++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[i] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[i + 4] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[i + 8] + off)), 2);
        z[i] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[i + 12] + off)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* Lane r of out[k] = dword k of the 32 bytes at p[r] + off. In set h (h = 0, 1), register i
 * (i < 4) holds rows 8h + i and 8h + i + 4 as 256-bit halves; after the 4 x 4 transposes
 * within 128-bit lanes, register d of set h holds, lane by lane, rows 8h..8h+3 dword d, the
 * same rows' dword d + 4, rows 8h+4..8h+7 dword d, and their dword d + 4; one 128-bit lane
 * shuffle of the two sets puts the sixteen rows in order. */
K16_INLINE void t16x8(const char *const *p, size_t off, __m512i out[8]) {
    __m512i v[2][4];
    for (int h = 0; h < 2; h++) {
        __m512i z[4];
        for (int i = 0; i < 4; i++) {
            const int r = 8 * h + i;
            z[i] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p[r] + off))),
                _mm256_loadu_si256((const __m256i *)(p[r + 4] + off)), 1);
        }
        const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]);
        const __m512i t1 = _mm512_unpackhi_epi32(z[0], z[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]);
        const __m512i t3 = _mm512_unpackhi_epi32(z[2], z[3]);
        v[h][0] = _mm512_unpacklo_epi64(t0, t2);
        v[h][1] = _mm512_unpackhi_epi64(t0, t2);
        v[h][2] = _mm512_unpacklo_epi64(t1, t3);
        v[h][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int d = 0; d < 4; d++) {
        out[d] = _mm512_shuffle_i32x4(v[0][d], v[1][d], _MM_SHUFFLE(2, 0, 2, 0));
        out[d + 4] = _mm512_shuffle_i32x4(v[0][d], v[1][d], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Super-block i of sixteen rows: each row's block, or the packed block (quant_pack.c). */
typedef struct k16src {
    const char *p[16];
    const char *pk;
} k16src;

K16_INLINE k16src k16_src(const char *const *w, bool packed, size_t bs, int64_t i) {
    k16src s = {.pk = packed ? w[0] + (size_t)i * 16 * bs : NULL};
    for (int r = 0; r < 16 && !packed; r++) {
        s.p[r] = w[r] + (size_t)i * bs;
    }
    return s;
}

/* Lane r of out[k] = dword k of the 4n bytes at byte b of row r's block (n = 4 or 8). Packed,
 * dword b / 4 + k of the sixteen rows is the 64 bytes at 16 * b + 64 * k. */
K16_INLINE void k16_words(const k16src *s, bool packed, size_t b, int n, __m512i *out) {
    if (packed) {
        for (int k = 0; k < n; k++) {
            out[k] = _mm512_loadu_si512(s->pk + 16 * b + 64 * (size_t)k);
        }
    } else if (n == 4) {
        t16x4(s->p, b, out);
    } else {
        t16x8(s->p, b, out);
    }
}

/* The f16 in the low (hi = 0) or high (hi = 1) half of each lane, as floats. */
K16_INLINE __m512 f16_lanes(__m512i v, int hi) {
    const __m512i idx =
        _mm512_setr_epi32(0x00020000, 0x00060004, 0x000A0008, 0x000E000C, 0x00120010, 0x00160014,
                          0x001A0018, 0x001E001C, 0x00220020, 0x00260024, 0x002A0028, 0x002E002C,
                          0x00320030, 0x00360034, 0x003A0038, 0x003E003C);
    const __m512i sel = _mm512_add_epi16(idx, _mm512_set1_epi16((short)hi));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sel, v)));
}

/* vpshufb control giving each dword the int16 pair (byte a, byte b) of that dword,
 * zero-extended; b < 0: (byte a, 0), i.e. byte a as an int32. */
K16_INLINE __m512i pair_ctl(int a, int b) {
    int w[4];
    for (int p = 0; p < 4; p++) {
        const unsigned hi = b < 0 ? 0x8080u : (unsigned)(4 * p + b) | 0x8000u;
        w[p] = (int)((unsigned)(4 * p + a) | 0x8000u | hi << 16);
    }
    return _mm512_set4_epi32(w[3], w[2], w[1], w[0]);
}

/* Lanes 0..rows-1 to c[0..rows-1]. */
K16_INLINE void store16(__m512 v, float *c, int rows) {
    _mm512_mask_storeu_ps(c, (__mmask16)((1u << rows) - 1), v);
}

/* ---- Q4_K ---- */

/* acc + fmsub((float)S, d_w * d_a, (float)M * (dmin_w * d_a)), per lane. */
K16_INLINE __m512 q4_k_fold(__m512 acc, __m512i s, __m512i m, __m512 d, __m512 dmin, float da) {
    const __m512 dav = _mm512_set1_ps(da);
    const __m512 mt = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, dav));
    return _mm512_add_ps(acc, _mm512_fmsub_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, dav), mt));
}

/* Scales, mins and d of sixteen rows from their transposed 16-byte headers: h[0] = (d, dmin),
 * h[1..3] = scale bytes 0..11 (quant_internal.h's ts_k4_scale_min, per byte). */
K16_INLINE void q4_k_header(const __m512i h[4], __m512i sc[8], __m512i m[4], __m512 *d,
                            __m512 *dmin) {
    const __m512i m6 = _mm512_set1_epi8(0x3F), m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    /* Bytes 0..3 of each lane: scales / mins 0..3, then 4..7. */
    const __m512i sc_lo = _mm512_and_si512(h[1], m6);
    const __m512i mn_lo = _mm512_and_si512(h[2], m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(h[3], m4),
                                          _mm512_and_si512(_mm512_srli_epi32(h[1], 2), m30));
    const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4),
                                          _mm512_and_si512(_mm512_srli_epi32(h[2], 2), m30));
    for (int s = 0; s < 4; s++) {
        sc[s] = _mm512_shuffle_epi8(sc_lo, pair_ctl(s, -1));
        sc[4 + s] = _mm512_shuffle_epi8(sc_hi, pair_ctl(s, -1));
    }
    m[0] = _mm512_shuffle_epi8(mn_lo, pair_ctl(0, 1));
    m[1] = _mm512_shuffle_epi8(mn_lo, pair_ctl(2, 3));
    m[2] = _mm512_shuffle_epi8(mn_hi, pair_ctl(0, 1));
    m[3] = _mm512_shuffle_epi8(mn_hi, pair_ctl(2, 3));
    *d = f16_lanes(h[0], 0);
    *dmin = f16_lanes(h[0], 1);
}

K16_INLINE void q4_k_unpack(const char *const *w, bool packed, int64_t i, k16blk *b) {
    const k16src src = k16_src(w, packed, sizeof(ts_block_q4_k), i);
    __m512i h[4];
    k16_words(&src, packed, 0, 4, h);
    q4_k_header(h, b->sc, b->m, &b->d, &b->dmin);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        /* qs bytes 32c..32c+31: low nibbles are elements 64c.., high ones 64c + 32.. */
        __m512i t[8];
        k16_words(&src, packed, offsetof(ts_block_q4_k, qs) + 32 * (size_t)c, 8, t);
        for (int k = 0; k < 8; k++) {
            b->q[16 * c + k] = _mm512_and_si512(t[k], m4);
            b->q[16 * c + 8 + k] = _mm512_and_si512(_mm512_srli_epi16(t[k], 4), m4);
        }
    }
}

/* The activation's bsum pairs: x[t] = (bsum 2t, bsum 2t+1), |bsum| <= 32 * 127. */
K16_INLINE void q4_k_yprep(const ts_block_q8_k *y, k16ys *e) {
    const __m256i s =
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    const __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    _mm_storeu_si128((__m128i *)e->x, p);
    e->d = y->d;
}

/* M for one activation row: four vpdpwssd of the min pairs with the bsum pairs. */
K16_INLINE __m512i q4_k_mins(const __m512i *m, const k16ys *e) {
    __m512i acc = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++) {
        acc = _mm512_dpwssd_epi32(acc, m[t], _mm512_set1_epi32(e->x[t]));
    }
    return acc;
}

K16_INLINE void q4_k_tile4(const k16blk *b, const int8_t *const *y, const k16ys *const *e,
                           __m512 *acc) {
    __m512i s[4];
    for (int j = 0; j < 4; j++) {
        s[j] = _mm512_setzero_si512();
    }
    for (int c = 0; c < 4; c++) {
        /* Sub-blocks 2c (groups 16c..16c+7) and 2c+1 (16c+8..16c+15), four columns each, one
         * half (four groups) at a time. */
        const __m512i sl = _mm512_load_si512(&b->sc[2 * c]);
        const __m512i sh = _mm512_load_si512(&b->sc[2 * c + 1]);
        for (int half = 0; half < 2; half++) {
            __m512i lo[4], hi[4];
            for (int j = 0; j < 4; j++) {
                lo[j] = _mm512_setzero_si512();
                hi[j] = _mm512_setzero_si512();
            }
            for (int kk = 0; kk < 4; kk++) {
                const int k = 4 * half + kk;
                const __m512i ql = _mm512_load_si512(&b->q[16 * c + k]);
                const __m512i qh = _mm512_load_si512(&b->q[16 * c + 8 + k]);
                for (int j = 0; j < 4; j++) {
                    lo[j] = _mm512_dpbusd_epi32(lo[j], ql, y4(y[j] + 64 * c + 4 * k));
                    hi[j] = _mm512_dpbusd_epi32(hi[j], qh, y4(y[j] + 64 * c + 32 + 4 * k));
                }
            }
            for (int j = 0; j < 4; j++) {
                s[j] = _mm512_dpwssd_epi32(s[j], lo[j], sl);
                s[j] = _mm512_dpwssd_epi32(s[j], hi[j], sh);
            }
        }
    }
    for (int j = 0; j < 4; j++) {
        acc[j] = q4_k_fold(acc[j], s[j], q4_k_mins(b->m, e[j]), b->d, b->dmin, e[j]->d);
    }
}

K16_INLINE __m512 q4_k_col1(const char *const *w, bool packed, int64_t i, const int8_t *y,
                            const k16ys *e, __m512 acc) {
    const k16src src = k16_src(w, packed, sizeof(ts_block_q4_k), i);
    __m512i h[4], sc[8], m[4];
    __m512 d, dmin;
    k16_words(&src, packed, 0, 4, h);
    q4_k_header(h, sc, m, &d, &dmin);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        __m512i t[8];
        k16_words(&src, packed, offsetof(ts_block_q4_k, qs) + 32 * (size_t)c, 8, t);
        /* Four independent chains: each sub-block's two halves. */
        __m512i lo[2], hi[2];
        for (int half = 0; half < 2; half++) {
            lo[half] = _mm512_setzero_si512();
            hi[half] = _mm512_setzero_si512();
            for (int kk = 0; kk < 4; kk++) {
                const int k = 4 * half + kk;
                const __m512i ql = _mm512_and_si512(t[k], m4);
                const __m512i qh = _mm512_and_si512(_mm512_srli_epi16(t[k], 4), m4);
                lo[half] = _mm512_dpbusd_epi32(lo[half], ql, y4(y + 64 * c + 4 * k));
                hi[half] = _mm512_dpbusd_epi32(hi[half], qh, y4(y + 64 * c + 32 + 4 * k));
            }
        }
        s0 = _mm512_dpwssd_epi32(s0, lo[0], sc[2 * c]);
        s1 = _mm512_dpwssd_epi32(s1, hi[0], sc[2 * c + 1]);
        s0 = _mm512_dpwssd_epi32(s0, lo[1], sc[2 * c]);
        s1 = _mm512_dpwssd_epi32(s1, hi[1], sc[2 * c + 1]);
    }
    return q4_k_fold(acc, _mm512_add_epi32(s0, s1), q4_k_mins(m, e), d, dmin, e->d);
}

static const k16_type k_q4_k = {
    .wbs = sizeof(ts_block_q4_k),
    .unpack = q4_k_unpack,
    .yprep = q4_k_yprep,
    .tile4 = q4_k_tile4,
    .col1 = q4_k_col1,
};

/* ---- Q6_K ---- */

/* fma((float)T, d_w * d_a, acc), per lane. */
K16_INLINE __m512 q6_k_fold(__m512 acc, __m512i t, __m512 d, float da) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, _mm512_set1_ps(da)), acc);
}

/* The 16 int8 scales (as int32) and d of sixteen rows. From the rows: each block's last 32
 * bytes (qh 50..63, scales at bytes 14..29, d at 30..31) in one transpose. Packed: the scales'
 * four dwords and the run of sixteen d. */
K16_INLINE void q6_k_header(const k16src *s, bool packed, __m512i sc[16], __m512 *d) {
    enum {
        TAIL = sizeof(ts_block_q6_k) - 32,
        SC = offsetof(ts_block_q6_k, scales),
        D = offsetof(ts_block_q6_k, d)
    };
    __m512i t[8];
    const int base = packed ? 0 : SC - TAIL; /* byte of t (dword 0, byte 0 on) holding scale 0 */
    if (packed) {
        k16_words(s, true, SC, 4, t);
        *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s->pk + 16 * D)));
    } else {
        t16x8(s->p, TAIL, t);
        *d = f16_lanes(t[7], 1);
    }
    for (int j = 0; j < 16; j++) {
        const int at = base + j; /* byte at % 4 of dword at / 4 */
        sc[j] = _mm512_srai_epi32(_mm512_slli_epi32(t[at / 4], 24 - 8 * (at % 4)), 24);
    }
}

/* Levels of groups 32h + 8s + k: the low nibbles of ql (s < 2) or its high nibbles (s >= 2),
 * from the ql chunk s & 1 of half h, and bits 2s, 2s+1 of qh as bits 4, 5. */
K16_INLINE __m512i q6_k_level(__m512i ql, __m512i qh, int s) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lo =
        s < 2 ? _mm512_and_si512(ql, m4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
    const __m512i hs = s == 0   ? _mm512_slli_epi16(qh, 4)
                       : s == 1 ? _mm512_slli_epi16(qh, 2)
                       : s == 2 ? qh
                                : _mm512_srli_epi16(qh, 2);
    return _mm512_ternarylogic_epi32(lo, hs, _mm512_set1_epi8(0x30), 0xF8); /* lo | (hs & c) */
}

/* The transposed ql (two chunks) and qh of half h of sixteen rows' super-blocks. */
K16_INLINE void q6_k_half(const k16src *s, bool packed, int h, __m512i ql[2][8], __m512i qh[8]) {
    k16_words(s, packed, offsetof(ts_block_q6_k, ql) + 64 * (size_t)h, 8, ql[0]);
    k16_words(s, packed, offsetof(ts_block_q6_k, ql) + 64 * (size_t)h + 32, 8, ql[1]);
    k16_words(s, packed, offsetof(ts_block_q6_k, qh) + 32 * (size_t)h, 8, qh);
}

K16_INLINE void q6_k_unpack(const char *const *w, bool packed, int64_t i, k16blk *b) {
    const k16src src = k16_src(w, packed, sizeof(ts_block_q6_k), i);
    q6_k_header(&src, packed, b->sc, &b->d);
    for (int h = 0; h < 2; h++) {
        __m512i ql[2][8], qh[8];
        q6_k_half(&src, packed, h, ql, qh);
        for (int s = 0; s < 4; s++) {
            for (int k = 0; k < 8; k++) {
                b->q[32 * h + 8 * s + k] = q6_k_level(ql[s & 1][k], qh[k], s);
            }
        }
    }
}

/* x[j] = -32 * bsums[j]: the start of sub-block j's sum, which takes the levels' bias off. */
K16_INLINE void q6_k_yprep(const ts_block_q8_k *y, k16ys *e) {
    const __m128i *bs = (const __m128i *)y->bsums;
    for (int h = 0; h < 2; h++) {
        const __m256i v = _mm256_cvtepi16_epi32(_mm_loadu_si128(bs + h));
        _mm256_storeu_si256((__m256i *)(e->x + 8 * h),
                            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(v, 5)));
    }
    e->d = y->d;
}

K16_INLINE void q6_k_tile4(const k16blk *b, const int8_t *const *y, const k16ys *const *e,
                           __m512 *acc) {
    __m512i t[4];
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_setzero_si512();
    }
    for (int sb = 0; sb < 16; sb += 2) {
        /* Sub-blocks sb and sb + 1 (groups 4sb .. 4sb + 7), four columns each. */
        __m512i u[2][4];
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 4; j++) {
                u[h][j] = _mm512_set1_epi32(e[j]->x[sb + h]);
            }
        }
        for (int k = 0; k < 4; k++) {
            for (int h = 0; h < 2; h++) {
                const int g = 4 * (sb + h) + k;
                const __m512i q = _mm512_load_si512(&b->q[g]);
                for (int j = 0; j < 4; j++) {
                    u[h][j] = _mm512_dpbusd_epi32(u[h][j], q, y4(y[j] + 4 * g));
                }
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m512i scv = _mm512_load_si512(&b->sc[sb + h]);
            for (int j = 0; j < 4; j++) {
                t[j] = _mm512_add_epi32(t[j], _mm512_mullo_epi32(u[h][j], scv));
            }
        }
    }
    for (int j = 0; j < 4; j++) {
        acc[j] = q6_k_fold(acc[j], t[j], b->d, e[j]->d);
    }
}

K16_INLINE __m512 q6_k_col1(const char *const *w, bool packed, int64_t i, const int8_t *y,
                            const k16ys *e, __m512 acc) {
    const k16src src = k16_src(w, packed, sizeof(ts_block_q6_k), i);
    __m512i sc[16];
    __m512 d;
    q6_k_header(&src, packed, sc, &d);
    __m512i t0 = _mm512_setzero_si512(), t1 = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        __m512i ql[2][8], qh[8];
        q6_k_half(&src, packed, h, ql, qh);
        for (int s = 0; s < 4; s++) {
            /* Sub-blocks 8h + 2s (k < 4) and 8h + 2s + 1 (k >= 4). */
            const int j = 8 * h + 2 * s;
            __m512i u0 = _mm512_set1_epi32(e->x[j]), u1 = _mm512_set1_epi32(e->x[j + 1]);
            for (int k = 0; k < 4; k++) {
                const int g = 32 * h + 8 * s + k;
                u0 = _mm512_dpbusd_epi32(u0, q6_k_level(ql[s & 1][k], qh[k], s), y4(y + 4 * g));
                u1 = _mm512_dpbusd_epi32(u1, q6_k_level(ql[s & 1][k + 4], qh[k + 4], s),
                                         y4(y + 4 * g + 16));
            }
            t0 = _mm512_add_epi32(t0, _mm512_mullo_epi32(u0, sc[j]));
            t1 = _mm512_add_epi32(t1, _mm512_mullo_epi32(u1, sc[j + 1]));
        }
    }
    return q6_k_fold(acc, _mm512_add_epi32(t0, t1), d, e->d);
}

static const k16_type k_q6_k = {
    .wbs = sizeof(ts_block_q6_k),
    .unpack = q6_k_unpack,
    .yprep = q6_k_yprep,
    .tile4 = q6_k_tile4,
    .col1 = q6_k_col1,
};

/* ---- drivers ---- */

/* One activation row: c[r] = dot(weight row r, a) for r < nr. */
K16_INLINE void k16_gemv(const k16_type *t, bool packed, int64_t k, int64_t nr, float *c,
                         const char *w, size_t ldw, const ts_block_q8_k *a) {
    const int64_t nb = k / TS_QK_K;
    for (int64_t r0 = 0; r0 < nr; r0 += 16) {
        const int rows = nr - r0 < 16 ? (int)(nr - r0) : 16;
        /* Rows past nr repeat the last one (their results are not stored). */
        const char *wr[16];
        for (int r = 0; r < 16; r++) {
            wr[r] = w + (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw;
        }
        /* While these rows compute, the next sixteen are fetched (past nr too: the rows the
         * thread most likely takes next; prefetches never fault). */
        prefetch_rows pf;
        prefetch_rows_begin(&pf, w + (size_t)(r0 + 16) * ldw, 16 * ldw, 16 * ldw, 1, nb);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            prefetch_rows_step(&pf);
            k16ys e;
            t->yprep(&a[i], &e);
            acc = t->col1(wr, packed, i, a[i].qs, &e, acc);
        }
        store16(acc, c + r0, rows);
    }
}

/* Several activation rows (nc <= K16_COLS) against nr <= 16 * K16_GROUPS weight rows. */
/* What a gemm call runs: the type, and whether its weights are packed. */
typedef struct k16_call {
    const k16_type *t;
    bool packed;
} k16_call;

K16_INLINE void k16_cols(const void *call, int64_t nb, const char *w, size_t ldw, int64_t nr,
                         const char *a, size_t lda, int64_t nc, float *c, size_t ldc) {
    const k16_type *t = ((const k16_call *)call)->t;
    const bool packed = ((const k16_call *)call)->packed;
    k16blk buf[K16_KB];
    k16ys ys[K16_KB][K16_COLS];
    __m512 accs[K16_GROUPS][K16_COLS];
    const int groups = (int)((nr + 15) / 16);
    for (int rg = 0; rg < groups; rg++) {
        for (int64_t j = 0; j < nc; j++) {
            accs[rg][j] = _mm512_setzero_ps();
        }
    }
    for (int64_t i0 = 0; i0 < nb; i0 += K16_KB) {
        const int kb = nb - i0 < K16_KB ? (int)(nb - i0) : K16_KB;
        for (int64_t j = 0; j < nc; j++) {
            const ts_block_q8_k *y = (const ts_block_q8_k *)(a + (size_t)j * lda) + i0;
            for (int i = 0; i < kb; i++) {
                t->yprep(&y[i], &ys[i][j]);
            }
        }
        for (int rg = 0; rg < groups; rg++) {
            const int64_t base = 16 * (int64_t)rg;
            const int rows = nr - base < 16 ? (int)(nr - base) : 16;
            const char *wr[16];
            for (int r = 0; r < 16; r++) {
                wr[r] = w + (size_t)(base + (r < rows ? r : rows - 1)) * ldw;
            }
            for (int i = 0; i < kb; i++) {
                t->unpack(wr, packed, i0 + i, &buf[i]);
            }
            /* While these rows compute, prefetch the next sixteen rows' part of the pass (packed:
             * one contiguous piece). */
            prefetch_rows pf;
            const char *next = w + (size_t)(base + 16) * ldw;
            const int64_t steps = ((nc + 3) / 4) * kb;
            if (packed) {
                prefetch_rows_begin(&pf, next + (size_t)i0 * 16 * t->wbs, 0,
                                    (size_t)kb * 16 * t->wbs, 1, steps);
            } else {
                prefetch_rows_begin(&pf, next + (size_t)i0 * t->wbs, ldw, (size_t)kb * t->wbs, 16,
                                    steps);
            }
            for (int64_t j0 = 0; j0 < nc; j0 += 4) {
                /* A last tile of fewer than four columns repeats its final column. */
                const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
                const ts_block_q8_k *yb[4];
                int64_t jj[4];
                __m512 acc[4];
                for (int j = 0; j < 4; j++) {
                    jj[j] = j0 + (j < cols ? j : cols - 1);
                    yb[j] = (const ts_block_q8_k *)(a + (size_t)jj[j] * lda) + i0;
                    acc[j] = accs[rg][jj[j]];
                }
                for (int i = 0; i < kb; i++) {
                    prefetch_rows_step(&pf);
                    const int8_t *yq[4] = {yb[0][i].qs, yb[1][i].qs, yb[2][i].qs, yb[3][i].qs};
                    const k16ys *e[4] = {&ys[i][jj[0]], &ys[i][jj[1]], &ys[i][jj[2]],
                                         &ys[i][jj[3]]};
                    t->tile4(&buf[i], yq, e, acc);
                }
                for (int j = 0; j < cols; j++) {
                    accs[rg][j0 + j] = acc[j];
                }
            }
        }
    }
    for (int rg = 0; rg < groups; rg++) {
        const int rows = nr - 16 * rg < 16 ? (int)(nr - 16 * rg) : 16;
        for (int64_t j = 0; j < nc; j++) {
            store16(accs[rg][j], (float *)((char *)c + (size_t)j * ldc) + 16 * rg, rows);
        }
    }
}

/* Packed weights (call->packed) come in whole groups: nr is a multiple of 16. */
K16_INLINE void k16_gemm(const k16_call *call, int64_t k, int64_t nr, int64_t nc, float *c,
                         size_t ldc, const void *w, size_t ldw, const void *a, size_t lda) {
    assert(!call->packed || nr % 16 == 0);
    if (nc == 1) {
        k16_gemv(call->t, call->packed, k, nr, c, w, ldw, a);
        return;
    }
    const int64_t nb = k / TS_QK_K;
    ts_q_gemm_pieces(k16_cols, call, nb, 16 * K16_GROUPS, K16_COLS, nr, nc, c, ldc, w, ldw, a, lda);
}

static const k16_call k_q4_k_rows = {&k_q4_k, false};
static const k16_call k_q4_k_pk = {&k_q4_k, true};
static const k16_call k_q6_k_rows = {&k_q6_k, false};
static const k16_call k_q6_k_pk = {&k_q6_k, true};

void ts_q_gemm_q4_k_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    k16_gemm(&k_q4_k_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q4_k_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    k16_gemm(&k_q4_k_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q6_k_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    k16_gemm(&k_q6_k_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_q6_k_packed_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    k16_gemm(&k_q6_k_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
}

/* ---- dot products: the same integers, elements in lanes, and the same folds ---- */

/* Sum of the sixteen int32 lanes (exact). */
static inline int32_t hsum_epi32_512(__m512i v) {
    return hsum_epi32_256(
        _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

/* 64 bytes: the low nibbles of the 32 bytes at qs, then their high nibbles. */
static inline __m512i nibbles64(const uint8_t *qs) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)qs);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(raw, m4)),
                              _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), 1);
}

/* int16 lanes: s0 in the low 16, s1 in the high 16. */
static inline __m512i i16_halves(int s0, int s1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)s0)),
                              _mm256_set1_epi16((short)s1), 1);
}

void ts_q_dot_q4_k_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q4_k *bx = x;
    const ts_block_q8_k *by = y;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            ts_k4_scale_min(j, bx[i].scales, &sc[j], &m[j]);
        }
        /* S: the products' pair sums (<= 2 * 15 * 127) times the sub-block scale. */
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            const __m512i yv = _mm512_loadu_si512((const void *)(by[i].qs + 64 * c));
            const __m512i p16 = _mm512_maddubs_epi16(nibbles64(bx[i].qs + 32 * c), yv);
            sumi = _mm512_add_epi32(sumi,
                                    _mm512_madd_epi16(p16, i16_halves(sc[2 * c], sc[2 * c + 1])));
        }
        int32_t mins = 0;
        for (int s = 0; s < 8; s++) {
            mins += m[s] * (by[i].bsums[2 * s] + by[i].bsums[2 * s + 1]);
        }
        acc = q4_k_fold(acc, _mm512_set1_epi32(hsum_epi32_512(sumi)), _mm512_set1_epi32(mins),
                        _mm512_set1_ps(fp16_hw(bx[i].d)), _mm512_set1_ps(fp16_hw(bx[i].dmin)),
                        by[i].d);
    }
    *result = _mm_cvtss_f32(_mm512_castps512_ps128(acc));
}

void ts_q_dot_q6_k_avx512(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q6_k *bx = x;
    const ts_block_q8_k *by = y;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        const ts_block_q6_k *b = &bx[i];
        /* Elements 128h + 32s + l: chunk s of half h, 32 levels 0..63; the products' pair
         * sums (<= 2 * 63 * 127) times the scale of their 16-element sub-block. */
        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            for (int s = 0; s < 4; s += 2) {
                __m256i q[2];
                for (int u = 0; u < 2; u++) {
                    const __m256i ql =
                        _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * ((s + u) & 1)));
                    const __m256i lo = s + u < 2 ? _mm256_and_si256(ql, m4)
                                                 : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * (s + u)), m3);
                    q[u] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
                }
                const __m512i qv = _mm512_inserti64x4(_mm512_castsi256_si512(q[0]), q[1], 1);
                const __m512i yv = _mm512_loadu_si512((const void *)(by[i].qs + 128 * h + 32 * s));
                /* int16 lane l covers elements 2l, 2l + 1: sub-block 8h + 2s + l / 8. */
                const int8_t *sc = b->scales + 8 * h + 2 * s;
                const __m512i scv = _mm512_inserti64x4(
                    _mm512_castsi256_si512(
                        _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]))),
                    _mm256_set_m128i(_mm_set1_epi16(sc[3]), _mm_set1_epi16(sc[2])), 1);
                sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(qv, yv), scv));
            }
        }
        int32_t corr = 0;
        for (int j = 0; j < 16; j++) {
            corr += b->scales[j] * by[i].bsums[j];
        }
        const int32_t t = hsum_epi32_512(sumi) - 32 * corr;
        acc = q6_k_fold(acc, _mm512_set1_epi32(t), _mm512_set1_ps(fp16_hw(b->d)), by[i].d);
    }
    *result = _mm_cvtss_f32(_mm512_castps512_ps128(acc));
}
