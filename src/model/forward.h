/*
 * forward.h — a model's forward pass as a persistent IR graph over a paged KV cache.
 *
 * ts_forward_create builds the graph once for a shape bucket (at most max_tokens tokens from
 * at most max_seqs sequences per step, logits for at most max_outputs of them), binds the
 * weights where they lie in the mapped file, allocates the KV cache (one K and one V block pool
 * per layer, [head_dim, n_kv, block_size, n_blocks] each, n_kv = n_head_kv for the whole model
 * and the shard's own KV heads for a shard) and the activation arena. Each step
 * (ts_forward_run) only binds inputs — token ids, positions, sequence index and KV slot of
 * every token, each sequence's block table and length, the rows whose outputs are wanted —
 * and runs the graph. Attention reads K/V only through the block tables.
 *
 * Two pools (n_blocks_swa > 0): the sliding-window layers (ts_hparams_layer_is_swa) keep
 * their K/V in pools of n_blocks_swa blocks, addressed by their own slots and block tables
 * (slots_swa, block_table_swa; the block manager's TS_KV_POOL_SWA), whose entries are -1 for
 * the blocks that left every token's window; the other layers use the n_blocks pools and the
 * main tables. With n_blocks_swa = 0 every layer uses the main pools and tables.
 *
 * A forward computes the whole model, or one shard of it (shard.h) with a communicator whose
 * collectives the graph's ALL_REDUCE_SUM / ALL_GATHER ops call (ts_forward_create_shard). How
 * the shards of a group step together is not this object's business: model/tp.h runs the
 * group, and model/runner.h is what the engine drives either way.
 *
 * Block bookkeeping (which blocks a sequence owns) is the caller's (src/kv/); this object owns
 * the K/V storage and copies blocks on request (copy-on-write).
 *
 * Not thread-safe: one thread runs steps.
 */
#ifndef TS_MODEL_FORWARD_H
#define TS_MODEL_FORWARD_H

#include <stdint.h>

#include "ir/backend.h"
#include "ir/ir.h"
#include "model/model.h"

typedef struct ts_forward_config {
    int64_t max_tokens;         /* tokens per step (bucket) */
    int64_t max_seqs;           /* sequences per step */
    int64_t max_outputs;        /* rows of logits per step (<= max_tokens) */
    int64_t n_blocks;           /* KV blocks in the pool */
    int64_t block_size;         /* tokens per block (16 by default) */
    int64_t max_blocks_per_seq; /* width of a block table row */
    ts_type kv_type_k;          /* K cache: TS_TYPE_F16 (default), F32, BF16, Q8_0, Q5_0, Q4_0 */
    ts_type kv_type_v;          /* V cache: the same choices, independent of K */
    int64_t n_ctx;              /* tokens per sequence (Phi-3 picks its long RoPE factors when
                                   it exceeds the original context); 0: max_blocks_per_seq *
                                   block_size */
    int64_t n_blocks_swa;       /* KV blocks in the sliding-window layers' own pool; 0: none
                                   (those layers use the main pool); needs such layers */
} ts_forward_config;

/* The pools a block id can name (the values of the block manager's ts_kv_pool). */
enum { TS_FORWARD_POOL_FULL = 0, TS_FORWARD_POOL_SWA = 1 };

/* One step's inputs. Arrays are borrowed for the duration of the call. */
typedef struct ts_batch {
    int64_t n_tokens;
    const int32_t *tokens; /* [n_tokens] token ids */
    const int32_t *pos;    /* [n_tokens] position of each token in its sequence */
    const int32_t *seq;    /* [n_tokens] index (0..n_seqs-1) of each token's sequence */
    const int32_t *slots;  /* [n_tokens] KV slot = block * block_size + offset */
    int64_t n_seqs;
    const int32_t *block_table; /* [n_seqs][max_blocks_per_seq], -1 for unused entries */
    const int32_t *seq_len;     /* [n_seqs] tokens in the cache after this step */
    int64_t n_outputs;
    const int32_t *outputs; /* [n_outputs] token indices whose logits (embeddings) are wanted */
    /* The sliding-window pool's (n_blocks_swa > 0; else unused): */
    const int32_t *slots_swa;       /* [n_tokens] KV slots */
    const int32_t *block_table_swa; /* [n_seqs][max_blocks_per_seq], -1 for unused entries and
                                       for blocks whose keys no token of the sequence sees */
} ts_batch;

typedef struct ts_forward ts_forward;

/* The whole model on backend b (borrowed; must outlive the forward). reg (borrowed, may be
 * NULL) chooses functional implementations while building. */
ts_status ts_forward_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                            ts_registry *reg, ts_forward **out, ts_error *err);
/* Shard comm->rank of comm->size of the model (shard.h), with comm (borrowed; must outlive the
 * forward) attached to the graph's collectives; comm NULL is ts_forward_create. Every shard of
 * a group must run each step, or the collectives wait; a failed step does not mark comm
 * broken (the group's runner does, model/tp.h). */
ts_status ts_forward_create_shard(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                                  ts_registry *reg, ts_comm *comm, ts_forward **out, ts_error *err);
void ts_forward_destroy(ts_forward *f);

/* Checks every index of a batch against the bucket, the vocabulary and the block pool
 * (TS_ERR_RANGE naming the first bad entry). ts_forward_run checks too; a group's leader checks
 * before handing a batch to the other shards. */
ts_status ts_forward_check_batch(const ts_forward *f, const ts_batch *batch, ts_error *err);

/* Runs one step. logits: [n_outputs][n_vocab] f32, or NULL when not wanted (a follower shard).
 * embd: [n_outputs][n_embd] f32, the final hidden state after the output norm, or NULL.
 * An encoder (hp.enc) computes embd only (logits is left as it is) and needs every sequence
 * of the step whole (positions 0..seq_len-1), since its tokens see all keys both ways. */
ts_status ts_forward_run(ts_forward *f, const ts_batch *batch, float *logits, float *embd,
                         ts_error *err);

/* Copies KV block src to block dst of pool (TS_FORWARD_POOL_*) in every layer that keeps its
 * K/V there (copy-on-write). */
ts_status ts_forward_copy_block(ts_forward *f, int pool, int32_t src, int32_t dst, ts_error *err);

const ts_forward_config *ts_forward_get_config(const ts_forward *f);
/* The shard this forward computes (size 1 for a single device) and its plan. */
const struct ts_shard_plan *ts_forward_shard(const ts_forward *f);
ts_graph *ts_forward_graph(ts_forward *f);
/* Bytes of KV storage (all pools; of the sliding-window pools) and of the activation arena. */
size_t ts_forward_kv_bytes(const ts_forward *f);
size_t ts_forward_kv_swa_bytes(const ts_forward *f);
size_t ts_forward_arena_bytes(const ts_forward *f);

#endif /* TS_MODEL_FORWARD_H */
