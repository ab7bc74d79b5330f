/*
 * http.c — libmicrohttpd glue: routing, authentication, request bodies, small endpoints.
 *
 * MHD calls on_request several times per request: once with the headers (we route, check
 * the method, the API key and Content-Length, and may answer at once), then with pieces of
 * the body (appended up to cfg.max_body; beyond it the rest is discarded and the answer is
 * 413), and a last time with no data, when the request is dispatched. on_completed counts the
 * request in the metrics and logs it.
 */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct conn_ctx {
    ts_route route;
    char method[8];
    char path[96];
    char *body;
    size_t len, cap;
    bool too_big;
    int status; /* what was queued; 0 before */
    double t0;
} conn_ctx;

typedef struct route_def {
    const char *path;
    ts_route route;
    const char *method; /* the one allowed ("GET" also allows HEAD) */
    bool public_route;  /* no API key needed */
} route_def;

static const route_def k_routes[] = {
    {"/v1/completions", TS_ROUTE_COMPLETIONS, "POST", false},
    {"/v1/chat/completions", TS_ROUTE_CHAT, "POST", false},
    {"/v1/models", TS_ROUTE_MODELS, "GET", false},
    {"/v1/embeddings", TS_ROUTE_EMBEDDINGS, "POST", false},
    {"/health", TS_ROUTE_HEALTH, "GET", true},
    {"/metrics", TS_ROUTE_METRICS, "GET", false},
    {"/tokenize", TS_ROUTE_TOKENIZE, "POST", false},
    {"/detokenize", TS_ROUTE_DETOKENIZE, "POST", false},
    {"/", TS_ROUTE_PAGE, "GET", true},
    {"/index.html", TS_ROUTE_PAGE, "GET", true},
};

static const route_def *find_route(const char *url) {
    for (size_t i = 0; i < sizeof k_routes / sizeof *k_routes; i++) {
        if (strcmp(url, k_routes[i].path) == 0) {
            return &k_routes[i];
        }
    }
    return NULL;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, conn_ctx *ctx, ts_reply r) {
    if (r.response == NULL) {
        ctx->status = r.status ? r.status : 500;
        return MHD_NO; /* closes the connection */
    }
    ctx->status = r.status;
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r.status, r.response);
    MHD_destroy_response(r.response);
    return ok;
}

static ts_reply error_reply(int status, const char *type, const char *code, const char *fmt,
                            const char *arg) {
    ts_api_error e;
    ts_api_error_set(&e, status, type, NULL, code, fmt, arg);
    return ts_reply_error(&e);
}

static bool authorized(ts_server *s, struct MHD_Connection *c) {
    if (s->api_key == NULL) {
        return true;
    }
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
        return false;
    }
    const char *key = h + 7;
    while (*key == ' ') {
        key++;
    }
    return ts_api_key_equal(key, strlen(key), s->api_key, s->api_key_len);
}

static ts_reply reply_models(ts_server *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "tessera");
    cJSON_AddNumberToObject(m, "max_model_len", (double)s->n_ctx);
    cJSON_AddItemToObject(m, "chat_template", ts_server_chat_info(s));
    cJSON_AddItemToArray(data, m);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return ts_reply_json(200, text);
}

static ts_reply reply_health(ts_server *s) {
    pthread_mutex_lock(&s->mu);
    bool draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    const char *body = draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}";
    return ts_reply_json(draining ? 503 : 200, strdup(body));
}

static ts_reply reply_metrics(ts_server *s) {
    /* Requests first, then the engine: a request counted finished has then also left the
     * engine's figures read after it (as far as the engine has released it). */
    pthread_mutex_lock(&s->mu);
    int64_t in_flight = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    ts_engine_stats es;
    ts_context_get_stats(s->ctx, &es);
    size_t len = 0;
    char *text = ts_metrics_render(&s->metrics, &es, in_flight, &len);
    ts_reply r = {.status = 200};
    if (text == NULL) {
        return ts_reply_json(500, NULL);
    }
    r.response = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r.response == NULL) {
        free(text);
        return r;
    }
    MHD_add_response_header(r.response, "Content-Type", "text/plain; version=0.0.4");
    return r;
}

static ts_reply reply_page(void) {
    ts_reply r = {.status = 200};
    r.response = MHD_create_response_from_buffer(
        ts_server_page_html_len, (void *)ts_server_page_html, MHD_RESPMEM_PERSISTENT);
    if (r.response != NULL) {
        MHD_add_response_header(r.response, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(r.response, "Cache-Control", "no-cache");
    }
    return r;
}

static int client_socket(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info != NULL ? info->connect_fd : -1;
}

static ts_reply dispatch(ts_server *s, struct MHD_Connection *c, conn_ctx *ctx) {
    switch (ctx->route) {
    case TS_ROUTE_COMPLETIONS:
        return ts_handle_generate(s, TS_API_COMPLETIONS, ctx->body, ctx->len, client_socket(c));
    case TS_ROUTE_CHAT:
        return ts_handle_generate(s, TS_API_CHAT, ctx->body, ctx->len, client_socket(c));
    case TS_ROUTE_TOKENIZE:
        return ts_handle_tokenize(s, TS_API_TOKENIZE, ctx->body, ctx->len);
    case TS_ROUTE_DETOKENIZE:
        return ts_handle_tokenize(s, TS_API_DETOKENIZE, ctx->body, ctx->len);
    case TS_ROUTE_EMBEDDINGS:
        return ts_handle_embeddings(s, ctx->body, ctx->len);
    case TS_ROUTE_MODELS:
        return reply_models(s);
    case TS_ROUTE_HEALTH:
        return reply_health(s);
    case TS_ROUTE_METRICS:
        return reply_metrics(s);
    case TS_ROUTE_PAGE:
        return reply_page();
    default:
        return error_reply(404, "invalid_request_error", "not_found", "no route %s", ctx->path);
    }
}

/* Checks made on the headers alone; a reply with a response means "answer now". */
static ts_reply check_headers(ts_server *s, struct MHD_Connection *c, conn_ctx *ctx,
                              const char *url, const char *method) {
    ts_reply none = {0};
    const route_def *rd = find_route(url);
    if (rd == NULL) {
        ctx->route = TS_ROUTE_OTHER;
        return error_reply(404, "invalid_request_error", "not_found",
                           "no route %s (see /v1/models, /v1/completions, /v1/chat/completions)",
                           ctx->path);
    }
    ctx->route = rd->route;
    bool get = strcmp(rd->method, "GET") == 0;
    if (strcmp(method, rd->method) != 0 && !(get && strcmp(method, "HEAD") == 0)) {
        ts_reply r = error_reply(405, "invalid_request_error", "method_not_allowed",
                                 "%s is not allowed here", method);
        if (r.response != NULL) {
            MHD_add_response_header(r.response, "Allow", get ? "GET, HEAD" : rd->method);
        }
        return r;
    }
    if (!rd->public_route && !authorized(s, c)) {
        return error_reply(401, "authentication_error", "invalid_api_key", "%s",
                           "missing or invalid API key (send 'Authorization: Bearer KEY')");
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl != NULL) {
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (n > s->cfg.max_body) {
            char msg[96];
            snprintf(msg, sizeof msg, "%llu bytes; the limit is %zu", n, s->cfg.max_body);
            return error_reply(413, "invalid_request_error", "body_too_large",
                               "the request body is too large: %s", msg);
        }
    }
    return none;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    ts_server *s = cls;
    (void)version;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        ctx = calloc(1, sizeof *ctx);
        if (ctx == NULL) {
            return MHD_NO;
        }
        *con_cls = ctx;
        pthread_mutex_lock(&s->mu);
        s->n_requests_open++;
        pthread_mutex_unlock(&s->mu);
        ctx->t0 = ts_server_now();
        snprintf(ctx->method, sizeof ctx->method, "%s", method);
        snprintf(ctx->path, sizeof ctx->path, "%s", url);
        ts_reply early = check_headers(s, c, ctx, url, method);
        if (early.response != NULL || early.status != 0) {
            return send_reply(c, ctx, early);
        }
        return MHD_YES;
    }
    if (ctx->status != 0) {
        *upload_data_size = 0; /* answered early: discard the body */
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->too_big || ctx->len + n > s->cfg.max_body) {
            ctx->too_big = true;
            free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
            return MHD_YES;
        }
        if (ctx->len + n + 1 > ctx->cap) {
            size_t cap = ctx->cap ? ctx->cap : 4096;
            while (cap < ctx->len + n + 1) {
                cap *= 2;
            }
            char *b = realloc(ctx->body, cap);
            if (b == NULL) {
                return MHD_NO;
            }
            ctx->body = b;
            ctx->cap = cap;
        }
        memcpy(ctx->body + ctx->len, upload_data, n);
        ctx->len += n;
        ctx->body[ctx->len] = '\0';
        return MHD_YES;
    }
    if (ctx->too_big) {
        char msg[64];
        snprintf(msg, sizeof msg, "%zu bytes", s->cfg.max_body);
        return send_reply(c, ctx,
                          error_reply(413, "invalid_request_error", "body_too_large",
                                      "the request body is larger than the limit of %s", msg));
    }
    return send_reply(c, ctx, dispatch(s, c, ctx));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    ts_server *s = cls;
    (void)c;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        return;
    }
    int status = ctx->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && (status == 200 || status == 0)) {
        status = 499; /* the client (or the network) ended it first */
    }
    ts_metrics_count_request(&s->metrics, ctx->route, status);
    if (s->cfg.log != NULL) {
        fprintf(s->cfg.log, "%s %s %d %.1f ms\n", ctx->method, ctx->path, status,
                (ts_server_now() - ctx->t0) * 1e3);
        fflush(s->cfg.log);
    }
    pthread_mutex_lock(&s->mu);
    s->n_requests_open--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(ctx->body);
    free(ctx);
    *con_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    ts_server *s = cls;
    if (s->cfg.log != NULL) {
        fprintf(s->cfg.log, "http: ");
        vfprintf(s->cfg.log, fmt, ap);
        fflush(s->cfg.log);
    }
}

struct MHD_Daemon *ts_http_start(ts_server *s, const struct sockaddr *addr, bool ipv6) {
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC;
    if (ipv6) {
        flags |= MHD_USE_IPv6;
    }
    return MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)s->cfg.conn_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)s->cfg.max_connections, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, s, MHD_OPTION_END);
}
