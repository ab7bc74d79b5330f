/*
 * test_api_spec.c — speculative decoding changes nothing but the speed (issue 29, through the
 * public API like any embedder).
 *
 * Every case runs the same requests on two contexts of one model, one without speculation and
 * one with n-gram drafts, and requires the same tokens, finish reasons, texts and logprobs:
 * greedy and seeded sampling, alone and in a batch of 32, with n = 2, with a grammar, with stop
 * strings and with penalties. Prompts that repeat their input make drafts that are accepted and
 * rejected both (the test fails if no draft was accepted, or none rejected: it would prove
 * nothing). After the generations, a continuation of each output must find the same cached
 * prefix and get bit-identical logprobs on both contexts: the KV cache kept after rejected
 * drafts is the cache plain decoding leaves.
 *
 * The tiny random-weight model runs everywhere (its greedy outputs loop, so drafts are
 * accepted); the default model (SmolLM2) runs when fetched, as in CI (a sanitizer build runs
 * its greedy case only: TS_QUICK).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api_util.h"
#include "common/quick.h"
#include "common/skip.h"
#include "spec_util.h"

/* The two contexts of a case: plain, and n-gram speculation with draft_max drafts. */
typedef struct pair {
    ts_context *plain, *spec;
} pair;

static pair make_pair(ts_llm *llm, int64_t max_seqs, int draft_max) {
    ts_context_params p = api_params();
    p.max_seqs = max_seqs;
    p.n_ctx = 1024;
    /* Room for every sequence: nothing is preempted or evicted, so the prefix cache after the
     * generations holds every committed block and the continuations find the same prefix. */
    p.kv_tokens = (max_seqs + 2) * 1024;
    pair r;
    r.plain = api_context(llm, &p);
    p.spec_type = "ngram";
    p.draft_max = draft_max;
    p.spec_step_tokens = 512; /* speculate in the batch cases too */
    r.spec = api_context(llm, &p);
    ts_context_info in;
    ts_context_get_info(r.spec, &in);
    assert_string_equal(in.spec_type, "ngram");
    assert_int_equal(in.draft_max, draft_max);
    return r;
}

static void free_pair(pair *p) {
    ts_context_destroy(p->plain);
    ts_context_destroy(p->spec);
}

/* Runs the jobs on both contexts and compares; then continues every first sequence by one
 * token on both (prompt + output as the new prompt) and compares the cached prefix and the
 * logprob: the caches left behind are the same. Returns the spec context's stats. */
static ts_engine_stats run_both(pair *pr, const job *jobs, int n) {
    static out_req a[MAX_REQ], b[MAX_REQ];
    assert_true(n <= MAX_REQ);
    ts_engine_stats before;
    ts_context_get_stats(pr->spec, &before);
    run_jobs(pr->plain, jobs, n, a);
    run_jobs(pr->spec, jobs, n, b);
    for (int i = 0; i < n; i++) {
        assert_same(&a[i], &b[i], jobs[i].params.n, i);
    }
    ts_engine_stats st;
    ts_context_get_stats(pr->spec, &st);
    st.spec_drafted -= before.spec_drafted;
    st.spec_accepted -= before.spec_accepted;
    st.spec_steps -= before.spec_steps;
    static int32_t cont[MAX_TOK * 2 + 64];
    job c[MAX_REQ];
    for (int i = 0; i < n; i++) {
        int32_t len = jobs[i].n_prompt;
        memcpy(cont, jobs[i].prompt, (size_t)len * sizeof *cont);
        memcpy(cont + len, a[i].seqs[0].tokens, (size_t)a[i].seqs[0].n * sizeof *cont);
        len += a[i].seqs[0].n;
        c[0].prompt = cont;
        c[0].n_prompt = len;
        c[0].params = ts_request_params_default();
        c[0].params.max_tokens = 1;
        c[0].params.sampling.temperature = 0.0f;
        c[0].params.logprobs = true;
        c[0].params.draft_max = -1;
        out_req x, y;
        run_jobs(pr->plain, c, 1, &x);
        run_jobs(pr->spec, c, 1, &y);
        assert_int_equal(x.cached, y.cached);
        assert_same(&x, &y, 1, i);
    }
    return st;
}

/* Mixed requests: greedy, seeded, n = 2, penalties, stop strings, a grammar; some with
 * speculation turned off or capped per request. */
static void mixed_case(ts_llm *llm, int32_t n_vocab, int n_jobs, int64_t max_seqs) {
    pair pr = make_pair(llm, max_seqs, 8);
    static int32_t prompts[MAX_REQ][160];
    job jobs[MAX_REQ];
    static const char *const stops[] = {"\n\n", "ing"};
    for (int i = 0; i < n_jobs; i++) {
        jobs[i].prompt = prompts[i];
        jobs[i].n_prompt = repeating_prompt(prompts[i], n_vocab, (uint32_t)i % 5);
        switch (i % 7) {
        case 0:
        case 1:
            jobs[i].params = greedy(64);
            break;
        case 2:
            jobs[i].params = seeded(64, 42 + (uint64_t)i);
            break;
        case 3:
            jobs[i].params = seeded(48, 7);
            jobs[i].params.n = 2;
            break;
        case 4:
            jobs[i].params = greedy(64);
            jobs[i].params.sampling.repetition_penalty = 1.1f;
            jobs[i].params.sampling.frequency_penalty = 0.2f;
            jobs[i].params.stop = stops;
            jobs[i].params.n_stop = 2;
            jobs[i].params.draft_max = 3;
            break;
        case 5:
            jobs[i].params = seeded(64, 1234);
            jobs[i].params.sampling.top_k = 20;
            jobs[i].params.draft_max = -1;
            break;
        default:
            jobs[i].params = greedy(40);
            jobs[i].params.grammar_kind = TS_GRAMMAR_GBNF;
            jobs[i].params.grammar = "root ::= [^\\n]* \"\\n\"? [a-z ]*";
            break;
        }
    }
    ts_engine_stats st = run_both(&pr, jobs, n_jobs);
    printf("  %d requests: %llu drafted, %llu accepted in %llu verifications\n", n_jobs,
           (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted,
           (unsigned long long)st.spec_steps);
    assert_true(st.spec_accepted > 0);               /* drafts were accepted... */
    assert_true(st.spec_accepted < st.spec_drafted); /* ...and rejected */
    free_pair(&pr);
}

static void test_tiny_alone(void **state) {
    api_model *m = *state;
    pair pr = make_pair(m->llm, 4, 6);
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, (int32_t)m->spec.n_vocab, 1), greedy(96)};
    ts_engine_stats st = run_both(&pr, &j, 1);
    assert_true(st.spec_accepted > 0);
    j.params = seeded(96, 99);
    run_both(&pr, &j, 1);
    free_pair(&pr);
}

static void test_tiny_batch(void **state) {
    api_model *m = *state;
    mixed_case(m->llm, (int32_t)m->spec.n_vocab, 32, 32);
}

/* Rejection-sampling acceptance: greedy is still plain decoding's argmax; seeded sampling runs
 * (its tokens may differ from plain decoding's, by design: docs/speculative.md). */
static void test_rejection(void **state) {
    api_model *m = *state;
    pair pr = make_pair(m->llm, 4, 6);
    ts_context_destroy(pr.spec);
    ts_context_params p = api_params();
    p.max_seqs = 4;
    p.n_ctx = 1024;
    p.kv_tokens = 6 * 1024;
    p.draft_max = 6;
    p.spec_accept = "rejection";
    pr.spec = api_context(m->llm, &p);
    ts_context_info in;
    ts_context_get_info(pr.spec, &in);
    assert_string_equal(in.spec_accept, "rejection");
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, (int32_t)m->spec.n_vocab, 3), greedy(64)};
    ts_engine_stats st = run_both(&pr, &j, 1);
    assert_true(st.spec_accepted > 0);
    j.params = seeded(64, 5);
    out_req o;
    run_jobs(pr.spec, &j, 1, &o);
    assert_int_equal(o.seqs[0].n, 64);
    free_pair(&pr);
    p.spec_accept = "maybe";
    ts_context *bad = NULL;
    ts_error err = {0};
    assert_int_equal(ts_context_create(m->llm, &p, &bad, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "spec-accept"));
}

/* The context setting off, a request asking for drafts: none are made. */
static void test_off(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m->llm, &p);
    ts_context_info in;
    ts_context_get_info(ctx, &in);
    assert_string_equal(in.spec_type, "none");
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, (int32_t)m->spec.n_vocab, 1), greedy(32)};
    j.params.draft_max = 8;
    out_req o;
    run_jobs(ctx, &j, 1, &o);
    ts_engine_stats st;
    ts_context_get_stats(ctx, &st);
    assert_true(st.spec_drafted == 0);
    ts_context_destroy(ctx);
    /* Bad settings are refused, naming the option. */
    ts_error err = {0};
    ts_context *bad = NULL;
    p.spec_type = "medusa";
    assert_int_equal(ts_context_create(m->llm, &p, &bad, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "spec-type"));
    p.spec_type = "ngram";
    p.draft_max = TS_ENGINE_MAX_DRAFT + 1;
    assert_int_equal(ts_context_create(m->llm, &p, &bad, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "draft-max"));
    p.draft_max = 4;
    p.draft_min = 5;
    assert_int_equal(ts_context_create(m->llm, &p, &bad, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "draft-min"));
    assert_null(bad);
}

/* ---- the default model ----------------------------------------------------------------------- */

static ts_llm *default_model(void) {
    char path[512];
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (access(path, R_OK) != 0) {
        return NULL;
    }
    ts_llm *llm = NULL;
    ts_error err = {0};
    if (ts_llm_open(path, NULL, &llm, &err) != TS_OK) {
        fail_msg("%s: %s", path, err.msg);
    }
    return llm;
}

static const char CODE[] = "Repeat this code exactly, with compute_total renamed to sum_prices.\n\n"
                           "def compute_total(items):\n"
                           "    total = 0\n"
                           "    for item in items:\n"
                           "        if item.price > 0:\n"
                           "            total += item.price * item.quantity\n"
                           "        else:\n"
                           "            print(\"skipping item with no price:\", item.name)\n"
                           "    return total\n";

static void test_default_model(void **state) {
    (void)state;
    ts_llm *llm = default_model();
    if (llm == NULL) {
        TS_SKIP_NO_MODEL("~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    }
    ts_message msgs[] = {{"user", CODE}};
    char *text = NULL;
    ts_error err = {0};
    assert_int_equal(ts_llm_chat_prompt(llm, NULL, msgs, 1, 1, &text, NULL, &err), TS_OK);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    assert_int_equal(ts_llm_tokenize(llm, text, strlen(text), 1, 1, &ids, &n_ids, &err), TS_OK);
    pair pr = make_pair(llm, 4, 8);
    job j = {ids, (int32_t)n_ids, greedy(120)};
    ts_engine_stats st = run_both(&pr, &j, 1);
    printf("  greedy: %llu drafted, %llu accepted\n", (unsigned long long)st.spec_drafted,
           (unsigned long long)st.spec_accepted);
    assert_true(st.spec_accepted > 0);
    if (!TS_QUICK) { /* a sanitizer build: the tiny model's cases cover these paths */
        j.params = seeded(120, 42);
        run_both(&pr, &j, 1);
    }
    free_pair(&pr);
    if (!TS_QUICK) {
        mixed_case(llm, ts_llm_n_vocab(llm), 32, 32);
    }
    ts_free(ids);
    ts_free(text);
    ts_llm_close(llm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_alone),    cmocka_unit_test(test_tiny_batch),
        cmocka_unit_test(test_off),           cmocka_unit_test(test_rejection),
        cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
