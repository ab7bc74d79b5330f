/*
 * avxvnni_emu_rename.h — gives every function the AVX-VNNI kernel files (src/quant/avxvnni/)
 * export a name ending in _emu (test-only).
 *
 * The emulated build of those files (tests/quant/CMakeLists.txt, through avxvnni_emu.h) links
 * into one program next to the real ts_quant library, which holds the native build of the
 * same functions; the renames keep the two apart. Included before quant_internal.h, the
 * header's declarations of the AVX-VNNI kernels become declarations of the _emu functions.
 * (The kernel files themselves rename *_avx2 to these names first, and the preprocessor
 * follows both renames.)
 *
 * Every exported AVX-VNNI kernel must be listed here: a missing one links as a duplicate
 * definition of the library's symbol.
 */
#ifndef TS_TESTS_QUANT_AVXVNNI_EMU_RENAME_H
#define TS_TESTS_QUANT_AVXVNNI_EMU_RENAME_H

/* avxvnni/q32.c */
#define ts_q_gemm_q4_0_avxvnni         ts_q_gemm_q4_0_avxvnni_emu
#define ts_q_gemm_q4_1_avxvnni         ts_q_gemm_q4_1_avxvnni_emu
#define ts_q_gemm_q5_0_avxvnni         ts_q_gemm_q5_0_avxvnni_emu
#define ts_q_gemm_q8_0_avxvnni         ts_q_gemm_q8_0_avxvnni_emu
#define ts_q_dot_q4_0_avxvnni          ts_q_dot_q4_0_avxvnni_emu
#define ts_q_dot_q4_1_avxvnni          ts_q_dot_q4_1_avxvnni_emu
#define ts_q_dot_q5_0_avxvnni          ts_q_dot_q5_0_avxvnni_emu
#define ts_q_dot_q8_0_avxvnni          ts_q_dot_q8_0_avxvnni_emu
#define ts_q_dot_iq4_nl_avxvnni        ts_q_dot_iq4_nl_avxvnni_emu
#define ts_q_gemm_q4_0_packed_avxvnni  ts_q_gemm_q4_0_packed_avxvnni_emu
#define ts_q_gemm_q4_1_packed_avxvnni  ts_q_gemm_q4_1_packed_avxvnni_emu
#define ts_q_gemm_q5_0_packed_avxvnni  ts_q_gemm_q5_0_packed_avxvnni_emu
#define ts_q_gemm_q8_0_packed_avxvnni  ts_q_gemm_q8_0_packed_avxvnni_emu
#define ts_q_gemm_mxfp4_avxvnni        ts_q_gemm_mxfp4_avxvnni_emu
#define ts_q_gemm_mxfp4_packed_avxvnni ts_q_gemm_mxfp4_packed_avxvnni_emu
#define ts_q_dot_mxfp4_avxvnni         ts_q_dot_mxfp4_avxvnni_emu

/* avxvnni/iq4xs.c */
#define ts_q_dot_iq4_xs_avxvnni         ts_q_dot_iq4_xs_avxvnni_emu
#define ts_q_gemm_iq4_xs_avxvnni        ts_q_gemm_iq4_xs_avxvnni_emu
#define ts_q_gemm_iq4_xs_packed_avxvnni ts_q_gemm_iq4_xs_packed_avxvnni_emu

/* avxvnni/k8.c */
#define ts_q_gemm_q4_k_avxvnni        ts_q_gemm_q4_k_avxvnni_emu
#define ts_q_gemm_q6_k_avxvnni        ts_q_gemm_q6_k_avxvnni_emu
#define ts_q_gemm_q5_k_avxvnni        ts_q_gemm_q5_k_avxvnni_emu
#define ts_q_gemm_q5_k_packed_avxvnni ts_q_gemm_q5_k_packed_avxvnni_emu
#define ts_q_dot_q5_k_avxvnni         ts_q_dot_q5_k_avxvnni_emu
#define ts_q_gemm_q4_k_packed_avxvnni ts_q_gemm_q4_k_packed_avxvnni_emu
#define ts_q_gemm_q6_k_packed_avxvnni ts_q_gemm_q6_k_packed_avxvnni_emu
#define ts_q_dot_q4_k_avxvnni         ts_q_dot_q4_k_avxvnni_emu
#define ts_q_dot_q6_k_avxvnni         ts_q_dot_q6_k_avxvnni_emu

#endif /* TS_TESTS_QUANT_AVXVNNI_EMU_RENAME_H */
