/*
 * anthropic.c — the Anthropic Messages row of the dialect table (dialect.h): the message a
 * non-streamed answer returns, the event sequence of a streamed one, and
 * POST /v1/messages/count_tokens. Bodies are read in api_anthropic.c.
 *
 * The answer's content blocks come from the same parser as OpenAI's message (chat_out.h):
 * reasoning is a thinking block (its signature empty: nothing here signs it), the content a
 * text block, each tool call a tool_use block whose input is the call's arguments. A stream
 * sends, as Anthropic does:
 *
 *   message_start (the message with empty content and the prompt's usage), ping,
 *   for each block: content_block_start, content_block_delta (text_delta, thinking_delta or
 *   one input_json_delta holding a tool call's whole arguments: a call is reported once it has
 *   parsed), content_block_stop,
 *   message_delta (stop_reason, stop_sequence, usage), message_stop.
 *
 * A failure mid-stream is an `error` event, after which the stream ends; 15 s of silence send
 * a ping. stop_reason is end_turn, max_tokens, stop_sequence (naming the stop string that
 * ended the answer) or tool_use. usage.input_tokens counts the prompt tokens the prefix cache
 * did not supply, cache_read_input_tokens those it did (Anthropic's split).
 */
#include "server/stream.h"

#include <stdio.h>
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

static cJSON *usage_json(uint64_t prompt, uint64_t cached, uint64_t output) {
    cJSON *u = cJSON_CreateObject();
    uint64_t fresh = prompt > cached ? prompt - cached : 0;
    cJSON_AddNumberToObject(u, "input_tokens", (double)fresh);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", (double)cached);
    cJSON_AddNumberToObject(u, "output_tokens", (double)output);
    return u;
}

static cJSON *tool_use_block(const char *id, const char *name, const char *arguments) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", name);
    /* The parser reports arguments as compact JSON of an object. */
    cJSON *input = arguments != NULL ? cJSON_Parse(arguments) : NULL;
    if (!cJSON_IsObject(input)) {
        cJSON_Delete(input);
        input = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", input);
    return b;
}

static void add_stop(cJSON *o, const char *const *stops, int32_t n_stops, int32_t stop_index,
                     const char *reason) {
    cJSON_AddStringToObject(o, "stop_reason", reason);
    if (strcmp(reason, "stop_sequence") == 0 && stop_index >= 0 && stop_index < n_stops) {
        cJSON_AddStringToObject(o, "stop_sequence", stops[stop_index]);
    } else {
        cJSON_AddNullToObject(o, "stop_sequence");
    }
}

cJSON *ts_anthropic_answer_json(ts_server *s, ts_answer *a) {
    ts_answer_choice *c = &a->choices[0];
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        return NULL;
    }
    char id[64];
    ts_server_make_id(s, "msg", id, sizeof id);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "type", "message");
    cJSON_AddStringToObject(root, "role", "assistant");
    cJSON_AddStringToObject(root, "model", s->model_name);
    cJSON *content = cJSON_AddArrayToObject(root, "content");
    bool tool_calls = false;
    if (c->parsed != NULL) {
        size_t n = 0;
        const char *reasoning = ts_chat_out_reasoning(c->parsed, &n);
        if (n > 0) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddStringToObject(b, "type", "thinking");
            cJSON_AddStringToObject(b, "thinking", reasoning);
            cJSON_AddStringToObject(b, "signature", "");
            cJSON_AddItemToArray(content, b);
        }
        const char *text = ts_chat_out_content(c->parsed, &n);
        if (n > 0) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddStringToObject(b, "type", "text");
            cJSON_AddStringToObject(b, "text", text);
            cJSON_AddItemToArray(content, b);
        }
        const ts_chat_tool_call *calls = NULL;
        size_t n_calls = ts_chat_out_tool_calls(c->parsed, &calls);
        for (size_t i = 0; i < n_calls; i++) {
            cJSON_AddItemToArray(content,
                                 tool_use_block(calls[i].id, calls[i].name, calls[i].arguments));
        }
        tool_calls = ts_chat_out_tool_finish(c->parsed, c->finish);
    } else if (c->len > 0) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", c->text);
        cJSON_AddItemToArray(content, b);
    }
    add_stop(root, a->r->stop, a->r->params.n_stop, c->stop_index,
             ts_anthropic_stop_reason(c->finish, c->stop_index, tool_calls));
    cJSON_AddItemToObject(root, "usage",
                          usage_json(a->prompt_tokens, a->cached_tokens, a->completion_tokens));
    /* A failed allocation anywhere above leaves a member out: check the ones clients need. */
    if (content == NULL || cJSON_GetObjectItemCaseSensitive(root, "usage") == NULL ||
        cJSON_GetObjectItemCaseSensitive(root, "stop_reason") == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- streams ------------------------------------------------------------------------------ */

#define BLOCK_NONE (-1)
#define BLOCK_TOOL 100 /* tool_use blocks are opened and closed whole */

static void event(ts_stream *st, const char *name, cJSON *o) {
    if (!ts_stream_put_event(st, name, o)) {
        ts_anthropic_stream_error(st, 500, NULL, "out of memory");
    }
}

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void close_block(ts_stream *st) {
    if (st->block_kind == BLOCK_NONE) {
        return;
    }
    cJSON *o = typed("content_block_stop");
    cJSON_AddNumberToObject(o, "index", st->block_index);
    event(st, "content_block_stop", o);
    st->block_index++;
    st->block_kind = BLOCK_NONE;
}

/* Opens a block of kind (closing another kind first); block is its content_block. */
static void open_block(ts_stream *st, int kind, cJSON *block) {
    close_block(st);
    cJSON *o = typed("content_block_start");
    cJSON_AddNumberToObject(o, "index", st->block_index);
    cJSON_AddItemToObject(o, "content_block", block);
    event(st, "content_block_start", o);
    st->block_kind = kind;
}

/* A text or thinking delta, in the block of its kind (opened when another one is). */
static void text_delta(ts_stream *st, ts_chat_event_kind kind, const char *text, size_t len) {
    if (len == 0) {
        return;
    }
    bool thinking = kind == TS_CHAT_EVENT_REASONING;
    if (st->block_kind != (int)kind) {
        cJSON *b = typed(thinking ? "thinking" : "text");
        cJSON_AddStringToObject(b, thinking ? "thinking" : "text", "");
        if (thinking) {
            cJSON_AddStringToObject(b, "signature", "");
        }
        open_block(st, (int)kind, b);
    }
    cJSON *o = typed("content_block_delta");
    cJSON_AddNumberToObject(o, "index", st->block_index);
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", thinking ? "thinking_delta" : "text_delta");
    cJSON_AddItemToObject(d, thinking ? "thinking" : "text", string_n(text, len));
    event(st, "content_block_delta", o);
}

static void tool_block(ts_stream *st, const ts_chat_event *ev) {
    cJSON *b = typed("tool_use");
    cJSON_AddStringToObject(b, "id", ev->id);
    cJSON_AddStringToObject(b, "name", ev->name);
    cJSON_AddObjectToObject(b, "input");
    open_block(st, BLOCK_TOOL, b);
    cJSON *o = typed("content_block_delta");
    cJSON_AddNumberToObject(o, "index", st->block_index);
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", "input_json_delta");
    cJSON_AddStringToObject(d, "partial_json", ev->arguments);
    event(st, "content_block_delta", o);
    close_block(st);
}

void ts_anthropic_stream_open(ts_stream *st) {
    cJSON *o = typed("message_start");
    cJSON *m = cJSON_AddObjectToObject(o, "message");
    cJSON_AddStringToObject(m, "id", st->id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", st->s->model_name);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage_json(st->prompt_tokens, 0, 0));
    event(st, "message_start", o);
    event(st, "ping", typed("ping"));
}

static void anthropic_piece(ts_stream *st, const ts_chat_event *piece) {
    if (piece->kind == TS_CHAT_EVENT_TOOL_CALL) {
        tool_block(st, piece);
    } else {
        text_delta(st, piece->kind, piece->text, piece->len);
    }
}

void ts_anthropic_stream_event(ts_stream *st, const ts_job_event *ev) {
    if (ev->choice != 0) {
        return; /* Anthropic answers have one choice (n is 1) */
    }
    if (!ts_stream_chat_pieces(st, ev, anthropic_piece)) {
        ts_anthropic_stream_error(st, 500, NULL, "out of memory");
        return;
    }
    ts_chat_out *po = st->chat != NULL ? st->chat[0] : NULL;
    if (ev->finish != TS_FINISH_NONE) {
        st->finish = ev->finish;
        st->stop_index = ev->stop_index;
        st->tool_calls = po != NULL && ts_chat_out_tool_finish(po, ev->finish);
    }
}

void ts_anthropic_stream_end(ts_stream *st) {
    if (!st->error_sent) {
        close_block(st);
        uint64_t prompt = 0, cached = 0;
        ts_stream_usage(st, &prompt, &cached);
        cJSON *o = typed("message_delta");
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        add_stop(d, (const char *const *)st->stops, st->n_stops, st->stop_index,
                 ts_anthropic_stop_reason(st->finish, st->stop_index, st->tool_calls));
        cJSON_AddItemToObject(o, "usage", usage_json(prompt, cached, st->completion));
        event(st, "message_delta", o);
    }
    if (!st->error_sent) {
        event(st, "message_stop", typed("message_stop"));
    }
    st->finished = true;
}

void ts_anthropic_stream_error(ts_stream *st, int status, const char *code, const char *message) {
    (void)code;
    if (st->error_sent) {
        return;
    }
    st->error_sent = true; /* before writing: a failed write must not come back here */
    ts_api_error e;
    ts_api_error_set(&e, status, status < 500 ? "invalid_request_error" : "server_error", NULL,
                     NULL, "%s", message);
    char *text = ts_api_anthropic_error_json(&e);
    if (text != NULL) {
        ts_stream_put_raw(st, "event: error\ndata: ", 19);
        ts_stream_put_raw(st, text, strlen(text));
        ts_stream_put_raw(st, "\n\n", 2);
        free(text);
    }
}

/* ---- POST /v1/messages/count_tokens --------------------------------------------------------- */

ts_reply ts_handle_count_tokens(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                int sock) {
    const ts_dialect *d = ep->dialect;
    ts_api_limits lim = ts_server_limits(s);
    ts_api_request r;
    ts_api_error e;
    if (ts_api_parse_anthropic(body, len, &lim, true, &r, &e) != TS_OK) {
        return ts_reply_error_in(d, &e);
    }
    ts_req_cancel rc;
    ts_req_cancel_init(&rc, s, sock);
    const int32_t *ids = NULL;
    int32_t *owned = NULL, n = 0;
    ts_status st = ts_server_prompt_ids(s, &r, 0, &rc, &ids, &n, &owned, &e);
    ts_free(owned);
    ts_api_request_free(&r);
    if (st != TS_OK) {
        return e.status == 499 ? (ts_reply){.status = 499, .response = NULL}
                               : ts_reply_error_in(d, &e);
    }
    char text[64];
    snprintf(text, sizeof text, "{\"input_tokens\":%d}", n);
    return ts_reply_json(200, strdup(text));
}
