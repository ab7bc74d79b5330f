/*
 * engine.h — requests in, tokens out: the continuous-batching generation engine.
 *
 * An engine runs one model through a runner (model/runner.h: one device or a tensor-parallel
 * group; the engine cannot tell which). Requests (prompt token ids + sampling parameters +
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
#include "model/model.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

typedef struct ts_engine_config {
    int64_t n_ctx;            /* max tokens of one sequence (prompt + generated) */
    int64_t kv_tokens;        /* KV pool capacity in tokens (0: n_ctx) */
    int64_t max_seqs;         /* sequences running at once (default 16) */
    int64_t max_batch_tokens; /* tokens per step (default 512) */
    int64_t block_size;       /* tokens per KV block (default 16) */
    ts_type kv_type_k;        /* K cache: TS_TYPE_F16 (default), F32, BF16, Q8_0, Q5_0, Q4_0 */
    ts_type kv_type_v;        /* V cache: the same choices, independent of K */
    bool prefix_cache;        /* automatic prefix caching (default on) */
    bool swa_full;            /* sliding-window layers keep the whole context like the others
                                 (default off: they get a pool sized by the window, and each
                                 sequence keeps only its window's blocks there) */
    int64_t max_queue;        /* requests waiting before add_request says TS_ERR_LIMIT (0: no
                                 limit) */
    /* Speculative decoding (docs/speculative.md): each decoding sequence drafts up to draft_max
     * tokens a step by n-gram lookup in its own tokens (0: off, the default), verified in the
     * same step; a draft shorter than draft_min is not tried. N-grams of ngram_min..ngram_max
     * tokens are looked up. Drafts are made only while the step has room: its tokens, drafts
     * included, stay within spec_step_tokens (0: 32), so a full batch turns speculation off. */
    int32_t draft_max;
    int32_t draft_min;
    int32_t ngram_min;
    int32_t ngram_max;
    int64_t spec_step_tokens;
    bool spec_rejection; /* accept drafts by rejection sampling: the same distribution, more
                            drafts accepted, but not plain decoding's tokens (default off) */
} ts_engine_config;

/* Defaults for a model: n_ctx = min(n_ctx_train, 4096), the rest as documented above. */
ts_engine_config ts_engine_config_default(const ts_model *m);

/* ts_finish_reason, ts_engine_event, ts_engine_callback, ts_request_params and
 * ts_engine_stats are public (include/tessera.h): the runtime hands them through unchanged. */

typedef struct ts_engine ts_engine;

/* Checks cfg against the model (TS_ERR_INVALID_ARG with the numbers) and gives the shape
 * bucket a runner for an engine of this configuration needs: max_tokens = max_batch_tokens,
 * max_seqs (at most max_batch_tokens), max_outputs = max_seqs, the KV pool of kv_tokens
 * (0: n_ctx) in blocks of block_size (0: the default), max_blocks_per_seq covering n_ctx,
 * kv_type_k / kv_type_v, and for a model with sliding-window layers (unless swa_full) their pool of
 * ts_kv_blocks_for_window(window, block_size, max_seqs, max_batch_tokens, n_blocks) blocks.
 * A runner may be made for a larger bucket (more tokens, sequences or outputs). */
ts_status ts_engine_forward_config(const ts_model *m, const ts_engine_config *cfg,
                                   ts_forward_config *out, ts_error *err);

/* Creates an engine for a model (borrowed, must outlive it), its tokenizer (borrowed) and a
 * runner (borrowed, must outlive it; made for at least ts_engine_forward_config's bucket: the
 * same KV pool, blocks and table width, at least as many tokens, sequences and outputs, else
 * TS_ERR_INVALID_ARG). The engine computes every step and block copy through the runner. */
ts_status ts_engine_create(const ts_model *m, const ts_tokenizer *tok, ts_runner *runner,
                           const ts_engine_config *cfg, ts_engine **out, ts_error *err);
/* Speculative decoding with a draft model (draft_model.c): dm (borrowed, must outlive the
 * engine) shares the engine's vocabulary (the same n_vocab is checked here; the caller checks
 * the tokens themselves) and proposes each decoding sequence's drafts greedily, up to its
 * draft length, instead of the n-gram lookup; cfg.draft_max > 0 turns speculation on as for
 * n-grams. runner (borrowed) runs dm on the bucket ts_engine_draft_forward_config gives (its
 * own KV pool of the engine's kv_tokens, F16, no prefix cache). When p_min > 0 a draft stops
 * before a token whose probability under the draft is below p_min. Call once, before the
 * first request. */
ts_status ts_engine_draft_forward_config(const ts_model *dm, const ts_engine_config *cfg,
                                         ts_forward_config *out, ts_error *err);
ts_status ts_engine_set_draft(ts_engine *e, const ts_model *dm, ts_runner *runner, float p_min,
                              ts_error *err);
/* Finishes nothing: pending callbacks are not called. Call after the step thread stopped. */
void ts_engine_destroy(ts_engine *e);

/* Queues a request. The prompt is copied. Errors (the request is not queued): empty prompt,
 * token ids out of range, prompt + max_tokens beyond the context or beyond what the whole
 * KV cache could ever hold (TS_ERR_LIMIT, with the numbers), invalid sampling parameters,
 * queue full (TS_ERR_LIMIT). On success *id identifies the request. */
ts_status ts_engine_add_request(ts_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const ts_request_params *params, ts_engine_callback cb, void *user,
                                uint64_t *id, ts_error *err);

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

/* Embeddings (embed.c), on the step thread between steps: the final hidden states of each of
 * n_inputs token sequences (inputs[i][0..n_tokens[i])), pooled (model/arch.h: NONE, MEAN, CLS,
 * LAST) and, when normalize, divided by their L2 norm. out: [n_inputs][n_embd], or for
 * TS_POOL_NONE [sum of n_tokens][n_embd] (the inputs' tokens in order). Each input's KV blocks
 * are taken from the pool for the call and given back; running requests keep theirs, so a
 * full cache is TS_ERR_LIMIT. Errors: an empty input, an id outside the vocabulary, an input
 * longer than the context or (encoders, whose inputs must be whole in one step) than a step. */
ts_status ts_engine_embed(ts_engine *e, const int32_t *const *inputs, const int32_t *n_tokens,
                          int32_t n_inputs, ts_pool_kind pool, bool normalize, float *out,
                          ts_error *err);

/* The vocabulary as grammars see it (gmask.c): each token's piece without special text
 * (control, unknown and unused tokens, and ids past the tokenizer's vocabulary, are empty and
 * never allowed by a grammar) and tok's end-of-generation ids; n_vocab tokens. The engine
 * builds one at its first constrained request; the runtime one per ts_llm for
 * ts_constraint_create. */
struct ts_gvocab;
ts_status ts_engine_gvocab_build(const ts_tokenizer *tok, int32_t n_vocab, struct ts_gvocab **out,
                                 ts_error *err);

#endif /* TS_ENGINE_ENGINE_H */
