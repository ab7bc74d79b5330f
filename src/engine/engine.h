/*
 * engine.h — requests in, tokens out: the continuous-batching generation engine.
 *
 * An engine runs one model on one backend. Requests (prompt token ids + sampling parameters +
 * stop conditions + n) may be added and aborted from any thread; one thread calls
 * ts_engine_step repeatedly. Each step the scheduler packs the decode tokens of running
 * sequences and prefill chunks of waiting ones under a token budget (max_batch_tokens) and a
 * sequence limit (max_seqs) into ONE forward pass over the paged KV cache, samples every
 * sequence that reached the end of its known tokens, and reports the results through each
 * request's callback. A single request is just a batch of one.
 *
 *  - Chunked prefill: a long prompt is computed over several steps while running sequences
 *    keep decoding (running sequences are scheduled first).
 *  - Preemption: when KV blocks run out, the most recently admitted sequences are preempted
 *    (their blocks released, their tokens recomputed later — the prefix cache usually gives
 *    most of them back) and resumed transparently; outputs are unchanged.
 *  - Prefix caching: a new sequence reuses the cached blocks of its longest cached prefix.
 *  - Parallel sampling (n > 1): the prompt is computed once; the n sequences fork from it and
 *    share its blocks (copy-on-write on the last partial block).
 *
 * Thread safety: ts_engine_add_request, ts_engine_abort, ts_engine_wait and
 * ts_engine_get_stats are safe from any thread. ts_engine_step must be called from one thread
 * at a time; callbacks run on that thread, inside ts_engine_step, and must not call
 * ts_engine_step themselves (they may add or abort requests).
 */
#ifndef TS_ENGINE_ENGINE_H
#define TS_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sampler.h"
#include "ir/backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct ts_engine_config {
    int64_t n_ctx;            /* max tokens of one sequence (prompt + generated) */
    int64_t kv_tokens;        /* KV pool capacity in tokens (0: n_ctx) */
    int64_t max_seqs;         /* sequences running at once (default 16) */
    int64_t max_batch_tokens; /* tokens per step (default 512) */
    int64_t block_size;       /* tokens per KV block (default 16) */
    ts_type kv_type;          /* TS_TYPE_F16 (default) or TS_TYPE_F32 */
    bool prefix_cache;        /* automatic prefix caching (default on) */
    int64_t max_queue;        /* requests waiting before add_request says TS_ERR_LIMIT (0: no
                                 limit) */
    const struct ts_tp_config *tp; /* tensor parallelism (model/tp.h; borrowed), NULL: none */
} ts_engine_config;

/* Defaults for a model: n_ctx = min(n_ctx_train, 4096), the rest as documented above. */
ts_engine_config ts_engine_config_default(const ts_model *m);

typedef enum ts_finish_reason {
    TS_FINISH_NONE = 0,   /* still generating */
    TS_FINISH_STOP = 1,   /* end-of-generation token or a stop string */
    TS_FINISH_LENGTH = 2, /* max_tokens or the context was reached */
    TS_FINISH_ABORT = 3,  /* ts_engine_abort */
    TS_FINISH_ERROR = 4,  /* see the event's message */
} ts_finish_reason;

const char *ts_finish_reason_name(ts_finish_reason r); /* "stop", "length", ... */

/* What a request's callback receives. Pointers are valid during the callback only. */
typedef struct ts_engine_event {
    uint64_t request_id;
    int32_t index;       /* which of the request's n sequences (0..n-1) */
    int32_t token;       /* the token generated, or -1 for a final event without one */
    const char *text;    /* new text of this sequence (UTF-8, never a partial character,
                            held back while it could begin a stop string); may be empty */
    size_t text_len;
    const ts_sample_info *logprobs; /* when the request asked for logprobs, else NULL */
    ts_finish_reason finish;        /* set on the last event of this sequence */
    bool request_done;              /* last event of the whole request */
    int32_t prompt_tokens;          /* usage: prompt length */
    int32_t cached_tokens;          /* prompt tokens the prefix cache supplied */
    int32_t completion_tokens;      /* tokens generated so far by this sequence */
    const char *message;            /* error text when finish == TS_FINISH_ERROR */
} ts_engine_event;

typedef void (*ts_engine_callback)(const ts_engine_event *ev, void *user);

#define TS_ENGINE_MAX_STOP 16

typedef struct ts_request_params {
    ts_sampler_params sampling;
    uint64_t seed;          /* used when has_seed; otherwise a fresh seed per request */
    bool has_seed;
    int32_t max_tokens;     /* 0: up to the context */
    int32_t n;              /* parallel samples, >= 1 */
    bool ignore_eos;        /* keep generating past end-of-generation tokens */
    bool render_special;    /* include special tokens' text in the output text */
    const char *const *stop; /* stop strings (copied at add time), n_stop <= TS_ENGINE_MAX_STOP */
    int32_t n_stop;
    bool logprobs;          /* report ts_sample_info with each token */
    const void *cache_salt; /* prefix-cache namespace (copied), may be NULL */
    size_t cache_salt_len;
} ts_request_params;

ts_request_params ts_request_params_default(void);

typedef struct ts_engine_stats {
    int64_t n_running;         /* sequences in the running set */
    int64_t n_waiting;         /* sequences waiting (new or preempted) */
    int64_t n_requests;        /* requests not finished */
    uint64_t n_steps;
    uint64_t n_preemptions;
    uint64_t prompt_tokens;    /* prompt tokens computed (excluding prefix-cache hits) */
    uint64_t generated_tokens;
    uint32_t kv_blocks_total;
    uint32_t kv_blocks_used;
    uint64_t prefix_query_tokens;
    uint64_t prefix_hit_tokens;
} ts_engine_stats;

typedef struct ts_engine ts_engine;

/* Creates an engine for a model (borrowed, must outlive it), its tokenizer (borrowed) and a
 * backend (borrowed). reg (borrowed, may be NULL) selects functional implementations. */
ts_status ts_engine_create(const ts_model *m, const ts_tokenizer *tok, ts_backend *b,
                           ts_registry *reg, const ts_engine_config *cfg, ts_engine **out,
                           ts_error *err);
/* Finishes nothing: pending callbacks are not called. Call after the step thread stopped. */
void ts_engine_destroy(ts_engine *e);

/* Queues a request. The prompt is copied. Errors (the request is not queued): empty prompt,
 * token ids out of range, prompt + max_tokens beyond the context or beyond what the whole
 * KV cache could ever hold (TS_ERR_LIMIT, with the numbers), invalid sampling parameters,
 * queue full (TS_ERR_LIMIT). On success *id identifies the request. */
ts_status ts_engine_add_request(ts_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const ts_request_params *params, ts_engine_callback cb,
                                void *user, uint64_t *id, ts_error *err);

/* Asks for a request to stop; its callback gets a final TS_FINISH_ABORT event during the next
 * step and its blocks are freed then. Unknown or finished ids are ignored. */
void ts_engine_abort(ts_engine *e, uint64_t id);

/* Runs one step. *busy (may be NULL) tells whether there was anything to do. An error here
 * is the engine's own (the requests in the step are finished with TS_FINISH_ERROR). */
ts_status ts_engine_step(ts_engine *e, bool *busy, ts_error *err);

/* Blocks until a request or abort arrives, or timeout_ms passes (< 0: forever). Returns
 * immediately when requests are active. */
void ts_engine_wait(ts_engine *e, int timeout_ms);

/* Wakes a thread blocked in ts_engine_wait (for shutdown). */
void ts_engine_wake(ts_engine *e);

/* True when requests are queued or running. */
bool ts_engine_has_work(ts_engine *e);

/* A snapshot taken at the end of the last step. */
void ts_engine_get_stats(ts_engine *e, ts_engine_stats *out);

#endif /* TS_ENGINE_ENGINE_H */
