/*
 * shard.h — how a model is cut for tensor parallelism (DESIGN.md decision 11).
 *
 * A shard is (rank, size). Its plan says, per weight role, along which axis the weight is
 * split (the Megatron pattern) and which slice this rank owns:
 *
 *   COL (column-parallel: the output rows, ne[1], are split)
 *       Q, K, V (and their biases, and the fused QKV in three parts), FFN gate and up (and
 *       the fused gate_up in two parts, the up bias): each shard computes whole attention
 *       heads and a slice of the FFN hidden units, with no communication.
 *   ROW (row-parallel: the input columns, ne[0], are split)
 *       attention output and FFN down: each shard multiplies its heads' / hidden units' part
 *       and ONE all-reduce sums the partial outputs; the bias is added after the sum.
 *   NONE (replicated): embeddings, norms, per-head Q/K norms, position embeddings, the
 *       mixture-of-experts router and the shared expert's gate. Where the Q/K norms span
 *       the whole projection (OLMo 2) Q and K are replicated too: each shard computes them
 *       whole, norms them and keeps its own heads (exact, at the cost of the Q and K matrices
 *       on every shard).
 *   Experts are split like a dense FFN, each expert the same way: the stacked gate and up
 *   matrices COL (every shard holds the same hidden units of every expert), the stacked down
 *   matrices ROW; every shard routes every token (the router is replicated, so all shards pick
 *   the same experts) and one all-reduce sums the weighted expert outputs (and the shared
 *   expert's, split the same way).
 *   The output projection (or the tied token_embd) is vocab-parallel (COL over the
 *   vocabulary, then an all-gather of the logits) when size divides n_vocab, else replicated.
 *
 * Heads (GQA: the n_head query heads form n_head_kv groups of n_head / n_head_kv, each group
 * sharing one KV head). Shards may differ in size; every cut is as even as possible, the
 * first shards taking the one extra item:
 *   size <= n_head_kv   the KV heads are cut into `size` runs and each shard takes its KV
 *                       heads' whole query groups. SmolLM2-135M (9 heads, 3 KV) at tp 2:
 *                       shard 0 owns KV heads 0..1 and query heads 0..5, shard 1 KV head 2
 *                       and query heads 6..8.
 *   size > n_head_kv    the KV heads are replicated: the shards are spread over the groups
 *                       (first groups get one more), each group's query heads are cut among
 *                       its shards, and each shard keeps a copy of its group's KV head.
 *                       Gemma 3 270M (4 heads, 1 KV) at tp 2: heads 0..1 and 2..3; 6 heads
 *                       in 2 groups at tp 4: heads {0,1}, {2}, {3,4}, {5}.
 *   size > n_head       error (a zero-width shard).
 * FFN hidden units are cut into runs of whole blocks of the FFN down weight's quantization
 * block (1 for float types): SmolLM2's 1536 at tp 2 give 768 each. Row-parallel weights of
 * block-quantized types keep whole blocks: the attention output columns a shard owns (its
 * heads times head_dim) must start and end on block boundaries, else an error naming the
 * tensor, the shard and the numbers.
 *
 * Shards only read their slice of each weight: the forward pass makes views with an offset
 * into the mapped file, nothing is copied. Each shard's KV cache holds only its own KV heads
 * (plan.n_kv of them), so shards' caches differ in size when their KV heads do.
 *
 * Plain data; thread-safe once made.
 */
#ifndef TS_MODEL_SHARD_H
#define TS_MODEL_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef enum ts_split {
    TS_SPLIT_NONE = 0, /* replicated */
    TS_SPLIT_COL = 1,  /* output rows (ne[1]) split: column-parallel */
    TS_SPLIT_ROW = 2,  /* input columns (ne[0]) split: row-parallel, all-reduce after */
} ts_split;

typedef struct ts_shard {
    int rank; /* 0..size-1 */
    int size; /* shards in the group; 1 = the whole model */
} ts_shard;

typedef struct ts_shard_plan {
    ts_shard shard;
    ts_split split[TS_ROLE_COUNT]; /* split axis of each weight role */
    int64_t head0, n_head;         /* query heads [head0, head0 + n_head) */
    int64_t kv0, n_kv;             /* KV heads [kv0, kv0 + n_kv) */
    bool kv_replicated;            /* KV heads are copies shared with other shards */
    int64_t ff0, n_ff;             /* FFN hidden units [ff0, ff0 + n_ff) */
    bool vocab_parallel;           /* logits: vocabulary split, then all-gathered */
    int64_t vocab0, n_vocab;       /* output rows this shard computes */
    int64_t ffe0, n_ffe;           /* mixture of experts: hidden units [ffe0, ffe0 + n_ffe) of
                                      every expert (n_ff_exp of them) */
    int64_t ffs0, n_ffs;           /* and of the shared expert (n_ff_shexp) */
} ts_shard_plan;

/* Name of a split axis ("replicated", "column", "row"). */
const char *ts_split_name(ts_split s);

/* Plans shard (rank, size) of model m. Errors (TS_ERR_INVALID_ARG / TS_ERR_UNSUPPORTED) give
 * the numbers: a zero-width shard (more shards than query heads or FFN blocks), a quantized
 * row-parallel weight whose columns for some shard would split a block. Every rank of a group
 * checks every shard, so all ranks fail alike. */
ts_status ts_shard_plan_make(const ts_model *m, ts_shard shard, ts_shard_plan *out, ts_error *err);

/* KV heads held by the `size` shards of m together (*total: replicated heads count once per
 * copy) and by the shard holding the most (*most). Size 1 gives n_head_kv twice. */
ts_status ts_shard_kv_heads(const ts_model *m, int size, int64_t *total, int64_t *most,
                            ts_error *err);

#endif /* TS_MODEL_SHARD_H */
