/*
 * dialect_check.h — what the C tests of the dialects' body parsers (test_api_anthropic.c,
 * test_api_ollama.c, test_api_responses.c) share: the limits a tiny model gives, the check that
 * a body was refused as expected, and readers of the neutral request's rendered conversation.
 * Include after cmocka.h.
 */
#ifndef TS_TESTS_SERVER_DIALECT_CHECK_H
#define TS_TESTS_SERVER_DIALECT_CHECK_H

#include <string.h>

#include "server/dialect.h"

static const ts_api_limits k_lim = {.n_vocab = 1000,
                                    .n_ctx = 512,
                                    .max_n = 4,
                                    .model_name = "tiny",
                                    .n_embd = 64,
                                    .tools_in_template = true};

/* A parse of body that should have failed with status, the message holding needle, and the
 * param equal to param when param is not NULL; fails the test otherwise. */
static inline void dialect_expect_refused(ts_status st, ts_api_request *r, const ts_api_error *e,
                                          const char *body, int status, const char *param,
                                          const char *needle) {
    if (st == TS_OK || e->status != status || strstr(e->message, needle) == NULL ||
        (param != NULL && strcmp(e->param, param) != 0)) {
        print_error("body %s\n  got status %d param '%s' message '%s'\n  want %d %s ~'%s'\n", body,
                    st == TS_OK ? 200 : e->status, e->param, e->message, status,
                    param != NULL ? param : "", needle);
        if (st == TS_OK) {
            ts_api_request_free(r);
        }
        fail();
    }
    assert_null(r->root);
}

/* The rendered conversation (chat_json) as parsed JSON; the caller deletes it. */
static inline cJSON *vars_of(const ts_api_request *r) {
    cJSON *v = cJSON_Parse(r->chat_json);
    assert_non_null(v);
    return v;
}

static inline const cJSON *msg(const cJSON *vars, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(vars, "messages"), i);
}

static inline const char *str(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

#endif /* TS_TESTS_SERVER_DIALECT_CHECK_H */
