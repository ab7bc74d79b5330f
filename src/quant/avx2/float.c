/*
 * avx2/float.c — AVX2/FMA/F16C kernels of F32, F16 and BF16: conversions (bit-exact with the
 * scalar ones for all non-NaN inputs), dot products and gemm tiles (f32 accumulation with FMA;
 * equal to the double-accumulating reference within rounding).
 */
#include <stdlib.h>

#include "quant/simd_avx2.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

static inline __m256 load_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16x8(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

void ts_q_to_float_f16_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, load_f16x8(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_f16_to_f32(h[i]);
    }
}

void ts_q_from_float_f16_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(h + i), v);
    }
    for (; i < n; i++) {
        h[i] = ts_f32_to_f16(src[i]);
    }
}

void ts_q_to_float_bf16_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, load_bf16x8(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_bf16_to_f32(h[i]);
    }
}

void ts_q_from_float_bf16_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    int64_t i = 0;
    const __m256i bias = _mm256_set1_epi32(0x7FFF);
    const __m256i one = _mm256_set1_epi32(1);
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i + 8 * k));
            __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            __m256i rounded =
                _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, odd)), 16);
            /* NaN: keep the top half and set the quiet bit, as the scalar code does. */
            __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
            __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7F800000));
            __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
            r[k] = _mm256_blendv_epi8(rounded, quiet, nan);
        }
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xD8);
        _mm256_storeu_si256((__m256i *)(h + i), packed);
    }
    for (; i < n; i++) {
        h[i] = ts_f32_to_bf16(src[i]);
    }
}

void ts_q_dot_f32_avx2(int64_t n, float *result, const void *x, const void *y) {
    const float *a = x, *b = y;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    float sum = hsum_ps256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    *result = sum;
}

/* F16 weights against F32 activations (the type's vec_dot_type). */
void ts_q_dot_f16_avx2(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x;
    const float *b = y;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_f16x8(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load_f16x8(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    float sum = hsum_ps256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) {
        sum += ts_f16_to_f32(a[i]) * b[i];
    }
    *result = sum;
}

void ts_q_dot_bf16_avx2(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(load_bf16x8(a + i), load_bf16x8(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load_bf16x8(a + i + 8), load_bf16x8(b + i + 8), acc1);
    }
    float sum = hsum_ps256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) {
        sum += ts_bf16_to_f32(a[i]) * ts_bf16_to_f32(b[i]);
    }
    *result = sum;
}

/*
 * gemm tiles: two weight rows against three activation rows (float_gemm's main tile), or one
 * weight row against up to 4 (an odd last row, the last one or two columns); each 8-wide weight
 * vector is loaded (and for F16 / BF16 converted) once per three or four activations. Each
 * (row, column) element is
 * computed with the operations of the dot product above, in its order (two accumulators
 * over alternating 8-element chunks, one hsum, a scalar tail), so gemm equals vec_dot bit for
 * bit however rows and columns are batched (tests/quant/test_gemm_invariance.c).
 *
 * The tile is written once over a table of the element type (float_type: its size and how to
 * load eight elements or one as floats); each type's tile and gemm are the named functions at
 * the end, with the table a constant there.
 */
typedef struct float_type {
    size_t esize;                   /* bytes per weight element */
    __m256 (*load8)(const void *p); /* the eight weight elements at p, as floats */
    float (*load1)(const void *p);  /* the weight element at p, as a float */
    /* Activations are F32 for both types (vec_dot_type). */
} float_type;

ALWAYS_INLINE __m256 load8_f32(const void *p) {
    return _mm256_loadu_ps(p);
}

ALWAYS_INLINE float load1_f32(const void *p) {
    return *(const float *)p;
}

ALWAYS_INLINE __m256 load8_f16(const void *p) {
    return load_f16x8(p);
}

ALWAYS_INLINE float load1_f16(const void *p) {
    return ts_f16_to_f32(*(const uint16_t *)p);
}

ALWAYS_INLINE __m256 load8_bf16(const void *p) {
    return load_bf16x8(p);
}

ALWAYS_INLINE float load1_bf16(const void *p) {
    return ts_bf16_to_f32(*(const uint16_t *)p);
}

static const float_type k_f32 = {.esize = sizeof(float), .load8 = load8_f32, .load1 = load1_f32};
static const float_type k_f16 = {.esize = sizeof(uint16_t), .load8 = load8_f16, .load1 = load1_f16};
static const float_type k_bf16 = {
    .esize = sizeof(uint16_t), .load8 = load8_bf16, .load1 = load1_bf16};

/* out[j] = dot(w, a[j]) over k elements for j < nc <= 4. */
ALWAYS_INLINE void float_tile(const float_type *t, int64_t k, const void *w, const void *const *a,
                              int nc, float *out) {
    const char *wb = w;
    __m256 acc0[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    __m256 acc1[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        const __m256 w0 = t->load8(wb + (size_t)i * t->esize);
        const __m256 w1 = t->load8(wb + (size_t)(i + 8) * t->esize);
        for (int j = 0; j < nc; j++) {
            const char *aj = a[j];
            const float *af = (const float *)aj;
            acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(af + i), acc0[j]);
            acc1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(af + i + 8), acc1[j]);
        }
    }
    for (int j = 0; j < nc; j++) {
        const char *aj = a[j];
        float s = hsum_ps256(_mm256_add_ps(acc0[j], acc1[j]));
        for (int64_t e = i; e < k; e++) {
            s += t->load1(wb + (size_t)e * t->esize) * ((const float *)aj)[e];
        }
        out[j] = s;
    }
}

/* The 2 x 3 tile: weight rows w[0..1] against activation rows a[0..2] over elements i0 .. i1 - 1
 * (multiples of 16), continuing the sums in acc: acc[3 r + j] and acc[6 + 3 r + j] are element
 * (r, j)'s accumulators of the first and second eight of each sixteen elements, as the dot
 * product keeps them (acc0, acc1). Each weight vector is used three times and each activation
 * vector twice; the two halves go in turn, so twelve accumulators, two weight vectors and one
 * activation vector fill fifteen of the sixteen registers. */
ALWAYS_INLINE void float_tile2x3(const float_type *t, int64_t i0, int64_t i1, const char *const *w,
                                 const float *const *a, __m256 *acc) {
    __m256 lo[6], hi[6];
    for (int e = 0; e < 6; e++) {
        lo[e] = acc[e];
        hi[e] = acc[6 + e];
    }
    for (int64_t i = i0; i < i1; i += 16) {
        const __m256 wl0 = t->load8(w[0] + (size_t)i * t->esize);
        const __m256 wl1 = t->load8(w[1] + (size_t)i * t->esize);
        for (int j = 0; j < 3; j++) {
            __m256 av = _mm256_loadu_ps(a[j] + i);
            /* One load per activation vector: folded into both FMAs, it would be two, and the
             * loads, not the FMAs, would set the pace. */
            __asm__("" : "+x"(av));
            lo[j] = _mm256_fmadd_ps(wl0, av, lo[j]);
            lo[3 + j] = _mm256_fmadd_ps(wl1, av, lo[3 + j]);
        }
        const __m256 wh0 = t->load8(w[0] + (size_t)(i + 8) * t->esize);
        const __m256 wh1 = t->load8(w[1] + (size_t)(i + 8) * t->esize);
        for (int j = 0; j < 3; j++) {
            __m256 av = _mm256_loadu_ps(a[j] + i + 8);
            __asm__("" : "+x"(av));
            hi[j] = _mm256_fmadd_ps(wh0, av, hi[j]);
            hi[3 + j] = _mm256_fmadd_ps(wh1, av, hi[3 + j]);
        }
    }
    for (int e = 0; e < 6; e++) {
        acc[e] = lo[e];
        acc[6 + e] = hi[e];
    }
}

enum {
    FLOAT_RB = 16,  /* weight rows per block */
    FLOAT_KC = 512, /* elements per pass: a block's part of the weights (16 KiB as F32) and
                       three activation rows' part (6 KiB) stay in L1 */
};

/* c = w a^T for F32 activation rows. Per block of FLOAT_RB weight rows and group of three
 * activation rows, the k dimension goes in passes of FLOAT_KC elements, each pass running
 * every pair of the block's rows over the group while both sit in L1; the tiles' sums wait in
 * `acc` (3 KiB) between passes, so each element's operations are the dot product's in its
 * order. The rows and columns the 2 x 3 tile leaves (an odd last row, one or two last columns)
 * take the 1 x 4 tile, which computes the same. */
ALWAYS_INLINE void float_gemm(const float_type *t, int64_t k, int64_t nr, int64_t nc, float *c,
                              size_t ldc, const void *w, size_t ldw, const float *a, size_t lda) {
    const int64_t nr2 = nr / 2 * 2, nc3 = nc / 3 * 3, k16 = k / 16 * 16;
    __m256 acc[FLOAT_RB / 2][12];
#define C_AT(r, j) (*((float *)((char *)c + (size_t)(j)*ldc) + (r)))
#define A_ROW(j)   ((const float *)((const char *)a + (size_t)(j)*lda))
#define W_ROW(r)   ((const char *)w + (size_t)(r)*ldw)
    for (int64_t r0 = 0; r0 < nr2; r0 += FLOAT_RB) {
        const int64_t r1 = r0 + FLOAT_RB < nr2 ? r0 + FLOAT_RB : nr2;
        for (int64_t j = 0; j < nc3; j += 3) {
            const float *ap[3] = {A_ROW(j), A_ROW(j + 1), A_ROW(j + 2)};
            for (int64_t r = r0; r < r1; r += 2) {
                for (int e = 0; e < 12; e++) {
                    acc[(r - r0) / 2][e] = _mm256_setzero_ps();
                }
            }
            for (int64_t i0 = 0; i0 < k16; i0 += FLOAT_KC) {
                const int64_t i1 = i0 + FLOAT_KC < k16 ? i0 + FLOAT_KC : k16;
                for (int64_t r = r0; r < r1; r += 2) {
                    const char *wp[2] = {W_ROW(r), W_ROW(r + 1)};
                    float_tile2x3(t, i0, i1, wp, ap, acc[(r - r0) / 2]);
                }
            }
            for (int64_t r = r0; r < r1; r += 2) {
                const __m256 *ac = acc[(r - r0) / 2];
                for (int e = 0; e < 6; e++) {
                    const int64_t rr = r + e / 3;
                    const float *aj = ap[e % 3];
                    float s = hsum_ps256(_mm256_add_ps(ac[e], ac[6 + e]));
                    for (int64_t i = k16; i < k; i++) {
                        s += t->load1(W_ROW(rr) + (size_t)i * t->esize) * aj[i];
                    }
                    C_AT(rr, j + e % 3) = s;
                }
            }
        }
    }
    /* What is left: the last row against the tiled columns, then every row against the last
     * one or two columns. */
    for (int64_t r = nr2; r < nr; r++) {
        for (int64_t j0 = 0; j0 < nc3; j0 += 4) {
            const int cols = nc3 - j0 < 4 ? (int)(nc3 - j0) : 4;
            const void *ap[4];
            float out[4];
            for (int jj = 0; jj < cols; jj++) {
                ap[jj] = A_ROW(j0 + jj);
            }
            float_tile(t, k, W_ROW(r), ap, cols, out);
            for (int jj = 0; jj < cols; jj++) {
                C_AT(r, j0 + jj) = out[jj];
            }
        }
    }
    if (nc3 < nc) {
        const int cols = (int)(nc - nc3);
        const void *ap[2] = {A_ROW(nc3), A_ROW(nc - 1)};
        for (int64_t r = 0; r < nr; r++) {
            float out[2];
            float_tile(t, k, W_ROW(r), ap, cols, out);
            for (int jj = 0; jj < cols; jj++) {
                C_AT(r, nc3 + jj) = out[jj];
            }
        }
    }
#undef C_AT
#undef A_ROW
#undef W_ROW
}

void ts_q_gemm_f32_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                        size_t ldw, const void *a, size_t lda) {
    float_gemm(&k_f32, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_f16_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                        size_t ldw, const void *a, size_t lda) {
    float_gemm(&k_f16, k, nr, nc, c, ldc, w, ldw, a, lda);
}

/* BF16 weights against BF16 activations (the type's vec_dot_type). The activation rows are
 * widened to f32 (exactly) once per group of columns, then the F32-activation tiles run on them:
 * each element gets ts_q_dot_bf16_avx2's operations in its order, and each weight vector is
 * widened once per three columns instead of every product paying for both conversions (a
 * verification step of 5 rows on Gemma 3's BF16 form spent half its time in the dot). Groups
 * of columns whose widened rows fit BF16_STACK floats share a pass over the weights; rows longer
 * than a six-column group allows are widened into the heap, and without memory the dot loop
 * runs (the same bits). */
enum { BF16_STACK = 16384 };

void ts_q_gemm_bf16_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    float stack[BF16_STACK] __attribute__((aligned(32)));
    int64_t group = k > 0 && k <= BF16_STACK / 6 ? (BF16_STACK / k) / 6 * 6 : 6;
    float *af = stack;
    if (group * k > BF16_STACK) {
        af = malloc((size_t)group * (size_t)k * sizeof(float));
    }
    if (af == NULL) {
        for (int64_t r = 0; r < nr; r++) {
            for (int64_t j = 0; j < nc; j++) {
                ts_q_dot_bf16_avx2(k, (float *)((char *)c + (size_t)j * ldc) + r,
                                   (const char *)w + (size_t)r * ldw,
                                   (const char *)a + (size_t)j * lda);
            }
        }
        return;
    }
    for (int64_t j0 = 0; j0 < nc; j0 += group) {
        const int64_t n = nc - j0 < group ? nc - j0 : group;
        for (int64_t j = 0; j < n; j++) {
            ts_q_to_float_bf16_avx2((const char *)a + (size_t)(j0 + j) * lda, af + j * k, k);
        }
        float_gemm(&k_bf16, k, nr, n, (float *)((char *)c + (size_t)j0 * ldc), ldc, w, ldw, af,
                   (size_t)k * sizeof(float));
    }
    if (af != stack) {
        free(af);
    }
}
