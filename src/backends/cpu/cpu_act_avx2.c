/*
 * cpu_act_avx2.c — SiLU, tanh-GELU and their gated forms over contiguous f32 rows (AVX2 + FMA).
 *
 * Both activations are x * sigmoid(a(x)): SiLU with a = x, tanh-GELU with
 * a = 2 * sqrt(2/pi) * (x + 0.044715 x^3), since 0.5 (1 + tanh(z)) = sigmoid(2z). So one
 * vector exp serves both: y = x / (1 + exp(-a)).
 *
 * exp: x is clamped to [-87.3, 88.7] (where expf neither overflows nor goes subnormal),
 * split as x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so r is exact to a few ulp),
 * exp(r) by its degree-6 Taylor polynomial (error below 1 ulp of float on that interval), and
 * 2^n added to the exponent bits. At the clamp, 1 + exp(-a) is 1 or ~1e38, which gives the
 * limits x and ~0 that the exact function approaches.
 *
 * Numerics: within a few ulp of the scalar expf-based forms in cpu_ops.c; the reference
 * backend comparison in tests/backends/test_ops.c bounds the difference.
 */
#include <immintrin.h>

#include "backends/cpu/cpu_internal.h"

static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* n is in [-126, 128]: 2^n by the exponent bits, applied as two halves so that n = 128
     * (x near 88.7, exp(r) < 1) does not overflow the exponent field on the way. */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i h1 = _mm256_srai_epi32(ni, 1), h2 = _mm256_sub_epi32(ni, h1);
    const __m256 s1 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* x * sigmoid(a(x)) for 8 lanes. */
static inline __m256 act8(__m256 x, bool gelu) {
    __m256 a = x;
    if (gelu) {
        const __m256 x2 = _mm256_mul_ps(x, x);
        const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(x2, _mm256_set1_ps(0.044715f)), x, x);
        a = _mm256_mul_ps(inner, _mm256_set1_ps(2.0f * 0.7978845608028654f));
    }
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), a));
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
