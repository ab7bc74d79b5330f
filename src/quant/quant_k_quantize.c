/*
 * quant_k_quantize.c — reference quantizers of the K-quants (Q2_K .. Q6_K) and of Q8_K.
 *
 * Each super-block of 256 values is split into sub-blocks (16 or 32 values); every
 * sub-block gets its own scale (and min for Q2_K/Q4_K/Q5_K) found by a small search, then
 * the sub-block scales are themselves quantized against one f16 super-scale, and finally
 * the values are re-quantized with the rounded scales. The three searches below follow
 * ggml's reference quantizer (no importance matrix) step by step — the same candidate
 * scales, weights, error measures and f32 evaluation order — because llama.cpp files must
 * come out byte-identical. Everything is f32 arithmetic without contraction (the build
 * uses ISO C, so the compiler never fuses a*b+c here).
 */
#include <math.h>

#include "quant/quant_internal.h"

#define GROUP_EPS 1e-15f /* a group whose |max| is below this is all zeros */

static inline int clampi(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/*
 * Scale and min for an asymmetric group: x ~ scale * L + min with L in [0, nmax], min <= 0.
 * Starts from the plain min/max grid, then tries nstep+1 stretched grids
 * iscale = (nmax + rmin + rdelta * step) / (max - min), and for each solves the weighted
 * least-squares scale and min for the levels it produced; keeps the one of least weighted
 * error (absolute error when use_abs, else squared). Returns the scale; *neg_min = -min.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                           float *neg_min, uint8_t *Ltry, float rmin, float rdelta, int nstep,
                           bool use_abs) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) {
            min = x[i];
        }
        if (x[i] > max) {
            max = x[i];
        }
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) {
        min = 0;
    }
    if (max == min) {
        for (int i = 0; i < n; i++) {
            L[i] = 0;
        }
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_err = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(ts_round_even(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_abs ? fabsf(diff) : diff * diff;
        best_err += weights[i] * diff;
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * (float)step + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clampi(ts_round_even(iscale * (x[i] - min)), 0, nmax);
            Ltry[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0.0f) {
            float try_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float try_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (try_min > 0.0f) {
                try_min = 0.0f;
                try_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = try_scale * (float)Ltry[i] + try_min - x[i];
                diff = use_abs ? fabsf(diff) : diff * diff;
                err += weights[i] * diff;
            }
            if (err < best_err) {
                memcpy(L, Ltry, (size_t)n);
                best_err = err;
                scale = try_scale;
                min = try_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

static void signed_absmax(const float *x, int n, float *amax_out, float *max_out) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    *amax_out = amax;
    *max_out = max;
}

/*
 * Symmetric scale with levels L - nmax in [-nmax, nmax-1], weights x^2 (Q3_K): start from
 * the grid that puts the extreme value on -nmax, then up to five passes of coordinate
 * descent moving single levels when that raises (sum w x l)^2 / (sum w l^2). L is returned
 * biased by nmax (or all zero for an all-zero group).
 */
static float fit_symmetric_descent(int n, int nmax, const float *x, int8_t *L) {
    float amax, max;
    signed_absmax(x, n, &amax, &max);
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) {
            L[i] = 0;
        }
        return 0.0f;
    }
    const float iscale = (float)(-nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clampi(ts_round_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int l = clampi(ts_round_even(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (l != L[i]) {
                    slx += w * x[i] * (float)l;
                    sl2 += w * (float)l * (float)l;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) {
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        L[i] = (int8_t)(L[i] + nmax);
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/*
 * Symmetric scale, levels in [-nmax, nmax-1] biased by nmax, weights x^2 (Q6_K): the
 * least-squares scale of the extreme-value grid, then 18 grids with nmax stretched by
 * +-0.1 .. +-0.9, keeping the one that maximizes (sum w x l)^2 / (sum w l^2).
 */
static float fit_symmetric_grid(int n, int nmax, const float *x, int8_t *L) {
    float amax, max;
    signed_absmax(x, n, &amax, &max);
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) {
            L[i] = 0;
        }
        return 0.0f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clampi(ts_round_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; step++) {
        if (step == 0) {
            continue;
        }
        iscale = -((float)nmax + 0.1f * (float)step) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clampi(ts_round_even(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                L[i] = (int8_t)(nmax + clampi(ts_round_even(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Packs 2-bit levels of one super-block: byte 32h + l holds elements 128h + 32s + l. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
    }
}

/* ---- Q2_K ---- */

void ts_q_from_float_q2_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q2_k *b = dst;
    uint8_t L[TS_QK_K], Ltry[16];
    float weights[16], scales[16], mins[16];
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) {
                weights[l] = fabsf(src[16 * j + l]);
            }
            scales[j] = fit_scale_min(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Ltry,
                                      -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) {
                max_scale = scales[j];
            }
            if (mins[j] > max_min) {
                max_min = mins[j];
            }
        }
        if (max_scale > 0.0f) {
            const float is = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                b[i].scales[j] = (uint8_t)ts_round_even(is * scales[j]);
            }
            b[i].d = ts_f32_to_f16(max_scale / 15.0f);
        } else {
            memset(b[i].scales, 0, sizeof b[i].scales);
            b[i].d = ts_f32_to_f16(0.0f);
        }
        if (max_min > 0.0f) {
            const float im = 15.0f / max_min;
            for (int j = 0; j < 16; j++) {
                b[i].scales[j] |= (uint8_t)(ts_round_even(im * mins[j]) << 4);
            }
            b[i].dmin = ts_f32_to_f16(max_min / 15.0f);
        } else {
            b[i].dmin = ts_f32_to_f16(0.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = ts_fp16_load(b[i].d) * (float)(b[i].scales[j] & 0xF);
            if (d == 0.0f) {
                continue; /* keep the search's levels; they dequantize to -dm anyway */
            }
            const float dm = ts_fp16_load(b[i].dmin) * (float)(b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (uint8_t)clampi(ts_round_even((src[16 * j + l] + dm) / d), 0, 3);
            }
        }
        pack_2bit(L, b[i].qs);
    }
}

/* ---- Q3_K ---- */

void ts_q_from_float_q3_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q3_k *b = dst;
    int8_t L[TS_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_symmetric_descent(16, 4, src + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        if (max_scale != 0.0f) {
            const float is = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = (int8_t)ts_round_even(is * scales[j]);
                l = clampi(l, -32, 31) + 32;
                if (j < 8) {
                    b[i].scales[j] = (uint8_t)(l & 0xF);
                } else {
                    b[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                }
                b[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            b[i].d = ts_f32_to_f16(1.0f / is);
        } else {
            b[i].d = ts_f32_to_f16(0.0f);
        }
        int8_t sc[16];
        ts_q3k_scales(b[i].scales, sc);
        for (int j = 0; j < 16; j++) {
            const float d = ts_fp16_load(b[i].d) * (float)sc[j];
            if (d == 0.0f) {
                continue;
            }
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (int8_t)(clampi(ts_round_even(src[16 * j + l] / d), -4, 3) + 4);
            }
        }
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        uint8_t lo[TS_QK_K];
        for (int j = 0; j < TS_QK_K; j++) {
            int l = L[j];
            if (l > 3) {
                b[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                l -= 4;
            }
            lo[j] = (uint8_t)l;
        }
        pack_2bit(lo, b[i].qs);
    }
}

/* ---- Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins ---- */

/* Packs 6-bit scales and mins: entries 0..3 in the low 6 bits of bytes 0..3 / 4..7, entries
 * 4..7 as nibbles of bytes 8..11 with their top 2 bits in the high bits of bytes 0..7. */
static void pack_k4_scales(const float *scales, const float *mins, float max_scale, float max_min,
                           uint8_t out[12]) {
    const float is = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float im = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)ts_round_even(is * scales[j]);
        uint8_t lm = (uint8_t)ts_round_even(im * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}

/* Levels (0..nmax) of one Q4_K/Q5_K super-block; returns d/dmin through the block fields. */
static void quantize_k4_levels(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                               uint16_t *d_out, uint16_t *dmin_out, uint8_t scales_out[12]) {
    float weights[32], scales[8], mins[8];
    uint8_t Ltry[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) {
            sum_x2 += xs[l] * xs[l];
        }
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) {
            weights[l] = av_x + fabsf(xs[l]);
        }
        scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Ltry, rmin, 0.1f,
                                  nstep, false);
        if (scales[j] > max_scale) {
            max_scale = scales[j];
        }
        if (mins[j] > max_min) {
            max_min = mins[j];
        }
    }
    pack_k4_scales(scales, mins, max_scale, max_min, scales_out);
    *d_out = ts_f32_to_f16(max_scale / 63.0f);
    *dmin_out = ts_f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ts_k4_scale_min(j, scales_out, &sc, &m);
        const float d = ts_fp16_load(*d_out) * (float)sc;
        if (d == 0.0f) {
            continue;
        }
        const float dm = ts_fp16_load(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++) {
            L[32 * j + l] = (uint8_t)clampi(ts_round_even((x[32 * j + l] + dm) / d), 0, nmax);
        }
    }
}

void ts_q_from_float_q4_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q4_k *b = dst;
    uint8_t L[TS_QK_K];
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        quantize_k4_levels(src, 15, -1.0f, 20, L, &b[i].d, &b[i].dmin, b[i].scales);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
            }
        }
    }
}

void ts_q_from_float_q5_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q5_k *b = dst;
    uint8_t L[TS_QK_K];
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        quantize_k4_levels(src, 31, -0.5f, 15, L, &b[i].d, &b[i].dmin, b[i].scales);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l];
                int hi = L[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    b[i].qh[l] |= (uint8_t)(1u << (2 * c));
                }
                if (hi > 15) {
                    hi -= 16;
                    b[i].qh[l] |= (uint8_t)(2u << (2 * c));
                }
                b[i].qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

/* ---- Q6_K: 16 sub-blocks of 16 with int8 scales ---- */

void ts_q_from_float_q6_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q6_k *b = dst;
    int8_t L[TS_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        float max_scale = 0.0f, max_abs = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_symmetric_grid(16, 32, src + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs < GROUP_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float is = -128.0f / max_scale;
        b[i].d = ts_f32_to_f16(1.0f / is);
        for (int j = 0; j < 16; j++) {
            int s = ts_round_even(is * scales[j]);
            b[i].scales[j] = (int8_t)(s < 127 ? s : 127);
        }
        for (int j = 0; j < 16; j++) {
            const float d = ts_fp16_load(b[i].d) * (float)b[i].scales[j];
            if (d == 0.0f) {
                continue;
            }
            for (int l = 0; l < 16; l++) {
                L[16 * j + l] = (int8_t)(clampi(ts_round_even(src[16 * j + l] / d), -32, 31) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = b[i].ql + 64 * h;
            uint8_t *qh = b[i].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---- Q8_K: activation quantization, 256 values to int8 with an f32 scale ---- */

void ts_q_from_float_q8_k_scalar(const float *src, void *dst, int64_t n) {
    assert(n % TS_QK_K == 0);
    ts_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / TS_QK_K; i++, src += TS_QK_K) {
        float amax, max;
        signed_absmax(src, TS_QK_K, &amax, &max);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* -127 rather than -128 keeps every product of two quants within int16 pairs. */
        const float is = -127.0f / max;
        for (int j = 0; j < TS_QK_K; j++) {
            int v = ts_round_even(is * src[j]);
            b[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) {
                s += b[i].qs[16 * g + l];
            }
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1.0f / is;
    }
}
