/*
 * test_api_hooks.c — what ts_context_params turns on beyond plain compute, seen through the
 * API: the profile hook and ts_context_report, the compare hook and ts_context_diverged, the
 * dump hook, and tensor parallelism in this process (tp = 2 generates what tp = 1 does; the
 * collectives' traffic in ts_context_get_tp_stats and the report).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"

typedef struct text_log {
    char text[2048];
    size_t len;
    int32_t tokens[64];
    int n;
} text_log;

static int log_token(void *user, int32_t token, const char *text, size_t len) {
    text_log *l = user;
    if (l->len + len < sizeof l->text) {
        memcpy(l->text + l->len, text, len);
        l->len += len;
        l->text[l->len] = '\0';
    }
    if (l->n < 64) {
        l->tokens[l->n++] = token;
    }
    return 0;
}

/* Greedy generation of up to max_tokens for prompt; the context must succeed. */
static void greedy(ts_context *ctx, const char *prompt, int max_tokens, text_log *out) {
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = max_tokens;
    ts_error err = {0};
    memset(out, 0, sizeof *out);
    if (ts_context_generate(ctx, prompt, &gp, log_token, out, NULL, &err) != TS_OK) {
        fail_msg("generate: %s", err.msg);
    }
    assert_true(out->n >= 1);
}

/* Everything ts_context_report writes, NUL-terminated (malloc'd). */
static char *report_text(const ts_context *ctx) {
    FILE *f = tmpfile();
    assert_non_null(f);
    ts_context_report(ctx, f);
    long n = ftell(f);
    assert_true(n >= 0);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    rewind(f);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_profile(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    ts_context *plain = api_context(m->llm, &p);
    p.profile = 1;
    ts_context *prof = api_context(m->llm, &p);

    /* Without hooks the report is empty. */
    text_log a, b;
    greedy(plain, "hello", 4, &a);
    char *r = report_text(plain);
    assert_string_equal(r, "");
    free(r);

    /* Profiling does not change results; the report has the tables. */
    greedy(prof, "hello", 4, &b);
    assert_string_equal(a.text, b.text);
    r = report_text(prof);
    assert_true(strlen(r) > 100);
    assert_non_null(strstr(r, "| op type |"));
    assert_non_null(strstr(r, "| node |"));
    assert_null(strstr(r, "compare:"));
    free(r);
    ts_context_destroy(prof);
    ts_context_destroy(plain);
}

static void test_compare(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    ts_context *plain = api_context(m->llm, &p);
    assert_false(ts_context_diverged(plain, NULL)); /* no compare hook */

    /* F32 weights with a generous tolerance: every node agrees. */
    p.compare = "ref";
    p.compare_tol = 0.5;
    ts_context *cmp = api_context(m->llm, &p);
    text_log a, b;
    greedy(plain, "hello", 4, &a);
    greedy(cmp, "hello", 4, &b);
    assert_string_equal(a.text, b.text); /* the caller sees the CPU backend's results */
    ts_divergence d;
    memset(&d, 0x5a, sizeof d);
    assert_false(ts_context_diverged(cmp, &d));
    char *r = report_text(cmp);
    assert_non_null(strstr(r, "compare: every node matched the reference"));
    free(r);
    ts_context_destroy(cmp);
    ts_context_destroy(plain);

    /* Q4_0 weights (the CPU quantizes activations, the reference does not) and a tolerance
     * no float computation meets: a divergence at a named node. */
    ts_tiny_spec q = m->spec;
    q.wtype = TS_TYPE_Q4_0;
    api_model qm;
    api_model_open(&qm, &q, "api_q4_cmp");
    p.compare_tol = 1e-12;
    cmp = api_context(qm.llm, &p);
    greedy(cmp, "hello", 2, &a);
    memset(&d, 0, sizeof d);
    assert_true(ts_context_diverged(cmp, &d));
    assert_true(ts_context_diverged(cmp, NULL));
    assert_true(d.name[0] != '\0');
    assert_non_null(d.op);
    assert_true(d.node >= 0);
    assert_true(d.compared > d.node);
    assert_true(d.max_abs > 0.0 && d.max_rel > 0.0);
    assert_true(d.index >= 0);
    r = report_text(cmp);
    assert_non_null(strstr(r, "differs from the reference"));
    assert_non_null(strstr(r, d.name));
    free(r);
    ts_context_destroy(cmp);
    api_model_close(&qm);
}

static void test_dump(void **state) {
    api_model *m = *state;
    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, "api_dump"));
    ts_context_params p = api_params();
    p.dump = path;
    p.dump_values = 2;
    ts_context *ctx = api_context(m->llm, &p);
    text_log a;
    greedy(ctx, "hi", 1, &a);
    ts_context_destroy(ctx); /* closes the dump file */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0;
    int matmuls = 0, values = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lines++;
        matmuls += strstr(line, "MUL_MAT") != NULL;
        values += strstr(line, "sum=") != NULL && strchr(line, '[') != NULL;
    }
    fclose(f);
    unlink(path);
    assert_true(lines > 20);
    assert_true(matmuls >= 7 * m->spec.n_layer); /* q k v o gate up down per layer */
    assert_int_equal(values, lines);
}

static void test_tensor_parallel(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    ts_context *one = api_context(m->llm, &p);
    p.tp = 2;
    ts_context *two = api_context(m->llm, &p);
    ts_context_info info;
    ts_context_get_info(two, &info);
    assert_int_equal(info.tp, 2);
    assert_int_equal(info.n_threads, 2);
    ts_context_info info1;
    ts_context_get_info(one, &info1);
    assert_int_equal(info1.tp, 1);
    /* The KV budget counts every shard: the same cache in total. */
    assert_int_equal(info.kv_bytes, info1.kv_bytes);

    ts_tp_stats st;
    ts_context_get_tp_stats(one, &st);
    assert_int_equal(st.size, 1);
    assert_null(st.transport);
    assert_int_equal(st.payload_bytes, 0);
    ts_context_get_tp_stats(two, &st);
    assert_int_equal(st.size, 2);
    assert_string_equal(st.transport, "local");
    uint64_t before = st.payload_bytes; /* making the group may exchange a little */

    /* Greedy generation: the same tokens with and without shards. */
    text_log a, b;
    greedy(one, "the quick brown fox", 16, &a);
    greedy(two, "the quick brown fox", 16, &b);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.tokens, b.tokens, (size_t)a.n * sizeof a.tokens[0]);
    assert_string_equal(a.text, b.text);

    ts_context_get_tp_stats(two, &st);
    assert_int_equal(st.size, 2);
    assert_true(st.payload_bytes > before);
    assert_true(st.wire_bytes > 0);
    assert_true(st.all_reduce_calls > 0);
    char *r = report_text(two);
    assert_non_null(strstr(r, "tp: 2 ranks over local"));
    free(r);
    ts_context_destroy(two);
    ts_context_destroy(one);

    /* The batch API under tensor parallelism: logits as without it (f32 addition order only). */
    p = api_params();
    p.n_ctx = 64;
    one = api_context(m->llm, &p);
    p.tp = 2;
    two = api_context(m->llm, &p);
    const int32_t toks[5] = {1, 270, 280, 290, 300};
    ts_error err = {0};
    assert_int_equal(api_decode_seq(one, toks, 5, 0, &err), TS_OK);
    if (api_decode_seq(two, toks, 5, 0, &err) != TS_OK) {
        fail_msg("decode with tp 2: %s", err.msg);
    }
    int32_t V = ts_llm_n_vocab(m->llm);
    const float *l1 = ts_context_logits(one, -1), *l2 = ts_context_logits(two, -1);
    assert_non_null(l2);
    double d = api_max_abs_diff(l1, l2, V), scale = api_max_abs(l1, V);
    if (!(d <= 1e-4 * (1.0 + scale))) {
        fail_msg("tp 2 logits differ from tp 1 by %.3g (largest %.3g)", d, scale);
    }
    /* The embeddings come back from the leader whole. */
    ts_llm_info li;
    ts_llm_get_info(m->llm, &li);
    const float *e1 = ts_context_embeddings(one, -1), *e2 = ts_context_embeddings(two, -1);
    assert_non_null(e2);
    d = api_max_abs_diff(e1, e2, li.n_embd);
    scale = api_max_abs(e1, li.n_embd);
    if (!(d <= 1e-4 * (1.0 + scale))) {
        fail_msg("tp 2 embeddings differ from tp 1 by %.3g (largest %.3g)", d, scale);
    }
    ts_context_get_tp_stats(two, &st);
    assert_true(st.payload_bytes > 0);
    r = report_text(two);
    assert_non_null(strstr(r, "tp: 2 ranks"));
    free(r);
    ts_context_destroy(two);
    ts_context_destroy(one);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_tensor_parallel),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
