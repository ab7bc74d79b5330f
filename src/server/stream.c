/*
 * stream.c — `stream: true` answers as server-sent events: the loop every dialect shares, and
 * the frames of the OpenAI rows (dialect.h; the Anthropic row's are in anthropic.c).
 *
 * OpenAI: each event is `data: <json>\n\n`; the stream ends with `data: [DONE]\n\n`. Chat streams
 * open with one chunk per choice carrying the assistant role, then content deltas; the chunk that
 * ends a choice carries its finish_reason. When the chat answer is parsed (reasoning, tool
 * calls; chat_out.h), each choice's text goes through its own parser and every event it gives
 * becomes a chunk (content, reasoning_content, tool_calls deltas); a token's logprobs ride on
 * the first chunk its text produced, or on a chunk with an empty delta when its text is still
 * held back; the finish_reason comes alone in a last chunk with an empty delta. With
 * stream_options.include_usage, a last chunk with empty choices carries usage. A generation error
 * or a shutdown mid-stream becomes `data: {"error": {...}}` followed by [DONE], which OpenAI
 * clients raise as an APIError.
 *
 * libmicrohttpd calls the content reader below on its event thread, which must not block: with
 * nothing to send, the reader parks the connection (ts_conns_park) until the job's eventfd
 * fires, the client hangs up or 15 s of silence call for the dialect's keep-alive (an SSE
 * comment, or Anthropic's ping event, which keeps proxies from closing the connection), and
 * returns 0. A client that goes away is noticed at once by
 * the socket (or by a failed write), and its request is aborted.
 */
#include "server/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEEPALIVE_MS 15000

bool ts_stream_put_raw(ts_stream *st, const char *data, size_t n) {
    if (st->len + n > st->cap) {
        size_t cap = (st->len + n) * 2;
        char *b = realloc(st->buf, cap);
        if (b == NULL) {
            return false;
        }
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, n);
    st->len += n;
    return true;
}

bool ts_stream_put_data(ts_stream *st, cJSON *obj) {
    char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (text == NULL) {
        return false;
    }
    bool ok = ts_stream_put_raw(st, "data: ", 6) && ts_stream_put_raw(st, text, strlen(text)) &&
              ts_stream_put_raw(st, "\n\n", 2);
    free(text);
    return ok;
}

bool ts_stream_put_event(ts_stream *st, const char *name, cJSON *obj) {
    if (obj == NULL) {
        return false;
    }
    return ts_stream_put_raw(st, "event: ", 7) && ts_stream_put_raw(st, name, strlen(name)) &&
           ts_stream_put_raw(st, "\n", 1) && ts_stream_put_data(st, obj);
}

void ts_stream_usage(const ts_stream *st, uint64_t *prompt, uint64_t *cached) {
    *prompt = *cached = 0;
    for (int k = 0; k < TS_API_MAX_PROMPTS; k++) {
        *prompt += st->prompt_sub[k];
        *cached += st->cached_sub[k];
    }
}

bool ts_stream_chat_pieces(ts_stream *st, const ts_job_event *ev,
                           void (*on)(ts_stream *st, const ts_chat_event *piece)) {
    ts_chat_out *po = st->chat != NULL ? st->chat[0] : NULL;
    if (po == NULL) {
        const ts_chat_event whole = {
            .kind = TS_CHAT_EVENT_CONTENT, .text = ev->text, .len = ev->text_len};
        on(st, &whole);
        return true;
    }
    ts_status s1 = ts_chat_out_feed(po, ev->text, ev->text_len);
    ts_status s2 = ev->finish != TS_FINISH_NONE ? ts_chat_out_finish(po) : TS_OK;
    if (s1 != TS_OK || s2 != TS_OK) {
        return false;
    }
    const ts_chat_event *evs = NULL;
    size_t n = ts_chat_out_events(po, &evs);
    for (size_t i = 0; i < n && !st->error_sent; i++) {
        on(st, &evs[i]);
    }
    ts_chat_out_clear(po);
    return true;
}

static cJSON *chunk_base(ts_stream *st) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", st->id);
    cJSON_AddStringToObject(c, "object",
                            st->kind == TS_API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(c, "created", st->created);
    cJSON_AddStringToObject(c, "model", st->s->model_name);
    return c;
}

void ts_openai_stream_error(ts_stream *st, int status, const char *code, const char *msg) {
    if (st->error_sent) {
        return;
    }
    ts_api_error e;
    ts_api_error_set(&e, status, status < 500 ? "invalid_request_error" : "server_error", NULL,
                     code, "%s", msg);
    char *text = ts_api_error_json(&e);
    if (text != NULL) {
        ts_stream_put_raw(st, "data: ", 6);
        ts_stream_put_raw(st, text, strlen(text));
        ts_stream_put_raw(st, "\n\n", 2);
        free(text);
    }
    st->error_sent = true;
}

static cJSON *chat_choice(int32_t index, cJSON *delta, cJSON *logprobs, const char *finish) {
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", index);
    cJSON_AddItemToObject(ch, "delta", delta != NULL ? delta : cJSON_CreateObject());
    if (logprobs != NULL) {
        cJSON_AddItemToObject(ch, "logprobs", logprobs);
    } else {
        cJSON_AddNullToObject(ch, "logprobs");
    }
    if (finish != NULL) {
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    } else {
        cJSON_AddNullToObject(ch, "finish_reason");
    }
    return ch;
}

static void put_choice(ts_stream *st, cJSON *ch) {
    cJSON *c = chunk_base(st);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "choices"), ch);
    ts_stream_put_data(st, c);
}

/* A chat event through the choice's parser (finish set: the answer ended normally). */
static void put_parsed(ts_stream *st, ts_chat_out *po, const ts_job_event *ev, bool lp,
                       ts_finish_reason finish) {
    ts_status s1 = ts_chat_out_feed(po, ev->text, ev->text_len);
    ts_status s2 = finish != TS_FINISH_NONE ? ts_chat_out_finish(po) : TS_OK;
    if (s1 != TS_OK || s2 != TS_OK) {
        st->d->stream_error(st, 500, NULL, "out of memory");
        return;
    }
    cJSON *logprobs = NULL;
    if (lp) {
        logprobs = cJSON_CreateObject();
        cJSON_AddItemToArray(cJSON_AddArrayToObject(logprobs, "content"),
                             ts_server_chat_logprob(st->s->llm, &ev->logprobs));
    }
    const ts_chat_event *evs = NULL;
    size_t n = ts_chat_out_events(po, &evs);
    for (size_t i = 0; i < n; i++) {
        cJSON *deltas[2];
        int k = ts_chat_out_event_deltas(&evs[i], deltas);
        if (k == 0) {
            st->d->stream_error(st, 500, NULL, "out of memory");
            break;
        }
        for (int d = 0; d < k; d++) {
            put_choice(st, chat_choice(ev->choice, deltas[d], logprobs, NULL));
            logprobs = NULL;
        }
    }
    ts_chat_out_clear(po);
    if (logprobs != NULL) {
        put_choice(st, chat_choice(ev->choice, NULL, logprobs, NULL));
    }
    if (finish != TS_FINISH_NONE) {
        const char *why =
            ts_chat_out_tool_finish(po, finish) ? "tool_calls" : ts_finish_reason_name(finish);
        put_choice(st, chat_choice(ev->choice, NULL, NULL, why));
    }
}

void ts_openai_stream_event(ts_stream *st, const ts_job_event *ev) {
    const char *finish = NULL;
    if (ev->finish == TS_FINISH_STOP || ev->finish == TS_FINISH_LENGTH) {
        finish = ts_finish_reason_name(ev->finish);
    }
    bool lp = ev->has_logprobs && ev->token >= 0;
    if (st->chat != NULL && st->chat[ev->choice] != NULL) {
        put_parsed(st, st->chat[ev->choice], ev, lp, finish != NULL ? ev->finish : TS_FINISH_NONE);
        return;
    }
    if (ev->text_len == 0 && !lp && finish == NULL) {
        return; /* text held back (a possible stop string): nothing to say yet */
    }
    cJSON *c = chunk_base(st);
    cJSON *choices = cJSON_AddArrayToObject(c, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", ev->choice);
    if (st->kind == TS_API_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        if (ev->text_len > 0 || finish == NULL) {
            cJSON_AddStringToObject(delta, "content", ev->text);
        }
        if (lp) {
            cJSON *l = cJSON_AddObjectToObject(ch, "logprobs");
            cJSON *content = cJSON_AddArrayToObject(l, "content");
            cJSON_AddItemToArray(content, ts_server_chat_logprob(st->s->llm, &ev->logprobs));
        } else {
            cJSON_AddNullToObject(ch, "logprobs");
        }
    } else {
        cJSON_AddStringToObject(ch, "text", ev->text);
        if (lp) {
            cJSON *l = ts_server_cmpl_logprobs_new();
            ts_server_cmpl_logprobs_add(l, st->s->llm, &ev->logprobs, st->text_off[ev->choice]);
            cJSON_AddItemToObject(ch, "logprobs", l);
        } else {
            cJSON_AddNullToObject(ch, "logprobs");
        }
    }
    st->text_off[ev->choice] += ev->text_len;
    if (finish != NULL) {
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    } else {
        cJSON_AddNullToObject(ch, "finish_reason");
    }
    cJSON_AddItemToArray(choices, ch);
    ts_stream_put_data(st, c);
}

void ts_openai_stream_end(ts_stream *st) {
    if (st->include_usage && !st->error_sent) {
        uint64_t prompt = 0, cached = 0;
        ts_stream_usage(st, &prompt, &cached);
        cJSON *c = chunk_base(st);
        cJSON_AddArrayToObject(c, "choices");
        cJSON_AddItemToObject(c, "usage", ts_server_usage(prompt, st->completion, cached));
        ts_stream_put_data(st, c);
    }
    ts_stream_put_raw(st, "data: [DONE]\n\n", 14);
    st->finished = true;
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max) {
    ts_stream *st = cls;
    (void)pos;
    for (;;) {
        if (st->off < st->len) {
            size_t n = st->len - st->off < max ? st->len - st->off : max;
            memcpy(out, st->buf + st->off, n);
            st->off += n;
            st->t_out = ts_server_now();
            return (ssize_t)n;
        }
        st->off = st->len = 0;
        if (st->finished) {
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (st->j == NULL) {
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        bool done = false;
        ts_job_event *evs = ts_job_take(st->j, &done);
        for (ts_job_event *ev = evs; ev != NULL; ev = ev->next) {
            int32_t k = ev->choice / st->j->n_per;
            st->prompt_sub[k] = (uint64_t)ev->prompt_tokens;
            st->cached_sub[k] = (uint64_t)ev->cached_tokens;
            if (ev->finish != TS_FINISH_NONE) {
                st->completion += (uint64_t)ev->completion_tokens;
            }
            if (ev->finish == TS_FINISH_ERROR) {
                const char *msg = ev->message ? ev->message : "generation failed";
                bool limit =
                    strncmp(msg, TS_GRAMMAR_LIMIT_PREFIX, strlen(TS_GRAMMAR_LIMIT_PREFIX)) == 0;
                st->d->stream_error(st, limit ? 400 : 500, NULL, msg);
            } else if (ev->finish == TS_FINISH_ABORT) {
                st->d->stream_error(st, 503, "server_shutdown",
                                    "the server shut down before the request finished");
            } else if (!st->error_sent) {
                st->d->stream_event(st, ev);
            }
        }
        ts_job_events_free(evs);
        if (done) {
            st->d->stream_end(st);
            ts_job_release(st->j);
            st->j = NULL;
            continue;
        }
        if (st->len > 0) {
            continue;
        }
        int w = ts_job_wait(st->j, st->sock, 0);
        int quiet_left = KEEPALIVE_MS - (int)((ts_server_now() - st->t_out) * 1e3);
        if (w == 0 && quiet_left > 0) {
            if (ts_conns_park(st->s, st->sock, st->j->efd, quiet_left)) {
                return 0; /* called again once resumed */
            }
            w = ts_job_wait(st->j, st->sock, quiet_left);
        }
        if (w < 0) {
            ts_job_release(st->j); /* aborts the context requests */
            st->j = NULL;
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (w == 0 && ts_server_now() - st->t_out >= KEEPALIVE_MS / 1e3) {
            ts_stream_put_raw(st, st->d->keepalive, strlen(st->d->keepalive));
        }
    }
}

static void stream_free(void *cls) {
    ts_stream *st = cls;
    ts_job_release(st->j);
    free(st->text_off);
    for (int32_t i = 0; st->chat != NULL && i < st->n_choices; i++) {
        ts_chat_out_destroy(st->chat[i]);
    }
    free(st->chat);
    for (int32_t i = 0; i < st->n_stops; i++) {
        free(st->stops[i]);
    }
    if (st->dialect_data_free != NULL) {
        st->dialect_data_free(st->dialect_data);
    }
    cJSON_Delete(st->dialect_req);
    free(st->buf);
    free(st);
}

void ts_openai_stream_open(ts_stream *st) {
    if (st->kind != TS_API_CHAT) {
        return;
    }
    for (int32_t i = 0; i < st->n_choices; i++) {
        cJSON *c = chunk_base(st);
        cJSON *choices = cJSON_AddArrayToObject(c, "choices");
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        cJSON *delta = cJSON_AddObjectToObject(ch, "delta");
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", "");
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddNullToObject(ch, "finish_reason");
        cJSON_AddItemToArray(choices, ch);
        ts_stream_put_data(st, c);
    }
}

ts_reply ts_stream_start(ts_server *s, ts_job *j, const ts_dialect *d, const ts_api_request *r,
                         const ts_chat_out_config *chat, uint64_t prompt_tokens, int sock) {
    ts_stream *st = calloc(1, sizeof *st);
    int32_t n_choices = j->n_subs * j->n_per;
    bool oom = st == NULL;
    if (st != NULL) {
        st->n_choices = n_choices;
        st->text_off = calloc((size_t)n_choices, sizeof *st->text_off);
        oom = st->text_off == NULL;
    }
    if (!oom && chat != NULL && ts_chat_out_active(chat)) {
        st->chat = calloc((size_t)n_choices, sizeof *st->chat);
        oom = st->chat == NULL;
        for (int32_t i = 0; !oom && i < n_choices; i++) {
            ts_chat_out_config cc = *chat;
            cc.id_seed += (uint64_t)i * TS_CHAT_OUT_CHOICE_SEED; /* ids differ per choice */
            st->chat[i] = ts_chat_out_create(&cc);
            oom = st->chat[i] == NULL;
        }
    }
    for (int32_t i = 0; !oom && i < r->params.n_stop; i++) {
        st->stops[i] = strdup(r->stop[i]);
        oom = st->stops[i] == NULL;
        st->n_stops = i + 1;
    }
    if (!oom && d->stream_keeps != NULL) {
        const cJSON *keep = cJSON_GetObjectItemCaseSensitive(r->root, d->stream_keeps);
        st->dialect_req = cJSON_CreateObject();
        oom = st->dialect_req == NULL ||
              (keep != NULL && !cJSON_AddItemToObject(st->dialect_req, d->stream_keeps,
                                                      cJSON_Duplicate(keep, true)));
    }
    if (oom) {
        if (st != NULL) {
            st->j = NULL;
            stream_free(st);
        }
        ts_job_release(j);
        ts_api_error e;
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return ts_reply_error_in(d, &e);
    }
    st->s = s;
    st->j = j;
    st->d = d;
    st->prompt_tokens = prompt_tokens;
    st->block_kind = -1;
    st->stop_index = -1;
    st->kind = r->kind;
    st->include_usage = r->include_usage;
    st->sock = sock;
    st->n_choices = n_choices;
    st->created = (double)time(NULL);
    st->t_out = ts_server_now();
    ts_server_make_id(s, d->id_prefix, st->id, sizeof st->id);
    d->stream_open(st);
    ts_reply reply = {.status = 200};
    reply.response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, st, stream_free);
    if (reply.response == NULL) {
        stream_free(st);
        ts_api_error e;
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "cannot create a response");
        return ts_reply_error_in(d, &e);
    }
    MHD_add_response_header(reply.response, "Content-Type",
                            d->stream_content_type != NULL ? d->stream_content_type
                                                           : "text/event-stream");
    MHD_add_response_header(reply.response, "Cache-Control", "no-cache");
    MHD_add_response_header(reply.response, "X-Accel-Buffering", "no");
    return reply;
}
