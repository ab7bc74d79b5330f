/*
 * avx512/float.c — AVX-512 kernels of F32, F16 and BF16: dequantization (F16C, BF16 by
 * shifts; F32 uses the scalar one), dot products and 1x4 gemm tiles. The BF16 dot uses the
 * AVX512_BF16 pair dot-product instruction, which treats bf16 denormals as zero; the tests'
 * tolerance covers that.
 */
#include <string.h>

#include "quant/quant_internal.h"
#include "quant/simd_isa.h"

static inline __m512 load_f16x16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512 load_bf16x16(const uint16_t *p) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

void ts_q_to_float_f16_avx512(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, load_f16x16(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_f16_to_f32(h[i]);
    }
}

void ts_q_to_float_bf16_avx512(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, load_bf16x16(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_bf16_to_f32(h[i]);
    }
}

void ts_q_dot_f32_avx512(int64_t n, float *result, const void *x, const void *y) {
    const float *a = x, *b = y;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    *result = sum;
}

void ts_q_dot_f16_avx512(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(load_f16x16(a + i), load_f16x16(b + i), acc0);
        acc1 = _mm512_fmadd_ps(load_f16x16(a + i + 16), load_f16x16(b + i + 16), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < n; i++) {
        sum += ts_f16_to_f32(a[i]) * ts_f16_to_f32(b[i]);
    }
    *result = sum;
}

void ts_q_dot_bf16_avx512(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i va = _mm512_loadu_si512((const void *)(a + i));
        __m512i vb = _mm512_loadu_si512((const void *)(b + i));
        acc = _mm512_dpbf16_ps(acc, (__m512bh)va, (__m512bh)vb);
    }
    float sum = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) {
        sum += ts_bf16_to_f32(a[i]) * ts_bf16_to_f32(b[i]);
    }
    *result = sum;
}

/*
 * gemm tiles: one weight row against up to 4 activation rows. Each column repeats the
 * operations of the dot product above in its order (two accumulators over 32 elements, then
 * a scalar tail), so gemm equals vec_dot bit for bit and results do not depend on how
 * tokens are batched. The tile is written once over a table of the element type; the tiles
 * of F32 and F16 are the functions ts_q_row_tile_gemm calls through its own table.
 */
typedef struct float_type {
    size_t esize;                    /* bytes per element */
    __m512 (*load16)(const void *p); /* the sixteen elements at p, as floats */
    float (*load1)(const void *p);   /* the element at p, as a float */
} float_type;

static inline __attribute__((always_inline)) __m512 load16_f32(const void *p) {
    return _mm512_loadu_ps(p);
}

static inline __attribute__((always_inline)) __m512 load16_f16(const void *p) {
    return load_f16x16(p);
}

static inline __attribute__((always_inline)) float load1_f32(const void *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) float load1_f16(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return ts_f16_to_f32(h);
}

static const float_type k_f32 = {.esize = sizeof(float), .load16 = load16_f32, .load1 = load1_f32};
static const float_type k_f16 = {
    .esize = sizeof(uint16_t), .load16 = load16_f16, .load1 = load1_f16};

/* out[j] = dot(w, a[j]) over k elements for j < nc <= 4. */
static inline __attribute__((always_inline)) void float_tile(const float_type *t, int64_t k,
                                                             const void *w, const void *const *a,
                                                             int nc, float *out) {
    const char *wb = w;
    __m512 acc0[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                      _mm512_setzero_ps()};
    __m512 acc1[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                      _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        const __m512 w0 = t->load16(wb + (size_t)i * t->esize);
        const __m512 w1 = t->load16(wb + (size_t)(i + 16) * t->esize);
        for (int j = 0; j < nc; j++) {
            const char *aj = a[j];
            acc0[j] = _mm512_fmadd_ps(w0, t->load16(aj + (size_t)i * t->esize), acc0[j]);
            acc1[j] = _mm512_fmadd_ps(w1, t->load16(aj + (size_t)(i + 16) * t->esize), acc1[j]);
        }
    }
    for (int j = 0; j < nc; j++) {
        const char *aj = a[j];
        float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
        for (int64_t e = i; e < k; e++) {
            s += t->load1(wb + (size_t)e * t->esize) * t->load1(aj + (size_t)e * t->esize);
        }
        out[j] = s;
    }
}

static void f32_tile(int64_t k, const void *w, const void *const *a, int nc, float *out) {
    float_tile(&k_f32, k, w, a, nc, out);
}

static void f16_tile(int64_t k, const void *w, const void *const *a, int nc, float *out) {
    float_tile(&k_f16, k, w, a, nc, out);
}

static const ts_q_row_tile k_f32_rows = {.kdiv = 1, .tile = f32_tile};
static const ts_q_row_tile k_f16_rows = {.kdiv = 1, .tile = f16_tile};

void ts_q_gemm_f32_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                          size_t ldw, const void *a, size_t lda) {
    ts_q_row_tile_gemm(&k_f32_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_f16_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                          size_t ldw, const void *a, size_t lda) {
    ts_q_row_tile_gemm(&k_f16_rows, k, nr, nc, c, ldc, w, ldw, a, lda);
}
