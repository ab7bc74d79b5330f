/*
 * dialect.h — the API dialects the server speaks, and the endpoints that route to them.
 *
 * One engine underneath: every dialect maps its requests onto the same neutral request
 * (ts_api_request: messages, tools, tool_choice, sampling, stop strings, the output's grammar),
 * which runs through the same templates, tool-call parsing, reasoning split, grammars and
 * sampling; a dialect only says how a body becomes that request and how the answer, its stream
 * and its errors are written back. Adding a dialect is one more row of ts_dialects (dialect.c)
 * and its endpoints in the route table (http.c); nothing else names a dialect.
 *
 *   row                  endpoints                         answer            stream frames
 *   openai_completions   POST /v1/completions              text_completion   data: <json>
 *   openai_chat          POST /v1/chat/completions         chat.completion   data: <json>
 *   anthropic            POST /v1/messages (+count_tokens) message           event: + data:
 *   ollama_chat          POST /api/chat                    chat response     NDJSON lines
 *   ollama_generate      POST /api/generate                generate response NDJSON lines
 *   responses            POST /v1/responses, GET/DELETE    response          event: + data:
 *                        /v1/responses/{id}
 *
 * Thread safety: the tables are constant; their functions share no state.
 */
#ifndef TS_SERVER_DIALECT_H
#define TS_SERVER_DIALECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "server/api.h"
#include "server/chat_out.h"
#include "tessera.h"

typedef struct ts_server ts_server;
typedef struct ts_stream ts_stream;
typedef struct ts_job_event ts_job_event;

/* One choice of a finished answer, in no dialect's shape. */
typedef struct ts_answer_choice {
    const char *text; /* the generated text (NUL-terminated, "" when none) */
    size_t len;
    ts_finish_reason finish;
    int32_t stop_index; /* the stop string that ended it (index into the request's), or -1 */
    int32_t completion_tokens;
    cJSON *logprobs;     /* chat: an array; completions: an object; NULL when not asked for.
                            A dialect that uses it takes it (sets it NULL) */
    ts_chat_out *parsed; /* the chat answer parsed (content, reasoning, tool calls), finished;
                            NULL when the request's answers are not parsed */
} ts_answer_choice;

typedef struct ts_answer {
    const ts_api_request *r;
    int32_t n_choices;
    ts_answer_choice *choices; /* [n_choices], index = prompt * n + sequence */
    uint64_t prompt_tokens, cached_tokens, completion_tokens;
    double t_arrival, t_first; /* ts_server_now() of the request's arrival and of its first
                                  token (0: none) */
} ts_answer;

typedef struct ts_dialect {
    const char *name; /* "openai", "anthropic" (logs, docs) */
    /* The body as the neutral request (kind: the endpoint's). Errors: status, a type in the
     * dialect's vocabulary of error_json, the field and a message. */
    ts_status (*parse)(ts_api_kind kind, const char *body, size_t len, const ts_api_limits *lim,
                       ts_api_request *r, ts_api_error *e);
    /* The non-streamed answer's JSON; NULL when out of memory. */
    cJSON *(*answer_json)(ts_server *s, ts_answer *a);
    /* Streams: the frames written before any token (stream_open), for each event that is not a
     * failure (stream_event), the last ones once every sequence ended (stream_end, which sets
     * the stream finished), and a failure mid-stream (stream_error; the stream then ends). */
    void (*stream_open)(ts_stream *st);
    void (*stream_event)(ts_stream *st, const ts_job_event *ev);
    void (*stream_end)(ts_stream *st);
    void (*stream_error)(ts_stream *st, int status, const char *code, const char *message);
    const char *keepalive; /* SSE bytes written after 15 s of silence */
    /* The error body; the caller frees it. NULL when out of memory. */
    char *(*error_json)(const ts_api_error *e);
    /* max_tokens beyond the context's room is cut to the room (a cap, as Anthropic's clients
     * mean it) rather than refused (OpenAI's context_length_exceeded). */
    bool clamp_max_tokens;
    /* The prefix of ids: "chatcmpl", "msg", ... */
    const char *id_prefix;
    /* A stream's Content-Type; NULL: text/event-stream. */
    const char *stream_content_type;
    /* A member of the translated request a stream keeps (ts_stream.dialect_req), or NULL. */
    const char *stream_keeps;
} ts_dialect;

extern const ts_dialect ts_dialect_openai_completions;
extern const ts_dialect ts_dialect_openai_chat;
extern const ts_dialect ts_dialect_anthropic;
extern const ts_dialect ts_dialect_ollama_chat;
extern const ts_dialect ts_dialect_ollama_generate;
extern const ts_dialect ts_dialect_responses;

/* ---- endpoints (the route table, http.c) -------------------------------------------------- */

typedef struct ts_endpoint ts_endpoint;
struct ts_reply;

/* Runs a request to ep with its body (may block: see blocking). sock: the client's socket. */
typedef struct ts_reply (*ts_handler)(ts_server *s, const ts_endpoint *ep, const char *body,
                                      size_t len, int sock);

struct ts_endpoint {
    const char *path;          /* ending in '/' ("/v1/responses/"): a prefix taking one more path
                                  segment (an id), which the handler gets as its body */
    const char *method;        /* the one allowed ("GET" also allows HEAD) */
    const char *label;         /* the metrics' endpoint label (rows may share one) */
    bool public_route;         /* no API key needed */
    bool blocking;             /* runs on a worker thread (the model, big bodies, engine locks) */
    const ts_dialect *dialect; /* the shape of its errors (and of its answers) */
    ts_api_kind kind;          /* what the dialect's parser is asked for */
    ts_handler handle;
};

/* The route table, in http.c. */
extern const ts_endpoint ts_endpoints[];
extern const int ts_n_endpoints;

/* The endpoint serving path, or NULL. */
const ts_endpoint *ts_endpoint_find(const char *path);

/* The dialect whose errors a path gets when no endpoint serves it (a prefix match: a client
 * of /v1/messages that mistypes a path still reads its own error shape). */
const ts_dialect *ts_dialect_of_path(const char *path);

/* ---- Anthropic Messages (api_anthropic.c: no server state, fuzzed) ----------------------- */

/* A /v1/messages body as the neutral chat request (kind TS_API_CHAT): system, messages with
 * text, tool_use, tool_result and thinking blocks, tools, tool_choice, stop_sequences,
 * max_tokens, temperature, top_p, top_k, metadata.user_id, stream, thinking. count_only:
 * /v1/messages/count_tokens, where max_tokens is not needed. Errors carry Anthropic's error
 * types (invalid_request_error, not_found_error, request_too_large, ...). */
ts_status ts_api_parse_anthropic(const char *body, size_t len, const ts_api_limits *lim,
                                 bool count_only, ts_api_request *r, ts_api_error *e);

/* {"type": "error", "error": {"type", "message"}}: Anthropic's error body. The type follows
 * the status (401 authentication_error, 403 permission_error, 404 not_found_error, 413
 * request_too_large, 429 rate_limit_error, 500 api_error, 503 overloaded_error; other 4xx
 * invalid_request_error). NULL when out of memory. */
char *ts_api_anthropic_error_json(const ts_api_error *e);

/* "end_turn", "max_tokens", "stop_sequence" or "tool_use" for an answer that ended normally. */
const char *ts_anthropic_stop_reason(ts_finish_reason finish, int32_t stop_index, bool tool_calls);

/* ---- Ollama (api_ollama.c: no server state, fuzzed) --------------------------------------- */

typedef enum ts_ollama_kind {
    TS_OLLAMA_CHAT = 0,         /* POST /api/chat */
    TS_OLLAMA_GENERATE = 1,     /* POST /api/generate through the chat template */
    TS_OLLAMA_GENERATE_RAW = 2, /* POST /api/generate with raw: true (a completions request) */
    TS_OLLAMA_EMBED = 3,        /* POST /api/embed (input) */
    TS_OLLAMA_EMBEDDINGS = 4,   /* POST /api/embeddings (prompt) */
} ts_ollama_kind;

/* An Ollama body as the neutral request (TS_API_CHAT, TS_API_COMPLETIONS for raw generate,
 * TS_API_EMBEDDINGS for the embeddings): messages (content, thinking, tool_calls, tool
 * results), tools, format, options, think, stream (default true), system/prompt/raw; images,
 * template, suffix and context are refused by name. See api_ollama.c for the mapping. */
ts_status ts_api_parse_ollama(ts_ollama_kind which, const char *body, size_t len,
                              const ts_api_limits *lim, ts_api_request *r, ts_api_error *e);

/* {"error": "message"}: Ollama's error body. NULL when out of memory. */
char *ts_api_ollama_error_json(const ts_api_error *e);

/* What a handler needs before parsing: raw: true; load: the body asks for nothing (no prompt,
 * no messages), which Ollama's clients send to load a model. Both false for a bad body. */
void ts_api_ollama_peek(ts_ollama_kind which, const char *body, size_t len, bool *raw, bool *load);
/* ---- OpenAI Responses (api_responses.c: no server state, fuzzed) -------------------------- */

/* A /v1/responses body as the neutral chat request (kind TS_API_CHAT): instructions, input (a
 * string or message / function_call / function_call_output / reasoning items), tools,
 * tool_choice, text.format, max_output_tokens, temperature, top_p, stream, store. The chat
 * request's root keeps "x_tessera_responses" (the input items and what the answer echoes).
 * previous_response_id must have been resolved by the caller (a body still holding one is
 * 400: no such response). Errors carry OpenAI's error types. */
ts_status ts_api_parse_responses(const char *body, size_t len, const ts_api_limits *lim,
                                 ts_api_request *r, ts_api_error *e);

#endif /* TS_SERVER_DIALECT_H */
