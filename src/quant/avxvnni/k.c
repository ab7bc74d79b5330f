/*
 * avxvnni/k.c — the AVX-VNNI level's Q5_K kernel: avx2/k.c compiled a second time, with
 * -mavxvnni (cmake/layers.cmake) and TS_AVXVNNI, which makes each scaled widening of the
 * sub-block sums (simd_avx2.h: dot2_i16) one vpdpwssd instead of vpmaddwd + vpaddd. The
 * integer sums and float operations are the AVX2 ones, and so are the bits.
 *
 * Exports are renamed from *_avx2 to *_avxvnni below; the Q8_K quantizer and dequantization
 * are left out (avx2/k.c, under TS_AVXVNNI) and the level uses the AVX2 ones. A function added
 * to avx2/k.c outside that part must be renamed here too.
 */
#define TS_AVXVNNI 1

#define ts_q_dot_q5_k_avx2 ts_q_dot_q5_k_avxvnni

#include "quant/avx2/k.c"
