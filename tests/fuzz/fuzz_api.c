/*
 * fuzz_api.c — libFuzzer entry for the server's request-body parsers (src/server/api_parse.c,
 * api_anthropic.c): what every HTTP client can send to /v1/completions, /v1/chat/completions,
 * /tokenize, /detokenize, /v1/messages (+count_tokens) and /v1/responses.
 *
 * The first input byte picks the endpoint, the limits (vocabulary size, context, n) and the
 * chat template's capabilities (which rewrites apply); the rest is the body, not NUL-terminated
 * (the parser gets a length). Invariants: the parser returns TS_OK with a request whose kind is the
 * endpoint's and whose counts are within their arrays, or an error with an HTTP status of
 * 400/404/413 and a message, whose JSON rendering parses back as {"error": {"message": ...}}. A
 * body for the chat endpoint is also read as an Anthropic Messages body (count_tokens when bit 4 is
 * set): it gives a chat request with the same invariants, or an error whose Anthropic body parses
 * back as {"type": "error", "error":
 * {"type", "message"}}. Chat and completions bodies are also read as Ollama /api/chat and
 * /api/generate bodies (api_ollama.c), with the same invariants and {"error": "..."} bodies.
 * The UTF-8 checker returns an offset within the
 * body and the depth scanner never exceeds its bound by more than one. A broken invariant
 * traps.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/api.h"
#include "server/dialect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static void check_error(const ts_api_error *err) {
    CHECK(err->status == 400 || err->status == 404 || err->status == 413);
    CHECK(err->message[0] != '\0');
    char *json = ts_api_error_json(err);
    if (json == NULL) {
        return; /* out of memory is the only reason */
    }
    cJSON *root = cJSON_Parse(json);
    CHECK(root != NULL);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    CHECK(cJSON_IsObject(e));
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    cJSON_Delete(root);
    free(json);
}

static void check_request(const ts_api_request *r, ts_api_kind kind, const ts_api_limits *lim) {
    CHECK(r->kind == kind);
    CHECK(r->n_tokens >= 0 && (r->n_tokens == 0 || r->tokens != NULL));
    for (int32_t i = 0; i < r->n_tokens; i++) {
        CHECK(r->tokens[i] >= 0 && r->tokens[i] < lim->n_vocab);
    }
    CHECK(r->n_messages >= 0 && (r->n_messages == 0 || r->messages != NULL));
    for (int32_t i = 0; i < r->n_messages; i++) {
        CHECK(r->messages[i].role != NULL && r->messages[i].content != NULL);
    }
    if (kind == TS_API_CHAT) {
        /* The template's variables are built from the body's text: always one JSON object
         * holding every message, give or take the rewrites for the template's capabilities
         * (one system turn describing the tools added; system turns folded into user turns). */
        CHECK(r->chat_json != NULL);
        cJSON *vars = cJSON_ParseWithOpts(r->chat_json, NULL, true); /* all of it, once */
        CHECK(cJSON_IsObject(vars));
        int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(vars, "messages"));
        CHECK(n >= 1 && n <= r->n_messages + 1);
        if (!lim->caps.probed) {
            CHECK(r->polyfills == 0 || r->polyfills == TS_API_POLYFILL_TOOLS);
        }
        cJSON_Delete(vars);
    }
    CHECK(r->n_prompts >= 0 && r->n_prompts <= TS_API_MAX_PROMPTS);
    for (int32_t p = 0; p < r->n_prompts; p++) {
        const ts_api_prompt *pr = &r->prompts[p];
        CHECK((pr->text != NULL) != (pr->ids != NULL) || pr->n_ids == 0);
        for (int32_t i = 0; i < pr->n_ids; i++) {
            CHECK(pr->ids[i] >= 0 && pr->ids[i] < lim->n_vocab);
        }
    }
    if (kind == TS_API_COMPLETIONS || kind == TS_API_CHAT) {
        CHECK(r->params.n >= 1 && r->params.n <= lim->max_n);
        CHECK(r->params.n_stop >= 0 && r->params.n_stop <= TS_ENGINE_MAX_STOP);
        /* A constraint is kept as its own NUL-terminated text, within the size limit. */
        CHECK((r->params.grammar_kind == TS_GRAMMAR_NONE) == (r->grammar_param == NULL));
        CHECK(r->params.grammar == r->grammar_text);
        CHECK(r->grammar_text == NULL || (strlen(r->grammar_text) == r->params.grammar_len &&
                                          r->params.grammar_len <= TS_API_MAX_GRAMMAR));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const ts_api_kind kind = (ts_api_kind)(data[0] & 3);
    const ts_api_limits lim = {
        .n_vocab = (data[0] & 4) ? 32 : 49152,
        .n_ctx = (data[0] & 8) ? 16 : 8192,
        .max_n = (data[0] & 16) ? 1 : 8,
        .model_name = "tessera-fuzz",
        /* The upper bits: a template probed as lacking tool calls, tool results, system turns
         * or content null, so the rewrites of api_chat.c see arbitrary conversations. */
        .caps = {.probed = (data[0] & 32) != 0,
                 .system_role = (data[0] & 64) != 0,
                 .tool_calls = (data[0] & 64) != 0,
                 .tool_responses = (data[0] & 128) != 0,
                 .needs_content = (data[0] & 128) != 0},
    };
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;

    CHECK(ts_api_utf8_check(body, len) <= len);
    CHECK(ts_api_json_depth(body, len, 64) <= 65);

    ts_api_request req;
    ts_api_error err;
    memset(&req, 0, sizeof req);
    memset(&err, 0, sizeof err);
    if (ts_api_parse(kind, body, len, &lim, &req, &err) == TS_OK) {
        check_request(&req, kind, &lim);
        ts_api_request_free(&req);
    } else {
        check_error(&err);
    }
    if (kind == TS_API_CHAT) {
        memset(&err, 0, sizeof err);
        if (ts_api_parse_anthropic(body, len, &lim, (data[0] & 16) != 0, &req, &err) == TS_OK) {
            check_request(&req, TS_API_CHAT, &lim);
            ts_api_request_free(&req);
        } else {
            check_error(&err);
            char *json = ts_api_anthropic_error_json(&err);
            cJSON *root = json != NULL ? cJSON_Parse(json) : NULL;
            CHECK(json == NULL || root != NULL);
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
            CHECK(json == NULL ||
                  (cJSON_IsString(type) && strcmp(type->valuestring, "error") == 0 &&
                   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "type")) &&
                   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message"))));
            cJSON_Delete(root);
            free(json);
        }
        /* The same bytes as an OpenAI Responses body (/v1/responses). */
        memset(&err, 0, sizeof err);
        if (ts_api_parse_responses(body, len, &lim, &req, &err) == TS_OK) {
            check_request(&req, TS_API_CHAT, &lim);
            CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(req.root, "x_tessera_responses"), "input")));
            ts_api_request_free(&req);
        } else {
            check_error(&err);
        }
    }
    if (kind == TS_API_CHAT || kind == TS_API_COMPLETIONS) {
        /* The same body as an Ollama /api/chat (chat) or /api/generate (completions: raw when
         * bit 4 is set) body; its errors render as {"error": "..."}. */
        ts_ollama_kind which = kind == TS_API_CHAT   ? TS_OLLAMA_CHAT
                               : (data[0] & 16) != 0 ? TS_OLLAMA_GENERATE_RAW
                                                     : TS_OLLAMA_GENERATE;
        memset(&err, 0, sizeof err);
        if (ts_api_parse_ollama(which, body, len, &lim, &req, &err) == TS_OK) {
            check_request(&req, which == TS_OLLAMA_GENERATE_RAW ? TS_API_COMPLETIONS : TS_API_CHAT,
                          &lim);
            ts_api_request_free(&req);
        } else {
            check_error(&err);
            char *json = ts_api_ollama_error_json(&err);
            cJSON *root = json != NULL ? cJSON_Parse(json) : NULL;
            CHECK(json == NULL || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "error")));
            cJSON_Delete(root);
            free(json);
        }
    }
    return 0;
}
