/*
 * avxvnni/q32.c — the AVX-VNNI level's kernels of the 32-element block types: avx2/q32.c
 * compiled a second time, with -mavxvnni (cmake/layers.cmake) and TS_AVXVNNI, which makes each
 * u8 x s8 dot step of simd_avx2.h one vpdpbusd instead of vpmaddubsw + vpaddw (+ vpmaddwd).
 * The integer sums are the same, and so is every float operation: these kernels give the AVX2
 * ones' bits (tests/quant/test_avxvnni.c).
 *
 * What the file exports is renamed from *_avx2 to *_avxvnni below (the declarations of
 * quant_internal.h follow the renames). Dequantization and the activation quantizers have no
 * dot step; avx2/q32.c leaves them out under TS_AVXVNNI and the level's table uses the AVX2
 * ones. A function added to avx2/q32.c outside that part must be renamed here too, or it links
 * as a second definition of the AVX2 symbol.
 */
#define TS_AVXVNNI 1

#define ts_q_gemm_q4_0_avx2  ts_q_gemm_q4_0_avxvnni
#define ts_q_gemm_q4_1_avx2  ts_q_gemm_q4_1_avxvnni
#define ts_q_gemm_q5_0_avx2  ts_q_gemm_q5_0_avxvnni
#define ts_q_gemm_q8_0_avx2  ts_q_gemm_q8_0_avxvnni
#define ts_q_gemm_q4_0_packed_avx2 ts_q_gemm_q4_0_packed_avxvnni
#define ts_q_gemm_q4_1_packed_avx2 ts_q_gemm_q4_1_packed_avxvnni
#define ts_q_gemm_q5_0_packed_avx2 ts_q_gemm_q5_0_packed_avxvnni
#define ts_q_gemm_q8_0_packed_avx2 ts_q_gemm_q8_0_packed_avxvnni
#define ts_q_dot_q4_0_avx2   ts_q_dot_q4_0_avxvnni
#define ts_q_dot_q4_1_avx2   ts_q_dot_q4_1_avxvnni
#define ts_q_dot_q5_0_avx2   ts_q_dot_q5_0_avxvnni
#define ts_q_dot_q8_0_avx2   ts_q_dot_q8_0_avxvnni
#define ts_q_dot_iq4_nl_avx2 ts_q_dot_iq4_nl_avxvnni
#define ts_q_gemm_mxfp4_avx2 ts_q_gemm_mxfp4_avxvnni
#define ts_q_gemm_mxfp4_packed_avx2 ts_q_gemm_mxfp4_packed_avxvnni
#define ts_q_dot_mxfp4_avx2  ts_q_dot_mxfp4_avxvnni

#include "quant/avx2/q32.c"
