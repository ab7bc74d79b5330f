/*
 * avx2/k1.c — one activation row (decoding) against Q5_K and Q6_K weight rows on AVX2,
 * elements in lanes: each weight row's super-block is read with plain 32-byte loads, its levels
 * multiplied with the activation's bytes at the same positions, and only the super-block's
 * exact integer sums are moved into lanes (lane r for row r of eight) by one reduction per
 * eight rows. Compared with avx2/k8.c's rows-in-lanes one-row path this needs no transposes and
 * no broadcast of activation bytes, so it does less work per weight byte (decoding streams
 * every weight once and is bound by this work on hosts whose cores are slow next to their
 * memory).
 *
 * Numerics: the per-row integers of a super-block (Q6_K: T; Q4_K and Q5_K: S and M, as defined
 * in avx2/k8.c) are exact whatever order they are summed in, and they are folded per lane with
 * k8.c's operations (q6_k_fold, q4_k_fold), super-blocks in order from acc = 0. So every result
 * has the bits of the several-row kernels (tests/quant/test_gemm_invariance.c).
 *
 * Overflow: vpmaddubsw pair sums of levels <= 63 with int8 quants stay within 2 * 63 * 128;
 * every product with a scale is widened by vpmaddwd; |T|, |S|, |M| < 2^31 (k8.c).
 */
#include <string.h>

#include "quant/simd_avx2.h"

#define K1_INLINE static inline __attribute__((always_inline))

/* Lane r of the result = the sum of the eight int32 lanes of v[r]. */
K1_INLINE __m256i k1_reduce8(const __m256i v[8]) {
    const __m256i a01 = _mm256_hadd_epi32(v[0], v[1]), a23 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i a45 = _mm256_hadd_epi32(v[4], v[5]), a67 = _mm256_hadd_epi32(v[6], v[7]);
    /* Per 128-bit half: (rows 0..3) and (rows 4..7), each the half's part of the row sums. */
    const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
    const __m256i lo = _mm256_permute2x128_si256(b0, b1, 0x20);
    const __m256i hi = _mm256_permute2x128_si256(b0, b1, 0x31);
    return _mm256_add_epi32(lo, hi);
}

/* Lanes 0..rows-1 to c[0..rows-1]. */
K1_INLINE void k1_store(__m256 acc, float *c, int rows) {
    if (rows == 8) {
        _mm256_storeu_ps(c, acc);
        return;
    }
    float v[8];
    _mm256_storeu_ps(v, acc);
    memcpy(c, v, (size_t)rows * sizeof(float));
}

/* Prefetch of the bytes [p, p + n) spread over `steps` calls of k1_prefetch_step: the next
 * eight rows while these compute (too short a stream per row for the hardware prefetcher).
 * Prefetching past the matrix is harmless: prefetches never fault. */
typedef struct k1_prefetch {
    const char *p, *end;
    size_t per_step; /* bytes per step, whole cache lines */
} k1_prefetch;

K1_INLINE void k1_prefetch_begin(k1_prefetch *pf, const char *p, size_t n, int64_t steps) {
    pf->p = p;
    pf->end = p + n;
    pf->per_step = ((n + 63) / 64 + (size_t)steps - 1) / (size_t)steps * 64;
}

K1_INLINE void k1_prefetch_step(k1_prefetch *pf) {
    const char *stop = pf->p + pf->per_step < pf->end ? pf->p + pf->per_step : pf->end;
    for (const char *q = pf->p; q < stop; q += 64) {
        _mm_prefetch(q, _MM_HINT_T0);
    }
    pf->p = stop;
}

/* ---- Q6_K ---- */

/* The activation terms of one super-block for Q6_K: bsums in the order of k1_q6_scales'
 * words (even sub-blocks, then odd ones). */
K1_INLINE __m256i k1_q6_bsums(const ts_block_q8_k *y) {
    const __m256i order = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                           1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    /* Per half: bsums 0..7 -> (0 2 4 6 1 3 5 7); then quadwords (0 2 1 3) make the even
     * sub-blocks the low half. */
    const __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)y->bsums), order);
    return _mm256_permute4x64_epi64(v, 0xD8);
}

/* The 16 int8 scales as int16, even sub-blocks in the low half (word k = scale 2k), odd ones
 * in the high half (word k = scale 2k + 1). */
K1_INLINE __m256i k1_q6_scales(const int8_t *sc) {
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)sc), order));
}

/* T of one row's super-block against one activation super-block, as eight int32 lanes to be
 * summed. Element 128 h + 32 s + l takes ql byte 64 h + 32 (s & 1) + l (low nibble for s < 2),
 * bits 2s, 2s+1 of qh byte 32 h + l; its sub-block is 8 h + 2 s + (l >= 16), so the product
 * vector of (h, s) wants scale 2k in its low half and 2k + 1 in its high half, k = 4 h + s. */
K1_INLINE __m256i k1_q6_row(const ts_block_q6_k *b, const int8_t *y, __m256i ybs) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
    const __m256i sc = k1_q6_scales(b->scales);
    __m256i sum = _mm256_slli_epi32(_mm256_madd_epi16(sc, ybs), 5);
    sum = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
    for (int h = 0; h < 2; h++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i bb = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(a, m4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
        q[1] = _mm256_or_si256(_mm256_and_si256(bb, m4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                               _mm256_and_si256(qh, top));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bb, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), top));
        for (int s = 0; s < 4; s++) {
            const int k = 4 * h + s;
            const __m256i idx = _mm256_set1_epi16((short)(0x0100 + 0x0202 * k));
            const __m256i p = _mm256_maddubs_epi16(
                q[s], _mm256_loadu_si256((const __m256i *)(y + 128 * h + 32 * s)));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, idx)));
        }
    }
    return sum;
}

/* fma((float)T, d_w * d_a, acc), per lane (avx2/k8.c's q6_k_fold). */
K1_INLINE __m256 k1_q6_fold(__m256 acc, __m256i t, __m256 d, float da) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(d, _mm256_set1_ps(da)), acc);
}

void ts_q_gemv_q6_k_avx2(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                         const void *a) {
    const int64_t nb = k / TS_QK_K;
    const ts_block_q8_k *y = a;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;
        const ts_block_q6_k *x[8];
        for (int r = 0; r < 8; r++) {
            x[r] = (const ts_block_q6_k *)((const char *)w +
                                           (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw);
        }
        /* The next eight rows, spread over this group's super-blocks. */
        k1_prefetch pf;
        k1_prefetch_begin(&pf, (const char *)w + (size_t)(r0 + 8) * ldw, 8 * ldw, nb);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            k1_prefetch_step(&pf);
            const __m256i ybs = k1_q6_bsums(&y[i]);
            __m256i t[8];
            uint16_t dh[8];
            for (int r = 0; r < 8; r++) {
                t[r] = k1_q6_row(&x[r][i], y[i].qs, ybs);
                dh[r] = x[r][i].d;
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
            acc = k1_q6_fold(acc, k1_reduce8(t), d, y[i].d);
        }
        k1_store(acc, c + r0, rows);
    }
}

/* ---- Q4_K and Q5_K ---- */

/* Scale and min bytes from a Q4_K/Q5_K header (its first 16 bytes: d, dmin, the 12 scale bytes
 * as words u0, u1, u2; quant_internal.h's ts_k4_scale_min): bytes 0..7 the scales of sub-blocks
 * 0..7, bytes 8..15 their mins. Scales 0..3 are the low six bits of u0's bytes, mins 0..3 those
 * of u1; scales 4..7 the low nibbles of u2 with u0's top two bits above them, mins 4..7 the high
 * nibbles of u2 with u1's top bits. */
K1_INLINE __m128i k1_k4_bytes(const void *block) {
    const __m128i v = _mm_loadu_si128((const __m128i *)block); /* (d dmin, u0, u1, u2) */
    const __m128i a = _mm_shuffle_epi32(v, 0xF9);              /* (u0, u1, u2, u2) */
    const __m128i b = _mm_shuffle_epi32(v, 0x0F);              /* (u2, u2, d dmin, d dmin) */
    const __m128i low = _mm_and_si128(a, _mm_set1_epi8(0x3F)); /* (sc 0..3, m 0..3, -, -) */
    const __m128i nib =
        _mm_and_si128(_mm_srlv_epi32(b, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0F));
    const __m128i high = _mm_or_si128(
        nib, _mm_and_si128(_mm_srli_epi32(a, 2), _mm_set1_epi8(0x30))); /* (sc 4..7, m 4..7) */
    return _mm_unpacklo_epi32(low, high); /* (sc 0..3, sc 4..7, m 0..3, m 4..7) */
}

/* The activation's eight sub-block sums (bsums[2s] + bsums[2s+1], |.| <= 4096) as int16. */
K1_INLINE __m128i k1_k4_bsums(const ts_block_q8_k *y) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                          _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
}

/* Bit `bit` of every byte of v moved to bit 4 (16-bit shifts; the mask drops what crosses a
 * byte). */
K1_INLINE __m256i k1_bit_to_4(__m256i v, int bit) {
    const __m256i b4 = _mm256_set1_epi8(0x10);
    if (bit <= 4) {
        return _mm256_and_si256(_mm256_slli_epi16(v, 4 - bit), b4);
    }
    return _mm256_and_si256(_mm256_srli_epi16(v, bit - 4), b4);
}

/* S (as eight int32 lanes to be summed, into *s) and M (four, into *m) of one row's super-block
 * at `block` (Q4_K, or Q5_K when qh is not NULL) with quants qs. Element 64 c + l is the low
 * nibble of qs[32 c + l] (sub-block 2c), element 64 c + 32 + l its high nibble (2c + 1); Q5_K
 * adds bit 2c (2c + 1) of qh[l] as the fifth bit. */
K1_INLINE void k1_k4_row(const void *block, const uint8_t *qs, const uint8_t *qh, const int8_t *y,
                         __m128i ybs, __m256i *s, __m128i *m) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m128i bytes = k1_k4_bytes(block);
    *m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8)), ybs);
    const __m256i hb =
        qh != NULL ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i p[8];
    for (int c = 0; c < 4; c++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        if (qh != NULL) {
            lo = _mm256_or_si256(lo, k1_bit_to_4(hb, 2 * c));
            hi = _mm256_or_si256(hi, k1_bit_to_4(hb, 2 * c + 1));
        }
        p[2 * c] = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y + 64 * c)));
        p[2 * c + 1] =
            _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 64 * c + 32)));
    }
    /* Each sub-block's sixteen pair sums to four (per half: two) in int16, sub-blocks 4t..4t+3
     * side by side: every word is the sum of four pair sums (<= 4 * 2 * 31 * 128 = 31744). */
    const __m256i q03 =
        _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
    const __m256i q47 =
        _mm256_hadd_epi16(_mm256_hadd_epi16(p[4], p[5]), _mm256_hadd_epi16(p[6], p[7]));
    /* Per half: scales (4t, 4t, 4t+1, 4t+1, .., 4t+3, 4t+3) zero-extended to int16. */
    const __m256i sb = _mm256_broadcastsi128_si256(bytes);
    const __m256i i03 = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 0,
                                         -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1);
    const __m256i i47 = _mm256_add_epi8(i03, _mm256_set1_epi16(4));
    *s = _mm256_add_epi32(_mm256_madd_epi16(q03, _mm256_shuffle_epi8(sb, i03)),
                          _mm256_madd_epi16(q47, _mm256_shuffle_epi8(sb, i47)));
}

/* The low (high) 16 bits of each lane as f16 -> float, lanes in order. */
K1_INLINE __m256 k1_f16_lanes(__m256i v, bool high) {
    const __m256i h =
        high ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
}

/* acc + fmsub((float)S, d_w * d_a, (float)M * (dmin_w * d_a)), per lane (k8.c's q4_k_fold). */
K1_INLINE __m256 k1_k4_fold(__m256 acc, __m256i s, __m256i m, __m256 d, __m256 dmin, float da) {
    const __m256 dav = _mm256_set1_ps(da);
    const __m256 mt = _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dav));
    return _mm256_add_ps(acc, _mm256_fmsub_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, dav), mt));
}

/* Q4_K (q5 false) or Q5_K rows against one activation row. Q4_K's is not used: measured on
 * AVX2 (Zen), k8.c's rows-in-lanes one-row path is as fast for it (1.5% faster in cache). */
K1_INLINE void k1_k4_gemv(bool q5, int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                          const void *a) {
    const int64_t nb = k / TS_QK_K;
    const size_t wbs = q5 ? sizeof(ts_block_q5_k) : sizeof(ts_block_q4_k);
    const ts_block_q8_k *y = a;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;
        const char *x[8];
        for (int r = 0; r < 8; r++) {
            x[r] = (const char *)w + (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw;
        }
        k1_prefetch pf;
        k1_prefetch_begin(&pf, (const char *)w + (size_t)(r0 + 8) * ldw, 8 * ldw, nb);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            k1_prefetch_step(&pf);
            const __m128i ybs = k1_k4_bsums(&y[i]);
            __m256i s[8], m[8];
            uint32_t dd[8];
            for (int r = 0; r < 8; r++) {
                const char *b = x[r] + (size_t)i * wbs;
                const uint8_t *qs =
                    q5 ? ((const ts_block_q5_k *)b)->qs : ((const ts_block_q4_k *)b)->qs;
                const uint8_t *qh = q5 ? ((const ts_block_q5_k *)b)->qh : NULL;
                __m128i mr;
                k1_k4_row(b, qs, qh, y[i].qs, ybs, &s[r], &mr);
                m[r] = _mm256_zextsi128_si256(mr);
                memcpy(&dd[r], b, sizeof dd[r]); /* d, dmin */
            }
            const __m256i dv = _mm256_loadu_si256((const __m256i *)dd);
            acc = k1_k4_fold(acc, k1_reduce8(s), k1_reduce8(m), k1_f16_lanes(dv, false),
                             k1_f16_lanes(dv, true), y[i].d);
        }
        k1_store(acc, c + r0, rows);
    }
}

void ts_q_gemv_q5_k_avx2(int64_t k, int64_t nr, float *c, const void *w, size_t ldw,
                         const void *a) {
    k1_k4_gemv(true, k, nr, c, w, ldw, a);
}
