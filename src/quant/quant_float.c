/*
 * quant_float.c — scalar reference kernels of the plain float types F32, F16 and BF16.
 * Each pairs with itself for dot products; sums are accumulated in double so the reference
 * is more accurate than any fast path it is compared with.
 */
#include "quant/quant_internal.h"

void ts_q_to_float_f32_scalar(const void *src, float *dst, int64_t n) {
    memmove(dst, src, (size_t)n * sizeof(float));
}

void ts_q_from_float_f32_scalar(const float *src, void *dst, int64_t n) {
    memmove(dst, src, (size_t)n * sizeof(float));
}

void ts_q_dot_f32_scalar(int64_t n, float *result, const void *x, const void *y) {
    const float *a = x, *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)a[i] * (double)b[i];
    }
    *result = (float)sum;
}

/* Half and bfloat16 rows are read through memcpy-free uint16_t loads; rows need only
 * 2-byte alignment. */
void ts_q_to_float_f16_scalar(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ts_f16_to_f32(h[i]);
    }
}

void ts_q_from_float_f16_scalar(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) {
        h[i] = ts_f32_to_f16(src[i]);
    }
}

/* F16 weights meet F32 activations (the type's vec_dot_type: rounding activations to f16 would
 * only lose precision, and converting them costs a pass). */
void ts_q_dot_f16_scalar(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x;
    const float *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)ts_f16_to_f32(a[i]) * (double)b[i];
    }
    *result = (float)sum;
}

void ts_q_to_float_bf16_scalar(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ts_bf16_to_f32(h[i]);
    }
}

void ts_q_from_float_bf16_scalar(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) {
        h[i] = ts_f32_to_bf16(src[i]);
    }
}

void ts_q_dot_bf16_scalar(int64_t n, float *result, const void *x, const void *y) {
    const uint16_t *a = x, *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)ts_bf16_to_f32(a[i]) * (double)ts_bf16_to_f32(b[i]);
    }
    *result = (float)sum;
}
