/* test_api_spec.c — the per-request speculative decoding fields (llama-server's names, flat
 * "speculative.n_max" or nested "speculative": {...}) in every dialect's body, their errors,
 * and the speculative counters of the metrics page. No model and no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/dialect.h"
#include "server/dialect_check.h"
#include "server/metrics.h"

#define CHAT_HEAD "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* draft_max and spec_n_min of an OpenAI body of `kind` ending in `tail` (after a comma). */
static void expect_ok(ts_api_kind kind, const char *tail, int32_t draft_max, int32_t n_min) {
    char body[512];
    snprintf(body, sizeof body, "%s%s%s}", kind == TS_API_CHAT ? CHAT_HEAD : "{\"prompt\":\"hi\"",
             tail[0] ? "," : "", tail);
    ts_api_request r;
    ts_api_error e;
    memset(&e, 0, sizeof e);
    ts_status st = ts_api_parse(kind, body, strlen(body), &k_lim, &r, &e);
    if (st != TS_OK) {
        print_error("body %s\n  refused: %d %s: %s\n", body, e.status, e.param, e.message);
        fail();
    }
    if (r.params.draft_max != draft_max || r.spec_n_min != n_min) {
        print_error("body %s\n  draft_max %d spec_n_min %d, want %d %d\n", body,
                    (int)r.params.draft_max, (int)r.spec_n_min, (int)draft_max, (int)n_min);
        ts_api_request_free(&r);
        fail();
    }
    ts_api_request_free(&r);
}

static void expect_bad(const char *tail, const char *param, const char *needle) {
    char body[512];
    snprintf(body, sizeof body, CHAT_HEAD ",%s}", tail);
    ts_api_request r;
    ts_api_error e;
    memset(&e, 0, sizeof e);
    ts_status st = ts_api_parse(TS_API_CHAT, body, strlen(body), &k_lim, &r, &e);
    dialect_expect_refused(st, &r, &e, body, 400, param, needle);
}

static void test_openai_forms(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        ts_api_kind kind = k == 0 ? TS_API_CHAT : TS_API_COMPLETIONS;
        expect_ok(kind, "", 0, -1); /* not given: the server's setting */
        expect_ok(kind, "\"speculative.n_max\":null", 0, -1);
        expect_ok(kind, "\"speculative.n_max\":0", -1, -1); /* off */
        expect_ok(kind, "\"speculative.n_max\":false", -1, -1);
        expect_ok(kind, "\"speculative.n_max\":5", 5, -1);
        expect_ok(kind, "\"speculative.n_max\":64", 64, -1);
        expect_ok(kind, "\"speculative.n_max\":8,\"speculative.n_min\":3", 8, 3);
        expect_ok(kind, "\"speculative.n_min\":3", 0, 3); /* the server's n_max */
        expect_ok(kind, "\"speculative.n_max\":0,\"speculative.n_min\":9", -1, 9);
        expect_ok(kind, "\"speculative.p_min\":0.75", 0, -1); /* accepted, ignored */
        expect_ok(kind, "\"speculative\":false", -1, -1);
        expect_ok(kind, "\"speculative\":true", 0, -1);
        expect_ok(kind, "\"speculative\":{}", 0, -1);
        expect_ok(kind, "\"speculative\":{\"n_max\":0}", -1, -1);
        expect_ok(kind, "\"speculative\":{\"n_max\":false}", -1, -1);
        expect_ok(kind, "\"speculative\":{\"n_max\":12,\"n_min\":2,\"p_min\":0.5}", 12, 2);
        expect_ok(kind, "\"speculative\":{\"n_max\":12,\"unknown\":1}", 12, -1);
    }
}

static void test_errors(void **state) {
    (void)state;
    expect_bad("\"speculative.n_max\":-1", "speculative.n_max",
               "speculative.n_max must be an integer in [0, 64] or false (no speculation), got -1");
    expect_bad("\"speculative.n_max\":65", "speculative.n_max", "got 65");
    expect_bad("\"speculative.n_max\":1.5", "speculative.n_max", "got 1.5");
    expect_bad("\"speculative.n_max\":\"8\"", "speculative.n_max", "got a string");
    expect_bad("\"speculative.n_max\":true", "speculative.n_max", "got a boolean");
    expect_bad("\"speculative.n_min\":false", "speculative.n_min",
               "speculative.n_min must be an integer in [0, 64], got a boolean");
    expect_bad("\"speculative.n_min\":-2", "speculative.n_min", "got -2");
    expect_bad("\"speculative.p_min\":1.5", "speculative.p_min",
               "speculative.p_min must be a number in [0, 1], got 1.5");
    expect_bad("\"speculative.p_min\":\"x\"", "speculative.p_min", "got a string");
    expect_bad("\"speculative\":3", "speculative", "must be an object");
    expect_bad("\"speculative\":[1]", "speculative", "got an array");
    expect_bad("\"speculative\":{\"n_max\":99}", "speculative.n_max", "got 99");
    expect_bad("\"speculative\":{\"n_min\":{}}", "speculative.n_min", "got an object");
    expect_bad("\"speculative\":{\"n_max\":2,\"n_min\":3}", "speculative.n_min",
               "speculative.n_min = 3 is more than speculative.n_max = 2");
    expect_bad("\"speculative.n_max\":2,\"speculative.n_min\":3", "speculative.n_min", "more than");
    expect_bad("\"speculative\":{},\"speculative.n_max\":2", "speculative", "not both");
    expect_bad("\"speculative\":false,\"speculative.p_min\":0.5", "speculative", "not both");
}

/* The other dialects carry the fields into the neutral request under the same names. */
static void test_dialects(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *anth = "{\"model\":\"claude\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\","
                       "\"content\":\"hi\"}],\"speculative.n_max\":3}";
    assert_int_equal(ts_api_parse_anthropic(anth, strlen(anth), &k_lim, false, &r, &e), TS_OK);
    assert_int_equal(r.params.draft_max, 3);
    ts_api_request_free(&r);
    anth = "{\"model\":\"claude\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\","
           "\"content\":\"hi\"}],\"speculative\":{\"n_max\":70}}";
    memset(&e, 0, sizeof e);
    dialect_expect_refused(ts_api_parse_anthropic(anth, strlen(anth), &k_lim, false, &r, &e), &r,
                           &e, anth, 400, NULL, "speculative.n_max");

    const char *resp = "{\"model\":\"tiny\",\"input\":\"hi\",\"speculative\":false}";
    assert_int_equal(ts_api_parse_responses(resp, strlen(resp), &k_lim, &r, &e), TS_OK);
    assert_int_equal(r.params.draft_max, -1);
    ts_api_request_free(&r);

    const char *oll = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                      "\"options\":{\"temperature\":0,\"speculative.n_max\":0,"
                      "\"speculative.n_min\":0}}";
    assert_int_equal(ts_api_parse_ollama(TS_OLLAMA_CHAT, oll, strlen(oll), &k_lim, &r, &e), TS_OK);
    assert_int_equal(r.params.draft_max, -1);
    assert_int_equal(r.spec_n_min, 0);
    ts_api_request_free(&r);
    oll = "{\"model\":\"m\",\"prompt\":\"hi\",\"raw\":true,\"options\":{\"speculative\":{"
          "\"n_max\":6}}}";
    assert_int_equal(ts_api_parse_ollama(TS_OLLAMA_GENERATE_RAW, oll, strlen(oll), &k_lim, &r, &e),
                     TS_OK);
    assert_int_equal(r.kind, TS_API_COMPLETIONS);
    assert_int_equal(r.params.draft_max, 6);
    ts_api_request_free(&r);
    oll = "{\"model\":\"m\",\"prompt\":\"hi\",\"options\":{\"speculative.n_max\":-4}}";
    memset(&e, 0, sizeof e);
    dialect_expect_refused(
        ts_api_parse_ollama(TS_OLLAMA_GENERATE, oll, strlen(oll), &k_lim, &r, &e), &r, &e, oll, 400,
        NULL, "speculative.n_max");
}

static void test_metrics(void **state) {
    (void)state;
    ts_metrics m;
    static const char *const labels[] = {"/v1/completions"};
    ts_metrics_init(&m, labels, 1);
    ts_engine_stats es = {.spec_drafted = 120, .spec_accepted = 90, .spec_steps = 17};
    size_t len = 0;
    char *text = ts_metrics_render(&m, &es, 0, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "# TYPE tessera_spec_drafted_tokens_total counter\n"
                                 "tessera_spec_drafted_tokens_total 120\n"));
    assert_non_null(strstr(text, "# TYPE tessera_spec_accepted_tokens_total counter\n"
                                 "tessera_spec_accepted_tokens_total 90\n"));
    assert_non_null(strstr(text, "# TYPE tessera_spec_verifications_total counter\n"
                                 "tessera_spec_verifications_total 17\n"));
    assert_non_null(strstr(text, "# HELP tessera_spec_accepted_tokens_total "));
    free(text);
    ts_metrics_destroy(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_forms),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_dialects),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
