/*
 * quant_q32.c — scalar reference kernels of the 32-element block types:
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL and MXFP4.
 *
 * The quantizers reproduce ggml's reference quantizers (what llama-quantize runs without an
 * importance matrix) operation for operation: the same scale choice, the same f32
 * arithmetic in the same order, the same rounding (truncation after adding a half, roundf,
 * or ties-to-even where ggml uses each), so the bytes match llama.cpp's files.
 */
#include <float.h>
#include <math.h>

#include "quant/quant_internal.h"

const int8_t ts_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

const int8_t ts_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Absolute maximum of a block and the signed value it came from (first one on ties). */
static void signed_absmax(const float *x, int n, float *amax_out, float *max_out) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax_out = amax;
    *max_out = max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) {
            min = x[j];
        }
        if (x[j] > max) {
            max = x[j];
        }
    }
    *min_out = min;
    *max_out = max;
}

/* ---- Q4_0: symmetric 4-bit, the largest-magnitude value maps to -8 ---- */

void ts_q_from_float_q4_0_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float amax, max;
        signed_absmax(src, TS_QK, &amax, &max);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (int)(src[j] * id + 8.5f);
            int hi = (int)(src[j + TS_QK / 2] * id + 8.5f);
            lo = lo < 15 ? lo : 15;
            hi = hi < 15 ? hi : 15;
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void ts_q_to_float_q4_0_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        for (int j = 0; j < TS_QK / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + TS_QK / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void ts_q_dot_q4_0_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q4_0 *bx = x;
    const ts_block_q8_0 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            isum += ((bx[i].qs[j] & 0xF) - 8) * by[i].qs[j];
            isum += ((bx[i].qs[j] >> 4) - 8) * by[i].qs[j + TS_QK / 2];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}

/* ---- Q4_1: asymmetric 4-bit over [min, max] ---- */

void ts_q_from_float_q4_1_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float min, max;
        min_max(src, TS_QK, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        b[i].m = ts_f32_to_f16(min);
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (int)((src[j] - min) * id + 0.5f);
            int hi = (int)((src[j + TS_QK / 2] - min) * id + 0.5f);
            lo = lo < 15 ? lo : 15;
            hi = hi < 15 ? hi : 15;
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void ts_q_to_float_q4_1_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        const float m = ts_fp16_load(b[i].m);
        for (int j = 0; j < TS_QK / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            dst[j + TS_QK / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void ts_q_dot_q4_1_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q4_1 *bx = x;
    const ts_block_q8_1 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            isum += (bx[i].qs[j] & 0xF) * by[i].qs[j];
            isum += (bx[i].qs[j] >> 4) * by[i].qs[j + TS_QK / 2];
        }
        /* sum(x*y) = d_x d_y sum(q_x q_y) + m_x * (d_y sum(q_y)), and the last factor is s. */
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d)) +
               ts_fp16_load(bx[i].m) * ts_fp16_load(by[i].s);
    }
    *result = sum;
}

/* ---- Q5_0 / Q5_1: Q4_0 / Q4_1 with a fifth bit per element in qh ---- */

static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) |
           ((uint32_t)qh[3] << 24);
}

static inline void store_qh(uint8_t qh[4], uint32_t v) {
    for (int i = 0; i < 4; i++) {
        qh[i] = (uint8_t)(v >> (8 * i));
    }
}

void ts_q_from_float_q5_0_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float amax, max;
        signed_absmax(src, TS_QK, &amax, &max);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (int)(src[j] * id + 16.5f);
            int hi = (int)(src[j + TS_QK / 2] * id + 16.5f);
            lo = lo < 31 ? lo : 31;
            hi = hi < 31 ? hi : 31;
            b[i].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + TS_QK / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

void ts_q_to_float_q5_0_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        const uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)(lo - 16) * d;
            dst[j + TS_QK / 2] = (float)(hi - 16) * d;
        }
    }
}

void ts_q_dot_q5_0_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q5_0 *bx = x;
    const ts_block_q8_0 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const uint32_t qh = load_qh(bx[i].qh);
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (bx[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (bx[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += (lo - 16) * by[i].qs[j] + (hi - 16) * by[i].qs[j + TS_QK / 2];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}

void ts_q_from_float_q5_1_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float min, max;
        min_max(src, TS_QK, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        b[i].m = ts_f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            /* ggml does not clamp here; (max - min) * id stays below 31.5. */
            int lo = (uint8_t)((src[j] - min) * id + 0.5f);
            int hi = (uint8_t)((src[j + TS_QK / 2] - min) * id + 0.5f);
            b[i].qs[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + TS_QK / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

void ts_q_to_float_q5_1_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        const float m = ts_fp16_load(b[i].m);
        const uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)lo * d + m;
            dst[j + TS_QK / 2] = (float)hi * d + m;
        }
    }
}

void ts_q_dot_q5_1_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q5_1 *bx = x;
    const ts_block_q8_1 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        const uint32_t qh = load_qh(bx[i].qh);
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            int lo = (bx[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (bx[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += lo * by[i].qs[j] + hi * by[i].qs[j + TS_QK / 2];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d)) +
               ts_fp16_load(bx[i].m) * ts_fp16_load(by[i].s);
    }
    *result = sum;
}

/* ---- Q8_0 / Q8_1: symmetric 8-bit, round half away from zero ---- */

static float absmax_scale_127(const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < TS_QK; j++) {
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    }
    return amax / 127.0f;
}

void ts_q_from_float_q8_0_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        const float d = absmax_scale_127(src);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        for (int j = 0; j < TS_QK; j++) {
            b[i].qs[j] = (int8_t)roundf(src[j] * id);
        }
    }
}

void ts_q_to_float_q8_0_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        for (int j = 0; j < TS_QK; j++) {
            dst[j] = (float)b[i].qs[j] * d;
        }
    }
}

void ts_q_dot_q8_0_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q8_0 *bx = x;
    const ts_block_q8_0 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK; j++) {
            isum += bx[i].qs[j] * by[i].qs[j];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}

void ts_q_from_float_q8_1_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        const float d = absmax_scale_127(src);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = ts_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < TS_QK; j++) {
            b[i].qs[j] = (int8_t)roundf(src[j] * id);
            sum += b[i].qs[j];
        }
        b[i].s = ts_f32_to_f16((float)sum * d);
    }
}

void ts_q_to_float_q8_1_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        for (int j = 0; j < TS_QK; j++) {
            dst[j] = (float)b[i].qs[j] * d;
        }
    }
}

/* Q8_1 is an activation type; as a "weight" it pairs with itself. */
void ts_q_dot_q8_1_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_q8_1 *bx = x;
    const ts_block_q8_1 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK; j++) {
            isum += bx[i].qs[j] * by[i].qs[j];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}

/* ---- IQ4_NL: 4-bit indices into a fixed non-uniform table, one f16 scale ---- */

/* Index of the table level nearest to v (the lower one on exact ties). */
int ts_iq4nl_nearest(float v) {
    const int8_t *t = ts_iq4nl_values;
    if (v <= t[0]) {
        return 0;
    }
    if (v >= t[15]) {
        return 15;
    }
    int lo = 0;
    int hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return v - t[lo] < t[hi] - v ? lo : hi;
}

/* Weighted least-squares fit of the scale, trying 15 candidate inverse scales around the
 * one that maps the extreme value onto the outermost level (what llama-quantize does: no
 * importance matrix, weights x^2, seven steps either side). */
#define IQ4NL_STEPS 7

float ts_iq4nl_fit_scale(const float *x) {
    const int8_t *t = ts_iq4nl_values;
    float w[TS_QK];
    for (int j = 0; j < TS_QK; j++) {
        w[j] = x[j] * x[j];
    }
    float amax, max;
    signed_absmax(x, TS_QK, &amax, &max);
    if (amax < 1e-15f) {
        return 0.0f;
    }
    float d = -max / (float)t[0];
    float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < TS_QK; j++) {
        float q = t[ts_iq4nl_nearest(id * x[j])];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int step = -IQ4NL_STEPS; step <= IQ4NL_STEPS; step++) {
        id = (float)(step + t[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < TS_QK; j++) {
            float q = t[ts_iq4nl_nearest(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void quantize_block_iq4_nl(const float *x, ts_block_iq4_nl *out) {
    uint8_t idx[TS_QK];
    const float d = ts_iq4nl_fit_scale(x);
    out->d = ts_f32_to_f16(d);
    /* The final indices come from the unrounded f32 scale, as in ggml. */
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < TS_QK; j++) {
        idx[j] = (uint8_t)ts_iq4nl_nearest(id * x[j]);
    }
    for (int j = 0; j < TS_QK / 2; j++) {
        out->qs[j] = (uint8_t)(idx[j] | (idx[j + TS_QK / 2] << 4));
    }
}

void ts_q_from_float_iq4_nl_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_iq4_nl *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        quantize_block_iq4_nl(src + i * TS_QK, &b[i]);
    }
}

void ts_q_to_float_iq4_nl_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_fp16_load(b[i].d);
        for (int j = 0; j < TS_QK / 2; j++) {
            dst[j] = d * (float)ts_iq4nl_values[b[i].qs[j] & 0xF];
            dst[j + TS_QK / 2] = d * (float)ts_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

void ts_q_dot_iq4_nl_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_iq4_nl *bx = x;
    const ts_block_q8_0 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            isum += ts_iq4nl_values[bx[i].qs[j] & 0xF] * by[i].qs[j];
            isum += ts_iq4nl_values[bx[i].qs[j] >> 4] * by[i].qs[j + TS_QK / 2];
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}

/* ---- MXFP4: E2M1 codes with one shared power-of-two scale (E8M0) ----
 *
 * The quantizer is ggml's reference (quantize_row_mxfp4_ref; llama.cpp has no importance-
 * matrix variant): the shared exponent puts the block's largest magnitude amax in [4, 8) times
 * the scale 2^(e - 127), e = floor(log2(amax)) - 2 + 127, so the top code 6 holds values up to
 * 6 scales and larger ones saturate to it (the OCP MX rule); each element then takes the code
 * nearest to it. Both steps use the same f32 operations as ggml: log2f and floorf for the
 * exponent (so the choice follows the C library's log2f where amax sits just below a power of
 * two, as llama.cpp's does), and |value * scale - x| compared in f32 for the code, the first of
 * equally near codes winning (the smaller magnitude; code 0 for zeros of either sign and NaN).
 *
 * One deliberate difference: ggml converts the exponent to uint8_t unchecked, which is
 * undefined (and on x86 gives 255, a block its own validator rejects) for amax < 2^-125 and
 * for an infinite amax. Here it is clamped to 0 .. 254, so such blocks are valid and their
 * values as near as the format allows. Blocks of all zeros get e = 0, as in ggml. */

/* Index of the code nearest to x at half-scale d (ggml's search over the 16 codes, smaller
 * magnitude first on ties). The search runs over the eight magnitudes with |x|: for x < 0 the
 * negative codes' errors are exactly these (IEEE subtraction is sign-symmetric), and the
 * positive codes' are never smaller than code 0's, which comes first. */
static uint8_t mxfp4_code(float x, float d) {
    const float ax = fabsf(x);
    int best = 0;
    float best_err = fabsf((float)ts_mxfp4_values[0] * d - ax);
    for (int m = 1; m < 8; m++) {
        const float err = fabsf((float)ts_mxfp4_values[m] * d - ax);
        if (err < best_err) {
            best = m;
            best_err = err;
        }
    }
    return (uint8_t)(best != 0 && x < 0.0f ? best + 8 : best);
}

/* The shared exponent for a block whose largest magnitude is amax (see above). */
static uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0.0f)) {
        return 0;
    }
    const float e = floorf(log2f(amax)) - 2.0f + 127.0f;
    return e < 0.0f ? 0 : e > 254.0f ? 254 : (uint8_t)e;
}

void ts_q_from_float_mxfp4_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK == 0);
    ts_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, src += TS_QK) {
        float amax = 0.0f;
        for (int j = 0; j < TS_QK; j++) {
            amax = amax < fabsf(src[j]) ? fabsf(src[j]) : amax;
        }
        b[i].e = mxfp4_exponent(amax);
        const float d = ts_e8m0_half(b[i].e);
        for (int j = 0; j < TS_QK / 2; j++) {
            b[i].qs[j] =
                (uint8_t)(mxfp4_code(src[j], d) | (mxfp4_code(src[j + TS_QK / 2], d) << 4));
        }
    }
}

void ts_q_to_float_mxfp4_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK == 0);
    const ts_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / TS_QK; i++, dst += TS_QK) {
        const float d = ts_e8m0_half(b[i].e);
        for (int j = 0; j < TS_QK / 2; j++) {
            dst[j] = (float)ts_mxfp4_values[b[i].qs[j] & 0xF] * d;
            dst[j + TS_QK / 2] = (float)ts_mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

void ts_q_dot_mxfp4_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK == 0);
    const ts_block_mxfp4 *bx = x;
    const ts_block_q8_0 *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < TS_QK / 2; j++) {
            isum += ts_mxfp4_values[bx[i].qs[j] & 0xF] * by[i].qs[j];
            isum += ts_mxfp4_values[bx[i].qs[j] >> 4] * by[i].qs[j + TS_QK / 2];
        }
        sum += (float)isum * (ts_e8m0_half(bx[i].e) * ts_fp16_load(by[i].d));
    }
    *result = sum;
}
