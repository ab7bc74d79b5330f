/*
 * dialect.c — the table of dialects (dialect.h): how each API's bodies become the neutral
 * request and how answers, streams and errors are written back in its shapes.
 */
#include "server/stream.h"

#include <string.h>

static ts_status parse_openai(ts_api_kind kind, const char *body, size_t len,
                              const ts_api_limits *lim, ts_api_request *r, ts_api_error *e) {
    return ts_api_parse(kind, body, len, lim, r, e);
}

static ts_status parse_anthropic(ts_api_kind kind, const char *body, size_t len,
                                 const ts_api_limits *lim, ts_api_request *r, ts_api_error *e) {
    (void)kind;
    return ts_api_parse_anthropic(body, len, lim, false, r, e);
}

const ts_dialect ts_dialect_openai_completions = {
    .name = "openai",
    .parse = parse_openai,
    .answer_json = ts_openai_answer_json,
    .stream_open = ts_openai_stream_open,
    .stream_event = ts_openai_stream_event,
    .stream_end = ts_openai_stream_end,
    .stream_error = ts_openai_stream_error,
    .keepalive = ": keep-alive\n\n",
    .error_json = ts_api_error_json,
    .clamp_max_tokens = false,
    .id_prefix = "cmpl",
};

const ts_dialect ts_dialect_openai_chat = {
    .name = "openai",
    .parse = parse_openai,
    .answer_json = ts_openai_answer_json,
    .stream_open = ts_openai_stream_open,
    .stream_event = ts_openai_stream_event,
    .stream_end = ts_openai_stream_end,
    .stream_error = ts_openai_stream_error,
    .keepalive = ": keep-alive\n\n",
    .error_json = ts_api_error_json,
    .clamp_max_tokens = false,
    .id_prefix = "chatcmpl",
};

const ts_dialect ts_dialect_anthropic = {
    .name = "anthropic",
    .parse = parse_anthropic,
    .answer_json = ts_anthropic_answer_json,
    .stream_open = ts_anthropic_stream_open,
    .stream_event = ts_anthropic_stream_event,
    .stream_end = ts_anthropic_stream_end,
    .stream_error = ts_anthropic_stream_error,
    .keepalive = "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    .error_json = ts_api_anthropic_error_json,
    .clamp_max_tokens = true,
    .id_prefix = "msg",
};

static ts_status parse_responses(ts_api_kind kind, const char *body, size_t len,
                                 const ts_api_limits *lim, ts_api_request *r, ts_api_error *e) {
    (void)kind;
    return ts_api_parse_responses(body, len, lim, r, e);
}

const ts_dialect ts_dialect_responses = {
    .name = "openai-responses",
    .parse = parse_responses,
    .answer_json = ts_responses_answer_json,
    .stream_open = ts_responses_stream_open,
    .stream_event = ts_responses_stream_event,
    .stream_end = ts_responses_stream_end,
    .stream_error = ts_responses_stream_error,
    .keepalive = ": keep-alive\n\n",
    .error_json = ts_api_error_json,
    .clamp_max_tokens = false,
    .id_prefix = "resp",
    .stream_keeps = "x_tessera_responses",
};

const ts_dialect *ts_dialect_of_path(const char *path) {
    static const char prefix[] = "/v1/messages";
    if (strncmp(path, prefix, sizeof prefix - 1) == 0 &&
        (path[sizeof prefix - 1] == '\0' || path[sizeof prefix - 1] == '/' ||
         path[sizeof prefix - 1] == '?')) {
        return &ts_dialect_anthropic;
    }
    if (strncmp(path, "/api/", 5) == 0) {
        return &ts_dialect_ollama_chat;
    }
    return &ts_dialect_openai_chat;
}
