/*
 * decode.c — a context used for batches (llama_decode's level): the caller names tokens,
 * positions and sequences; this file keeps the books of the paged KV cache for it (one KV
 * sequence of src/kv/ per caller sequence id, no prefix cache), turns each batch into the
 * runner's inputs (slots, block tables, lengths, output rows), runs it and keeps the logits and
 * final hidden states of the rows asked for. A runner with a sliding-window pool gets its
 * slots and tables too (sequences only grow, so their blocks leave the window as in requests).
 *
 * Invariants: kv_id[s] is -1 or an open KV sequence whose every token is committed (computed)
 * between calls. A batch is checked completely and the KV cache is asked whether it can take
 * every token before anything changes, so a refused batch leaves the cache as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "util/error.h"

ts_status rt_batch_init(ts_context *ctx, ts_error *err) {
    rt_batch *b = &ctx->b;
    if (b->kv != NULL) {
        return TS_OK;
    }
    const ts_forward_config *fc = &ctx->runner->cfg;
    int64_t max_len = fc->max_blocks_per_seq * fc->block_size;
    ts_kv_config kc = {
        .n_blocks = (uint32_t)fc->n_blocks,
        .block_size = (uint32_t)fc->block_size,
        .max_seqs = (uint32_t)fc->max_seqs,
        .max_seq_len = (uint32_t)(ctx->ec.n_ctx < max_len ? ctx->ec.n_ctx : max_len),
        .prefix_cache = false,
        .n_blocks_swa = (uint32_t)fc->n_blocks_swa,
        .swa_window = fc->n_blocks_swa > 0 ? (uint32_t)ctx->llm->model->hp.n_swa : 0,
    };
    ts_status st = ts_kv_create(&kc, &b->kv, err);
    if (st != TS_OK) {
        return st;
    }
    size_t T = (size_t)fc->max_tokens, S = (size_t)fc->max_seqs, O = (size_t)fc->max_outputs;
    const ts_hparams *hp = &ctx->llm->model->hp;
    b->kv_id = malloc(S * sizeof *b->kv_id);
    b->bidx = malloc(S * sizeof *b->bidx);
    b->tokens = malloc(T * sizeof *b->tokens);
    b->pos = malloc(T * sizeof *b->pos);
    b->seq = malloc(T * sizeof *b->seq);
    b->slots = malloc(T * sizeof *b->slots);
    b->outs = malloc(T * sizeof *b->outs);
    b->order = malloc(T * sizeof *b->order);
    b->gather = malloc(T * sizeof *b->gather);
    b->gslots = malloc(T * sizeof *b->gslots);
    b->out_row = malloc(T * sizeof *b->out_row);
    b->users = malloc(S * sizeof *b->users);
    b->counts = malloc(S * sizeof *b->counts);
    b->opened = malloc(S * sizeof *b->opened);
    b->table = malloc(S * (size_t)fc->max_blocks_per_seq * sizeof *b->table);
    b->slots_swa = malloc(T * sizeof *b->slots_swa);
    b->table_swa = malloc(S * (size_t)fc->max_blocks_per_seq * sizeof *b->table_swa);
    b->len = malloc(S * sizeof *b->len);
    b->logits = malloc(O * (size_t)hp->n_vocab * sizeof *b->logits);
    b->embd = malloc(O * (size_t)hp->n_embd * sizeof *b->embd);
    if (!b->kv_id || !b->bidx || !b->tokens || !b->pos || !b->seq || !b->slots || !b->outs ||
        !b->order || !b->gather || !b->gslots || !b->out_row || !b->users || !b->counts ||
        !b->opened || !b->table || !b->len || !b->logits || !b->embd || !b->slots_swa ||
        !b->table_swa) {
        rt_batch_free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "decode: out of memory for %zu output rows", O);
    }
    for (size_t s = 0; s < S; s++) {
        b->kv_id[s] = -1;
        b->bidx[s] = -1;
    }
    b->n_last = 0;
    return TS_OK;
}

void rt_batch_free(rt_batch *b) {
    ts_kv_destroy(b->kv);
    free(b->kv_id);
    free(b->bidx);
    free(b->tokens);
    free(b->pos);
    free(b->seq);
    free(b->slots);
    free(b->outs);
    free(b->order);
    free(b->gather);
    free(b->gslots);
    free(b->out_row);
    free(b->users);
    free(b->counts);
    free(b->opened);
    free(b->table);
    free(b->slots_swa);
    free(b->table_swa);
    free(b->len);
    free(b->logits);
    free(b->embd);
    memset(b, 0, sizeof *b);
}

static uint32_t seq_tokens(const rt_batch *b, int32_t s) {
    ts_kv_seq_info info = {0};
    ts_error ignored = {0};
    if (b->kv_id[s] < 0 || ts_kv_seq_get_info(b->kv, (uint32_t)b->kv_id[s], &info, &ignored)) {
        return 0;
    }
    return info.n_tokens;
}

/* Checks every token of the batch and groups the tokens by sequence: users[0..n_users) are the
 * sequences in order of first appearance, bidx[user] their index in the step, counts[] their
 * new tokens, order[] the token indices grouped by sequence. Changes nothing else. */
static ts_status plan_batch(ts_context *ctx, const ts_decode_batch *in, int32_t *n_users,
                            ts_error *err) {
    rt_batch *b = &ctx->b;
    const ts_forward_config *fc = &ctx->runner->cfg;
    int64_t n_vocab = ctx->llm->model->hp.n_vocab;
    int32_t T = in->n_tokens, U = 0, O = 0;
    ts_status st = TS_OK;
    for (int32_t t = 0; t < T && st == TS_OK; t++) {
        int32_t s = in->seq != NULL ? in->seq[t] : 0;
        if (in->tokens[t] < 0 || in->tokens[t] >= n_vocab) {
            st = ts_error_set(err, TS_ERR_RANGE, "decode: token %d has id %d (vocabulary of %lld)",
                              t, in->tokens[t], (long long)n_vocab);
        } else if (s < 0 || s >= fc->max_seqs) {
            st = ts_error_set(err, TS_ERR_RANGE,
                              "decode: token %d names sequence %d; this context has sequences "
                              "0..%lld (max_seqs)",
                              t, s, (long long)fc->max_seqs - 1);
        } else {
            if (b->bidx[s] < 0) {
                b->bidx[s] = U;
                b->users[U] = s;
                b->len[U] = (int32_t)seq_tokens(b, s); /* append_all sets the new length */
                b->counts[U++] = 0;
            }
            int32_t u = b->bidx[s];
            int32_t expect = b->len[u] + b->counts[u]++;
            if (in->pos != NULL && in->pos[t] != expect) {
                st = ts_error_set(err, TS_ERR_INVALID_ARG,
                                  "decode: token %d has position %d, but sequence %d continues "
                                  "at position %d",
                                  t, in->pos[t], s, expect);
            } else if (expect >= ctx->ec.n_ctx) {
                st = ts_error_set(err, TS_ERR_LIMIT,
                                  "decode: sequence %d would hold %d tokens; the context holds "
                                  "%lld per sequence",
                                  s, expect + 1, (long long)ctx->ec.n_ctx);
            }
            b->pos[t] = expect;
            O += in->logits == NULL ? (t == T - 1) : in->logits[t] != 0;
        }
    }
    if (st == TS_OK && O > fc->max_outputs) {
        st = ts_error_set(err, TS_ERR_LIMIT,
                          "decode: %d tokens want logits; this context computes at most %lld per "
                          "batch (max_outputs)",
                          O, (long long)fc->max_outputs);
    }
    if (st == TS_OK) {
        /* Counting sort of the token indices by sequence. */
        int32_t at = 0;
        for (int32_t u = 0; u < U; u++) {
            int32_t c = b->counts[u];
            b->counts[u] = at;
            at += c;
        }
        for (int32_t t = 0; t < T; t++) {
            int32_t u = b->bidx[in->seq != NULL ? in->seq[t] : 0];
            b->order[b->counts[u]++] = t;
        }
        for (int32_t u = U - 1; u >= 0; u--) { /* counts[u] is now the end; make it the size */
            b->counts[u] -= u > 0 ? b->counts[u - 1] : 0;
        }
    }
    *n_users = U;
    return st;
}

static void forget_plan(rt_batch *b, int32_t n_users) {
    for (int32_t u = 0; u < n_users; u++) {
        b->bidx[b->users[u]] = -1;
    }
}

/* Drops caller sequence s (no-op when it has none). */
static void drop_seq(rt_batch *b, int32_t s) {
    if (b->kv_id[s] >= 0) {
        ts_error ignored = {0};
        ts_kv_seq_close(b->kv, (uint32_t)b->kv_id[s], &ignored);
        b->kv_id[s] = -1;
    }
}

/* Opens the sequences that have none and asks the cache whether every token fits; on a no,
 * closes what it opened. */
static ts_status reserve(ts_context *ctx, int32_t U, ts_error *err) {
    rt_batch *b = &ctx->b;
    uint32_t *ids = (uint32_t *)b->gather, *n_new = (uint32_t *)b->gslots;
    ts_status st = TS_OK;
    int32_t opened = 0;
    for (int32_t u = 0; u < U && st == TS_OK; u++) {
        int32_t s = b->users[u];
        if (b->kv_id[s] < 0) {
            uint32_t id = 0;
            st = ts_kv_seq_open(b->kv, NULL, 0, &id, err);
            b->kv_id[s] = st == TS_OK ? (int32_t)id : -1;
            opened += st == TS_OK;
            b->opened[u] = st == TS_OK;
        } else {
            b->opened[u] = 0;
        }
        ids[u] = (uint32_t)b->kv_id[s];
        n_new[u] = (uint32_t)b->counts[u];
    }
    bool ok = false;
    uint32_t need = 0;
    if (st == TS_OK) {
        st = ts_kv_can_append(b->kv, ids, n_new, (uint32_t)U, &ok, &need, err);
    }
    if (st == TS_OK && !ok) {
        ts_kv_stats ks;
        ts_kv_get_stats(b->kv, &ks);
        st = ts_error_set(err, TS_ERR_LIMIT,
                          "decode: the KV cache is full: the batch needs %u blocks, %u of %u are "
                          "free (drop sequences or make the context with more KV memory)",
                          need, ks.n_free + ks.n_evictable, ks.n_blocks);
    }
    if (st != TS_OK && opened > 0) {
        for (int32_t u = 0; u < U; u++) {
            if (b->opened[u]) {
                drop_seq(b, b->users[u]);
            }
        }
    }
    return st;
}

/* Appends each sequence's tokens to the cache (slots back in batch order), performs the
 * copy-on-write copies, and fills the block tables and lengths of the step. */
static ts_status append_all(ts_context *ctx, const ts_decode_batch *in, int32_t U, ts_error *err) {
    rt_batch *b = &ctx->b;
    const ts_forward_config *fc = &ctx->runner->cfg;
    int64_t width = fc->max_blocks_per_seq;
    ts_status st = TS_OK;
    for (int32_t u = 0, at = 0; u < U && st == TS_OK; at += b->counts[u], u++) {
        uint32_t kv = (uint32_t)b->kv_id[b->users[u]];
        int32_t n = b->counts[u];
        for (int32_t k = 0; k < n; k++) {
            b->gather[k] = in->tokens[b->order[at + k]];
        }
        st = ts_kv_append(b->kv, kv, b->gather, (uint32_t)n, b->gslots, err);
        for (int32_t k = 0; st == TS_OK && k < n; k++) {
            b->slots[b->order[at + k]] = b->gslots[k];
        }
        uint32_t n_copies = 0;
        const ts_kv_copy *c = st == TS_OK ? ts_kv_copies(b->kv, &n_copies) : NULL;
        for (uint32_t i = 0; st == TS_OK && i < n_copies; i++) {
            st = ts_runner_copy_block(ctx->runner, c[i].pool, c[i].src, c[i].dst, err);
        }
        bool swa = fc->n_blocks_swa > 0;
        for (int32_t k = 0; st == TS_OK && swa && k < n; k++) {
            int32_t t = b->order[at + k];
            st = ts_kv_seq_slot(b->kv, TS_KV_POOL_SWA, kv, (uint32_t)b->pos[t], &b->slots_swa[t],
                                err);
        }
        for (int pool = 0; st == TS_OK && pool < (swa ? 2 : 1); pool++) {
            uint32_t n_blk = 0;
            const int32_t *row = ts_kv_seq_block_table(b->kv, (ts_kv_pool)pool, kv, &n_blk);
            int32_t *dst = (pool == TS_KV_POOL_SWA ? b->table_swa : b->table) + u * width;
            for (int64_t j = 0; j < width; j++) {
                dst[j] = j < (int64_t)n_blk ? row[j] : -1;
            }
        }
        b->len[u] = (int32_t)seq_tokens(b, b->users[u]);
    }
    return st;
}

static ts_status decode(ts_context *ctx, const ts_decode_batch *in, ts_error *err) {
    const ts_forward_config *fc = &ctx->runner->cfg;
    if (in->tokens == NULL || in->n_tokens < 1 || in->n_tokens > fc->max_tokens) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "decode: a batch has 1..%lld tokens (max_batch_tokens), not %d",
                            (long long)fc->max_tokens, in->n_tokens);
    }
    if (ctx->llm->model->hp.enc != NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "decode: '%s' is an encoder: it has no logits and its inputs must be "
                            "whole (use ts_context_embed)",
                            ctx->llm->model->hp.arch->name);
    }
    bool claimed = false;
    ts_status st = rt_use_mode(ctx, MODE_BATCH, "ts_context_decode", &claimed, err);
    if (st != TS_OK) {
        return st;
    }
    st = rt_batch_init(ctx, err);
    rt_batch *b = &ctx->b;
    int32_t T = in->n_tokens, U = 0;
    if (st == TS_OK) {
        st = plan_batch(ctx, in, &U, err);
    }
    if (st == TS_OK) {
        st = reserve(ctx, U, err);
    }
    if (st != TS_OK) {
        forget_plan(b, U);
        if (claimed) {
            rt_unclaim_mode(ctx); /* a refused first batch leaves the context unused */
        }
        return st;
    }
    st = append_all(ctx, in, U, err);
    int32_t n_out = 0;
    for (int32_t t = 0; t < T; t++) {
        b->tokens[t] = in->tokens[t];
        b->seq[t] = b->bidx[in->seq != NULL ? in->seq[t] : 0];
        bool want = in->logits == NULL ? t == T - 1 : in->logits[t] != 0;
        b->out_row[t] = want ? n_out : -1;
        if (want) {
            b->outs[n_out++] = t;
        }
    }
    if (n_out == 0) {
        b->outs[n_out++] = T - 1; /* the forward computes at least one row; nobody reads it */
    }
    ts_batch step = {
        .n_tokens = T,
        .tokens = b->tokens,
        .pos = b->pos,
        .seq = b->seq,
        .slots = b->slots,
        .n_seqs = U,
        .block_table = b->table,
        .seq_len = b->len,
        .n_outputs = n_out,
        .outputs = b->outs,
        .slots_swa = b->slots_swa,
        .block_table_swa = b->table_swa,
    };
    if (st == TS_OK) {
        st = ts_runner_run(ctx->runner, &step, b->logits, b->embd, err);
        rt_latch_compare(ctx);
    }
    for (int32_t u = 0; u < U; u++) {
        int32_t s = b->users[u];
        ts_error ignored = {0};
        if (st != TS_OK) {
            drop_seq(b, s); /* its cache holds tokens that were never computed */
        } else if (ts_kv_seq_commit(b->kv, (uint32_t)b->kv_id[s], (uint32_t)b->counts[u],
                                    &ignored) != TS_OK) {
            st = ts_error_set(err, TS_ERR_INTERNAL, "decode: commit of sequence %d: %s", s,
                              ignored.msg);
        }
    }
    forget_plan(b, U);
    b->n_last = st == TS_OK ? T : 0;
    ctx->tokens_computed += st == TS_OK ? (uint64_t)T : 0;
    return st;
}

ts_status ts_context_decode(ts_context *ctx, const ts_decode_batch *batch, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || batch == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_context_decode: ctx and batch are "
                            "required");
    }
    return decode(ctx, batch, err);
}

/* Row of token i of the last batch, or -1. */
static int32_t row_of(const ts_context *ctx, int32_t i) {
    const rt_batch *b = &ctx->b;
    if (ctx->mode != MODE_BATCH || b->kv == NULL) {
        return -1;
    }
    if (i < 0) {
        i += b->n_last;
    }
    return i >= 0 && i < b->n_last ? b->out_row[i] : -1;
}

const float *ts_context_logits(ts_context *ctx, int32_t i) {
    int32_t r = row_of(ctx, i);
    return r < 0 ? NULL : ctx->b.logits + (size_t)r * (size_t)ctx->llm->model->hp.n_vocab;
}

const float *ts_context_embeddings(ts_context *ctx, int32_t i) {
    int32_t r = row_of(ctx, i);
    return r < 0 ? NULL : ctx->b.embd + (size_t)r * (size_t)ctx->llm->model->hp.n_embd;
}

int32_t ts_context_seq_len(const ts_context *ctx, int32_t seq) {
    if (ctx == NULL || ctx->b.kv == NULL || seq < 0 || seq >= ctx->runner->cfg.max_seqs) {
        return 0;
    }
    return (int32_t)seq_tokens(&ctx->b, seq);
}

/* Checks seq and readies the batch state for a sequence call. *idle: the context is used
 * for nothing yet, so every sequence is empty (and the call does not choose batch use). */
static ts_status seq_call(ts_context *ctx, int32_t seq, const char *fn, bool *idle, ts_error *err) {
    *idle = false;
    if (ctx == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "%s: ctx is NULL", fn);
    }
    if (seq < 0 || seq >= ctx->runner->cfg.max_seqs) {
        return ts_error_set(err, TS_ERR_RANGE, "%s: sequence %d is not in 0..%lld (max_seqs)", fn,
                            seq, (long long)ctx->runner->cfg.max_seqs - 1);
    }
    if (ctx->mode == MODE_NONE) {
        *idle = true;
        return TS_OK;
    }
    if (ctx->mode == MODE_REQUESTS) {
        return ts_error_set(err, TS_ERR_STATE, "%s: this context is used for requests", fn);
    }
    return rt_batch_init(ctx, err);
}

ts_status ts_context_seq_drop(ts_context *ctx, int32_t seq, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    bool idle = false;
    ts_status st = seq_call(ctx, seq, "ts_context_seq_drop", &idle, err);
    if (st == TS_OK && !idle) {
        drop_seq(&ctx->b, seq); /* the last batch's rows stay readable until the next decode */
    }
    return st;
}

ts_status ts_context_seq_fork(ts_context *ctx, int32_t src, int32_t dst, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    bool idle = false, idle2 = false;
    ts_status st = seq_call(ctx, src, "ts_context_seq_fork", &idle, err);
    if (st == TS_OK) {
        st = seq_call(ctx, dst, "ts_context_seq_fork", &idle2, err);
    }
    if (st == TS_OK && src == dst) {
        st = ts_error_set(err, TS_ERR_STATE,
                          "ts_context_seq_fork: source and target must differ (both are %d)", src);
    }
    if (st != TS_OK || idle) {
        return st; /* an unused context: the empty source forks into an empty target */
    }
    rt_batch *b = &ctx->b;
    if (seq_tokens(b, dst) > 0) {
        return ts_error_set(err, TS_ERR_STATE,
                            "ts_context_seq_fork: the target sequence %d holds %u tokens; it "
                            "must be empty",
                            dst, seq_tokens(b, dst));
    }
    if (b->kv_id[src] < 0) {
        return TS_OK; /* an empty source: the copy is empty too */
    }
    drop_seq(b, dst);
    uint32_t child = 0;
    st = ts_kv_seq_fork(b->kv, (uint32_t)b->kv_id[src], &child, err);
    if (st == TS_OK) {
        b->kv_id[dst] = (int32_t)child;
    }
    return st;
}

void ts_context_clear(ts_context *ctx) {
    if (ctx == NULL || ctx->mode != MODE_BATCH) {
        return;
    }
    rt_batch *b = &ctx->b;
    for (int64_t s = 0; b->kv != NULL && s < ctx->runner->cfg.max_seqs; s++) {
        drop_seq(b, (int32_t)s);
    }
    b->n_last = 0;
    ctx->mode = MODE_NONE;
}
