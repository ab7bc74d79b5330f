/*
 * shard.c — tensor-parallel plans: the split axis of every weight role and the slice of heads,
 * hidden units and vocabulary a shard owns (shard.h), with the checks that make a bad
 * shard count an error with numbers instead of a wrong model.
 */
#include "model/shard.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

const char *ts_split_name(ts_split s) {
    switch (s) {
    case TS_SPLIT_COL:
        return "column";
    case TS_SPLIT_ROW:
        return "row";
    default:
        return "replicated";
    }
}

/* The Megatron pattern, as data. Roles not listed are replicated. */
static void set_splits(ts_split *split, bool vocab_parallel) {
    static const ts_role k_col[] = {
        TS_ROLE_ATTN_Q,        TS_ROLE_ATTN_K,      TS_ROLE_ATTN_V,         TS_ROLE_ATTN_Q_B,
        TS_ROLE_ATTN_K_B,      TS_ROLE_ATTN_V_B,    TS_ROLE_ATTN_QKV,       TS_ROLE_ATTN_QKV_B,
        TS_ROLE_FFN_GATE,      TS_ROLE_FFN_UP,      TS_ROLE_FFN_UP_B,       TS_ROLE_FFN_GATE_UP,
        TS_ROLE_FFN_GATE_EXPS, TS_ROLE_FFN_UP_EXPS, TS_ROLE_FFN_GATE_SHEXP, TS_ROLE_FFN_UP_SHEXP,
        TS_ROLE_FFN_GATE_B,
    };
    static const ts_role k_row[] = {TS_ROLE_ATTN_OUT, TS_ROLE_FFN_DOWN, TS_ROLE_FFN_DOWN_EXPS,
                                    TS_ROLE_FFN_DOWN_SHEXP};
    memset(split, 0, TS_ROLE_COUNT * sizeof *split);
    for (size_t i = 0; i < sizeof k_col / sizeof k_col[0]; i++) {
        split[k_col[i]] = TS_SPLIT_COL;
    }
    for (size_t i = 0; i < sizeof k_row / sizeof k_row[0]; i++) {
        split[k_row[i]] = TS_SPLIT_ROW;
    }
    if (vocab_parallel) {
        split[TS_ROLE_OUTPUT] = TS_SPLIT_COL;
    }
}

/* Cuts n items into `parts` runs as evenly as possible (the first n % parts runs get one
 * more): run r is [*first, *first + *count). */
static void even_split(int64_t n, int64_t parts, int64_t r, int64_t *first, int64_t *count) {
    int64_t q = n / parts, extra = n % parts;
    *first = r * q + (r < extra ? r : extra);
    *count = q + (r < extra ? 1 : 0);
}

/* The heads of shard r of n (n <= n_head). With n <= n_head_kv whole GQA groups are cut
 * evenly; otherwise the shards are spread evenly over the groups and each group's query
 * heads evenly over its shards, every shard keeping a copy of its group's KV head. */
static void plan_heads(const ts_hparams *hp, int n, int r, ts_shard_plan *p) {
    int64_t groups = hp->n_head_kv, per = hp->n_head / hp->n_head_kv;
    if (n <= groups) {
        even_split(groups, n, r, &p->kv0, &p->n_kv);
        p->head0 = p->kv0 * per;
        p->n_head = p->n_kv * per;
        p->kv_replicated = false;
        return;
    }
    /* Group j has n / groups shards (one more for the first n % groups): find r's group. */
    int64_t j = 0, first = 0, count = 0;
    for (j = 0; j < groups; j++) {
        even_split(n, groups, j, &first, &count);
        if (r < first + count) {
            break;
        }
    }
    int64_t h0 = 0, nh = 0;
    even_split(per, count, r - first, &h0, &nh);
    p->kv0 = j;
    p->n_kv = 1;
    p->head0 = j * per + h0;
    p->n_head = nh;
    p->kv_replicated = true;
}

/* Least common multiple of the block sizes of a role's tensors over the layers (1: none). */
static int64_t role_block(const ts_model *m, ts_role role) {
    int64_t l = 1;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const ts_gguf_tensor *t = ts_model_tensor(m, role, il);
        if (t == NULL) {
            continue;
        }
        int64_t a = l, b = (int64_t)ts_type_block_size(t->type);
        while (b != 0) {
            int64_t tmp = a % b;
            a = b;
            b = tmp;
        }
        l = l / a * (int64_t)ts_type_block_size(t->type);
    }
    return l;
}

/* A row-parallel weight must keep whole quantization blocks per shard: every shard's column
 * range [first, first + cols) starts and ends on a block boundary. */
static ts_status check_blocks(const ts_model *m, ts_role role, int size, int rank, int64_t first,
                              int64_t cols, ts_error *err) {
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const ts_gguf_tensor *t = ts_model_tensor(m, role, il);
        if (t == NULL) {
            continue;
        }
        int64_t bs = (int64_t)ts_type_block_size(t->type);
        if (first % bs != 0 || cols % bs != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "tp %d: '%s' (%s, blocks of %lld) is row-parallel: shard %d's "
                                "columns %lld..%lld of %lld (%lld columns) would split a block",
                                size, t->name, ts_type_name(t->type), (long long)bs, rank,
                                (long long)first, (long long)(first + cols - 1),
                                (long long)t->ne[0], (long long)cols);
        }
    }
    return TS_OK;
}

/* The checks that hold for the whole group (every rank gets the same message). */
static ts_status check_group(const ts_model *m, int n, ts_error *err) {
    const ts_hparams *hp = &m->hp;
    if (n > hp->n_head) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model has %lld attention heads: shards would be "
                            "zero-width (at most %lld shards)",
                            n, (long long)hp->n_head, (long long)hp->n_head);
    }
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model's %lld attention heads do not form groups over its "
                            "%lld KV heads",
                            n, (long long)hp->n_head, (long long)hp->n_head_kv);
    }
    int64_t unit = role_block(m, TS_ROLE_FFN_DOWN);
    if (unit == 1 && hp->n_ff < n) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model has %lld feed-forward units: shards would be "
                            "zero-width (at most %lld shards)",
                            n, (long long)hp->n_ff, (long long)hp->n_ff);
    }
    if (hp->n_ff % unit != 0 || hp->n_ff / unit < n) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model's %lld feed-forward units are %lld blocks of %lld "
                            "in the row-parallel FFN down weight: each shard needs at least one "
                            "whole block (at most %lld shards)",
                            n, (long long)hp->n_ff, (long long)(hp->n_ff / unit), (long long)unit,
                            (long long)(hp->n_ff / unit));
    }
    /* Expert hidden units, like the dense ones: whole blocks of each down matrix per shard. */
    const ts_role downs[2] = {TS_ROLE_FFN_DOWN_EXPS, TS_ROLE_FFN_DOWN_SHEXP};
    const int64_t units[2] = {hp->n_ff_exp, hp->n_ff_shexp};
    for (int i = 0; i < 2 && hp->n_expert > 0; i++) {
        int64_t u = role_block(m, downs[i]);
        if (units[i] % u != 0 || units[i] / u < n) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "tp %d: the model's %lld %s hidden units are %lld blocks of %lld "
                                "in the row-parallel down weights: each shard needs at least one "
                                "whole block (at most %lld shards)",
                                n, (long long)units[i], i == 0 ? "expert" : "shared-expert",
                                (long long)(units[i] / u), (long long)u, (long long)(units[i] / u));
        }
    }
    /* Attention output columns follow the heads: check every shard's range, not only ours. */
    for (int k = 0; k < n; k++) {
        ts_shard_plan p;
        plan_heads(hp, n, k, &p);
        ts_status st = check_blocks(m, TS_ROLE_ATTN_OUT, n, k, p.head0 * hp->head_dim,
                                    p.n_head * hp->head_dim, err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

ts_status ts_shard_plan_make(const ts_model *m, ts_shard shard, ts_shard_plan *out, ts_error *err) {
    const ts_hparams *hp = &m->hp;
    int n = shard.size, r = shard.rank;
    memset(out, 0, sizeof *out);
    if (n < 1 || r < 0 || r >= n) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tp: shard %d of %d is not a valid shard", r,
                            n);
    }
    ts_status st = n > 1 ? check_group(m, n, err) : TS_OK;
    if (st != TS_OK) {
        return st;
    }
    out->shard = shard;
    plan_heads(hp, n, r, out);
    int64_t unit = n > 1 ? role_block(m, TS_ROLE_FFN_DOWN) : hp->n_ff;
    int64_t b0 = 0, nb = 0;
    even_split(hp->n_ff / unit, n, r, &b0, &nb);
    out->ff0 = b0 * unit;
    out->n_ff = nb * unit;
    if (hp->n_expert > 0) {
        int64_t ue = n > 1 ? role_block(m, TS_ROLE_FFN_DOWN_EXPS) : hp->n_ff_exp;
        int64_t us = n > 1 ? role_block(m, TS_ROLE_FFN_DOWN_SHEXP) : hp->n_ff_shexp;
        even_split(hp->n_ff_exp / ue, n, r, &b0, &nb);
        out->ffe0 = b0 * ue;
        out->n_ffe = nb * ue;
        even_split(hp->n_ff_shexp / us, n, r, &b0, &nb);
        out->ffs0 = b0 * us;
        out->n_ffs = nb * us;
    }
    out->vocab_parallel = n > 1 && hp->n_vocab % n == 0;
    out->n_vocab = out->vocab_parallel ? hp->n_vocab / n : hp->n_vocab;
    out->vocab0 = out->vocab_parallel ? out->n_vocab * r : 0;
    set_splits(out->split, out->vocab_parallel);
    if (hp->arch->qk_norm_full) {
        /* Q / K norms over the whole projection (OLMo 2) need every head's values: each shard
         * projects all of Q and K and keeps its heads after the norm. */
        out->split[TS_ROLE_ATTN_Q] = out->split[TS_ROLE_ATTN_K] = TS_SPLIT_NONE;
        out->split[TS_ROLE_ATTN_Q_B] = out->split[TS_ROLE_ATTN_K_B] = TS_SPLIT_NONE;
    }
    if (n == 1) {
        memset(out->split, 0, sizeof out->split);
    }
    return TS_OK;
}

ts_status ts_shard_kv_heads(const ts_model *m, int size, int64_t *total, int64_t *most,
                            ts_error *err) {
    *total = 0;
    *most = 0;
    for (int r = 0; r < size; r++) {
        ts_shard_plan p;
        ts_status st = ts_shard_plan_make(m, (ts_shard){r, size}, &p, err);
        if (st != TS_OK) {
            return st;
        }
        *total += p.n_kv;
        *most = p.n_kv > *most ? p.n_kv : *most;
    }
    return TS_OK;
}
