/*
 * test_api.c — include/tessera.h as an application uses it: open a model, tokenize, make a
 * context, generate with a per-token callback, drive requests through submit/step, read what
 * the model and the context are (ts_llm_info, ts_context_info), and the errors a caller can
 * cause when opening models and making contexts. Runs on a tiny random-weight llama (always)
 * and on the default model (when cached).
 *
 * The other API tests: test_api_errors.c (the error rule on every entry point),
 * test_api_batch.c (the batch API), test_api_hooks.c (debugging hooks, tensor parallelism).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_util.h"

#include "common/skip.h"

typedef struct collected {
    char text[4096];
    size_t len;
    int calls;
    int stop_after; /* 0: never stop */
} collected;

static int on_token(void *user, int32_t token, const char *text, size_t len) {
    collected *c = user;
    (void)token;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    c->calls++;
    return c->stop_after > 0 && c->calls >= c->stop_after;
}

/* ---- tokens ---------------------------------------------------------------------------------- */

static void test_tokens(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_llm_tokenize(m->llm, "hello world", 11, 1, 0, &ids, &n, &err), TS_OK);
    assert_true(n > 1);
    assert_int_equal(ids[0], TS_TINY_BOS); /* the tiny vocabulary asks for BOS */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ts_llm_detokenize(m->llm, ids, n, 0, &text, &len, &err), TS_OK);
    assert_string_equal(text, "hello world");
    assert_int_equal(len, strlen(text));
    ts_free(text);

    /* The pieces of the tokens after BOS spell the text (SentencePiece's leading space). */
    char joined[256] = "";
    for (size_t i = 1; i < n; i++) {
        const char *piece = NULL;
        size_t plen = 0;
        assert_int_equal(ts_llm_token_to_piece(m->llm, ids[i], 0, &piece, &plen, &err), TS_OK);
        strncat(joined, piece, plen);
    }
    assert_string_equal(joined, " hello world");
    ts_free(ids);

    /* BOS renders as its text only when asked. */
    const char *piece = NULL;
    size_t plen = 99;
    assert_int_equal(ts_llm_token_to_piece(m->llm, TS_TINY_BOS, 0, &piece, &plen, &err), TS_OK);
    assert_int_equal(plen, 0);
    assert_int_equal(ts_llm_token_to_piece(m->llm, TS_TINY_BOS, 1, &piece, &plen, &err), TS_OK);
    assert_int_equal(plen, 3);
    assert_memory_equal(piece, "<s>", 3);

    /* Special-token text becomes the token only with parse_special. */
    assert_int_equal(ts_llm_tokenize(m->llm, "<s>", 3, 0, 1, &ids, &n, &err), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], TS_TINY_BOS);
    ts_free(ids);
    assert_int_equal(ts_llm_tokenize(m->llm, "<s>", 3, 0, 0, &ids, &n, &err), TS_OK);
    assert_true(n > 1);
    ts_free(ids);

    /* Empty text: just BOS; without specials nothing (and *ids is still freeable). */
    assert_int_equal(ts_llm_tokenize(m->llm, "", 0, 1, 0, &ids, &n, &err), TS_OK);
    assert_int_equal(n, 1);
    ts_free(ids);
    assert_int_equal(ts_llm_tokenize(m->llm, NULL, 0, 0, 0, &ids, &n, &err), TS_OK);
    assert_int_equal(n, 0);
    ts_free(ids);
}

/* ---- one prompt at a time -------------------------------------------------------------------- */

static void test_generate(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m->llm, &p);
    assert_ptr_equal(ts_context_llm(ctx), m->llm);

    /* Greedy twice: same text, the callback saw every token. */
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = 12;
    collected a = {0}, b = {0};
    ts_generate_result r;
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &a, &r, &err), TS_OK);
    assert_int_equal(r.completion_tokens, a.calls);
    assert_true(r.completion_tokens >= 1 && r.completion_tokens <= 12);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_llm_tokenize(m->llm, "hello", 5, 1, 0, &ids, &n, &err), TS_OK);
    assert_int_equal(r.prompt_tokens, (int32_t)n);
    ts_free(ids);
    assert_true(strcmp(r.finish_reason, "length") == 0 || strcmp(r.finish_reason, "stop") == 0);
    assert_true(r.prompt_ms >= 0.0 && r.generate_ms >= 0.0);
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &b, NULL, &err), TS_OK);
    assert_string_equal(a.text, b.text);
    assert_int_equal(a.calls, b.calls);

    /* The callback can stop generation. */
    collected c = {.stop_after = 3};
    gp.max_tokens = 50;
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &c, &r, &err), TS_OK);
    assert_int_equal(c.calls, 3);
    assert_string_equal(r.finish_reason, "abort");

    /* A stop string ends the text before it: the first ASCII letter of the greedy text after
     * its first character. */
    const char *stop_at = NULL;
    for (size_t i = 1; i < a.len && stop_at == NULL; i++) {
        char ch = a.text[i];
        stop_at = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ? a.text + i : NULL;
    }
    if (stop_at != NULL) {
        char stop[2] = {*stop_at, '\0'};
        const char *stops[] = {stop};
        gp.max_tokens = 12;
        gp.stop = stops;
        gp.n_stop = 1;
        collected s = {0};
        assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &s, &r, &err), TS_OK);
        assert_string_equal(r.finish_reason, "stop");
        assert_int_equal(s.len, (size_t)(strchr(a.text, stop[0]) - a.text));
        assert_memory_equal(s.text, a.text, s.len);
        gp.n_stop = 0;
        gp.stop = NULL;
    } else {
        printf("  (greedy text '%s' has no letter: stop strings not checked)\n", a.text);
    }

    /* A prompt beyond the context is an error with the counts. */
    gp.max_tokens = 1 << 20;
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, NULL, NULL, NULL, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "exceeds the context"));

    /* Bad sampling parameters are rejected with the field's name. */
    gp = ts_generate_params_default();
    gp.temperature = -1.0f;
    assert_int_not_equal(ts_context_generate(ctx, "hello", &gp, NULL, NULL, NULL, &err), TS_OK);
    assert_non_null(strstr(err.msg, "temperature"));

    /* Seeded sampling repeats itself. */
    gp = ts_generate_params_default();
    gp.temperature = 1.0f;
    gp.seed = 42;
    gp.has_seed = 1;
    gp.max_tokens = 10;
    collected s1 = {0}, s2 = {0};
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &s1, NULL, &err), TS_OK);
    assert_int_equal(ts_context_generate(ctx, "hello", &gp, on_token, &s2, NULL, &err), TS_OK);
    assert_string_equal(s1.text, s2.text);
    ts_context_destroy(ctx);
}

/* ---- requests -------------------------------------------------------------------------------- */

typedef struct req_log {
    int tokens[4];   /* per index */
    int finished[4]; /* finish reason per index (0: none yet) */
    int done;        /* request_done events */
    uint64_t id;
    int32_t prompt_tokens;
} req_log;

static void on_event(const ts_engine_event *ev, void *user) {
    req_log *l = user;
    assert_true(ev->index >= 0 && ev->index < 4);
    l->id = ev->request_id;
    l->prompt_tokens = ev->prompt_tokens;
    if (ev->token >= 0) {
        l->tokens[ev->index]++;
        assert_int_equal(ev->completion_tokens, l->tokens[ev->index]);
    }
    if (ev->finish != TS_FINISH_NONE) {
        assert_int_equal(l->finished[ev->index], 0); /* one final event per sequence */
        l->finished[ev->index] = (int)ev->finish;
    }
    l->done += ev->request_done;
}

static void *wait_long(void *ctx) {
    ts_context_wait(ctx, 10000);
    return NULL;
}

static void test_requests(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m->llm, &p);
    assert_false(ts_context_has_work(ctx));

    /* Two samples of five tokens each, past end-of-generation tokens. */
    const int32_t prompt[] = {TS_TINY_BOS, 300, 301, 302};
    ts_request_params rp = ts_request_params_default();
    rp.n = 2;
    rp.max_tokens = 5;
    rp.ignore_eos = true;
    rp.seed = 7;
    rp.has_seed = true;
    req_log log = {0};
    uint64_t id = 0;
    assert_int_equal(ts_context_submit(ctx, prompt, 4, &rp, on_event, &log, &id, &err), TS_OK);
    assert_true(id != 0);
    assert_true(ts_context_has_work(ctx));
    int steps = 0;
    while (ts_context_has_work(ctx) && steps < 100) {
        bool busy = false;
        assert_int_equal(ts_context_step(ctx, &busy, &err), TS_OK);
        steps++;
    }
    assert_false(ts_context_has_work(ctx));
    assert_int_equal(log.done, 1);
    assert_int_equal(log.id, id);
    assert_int_equal(log.prompt_tokens, 4);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(log.tokens[i], 5);
        assert_int_equal(log.finished[i], TS_FINISH_LENGTH);
    }
    ts_engine_stats st;
    ts_context_get_stats(ctx, &st);
    assert_int_equal(st.generated_tokens, 10);
    assert_int_equal(st.n_requests, 0);
    assert_true(st.n_steps >= 5);
    assert_true(st.kv_blocks_total > 0);

    /* A step with nothing to do says so. */
    bool busy = true;
    assert_int_equal(ts_context_step(ctx, &busy, &err), TS_OK);
    assert_false(busy);
    ts_context_wait(ctx, 0);

    /* ts_context_wake ends another thread's wait long before its timeout. */
    pthread_t waiter;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&waiter, NULL, wait_long, ctx), 0);
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
    ts_context_wake(ctx);
    pthread_join(waiter, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 5);

    /* An aborted request ends with one TS_FINISH_ABORT event. */
    req_log ab = {0};
    rp.n = 1;
    rp.max_tokens = 50;
    assert_int_equal(ts_context_submit(ctx, prompt, 4, &rp, on_event, &ab, &id, &err), TS_OK);
    assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
    ts_context_abort(ctx, id);
    ts_context_abort(ctx, id + 1000); /* unknown ids are ignored */
    for (steps = 0; ts_context_has_work(ctx) && steps < 10; steps++) {
        assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
    }
    assert_false(ts_context_has_work(ctx));
    assert_int_equal(ab.done, 1);
    assert_int_equal(ab.finished[0], TS_FINISH_ABORT);
    assert_true(ab.tokens[0] < 50);
    assert_string_equal(ts_finish_reason_name(TS_FINISH_ABORT), "abort");
    assert_string_equal(ts_finish_reason_name(TS_FINISH_LENGTH), "length");

    /* A queue limit: the second waiting request is refused with TS_ERR_LIMIT. */
    ts_context_destroy(ctx);
    p.max_queue = 1;
    p.max_seqs = 1;
    ctx = api_context(m->llm, &p);
    req_log q1 = {0}, q2 = {0};
    assert_int_equal(ts_context_submit(ctx, prompt, 4, &rp, on_event, &q1, NULL, &err), TS_OK);
    ts_status s2 = ts_context_submit(ctx, prompt, 4, &rp, on_event, &q2, NULL, &err);
    if (s2 == TS_OK) { /* one runs, one waits: the third does not fit */
        s2 = ts_context_submit(ctx, prompt, 4, &rp, on_event, &q2, NULL, &err);
    }
    assert_int_equal(s2, TS_ERR_LIMIT);
    assert_true(err.msg[0] != '\0');
    ts_context_destroy(ctx); /* with requests still queued: frees them */
}

/* ---- chat templates -------------------------------------------------------------------------- */

static void test_chat(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_message msgs[] = {{"system", "Be brief."}, {"user", "hi"}};
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ts_llm_chat_prompt(m->llm, "chatml", msgs, 2, 1, &text, &len, &err), TS_OK);
    assert_int_equal(len, strlen(text));
    assert_non_null(strstr(text, "<|im_start|>system\nBe brief.<|im_end|>"));
    assert_non_null(strstr(text, "<|im_start|>user\nhi<|im_end|>"));
    size_t n = strlen(text);
    assert_true(n > 22 && strcmp(text + n - 22, "<|im_start|>assistant\n") == 0);

    /* The context renders with the template it was made with. */
    ts_context_params p = api_params();
    p.chat_template = "chatml";
    ts_context *ctx = api_context(m->llm, &p);
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    assert_non_null(info.chat_template);
    assert_string_equal(info.chat_template, "chatml");
    char *text2 = NULL;
    assert_int_equal(ts_context_chat_prompt(ctx, msgs, 2, 1, &text2, NULL, &err), TS_OK);
    assert_string_equal(text, text2);
    ts_free(text2);
    ts_free(text);
    ts_context_destroy(ctx);

    /* The tiny model has no template of its own. */
    p.chat_template = NULL;
    ctx = api_context(m->llm, &p);
    ts_context_get_info(ctx, &info);
    assert_null(info.chat_template);
    assert_int_equal(ts_context_chat_prompt(ctx, msgs, 2, 1, &text2, NULL, &err), TS_ERR_NOT_FOUND);
    ts_context_destroy(ctx);
    p.chat_template = "no-such-template";
    assert_int_equal(ts_context_create(m->llm, &p, &ctx, &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no-such-template"));
    assert_null(ctx);
}

/* ---- what a model and a context are ---------------------------------------------------------- */

/* Parameters of the tiny llama (separate Q/K/V, SwiGLU, untied output). */
static uint64_t llama_params(const ts_tiny_spec *s) {
    int64_t hd = s->head_dim > 0 ? s->head_dim : s->n_embd / s->n_head;
    int64_t E = s->n_embd, F = s->n_ff, V = s->n_vocab;
    int64_t layer = 2 * E                                  /* attn_norm, ffn_norm */
                    + E * s->n_head * hd * 2               /* attn_q, attn_output */
                    + E * s->n_head_kv * hd * 2            /* attn_k, attn_v */
                    + 3 * E * F;                           /* ffn_gate, ffn_up, ffn_down */
    return (uint64_t)(2 * V * E + E + s->n_layer * layer); /* token_embd, output, output_norm */
}

static void test_llm_info(void **state) {
    api_model *m = *state;
    const ts_tiny_spec *s = &m->spec;
    ts_llm_info in;
    ts_llm_get_info(m->llm, &in);
    assert_string_equal(in.arch, "llama");
    assert_string_equal(ts_llm_arch(m->llm), "llama");
    assert_string_equal(in.name, "tiny-llama");
    assert_string_equal(in.file_type, "F32");
    assert_int_equal(in.n_vocab, s->n_vocab);
    assert_int_equal(ts_llm_n_vocab(m->llm), s->n_vocab);
    assert_int_equal(in.n_ctx_train, s->n_ctx_train);
    assert_int_equal(ts_llm_n_ctx_train(m->llm), s->n_ctx_train);
    assert_int_equal(in.n_embd, s->n_embd);
    assert_int_equal(in.n_layer, s->n_layer);
    assert_int_equal(in.n_head, s->n_head);
    assert_int_equal(in.n_head_kv, s->n_head_kv);
    assert_int_equal(in.head_dim, s->n_embd / s->n_head);
    assert_int_equal(in.n_ff, s->n_ff);
    assert_int_equal(in.bos, TS_TINY_BOS);
    assert_int_equal(in.eos, TS_TINY_EOS);
    assert_true(in.add_bos);
    assert_false(in.add_eos);
    assert_int_equal(in.n_params, llama_params(s));
    assert_int_equal(in.weight_bytes, 4 * in.n_params); /* F32 throughout */
    struct stat sb;
    assert_int_equal(stat(m->path, &sb), 0);
    assert_int_equal(in.file_bytes, (uint64_t)sb.st_size);
    assert_true(in.file_bytes > in.weight_bytes);

    /* The same model in Q4_0: same parameters, fewer bytes, and the type named. */
    ts_tiny_spec q = *s;
    q.wtype = TS_TYPE_Q4_0;
    api_model qm;
    api_model_open(&qm, &q, "api_q4");
    ts_llm_info qi;
    ts_llm_get_info(qm.llm, &qi);
    assert_string_equal(qi.file_type, "Q4_0");
    assert_int_equal(qi.n_params, in.n_params);
    assert_true(qi.weight_bytes > 0 && qi.weight_bytes < in.weight_bytes / 4);
    api_model_close(&qm);
}

/* ts_context_create must fail with `want` and a message containing needle, and leave *out
 * NULL. */
static void expect_create_error(ts_llm *llm, const ts_context_params *p, ts_status want,
                                const char *needle) {
    ts_error err = {0};
    ts_context *ctx = (ts_context *)0x1;
    ts_status st = ts_context_create(llm, p, &ctx, &err);
    if (st != want || ctx != NULL || strstr(err.msg, needle) == NULL) {
        fail_msg("create: want %s with '%s', got %s: '%s'", ts_status_str(want), needle,
                 ts_status_str(st), err.msg);
    }
}

static void test_context_info(void **state) {
    api_model *m = *state;
    ts_llm_info li;
    ts_llm_get_info(m->llm, &li);
    /* f16 K and V rows of head_dim per KV head and layer. */
    uint64_t f16_per_token = (uint64_t)(li.n_layer * 2 * li.n_head_kv * li.head_dim * 2);

    /* The defaults, from zeroed parameters and from ts_context_params_default alike. */
    ts_context_params d = ts_context_params_default();
    assert_string_equal(d.backend, "cpu");
    assert_string_equal(d.kv_type, "f16");
    assert_true(d.compare_tol > 0.0);
    ts_context_params z;
    memset(&z, 0, sizeof z);
    z.n_threads = d.n_threads = 2;
    for (int k = 0; k < 2; k++) {
        ts_context *ctx = api_context(m->llm, k == 0 ? &z : &d);
        ts_context_info in;
        ts_context_get_info(ctx, &in);
        assert_string_equal(in.backend, "cpu");
        assert_int_equal(in.n_threads, 2);
        assert_int_equal(in.tp, 1);
        assert_int_equal(in.n_ctx, li.n_ctx_train < 4096 ? li.n_ctx_train : 4096);
        assert_int_equal(in.kv_tokens, in.n_ctx);
        assert_int_equal(in.max_seqs, 16);
        assert_int_equal(in.max_batch_tokens, 512);
        assert_int_equal(in.max_outputs, 16);
        assert_int_equal(in.block_size, 16);
        assert_string_equal(in.kv_type, "f16");
        assert_string_equal(in.kv_type_k, "f16");
        assert_string_equal(in.kv_type_v, "f16");
        assert_int_equal(in.kv_bytes, (uint64_t)in.kv_tokens * f16_per_token);
        assert_true(in.load_ms >= 0.0);
        ts_context_destroy(ctx);
    }

    /* NULL parameters: the defaults with every physical core. */
    assert_true(ts_default_threads() >= 1);
    ts_context *ctx = api_context(m->llm, NULL);
    ts_context_info in;
    ts_context_get_info(ctx, &in);
    assert_int_equal(in.n_threads, ts_default_threads());
    ts_context_destroy(ctx);

    /* Explicit values are reported back (the KV cache in whole blocks). */
    ts_context_params p = api_params();
    p.backend = "ref";
    p.n_ctx = 64;
    p.kv_tokens = 100;
    p.kv_type = "f32";
    p.max_seqs = 4;
    p.max_batch_tokens = 32;
    p.max_outputs = 32;
    ctx = api_context(m->llm, &p);
    ts_context_get_info(ctx, &in);
    assert_string_equal(in.backend, "ref");
    assert_int_equal(in.n_ctx, 64);
    assert_int_equal(in.kv_tokens, 112);
    assert_string_equal(in.kv_type, "f32");
    assert_int_equal(in.kv_bytes, 112 * 2 * f16_per_token);
    assert_int_equal(in.max_seqs, 4);
    assert_int_equal(in.max_batch_tokens, 32);
    assert_int_equal(in.max_outputs, 32);
    ts_context_destroy(ctx);

    /* A KV memory budget of 100 tokens: the cache holds it to within a block (the pool is
     * made of whole blocks). */
    p = api_params();
    p.kv_bytes = (int64_t)(100 * f16_per_token);
    ctx = api_context(m->llm, &p);
    ts_context_get_info(ctx, &in);
    assert_true(in.kv_tokens > 100 - in.block_size && in.kv_tokens < 100 + in.block_size);
    assert_int_equal(in.kv_tokens % in.block_size, 0);
    assert_int_equal(in.kv_bytes, (uint64_t)in.kv_tokens * f16_per_token);
    ts_context_destroy(ctx);

    /* q8_0 KV rows: 34 bytes per 32 elements, which needs head_dim 32 (the tiny default has
     * 16: a clear error). */
    p = api_params();
    p.kv_type = "q8_0";
    expect_create_error(m->llm, &p, TS_ERR_UNSUPPORTED, "head_dim");
    ts_tiny_spec wide = m->spec;
    wide.head_dim = 32;
    api_model wm;
    api_model_open(&wm, &wide, "api_hd32");
    ctx = api_context(wm.llm, &p);
    ts_context_get_info(ctx, &in);
    assert_string_equal(in.kv_type, "q8_0");
    assert_int_equal(in.kv_bytes,
                     (uint64_t)(in.kv_tokens * li.n_layer * 2 * li.n_head_kv * (32 / 32 * 34)));
    ts_context_destroy(ctx);
    /* K and V apart (kv_type_k / kv_type_v win over kv_type): q8_0 K rows of 34 bytes and
     * q4_0 V rows of 18, on the CPU and the reference backend; a budget in bytes counts both. */
    for (int b = 0; b < 2; b++) {
        p = api_params();
        p.backend = b == 0 ? "cpu" : "ref";
        p.kv_type = "f32";
        p.kv_type_k = "q8_0";
        p.kv_type_v = "q4_0";
        ctx = api_context(wm.llm, &p);
        ts_context_get_info(ctx, &in);
        assert_string_equal(in.kv_type, "q8_0/q4_0");
        assert_string_equal(in.kv_type_k, "q8_0");
        assert_string_equal(in.kv_type_v, "q4_0");
        assert_int_equal(in.kv_bytes,
                         (uint64_t)(in.kv_tokens * li.n_layer * li.n_head_kv * (34 + 18)));
        ts_context_destroy(ctx);
    }
    /* Only V given: K keeps kv_type. */
    p = api_params();
    p.kv_type = "bf16";
    p.kv_type_v = "q5_0";
    p.kv_bytes = (int64_t)(200 * li.n_layer * li.n_head_kv * (64 + 22));
    ctx = api_context(wm.llm, &p);
    ts_context_get_info(ctx, &in);
    assert_string_equal(in.kv_type_k, "bf16");
    assert_string_equal(in.kv_type_v, "q5_0");
    assert_true(in.kv_tokens > 200 - in.block_size && in.kv_tokens < 200 + in.block_size);
    assert_int_equal(in.kv_bytes, (uint64_t)(in.kv_tokens * li.n_layer * li.n_head_kv * (64 + 22)));
    ts_context_destroy(ctx);
    api_model_close(&wm);
}

/* ---- errors when opening models and making contexts ------------------------------------------ */

static void test_context_params_errors(void **state) {
    api_model *m = *state;
    ts_context_params p = api_params();
    p.backend = "gpu";
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "unknown backend 'gpu'");

    p = api_params();
    p.kv_type = "q4_1";
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "kv-type 'q4_1' is not a KV cache type");
    /* The error names the option that chose the type, the type and the head size (the tiny
     * model's head_dim is 16: no block of 32 fits). */
    p = api_params();
    p.kv_type = "q4_0";
    expect_create_error(m->llm, &p, TS_ERR_UNSUPPORTED, "kv-type 'q4_0' needs a head size");
    p = api_params();
    p.kv_type_k = "q8_0";
    expect_create_error(m->llm, &p, TS_ERR_UNSUPPORTED,
                        "cache-type-k 'q8_0' needs a head size that is a multiple of its block "
                        "of 32, but the model's head_dim is 16");
    p = api_params();
    p.kv_type_v = "q5_0";
    expect_create_error(m->llm, &p, TS_ERR_UNSUPPORTED, "cache-type-v 'q5_0'");
    p = api_params();
    p.kv_type_v = "int8";
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "cache-type-v 'int8' is not a KV cache");
    /* bf16 has no blocks: any head size. */
    p = api_params();
    p.kv_type_k = "bf16";
    ts_context_destroy(api_context(m->llm, &p));

    p = api_params();
    const char *bad_impl[] = {"attention=nope"};
    p.overrides = bad_impl;
    p.n_overrides = 1;
    expect_create_error(m->llm, &p, TS_ERR_NOT_FOUND, "unknown implementation 'nope'");
    const char *bad_family[] = {"attention=paged", "nosuchfamily=x"};
    p.overrides = bad_family;
    p.n_overrides = 2;
    expect_create_error(m->llm, &p, TS_ERR_NOT_FOUND, "nosuchfamily");
    const char *good[] = {"attention=decomposed"};
    p.overrides = good;
    p.n_overrides = 1;
    ts_context_destroy(api_context(m->llm, &p));

    p = api_params();
    p.kv_bytes = 100;
    expect_create_error(m->llm, &p, TS_ERR_LIMIT, "kv memory of 100 bytes");

    p = api_params();
    p.n_ctx = 100000; /* the tiny model was trained for 256; RoPE stretches to 4x at most */
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "ctx 100000");

    p = api_params();
    p.tp = 2;
    p.tp_mpi = 1;
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "tp and tp-mpi");

    p = api_params();
    p.tp = 8; /* more shards than the 4 heads */
    ts_error err = {0};
    ts_context *ctx = NULL;
    assert_int_not_equal(ts_context_create(m->llm, &p, &ctx, &err), TS_OK);
    assert_null(ctx);
    assert_true(err.msg[0] != '\0');

    p = api_params();
    p.compare = "cpu";
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "'cpu'");
    p.compare = "ref";
    p.tp = 2;
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "tensor-parallel");

    p = api_params();
    p.n_threads = -1;
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "threads -1");
    p = api_params();
    p.max_seqs = -3;
    expect_create_error(m->llm, &p, TS_ERR_INVALID_ARG, "max-seqs -3");

    p = api_params();
    p.dump = "/nonexistent-dir/dump.txt";
    expect_create_error(m->llm, &p, TS_ERR_IO, "/nonexistent-dir/dump.txt");

    expect_create_error(NULL, &p, TS_ERR_INVALID_ARG, "llm");
}

static void test_vocab_only(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_llm_params lp = {.vocab_only = 1};
    ts_llm *v = NULL;
    assert_int_equal(ts_llm_open(m->path, &lp, &v, &err), TS_OK);
    ts_llm_info in;
    ts_llm_get_info(v, &in);
    assert_string_equal(in.arch, "");
    assert_int_equal(in.n_params, 0);
    assert_int_equal(in.weight_bytes, 0);
    assert_int_equal(in.n_layer, 0);
    assert_int_equal(in.n_vocab, m->spec.n_vocab);
    assert_true(in.file_bytes > 0);
    assert_int_equal(in.bos, TS_TINY_BOS); /* the tokenizer's facts are there without weights */
    assert_true(in.add_bos);

    /* Tokenizing works and agrees with the whole model. */
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *text = "the quick brown fox, 42!";
    assert_int_equal(ts_llm_tokenize(v, text, strlen(text), 1, 0, &a, &na, &err), TS_OK);
    assert_int_equal(ts_llm_tokenize(m->llm, text, strlen(text), 1, 0, &b, &nb, &err), TS_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    ts_free(a);
    ts_free(b);

    /* Making a context does not. */
    ts_context_params p = api_params();
    expect_create_error(v, &p, TS_ERR_STATE, "vocabulary-only");
    ts_llm_close(v);

    /* A vocabulary file of the shared test data (no tensors at all). */
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", TS_TESTDATA_DIR);
    if (access(path, R_OK) != 0) {
        TS_NOT_RUN("the shared vocabulary part: model %s is absent (python3 scripts/fetch_model.py)", path);
        return;
    }
    assert_int_equal(ts_llm_open(path, &lp, &v, &err), TS_OK);
    ts_llm_get_info(v, &in);
    assert_int_equal(in.n_vocab, 32000);
    assert_string_equal(in.arch, "");
    assert_int_equal(ts_llm_tokenize(v, "Hello world", 11, 1, 0, &a, &na, &err), TS_OK);
    assert_true(na >= 2);
    char *round = NULL;
    assert_int_equal(ts_llm_detokenize(v, a, na, 0, &round, NULL, &err), TS_OK);
    assert_string_equal(round, "Hello world");
    ts_free(round);
    ts_free(a);
    expect_create_error(v, &p, TS_ERR_STATE, "vocabulary-only");
    ts_llm_close(v);
    /* Opened as a whole model it has no weights to offer. */
    ts_llm *whole = (ts_llm *)0x1;
    assert_int_not_equal(ts_llm_open(path, NULL, &whole, &err), TS_OK);
    assert_null(whole);
    assert_true(err.msg[0] != '\0');
}

static void test_open_errors(void **state) {
    (void)state;
    ts_error err = {0};
    ts_llm *llm = (ts_llm *)0x1;
    assert_int_equal(ts_llm_open("/nonexistent/model.gguf", NULL, &llm, &err), TS_ERR_IO);
    assert_null(llm);
    assert_non_null(strstr(err.msg, "/nonexistent/model.gguf"));
    assert_int_equal(ts_llm_open(NULL, NULL, &llm, &err), TS_ERR_INVALID_ARG);

    /* An architecture we do not support names itself and the supported list. */
    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, "api_arch"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.arch_name = "mamba";
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);
    assert_int_equal(ts_llm_open(path, NULL, &llm, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "mamba"));
    assert_non_null(strstr(err.msg, "gemma3"));

    /* A missing tensor is named. */
    spec = ts_tiny_spec_default("llama");
    spec.omit = "blk.1.ffn_up.weight";
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);
    assert_int_not_equal(ts_llm_open(path, NULL, &llm, &err), TS_OK);
    assert_null(llm);
    assert_non_null(strstr(err.msg, "blk.1.ffn_up.weight"));
    unlink(path);

    /* Destroying NULL is a no-op everywhere. */
    ts_llm_close(NULL);
    ts_context_destroy(NULL);
    ts_server_destroy(NULL);
    ts_gguf_close(NULL);
    ts_free(NULL);
    assert_string_equal(ts_status_str(TS_ERR_FORMAT), "TS_ERR_FORMAT: malformed input");
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TS_VERSION_MAJOR, TS_VERSION_MINOR,
             TS_VERSION_PATCH);
    assert_string_equal(ts_version(), version);
}

typedef struct log_record {
    int n;
    ts_log_level level;
    char msg[1024];
} log_record;

static void record_log(void *user, ts_log_level level, const char *msg) {
    log_record *r = user;
    r->n++;
    r->level = level;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
}

/* A tensor the architecture does not use is reported: once through the log callback while
 * opening (naming it), and in ts_llm_info; a file without one reports nothing. */
static void test_unused_tensors(void **state) {
    api_model *m = *state;
    ts_llm_info in;
    ts_llm_get_info(m->llm, &in);
    assert_int_equal(in.n_unused_tensors, 0);
    assert_string_equal(in.unused_tensors, "");

    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, "api_unused"));
    ts_tiny_spec spec = ts_tiny_spec_default("gemma3");
    spec.extra[0] = "rope_freqs.weight"; /* llama's; gemma3 has no use for it */
    spec.extra[1] = "blk.0.attn_\x1b[31m.weight";
    spec.extra_ne0 = 16;
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);
    log_record rec = {0};
    ts_llm_params lp = {.log = record_log, .log_user = &rec};
    ts_llm *llm = NULL;
    assert_int_equal(ts_llm_open(path, &lp, &llm, &err), TS_OK);
    assert_int_equal(rec.n, 1);
    assert_int_equal(rec.level, TS_LOG_WARN);
    assert_non_null(strstr(rec.msg, "2 tensors"));
    assert_non_null(strstr(rec.msg, "'gemma3'"));
    assert_non_null(strstr(rec.msg, "rope_freqs.weight, blk.0.attn_?[31m.weight"));
    ts_llm_get_info(llm, &in);
    assert_int_equal(in.n_unused_tensors, 2);
    assert_string_equal(in.unused_tensors, "rope_freqs.weight, blk.0.attn_?[31m.weight");
    ts_llm_close(llm);
    /* Without a callback the open is silent and the info the same. */
    assert_int_equal(ts_llm_open(path, NULL, &llm, &err), TS_OK);
    ts_llm_get_info(llm, &in);
    assert_int_equal(in.n_unused_tensors, 2);
    ts_llm_close(llm);
    unlink(path);
}

/* ---- GGUF files and types ------------------------------------------------------------------- */

static void test_gguf_reader(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_gguf *g = NULL;
    assert_int_equal(ts_gguf_open(m->path, &g, &err), TS_OK);
    ts_llm_info li;
    ts_llm_get_info(m->llm, &li);
    assert_int_equal(ts_gguf_version(g), 3);
    assert_true(ts_gguf_alignment(g) >= 8);
    assert_int_equal(ts_gguf_file_size(g), li.file_bytes);
    assert_true(ts_gguf_data_offset(g) > 0 && ts_gguf_data_offset(g) < li.file_bytes);
    assert_int_equal(ts_gguf_data_offset(g) % ts_gguf_alignment(g), 0);

    /* Iterating the metadata finds the architecture as a string. */
    bool found = false;
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        if (strcmp(ts_gguf_kv_key(g, i), "general.architecture") == 0) {
            assert_int_equal(ts_gguf_kv_type(g, i), TS_GGUF_STRING);
            ts_gguf_str s;
            assert_int_equal(ts_gguf_kv_str(g, i, &s, &err), TS_OK);
            assert_int_equal(s.len, 5);
            assert_memory_equal(s.ptr, "llama", 5);
            found = true;
        }
    }
    assert_true(found);
    assert_null(ts_gguf_kv_key(g, ts_gguf_kv_count(g)));
    assert_int_equal(ts_gguf_kv_type(g, ts_gguf_kv_count(g)), TS_GGUF_TYPE_COUNT);

    /* The tensor table adds up to what ts_llm_info reports. */
    uint64_t n = ts_gguf_tensor_count(g), elems = 0, bytes = 0;
    assert_int_equal(n, 3 + 9 * (uint64_t)li.n_layer);
    for (uint64_t i = 0; i < n; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        assert_non_null(t);
        elems += t->n_elements;
        bytes += t->nbytes;
        const ts_gguf_tensor *same = NULL;
        assert_int_equal(ts_gguf_find_tensor(g, t->name, &same), TS_OK);
        assert_ptr_equal(same, t);
    }
    assert_null(ts_gguf_tensor_at(g, n));
    assert_int_equal(elems, li.n_params);
    assert_int_equal(bytes, li.weight_bytes);
    const ts_gguf_tensor *t = NULL;
    assert_int_equal(ts_gguf_find_tensor(g, "no.such.tensor", &t), TS_ERR_NOT_FOUND);
    ts_gguf_close(g);

    /* The type tables. */
    assert_string_equal(ts_type_name(TS_TYPE_Q4_K), "Q4_K");
    assert_null(ts_type_name(4)); /* an id ggml retired */
    assert_false(ts_type_valid(4));
    assert_true(ts_type_valid(TS_TYPE_BF16));
    ts_type ty;
    assert_true(ts_type_from_name("q8_0", &ty));
    assert_int_equal(ty, TS_TYPE_Q8_0);
    assert_false(ts_type_from_name("q9_9", &ty));
    assert_int_equal(ts_type_block_size(TS_TYPE_Q4_0), 32);
    assert_int_equal(ts_type_block_bytes(TS_TYPE_Q4_0), 18);
    assert_int_equal(ts_type_block_size(TS_TYPE_F16), 1);
    size_t row = 0;
    assert_true(ts_type_row_bytes(TS_TYPE_Q4_0, 64, &row));
    assert_int_equal(row, 36);
    assert_false(ts_type_row_bytes(TS_TYPE_Q4_0, 33, &row));
    assert_string_equal(ts_gguf_type_name(TS_GGUF_UINT32), "uint32");
    assert_string_equal(ts_gguf_type_name(99), "invalid");
    ts_sampler_params sp = ts_sampler_params_default();
    assert_true(sp.temperature == 1.0f && sp.top_p == 1.0f && sp.top_k == 0);
}

/* ---- the server ------------------------------------------------------------------------------ */

/* Sends an HTTP/1.0 request to 127.0.0.1:port and returns the whole reply (malloc'd). */
static char *http_get(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    ssize_t got;
    while ((got = read(fd, buf + len, cap - 1 - len)) > 0) {
        len += (size_t)got;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

static void test_server(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = api_params();
    ts_context *ctx = api_context(m->llm, &p);
    ts_server_config cfg = ts_server_config_default();
    cfg.port = 0;
    cfg.model_name = "tiny";
    ts_server *s = NULL;
    assert_int_equal(ts_server_create(&cfg, ctx, &s, &err), TS_OK);
    assert_int_equal(ts_server_port(s), 0);
    if (ts_server_start(s, &err) != TS_OK) {
        fail_msg("start: %s", err.msg);
    }
    int port = ts_server_port(s);
    assert_true(port > 0);
    char *reply = http_get(port, "/v1/models");
    assert_non_null(strstr(reply, " 200 "));
    assert_non_null(strstr(reply, "\"tiny\""));
    free(reply);
    ts_server_shutdown(s, 1000);
    ts_server_destroy(s);
    ts_context_destroy(ctx);
}

/* ---- the default model ----------------------------------------------------------------------- */

static void test_default_model(void **state) {
    (void)state;
    char path[512];
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (access(path, R_OK) != 0) {
        TS_SKIP_NO_MODEL(path);
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    assert_int_equal(ts_llm_open(path, NULL, &llm, &err), TS_OK);
    ts_llm_info li;
    ts_llm_get_info(llm, &li);
    assert_string_equal(li.arch, "llama");
    assert_string_equal(li.file_type, "Q4_1");
    ts_message msgs[] = {{"user", "What is the capital of France?"}};
    char *prompt = NULL;
    assert_int_equal(ts_llm_chat_prompt(llm, NULL, msgs, 1, 1, &prompt, NULL, &err), TS_OK);
    assert_non_null(strstr(prompt, "<|im_start|>user\nWhat is the capital of France?"));
    ts_context *ctx = NULL;
    assert_int_equal(ts_context_create(llm, NULL, &ctx, &err), TS_OK);
    ts_context_info ci;
    ts_context_get_info(ctx, &ci);
    assert_null(ci.chat_template); /* the file's own Jinja template, not a built-in family */
    assert_non_null(ci.chat_template_source);
    assert_string_equal(ci.chat_template_source, ts_llm_chat_template(llm));
    char *prompt2 = NULL;
    assert_int_equal(ts_context_chat_prompt(ctx, msgs, 1, 1, &prompt2, NULL, &err), TS_OK);
    assert_string_equal(prompt, prompt2);
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = 8;
    collected c = {0};
    ts_generate_result r;
    assert_int_equal(
        ts_context_generate(ctx, "The capital of France is", &gp, on_token, &c, &r, &err), TS_OK);
    printf("  reply: %s (%s)\n", c.text, r.finish_reason);
    assert_non_null(strstr(c.text, "Paris"));
    ts_free(prompt);
    ts_free(prompt2);
    ts_context_destroy(ctx);
    ts_llm_close(llm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_llm_info),
        cmocka_unit_test(test_context_info),
        cmocka_unit_test(test_context_params_errors),
        cmocka_unit_test(test_vocab_only),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_unused_tensors),
        cmocka_unit_test(test_gguf_reader),
        cmocka_unit_test(test_server),
        cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
