/*
 * responses.c — the OpenAI Responses row of the dialect table (dialect.h): the response object
 * a non-streamed answer returns, the typed event sequence of a streamed one, the store of
 * responses behind previous_response_id, and GET / DELETE /v1/responses/{id}. Bodies are read
 * in api_responses.c.
 *
 * Output items come from the same parser as OpenAI's chat message (chat_out.h): reasoning is a
 * reasoning item (its text as a reasoning_text content part), the content a message item with
 * one output_text part, each tool call a function_call item. A stream sends, as OpenAI does,
 * every event as `event: <type>` + `data: {..., "type": <type>, "sequence_number": n}`:
 *
 *   response.created, response.in_progress (the response with no output yet),
 *   per item: response.output_item.added, then for a message response.content_part.added,
 *   response.output_text.delta..., response.output_text.done, response.content_part.done; for
 *   reasoning response.reasoning_text.delta..., response.reasoning_text.done; for a function
 *   call one response.function_call_arguments.delta holding the whole arguments (a call is
 *   reported once it has parsed) and response.function_call_arguments.done;
 *   response.output_item.done,
 *   response.completed (or response.incomplete when max_output_tokens cut the answer).
 *
 * A failure mid-stream is an `error` event followed by response.failed. Responses are stored
 * (unless store is false) in server memory, bounded by count and bytes (--responses-max,
 * --responses-max-bytes); the oldest are dropped first. A stored response keeps its input
 * items (those of its previous responses included) so that previous_response_id can continue
 * the conversation.
 */
#define _GNU_SOURCE /* memmem */
#include "server/stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the store ------------------------------------------------------------------------------ */

typedef struct entry {
    struct entry *next; /* newer */
    char id[64];
    char *response; /* the response object's JSON text */
    char *items;    /* input + output items as a JSON array's text */
    size_t bytes;
} entry;

struct ts_resp_store {
    pthread_mutex_t mu;
    entry *oldest, *newest;
    size_t count, bytes;
    size_t max_count, max_bytes;
};

ts_resp_store *ts_resp_store_create(size_t max_count, size_t max_bytes) {
    ts_resp_store *st = calloc(1, sizeof *st);
    if (st == NULL) {
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->max_count = max_count;
    st->max_bytes = max_bytes;
    return st;
}

static void entry_free(entry *e) {
    free(e->response);
    free(e->items);
    free(e);
}

void ts_resp_store_destroy(ts_resp_store *st) {
    if (st == NULL) {
        return;
    }
    for (entry *e = st->oldest, *next = NULL; e != NULL; e = next) {
        next = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Keeps a response (takes response and items); dropped at once when it alone is over the
 * bytes bound or the store holds none. */
static void store_put(ts_resp_store *st, const char *id, char *response, char *items) {
    entry *e = calloc(1, sizeof *e);
    if (st == NULL || e == NULL || response == NULL || items == NULL) {
        free(e);
        free(response);
        free(items);
        return;
    }
    snprintf(e->id, sizeof e->id, "%s", id);
    e->response = response;
    e->items = items;
    e->bytes = strlen(response) + strlen(items) + sizeof *e;
    if (st->max_count == 0 || e->bytes > st->max_bytes) {
        entry_free(e);
        return;
    }
    pthread_mutex_lock(&st->mu);
    while (st->oldest != NULL &&
           (st->count + 1 > st->max_count || st->bytes + e->bytes > st->max_bytes)) {
        entry *old = st->oldest;
        st->oldest = old->next;
        if (st->oldest == NULL) {
            st->newest = NULL;
        }
        st->count--;
        st->bytes -= old->bytes;
        entry_free(old);
    }
    if (st->newest != NULL) {
        st->newest->next = e;
    } else {
        st->oldest = e;
    }
    st->newest = e;
    st->count++;
    st->bytes += e->bytes;
    pthread_mutex_unlock(&st->mu);
}

/* A copy of a stored response's JSON (want_items: its items instead); NULL when unknown.
 * remove: the entry is dropped. */
static char *store_get(ts_resp_store *st, const char *id, bool want_items, bool remove,
                       bool *found) {
    *found = false;
    char *copy = NULL;
    if (st == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&st->mu);
    entry *prev = NULL;
    for (entry *e = st->oldest; e != NULL; prev = e, e = e->next) {
        if (strcmp(e->id, id) != 0) {
            continue;
        }
        *found = true;
        if (remove) {
            if (prev != NULL) {
                prev->next = e->next;
            } else {
                st->oldest = e->next;
            }
            if (st->newest == e) {
                st->newest = prev;
            }
            st->count--;
            st->bytes -= e->bytes;
            entry_free(e);
        } else {
            copy = strdup(want_items ? e->items : e->response);
        }
        break;
    }
    pthread_mutex_unlock(&st->mu);
    return copy;
}

/* An id as OpenAI spells them: "resp_...", "msg_...", "fc_...", "rs_...". */
static void underscore(char *id, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(id, prefix, n) == 0 && id[n] == '-') {
        id[n] = '_';
    }
}

static void make_id(ts_server *s, const char *prefix, char *buf, size_t size) {
    ts_server_make_id(s, prefix, buf, size);
    underscore(buf, prefix);
}

/* ---- the response object -------------------------------------------------------------------- */

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

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

static void echo(cJSON *o, const cJSON *x, const char *from, const char *to, cJSON *dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, from);
    if (v != NULL) {
        cJSON_Delete(dflt);
        cJSON_AddItemToObject(o, to, cJSON_Duplicate(v, true));
    } else {
        cJSON_AddItemToObject(o, to, dflt);
    }
}

/* reasoning: the reasoning text's tokens as the tokenizer counts them again, which can exceed
 * the tokens the model sampled for it (text of odd tokens retokenizes longer): capped there. */
static cJSON *usage_json(uint64_t prompt, uint64_t cached, uint64_t output, uint64_t reasoning) {
    reasoning = reasoning < output ? reasoning : output;
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", (double)prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens",
                            (double)cached);
    cJSON_AddNumberToObject(u, "output_tokens", (double)output);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens",
                            (double)reasoning);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + output));
    return u;
}

/* The response object; output and usage are taken (usage NULL: null). x: the request's
 * x_tessera_responses. */
static cJSON *response_json(ts_server *s, const char *id, double created, const char *status,
                            cJSON *output, cJSON *usage, const cJSON *x) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddNullToObject(o, "error");
    if (strcmp(status, "incomplete") == 0) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason",
                                "max_output_tokens");
    } else {
        cJSON_AddNullToObject(o, "incomplete_details");
    }
    echo(o, x, "instructions", "instructions", cJSON_CreateNull());
    echo(o, x, "max_output_tokens", "max_output_tokens", cJSON_CreateNull());
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddItemToObject(o, "output", output != NULL ? output : cJSON_CreateArray());
    echo(o, x, "parallel_tool_calls", "parallel_tool_calls", cJSON_CreateTrue());
    echo(o, x, "x_previous_response_id", "previous_response_id", cJSON_CreateNull());
    echo(o, x, "store", "store", cJSON_CreateTrue());
    echo(o, x, "temperature", "temperature", cJSON_CreateNumber(1.0));
    echo(o, x, "text", "text", NULL);
    if (cJSON_GetObjectItemCaseSensitive(o, "text") == NULL) {
        cJSON_AddItemToObject(cJSON_AddObjectToObject(o, "text"), "format", typed("text"));
    }
    echo(o, x, "tool_choice", "tool_choice", cJSON_CreateString("auto"));
    echo(o, x, "tools", "tools", cJSON_CreateArray());
    echo(o, x, "top_p", "top_p", cJSON_CreateNumber(1.0));
    echo(o, x, "metadata", "metadata", cJSON_CreateObject());
    echo(o, x, "reasoning", "reasoning", cJSON_CreateNull());
    echo(o, x, "user", "user", cJSON_CreateNull());
    cJSON_AddStringToObject(o, "truncation", "disabled");
    cJSON_AddItemToObject(o, "usage", usage != NULL ? usage : cJSON_CreateNull());
    return o;
}

static cJSON *message_item(const char *id, const char *status, const char *text, size_t len) {
    cJSON *it = typed("message");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text != NULL) {
        cJSON *p = typed("output_text");
        cJSON_AddItemToObject(p, "text", string_n(text, len));
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToArray(content, p);
    }
    return it;
}

static cJSON *reasoning_item(const char *id, const char *text, size_t len) {
    cJSON *it = typed("reasoning");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddArrayToObject(it, "summary");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text != NULL) {
        cJSON *p = typed("reasoning_text");
        cJSON_AddItemToObject(p, "text", string_n(text, len));
        cJSON_AddItemToArray(content, p);
    }
    return it;
}

static cJSON *call_item(const char *id, const char *status, const char *call_id, const char *name,
                        const char *arguments) {
    cJSON *it = typed("function_call");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", name);
    cJSON_AddStringToObject(it, "arguments", arguments);
    cJSON_AddStringToObject(it, "status", status);
    return it;
}

/* Tokens of the reasoning text (the engine counts tokens, not which part they fed). */
static uint64_t count_tokens(ts_server *s, const char *text, size_t len) {
    if (len == 0) {
        return 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    ts_error err = {0};
    if (ts_llm_tokenize(s->llm, text, len, 0, 0, &ids, &n, &err) != TS_OK) {
        return 0;
    }
    ts_free(ids);
    return n;
}

/* Stores the finished response (unless store is false). */
static void keep(ts_server *s, const char *id, const cJSON *resp, const cJSON *x) {
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(x, "store");
    if (cJSON_IsFalse(store) || s->responses == NULL) {
        return;
    }
    cJSON *items = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(x, "input"), true);
    if (items == NULL) {
        items = cJSON_CreateArray();
    }
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(resp, "output");
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, out) {
        cJSON_AddItemToArray(items, cJSON_Duplicate(it, true));
    }
    char *items_text = cJSON_PrintUnformatted(items);
    cJSON_Delete(items);
    store_put(s->responses, id, cJSON_PrintUnformatted(resp), items_text);
}

static const cJSON *state_of(const ts_api_request *r) {
    return cJSON_GetObjectItemCaseSensitive(r->root, "x_tessera_responses");
}

cJSON *ts_responses_answer_json(ts_server *s, ts_answer *a) {
    ts_answer_choice *c = &a->choices[0];
    char id[64], item_id[64];
    make_id(s, "resp", id, sizeof id);
    cJSON *output = cJSON_CreateArray();
    uint64_t reasoning_tokens = 0;
    if (c->parsed != NULL) {
        size_t n = 0;
        const char *reasoning = ts_chat_out_reasoning(c->parsed, &n);
        if (n > 0) {
            make_id(s, "rs", item_id, sizeof item_id);
            cJSON_AddItemToArray(output, reasoning_item(item_id, reasoning, n));
            reasoning_tokens = count_tokens(s, reasoning, n);
        }
        const char *text = ts_chat_out_content(c->parsed, &n);
        if (n > 0) {
            make_id(s, "msg", item_id, sizeof item_id);
            cJSON_AddItemToArray(output, message_item(item_id, "completed", text, n));
        }
        const ts_chat_tool_call *calls = NULL;
        size_t n_calls = ts_chat_out_tool_calls(c->parsed, &calls);
        for (size_t i = 0; i < n_calls; i++) {
            make_id(s, "fc", item_id, sizeof item_id);
            cJSON_AddItemToArray(output, call_item(item_id, "completed", calls[i].id, calls[i].name,
                                                   calls[i].arguments));
        }
    } else if (c->len > 0) {
        make_id(s, "msg", item_id, sizeof item_id);
        cJSON_AddItemToArray(output, message_item(item_id, "completed", c->text, c->len));
    }
    const char *status = c->finish == TS_FINISH_LENGTH ? "incomplete" : "completed";
    cJSON *root = response_json(
        s, id, (double)time(NULL), status, output,
        usage_json(a->prompt_tokens, a->cached_tokens, a->completion_tokens, reasoning_tokens),
        state_of(a->r));
    if (root == NULL || cJSON_GetObjectItemCaseSensitive(root, "usage") == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    keep(s, id, root, state_of(a->r));
    return root;
}

/* ---- streams ------------------------------------------------------------------------------ */

enum { OPEN_NONE = 0, OPEN_MESSAGE = 1, OPEN_REASONING = 2 };

typedef struct resp_stream {
    int64_t seq;
    int open;
    int32_t out_index; /* the open item's index in output */
    char item_id[64];
    char *text; /* the open item's text so far */
    size_t len, cap;
    cJSON *output; /* the finished items */
    uint64_t reasoning_tokens;
} resp_stream;

static void resp_stream_free(void *p) {
    resp_stream *rs = p;
    if (rs != NULL) {
        free(rs->text);
        cJSON_Delete(rs->output);
        free(rs);
    }
}

static void event(ts_stream *st, cJSON *o) {
    resp_stream *rs = st->dialect_data;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    cJSON_AddNumberToObject(o, "sequence_number", (double)rs->seq++);
    char name[64];
    snprintf(name, sizeof name, "%s", cJSON_IsString(type) ? type->valuestring : "error");
    if (!ts_stream_put_event(st, name, o)) {
        ts_responses_stream_error(st, 500, NULL, "out of memory");
    }
}

static cJSON *item_event(const char *type, resp_stream *rs) {
    cJSON *o = typed(type);
    cJSON_AddStringToObject(o, "item_id", rs->item_id);
    cJSON_AddNumberToObject(o, "output_index", rs->out_index);
    return o;
}

static void added(ts_stream *st, cJSON *item) {
    resp_stream *rs = st->dialect_data;
    cJSON *o = typed("response.output_item.added");
    cJSON_AddNumberToObject(o, "output_index", rs->out_index);
    cJSON_AddItemToObject(o, "item", item);
    event(st, o);
}

static void done(ts_stream *st, cJSON *item) {
    resp_stream *rs = st->dialect_data;
    cJSON *o = typed("response.output_item.done");
    cJSON_AddNumberToObject(o, "output_index", rs->out_index);
    cJSON_AddItemToObject(o, "item", cJSON_Duplicate(item, true));
    event(st, o);
    cJSON_AddItemToArray(rs->output, item);
    rs->out_index++;
}

static void close_item(ts_stream *st) {
    resp_stream *rs = st->dialect_data;
    if (rs->open == OPEN_MESSAGE) {
        cJSON *o = item_event("response.output_text.done", rs);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddItemToObject(o, "text", string_n(rs->text, rs->len));
        cJSON_AddArrayToObject(o, "logprobs");
        event(st, o);
        cJSON *item = message_item(rs->item_id, "completed", rs->text, rs->len);
        o = item_event("response.content_part.done", rs);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddItemToObject(
            o, "part",
            cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(item, "content"), 0), true));
        event(st, o);
        done(st, item);
    } else if (rs->open == OPEN_REASONING) {
        cJSON *o = item_event("response.reasoning_text.done", rs);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddItemToObject(o, "text", string_n(rs->text, rs->len));
        event(st, o);
        rs->reasoning_tokens += count_tokens(st->s, rs->text, rs->len);
        done(st, reasoning_item(rs->item_id, rs->text, rs->len));
    }
    rs->open = OPEN_NONE;
    rs->len = 0;
}

static void text_delta(ts_stream *st, bool reasoning, const char *text, size_t len) {
    resp_stream *rs = st->dialect_data;
    if (len == 0) {
        return;
    }
    int want = reasoning ? OPEN_REASONING : OPEN_MESSAGE;
    if (rs->open != want) {
        close_item(st);
        make_id(st->s, reasoning ? "rs" : "msg", rs->item_id, sizeof rs->item_id);
        rs->open = want;
        if (reasoning) {
            added(st, reasoning_item(rs->item_id, NULL, 0));
        } else {
            added(st, message_item(rs->item_id, "in_progress", NULL, 0));
            cJSON *o = item_event("response.content_part.added", rs);
            cJSON_AddNumberToObject(o, "content_index", 0);
            cJSON *p = typed("output_text");
            cJSON_AddStringToObject(p, "text", "");
            cJSON_AddArrayToObject(p, "annotations");
            cJSON_AddItemToObject(o, "part", p);
            event(st, o);
        }
    }
    if (rs->len + len + 1 > rs->cap) {
        size_t cap = (rs->len + len + 1) * 2;
        char *b = realloc(rs->text, cap);
        if (b == NULL) {
            ts_responses_stream_error(st, 500, NULL, "out of memory");
            return;
        }
        rs->text = b;
        rs->cap = cap;
    }
    memcpy(rs->text + rs->len, text, len);
    rs->len += len;
    cJSON *o =
        item_event(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", rs);
    cJSON_AddNumberToObject(o, "content_index", 0);
    cJSON_AddItemToObject(o, "delta", string_n(text, len));
    if (!reasoning) {
        cJSON_AddArrayToObject(o, "logprobs");
    }
    event(st, o);
}

static void call(ts_stream *st, const ts_chat_event *ev) {
    resp_stream *rs = st->dialect_data;
    close_item(st);
    make_id(st->s, "fc", rs->item_id, sizeof rs->item_id);
    added(st, call_item(rs->item_id, "in_progress", ev->id, ev->name, ""));
    cJSON *o = item_event("response.function_call_arguments.delta", rs);
    cJSON_AddStringToObject(o, "delta", ev->arguments);
    event(st, o);
    o = item_event("response.function_call_arguments.done", rs);
    cJSON_AddStringToObject(o, "name", ev->name);
    cJSON_AddStringToObject(o, "arguments", ev->arguments);
    event(st, o);
    done(st, call_item(rs->item_id, "completed", ev->id, ev->name, ev->arguments));
}

static cJSON *whole(ts_stream *st, const char *status, cJSON *output, cJSON *usage) {
    return response_json(st->s, st->id, st->created, status, output, usage,
                         cJSON_GetObjectItemCaseSensitive(st->dialect_req, "x_tessera_responses"));
}

void ts_responses_stream_open(ts_stream *st) {
    resp_stream *rs = calloc(1, sizeof *rs);
    if (rs != NULL) {
        rs->output = cJSON_CreateArray();
    }
    if (rs == NULL || rs->output == NULL) {
        resp_stream_free(rs);
        st->error_sent = true; /* nothing can be written: the stream ends at once */
        return;
    }
    st->dialect_data = rs;
    st->dialect_data_free = resp_stream_free;
    underscore(st->id, "resp");
    cJSON *o = typed("response.created");
    cJSON_AddItemToObject(o, "response", whole(st, "in_progress", NULL, NULL));
    event(st, o);
    o = typed("response.in_progress");
    cJSON_AddItemToObject(o, "response", whole(st, "in_progress", NULL, NULL));
    event(st, o);
}

static void responses_piece(ts_stream *st, const ts_chat_event *piece) {
    if (piece->kind == TS_CHAT_EVENT_TOOL_CALL) {
        call(st, piece);
    } else {
        text_delta(st, piece->kind == TS_CHAT_EVENT_REASONING, piece->text, piece->len);
    }
}

void ts_responses_stream_event(ts_stream *st, const ts_job_event *ev) {
    if (ev->choice != 0 || st->dialect_data == NULL) {
        return; /* one choice (n is 1) */
    }
    if (!ts_stream_chat_pieces(st, ev, responses_piece)) {
        ts_responses_stream_error(st, 500, NULL, "out of memory");
        return;
    }
    if (ev->finish != TS_FINISH_NONE) {
        st->finish = ev->finish;
    }
}

void ts_responses_stream_end(ts_stream *st) {
    resp_stream *rs = st->dialect_data;
    if (!st->error_sent && rs != NULL) {
        close_item(st);
    }
    if (!st->error_sent && rs != NULL) {
        uint64_t prompt = 0, cached = 0;
        ts_stream_usage(st, &prompt, &cached);
        bool cut = st->finish == TS_FINISH_LENGTH;
        cJSON *resp = whole(st, cut ? "incomplete" : "completed", rs->output,
                            usage_json(prompt, cached, st->completion, rs->reasoning_tokens));
        rs->output = NULL; /* now resp's */
        keep(st->s, st->id, resp,
             cJSON_GetObjectItemCaseSensitive(st->dialect_req, "x_tessera_responses"));
        cJSON *o = typed(cut ? "response.incomplete" : "response.completed");
        cJSON_AddItemToObject(o, "response", resp);
        event(st, o);
    }
    st->finished = true;
}

void ts_responses_stream_error(ts_stream *st, int status, const char *code, const char *message) {
    resp_stream *rs = st->dialect_data;
    if (st->error_sent || rs == NULL) {
        return;
    }
    st->error_sent = true; /* before writing: a failed write must not come back here */
    cJSON *o = typed("error");
    cJSON_AddStringToObject(o, "code",
                            code != NULL   ? code
                            : status < 500 ? "invalid_request"
                                           : "server_error");
    cJSON_AddStringToObject(o, "message", message);
    cJSON_AddNullToObject(o, "param");
    cJSON_AddNumberToObject(o, "sequence_number", (double)rs->seq++);
    ts_stream_put_event(st, "error", o);
    cJSON *resp = whole(st, "failed", rs->output, NULL);
    rs->output = NULL;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "code", code != NULL ? code : "server_error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_ReplaceItemInObject(resp, "error", e);
    o = typed("response.failed");
    cJSON_AddItemToObject(o, "response", resp);
    cJSON_AddNumberToObject(o, "sequence_number", (double)rs->seq++);
    ts_stream_put_event(st, "response.failed", o);
}

/* ---- the endpoints -------------------------------------------------------------------------- */

/* POST /v1/responses: previous_response_id resolved (its stored items put before input), then
 * the shared generation path. */
ts_reply ts_handle_responses(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                             int sock) {
    /* Only a body naming a previous response is read twice. */
    static const char key[] = "\"previous_response_id\"";
    cJSON *root =
        memmem(body, len, key, sizeof key - 1) != NULL ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "previous_response_id");
    char *items_text = NULL;
    bool found = false;
    if (cJSON_IsObject(root) && cJSON_IsString(prev)) {
        items_text = store_get(s->responses, prev->valuestring, true, false, &found);
    }
    cJSON *items = items_text != NULL ? cJSON_Parse(items_text) : NULL;
    free(items_text);
    char *rewritten = NULL;
    if (cJSON_IsArray(items)) {
        /* The stored items, then this request's input (a string is one user message). */
        cJSON *input = cJSON_DetachItemFromObjectCaseSensitive(root, "input");
        if (cJSON_IsString(input)) {
            cJSON *m = typed("message");
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", input->valuestring);
            cJSON_AddItemToArray(items, m);
            cJSON_Delete(input);
        } else if (cJSON_IsArray(input)) {
            cJSON *it = NULL;
            while ((it = cJSON_DetachItemFromArray(input, 0)) != NULL) {
                cJSON_AddItemToArray(items, it);
            }
            cJSON_Delete(input);
        } else if (input != NULL) {
            cJSON_AddItemToArray(items, input); /* refused by the parser, by its shape */
        }
        cJSON *id = cJSON_DetachItemFromObjectCaseSensitive(root, "previous_response_id");
        cJSON_DeleteItemFromObjectCaseSensitive(root, "x_previous_response_id");
        cJSON_AddItemToObject(root, "x_previous_response_id", id);
        cJSON_AddItemToObject(root, "input", items);
        items = NULL;
        rewritten = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(items);
    cJSON_Delete(root);
    ts_reply reply = rewritten != NULL
                         ? ts_handle_generate(s, ep, rewritten, strlen(rewritten), sock)
                         : ts_handle_generate(s, ep, body, len, sock);
    free(rewritten);
    return reply;
}

static ts_reply not_found(const ts_endpoint *ep, const char *id) {
    ts_api_error e;
    ts_api_error_set(&e, 404, "invalid_request_error", "response_id", NULL,
                     "Response with id '%.64s' not found.", id);
    return ts_reply_error_in(ep->dialect, &e);
}

/* GET /v1/responses/{id}: the path's rest comes as the body (a prefix row). */
ts_reply ts_handle_response_get(ts_server *s, const ts_endpoint *ep, const char *id, size_t len,
                                int sock) {
    (void)len;
    (void)sock;
    bool found = false;
    char *text = store_get(s->responses, id, false, false, &found);
    if (!found) {
        return not_found(ep, id);
    }
    if (text == NULL) {
        ts_api_error e;
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return ts_reply_error_in(ep->dialect, &e);
    }
    return ts_reply_json(200, text);
}

/* DELETE /v1/responses/{id}. */
ts_reply ts_handle_response_delete(ts_server *s, const ts_endpoint *ep, const char *id, size_t len,
                                   int sock) {
    (void)len;
    (void)sock;
    bool found = false;
    store_get(s->responses, id, false, true, &found);
    if (!found) {
        return not_found(ep, id);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddBoolToObject(o, "deleted", true);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return ts_reply_json(200, text);
}
