/*
 * chat_caps.h — probing a chat template's capabilities (chat_caps.c): which parts of an
 * OpenAI-shaped conversation (system turns, tools, tool calls, tool results, content null)
 * reach its output. The result, ts_chat_caps (api.h), decides the polyfills of api_chat.c.
 *
 * Thread safety: no shared state; the render function is called on the caller's thread.
 */
#ifndef TS_SERVER_CHAT_CAPS_H
#define TS_SERVER_CHAT_CAPS_H

#include <stddef.h>

#include "server/api.h"
#include "tessera.h"

/* Renders a chat request (ts_llm_chat_render's JSON) into *text (released with ts_free; may
 * stay NULL on failure). Used for the probes; it should bound the render (time, memory). */
typedef ts_status (*ts_chat_render_fn)(void *user, const char *request_json, char **text);

/* Runs the probes with fn. out->probed is false when the plain user turn does not render or
 * a probe stopped at a limit (TS_ERR_LIMIT, TS_ERR_NOMEM): then nothing is known. */
void ts_chat_caps_probe(ts_chat_render_fn fn, void *user, ts_chat_caps *out);

/* One line for the log: "system role yes, tools no, tool calls no, tool results no". */
void ts_chat_caps_describe(const ts_chat_caps *c, char *buf, size_t size);

#endif /* TS_SERVER_CHAT_CAPS_H */
