/*
 * ggml_types.h — the tensor element types a GGUF file can hold, and their block layouts.
 *
 * Type ids are the numbers GGUF files store (they follow ggml's enumeration; ids that ggml
 * retired are absent and rejected). A row of a tensor of type T holds ne[0] elements packed
 * in blocks of ts_type_block_size(T) elements, each ts_type_block_bytes(T) bytes, so ne[0]
 * must be a multiple of the block size. This table is format knowledge and lives with the
 * GGUF reader; src/quant/ adds the arithmetic (dequantize, quantize, dot products).
 * Constant data only; thread-safe.
 */
#ifndef TS_GGUF_GGML_TYPES_H
#define TS_GGUF_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ts_type {
    TS_TYPE_F32 = 0,
    TS_TYPE_F16 = 1,
    TS_TYPE_Q4_0 = 2,
    TS_TYPE_Q4_1 = 3,
    TS_TYPE_Q5_0 = 6,
    TS_TYPE_Q5_1 = 7,
    TS_TYPE_Q8_0 = 8,
    TS_TYPE_Q8_1 = 9,
    TS_TYPE_Q2_K = 10,
    TS_TYPE_Q3_K = 11,
    TS_TYPE_Q4_K = 12,
    TS_TYPE_Q5_K = 13,
    TS_TYPE_Q6_K = 14,
    TS_TYPE_Q8_K = 15,
    TS_TYPE_IQ2_XXS = 16,
    TS_TYPE_IQ2_XS = 17,
    TS_TYPE_IQ3_XXS = 18,
    TS_TYPE_IQ1_S = 19,
    TS_TYPE_IQ4_NL = 20,
    TS_TYPE_IQ3_S = 21,
    TS_TYPE_IQ2_S = 22,
    TS_TYPE_IQ4_XS = 23,
    TS_TYPE_I8 = 24,
    TS_TYPE_I16 = 25,
    TS_TYPE_I32 = 26,
    TS_TYPE_I64 = 27,
    TS_TYPE_F64 = 28,
    TS_TYPE_IQ1_M = 29,
    TS_TYPE_BF16 = 30,
    TS_TYPE_TQ1_0 = 34,
    TS_TYPE_TQ2_0 = 35,
    TS_TYPE_MXFP4 = 39,
    TS_TYPE_COUNT = 40, /* one past the largest id; not every id below it is valid */
} ts_type;

/* True when id names a type in this table. */
bool ts_type_valid(uint32_t id);

/* Name as users know it ("Q4_K", "F16"), or NULL for an invalid id. */
const char *ts_type_name(uint32_t id);

/* Looks a type up by name, case-insensitively; returns false when unknown. */
bool ts_type_from_name(const char *name, ts_type *out);

/* Elements per block (1 for plain scalar types); 0 for an invalid id. */
size_t ts_type_block_size(uint32_t id);

/* Bytes per block; 0 for an invalid id. */
size_t ts_type_block_bytes(uint32_t id);

/* Bytes of a row of n elements. Returns false when n is not a multiple of the block size,
 * the id is invalid, or the size does not fit size_t. */
bool ts_type_row_bytes(uint32_t id, uint64_t n, size_t *out);

#endif /* TS_GGUF_GGML_TYPES_H */
