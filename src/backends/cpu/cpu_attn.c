/*
 * cpu_attn.c — ATTENTION on the CPU backend: its descriptor, the choice between the tiled
 * AVX-512 kernel (cpu_attn_avx512.c, whose work items are dealt here), the tiled AVX2 kernel
 * (cpu_attn_avx2.c) and the scalar one here, and the scalar kernel.
 *
 * The scalar kernel splits (token, kv head) pairs across threads. For one pair, the query
 * heads that share the kv head (GQA group) walk the visible keys together: each K and V row
 * is converted to f32 once and used by the whole group, and an online softmax (running max
 * and sum, rescaling the accumulator when the max grows) avoids a second pass over the keys.
 * It serves ISA levels below AVX2, head sizes that are not a multiple of 8, and soft-capping.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/* The tiled kernels' preconditions (cpu_internal.h); the scalar kernel runs the rest. The
 * AVX-512 kernel needs head sizes a multiple of 16; other sizes keep the AVX2 kernel. */
static bool use_tiled(const ts_tensor *n, ts_isa isa) {
    return isa >= TS_ISA_AVX2 && n->src[0]->ne[0] % 8 == 0 && n->fp[1] <= 0.0f &&
           n->src[0]->ne[0] <= 1024;
}

/* The AVX-512 kernel reads f16 rows in place and converts the others chunk by chunk, with one
 * row offset for K and V: it serves f32 and f16 caches of one type. Other caches (bf16 and the
 * quantized blocks, or K and V of different types) run the AVX2 kernel at every level, which
 * reads each type's rows in place. */
static bool use_avx512(const ts_tensor *n, ts_isa isa) {
    ts_type kt = n->src[1]->type, vt = n->src[2]->type;
    return use_tiled(n, isa) && isa >= TS_ISA_AVX512 && n->src[0]->ne[0] % 16 == 0 && kt == vt &&
           (kt == TS_TYPE_F16 || kt == TS_TYPE_F32);
}

/* Per thread: the scalar kernel's K and V rows, the group's queries, accumulators, maxima
 * and sums; or the tiled kernel's buffers. */
static void attention_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    int64_t hd = n->src[0]->ne[0], group = n->src[0]->ne[1] / n->src[1]->ne[1];
    *per_thread = (size_t)(2 * hd + 2 * group * hd + 2 * group) * sizeof(float);
    if (use_avx512(n, isa)) {
        *per_thread = cpu_attn_avx512_scratch(hd, group) * sizeof(float);
    } else if (use_tiled(n, isa)) {
        *per_thread = cpu_attn_tiled_scratch(hd, group) * sizeof(float);
    }
}

static bool attention_supports(const ts_tensor *n, ts_isa isa) {
    return cpu_type_convertible(n->src[1]->type, isa) && cpu_type_convertible(n->src[2]->type, isa);
}

/* Tiles: maximal runs of consecutive tokens of one sequence, cut every ATT_QT tokens. The
 * tile starting at t ends at the returned index. */
static int64_t tile_end(const ts_tensor *seq, int64_t t, int64_t n_tok) {
    int32_t s = cpu_attn_geti(seq, t, 0);
    int64_t e = t + 1;
    while (e < n_tok && e - t < ATT_QT && cpu_attn_geti(seq, e, 0) == s) {
        e++;
    }
    return e;
}

void cpu_attn_item_rows(const ts_tensor *n, const cpu_attn_item *it, float *qb, int64_t *jlo,
                        int64_t *jhi, int64_t *J0, int64_t *J1) {
    const ts_tensor *q = n->src[0], *pos = n->src[5];
    int64_t hd = q->ne[0], group = q->ne[1] / n->src[1]->ne[1];
    int64_t ng = it->g1 - it->g0, nt = it->t1 - it->t0, nkh = it->kh1 - it->kh0;
    int window = n->ip[0];
    int32_t len = cpu_attn_geti(n->src[6], it->s, 0);
    *J0 = INT64_MAX;
    *J1 = -1;
    for (int64_t ti = 0; ti < nt; ti++) {
        int64_t t = it->t0 + ti, p = cpu_attn_geti(pos, t, 0);
        jhi[ti] = p < (int64_t)len - 1 ? p : (int64_t)len - 1;
        jlo[ti] = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        if (jlo[ti] <= jhi[ti]) {
            *J0 = jlo[ti] < *J0 ? jlo[ti] : *J0;
            *J1 = jhi[ti] > *J1 ? jhi[ti] : *J1;
        }
        for (int64_t khi = 0; khi < nkh; khi++) {
            for (int64_t g = 0; g < ng; g++) {
                int64_t r = (ti * nkh + khi) * ng + g;
                const char *qr = (const char *)q->data +
                                 ((it->kh0 + khi) * group + it->g0 + g) * q->nb[1] + t * q->nb[2];
                if (q->nb[0] == sizeof(float)) {
                    memcpy(&qb[r * hd], qr, (size_t)hd * sizeof(float));
                } else {
                    for (int64_t d = 0; d < hd; d++) {
                        memcpy(&qb[r * hd + d], qr + d * q->nb[0], sizeof(float));
                    }
                }
            }
        }
    }
}

void cpu_attn_item_sink(const ts_tensor *n, const cpu_attn_item *it, int64_t r, float *mx,
                        float *sum) {
    const ts_tensor *sk = n->src[7];
    if (sk == NULL) {
        *mx = -INFINITY;
        *sum = 0.0f;
        return;
    }
    int64_t ng = it->g1 - it->g0, nkh = it->kh1 - it->kh0;
    int64_t group = n->src[0]->ne[1] / n->src[1]->ne[1];
    int64_t g = r % ng, khi = (r / ng) % nkh;
    *mx = ((const float *)sk->data)[(it->kh0 + khi) * group + it->g0 + g];
    *sum = 1.0f;
}

/* Deals the tiled kernels' work items to this thread and runs each with run_item. Items are
 * dealt round-robin (item % nth) so that causal prefill, where later tiles see more keys,
 * spreads evenly over threads. Very few tiles (decoding one sequence on many threads): one
 * item per query head so that all threads get work. Few decoding tiles: items of as many kv
 * heads as leave every thread one; many: one item per tile covering all kv heads. An item of
 * several kv heads reads each key's rows of those heads as one contiguous run. direct_rows:
 * the most query rows of an item of several kv heads. */
static void deal_items(const cpu_op_ctx *c, ts_tensor *n, int64_t direct_rows,
                       void (*run_item)(const cpu_op_ctx *, ts_tensor *, const cpu_attn_item *)) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *tab = n->src[3], *seq = n->src[4];
    const ts_tensor *lens = n->src[6];
    int64_t n_tok = q->ne[2], nkv = k->ne[1], group = q->ne[1] / nkv, bs = k->ne[2];
    int64_t cap = tab->ne[0] * bs;
    int64_t n_tiles = 0;
    for (int64_t t = 0; t < n_tok; t = tile_end(seq, t, n_tok)) {
        n_tiles++;
    }
    int64_t gsplit = n_tiles * nkv < 4 * c->nth ? group : 1;
    bool many = n_tiles >= 4 * c->nth;
    int64_t item = 0;
    for (int64_t t = 0; t < n_tok;) {
        int64_t e = tile_end(seq, t, n_tok);
        int64_t khstep =
            many && (e - t) * group <= direct_rows && (e - t) * nkv <= ATT_QT ? nkv : 1;
        /* Few decoding tiles: as many kv heads per item as still leaves every thread an item,
         * so that an item reads its heads' rows of a key as one run; one head's row alone is a
         * sliver of each key's rows (68 bytes of 544 for Llama 3.2 1B's Q8_0 cache). */
        if (!many && gsplit == 1 && (e - t) * group <= direct_rows) {
            while (nkv % (2 * khstep) == 0 && (e - t) * 2 * khstep <= ATT_QT &&
                   n_tiles * (nkv / (2 * khstep)) >= c->nth) {
                khstep *= 2;
            }
        }
        for (int64_t kh = 0; kh < nkv; kh += khstep) {
            for (int64_t gs = 0; gs < gsplit; gs++, item++) {
                if (item % c->nth != c->ith) {
                    continue;
                }
                cpu_attn_item it = {.t0 = t, .t1 = e, .kh0 = kh, .kh1 = kh + khstep};
                it.g0 = gs * group / gsplit;
                it.g1 = (gs + 1) * group / gsplit;
                int32_t len = 0;
                for (int64_t tt = t; tt < e; tt++) {
                    if (!cpu_attn_token_seq(c, seq, lens, tt, cap, &it.s, &len)) {
                        return;
                    }
                }
                if (!cpu_attn_check_blocks(c, n, it.s, len, t, e)) {
                    return;
                }
                run_item(c, n, &it);
            }
        }
        t = e;
    }
}

static void attention(const cpu_op_ctx *c, ts_tensor *n) {
    if (use_avx512(n, c->isa)) {
        deal_items(c, n, ATT5_DIRECT_ROWS, cpu_attn_item_avx512);
        return;
    }
    if (use_tiled(n, c->isa)) {
        deal_items(c, n, ATT_DIRECT_ROWS, cpu_attn_item_avx2);
        return;
    }
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_tensor *seq = n->src[4], *pos = n->src[5], *lens = n->src[6];
    const float *sinks = n->src[7] != NULL ? (const float *)n->src[7]->data : NULL;
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    const ts_quant_ops *vops = ts_quant_ops_get(v->type, c->isa);
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
        if (!cpu_attn_check_blocks(c, n, s, len, t, t + 1)) {
            return;
        }
        for (int64_t g = 0; g < group; g++) {
            const char *qr = (const char *)q->data + (kh * group + g) * q->nb[1] + t * q->nb[2];
            for (int64_t d = 0; d < hd; d++) {
                memcpy(&qg[g * hd + d], qr + d * q->nb[0], sizeof(float));
            }
            /* An attention sink starts the online softmax: its logit is the first max and
             * its weight 1 is in the sum, with no value. */
            mx[g] = sinks != NULL ? sinks[kh * group + g] : -INFINITY;
            sum[g] = sinks != NULL ? 1.0f : 0.0f;
        }
        memset(acc, 0, (size_t)(group * hd) * sizeof *acc);
        int64_t j_hi = p < (int64_t)len - 1 ? p : (int64_t)len - 1;
        int64_t j_lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        for (int64_t j = j_lo; j <= j_hi; j++) {
            int32_t blk = cpu_attn_geti(tab, j / bs, s);
            /* K and V rows (of their own types, so their own strides). */
            size_t koff =
                (size_t)kh * k->nb[1] + (size_t)(j % bs) * k->nb[2] + (size_t)blk * k->nb[3];
            size_t voff =
                (size_t)kh * v->nb[1] + (size_t)(j % bs) * v->nb[2] + (size_t)blk * v->nb[3];
            kops->to_float((const char *)k->data + koff, krow, hd);
            vops->to_float((const char *)v->data + voff, vrow, hd);
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

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_ATTENTION,
     .run = attention,
     .scratch = attention_scratch,
     .supports = attention_supports},
};
const cpu_op_table cpu_attn_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
