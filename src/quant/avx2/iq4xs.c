/*
 * avx2/iq4xs.c — AVX2 kernels of IQ4_XS against Q8_K: dequantization (bit-exact with the
 * scalar one), a gemm with eight weight rows in the eight 32-bit lanes of a register (on the
 * rows as they lie and on packed rows, quant_pack.c), and the dot product, which gives the
 * gemm's bits. avxvnni/iq4xs.c builds this file again with AVX-VNNI (TS_AVXVNNI).
 *
 * Block. d (f16), scales_h (u16), scales_l[4], then 128 index bytes: bytes 16j..16j+15 are
 * sub-block j, their low nibbles its elements 0-15 and their high nibbles 16-31; a level is
 * IQ4_NL's ts_iq4nl_values[index] (signed, |level| <= 127, never 0), the sub-block scale
 * ls_j - 32 in -32..31.
 *
 * Rows in lanes (avx2/k8.h, as the K-quants of avx2/k8.c). The block is 34 words; packed, it is
 * one field of words (quant_pack.c). The header quad (words 0..3) gives per lane d and scales_h
 * (word 0) and scales_l (word 1), decoded there into (ls_j - 32, ls_j - 32) int16 pairs; quad
 * 2 + j (bytes 8 + 16j..) is sub-block j, its word k giving group 8j + k (elements 32j + 4k..,
 * low nibbles) and group 8j + 4 + k (high nibbles), looked up in the level table per lane.
 * Levels are signed, so each vpmaddubsw takes |level| as its unsigned operand and the broadcast
 * activation bytes with the level's sign (vpsignb): per group and activation row a sign, a
 * vpmaddubsw and a vpmaddwd (vpdpwssd with AVX-VNNI) by the scale pair; |level| is taken once
 * per group for all activation rows of a tile.
 *
 * Exact integers. With |level| <= 127 and |q8| <= 127 (every Q8_K quantizer here keeps -128
 * out), a vpmaddubsw pair sum is at most 2 * 127 * 127 = 32258 < 32767, so it never saturates;
 * it is widened and scaled at once (two groups' pair sums could exceed int16). Per row and
 * super-block S = sum_j (ls_j - 32) * isum_j, |S| <= 8 * 32 * 32 * 127 * 127 < 1.4e8, exact in
 * int32 whatever the order of the additions.
 *
 * Numerics — per row and super-block, with d_w the row's f16 scale (exact in f32) and d_a the
 * activation's, every path (gemm at any batch, on rows or packed, one activation row or
 * several, and vec_dot) runs
 *     acc = fma((float)S, d_w * d_a, acc)
 * from acc = 0, super-blocks in order, so results do not depend on batching
 * (tests/quant/test_gemm_invariance.c) or on packing (tests/quant/test_pack.c), and the AVX-VNNI
 * build gives these bits (tests/quant/test_avxvnni.c). vec_dot computes S with elements in
 * lanes and runs the same fold on a broadcast. (The AVX-512 kernels, avx512/iq4xs.c, fold
 * their own way: each level agrees with itself.)
 */
#include <string.h>

#include "quant/avx2/k8.h"

/* The level table in both 128-bit halves, for vpshufb. */
K8_INLINE __m256i iq4xs_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_iq4nl_values));
}

/* The levels of one index word per lane: lo from the low nibbles, hi from the high ones. */
K8_INLINE void iq4xs_levels(__m256i w, __m256i table, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_shuffle_epi8(table, _mm256_and_si256(w, m4));
    *hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4));
}

/* s + sc * (the pair sums of q * y) per int32 lane: q the signed levels, qa = |q|, yb four
 * activation bytes (broadcast or in place), sc an int16 scale pair. */
K8_INLINE __m256i iq4xs_step(__m256i s, __m256i qa, __m256i q, __m256i yb, __m256i sc) {
    return dot2_i16(s, _mm256_maddubs_epi16(qa, _mm256_sign_epi8(yb, q)), sc);
}

/* fma((float)S, d_w * d_a, acc), per lane. */
K8_INLINE __m256 iq4xs_fold(__m256 acc, __m256i s, __m256 d, float da) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(da)), acc);
}

/* ---- rows in lanes ---- */

/* (ls_j - 32, ls_j - 32) as an int16 pair per lane, from the header words h0 (d, scales_h)
 * and h1 (scales_l: nibble j of the word is ls_j's low nibble). */
K8_INLINE __m256i iq4xs_scale(__m256i h0, __m256i h1, int j) {
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(h1, 4 * j), _mm256_set1_epi32(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(h0, 12 + 2 * j), _mm256_set1_epi32(0x30));
    const __m256i v = _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
                           _mm256_slli_epi32(v, 16));
}

K8_INLINE void iq4_xs_yprep(const ts_block_q8_k *y, k8ys *e) {
    e->d = y->d;
}

/* Super-block i into *b: the signed levels by group, (ls_j - 32, ls_j - 32) in sc[j], d. */
K8_INLINE void iq4_xs_unpack(const k8src *s, bool packed, int64_t i, k8blk *b) {
    const __m256i table = iq4xs_table();
    __m256i h[4];
    k8_quad(s, packed, sizeof(ts_block_iq4_xs), i, 0, h);
    b->d = f16_lanes(h[0], false);
    b->dmin = _mm256_setzero_ps();
    for (int j = 0; j < 8; j++) {
        b->sc[j] = iq4xs_scale(h[0], h[1], j);
    }
    for (int j = 0; j < 8; j++) {
        __m256i g[4];
        k8_quad(s, packed, sizeof(ts_block_iq4_xs), i,
                offsetof(ts_block_iq4_xs, qs) + 16 * (size_t)j, g);
        for (int k = 0; k < 4; k++) {
            iq4xs_levels(g[k], table, &b->q[8 * j + k], &b->q[8 * j + 4 + k]);
        }
    }
}

/* One unpacked super-block against n <= 4 activation rows. */
K8_INLINE void iq4_xs_tile(const k8blk *b, const int8_t *const *y, const k8ys *const *e,
                           __m256 *acc, int n) {
    __m256i s[4];
    for (int j = 0; j < n; j++) {
        s[j] = _mm256_setzero_si256();
    }
    for (int sb = 0; sb < 8; sb++) {
        const __m256i sc = _mm256_load_si256(&b->sc[sb]);
        for (int g = 0; g < 8; g++) {
            const __m256i q = _mm256_load_si256(&b->q[8 * sb + g]);
            const __m256i qa = _mm256_abs_epi8(q);
            for (int j = 0; j < n; j++) {
                s[j] = iq4xs_step(s[j], qa, q, y4(y[j] + 32 * sb + 4 * g), sc);
            }
        }
    }
    for (int j = 0; j < n; j++) {
        acc[j] = iq4xs_fold(acc[j], s[j], b->d, e[j]->d);
    }
}

/* One row: each sub-block's quad of index words is used as it arrives, its scale pair made
 * at its use; two chains of sums (low and high nibbles) keep the additions apart. */
K8_INLINE __m256 iq4_xs_col1(const k8src *src, bool packed, int64_t i, const int8_t *y,
                             const k8ys *e, __m256 acc) {
    const __m256i table = iq4xs_table();
    __m256i h[4];
    k8_quad(src, packed, sizeof(ts_block_iq4_xs), i, 0, h);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i g[4];
        k8_quad(src, packed, sizeof(ts_block_iq4_xs), i,
                offsetof(ts_block_iq4_xs, qs) + 16 * (size_t)j, g);
        const __m256i sc = iq4xs_scale(h[0], h[1], j);
        for (int k = 0; k < 4; k++) {
            __m256i lo, hi;
            iq4xs_levels(g[k], table, &lo, &hi);
            s0 = iq4xs_step(s0, _mm256_abs_epi8(lo), lo, y4(y + 32 * j + 4 * k), sc);
            s1 = iq4xs_step(s1, _mm256_abs_epi8(hi), hi, y4(y + 32 * j + 16 + 4 * k), sc);
        }
    }
    return iq4xs_fold(acc, _mm256_add_epi32(s0, s1), f16_lanes(h[0], false), e->d);
}

static const k8_type k_iq4_xs = {
    .wbs = sizeof(ts_block_iq4_xs),
    .unpack = iq4_xs_unpack,
    .tile = iq4_xs_tile,
    .col1 = iq4_xs_col1,
};

static const k8_call k_iq4_xs_rows = {&k_iq4_xs, iq4_xs_yprep, false};
static const k8_call k_iq4_xs_pk = {&k_iq4_xs, iq4_xs_yprep, true};

/* The one-row paths are functions of their own, not inlined into the gemm (see avx2/q32.c). */
K8_NOINLINE void iq4_xs_gemv(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                             const void *a) {
    k8_gemv(&k_iq4_xs_rows, k, nr, c, w, ldw, a);
}

K8_NOINLINE void iq4_xs_gemv_pk(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                                const void *a) {
    k8_gemv(&k_iq4_xs_pk, k, nr, c, w, ldw, a);
}

void ts_q_gemm_iq4_xs_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        iq4_xs_gemv(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_iq4_xs_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

/* The same on packed weights (nr a multiple of 16, w at a group). */
void ts_q_gemm_iq4_xs_packed_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                                  const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        iq4_xs_gemv_pk(k, nr, c, w, ldw, a);
    } else {
        k8_gemm(&k_iq4_xs_pk, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

/* ---- the dot product: elements in lanes, the same S and fold ---- */

/* The eight sub-block scales (ls - 32) as int16 lanes: low nibbles of scales_l interleaved in
 * order, the high bit pairs of scales_h moved to the top of each 16-bit lane by a multiply
 * (h << (14 - 2j)) and down by 14. */
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

/* A super-block's 128 index bytes are four chunks of 32: chunk c holds sub-blocks 2c (bytes
 * 0-15) and 2c+1 (bytes 16-31). So a chunk's low nibbles meet the activations at 64c + 0..15
 * and 64c + 32..47 (one 128-bit lane each), the high nibbles those at 64c + 16..31 and
 * 64c + 48..63; each 128-bit lane is scaled by its sub-block's scale. */
void ts_q_dot_iq4_xs_avx2(int64_t n, float *result, const void *x, const void *y) {
    const ts_block_iq4_xs *bx = x;
    const ts_block_q8_k *by = y;
    const __m256i table = iq4xs_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        const __m256i s16 = _mm256_broadcastsi128_si256(iq4xs_scales16(&bx[i]));
        __m256i s = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            iq4xs_levels(_mm256_loadu_si256((const __m256i *)(bx[i].qs + 32 * c)), table, &lo, &hi);
            /* lane 0: scale 2c in every int16, lane 1: scale 2c + 1 */
            const char b0 = (char)(4 * c), b1 = (char)(4 * c + 1), b2 = (char)(4 * c + 2),
                       b3 = (char)(4 * c + 3);
            const __m256i sc = _mm256_shuffle_epi8(
                s16,
                _mm256_setr_epi8(b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b2,
                                 b3, b2, b3, b2, b3, b2, b3, b2, b3, b2, b3, b2, b3, b2, b3));
            const __m256i ya = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c));
            const __m256i yb = _mm256_loadu_si256((const __m256i *)(by[i].qs + 64 * c + 32));
            s = iq4xs_step(s, _mm256_abs_epi8(lo), lo, _mm256_permute2x128_si256(ya, yb, 0x20), sc);
            s = iq4xs_step(s, _mm256_abs_epi8(hi), hi, _mm256_permute2x128_si256(ya, yb, 0x31), sc);
        }
        acc = iq4xs_fold(acc, _mm256_set1_epi32(hsum_epi32_256(s)),
                         _mm256_set1_ps(fp16_hw(bx[i].d)), by[i].d);
    }
    *result = _mm256_cvtss_f32(acc);
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
