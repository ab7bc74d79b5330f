/*
 * cpu_act_avx512.c — SiLU, tanh-GELU, erf-GELU and their gated forms over contiguous f32 rows,
 * sixteen lanes at a time: cpu_act_avx2.c's operations per lane (cpu_exp512 gives cpu_exp256's
 * bits), so both levels give the same results.
 */
#include "backends/cpu/cpu_avx512.h"
#include "backends/cpu/cpu_internal.h"

/* x * sigmoid(a(x)) for 16 lanes (see cpu_act_avx2.c). */
static inline __m512 act16(__m512 x, bool gelu) {
    __m512 a = x;
    if (gelu) {
        const __m512 x2 = _mm512_mul_ps(x, x);
        const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(x2, _mm512_set1_ps(0.044715f)), x, x);
        a = _mm512_mul_ps(inner, _mm512_set1_ps(2.0f * 0.7978845608028654f));
    }
    const __m512 e = cpu_exp512(_mm512_sub_ps(_mm512_setzero_ps(), a));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* out[i] = act(g[i]) * (u ? u[i] : 1) for i < n; the tail through masked loads and stores. */
void cpu_act_row_avx512(float *out, const float *g, const float *u, int64_t n, bool gelu) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 y = act16(_mm512_maskz_loadu_ps(m, g + i), gelu);
        if (u != NULL) {
            y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i));
        }
        _mm512_mask_storeu_ps(out + i, m, y);
    }
}

/* The erf GELU of cpu_act_avx2.c (gelu_erf8), sixteen lanes with the same operations. */
static inline __m512 gelu_erf16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    const __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(z)));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    const __m512 e = cpu_exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)));
    const __m512 erf_a = _mm512_fnmadd_ps(p, e, one);
    const __m512 erf_z = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(erf_a), _mm512_and_si512(_mm512_castps_si512(z), sign)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, erf_z));
}

/* out[i] = gelu_erf(g[i]) * (u ? u[i] : 1) for i < n; the tail through masked loads/stores. */
void cpu_gelu_erf_row_avx512(float *out, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 y = gelu_erf16(_mm512_maskz_loadu_ps(m, g + i));
        if (u != NULL) {
            y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i));
        }
        _mm512_mask_storeu_ps(out + i, m, y);
    }
}
