/*
 * fp16.c — IEEE half and bfloat16 <-> f32 conversions (scalar reference).
 *
 * f32 -> f16 and f32 -> bf16 round to nearest, ties to even, like the F16C instruction and
 * ggml's converters, so quantized files match bit for bit. NaN stays NaN (quiet); values
 * that round past the largest half (65504) become infinity; tiny values become half
 * subnormals or zero with correct rounding.
 */
#include <string.h>

#include "quant/quant_internal.h"

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ts_f16_to_f32(uint16_t h) {
    return ts_fp16_load(h);
}

uint16_t ts_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) {
        return sign | 0x7E00u; /* NaN */
    }
    if (u >= 0x477FF000u) {
        /* At or past halfway between 65504 and 65536: ties go to the even neighbour, which is
         * the infinity encoding. */
        return sign | 0x7C00u;
    }
    if (u >= 0x38800000u) {
        /* Normal half (|f| >= 2^-14). Round the 13 dropped mantissa bits to even; a carry
         * ripples into the exponent, which is what rounding up to the next binade needs. */
        uint32_t odd = (u >> 13) & 1u;
        u += 0xFFFu + odd;
        return sign | (uint16_t)((u - 0x38000000u) >> 13);
    }
    /* Subnormal or zero: adding 0.5 (whose ulp is 2^-24, the half subnormal step) makes the
     * FPU round |f| to a multiple of 2^-24 with ties to even; the low bits are the count. */
    float t = f32_from_bits(u) + 0.5f;
    return sign | (uint16_t)(f32_bits(t) - 0x3F000000u);
}

float ts_bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t ts_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: force the quiet bit */
    }
    uint32_t odd = (u >> 16) & 1u;
    return (uint16_t)((u + 0x7FFFu + odd) >> 16);
}
