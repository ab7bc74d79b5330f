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
 *   NONE (replicated): embeddings, norms, per-head Q/K norms, position embeddings.
 *   The output projection (or the tied token_embd) is vocab-parallel (COL over the
 *   vocabulary, then an all-gather of the logits) when size divides n_vocab, else replicated.
 *
 * Heads: size must divide n_head. KV heads are split when size divides n_head_kv (each shard
 * owns whole GQA groups), and replicated when n_head_kv divides size (each shard's query
 * heads then share one KV head, which size / n_head_kv shards hold a copy of); any other
 * combination is an error. Examples: SmolLM2-135M (9 heads, 3 KV) runs on 1 or 3 shards
 * (2 is an error: 9 heads); Gemma 3 270M (4 heads, 1 KV) runs on 1, 2 or 4 with the KV head
 * replicated. Row-parallel weights of block-quantized types keep whole blocks: the columns a
 * shard owns must be a multiple of the block size (error otherwise, with the numbers).
 *
 * Shards only read their slice of each weight: the forward pass makes views with an offset
 * into the mapped file, nothing is copied. Each shard's KV cache holds its own KV heads.
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
} ts_shard_plan;

/* Name of a split axis ("replicated", "column", "row"). */
const char *ts_split_name(ts_split s);

/* Plans shard (rank, size) of model m. Errors (TS_ERR_INVALID_ARG / TS_ERR_UNSUPPORTED) give
 * the numbers: heads or hidden units that do not divide, a zero-width shard, a quantized
 * row-parallel weight whose per-shard columns would split a block. */
ts_status ts_shard_plan_make(const ts_model *m, ts_shard shard, ts_shard_plan *out, ts_error *err);

#endif /* TS_MODEL_SHARD_H */
