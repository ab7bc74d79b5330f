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
        TS_ROLE_ATTN_Q,   TS_ROLE_ATTN_K,   TS_ROLE_ATTN_V,   TS_ROLE_ATTN_Q_B,
        TS_ROLE_ATTN_K_B, TS_ROLE_ATTN_V_B, TS_ROLE_ATTN_QKV, TS_ROLE_ATTN_QKV_B,
        TS_ROLE_FFN_GATE, TS_ROLE_FFN_UP,   TS_ROLE_FFN_UP_B, TS_ROLE_FFN_GATE_UP,
    };
    static const ts_role k_row[] = {TS_ROLE_ATTN_OUT, TS_ROLE_FFN_DOWN};
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

/* A row-parallel weight must keep whole quantization blocks per shard. */
static ts_status check_blocks(const ts_model *m, ts_role role, int64_t cols, int size,
                              ts_error *err) {
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const ts_gguf_tensor *t = ts_model_tensor(m, role, il);
        if (t == NULL) {
            continue;
        }
        int64_t bs = (int64_t)ts_type_block_size(t->type);
        if (cols % bs != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "tp %d: '%s' (%s, blocks of %lld) is row-parallel: its %lld "
                                "columns would give each shard %lld, not a whole number of "
                                "blocks",
                                size, t->name, ts_type_name(t->type), (long long)bs,
                                (long long)t->ne[0], (long long)cols);
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
    if (n > hp->n_head) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model has %lld attention heads: shards would be "
                            "zero-width (at most %lld shards)",
                            n, (long long)hp->n_head, (long long)hp->n_head);
    }
    if (hp->n_head % n != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model's %lld attention heads do not divide into %d "
                            "shards (use a divisor of %lld)",
                            n, (long long)hp->n_head, n, (long long)hp->n_head);
    }
    if (hp->n_ff % n != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model's %lld feed-forward units do not divide into %d "
                            "shards",
                            n, (long long)hp->n_ff, n);
    }
    bool kv_split = hp->n_head_kv % n == 0;
    if (!kv_split && n % hp->n_head_kv != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp %d: the model's %lld KV heads can neither be split across %d "
                            "shards nor replicated (%d is not a multiple of %lld)",
                            n, (long long)hp->n_head_kv, n, n, (long long)hp->n_head_kv);
    }
    out->shard = shard;
    out->n_head = hp->n_head / n;
    out->head0 = out->n_head * r;
    out->kv_replicated = !kv_split;
    if (kv_split) {
        out->n_kv = hp->n_head_kv / n;
        out->kv0 = out->n_kv * r;
    } else {
        /* Every query head of this shard lies in the same GQA group: one KV head. */
        out->n_kv = 1;
        out->kv0 = out->head0 / (hp->n_head / hp->n_head_kv);
    }
    out->n_ff = hp->n_ff / n;
    out->ff0 = out->n_ff * r;
    out->vocab_parallel = n > 1 && hp->n_vocab % n == 0;
    out->n_vocab = out->vocab_parallel ? hp->n_vocab / n : hp->n_vocab;
    out->vocab0 = out->vocab_parallel ? out->n_vocab * r : 0;
    set_splits(out->split, out->vocab_parallel);
    if (n == 1) {
        memset(out->split, 0, sizeof out->split);
        return TS_OK;
    }
    ts_status st = check_blocks(m, TS_ROLE_ATTN_OUT, out->n_head * hp->head_dim, n, err);
    if (st == TS_OK) {
        st = check_blocks(m, TS_ROLE_FFN_DOWN, out->n_ff, n, err);
    }
    return st;
}
