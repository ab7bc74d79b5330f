/*
 * server_internal.h — what the server's files share: the server object, per-request jobs
 * (the queue between the engine thread and an HTTP thread) and the response builders. The
 * server's public face (ts_server_config, ts_server_create ... ts_server_destroy) is in
 * include/tessera.h; the server reaches the model only through that API (a ts_context for
 * requests, its ts_llm for tokens and text).
 *
 * Threads: libmicrohttpd runs one event thread for every connection (conn.c); a request whose
 * body has arrived gets a worker thread of its own for its handler. Those workers parse,
 * validate, tokenize and submit requests, then wait on their request's own event queue; they
 * never run the model. Streams are written by the event thread, which parks a stream's
 * connection while it has nothing to send (conn.c). ONE engine thread, owned by the server, calls
 * ts_context_step for all requests together (continuous batching). The context's callbacks
 * run on the engine thread and only append to a request's queue and wake its HTTP thread (an
 * eventfd), so a slow or stalled client never delays the engine: its events pile up in its
 * own queue (bounded by its max_tokens) while the others keep going.
 *
 * A waiting HTTP thread also watches its socket: when the client disconnects (while queued,
 * generating or streaming), the request is aborted with ts_context_abort and its KV blocks
 * are freed at the next step.
 *
 * Shutdown stops accepting connections, lets admitted requests finish for up to grace_ms,
 * then aborts the rest (their clients get an error event or a 503 body), stops the engine
 * thread and closes every connection. The context is borrowed and outlives the server.
 *
 * A job is one HTTP generation request: one context request per prompt (completions accept
 * up to TS_API_MAX_PROMPTS), each with n sequences; choice index = prompt * n + sequence. It
 * is reference-counted: the HTTP side holds one reference until its response is finished or
 * abandoned, and each context request holds one until its request_done event, so whichever
 * side finishes last frees it. Both sides touch the job under job->mu only.
 */
#ifndef TS_SERVER_INTERNAL_H
#define TS_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "server/api.h"
#include "server/chat_out.h"
#include "server/dialect.h"
#include "server/metrics.h"
#include "tessera.h"

typedef struct ts_job ts_job;
typedef struct ts_embed_job ts_embed_job;
typedef struct ts_resp_store ts_resp_store;
typedef struct ts_conns ts_conns;
typedef struct ts_req_cancel ts_req_cancel;

/* How long a render waits for its share of the render budget before the request is 503. */
#define TS_RENDER_WAIT_MS 2000
/* The most one render reserves of the budget (a real chat prompt needs far less). */
#define TS_RENDER_SHARE_MAX ((size_t)64 << 20)

struct ts_server {
    ts_server_config cfg; /* strings point to the copies below */
    char *host, *api_key, *model_name;
    size_t api_key_len;
    ts_context *ctx;   /* borrowed: submit, abort, step, stats, chat template (chat requests
                          are 400 when it has none) */
    const ts_llm *llm; /* the context's model: tokenize, detokenize, token pieces */
    int32_t n_vocab;
    int64_t n_ctx;    /* tokens per sequence (the context's n_ctx) */
    int64_t max_seqs; /* sequences the context computes together (admission, n's limit) */
    int64_t created;  /* unix time at create, for /v1/models */
    /* The context's speculative decoding settings (ts_context_info), for /v1/models. */
    char spec_type[16]; /* "ngram" or "none" */
    int draft_max, draft_min, spec_ngram_min, spec_ngram_max;
    int64_t spec_step_tokens;
    uint64_t id_salt;
    atomic_uint_fast64_t id_counter;

    struct MHD_Daemon *daemon;
    ts_conns *conns; /* connection bookkeeping (conn.c); NULL when not started */
    char *cors_origins;
    int port;
    int listen_fd_after_quiesce; /* closed after MHD_stop_daemon */

    pthread_t engine_thread;
    bool engine_started;
    atomic_bool engine_stop;

    pthread_mutex_t mu; /* guards the fields below */
    pthread_cond_t cv;  /* signalled when in_flight drops */
    int64_t in_flight;  /* jobs admitted whose context requests have not all finished */
    bool draining;      /* shutdown started: no new requests */
    ts_job *jobs;       /* admitted jobs whose requests have not all finished (for shutdown) */
    bool shut_down;
    int64_t n_requests_open; /* HTTP requests between their first call and on_completed */

    ts_metrics metrics;

    /* Chat renders (render.c). Every render of a request's chat template reserves
     * render_share bytes of cfg.render_memory before it starts (and holds them until its text
     * is tokenized), so all renders in flight together stay within the budget. */
    ts_chat_caps chat_caps;   /* what the chat template renders (probed at create) */
    atomic_bool stopping;     /* shutdown began: renders and grammar compiles stop */
    size_t render_share;      /* bytes one render may hold: min(render_memory, 64 MiB) */
    size_t render_used;       /* reserved by renders in flight (under mu) */
    pthread_cond_t render_cv; /* signalled when a reservation is returned or on shutdown */
    size_t max_token_bytes;   /* longest token text: a prompt longer than n_ctx times this
                                 cannot fit the context, so it is refused untokenized */

    /* Embeddings (embed.c): jobs the engine thread runs between steps, under mu. */
    int64_t n_embd;           /* the model's vector size */
    bool encoder;             /* the model gives embeddings only (generation is 400) */
    int64_t embed_max_tokens; /* longest input: n_ctx, and for an encoder one step */
    pthread_cond_t embed_cv;  /* signalled when an embedding job is done */
    ts_embed_job *embed_head, *embed_tail;

    ts_resp_store *responses; /* stored OpenAI Responses (responses.c); NULL: none kept */
};

/* One /v1/embeddings request's computation, handed to the engine thread. */
struct ts_embed_job {
    ts_embed_job *next;
    const int32_t *const *inputs; /* [n] token ids, borrowed from the HTTP thread */
    const int32_t *lens;          /* [n] */
    int32_t n;
    float *out; /* [n][n_embd] */
    bool done;
    ts_status status;
    char message[TS_ERROR_MSG_MAX];
};

/* One event copied out of a request's callback. */
typedef struct ts_job_event {
    struct ts_job_event *next;
    int32_t choice; /* prompt * n + sequence index */
    int32_t token;  /* -1 for a final event without a token */
    ts_finish_reason finish;
    int32_t stop_index; /* the stop string that ended it (ts_engine_event.stop_index), or -1 */
    int32_t prompt_tokens, cached_tokens, completion_tokens;
    bool has_logprobs;
    ts_sample_info logprobs;
    char *message; /* error text when finish == TS_FINISH_ERROR, owned */
    size_t text_len;
    char text[]; /* [text_len + 1] */
} ts_job_event;

typedef struct ts_job_sub {
    ts_job *job;
    int32_t index;       /* which prompt */
    uint64_t request_id; /* the context's id for this prompt's request */
    bool added;
    bool done; /* request_done seen */
} ts_job_sub;

struct ts_job {
    pthread_mutex_t mu;
    int refs;
    int efd; /* eventfd: the engine thread writes after queueing events */
    ts_server *srv;
    ts_job *next, *prev; /* in srv->jobs, while admitted (under srv->mu) */
    bool admitted;

    int32_t n_subs, n_per; /* prompts, sequences per prompt */
    ts_job_sub subs[TS_API_MAX_PROMPTS];
    int32_t n_subs_done;
    int32_t n_added;

    ts_job_event *head, *tail; /* queued for the HTTP side */
    bool abandoned;            /* the HTTP side left: drop events */
    bool shutdown;             /* aborted by server shutdown */

    double t_arrival; /* seconds, monotonic */
    double *t_last;   /* [n_subs * n_per] time of the last token, 0 before the first */
    uint64_t usage_prompt, usage_completion;
};

/* ---- job.c ----------------------------------------------------------------------------- */

double ts_server_now(void);

/* A job for n_subs prompts of n_per sequences each; the caller holds one reference. */
ts_job *ts_job_create(ts_server *s, int32_t n_subs, int32_t n_per);

/* Submits prompt k to the context. */
ts_status ts_job_add(ts_job *j, int32_t k, const int32_t *ids, int32_t n_ids,
                     const ts_request_params *params, ts_error *err);

/* Waits for events, the client's disconnect (sock >= 0) or timeout_ms. Returns 1 when events
 * (or completion) may be ready, 0 on timeout, -1 when the client went away. */
int ts_job_wait(ts_job *j, int sock, int timeout_ms);

/* Takes every queued event (oldest first; free the list with ts_job_events_free) and tells
 * whether every context request has finished. */
ts_job_event *ts_job_take(ts_job *j, bool *all_done);
void ts_job_events_free(ts_job_event *ev);

/* True when the job was aborted by server shutdown. */
bool ts_job_was_shutdown(ts_job *j);

/* The HTTP side is done with the job: aborts unfinished context requests (when any) and drops
 * its reference. */
void ts_job_release(ts_job *j);

/* Admission: false (and *why says why; the caller answers 503) when draining or the queue is
 * full. On success the job counts as in flight until its context requests finish. */
bool ts_server_admit(ts_server *s, ts_job *j, const char **why);

/* ---- respond.c: JSON bodies ------------------------------------------------------------ */

/* "cmpl-<hex>" / "chatcmpl-<hex>" into buf. */
void ts_server_make_id(ts_server *s, const char *prefix, char *buf, size_t size);

/* A token's text as JSON wants it: invalid UTF-8 bytes become U+FFFD. *bytes_out gets the
 * raw bytes as a cJSON array when not NULL. */
cJSON *ts_server_token_string(const ts_llm *llm, int32_t token, cJSON **bytes_out);

/* One entry of chat logprobs.content for an event. */
cJSON *ts_server_chat_logprob(const ts_llm *llm, const ts_sample_info *info);

/* Completions logprobs accumulator ({"tokens", "token_logprobs", "top_logprobs",
 * "text_offset"}). */
cJSON *ts_server_cmpl_logprobs_new(void);
void ts_server_cmpl_logprobs_add(cJSON *lp, const ts_llm *llm, const ts_sample_info *info,
                                 size_t text_offset);

cJSON *ts_server_usage(uint64_t prompt, uint64_t completion, uint64_t cached);

/* ---- handlers ------------------------------------------------------------------------------ */

typedef struct ts_reply {
    int status;
    struct MHD_Response *response;
} ts_reply;

/* Builds a JSON reply (takes ownership of text, a malloc'd string). */
ts_reply ts_reply_json(int status, char *text);
/* An error in OpenAI's shape, and in dialect d's. */
ts_reply ts_reply_error(const ts_api_error *err);
ts_reply ts_reply_error_in(const ts_dialect *d, const ts_api_error *err);

/* The generation endpoints of every dialect (POST /v1/completions, /v1/chat/completions,
 * /v1/messages): ep's dialect parses the body and writes the answer. sock: the client's
 * socket, for disconnect detection. May block until the answer is complete (non-streaming). */
ts_reply ts_handle_generate(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                            int sock);
/* POST /tokenize and /detokenize (ep->kind says which). */
ts_reply ts_handle_tokenize(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                            int sock);
/* POST /v1/messages/count_tokens (anthropic.c): {"input_tokens": n} of the rendered prompt. */
ts_reply ts_handle_count_tokens(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                int sock);
/* POST /v1/embeddings (embed.c). Blocks until the engine thread has computed the vectors. */
/* OpenAI Responses (responses.c): the store, POST /v1/responses, GET and DELETE
 * /v1/responses/{id} (id: the path's rest). */
ts_resp_store *ts_resp_store_create(size_t max_count, size_t max_bytes);
void ts_resp_store_destroy(ts_resp_store *st);
ts_reply ts_handle_responses(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                             int sock);
ts_reply ts_handle_response_get(ts_server *s, const ts_endpoint *ep, const char *id, size_t len,
                                int sock);
ts_reply ts_handle_response_delete(ts_server *s, const ts_endpoint *ep, const char *id, size_t len,
                                   int sock);
ts_reply ts_handle_embeddings(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                              int sock);
/* The vectors of r's inputs (r: an embeddings request), [n_inputs][n_embd] into *vectors
 * (malloc'd; NULL on failure), and the tokens they held. */
ts_status ts_server_embed(ts_server *s, const ts_api_request *r, float **vectors,
                          uint64_t *n_tokens, ts_api_error *e);
/* The Ollama endpoints (ollama.c). */
ts_reply ts_handle_ollama_generate(ts_server *s, const ts_endpoint *ep, const char *body,
                                   size_t len, int sock);
ts_reply ts_handle_ollama_embed(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                int sock);
ts_reply ts_handle_ollama_info(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                               int sock);
ts_reply ts_handle_ollama_refuse(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                 int sock);

/* The answers of the OpenAI rows (handlers.c) and the Anthropic row (anthropic.c). */
cJSON *ts_openai_answer_json(ts_server *s, ts_answer *a);
cJSON *ts_anthropic_answer_json(ts_server *s, ts_answer *a);
cJSON *ts_responses_answer_json(ts_server *s, ts_answer *a);

/* Engine thread (embed.c): runs the queued embedding jobs. A job that finds the KV cache full
 * while requests run stays queued for after the next step. With stop, fails every queued job
 * instead (the server is shutting down). */
void ts_server_run_embed_jobs(ts_server *s, bool stop);

/* Renders prompt k of a request into token ids (the context's chat template for chat, through
 * ts_server_render). *ids points either into r (ids the body gave; valid while r is) or to
 * *owned, the buffer ts_llm_tokenize returned, which the caller releases with ts_free (*owned
 * is NULL when nothing was allocated). rc: the request's cancel state (may be NULL). An error
 * with status 499 means the client left: answer nothing and close. */
ts_status ts_server_prompt_ids(ts_server *s, const ts_api_request *r, int32_t k, ts_req_cancel *rc,
                               const int32_t **ids, int32_t *n_ids, int32_t **owned,
                               ts_api_error *err);

/* The server's limits for ts_api_parse. */
ts_api_limits ts_server_limits(const ts_server *s);

/* ---- render.c: chat renders and compiles bounded, counted and stoppable ------------------- */

/* One request's "stop now" state, read by the cancel callback of its template render and of
 * its grammar compile (both run on the request's HTTP thread): the server is shutting down,
 * or the client went away (its socket is polled for a hang-up at most every 20 ms). */
struct ts_req_cancel {
    ts_server *srv;
    int sock;             /* the client's socket; -1: not watched */
    atomic_bool gone;     /* the client hung up */
    int64_t next_poll_ns; /* when the socket is looked at next (the HTTP thread only) */
};

void ts_req_cancel_init(ts_req_cancel *rc, ts_server *s, int sock);
/* The cancel callback (ts_chat_options.cancel, ts_request_params.cancel): nonzero when the
 * server is stopping or the client left. */
int ts_req_cancelled(void *rc);

/* Probes the chat template's capabilities (chat_caps.c) under small limits and measures the
 * longest token text; called by ts_server_create. */
void ts_server_render_init(ts_server *s);

/* Renders r->chat_json with the context's template within the render budget: waits up to
 * TS_RENDER_WAIT_MS for its share (then 503), renders with cfg.render_timeout_ms, the share
 * as max_memory and rc's cancel. On success the share stays reserved (*reserved true) until
 * ts_server_render_release; errors are mapped for the client: a limit or a template error
 * 400, shutdown 503, a client gone 499, out of memory 500. */
ts_status ts_server_render(ts_server *s, const ts_api_request *r, ts_req_cancel *rc, char **text,
                           size_t *len, bool *reserved, ts_api_error *err);
void ts_server_render_release(ts_server *s);

/* Fills a request's grammar-compile stop (cancel, cancel_user = rc, compile_timeout_ms). */
void ts_server_compile_stop(ts_server *s, ts_req_cancel *rc, ts_request_params *p);

/* The chat template in use for GET /v1/models: {"name", "notice", "capabilities"}. */
cJSON *ts_server_chat_info(ts_server *s);

/* ---- http.c ------------------------------------------------------------------------------ */

struct sockaddr;
/* Connections accepted beyond max_connections only to be answered 503. */
unsigned ts_http_conn_reserve(int max_connections);
/* Starts libmicrohttpd on addr (one event thread; conn.c). NULL on failure. */
struct MHD_Daemon *ts_http_start(ts_server *s, const struct sockaddr *addr, bool ipv6);

/* ---- conn.c: connections around the event thread ----------------------------------------- */

typedef enum ts_conn_refusal {
    TS_CONN_ACCEPTED = 0,
    TS_CONN_REFUSED_FULL,   /* over max_connections when it connected */
    TS_CONN_REFUSED_PER_IP, /* over max_conns_per_ip when it connected */
} ts_conn_refusal;

/* Creates s->conns and its helper thread (before the daemon starts). */
ts_status ts_conns_create(ts_server *s);
/* The MHD_OPTION_NOTIFY_CONNECTION callback (its argument is the server). */
MHD_NotifyConnectionCallback ts_conns_notify_fn(void);
/* A request's header has arrived on c: whether the connection is to be refused (503). */
ts_conn_refusal ts_conns_request_begin(ts_server *s, struct MHD_Connection *c);
/* c's request is over; its next header is due within the header timeout. */
void ts_conns_request_end(ts_server *s, struct MHD_Connection *c);
/* From the access handler: suspends c and runs fn(arg) on a new thread, which resumes c when
 * fn returns. False (c not suspended) when no thread can be started. */
bool ts_conns_spawn(ts_server *s, struct MHD_Connection *c, void (*fn)(void *), void *arg);
/* From a content reader on the event thread: suspends the connection whose socket is sock
 * until efd is readable, the client hangs up or timeout_ms pass; the reader then returns 0.
 * False when the connection cannot be parked (the caller waits in place instead). */
bool ts_conns_park(ts_server *s, int sock, int efd, int timeout_ms);
/* From the access handler's first call: suspends c until the client sends body bytes (or
 * hangs up), then resumes it; when timeout_ms pass first, calls expire(arg) on the helper
 * thread, which may queue a response, and then resumes it. False when it cannot. */
bool ts_conns_probe_body(ts_server *s, struct MHD_Connection *c, int timeout_ms,
                         void (*expire)(void *), void *arg);
typedef struct ts_conns_counts {
    int64_t open;    /* connections open now */
    int64_t workers; /* request worker threads running */
    int64_t parked;  /* streams (and body probes) waiting, suspended */
    int64_t cut;     /* closed for want of a request header, since start */
    int64_t refused; /* accepted over a limit to be answered 503, since start */
} ts_conns_counts;
void ts_conns_stats(ts_server *s, ts_conns_counts *out);
/* Shutdown, before MHD_stop_daemon: waits up to wait_ms for request workers, stops the helper
 * thread and resumes every parked connection. */
void ts_conns_stop(ts_server *s, int wait_ms);
/* After MHD_stop_daemon. */
void ts_conns_destroy(ts_server *s);

/* ---- streaming (stream.c) -------------------------------------------------------------- */

/* Takes ownership of the job (admitted, requests added) and the parsed request's settings;
 * d writes the frames (stream.h). chat: how chat answers are parsed (each choice gets its own
 * parser when it is active); NULL for completions. prompt_tokens: the prompts' length. */
ts_reply ts_stream_start(ts_server *s, ts_job *j, const ts_dialect *d, const ts_api_request *r,
                         const ts_chat_out_config *chat, uint64_t prompt_tokens, int sock);

/* ---- chat_reply.c ---------------------------------------------------------------------- */

/* How a chat request's answers are parsed: formats from the chat template in use, tools and
 * tool_choice from r, whether the prompt (ids, the rendered and tokenized prompt) opened the
 * reasoning. cfg->tools points into r->root (the parser copies it). */
void ts_server_chat_config(ts_server *s, const ts_api_request *r, const int32_t *ids, int32_t n_ids,
                           ts_chat_out_config *cfg);

/* ---- tool_grammar.c ---------------------------------------------------------------------- */

/* With tool_choice "required" or a named function, constrains r's answer to a call of the
 * allowed tools in cfg's format (generic, llama3 and hermes; others are left free): sets
 * r->params' grammar (owned by r as grammar_text, param "tools"). A request that already has a
 * response_format / grammar is a 400. */
ts_status ts_server_tool_grammar(ts_api_request *r, const ts_chat_out_config *cfg, ts_api_error *e);

/* ---- page.c ------------------------------------------------------------------------------ */

extern const char ts_server_page_html[];
extern const size_t ts_server_page_html_len;

#endif /* TS_SERVER_INTERNAL_H */
