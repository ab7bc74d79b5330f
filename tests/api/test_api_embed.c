/*
 * test_api_embed.c — embeddings through the public API (ts_context_embed) on the tiny encoders
 * (BERT, nomic-bert) and the tiny llama:
 *  - pooling: mean, cls and last equal what the per-token vectors (pooling none) give, the
 *    model's own pooling is the file's pooling_type, normalisation gives unit vectors in the
 *    same direction;
 *  - an input's vectors do not depend on the inputs computed beside it, nor on the backend
 *    (reference against CPU);
 *  - an encoder attends both ways (changing the last token changes the first token's vector),
 *    a decoder causally (it does not);
 *  - a decoder's long input computed in chunks over several steps equals one step, and its
 *    last-token vector equals the batch API's embeddings row;
 *  - embeddings between the steps of running requests equal those of an idle context;
 *  - errors: empty inputs, ids out of range, an encoder input longer than a step, unknown
 *    pooling, generation or batches on an encoder, embeddings on a context used for batches.
 *
 * Tolerances: the same rows computed in another batch shape differ only in the order of f32
 * additions (1e-5 of the largest magnitude); reference against CPU backends 1e-4.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"

#define MAX_E 64

static void ignore_event(const ts_engine_event *ev, void *user) {
    (void)ev;
    (void)user;
}

static void pattern(int32_t *out, int32_t n, int32_t salt) {
    for (int32_t i = 0; i < n; i++) {
        out[i] = 260 + (i * 7 + salt * 13) % 60;
    }
}

static void assert_near(const float *a, const float *b, int64_t n, double tol, const char *what) {
    double d = api_max_abs_diff(a, b, n), scale = api_max_abs(b, n);
    if (!(d <= tol * (1.0 + scale))) {
        fail_msg("%s: max abs difference %.3g (largest value %.3g, tolerance %.1e)", what, d, scale,
                 tol);
    }
}

typedef struct three {
    int32_t a[5], b[9], c[3];
    const int32_t *in[3];
    int32_t len[3];
} three;

static void three_inputs(three *t) {
    pattern(t->a, 5, 1);
    pattern(t->b, 9, 2);
    pattern(t->c, 3, 3);
    t->in[0] = t->a;
    t->in[1] = t->b;
    t->in[2] = t->c;
    t->len[0] = 5;
    t->len[1] = 9;
    t->len[2] = 3;
}

static void embed(ts_context *ctx, const int32_t *const *in, const int32_t *len, int32_t n,
                  ts_pooling pool, int normalize, float *out) {
    ts_embed_params p = {.pooling = pool, .normalize = normalize};
    ts_error err = {0};
    if (ts_context_embed(ctx, in, len, n, &p, out, &err) != TS_OK) {
        fail_msg("ts_context_embed: %s", err.msg);
    }
}

/* Mean, cls, last and normalised vectors against the per-token ones, for any model. */
static void check_pooling(ts_context *ctx, int64_t E) {
    three t;
    three_inputs(&t);
    float tok[17 * MAX_E], pooled[3 * MAX_E], norm[3 * MAX_E];
    embed(ctx, t.in, t.len, 3, TS_POOLING_NONE, 0, tok);
    int64_t row0[3] = {0, 5, 14};
    embed(ctx, t.in, t.len, 3, TS_POOLING_MEAN, 0, pooled);
    for (int i = 0; i < 3; i++) {
        float mean[MAX_E];
        for (int64_t k = 0; k < E; k++) {
            double s = 0;
            for (int32_t r = 0; r < t.len[i]; r++) {
                s += tok[(row0[i] + r) * E + k];
            }
            mean[k] = (float)(s / t.len[i]);
        }
        assert_near(pooled + i * E, mean, E, 1e-5, "mean pooling");
    }
    embed(ctx, t.in, t.len, 3, TS_POOLING_MEAN, 1, norm);
    for (int i = 0; i < 3; i++) {
        double n2 = 0, p2 = 0;
        for (int64_t k = 0; k < E; k++) {
            n2 += (double)norm[i * E + k] * norm[i * E + k];
            p2 += (double)pooled[i * E + k] * pooled[i * E + k];
        }
        assert_true(fabs(n2 - 1.0) < 1e-5);
        for (int64_t k = 0; k < E; k++) {
            assert_true(fabs(norm[i * E + k] - pooled[i * E + k] / sqrt(p2)) < 1e-5);
        }
    }
    embed(ctx, t.in, t.len, 3, TS_POOLING_CLS, 0, pooled);
    for (int i = 0; i < 3; i++) {
        assert_near(pooled + i * E, tok + row0[i] * E, E, 1e-5, "cls pooling");
    }
    embed(ctx, t.in, t.len, 3, TS_POOLING_LAST, 0, pooled);
    for (int i = 0; i < 3; i++) {
        assert_near(pooled + i * E, tok + (row0[i] + t.len[i] - 1) * E, E, 1e-5, "last pooling");
    }
    /* Each input alone gives what it gave beside the others. */
    for (int i = 0; i < 3; i++) {
        float alone[MAX_E];
        embed(ctx, &t.in[i], &t.len[i], 1, TS_POOLING_LAST, 0, alone);
        assert_near(alone, pooled + i * E, E, 1e-5, "input alone");
    }
}

/* Whether changing an input's last token changes its first token's vector. */
static bool first_sees_last(ts_context *ctx, int64_t E) {
    int32_t a[6], b[6];
    pattern(a, 6, 4);
    memcpy(b, a, sizeof a);
    b[5] = a[5] == 300 ? 301 : 300;
    const int32_t *in[2] = {a, b};
    int32_t len[2] = {6, 6};
    float v[2 * MAX_E];
    embed(ctx, in, len, 2, TS_POOLING_CLS, 0, v);
    return api_max_abs_diff(v, v + E, E) > 1e-4;
}

static api_model open_encoder(const char *arch) {
    ts_tiny_spec spec = ts_tiny_spec_default(arch);
    api_model m;
    char name[64];
    snprintf(name, sizeof name, "embed-%s", arch);
    api_model_open(&m, &spec, name);
    return m;
}

/* Everything about one encoder family (ts_tiny_encoders). */
static void check_encoder(const char *arch) {
    printf("  encoder %s\n", arch);
    api_model m = open_encoder(arch);
    ts_llm_info info;
    ts_llm_get_info(m.llm, &info);
    assert_int_equal(info.encoder, 1);
    assert_int_equal(info.pooling, TS_POOLING_MEAN);
    assert_true(info.n_embd <= MAX_E);
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m.llm, &p);
    check_pooling(ctx, info.n_embd);
    assert_true(first_sees_last(ctx, info.n_embd));

    /* The model's pooling (mean) and the default normalisation. */
    three t;
    three_inputs(&t);
    float model[3 * MAX_E], mean[3 * MAX_E], ref[17 * MAX_E];
    ts_error err = {0};
    assert_int_equal(ts_context_embed(ctx, t.in, t.len, 3, NULL, model, &err), TS_OK);
    embed(ctx, t.in, t.len, 3, TS_POOLING_MEAN, 1, mean);
    assert_near(model, mean, 3 * info.n_embd, 1e-6, "model pooling");

    /* The reference backend agrees. */
    ts_context_params rp = api_params();
    rp.backend = "ref";
    ts_context *rctx = api_context(m.llm, &rp);
    embed(rctx, t.in, t.len, 3, TS_POOLING_NONE, 0, ref);
    float cpu[17 * MAX_E];
    embed(ctx, t.in, t.len, 3, TS_POOLING_NONE, 0, cpu);
    assert_near(cpu, ref, 17 * info.n_embd, 1e-4, "cpu against ref");
    ts_context_destroy(rctx);

    /* An encoder gives no text and no logits. */
    ts_request_params rq = ts_request_params_default();
    assert_int_equal(ts_context_submit(ctx, t.a, 5, &rq, NULL, NULL, NULL, &err),
                     TS_ERR_INVALID_ARG); /* no callback */
    assert_int_equal(ts_context_submit(ctx, t.a, 5, &rq, ignore_event, NULL, NULL, &err),
                     TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "encoder"));
    ts_decode_batch db = {.n_tokens = 5, .tokens = t.a};
    assert_int_equal(ts_context_decode(ctx, &db, &err), TS_ERR_UNSUPPORTED);
    ts_context_destroy(ctx);

    /* Bad inputs. */
    p.max_batch_tokens = 16;
    ctx = api_context(m.llm, &p);
    int32_t long_in[20], zero = 0, bad = (int32_t)info.n_vocab;
    pattern(long_in, 20, 5);
    const int32_t *in1[1] = {long_in};
    int32_t n20 = 20, n1 = 1;
    assert_int_equal(ts_context_embed(ctx, in1, &n20, 1, NULL, model, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "one step"));
    assert_int_equal(ts_context_embed(ctx, in1, &zero, 1, NULL, model, &err), TS_ERR_INVALID_ARG);
    const int32_t *in_bad[1] = {&bad};
    assert_int_equal(ts_context_embed(ctx, in_bad, &n1, 1, NULL, model, &err), TS_ERR_RANGE);
    assert_int_equal(ts_context_embed(ctx, in1, &n1, 0, NULL, model, &err), TS_ERR_INVALID_ARG);
    ts_embed_params odd = {.pooling = (ts_pooling)7, .normalize = 1};
    assert_int_equal(ts_context_embed(ctx, in1, &n1, 1, &odd, model, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_context_embed(ctx, in1, &n1, 1, NULL, model, NULL), TS_OK);
    ts_context_destroy(ctx);
    api_model_close(&m);
}

static void test_encoder(void **state) {
    (void)state;
    for (int i = 0; ts_tiny_encoders[i] != NULL; i++) {
        check_encoder(ts_tiny_encoders[i]);
    }
}

static void test_pooling_names(void **state) {
    (void)state;
    ts_pooling p;
    ts_error err = {0};
    for (int k = TS_POOLING_MODEL; k <= TS_POOLING_LAST; k++) {
        assert_int_equal(ts_pooling_parse(ts_pooling_name((ts_pooling)k), &p, &err), TS_OK);
        assert_int_equal(p, k);
    }
    assert_int_equal(ts_pooling_parse("max", &p, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'max'"));
    assert_null(ts_pooling_name((ts_pooling)9));
}

static void test_decoder(void **state) {
    api_model *m = *state;
    ts_llm_info info;
    ts_llm_get_info(m->llm, &info);
    assert_int_equal(info.encoder, 0);
    assert_int_equal(info.pooling, TS_POOLING_LAST);
    int64_t E = info.n_embd;
    assert_true(E <= MAX_E);
    ts_context_params p = api_params();
    p.n_ctx = 64;
    p.max_seqs = 4;
    ts_context *ctx = api_context(m->llm, &p);
    check_pooling(ctx, E);
    assert_false(first_sees_last(ctx, E));

    /* A 30-token input in one step (wide context) and in chunks of 8 (narrow one). */
    int32_t in[30];
    pattern(in, 30, 6);
    const int32_t *ins[1] = {in};
    int32_t n = 30;
    float one[MAX_E], chunked[MAX_E], last_one[MAX_E], last_chunked[MAX_E];
    embed(ctx, ins, &n, 1, TS_POOLING_MEAN, 0, one);
    embed(ctx, ins, &n, 1, TS_POOLING_LAST, 0, last_one);
    ts_context_params np = p;
    np.max_batch_tokens = 8;
    ts_context *narrow = api_context(m->llm, &np);
    embed(narrow, ins, &n, 1, TS_POOLING_MEAN, 0, chunked);
    embed(narrow, ins, &n, 1, TS_POOLING_LAST, 0, last_chunked);
    assert_near(chunked, one, E, 1e-5, "mean over chunks");
    assert_near(last_chunked, last_one, E, 1e-5, "last over chunks");
    ts_context_destroy(narrow);

    /* Between the steps of a running request, the same vectors. */
    ts_request_params rq = ts_request_params_default();
    rq.max_tokens = 8;
    ts_error err = {0};
    assert_int_equal(ts_context_submit(ctx, in, 10, &rq, ignore_event, NULL, NULL, &err), TS_OK);
    assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
    float busy[MAX_E];
    embed(ctx, ins, &n, 1, TS_POOLING_MEAN, 0, busy);
    assert_near(busy, one, E, 1e-5, "beside a running request");
    while (ts_context_has_work(ctx)) {
        assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
    }
    ts_context_destroy(ctx);

    /* The batch API's embeddings row of the last token is LAST pooling; a context used for
     * batches refuses ts_context_embed until cleared. */
    ctx = api_context(m->llm, &p);
    ts_decode_batch db = {.n_tokens = 30, .tokens = in};
    assert_int_equal(ts_context_decode(ctx, &db, &err), TS_OK);
    assert_near(ts_context_embeddings(ctx, -1), last_one, E, 1e-5, "batch API row");
    assert_int_equal(ts_context_embed(ctx, ins, &n, 1, NULL, busy, &err), TS_ERR_STATE);
    ts_context_clear(ctx);
    assert_int_equal(ts_context_embed(ctx, ins, &n, 1, NULL, busy, &err), TS_OK);
    ts_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_pooling_names),
        cmocka_unit_test(test_decoder),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
