/*
 * simd_isa.h — where the SIMD kernel files get their intrinsics from.
 *
 * Normally that is <immintrin.h>, and the files in avx2/ and avx512/ (and any *_avx2.c /
 * *_avx512.c) are compiled with the matching -m flags. The test build tests/quant/avx512_emu.h
 * (force-included with -include) defines TS_SIMD_EMULATE after declaring every intrinsic the
 * kernels use through SIMDe's portable implementations under the Intel names, so the same
 * kernel source can be checked against the scalar reference on a CPU without AVX-512. Nothing
 * else defines TS_SIMD_EMULATE; the library itself never uses emulation.
 */
#ifndef TS_QUANT_SIMD_ISA_H
#define TS_QUANT_SIMD_ISA_H

#ifndef TS_SIMD_EMULATE
#include <immintrin.h>
#endif

#endif /* TS_QUANT_SIMD_ISA_H */
