/*
 * cpu_attn.c — CPU kernels for the paged KV cache: KV_STORE, ATTENTION, ATTN_MASK.
 *
 * ATTENTION splits (token, kv head) pairs across threads. For one pair, the query heads
 * that share the kv head (GQA group) walk the visible keys together: each K and V row is
 * converted to f32 once and used by the whole group, and an online softmax (running max and
 * sum, rescaling the accumulator when the max grows) avoids a second pass over the keys.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

int32_t cpu_attn_geti(const ts_tensor *t, int64_t i0, int64_t i1) {
    int32_t v;
    memcpy(&v, (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1], sizeof v);
    return v;
}

void cpu_kv_store(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *cache = n->src[0], *rows = n->src[1], *slots = n->src[2];
    const ts_quant_ops *ops = ts_quant_ops_get(cache->type, c->isa);
    int64_t hd = rows->ne[0], nkv = rows->ne[1], bs = cache->ne[2];
    int64_t n_slots = bs * cache->ne[3], lo, hi;
    cpu_split(rows->ne[2], c->ith, c->nth, &lo, &hi);
    float *tmp = c->local;
    for (int64_t t = lo; t < hi; t++) {
        int32_t slot = cpu_attn_geti(slots, t, 0);
        if (slot < 0) {
            continue;
        }
        if (slot >= n_slots) {
            cpu_fail(c, TS_ERR_RANGE, "token %lld slot %d is past the %lld slots of '%s'",
                     (long long)t, (int)slot, (long long)n_slots, cache->name);
            return;
        }
        for (int64_t h = 0; h < nkv; h++) {
            const char *src = (const char *)rows->data + h * rows->nb[1] + t * rows->nb[2];
            const float *row = (const float *)src;
            if (rows->nb[0] != sizeof(float)) {
                for (int64_t d = 0; d < hd; d++) {
                    memcpy(&tmp[d], src + d * rows->nb[0], sizeof(float));
                }
                row = tmp;
            }
            char *dst =
                (char *)n->data + h * n->nb[1] + (slot % bs) * n->nb[2] + (slot / bs) * n->nb[3];
            ops->from_float(row, dst, hd);
        }
    }
}

/* Validates token t's sequence; returns false (after cpu_fail) when invalid. */
bool cpu_attn_token_seq(const cpu_op_ctx *c, const ts_tensor *seq, const ts_tensor *lens, int64_t t,
                        int64_t cap, int32_t *s_out, int32_t *len_out) {
    int32_t s = cpu_attn_geti(seq, t, 0);
    if (s < 0 || s >= lens->ne[0]) {
        cpu_fail(c, TS_ERR_RANGE, "token %lld has sequence %d (of %lld)", (long long)t, (int)s,
                 (long long)lens->ne[0]);
        return false;
    }
    int32_t len = cpu_attn_geti(lens, s, 0);
    if (len < 0 || len > cap) {
        cpu_fail(c, TS_ERR_RANGE, "sequence %d length %d outside 0..%lld", (int)s, (int)len,
                 (long long)cap);
        return false;
    }
    *s_out = s;
    *len_out = len;
    return true;
}

/* Every block holding one of the sequence's keys must be valid, visible or not (the same
 * rule as the reference). */
bool cpu_attn_check_blocks(const cpu_op_ctx *c, const ts_tensor *n, int32_t s, int32_t len) {
    const ts_tensor *k = n->src[1], *tab = n->src[3];
    int64_t bs = k->ne[2];
    for (int64_t b = 0; b < ((int64_t)len + bs - 1) / bs; b++) {
        int32_t blk = cpu_attn_geti(tab, b, s);
        if (blk < 0 || blk >= k->ne[3]) {
            cpu_fail(c, TS_ERR_RANGE, "sequence %d block %lld is %d (of %lld)", (int)s,
                     (long long)b, (int)blk, (long long)k->ne[3]);
            return false;
        }
    }
    return true;
}

bool cpu_attn_use_tiled(const ts_tensor *n, ts_isa isa) {
    return isa >= TS_ISA_AVX2 && n->src[0]->ne[0] % 8 == 0 && n->fp[1] <= 0.0f &&
           n->src[0]->ne[0] <= 1024;
}

void cpu_attention(const cpu_op_ctx *c, ts_tensor *n) {
    if (cpu_attn_use_tiled(n, c->isa)) {
        cpu_attention_tiled(c, n);
        return;
    }
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_tensor *seq = n->src[4], *pos = n->src[5], *lens = n->src[6];
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1], bs = k->ne[2];
    int64_t group = nh / nkv, cap = tab->ne[0] * bs;
    float scale = n->fp[0], softcap = n->fp[1];
    int window = n->ip[0];
    float *krow = c->local, *vrow = krow + hd, *qg = vrow + hd, *acc = qg + group * hd;
    float *mx = acc + group * hd, *sum = mx + group;
    int64_t lo, hi;
    cpu_split(q->ne[2] * nkv, c->ith, c->nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        int64_t t = item / nkv, kh = item % nkv;
        int32_t s, len;
        if (!cpu_attn_token_seq(c, seq, lens, t, cap, &s, &len)) {
            return;
        }
        int64_t p = cpu_attn_geti(pos, t, 0);
        if (!cpu_attn_check_blocks(c, n, s, len)) {
            return;
        }
        for (int64_t g = 0; g < group; g++) {
            const char *qr = (const char *)q->data + (kh * group + g) * q->nb[1] + t * q->nb[2];
            for (int64_t d = 0; d < hd; d++) {
                memcpy(&qg[g * hd + d], qr + d * q->nb[0], sizeof(float));
            }
            mx[g] = -INFINITY;
            sum[g] = 0.0f;
        }
        memset(acc, 0, (size_t)(group * hd) * sizeof *acc);
        int64_t j_hi = p < (int64_t)len - 1 ? p : (int64_t)len - 1;
        int64_t j_lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        for (int64_t j = j_lo; j <= j_hi; j++) {
            int32_t blk = cpu_attn_geti(tab, j / bs, s);
            size_t off =
                (size_t)kh * k->nb[1] + (size_t)(j % bs) * k->nb[2] + (size_t)blk * k->nb[3];
            kops->to_float((const char *)k->data + off, krow, hd);
            kops->to_float((const char *)v->data + off, vrow, hd);
            for (int64_t g = 0; g < group; g++) {
                const float *qq = qg + g * hd;
                float z = 0.0f;
                for (int64_t d = 0; d < hd; d++) {
                    z += qq[d] * krow[d];
                }
                z *= scale;
                if (softcap > 0.0f) {
                    z = softcap * tanhf(z / softcap);
                }
                float *a = acc + g * hd;
                if (z > mx[g]) {
                    float f = expf(mx[g] - z); /* 0 on the first key (mx = -inf) */
                    sum[g] *= f;
                    for (int64_t d = 0; d < hd; d++) {
                        a[d] *= f;
                    }
                    mx[g] = z;
                }
                float w = expf(z - mx[g]);
                sum[g] += w;
                for (int64_t d = 0; d < hd; d++) {
                    a[d] += w * vrow[d];
                }
            }
        }
        for (int64_t g = 0; g < group; g++) {
            float *out = (float *)((char *)n->data + (kh * group + g) * n->nb[1] + t * n->nb[2]);
            float inv = sum[g] > 0.0f ? 1.0f / sum[g] : 0.0f;
            for (int64_t d = 0; d < hd; d++) {
                out[d] = acc[g * hd + d] * inv;
            }
        }
    }
}

void cpu_attn_mask(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *seq = n->src[0], *pos = n->src[1], *lens = n->src[2];
    int64_t cap = n->ip[0], lo, hi;
    int window = n->ip[1];
    cpu_split(n->ne[1], c->ith, c->nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int32_t s, len;
        if (!cpu_attn_token_seq(c, seq, lens, t, cap, &s, &len)) {
            return;
        }
        int64_t p = cpu_attn_geti(pos, t, 0);
        float *out = (float *)((char *)n->data + t * n->nb[1]);
        for (int64_t i = 0; i < n->ne[0]; i++) {
            int64_t ks = i / cap, j = i % cap;
            bool ok = ks == s && j < len && j <= p && (window == 0 || p - j < window);
            out[i] = ok ? 0.0f : -INFINITY;
        }
    }
}
