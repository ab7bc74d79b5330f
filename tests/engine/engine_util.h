/*
 * engine_util.h — helpers for the engine tests: a tiny model with its tokenizer and a CPU
 * backend, an engine over a single-device runner made for its configuration, an event collector
 * that checks the event protocol (ids, indices, nothing after a sequence's final event or the
 * request's last event), a step loop with a step limit, and an idle check (no request, no running
 * or waiting sequence, no KV block in use, and the block manager's own invariants, read through the
 * engine's internal header).
 *
 * Header-only static helpers: each test program is one translation unit.
 */
#ifndef TS_TESTS_ENGINE_UTIL_H
#define TS_TESTS_ENGINE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "common/tiny_model.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "kv/kv.h"

#define EU_MAX_N    8
#define EU_MAX_TOK  256
#define EU_MAX_TEXT 8192

typedef struct eu_fx {
    ts_model *m;
    ts_tokenizer *tok;
    ts_backend *b;
} eu_fx;

typedef struct eu_seq {
    int32_t tok[EU_MAX_TOK];
    size_t text_at[EU_MAX_TOK]; /* text length after token i's event */
    int n_tok;
    char text[EU_MAX_TEXT];
    size_t len;
    ts_finish_reason finish;
    int32_t stop_index; /* the final event's stop_index */
    int n_final;
    int completion_tokens;
} eu_seq;

typedef struct eu_req {
    uint64_t id;
    int n; /* sequences expected */
    eu_seq seq[EU_MAX_N];
    bool done;
    int32_t prompt_tokens, cached_tokens;
    int errors; /* protocol violations seen */
    char first_error[256];
    const char *message; /* last error message (static copy below) */
    char msg[512];
} eu_req;

static inline void eu_violation(eu_req *r, const char *what) {
    if (r->errors++ == 0) {
        snprintf(r->first_error, sizeof r->first_error, "%s", what);
    }
}

static inline void eu_on_event(const ts_engine_event *ev, void *user) {
    eu_req *r = user;
    if (r->done) {
        eu_violation(r, "event after request_done");
        return;
    }
    if (ev->request_id != r->id && r->id != 0) {
        eu_violation(r, "wrong request id");
    }
    if (ev->index < 0 || ev->index >= r->n || ev->index >= EU_MAX_N) {
        eu_violation(r, "index out of range");
        return;
    }
    eu_seq *s = &r->seq[ev->index];
    if (s->n_final > 0) {
        eu_violation(r, "event after the sequence's final event");
    }
    if (ev->token >= 0 && s->n_tok < EU_MAX_TOK) {
        s->tok[s->n_tok++] = ev->token;
    }
    if (ev->text_len > 0 && s->len + ev->text_len < EU_MAX_TEXT) {
        memcpy(s->text + s->len, ev->text, ev->text_len);
        s->len += ev->text_len;
    }
    if (ev->token >= 0 && s->n_tok <= EU_MAX_TOK) {
        s->text_at[s->n_tok - 1] = s->len;
    }
    r->prompt_tokens = ev->prompt_tokens;
    r->cached_tokens = ev->cached_tokens;
    s->completion_tokens = ev->completion_tokens;
    if (ev->finish != TS_FINISH_NONE) {
        s->finish = ev->finish;
        s->stop_index = ev->stop_index;
        s->n_final++;
        if (ev->message != NULL) {
            snprintf(r->msg, sizeof r->msg, "%s", ev->message);
            r->message = r->msg;
        }
    }
    if (ev->request_done) {
        r->done = true;
        for (int i = 0; i < r->n; i++) {
            if (r->seq[i].n_final != 1) {
                eu_violation(r, "request_done before every sequence finished");
            }
        }
    }
}

static inline eu_fx *eu_open(const ts_tiny_spec *s, bool cpu) {
    eu_fx *fx = calloc(1, sizeof *fx);
    char path[512];
    ts_error err = {0};
    if (fx == NULL || ts_tiny_temp_path(path, sizeof path, s->arch) == NULL) {
        free(fx);
        return NULL;
    }
    ts_status st = ts_tiny_write(s, path, &err);
    if (st == TS_OK) {
        st = ts_model_open(path, &fx->m, &err);
    }
    unlink(path);
    if (st == TS_OK) {
        st = ts_tokenizer_create(fx->m->gguf, &fx->tok, &err);
    }
    if (st == TS_OK && cpu) {
        ts_cpu_params p = ts_cpu_params_default();
        p.n_threads = 2;
        st = ts_cpu_backend_create(&p, &fx->b, &err);
    } else if (st == TS_OK) {
        st = ts_ref_backend_create(&fx->b, &err);
    }
    if (st != TS_OK) {
        fprintf(stderr, "fixture %s: %s\n", s->arch, err.msg);
        ts_backend_destroy(fx->b);
        ts_tokenizer_destroy(fx->tok);
        ts_model_close(fx->m);
        free(fx);
        return NULL;
    }
    return fx;
}

static inline eu_fx *eu_open_arch(const char *arch) {
    ts_tiny_spec s = ts_tiny_spec_default(arch);
    return eu_open(&s, true);
}

static inline void eu_close(eu_fx *fx) {
    if (fx == NULL) {
        return;
    }
    ts_backend_destroy(fx->b);
    ts_tokenizer_destroy(fx->tok);
    ts_model_close(fx->m);
    free(fx);
}

/* A config with small, explicit sizes (callers adjust). */
static inline ts_engine_config eu_config(const eu_fx *fx) {
    ts_engine_config c = ts_engine_config_default(fx->m);
    c.n_ctx = 128;
    c.kv_tokens = 2048;
    c.max_seqs = 16;
    c.max_batch_tokens = 256;
    return c;
}

/* An engine of configuration c over a runner made for it (the engine's to destroy with
 * eu_destroy). */
static inline ts_status eu_create(const eu_fx *fx, const ts_engine_config *c, ts_engine **out,
                                  ts_error *err) {
    *out = NULL;
    ts_forward_config fc;
    ts_runner *r = NULL;
    ts_status st = ts_engine_forward_config(fx->m, c, &fc, err);
    if (st == TS_OK) {
        st = ts_forward_runner_create(fx->m, fx->b, &fc, NULL, &r, err);
    }
    if (st == TS_OK) {
        st = ts_engine_create(fx->m, fx->tok, r, c, out, err);
    }
    if (st != TS_OK) {
        ts_runner_destroy(r);
    }
    return st;
}

/* Destroys an engine made by eu_create and its runner. */
static inline void eu_destroy(ts_engine *e) {
    if (e == NULL) {
        return;
    }
    ts_runner *r = e->runner;
    ts_engine_destroy(e);
    ts_runner_destroy(r);
}

static inline ts_engine *eu_engine(const eu_fx *fx, const ts_engine_config *c) {
    ts_engine *e = NULL;
    ts_error err = {0};
    if (eu_create(fx, c, &e, &err) != TS_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return NULL;
    }
    return e;
}

/* Greedy, ignoring end-of-generation, exactly max_tokens tokens. */
static inline ts_request_params eu_greedy(int32_t max_tokens) {
    ts_request_params p = ts_request_params_default();
    p.sampling.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

static inline ts_status eu_add(ts_engine *e, const int32_t *prompt, int32_t n,
                               const ts_request_params *p, eu_req *r, ts_error *err) {
    memset(r, 0, sizeof *r);
    r->n = p->n;
    return ts_engine_add_request(e, prompt, n, p, eu_on_event, r, &r->id, err);
}

/* Steps until every request in reqs is done; returns the number of steps, or -1 when the
 * limit passes, a step fails, or the engine goes idle with requests unfinished. */
static inline int eu_run(ts_engine *e, eu_req *reqs, int n, int max_steps) {
    for (int step = 0; step < max_steps; step++) {
        int open = 0;
        for (int i = 0; i < n; i++) {
            open += !reqs[i].done;
        }
        if (open == 0) {
            return step;
        }
        bool busy = false;
        ts_error err = {0};
        if (ts_engine_step(e, &busy, &err) != TS_OK) {
            fprintf(stderr, "step %d: %s\n", step, err.msg);
            return -1;
        }
        if (!busy && !ts_engine_has_work(e)) {
            fprintf(stderr, "engine idle with %d requests open\n", open);
            return -1;
        }
    }
    return -1;
}

/* Deterministic prompt of n ids in [3, n_vocab) (no special tokens). */
static inline void eu_prompt(int32_t *ids, int n, int32_t n_vocab, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 777u;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 3 + (int32_t)((x >> 8) % (uint32_t)(n_vocab - 3));
    }
}

/* Nothing left: no request, no sequence, no KV block in use, block-manager invariants. */
static inline bool eu_idle(ts_engine *e, char *why, size_t size) {
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    if (st.n_requests != 0 || st.n_running != 0 || st.n_waiting != 0 || st.kv_blocks_used != 0 ||
        ts_engine_has_work(e)) {
        snprintf(why, size, "requests %lld, running %lld, waiting %lld, blocks used %u",
                 (long long)st.n_requests, (long long)st.n_running, (long long)st.n_waiting,
                 st.kv_blocks_used);
        return false;
    }
    ts_error err = {0};
    if (ts_kv_check(e->kv, &err) != TS_OK) {
        snprintf(why, size, "kv check: %.200s", err.msg);
        return false;
    }
    ts_kv_stats ks;
    ts_kv_get_stats(e->kv, &ks);
    if (ks.n_seqs != 0 || ks.n_used != 0) {
        snprintf(why, size, "kv: %u sequences open, %u blocks used", ks.n_seqs, ks.n_used);
        return false;
    }
    return true;
}

static inline bool eu_same_tokens(const eu_seq *a, const eu_seq *b) {
    return a->n_tok == b->n_tok && memcmp(a->tok, b->tok, (size_t)a->n_tok * sizeof a->tok[0]) == 0;
}

#endif /* TS_TESTS_ENGINE_UTIL_H */
