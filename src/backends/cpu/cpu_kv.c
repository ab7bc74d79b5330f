/*
 * cpu_kv.c — CPU kernels for writing and masking the paged KV cache (KV_STORE, ATTN_MASK) and
 * their descriptors, plus the sequence and block-table checks both ATTENTION kernels share.
 *
 * Every index read from an input tensor (slot, sequence id, sequence length, block id) is
 * checked before it addresses memory; a bad one fails the node through cpu_fail with the
 * same rule as the reference backend.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

int32_t cpu_attn_geti(const ts_tensor *t, int64_t i0, int64_t i1) {
    int32_t v;
    memcpy(&v, (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1], sizeof v);
    return v;
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

/* Every block holding a key that one of tokens [t0, t1) (all of sequence s, of length len)
 * sees must be valid (the reference's rule); the others may be -1 (released). */
bool cpu_attn_check_blocks(const cpu_op_ctx *c, const ts_tensor *n, int32_t s, int32_t len,
                           int64_t t0, int64_t t1) {
    const ts_tensor *k = n->src[1], *tab = n->src[3], *pos = n->src[5];
    int64_t bs = k->ne[2];
    int window = n->ip[0];
    int64_t lo = 0, hi = -1; /* blocks [lo, hi] checked already: a tile's ranges overlap */
    for (int64_t t = t0; t < t1; t++) {
        int64_t p = cpu_attn_geti(pos, t, 0);
        int64_t jhi = p < (int64_t)len - 1 ? p : (int64_t)len - 1;
        int64_t jlo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        if (jlo > jhi) {
            continue;
        }
        for (int64_t b = jlo / bs; b <= jhi / bs; b++) {
            if (b >= lo && b <= hi) {
                b = hi;
                continue;
            }
            int32_t blk = cpu_attn_geti(tab, b, s);
            if (blk < 0 || blk >= k->ne[3]) {
                cpu_fail(c, TS_ERR_RANGE, "sequence %d block %lld is %d (of %lld)", (int)s,
                         (long long)b, (int)blk, (long long)k->ne[3]);
                return false;
            }
        }
        if (jlo / bs <= hi + 1 && jhi / bs >= lo - 1) {
            lo = jlo / bs < lo ? jlo / bs : lo;
            hi = jhi / bs > hi ? jhi / bs : hi;
        } else {
            lo = jlo / bs;
            hi = jhi / bs;
        }
    }
    return true;
}

/* One f32 row for gathering a strided key or value row. */
static void kv_store_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    *per_thread = (size_t)n->src[0]->ne[0] * sizeof(float);
}

static bool kv_store_supports(const ts_tensor *n, ts_isa isa) {
    return cpu_type_convertible(n->src[0]->type, isa);
}

static void kv_store(const cpu_op_ctx *c, ts_tensor *n) {
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

static void attn_mask(const cpu_op_ctx *c, ts_tensor *n) {
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

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_KV_STORE,
     .run = kv_store,
     .scratch = kv_store_scratch,
     .supports = kv_store_supports},
    {.op = TS_OP_ATTN_MASK, .run = attn_mask},
};
const cpu_op_table cpu_kv_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
