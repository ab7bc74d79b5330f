/*
 * output.c — turning sampled tokens into events: detokenization, stop strings, finish.
 *
 * Text reaches the caller only when it is final: the streaming detokenizer never splits a
 * UTF-8 character, and while the tail of a sequence's text could still become one of its stop
 * strings it is held back. When a stop string appears, the text before it is sent and the
 * sequence finishes with "stop" (the stop string itself is not sent, as OpenAI does).
 */
#include "engine/engine_internal.h"

#include <stdlib.h>
#include <string.h>

static bool held_append(seq *s, const char *text, size_t len) {
    if (len == 0) {
        return true;
    }
    if (s->held_len + len > s->held_cap) {
        size_t cap = s->held_cap ? s->held_cap : 64;
        while (cap < s->held_len + len) {
            cap *= 2;
        }
        char *h = realloc(s->held, cap);
        if (h == NULL) {
            return false;
        }
        s->held = h;
        s->held_cap = cap;
    }
    memcpy(s->held + s->held_len, text, len);
    s->held_len += len;
    return true;
}

/* Earliest occurrence of any stop string in held text, or -1; *which gets the index of the
 * stop string found there (the first listed when several begin at the same byte). */
static long find_stop(const seq *s, int32_t *which) {
    const request *r = s->req;
    long best = -1;
    *which = -1;
    for (int32_t i = 0; i < r->params.n_stop; i++) {
        const char *stop = r->params.stop[i];
        size_t n = strlen(stop);
        for (size_t at = 0; at + n <= s->held_len; at++) {
            if (memcmp(s->held + at, stop, n) == 0) {
                if (best < 0 || (long)at < best) {
                    best = (long)at;
                    *which = i;
                }
                break;
            }
        }
    }
    return best;
}

/* Bytes at the end of held text that could begin a stop string. */
static size_t partial_stop_tail(const seq *s) {
    const request *r = s->req;
    size_t keep = 0;
    for (int32_t i = 0; i < r->params.n_stop; i++) {
        const char *stop = r->params.stop[i];
        size_t n = strlen(stop);
        for (size_t k = n - 1; k > keep; k--) {
            if (k <= s->held_len && memcmp(s->held + s->held_len - k, stop, k) == 0) {
                keep = k;
                break;
            }
        }
    }
    return keep;
}

/* Marks s finished, releases its KV blocks and slot; true when the request is complete. */
static bool finish_common(ts_engine *e, seq *s, ts_finish_reason why) {
    request *r = s->req;
    s->finish = why;
    ts_engine_unlink_seq(e, s);
    ts_engine_release_kv(e, s);
    r->n_finished++;
    int32_t live = r->forked ? r->n : 1;
    return r->n_finished >= live;
}

/* Sends one event; frees the request when it is done. */
static bool send(ts_engine *e, seq *s, int32_t token, const char *text, size_t len,
                 const ts_sample_info *info, ts_finish_reason why, const char *message,
                 int32_t stop_index) {
    request *r = s->req;
    bool done = why != TS_FINISH_NONE && finish_common(e, s, why);
    ts_engine_event ev = {
        .request_id = r->id,
        .index = s->index,
        .token = token,
        .text = text != NULL ? text : "",
        .text_len = len,
        .logprobs = r->params.logprobs ? info : NULL,
        .finish = why,
        .request_done = done,
        .prompt_tokens = r->n_prompt,
        .cached_tokens = r->cached_tokens,
        .completion_tokens = s->n_generated,
        .message = message,
        .stop_index = why == TS_FINISH_STOP ? stop_index : -1,
    };
    if (r->cb != NULL) {
        r->cb(&ev, r->user);
    }
    if (done) {
        ts_engine_retire_request(e, r);
    }
    return done;
}

bool ts_engine_emit_token(ts_engine *e, seq *s, int32_t token, const ts_sample_info *info) {
    request *r = s->req;
    s->tokens[s->n_tokens++] = token;
    s->n_generated++;
    e->generated++;
    ts_error err;
    if (ts_sampler_accept(s->sampler, token, &err) != TS_OK) {
        return send(e, s, token, NULL, 0, info, TS_FINISH_ERROR, err.msg, -1);
    }
    ts_finish_reason why = TS_FINISH_NONE;
    /* A grammar allows end-of-generation only where the output is complete: it ends even
     * with ignore_eos. */
    bool eog = (!r->params.ignore_eos || s->gm != NULL) && ts_tokenizer_is_eog(e->tok, token);
    if (eog) {
        why = TS_FINISH_STOP;
    } else {
        const char *piece = NULL;
        size_t len = 0;
        if (ts_detok_stream_push(s->detok, token, &piece, &len, &err) != TS_OK ||
            !held_append(s, piece, len)) {
            return send(e, s, token, NULL, 0, info, TS_FINISH_ERROR, "detokenization failed", -1);
        }
    }
    if (why == TS_FINISH_NONE && (s->n_generated >= r->max_tokens || s->n_tokens >= e->cfg.n_ctx)) {
        why = TS_FINISH_LENGTH;
    }
    if (why != TS_FINISH_NONE) {
        /* Nothing follows: the detokenizer's remainder is final text. */
        const char *rest = NULL;
        size_t len = 0;
        if (ts_detok_stream_flush(s->detok, &rest, &len, &err) == TS_OK) {
            held_append(s, rest, len);
        }
    }
    size_t emit = s->held_len;
    int32_t stop_index = -1;
    if (r->params.n_stop > 0) {
        long at = find_stop(s, &stop_index);
        if (at >= 0) {
            emit = (size_t)at;
            why = TS_FINISH_STOP;
        } else if (why == TS_FINISH_NONE) {
            emit = s->held_len - partial_stop_tail(s);
        }
    }
    /* Send from a copy: finishing may free s (and its buffer) before the callback returns. */
    char small[256];
    char *text = emit <= sizeof small ? small : malloc(emit);
    if (text == NULL) {
        return send(e, s, token, NULL, 0, info, TS_FINISH_ERROR, "out of memory", -1);
    }
    /* held is NULL until the first non-empty piece (an eog or control token first). */
    if (s->held_len > 0) {
        memcpy(text, s->held, emit);
        memmove(s->held, s->held + emit, s->held_len - emit);
        s->held_len -= emit;
    }
    bool done = send(e, s, token, text, emit, info, why, NULL, stop_index);
    if (text != small) {
        free(text);
    }
    return done;
}

bool ts_engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why, const char *message) {
    return send(e, s, -1, NULL, 0, NULL, why, message, -1);
}
