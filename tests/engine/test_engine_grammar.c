/*
 * test_engine_grammar.c — grammars in the engine: a random tiny model follows a request's
 * grammar because every token that would leave it is masked. Each output is checked by a
 * hand-written recogniser of its grammar (not by the grammar engine itself), under sampling,
 * greedy with logit bias, n > 1, stop strings, preemption and many sequences in one step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <math.h>

#include "engine_util.h"
#include "util/buf.h"

/* "(" [a-c]{1,5} ")" */
static const char *paren_gbnf = "root ::= \"(\" [a-c]{1,5} \")\"\n";

static bool is_paren(const char *t, size_t n) {
    if (n < 3 || n > 7 || t[0] != '(' || t[n - 1] != ')') {
        return false;
    }
    for (size_t i = 1; i + 1 < n; i++) {
        if (t[i] < 'a' || t[i] > 'c') {
            return false;
        }
    }
    return true;
}

static ts_request_params sampled(uint64_t seed, int32_t max_tokens) {
    ts_request_params p = ts_request_params_default();
    p.sampling.temperature = 1.0f;
    p.seed = seed;
    p.has_seed = true;
    p.max_tokens = max_tokens;
    return p;
}

static void test_sampled_output_matches(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    enum { R = 12 };
    static eu_req reqs[R];
    int32_t prompt[6];
    for (int i = 0; i < R; i++) {
        eu_prompt(prompt, 6, (int32_t)fx->m->hp.n_vocab, (uint32_t)i);
        ts_request_params p = sampled(100 + (uint64_t)i, 40);
        p.grammar_kind = TS_GRAMMAR_GBNF;
        p.grammar = paren_gbnf;
        p.n = i % 3 == 0 ? 3 : 1; /* siblings start from the parent's grammar state */
        ts_error err = {0};
        assert_int_equal(eu_add(e, prompt, 6, &p, &reqs[i], &err), TS_OK);
    }
    assert_true(eu_run(e, reqs, R, 200) >= 0);
    for (int i = 0; i < R; i++) {
        assert_int_equal(reqs[i].errors, 0);
        for (int k = 0; k < reqs[i].n; k++) {
            eu_seq *s = &reqs[i].seq[k];
            /* Complete: the end-of-generation token came exactly when the grammar allowed it. */
            assert_int_equal(s->finish, TS_FINISH_STOP);
            s->text[s->len] = '\0';
            if (!is_paren(s->text, s->len)) {
                fail_msg("request %d seq %d: '%s' is not in the grammar", i, k, s->text);
            }
        }
    }
    ts_engine_stats st;
    ts_engine_get_stats(e, &st);
    assert_true(st.grammar_masks > 0);
    char why[256];
    assert_true(eu_idle(e, why, sizeof why));
    eu_destroy(e);
    eu_close(fx);
}

/* Greedy with a bias towards 'b': the grammar still decides where 'b' may come, and ')' ends
 * the output after five of them; ignore_eos does not run past the grammar's end. */
static void test_greedy_with_bias(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    ts_token b = -1;
    assert_int_equal(ts_tokenizer_find(fx->tok, "b", 1, &b), TS_OK);
    ts_logit_bias bias[1] = {{.token = b, .bias = 100.0f}};
    ts_request_params p = eu_greedy(30);
    p.sampling.logit_bias = bias;
    p.sampling.n_logit_bias = 1;
    p.sampling.repetition_penalty = 1.3f; /* penalties come before the mask too */
    p.grammar_kind = TS_GRAMMAR_GBNF;
    p.grammar = paren_gbnf;
    int32_t prompt[5] = {1, 40, 41, 42, 43};
    eu_req r;
    ts_error err = {0};
    assert_int_equal(eu_add(e, prompt, 5, &p, &r, &err), TS_OK);
    assert_true(eu_run(e, &r, 1, 100) >= 0);
    r.seq[0].text[r.seq[0].len] = '\0';
    assert_string_equal(r.seq[0].text, "(bbbbb)");
    assert_int_equal(r.seq[0].finish, TS_FINISH_STOP);
    eu_destroy(e);
    eu_close(fx);
}

/* {"a": <integer>} with JSON whitespace anywhere between tokens. */
static bool is_a_object(const char *t, size_t n) {
    char buf[EU_MAX_TEXT];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] != ' ' && t[i] != '\n' && t[i] != '\t' && t[i] != '\r') {
            buf[m++] = t[i];
        }
    }
    buf[m] = '\0';
    if (strncmp(buf, "{\"a\":", 5) != 0 || buf[m - 1] != '}') {
        return false;
    }
    size_t i = 5;
    if (buf[i] == '-') {
        i++;
    }
    if (i >= m - 1 || (buf[i] == '0' && i + 1 != m - 1)) {
        return false;
    }
    for (; i < m - 1; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            return false;
        }
    }
    return true;
}

static void test_json_schema_and_object(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                         "\"required\":[\"a\"],\"additionalProperties\":false}";
    enum { R = 8 };
    static eu_req reqs[R + 1];
    int32_t prompt[4] = {1, 50, 60, 70};
    for (int i = 0; i < R; i++) {
        ts_request_params p = sampled(7 + (uint64_t)i, 60);
        p.grammar_kind = TS_GRAMMAR_JSON_SCHEMA;
        p.grammar = schema;
        ts_error err = {0};
        assert_int_equal(eu_add(e, prompt, 4, &p, &reqs[i], &err), TS_OK);
    }
    ts_request_params p = sampled(3, 60);
    p.grammar_kind = TS_GRAMMAR_JSON_OBJECT;
    ts_error err = {0};
    assert_int_equal(eu_add(e, prompt, 4, &p, &reqs[R], &err), TS_OK);
    assert_true(eu_run(e, reqs, R + 1, 300) >= 0);
    int complete = 0;
    for (int i = 0; i < R; i++) {
        eu_seq *s = &reqs[i].seq[0];
        s->text[s->len] = '\0';
        if (s->finish == TS_FINISH_STOP) {
            complete++;
            if (!is_a_object(s->text, s->len)) {
                fail_msg("request %d: '%s' does not fit the schema", i, s->text);
            }
        } else {
            /* Cut by max_tokens: still a prefix of a document (it starts the object). */
            assert_int_equal(s->finish, TS_FINISH_LENGTH);
            assert_true(s->len > 0 && s->text[strspn(s->text, " \n\t\r")] == '{');
        }
    }
    assert_true(complete > 0);
    eu_seq *o = &reqs[R].seq[0];
    o->text[o->len] = '\0';
    assert_true(o->len > 0 && o->text[strspn(o->text, " \n\t\r")] == '{');
    eu_destroy(e);
    eu_close(fx);
}

static void test_stop_string_cuts(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    ts_request_params p = eu_greedy(30);
    ts_token b = -1;
    assert_int_equal(ts_tokenizer_find(fx->tok, "b", 1, &b), TS_OK);
    ts_logit_bias bias[1] = {{.token = b, .bias = 100.0f}};
    p.sampling.logit_bias = bias;
    p.sampling.n_logit_bias = 1;
    const char *stop[1] = {"bb"};
    p.stop = stop;
    p.n_stop = 1;
    p.grammar_kind = TS_GRAMMAR_GBNF;
    p.grammar = paren_gbnf;
    int32_t prompt[3] = {1, 40, 41};
    eu_req r;
    ts_error err = {0};
    assert_int_equal(eu_add(e, prompt, 3, &p, &r, &err), TS_OK);
    assert_true(eu_run(e, &r, 1, 100) >= 0);
    r.seq[0].text[r.seq[0].len] = '\0';
    assert_string_equal(r.seq[0].text, "(");
    assert_int_equal(r.seq[0].finish, TS_FINISH_STOP);
    eu_destroy(e);
    eu_close(fx);
}

/* A KV pool too small for every sequence at once: sequences are preempted, recomputed, and
 * keep their grammar state; the outputs equal those of a roomy engine. */
static void test_preemption_keeps_state(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    const char *g = "root ::= \"[\" [a-z]{30,40} \"]\"\n";
    enum { R = 6 };
    static eu_req small[R], roomy[R];
    for (int pass = 0; pass < 2; pass++) {
        ts_engine_config c = eu_config(fx);
        c.block_size = 16;
        c.kv_tokens = pass == 0 ? 160 : 2048;
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        eu_req *reqs = pass == 0 ? small : roomy;
        int32_t prompt[20];
        for (int i = 0; i < R; i++) {
            eu_prompt(prompt, 20, (int32_t)fx->m->hp.n_vocab, 30u + (uint32_t)i);
            ts_request_params p = sampled(500 + (uint64_t)i, 60);
            p.grammar_kind = TS_GRAMMAR_GBNF;
            p.grammar = g;
            ts_error err = {0};
            assert_int_equal(eu_add(e, prompt, 20, &p, &reqs[i], &err), TS_OK);
        }
        assert_true(eu_run(e, reqs, R, 2000) >= 0);
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        if (pass == 0) {
            assert_true(st.n_preemptions > 0);
        }
        for (int i = 0; i < R; i++) {
            eu_seq *s = &reqs[i].seq[0];
            s->text[s->len] = '\0';
            assert_int_equal(s->finish, TS_FINISH_STOP);
            bool ok =
                s->len >= 32 && s->len <= 42 && s->text[0] == '[' && s->text[s->len - 1] == ']';
            for (size_t k = 1; ok && k + 1 < s->len; k++) {
                ok = s->text[k] >= 'a' && s->text[k] <= 'z';
            }
            if (!ok) {
                fail_msg("pass %d request %d: '%s'", pass, i, s->text);
            }
        }
        eu_destroy(e);
    }
    for (int i = 0; i < R; i++) {
        assert_true(eu_same_tokens(&small[i].seq[0], &roomy[i].seq[0]));
    }
    eu_close(fx);
}

static void test_bad_grammars(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    int32_t prompt[2] = {1, 40};
    eu_req r;
    ts_error err = {0};
    ts_request_params p = sampled(1, 10);
    p.grammar_kind = TS_GRAMMAR_GBNF;
    p.grammar = "root ::= undefined_rule\n";
    assert_int_equal(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "undefined_rule"));
    p.grammar_kind = TS_GRAMMAR_JSON_SCHEMA;
    p.grammar = "{\"not\":{\"type\":\"string\"}}";
    assert_int_equal(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "not"));
    p.grammar = "{\"type\":";
    assert_int_equal(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_FORMAT);
    p.grammar = NULL;
    assert_int_equal(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_INVALID_ARG);
    char why[256];
    assert_true(eu_idle(e, why, sizeof why));
    eu_destroy(e);
    eu_close(fx);
}

/* The submit failed with want and a message holding what. */
static void refused(ts_status got, ts_status want, const ts_error *err, const char *what) {
    if (got != want || !strstr(err->msg, what)) {
        fail_msg("expected %d with '%s', got %d: %s", want, what, got, err->msg);
    }
}

static int cancel_now(void *user) {
    int *calls = user;
    ++*calls;
    return 1;
}

/* The compile at submit stops when the request's cancel says so or its compile time limit
 * passes, and a grammar past the matcher's limits is TS_ERR_LIMIT, never out of memory. */
static void test_compile_stops(void **state) {
    (void)state;
    eu_fx *fx = eu_open_arch("llama");
    assert_non_null(fx);
    ts_engine_config c = eu_config(fx);
    ts_engine *e = eu_engine(fx, &c);
    assert_non_null(e);
    int32_t prompt[2] = {1, 40};
    eu_req r;
    ts_error err = {0};
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"enum\":[");
    for (int i = 0; i < 100000; i++) {
        ts_buf_printf(&b, "%s\"v%d\"", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]}");
    assert_false(b.oom);
    ts_request_params p = sampled(1, 10);
    p.grammar_kind = TS_GRAMMAR_JSON_SCHEMA;
    p.grammar = b.p;
    int calls = 0;
    p.cancel = cancel_now;
    p.cancel_user = &calls;
    refused(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_ABORTED, &err, "schema: cancelled");
    assert_int_equal(calls, 1);
    p.cancel = NULL;
    p.compile_timeout_ms = 1; /* the enum takes longer than a millisecond */
    refused(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_LIMIT, &err, "time limit");
    ts_buf_free(&b);

    ts_buf_puts(&b, "root ::= ");
    for (int i = 0; i < 5000; i++) {
        ts_buf_printf(&b, "%s\"w%d\"", i ? " | " : "", i);
    }
    ts_buf_putc(&b, '\n');
    p.grammar_kind = TS_GRAMMAR_GBNF;
    p.grammar = b.p;
    p.compile_timeout_ms = 0;
    refused(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_LIMIT, &err, "4096 parser stacks");
    p.cancel = cancel_now;
    refused(eu_add(e, prompt, 2, &p, &r, &err), TS_ERR_ABORTED, &err, "grammar: cancelled");
    ts_buf_free(&b);
    char why[256];
    assert_true(eu_idle(e, why, sizeof why));
    eu_destroy(e);
    eu_close(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_stops),    cmocka_unit_test(test_sampled_output_matches),
        cmocka_unit_test(test_greedy_with_bias), cmocka_unit_test(test_json_schema_and_object),
        cmocka_unit_test(test_stop_string_cuts), cmocka_unit_test(test_preemption_keeps_state),
        cmocka_unit_test(test_bad_grammars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
