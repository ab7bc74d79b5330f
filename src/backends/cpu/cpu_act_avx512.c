/*
 * cpu_act_avx512.c — SiLU, tanh-GELU and their gated forms over contiguous f32 rows, sixteen
 * lanes at a time: cpu_act_avx2.c's operations per lane (cpu_exp512 gives cpu_exp256's bits), so
 * both levels give the same results.
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
