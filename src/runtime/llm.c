/*
 * api.c — the public C API of include/tessera.h, on top of the model, tokenizer, backends and
 * engine layers. Nothing here computes: it wires the layers together and translates types.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tessera.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

struct ts_llm {
    ts_model *model;
    ts_tokenizer *tok;
    char arch[32];
};

struct ts_session {
    ts_llm *llm;
    ts_backend *backend;
    ts_engine *engine;
};

ts_status ts_llm_open(const char *path, ts_llm **out, ts_error *err) {
    if (path == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_open: path and out are required");
    }
    *out = NULL;
    ts_llm *llm = calloc(1, sizeof *llm);
    if (llm == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_open: out of memory");
    }
    ts_status st = ts_model_open(path, &llm->model, err);
    if (st == TS_OK) {
        st = ts_tokenizer_create(llm->model->gguf, &llm->tok, err);
        if (st != TS_OK) {
            ts_error_prefix(err, "%s: ", path);
        }
    }
    if (st != TS_OK) {
        ts_llm_close(llm);
        return st;
    }
    snprintf(llm->arch, sizeof llm->arch, "%s", llm->model->hp.arch->name);
    *out = llm;
    return TS_OK;
}

void ts_llm_close(ts_llm *llm) {
    if (llm == NULL) {
        return;
    }
    ts_tokenizer_destroy(llm->tok);
    ts_model_close(llm->model);
    free(llm);
}

int32_t ts_llm_n_vocab(const ts_llm *llm) {
    return (int32_t)llm->model->hp.n_vocab;
}

int64_t ts_llm_n_ctx_train(const ts_llm *llm) {
    return llm->model->hp.n_ctx_train;
}

const char *ts_llm_arch(const ts_llm *llm) {
    return llm->arch;
}

ts_status ts_llm_tokenize(const ts_llm *llm, const char *text, size_t len, int add_special,
                          int parse_special, int32_t **ids, size_t *n_ids, ts_error *err) {
    if (llm == NULL || (text == NULL && len > 0) || ids == NULL || n_ids == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_tokenize: NULL argument");
    }
    return ts_tokenizer_tokenize(llm->tok, text != NULL ? text : "", len, add_special != 0,
                                 parse_special != 0, ids, n_ids, err);
}

ts_status ts_llm_detokenize(const ts_llm *llm, const int32_t *ids, size_t n_ids,
                            int render_special, char **text, size_t *len, ts_error *err) {
    if (llm == NULL || (ids == NULL && n_ids > 0) || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_detokenize: NULL argument");
    }
    size_t n = 0;
    ts_status st = ts_tokenizer_detokenize(llm->tok, ids, n_ids, render_special != 0, text, &n,
                                           err);
    if (st == TS_OK && len != NULL) {
        *len = n;
    }
    return st;
}

ts_status ts_llm_chat_prompt(const ts_llm *llm, const char *name, const ts_message *msgs,
                             size_t n_msgs, char **text, ts_error *err) {
    if (llm == NULL || (msgs == NULL && n_msgs > 0) || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_chat_prompt: NULL argument");
    }
    ts_chat_template tmpl;
    ts_status st = name != NULL ? ts_chat_template_from_name(name, &tmpl, err)
                                : ts_tokenizer_chat_template(llm->tok, &tmpl, err);
    if (st != TS_OK) {
        return st;
    }
    /* ts_message and ts_chat_message have the same members; copy to keep the layers apart. */
    ts_chat_message *cm = calloc(n_msgs ? n_msgs : 1, sizeof *cm);
    if (cm == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_chat_prompt: out of memory");
    }
    for (size_t i = 0; i < n_msgs; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content;
    }
    size_t len = 0;
    st = ts_chat_apply(&tmpl, cm, n_msgs, true, text, &len, err);
    free(cm);
    return st;
}

ts_session_params ts_session_params_default(void) {
    ts_session_params p = {0};
    p.max_seqs = 16;
    p.max_batch_tokens = 512;
    return p;
}

ts_status ts_session_create(ts_llm *llm, const ts_session_params *params, ts_session **out,
                            ts_error *err) {
    if (llm == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_session_create: NULL argument");
    }
    *out = NULL;
    ts_session_params p = params != NULL ? *params : ts_session_params_default();
    ts_session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_session_create: out of memory");
    }
    s->llm = llm;
    ts_status st;
    if (p.reference_backend) {
        st = ts_ref_backend_create(&s->backend, err);
    } else {
        ts_cpu_params cp = ts_cpu_params_default();
        if (p.n_threads > 0) {
            cp.n_threads = p.n_threads;
        }
        st = ts_cpu_backend_create(&cp, &s->backend, err);
    }
    ts_engine_config ec = ts_engine_config_default(llm->model);
    if (p.n_ctx > 0) {
        ec.n_ctx = p.n_ctx;
    }
    if (p.kv_tokens > 0) {
        ec.kv_tokens = p.kv_tokens;
    }
    if (p.max_seqs > 0) {
        ec.max_seqs = p.max_seqs;
    }
    if (p.max_batch_tokens > 0) {
        ec.max_batch_tokens = p.max_batch_tokens;
    }
    if (st == TS_OK) {
        st = ts_engine_create(llm->model, llm->tok, s->backend, NULL, &ec, &s->engine, err);
    }
    if (st != TS_OK) {
        ts_session_destroy(s);
        return st;
    }
    *out = s;
    return TS_OK;
}

void ts_session_destroy(ts_session *s) {
    if (s == NULL) {
        return;
    }
    ts_engine_destroy(s->engine);
    ts_backend_destroy(s->backend);
    free(s);
}

ts_generate_params ts_generate_params_default(void) {
    ts_generate_params g = {0};
    g.top_p = 1.0f;
    g.repetition_penalty = 1.0f;
    return g;
}

typedef struct gen_state {
    ts_token_callback cb;
    void *user;
    ts_engine *engine;
    uint64_t id;
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
            ts_engine_abort(g->engine, ev->request_id);
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

ts_status ts_session_generate(ts_session *s, const char *prompt, const ts_generate_params *gp,
                              ts_token_callback cb, void *user, ts_generate_result *result,
                              ts_error *err) {
    if (s == NULL || prompt == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_session_generate: NULL argument");
    }
    ts_generate_params g = gp != NULL ? *gp : ts_generate_params_default();
    ts_request_params rp = ts_request_params_default();
    rp.max_tokens = g.max_tokens;
    rp.sampling.temperature = g.temperature;
    rp.sampling.top_k = g.top_k;
    rp.sampling.top_p = g.top_p;
    rp.sampling.min_p = g.min_p;
    rp.sampling.repetition_penalty = g.repetition_penalty;
    rp.seed = g.seed;
    rp.has_seed = g.has_seed != 0;
    rp.stop = g.stop;
    rp.n_stop = g.n_stop;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_status st = ts_tokenizer_tokenize(s->llm->tok, prompt, strlen(prompt), true,
                                         g.parse_special != 0, &ids, &n_ids, err);
    if (st != TS_OK) {
        return st;
    }
    if (n_ids > INT32_MAX) {
        free(ids);
        return ts_error_set(err, TS_ERR_LIMIT, "ts_session_generate: prompt of %zu tokens",
                            n_ids);
    }
    gen_state state = {.cb = cb, .user = user, .engine = s->engine};
    clock_gettime(CLOCK_MONOTONIC, &state.t0);
    st = ts_engine_add_request(s->engine, ids, (int32_t)n_ids, &rp, on_event, &state, &state.id,
                               err);
    free(ids);
    while (st == TS_OK && !state.done) {
        st = ts_engine_step(s->engine, NULL, err);
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

void ts_free(void *p) {
    free(p);
}
