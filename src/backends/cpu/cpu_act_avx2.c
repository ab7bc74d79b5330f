/*
 * cpu_act_avx2.c — SiLU, tanh-GELU and their gated forms, RMS norm and the rotation of RoPE over
 * contiguous f32 rows (AVX2 + FMA).
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

/* 0.5 x (1 + erf(x / sqrt 2)) for 8 lanes (the erf GELU of BERT), erf by Abramowitz and Stegun
 * 7.1.26: erf(a) = 1 - t (c1 + t (c2 + t (c3 + t (c4 + t c5)))) exp(-a^2), t = 1 / (1 + p a) for
 * a >= 0, |error| <= 1.5e-7, odd in a; exp(-a^2) underflows to 0 where erf is +-1 in f32. */
static inline __m256 gelu_erf8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    const __m256 a = _mm256_andnot_ps(sign, z);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    const __m256 e = cpu_exp256(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
    const __m256 erf_a = _mm256_fnmadd_ps(p, e, one);
    const __m256 erf_z = _mm256_or_ps(erf_a, _mm256_and_ps(z, sign));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, erf_z));
}

/* out[i] = gelu_erf(g[i]) * (u ? u[i] : 1) for i < n; the tail through a padded vector. */
void cpu_gelu_erf_row_avx2(float *out, const float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = gelu_erf8(_mm256_loadu_ps(g + i));
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
        _mm256_storeu_ps(ty, _mm256_mul_ps(gelu_erf8(_mm256_loadu_ps(tg)), _mm256_loadu_ps(tu)));
        for (int64_t k = i; k < n; k++) {
            out[k] = ty[k - i];
        }
    }
}

/* sum of x[i]^2 over i < n, in double (as the scalar norm): four double lanes per product
 * vector, two accumulators; the order differs from the scalar loop's. */
double cpu_sumsq_row_avx2(const float *x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        const __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    double v[4];
    _mm256_storeu_pd(v, _mm256_add_pd(a0, a1));
    double s = (v[0] + v[1]) + (v[2] + v[3]);
    for (; i < n; i++) {
        s += (double)x[i] * x[i];
    }
    return s;
}

/* out[i] = x[i] * inv * (w ? w[i] : 1): the scalar norm's operations, element by element. */
void cpu_scale_row_avx2(float *out, const float *x, float inv, const float *w, int64_t n) {
    const __m256 iv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), iv);
        if (w != NULL) {
            y = _mm256_mul_ps(y, _mm256_loadu_ps(w + i));
        }
        _mm256_storeu_ps(out + i, y);
    }
    for (; i < n; i++) {
        float y = x[i] * inv;
        out[i] = w != NULL ? y * w[i] : y;
    }
}

/* RoPE on adjacent pairs (d = 2i, 2i + 1) of a contiguous row, the first 2 * half elements:
 * out[2i] = x0 c_i - x1 s_i, out[2i + 1] = x0 s_i + x1 c_i with the scalar code's roundings
 * (two products, one add; no fused multiply-add). cs2 / sn2 hold c_i, s_i twice each, sn2 with
 * the first of each pair negated. */
void cpu_rope_pairs_avx2(float *out, const float *x, const float *cs2, const float *sn2,
                         int64_t half) {
    int64_t d = 0;
    for (; d + 8 <= 2 * half; d += 8) {
        const __m256 v = _mm256_loadu_ps(x + d);
        const __m256 sw = _mm256_permute_ps(v, 0xB1); /* (x1, x0) in each pair */
        const __m256 p = _mm256_mul_ps(v, _mm256_loadu_ps(cs2 + d));
        const __m256 q = _mm256_mul_ps(sw, _mm256_loadu_ps(sn2 + d));
        _mm256_storeu_ps(out + d, _mm256_add_ps(p, q));
    }
    for (; d < 2 * half; d += 2) {
        const float x0 = x[d], x1 = x[d + 1], c = cs2[d], s = sn2[d + 1];
        out[d] = x0 * c - x1 * s;
        out[d + 1] = x0 * s + x1 * c;
    }
}

/* RoPE on halves (d = i, i + half; NeoX) of a contiguous row. */
void cpu_rope_halves_avx2(float *out, const float *x, const float *cs, const float *sn,
                          int64_t half) {
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
        const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(out + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(out + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
    for (; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        out[i] = x0 * cs[i] - x1 * sn[i];
        out[i + half] = x0 * sn[i] + x1 * cs[i];
    }
}
