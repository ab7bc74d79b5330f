/*
 * server.h — the OpenAI-compatible HTTP server over one engine.
 *
 * Threads: libmicrohttpd runs one thread per connection (plus its listening thread). Those
 * threads parse, validate, tokenize and queue requests, then wait on their request's own event
 * queue; they never run the model. ONE engine thread, owned by the server, calls
 * ts_engine_step for all requests together (continuous batching). The engine's callbacks run
 * on the engine thread and only append to a request's queue and wake its HTTP thread (an
 * eventfd), so a slow or stalled client never delays the engine: its events pile up in its
 * own queue (bounded by its max_tokens) while the others keep going.
 *
 * A waiting HTTP thread also watches its socket: when the client disconnects (while queued,
 * generating or streaming), the request is aborted with ts_engine_abort and its KV blocks are
 * freed at the next step.
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or SSE streams), GET
 * /v1/models, GET /health, GET /metrics, POST /tokenize, POST /detokenize, GET / (the chat
 * page). See docs/server.md.
 *
 * Lifecycle: create -> start -> (serve) -> shutdown -> destroy. ts_server_shutdown stops
 * accepting connections, lets admitted requests finish for up to grace_ms, then aborts the
 * rest (their clients get an error event or a 503 body), stops the engine thread and closes
 * every connection. The engine itself is borrowed and outlives the server.
 *
 * Thread safety: create/start/shutdown/destroy from one controlling thread.
 */
#ifndef TS_SERVER_SERVER_H
#define TS_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

typedef struct ts_server_config {
    const char *host;       /* address to bind (default "127.0.0.1"); copied */
    int port;               /* 0: any free port (see ts_server_port) */
    const char *api_key;    /* NULL: no authentication; copied */
    const char *model_name; /* id reported by /v1/models and expected in bodies; copied */
    size_t max_body;        /* bytes; larger bodies are 413 (default 1 MiB) */
    int max_queue;          /* requests admitted beyond max_seqs before 503 (default 256) */
    int max_seqs;           /* the engine's max_seqs (for admission and n's limit) */
    int64_t n_ctx;          /* tokens per sequence (the engine's n_ctx) */
    int conn_timeout_s;     /* idle connection timeout (default 60) */
    int max_connections;    /* concurrent connections (default 512) */
    FILE *log;              /* one line per request; NULL: silent */
} ts_server_config;

ts_server_config ts_server_config_default(void);

typedef struct ts_server ts_server;

/* Creates a server for an engine (borrowed), its tokenizer (borrowed) and a chat template
 * (copied; NULL when the model has none: chat requests then get 400). Binds nothing yet. */
ts_status ts_server_create(const ts_server_config *cfg, ts_engine *engine, const ts_tokenizer *tok,
                           const ts_chat_template *tmpl, ts_server **out, ts_error *err);

/* Binds the socket and starts the engine thread and the HTTP threads. */
ts_status ts_server_start(ts_server *s, ts_error *err);

/* The bound port (useful with port 0); 0 before start. */
int ts_server_port(const ts_server *s);

/* Stops accepting, waits up to grace_ms for admitted requests, aborts the rest, stops the
 * engine thread and the HTTP daemon. Safe to call once after start. */
void ts_server_shutdown(ts_server *s, int grace_ms);

/* Frees the server (shuts it down first when still running). NULL is a no-op. */
void ts_server_destroy(ts_server *s);

#endif /* TS_SERVER_SERVER_H */
