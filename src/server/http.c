/*
 * http.c — libmicrohttpd glue: routing, authentication, CORS, request bodies, small endpoints.
 *
 * MHD calls on_request several times per request, all on its one event thread (conn.c):
 * once with the headers (we route, check the method, the API key and Content-Length, and may
 * answer at once), then with pieces of the body (appended up to cfg.max_body; beyond it the
 * rest is read and dropped and the answer is 413), and a last time with no data, when the
 * request is dispatched: small endpoints are answered in place, handlers that can block run
 * on a worker thread while the connection is suspended, and the reply they build is queued
 * when MHD calls again after the resume. on_completed counts the request in the metrics and
 * logs it.
 *
 * A body over the limit is answered so that the client can read the 413: with "Expect:
 * 100-continue" (curl's habit for large bodies) before the body is sent; otherwise the body is
 * read and dropped up to DISCARD_MAX and the 413 follows, because closing a socket while the
 * client still writes resets the connection and the client sees a broken pipe instead of the
 * answer. A Content-Length over the limit whose body does not start within PROBE_MS is a
 * client waiting for an answer: it gets the 413 then (conn.c's body probe). Past DISCARD_MAX
 * (or a Content-Length announcing more) the 413 is sent at once and the connection closed.
 *
 * CORS (cfg.cors_origins): an allowed Origin gets Access-Control-Allow-Origin on every answer
 * (errors and streams included); an OPTIONS request is answered 204, with the preflight
 * headers when its origin is allowed. Nothing is added for other origins or without the
 * option.
 */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Body bytes read and dropped after the limit, so that the client can read its 413. */
#define DISCARD_MAX ((size_t)64 << 20)
/* How long a body announced too large may take to start before the 413 goes out at once. */
#define PROBE_MS 500

typedef struct conn_ctx {
    int route;                 /* index in ts_endpoints; ts_n_endpoints: none (other) */
    const ts_endpoint *ep;     /* NULL: no endpoint serves the path */
    const ts_dialect *dialect; /* the shape of this request's errors */
    char method[8];
    char path[96];
    char *body;
    size_t len, cap;
    bool too_big;
    size_t dropped; /* body bytes dropped past the limit */
    int status;     /* what was queued; 0 before */
    double t0;
    ts_server *s;
    struct MHD_Connection *c;
    unsigned long long announced; /* a Content-Length over the limit, 0 when none */
    unsigned long long received;  /* body bytes so far */
    bool dispatched;              /* a worker built (or is building) the reply below */
    ts_reply pending;
} conn_ctx;

static bool ts_endpoint_is_prefix(const ts_endpoint *ep) {
    size_t n = strlen(ep->path);
    return n > 1 && ep->path[n - 1] == '/';
}

const ts_endpoint *ts_endpoint_find(const char *path) {
    for (int i = 0; i < ts_n_endpoints; i++) {
        if (strcmp(path, ts_endpoints[i].path) == 0) {
            return &ts_endpoints[i];
        }
        /* A prefix row takes one more path segment (an id). */
        size_t n = strlen(ts_endpoints[i].path);
        if (ts_endpoint_is_prefix(&ts_endpoints[i]) &&
            strncmp(path, ts_endpoints[i].path, n) == 0 && path[n] != '\0' &&
            strchr(path + n, '/') == NULL) {
            return &ts_endpoints[i];
        }
    }
    return NULL;
}

/* Whether origin is in the comma-separated list (or the list holds "*"). */
static bool origin_allowed(const char *list, const char *origin) {
    if (list == NULL || origin == NULL) {
        return false;
    }
    size_t olen = strlen(origin);
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ' || *p == ',') {
            p++;
        }
        const char *end = p;
        while (*end != '\0' && *end != ',') {
            end++;
        }
        size_t n = (size_t)(end - p);
        while (n > 0 && p[n - 1] == ' ') {
            n--;
        }
        if ((n == 1 && p[0] == '*') || (n > 0 && n == olen && strncasecmp(p, origin, n) == 0)) {
            return true;
        }
        p = end;
    }
    return false;
}

/* Adds Access-Control-Allow-Origin when the request's Origin is allowed; true when it did. */
static bool add_cors(ts_server *s, struct MHD_Connection *c, struct MHD_Response *r) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (r == NULL || !origin_allowed(s->cors_origins, origin)) {
        return false;
    }
    if (origin_allowed(s->cors_origins, "*")) { /* the list holds "*" */
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    } else {
        /* The answer depends on the Origin: caches must keep one per origin. */
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
    return true;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, conn_ctx *ctx, ts_reply r) {
    if (r.response == NULL) {
        ctx->status = r.status ? r.status : 500;
        return MHD_NO; /* closes the connection */
    }
    ctx->status = r.status;
    add_cors(ctx->s, c, r.response);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r.status, r.response);
    MHD_destroy_response(r.response);
    return ok;
}

static ts_reply error_reply(const ts_dialect *d, int status, const char *type, const char *code,
                            const char *fmt, const char *arg) {
    ts_api_error e;
    ts_api_error_set(&e, status, type, NULL, code, fmt, arg);
    return ts_reply_error_in(d != NULL ? d : &ts_dialect_openai_chat, &e);
}

/* The API key, as "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY"
 * (Anthropic's), on every route that is not public. */
static bool authorized(ts_server *s, struct MHD_Connection *c) {
    if (s->api_key == NULL) {
        return true;
    }
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (x != NULL && ts_api_key_equal(x, strlen(x), s->api_key, s->api_key_len)) {
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

static ts_reply reply_models(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                             int sock) {
    (void)ep, (void)body, (void)len, (void)sock;
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
    /* The server's speculative decoding (docs/speculative.md): a request's "speculative.n_max"
     * can lower n_max or turn it off, never raise it. */
    cJSON *spec = cJSON_AddObjectToObject(m, "speculative");
    cJSON_AddStringToObject(spec, "type", s->spec_type);
    cJSON_AddNumberToObject(spec, "n_max", s->draft_max);
    cJSON_AddNumberToObject(spec, "n_min", s->draft_min);
    cJSON_AddNumberToObject(spec, "ngram_min", s->spec_ngram_min);
    cJSON_AddNumberToObject(spec, "ngram_max", s->spec_ngram_max);
    cJSON_AddNumberToObject(spec, "step_tokens", (double)s->spec_step_tokens);
    cJSON_AddItemToArray(data, m);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return ts_reply_json(200, text);
}

static ts_reply reply_health(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                             int sock) {
    (void)ep, (void)body, (void)len, (void)sock;
    pthread_mutex_lock(&s->mu);
    bool draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    const char *out = draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}";
    return ts_reply_json(draining ? 503 : 200, strdup(out));
}

static ts_reply reply_metrics(ts_server *s, const ts_endpoint *ep, const char *body,
                              size_t body_len, int sock) {
    (void)ep, (void)body, (void)body_len, (void)sock;
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
    /* The connection layer's figures (conn.c), after the request and engine ones. */
    ts_conns_counts cc;
    ts_conns_stats(s, &cc);
    char extra[1024];
    int n = snprintf(
        extra, sizeof extra,
        "# HELP tessera_http_connections_open Connections open now.\n"
        "# TYPE tessera_http_connections_open gauge\n"
        "tessera_http_connections_open %lld\n"
        "# HELP tessera_http_request_threads Request worker threads running.\n"
        "# TYPE tessera_http_request_threads gauge\n"
        "tessera_http_request_threads %lld\n"
        "# HELP tessera_http_streams_parked Streams waiting for tokens without a thread.\n"
        "# TYPE tessera_http_streams_parked gauge\n"
        "tessera_http_streams_parked %lld\n"
        "# HELP tessera_http_connections_cut_total Connections closed for want of a request "
        "header.\n"
        "# TYPE tessera_http_connections_cut_total counter\n"
        "tessera_http_connections_cut_total %lld\n"
        "# HELP tessera_http_connections_refused_total Connections over a limit, answered 503.\n"
        "# TYPE tessera_http_connections_refused_total counter\n"
        "tessera_http_connections_refused_total %lld\n",
        (long long)cc.open, (long long)cc.workers, (long long)cc.parked, (long long)cc.cut,
        (long long)cc.refused);
    char *all = n > 0 && (size_t)n < sizeof extra ? realloc(text, len + (size_t)n + 1) : NULL;
    if (all != NULL) {
        memcpy(all + len, extra, (size_t)n + 1);
        text = all;
        len += (size_t)n;
    }
    r.response = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r.response == NULL) {
        free(text);
        return r;
    }
    MHD_add_response_header(r.response, "Content-Type", "text/plain; version=0.0.4");
    return r;
}

static ts_reply reply_page(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                           int sock) {
    (void)s, (void)ep, (void)body, (void)len, (void)sock;
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

/* The route table: every path the server answers, its method, its metrics label, whether it
 * needs the API key and a worker thread (the model, a large body to tokenize, the engine's
 * statistics, read under the engine's lock), the dialect of its errors and its handler. A
 * dialect's endpoints are rows here and its shapes a row of dialect.c; nothing else routes. */
const ts_endpoint ts_endpoints[] = {
    {"/v1/completions", "POST", "/v1/completions", false, true, &ts_dialect_openai_completions,
     TS_API_COMPLETIONS, ts_handle_generate},
    {"/v1/chat/completions", "POST", "/v1/chat/completions", false, true, &ts_dialect_openai_chat,
     TS_API_CHAT, ts_handle_generate},
    {"/v1/messages", "POST", "/v1/messages", false, true, &ts_dialect_anthropic, TS_API_CHAT,
     ts_handle_generate},
    {"/v1/messages/count_tokens", "POST", "/v1/messages/count_tokens", false, true,
     &ts_dialect_anthropic, TS_API_CHAT, ts_handle_count_tokens},
    {"/v1/models", "GET", "/v1/models", false, false, &ts_dialect_openai_chat, TS_API_CHAT,
     reply_models},
    {"/v1/embeddings", "POST", "/v1/embeddings", false, true, &ts_dialect_openai_chat,
     TS_API_EMBEDDINGS, ts_handle_embeddings},
    {"/health", "GET", "/health", true, false, &ts_dialect_openai_chat, TS_API_CHAT, reply_health},
    {"/metrics", "GET", "/metrics", false, true, &ts_dialect_openai_chat, TS_API_CHAT,
     reply_metrics},
    {"/tokenize", "POST", "/tokenize", false, true, &ts_dialect_openai_chat, TS_API_TOKENIZE,
     ts_handle_tokenize},
    {"/detokenize", "POST", "/detokenize", false, true, &ts_dialect_openai_chat, TS_API_DETOKENIZE,
     ts_handle_tokenize},
    {"/", "GET", "/", true, false, &ts_dialect_openai_chat, TS_API_CHAT, reply_page},
    {"/index.html", "GET", "/", true, false, &ts_dialect_openai_chat, TS_API_CHAT, reply_page},
    /* Ollama (ollama.c) */
    {"/api/chat", "POST", "/api/chat", false, true, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_generate},
    {"/api/generate", "POST", "/api/generate", false, true, &ts_dialect_ollama_generate,
     TS_API_CHAT, ts_handle_ollama_generate},
    {"/api/embed", "POST", "/api/embed", false, true, &ts_dialect_ollama_chat, TS_API_EMBEDDINGS,
     ts_handle_ollama_embed},
    {"/api/embeddings", "POST", "/api/embeddings", false, true, &ts_dialect_ollama_chat,
     TS_API_EMBEDDINGS, ts_handle_ollama_embed},
    {"/api/tags", "GET", "/api/tags", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_info},
    {"/api/ps", "GET", "/api/ps", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_info},
    {"/api/show", "POST", "/api/show", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_info},
    {"/api/version", "GET", "/api/version", true, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_info},
    {"/api/pull", "POST", "/api/pull", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_refuse},
    {"/api/push", "POST", "/api/push", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_refuse},
    {"/api/create", "POST", "/api/create", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_refuse},
    {"/api/copy", "POST", "/api/copy", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_refuse},
    {"/api/delete", "DELETE", "/api/delete", false, false, &ts_dialect_ollama_chat, TS_API_CHAT,
     ts_handle_ollama_refuse},
    {"/v1/responses", "POST", "/v1/responses", false, true, &ts_dialect_responses, TS_API_CHAT,
     ts_handle_responses},
    {"/v1/responses/", "GET", "/v1/responses/{id}", false, false, &ts_dialect_responses,
     TS_API_CHAT, ts_handle_response_get},
    {"/v1/responses/", "DELETE", "/v1/responses/{id}", false, false, &ts_dialect_responses,
     TS_API_CHAT, ts_handle_response_delete},
};
const int ts_n_endpoints = (int)(sizeof ts_endpoints / sizeof *ts_endpoints);

_Static_assert(sizeof ts_endpoints / sizeof *ts_endpoints <= TS_METRICS_MAX_ROUTES,
               "the metrics count at most TS_METRICS_MAX_ROUTES routes");

static ts_reply dispatch(ts_server *s, struct MHD_Connection *c, conn_ctx *ctx) {
    if (ctx->ep == NULL) {
        return error_reply(ctx->dialect, 404, "invalid_request_error", "not_found", "no route %s",
                           ctx->path);
    }
    if (ts_endpoint_is_prefix(ctx->ep)) {
        const char *rest = ctx->path + strlen(ctx->ep->path);
        return ctx->ep->handle(s, ctx->ep, rest, strlen(rest), client_socket(c));
    }
    return ctx->ep->handle(s, ctx->ep, ctx->body, ctx->len, client_socket(c));
}

/* OPTIONS: 204 with the methods the route takes, and the preflight answer for an allowed
 * origin. Browsers send no credentials with a preflight, so it needs no API key. */
static ts_reply reply_options(ts_server *s, struct MHD_Connection *c, const char *methods) {
    ts_reply r = {.status = 204};
    r.response = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (r.response == NULL) {
        return r;
    }
    MHD_add_response_header(r.response, "Allow", methods);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin_allowed(s->cors_origins, origin)) {
        MHD_add_response_header(r.response, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(r.response, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type, x-api-key, anthropic-version");
        MHD_add_response_header(r.response, "Access-Control-Max-Age", "86400");
    }
    return r; /* send_reply adds Access-Control-Allow-Origin */
}

/* Counts the Content-Length headers whose value differs from the first one's. */
typedef struct cl_count {
    const char *first;
    int differ;
} cl_count;

static enum MHD_Result count_lengths(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    (void)kind;
    cl_count *n = cls;
    if (key != NULL && value != NULL && strcasecmp(key, "Content-Length") == 0) {
        if (n->first == NULL) {
            n->first = value;
        } else if (strcmp(n->first, value) != 0) {
            n->differ++;
        }
    }
    return MHD_YES;
}

/* A reply that closes the connection (its body, if any, is not read). */
static ts_reply closing(ts_reply r) {
    if (r.response != NULL) {
        MHD_add_response_header(r.response, "Connection", "close");
    }
    return r;
}

/* Checks made on the headers alone; a reply with a response means "answer now". */
static ts_reply check_headers(ts_server *s, struct MHD_Connection *c, conn_ctx *ctx,
                              const char *url, const char *method) {
    ts_reply none = {0};
    const ts_endpoint *rd = ts_endpoint_find(url);
    ctx->dialect = rd != NULL ? rd->dialect : ts_dialect_of_path(url);
    if (rd == NULL) {
        ctx->route = ts_n_endpoints;
        return error_reply(ctx->dialect, 404, "invalid_request_error", "not_found",
                           "no route %s (see /v1/models, /v1/completions, /v1/chat/completions, "
                           "/v1/messages)",
                           ctx->path);
    }
    /* Rows may share a path with another method (GET and DELETE /v1/responses/{id}). */
    for (int i = 0; i < ts_n_endpoints && strcmp(method, rd->method) != 0; i++) {
        if (strcmp(ts_endpoints[i].path, rd->path) == 0 &&
            strcmp(ts_endpoints[i].method, method) == 0) {
            rd = &ts_endpoints[i];
        }
    }
    bool del = false; /* a DELETE row shares the path */
    for (int i = 0; i < ts_n_endpoints; i++) {
        del |= strcmp(ts_endpoints[i].path, rd->path) == 0 &&
               strcmp(ts_endpoints[i].method, "DELETE") == 0;
    }
    ctx->ep = rd;
    ctx->route = (int)(rd - ts_endpoints);
    bool get = strcmp(rd->method, "GET") == 0;
    if (strcmp(method, "OPTIONS") == 0) {
        return reply_options(s, c,
                             get ? (del ? "GET, HEAD, DELETE, OPTIONS" : "GET, HEAD, OPTIONS")
                                 : "POST, OPTIONS");
    }
    if (strcmp(method, rd->method) != 0 && !(get && strcmp(method, "HEAD") == 0)) {
        ts_reply r = error_reply(ctx->dialect, 405, "invalid_request_error", "method_not_allowed",
                                 "%s is not allowed here", method);
        if (r.response != NULL) {
            MHD_add_response_header(r.response, "Allow",
                                    get ? (del ? "GET, HEAD, DELETE" : "GET, HEAD") : rd->method);
        }
        return r;
    }
    if (!rd->public_route && !authorized(s, c)) {
        return error_reply(ctx->dialect, 401, "authentication_error", "invalid_api_key", "%s",
                           "missing or invalid API key (send 'Authorization: Bearer KEY' or "
                           "'x-api-key: KEY')");
    }
    /* A transfer coding other than chunked cannot be read: the body's end is unknown, and the
     * request waited for --timeout with no answer. RFC 9112: 501. */
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    if (te != NULL && strcasecmp(te, "chunked") != 0) {
        return closing(error_reply(ctx->dialect, 501, "invalid_request_error",
                                   "unsupported_transfer_encoding",
                                   "Transfer-Encoding '%.64s' is not supported: send the body "
                                   "with a Content-Length or chunked",
                                   te));
    }
    /* Content-Length headers that disagree make the body's end ambiguous (request smuggling
     * through a proxy that takes the other one): 400, as RFC 9112 asks. */
    cl_count lengths = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_lengths, &lengths);
    if (lengths.differ > 0) {
        return closing(error_reply(ctx->dialect, 400, "invalid_request_error", NULL, "%s",
                                   "the request has Content-Length headers that disagree"));
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl != NULL) {
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (n > s->cfg.max_body) {
            const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
            bool waits = expect != NULL && strcasecmp(expect, "100-continue") == 0;
            if (!waits && n - s->cfg.max_body <= DISCARD_MAX) {
                ctx->too_big = true; /* read and drop it, then answer (see the top) */
                ctx->announced = n;
                return none;
            }
            char msg[96];
            snprintf(msg, sizeof msg, "%llu bytes; the limit is %zu", n, s->cfg.max_body);
            return error_reply(ctx->dialect, 413, "invalid_request_error", "body_too_large",
                               "the request body is too large: %s", msg);
        }
    }
    return none;
}

static void dispatch_worker(void *arg) {
    conn_ctx *ctx = arg;
    ctx->pending = dispatch(ctx->s, ctx->c, ctx);
}

static ts_reply refusal_reply(ts_server *s, ts_conn_refusal why) {
    char msg[160];
    if (why == TS_CONN_REFUSED_PER_IP) {
        snprintf(msg, sizeof msg, "too many connections from your address (the limit is %d)",
                 s->cfg.max_conns_per_ip);
    } else {
        snprintf(msg, sizeof msg, "the server is at its connection limit (%d)",
                 s->cfg.max_connections);
    }
    ts_reply r = error_reply(NULL, 503, "server_error", "too_many_connections", "%s", msg);
    if (r.response != NULL) {
        /* The slot is only freed when the connection closes. */
        MHD_add_response_header(r.response, "Connection", "close");
    }
    return r;
}

static ts_reply too_big_reply(ts_server *s, const ts_dialect *d) {
    char msg[64];
    snprintf(msg, sizeof msg, "%zu bytes", s->cfg.max_body);
    return error_reply(d, 413, "invalid_request_error", "body_too_large",
                       "the request body is larger than the limit of %s", msg);
}

/* The body probe's deadline passed with no body byte: the client waits for an answer before
 * sending (or sends nothing), so the 413 goes out now. Runs on conn.c's helper thread while
 * the connection is suspended, where queueing a response is allowed. */
static void answer_unsent_body(void *arg) {
    conn_ctx *ctx = arg;
    ts_reply r = too_big_reply(ctx->s, ctx->dialect);
    if (r.response == NULL) {
        return;
    }
    add_cors(ctx->s, ctx->c, r.response);
    if (MHD_queue_response(ctx->c, (unsigned)r.status, r.response) == MHD_YES) {
        ctx->status = r.status;
    }
    MHD_destroy_response(r.response);
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
        ctx->route = ts_n_endpoints; /* none until routed */
        ctx->s = s;
        ctx->c = c;
        pthread_mutex_lock(&s->mu);
        s->n_requests_open++;
        pthread_mutex_unlock(&s->mu);
        ctx->t0 = ts_server_now();
        snprintf(ctx->method, sizeof ctx->method, "%s", method);
        snprintf(ctx->path, sizeof ctx->path, "%s", url);
        ts_conn_refusal why = ts_conns_request_begin(s, c);
        if (why != TS_CONN_ACCEPTED) {
            ctx->route = ts_n_endpoints;
            return send_reply(c, ctx, refusal_reply(s, why));
        }
        ts_reply early = check_headers(s, c, ctx, url, method);
        if (early.response != NULL || early.status != 0) {
            return send_reply(c, ctx, early);
        }
        if (ctx->announced > 0 && !ts_conns_probe_body(s, c, PROBE_MS, answer_unsent_body, ctx)) {
            return send_reply(c, ctx, too_big_reply(s, ctx->dialect));
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
        ctx->received += n;
        if (ctx->too_big || ctx->len + n > s->cfg.max_body) {
            ctx->too_big = true;
            ctx->dropped += n;
            free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
            if (ctx->dropped > DISCARD_MAX) {
                return send_reply(c, ctx,
                                  too_big_reply(s, ctx->dialect)); /* enough: answer and close */
            }
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
        if (ctx->received < ctx->announced) {
            /* Called again after the body probe resumed the connection, before the body:
             * answering now would close it under a client that is sending. */
            return MHD_YES;
        }
        return send_reply(c, ctx, too_big_reply(s, ctx->dialect));
    }
    if (ctx->dispatched) {
        /* Called again after the worker resumed the connection: its reply is ready. */
        ts_reply r = ctx->pending;
        ctx->pending = (ts_reply){0};
        return send_reply(c, ctx, r);
    }
    if (ctx->ep != NULL && ctx->ep->blocking) {
        ctx->dispatched = true;
        if (ts_conns_spawn(s, c, dispatch_worker, ctx)) {
            return MHD_YES;
        }
        return send_reply(c, ctx,
                          error_reply(ctx->dialect, 503, "server_error", "overloaded", "%s",
                                      "cannot start a thread for the request; try again"));
    }
    return send_reply(c, ctx, dispatch(s, c, ctx));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    ts_server *s = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        return;
    }
    ts_conns_request_end(s, c);
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
    if (ctx->pending.response != NULL) {
        MHD_destroy_response(ctx->pending.response);
    }
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

unsigned ts_http_conn_reserve(int max_connections) {
    /* Room above max_connections so that the excess is answered 503 (conn.c) rather than
     * reset: a refused connection costs a socket and libmicrohttpd's small buffer until it
     * has been answered or its header deadline passes. Past it libmicrohttpd refuses. */
    unsigned half = (unsigned)max_connections / 2;
    return half < 256 ? 256 : half;
}

struct MHD_Daemon *ts_http_start(ts_server *s, const struct sockaddr *addr, bool ipv6) {
    /* One event thread (epoll where available) for every connection; see conn.c. */
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
        (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_POLL);
    if (ipv6) {
        flags |= MHD_USE_IPv6;
    }
    unsigned reserve = ts_http_conn_reserve(s->cfg.max_connections);
    return MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)s->cfg.conn_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)s->cfg.max_connections + reserve, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, ts_conns_notify_fn(), s,
                            MHD_OPTION_EXTERNAL_LOGGER, on_log, s, MHD_OPTION_END);
}
