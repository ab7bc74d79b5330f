/*
 * cpu_act_avx2.c — SiLU, tanh-GELU and their gated forms over contiguous f32 rows (AVX2 + FMA).
 *
 * Both activations are x * sigmoid(a(x)): SiLU with a = x, tanh-GELU with
 * a = 2 * sqrt(2/pi) * (x + 0.044715 x^3), since 0.5 (1 + tanh(z)) = sigmoid(2z). So one
 * vector exp (cpu_exp256) serves both: y = x / (1 + exp(-a)). exp clamps its argument to the
 * float range, so at the extremes 1 + exp(-a) is 1 or ~1e38, which gives the limits x and ~0
 * that the exact function approaches.
 *
 * Numerics: within a few ulp of the scalar expf-based forms in cpu_ops.c; the reference
 * backend comparison in tests/backends/test_ops.c bounds the difference.
 */
#include "backends/cpu/cpu_avx2.h"
#include "backends/cpu/cpu_internal.h"

/* x * sigmoid(a(x)) for 8 lanes. */
static inline __m256 act8(__m256 x, bool gelu) {
    __m256 a = x;
    if (gelu) {
        const __m256 x2 = _mm256_mul_ps(x, x);
        const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(x2, _mm256_set1_ps(0.044715f)), x, x);
        a = _mm256_mul_ps(inner, _mm256_set1_ps(2.0f * 0.7978845608028654f));
    }
    const __m256 e = cpu_exp256(_mm256_sub_ps(_mm256_setzero_ps(), a));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* out[i] = act(g[i]) * (u ? u[i] : 1) for i < n; the tail runs through a padded vector. */
void cpu_act_row_avx2(float *out, const float *g, const float *u, int64_t n, bool gelu) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = act8(_mm256_loadu_ps(g + i), gelu);
        if (u != NULL) {
            y = _mm256_mul_ps(y, _mm256_loadu_ps(u + i));
        }
        _mm256_storeu_ps(out + i, y);
    }
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0}, ty[8];
        for (int64_t k = i; k < n; k++) {
            tg[k - i] = g[k];
            tu[k - i] = u != NULL ? u[k] : 1.0f;
        }
        _mm256_storeu_ps(ty, _mm256_mul_ps(act8(_mm256_loadu_ps(tg), gelu), _mm256_loadu_ps(tu)));
        for (int64_t k = i; k < n; k++) {
            out[k] = ty[k - i];
        }
    }
}
