/*
 * test_engine_draft.c — the draft model's cache is kept in step with the sequences
 * (draft_model.c), checked after every engine step: each running sequence's draft KV sequence
 * holds exactly its computed prefix plus the drafts appended this step, no other draft sequence
 * is open, no waiting (preempted) sequence holds one, the block manager's invariants hold, and
 * everything is given back at the end. Requests mix greedy decoding (drafts of the same weights
 * accepted), seeded sampling (many rejected: the rejected drafts must be dropped), n = 2 and
 * aborts, with a roomy cache and with one so small that sequences are preempted and the draft
 * cache runs out. Outputs equal those of the same engine without a draft model (the API test
 * covers that more widely).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_util.h"

#define N_REQ 12

typedef struct drafted {
    ts_engine *e;
    ts_runner *draft_runner;
} drafted;

/* An engine over fx's model with the same model as its draft, or without one. */
static drafted make(const eu_fx *fx, int64_t kv_tokens, bool draft) {
    ts_engine_config c = eu_config(fx);
    c.kv_tokens = kv_tokens;
    c.draft_max = 6;
    c.spec_step_tokens = 256;
    drafted d = {eu_engine(fx, &c), NULL};
    assert_non_null(d.e);
    if (!draft) {
        return d;
    }
    ts_error err = {0};
    ts_forward_config fc;
    assert_int_equal(ts_engine_draft_forward_config(fx->m, &c, &fc, &err), TS_OK);
    assert_int_equal(fc.n_blocks * fc.block_size, kv_tokens);
    assert_int_equal(ts_forward_runner_create(fx->m, fx->b, &fc, NULL, &d.draft_runner, &err),
                     TS_OK);
    assert_int_equal(ts_engine_set_draft(d.e, fx->m, d.draft_runner, 0.0f, &err), TS_OK);
    /* Once only. */
    assert_int_equal(ts_engine_set_draft(d.e, fx->m, d.draft_runner, 0.0f, &err), TS_ERR_STATE);
    return d;
}

static void destroy(drafted *d) {
    eu_destroy(d->e);
    ts_runner_destroy(d->draft_runner);
}

static void submit_all(const eu_fx *fx, ts_engine *e, eu_req *reqs, int32_t (*prompts)[64]) {
    for (int i = 0; i < N_REQ; i++) {
        eu_prompt(prompts[i], 40 + i, (int32_t)fx->m->hp.n_vocab, (uint32_t)i + 1);
        ts_request_params p = eu_greedy(40);
        if (i % 3 == 1) {
            p.sampling.temperature = 0.9f;
            p.seed = 100 + (uint64_t)i;
            p.has_seed = true;
        }
        if (i % 4 == 3) {
            p.n = 2;
        }
        ts_error err = {0};
        assert_int_equal(eu_add(e, prompts[i], 40 + i, &p, &reqs[i], &err), TS_OK);
    }
}

/* Runs to the end, checking the draft cache after every step; aborts request 5 at step 8. */
static void run_checked(ts_engine *e, eu_req *reqs) {
    for (int step = 0; step < 5000; step++) {
        bool all = true;
        for (int i = 0; i < N_REQ; i++) {
            all = all && reqs[i].done;
        }
        if (all) {
            return;
        }
        if (step == 8) {
            ts_engine_abort(e, reqs[5].id);
        }
        ts_error err = {0};
        if (ts_engine_step(e, NULL, &err) != TS_OK) {
            fail_msg("step %d: %s", step, err.msg);
        }
        if (ts_engine_draft_check(e, &err) != TS_OK) {
            fail_msg("after step %d: %s", step, err.msg);
        }
    }
    fail_msg("the requests did not finish");
}

static void one_case(int64_t kv_tokens) {
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    static eu_req plain[N_REQ], spec[N_REQ];
    static int32_t prompts[N_REQ][64];
    drafted a = make(fx, kv_tokens, false), b = make(fx, kv_tokens, true);
    submit_all(fx, a.e, plain, prompts);
    submit_all(fx, b.e, spec, prompts);
    run_checked(a.e, plain);
    run_checked(b.e, spec);
    for (int i = 0; i < N_REQ; i++) {
        assert_int_equal(plain[i].errors, 0);
        assert_int_equal(spec[i].errors, 0);
        if (i == 5) {
            continue; /* aborted at a step that need not be the same point of its output */
        }
        for (int k = 0; k < plain[i].n; k++) {
            assert_int_equal(plain[i].seq[k].n_tok, spec[i].seq[k].n_tok);
            assert_memory_equal(plain[i].seq[k].tok, spec[i].seq[k].tok,
                                (size_t)plain[i].seq[k].n_tok * sizeof(int32_t));
        }
    }
    ts_engine_stats st;
    ts_engine_get_stats(b.e, &st);
    printf("  kv %lld: %llu drafted, %llu accepted, %llu preemptions\n", (long long)kv_tokens,
           (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted,
           (unsigned long long)st.n_preemptions);
    assert_true(st.spec_accepted > 0);
    assert_true(st.spec_accepted < st.spec_drafted);
    if (kv_tokens < 1024) {
        assert_true(st.n_preemptions > 0);
    }
    /* Idle: every draft sequence and block is back. */
    ts_error err = {0};
    assert_int_equal(ts_engine_draft_check(b.e, &err), TS_OK);
    destroy(&a);
    destroy(&b);
    eu_close(fx);
}

static void test_roomy(void **state) {
    (void)state;
    one_case(2048);
}

static void test_tight(void **state) {
    (void)state;
    one_case(384);
}

/* A draft model of another vocabulary size is refused by the engine. */
static void test_vocab(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.n_vocab += 8;
    eu_fx *other = eu_open(&s, true);
    assert_non_null(fx);
    assert_non_null(other);
    ts_engine_config c = eu_config(fx);
    c.draft_max = 4;
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    ts_error err = {0};
    ts_forward_config fc;
    ts_runner *r = NULL;
    assert_int_equal(ts_engine_draft_forward_config(other->m, &c, &fc, &err), TS_OK);
    assert_int_equal(ts_forward_runner_create(other->m, other->b, &fc, NULL, &r, &err), TS_OK);
    assert_int_equal(ts_engine_set_draft(e, other->m, r, 0.0f, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "328 tokens where the target has 320"));
    ts_runner_destroy(r);
    eu_destroy(e);
    eu_close(other);
    eu_close(fx);
}

/* The draft-length rule (ts_draft_len_best) against a reference that sums the expected tokens
 * of a draft of k term by term (1 + a + ... + a^k) and takes the best ratio to its cost, over a
 * grid of costs and acceptances; and cases worked by hand. */
static int32_t ref_len(double c, double a, int32_t min, int32_t cap) {
    int32_t best = cap;
    double best_rate = -1.0;
    for (int32_t k = min; k <= cap; k++) {
        double tokens = 0.0, p = 1.0;
        for (int32_t i = 0; i <= k; i++) {
            tokens += p;
            p *= a;
        }
        double rate = tokens / (1.0 + (double)k * (c + 0.05));
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

static void test_draft_len(void **state) {
    (void)state;
    for (int ci = 1; ci <= 20; ci++) {
        double c = 0.05 * ci;
        for (int ai = 0; ai <= 20; ai++) {
            double acc = ai, rej = 20 - ai;
            for (int32_t cap = 1; cap <= 16; cap += 3) {
                assert_int_equal(ts_draft_len_best(c, acc, rej, 1, cap),
                                 ref_len(c, acc / 20.0, 1, cap));
                if (cap >= 3) {
                    assert_int_equal(ts_draft_len_best(c, acc, rej, 3, cap),
                                     ref_len(c, acc / 20.0, 3, cap));
                }
            }
        }
    }
    /* Gemma 3 270M BF16 with its pure Q4_0: c 0.29, 86% accepted -> 4 (the measured best). */
    assert_int_equal(ts_draft_len_best(0.29, 86.0, 14.0, 1, 16), 4);
    assert_int_equal(ts_draft_len_best(0.29, 95.0, 5.0, 1, 16), 7);
    assert_int_equal(ts_draft_len_best(0.05, 5.0, 0.0, 1, 16), 16); /* never refused: the cap */
    assert_int_equal(ts_draft_len_best(1.0, 9.0, 1.0, 3, 16), 3);   /* dear drafts: the least */
    assert_int_equal(ts_draft_len_best(0.29, 0.0, 0.0, 1, 16), 1);  /* prior 0.5 */
    assert_int_equal(ts_draft_len_best(0.29, 9.0, 1.0, 3, 2), 2);   /* cap below min: the cap */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roomy),
        cmocka_unit_test(test_tight),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_draft_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
