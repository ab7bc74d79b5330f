/*
 * chat_reply.c — chat answers in OpenAI's shapes: the non-streamed message and the streamed
 * deltas (see chat_out.h for the parsing itself).
 */
#include "server/chat_out.h"

#include <stdlib.h>
#include <string.h>

/* A JSON string from len bytes (not NUL-terminated). */
static cJSON *string_n(const char *s, size_t len) {
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    cJSON *v = cJSON_CreateString(copy);
    free(copy);
    return v;
}

static cJSON *call_json(int32_t index, const char *id, const char *name, const char *arguments,
                        bool stream_index) {
    cJSON *c = cJSON_CreateObject();
    if (stream_index) {
        cJSON_AddNumberToObject(c, "index", index);
    }
    if (id != NULL) {
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
    }
    cJSON *f = cJSON_AddObjectToObject(c, "function");
    if (name != NULL) {
        cJSON_AddStringToObject(f, "name", name);
    }
    cJSON_AddStringToObject(f, "arguments", arguments);
    return c;
}

cJSON *ts_chat_out_message_json(const ts_chat_out *p) {
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) {
        return NULL;
    }
    const ts_chat_tool_call *calls = NULL;
    size_t n_calls = ts_chat_out_tool_calls(p, &calls);
    size_t content_len = 0, reasoning_len = 0;
    const char *content = ts_chat_out_content(p, &content_len);
    const char *reasoning = ts_chat_out_reasoning(p, &reasoning_len);
    cJSON_AddStringToObject(m, "role", "assistant");
    if (content_len == 0 && n_calls > 0) {
        cJSON_AddNullToObject(m, "content");
    } else {
        cJSON_AddStringToObject(m, "content", content);
    }
    if (reasoning_len > 0) {
        cJSON_AddStringToObject(m, "reasoning_content", reasoning);
    }
    if (n_calls > 0) {
        cJSON *list = cJSON_AddArrayToObject(m, "tool_calls");
        for (size_t i = 0; i < n_calls; i++) {
            cJSON_AddItemToArray(
                list, call_json((int32_t)i, calls[i].id, calls[i].name, calls[i].arguments, false));
        }
    }
    return m;
}

int ts_chat_out_event_deltas(const ts_chat_event *ev, cJSON *out[2]) {
    out[0] = out[1] = NULL;
    if (ev->kind != TS_CHAT_EVENT_TOOL_CALL) {
        cJSON *d = cJSON_CreateObject();
        cJSON *text = string_n(ev->text, ev->len);
        if (d == NULL || text == NULL) {
            cJSON_Delete(d);
            cJSON_Delete(text);
            return 0;
        }
        cJSON_AddItemToObject(
            d, ev->kind == TS_CHAT_EVENT_CONTENT ? "content" : "reasoning_content", text);
        out[0] = d;
        return 1;
    }
    /* As OpenAI streams a call: its id, type and name with empty arguments first, then the
     * arguments (here in one piece, since a call is reported once it has parsed whole). */
    for (int k = 0; k < 2; k++) {
        cJSON *d = cJSON_CreateObject();
        cJSON *list = d != NULL ? cJSON_AddArrayToObject(d, "tool_calls") : NULL;
        if (list == NULL) {
            cJSON_Delete(d);
            cJSON_Delete(out[0]);
            out[0] = NULL;
            return 0;
        }
        cJSON_AddItemToArray(list, k == 0 ? call_json(ev->index, ev->id, ev->name, "", true)
                                          : call_json(ev->index, NULL, NULL, ev->arguments, true));
        out[k] = d;
    }
    return 2;
}

bool ts_chat_out_tool_finish(const ts_chat_out *p, ts_finish_reason why) {
    const ts_chat_tool_call *calls = NULL;
    return p != NULL && why == TS_FINISH_STOP && ts_chat_out_tool_calls(p, &calls) > 0;
}
