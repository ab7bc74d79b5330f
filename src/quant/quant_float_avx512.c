/*
 * quant_float_avx512.c — AVX-512 kernels of F32, F16 and BF16: conversions (bit-exact with
 * the scalar ones), dot products and 1x4 gemm tiles. The BF16 dot uses the AVX512_BF16
 * pair dot-product instruction, which treats bf16 denormals as zero; the tests' tolerance
 * covers that.
 */
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
 * tokens are batched.
 */
#define FLOAT_GEMM512(NAME, ELEM, LOAD, SCALAR)                                                    \
    static inline void NAME##_tile(int64_t k, const ELEM *w, const ELEM *const *a, int nc,         \
                                   float *out) {                                                   \
        __m512 acc0[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),           \
                          _mm512_setzero_ps()};                                                    \
        __m512 acc1[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),           \
                          _mm512_setzero_ps()};                                                    \
        int64_t i = 0;                                                                             \
        for (; i + 32 <= k; i += 32) {                                                             \
            const __m512 w0 = LOAD(w + i), w1 = LOAD(w + i + 16);                                  \
            for (int j = 0; j < nc; j++) {                                                         \
                acc0[j] = _mm512_fmadd_ps(w0, LOAD(a[j] + i), acc0[j]);                            \
                acc1[j] = _mm512_fmadd_ps(w1, LOAD(a[j] + i + 16), acc1[j]);                       \
            }                                                                                      \
        }                                                                                          \
        for (int j = 0; j < nc; j++) {                                                             \
            float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));                       \
            for (int64_t t = i; t < k; t++) {                                                      \
                s += SCALAR(w[t]) * SCALAR(a[j][t]);                                               \
            }                                                                                      \
            out[j] = s;                                                                            \
        }                                                                                          \
    }                                                                                              \
    TS_Q_ROW_TILE_GEMM(ts_q_gemm_##NAME##_avx512, NAME##_tile, ELEM, ELEM, 1)

static inline float f32_id(float v) {
    return v;
}

FLOAT_GEMM512(f32, float, _mm512_loadu_ps, f32_id)
FLOAT_GEMM512(f16, uint16_t, load_f16x16, ts_f16_to_f32)
