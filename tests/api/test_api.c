/*
 * test_api.c — include/tessera.h as an application uses it: open a model, create a session,
 * tokenize, generate with a per-token callback, free; and the errors a caller can cause.
 * Runs on a tiny random-weight model (always) and on the default model (when cached).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tiny_model.h"
#include "tessera.h"

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

static void test_tiny_model(void **state) {
    (void)state;
    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, "api"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);

    ts_llm *llm = NULL;
    assert_int_equal(ts_llm_open(path, &llm, &err), TS_OK);
    assert_string_equal(ts_llm_arch(llm), "llama");
    assert_int_equal(ts_llm_n_vocab(llm), spec.n_vocab);

    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_llm_tokenize(llm, "hello world", 11, 1, 0, &ids, &n, &err), TS_OK);
    assert_true(n > 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ts_llm_detokenize(llm, ids, n, 0, &text, &len, &err), TS_OK);
    assert_non_null(strstr(text, "hello world"));
    ts_free(text);
    ts_free(ids);

    ts_session *s = NULL;
    ts_session_params sp = ts_session_params_default();
    sp.n_threads = 2;
    assert_int_equal(ts_session_create(llm, &sp, &s, &err), TS_OK);

    /* Greedy twice: same text, the callback saw every token. */
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = 12;
    collected a = {0}, b = {0};
    ts_generate_result r;
    assert_int_equal(ts_session_generate(s, "hello", &gp, on_token, &a, &r, &err), TS_OK);
    assert_int_equal(r.completion_tokens, a.calls);
    assert_true(r.completion_tokens >= 1 && r.completion_tokens <= 12);
    assert_true(r.prompt_tokens >= 1);
    assert_int_equal(ts_session_generate(s, "hello", &gp, on_token, &b, NULL, &err), TS_OK);
    assert_string_equal(a.text, b.text);

    /* The callback can stop generation. */
    collected c = {.stop_after = 3};
    gp.max_tokens = 50;
    gp.n_stop = 0;
    assert_int_equal(ts_session_generate(s, "hello", &gp, on_token, &c, &r, &err), TS_OK);
    assert_int_equal(c.calls, 3);
    assert_string_equal(r.finish_reason, "abort");

    /* A prompt beyond the context is an error with the counts. */
    gp.max_tokens = 1 << 20;
    assert_int_equal(ts_session_generate(s, "hello", &gp, NULL, NULL, NULL, &err),
                     TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "exceeds the context"));

    /* Bad sampling parameters are rejected with the field's name. */
    gp = ts_generate_params_default();
    gp.temperature = -1.0f;
    assert_int_not_equal(ts_session_generate(s, "hello", &gp, NULL, NULL, NULL, &err), TS_OK);
    assert_non_null(strstr(err.msg, "temperature"));

    ts_session_destroy(s);
    ts_llm_close(llm);
    unlink(path);
}

static void test_errors(void **state) {
    (void)state;
    ts_error err = {0};
    ts_llm *llm = (ts_llm *)0x1;
    assert_int_equal(ts_llm_open("/nonexistent/model.gguf", &llm, &err), TS_ERR_IO);
    assert_null(llm);
    assert_non_null(strstr(err.msg, "/nonexistent/model.gguf"));
    assert_int_equal(ts_llm_open(NULL, &llm, &err), TS_ERR_INVALID_ARG);

    /* An architecture we do not support names itself and the supported list. */
    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, "api_arch"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.arch_name = "mamba";
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);
    assert_int_equal(ts_llm_open(path, &llm, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "mamba"));
    assert_non_null(strstr(err.msg, "gemma3"));
    unlink(path);
    ts_llm_close(NULL);
    ts_session_destroy(NULL);
    assert_string_equal(ts_status_str(TS_ERR_FORMAT), "TS_ERR_FORMAT: malformed input");
}

static void test_default_model(void **state) {
    (void)state;
    char path[512];
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (access(path, R_OK) != 0) {
        printf("  skipped: %s is absent (python3 scripts/fetch_model.py)\n", path);
        skip();
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    assert_int_equal(ts_llm_open(path, &llm, &err), TS_OK);
    ts_message msgs[] = {{"user", "What is the capital of France?"}};
    char *prompt = NULL;
    assert_int_equal(ts_llm_chat_prompt(llm, NULL, msgs, 1, &prompt, &err), TS_OK);
    assert_non_null(strstr(prompt, "<|im_start|>user\nWhat is the capital of France?"));
    ts_session *s = NULL;
    assert_int_equal(ts_session_create(llm, NULL, &s, &err), TS_OK);
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = 8;
    collected c = {0};
    ts_generate_result r;
    assert_int_equal(ts_session_generate(s, "The capital of France is", &gp, on_token, &c, &r,
                                         &err),
                     TS_OK);
    printf("  reply: %s (%s)\n", c.text, r.finish_reason);
    assert_non_null(strstr(c.text, "Paris"));
    ts_free(prompt);
    ts_session_destroy(s);
    ts_llm_close(llm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_model),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
