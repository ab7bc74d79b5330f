/*
 * api.h — the OpenAI-compatible request bodies: parsing, validation and error replies.
 *
 * This part of the server knows JSON and the API's rules but no HTTP and no engine state, so
 * it can be tested on its own (tests/server/test_api.c) and fuzzed. Every rejected body gets
 * a ts_api_error carrying the HTTP status, OpenAI's error "type", the offending parameter and
 * a message saying what was wrong and why, e.g.
 *
 *   400 invalid_request_error param=max_tokens: "max_tokens must be an integer in
 *       [1, 2048], got -5"
 *
 * Bodies are untrusted: the whole body must be valid UTF-8 (checked before parsing, so no
 * string handed on can contain a broken character), nesting deeper than TS_API_MAX_DEPTH is
 * rejected before cJSON recurses (cJSON's own limit is 1000 levels), and the sizes of arrays
 * and strings the server keeps are bounded by the limits below. Unknown fields are ignored,
 * as OpenAI clients send fields this server does not use; known fields with the wrong type or
 * value are always errors.
 *
 * Thread safety: functions here share no state; a ts_api_request belongs to one thread.
 */
#ifndef TS_SERVER_API_H
#define TS_SERVER_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tessera.h"

#define TS_API_MAX_DEPTH        32   /* JSON nesting */
#define TS_API_MAX_PROMPTS      16   /* prompts in one /v1/completions body */
#define TS_API_MAX_MESSAGES     1024 /* chat messages */
#define TS_API_MAX_STOP_LEN     256  /* bytes of one stop string */
#define TS_API_MAX_LOGIT_BIAS   1024
#define TS_API_MAX_TOP_LOGPROBS 20
#define TS_API_MAX_EMBED_INPUTS 2048      /* inputs in one /v1/embeddings body (OpenAI's limit) */
#define TS_API_MAX_GRAMMAR      (1 << 20) /* bytes of a GBNF grammar or a compact schema */

typedef enum ts_api_kind {
    TS_API_COMPLETIONS = 0, /* POST /v1/completions */
    TS_API_CHAT = 1,        /* POST /v1/chat/completions */
    TS_API_TOKENIZE = 2,    /* POST /tokenize */
    TS_API_DETOKENIZE = 3,  /* POST /detokenize */
    TS_API_EMBEDDINGS = 4,  /* POST /v1/embeddings */
} ts_api_kind;

typedef struct ts_api_error {
    int status;     /* HTTP status: 400, 404, 413, ... */
    char type[32];  /* "invalid_request_error", "authentication_error", "server_error" */
    char param[64]; /* the offending field ("messages[2].role"), or "" */
    char code[48];  /* "context_length_exceeded", "model_not_found", or "" */
    char message[TS_ERROR_MSG_MAX];
} ts_api_error;

/* What a chat template renders, found by rendering test conversations with it once at start
 * (chat_caps.c, as llama.cpp's minja does). A request holding what the template cannot render
 * is rewritten into what it can (the polyfills below) instead of failing. */
typedef struct ts_chat_caps {
    bool probed;         /* the probes ran; false: every capability is assumed */
    bool system_role;    /* a system turn's text reaches the prompt */
    bool tools;          /* the offered tools reach the prompt */
    bool tool_calls;     /* an assistant turn's tool_calls reach the prompt */
    bool tool_responses; /* a "tool" turn's result reaches the prompt */
    bool needs_content;  /* content null fails (or vanishes) where "" renders */
} ts_chat_caps;

/* The rewrites of a chat request for a template that lacks a capability (a bit set). */
enum {
    TS_API_POLYFILL_TOOLS = 1 << 0,          /* tools described in a system turn */
    TS_API_POLYFILL_TOOL_CALLS = 1 << 1,     /* calls written as JSON into the content */
    TS_API_POLYFILL_TOOL_RESPONSES = 1 << 2, /* results as user turns of JSON naming the tool */
    TS_API_POLYFILL_SYSTEM_ROLE = 1 << 3,    /* system text moved into the next user turn */
    TS_API_POLYFILL_NULL_CONTENT = 1 << 4,   /* content null rendered as "" */
};

/* "tool_calls,tool_responses": the names of the polyfills in `bits`, comma-separated, into
 * buf (empty when none). */
void ts_api_polyfill_names(unsigned bits, char *buf, size_t size);

/* What the server knows about its model when it checks a body. */
typedef struct ts_api_limits {
    int32_t n_vocab;        /* token ids must be below this */
    int64_t n_ctx;          /* tokens per sequence */
    int32_t max_n;          /* largest n (parallel samples) */
    const char *model_name; /* the served model's id; a body naming another is 404 */
    int64_t n_embd;         /* embeddings: the model's vector size (dimensions must match) */
    bool tools_in_template; /* the chat template renders "tools" itself; when false, offered
                               tools are described in the system turn instead (see
                               api_chat.c). Only read when caps.probed is false */
    ts_chat_caps caps;      /* what the chat template renders (zero: not probed) */
} ts_api_limits;

/* tool_choice of a chat request. */
typedef enum ts_api_tool_choice {
    TS_API_TOOL_AUTO = 0,     /* the model decides (default) */
    TS_API_TOOL_NONE = 1,     /* "none": no tool calls are parsed from the output */
    TS_API_TOOL_REQUIRED = 2, /* "required": the model should call one or more tools */
    TS_API_TOOL_NAMED = 3,    /* {"type":"function","function":{"name":N}} */
} ts_api_tool_choice;

/* One prompt of a completions request: text, or token ids given directly. */
typedef struct ts_api_prompt {
    const char *text; /* NUL-terminated view into the parsed JSON, or NULL when ids given */
    int32_t *ids;     /* [n_ids], owned (malloc'd) when the body gave token ids */
    int32_t n_ids;
} ts_api_prompt;

/* A parsed and validated body. Views point into `root`, which the request owns. */
typedef struct ts_api_request {
    ts_api_kind kind;
    cJSON *root;

    /* completions and tokenize (prompt form) */
    ts_api_prompt prompts[TS_API_MAX_PROMPTS];
    int32_t n_prompts;

    /* chat and tokenize (messages form); contents are views or owned joins of text parts */
    ts_message *messages; /* [n_messages], owned */
    int32_t n_messages;
    char **owned_texts;         /* [n_messages] joined multi-part contents (NULL entries: views) */
    bool add_generation_prompt; /* chat template: open the assistant turn (default true) */
    bool add_special_tokens;    /* tokenize: add BOS etc. as the model asks (default true; a
                                   rendered chat template holds no BOS, so true there too) */

    /* chat: what the template sees. chat_json is {"messages": [...], "tools": [...],
     * "add_generation_prompt": b, ...chat_template_kwargs} as ts_llm_chat_render takes it
     * (owned; messages keep tool_calls, tool_call_id, name, reasoning_content). */
    char *chat_json;
    bool has_tools;                 /* tools given (and tool_choice is not "none") */
    ts_api_tool_choice tool_choice; /* default auto when tools are given */
    const char *tool_choice_name;   /* TS_API_TOOL_NAMED: the function's name (view) */
    bool parallel_tool_calls;       /* default true */
    unsigned polyfills;             /* TS_API_POLYFILL_* applied to chat_json */

    /* detokenize */
    int32_t *tokens; /* [n_tokens], owned */
    int32_t n_tokens;

    /* generation */
    ts_request_params params; /* sampling, n, seed, stop, logprobs, ignore_eos */
    bool max_tokens_set;      /* the body gave max_tokens / max_completion_tokens */
    const char *stop[TS_ENGINE_MAX_STOP];
    ts_logit_bias *bias; /* [params.sampling.n_logit_bias], owned */
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    bool logprobs;      /* report logprobs (chat: logprobs=true; completions: logprobs set) */
    int32_t top_logprobs;
    const char *user; /* may be NULL */
    /* speculative.n_min (llama-server's name) as given, -1 when not: validated and kept, not
     * applied (the engine's minimum is the context's draft_min). speculative.n_max is
     * params.draft_max. */
    int32_t spec_n_min;
    /* the output's constraint: response_format json_object / json_schema, grammar (GBNF) or
     * json_schema; params.grammar points at grammar_text */
    char *grammar_text;        /* owned: the compact schema or the GBNF text */
    const char *grammar_param; /* the field it came from (for errors), NULL when none */

    /* embeddings: input (a string, an array of strings, an array of token ids or an array
     * of arrays of token ids), encoding_format and dimensions */
    ts_api_prompt *inputs; /* [n_inputs], owned (texts are views into root) */
    int32_t n_inputs;
    bool base64; /* encoding_format "base64": little-endian float32 bytes */
} ts_api_request;

/* Parses body[0..len) as a request of the given kind. On success *out owns its allocations
 * (free with ts_api_request_free); on failure *out holds nothing and err says why (400 for
 * every body problem, 404 for an unknown model). */
ts_status ts_api_parse(ts_api_kind kind, const char *body, size_t len, const ts_api_limits *limits,
                       ts_api_request *out, ts_api_error *err);
void ts_api_request_free(ts_api_request *r);

/* The fields of a /v1/embeddings body (api_embed.c; called by ts_api_parse). */
ts_status ts_api_parse_embeddings(const cJSON *root, const ts_api_limits *lim, ts_api_request *r,
                                  ts_api_error *err);

/* The chat fields (api_chat.c; called by ts_api_parse after the messages' roles and contents):
 * tools, tool_choice, parallel_tool_calls, chat_template_kwargs, add_generation_prompt,
 * tool calls and tool results in messages; builds r->chat_json from the body's text. */
ts_status ts_api_parse_chat(const cJSON *root, const char *body, size_t len,
                            const ts_api_limits *lim, ts_api_request *r, ts_api_error *err);

/* Sets *err and returns TS_ERR_INVALID_ARG (or TS_ERR_NOT_FOUND for 404). */
ts_status ts_api_error_set(ts_api_error *err, int status, const char *type, const char *param,
                           const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* {"error": {"message", "type", "param", "code"}} (param and code null when empty); the
 * caller frees the string. NULL only when out of memory. */
char *ts_api_error_json(const ts_api_error *err);

/* Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points
 * above U+10FFFF included), or len when s[0..len) is valid. */
size_t ts_api_utf8_check(const char *s, size_t len);

/* Deepest nesting of arrays/objects in JSON text (strings skipped), stopping early once the
 * depth exceeds max; so the scan is linear and never recurses. */
int ts_api_json_depth(const char *s, size_t len, int max);

/* Offset of the first control byte (below 0x20) JSON does not allow: any inside a string
 * (they must be escaped there) and any but tab, newline and carriage return outside; len when
 * there is none. cJSON is lenient about both, the chat template's JSON reader is not. */
size_t ts_api_json_control_check(const char *s, size_t len);

/* "null", "a string", "a number", "a boolean", "an array" or "an object" (messages naming what
 * a field holds). NULL is "null". */
const char *ts_api_json_kind(const cJSON *v);

/* A request body as a JSON object, after the checks every dialect's body gets: valid UTF-8, no
 * raw control bytes, nesting at most TS_API_MAX_DEPTH, one JSON value (a lone UTF-16 surrogate
 * named), nothing after it but whitespace, an object. NULL with a 400 in *err otherwise (a 500
 * when out of memory); the caller deletes the object. */
cJSON *ts_api_parse_body(const char *body, size_t len, ts_api_error *err);

/* Compares a presented secret with the expected one in time that depends only on the
 * presented length, never on where they differ. */
bool ts_api_key_equal(const char *given, size_t given_len, const char *expected,
                      size_t expected_len);

#endif /* TS_SERVER_API_H */
