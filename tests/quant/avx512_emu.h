/*
 * avx512_emu.h — force-included (-include) into the test-only emulated build of the
 * AVX-512 kernel files (src/quant: *_avx512.c and the files in avx512/): the Intel
 * intrinsics they use, implemented portably by SIMDe (libsimde-dev), and _emu names for the
 * functions they export (avx512_emu_rename.h).
 *
 * The kernel files are compiled unchanged, without any -mavx512 flag; src/quant/simd_isa.h
 * sees TS_SIMD_EMULATE and skips <immintrin.h>. SIMDe 0.7.4 lacks eleven of the intrinsics
 * the kernels use; each is defined below from SIMDe primitives or element by element, with
 * the operation the instruction performs, and only where SIMDe does not define it itself
 * (a newer SIMDe's own version then takes over). The f16 conversions go through SIMDe's
 * F16C emulation rather than our ts_fp16_load, so the scalar reference the test compares
 * against does not check itself. Two of SIMDe 0.7.4's native aliases are wrong or absent
 * and are fixed after the includes.
 */
#ifndef TS_TESTS_QUANT_AVX512_EMU_H
#define TS_TESTS_QUANT_AVX512_EMU_H

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* SIMDe 0.7.4 defines the alias of the unmasked _mm512_madd_epi16 with the masked form's
 * four parameters; the function it names, simde_mm512_madd_epi16, takes two. */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)

/* SIMDe names this rounding flag only with its own prefix. */
#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif

/* VCVTDQ2PS: 16 int32 -> 16 float, rounded to nearest even (the default MXCSR mode). */
#ifndef _mm512_cvtepi32_ps
static inline simde__m512 ts_emu_mm512_cvtepi32_ps(simde__m512i a) {
    int32_t v[16];
    float r[16];
    simde_mm512_storeu_si512(v, a);
    for (int i = 0; i < 16; i++) {
        r[i] = (float)v[i];
    }
    return simde_mm512_loadu_ps(r);
}
#define _mm512_cvtepi32_ps(a) ts_emu_mm512_cvtepi32_ps(a)
#endif

/* VPMOVSXBD: 16 int8 -> 16 int32, sign-extended. */
#ifndef _mm512_cvtepi8_epi32
static inline simde__m512i ts_emu_mm512_cvtepi8_epi32(simde__m128i a) {
    int8_t v[16];
    int32_t r[16];
    simde_mm_storeu_si128(v, a);
    for (int i = 0; i < 16; i++) {
        r[i] = v[i];
    }
    return simde_mm512_loadu_si512(r);
}
#define _mm512_cvtepi8_epi32(a) ts_emu_mm512_cvtepi8_epi32(a)
#endif

/* VPMOVZXBD: 16 uint8 -> 16 int32, zero-extended. */
#ifndef _mm512_cvtepu8_epi32
static inline simde__m512i ts_emu_mm512_cvtepu8_epi32(simde__m128i a) {
    uint8_t v[16];
    int32_t r[16];
    simde_mm_storeu_si128(v, a);
    for (int i = 0; i < 16; i++) {
        r[i] = v[i];
    }
    return simde_mm512_loadu_si512(r);
}
#define _mm512_cvtepu8_epi32(a) ts_emu_mm512_cvtepu8_epi32(a)
#endif

/* VPMOVZXWD: 16 uint16 -> 16 int32, zero-extended. */
#ifndef _mm512_cvtepu16_epi32
static inline simde__m512i ts_emu_mm512_cvtepu16_epi32(simde__m256i a) {
    uint16_t v[16];
    int32_t r[16];
    simde_mm256_storeu_si256(v, a);
    for (int i = 0; i < 16; i++) {
        r[i] = v[i];
    }
    return simde_mm512_loadu_si512(r);
}
#define _mm512_cvtepu16_epi32(a) ts_emu_mm512_cvtepu16_epi32(a)
#endif

/* VCVTPH2PS (512-bit): 16 halves -> 16 floats, as two 8-wide F16C conversions. */
#ifndef _mm512_cvtph_ps
static inline simde__m512 ts_emu_mm512_cvtph_ps(simde__m256i a) {
    float r[16];
    simde_mm256_storeu_ps(r, simde_mm256_cvtph_ps(simde_mm256_castsi256_si128(a)));
    simde_mm256_storeu_ps(r + 8, simde_mm256_cvtph_ps(simde_mm256_extracti128_si256(a, 1)));
    return simde_mm512_loadu_ps(r);
}
#define _mm512_cvtph_ps(a) ts_emu_mm512_cvtph_ps(a)
#endif

/* F16C scalar half -> float. */
#ifndef _cvtsh_ss
static inline float ts_emu_cvtsh_ss(unsigned short h) {
    return simde_mm_cvtss_f32(simde_mm_cvtph_ps(simde_mm_cvtsi32_si128((int)h)));
}
#define _cvtsh_ss(h) ts_emu_cvtsh_ss(h)
#endif

/* _mm512_reduce_add_ps is a compiler-provided sequence, not one instruction; this is the
 * tree GCC's header uses (halves, then quarters, then pairs), so the rounding matches a
 * native GCC build. */
#ifndef _mm512_reduce_add_ps
static inline float ts_emu_mm512_reduce_add_ps(simde__m512 a) {
    float v[16];
    simde_mm512_storeu_ps(v, a);
    for (int w = 8; w >= 1; w /= 2) {
        for (int i = 0; i < w; i++) {
            v[i] = v[i] + v[i + w];
        }
    }
    return v[0];
}
#define _mm512_reduce_add_ps(a) ts_emu_mm512_reduce_add_ps(a)
#endif

#include "avx512_emu_rename.h"

/* The 16-bit mask type under its Intel name. */
typedef simde__mmask16 __mmask16;

/* VPGATHERDD (512-bit, no mask): lane i = the int32 at base + idx[i] * scale. */
#undef _mm512_i32gather_epi32 /* a native macro at -O0: see _mm512_srai_epi32 below */
static inline simde__m512i ts_emu_mm512_i32gather_epi32(simde__m512i idx, const void *base,
                                                        int scale) {
    int32_t off[16], r[16];
    simde_mm512_storeu_si512(off, idx);
    for (int i = 0; i < 16; i++) {
        memcpy(&r[i], (const char *)base + (ptrdiff_t)off[i] * scale, sizeof r[i]);
    }
    return simde_mm512_loadu_si512(r);
}
#define _mm512_i32gather_epi32(idx, base, scale) ts_emu_mm512_i32gather_epi32(idx, base, scale)

/* VPMOVDW: 16 int32 -> 16 int16, truncated. */
#ifndef _mm512_cvtepi32_epi16
static inline simde__m256i ts_emu_mm512_cvtepi32_epi16(simde__m512i a) {
    int32_t v[16];
    int16_t r[16];
    simde_mm512_storeu_si512(v, a);
    for (int i = 0; i < 16; i++) {
        r[i] = (int16_t)(uint16_t)(uint32_t)v[i];
    }
    return simde_mm256_loadu_si256(r);
}
#define _mm512_cvtepi32_epi16(a) ts_emu_mm512_cvtepi32_epi16(a)
#endif

/* VMOVUPS with a write mask: stores the lanes whose mask bit is set, nothing else. */
#ifndef _mm512_mask_storeu_ps
static inline void ts_emu_mm512_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    float v[16];
    simde_mm512_storeu_ps(v, a);
    for (int i = 0; i < 16; i++) {
        if (k & (1u << i)) {
            memcpy((char *)p + 4 * i, &v[i], sizeof v[i]);
        }
    }
}
#define _mm512_mask_storeu_ps(p, k, a) ts_emu_mm512_mask_storeu_ps(p, k, a)
#endif

/* VPSRAD (512-bit, immediate): each int32 shifted right by n, filled with its sign bit (all
 * sign bits from n = 32 on). Written on non-negative values so it does not rely on C's
 * implementation-defined right shift of negative ones. */
/* Defined whatever is there: with -mavx2 SIMDe includes <immintrin.h>, and at -O0 GCC's
 * header defines the native AVX-512 intrinsic as a macro, which this file must not use. */
#undef _mm512_srai_epi32
static inline simde__m512i ts_emu_mm512_srai_epi32(simde__m512i a, unsigned n) {
    int32_t v[16];
    simde_mm512_storeu_si512(v, a);
    const unsigned s = n > 31 ? 31 : n;
    for (int i = 0; i < 16; i++) {
        v[i] = v[i] < 0 ? ~(~v[i] >> s) : v[i] >> s;
    }
    return simde_mm512_loadu_si512(v);
}
#define _mm512_srai_epi32(a, n) ts_emu_mm512_srai_epi32(a, (unsigned)(n))

/* Tells src/quant/simd_isa.h that the intrinsics are already declared. */
#define TS_SIMD_EMULATE 1

#endif /* TS_TESTS_QUANT_AVX512_EMU_H */
