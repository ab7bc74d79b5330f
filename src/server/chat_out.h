/*
 * chat_out.h — chat answers in OpenAI's shapes (chat_reply.c); the parsing itself is the
 * runtime's (runtime/chat_out.h).
 */
#ifndef TS_SERVER_CHAT_OUT_H
#define TS_SERVER_CHAT_OUT_H

#include "runtime/chat_out.h"

/* ---- OpenAI's shapes (chat_reply.c) --------------------------------------------------- */

/* The non-streamed message: {"role": "assistant", "content": text or null (null only when
 * there are tool calls and no text), "reasoning_content" (only when there is reasoning),
 * "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}] (only when
 * there are calls)}. NULL when out of memory. */
cJSON *ts_chat_out_message_json(const ts_chat_out *p);

/* The deltas of a stream for one event, into out[0..return): {"content": t},
 * {"reasoning_content": t}, or for a tool call two deltas, {"tool_calls": [{"index", "id",
 * "type": "function", "function": {"name", "arguments": ""}}]} then {"tool_calls": [{"index",
 * "function": {"arguments": A}}]}. 0 when out of memory. */
int ts_chat_out_event_deltas(const ts_chat_event *ev, cJSON *out[2]);

/* True when the finish_reason is "tool_calls": the answer ended normally (stop, not length)
 * and holds calls. Otherwise it is the engine's reason. */
bool ts_chat_out_tool_finish(const ts_chat_out *p, ts_finish_reason why);

#endif /* TS_SERVER_CHAT_OUT_H */
