/*
 * chat_reply.c — chat answers in OpenAI's shapes: the parser's configuration for a request,
 * the non-streamed message and the streamed deltas (see chat_out.h for the parsing itself).
 */
#include "server/chat_out.h"
#include "server/server_internal.h"

#include <stdlib.h>
#include <string.h>

/* Tokens of the prompt's end that are detokenized to see whether it opened the reasoning:
 * enough for "<think>\n" or "[THINK]" however the vocabulary splits them. */
#define PROMPT_TAIL_TOKENS 8

void ts_server_chat_config(ts_server *s, const ts_api_request *r, const int32_t *ids, int32_t n_ids,
                           ts_chat_out_config *cfg) {
    ts_context_info info;
    ts_context_get_info(s->ctx, &info);
    /* The Jinja template in use; while the context does not report one, the model's own
     * unless a built-in family replaces it. */
    const char *src = info.chat_template_source;
    if (src == NULL && info.chat_template == NULL) {
        src = ts_llm_chat_template(s->llm);
    }
    *cfg = (ts_chat_out_config){
        .format = ts_chat_out_detect(src),
        .parse_tools = r->has_tools && r->tool_choice != TS_API_TOOL_NONE,
        .parallel_tool_calls = r->parallel_tool_calls,
        .tools = cJSON_GetObjectItemCaseSensitive(r->root, "tools"),
        .id_seed = s->id_salt ^ (atomic_fetch_add(&s->id_counter, 1) * 0xD1B54A32D192ED03ull),
    };
    if (cfg->format.reasoning != TS_CHAT_REASONING_NONE && ids != NULL && n_ids > 0) {
        int32_t n = n_ids < PROMPT_TAIL_TOKENS ? n_ids : PROMPT_TAIL_TOKENS;
        char *tail = NULL;
        size_t len = 0;
        ts_error e = {0};
        if (ts_llm_detokenize(s->llm, ids + n_ids - n, (size_t)n, 1, &tail, &len, &e) == TS_OK) {
            cfg->reasoning_open =
                ts_chat_out_prompt_opens_reasoning(cfg->format.reasoning, tail, len);
        }
        ts_free(tail);
    }
}

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

const char *ts_chat_out_finish_reason(const ts_chat_out *p, ts_finish_reason why) {
    const ts_chat_tool_call *calls = NULL;
    if (p != NULL && why == TS_FINISH_STOP && ts_chat_out_tool_calls(p, &calls) > 0) {
        return "tool_calls";
    }
    return ts_finish_reason_name(why);
}
