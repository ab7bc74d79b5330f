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

/* Instruction-set level a kernel table was built for. */
typedef enum ts_isa {
    TS_ISA_SCALAR = 0,
    TS_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    TS_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ (+VNNI, BF16 when present) */
} ts_isa;

/* Best level this CPU supports, lowered by the environment variable TS_ISA=scalar|avx2. */
ts_isa ts_quant_detect_isa(void);
const char *ts_isa_name(ts_isa isa);

/* Dequantizes one row: n elements of `type` at src -> n floats. */
typedef void (*ts_to_float_fn)(const void *src, float *dst, int64_t n);
/* Quantizes one row: n floats -> n elements of `type`. */
typedef void (*ts_from_float_fn)(const float *src, void *dst, int64_t n);
/* Dot product of a weight row x (the type) with an activation row y (its vec_dot_type). */
typedef void (*ts_vec_dot_fn)(int64_t n, float *result, const void *x, const void *y);

typedef struct ts_quant_ops {
    ts_type type;
    ts_type vec_dot_type;        /* activation partner: Q8_0, Q8_1, Q8_K, F16, BF16 or F32 */
    ts_to_float_fn to_float;     /* dequantize_row */
    ts_from_float_fn from_float; /* quantize_row (reference rounding, bit-exact with llama.cpp) */
    ts_vec_dot_fn vec_dot;
} ts_quant_ops;

/* Kernels of `type` at instruction level `isa` (falling back to lower levels per function
 * where no faster one exists); NULL when the type has no arithmetic here. */
const ts_quant_ops *ts_quant_ops_get(ts_type type, ts_isa isa);

/* f16 / bf16 <-> f32 conversions (IEEE rounding to nearest even). */
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);

#endif /* TS_QUANT_QUANT_H */
