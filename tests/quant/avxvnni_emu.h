/*
 * avxvnni_emu.h — force-included (-include) into the test-only emulated build of the AVX-VNNI
 * kernel files (src/quant/avxvnni/): the two AVX-VNNI intrinsics they use, implemented by SIMDe
 * (libsimde-dev), and _emu names for the functions they export (avxvnni_emu_rename.h).
 *
 * The files are compiled unchanged with the AVX2 level's flags and without -mavxvnni, so the
 * build runs on any AVX2 CPU: every other intrinsic is the native AVX2 one from <immintrin.h>.
 * TS_SIMD_EMULATE_AVXVNNI tells quant/simd_avx2.h that TS_AVXVNNI without -mavxvnni is meant.
 * VPDPBUSD and VPDPWSSD compute the same in their VEX (AVX-VNNI) and EVEX (AVX512-VNNI) forms;
 * SIMDe has the EVEX names, portably: each lane's int32 plus the sum of its four u8 x s8
 * (two s16 x s16) products, wrapping.
 */
#ifndef TS_TESTS_QUANT_AVXVNNI_EMU_H
#define TS_TESTS_QUANT_AVXVNNI_EMU_H

#include <immintrin.h>

#include <simde/x86/avx512/dpbusd.h>
#include <simde/x86/avx512/dpwssd.h>

/* GCC's <immintrin.h> declares these as functions for -mavxvnni code; the macros take over. */
#define _mm256_dpbusd_avx_epi32(src, a, b) simde_mm256_dpbusd_epi32(src, a, b)
#define _mm256_dpwssd_avx_epi32(src, a, b) simde_mm256_dpwssd_epi32(src, a, b)

#define TS_SIMD_EMULATE_AVXVNNI 1

#include "avxvnni_emu_rename.h"

#endif /* TS_TESTS_QUANT_AVXVNNI_EMU_H */
