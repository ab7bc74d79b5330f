/*
 * ref_attn.c — reference MUL_MAT and the paged-KV ops (KV_STORE, ATTENTION, ATTN_MASK).
 */
#include <math.h>
#include <stdlib.h>

#include "backends/ref/ref_internal.h"
#include "util/error.h"

ts_status ref_mul_mat(ts_tensor *n, ts_error *err) {
    const ts_tensor *w = n->src[0], *x = n->src[1];
    int64_t k = w->ne[0];
    float *wrow = malloc((size_t)k * sizeof *wrow);
    if (wrow == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ref: MUL_MAT '%s': out of memory", n->name);
    }
    int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    for (int64_t c3 = 0; c3 < n->ne[3]; c3++) {
        for (int64_t c2 = 0; c2 < n->ne[2]; c2++) {
            for (int64_t i = 0; i < n->ne[0]; i++) {
                ref_read_row(w, i, c2 / r2, c3 / r3, wrow);
                for (int64_t j = 0; j < n->ne[1]; j++) {
                    double acc = 0.0;
                    for (int64_t kk = 0; kk < k; kk++) {
                        acc += (double)wrow[kk] * (double)ref_getf(x, kk, j, c2, c3);
                    }
                    ref_setf(n, i, j, c2, c3, (float)acc);
                }
            }
        }
    }
    free(wrow);
    return TS_OK;
}

ts_status ref_kv_store(ts_tensor *n, ts_error *err) {
    const ts_tensor *cache = n->src[0], *rows = n->src[1], *slots = n->src[2];
    int64_t bs = cache->ne[2], n_slots = cache->ne[2] * cache->ne[3];
    /* A block-quantized cache (Q8_0) takes whole [hd] rows through the scalar from_float. */
    const ts_quant_ops *qops =
        ts_type_block_size(cache->type) > 1 ? ts_quant_ops_get(cache->type, TS_ISA_SCALAR) : NULL;
    float *row = qops != NULL ? malloc((size_t)rows->ne[0] * sizeof *row) : NULL;
    if (qops != NULL && row == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ref: KV_STORE '%s': out of memory", n->name);
    }
    for (int64_t t = 0; t < rows->ne[2]; t++) {
        int32_t slot = ref_geti(slots, t, 0, 0);
        if (slot < 0) {
            continue;
        }
        if (slot >= n_slots) {
            free(row);
            return ts_error_set(err, TS_ERR_RANGE,
                                "KV_STORE '%s': token %lld slot %d is past the %lld slots of '%s'",
                                n->name, (long long)t, (int)slot, (long long)n_slots,
                                cache->name);
        }
        for (int64_t h = 0; h < rows->ne[1]; h++) {
            if (qops != NULL) {
                for (int64_t d = 0; d < rows->ne[0]; d++) {
                    row[d] = ref_getf(rows, d, h, t, 0);
                }
                qops->from_float(row, ref_at(n, 0, h, slot % bs, slot / bs), rows->ne[0]);
                continue;
            }
            for (int64_t d = 0; d < rows->ne[0]; d++) {
                ref_setf(n, d, h, slot % bs, slot / bs, ref_getf(rows, d, h, t, 0));
            }
        }
    }
    free(row);
    return TS_OK;
}

/* Checks token t's sequence and length; returns the sequence's key count via *len. */
static ts_status seq_of(const ts_tensor *n, const ts_tensor *seq, const ts_tensor *lens,
                        int64_t t, int64_t cap, int32_t *s_out, int32_t *len_out,
                        ts_error *err) {
    int32_t s = ref_geti(seq, t, 0, 0);
    if (s < 0 || s >= lens->ne[0]) {
        return ts_error_set(err, TS_ERR_RANGE, "%s '%s': token %lld has sequence %d (of %lld)",
                            ts_op_name(n->op), n->name, (long long)t, (int)s,
                            (long long)lens->ne[0]);
    }
    int32_t len = ref_geti(lens, s, 0, 0);
    if (len < 0 || len > cap) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "%s '%s': sequence %d length %d outside 0..%lld", ts_op_name(n->op),
                            n->name, (int)s, (int)len, (long long)cap);
    }
    *s_out = s;
    *len_out = len;
    return TS_OK;
}

static bool visible(int64_t j, int64_t p, int window) {
    return j <= p && (window == 0 || p - j < window);
}

ts_status ref_attention(ts_tensor *n, ts_error *err) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_tensor *seq = n->src[4], *pos = n->src[5], *lens = n->src[6], *sinks = n->src[7];
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1], bs = k->ne[2];
    int64_t cap = tab->ne[0] * bs, group = nh / nkv;
    float scale = n->fp[0], softcap = n->fp[1];
    int window = n->ip[0];
    double *z = malloc((size_t)cap * sizeof *z);
    int64_t *blk = malloc((size_t)cap * sizeof *blk);
    /* kv: one K or V row [hd] as f32 (any cache type, Q8_0 dequantized); acc: [hd] sums. */
    float *kv = malloc((size_t)hd * sizeof *kv);
    double *acc = malloc((size_t)hd * sizeof *acc);
    if (z == NULL || blk == NULL || kv == NULL || acc == NULL) {
        free(z);
        free(blk);
        free(kv);
        free(acc);
        return ts_error_set(err, TS_ERR_NOMEM, "ref: ATTENTION '%s': out of memory", n->name);
    }
    ts_status st = TS_OK;
    for (int64_t t = 0; t < q->ne[2] && st == TS_OK; t++) {
        int32_t s, len;
        if ((st = seq_of(n, seq, lens, t, cap, &s, &len, err)) != TS_OK) {
            break;
        }
        int64_t p = ref_geti(pos, t, 0, 0);
        for (int64_t j = 0; j < len; j++) {
            /* Only the blocks of visible keys are read, so only they must be valid: a sliding
             * window's released blocks are -1. */
            blk[j] = ref_geti(tab, j / bs, s, 0);
            if (visible(j, p, window) && (blk[j] < 0 || blk[j] >= k->ne[3])) {
                st = ts_error_set(err, TS_ERR_RANGE,
                                  "ATTENTION '%s': sequence %d block %lld is %lld (of %lld)",
                                  n->name, (int)s, (long long)(j / bs), (long long)blk[j],
                                  (long long)k->ne[3]);
                break;
            }
        }
        for (int64_t h = 0; h < nh && st == TS_OK; h++) {
            int64_t kh = h / group;
            /* An attention sink is one more logit, with no value. */
            double sink = sinks != NULL ? ref_getf(sinks, h, 0, 0, 0) : -INFINITY;
            double mx = sink;
            for (int64_t j = 0; j < len; j++) {
                if (!visible(j, p, window)) {
                    continue;
                }
                ref_read_row(k, kh, j % bs, blk[j], kv);
                double dot = 0.0;
                for (int64_t d = 0; d < hd; d++) {
                    dot += (double)ref_getf(q, d, h, t, 0) * kv[d];
                }
                dot *= scale;
                if (softcap > 0.0f) {
                    dot = softcap * tanh(dot / softcap);
                }
                z[j] = dot;
                mx = dot > mx ? dot : mx;
            }
            double sum = sinks != NULL ? exp(sink - mx) : 0.0;
            for (int64_t j = 0; j < len; j++) {
                if (visible(j, p, window)) {
                    z[j] = exp(z[j] - mx);
                    sum += z[j];
                }
            }
            for (int64_t d = 0; d < hd; d++) {
                acc[d] = 0.0;
            }
            for (int64_t j = 0; j < len; j++) {
                if (visible(j, p, window)) {
                    ref_read_row(v, kh, j % bs, blk[j], kv);
                    for (int64_t d = 0; d < hd; d++) {
                        acc[d] += z[j] / sum * kv[d];
                    }
                }
            }
            for (int64_t d = 0; d < hd; d++) {
                ref_setf(n, d, h, t, 0, (float)acc[d]);
            }
        }
    }
    free(z);
    free(blk);
    free(kv);
    free(acc);
    return st;
}

ts_status ref_attn_mask(ts_tensor *n, ts_error *err) {
    const ts_tensor *seq = n->src[0], *pos = n->src[1], *lens = n->src[2];
    int64_t cap = n->ip[0];
    int window = n->ip[1];
    for (int64_t t = 0; t < n->ne[1]; t++) {
        int32_t s, len;
        ts_status st = seq_of(n, seq, lens, t, cap, &s, &len, err);
        if (st != TS_OK) {
            return st;
        }
        int64_t p = ref_geti(pos, t, 0, 0);
        for (int64_t i = 0; i < n->ne[0]; i++) {
            int64_t ks = i / cap, j = i % cap;
            bool ok = ks == s && j < len && visible(j, p, window);
            ref_setf(n, i, t, 0, 0, ok ? 0.0f : -INFINITY);
        }
    }
    return TS_OK;
}
