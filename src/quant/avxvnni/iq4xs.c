/*
 * avxvnni/iq4xs.c — the AVX-VNNI level's IQ4_XS dot and gemm: avx2/iq4xs.c compiled a second
 * time, with -mavxvnni (cmake/layers.cmake) and TS_AVXVNNI, which makes each scale step
 * (vpmaddwd + vpaddd) one vpdpwssd, in the dot and in the rows-in-lanes gemm, on rows and packed.
 * The integers are the same and so are the float operations: these give the AVX2 kernels' bits
 * (tests/quant/test_avxvnni.c).
 *
 * Exports are renamed from *_avx2 to *_avxvnni below.
 */
#define TS_AVXVNNI 1

#define ts_q_dot_iq4_xs_avx2         ts_q_dot_iq4_xs_avxvnni
#define ts_q_gemm_iq4_xs_avx2        ts_q_gemm_iq4_xs_avxvnni
#define ts_q_gemm_iq4_xs_packed_avx2 ts_q_gemm_iq4_xs_packed_avxvnni

#include "quant/avx2/iq4xs.c"
