/*
 * test_api_spec_draft.c — speculative decoding with a draft model changes nothing but the
 * speed (issue 29, item 1b), through the public API.
 *
 * Each case runs the same requests on a plain context and on one whose drafts come from a
 * draft model, and requires the same tokens, finish reasons, texts and logprobs: greedy and
 * seeded, alone and in a batch of 32 with n = 2, stop strings, penalties and a grammar, and
 * with a KV cache small enough that sequences are preempted and the draft cache runs out. Two
 * draft models of the tiny model's vocabulary: the tiny model itself (a second file with the
 * same weights: its drafts are the target's own greedy choices, so most are accepted) and one
 * with other weights (most rejected). Both ways must be exercised (the test fails when no draft
 * was accepted, or none rejected, where it expects them). A draft model whose vocabulary differs
 * (size, or one token's text) is refused when the context is made, naming the token.
 *
 * The default model (SmolLM2) drafting for itself runs when fetched (TS_QUICK: greedy only).
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

/* The files of the group: the target, an identical copy, and one with other weights. */
typedef struct files {
    api_model target;
    char same[512];
    char other[512];
} files;

static void write_spec(const ts_tiny_spec *spec, char *path, size_t size, const char *tag) {
    assert_non_null(ts_tiny_temp_path(path, size, tag));
    ts_error err = {0};
    if (ts_tiny_write(spec, path, &err) != TS_OK) {
        fail_msg("tiny model %s: %s", path, err.msg);
    }
}

static int group_setup(void **state) {
    files *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    api_model_open(&f->target, &spec, "spec_target");
    write_spec(&spec, f->same, sizeof f->same, "spec_same");
    spec.seed += 1000;
    write_spec(&spec, f->other, sizeof f->other, "spec_other");
    *state = f;
    return 0;
}

static int group_teardown(void **state) {
    files *f = *state;
    if (f != NULL) {
        api_model_close(&f->target);
        unlink(f->same);
        unlink(f->other);
        free(f);
    }
    return 0;
}

/* The two contexts of a case: plain, and drafts from draft_path. */
typedef struct pair {
    ts_context *plain, *spec;
} pair;

static pair make_pair(ts_llm *llm, const char *draft_path, int64_t max_seqs, int draft_max,
                      int64_t kv_tokens) {
    ts_context_params p = api_params();
    p.max_seqs = max_seqs;
    p.n_ctx = 1024;
    p.kv_tokens = kv_tokens;
    pair r;
    r.plain = api_context(llm, &p);
    p.draft_model = draft_path; /* spec_type NULL: "draft" */
    p.draft_max = draft_max;
    p.spec_step_tokens = 512; /* speculate in the batch cases too */
    r.spec = api_context(llm, &p);
    ts_context_info in;
    ts_context_get_info(r.spec, &in);
    assert_string_equal(in.spec_type, "draft");
    assert_non_null(in.draft_model);
    assert_string_equal(in.draft_model, draft_path);
    assert_int_equal(in.draft_max, draft_max);
    return r;
}

static void free_pair(pair *p) {
    ts_context_destroy(p->plain);
    ts_context_destroy(p->spec);
}

/* Runs the jobs on both contexts and compares; with check_cache, then continues every first
 * sequence by one token on both and compares the cached prefix and the logprob (the caches
 * left behind are the same). Returns the spec context's stats of the jobs. */
static ts_engine_stats run_both(pair *pr, const job *jobs, int n, bool check_cache) {
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
    st.n_preemptions -= before.n_preemptions;
    static int32_t cont[MAX_TOK * 2 + 64];
    for (int i = 0; i < n && check_cache; i++) {
        int32_t len = jobs[i].n_prompt;
        memcpy(cont, jobs[i].prompt, (size_t)len * sizeof *cont);
        memcpy(cont + len, a[i].seqs[0].tokens, (size_t)a[i].seqs[0].n * sizeof *cont);
        len += a[i].seqs[0].n;
        job c = {cont, len, ts_request_params_default()};
        c.params.max_tokens = 1;
        c.params.sampling.temperature = 0.0f;
        c.params.logprobs = true;
        c.params.draft_max = -1;
        out_req x, y;
        run_jobs(pr->plain, &c, 1, &x);
        run_jobs(pr->spec, &c, 1, &y);
        assert_int_equal(x.cached, y.cached);
        assert_same(&x, &y, 1, i);
    }
    return st;
}

static void print_stats(const char *what, const ts_engine_stats *st) {
    printf("  %s: %llu drafted, %llu accepted in %llu verifications, %llu preemptions\n", what,
           (unsigned long long)st->spec_drafted, (unsigned long long)st->spec_accepted,
           (unsigned long long)st->spec_steps, (unsigned long long)st->n_preemptions);
}

/* Mixed requests: greedy, seeded, n = 2, penalties, stop strings, a grammar; some with
 * speculation turned off or capped per request. */
static void mixed_jobs(job *jobs, int32_t (*prompts)[160], int n_jobs, int32_t n_vocab) {
    static const char *const stops[] = {"\n\n", "ing", "ka"};
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
            jobs[i].params.n_stop = 3;
            jobs[i].params.draft_max = 3;
            break;
        case 5:
            jobs[i].params = seeded(64, 1234);
            jobs[i].params.sampling.top_k = 20;
            jobs[i].params.draft_max = i % 2 ? -1 : 0;
            break;
        default:
            jobs[i].params = greedy(40);
            jobs[i].params.grammar_kind = TS_GRAMMAR_GBNF;
            jobs[i].params.grammar = "root ::= [^\\n]* \"\\n\"? [a-z ]*";
            break;
        }
    }
}

static void batch_case(ts_llm *llm, const char *draft, int32_t n_vocab, int n_jobs,
                       int64_t max_seqs, int64_t kv_tokens, ts_engine_stats *out) {
    pair pr = make_pair(llm, draft, max_seqs, 8, kv_tokens);
    static int32_t prompts[MAX_REQ][160];
    job jobs[MAX_REQ];
    mixed_jobs(jobs, prompts, n_jobs, n_vocab);
    /* With a tight cache, blocks are evicted differently with and without drafts: only the
     * outputs are compared then. */
    bool roomy = kv_tokens >= (max_seqs + 2) * 1024;
    *out = run_both(&pr, jobs, n_jobs, roomy);
    free_pair(&pr);
}

/* The tiny model drafting for itself: its drafts are its own greedy tokens. */
static void test_same_alone(void **state) {
    files *f = *state;
    pair pr = make_pair(f->target.llm, f->same, 4, 6, 6 * 1024);
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, (int32_t)f->target.spec.n_vocab, 1), greedy(96)};
    ts_engine_stats st = run_both(&pr, &j, 1, true);
    print_stats("greedy", &st);
    assert_true(st.spec_accepted > 0);
    /* Greedy drafts of the same weights are the tokens the target samples (results do not
     * depend on how tokens are batched): every one is accepted, which they are only when the
     * draft cache holds exactly the sequence's tokens at their positions. */
    assert_true(st.spec_accepted == st.spec_drafted);
    j.params = seeded(96, 99);
    st = run_both(&pr, &j, 1, true);
    print_stats("seeded", &st);
    assert_true(st.spec_drafted > 0);
    free_pair(&pr);
}

static void test_same_batch(void **state) {
    files *f = *state;
    /* Greedy, 16 at once, the draft cache kept for each: again every draft is accepted. A
     * sequence that ends with EOS loses the drafts after it, so the prompts are chosen among
     * 32 for outputs that run to max_tokens. */
    pair pr = make_pair(f->target.llm, f->same, 16, 8, 18 * 1024);
    static int32_t prompts[32][160];
    static out_req probe[32];
    job cand[32], jobs[16];
    for (int i = 0; i < 32; i++) {
        cand[i].prompt = prompts[i];
        cand[i].n_prompt =
            repeating_prompt(prompts[i], (int32_t)f->target.spec.n_vocab, (uint32_t)i * 7919u);
        cand[i].params = greedy(48 + 4 * (i % 16));
    }
    run_jobs(pr.plain, cand, 32, probe);
    int n = 0;
    for (int i = 0; i < 32 && n < 16; i++) {
        if (probe[i].seqs[0].finish == TS_FINISH_LENGTH) {
            jobs[n++] = cand[i];
        }
    }
    assert_true(n >= 8);
    ts_engine_stats st = run_both(&pr, jobs, n, true);
    printf("  %d greedy requests:", n);
    print_stats("same weights", &st);
    assert_true(st.spec_drafted > 0);
    assert_true(st.spec_accepted == st.spec_drafted);
    free_pair(&pr);
    batch_case(f->target.llm, f->same, (int32_t)f->target.spec.n_vocab, 32, 32, 34 * 1024, &st);
    print_stats("32 requests, same weights", &st);
    assert_true(st.spec_accepted > 0);
    assert_true(st.spec_accepted < st.spec_drafted); /* seeded ones reject some */
}

/* Other weights: most drafts are rejected, the output is the same. */
static void test_other(void **state) {
    files *f = *state;
    int32_t n_vocab = (int32_t)f->target.spec.n_vocab;
    pair pr = make_pair(f->target.llm, f->other, 4, 6, 6 * 1024);
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, n_vocab, 2), greedy(96)};
    ts_engine_stats st = run_both(&pr, &j, 1, true);
    print_stats("greedy, other weights", &st);
    assert_true(st.spec_drafted > st.spec_accepted);
    j.params = seeded(96, 5);
    run_both(&pr, &j, 1, true);
    free_pair(&pr);
    batch_case(f->target.llm, f->other, n_vocab, 32, 32, 34 * 1024, &st);
    print_stats("32 requests, other weights", &st);
    assert_true(st.spec_drafted > st.spec_accepted);
}

/* A cache too small for the batch: sequences are preempted and the draft cache (as large as
 * the target's) runs out; drafts then stop, requests go on, outputs are unchanged. */
static void test_tight_cache(void **state) {
    files *f = *state;
    ts_engine_stats st;
    batch_case(f->target.llm, f->same, (int32_t)f->target.spec.n_vocab, 16, 8, 640, &st);
    print_stats("16 requests, 640 KV tokens", &st);
    assert_true(st.n_preemptions > 0);
    assert_true(st.spec_accepted > 0);
}

/* Requests aborted while their drafts are in the draft cache: the others go on unchanged, and
 * the draft cache's sequences and blocks are given back (the same requests run again after). */
static void test_abort(void **state) {
    files *f = *state;
    int32_t n_vocab = (int32_t)f->target.spec.n_vocab;
    pair pr = make_pair(f->target.llm, f->same, 8, 8, 10 * 1024);
    static int32_t prompts[8][160];
    static out_req want[8], got[8];
    job jobs[8];
    for (int i = 0; i < 8; i++) {
        jobs[i].prompt = prompts[i];
        jobs[i].n_prompt = repeating_prompt(prompts[i], n_vocab, (uint32_t)i);
        jobs[i].params = greedy(64);
    }
    run_jobs(pr.plain, jobs, 8, want);
    for (int round = 0; round < 3; round++) {
        ts_error err = {0};
        uint64_t ids[8];
        ts_engine_stats before;
        ts_context_get_stats(pr.spec, &before);
        for (int i = 0; i < 8; i++) {
            memset(&got[i], 0, sizeof got[i]);
            assert_int_equal(ts_context_submit(pr.spec, jobs[i].prompt, jobs[i].n_prompt,
                                               &jobs[i].params, on_event, &got[i], &ids[i], &err),
                             TS_OK);
        }
        for (int s = 0; s < 4; s++) {
            assert_int_equal(ts_context_step(pr.spec, NULL, &err), TS_OK);
        }
        bool early[8];
        for (int i = 0; i < 8; i++) {
            early[i] = got[i].done; /* finished before the abort: nothing to abort */
            if (i % 2 == 0) {
                ts_context_abort(pr.spec, ids[i]);
            }
        }
        for (int guard = 0; guard < 10000; guard++) {
            bool all = true;
            for (int i = 0; i < 8; i++) {
                all = all && got[i].done;
            }
            if (all) {
                break;
            }
            assert_int_equal(ts_context_step(pr.spec, NULL, &err), TS_OK);
        }
        int n_aborted = 0;
        for (int i = 0; i < 8; i++) {
            assert_true(got[i].done);
            n_aborted += got[i].seqs[0].finish == TS_FINISH_ABORT;
            if (i % 2 == 0 && !early[i]) {
                assert_int_equal(got[i].seqs[0].finish, TS_FINISH_ABORT);
                /* what it had is what plain decoding made */
                assert_true(got[i].seqs[0].n <= want[i].seqs[0].n);
                assert_memory_equal(got[i].seqs[0].tokens, want[i].seqs[0].tokens,
                                    (size_t)got[i].seqs[0].n * sizeof(int32_t));
            } else {
                assert_same(&want[i], &got[i], 1, i);
            }
        }
        /* A leaked draft sequence would leave later rounds without drafts. */
        ts_engine_stats st;
        ts_context_get_stats(pr.spec, &st);
        printf("  round %d: %d aborted, %llu accepted\n", round, n_aborted,
               (unsigned long long)(st.spec_accepted - before.spec_accepted));
        assert_true(n_aborted > 0);
        assert_true(st.spec_accepted - before.spec_accepted > 20);
    }
    free_pair(&pr);
}

/* Copies src to a fresh file with the bytes of one token's text changed. */
static void write_patched(const char *src, char *dst, size_t size, const char *from,
                          const char *to) {
    FILE *in = fopen(src, "rb");
    assert_non_null(in);
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, in), (size_t)n);
    fclose(in);
    /* A GGUF string: its length as 8 little-endian bytes, then the bytes. */
    size_t len = strlen(from);
    assert_int_equal(strlen(to), len);
    char pat[64];
    memset(pat, 0, 8);
    pat[0] = (char)len;
    memcpy(pat + 8, from, len);
    long at = -1;
    for (long i = 0; i + 8 + (long)len <= n; i++) {
        if (memcmp(buf + i, pat, 8 + len) == 0) {
            assert_true(at < 0); /* once */
            at = i;
        }
    }
    assert_true(at >= 0);
    memcpy(buf + at + 8, to, len);
    assert_non_null(ts_tiny_temp_path(dst, size, "spec_patched"));
    FILE *out = fopen(dst, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(buf, 1, (size_t)n, out), (size_t)n);
    fclose(out);
    free(buf);
}

static void expect_refused(ts_llm *llm, const ts_context_params *p, ts_status want,
                           const char *needle) {
    ts_error err = {0};
    ts_context *bad = (ts_context *)1;
    ts_status st = ts_context_create(llm, p, &bad, &err);
    if (st != want || strstr(err.msg, needle) == NULL) {
        fail_msg("want %s with '%s', got %s: %s", ts_status_str(want), needle, ts_status_str(st),
                 err.msg);
    }
    assert_null(bad);
    printf("  refused: %s\n", err.msg);
}

static void test_refused(void **state) {
    files *f = *state;
    ts_context_params p = api_params();
    /* Another vocabulary size. */
    ts_tiny_spec spec = f->target.spec;
    spec.n_vocab += 16; /* 336 */
    char bigger[512];
    write_spec(&spec, bigger, sizeof bigger, "spec_bigger");
    p.draft_model = bigger;
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, "has 336 tokens");
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, bigger);
    unlink(bigger);
    /* One token's text: "▁cat" (id 261) becomes "▁cot". */
    char patched[512];
    write_patched(f->same, patched, sizeof patched,
                  "\xe2\x96\x81"
                  "cat",
                  "\xe2\x96\x81"
                  "cot");
    p.draft_model = patched;
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, "token 261 is ' cot'");
    unlink(patched);
    /* Types and files that do not go together. */
    p.draft_model = NULL;
    p.spec_type = "draft";
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, "needs a draft model");
    p.draft_model = f->same;
    p.spec_type = "ngram";
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, "spec-type");
    p.spec_type = NULL;
    p.draft_p_min = 1.5f;
    expect_refused(f->target.llm, &p, TS_ERR_INVALID_ARG, "draft-p-min");
    p.draft_p_min = 0.0f;
    p.draft_model = "/nonexistent/draft.gguf";
    expect_refused(f->target.llm, &p, TS_ERR_IO, "/nonexistent/draft.gguf");
}

/* draft_p_min: the draft stops at an unsure token, so fewer tokens are drafted; outputs stay. */
static void test_p_min(void **state) {
    files *f = *state;
    int32_t n_vocab = (int32_t)f->target.spec.n_vocab;
    int32_t prompt[160];
    job j = {prompt, repeating_prompt(prompt, n_vocab, 3), greedy(64)};
    uint64_t drafted[2];
    for (int k = 0; k < 2; k++) {
        ts_context_params p = api_params();
        p.n_ctx = 1024;
        pair pr;
        pr.plain = api_context(f->target.llm, &p);
        p.draft_model = f->other;
        p.draft_max = 8;
        p.draft_p_min = k == 0 ? 0.0f : 0.9f;
        pr.spec = api_context(f->target.llm, &p);
        ts_engine_stats st = run_both(&pr, &j, 1, false);
        drafted[k] = st.spec_drafted;
        free_pair(&pr);
    }
    printf("  drafted: %llu without p-min, %llu with p-min 0.9\n", (unsigned long long)drafted[0],
           (unsigned long long)drafted[1]);
    assert_true(drafted[1] < drafted[0]);
}

/* Rejection-sampling acceptance (an option whose sampled outputs differ from plain decoding's
 * by design) takes a draft model's greedy drafts too: point-mass proposals like n-grams'. */
static void test_rejection(void **state) {
    files *f = *state;
    ts_context_params p = api_params();
    p.n_ctx = 1024;
    p.draft_model = f->same;
    p.draft_max = 6;
    p.spec_accept = "rejection";
    ts_context *ctx = api_context(f->target.llm, &p);
    ts_context_info in;
    ts_context_get_info(ctx, &in);
    assert_string_equal(in.spec_type, "draft");
    assert_string_equal(in.spec_accept, "rejection");
    int32_t prompt[160];
    job j[2] = {
        {prompt, repeating_prompt(prompt, (int32_t)f->target.spec.n_vocab, 4), greedy(64)},
        {prompt, repeating_prompt(prompt, (int32_t)f->target.spec.n_vocab, 4), seeded(64, 3)}};
    static out_req o[2];
    run_jobs(ctx, j, 2, o);
    assert_int_equal(o[0].seqs[0].n + o[1].seqs[0].n > 0, 1);
    ts_engine_stats st;
    ts_context_get_stats(ctx, &st);
    print_stats("rejection acceptance", &st);
    assert_true(st.spec_accepted > 0);
    ts_context_destroy(ctx);
}

/* ---- the default model ----------------------------------------------------------------------- */

static const char CODE[] = "Write a short story about a cat who learns to play the piano.";

static void test_default_model(void **state) {
    (void)state;
    char path[512];
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (access(path, R_OK) != 0) {
        TS_SKIP_NO_MODEL(path);
    }
    ts_llm *llm = NULL;
    ts_error err = {0};
    if (ts_llm_open(path, NULL, &llm, &err) != TS_OK) {
        fail_msg("%s: %s", path, err.msg);
    }
    ts_message msgs[] = {{"user", CODE}};
    char *text = NULL;
    assert_int_equal(ts_llm_chat_prompt(llm, NULL, msgs, 1, 1, &text, NULL, &err), TS_OK);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    assert_int_equal(ts_llm_tokenize(llm, text, strlen(text), 1, 1, &ids, &n_ids, &err), TS_OK);
    pair pr = make_pair(llm, path, 4, 8, 6 * 1024);
    job j = {ids, (int32_t)n_ids, greedy(TS_QUICK ? 24 : 100)};
    ts_engine_stats st = run_both(&pr, &j, 1, true);
    print_stats("default model, greedy", &st);
    assert_true(st.spec_accepted > 0);
    if (!TS_QUICK) {
        j.params = seeded(100, 42);
        st = run_both(&pr, &j, 1, true);
        print_stats("default model, seeded", &st);
    }
    free_pair(&pr);
    ts_free(ids);
    ts_free(text);
    ts_llm_close(llm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_alone),    cmocka_unit_test(test_same_batch),
        cmocka_unit_test(test_other),         cmocka_unit_test(test_tight_cache),
        cmocka_unit_test(test_abort),         cmocka_unit_test(test_refused),
        cmocka_unit_test(test_p_min),         cmocka_unit_test(test_rejection),
        cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
