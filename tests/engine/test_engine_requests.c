/*
 * test_engine_requests.c — what one request sees through engine.h, on tiny models and the
 * CPU backend:
 *
 *  - abort: the callback gets TS_FINISH_ABORT during the next step and the blocks are free
 *    right after it (running, waiting and not-yet-admitted requests alike);
 *  - parallel sampling (n > 1): sequence i of a request with seed S equals a lone request
 *    with seed S + i (so forking and copy-on-write of the shared prompt blocks change
 *    nothing), a fixed seed is deterministic, the n sequences differ, all blocks are freed;
 *  - stop strings cut the text before the earliest match and finish with "stop"; a stop
 *    string that never appears changes nothing; max_tokens finishes with "length"; an
 *    end-of-generation token finishes with "stop";
 *  - prefix caching: shared prompt prefixes are served from the cache (hit counters grow,
 *    cached_tokens reported) with the outputs of cold runs;
 *  - add_request rejects bad requests with a message;
 *  - the runner: ts_engine_forward_config's bucket, a runner that does not cover it is refused,
 *    one made for a larger bucket gives the same tokens.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "engine_util.h"

#define V TS_TINY_MIN_VOCAB

static void assert_idle(ts_engine *e) {
    char why[256];
    if (!eu_idle(e, why, sizeof why)) {
        fail_msg("engine not idle: %s", why);
    }
}

/* One request alone on a fresh engine of fx with config c. */
static void run_one(const eu_fx *fx, const ts_engine_config *c, const int32_t *prompt, int n,
                    const ts_request_params *p, eu_req *out) {
    ts_engine *e = eu_engine(fx, c);
    assert_non_null(e);
    ts_error err = {0};
    if (eu_add(e, prompt, n, p, out, &err) != TS_OK) {
        fail_msg("add: %s", err.msg);
    }
    assert_true(eu_run(e, out, 1, 10000) >= 0);
    if (out->errors) {
        fail_msg("protocol: %s", out->first_error);
    }
    assert_idle(e);
    eu_destroy(e);
}

static void test_abort(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    c.max_seqs = 2;
    ts_engine *e = eu_engine(fx, &c);
    int32_t prompt[40];
    eu_prompt(prompt, 40, V, 1);
    ts_request_params p = eu_greedy(50);
    eu_req r[4];
    ts_error err = {0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eu_add(e, prompt + i, 30, &p, &r[i], &err), TS_OK);
    }
    bool busy = false;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    }
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    assert_int_equal(st.n_running, 2);
    assert_int_equal(st.n_waiting, 1); /* max_seqs 2: the third waits */
    assert_true(st.kv_blocks_used > 0);
    assert_true(r[0].seq[0].n_tok > 0);
    /* Abort one running and the waiting request, plus an id that does not exist. */
    ts_engine_abort(e, r[0].id);
    ts_engine_abort(e, r[2].id);
    ts_engine_abort(e, 999999);
    int before = r[0].seq[0].n_tok;
    assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    for (int i = 0; i < 3; i += 2) {
        assert_true(r[i].done);
        assert_int_equal(r[i].seq[0].finish, TS_FINISH_ABORT);
        assert_int_equal(r[i].errors, 0);
    }
    assert_int_equal(r[0].seq[0].n_tok, before); /* nothing generated after the abort */
    assert_int_equal(r[2].seq[0].n_tok, 0);
    assert_false(r[1].done);
    ts_engine_get_stats(e, &st);
    assert_int_equal(st.n_running, 1);
    assert_int_equal(st.n_waiting, 0);
    assert_int_equal(st.n_requests, 1);
    /* Abort the last one: after that step no block is in use. */
    ts_engine_abort(e, r[1].id);
    assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    assert_true(r[1].done);
    assert_int_equal(r[1].seq[0].finish, TS_FINISH_ABORT);
    assert_idle(e);
    /* A request aborted before any step (still in the inbox), and a request with n = 3
     * aborted after its fork. */
    assert_int_equal(eu_add(e, prompt, 10, &p, &r[0], &err), TS_OK);
    ts_engine_abort(e, r[0].id);
    assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    assert_true(r[0].done);
    assert_int_equal(r[0].seq[0].finish, TS_FINISH_ABORT);
    ts_request_params pn = p;
    pn.n = 2;
    pn.sampling.temperature = 1.0f;
    pn.seed = 5;
    pn.has_seed = true;
    assert_int_equal(eu_add(e, prompt, 10, &pn, &r[1], &err), TS_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    }
    assert_int_equal(r[1].seq[1].n_tok, 3);
    ts_engine_abort(e, r[1].id);
    assert_int_equal(ts_engine_step(e, &busy, &err), TS_OK);
    assert_true(r[1].done);
    assert_int_equal(r[1].seq[0].finish, TS_FINISH_ABORT);
    assert_int_equal(r[1].seq[1].finish, TS_FINISH_ABORT);
    assert_int_equal(r[1].errors, 0);
    assert_idle(e);
    assert_false(busy && ts_engine_has_work(e));
    eu_destroy(e);
    eu_close(fx);
}

static void test_parallel_sampling(void **state) {
    (void)state;
    enum { N = 4, GEN = 20 };
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    int32_t prompt[37]; /* 2 full blocks + a partial one that the forks share */
    eu_prompt(prompt, 37, V, 2);
    ts_request_params p = eu_greedy(GEN);
    p.sampling.temperature = 1.0f;
    p.seed = 42;
    p.has_seed = true;
    p.n = N;
    eu_req *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *one = calloc(1, sizeof *one);
    run_one(fx, &c, prompt, 37, &p, a);
    run_one(fx, &c, prompt, 37, &p, b);
    for (int i = 0; i < N; i++) {
        assert_int_equal(a->seq[i].finish, TS_FINISH_LENGTH);
        assert_int_equal(a->seq[i].n_tok, GEN);
        assert_true(eu_same_tokens(&a->seq[i], &b->seq[i])); /* fixed seed: deterministic */
        for (int j = 0; j < i; j++) {
            if (eu_same_tokens(&a->seq[i], &a->seq[j])) {
                fail_msg("sequences %d and %d are identical", i, j);
            }
        }
    }
    /* Sequence i samples with seed + i: a lone request with that seed gives the same tokens,
     * so the forked sequences saw exactly the K/V of their own history. */
    for (int i = 0; i < N; i++) {
        ts_request_params q = p;
        q.n = 1;
        q.seed = p.seed + (uint64_t)i;
        run_one(fx, &c, prompt, 37, &q, one);
        if (!eu_same_tokens(&one->seq[0], &a->seq[i])) {
            fail_msg("sequence %d differs from a lone request with seed %llu", i,
                     (unsigned long long)q.seed);
        }
    }
    /* Forks under preemption: two such requests in a pool that holds one and a half. Each
     * needs 3 prompt blocks (the partial third one copied on write by 3 of the 4 forks) and
     * grows to 4 blocks per sequence: 10 blocks; the pool has 12. */
    c.kv_tokens = 192;
    ts_engine *e = eu_engine(fx, &c);
    ts_error err = {0};
    eu_req *two = calloc(2, sizeof *two);
    assert_int_equal(eu_add(e, prompt, 37, &p, &two[0], &err), TS_OK);
    assert_int_equal(eu_add(e, prompt, 37, &p, &two[1], &err), TS_OK);
    assert_true(eu_run(e, two, 2, 10000) >= 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(two[k].errors, 0);
        for (int i = 0; i < N; i++) {
            assert_true(eu_same_tokens(&a->seq[i], &two[k].seq[i]));
        }
    }
    free(two);
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    printf("  2 x n=%d in a 12-block pool: %llu preemptions\n", N,
           (unsigned long long)st.n_preemptions);
    assert_true(st.n_preemptions > 0);
    assert_idle(e);
    eu_destroy(e);
    free(a);
    free(b);
    free(one);
    eu_close(fx);
}

/* First index of needle in hay, or -1. */
static long find(const char *hay, size_t n, const char *needle, size_t m) {
    for (size_t i = 0; i + m <= n; i++) {
        if (memcmp(hay + i, needle, m) == 0) {
            return (long)i;
        }
    }
    return -1;
}

static void test_stop_strings(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("qwen3");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    eu_req *full = calloc(1, sizeof *full), *cut = calloc(1, sizeof *cut);
    int tested = 0;
    for (uint32_t seed = 1; seed <= 6; seed++) {
        int32_t prompt[12];
        eu_prompt(prompt, 12, V, 10 + seed);
        ts_request_params p = eu_greedy(40);
        run_one(fx, &c, prompt, 12, &p, full);
        const eu_seq *f = &full->seq[0];
        assert_int_equal(f->finish, TS_FINISH_LENGTH);
        if (f->len < 12) {
            continue;
        }
        /* A 3-byte stop string from the middle of the text: the output is everything before
         * its first occurrence. NUL bytes (from <0x00>) are avoided as C strings end there. */
        size_t k = f->len / 2;
        char stop[4] = {f->text[k], f->text[k + 1], f->text[k + 2], 0};
        if (strlen(stop) != 3) {
            continue;
        }
        long at = find(f->text, f->len, stop, 3);
        assert_true(at >= 0 && (size_t)at <= k);
        const char *stops[2] = {"\x01never\x02", stop};
        p.stop = stops;
        p.n_stop = 2;
        run_one(fx, &c, prompt, 12, &p, cut);
        const eu_seq *s = &cut->seq[0];
        assert_int_equal(s->finish, TS_FINISH_STOP);
        assert_int_equal(s->stop_index, 1); /* which stop string ended it */
        assert_int_equal(s->len, (size_t)at);
        assert_memory_equal(s->text, f->text, (size_t)at);
        assert_true(s->n_tok <= f->n_tok);
        assert_memory_equal(s->tok, f->tok, (size_t)s->n_tok * sizeof s->tok[0]);
        /* The stop string was complete once its last byte's token arrived, not later. */
        int32_t n_needed = 0;
        while (n_needed < f->n_tok && f->text_at[n_needed] < (size_t)at + 3) {
            n_needed++;
        }
        n_needed++;
        assert_int_equal(s->n_tok, n_needed);
        /* Only the stop string that never appears: the full text, "length". */
        p.stop = stops;
        p.n_stop = 1;
        run_one(fx, &c, prompt, 12, &p, cut);
        assert_int_equal(cut->seq[0].finish, TS_FINISH_LENGTH);
        assert_int_equal(cut->seq[0].stop_index, -1);
        assert_int_equal(cut->seq[0].len, f->len);
        assert_memory_equal(cut->seq[0].text, f->text, f->len);
        tested++;
    }
    assert_true(tested >= 3);
    free(full);
    free(cut);
    eu_close(fx);
}

static void test_length_and_eos(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("gpt2");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    int32_t prompt[8];
    eu_prompt(prompt, 8, V, 3);
    eu_req *r = calloc(1, sizeof *r);
    for (int32_t max = 1; max <= 9; max += 4) {
        ts_request_params p = eu_greedy(max);
        run_one(fx, &c, prompt, 8, &p, r);
        assert_int_equal(r->seq[0].finish, TS_FINISH_LENGTH);
        assert_int_equal(r->seq[0].n_tok, max);
        assert_int_equal(r->seq[0].completion_tokens, max);
        assert_int_equal(r->prompt_tokens, 8);
    }
    /* max_tokens 0: up to the context. */
    ts_request_params p = eu_greedy(0);
    run_one(fx, &c, prompt, 8, &p, r);
    assert_int_equal(r->seq[0].finish, TS_FINISH_LENGTH);
    assert_int_equal(r->seq[0].n_tok, c.n_ctx - 8);
    /* A large bias on the end-of-generation token makes it the first token: "stop", and its
     * text is not part of the output. */
    ts_logit_bias bias = {TS_TINY_EOS, 100.0f};
    p = eu_greedy(10);
    p.ignore_eos = false;
    p.sampling.logit_bias = &bias;
    p.sampling.n_logit_bias = 1;
    run_one(fx, &c, prompt, 8, &p, r);
    assert_int_equal(r->seq[0].finish, TS_FINISH_STOP);
    assert_int_equal(r->seq[0].stop_index, -1); /* an end-of-generation token, no stop string */
    assert_int_equal(r->seq[0].n_tok, 1);
    assert_int_equal(r->seq[0].tok[0], TS_TINY_EOS);
    assert_int_equal(r->seq[0].len, 0);
    /* With ignore_eos the same request runs to its length. */
    p.ignore_eos = true;
    run_one(fx, &c, prompt, 8, &p, r);
    assert_int_equal(r->seq[0].finish, TS_FINISH_LENGTH);
    assert_int_equal(r->seq[0].n_tok, 10);
    free(r);
    eu_close(fx);
}

static void test_prefix_cache(void **state) {
    (void)state;
    enum { N = 5, SHARED = 40 };
    eu_fx *fx = eu_open_arch("gemma2");
    assert_non_null(fx);
    ts_engine_config cold = eu_config(fx);
    cold.prefix_cache = false;
    ts_engine_config warm = eu_config(fx);
    int32_t prompts[N][SHARED + 10];
    int32_t lens[N];
    for (int i = 0; i < N; i++) {
        eu_prompt(prompts[i], SHARED, V, 77); /* same 40-token prefix */
        lens[i] = SHARED + 2 * i;             /* request 0 is the bare prefix */
        eu_prompt(prompts[i] + SHARED, 2 * i, V, 200 + (uint32_t)i);
    }
    eu_req *want = calloc(N, sizeof *want), *got = calloc(N, sizeof *got);
    for (int i = 0; i < N; i++) {
        ts_request_params p = eu_greedy(12);
        run_one(fx, &cold, prompts[i], lens[i], &p, &want[i]);
        assert_int_equal(want[i].cached_tokens, 0);
    }
    ts_engine *e = eu_engine(fx, &warm);
    ts_engine_stats st;
    uint64_t hits = 0;
    for (int i = 0; i < N; i++) {
        ts_request_params p = eu_greedy(12);
        ts_error err = {0};
        assert_int_equal(eu_add(e, prompts[i], lens[i], &p, &got[i], &err), TS_OK);
        assert_true(eu_run(e, &got[i], 1, 1000) >= 0);
        assert_true(eu_same_tokens(&want[i].seq[0], &got[i].seq[0]));
        ts_engine_get_stats(e, &st);
        /* The first request fills the cache; later ones find the shared full blocks (32
         * tokens; request 0's own repeat would leave at least one token to compute). */
        int32_t expect = i == 0 ? 0 : 32;
        assert_int_equal(got[i].cached_tokens, expect);
        assert_true(st.prefix_hit_tokens >= hits + (uint64_t)expect);
        hits = st.prefix_hit_tokens;
    }
    assert_true(hits >= 32 * (N - 1));
    assert_true(st.prefix_query_tokens > hits);
    /* The same prompts again, all at once: outputs unchanged, more hits (the generated
     * tokens of the first run made more blocks cacheable, but a prompt only matches its own
     * prefix). */
    for (int i = 0; i < N; i++) {
        ts_request_params p = eu_greedy(12);
        ts_error err = {0};
        assert_int_equal(eu_add(e, prompts[i], lens[i], &p, &got[i], &err), TS_OK);
    }
    assert_true(eu_run(e, got, N, 1000) >= 0);
    for (int i = 0; i < N; i++) {
        assert_true(eu_same_tokens(&want[i].seq[0], &got[i].seq[0]));
        assert_true(got[i].cached_tokens >= 32);
    }
    ts_engine_get_stats(e, &st);
    assert_true(st.prefix_hit_tokens > hits);
    assert_idle(e);
    /* A salt separates namespaces: same prompt, no hit. */
    ts_request_params p = eu_greedy(4);
    p.cache_salt = "tenant-b";
    p.cache_salt_len = 8;
    ts_error err = {0};
    assert_int_equal(eu_add(e, prompts[1], lens[1], &p, &got[0], &err), TS_OK);
    assert_true(eu_run(e, got, 1, 1000) >= 0);
    assert_int_equal(got[0].cached_tokens, 0);
    assert_memory_equal(got[0].seq[0].tok, want[1].seq[0].tok, 4 * sizeof(int32_t));
    eu_destroy(e);
    free(want);
    free(got);
    eu_close(fx);
}

/* The generated text continues the prompt's: prompt text + generated text is the text of
 * the whole sequence, also where SentencePiece drops a leading space at the start of a text
 * (the first generated word keeps its space after a word, loses it after a control token).
 * Byte tokens are banned so that every piece is whole UTF-8. */
static void test_text_continues_prompt(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_logit_bias ban[256];
    for (int b = 0; b < 256; b++) {
        ban[b] = (ts_logit_bias){3 + b, -INFINITY};
    }
    eu_req *r = calloc(1, sizeof *r);
    for (int k = 0; k < 4; k++) {
        int32_t prompt[10];
        eu_prompt(prompt, 10, V, 300 + (uint32_t)k);
        for (int i = 0; i < 10; i++) {
            if (prompt[i] < 259) {
                prompt[i] += 259; /* words only */
            }
            prompt[i] = prompt[i] < V ? prompt[i] : V - 1;
        }
        if (k == 1) {
            prompt[9] = TS_TINY_BOS; /* a control token ends the prompt */
        } else if (k == 2) {
            prompt[9] = 3 + 'A'; /* an ASCII byte token */
        }
        ts_request_params p = eu_greedy(12);
        p.sampling.temperature = 1.0f;
        p.seed = 7;
        p.has_seed = true;
        p.sampling.logit_bias = ban;
        p.sampling.n_logit_bias = 256;
        run_one(fx, &c, prompt, 10, &p, r);
        int32_t all[22];
        memcpy(all, prompt, sizeof prompt);
        memcpy(all + 10, r->seq[0].tok, 12 * sizeof(int32_t));
        char *pre = NULL, *full = NULL;
        size_t npre = 0, nfull = 0;
        ts_error err = {0};
        assert_int_equal(ts_tokenizer_detokenize(fx->tok, all, 10, false, &pre, &npre, &err),
                         TS_OK);
        assert_int_equal(ts_tokenizer_detokenize(fx->tok, all, 22, false, &full, &nfull, &err),
                         TS_OK);
        assert_true(nfull >= npre);
        assert_memory_equal(full, pre, npre);
        if (r->seq[0].len != nfull - npre ||
            memcmp(r->seq[0].text, full + npre, nfull - npre) != 0) {
            fail_msg("prompt %d: generated '%.*s', expected '%s'", k, (int)r->seq[0].len,
                     r->seq[0].text, full + npre);
        }
        free(pre);
        free(full);
    }
    free(r);
    eu_close(fx);
}

static void expect_add_error(ts_engine *e, const int32_t *prompt, int32_t n,
                             const ts_request_params *p, ts_status want, const char *part) {
    eu_req r;
    ts_error err = {0};
    ts_status st = eu_add(e, prompt, n, p, &r, &err);
    if (st != want || strstr(err.msg, part) == NULL) {
        fail_msg("got %d '%s', want %d with '%s'", st, err.msg, want, part);
    }
}

static void test_bad_requests(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    c.max_queue = 2;
    ts_engine *e = eu_engine(fx, &c);
    int32_t prompt[200];
    eu_prompt(prompt, 200, V, 4);
    ts_request_params p = eu_greedy(4);
    expect_add_error(e, prompt, 0, &p, TS_ERR_INVALID_ARG, "empty");
    int32_t bad[3] = {5, V, 6};
    expect_add_error(e, bad, 3, &p, TS_ERR_RANGE, "prompt token 1 has id 320");
    expect_add_error(e, prompt, 128, &p, TS_ERR_LIMIT, "context holds 128");
    ts_request_params q = eu_greedy(100);
    expect_add_error(e, prompt, 50, &q, TS_ERR_LIMIT, "exceeds the context of 128");
    q = p;
    q.n = 0;
    expect_add_error(e, prompt, 5, &q, TS_ERR_RANGE, "n = 0");
    q = p;
    q.max_tokens = -1;
    expect_add_error(e, prompt, 5, &q, TS_ERR_RANGE, "negative");
    q = p;
    q.sampling.top_p = 2.0f;
    expect_add_error(e, prompt, 5, &q, TS_ERR_INVALID_ARG, "top_p");
    const char *stops[TS_ENGINE_MAX_STOP + 1];
    for (int i = 0; i <= TS_ENGINE_MAX_STOP; i++) {
        stops[i] = "x";
    }
    q = p;
    q.stop = stops;
    q.n_stop = TS_ENGINE_MAX_STOP + 1;
    expect_add_error(e, prompt, 5, &q, TS_ERR_RANGE, "stop strings");
    stops[1] = "";
    q.n_stop = 2;
    expect_add_error(e, prompt, 5, &q, TS_ERR_INVALID_ARG, "stop string 1 is empty");
    /* Queue limit: two waiting requests fill it. */
    eu_req r[3];
    ts_error err = {0};
    assert_int_equal(eu_add(e, prompt, 5, &p, &r[0], &err), TS_OK);
    assert_int_equal(eu_add(e, prompt, 5, &p, &r[1], &err), TS_OK);
    expect_add_error(e, prompt, 5, &p, TS_ERR_LIMIT, "queue is full");
    assert_true(eu_run(e, r, 2, 100) >= 0);
    assert_idle(e);
    eu_destroy(e);

    /* Configurations. */
    ts_engine *x = NULL;
    c = eu_config(fx);
    c.n_ctx = fx->m->hp.n_ctx_train * 4 + 1;
    assert_int_equal(eu_create(fx, &c, &x, &err), TS_ERR_INVALID_ARG);
    c = eu_config(fx);
    c.kv_tokens = 8; /* less than one block */
    assert_int_equal(eu_create(fx, &c, &x, &err), TS_ERR_INVALID_ARG);
    assert_null(x);
    eu_close(fx);

    /* Learned absolute positions (GPT-2) have no row past the trained context: a longer
     * context is a configuration error, not a failure in the middle of a request. */
    fx = eu_open_arch("gpt2");
    assert_non_null(fx);
    c = eu_config(fx);
    c.n_ctx = fx->m->hp.n_ctx_train + 16;
    c.kv_tokens = 4096;
    err = (ts_error){0};
    ts_status st = eu_create(fx, &c, &x, &err);
    if (st != TS_ERR_INVALID_ARG || strstr(err.msg, "256") == NULL) {
        fail_msg("gpt2 with ctx %lld: status %d '%s'", (long long)c.n_ctx, st, err.msg);
    }
    c.n_ctx = fx->m->hp.n_ctx_train;
    assert_int_equal(eu_create(fx, &c, &x, &err), TS_OK);
    eu_destroy(x);
    eu_close(fx);
}

/* The bucket an engine asks for, and what it accepts as a runner. */
static void test_runner_bucket(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx); /* ctx 128, KV 2048 tokens, 16 seqs, 256 tokens */
    ts_forward_config fc;
    ts_error err = {0};
    assert_int_equal(ts_engine_forward_config(fx->m, &c, &fc, &err), TS_OK);
    assert_int_equal(fc.max_tokens, 256);
    assert_int_equal(fc.max_seqs, 16);
    assert_int_equal(fc.max_outputs, 16);
    assert_int_equal(fc.n_blocks, 2048 / 16);
    assert_int_equal(fc.block_size, 16);
    assert_int_equal(fc.max_blocks_per_seq, 128 / 16);
    assert_int_equal(fc.kv_type_k, TS_TYPE_F16);
    assert_int_equal(fc.kv_type_v, TS_TYPE_F16);
    ts_engine_config bad = c;
    bad.kv_tokens = 8;
    assert_int_equal(ts_engine_forward_config(fx->m, &bad, &fc, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_engine_forward_config(fx->m, &c, &fc, &err), TS_OK);

    /* Runners that do not cover the bucket. */
    ts_forward_config wrong[4] = {fc, fc, fc, fc};
    wrong[0].n_blocks--;
    wrong[1].max_blocks_per_seq++;
    wrong[2].max_outputs--;
    wrong[3].max_tokens--;
    for (int i = 0; i < 4; i++) {
        ts_runner *r = NULL;
        ts_engine *e = NULL;
        assert_int_equal(ts_forward_runner_create(fx->m, fx->b, &wrong[i], NULL, &r, &err), TS_OK);
        assert_int_equal(ts_engine_create(fx->m, fx->tok, r, &c, &e, &err), TS_ERR_INVALID_ARG);
        assert_null(e);
        assert_non_null(strstr(err.msg, "does not cover the engine's"));
        ts_runner_destroy(r);
    }

    /* A larger bucket (outputs for every token, more sequences): the same greedy tokens. */
    int32_t prompt[40];
    eu_prompt(prompt, 40, V, 17);
    ts_request_params p = eu_greedy(24);
    eu_req want, got;
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    assert_int_equal(eu_add(e, prompt, 40, &p, &want, &err), TS_OK);
    assert_true(eu_run(e, &want, 1, 1000) >= 0);
    eu_destroy(e);
    ts_forward_config big = fc;
    big.max_outputs = big.max_tokens;
    big.max_seqs = 32;
    ts_runner *r = NULL;
    assert_int_equal(ts_forward_runner_create(fx->m, fx->b, &big, NULL, &r, &err), TS_OK);
    assert_int_equal(ts_engine_create(fx->m, fx->tok, r, &c, &e, &err), TS_OK);
    assert_int_equal(eu_add(e, prompt, 40, &p, &got, &err), TS_OK);
    assert_true(eu_run(e, &got, 1, 1000) >= 0);
    assert_idle(e);
    ts_engine_destroy(e);
    ts_runner_destroy(r);
    assert_int_equal(got.seq[0].n_tok, 24);
    assert_true(eu_same_tokens(&got.seq[0], &want.seq[0]));
    eu_close(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_parallel_sampling),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_length_and_eos),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_text_continues_prompt),
        cmocka_unit_test(test_runner_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
