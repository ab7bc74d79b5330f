/*
 * requests.c — a context used for requests: the engine's request API handed through, and
 * ts_context_generate, which runs one prompt to completion on the calling thread.
 *
 * The functions that the header allows from any thread (submit, abort, wait, wake, has_work,
 * get_stats) touch only the engine's thread-safe entry points and the mode word, which is set
 * once by the first submit before any other thread could see requests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"
#include "util/error.h"

ts_status ts_context_submit(ts_context *ctx, const int32_t *prompt, int32_t n_prompt,
                            const ts_request_params *params, ts_engine_callback cb, void *user,
                            uint64_t *id, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || (prompt == NULL && n_prompt > 0) || params == NULL || cb == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_context_submit: ctx, prompt, params and cb are required");
    }
    if (ctx->llm->model->hp.enc != NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "ts_context_submit: '%s' is an encoder: it gives embeddings "
                            "(ts_context_embed), not text",
                            ctx->llm->model->hp.arch->name);
    }
    bool claimed = false;
    ts_status st = rt_use_mode(ctx, MODE_REQUESTS, "ts_context_submit", &claimed, err);
    if (st != TS_OK) {
        return st;
    }
    uint64_t ignored = 0;
    st = ts_engine_add_request(ctx->engine, prompt, n_prompt, params, cb, user,
                               id != NULL ? id : &ignored, err);
    if (st != TS_OK && claimed && !ts_engine_has_work(ctx->engine)) {
        rt_unclaim_mode(ctx); /* a refused first request leaves the context unused */
    }
    return st;
}

void ts_context_abort(ts_context *ctx, uint64_t id) {
    ts_engine_abort(ctx->engine, id);
}

ts_status ts_context_step(ts_context *ctx, bool *busy, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_step: ctx is NULL");
    }
    if (ctx->mode == MODE_BATCH) {
        return ts_error_set(err, TS_ERR_STATE,
                            "ts_context_step: this context is used for batches (ts_context_clear "
                            "ends batch use)");
    }
    bool ignored = false;
    ts_status st = ts_engine_step(ctx->engine, busy != NULL ? busy : &ignored, err);
    rt_latch_compare(ctx);
    return st;
}

void ts_context_wait(ts_context *ctx, int timeout_ms) {
    ts_engine_wait(ctx->engine, timeout_ms);
}

void ts_context_wake(ts_context *ctx) {
    ts_engine_wake(ctx->engine);
}

bool ts_context_has_work(ts_context *ctx) {
    return ts_engine_has_work(ctx->engine);
}

void ts_context_get_stats(ts_context *ctx, ts_engine_stats *out) {
    ts_engine_get_stats(ctx->engine, out);
}

/* ---- one prompt to completion ---- */

ts_generate_params ts_generate_params_default(void) {
    ts_generate_params g;
    memset(&g, 0, sizeof g);
    g.top_p = 1.0f;
    g.repetition_penalty = 1.0f;
    return g;
}

typedef struct gen_state {
    ts_token_callback cb;
    void *user;
    ts_context *ctx;
    bool done, stopped;
    int32_t prompt_tokens, completion_tokens;
    ts_finish_reason finish;
    char message[256];
    struct timespec t0, t_first, t_last;
} gen_state;

static double ms_between(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

static void on_event(const ts_engine_event *ev, void *user) {
    gen_state *g = user;
    if (ev->token >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &g->t_last);
        if (ev->completion_tokens == 1) {
            g->t_first = g->t_last;
        }
        if (g->cb != NULL && !g->stopped && g->cb(g->user, ev->token, ev->text, ev->text_len)) {
            g->stopped = true;
            ts_context_abort(g->ctx, ev->request_id);
        }
    }
    g->prompt_tokens = ev->prompt_tokens;
    g->completion_tokens = ev->completion_tokens;
    if (ev->finish != TS_FINISH_NONE) {
        g->finish = ev->finish;
        if (ev->message != NULL) {
            snprintf(g->message, sizeof g->message, "%s", ev->message);
        }
    }
    if (ev->request_done) {
        g->done = true;
    }
}

static ts_request_params request_of(const ts_generate_params *g) {
    ts_request_params rp = ts_request_params_default();
    rp.max_tokens = g->max_tokens;
    rp.sampling.temperature = g->temperature;
    rp.sampling.top_k = g->top_k;
    rp.sampling.top_p = g->top_p;
    rp.sampling.min_p = g->min_p;
    rp.sampling.repetition_penalty = g->repetition_penalty;
    rp.seed = g->seed;
    rp.has_seed = g->has_seed != 0;
    rp.stop = g->stop;
    rp.n_stop = g->n_stop;
    return rp;
}

static ts_status generate(ts_context *ctx, const char *prompt, const ts_generate_params *gp,
                          ts_token_callback cb, void *user, ts_generate_result *result,
                          ts_error *err) {
    if (ctx == NULL || prompt == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_context_generate: ctx and prompt are required");
    }
    ts_generate_params g = gp != NULL ? *gp : ts_generate_params_default();
    ts_request_params rp = request_of(&g);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_status st = ts_tokenizer_tokenize(ctx->llm->tok, prompt, strlen(prompt), true,
                                         g.parse_special != 0, &ids, &n_ids, err);
    if (st != TS_OK) {
        return st;
    }
    if (n_ids > INT32_MAX) {
        free(ids);
        return ts_error_set(err, TS_ERR_LIMIT, "ts_context_generate: prompt of %zu tokens", n_ids);
    }
    gen_state state = {.cb = cb, .user = user, .ctx = ctx};
    clock_gettime(CLOCK_MONOTONIC, &state.t0);
    st = ts_context_submit(ctx, ids, (int32_t)n_ids, &rp, on_event, &state, NULL, err);
    free(ids);
    while (st == TS_OK && !state.done) {
        st = ts_context_step(ctx, NULL, err);
    }
    if (st == TS_OK && state.finish == TS_FINISH_ERROR) {
        st = ts_error_set(err, TS_ERR_INTERNAL, "generation failed: %s", state.message);
    }
    if (result != NULL) {
        memset(result, 0, sizeof *result);
        result->prompt_tokens = state.prompt_tokens;
        result->completion_tokens = state.completion_tokens;
        result->finish_reason = state.stopped ? "abort" : ts_finish_reason_name(state.finish);
        if (state.completion_tokens > 0) {
            result->prompt_ms = ms_between(state.t0, state.t_first);
            result->generate_ms = ms_between(state.t_first, state.t_last);
        }
    }
    return st;
}

ts_status ts_context_generate(ts_context *ctx, const char *prompt, const ts_generate_params *gp,
                              ts_token_callback cb, void *user, ts_generate_result *result,
                              ts_error *err) {
    ts_error local = {0};
    return generate(ctx, prompt, gp, cb, user, result, err != NULL ? err : &local);
}
