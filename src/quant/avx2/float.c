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

/*
 * Dot products: one 8-lane accumulator over the 8-element chunks in order, its horizontal
 * sum, then the scalar tail. The gemm below computes every (row, column) element with these
 * operations in this order, so gemm equals vec_dot bit for bit however rows and columns are
 * batched (tests/quant/test_gemm_invariance.c). One chain suits the gemm, whose tiles run
 * up to twelve of them side by side; a lone dot waits on each FMA's latency, but the backend
 * runs every product, a single activation row included, through the gemm.
 */
void ts_q_dot_f32_avx2(int64_t n, float *result, const void *x, const void *y) {
    const float *a = x, *b = y;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    }
    float sum = hsum_ps256(acc);
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    *result = sum;
}

/* F16 weights against F32 activations (the type's vec_dot_type). */
void ts_q_dot_f16_avx2(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x;
    const float *b = y;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc = _mm256_fmadd_ps(load_f16x8(a + i), _mm256_loadu_ps(b + i), acc);
    }
    float sum = hsum_ps256(acc);
    for (; i < n; i++) {
        sum += ts_f16_to_f32(a[i]) * b[i];
    }
    *result = sum;
}

void ts_q_dot_bf16_avx2(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc = _mm256_fmadd_ps(load_bf16x8(a + i), load_bf16x8(b + i), acc);
    }
    float sum = hsum_ps256(acc);
    for (; i < n; i++) {
        sum += ts_bf16_to_f32(a[i]) * ts_bf16_to_f32(b[i]);
    }
    *result = sum;
}

/*
 * gemm tiles: R weight rows against C activation rows over the whole k, each element one
 * accumulator as in the dot products above. Three rows by four columns is the main tile: per
 * eight elements three weight vectors are loaded (and for F16 / BF16 converted) and four
 * activation vectors, for twelve FMAs; twelve accumulators, three weight vectors and one
 * activation vector fill the sixteen registers. Against two rows by six columns (two weight
 * and six activation loads for the same twelve FMAs) it measured 10-25% faster: six activation
 * rows of a 2048-element k do not fit L1, and the loads from L2 set the pace. The last one or
 * two columns take four rows at a time (decoding's single column among them), so that four or
 * eight chains run.
 *
 * The tile is written once over a table of the element type (float_type: its size and how to
 * load eight elements or one as floats); each type's gemm is a named function at the end, with
 * the table a constant there.
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

enum { TILE_R = 4, TILE_C = 4 }; /* the most rows and columns a tile takes */

/* c[j][r] = dot(weight row r, activation row j) for r < R, j < C (R <= TILE_R, C <= TILE_C,
 * R * C <= 12); R and C are constants where the tile is inlined. */
ALWAYS_INLINE void float_tile(const float_type *t, int R, int C, int64_t k, const char *w,
                              size_t ldw, const float *a, size_t lda, float *c, size_t ldc) {
    __m256 acc[TILE_R][TILE_C];
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < C; j++) {
            acc[r][j] = _mm256_setzero_ps();
        }
    }
    const int64_t k8 = k / 8 * 8;
    for (int64_t i = 0; i < k8; i += 8) {
        __m256 wv[TILE_R];
        for (int r = 0; r < R; r++) {
            wv[r] = t->load8(w + (size_t)r * ldw + (size_t)i * t->esize);
        }
        for (int j = 0; j < C; j++) {
            __m256 av = _mm256_loadu_ps((const float *)((const char *)a + (size_t)j * lda) + i);
            /* One load per activation vector: folded into each row's FMA, it would be R
             * loads, and the loads, not the FMAs, would set the pace. */
            __asm__("" : "+x"(av));
            for (int r = 0; r < R; r++) {
                acc[r][j] = _mm256_fmadd_ps(wv[r], av, acc[r][j]);
            }
        }
    }
    for (int j = 0; j < C; j++) {
        const float *aj = (const float *)((const char *)a + (size_t)j * lda);
        float *cj = (float *)((char *)c + (size_t)j * ldc);
        for (int r = 0; r < R; r++) {
            float s = hsum_ps256(acc[r][j]);
            for (int64_t i = k8; i < k; i++) {
                s += t->load1(w + (size_t)r * ldw + (size_t)i * t->esize) * aj[i];
            }
            cj[r] = s;
        }
    }
}

/* float_tile with R and C made constants: R <= 4 for C <= 2, R <= 3 for C <= 4. */
ALWAYS_INLINE void float_tile_rc(const float_type *t, int R, int C, int64_t k, const char *w,
                                 size_t ldw, const float *a, size_t lda, float *c, size_t ldc) {
#define TILE(r, cc)                                                                                \
    case (cc)*8 + (r):                                                                             \
        float_tile(t, r, cc, k, w, ldw, a, lda, c, ldc);                                           \
        break
    switch (C * 8 + R) {
        TILE(1, 1);
        TILE(2, 1);
        TILE(3, 1);
        TILE(4, 1);
        TILE(1, 2);
        TILE(2, 2);
        TILE(3, 2);
        TILE(4, 2);
        TILE(1, 3);
        TILE(2, 3);
        TILE(3, 3);
        TILE(1, 4);
        TILE(2, 4);
    default:
        float_tile(t, 3, 4, k, w, ldw, a, lda, c, ldc);
        break;
    }
#undef TILE
}

/* Weight rows per block (five tiles of three): a block's rows stay in L2 while every group of
 * columns passes over them. */
enum { FLOAT_RB = 15 };

/* c = w a^T for F32 activation rows: per block of FLOAT_RB weight rows, per group of four
 * activation rows, the block's rows in threes (fours for the last one or two columns). */
ALWAYS_INLINE void float_gemm(const float_type *t, int64_t k, int64_t nr, int64_t nc, float *c,
                              size_t ldc, const void *w, size_t ldw, const float *a, size_t lda) {
    for (int64_t r0 = 0; r0 < nr; r0 += FLOAT_RB) {
        const int64_t r1 = r0 + FLOAT_RB < nr ? r0 + FLOAT_RB : nr;
        for (int64_t j = 0; j < nc; j += TILE_C) {
            const int cols = nc - j < TILE_C ? (int)(nc - j) : TILE_C;
            const int step = cols <= 2 ? 4 : 3;
            for (int64_t r = r0; r < r1; r += step) {
                const int rows = r1 - r < step ? (int)(r1 - r) : step;
                float_tile_rc(t, rows, cols, k, (const char *)w + (size_t)r * ldw, ldw,
                              (const float *)((const char *)a + (size_t)j * lda), lda,
                              (float *)((char *)c + (size_t)j * ldc) + r, ldc);
            }
        }
    }
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
 * widened to f32 (exactly) once per call, up to BF16_COLS of them at a time, then the
 * F32-activation tiles run on them: each element gets ts_q_dot_bf16_avx2's operations in its
 * order, and each weight vector is widened once per four columns instead of every product
 * paying for both conversions. Widened rows that fit BF16_STACK floats stay on the stack, more
 * go to the heap, and without memory the dot loop runs (the same bits). */
enum { BF16_STACK = 16384, BF16_COLS = 64 };

void ts_q_gemm_bf16_avx2(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                         size_t ldw, const void *a, size_t lda) {
    float stack[BF16_STACK] __attribute__((aligned(32)));
    const int64_t group = nc < BF16_COLS ? nc : BF16_COLS;
    float *af = group * k <= BF16_STACK ? stack : malloc((size_t)group * (size_t)k * sizeof(float));
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
