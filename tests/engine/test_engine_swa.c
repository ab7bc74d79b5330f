/*
 * test_engine_swa.c — the engine with a sliding-window KV pool: tiny Gemma 3 (five local
 * layers and one global) and Gemma 2 (alternating) models with a window of 4 positions in
 * blocks of 4 tokens, so blocks leave the window all the time. Each run is compared with the
 * same run under swa_full (every layer keeps the whole context, the layout before the window
 * pool):
 *   - a long greedy generation (many times the window, prompt prefilled in chunks larger than
 *     the window) gives the same tokens and the same logprobs, while the sliding-window blocks
 *     in use stay at most 2 (the window's 3 earlier positions) as the full pool grows;
 *   - many requests at once — parallel sampling with forks and copy-on-write, chunked
 *     prefill, preemption in a small cache — give the same tokens;
 *   - prefix reuse after the first blocks left the window gives what a fresh engine gives,
 *     and a prefix whose window blocks were evicted is not reused (recomputed) though the
 *     full pool still holds all of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_util.h"

#define WINDOW 4
#define BS     4

/* Per token: the id and the logprobs the sampler reported. */
typedef struct lp_req {
    eu_req r;
    float lp[EU_MAX_N][EU_MAX_TOK];     /* the sampled token's logprob */
    float top[EU_MAX_N][EU_MAX_TOK][3]; /* the three best alternatives' logprobs */
} lp_req;

static void on_event_lp(const ts_engine_event *ev, void *user) {
    lp_req *q = user;
    int i = ev->index, n = q->r.seq[i >= 0 && i < EU_MAX_N ? i : 0].n_tok;
    eu_on_event(ev, &q->r);
    if (ev->logprobs != NULL && ev->token >= 0 && i >= 0 && i < EU_MAX_N && n < EU_MAX_TOK) {
        q->lp[i][n] = ev->logprobs->logprob;
        for (int k = 0; k < 3 && k < ev->logprobs->n_top; k++) {
            q->top[i][n][k] = ev->logprobs->top[k].logprob;
        }
    }
}

static eu_fx *open_model(const char *arch) {
    ts_tiny_spec s = ts_tiny_spec_default(arch);
    s.n_swa = WINDOW;
    s.n_layer = strcmp(arch, "gemma3") == 0 ? 6 : 4;
    s.n_ctx_train = 512;
    /* An output matrix of its own: with the tied embedding a random model repeats its input
     * token with certainty, which would make every comparison here weak. */
    s.tied_output = false;
    eu_fx *fx = eu_open(&s, true);
    assert_non_null(fx);
    return fx;
}

static ts_engine_config config(const eu_fx *fx, bool swa_full) {
    ts_engine_config c = eu_config(fx);
    c.n_ctx = 256;
    c.block_size = BS;
    c.max_seqs = 4;
    c.max_batch_tokens = 16;
    c.swa_full = swa_full;
    return c;
}

static void add(ts_engine *e, const int32_t *prompt, int32_t n, const ts_request_params *p,
                lp_req *q) {
    memset(q, 0, sizeof *q);
    q->r.n = p->n;
    ts_error err = {0};
    if (ts_engine_add_request(e, prompt, n, p, on_event_lp, q, &q->r.id, &err) != TS_OK) {
        fail_msg("add_request: %s", err.msg);
    }
}

/* Steps until every request is done; returns the most sliding-window blocks in use after a
 * step. */
static uint32_t run(ts_engine *e, lp_req *qs, int n) {
    uint32_t most = 0;
    for (int step = 0; step < 5000; step++) {
        int open = 0;
        for (int i = 0; i < n; i++) {
            open += !qs[i].r.done;
        }
        if (open == 0) {
            for (int i = 0; i < n; i++) {
                if (qs[i].r.errors != 0) {
                    fail_msg("request %d: %s", i, qs[i].r.first_error);
                }
            }
            char why[256];
            if (!eu_idle(e, why, sizeof why)) {
                fail_msg("not idle after the run: %s", why);
            }
            return most;
        }
        ts_error err = {0};
        if (ts_engine_step(e, NULL, &err) != TS_OK) {
            fail_msg("step %d: %s", step, err.msg);
        }
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        most = st.kv_swa_blocks_used > most ? st.kv_swa_blocks_used : most;
    }
    fail_msg("requests not done after 5000 steps");
    return 0;
}

static void assert_same(const lp_req *a, const lp_req *b, const char *what) {
    for (int i = 0; i < a->r.n; i++) {
        const eu_seq *x = &a->r.seq[i], *y = &b->r.seq[i];
        if (!eu_same_tokens(x, y)) {
            fail_msg("%s: sequence %d differs with the window pool (%d tokens vs %d)", what, i,
                     x->n_tok, y->n_tok);
        }
        if (memcmp(a->lp[i], b->lp[i], sizeof a->lp[i]) != 0 ||
            memcmp(a->top[i], b->top[i], sizeof a->top[i]) != 0) {
            fail_msg("%s: sequence %d has other logprobs with the window pool", what, i);
        }
    }
}

/* A prompt of 37 tokens (prefilled 16 at a time) and 180 generated ones: 54 blocks of the
 * full pool, never more than 2 of the window pool after a step. */
static void long_generation(const char *arch) {
    eu_fx *fx = open_model(arch);
    int32_t prompt[37];
    eu_prompt(prompt, 37, (int32_t)fx->m->hp.n_vocab, 11);
    ts_request_params p = eu_greedy(180);
    p.logprobs = true;
    p.sampling.n_logprobs = 3;
    lp_req *q = calloc(2, sizeof *q);
    uint32_t most[2];
    ts_engine_stats st[2];
    for (int full = 0; full < 2; full++) {
        ts_engine_config c = config(fx, full);
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        add(e, prompt, 37, &p, &q[full]);
        most[full] = run(e, &q[full], 1);
        ts_engine_get_stats(e, &st[full]);
        eu_destroy(e);
    }
    assert_int_equal(q[0].r.seq[0].n_tok, 180);
    assert_same(&q[0], &q[1], arch);
    /* Not a degenerate model: the greedy output keeps changing. */
    int changes = 0;
    for (int i = 1; i < 180; i++) {
        changes += q[0].r.seq[0].tok[i] != q[0].r.seq[0].tok[i - 1];
    }
    assert_true(changes > 90);
    /* The window pool: 4 * (1 + 2) + 16 / 4 = 16 blocks, at most 2 in use; none with
     * swa_full. */
    assert_int_equal(st[0].kv_swa_blocks_total, 16);
    assert_true(most[0] >= 1 && most[0] <= 2);
    assert_int_equal(st[1].kv_swa_blocks_total, 0);
    assert_int_equal(most[1], 0);
    free(q);
    eu_close(fx);
}

static void test_long_generation_gemma3(void **state) {
    (void)state;
    long_generation("gemma3");
}

static void test_long_generation_gemma2(void **state) {
    (void)state;
    long_generation("gemma2");
}

/* Four requests, one sampling 3 sequences at temperature 0.8 (forks share the prompt's blocks
 * in both pools, and copy its partly filled last block), in a cache of 40 blocks (preemption),
 * 16 tokens per step (chunked prefill): the same tokens with and without the window pool. */
static void test_many_requests(void **state) {
    (void)state;
    eu_fx *fx = open_model("gemma3");
    int32_t n_vocab = (int32_t)fx->m->hp.n_vocab;
    enum { N = 4 };
    const int32_t lens[N] = {5, 23, 7, 41};
    int32_t prompts[N][64];
    lp_req *q = calloc(2 * N, sizeof *q);
    uint64_t preemptions[2];
    for (int full = 0; full < 2; full++) {
        ts_engine_config c = config(fx, full);
        c.kv_tokens = 160;
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        for (int i = 0; i < N; i++) {
            eu_prompt(prompts[i], lens[i], n_vocab, 100 + (uint32_t)i);
            ts_request_params p = eu_greedy(50);
            p.logprobs = true;
            p.sampling.n_logprobs = 3;
            if (i == 2) {
                p.n = 3;
                p.sampling.temperature = 0.8f;
                p.seed = 1234;
                p.has_seed = true;
            }
            add(e, prompts[i], lens[i], &p, &q[full * N + i]);
        }
        run(e, q + full * N, N);
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        preemptions[full] = st.n_preemptions;
        eu_destroy(e);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(q[i].r.seq[0].n_tok, 50);
        assert_same(&q[i], &q[N + i], "many requests");
    }
    assert_true(preemptions[0] > 0 && preemptions[1] > 0);
    free(q);
    eu_close(fx);
}

/* Parallel sampling alone: 4 sequences fork from a prompt of 7 tokens, whose last block is
 * partly filled and shared; each sequence's first token must go into its own copy of that
 * block, in both pools. */
static void test_forks(void **state) {
    (void)state;
    eu_fx *fx = open_model("gemma3");
    int32_t prompt[7];
    eu_prompt(prompt, 7, (int32_t)fx->m->hp.n_vocab, 5);
    lp_req *q = calloc(2, sizeof *q);
    for (int full = 0; full < 2; full++) {
        ts_engine_config c = config(fx, full);
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        ts_request_params p = eu_greedy(30);
        p.n = 4;
        p.sampling.temperature = 1.5f;
        p.seed = 99;
        p.has_seed = true;
        p.logprobs = true;
        p.sampling.n_logprobs = 3;
        add(e, prompt, 7, &p, &q[full]);
        run(e, &q[full], 1);
        eu_destroy(e);
    }
    /* The siblings drew different first tokens (else the test proves nothing). */
    assert_true(q[0].r.seq[0].tok[0] != q[0].r.seq[1].tok[0] ||
                q[0].r.seq[0].tok[0] != q[0].r.seq[2].tok[0]);
    assert_same(&q[0], &q[1], "forks");
    free(q);
    eu_close(fx);
}

/* One request alone on a fresh engine without prefix caching: the reference output. */
static void fresh_run(const eu_fx *fx, const int32_t *prompt, int32_t n, int32_t gen, lp_req *out) {
    ts_engine_config c = config(fx, false);
    c.prefix_cache = false;
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    ts_request_params p = eu_greedy(gen);
    p.logprobs = true;
    p.sampling.n_logprobs = 3;
    add(e, prompt, n, &p, out);
    run(e, out, 1);
    eu_destroy(e);
}

static void test_prefix_after_window(void **state) {
    (void)state;
    eu_fx *fx = open_model("gemma3");
    int32_t n_vocab = (int32_t)fx->m->hp.n_vocab;
    ts_engine_config c = config(fx, false);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    ts_request_params p = eu_greedy(30);
    p.logprobs = true;
    p.sampling.n_logprobs = 3;
    lp_req *q = calloc(6, sizeof *q);

    /* A conversation's first turn: 30 prompt tokens, 30 generated. */
    int32_t turn[100];
    eu_prompt(turn, 30, n_vocab, 7);
    add(e, turn, 30, &p, &q[0]);
    run(e, &q[0], 1);
    /* The second turn continues it: everything up to the last full block before the new
     * tokens is reused, though its first blocks left the window long ago. */
    memcpy(turn + 30, q[0].r.seq[0].tok, 30 * sizeof turn[0]);
    eu_prompt(turn + 60, 5, n_vocab, 8);
    p.max_tokens = 20;
    add(e, turn, 65, &p, &q[1]);
    run(e, &q[1], 1);
    /* The first turn computed 59 tokens (not its last one): 14 whole blocks. */
    assert_int_equal(q[1].r.cached_tokens, 56);
    fresh_run(fx, turn, 65, 20, &q[2]);
    assert_same(&q[1], &q[2], "prefix hit after the window");

    /* An unrelated request cycles every block of the window pool (16 of them): the cached
     * window blocks of the conversation are evicted while the full pool keeps all of it. */
    int32_t other[60];
    eu_prompt(other, 60, n_vocab, 9);
    p.max_tokens = 40;
    add(e, other, 60, &p, &q[3]);
    run(e, &q[3], 1);
    p.max_tokens = 20;
    add(e, turn, 65, &p, &q[4]);
    run(e, &q[4], 1);
    assert_int_equal(q[4].r.cached_tokens, 0);
    assert_same(&q[4], &q[2], "prefix refused after eviction");
    ts_kv_stats ks;
    ts_kv_get_stats(e->kv, &ks);
    assert_true(ks.n_cached >= 14); /* the full pool could have served it */
    eu_destroy(e);
    free(q);
    eu_close(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_generation_gemma3),
        cmocka_unit_test(test_long_generation_gemma2),
        cmocka_unit_test(test_many_requests),
        cmocka_unit_test(test_forks),
        cmocka_unit_test(test_prefix_after_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
