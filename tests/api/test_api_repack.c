/*
 * test_api_repack.c — weights repacked at load (ts_context_params.no_repack), as an embedder
 * sees it: a context that repacks and one that does not give the same logits bit for bit (the
 * packed kernels give the row kernels' bits), over a prompt and token-by-token decoding, for
 * every weight type with a packed layout; the info reports what was repacked, and nothing with
 * no_repack. Whether a type is repacked is the measured kernel choice (on a CPU without packed
 * kernels nothing is, and both contexts are trivially equal: the test says so).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api_util.h"

#define PROMPT 12
#define STEPS  6

/* Logits of the prompt's last token, then of each greedy step, into out[(STEPS + 1) * V]. */
static void run(ts_llm *llm, bool repack, float *out, int32_t V, ts_context_info *info) {
    ts_context_params p = api_params();
    p.n_ctx = 64;
    p.no_repack = repack ? 0 : 1;
    ts_context *ctx = api_context(llm, &p);
    ts_context_get_info(ctx, info);
    int32_t tokens[PROMPT];
    for (int i = 0; i < PROMPT; i++) {
        tokens[i] = 3 + (i * 37) % (V - 3);
    }
    ts_error err = {0};
    assert_int_equal(api_decode_seq(ctx, tokens, PROMPT, 0, &err), TS_OK);
    for (int s = 0; s <= STEPS; s++) {
        const float *l = ts_context_logits(ctx, -1);
        assert_non_null(l);
        memcpy(out + (size_t)s * (size_t)V, l, (size_t)V * sizeof *l);
        if (s < STEPS) {
            int32_t next = api_argmax(l, V);
            int32_t seq = 0, pos = PROMPT + s;
            ts_decode_batch b = {.n_tokens = 1, .tokens = &next, .pos = &pos, .seq = &seq};
            assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
        }
    }
    /* info's strings belong to the context: keep only what is compared below. */
    info->kernels = strstr(info->kernels, "packed") != NULL ? "packed" : "";
    info->kernel_notice = "";
    info->backend = info->kv_type = info->kv_type_k = info->kv_type_v = info->chat_template = NULL;
    ts_context_destroy(ctx);
}

static void test_same_logits(void **state) {
    (void)state;
    /* The last case has a matrix whose row count is not whole groups of 16 (the output matrix of
     * a vocabulary of 333): it stays unpacked, the others are packed, and the logits agree. */
    static const ts_type types[] = {TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_Q5_0,  TS_TYPE_Q8_0,
                                    TS_TYPE_Q4_K, TS_TYPE_Q6_K, TS_TYPE_MXFP4, TS_TYPE_Q4_0};
    int packed_types = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        ts_tiny_spec spec = ts_tiny_spec_default("llama");
        spec.wtype = types[t];
        if (types[t] == TS_TYPE_Q4_K || types[t] == TS_TYPE_Q6_K) {
            spec.n_embd = 256; /* a K-quant row is whole super-blocks of 256 */
            spec.n_ff = 512;
        }
        const bool ragged = t + 1 == sizeof types / sizeof types[0];
        if (ragged) {
            spec.n_vocab = 333;
        }
        api_model m;
        api_model_open(&m, &spec, "repack");
        ts_llm_info li;
        ts_llm_get_info(m.llm, &li);
        const int32_t V = (int32_t)li.n_vocab;
        float *a = malloc((size_t)(STEPS + 1) * (size_t)V * sizeof *a);
        float *b = malloc((size_t)(STEPS + 1) * (size_t)V * sizeof *b);
        assert_non_null(a);
        assert_non_null(b);
        ts_context_info ia, ib;
        run(m.llm, true, a, V, &ia);
        run(m.llm, false, b, V, &ib);
        for (int64_t i = 0; i < (int64_t)(STEPS + 1) * V; i++) {
            if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
                fail_msg("%s: logit %lld of step %lld: %.9g repacked, %.9g not (bits differ)",
                         ts_type_name(types[t]), (long long)(i % V), (long long)(i / V),
                         (double)a[i], (double)b[i]);
            }
        }
        /* What was repacked is reported; nothing without repacking. */
        const bool packed = strcmp(ia.kernels, "packed") == 0;
        assert_int_equal(ib.repacked_bytes, 0);
        assert_string_equal(ib.kernels, "");
        if (packed) {
            assert_true(ia.repacked_bytes > 0);
            assert_true(ia.repack_ms >= 0.0);
            packed_types++;
        } else {
            assert_int_equal(ia.repacked_bytes, 0);
        }
        printf("%-5s%s repacked %llu bytes; logits of %d steps identical\n", ts_type_name(types[t]),
               ragged ? " (ragged rows)" : "", (unsigned long long)ia.repacked_bytes, STEPS + 1);
        free(a);
        free(b);
        api_model_close(&m);
    }
    if (packed_types == 0) {
        printf("no type's measured kernel reads repacked weights on this CPU: both contexts ran "
               "the row kernels\n");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
