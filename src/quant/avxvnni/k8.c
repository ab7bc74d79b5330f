/*
 * avxvnni/k8.c — the AVX-VNNI level's Q4_K, Q5_K and Q6_K kernels: avx2/k8.c compiled a second
 * time, with -mavxvnni (cmake/layers.cmake) and TS_AVXVNNI. Those kernels use no dot step of
 * simd_avx2.h (their sub-block sums are vpmaddubsw pair sums added in int16 and scaled by one
 * vpmaddwd, which VNNI would not shorten), so the code and the bits are the AVX2 ones; the
 * level keeps its own copies so that its table has packed kernels wherever AVX2 has them.
 *
 * Exports are renamed from *_avx2 to *_avxvnni below.
 */
#define TS_AVXVNNI 1

#define ts_q_gemm_q4_k_avx2        ts_q_gemm_q4_k_avxvnni
#define ts_q_gemm_q4_k_packed_avx2 ts_q_gemm_q4_k_packed_avxvnni
#define ts_q_gemm_q5_k_avx2        ts_q_gemm_q5_k_avxvnni
#define ts_q_gemm_q5_k_packed_avx2 ts_q_gemm_q5_k_packed_avxvnni
#define ts_q_dot_q5_k_avx2         ts_q_dot_q5_k_avxvnni
#define ts_q_gemm_q6_k_avx2        ts_q_gemm_q6_k_avxvnni
#define ts_q_gemm_q6_k_packed_avx2 ts_q_gemm_q6_k_packed_avxvnni
#define ts_q_dot_q4_k_avx2         ts_q_dot_q4_k_avxvnni
#define ts_q_dot_q6_k_avx2         ts_q_dot_q6_k_avxvnni

#include "quant/avx2/k8.c"
