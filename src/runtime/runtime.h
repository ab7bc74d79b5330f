/*
 * runtime.h — what the files of the runtime layer share: the structures behind the public
 * handles of include/tessera.h.
 *
 * The runtime is the layer behind the public API. It owns the wiring that every user of a model
 * needs and that used to live in the tools: model and tokenizer (ts_llm), compute backend by
 * name, debugging hooks, functional overrides, the tensor-parallel group, the runner, the KV
 * cache sizing and the engine (ts_context). Nothing here computes.
 *
 * Files: llm.c (models, tokens), chat.c (chat templates), context.c (making and tearing down a
 * context, reports), tp_group.c (the shards of --tp / --tp-mpi), requests.c (the engine's request
 * API and ts_context_generate), decode.c (the batch API over the KV block manager), quantize.c.
 *
 * Error rule: the public functions accept a NULL ts_error and substitute a local one, so inside
 * src/ an error buffer is never NULL.
 */
#ifndef TS_RUNTIME_RUNTIME_H
#define TS_RUNTIME_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "engine/engine.h"
#include "ir/backend.h"
#include "ir/registry.h"
#include "kv/kv.h"
#include "model/model.h"
#include "model/runner.h"
#include "model/tp.h"
#include "template/jinja.h"
#include "tessera.h"
#include "tokenizer/tokenizer.h"

struct ts_llm {
    ts_gguf *vocab_gguf; /* vocabulary-only open: the file (owned); NULL otherwise */
    ts_model *model;     /* owned; NULL when vocabulary-only */
    ts_tokenizer *tok;   /* owned */
    char name[128];
    char file_type[32];
    ts_llm_info info; /* strings point into this struct */
    char *unused;     /* info.unused_tensors when not "" (owned) */
    char *chat_src;   /* tokenizer.chat_template NUL-terminated (owned); NULL when absent */
    /* The vocabulary trie of ts_constraint_create (constraint.c), built by its first call
     * (owned; set once, by compare-and-swap, so concurrent first calls are safe). */
    _Atomic(struct ts_gvocab *) gvocab;
};

/* The chat template a context (or one ts_llm_chat_render call) renders with (chat.c): a
 * built-in family, or a compiled Jinja template. */
typedef struct rt_chat {
    bool has_family;
    ts_chat_template family;
    ts_tpl *tpl;                         /* NULL when a family renders or there is no template */
    char *source;                        /* the Jinja text (owned), also when it did not compile */
    char broken[TS_ERROR_MSG_MAX + 32];  /* why the model's own template did not compile, or "" */
    char notice[TS_ERROR_MSG_MAX + 128]; /* what was done about it (a warning), or "" */
} rt_chat;

/* The shards of a tensor-parallel context (tp_group.c). */
typedef struct tp_group {
    int size; /* 1 when tensor parallelism is off */
    bool mpi;
    ts_comm **comms;    /* [size] in-process, or [1] this process's MPI communicator */
    ts_backend **peers; /* [size - 1] in-process follower backends */
    ts_tp_config cfg;   /* what the leader's runner gets */
} tp_group;

/* Makes a compute backend by name with n_threads threads ("cpu", "ref", "cuda" on device
 * `device`, "auto": cuda when a CUDA device is present, else cpu); retune: a CPU backend
 * measures its kernels again instead of reading the cached choice; repack: a CPU backend may
 * repack weights where that measured faster (false: it reads them where they lie). */
ts_status rt_backend_create(const char *name, int n_threads, int device, bool retune, bool repack,
                            ts_backend **out, ts_error *err);

/* Opens the group for params->tp / tp_mpi. On an MPI rank > 0 it serves as a follower until
 * rank 0 ends the group and sets *follower. threads: per shard. */
ts_status rt_tp_group_open(tp_group *g, const ts_context_params *p, const ts_model *m,
                           ts_registry *reg, int threads, bool *follower, ts_error *err);
/* Ends the group (MPI: tells the followers there will be no more forwards). */
void rt_tp_group_close(tp_group *g);
/* A leader that fails: ends an MPI job at once (no-op in-process). */
void rt_tp_group_abort(tp_group *g, const char *why);

enum { MODE_NONE = 0, MODE_REQUESTS, MODE_BATCH };

/* The batch API's state (decode.c). */
typedef struct rt_batch {
    ts_kv *kv;       /* block books of batch use; NULL until the first batch call */
    int32_t *kv_id;  /* [max_seqs] caller sequence id -> KV sequence, -1 when none */
    int32_t *bidx;   /* [max_seqs] caller sequence -> index in the step, -1 outside it */
    int32_t *users;  /* [max_seqs] the step's sequences in order of first appearance */
    int32_t *counts; /* [max_seqs] new tokens of each of them */
    uint8_t *opened; /* [max_seqs] this call opened the step's sequence u */
    int32_t *tokens, *pos, *seq, *slots, *outs; /* [max_batch_tokens] step inputs */
    int32_t *order;           /* [max_batch_tokens] token indices grouped by sequence */
    int32_t *gather, *gslots; /* [max_batch_tokens] one sequence's tokens and slots */
    int32_t *table, *len;     /* [max_seqs * max_blocks_per_seq], [max_seqs] */
    int32_t *out_row;         /* [max_batch_tokens] output row of each token of the last batch */
    int32_t n_last;           /* tokens of the last batch */
    float *logits;            /* [max_outputs][n_vocab] */
    float *embd;              /* [max_outputs][n_embd] */

    /* The sliding-window pool's slots and tables (like slots and table), used when the
     * runner has that pool. */
    int32_t *slots_swa, *table_swa;
} rt_batch;

struct ts_context {
    ts_llm *llm;         /* borrowed */
    ts_backend *compute; /* the compute backend itself */
    ts_backend *oracle;  /* compare: the reference backend */
    ts_backend *hook_compare, *hook_profile, *hook_dump;
    ts_backend *backend; /* what runs: compute or its outermost hook */
    FILE *dump_file;
    ts_registry *reg;
    tp_group tp;
    ts_runner *runner;
    ts_engine *engine;
    ts_engine_config ec; /* after defaults */
    rt_chat chat;
    ts_chat_profile chat_profile; /* of chat, computed once after it is chosen */
    ts_context_info info;
    char kv_type[16];         /* info.kv_type: "f16", or "q8_0/q4_0" when K and V differ */
    char kv_type_k[8];        /* info.kv_type_k */
    char kv_type_v[8];        /* info.kv_type_v */
    char kernels[512];        /* info.kernels */
    char kernel_notice[512];  /* info.kernel_notice */
    atomic_int mode;          /* MODE_*: requests or batches, chosen by the first call (atomic:
                                 HTTP threads submit while the stepping thread reads it) */
    uint64_t tokens_computed; /* batch use: tokens decoded (for per-token traffic) */
    bool diverged;            /* compare: a step has diverged; divergence holds the first */
    ts_divergence divergence;
    rt_batch b;
    /* Speculative decoding with a draft model (spec_draft.c); NULL: none. */
    ts_llm *draft_llm;
    ts_runner *draft_runner;
    char *draft_path; /* info.draft_model */
};

/* Opens the draft model's file (whole model) and checks that its vocabulary is the target's
 * (spec_draft.c): TS_ERR_INVALID_ARG naming both models and the first difference. */
ts_status rt_draft_open(ts_context *ctx, const char *path, ts_error *err);
/* Makes the draft model's runner on the context's backend and hands it to the engine. */
ts_status rt_draft_attach(ts_context *ctx, const ts_context_params *p, ts_error *err);

/* Sets up / frees the batch API's state (decode.c); called by context.c. */
ts_status rt_batch_init(ts_context *ctx, ts_error *err);
void rt_batch_free(rt_batch *b);

/* Chooses the template (chat.c): the family `name`, else the Jinja `source`, else the
 * model's own. A model template that does not compile is not an error here (completions still
 * work): c->broken says why and a family its markers name renders instead when there is one. */
ts_status rt_chat_open(rt_chat *c, const ts_llm *llm, const char *name, const char *source,
                       ts_error *err);
void rt_chat_close(rt_chat *c);
/* The profile of a chosen template (chat_profile.c): its source's formats when a Jinja template
 * renders, a family's name (no tools, no markers) when a family does, and the model's own
 * source's formats when nothing renders. */
ts_chat_profile rt_chat_profile(const rt_chat *c, const ts_llm *llm);
/* Renders a chat request (see ts_llm_chat_render); opt may be NULL. */
ts_status rt_chat_apply(const rt_chat *c, const ts_llm *llm, const ts_chat_options *opt,
                        const char *json, size_t len, char **text, size_t *out_len, ts_error *err);
/* {"messages":[{"role","content"}...],"add_generation_prompt":b}; NULL when out of memory. */
char *rt_chat_messages_json(const ts_message *msgs, size_t n_msgs, int add_generation_prompt);

/* Picks the context's mode for this call: TS_ERR_STATE when the other one is in use.
 * *claimed tells whether this call chose it (so that a call that then fails can give it back
 * with rt_unclaim_mode, leaving a fresh context fresh). */
ts_status rt_use_mode(ts_context *ctx, int mode, const char *fn, bool *claimed, ts_error *err);
void rt_unclaim_mode(ts_context *ctx);

/* After a step: keeps the first divergence the compare hook reports (the hook itself only
 * knows the last step). */
void rt_latch_compare(ts_context *ctx);

#endif /* TS_RUNTIME_RUNTIME_H */
