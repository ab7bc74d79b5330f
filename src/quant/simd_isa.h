/*
 * simd_isa.h — where the SIMD kernel files get their intrinsics from.
 *
 * Normally that is <immintrin.h>, and the files in avx2/, avxvnni/ and avx512/ (and any
 * *_avx2.c / *_avx512.c) are compiled with the matching -m flags. The test build
 * tests/quant/avx512_emu.h (force-included with -include) defines TS_SIMD_EMULATE after
 * declaring every intrinsic the kernels use through SIMDe's portable implementations under the
 * Intel names, so the same kernel source can be checked against the scalar reference on a CPU
 * without AVX-512. Likewise tests/quant/avxvnni_emu.h gives the avxvnni/ files, compiled
 * without -mavxvnni, SIMDe's versions of the two AVX-VNNI intrinsics and defines
 * TS_SIMD_EMULATE_AVXVNNI (simd_avx2.h). Nothing else defines either; the library itself
 * never uses emulation.
 */
#ifndef TS_QUANT_SIMD_ISA_H
#define TS_QUANT_SIMD_ISA_H

#ifndef TS_SIMD_EMULATE
#include <immintrin.h>
#endif

#endif /* TS_QUANT_SIMD_ISA_H */
