/* engine.c — engine lifetime, the thread-safe inbox, and request bookkeeping. */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"

const char *ts_finish_reason_name(ts_finish_reason r) {
    switch (r) {
    case TS_FINISH_NONE:
        return "none";
    case TS_FINISH_STOP:
        return "stop";
    case TS_FINISH_LENGTH:
        return "length";
    case TS_FINISH_ABORT:
        return "abort";
    case TS_FINISH_ERROR:
        return "error";
    }
    return "?";
}

ts_engine_config ts_engine_config_default(const ts_model *m) {
    ts_engine_config c = {0};
    c.n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    c.kv_tokens = 0;
    c.max_seqs = 16;
    c.max_batch_tokens = 512;
    c.block_size = TS_KV_DEFAULT_BLOCK_SIZE;
    c.kv_type_k = TS_TYPE_F16;
    c.kv_type_v = TS_TYPE_F16;
    c.prefix_cache = true;
    c.max_queue = 0;
    c.draft_max = 0;
    c.draft_min = 1;
    c.ngram_min = 3;
    c.ngram_max = 4;
    c.spec_step_tokens = 32;
    return c;
}

static ts_status check_config(const ts_model *m, ts_engine_config *c, ts_error *err) {
    if (c->block_size <= 0) {
        c->block_size = TS_KV_DEFAULT_BLOCK_SIZE;
    }
    if (c->kv_tokens <= 0) {
        c->kv_tokens = c->n_ctx;
    }
    if (c->n_ctx < 1 || c->n_ctx > m->hp.n_ctx_train * 4 || c->max_seqs < 1 || c->max_seqs > 4096 ||
        c->max_batch_tokens < 1 || c->max_batch_tokens > 65536 || c->kv_tokens < c->block_size ||
        c->kv_tokens > ((int64_t)1 << 31) / 2) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "engine: invalid configuration: ctx %lld (model trained for %lld), "
                            "max-seqs %lld, max-batch-tokens %lld, KV tokens %lld",
                            (long long)c->n_ctx, (long long)m->hp.n_ctx_train,
                            (long long)c->max_seqs, (long long)c->max_batch_tokens,
                            (long long)c->kv_tokens);
    }
    if (m->hp.arch->pos == TS_POS_LEARNED && c->n_ctx > m->hp.n_ctx_train) {
        /* A learned position table has no row past the trained context. */
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "engine: invalid configuration: ctx %lld exceeds the %lld positions "
                            "the model (%s, learned position embeddings) was trained for",
                            (long long)c->n_ctx, (long long)m->hp.n_ctx_train, m->hp.arch->name);
    }
    if (c->max_seqs > c->max_batch_tokens) {
        c->max_seqs = c->max_batch_tokens;
    }
    if (c->spec_step_tokens <= 0) {
        c->spec_step_tokens = 32;
    }
    if (c->draft_min <= 0) {
        c->draft_min = 1;
    }
    if (c->ngram_min <= 0) {
        c->ngram_min = 3;
    }
    if (c->ngram_max <= 0) {
        c->ngram_max = c->ngram_min > 4 ? c->ngram_min : 4;
    }
    if (c->draft_max < 0 || c->draft_max > TS_ENGINE_MAX_DRAFT ||
        c->draft_min > TS_ENGINE_MAX_DRAFT || c->ngram_min > c->ngram_max || c->ngram_max > 16 ||
        c->spec_step_tokens > 4096) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "engine: invalid speculative decoding settings: draft-max %d (0..%d), "
                            "draft-min %d, n-gram sizes %d..%d (1..16), step tokens %lld",
                            c->draft_max, TS_ENGINE_MAX_DRAFT, c->draft_min, c->ngram_min,
                            c->ngram_max, (long long)c->spec_step_tokens);
    }
    return TS_OK;
}

/* True when some layer of the model attends through a sliding window. */
static bool has_swa_layers(const ts_model *m) {
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        if (ts_hparams_layer_is_swa(&m->hp, il)) {
            return true;
        }
    }
    return false;
}

/* The configuration after defaults and checks (*c) and the runner bucket it needs (*fc). */
static ts_status resolve_config(const ts_model *m, const ts_engine_config *cfg, ts_engine_config *c,
                                ts_forward_config *fc, ts_error *err) {
    *c = *cfg;
    ts_status st = check_config(m, c, err);
    uint32_t n_blocks = 0, n_blocks_swa = 0;
    if (st == TS_OK) {
        st = ts_kv_blocks_for_context((uint64_t)c->kv_tokens, (uint32_t)c->block_size, &n_blocks,
                                      err);
    }
    if (st == TS_OK && !c->swa_full && has_swa_layers(m)) {
        st = ts_kv_blocks_for_window((uint64_t)m->hp.n_swa, (uint32_t)c->block_size,
                                     (uint32_t)c->max_seqs, (uint32_t)c->max_batch_tokens, n_blocks,
                                     &n_blocks_swa, err);
    }
    if (st != TS_OK) {
        return st;
    }
    *fc = (ts_forward_config){
        .max_tokens = c->max_batch_tokens,
        .max_seqs = c->max_seqs,
        /* Speculation: a row per draft token too, at most spec_step_tokens a step. */
        .max_outputs = c->draft_max > 0 && c->max_seqs + c->spec_step_tokens < c->max_batch_tokens
                           ? c->max_seqs + c->spec_step_tokens
                       : c->draft_max > 0 ? c->max_batch_tokens
                                          : c->max_seqs,
        .n_blocks = n_blocks,
        .block_size = c->block_size,
        .max_blocks_per_seq = (c->n_ctx + c->block_size - 1) / c->block_size,
        .kv_type_k = c->kv_type_k,
        .kv_type_v = c->kv_type_v,
        .n_ctx = c->n_ctx,
        .n_blocks_swa = n_blocks_swa,
    };
    return TS_OK;
}

ts_status ts_engine_forward_config(const ts_model *m, const ts_engine_config *cfg,
                                   ts_forward_config *out, ts_error *err) {
    ts_engine_config c;
    return resolve_config(m, cfg, &c, out, err);
}

/* The runner must hold the engine's KV pool exactly (the block manager hands out its block
 * ids) and take every batch the scheduler can make. */
ts_status ts_engine_check_runner(const ts_runner *r, const ts_forward_config *want, ts_error *err) {
    const ts_forward_config *h = &r->cfg;
    if (h->n_blocks != want->n_blocks || h->block_size != want->block_size ||
        h->max_blocks_per_seq != want->max_blocks_per_seq || h->max_tokens < want->max_tokens ||
        h->max_seqs < want->max_seqs || h->max_outputs < want->max_outputs ||
        h->n_blocks_swa != want->n_blocks_swa) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "engine: the runner's bucket (tokens %lld, seqs %lld, outputs %lld, "
                            "blocks %lld (+ %lld) x %lld, table width %lld) does not cover the "
                            "engine's (%lld, %lld, %lld, %lld (+ %lld) x %lld, %lld)",
                            (long long)h->max_tokens, (long long)h->max_seqs,
                            (long long)h->max_outputs, (long long)h->n_blocks,
                            (long long)h->n_blocks_swa, (long long)h->block_size,
                            (long long)h->max_blocks_per_seq, (long long)want->max_tokens,
                            (long long)want->max_seqs, (long long)want->max_outputs,
                            (long long)want->n_blocks, (long long)want->n_blocks_swa,
                            (long long)want->block_size, (long long)want->max_blocks_per_seq);
    }
    return TS_OK;
}

ts_status ts_engine_create(const ts_model *m, const ts_tokenizer *tok, ts_runner *runner,
                           const ts_engine_config *cfg, ts_engine **out, ts_error *err) {
    *out = NULL;
    ts_engine_config c;
    ts_forward_config fc;
    ts_status st = resolve_config(m, cfg, &c, &fc, err);
    if (st == TS_OK) {
        st = ts_engine_check_runner(runner, &fc, err);
    }
    if (st != TS_OK) {
        return st;
    }
    if ((int64_t)ts_tokenizer_n_vocab(tok) > m->hp.n_vocab) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "engine: tokenizer has %u tokens but the model only %lld",
                            ts_tokenizer_n_vocab(tok), (long long)m->hp.n_vocab);
    }
    ts_engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
    }
    e->model = m;
    e->tok = tok;
    e->runner = runner;
    e->cfg = c;
    e->n_vocab = (int32_t)m->hp.n_vocab;
    e->max_blk = fc.max_blocks_per_seq;
    e->next_id = 1;
    e->seed_counter = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->gmu, NULL);

    ts_kv_config kc = {
        .n_blocks = (uint32_t)fc.n_blocks,
        .block_size = (uint32_t)c.block_size,
        .max_seqs = (uint32_t)c.max_seqs,
        .max_seq_len = (uint32_t)c.n_ctx,
        .prefix_cache = c.prefix_cache,
        .n_blocks_swa = (uint32_t)fc.n_blocks_swa,
        .swa_window = fc.n_blocks_swa > 0 ? (uint32_t)m->hp.n_swa : 0,
    };
    e->swa_pool = fc.n_blocks_swa > 0;
    st = ts_kv_create(&kc, &e->kv, err);
    size_t T = (size_t)c.max_batch_tokens, S = (size_t)c.max_seqs;
    if (st == TS_OK) {
        e->running = calloc(S, sizeof *e->running);
        e->b_seqs = calloc(S, sizeof *e->b_seqs);
        e->b_tokens = malloc(T * sizeof(int32_t));
        e->b_pos = malloc(T * sizeof(int32_t));
        e->b_seq = malloc(T * sizeof(int32_t));
        e->b_slots = malloc(T * sizeof(int32_t));
        e->b_len = malloc(S * sizeof(int32_t));
        e->b_table = malloc(S * (size_t)e->max_blk * sizeof(int32_t));
        e->b_slots_swa = malloc(T * sizeof(int32_t));
        e->b_table_swa = malloc(S * (size_t)e->max_blk * sizeof(int32_t));
        e->max_out = fc.max_outputs < (int64_t)T ? fc.max_outputs : (int64_t)T;
        e->b_out = malloc((size_t)e->max_out * sizeof(int32_t));
        e->logits = malloc((size_t)e->max_out * (size_t)e->n_vocab * sizeof(float));
        e->draft_buf = malloc(((size_t)c.draft_max + 1) * sizeof(int32_t));
        if (!e->running || !e->b_seqs || !e->b_tokens || !e->b_pos || !e->b_seq || !e->b_slots ||
            !e->b_len || !e->b_out || !e->b_table || !e->b_slots_swa || !e->b_table_swa ||
            !e->logits || !e->draft_buf) {
            st = ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory for batch buffers");
        }
    }
    if (st != TS_OK) {
        ts_engine_destroy(e);
        return st;
    }
    e->stats.kv_blocks_total = (uint32_t)fc.n_blocks;
    e->stats.kv_swa_blocks_total = (uint32_t)fc.n_blocks_swa;
    *out = e;
    return TS_OK;
}

static void seq_free(seq *s) {
    if (s == NULL) {
        return;
    }
    ts_sampler_destroy(s->sampler);
    ts_detok_stream_destroy(s->detok);
    ts_gmatch_free(s->gm);
    ts_ngram_destroy(s->ngram);
    free(s->d_tokens);
    free(s->tokens);
    free(s->held);
    free(s);
}

static void request_free(request *r) {
    if (r == NULL) {
        return;
    }
    if (r->seqs != NULL) {
        for (int32_t i = 0; i < r->n; i++) {
            seq_free(r->seqs[i]);
        }
    }
    free(r->seqs);
    ts_grammar_free(r->grammar);
    free(r->stop_storage);
    free(r->salt);
    free(r);
}

void ts_engine_destroy(ts_engine *e) {
    if (e == NULL) {
        return;
    }
    for (request *r = e->inbox_head, *n; r != NULL; r = n) {
        n = r->next;
        request_free(r);
    }
    for (request *r = e->active, *n; r != NULL; r = n) {
        n = r->next;
        request_free(r);
    }
    ts_engine_grammar_destroy(e);
    ts_engine_draft_destroy(e->draft);
    ts_kv_destroy(e->kv);
    free(e->running);
    free(e->b_seqs);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_slots);
    free(e->b_len);
    free(e->b_out);
    free(e->b_table);
    free(e->b_slots_swa);
    free(e->b_table_swa);
    free(e->logits);
    free(e->draft_buf);
    free(e->aborts);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* Copies the stop strings and salt into storage the request owns. */
static ts_status copy_params(request *r, const ts_request_params *p, ts_error *err) {
    r->params = *p;
    if (p->n_stop < 0 || p->n_stop > TS_ENGINE_MAX_STOP) {
        return ts_error_set(err, TS_ERR_RANGE, "engine: %d stop strings (at most %d)", p->n_stop,
                            TS_ENGINE_MAX_STOP);
    }
    size_t total = 0;
    for (int32_t i = 0; i < p->n_stop; i++) {
        if (p->stop[i] == NULL || p->stop[i][0] == '\0') {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "engine: stop string %d is empty", i);
        }
        total += strlen(p->stop[i]) + 1;
    }
    if (total > 0) {
        r->stop_storage = malloc(total);
        if (r->stop_storage == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
        }
        char *at = r->stop_storage;
        for (int32_t i = 0; i < p->n_stop; i++) {
            size_t n = strlen(p->stop[i]) + 1;
            memcpy(at, p->stop[i], n);
            r->stop_ptrs[i] = at;
            at += n;
        }
    }
    r->params.stop = r->stop_ptrs;
    r->params.sampling.logit_bias = NULL; /* copied by each sampler at create */
    if (p->cache_salt_len > 0) {
        r->salt = malloc(p->cache_salt_len);
        if (r->salt == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
        }
        memcpy(r->salt, p->cache_salt, p->cache_salt_len);
    }
    r->params.cache_salt = r->salt;
    r->params.grammar = NULL; /* compiled into r->grammar */
    r->params.grammar_len = 0;
    return TS_OK;
}

/* Generated text continues the prompt: with tokenizers that drop the leading space of the
 * first piece of a text (SentencePiece with add_space_prefix, WordPiece), the stream must
 * know what came before, or the first generated word loses its space. The stream's state
 * depends only on the previous token (special or not), so the last prompt token is pushed
 * and its text discarded — unless it is a byte of a longer character, whose bytes would
 * stay pending and leak into the output. */
static ts_status prime_detok(ts_engine *e, seq *s, ts_error *err) {
    const ts_tokenizer_special *sp = ts_tokenizer_get_special(e->tok);
    ts_tokenizer_kind kind = ts_tokenizer_get_kind(e->tok);
    bool strips = (kind == TS_TOKENIZER_SPM && sp->add_space_prefix) || kind == TS_TOKENIZER_WPM;
    int32_t last = s->tokens[s->n_tokens - 1];
    if (!strips || last >= (int32_t)ts_tokenizer_n_vocab(e->tok)) {
        return TS_OK;
    }
    const char *piece = NULL;
    size_t len = 0;
    ts_error ignored;
    if (ts_tokenizer_token_type(e->tok, last) == TS_TOKEN_TYPE_BYTE &&
        (ts_tokenizer_token_to_piece(e->tok, last, false, &piece, &len, &ignored) != TS_OK ||
         len != 1 || (unsigned char)piece[0] >= 0x80)) {
        return TS_OK;
    }
    return ts_detok_stream_push(s->detok, last, &piece, &len, err);
}

seq *ts_engine_seq_new(ts_engine *e, request *r, int32_t index, const int32_t *prompt,
                       int32_t n_prompt, ts_error *err) {
    seq *s = calloc(1, sizeof *s);
    if (s == NULL) {
        ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
        return NULL;
    }
    s->req = r;
    s->index = index;
    s->batch_out = -1;
    s->g_job = -1;
    s->tokens = malloc((size_t)r->cap_tokens * sizeof(int32_t));
    uint64_t seed = r->params.seed + (uint64_t)index;
    ts_status st = s->tokens ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
    if (st == TS_OK) {
        memcpy(s->tokens, prompt, (size_t)n_prompt * sizeof(int32_t));
        s->n_tokens = n_prompt;
        st = ts_sampler_create(&r->params.sampling, e->n_vocab, seed, &s->sampler, err);
    }
    if (st == TS_OK) {
        st = ts_detok_stream_create(e->tok, r->params.render_special, &s->detok, err);
    }
    if (st == TS_OK) {
        st = prime_detok(e, s, err);
    }
    if (st == TS_OK && e->cfg.draft_max > 0 && r->params.draft_max >= 0) {
        st = ts_ngram_create(e->cfg.ngram_min, e->cfg.ngram_max, &s->ngram, err);
        s->draft_len = r->params.draft_max > 0 && r->params.draft_max < e->cfg.draft_max
                           ? r->params.draft_max
                           : e->cfg.draft_max;
    }
    if (st == TS_OK && r->grammar != NULL) {
        s->gm = ts_gmatch_create(r->grammar);
        if (s->gm == NULL) {
            st = ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory for the grammar state");
        }
    }
    if (st != TS_OK) {
        seq_free(s);
        return NULL;
    }
    return s;
}

ts_status ts_engine_add_request(ts_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const ts_request_params *p, ts_engine_callback cb, void *user,
                                uint64_t *id, ts_error *err) {
    const ts_engine_config *c = &e->cfg;
    if (n_prompt < 1 || prompt == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "engine: the prompt is empty");
    }
    for (int32_t i = 0; i < n_prompt; i++) {
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab) {
            return ts_error_set(err, TS_ERR_RANGE, "engine: prompt token %d has id %d (vocab %d)",
                                i, prompt[i], e->n_vocab);
        }
    }
    if (p->n < 1 || p->n > c->max_seqs) {
        return ts_error_set(err, TS_ERR_RANGE, "engine: n = %d is out of range (1..%lld)", p->n,
                            (long long)c->max_seqs);
    }
    if (p->max_tokens < 0) {
        return ts_error_set(err, TS_ERR_RANGE, "engine: max_tokens = %d is negative",
                            p->max_tokens);
    }
    if (n_prompt >= c->n_ctx) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "engine: the prompt has %d tokens but the context holds %lld", n_prompt,
                            (long long)c->n_ctx);
    }
    int64_t max_tokens = p->max_tokens > 0 ? p->max_tokens : c->n_ctx - n_prompt;
    if (n_prompt + max_tokens > c->n_ctx) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "engine: prompt (%d tokens) + max_tokens (%lld) = %lld exceeds the "
                            "context of %lld tokens",
                            n_prompt, (long long)max_tokens, (long long)(n_prompt + max_tokens),
                            (long long)c->n_ctx);
    }
    /* The whole cache must be able to hold one of the request's sequences, or it could never
     * finish; its n sequences need not fit at once (siblings are preempted and recomputed
     * like any other sequence when blocks run short). */
    int64_t bs = c->block_size;
    int64_t blocks = (n_prompt + max_tokens + bs - 1) / bs;
    if (blocks > (int64_t)e->stats.kv_blocks_total) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "engine: the request needs up to %lld KV blocks of %lld tokens (prompt "
                            "%d + max_tokens %lld) but the whole cache holds %u blocks (%lld "
                            "tokens)",
                            (long long)blocks, (long long)bs, n_prompt, (long long)max_tokens,
                            e->stats.kv_blocks_total, (long long)e->stats.kv_blocks_total * bs);
    }
    ts_status st = ts_sampler_params_validate(&p->sampling, e->n_vocab, err);
    if (st != TS_OK) {
        return st;
    }
    request *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
    }
    r->n_prompt = n_prompt;
    r->max_tokens = (int32_t)max_tokens;
    r->cap_tokens = n_prompt + (int32_t)max_tokens;
    r->n = p->n;
    r->cb = cb;
    r->user = user;
    st = copy_params(r, p, err);
    if (st == TS_OK) {
        st = ts_engine_grammar_compile(e, p, &r->grammar, err);
    }
    r->seqs = calloc((size_t)r->n, sizeof *r->seqs);
    if (st == TS_OK && r->seqs == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory");
    }
    pthread_mutex_lock(&e->mu);
    if (!p->has_seed) {
        e->seed_counter += 0x9E3779B97F4A7C15ull;
        r->params.seed = e->seed_counter;
    }
    pthread_mutex_unlock(&e->mu);
    /* The sampler copies the bias list, so pass the caller's (still valid here). */
    r->params.sampling.logit_bias = p->sampling.logit_bias;
    if (st == TS_OK) {
        r->seqs[0] = ts_engine_seq_new(e, r, 0, prompt, n_prompt, err);
        if (r->seqs[0] == NULL) {
            st = err->status;
        }
    }
    r->params.sampling.logit_bias = NULL;
    if (st != TS_OK) {
        request_free(r);
        return st;
    }
    pthread_mutex_lock(&e->mu);
    /* Waiting = not yet drained from the inbox + admitted but not scheduled (stats.n_waiting
     * already holds both, so it cannot be added to n_inbox). */
    if (c->max_queue > 0 && e->n_inbox + e->n_waiting_pub >= c->max_queue) {
        pthread_mutex_unlock(&e->mu);
        request_free(r);
        return ts_error_set(err, TS_ERR_LIMIT, "engine: the queue is full (%lld waiting)",
                            (long long)c->max_queue);
    }
    r->id = e->next_id++;
    /* The caller learns the id before the step thread can see the request (and call back). */
    if (id != NULL) {
        *id = r->id;
    }
    if (e->inbox_tail != NULL) {
        e->inbox_tail->next = r;
    } else {
        e->inbox_head = r;
    }
    e->inbox_tail = r;
    e->n_inbox++;
    e->n_active_requests++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return TS_OK;
}

void ts_engine_abort(ts_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    if (e->n_aborts == e->cap_aborts) {
        int64_t cap = e->cap_aborts ? e->cap_aborts * 2 : 16;
        uint64_t *a = realloc(e->aborts, (size_t)cap * sizeof *a);
        if (a == NULL) {
            pthread_mutex_unlock(&e->mu);
            return; /* the request runs to its end; nothing is lost */
        }
        e->aborts = a;
        e->cap_aborts = cap;
    }
    e->aborts[e->n_aborts++] = id;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void ts_engine_wait(ts_engine *e, int timeout_ms) {
    pthread_mutex_lock(&e->mu);
    if (e->n_active_requests == 0 && e->n_aborts == 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->cv, &e->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += timeout_ms / 1000;
            ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        }
    }
    pthread_mutex_unlock(&e->mu);
}

void ts_engine_wake(ts_engine *e) {
    pthread_mutex_lock(&e->mu);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool ts_engine_has_work(ts_engine *e) {
    pthread_mutex_lock(&e->mu);
    bool busy = e->n_active_requests > 0 || e->n_aborts > 0;
    pthread_mutex_unlock(&e->mu);
    return busy;
}

void ts_engine_get_stats(ts_engine *e, ts_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}

void ts_engine_release_kv(ts_engine *e, seq *s) {
    if (s->has_kv) {
        /* Closing a sequence the engine holds cannot fail. */
        ts_error ignored;
        ts_kv_seq_close(e->kv, s->kv_id, &ignored);
        s->has_kv = false;
    }
    s->n_computed = 0;
    if (e->draft != NULL) {
        ts_engine_draft_release(e, s);
    }
}

/* Removes a sequence from the running set or the waiting queue, wherever it is. */
void ts_engine_unlink_seq(ts_engine *e, seq *s) {
    for (int64_t i = 0; i < e->n_running; i++) {
        if (e->running[i] == s) {
            memmove(&e->running[i], &e->running[i + 1],
                    (size_t)(e->n_running - i - 1) * sizeof *e->running);
            e->n_running--;
            return;
        }
    }
    seq **link = &e->wait_head;
    seq *prev = NULL;
    while (*link != NULL) {
        if (*link == s) {
            *link = s->next;
            if (e->wait_tail == s) {
                e->wait_tail = prev;
            }
            s->next = NULL;
            e->n_waiting--;
            return;
        }
        prev = *link;
        link = &(*link)->next;
    }
}

void ts_engine_retire_request(ts_engine *e, request *r) {
    for (int32_t i = 0; i < r->n; i++) {
        if (r->seqs[i] != NULL) {
            ts_engine_unlink_seq(e, r->seqs[i]);
            ts_engine_release_kv(e, r->seqs[i]);
        }
    }
    /* Slots promised to forks that never happened go back too. */
    if (r->fork_reserved) {
        e->n_pending_forks -= r->n - 1;
    }
    request **link = &e->active;
    while (*link != NULL && *link != r) {
        link = &(*link)->next;
    }
    if (*link == r) {
        *link = r->next;
    }
    request_free(r);
    pthread_mutex_lock(&e->mu);
    e->n_active_requests--;
    pthread_mutex_unlock(&e->mu);
}

/* Moves new requests to the waiting queue and applies aborts. */
static void drain_inbox(ts_engine *e) {
    pthread_mutex_lock(&e->mu);
    request *in = e->inbox_head;
    e->inbox_head = e->inbox_tail = NULL;
    e->n_inbox = 0;
    int64_t n_aborts = e->n_aborts;
    uint64_t *aborts = NULL;
    if (n_aborts > 0) {
        aborts = malloc((size_t)n_aborts * sizeof *aborts);
        if (aborts != NULL) {
            memcpy(aborts, e->aborts, (size_t)n_aborts * sizeof *aborts);
            e->n_aborts = 0;
        } else {
            n_aborts = 0; /* retried next step */
        }
    }
    pthread_mutex_unlock(&e->mu);

    while (in != NULL) {
        request *r = in;
        in = in->next;
        r->next = e->active;
        e->active = r;
        seq *s = r->seqs[0];
        if (e->wait_tail != NULL) {
            e->wait_tail->next = s;
        } else {
            e->wait_head = s;
        }
        e->wait_tail = s;
        e->n_waiting++;
    }
    for (int64_t i = 0; i < n_aborts; i++) {
        for (request *r = e->active; r != NULL; r = r->next) {
            if (r->id == aborts[i]) {
                r->aborted = true;
                break;
            }
        }
    }
    free(aborts);
    /* Finish aborted requests: each live sequence gets a final event; the last one frees
     * the request. */
    for (request *r = e->active, *next; r != NULL; r = next) {
        next = r->next;
        if (!r->aborted) {
            continue;
        }
        bool done = false;
        for (int32_t i = 0; !done && i < r->n; i++) {
            seq *s = r->seqs[i];
            if (s != NULL && s->finish == TS_FINISH_NONE) {
                done = ts_engine_finish_seq(e, s, TS_FINISH_ABORT, NULL);
            }
        }
    }
}

static void publish_stats(ts_engine *e) {
    ts_kv_stats ks;
    ts_kv_get_stats(e->kv, &ks);
    int64_t n_req = 0;
    for (request *r = e->active; r != NULL; r = r->next) {
        n_req++;
    }
    pthread_mutex_lock(&e->mu);
    ts_engine_stats *s = &e->stats;
    s->n_running = e->n_running;
    s->n_waiting = e->n_waiting + e->n_inbox;
    e->n_waiting_pub = e->n_waiting;
    s->n_requests = n_req + e->n_inbox;
    s->n_steps = e->n_steps;
    s->n_preemptions = e->n_preemptions;
    s->prompt_tokens = e->prompt_computed;
    s->generated_tokens = e->generated;
    s->kv_blocks_total = ks.n_blocks;
    s->kv_blocks_used = ks.n_used;
    s->kv_swa_blocks_total = ks.swa.n_blocks;
    s->kv_swa_blocks_used = ks.swa.n_used;
    s->prefix_query_tokens = ks.prefix_query_tokens;
    s->prefix_hit_tokens = ks.prefix_hit_tokens;
    s->grammar_masks = e->g_n_masks;
    s->grammar_mask_ms = (double)e->g_mask_ns / 1e6;
    s->grammar_wait_ms = (double)e->g_wait_ns / 1e6;
    s->spec_drafted = e->spec_drafted;
    s->spec_accepted = e->spec_accepted;
    s->spec_steps = e->spec_steps;
    pthread_mutex_unlock(&e->mu);
}

ts_status ts_engine_step(ts_engine *e, bool *busy, ts_error *err) {
    drain_inbox(e);
    ts_status st = ts_engine_schedule_and_run(e, busy, err);
    publish_stats(e);
    return st;
}
