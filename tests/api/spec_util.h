/*
 * spec_util.h — what the speculative decoding tests share (test_api_spec.c, n-gram drafts;
 * test_api_spec_draft.c, draft models): collecting a request's events, running requests on a
 * context to the end, comparing two runs' outputs token for token, and the requests they send.
 * Include after <cmocka.h> and api_util.h.
 */
#ifndef TS_TESTS_API_SPEC_UTIL_H
#define TS_TESTS_API_SPEC_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tessera.h"

#define MAX_REQ  40
#define MAX_TOK  256
#define MAX_TEXT 4096

typedef struct out_seq {
    int32_t tokens[MAX_TOK];
    float logprobs[MAX_TOK];
    int32_t n;
    char text[MAX_TEXT];
    size_t text_len;
    ts_finish_reason finish;
} out_seq;

typedef struct out_req {
    out_seq seqs[2];
    int32_t cached;
    bool done;
} out_req;

static inline void on_event(const ts_engine_event *ev, void *user) {
    out_req *r = user;
    assert_true(ev->index >= 0 && ev->index < 2);
    out_seq *s = &r->seqs[ev->index];
    if (ev->token >= 0) {
        assert_true(s->n < MAX_TOK);
        s->logprobs[s->n] = ev->logprobs != NULL ? ev->logprobs->logprob : 0.0f;
        s->tokens[s->n++] = ev->token;
    }
    assert_true(s->text_len + ev->text_len < MAX_TEXT);
    memcpy(s->text + s->text_len, ev->text, ev->text_len);
    s->text_len += ev->text_len;
    if (ev->finish != TS_FINISH_NONE) {
        s->finish = ev->finish;
        if (ev->finish == TS_FINISH_ERROR) {
            fail_msg("request failed: %s", ev->message ? ev->message : "?");
        }
    }
    r->cached = ev->cached_tokens;
    r->done = r->done || ev->request_done;
}

/* One request of a case. */
typedef struct job {
    const int32_t *prompt;
    int32_t n_prompt;
    ts_request_params params;
} job;

/* Runs jobs[0..n) together on ctx to the end; outputs in out[0..n). */
static inline void run_jobs(ts_context *ctx, const job *jobs, int n, out_req *out) {
    ts_error err = {0};
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (ts_context_submit(ctx, jobs[i].prompt, jobs[i].n_prompt, &jobs[i].params, on_event,
                              &out[i], NULL, &err) != TS_OK) {
            fail_msg("submit %d: %s", i, err.msg);
        }
    }
    for (int guard = 0; guard < 100000; guard++) {
        bool all = true;
        for (int i = 0; i < n; i++) {
            all = all && out[i].done;
        }
        if (all) {
            return;
        }
        if (ts_context_step(ctx, NULL, &err) != TS_OK) {
            fail_msg("step: %s", err.msg);
        }
    }
    fail_msg("the requests did not finish");
}

static inline void assert_same(const out_req *a, const out_req *b, int n_seqs, int which) {
    for (int k = 0; k < n_seqs; k++) {
        const out_seq *x = &a->seqs[k], *y = &b->seqs[k];
        if (x->n != y->n || memcmp(x->tokens, y->tokens, (size_t)x->n * sizeof *x->tokens) != 0) {
            int at = 0;
            while (at < x->n && at < y->n && x->tokens[at] == y->tokens[at]) {
                at++;
            }
            fail_msg("request %d seq %d: %d tokens without speculation, %d with; first "
                     "difference at %d",
                     which, k, x->n, y->n, at);
        }
        assert_int_equal(x->finish, y->finish);
        assert_int_equal(x->text_len, y->text_len);
        assert_memory_equal(x->text, y->text, x->text_len);
        /* logprobs are reported for the accepted tokens exactly as without speculation */
        assert_memory_equal(x->logprobs, y->logprobs, (size_t)x->n * sizeof *x->logprobs);
    }
}

/* A prompt that repeats itself: a "document" of words, then the start of it again. */
static inline int32_t repeating_prompt(int32_t *out, int32_t n_vocab, uint32_t salt) {
    int32_t n = 0;
    uint32_t x = 2463534242u ^ salt;
    int32_t doc[48];
    for (int i = 0; i < 48; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        doc[i] = 3 + (int32_t)(x % (uint32_t)(n_vocab - 3));
    }
    for (int r = 0; r < 2; r++) {
        memcpy(out + n, doc, sizeof doc);
        n += 48;
    }
    memcpy(out + n, doc, 10 * sizeof *doc);
    return n + 10;
}

static inline ts_request_params greedy(int32_t max_tokens) {
    ts_request_params p = ts_request_params_default();
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    p.logprobs = true;
    return p;
}

static inline ts_request_params seeded(int32_t max_tokens, uint64_t seed) {
    ts_request_params p = ts_request_params_default();
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.8f;
    p.seed = seed;
    p.has_seed = true;
    p.logprobs = true;
    return p;
}

#endif /* TS_TESTS_API_SPEC_UTIL_H */
