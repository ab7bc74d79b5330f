/*
 * ref_ops.c — reference kernels for row and elementwise ops, copies and index ops.
 *
 * Every kernel reads each source element of a row before writing the same position of the
 * output, so the planner may run the elementwise and row-wise ones in place.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/ref/ref_internal.h"
#include "util/error.h"

#define FOR_ROWS(t)                                                                                \
    for (int64_t i3 = 0; i3 < (t)->ne[3]; i3++)                                                    \
        for (int64_t i2 = 0; i2 < (t)->ne[2]; i2++)                                                \
            for (int64_t i1 = 0; i1 < (t)->ne[1]; i1++)

void ref_read_row(const ts_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *dst) {
    if (ts_type_block_size(t->type) > 1 ||
        (t->type != TS_TYPE_F32 && t->type != TS_TYPE_F16 && t->type != TS_TYPE_BF16)) {
        const ts_quant_ops *q = ts_quant_ops_get(t->type, TS_ISA_SCALAR);
        q->to_float(ref_at(t, 0, i1, i2, i3), dst, t->ne[0]);
        return;
    }
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
        dst[i0] = ref_getf(t, i0, i1, i2, i3);
    }
}

static float *row_buffer(int64_t n, const ts_tensor *node, ts_error *err) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (p == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "ref: node '%s': out of memory", node->name);
    }
    return p;
}

ts_status ref_get_rows(ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0], *idx = n->src[1];
    float *row = row_buffer(a->ne[0], n, err);
    if (row == NULL) {
        return TS_ERR_NOMEM;
    }
    for (int64_t j2 = 0; j2 < idx->ne[2]; j2++) {
        for (int64_t j1 = 0; j1 < idx->ne[1]; j1++) {
            for (int64_t j0 = 0; j0 < idx->ne[0]; j0++) {
                int32_t r = ref_geti(idx, j0, j1, j2);
                if (r >= a->ne[1]) {
                    free(row);
                    return ts_error_set(err, TS_ERR_RANGE,
                                        "GET_ROWS '%s': index %d at [%lld, %lld, %lld] is past "
                                        "the %lld rows of '%s'", n->name, (int)r, (long long)j0,
                                        (long long)j1, (long long)j2, (long long)a->ne[1],
                                        a->name);
                }
                if (r < 0) {
                    for (int64_t i = 0; i < a->ne[0]; i++) {
                        row[i] = 0.0f;
                    }
                } else {
                    ref_read_row(a, r, 0, 0, row);
                }
                for (int64_t i = 0; i < a->ne[0]; i++) {
                    ref_setf(n, i, j0, j1, j2, row[i]);
                }
            }
        }
    }
    free(row);
    return TS_OK;
}

ts_status ref_binary(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0], *b = n->src[1];
    FOR_ROWS(n) {
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            float x = ref_getf(a, i0, i1, i2, i3);
            float y = ref_getf(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
            ref_setf(n, i0, i1, i2, i3, n->op == TS_OP_ADD ? x + y : x * y);
        }
    }
    return TS_OK;
}

static double gelu(double x, int approx) {
    if (approx == TS_GELU_TANH) {
        const double c = 0.7978845608028654; /* sqrt(2/pi) */
        return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x / 1.4142135623730951));
}

static double silu(double x) {
    return x / (1.0 + exp(-x));
}

ts_status ref_unary(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0];
    FOR_ROWS(n) {
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            double x = ref_getf(a, i0, i1, i2, i3), y;
            switch (n->op) {
            case TS_OP_SCALE: y = x * n->fp[0]; break;
            case TS_OP_SILU: y = silu(x); break;
            case TS_OP_SIGMOID:
                y = 1.0 / (1.0 + exp(-x));
                break;
            case TS_OP_LOG:
                y = log(x);
                break;
            default: y = gelu(x, n->ip[0]); break;
            }
            ref_setf(n, i0, i1, i2, i3, (float)y);
        }
    }
    return TS_OK;
}

ts_status ref_glu(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *g = n->src[0], *u = n->src[1];
    FOR_ROWS(n) {
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            double x = ref_getf(g, i0, i1, i2, i3), up = ref_getf(u, i0, i1, i2, i3);
            if (n->op == TS_OP_SWIGLU_OAI) {
                double alpha = n->fp[0], limit = n->fp[1];
                x = x < limit ? x : limit;
                up = up < -limit ? -limit : (up > limit ? limit : up);
                double y = (up + 1.0) * x / (1.0 + exp(-alpha * x));
                ref_setf(n, i0, i1, i2, i3, (float)y);
                continue;
            }
            double act = n->op == TS_OP_SWIGLU ? silu(x) : gelu(x, n->ip[0]);
            ref_setf(n, i0, i1, i2, i3, (float)(act * up));
        }
    }
    return TS_OK;
}

ts_status ref_norm(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0], *w = n->src[1], *b = n->src[2];
    int64_t ne0 = n->ne[0];
    FOR_ROWS(n) {
        double mean = 0.0, sq = 0.0;
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            double x = ref_getf(a, i0, i1, i2, i3);
            mean += x;
            sq += x * x;
        }
        mean /= (double)ne0;
        double inv;
        if (n->op == TS_OP_RMS_NORM) {
            inv = 1.0 / sqrt(sq / (double)ne0 + n->fp[0]);
            mean = 0.0;
        } else {
            double var = 0.0;
            for (int64_t i0 = 0; i0 < ne0; i0++) {
                double d = ref_getf(a, i0, i1, i2, i3) - mean;
                var += d * d;
            }
            inv = 1.0 / sqrt(var / (double)ne0 + n->fp[0]);
        }
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            double y = (ref_getf(a, i0, i1, i2, i3) - mean) * inv;
            if (w != NULL) {
                y *= ref_getf(w, i0, 0, 0, 0);
            }
            if (b != NULL) {
                y += ref_getf(b, i0, 0, 0, 0);
            }
            ref_setf(n, i0, i1, i2, i3, (float)y);
        }
    }
    return TS_OK;
}

ts_status ref_rope(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0], *pos = n->src[1], *ff = n->src[2];
    int64_t n_rot = n->ip[0], half = n_rot / 2;
    bool neox = n->ip[1] == TS_ROPE_NEOX;
    double base = n->fp[0], fscale = n->fp[1], ext = n->fp[2], mscale = n->fp[3];
    double lo = n->fp[4], hi = n->fp[5];
    for (int64_t t = 0; t < n->ne[2]; t++) {
        double p = (double)ref_geti(pos, t, 0, 0);
        for (int64_t h = 0; h < n->ne[1]; h++) {
            for (int64_t i = 0; i < half; i++) {
                double theta_e = p * pow(base, -2.0 * (double)i / (double)n_rot);
                if (ff != NULL) {
                    theta_e /= ref_getf(ff, i, 0, 0, 0);
                }
                double theta = fscale * theta_e;
                if (ext != 0.0) {
                    double y = ((double)i - lo) / fmax(0.001, hi - lo);
                    double r = ext * (1.0 - fmin(1.0, fmax(0.0, y)));
                    theta = theta * (1.0 - r) + theta_e * r;
                }
                int64_t d0 = neox ? i : 2 * i, d1 = neox ? i + half : 2 * i + 1;
                double x0 = ref_getf(a, d0, h, t, 0), x1 = ref_getf(a, d1, h, t, 0);
                double c = mscale * cos(theta), s = mscale * sin(theta);
                ref_setf(n, d0, h, t, 0, (float)(x0 * c - x1 * s));
                ref_setf(n, d1, h, t, 0, (float)(x0 * s + x1 * c));
            }
            for (int64_t d = n_rot; d < n->ne[0]; d++) {
                ref_setf(n, d, h, t, 0, ref_getf(a, d, h, t, 0));
            }
        }
    }
    return TS_OK;
}

ts_status ref_softmax(ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0], *mask = n->src[1], *sinks = n->src[2];
    float scale = n->fp[0], cap = n->fp[1];
    float *z = row_buffer(n->ne[0], n, err);
    if (z == NULL) {
        return TS_ERR_NOMEM;
    }
    FOR_ROWS(n) {
        double mx = -INFINITY;
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            double x = (double)ref_getf(a, i0, i1, i2, i3) * scale;
            if (cap > 0.0f) {
                x = cap * tanh(x / cap);
            }
            if (mask != NULL) {
                x += ref_getf(mask, i0, i1, 0, 0);
            }
            z[i0] = (float)x;
            mx = x > mx ? x : mx;
        }
        double sum = 0.0;
        if (sinks != NULL && mx != -INFINITY) {
            /* The sink's logit joins the denominator (the max moves to it if larger). */
            double sk = ref_getf(sinks, i2, 0, 0, 0);
            if (sk > mx) {
                mx = sk;
            }
            sum += exp(sk - mx);
        }
        for (int64_t i0 = 0; i0 < n->ne[0] && mx != -INFINITY; i0++) {
            sum += exp((double)z[i0] - mx);
        }
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            double y = mx == -INFINITY ? 0.0 : exp((double)z[i0] - mx) / sum;
            ref_setf(n, i0, i1, i2, i3, (float)y);
        }
    }
    free(z);
    return TS_OK;
}

/* Unravels linear element index k over extents ne (row-major, ne[0] fastest). */
static void unravel(int64_t k, const int64_t *ne, int64_t *i) {
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        i[d] = k % ne[d];
        k /= ne[d];
    }
}

ts_status ref_copy(ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0];
    bool q_src = ts_type_block_size(a->type) > 1;
    bool q_dst = ts_type_block_size(n->type) > 1;
    if (n->op == TS_OP_CONT && (q_src || a->type == TS_TYPE_I32 || a->type == TS_TYPE_I8 ||
                                a->type == TS_TYPE_I16 || a->type == TS_TYPE_I64 ||
                                a->type == TS_TYPE_F64)) {
        /* Same type: copy raw rows (block types) or raw elements (integer types). */
        size_t unit = ts_type_block_bytes(a->type);
        int64_t units = a->ne[0] / (int64_t)ts_type_block_size(a->type);
        FOR_ROWS(n) {
            for (int64_t u = 0; u < units; u++) {
                memcpy(ref_at(n, u, i1, i2, i3), ref_at(a, u, i1, i2, i3), unit);
            }
        }
        return TS_OK;
    }
    if (q_src || q_dst) {
        /* Row to row (the checker guarantees equal row lengths). */
        float *row = row_buffer(a->ne[0], n, err);
        if (row == NULL) {
            return TS_ERR_NOMEM;
        }
        const ts_quant_ops *qd = q_dst ? ts_quant_ops_get(n->type, TS_ISA_SCALAR) : NULL;
        int64_t r = 0, idx[4];
        FOR_ROWS(a) {
            ref_read_row(a, i1, i2, i3, row);
            unravel(r++ * a->ne[0], n->ne, idx);
            if (qd != NULL) {
                qd->from_float(row, ref_at(n, 0, idx[1], idx[2], idx[3]), n->ne[0]);
            } else {
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
                    ref_setf(n, i0, idx[1], idx[2], idx[3], row[i0]);
                }
            }
        }
        free(row);
        return TS_OK;
    }
    int64_t k = 0, idx[4];
    FOR_ROWS(a) {
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
            unravel(k++, n->ne, idx);
            ref_setf(n, idx[0], idx[1], idx[2], idx[3], ref_getf(a, i0, i1, i2, i3));
        }
    }
    return TS_OK;
}

ts_status ref_concat(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0], *b = n->src[1];
    int dim = n->ip[0];
    FOR_ROWS(n) {
        for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
            int64_t i[4] = {i0, i1, i2, i3};
            float v;
            if (i[dim] < a->ne[dim]) {
                v = ref_getf(a, i[0], i[1], i[2], i[3]);
            } else {
                i[dim] -= a->ne[dim];
                v = ref_getf(b, i[0], i[1], i[2], i[3]);
            }
            ref_setf(n, i0, i1, i2, i3, v);
        }
    }
    return TS_OK;
}

ts_status ref_argmax(ts_tensor *n, ts_error *err) {
    (void)err;
    const ts_tensor *a = n->src[0];
    FOR_ROWS(a) {
        int32_t best = 0;
        float bv = ref_getf(a, 0, i1, i2, i3);
        for (int64_t i0 = 1; i0 < a->ne[0]; i0++) {
            float v = ref_getf(a, i0, i1, i2, i3);
            if (v > bv) {
                bv = v;
                best = (int32_t)i0;
            }
        }
        memcpy(ref_at(n, i1, i2, i3, 0), &best, 4);
    }
    return TS_OK;
}
