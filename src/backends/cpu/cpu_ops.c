/*
 * cpu_ops.c — CPU kernels for elementwise and row-wise ops (threads split rows): ADD, MUL,
 * SCALE, SILU, GELU, SIGMOID, LOG, SWIGLU, GEGLU, RMS_NORM, NORM, ROPE, SOFTMAX, and their
 * descriptors.
 *
 * Each output row is written only after the same row of the first source has been read at
 * that position, so these kernels are safe for the planner's in-place placement.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/* Row (i1, i2, i3) of t for flat row index r. */
/* The vector activation of a contiguous row at the widest level (both give the same bits). */
static void act_row(ts_isa isa, float *out, const float *g, const float *u, int64_t n, bool gelu) {
    if (isa >= TS_ISA_AVX512) {
        cpu_act_row_avx512(out, g, u, n, gelu);
    } else {
        cpu_act_row_avx2(out, g, u, n, gelu);
    }
}

static void gelu_erf_row(ts_isa isa, float *out, const float *g, const float *u, int64_t n) {
    if (isa >= TS_ISA_AVX512) {
        cpu_gelu_erf_row_avx512(out, g, u, n);
    } else {
        cpu_gelu_erf_row_avx2(out, g, u, n);
    }
}

static char *row_at(const ts_tensor *t, int64_t r) {
    int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static inline float ld(const char *row, size_t nb0, int64_t i) {
    float v;
    memcpy(&v, row + i * nb0, sizeof v);
    return v;
}

static void binary(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *b = n->src[1];
    int64_t ne0 = n->ne[0], lo, hi;
    bool add = n->op == TS_OP_ADD;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1 = r % n->ne[1], i2 = (r / n->ne[1]) % n->ne[2], i3 = r / (n->ne[1] * n->ne[2]);
        float *out = (float *)row_at(n, r);
        const char *ra = row_at(a, r);
        const char *rb = (const char *)b->data + (i1 % b->ne[1]) * b->nb[1] +
                         (i2 % b->ne[2]) * b->nb[2] + (i3 % b->ne[3]) * b->nb[3];
        if (a->nb[0] == 4 && b->nb[0] == 4 && b->ne[0] == ne0) {
            const float *x = (const float *)ra, *y = (const float *)rb;
            if (add) {
                for (int64_t i = 0; i < ne0; i++) {
                    out[i] = x[i] + y[i];
                }
            } else {
                for (int64_t i = 0; i < ne0; i++) {
                    out[i] = x[i] * y[i];
                }
            }
            continue;
        }
        for (int64_t i = 0; i < ne0; i++) {
            float x = ld(ra, a->nb[0], i), y = ld(rb, b->nb[0], i % b->ne[0]);
            out[i] = add ? x + y : x * y;
        }
    }
}

static inline float silu_f(float x) {
    return x / (1.0f + expf(-x));
}

static inline float gelu_f(float x, int approx) {
    if (approx == TS_GELU_TANH) {
        const float k = 0.7978845608028654f;
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static void unary(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0];
    int64_t ne0 = n->ne[0], lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    float s = n->fp[0];
    int approx = n->ip[0];
    for (int64_t r = lo; r < hi; r++) {
        float *out = (float *)row_at(n, r);
        const char *ra = row_at(a, r);
        size_t nb0 = a->nb[0];
        switch (n->op) {
        case TS_OP_SCALE:
            for (int64_t i = 0; i < ne0; i++) {
                out[i] = ld(ra, nb0, i) * s;
            }
            break;
        case TS_OP_SILU:
            if (c->isa >= TS_ISA_AVX2 && nb0 == sizeof(float)) {
                act_row(c->isa, out, (const float *)ra, NULL, ne0, false);
                break;
            }
            for (int64_t i = 0; i < ne0; i++) {
                out[i] = silu_f(ld(ra, nb0, i));
            }
            break;
        case TS_OP_SIGMOID:
            for (int64_t i = 0; i < ne0; i++) {
                out[i] = 1.0f / (1.0f + expf(-ld(ra, nb0, i)));
            }
            break;
        case TS_OP_LOG:
            for (int64_t i = 0; i < ne0; i++) {
                out[i] = logf(ld(ra, nb0, i));
            }
            break;
        default:
            if (c->isa >= TS_ISA_AVX2 && nb0 == sizeof(float) && approx == TS_GELU_TANH) {
                act_row(c->isa, out, (const float *)ra, NULL, ne0, true);
                break;
            }
            if (c->isa >= TS_ISA_AVX2 && nb0 == sizeof(float)) {
                gelu_erf_row(c->isa, out, (const float *)ra, NULL, ne0);
                break;
            }
            for (int64_t i = 0; i < ne0; i++) {
                out[i] = gelu_f(ld(ra, nb0, i), approx);
            }
            break;
        }
    }
}

static void glu(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *g = n->src[0], *u = n->src[1];
    int64_t ne0 = n->ne[0], lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    if (n->op == TS_OP_SWIGLU_OAI) {
        /* gpt-oss's clamped SwiGLU (ir.h), scalar at every level: the expert FFNs' matmuls
         * dominate, not this. */
        float alpha = n->fp[0], limit = n->fp[1];
        for (int64_t r = lo; r < hi; r++) {
            float *out = (float *)row_at(n, r);
            const char *rg = row_at(g, r), *ru = row_at(u, r);
            for (int64_t i = 0; i < ne0; i++) {
                float x = fminf(ld(rg, g->nb[0], i), limit);
                float y = fminf(fmaxf(ld(ru, u->nb[0], i), -limit), limit);
                out[i] = (y + 1.0f) * (x / (1.0f + expf(-alpha * x)));
            }
        }
        return;
    }
    bool swi = n->op == TS_OP_SWIGLU;
    bool simd = c->isa >= TS_ISA_AVX2 && g->nb[0] == sizeof(float) && u->nb[0] == sizeof(float);
    bool erf = !swi && n->ip[0] == TS_GELU_ERF;
    for (int64_t r = lo; r < hi; r++) {
        float *out = (float *)row_at(n, r);
        const char *rg = row_at(g, r), *ru = row_at(u, r);
        if (simd && erf) {
            gelu_erf_row(c->isa, out, (const float *)rg, (const float *)ru, ne0);
            continue;
        }
        if (simd) {
            act_row(c->isa, out, (const float *)rg, (const float *)ru, ne0, !swi);
            continue;
        }
        for (int64_t i = 0; i < ne0; i++) {
            float x = ld(rg, g->nb[0], i);
            float act = swi ? silu_f(x) : gelu_f(x, n->ip[0]);
            out[i] = act * ld(ru, u->nb[0], i);
        }
    }
}

static void norm(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *w = n->src[1], *b = n->src[2];
    int64_t ne0 = n->ne[0], lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    bool rms = n->op == TS_OP_RMS_NORM;
    /* Contiguous f32 RMS norm at AVX2: the same double sum of squares (in another order) and
     * the same float operations per element, vectorized. */
    bool simd = rms && c->isa >= TS_ISA_AVX2 && a->nb[0] == sizeof(float) && b == NULL &&
                (w == NULL || (w->type == TS_TYPE_F32 && w->nb[0] == sizeof(float)));
    for (int64_t r = lo; r < hi && simd; r++) {
        const float *x = (const float *)row_at(a, r);
        double var = cpu_sumsq_row_avx2(x, ne0) / (double)ne0;
        float inv = (float)(1.0 / sqrt(var + n->fp[0]));
        cpu_scale_row_avx2((float *)row_at(n, r), x, inv, w != NULL ? w->data : NULL, ne0);
    }
    for (int64_t r = lo; r < hi && !simd; r++) {
        float *out = (float *)row_at(n, r);
        const char *ra = row_at(a, r);
        double sum = 0.0, sq = 0.0;
        for (int64_t i = 0; i < ne0; i++) {
            float x = ld(ra, a->nb[0], i);
            sum += x;
            sq += (double)x * x;
        }
        float mean = rms ? 0.0f : (float)(sum / (double)ne0);
        double var = sq / (double)ne0;
        if (!rms) {
            double v = 0.0;
            for (int64_t i = 0; i < ne0; i++) {
                double d = ld(ra, a->nb[0], i) - mean;
                v += d * d;
            }
            var = v / (double)ne0;
        }
        float inv = (float)(1.0 / sqrt(var + n->fp[0]));
        for (int64_t i = 0; i < ne0; i++) {
            float y = (ld(ra, a->nb[0], i) - mean) * inv;
            if (w != NULL) {
                y *= ld((const char *)w->data, w->nb[0], i);
            }
            if (b != NULL) {
                y += ld((const char *)b->data, b->nb[0], i);
            }
            out[i] = y;
        }
    }
}

/* cos and sin of one token (n_rot / 2 floats each), the same twice each with the sin negated
 * at even positions (the AVX2 rotation of adjacent pairs; n_rot floats each), then the
 * frequencies (n_rot / 2 doubles, after up to 2 floats of alignment slack). */
static void rope_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    (void)isa;
    (void)shared;
    *per_thread =
        (size_t)(3 * n->ip[0] + 2) * sizeof(float) + (size_t)n->ip[0] / 2 * sizeof(double);
}

static void rope(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *pos = n->src[1];
    int64_t n_rot = n->ip[0], half = n_rot / 2, nh = n->ne[1], lo, hi;
    bool neox = n->ip[1] == TS_ROPE_NEOX;
    double base = n->fp[0], fscale = n->fp[1], ext = n->fp[2], mscale = n->fp[3];
    const float *ff = n->src[2] != NULL ? (const float *)n->src[2]->data : NULL;
    float *cs = c->local, *sn = cs + half, *cs2 = sn + half, *sn2 = cs2 + n_rot;
    double *freq = (double *)(((uintptr_t)(sn2 + n_rot) + 7) & ~(uintptr_t)7); /* 2 floats slack */
    const bool simd = c->isa >= TS_ISA_AVX2 && a->nb[0] == sizeof(float);
    int64_t cached = -1;
    cpu_split(nh * n->ne[2], c->ith, c->nth, &lo, &hi);
    /* Each pair's angle is pos times a constant: the extrapolated frequency (divided by the
     * pair's factor) times the mix of interpolation (fscale) and extrapolation (1) that the
     * YaRN ramp gives it. */
    for (int64_t i = 0; i < half && lo < hi; i++) {
        double f = pow(base, -2.0 * (double)i / (double)n_rot) / (ff != NULL ? ff[i] : 1.0);
        double mix = fscale;
        if (ext != 0.0) {
            double y = ((double)i - n->fp[4]) / fmax(0.001, (double)n->fp[5] - n->fp[4]);
            double ramp = ext * (1.0 - fmin(1.0, fmax(0.0, y)));
            mix = fscale * (1.0 - ramp) + ramp;
        }
        freq[i] = f * mix;
    }
    for (int64_t r = lo; r < hi; r++) {
        int64_t h = r % nh, t = r / nh;
        if (t != cached) {
            int32_t p;
            memcpy(&p, (const char *)pos->data + t * pos->nb[0], sizeof p);
            for (int64_t i = 0; i < half; i++) {
                double theta = (double)p * freq[i];
                cs[i] = (float)(mscale * cos(theta));
                sn[i] = (float)(mscale * sin(theta));
                cs2[2 * i] = cs2[2 * i + 1] = cs[i];
                sn2[2 * i] = -sn[i];
                sn2[2 * i + 1] = sn[i];
            }
            cached = t;
        }
        const char *ra = (const char *)a->data + h * a->nb[1] + t * a->nb[2];
        float *out = (float *)((char *)n->data + h * n->nb[1] + t * n->nb[2]);
        if (simd && neox) {
            cpu_rope_halves_avx2(out, (const float *)ra, cs, sn, half);
        } else if (simd) {
            cpu_rope_pairs_avx2(out, (const float *)ra, cs2, sn2, half);
        }
        for (int64_t i = 0; i < half && !simd; i++) {
            int64_t d0 = neox ? i : 2 * i, d1 = neox ? i + half : 2 * i + 1;
            float x0 = ld(ra, a->nb[0], d0), x1 = ld(ra, a->nb[0], d1);
            out[d0] = x0 * cs[i] - x1 * sn[i];
            out[d1] = x0 * sn[i] + x1 * cs[i];
        }
        for (int64_t d = n_rot; d < n->ne[0]; d++) {
            out[d] = ld(ra, a->nb[0], d);
        }
    }
}

static void softmax(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *mask = n->src[1], *sinks = n->src[2];
    int64_t ne0 = n->ne[0], lo, hi;
    float scale = n->fp[0], cap = n->fp[1];
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *out = (float *)row_at(n, r);
        const char *ra = row_at(a, r);
        const float *mrow =
            mask != NULL ? (const float *)((const char *)mask->data + (r % n->ne[1]) * mask->nb[1])
                         : NULL;
        float mx = -INFINITY;
        for (int64_t i = 0; i < ne0; i++) {
            float z = ld(ra, a->nb[0], i) * scale;
            if (cap > 0.0f) {
                z = cap * tanhf(z / cap);
            }
            if (mrow != NULL) {
                z += ld((const char *)mrow, mask->nb[0], i);
            }
            out[i] = z;
            mx = z > mx ? z : mx;
        }
        if (mx == -INFINITY) {
            memset(out, 0, (size_t)ne0 * sizeof *out);
            continue;
        }
        double sum = 0.0;
        if (sinks != NULL) {
            /* The row's attention sink (by its dim-2 index) joins the denominator. */
            float sk = ((const float *)sinks->data)[(r / n->ne[1]) % n->ne[2]];
            mx = sk > mx ? sk : mx;
            sum = expf(sk - mx);
        }
        for (int64_t i = 0; i < ne0; i++) {
            out[i] = expf(out[i] - mx);
            sum += out[i];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < ne0; i++) {
            out[i] *= inv;
        }
    }
}

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_ADD, .run = binary},      {.op = TS_OP_MUL, .run = binary},
    {.op = TS_OP_SCALE, .run = unary},     {.op = TS_OP_SILU, .run = unary},
    {.op = TS_OP_GELU, .run = unary},      {.op = TS_OP_SWIGLU, .run = glu},
    {.op = TS_OP_GEGLU, .run = glu},       {.op = TS_OP_RMS_NORM, .run = norm},
    {.op = TS_OP_NORM, .run = norm},       {.op = TS_OP_ROPE, .run = rope, .scratch = rope_scratch},
    {.op = TS_OP_SOFTMAX, .run = softmax}, {.op = TS_OP_SIGMOID, .run = unary},
    {.op = TS_OP_SWIGLU_OAI, .run = glu},
    {.op = TS_OP_LOG, .run = unary},
};
const cpu_op_table cpu_rowwise_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
