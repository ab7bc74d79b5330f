/*
 * test_api_errors.c — the error rule of include/tessera.h, entry point by entry point: every
 * public function that takes a ts_error is called on a bad input once with a NULL error buffer
 * (it must return the right negative status and not crash) and once with a buffer (same
 * status, and a message that names the problem). API_CHECK_ERR (api_util.h) runs both.
 *
 * Order follows the header: models and tokens, contexts, requests, batches, the server, GGUF
 * files, quantization.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_util.h"

static void test_llm_errors(void **state) {
    api_model *m = *state;
    ts_llm *llm = NULL;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "path", ts_llm_open(NULL, NULL, &llm, E));
    API_CHECK_ERR(TS_ERR_IO, "/nonexistent/x.gguf",
                  ts_llm_open("/nonexistent/x.gguf", NULL, &llm, E));
    ts_llm_params vo = {.vocab_only = 1};
    API_CHECK_ERR(TS_ERR_IO, "/nonexistent/x.gguf",
                  ts_llm_open("/nonexistent/x.gguf", &vo, &llm, E));
    assert_null(llm);

    int32_t *ids = NULL;
    size_t n = 0;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_llm_tokenize",
                  ts_llm_tokenize(m->llm, "hi", 2, 1, 0, NULL, &n, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_llm_tokenize",
                  ts_llm_tokenize(NULL, "hi", 2, 1, 0, &ids, &n, E));

    const int32_t bad_ids[] = {5, 100000};
    char *text = NULL;
    API_CHECK_ERR(TS_ERR_RANGE, "100000", ts_llm_detokenize(m->llm, bad_ids, 2, 0, &text, NULL, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_llm_detokenize",
                  ts_llm_detokenize(m->llm, NULL, 2, 0, &text, NULL, E));

    const char *piece = NULL;
    size_t len = 0;
    API_CHECK_ERR(TS_ERR_RANGE, "-4", ts_llm_token_to_piece(m->llm, -4, 0, &piece, &len, E));
    API_CHECK_ERR(TS_ERR_RANGE, "320", ts_llm_token_to_piece(m->llm, 320, 1, &piece, &len, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_llm_token_to_piece",
                  ts_llm_token_to_piece(m->llm, 5, 0, NULL, &len, E));

    ts_message msgs[] = {{"user", "hi"}};
    ts_message bad_role[] = {{"wizard", "hi"}};
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "template",
                  ts_llm_chat_prompt(m->llm, NULL, msgs, 1, 1, &text, NULL, E));
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "nope",
                  ts_llm_chat_prompt(m->llm, "nope", msgs, 1, 1, &text, NULL, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "wizard",
                  ts_llm_chat_prompt(m->llm, "gemma", bad_role, 1, 1, &text, NULL, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_llm_chat_prompt",
                  ts_llm_chat_prompt(m->llm, "chatml", NULL, 1, 1, &text, NULL, E));
}

static void test_context_errors(void **state) {
    api_model *m = *state;
    ts_context *ctx = NULL;
    ts_context_params p = api_params();
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "llm", ts_context_create(NULL, &p, &ctx, E));
    p.backend = "tpu";
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "tpu", ts_context_create(m->llm, &p, &ctx, E));
    p = api_params();
    p.kv_bytes = 10;
    API_CHECK_ERR(TS_ERR_LIMIT, "10 bytes", ts_context_create(m->llm, &p, &ctx, E));
    p = api_params();
    const char *ov[] = {"attention=nope"};
    p.overrides = ov;
    p.n_overrides = 1;
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "nope", ts_context_create(m->llm, &p, &ctx, E));
    p = api_params();
    p.n_ctx = 5000;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "5000", ts_context_create(m->llm, &p, &ctx, E));
    assert_null(ctx);

    /* The tiny model has no chat template. */
    p = api_params();
    ctx = api_context(m->llm, &p);
    ts_message msgs[] = {{"user", "hi"}};
    char *text = NULL;
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "chat template",
                  ts_context_chat_prompt(ctx, msgs, 1, 1, &text, NULL, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_context_chat_prompt",
                  ts_context_chat_prompt(ctx, NULL, 1, 1, &text, NULL, E));
    ts_context_destroy(ctx);
}

static void on_event(const ts_engine_event *ev, void *user) {
    (void)ev;
    (void)user;
}

static void test_request_errors(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    p.n_ctx = 64;
    ts_context *ctx = api_context(m->llm, &p);
    const int32_t prompt[] = {1, 300, 301};
    const int32_t bad_prompt[] = {1, 999};
    ts_request_params rp = ts_request_params_default();
    uint64_t id = 0;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_context_submit",
                  ts_context_submit(ctx, prompt, 3, &rp, NULL, NULL, &id, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_context_submit",
                  ts_context_submit(NULL, prompt, 3, &rp, on_event, NULL, &id, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "empty",
                  ts_context_submit(ctx, prompt, 0, &rp, on_event, NULL, &id, E));
    API_CHECK_ERR(TS_ERR_RANGE, "999",
                  ts_context_submit(ctx, bad_prompt, 2, &rp, on_event, NULL, &id, E));
    rp.max_tokens = 100;
    API_CHECK_ERR(TS_ERR_LIMIT, "exceeds the context",
                  ts_context_submit(ctx, prompt, 3, &rp, on_event, NULL, &id, E));
    rp = ts_request_params_default();
    rp.sampling.top_p = 2.0f;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "top_p",
                  ts_context_submit(ctx, prompt, 3, &rp, on_event, NULL, &id, E));
    rp = ts_request_params_default();
    rp.n = 0;
    API_CHECK_ERR(TS_ERR_RANGE, "n = 0",
                  ts_context_submit(ctx, prompt, 3, &rp, on_event, NULL, &id, E));
    assert_false(ts_context_has_work(ctx)); /* nothing was queued */

    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_context_step", ts_context_step(NULL, NULL, E));

    ts_generate_params gp = ts_generate_params_default();
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "prompt",
                  ts_context_generate(ctx, NULL, &gp, NULL, NULL, NULL, E));
    gp.max_tokens = 1000;
    API_CHECK_ERR(TS_ERR_LIMIT, "exceeds the context",
                  ts_context_generate(ctx, "hello", &gp, NULL, NULL, NULL, E));
    gp = ts_generate_params_default();
    gp.top_k = -2;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "top_k",
                  ts_context_generate(ctx, "hello", &gp, NULL, NULL, NULL, E));
    ts_context_destroy(ctx);
}

static void test_batch_errors(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    p.max_seqs = 4;
    ts_context *ctx = api_context(m->llm, &p);
    const int32_t toks[] = {1, 300, 301};
    const int32_t seq_bad[] = {0, 0, 9};
    const int32_t pos_bad[] = {0, 1, 5};
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ts_context_decode", ts_context_decode(ctx, NULL, E));
    ts_decode_batch empty = {.n_tokens = 0, .tokens = toks};
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "not 0", ts_context_decode(ctx, &empty, E));
    ts_decode_batch b = {.n_tokens = 3, .tokens = toks, .seq = seq_bad};
    API_CHECK_ERR(TS_ERR_RANGE, "sequence 9", ts_context_decode(ctx, &b, E));
    b = (ts_decode_batch){.n_tokens = 3, .tokens = toks, .pos = pos_bad};
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "position 5", ts_context_decode(ctx, &b, E));
    int32_t many[513];
    for (int i = 0; i < 513; i++) {
        many[i] = 300;
    }
    b = (ts_decode_batch){.n_tokens = 513, .tokens = many};
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "max_batch_tokens", ts_context_decode(ctx, &b, E));
    const int32_t toks_bad[] = {1, 320};
    b = (ts_decode_batch){.n_tokens = 2, .tokens = toks_bad};
    API_CHECK_ERR(TS_ERR_RANGE, "320", ts_context_decode(ctx, &b, E));
    assert_int_equal(ts_context_seq_len(ctx, 0), 0);

    API_CHECK_ERR(TS_ERR_RANGE, "sequence -1", ts_context_seq_drop(ctx, -1, E));
    API_CHECK_ERR(TS_ERR_RANGE, "sequence 4", ts_context_seq_drop(ctx, 4, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "ctx", ts_context_seq_drop(NULL, 0, E));
    API_CHECK_ERR(TS_ERR_RANGE, "sequence 7", ts_context_seq_fork(ctx, 0, 7, E));
    API_CHECK_ERR(TS_ERR_STATE, "differ", ts_context_seq_fork(ctx, 1, 1, E));
    assert_int_equal(api_decode_seq(ctx, toks, 3, 2, NULL), TS_OK);
    API_CHECK_ERR(TS_ERR_STATE, "must be empty", ts_context_seq_fork(ctx, 0, 2, E));

    /* A context in batch use refuses requests, and the other way round. */
    ts_request_params rp = ts_request_params_default();
    API_CHECK_ERR(TS_ERR_STATE, "batches",
                  ts_context_submit(ctx, toks, 3, &rp, on_event, NULL, NULL, E));
    API_CHECK_ERR(TS_ERR_STATE, "batches", ts_context_step(ctx, NULL, E));
    API_CHECK_ERR(TS_ERR_STATE, "batches",
                  ts_context_generate(ctx, "hello", NULL, NULL, NULL, NULL, E));
    ts_context_destroy(ctx);

    ctx = api_context(m->llm, &p);
    assert_int_equal(ts_context_submit(ctx, toks, 3, &rp, on_event, NULL, NULL, NULL), TS_OK);
    b = (ts_decode_batch){.n_tokens = 3, .tokens = toks};
    API_CHECK_ERR(TS_ERR_STATE, "requests", ts_context_decode(ctx, &b, E));
    API_CHECK_ERR(TS_ERR_STATE, "requests", ts_context_seq_drop(ctx, 0, E));
    API_CHECK_ERR(TS_ERR_STATE, "requests", ts_context_seq_fork(ctx, 0, 1, E));
    ts_context_destroy(ctx);
}

static void test_server_errors(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m->llm, &p);
    ts_server *s = NULL;
    ts_server_config cfg = ts_server_config_default();
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "configuration", ts_server_create(NULL, ctx, &s, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "context", ts_server_create(&cfg, NULL, &s, E));
    cfg.max_body = 0;
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "max body 0", ts_server_create(&cfg, ctx, &s, E));
    cfg = ts_server_config_default();
    cfg.api_key = "";
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "API key", ts_server_create(&cfg, ctx, &s, E));
    assert_null(s);

    /* Start on a port that this process already listens on. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    cfg = ts_server_config_default();
    cfg.port = ntohs(a.sin_port);
    char port[16];
    snprintf(port, sizeof port, ":%d", cfg.port);
    assert_int_equal(ts_server_create(&cfg, ctx, &s, NULL), TS_OK);
    API_CHECK_ERR(TS_ERR_IO, port, ts_server_start(s, E));
    assert_int_equal(ts_server_port(s), 0);
    ts_server_destroy(s);
    close(fd);
    ts_context_destroy(ctx);
}

static void test_gguf_errors(void **state) {
    api_model *m = *state;
    ts_gguf *g = NULL;
    API_CHECK_ERR(TS_ERR_IO, "/nonexistent/y.gguf", ts_gguf_open("/nonexistent/y.gguf", &g, E));
    const char junk[64] = "GGUG is not the magic";
    API_CHECK_ERR(TS_ERR_FORMAT, "gguf", ts_gguf_open_memory(junk, sizeof junk, &g, E));
    assert_null(g);

    ts_error err = {0};
    if (ts_gguf_open(m->path, &g, &err) != TS_OK) {
        fail_msg("%s", err.msg);
    }
    /* A string key asked for as each other type; a number asked for as a string. */
    const char *s_key = "general.architecture", *u_key = "llama.block_count";
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
        ts_gguf_str str;
        ts_gguf_array arr;
    } v;
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_u8(g, s_key, &v.u8, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_i8(g, s_key, &v.i8, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_u16(g, s_key, &v.u16, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_i16(g, s_key, &v.i16, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_u32(g, s_key, &v.u32, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_i32(g, s_key, &v.i32, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_u64(g, s_key, &v.u64, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_i64(g, s_key, &v.i64, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_f32(g, s_key, &v.f32, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_f64(g, s_key, &v.f64, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_bool(g, s_key, &v.b, E));
    API_CHECK_ERR(TS_ERR_TYPE, u_key, ts_gguf_get_str(g, u_key, &v.str, E));
    API_CHECK_ERR(TS_ERR_TYPE, u_key, ts_gguf_get_array(g, u_key, &v.arr, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_int(g, s_key, &v.i64, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_get_float(g, s_key, &v.f64, E));
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "no.such.key", ts_gguf_get_u32(g, "no.such.key", &v.u32, E));
    API_CHECK_ERR(TS_ERR_NOT_FOUND, "no.such.key", ts_gguf_get_int(g, "no.such.key", &v.i64, E));
    /* The lenient getters accept what they document. */
    assert_int_equal(ts_gguf_get_int(g, u_key, &v.i64, NULL), TS_OK);
    assert_int_equal(v.i64, m->spec.n_layer);

    uint64_t s_idx = 0, u_idx = 0, n_kv = ts_gguf_kv_count(g);
    assert_int_equal(ts_gguf_find_key(g, s_key, &s_idx), TS_OK);
    assert_int_equal(ts_gguf_find_key(g, u_key, &u_idx), TS_OK);
    assert_int_equal(ts_gguf_find_key(g, "no.such.key", &u_idx), TS_ERR_NOT_FOUND);
    assert_int_equal(ts_gguf_find_key(g, u_key, &u_idx), TS_OK);
    char range[32];
    snprintf(range, sizeof range, "%llu", (unsigned long long)n_kv);
    API_CHECK_ERR(TS_ERR_RANGE, range, ts_gguf_kv_str(g, n_kv, &v.str, E));
    API_CHECK_ERR(TS_ERR_TYPE, u_key, ts_gguf_kv_str(g, u_idx, &v.str, E));
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_kv_array(g, s_idx, &v.arr, E));
    API_CHECK_ERR(TS_ERR_RANGE, range, ts_gguf_kv_array(g, n_kv, &v.arr, E));
    const void *bytes = NULL;
    API_CHECK_ERR(TS_ERR_TYPE, s_key, ts_gguf_kv_scalar(g, s_idx, &bytes, E));
    API_CHECK_ERR(TS_ERR_RANGE, range, ts_gguf_kv_scalar(g, n_kv + 5, &bytes, E));

    /* Array elements: past the end, and the wrong element type. */
    ts_gguf_array toks, scores;
    assert_int_equal(ts_gguf_get_array(g, "tokenizer.ggml.tokens", &toks, NULL), TS_OK);
    assert_int_equal(ts_gguf_get_array(g, "tokenizer.ggml.scores", &scores, NULL), TS_OK);
    assert_int_equal(toks.n, (uint64_t)m->spec.n_vocab);
    char past[32];
    snprintf(past, sizeof past, "index %llu", (unsigned long long)toks.n);
    API_CHECK_ERR(TS_ERR_RANGE, past, ts_gguf_array_str(&toks, toks.n, &v.str, E));
    API_CHECK_ERR(TS_ERR_TYPE, "float32", ts_gguf_array_str(&scores, 0, &v.str, E));
    API_CHECK_ERR(TS_ERR_TYPE, "string", ts_gguf_array_arr(&toks, 0, &v.arr, E));
    API_CHECK_ERR(TS_ERR_RANGE, past, ts_gguf_array_arr(&toks, toks.n, &v.arr, E));
    API_CHECK_ERR(TS_ERR_TYPE, "float32", ts_gguf_array_int(&scores, 0, &v.i64, E));
    API_CHECK_ERR(TS_ERR_TYPE, "string", ts_gguf_array_float(&toks, 0, &v.f64, E));
    API_CHECK_ERR(TS_ERR_RANGE, past, ts_gguf_array_float(&scores, scores.n, &v.f64, E));
    ts_gguf_close(g);
}

static void test_quantize_errors(void **state) {
    api_model *m = *state;
    char out[512];
    assert_non_null(ts_tiny_temp_path(out, sizeof out, "api_quant"));
    ts_quantize_params qp = {.type = "Q3_X"};
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "Q3_X", ts_quantize_file(m->path, out, &qp, E));
    API_CHECK_ERR(TS_ERR_INVALID_ARG, "type", ts_quantize_file(m->path, out, NULL, E));
    qp.type = "Q8_0";
    API_CHECK_ERR(TS_ERR_IO, "/nonexistent/z.gguf",
                  ts_quantize_file("/nonexistent/z.gguf", out, &qp, E));
    API_CHECK_ERR(TS_ERR_IO, "/nonexistent-dir/",
                  ts_quantize_file(m->path, "/nonexistent-dir/out.gguf", &qp, E));
    /* An input that is not F32/F16/BF16 (a quantized model) is refused. */
    ts_tiny_spec q = m->spec;
    q.wtype = TS_TYPE_Q4_0;
    api_model qm;
    api_model_open(&qm, &q, "api_quant_in");
    API_CHECK_ERR(TS_ERR_UNSUPPORTED, "quantize", ts_quantize_file(qm.path, out, &qp, E));
    api_model_close(&qm);

    /* And the success path, for contrast: the output opens and is Q8_0. */
    uint64_t by_type[TS_TYPE_COUNT];
    qp.n_by_type = by_type;
    ts_error err = {0};
    if (ts_quantize_file(m->path, out, &qp, &err) != TS_OK) {
        fail_msg("quantize: %s", err.msg);
    }
    assert_true(by_type[TS_TYPE_Q8_0] > 0);
    ts_llm *llm = NULL;
    assert_int_equal(ts_llm_open(out, NULL, &llm, &err), TS_OK);
    ts_llm_info in;
    ts_llm_get_info(llm, &in);
    assert_string_equal(in.file_type, "Q8_0");
    ts_llm_close(llm);
    unlink(out);
    assert_string_equal(ts_quantize_type_name(0), "F32");
    size_t i = 0;
    while (ts_quantize_type_name(i) != NULL) {
        i++;
    }
    assert_true(i >= 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llm_errors),      cmocka_unit_test(test_context_errors),
        cmocka_unit_test(test_request_errors),  cmocka_unit_test(test_batch_errors),
        cmocka_unit_test(test_server_errors),   cmocka_unit_test(test_gguf_errors),
        cmocka_unit_test(test_quantize_errors),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
