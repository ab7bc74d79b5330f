/*
 * cpu_avx512.h — vector helpers shared by the CPU backend's AVX-512 files (include only from
 * *_avx512.c, which are compiled with AVX-512 F/BW/VL/DQ and AVX2 + FMA enabled).
 */
#ifndef TS_BACKENDS_CPU_AVX512_H
#define TS_BACKENDS_CPU_AVX512_H

#include <immintrin.h>

#include "backends/cpu/cpu_avx2.h"

/* exp(x) for 16 lanes: cpu_exp256's method and constants (inputs clamped to
 * [CPU_EXP_LO, CPU_EXP_HI], degree-7 polynomial on |r| <= ln2/2), with 2^n applied by
 * scalef. n is an integer in [-126, 127], so the product is exact as in cpu_exp256 and both
 * give the same bits for the same input. */
static inline __m512 cpu_exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(CPU_EXP_LO)), _mm512_set1_ps(CPU_EXP_HI));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3333452301e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif /* TS_BACKENDS_CPU_AVX512_H */
