/*
 * quant.h — arithmetic on GGML block types: dequantize, quantize, dot products.
 *
 * Block layouts and type ids come from gguf/ggml_types.h. For every supported type this
 * layer provides a scalar reference implementation (the spec) and, where the CPU allows,
 * SIMD implementations selected at run time by CPUID; tests compare the two.
 *
 * Row lengths `n` are element counts and must be multiples of the type's block size; callers
 * check this (the GGUF reader and graph builder already do), the functions assert it.
 * Nothing here allocates. Everything is thread-safe (constant tables, no global state).
 */
#ifndef TS_QUANT_QUANT_H
#define TS_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"

/* Instruction-set level a kernel table was built for. The levels are ordered, but a CPU need
 * not have every level below its highest: one with AVX-512 may lack AVX-VNNI (Ice Lake and
 * Zen 4 have only AVX512-VNNI, the EVEX form), and runs the AVX2 kernels in its place. */
typedef enum ts_isa {
    TS_ISA_SCALAR = 0,
    TS_ISA_AVX2 = 1,    /* AVX2 + FMA + F16C */
    TS_ISA_AVXVNNI = 2, /* the AVX2 level + AVX-VNNI (VEX vpdpbusd / vpdpwssd) */
    TS_ISA_AVX512 = 3,  /* AVX-512 F/BW/VL/DQ + VNNI + BF16 */
} ts_isa;

/* Best level this CPU supports, lowered by the environment variable
 * TS_ISA=scalar|avx2|avxvnni|avx512 (to the highest level at or below it that the CPU runs). */
ts_isa ts_quant_detect_isa(void);
const char *ts_isa_name(ts_isa isa);
/* Whether this CPU runs the kernels of level isa. */
bool ts_quant_isa_supported(ts_isa isa);

/* Dequantizes one row: n elements of `type` at src -> n floats. */
typedef void (*ts_to_float_fn)(const void *src, float *dst, int64_t n);
/* Quantizes one row: n floats -> n elements of `type`. */
typedef void (*ts_from_float_fn)(const float *src, void *dst, int64_t n);
/* Dot product of a weight row x (the type) with an activation row y (its vec_dot_type). */
typedef void (*ts_vec_dot_fn)(int64_t n, float *result, const void *x, const void *y);

/*
 * Batch-aware matrix kernel: for r in [0, nr) and j in [0, nc)
 *
 *     c[j][r] = dot(w row r, a row j),   i.e. C = A . W^T stored activation-row-major
 *
 * k      elements per row (a multiple of the block size of both types)
 * w      [nr rows, k] of the weight type; row r at (const char *)w + r * ldw
 * a      [nc rows, k] of the ops' vec_dot_type; row j at (const char *)a + j * lda
 * c      output floats; element (j, r) at (char *)c + j * ldc + r * sizeof(float)
 * All strides are in bytes. Each weight block is loaded once and used against several
 * activation rows, so this beats nc separate vec_dot calls once nc > 1. Threads split a
 * matrix by weight rows: each calls gemm on its own [r0, r1) slice (w advanced by r0 * ldw,
 * c by r0 floats); outputs never overlap. Results equal vec_dot up to summation order.
 */
typedef void (*ts_gemm_fn)(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda);

typedef struct ts_quant_ops {
    ts_type type;
    ts_type vec_dot_type;        /* activation partner: Q8_0, Q8_1, Q8_K, BF16 or F32 */
    ts_to_float_fn to_float;     /* dequantize_row */
    ts_from_float_fn from_float; /* quantize_row (reference rounding, bit-exact with llama.cpp) */
    ts_vec_dot_fn vec_dot;
    ts_gemm_fn gemm; /* tile kernel; a scalar loop over vec_dot at worst */
    /* The same kernel reading a packed matrix (ts_quant_pack): w at packed row r0, r0 and ldw
     * as for gemm, r0 a multiple of TS_PACK_ROWS; gives gemm's bits. NULL: none at this level. */
    ts_gemm_fn gemm_packed;
    ts_isa isa; /* level this table was built for (after any lowering) */
} ts_quant_ops;

/* Kernels of `type` at instruction level `isa` (falling back to lower levels per function
 * where no faster one exists); NULL when the type has no arithmetic here. An `isa` this CPU
 * does not run is lowered to the highest level below it that it does (the table's `isa` says
 * which), so the result is always safe to call
 * (pass ts_quant_detect_isa() to honour TS_ISA). The table is constant data and lives for the whole
 * program. Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K, IQ4_NL,
 * IQ4_XS, MXFP4.
 * Q8_0, Q8_1 and Q8_K are also the activation types; their from_float is the fast one. */
const ts_quant_ops *ts_quant_ops_get(ts_type type, ts_isa isa);

/*
 * Packed weights: the interleaved layout the rows-in-lanes kernels read (quant_pack.c). Rows
 * go in groups of TS_PACK_ROWS; a group holds exactly its rows' bytes, reordered so that each
 * 32-bit word of a block comes as sixteen rows' copies side by side. A packed matrix has the
 * size of the original and row r0 (a multiple of 16) at the same byte offset.
 */
#define TS_PACK_ROWS 16

/* Whether nr rows of k elements of `type` can be packed (a layout exists for the type, nr is
 * a multiple of TS_PACK_ROWS). */
bool ts_quant_packable(ts_type type, int64_t k, int64_t nr);
/* nr dense rows of k elements at src -> the packed layout at dst (same size; no overlap).
 * False, writing nothing, when !ts_quant_packable. */
bool ts_quant_pack(ts_type type, void *dst, const void *src, int64_t k, int64_t nr);
/* The inverse: packed src -> dense rows at dst. */
bool ts_quant_unpack(ts_type type, void *dst, const void *src, int64_t k, int64_t nr);

/* Highest level this CPU could run, ignoring TS_ISA (for tests and benchmarks). */
ts_isa ts_quant_cpu_isa(void);

/* f16 / bf16 <-> f32 conversions (IEEE rounding to nearest even). */
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);

#endif /* TS_QUANT_QUANT_H */
