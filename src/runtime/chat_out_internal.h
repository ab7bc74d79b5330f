/*
 * chat_out_internal.h — between the streaming machine (chat_out.c) and the parsers of one
 * tool-call section's text (chat_out_calls.c). A section parser sees the text between a
 * section's opening and closing markers (or up to the end of its JSON value, or of the
 * answer) and turns it into calls, all or nothing.
 */
#ifndef TS_RUNTIME_CHAT_OUT_INTERNAL_H
#define TS_RUNTIME_CHAT_OUT_INTERNAL_H

#include "runtime/chat_out.h"

/* How a section's text is read. */
typedef enum chat_body {
    BODY_HERMES,      /* one call: JSON, <function=N><parameter=K>..., or N<arg_key>K... */
    BODY_JSON_START,  /* the answer is JSON: one call or several ("," / ";" / space between) */
    BODY_PYTHON_TAG,  /* llama3 <|python_tag|>: JSON call(s), N.call(k=v, ...), or code */
    BODY_PYTHON_CODE, /* functionary <|python_tag|>: code for the "python" tool */
    BODY_MISTRAL,     /* [TOOL_CALLS]: a JSON list, or N[ARGS]{...} ([CALL_ID]I allowed) */
    BODY_DEEPSEEK,    /* <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> entries */
    BODY_FUNCTION,    /* functionary: N>{...} */
    BODY_JSON_CALLS,  /* a JSON list of calls (or one call object) */
    BODY_KIMI,        /* <|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{...} */
} chat_body;

/* Calls found in one section; strings owned (malloc). id NULL: the caller assigns one. */
typedef struct chat_calls {
    ts_chat_tool_call *v;
    size_t n, cap;
} chat_calls;

/* Parses body[0..len) as `kind`, appending to out. False (out as it was) when the text is
 * not a well-formed call list; true with at least one call otherwise. tools: the request's
 * tools array or NULL. strict: names must be among tools and arguments must be present
 * (the answer-is-JSON formats). */
bool rt_chat_calls_parse(chat_body kind, const char *body, size_t len, const cJSON *tools,
                          bool strict, chat_calls *out);

/* Appends a call to `name` whose arguments are the JSON object in args[0..len) (whitespace
 * around it allowed). False (out as it was) when they are not one or the name is invalid. */
bool rt_chat_calls_add(chat_calls *out, const char *name, size_t name_len, const char *args,
                        size_t len);

/* Frees the strings of out->v[from..n) and sets n = from. */
void rt_chat_calls_truncate(chat_calls *out, size_t from);

#endif /* TS_RUNTIME_CHAT_OUT_INTERNAL_H */
