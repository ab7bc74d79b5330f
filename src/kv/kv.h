/*
 * kv.h — the paged KV cache block manager.
 *
 * The KV cache is one pool of n_blocks blocks — or two, see "Pools" below; each block holds
 * the keys and values of block_size consecutive tokens of one sequence, for every layer of its
 * pool. This module only keeps the books: which block ids are free, which sequence uses which
 * blocks (block tables), how many tables point at each block (ref counts), which full blocks
 * hold a known token prefix (prefix cache), and which shared block must be copied before a
 * write (copy-on-write). It does no math and owns no K/V memory: the model/engine owns a
 * backend buffer per pool laid out by block id, so token slot
 * `s = block_id * block_size + offset` addresses the K/V row of that token.
 *
 * Pools: TS_KV_POOL_FULL serves the layers that attend to the whole context. A manager made
 * with n_blocks_swa > 0 has a second pool, TS_KV_POOL_SWA, for sliding-window layers, where a
 * key at position j is visible to the query at position p only when p - j < swa_window. Every
 * pool has its own blocks, lists, block tables and prefix table; a sequence has one table per
 * pool, indexed the same way (entry i holds positions [i * block_size, (i + 1) * block_size)).
 * In the sliding-window pool a sequence keeps only the blocks a future query can still see:
 * with e = its committed tokens (the earliest position still to compute), block i is released
 * as soon as every position in it is <= e - swa_window, and its table entry becomes -1. So
 * that pool holds about swa_window + block_size positions per sequence (plus the tokens of the
 * step being computed), however long the sequence grows.
 *
 * Life of a sequence (the engine drives it):
 *   ts_kv_seq_open        -> an empty sequence with an optional cache salt
 *   ts_kv_seq_match_prefix-> reuse the longest cached prefix of the prompt (tokens computed)
 *   ts_kv_append          -> reserve slots for new tokens; may ask for one block copy (COW)
 *   (caller performs the copies, then runs the forward pass writing K/V into the slots)
 *   ts_kv_seq_commit      -> those tokens' K/V are now computed; full blocks become cacheable
 *   ts_kv_seq_fork        -> a child sharing every block of its parent (parallel sampling)
 *   ts_kv_seq_reset       -> preemption: drop every block, keep the sequence (recompute later)
 *   ts_kv_seq_close       -> drop every block and the sequence
 *
 * Block states, per pool (ts_kv_check verifies them): FREE (ref 0, no content anyone can find),
 * EVICTABLE (ref 0, full, committed and registered in the prefix cache, kept until its block
 * is needed, evicted least recently released first), USED (ref > 0). A block's ref count
 * equals the number of block-table entries (of its pool) that hold it. Two tables hold the same
 * block only at the same position and only when they share it through the prefix cache or a
 * fork.
 *
 * Prefix cache: a full, committed block is named by SHA-256(parent hash || its token ids as
 * little-endian int32), where the first block's parent is SHA-256 of a domain tag and the
 * sequence's salt. A block hash therefore names the whole prefix up to and including the
 * block, so equal tokens after a different history (or under a different salt) never match.
 * Both pools cache their blocks under the same names. A cached prefix of m blocks is reused
 * only when every pool still holds what computing position m * block_size needs: the full
 * pool blocks 0..m-1, the sliding-window pool the blocks holding positions
 * [m * block_size - swa_window + 1, m * block_size) — released window blocks stay findable
 * (evictable) until their memory is taken, so a prefix whose window blocks were evicted is
 * matched only up to a shorter length whose window is still there (the rest is recomputed).
 *
 * Errors: every fallible call returns ts_status and fills err (required: only the public API
 * accepts a NULL buffer) with what, where and why; a failed call leaves the manager unchanged.
 * Running out of blocks is TS_ERR_LIMIT.
 *
 * Thread safety: none. The manager is owned by one thread (the engine's step thread); callers
 * that need it elsewhere must serialise access themselves.
 */
#ifndef TS_KV_KV_H
#define TS_KV_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

#define TS_KV_DEFAULT_BLOCK_SIZE 16u

/* ---- sizing -------------------------------------------------------------------------- */

/* Element type of the K or V storage. The values equal the GGUF/GGML type ids (F32 = 0,
 * F16 = 1, Q4_0 = 2, Q5_0 = 6, Q8_0 = 8, BF16 = 30) so the model layer can pass them on
 * unchanged. The block types quantize each [head_dim] row in blocks of 32 elements. */
typedef enum ts_kv_dtype {
    TS_KV_F32 = 0,
    TS_KV_F16 = 1,
    TS_KV_Q4_0 = 2,
    TS_KV_Q5_0 = 6,
    TS_KV_Q8_0 = 8,
    TS_KV_BF16 = 30,
} ts_kv_dtype;

/* Geometry of the K/V of one token across the model. K and V may have different types. */
typedef struct ts_kv_shape {
    uint32_t n_layer;    /* layers that keep K/V */
    uint32_t n_kv_head;  /* key/value heads per layer (GQA: fewer than query heads) */
    uint32_t head_dim;   /* elements per head; a multiple of 32 for the block types */
    ts_kv_dtype dtype_k; /* K's type (TS_KV_F16 by default) */
    ts_kv_dtype dtype_v; /* V's type */
} ts_kv_shape;

/* "f32", "f16", "bf16", "q8_0", "q5_0", "q4_0"; NULL for an unknown value. */
const char *ts_kv_dtype_name(ts_kv_dtype dtype);

/* Parses one of the names above (case-insensitive). */
ts_status ts_kv_dtype_from_name(const char *name, ts_kv_dtype *out, ts_error *err);

/* Bytes of K and V of one token over all layers:
 * n_layer * n_kv_head * (K row bytes + V row bytes), a row of head_dim elements taking 4 bytes
 * each (f32), 2 (f16, bf16), or per block of 32: 34 (q8_0), 22 (q5_0), 18 (q4_0). */
ts_status ts_kv_bytes_per_token(const ts_kv_shape *shape, uint64_t *out, ts_error *err);

/* Blocks that fit in budget_bytes (rounded down); TS_ERR_LIMIT when not even one fits,
 * TS_ERR_RANGE when the count would exceed what a pool can address. */
ts_status ts_kv_blocks_for_memory(uint64_t budget_bytes, uint64_t bytes_per_token,
                                  uint32_t block_size, uint32_t *n_blocks, ts_error *err);

/* Blocks needed to hold n_ctx tokens (rounded up). */
ts_status ts_kv_blocks_for_context(uint64_t n_ctx, uint32_t block_size, uint32_t *n_blocks,
                                   ts_error *err);

/* Blocks of a sliding-window pool (ts_kv_config.n_blocks_swa) for max_seqs sequences that
 * each keep `window` positions, computed in steps of up to max_step_tokens tokens:
 * max_seqs * (ceil(window / block_size) + 2) + ceil(max_step_tokens / block_size) — what the
 * sequences can hold at once (each: the blocks of its last window - 1 positions, at most
 * ceil(window / block_size) + 1, plus those of its tokens in the step) — but at most
 * n_blocks_full, since a sequence never holds more sliding-window blocks than full ones. */
ts_status ts_kv_blocks_for_window(uint64_t window, uint32_t block_size, uint32_t max_seqs,
                                  uint32_t max_step_tokens, uint32_t n_blocks_full,
                                  uint32_t *n_blocks, ts_error *err);

/* ---- the manager ------------------------------------------------------------------- */

/* The pools of a manager (see the top of this file). */
typedef enum ts_kv_pool {
    TS_KV_POOL_FULL = 0, /* layers that see the whole context */
    TS_KV_POOL_SWA = 1,  /* sliding-window layers (only with n_blocks_swa > 0) */
} ts_kv_pool;

#define TS_KV_MAX_POOLS 2

typedef struct ts_kv_config {
    uint32_t n_blocks;     /* blocks in the full pool, > 0 */
    uint32_t block_size;   /* tokens per block; 0 means TS_KV_DEFAULT_BLOCK_SIZE */
    uint32_t max_seqs;     /* sequences open at once, > 0 */
    uint32_t max_seq_len;  /* tokens one sequence may hold; 0 means n_blocks * block_size */
    bool prefix_cache;     /* automatic prefix caching on/off */
    uint32_t n_blocks_swa; /* blocks in the sliding-window pool; 0: no such pool (sliding-window
                              layers, if any, use the full pool and keep everything) */
    uint32_t swa_window;   /* window of the sliding-window pool in positions, > 0 with
                              n_blocks_swa */
} ts_kv_config;

/* One block copy the caller must perform (all layers of the pool, K and V, the first `fill`
 * slots at least) before writing into dst. */
typedef struct ts_kv_copy {
    int32_t pool; /* ts_kv_pool both ids belong to */
    int32_t src;  /* block id to read */
    int32_t dst;  /* block id to write; now in the appending sequence's table */
} ts_kv_copy;

/* Block totals of one pool. */
typedef struct ts_kv_pool_stats {
    uint32_t n_blocks;
    uint32_t n_free;      /* ref 0, nothing cached: taken first */
    uint32_t n_evictable; /* ref 0, still findable in the prefix cache */
    uint32_t n_used;      /* ref > 0 */
    uint32_t n_cached;    /* registered in the prefix cache (used or evictable) */
} ts_kv_pool_stats;

/* Counters and the full pool's block totals (n_blocks .. n_cached); swa: the sliding-window
 * pool's, all zero without one. */
typedef struct ts_kv_stats {
    uint32_t n_blocks;
    uint32_t block_size;
    uint32_t n_free;              /* ref 0, nothing cached: taken first */
    uint32_t n_evictable;         /* ref 0, still findable in the prefix cache */
    uint32_t n_used;              /* ref > 0 */
    uint32_t n_cached;            /* blocks registered in the prefix cache (used or evictable) */
    ts_kv_pool_stats swa;         /* the sliding-window pool */
    uint32_t n_seqs;              /* open sequences */
    uint64_t prefix_queries;      /* ts_kv_seq_match_prefix calls */
    uint64_t prefix_query_tokens; /* prompt tokens those calls looked up */
    uint64_t prefix_hit_tokens;   /* tokens found computed; hit rate = hit / query tokens */
    uint64_t n_evictions;         /* cached blocks dropped to satisfy an allocation (all pools) */
    uint64_t n_cow_copies;        /* copies asked for by copy-on-write (all pools) */
} ts_kv_stats;

/* Per-sequence view. */
typedef struct ts_kv_seq_info {
    uint32_t n_tokens;    /* tokens with a slot */
    uint32_t n_committed; /* tokens whose K/V the caller reported computed */
    uint32_t n_blocks;    /* block-table entries: ceil(n_tokens / block_size) */
    uint32_t swa_first;   /* the first entry the sliding-window table still holds (those before
                             it are -1); 0 without that pool */
} ts_kv_seq_info;

typedef struct ts_kv ts_kv; /* opaque */

/* Creates a manager. Sizes every array first and makes one allocation for them. The caller
 * owns *out and frees it with ts_kv_destroy. TS_ERR_INVALID_ARG for a sliding-window pool
 * without a window. */
ts_status ts_kv_create(const ts_kv_config *cfg, ts_kv **out, ts_error *err);

/* Frees the manager (NULL is fine). Pointers it returned become invalid. */
void ts_kv_destroy(ts_kv *kv);

/* Opens an empty sequence. salt (salt_len bytes, may be NULL when salt_len is 0) separates
 * prefix-cache namespaces: sequences with different salts never share cached blocks. The id
 * written to *seq is in [0, max_seqs) and stays valid until ts_kv_seq_close.
 * TS_ERR_LIMIT when max_seqs sequences are open. */
ts_status ts_kv_seq_open(ts_kv *kv, const void *salt, size_t salt_len, uint32_t *seq,
                         ts_error *err);

/* Frees every block of seq (to the free list, or to the evictable LRU when cached) and the
 * sequence id. */
ts_status ts_kv_seq_close(ts_kv *kv, uint32_t seq, ts_error *err);

/* Preemption: frees every block of seq but keeps it open (same id, same salt) with no
 * tokens, ready for ts_kv_seq_match_prefix and re-appending its tokens. */
ts_status ts_kv_seq_reset(ts_kv *kv, uint32_t seq, ts_error *err);

/* For an empty sequence: finds the longest run of cached full blocks that starts the token
 * list and that every pool can continue (the sliding-window pool must hold the blocks of the
 * window before the run's end, see "Prefix cache" above), takes a reference to each block
 * needed and puts them in seq's tables. At most n - 1 tokens are matched, so the caller always
 * has at least one token to compute (for its logits).
 * *n_cached receives the number of tokens now present and committed (a multiple of
 * block_size); the caller appends tokens[*n_cached..n). Counts toward the hit-rate stats.
 * With prefix caching off, *n_cached is 0. TS_ERR_STATE when seq is not empty. */
ts_status ts_kv_seq_match_prefix(ts_kv *kv, uint32_t seq, const int32_t *tokens, uint32_t n,
                                 uint32_t *n_cached, ts_error *err);

/* Appends n tokens to seq: allocates blocks in every pool as needed and writes each token's
 * full-pool slot (block_id * block_size + offset) to slots[0..n) (slots may be NULL; the
 * sliding-window pool's through ts_kv_seq_slot). When the last block of a pool is partly
 * filled and shared (ref > 1), seq first gets a fresh block there and one copy is recorded:
 * read them with ts_kv_copies and perform them before writing K/V. tokens are kept for prefix
 * hashing. TS_ERR_LIMIT when a pool (free + evictable) has too few blocks or the sequence
 * would exceed max_seq_len; nothing changes then. */
ts_status ts_kv_append(ts_kv *kv, uint32_t seq, const int32_t *tokens, uint32_t n, int32_t *slots,
                       ts_error *err);

/* The block copies of the last successful ts_kv_append (at most one per pool; read it as an
 * array). The pointer is owned by kv and valid until the next call that changes kv. */
const ts_kv_copy *ts_kv_copies(const ts_kv *kv, uint32_t *n_copies);

/* Marks the next n appended tokens of seq as computed. Every block that is now full and
 * committed gets its chain hash and, unless an identical block is already cached, joins the
 * prefix cache. Then the sliding-window pool releases the blocks that left the window of
 * every future query (see "Pools"); a cached one stays findable (evictable). TS_ERR_RANGE
 * when fewer than n tokens are uncommitted. */
ts_status ts_kv_seq_commit(ts_kv *kv, uint32_t seq, uint32_t n, ts_error *err);

/* Forgets the last n appended, uncommitted tokens of seq (speculative decoding's rejected
 * drafts): their slots are given up and the blocks holding only them go back to the pool, so
 * seq is as if they had never been appended. Committed tokens, hashes and the prefix cache are
 * untouched. TS_ERR_RANGE when fewer than n tokens are uncommitted. */
ts_status ts_kv_seq_drop(ts_kv *kv, uint32_t seq, uint32_t n, ts_error *err);

/* Opens *child sharing every block of parent (ref counts incremented), with the same
 * tokens, commit point and salt. The first of them to append into a shared, partly filled
 * last block gets a copy (copy-on-write). TS_ERR_LIMIT when max_seqs sequences are open. */
ts_status ts_kv_seq_fork(ts_kv *kv, uint32_t parent, uint32_t *child, ts_error *err);

/* Scheduler query: can ts_kv_append give n_new[i] more tokens to seqs[i] for every i, all in
 * this step? Counts new blocks plus copy-on-write copies exactly, in every pool (seqs must be
 * distinct). *ok answers it; *n_blocks_needed (may be NULL) gets the blocks the appends would
 * take from the full pool, to compare with its free + evictable. Changes nothing.
 * TS_ERR_LIMIT when a sequence would exceed max_seq_len (preemption cannot fix that). */
ts_status ts_kv_can_append(ts_kv *kv, const uint32_t *seqs, const uint32_t *n_new, uint32_t count,
                           bool *ok, uint32_t *n_blocks_needed, ts_error *err);

/* Admission query for a new request: would a sequence with this salt that matches its
 * prefix in tokens[0..n) and then grows to n_alloc tokens in total (in one append) fit now,
 * in every pool? *n_cached
 * (may be NULL) gets the tokens the prefix cache would supply. Changes nothing (no stats,
 * no LRU order). TS_ERR_LIMIT when n_alloc exceeds max_seq_len. */
ts_status ts_kv_can_admit(ts_kv *kv, const void *salt, size_t salt_len, const int32_t *tokens,
                          uint32_t n, uint32_t n_alloc, bool *ok, uint32_t *n_cached,
                          ts_error *err);

/* The block table of seq in pool: ids of its blocks in token order (-1 for the blocks the
 * sliding-window pool released); *n_blocks gets its length. The array is owned by kv, valid
 * until the next call that changes kv; NULL for a bad id or a pool the manager lacks. */
const int32_t *ts_kv_seq_block_table(const ts_kv *kv, ts_kv_pool pool, uint32_t seq,
                                     uint32_t *n_blocks);

/* All block tables of pool as one row-major [max_seqs, max_blocks_per_seq] array (unused
 * entries hold -1), ready to bind as the attention's block-table input. *stride gets
 * max_blocks_per_seq. Owned by kv; the address never changes. NULL for a pool the manager
 * lacks. */
const int32_t *ts_kv_block_tables(const ts_kv *kv, ts_kv_pool pool, uint32_t *stride);

/* Slot of token position pos of seq in pool. TS_ERR_RANGE past the sequence's tokens or, in
 * the sliding-window pool, for a position whose block was released. */
ts_status ts_kv_seq_slot(const ts_kv *kv, ts_kv_pool pool, uint32_t seq, uint32_t pos,
                         int32_t *slot, ts_error *err);

ts_status ts_kv_seq_get_info(const ts_kv *kv, uint32_t seq, ts_kv_seq_info *out, ts_error *err);

/* Counters and block-state totals. */
void ts_kv_get_stats(const ts_kv *kv, ts_kv_stats *out);

/* Forgets every cached prefix: evictable blocks become free and used blocks stop being
 * findable (their sequences keep them). For a change of weights or adapters. */
void ts_kv_prefix_clear(ts_kv *kv);

/* Checks every invariant listed at the top of this file; TS_ERR_INTERNAL with the first
 * violation (which block or sequence, and what) when one fails. For tests and debug builds:
 * costs O(n_blocks + max_seqs * max_blocks_per_seq) plus one SHA-256 per hashed table entry,
 * and allocates its scratch (TS_ERR_NOMEM if that fails). */
ts_status ts_kv_check(const ts_kv *kv, ts_error *err);

#endif /* TS_KV_KV_H */
