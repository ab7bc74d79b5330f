/*
 * simd_avx2.h — small AVX2 helpers shared by the AVX2 kernel files in quant/avx2/ (and usable
 * from the AVX-512 ones, which are compiled with a superset of the flags). Include only from
 * files compiled with -mavx2 -mfma -mf16c, or from the test build that emulates them
 * (simd_isa.h).
 *
 * The files in quant/avxvnni/ compile avx2/q32.c and avx2/k.c a second time with TS_AVXVNNI
 * defined (and -mavxvnni): the integer dot steps below (dot4_*, dot2_i16) then use vpdpbusd /
 * vpdpwssd, everything else is the same code.
 */
#ifndef TS_QUANT_SIMD_AVX2_H
#define TS_QUANT_SIMD_AVX2_H

#include "quant/quant_internal.h"
#include "quant/simd_isa.h"

#if defined(TS_AVXVNNI) && !defined(__AVXVNNI__) && !defined(TS_SIMD_EMULATE_AVXVNNI)
#error "TS_AVXVNNI kernels need -mavxvnni (cmake/layers.cmake gives it to quant/avxvnni/)"
#endif

/* f16 -> f32 with the F16C instruction (exact, same result as ts_fp16_load). */
static inline float fp16_hw(uint16_t h) {
    return _cvtsh_ss(h);
}

static inline float hsum_ps256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline int32_t hsum_epi32_256(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline float hmax_ps256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 32 packed nibbles (16 bytes) -> 32 bytes: low nibbles first, then high nibbles. */
static inline __m256i unpack_nibbles32(const uint8_t *qs) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    const __m128i lo = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F));
    return _mm256_set_m128i(hi, lo);
}

/* Sum of 32 signed bytes, exact: sum(y + 128) by vpsadbw, minus 32 * 128. */
static inline int32_t sum_i8x32(const int8_t *y) {
    const __m256i u =
        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    return _mm_cvtsi128_si32(t) - 32 * 128;
}

/*
 * The u8 x s8 dot step of the integer kernels: products of unsigned bytes u with signed bytes
 * y, summed four to a 32-bit lane, exactly. AVX2 sums each pair of products in int16
 * (vpmaddubsw, saturating), adds such sums of several steps in int16 (vpaddw) and widens them
 * to the int32 lanes at the end (vpmaddwd with ones): exact while every pair sum and running
 * int16 sum stays within int16, which each caller's header shows for its levels. AVX-VNNI
 * (TS_AVXVNNI) adds a lane's four products straight to its int32 (vpdpbusd), exact always; so
 * wherever the AVX2 sums are exact both give the same integers, and the kernels built on them
 * the same bits. A run of steps:
 *
 *     __m256i s = dot4_begin(acc);      AVX2: int16 sums from zero; VNNI: acc itself
 *     s = dot4_step(s, u, y);           one group of four elements per lane, as often as exact
 *     acc = dot4_end(acc, s);           acc + every product of the run
 *
 * s must have begun from the same acc it ends into.
 */
static inline __m256i dot4_begin(__m256i acc) {
#ifdef TS_AVXVNNI
    return acc;
#else
    (void)acc;
    return _mm256_setzero_si256();
#endif
}

static inline __m256i dot4_step(__m256i s, __m256i u, __m256i y) {
#ifdef TS_AVXVNNI
    return _mm256_dpbusd_avx_epi32(s, u, y);
#else
    return _mm256_add_epi16(s, _mm256_maddubs_epi16(u, y));
#endif
}

static inline __m256i dot4_end(__m256i acc, __m256i s) {
#ifdef TS_AVXVNNI
    (void)acc;
    return s;
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
#endif
}

/* A run of one step: acc + the products of u and y, four per lane. */
static inline __m256i dot4(__m256i acc, __m256i u, __m256i y) {
    return dot4_end(acc, dot4_step(dot4_begin(acc), u, y));
}

/* acc + per int32 lane the sum of its two int16 products a * b (vpmaddwd + vpaddd, or one
 * vpdpwssd with AVX-VNNI; both exact and wrapping alike). */
static inline __m256i dot2_i16(__m256i acc, __m256i a, __m256i b) {
#ifdef TS_AVXVNNI
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* Sum of products of 32 signed bytes with 32 signed bytes, as 8 int32 lanes. Neither
 * operand may hold -128 (the sign trick needs |x| <= 127). */
static inline __m256i dot_i8_i8(__m256i x, __m256i y) {
    return dot4(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 8 int8 -> 8 floats. */
static inline __m256 i8x8_to_ps(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

/* Rounds half away from zero exactly like roundf for |v| < 2^23. */
static inline __m256 round_away_ps256(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_sub_ps(v, t);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 absfrac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), frac);
    const __m256 up = _mm256_cmp_ps(absfrac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), sign);
    return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

/* Packs 4 x 8 int32 (each in -128..127) into 32 int8 in order. */
static inline __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b); /* lanes: a0 b0 | a1 b1 */
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd); /* a0 b0 c0 d0 | a1 b1 c1 d1 */
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Lane r of g[k] = bytes 4k..4k+3 of the 16 bytes at p[r] (eight rows' 16-byte pieces as a
 * 4 x 4 table of 32-bit words per register half): rows r and r + 4 share a register ([row r |
 * row r + 4]), then a 4 x 4 transpose of 32-bit words per half. The rows-in-lanes kernels
 * (avx2/q32.c, avx2/k8.c) build their registers from a matrix's rows with it. */
static inline void transpose8x4_epi32(const uint8_t *const *p, __m256i g[4]) {
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

/* Software prefetch of `rows` pieces of `span` bytes (the first at p, then every `ldw` bytes),
 * spread evenly over `steps` calls of prefetch_rows_step while the current work computes. The
 * gemm kernels read several weight rows side by side, a few cache lines of each: too short a
 * stream per row for the hardware prefetcher, so from DRAM the next rows are fetched this way.
 * Prefetching past the matrix is harmless (prefetches never fault). */
typedef struct prefetch_rows {
    const char *row; /* piece being fetched */
    size_t ldw, span, at, per_step;
    int64_t rows_left;
} prefetch_rows;

static inline void prefetch_rows_begin(prefetch_rows *pf, const char *p, size_t ldw, size_t span,
                                       int64_t rows, int64_t steps) {
    pf->row = p;
    pf->ldw = ldw;
    pf->span = span;
    pf->at = 0;
    pf->rows_left = rows;
    pf->per_step = ((size_t)rows * ((span + 63) / 64) + (size_t)steps - 1) / (size_t)steps;
}

static inline void prefetch_rows_step(prefetch_rows *pf) {
    for (size_t l = 0; l < pf->per_step && pf->rows_left > 0; l++) {
        _mm_prefetch(pf->row + pf->at, _MM_HINT_T0);
        pf->at += 64;
        if (pf->at >= pf->span) {
            pf->at = 0;
            pf->row += pf->ldw;
            pf->rows_left--;
        }
    }
}

#endif /* TS_QUANT_SIMD_AVX2_H */
