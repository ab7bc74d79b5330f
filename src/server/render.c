/*
 * render.c — the chat-template render and the grammar compile of a request, bounded, counted
 * and stoppable.
 *
 * Both run on the request's HTTP thread before admission, on untrusted input (a template the
 * operator chose, rendered with the client's messages; a schema or grammar the client sent).
 * So each render:
 *
 *  - reserves its share of one memory budget for all renders in flight (cfg.render_memory;
 *    the share, min(budget, 64 MiB), is the render's max_memory) and keeps it until its text
 *    is tokenized; with the budget full a request waits up to TS_RENDER_WAIT_MS, then gets 503;
 *  - runs under a wall-clock limit (cfg.render_timeout_ms);
 *  - stops when the server begins shutting down or the client hangs up (ts_req_cancelled, read
 *    by the template engine every few thousand steps).
 *
 * A grammar compile gets the same cancel and cfg.grammar_timeout_ms. What stops work maps to
 * the answer: a limit is the client's input (400), shutdown is 503, a client gone gets nothing.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/server_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/chat_caps.h"
#include "util/stop.h"

#define POLL_EVERY_NS    20000000 /* how often a render looks at its client's socket */
#define PROBE_TIMEOUT_MS 250      /* each capability probe at start */
#define PROBE_MEMORY     ((size_t)16 << 20)

/* ---- cancel --------------------------------------------------------------------------------- */

void ts_req_cancel_init(ts_req_cancel *rc, ts_server *s, int sock) {
    rc->srv = s;
    rc->sock = sock;
    atomic_init(&rc->gone, false);
    rc->next_poll_ns = 0;
}

int ts_req_cancelled(void *user) {
    ts_req_cancel *rc = user;
    if (atomic_load(&rc->srv->stopping)) {
        return 1;
    }
    if (atomic_load(&rc->gone)) {
        return 1;
    }
    if (rc->sock < 0) {
        return 0;
    }
    int64_t now = ts_now_ns();
    if (now < rc->next_poll_ns) {
        return 0;
    }
    rc->next_poll_ns = now + POLL_EVERY_NS;
    /* Only hang-ups count: a pipelined next request makes the socket readable too. */
    struct pollfd p = {.fd = rc->sock, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
        atomic_store(&rc->gone, true);
        return 1;
    }
    return 0;
}

/* ---- at create ------------------------------------------------------------------------------ */

static ts_status probe_render(void *user, const char *json, char **text) {
    ts_server *s = user;
    ts_chat_options opt = {.timeout_ms = PROBE_TIMEOUT_MS, .max_memory = PROBE_MEMORY};
    ts_error err = {0};
    size_t len = 0;
    return ts_context_chat_render_opt(s->ctx, &opt, json, strlen(json), text, &len, &err);
}

void ts_server_render_init(ts_server *s) {
    size_t budget = s->cfg.render_memory;
    s->render_share = budget < TS_RENDER_SHARE_MAX ? budget : TS_RENDER_SHARE_MAX;
    s->render_used = 0;
    /* The longest token text bounds how few tokens a text can become. */
    size_t longest = 1;
    for (int32_t id = 0; id < s->n_vocab; id++) {
        const char *piece = NULL;
        size_t n = 0;
        ts_error none = {0};
        if (ts_llm_token_to_piece(s->llm, id, 1, &piece, &n, &none) == TS_OK && n > longest) {
            longest = n;
        }
    }
    s->max_token_bytes = longest;
    ts_context_info info;
    ts_context_get_info(s->ctx, &info);
    if (info.chat_template == NULL && info.chat_template_source == NULL) {
        return; /* no template: chat requests are 400 anyway */
    }
    ts_chat_caps_probe(probe_render, s, &s->chat_caps);
    if (s->cfg.log != NULL) {
        char line[256];
        ts_chat_caps_describe(&s->chat_caps, line, sizeof line);
        fprintf(s->cfg.log, "chat template: %s\n", line);
        fflush(s->cfg.log);
    }
}

cJSON *ts_server_chat_info(ts_server *s) {
    ts_context_info info;
    ts_context_get_info(s->ctx, &info);
    ts_chat_profile profile;
    ts_context_chat_profile(s->ctx, &profile);
    cJSON *o = cJSON_CreateObject();
    if (profile.renderer != NULL) {
        cJSON_AddStringToObject(o, "name", profile.renderer);
    } else {
        cJSON_AddNullToObject(o, "name");
    }
    cJSON_AddStringToObject(o, "notice",
                            info.chat_template_notice != NULL ? info.chat_template_notice : "");
    /* How answers are read (the context's chat profile). */
    cJSON_AddStringToObject(o, "tool_format", ts_chat_tool_format_name(profile.tool_format));
    cJSON_AddStringToObject(o, "reasoning_format",
                            ts_chat_reasoning_format_name(profile.reasoning_format));
    const ts_chat_caps *c = &s->chat_caps;
    cJSON *caps = cJSON_AddObjectToObject(o, "capabilities");
    cJSON_AddBoolToObject(caps, "probed", c->probed);
    if (c->probed) {
        cJSON_AddBoolToObject(caps, "system_role", c->system_role);
        cJSON_AddBoolToObject(caps, "tools", c->tools);
        cJSON_AddBoolToObject(caps, "tool_calls", c->tool_calls);
        cJSON_AddBoolToObject(caps, "tool_responses", c->tool_responses);
        cJSON_AddBoolToObject(caps, "null_content", !c->needs_content);
    }
    return o;
}

/* ---- the budget ----------------------------------------------------------------------------- */

/* Takes a share of the budget, waiting up to TS_RENDER_WAIT_MS (in short slices, to see a
 * cancel). TS_OK, TS_ERR_LIMIT (still full), TS_ERR_ABORTED (cancelled while waiting). */
static ts_status reserve(ts_server *s, ts_req_cancel *rc) {
    int64_t deadline = ts_now_ns() + (int64_t)TS_RENDER_WAIT_MS * 1000000;
    ts_status st = TS_OK;
    pthread_mutex_lock(&s->mu);
    while (s->render_used + s->render_share > s->cfg.render_memory) {
        if (atomic_load(&s->stopping) || (rc != NULL && atomic_load(&rc->gone))) {
            st = TS_ERR_ABORTED;
            break;
        }
        if (ts_now_ns() >= deadline) {
            st = TS_ERR_LIMIT;
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->render_cv, &s->mu, &until);
        if (rc != NULL) {
            pthread_mutex_unlock(&s->mu);
            ts_req_cancelled(rc); /* looks at the socket */
            pthread_mutex_lock(&s->mu);
        }
    }
    if (st == TS_OK) {
        s->render_used += s->render_share;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

void ts_server_render_release(ts_server *s) {
    pthread_mutex_lock(&s->mu);
    s->render_used -= s->render_share;
    pthread_cond_broadcast(&s->render_cv);
    pthread_mutex_unlock(&s->mu);
}

/* Why a cancelled render or compile stopped: 503 at shutdown, 499 (no answer) for a client
 * that left. */
static ts_status cancelled(ts_server *s, ts_api_error *err, const char *what) {
    if (atomic_load(&s->stopping)) {
        return ts_api_error_set(err, 503, "server_error", NULL, "server_shutdown",
                                "the server is shutting down (%s stopped)", what);
    }
    return ts_api_error_set(err, 499, "invalid_request_error", NULL, NULL,
                            "the client closed the connection (%s stopped)", what);
}

ts_status ts_server_render(ts_server *s, const ts_api_request *r, ts_req_cancel *rc, char **text,
                           size_t *len, bool *reserved, ts_api_error *err) {
    *text = NULL;
    *len = 0;
    *reserved = false;
    ts_status st = reserve(s, rc);
    if (st == TS_ERR_ABORTED) {
        return cancelled(s, err, "waiting to render the chat template");
    }
    if (st != TS_OK) {
        ts_api_error_set(err, 503, "server_error", NULL, "overloaded",
                         "the server is overloaded: chat-template renders in progress hold the "
                         "whole render memory budget (%zu MiB); retry later",
                         s->cfg.render_memory >> 20);
        return TS_ERR_LIMIT;
    }
    ts_chat_options opt = {
        .timeout_ms = s->cfg.render_timeout_ms,
        .max_memory = s->render_share,
        .cancel = ts_req_cancelled,
        .cancel_user = rc,
    };
    ts_error e = {0};
    st =
        ts_context_chat_render_opt(s->ctx, &opt, r->chat_json, strlen(r->chat_json), text, len, &e);
    if (st == TS_OK) {
        *reserved = true;
        return TS_OK;
    }
    ts_free(*text);
    *text = NULL;
    ts_server_render_release(s);
    bool stopped = rc != NULL ? ts_req_cancelled(rc) : atomic_load(&s->stopping);
    if (st == TS_ERR_ABORTED && stopped) {
        return cancelled(s, err, "rendering the chat template");
    }
    if (st == TS_ERR_NOT_FOUND) {
        return ts_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                                "the model has no chat template (start the server with "
                                "--chat-template-file F or --chat-template NAME)");
    }
    if (st == TS_ERR_LIMIT) {
        /* The request made the template exceed a limit: the client's input, not a fault. */
        return ts_api_error_set(err, 400, "invalid_request_error", "messages", "template_limit",
                                "cannot apply the chat template: %s (the server allows %lld ms "
                                "and %zu MiB per render: --render-timeout, --render-memory)",
                                e.msg, (long long)s->cfg.render_timeout_ms, s->render_share >> 20);
    }
    if (st == TS_ERR_NOMEM || st == TS_ERR_INTERNAL) {
        return ts_api_error_set(err, 500, "server_error", "messages", NULL, "%s", e.msg);
    }
    return ts_api_error_set(err, 400, "invalid_request_error", "messages", NULL,
                            "cannot apply the chat template: %s", e.msg);
}

void ts_server_compile_stop(ts_server *s, ts_req_cancel *rc, ts_request_params *p) {
    p->cancel = ts_req_cancelled;
    p->cancel_user = rc;
    p->compile_timeout_ms = s->cfg.grammar_timeout_ms;
}
