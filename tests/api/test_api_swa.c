/*
 * test_api_swa.c — the sliding-window layers' own KV cache through the public API, on tiny
 * Gemma 3 (five local layers, one global) and Gemma 2 (alternating) models with a window of 4
 * positions, compared with contexts made with swa_full (every layer keeps the whole context):
 *   - ts_context_info: the window cache's tokens and bytes, and the memory saved; a KV budget
 *     (kv_bytes) buys a longer full-attention cache;
 *   - the batch API: a sequence decoded token by token far past the window, and a fork of it,
 *     give bit-identical logits;
 *   - requests under tensor parallelism (2 shards in threads): the same tokens, and the
 *     window blocks in use stay bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_util.h"

#define WINDOW 4

typedef struct swa_models {
    api_model gemma3, gemma2, llama;
} swa_models;

static void open_gemma(api_model *m, const char *arch, int64_t n_layer) {
    ts_tiny_spec s = ts_tiny_spec_default(arch);
    s.n_swa = WINDOW;
    s.n_layer = n_layer;
    s.n_ctx_train = 512;
    s.tied_output = false; /* a random tied model repeats its input token: weak comparisons */
    api_model_open(m, &s, arch);
}

static int group_setup(void **state) {
    swa_models *ms = calloc(1, sizeof *ms);
    if (ms == NULL) {
        return -1;
    }
    open_gemma(&ms->gemma3, "gemma3", 6);
    open_gemma(&ms->gemma2, "gemma2", 4);
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    api_model_open(&ms->llama, &s, "llama");
    *state = ms;
    return 0;
}

static int group_teardown(void **state) {
    swa_models *ms = *state;
    api_model_close(&ms->gemma3);
    api_model_close(&ms->gemma2);
    api_model_close(&ms->llama);
    free(ms);
    return 0;
}

static ts_context *context(ts_llm *llm, int64_t n_ctx, int swa_full) {
    ts_context_params p = api_params();
    p.n_ctx = n_ctx;
    p.max_seqs = 2;
    p.max_batch_tokens = 32;
    p.swa_full = swa_full;
    return api_context(llm, &p);
}

/* K and V bytes of one token in one layer of the tiny Gemma 3 (2 KV heads of 32, f16). */
#define LAYER_TOKEN_BYTES (2 * 2 * 32 * 2)

static void test_info_and_memory(void **state) {
    swa_models *ms = *state;
    ts_context *win = context(ms->gemma3.llm, 2048, 0);
    ts_context *full = context(ms->gemma3.llm, 2048, 1);
    ts_context_info a, b;
    ts_context_get_info(win, &a);
    ts_context_get_info(full, &b);
    /* Blocks of 16: 2 sequences x (1 + 2) blocks + 32 / 16 for the step's tokens = 8 blocks. */
    assert_int_equal(a.kv_tokens, 2048);
    assert_int_equal(a.kv_swa_tokens, 8 * 16);
    assert_int_equal(a.kv_swa_bytes, (uint64_t)5 * 128 * LAYER_TOKEN_BYTES);
    assert_int_equal(a.kv_bytes - a.kv_swa_bytes, (uint64_t)1 * 2048 * LAYER_TOKEN_BYTES);
    assert_int_equal(b.kv_swa_tokens, 0);
    assert_int_equal(b.kv_swa_bytes, 0);
    assert_int_equal(b.kv_bytes, (uint64_t)6 * 2048 * LAYER_TOKEN_BYTES);
    assert_true(a.kv_bytes * 4 < b.kv_bytes);
    ts_context_destroy(win);
    ts_context_destroy(full);

    /* The same budget holds a longer context for the full-attention layers. */
    ts_context_params p = api_params();
    p.n_ctx = 2048;
    p.max_seqs = 2;
    p.max_batch_tokens = 32;
    p.kv_bytes = 1 << 20;
    win = api_context(ms->gemma3.llm, &p);
    p.swa_full = 1;
    full = api_context(ms->gemma3.llm, &p);
    ts_context_get_info(win, &a);
    ts_context_get_info(full, &b);
    /* 682 tokens of every layer (rounded up to whole blocks: 688); with the window cache
     * holding 128 tokens of 5 layers, 3456 tokens of the global layer. */
    assert_int_equal(b.kv_tokens, 688);
    assert_int_equal(a.kv_tokens, 3456);
    assert_int_equal(a.kv_swa_tokens, 128);
    assert_true(a.kv_bytes <= ((uint64_t)1 << 20) + 16 * 6 * LAYER_TOKEN_BYTES);
    ts_context_destroy(win);
    ts_context_destroy(full);

    /* A model without sliding-window layers has no window cache. */
    ts_context *plain = context(ms->llama.llm, 256, 0);
    ts_context_get_info(plain, &a);
    assert_int_equal(a.kv_swa_tokens, 0);
    assert_int_equal(a.kv_swa_bytes, 0);
    ts_context_destroy(plain);
}

/* Decodes tok on seq, wanting its logits, in both contexts; the logits must be the same bits. */
static int32_t step_both(ts_context *const ctx[2], int32_t tok, int32_t seq, int32_t V,
                         const char *what) {
    ts_error err = {0};
    for (int i = 0; i < 2; i++) {
        if (api_decode_seq(ctx[i], &tok, 1, seq, &err) != TS_OK) {
            fail_msg("%s: decode on sequence %d (%s): %s", what, seq, i ? "swa_full" : "window",
                     err.msg);
        }
    }
    const float *a = ts_context_logits(ctx[0], -1), *b = ts_context_logits(ctx[1], -1);
    if (memcmp(a, b, (size_t)V * sizeof *a) != 0) {
        fail_msg("%s: sequence %d at position %d: logits differ by %.3g", what, seq,
                 ts_context_seq_len(ctx[0], seq) - 1, api_max_abs_diff(a, b, V));
    }
    return api_argmax(a, V);
}

/* 10 prompt tokens, then 110 decoded one at a time (block 16, window 4: a block leaves the
 * window every 16 tokens); at position 50 sequence 1 forks from sequence 0 (its last block is
 * shared and partly filled) and both go on with different tokens. */
static void batch_decode(const api_model *m) {
    int32_t V = ts_llm_n_vocab(m->llm);
    ts_context *ctx[2] = {context(m->llm, 256, 0), context(m->llm, 256, 1)};
    int32_t prompt[10];
    for (int i = 0; i < 10; i++) {
        prompt[i] = 3 + (i * 37) % (V - 3);
    }
    ts_error err = {0};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(api_decode_seq(ctx[i], prompt, 10, 0, &err), TS_OK);
    }
    assert_memory_equal(ts_context_logits(ctx[0], -1), ts_context_logits(ctx[1], -1),
                        (size_t)V * sizeof(float));
    int32_t next0 = api_argmax(ts_context_logits(ctx[0], -1), V), next1 = -1;
    for (int32_t pos = 10; pos < 120; pos++) {
        if (pos == 50) {
            for (int i = 0; i < 2; i++) {
                assert_int_equal(ts_context_seq_fork(ctx[i], 0, 1, &err), TS_OK);
            }
            next1 = (next0 + 1) % V;
        }
        next0 = step_both(ctx, next0, 0, V, m->spec.arch);
        if (next1 >= 0) {
            next1 = step_both(ctx, next1, 1, V, m->spec.arch);
        }
    }
    assert_int_equal(ts_context_seq_len(ctx[0], 0), 120);
    assert_int_equal(ts_context_seq_len(ctx[0], 1), 120);
    ts_context_destroy(ctx[0]);
    ts_context_destroy(ctx[1]);
}

static void test_batch_decode_gemma3(void **state) {
    swa_models *ms = *state;
    batch_decode(&ms->gemma3);
}

static void test_batch_decode_gemma2(void **state) {
    swa_models *ms = *state;
    batch_decode(&ms->gemma2);
}

typedef struct tokens_log {
    int32_t tok[256];
    int n;
    bool done;
} tokens_log;

static void on_event(const ts_engine_event *ev, void *user) {
    tokens_log *l = user;
    if (ev->token >= 0 && l->n < 256) {
        l->tok[l->n++] = ev->token;
    }
    l->done = l->done || ev->request_done;
}

/* Requests on two shards: 150 greedy tokens after a 20-token prompt are the same with and
 * without the window cache, whose blocks in use stay within one window per sequence. */
static void test_requests_tensor_parallel(void **state) {
    swa_models *ms = *state;
    int32_t V = ts_llm_n_vocab(ms->gemma3.llm);
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) {
        prompt[i] = 3 + (i * 53) % (V - 3);
    }
    tokens_log logs[2] = {0};
    uint32_t most = 0, total = 0;
    for (int full = 0; full < 2; full++) {
        ts_context_params p = api_params();
        p.n_ctx = 256;
        p.max_seqs = 2;
        p.max_batch_tokens = 32;
        p.swa_full = full;
        p.tp = 2;
        ts_context *ctx = api_context(ms->gemma3.llm, &p);
        ts_request_params rp = ts_request_params_default();
        rp.sampling.temperature = 0.0f;
        rp.max_tokens = 150;
        rp.ignore_eos = true;
        ts_error err = {0};
        if (ts_context_submit(ctx, prompt, 20, &rp, on_event, &logs[full], NULL, &err) != TS_OK) {
            fail_msg("submit: %s", err.msg);
        }
        while (!logs[full].done) {
            assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
            ts_engine_stats st;
            ts_context_get_stats(ctx, &st);
            if (!full) {
                most = st.kv_swa_blocks_used > most ? st.kv_swa_blocks_used : most;
                total = st.kv_swa_blocks_total;
            } else {
                assert_int_equal(st.kv_swa_blocks_total, 0);
            }
        }
        ts_context_destroy(ctx);
    }
    assert_int_equal(logs[0].n, 150);
    assert_int_equal(logs[1].n, 150);
    assert_memory_equal(logs[0].tok, logs[1].tok, sizeof logs[0].tok);
    assert_int_equal(total, 8);
    assert_true(most >= 1 && most <= 2); /* positions p - 3 .. p - 1 span at most 2 blocks */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_and_memory),
        cmocka_unit_test(test_batch_decode_gemma3),
        cmocka_unit_test(test_batch_decode_gemma2),
        cmocka_unit_test(test_requests_tensor_parallel),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
