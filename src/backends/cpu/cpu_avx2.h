/*
 * cpu_avx2.h — vector helpers shared by the CPU backend's AVX2 files (include only from
 * *_avx2.c, which are compiled with AVX2 and FMA enabled).
 */
#ifndef TS_BACKENDS_CPU_AVX2_H
#define TS_BACKENDS_CPU_AVX2_H

#include <immintrin.h>

/* The range of cpu_exp256: below CPU_EXP_LO expf is subnormal, above CPU_EXP_HI it
 * overflows; inputs are clamped to it. */
#define CPU_EXP_LO (-87.33654f)
#define CPU_EXP_HI 88.3762626647949f

/* exp(x) for 8 lanes, Cephes-style: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so
 * n ln2_hi is exact), a degree-7 polynomial for exp(r) (about 2 ulp), and 2^n through the
 * exponent field (n in [-126, 127] after the clamp, so 2^n is a normal float). */
static inline __m256 cpu_exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(CPU_EXP_LO)), _mm256_set1_ps(CPU_EXP_HI));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3333452301e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#endif /* TS_BACKENDS_CPU_AVX2_H */
