/*
 * quant_iq4xs.c — scalar reference of IQ4_XS: quantization (byte-exact with llama-quantize
 * without an importance matrix), dequantization, and the dot product with Q8_K.
 *
 * A super-block of 256 values is eight sub-blocks of 32. Each sub-block gets its own scale
 * from IQ4_NL's search (ts_iq4nl_fit_scale); the super-block scale d is the one that puts the
 * sub-block scale of largest magnitude at -32 (d = -max / 32), every sub-block scale is then
 * rounded to ls in -32..31 (stored biased by 32 as six bits), and the indices are chosen again
 * against the rounded d * ls (computed in f32 from the unrounded d, as ggml does).
 */
#include <math.h>

#include "quant/quant_internal.h"

#define IQ4XS_SUB  32
#define IQ4XS_NSUB (TS_QK_K / IQ4XS_SUB)

static void quantize_block_iq4_xs(const float *x, ts_block_iq4_xs *out) {
    float scales[IQ4XS_NSUB];
    float amax_scale = 0.0f, max_scale = 0.0f;
    for (int j = 0; j < IQ4XS_NSUB; j++) {
        scales[j] = ts_iq4nl_fit_scale(x + IQ4XS_SUB * j);
        const float a = fabsf(scales[j]);
        if (a > amax_scale) {
            amax_scale = a;
            max_scale = scales[j];
        }
    }
    /* -max_scale / 32: -0.0 for an all-zero block, written as the f16 -0 llama.cpp writes. */
    const float d = -max_scale / 32.0f;
    out->d = ts_f32_to_f16(d);
    out->scales_h = 0;
    memset(out->scales_l, 0, sizeof out->scales_l);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t idx[TS_QK_K];
    for (int j = 0; j < IQ4XS_NSUB; j++) {
        int l = ts_round_even(id * scales[j]);
        l = l < -32 ? -32 : (l > 31 ? 31 : l);
        const float dl = d * (float)l;
        const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int e = 0; e < IQ4XS_SUB; e++) {
            idx[IQ4XS_SUB * j + e] = (uint8_t)ts_iq4nl_nearest(idl * x[IQ4XS_SUB * j + e]);
        }
        const unsigned biased = (unsigned)(l + 32);
        out->scales_l[j / 2] |= (uint8_t)((biased & 0xF) << (4 * (j % 2)));
        out->scales_h |= (uint16_t)((biased >> 4) << (2 * j));
    }
    for (int j = 0; j < IQ4XS_NSUB; j++) {
        for (int l = 0; l < 16; l++) {
            out->qs[16 * j + l] = (uint8_t)(idx[32 * j + l] | (idx[32 * j + 16 + l] << 4));
        }
    }
}

void ts_q_from_float_iq4_xs_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_iq4_xs *b = dst;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        quantize_block_iq4_xs(src + i * TS_QK_K, &b[i]);
    }
}

void ts_q_to_float_iq4_xs_scalar(const void *src, float *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    const ts_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        const float d = ts_fp16_load(b[i].d);
        for (int j = 0; j < IQ4XS_NSUB; j++, dst += IQ4XS_SUB) {
            const float dl = d * (float)ts_iq4xs_scale(&b[i], j);
            const uint8_t *qs = b[i].qs + 16 * j;
            for (int l = 0; l < 16; l++) {
                dst[l] = dl * (float)ts_iq4nl_values[qs[l] & 0xF];
                dst[l + 16] = dl * (float)ts_iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

/* Per super-block: the exact integer sum over sub-blocks of ls * sum(level * y), then one f32
 * product with d * d_y. */
void ts_q_dot_iq4_xs_scalar(int64_t n, float *result, const void *x, const void *y) {
    assert(n % TS_QK_K == 0);
    const ts_block_iq4_xs *bx = x;
    const ts_block_q8_k *by = y;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        int32_t isum = 0;
        for (int j = 0; j < IQ4XS_NSUB; j++) {
            const uint8_t *qs = bx[i].qs + 16 * j;
            const int8_t *q8 = by[i].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 16; l++) {
                s += ts_iq4nl_values[qs[l] & 0xF] * q8[l];
                s += ts_iq4nl_values[qs[l] >> 4] * q8[l + 16];
            }
            isum += ts_iq4xs_scale(&bx[i], j) * s;
        }
        sum += (float)isum * (ts_fp16_load(bx[i].d) * by[i].d);
    }
    *result = sum;
}
