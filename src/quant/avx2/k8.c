/*
 * avx2/k8.c — Q4_K and Q6_K against Q8_K activations on AVX2 with eight weight rows in the
 * eight 32-bit lanes of a register: gemm on the rows as they lie and on packed rows
 * (quant_pack.c), and dot products that give the gemm's bits.
 *
 * Layout. A super-block of eight rows is unpacked into 64 registers q[g], one per group of four
 * consecutive elements 4g..4g+3: lane r holds row r's four unsigned levels (Q4_K 0..15, Q6_K
 * 0..63). One vpmaddubsw of q[g] with the activation's bytes 4g..4g+3 broadcast to every lane
 * gives each row two int16 pair sums, so a super-block costs 64 multiplies per activation row
 * for eight rows and no horizontal reduction. The words come from the packed matrix by plain
 * loads (each run of sixteen words holds these eight rows' words in its first or second half),
 * or from the rows by transposing 16-byte pieces of eight rows (transpose8x4_epi32). The block
 * headers come the same way (Q4_K: its first 16 bytes, d, dmin and the 12 scale bytes; Q6_K:
 * its 16 scale bytes and d), so scales and mins arrive per lane and are decoded there with
 * vector shifts, masks and byte shuffles into int16 pairs for vpmaddwd.
 *
 * Exact integers per super-block, per lane (row) and activation row:
 *   Q4_K:  S = sum_s sc_s * isum_s (8 sub-blocks of 32, isum_s = sum q * y): the eight groups'
 *          pair sums of a sub-block add up in int16 (<= 8 * 2 * 15 * 128 = 30720), then one
 *          vpmaddwd with (sc_s, sc_s) widens and scales them.
 *          M = sum_s m_s * (bsums[2s] + bsums[2s+1]): four vpmaddwd of the pairs (m_2t, m_2t+1)
 *          with the activation's pairs (bsum_2t, bsum_2t+1), each bsum_s the sum of 32 quants
 *          (|bsum_s| <= 4096, as every Q8_K quantizer writes them).
 *   Q6_K:  T = sum_j sc_j * isum_j - 32 * sum_j sc_j * bsums[j] (16 sub-blocks of 16, int8
 *          scales): two groups' pair sums add up in int16 (<= 2 * 2 * 63 * 128 = 32256), then
 *          a vpmaddwd with (sc_j, sc_j) each; the bias term is eight vpmaddwd of the pairs
 *          (sc_2t, sc_2t+1) with (bsums[2t], bsums[2t+1]). |T| < 6e8.
 *
 * Numerics — per row and super-block, with d_w, dmin_w the row's f16 scales (exact in f32) and
 * d_a the activation's f32 scale, every path (gemm at any batch, on rows or packed, and
 * vec_dot) runs
 *   Q4_K:  acc = acc + fmsub((float)S, d_w * d_a, (float)M * (dmin_w * d_a))
 *   Q6_K:  acc = fma((float)T, d_w * d_a, acc)
 * from acc = 0, super-blocks in order (the AVX-512 kernels' operations, avx512/k.c), so results
 * do not depend on batching (tests/quant/test_gemm_invariance.c) or on packing
 * (tests/quant/test_pack.c). vec_dot computes S, M and T its own way (elements in lanes) and
 * runs the same fold on a broadcast. The AVX-VNNI build (avxvnni/k8.c) compiles this file
 * again; it has no dot step of its own, so its bits are these.
 *
 * Drivers. With several activation rows, a call takes up to K8_GROUPS groups of eight weight
 * rows and K8_COLS activation rows; per pass of K8_KB super-blocks the activation terms are
 * converted once, each group's super-blocks are unpacked once into an aligned buffer, and tiles
 * of up to four activation rows (exactly as many as there are) run over it while the next eight
 * rows' part is prefetched. With one activation row (decoding) on packed rows, each super-block of
 * eight rows is unpacked a quarter at a time in registers and used at once, and the next eight rows
 * are prefetched (so too for Q4_K on the rows as they lie); Q5_K and Q6_K rows as they lie go to
 * avx2/k1.c (elements in lanes: less work per byte there, same integers and folds, so the same
 * bits). The drivers are written once over a constant table of the type's inline functions and
 * inlined into the named gemm of each type, so no call through the table remains. They and the
 * pieces every type uses live in avx2/k8.h, which avx2/iq4xs.c shares.
 */
#include "quant/avx2/k8.h"

/* ---- Q4_K ---- */

/* acc + fmsub((float)S, d_w * d_a, (float)M * (dmin_w * d_a)), per lane. */
K8_INLINE __m256 q4_k_fold(__m256 acc, __m256i s, __m256i m, __m256 d, __m256 dmin, float da) {
    const __m256 dav = _mm256_set1_ps(da);
    const __m256 mt = _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dav));
    return _mm256_add_ps(acc, _mm256_fmsub_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, dav), mt));
}

K8_INLINE void q4_k_yprep(const ts_block_q8_k *y, k8ys *e) {
    e->d = y->d;
    for (int t = 0; t < 4; t++) {
        const int lo = y->bsums[4 * t] + y->bsums[4 * t + 1];
        const int hi = y->bsums[4 * t + 2] + y->bsums[4 * t + 3];
        e->x[t] = (int32_t)(((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16));
    }
}

/* Scale and min bytes of eight rows from their transposed 16-byte headers h[1..3] (scale bytes
 * 0..11; quant_internal.h's ts_k4_scale_min, per byte): lane r of sb[0] holds row r's scales of
 * sub-blocks 0..3 (the low six bits of bytes 0..3), sb[1] those of 4..7 (the nibbles of bytes
 * 8..11 with the top two bits of bytes 0..3 above them), mb[0] and mb[1] the mins alike (bytes
 * 4..7, the high nibbles of 8..11 and the top bits of 4..7). */
K8_INLINE void q4_k_bytes(const __m256i h[4], __m256i sb[2], __m256i mb[2]) {
    const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F);
    const __m256i top = _mm256_set1_epi8(0x30);
    sb[0] = _mm256_and_si256(h[1], m6);
    mb[0] = _mm256_and_si256(h[2], m6);
    sb[1] = _mm256_or_si256(_mm256_and_si256(h[3], m4),
                            _mm256_and_si256(_mm256_srli_epi32(h[1], 2), top));
    mb[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h[3], 4), m4),
                            _mm256_and_si256(_mm256_srli_epi32(h[2], 2), top));
}

/* (sc_s, sc_s) and (m_2t, m_2t+1) as int16 pairs per lane. */
K8_INLINE __m256i q4_k_scale(const __m256i sb[2], int s) {
    return pair_u8(sb[s / 4], s % 4, s % 4);
}

K8_INLINE __m256i q4_k_minpair(const __m256i mb[2], int t) {
    return pair_u8(mb[t / 2], 2 * (t % 2), 2 * (t % 2) + 1);
}

/* Quarter c of super-block i: q[0..7] = the groups of sub-block 2c (low nibbles of quant
 * bytes 32c..32c+31), q[8..15] those of 2c + 1 (high nibbles). */
K8_INLINE void q4_k_quarter(const k8src *s, bool packed, int64_t i, int c, __m256i q[16]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i g[8];
    k8_quad(s, packed, sizeof(ts_block_q4_k), i, offsetof(ts_block_q4_k, qs) + 32 * (size_t)c, g);
    k8_quad(s, packed, sizeof(ts_block_q4_k), i, offsetof(ts_block_q4_k, qs) + 32 * (size_t)c + 16,
            g + 4);
    for (int k = 0; k < 8; k++) {
        q[k] = _mm256_and_si256(g[k], m4);
        q[8 + k] = _mm256_and_si256(_mm256_srli_epi16(g[k], 4), m4);
    }
}

/* M per lane from the min pairs and one activation row's bsum pairs. */
K8_INLINE __m256i q4_k_mins(const __m256i m[4], const k8ys *e) {
    __m256i s = _mm256_madd_epi16(m[0], _mm256_set1_epi32(e->x[0]));
    for (int t = 1; t < 4; t++) {
        s = _mm256_add_epi32(s, _mm256_madd_epi16(m[t], _mm256_set1_epi32(e->x[t])));
    }
    return s;
}

K8_INLINE void q4_k_unpack(const k8src *s, bool packed, int64_t i, k8blk *b) {
    __m256i h[4], sb[2], mb[2];
    k8_quad(s, packed, sizeof(ts_block_q4_k), i, 0, h);
    b->d = f16_lanes(h[0], false);
    b->dmin = f16_lanes(h[0], true);
    q4_k_bytes(h, sb, mb);
    for (int t = 0; t < 8; t++) {
        b->sc[t] = q4_k_scale(sb, t);
    }
    for (int t = 0; t < 4; t++) {
        b->m[t] = q4_k_minpair(mb, t);
    }
    for (int c = 0; c < 4; c++) {
        q4_k_quarter(s, packed, i, c, b->q + 16 * c);
    }
}

/* Q4_K and Q5_K: one unpacked super-block against n <= 4 activation rows; a sub-block's groups
 * sum in int16 `span` at a time (8 for levels <= 15, 4 for levels <= 31), each run scaled by
 * one vpmaddwd. */
K8_INLINE void k4_tile(const k8blk *b, const int8_t *const *y, const k8ys *const *e, __m256 *acc,
                       int n, int span) {
    __m256i s[4];
    for (int j = 0; j < n; j++) {
        s[j] = _mm256_setzero_si256();
    }
    for (int sb = 0; sb < 8; sb++) {
        const __m256i sc = _mm256_load_si256(&b->sc[sb]);
        for (int g0 = 0; g0 < 8; g0 += span) {
            __m256i h[4];
            for (int g = g0; g < g0 + span; g++) {
                const __m256i qg = _mm256_load_si256(&b->q[8 * sb + g]);
                for (int j = 0; j < n; j++) {
                    const __m256i p = _mm256_maddubs_epi16(qg, y4(y[j] + 32 * sb + 4 * g));
                    h[j] = g == g0 ? p : _mm256_add_epi16(h[j], p);
                    /* Keep the sums as running chains (left alone, GCC rebalances and spills
                     * them). */
                    __asm__("" : "+x"(h[j]));
                }
            }
            for (int j = 0; j < n; j++) {
                s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(h[j], sc));
            }
        }
    }
    for (int j = 0; j < n; j++) {
        acc[j] = q4_k_fold(acc[j], s[j], q4_k_mins(b->m, e[j]), b->d, b->dmin, e[j]->d);
    }
}

K8_INLINE void q4_k_tile(const k8blk *b, const int8_t *const *y, const k8ys *const *e, __m256 *acc,
                         int n) {
    k4_tile(b, y, e, acc, n, 8);
}

/* One row: each quad of quant words is used as it arrives (its low nibbles for sub-block 2c,
 * its high ones for 2c + 1), and the scale pairs are made at their use, so that few registers
 * stay live across the super-block. */
K8_INLINE __m256 q4_k_col1(const k8src *src, bool packed, int64_t i, const int8_t *y, const k8ys *e,
                           __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i h[4], sb[2], mb[2];
    k8_quad(src, packed, sizeof(ts_block_q4_k), i, 0, h);
    q4_k_bytes(h, sb, mb);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            __m256i g[4];
            k8_quad(src, packed, sizeof(ts_block_q4_k), i,
                    offsetof(ts_block_q4_k, qs) + 32 * (size_t)c + 16 * (size_t)half, g);
            for (int k = 0; k < 4; k++) {
                const int at = 64 * c + 16 * half + 4 * k;
                lo = _mm256_add_epi16(lo,
                                      _mm256_maddubs_epi16(_mm256_and_si256(g[k], m4), y4(y + at)));
                hi = _mm256_add_epi16(
                    hi, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(g[k], 4), m4),
                                             y4(y + at + 32)));
            }
        }
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(lo, q4_k_scale(sb, 2 * c)));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(hi, q4_k_scale(sb, 2 * c + 1)));
    }
    __m256i m[4];
    for (int t = 0; t < 4; t++) {
        m[t] = q4_k_minpair(mb, t);
    }
    return q4_k_fold(acc, _mm256_add_epi32(s0, s1), q4_k_mins(m, e), f16_lanes(h[0], false),
                     f16_lanes(h[0], true), e->d);
}

/* ---- Q5_K: Q4_K's header and nibbles, plus one high bit per element ---- */

/* Bit `bit` of every byte of v moved to bit 4 (16-bit shifts; the mask drops what crosses a
 * byte). */
K8_INLINE __m256i bit_to_4(__m256i v, int bit) {
    const __m256i b4 = _mm256_set1_epi8(0x10);
    if (bit <= 4) {
        return _mm256_and_si256(_mm256_slli_epi16(v, 4 - bit), b4);
    }
    return _mm256_and_si256(_mm256_srli_epi16(v, bit - 4), b4);
}

/* The levels of word k of quad `half` of chunk c: lo for sub-block 2c (low nibbles of quant
 * bytes 32c + 16 half + 4k.., fifth bit 2c of the same qh bytes' word), hi for 2c + 1. */
K8_INLINE void q5_k_levels(__m256i qs, __m256i qh, int c, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_or_si256(_mm256_and_si256(qs, m4), bit_to_4(qh, 2 * c));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), m4), bit_to_4(qh, 2 * c + 1));
}

K8_INLINE void q5_k_unpack(const k8src *s, bool packed, int64_t i, k8blk *b) {
    __m256i h[4], sb[2], mb[2];
    k8_quad(s, packed, sizeof(ts_block_q5_k), i, 0, h);
    b->d = f16_lanes(h[0], false);
    b->dmin = f16_lanes(h[0], true);
    q4_k_bytes(h, sb, mb);
    for (int t = 0; t < 8; t++) {
        b->sc[t] = q4_k_scale(sb, t);
    }
    for (int t = 0; t < 4; t++) {
        b->m[t] = q4_k_minpair(mb, t);
    }
    for (int half = 0; half < 2; half++) {
        __m256i qh[4];
        k8_quad(s, packed, sizeof(ts_block_q5_k), i,
                offsetof(ts_block_q5_k, qh) + 16 * (size_t)half, qh);
        for (int c = 0; c < 4; c++) {
            __m256i g[4];
            k8_quad(s, packed, sizeof(ts_block_q5_k), i,
                    offsetof(ts_block_q5_k, qs) + 32 * (size_t)c + 16 * (size_t)half, g);
            for (int k = 0; k < 4; k++) {
                q5_k_levels(g[k], qh[k], c, &b->q[16 * c + 4 * half + k],
                            &b->q[16 * c + 8 + 4 * half + k]);
            }
        }
    }
}

K8_INLINE void q5_k_tile(const k8blk *b, const int8_t *const *y, const k8ys *const *e, __m256 *acc,
                         int n) {
    k4_tile(b, y, e, acc, n, 4);
}

/* One row: per half of every sub-block, four groups in int16, scaled as they complete. */
K8_INLINE __m256 q5_k_col1(const k8src *src, bool packed, int64_t i, const int8_t *y, const k8ys *e,
                           __m256 acc) {
    __m256i h[4], sb[2], mb[2];
    k8_quad(src, packed, sizeof(ts_block_q5_k), i, 0, h);
    q4_k_bytes(h, sb, mb);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
        __m256i qh[4];
        k8_quad(src, packed, sizeof(ts_block_q5_k), i,
                offsetof(ts_block_q5_k, qh) + 16 * (size_t)half, qh);
        for (int c = 0; c < 4; c++) {
            __m256i g[4];
            k8_quad(src, packed, sizeof(ts_block_q5_k), i,
                    offsetof(ts_block_q5_k, qs) + 32 * (size_t)c + 16 * (size_t)half, g);
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __m256i ql, qhi;
                q5_k_levels(g[k], qh[k], c, &ql, &qhi);
                const int at = 64 * c + 16 * half + 4 * k;
                lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(ql, y4(y + at)));
                hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(qhi, y4(y + at + 32)));
            }
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(lo, q4_k_scale(sb, 2 * c)));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(hi, q4_k_scale(sb, 2 * c + 1)));
        }
    }
    __m256i m[4];
    for (int t = 0; t < 4; t++) {
        m[t] = q4_k_minpair(mb, t);
    }
    return q4_k_fold(acc, _mm256_add_epi32(s0, s1), q4_k_mins(m, e), f16_lanes(h[0], false),
                     f16_lanes(h[0], true), e->d);
}

/* ---- Q6_K ---- */

/* fma((float)T, d_w * d_a, acc), per lane. */
K8_INLINE __m256 q6_k_fold(__m256 acc, __m256i t, __m256 d, float da) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(d, _mm256_set1_ps(da)), acc);
}

K8_INLINE void q6_k_yprep(const ts_block_q8_k *y, k8ys *e) {
    e->d = y->d;
    for (int t = 0; t < 8; t++) {
        e->x[t] = (int32_t)(((uint32_t)(uint16_t)y->bsums[2 * t]) |
                            ((uint32_t)(uint16_t)y->bsums[2 * t + 1] << 16));
    }
}

/* The eight rows' d (f16 at byte 208) as floats. */
K8_INLINE __m256 q6_k_d(const k8src *s, bool packed, int64_t i) {
    if (packed) {
        const uint8_t *p = s->pk + (size_t)i * 16 * sizeof(ts_block_q6_k) +
                           16 * offsetof(ts_block_q6_k, d) + 16 * (size_t)s->half;
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    }
    uint16_t dh[8];
    for (int r = 0; r < 8; r++) {
        dh[r] = ((const ts_block_q6_k *)s->w[r])[i].d;
    }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
}

/* From the transposed scale bytes h[0..3] (bytes 4k..4k+3 in h[k]), sign-extended: (sc_j, sc_j)
 * and (sc_2t, sc_2t+1) as int16 pairs per lane. */
K8_INLINE __m256i q6_k_scale(const __m256i h[4], int j) {
    return pair_i8(h[j / 4], j % 4, j % 4);
}

K8_INLINE __m256i q6_k_scalepair(const __m256i h[4], int t) {
    return pair_i8(h[t / 2], 2 * (t % 2), 2 * (t % 2) + 1);
}

/* The four levels (k = 0..3) that one word of a quarter's quads gives: elements 128 h + 32 k + l
 * take ql byte 64 h + l (k = 0: low nibble, k = 2: high) or 64 h + 32 + l (k = 1, 3), and bits
 * 2k, 2k+1 of qh byte 32 h + l. */
K8_INLINE void q6_k_levels4(__m256i a, __m256i b, __m256i c, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
    q[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(c, 4), top));
    q[1] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(c, 2), top));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(c, top));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(c, 2), top));
}

/* The ql and qh words of quarter p = 2 h + v (h: which 128 elements, v: which half of each 32):
 * a = ql words at byte 64 h + 16 v, b = at 64 h + 32 + 16 v, c = qh words at byte 32 h + 16 v
 * of qh. Word kk of them gives group 32 h + 8 k + 4 v + kk of level k (q6_k_levels4), so
 * sub-block 8 h + 2 k + v is groups 4 (8 h + 2 k + v) .. + 3. */
K8_INLINE void q6_k_words(const k8src *s, bool packed, int64_t i, int p, __m256i a[4], __m256i b[4],
                          __m256i c[4]) {
    const int h = p / 2, v = p % 2;
    k8_quad(s, packed, sizeof(ts_block_q6_k), i, 64 * (size_t)h + 16 * (size_t)v, a);
    k8_quad(s, packed, sizeof(ts_block_q6_k), i, 64 * (size_t)h + 32 + 16 * (size_t)v, b);
    k8_quad(s, packed, sizeof(ts_block_q6_k), i,
            offsetof(ts_block_q6_k, qh) + 32 * (size_t)h + 16 * (size_t)v, c);
}

/* 32 sum_j sc_j * bsums[j] per lane, for one activation row, from the scale bytes h. */
K8_INLINE __m256i q6_k_bias(const __m256i h[4], const k8ys *e) {
    __m256i s = _mm256_madd_epi16(q6_k_scalepair(h, 0), _mm256_set1_epi32(e->x[0]));
    for (int t = 1; t < 8; t++) {
        s = _mm256_add_epi32(s,
                             _mm256_madd_epi16(q6_k_scalepair(h, t), _mm256_set1_epi32(e->x[t])));
    }
    return _mm256_slli_epi32(s, 5);
}

/* Super-block i into *b: levels by group, (sc_j, sc_j) in sc[j], the transposed scale bytes in
 * m[0..3] (for q6_k_bias). */
K8_INLINE void q6_k_unpack(const k8src *s, bool packed, int64_t i, k8blk *b) {
    __m256i h[4];
    k8_quad(s, packed, sizeof(ts_block_q6_k), i, offsetof(ts_block_q6_k, scales), h);
    for (int j = 0; j < 16; j++) {
        b->sc[j] = q6_k_scale(h, j);
    }
    for (int t = 0; t < 4; t++) {
        b->m[t] = h[t];
    }
    b->d = q6_k_d(s, packed, i);
    b->dmin = _mm256_setzero_ps();
    for (int p = 0; p < 4; p++) {
        __m256i wa[4], wb[4], wc[4];
        q6_k_words(s, packed, i, p, wa, wb, wc);
        const int hh = p / 2, v = p % 2;
        for (int kk = 0; kk < 4; kk++) {
            __m256i q[4];
            q6_k_levels4(wa[kk], wb[kk], wc[kk], q);
            for (int k = 0; k < 4; k++) {
                b->q[32 * hh + 8 * k + 4 * v + kk] = q[k];
            }
        }
    }
}

K8_INLINE void q6_k_tile(const k8blk *b, const int8_t *const *y, const k8ys *const *e, __m256 *acc,
                         int n) {
    __m256i s[4];
    for (int j = 0; j < n; j++) {
        s[j] = _mm256_setzero_si256();
    }
    for (int sb = 0; sb < 16; sb++) {
        const __m256i sc = _mm256_load_si256(&b->sc[sb]);
        for (int pr = 0; pr < 2; pr++) {
            const int g = 4 * sb + 2 * pr;
            const __m256i q0 = _mm256_load_si256(&b->q[g]), q1 = _mm256_load_si256(&b->q[g + 1]);
            __m256i h[4];
            for (int j = 0; j < n; j++) {
                h[j] = _mm256_add_epi16(_mm256_maddubs_epi16(q0, y4(y[j] + 4 * g)),
                                        _mm256_maddubs_epi16(q1, y4(y[j] + 4 * g + 4)));
            }
            for (int j = 0; j < n; j++) {
                s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(h[j], sc));
                __asm__("" : "+x"(s[j]));
            }
        }
    }
    for (int j = 0; j < n; j++) {
        acc[j] = q6_k_fold(acc[j], _mm256_sub_epi32(s[j], q6_k_bias(b->m, e[j])), b->d, e[j]->d);
    }
}

/* One row: each word of a quarter's quads gives one group of four sub-blocks, used at once;
 * pairs of groups sum in int16 and are scaled as they complete, the scale pairs made at use. */
K8_INLINE __m256 q6_k_col1(const k8src *src, bool packed, int64_t i, const int8_t *y, const k8ys *e,
                           __m256 acc) {
    __m256i h[4];
    k8_quad(src, packed, sizeof(ts_block_q6_k), i, offsetof(ts_block_q6_k, scales), h);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        __m256i wa[4], wb[4], wc[4];
        q6_k_words(src, packed, i, p, wa, wb, wc);
        const int hh = p / 2, v = p % 2;
        __m256i part[4];
        for (int kk = 0; kk < 4; kk++) {
            __m256i q[4];
            q6_k_levels4(wa[kk], wb[kk], wc[kk], q);
            for (int k = 0; k < 4; k++) {
                const int j = 8 * hh + 2 * k + v; /* the sub-block; this group is its kk-th */
                const __m256i prod = _mm256_maddubs_epi16(q[k], y4(y + 16 * j + 4 * kk));
                part[k] = kk % 2 == 0 ? prod : _mm256_add_epi16(part[k], prod);
                if (kk % 2 == 1) {
                    const __m256i t = _mm256_madd_epi16(part[k], q6_k_scale(h, j));
                    if (k % 2 == 0) {
                        s0 = _mm256_add_epi32(s0, t);
                    } else {
                        s1 = _mm256_add_epi32(s1, t);
                    }
                }
            }
        }
    }
    return q6_k_fold(acc, _mm256_sub_epi32(_mm256_add_epi32(s0, s1), q6_k_bias(h, e)),
                     q6_k_d(src, packed, i), e->d);
}

static const k8_type k_q4_k = {
    .wbs = sizeof(ts_block_q4_k),
    .unpack = q4_k_unpack,
    .tile = q4_k_tile,
    .col1 = q4_k_col1,
};
static const k8_type k_q5_k = {
    .wbs = sizeof(ts_block_q5_k),
    .unpack = q5_k_unpack,
    .tile = q5_k_tile,
    .col1 = q5_k_col1,
};
static const k8_type k_q6_k = {
    .wbs = sizeof(ts_block_q6_k),
    .unpack = q6_k_unpack,
    .tile = q6_k_tile,
    .col1 = q6_k_col1,
};

static const k8_call k_q4_k_rows = {&k_q4_k, q4_k_yprep, false};
static const k8_call k_q4_k_pk = {&k_q4_k, q4_k_yprep, true};
static const k8_call k_q5_k_rows = {&k_q5_k, q4_k_yprep, false};
static const k8_call k_q5_k_pk = {&k_q5_k, q4_k_yprep, true};
static const k8_call k_q6_k_rows = {&k_q6_k, q6_k_yprep, false};
static const k8_call k_q6_k_pk = {&k_q6_k, q6_k_yprep, true};

/* The one-row paths are functions of their own, not inlined into the gemm (see avx2/q32.c). */
K8_NOINLINE void q4_k_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                           const void *a) {
    k8_gemv(&k_q4_k_rows, k, nr, c, w, ldw, a);
}

K8_NOINLINE void q4_k_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                              const void *a) {
    k8_gemv(&k_q4_k_pk, k, nr, c, w, ldw, a);
}

K8_NOINLINE void q5_k_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                              const void *a) {
    k8_gemv(&k_q5_k_pk, k, nr, c, w, ldw, a);
}

K8_NOINLINE void q6_k_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                              const void *a) {
    k8_gemv(&k_q6_k_pk, k, nr, c, w, ldw, a);
}

void ts_q_gemm_q4_k_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_k_gemv(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q4_k_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

/* The same on packed weights (nr a multiple of 16, w at a group). */
void ts_q_gemm_q4_k_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q4_k_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q4_k_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q5_k_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        ts_q_gemv_q5_k_avx2(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q5_k_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q5_k_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q5_k_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q5_k_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q6_k_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        ts_q_gemv_q6_k_avx2(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q6_k_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

void ts_q_gemm_q6_k_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        q6_k_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_q6_k_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

/* ---- dot products: the same integers, elements in lanes, and the same folds ---- */

void ts_q_dot_q4_k_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q4_k *bx = x;
    const ts_block_q8_k *by = y;
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            ts_k4_scale_min(j, bx[i].scales, &sc[j], &m[j]);
        }
        /* S: the products' pair sums (<= 2 * 15 * 128) times the sub-block scale. */
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(bx[i].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(raw, mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0),
                                                            _mm256_set1_epi16(sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1),
                                                            _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int32_t mins = 0;
        for (int s = 0; s < 8; s++) {
            mins += m[s] * (by[i].bsums[2 * s] + by[i].bsums[2 * s + 1]);
        }
        acc = q4_k_fold(acc, _mm256_set1_epi32(hsum_epi32_256(sumi)), _mm256_set1_epi32(mins),
                        _mm256_set1_ps(fp16_hw(bx[i].d)), _mm256_set1_ps(fp16_hw(bx[i].dmin)),
                        by[i].d);
    }
    *result = _mm256_cvtss_f32(acc);
}

void ts_q_dot_q5_k_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q5_k *bx = x;
    const ts_block_q8_k *by = y;
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            ts_k4_scale_min(j, bx[i].scales, &sc[j], &m[j]);
        }
        /* S: the products' pair sums (<= 2 * 31 * 128) times the sub-block scale. */
        const __m256i qh = _mm256_loadu_si256((const __m256i *)bx[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(bx[i].qs + 32 * c));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, mask), bit_to_4(qh, 2 * c));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), mask),
                                               bit_to_4(qh, 2 * c + 1));
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0),
                                                            _mm256_set1_epi16(sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1),
                                                            _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int32_t mins = 0;
        for (int s = 0; s < 8; s++) {
            mins += m[s] * (by[i].bsums[2 * s] + by[i].bsums[2 * s + 1]);
        }
        acc = q4_k_fold(acc, _mm256_set1_epi32(hsum_epi32_256(sumi)), _mm256_set1_epi32(mins),
                        _mm256_set1_ps(fp16_hw(bx[i].d)), _mm256_set1_ps(fp16_hw(bx[i].dmin)),
                        by[i].d);
    }
    *result = _mm256_cvtss_f32(acc);
}

void ts_q_dot_q6_k_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_q6_k *bx = x;
    const ts_block_q8_k *by = y;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        const ts_block_q6_k *b = &bx[i];
        /* Elements 128h + 32s + l: chunk s of half h, 32 levels 0..63; the products' pair
         * sums (<= 2 * 63 * 128) times the scale of their 16-element sub-block. */
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i ql =
                    _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (s & 1)));
                const __m256i lo = s < 2 ? _mm256_and_si256(ql, m4)
                                         : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m3);
                const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
                const __m256i yv =
                    _mm256_loadu_si256((const __m256i *)(by[i].qs + 128 * h + 32 * s));
                const int g = 8 * h + 2 * s; /* sub-blocks g (low 128 bits), g + 1 */
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(b->scales[g + 1]),
                                                     _mm_set1_epi16(b->scales[g]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), scv));
            }
        }
        int32_t corr = 0;
        for (int j = 0; j < 16; j++) {
            corr += b->scales[j] * by[i].bsums[j];
        }
        const int32_t t = hsum_epi32_256(sumi) - 32 * corr;
        acc = q6_k_fold(acc, _mm256_set1_epi32(t), _mm256_set1_ps(fp16_hw(b->d)), by[i].d);
    }
    *result = _mm256_cvtss_f32(acc);
}
