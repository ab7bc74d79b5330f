/* engine_internal.h — the engine's private structures, shared by its .c files. */
#ifndef TS_ENGINE_ENGINE_INTERNAL_H
#define TS_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>

#include "engine/draft_ngram.h"
#include "engine/engine.h"
#include "grammar/grammar.h"
#include "kv/kv.h"
#include "model/runner.h"

typedef struct request request;

/* One generated sequence: a request has n of them. */
typedef struct seq {
    request *req;
    int32_t index;   /* 0..n-1 within the request */
    int32_t *tokens; /* prompt + generated, capacity req->cap_tokens */
    int32_t n_tokens;
    int32_t n_computed; /* tokens whose K/V are in the cache */
    int32_t n_generated;
    bool has_kv; /* holds a KV sequence */
    uint32_t kv_id;
    uint64_t admit_order; /* larger = admitted later = preempted first */
    ts_sampler *sampler;
    ts_detok_stream *detok;
    char *held; /* text held back while it could start a stop string */
    size_t held_len, held_cap;
    ts_finish_reason finish;
    struct seq *next;    /* waiting queue link */
    int32_t batch_chunk; /* tokens scheduled in the current step */
    int32_t batch_out;   /* output row in the current step, or -1 */
    ts_gmatch *gm;       /* where the output is in the request's grammar; NULL: unconstrained */
    int32_t g_job;       /* this step's mask job (gmask.c), or -1 */
    ts_ngram *ngram;     /* its n-gram drafter; NULL: no speculation */
    int32_t n_draft;     /* tokens drafted this step: tokens[n_tokens .. n_tokens + n_draft) */
    int32_t draft_len;   /* how many to draft next (adapts to what was accepted) */
    /* With a draft model (draft_model.c): its KV sequence, whose first d_n_computed tokens are
     * committed (a prefix of tokens), then d_n_pending draft tokens appended last step
     * (d_tokens[0..d_n_pending)); d_tokens[0..d_n_ready) are this step's drafts. */
    bool has_dkv;
    uint32_t dkv_id;
    int32_t d_n_computed;
    int32_t d_n_pending;
    int32_t d_n_ready;
    int32_t *d_tokens;  /* [draft_max], allocated by the first draft */
    int32_t spec_fails; /* verifications in a row that accepted nothing */
    /* With a draft model: drafts accepted and refused, decayed per verification (the
     * acceptance estimate that chooses the draft length). */
    float spec_acc, spec_rej;
    int32_t spec_pause; /* decoding steps to wait before drafting again (after failures) */
} seq;

struct request {
    uint64_t id;
    int32_t n_prompt;
    int32_t max_tokens; /* resolved: never 0 */
    int32_t cap_tokens; /* n_prompt + max_tokens */
    int32_t n;
    int32_t n_finished;
    int32_t cached_tokens; /* prefix-cache hit of the first admission */
    bool forked;           /* children made (n > 1) */
    bool fork_reserved;    /* n - 1 sequence slots are promised to the coming forks */
    bool aborted;
    ts_request_params params; /* stop / salt pointers point into this request's copies */
    char *stop_storage;
    const char *stop_ptrs[TS_ENGINE_MAX_STOP];
    void *salt;
    ts_grammar *grammar; /* compiled at submit (owned); NULL: unconstrained */
    ts_engine_callback cb;
    void *user;
    seq **seqs;    /* [n] */
    request *next; /* inbox / active list link */
};

struct ts_engine {
    const ts_model *model;
    const ts_tokenizer *tok;
    ts_runner *runner; /* borrowed */
    ts_engine_config cfg;
    int32_t n_vocab;
    int64_t max_blk; /* block-table width */
    bool swa_pool;   /* the KV cache has a sliding-window pool (TS_KV_POOL_SWA) */
    ts_kv *kv;

    /* Shared with other threads, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    request *inbox_head, *inbox_tail;
    int64_t n_inbox;
    int64_t n_waiting_pub; /* the scheduler's waiting count at the last publish_stats */
    uint64_t *aborts;
    int64_t n_aborts, cap_aborts;
    uint64_t next_id;
    uint64_t seed_counter;
    int64_t n_active_requests; /* inbox + admitted, for has_work / wait */
    ts_engine_stats stats;     /* snapshot */

    /* Step thread only. */
    request *active; /* admitted requests (linked) */
    seq **running;   /* [max_seqs], by admission order */
    int64_t n_running;
    seq *wait_head, *wait_tail; /* waiting sequences, FIFO (preempted ones at the front) */
    int64_t n_waiting;
    uint64_t admit_counter;
    int64_t n_pending_forks; /* slots promised to forks of admitted requests */
    /* Batch arrays, sized once. */
    int32_t *b_tokens, *b_pos, *b_seq, *b_slots, *b_table, *b_len, *b_out;
    seq **b_seqs;  /* [max_seqs] sequences in the batch */
    float *logits; /* [max_seqs, n_vocab] */
    uint64_t n_steps, n_preemptions, prompt_computed, generated;
    int64_t max_out;        /* rows of logits a step may ask for (the runner's bucket) */
    int64_t spec_left;      /* draft tokens this step may still add */
    int32_t *draft_buf;     /* [draft_max] the drafts being verified */
    uint64_t spec_drafted;  /* draft tokens verified */
    uint64_t spec_accepted; /* of them, accepted */
    uint64_t spec_steps;    /* verifications (a sequence's drafts in one step) */
    struct ts_draft *draft; /* the draft model (draft_model.c); NULL: n-gram drafts */

    /* The sliding-window pool's batch slots and tables (used with swa_pool). */
    int32_t *b_slots_swa, *b_table_swa;

    /* Grammars (gmask.c). The vocabulary trie is built by the first constrained submit, on
     * the submitting thread, under gmu; the step thread reads it only after that request
     * passed through mu, so it needs no lock there. */
    pthread_mutex_t gmu;
    ts_gvocab *gvocab;
    struct gpool *gpool; /* mask threads, started by the first step with a constrained seq */
    uint32_t *g_masks;   /* [max_seqs][g_words] this step's masks */
    int32_t *g_counts;   /* [max_seqs] allowed tokens per mask */
    seq **g_jobs;        /* [max_seqs] the sequences whose masks this step computes */
    int32_t n_g_jobs;
    size_t g_words; /* (n_vocab + 31) / 32 */
    uint64_t g_n_masks, g_mask_ns, g_wait_ns;
};

/* output.c */
/* Both return true when the request is complete and has been freed (with s). */
bool ts_engine_emit_token(ts_engine *e, seq *s, int32_t token, const ts_sample_info *info);
bool ts_engine_finish_seq(ts_engine *e, seq *s, ts_finish_reason why, const char *message);

/* engine.c */
void ts_engine_release_kv(ts_engine *e, seq *s);
void ts_engine_unlink_seq(ts_engine *e, seq *s);
void ts_engine_retire_request(ts_engine *e, request *r);
/* A sequence holding a copy of prompt[0..n_prompt) (its detokenizer primed to continue it). */
seq *ts_engine_seq_new(ts_engine *e, request *r, int32_t index, const int32_t *prompt,
                       int32_t n_prompt, ts_error *err);

/* gmask.c */
/* Compiles params' grammar for a request (building the vocabulary trie the first time);
 * *out NULL when the request is unconstrained. */
ts_status ts_engine_grammar_compile(ts_engine *e, const ts_request_params *p, ts_grammar **out,
                                    ts_error *err);
/* Starts computing the masks of the step's constrained sequences that sample (b_seqs[0..ns)
 * with batch_out >= 0) on the mask threads; the caller runs the forward pass meanwhile. */
ts_status ts_engine_masks_begin(ts_engine *e, int64_t ns, ts_error *err);
/* Waits for (and helps with) the masks begun. */
void ts_engine_masks_wait(ts_engine *e);
/* Computes s's mask again, in its job's slot, for where its grammar is now (the rows of a
 * speculative verification after the first: the state has moved over the accepted drafts). */
void ts_engine_mask_recompute(ts_engine *e, seq *s);
/* Masks logits row [n_vocab] for s (-inf where its grammar forbids a token). Returns the
 * number of allowed tokens. */
int32_t ts_engine_mask_apply(ts_engine *e, const seq *s, float *row);
void ts_engine_grammar_destroy(ts_engine *e);

/* Checks that a runner covers the bucket want (the same KV pool, at least its batch). */
ts_status ts_engine_check_runner(const ts_runner *r, const ts_forward_config *want, ts_error *err);

/* draft_model.c */
/* Computes this step's drafts of the running sequences that may draft (within e->spec_left
 * tokens), after bringing their draft caches in step with their tokens. Never fails: a
 * sequence whose draft cannot be made drafts nothing this step. */
void ts_engine_draft_run(ts_engine *e);
/* Copies at most want of s's drafts of this step to out; how many. */
int32_t ts_engine_draft_take(ts_engine *e, seq *s, int32_t *out, int32_t want);
/* Records one verification of s's draft: the acceptance that chooses its draft length
 * (draft_model.c). */
void ts_engine_draft_note(seq *s, int32_t drafted, int32_t accepted);
/* The rule itself: a draft token costing cost target steps, accepted / refused the decayed
 * counts (0.5 acceptance when both are 0); k in min..cap, or cap when cap < min. */
int32_t ts_draft_len_best(double cost, double accepted, double refused, int32_t min, int32_t cap);
/* Closes s's draft KV sequence (with its target KV: preemption, finish). */
void ts_engine_draft_release(ts_engine *e, seq *s);
void ts_engine_draft_destroy(struct ts_draft *d);
/* Tests: the draft cache agrees with the sequences (each running sequence's draft KV sequence
 * holds d_n_computed committed + d_n_pending tokens; no other sequence is open; no waiting
 * sequence holds one) and the block manager's own invariants hold. */
ts_status ts_engine_draft_check(const ts_engine *e, ts_error *err);

/* sched.c */
ts_status ts_engine_schedule_and_run(ts_engine *e, bool *busy, ts_error *err);

#endif /* TS_ENGINE_ENGINE_INTERNAL_H */
