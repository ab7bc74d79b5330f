/*
 * chat_out.h — the model's generated text as a chat message: content, reasoning and tool
 * calls, parsed incrementally so streams and whole answers agree. Public through
 * ts_chat_parser (tessera.h); the server writes the result in its dialects' shapes.
 *
 * Chat models write tool calls and their thinking as marked-up text, and each family marks it
 * up its own way. The format is read from the chat template's Jinja source once per context
 * (the runtime's chat profile, ts_context_chat_profile), the only description of the model's
 * conventions a GGUF carries:
 *
 *   hermes      <tool_call>{"name": N, "arguments": {...}}</tool_call>, several in a row for
 *               parallel calls (Hermes 2/3, Qwen 2.5/3, QwQ, Granite 4, ...); the same tag
 *               holding <function=N><parameter=K>V</parameter></function> (Qwen3-Coder,
 *               Qwen3.5, Nemotron 3) or N<arg_key>K</arg_key><arg_value>V</arg_value> (GLM 4.5+)
 *   llama3      the whole answer is {"name": N, "parameters": {...}} (Llama 3.1/3.2/3.3), or
 *               <|python_tag|> followed by such JSON, a builtin call N.call(k="v"), or code
 *   mistral     [TOOL_CALLS][{"name": N, "arguments": {...}, "id": I}, ...] (Nemo) or
 *               [TOOL_CALLS]N[ARGS]{...} (Small 3.2, Devstral, Ministral 3; [CALL_ID]I allowed)
 *   deepseek    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
 *               ```json {...} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (R1), or
 *               <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1)
 *   functionary <function=N>{...}</function> (v3.1), <|python_tag|>code
 *   command-r   <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
 *               (Command R7B; the answer sits in <|START_RESPONSE|>...<|END_RESPONSE|>)
 *   granite     <|tool_call|>[{"name", "arguments"}, ...] (Granite 3.x; <response> stripped)
 *   phi4        <|tool_call|>[...]<|/tool_call|> or functools[...] (Phi-4-mini)
 *   firefunction functools[{"name", "arguments"}, ...]
 *   kimi        <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0
 *               <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
 *   harmony     gpt-oss: the answer is messages, <|channel|>C [to=functions.N]<|message|>
 *               BODY<|end|> (or <|call|>, <|return|>); channel analysis is the reasoning,
 *               final the content, a message to functions.N a call whose body is arguments
 *   generic     any other template: the whole answer is a JSON object {"name", "arguments"}
 *               (or a list of them, {"tool_call": ...}, {"tool_calls": [...]})
 *
 * Reasoning is <think>...</think> (Qwen3, QwQ, DeepSeek R1, GLM, SmolLM3, Granite 3.3 ...),
 * [THINK]...[/THINK] (Magistral, Ministral 3) or <|START_THINKING|>...<|END_THINKING|>
 * (Command R7B), recognised at the start of the answer only. When the rendered prompt ends
 * with the opening tag (DeepSeek R1's generation prompt adds "<think>\n"), the answer starts
 * inside the reasoning. Reasoning that never closes is all reasoning_content (the answer ran
 * out of tokens while thinking, or the model never stopped thinking), as llama.cpp does.
 *
 * Invariants (what the tests check):
 *  - The parser is deterministic in the text and blind to how it was cut: feeding the same
 *    text in any chunks gives the same events in total, so a streamed answer concatenated
 *    equals the non-streamed one (which is the same parser fed once).
 *  - Text that might be the start of a marker (a trailing "<tool_c") is held back and later
 *    released as content when it turns out not to be one. Trailing whitespace is held too:
 *    whitespace next to reasoning and tool calls is dropped, elsewhere it is kept.
 *  - A tool call is reported whole, when its closing marker (or the end of its JSON value, or
 *    the end of the answer) has been seen and it parsed: name, id and its arguments as
 *    compact JSON text ({"a":1}), which is what OpenAI sends in function.arguments. A call
 *    that does not parse (bad JSON, no name, arguments that are not an object) is returned as
 *    content, marker and all; nothing in the text can make the parser fail other than memory.
 *  - The answer-is-JSON formats (llama3, generic, and hermes when the model leaves out the
 *    opening <tool_call>) only take an object whose name is one of the offered tools and
 *    that has "arguments" or "parameters", since an ordinary answer may be JSON too; such an
 *    answer may sit in a ```json fence.
 *
 * Thread safety: a parser belongs to one thread; the functions share no state.
 */
#ifndef TS_RUNTIME_CHAT_OUT_H
#define TS_RUNTIME_CHAT_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tessera.h"

/* ts_chat_tool_format and ts_chat_reasoning_format are the runtime's (tessera.h: the chat
 * profile of a context). */
typedef struct ts_chat_out_format {
    ts_chat_tool_format tools;
    ts_chat_reasoning_format reasoning;
} ts_chat_out_format;

/* The formats a chat template's Jinja source implies (NULL: generic tools, no reasoning):
 * ts_chat_profile_detect's. */
ts_chat_out_format ts_chat_out_detect(const char *template_source);

/* "hermes", "think", ... for logs and tests. */
const char *ts_chat_tool_format_name(ts_chat_tool_format f);
const char *ts_chat_reasoning_format_name(ts_chat_reasoning_format f);

/* True when the rendered prompt ends (whitespace aside) with the format's opening reasoning
 * tag, so the answer starts inside the reasoning. */
bool ts_chat_out_prompt_opens_reasoning(ts_chat_reasoning_format f, const char *prompt, size_t len);

typedef struct ts_chat_out_config {
    ts_chat_out_format format;
    bool parse_tools;         /* tools were offered and tool_choice is not "none" */
    bool parallel_tool_calls; /* false: only the first call is kept */
    bool reasoning_open;      /* the prompt opened the reasoning (see above) */
    const cJSON *tools;       /* the request's "tools" array (copied; may be NULL): names for the
                                 answer-is-JSON formats, parameter types for the XML forms */
    uint64_t id_seed;         /* tool-call ids are derived from it (unique per request) */
} ts_chat_out_config;

/* Added to id_seed once per choice index, so the choices of one request get different ids. */
#define TS_CHAT_OUT_CHOICE_SEED 0xD6E8FEB86659FD93ull

/* False when the configuration parses nothing (no reasoning format, no tools): the text is
 * then the content as it stands and callers may skip the parser. */
bool ts_chat_out_active(const ts_chat_out_config *cfg);

/* ts_chat_event and ts_chat_tool_call are public (tessera.h). */
typedef struct ts_chat_out ts_chat_out;

/* A parser for one choice. NULL when out of memory. */
ts_chat_out *ts_chat_out_create(const ts_chat_out_config *cfg);
void ts_chat_out_destroy(ts_chat_out *p);

/* Feeds the next piece of generated text (any bytes; UTF-8 characters may be split across
 * pieces). TS_ERR_NOMEM is the only failure; after it the parser's output is incomplete. */
ts_status ts_chat_out_feed(ts_chat_out *p, const char *text, size_t len);

/* The answer ended: held-back text is released, an open tool call is parsed as it stands. */
ts_status ts_chat_out_finish(ts_chat_out *p);

/* Events produced since the last ts_chat_out_clear (adjacent deltas of one kind merged). */
size_t ts_chat_out_events(ts_chat_out *p, const ts_chat_event **events);
void ts_chat_out_clear(ts_chat_out *p);

/* The answer so far: content and reasoning (NUL-terminated, "" when none) and the tool calls.
 * Pointers are owned by the parser and valid until its next call. */
const char *ts_chat_out_content(const ts_chat_out *p, size_t *len);
const char *ts_chat_out_reasoning(const ts_chat_out *p, size_t *len);
size_t ts_chat_out_tool_calls(const ts_chat_out *p, const ts_chat_tool_call **calls);

#endif /* TS_RUNTIME_CHAT_OUT_H */
