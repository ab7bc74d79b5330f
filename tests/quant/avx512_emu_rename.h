/*
 * avx512_emu_rename.h — gives every function the AVX-512 kernel files (src/quant/avx512/) export a name ending
 * in _emu (test-only).
 *
 * The emulated build of those files (tests/quant/CMakeLists.txt, through avx512_emu.h) links
 * into one program next to the real ts_quant library, which holds the native AVX-512 build of
 * the same functions; the renames keep the two apart. Included before quant_internal.h, the
 * header's declarations of the AVX-512 kernels become declarations of the _emu functions,
 * so the test calls them with the prototypes the kernels were compiled against.
 *
 * Every exported AVX-512 kernel must be listed here: a missing one links as a duplicate
 * definition of the library's symbol.
 */
#ifndef TS_TESTS_QUANT_AVX512_EMU_RENAME_H
#define TS_TESTS_QUANT_AVX512_EMU_RENAME_H

/* avx512/float.c */
#define ts_q_to_float_f16_avx512  ts_q_to_float_f16_avx512_emu
#define ts_q_to_float_bf16_avx512 ts_q_to_float_bf16_avx512_emu
#define ts_q_dot_f32_avx512       ts_q_dot_f32_avx512_emu
#define ts_q_dot_f16_avx512       ts_q_dot_f16_avx512_emu
#define ts_q_dot_bf16_avx512      ts_q_dot_bf16_avx512_emu
#define ts_q_gemm_f32_avx512      ts_q_gemm_f32_avx512_emu
#define ts_q_gemm_f16_avx512      ts_q_gemm_f16_avx512_emu
#define ts_q_gemm_bf16_avx512     ts_q_gemm_bf16_avx512_emu

/* avx512/dequant.c, avx512/q32.c, avx512/k.c */
#define ts_q_to_float_q4_0_avx512 ts_q_to_float_q4_0_avx512_emu
#define ts_q_to_float_q4_1_avx512 ts_q_to_float_q4_1_avx512_emu
#define ts_q_to_float_q8_0_avx512 ts_q_to_float_q8_0_avx512_emu
#define ts_q_to_float_q4_k_avx512 ts_q_to_float_q4_k_avx512_emu
#define ts_q_to_float_q5_k_avx512 ts_q_to_float_q5_k_avx512_emu
#define ts_q_to_float_q6_k_avx512 ts_q_to_float_q6_k_avx512_emu
#define ts_q_dot_q8_0_avx512      ts_q_dot_q8_0_avx512_emu
#define ts_q_dot_q4_k_avx512      ts_q_dot_q4_k_avx512_emu
#define ts_q_dot_q5_k_avx512      ts_q_dot_q5_k_avx512_emu
#define ts_q_dot_q6_k_avx512      ts_q_dot_q6_k_avx512_emu
#define ts_q_gemm_q4_0_avx512     ts_q_gemm_q4_0_avx512_emu
#define ts_q_gemm_q4_1_avx512     ts_q_gemm_q4_1_avx512_emu
#define ts_q_gemm_q8_0_avx512     ts_q_gemm_q8_0_avx512_emu
#define ts_q_gemm_q5_0_avx512     ts_q_gemm_q5_0_avx512_emu
#define ts_q_gemm_iq4_nl_avx512   ts_q_gemm_iq4_nl_avx512_emu
#define ts_q_dot_iq4_nl_avx512    ts_q_dot_iq4_nl_avx512_emu
#define ts_q_gemm_mxfp4_avx512    ts_q_gemm_mxfp4_avx512_emu
#define ts_q_dot_mxfp4_avx512     ts_q_dot_mxfp4_avx512_emu
#define ts_q_gemm_q4_k_avx512     ts_q_gemm_q4_k_avx512_emu
#define ts_q_gemm_q6_k_avx512     ts_q_gemm_q6_k_avx512_emu
#define ts_q_gemm_q4_0_packed_avx512       ts_q_gemm_q4_0_packed_avx512_emu
#define ts_q_gemm_q4_1_packed_avx512       ts_q_gemm_q4_1_packed_avx512_emu
#define ts_q_gemm_q5_0_packed_avx512       ts_q_gemm_q5_0_packed_avx512_emu
#define ts_q_gemm_q8_0_packed_avx512       ts_q_gemm_q8_0_packed_avx512_emu
#define ts_q_gemm_iq4_nl_packed_avx512     ts_q_gemm_iq4_nl_packed_avx512_emu
#define ts_q_gemm_mxfp4_packed_avx512      ts_q_gemm_mxfp4_packed_avx512_emu
#define ts_q_gemm_q4_k_packed_avx512       ts_q_gemm_q4_k_packed_avx512_emu
#define ts_q_gemm_q6_k_packed_avx512       ts_q_gemm_q6_k_packed_avx512_emu

/* avx512/iq4xs.c */
#define ts_q_dot_iq4_xs_avx512  ts_q_dot_iq4_xs_avx512_emu
#define ts_q_gemm_iq4_xs_avx512 ts_q_gemm_iq4_xs_avx512_emu

#endif /* TS_TESTS_QUANT_AVX512_EMU_RENAME_H */
