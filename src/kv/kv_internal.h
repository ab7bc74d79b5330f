/*
 * kv_internal.h — the block manager's data layout, shared by the src/kv/ sources.
 *
 * Everything below hangs off one allocation made by ts_kv_create (the ts_kv struct followed
 * by its arrays); only the SHA-256 context lives in OpenSSL's memory.
 *
 * Pools: pools[0] is the full pool (window 0: keeps every block of a sequence), pools[1] the
 * sliding-window pool when there is one. Each has its own blocks, lists, tables and prefix
 * table; the sequences, their tokens counts and hash-chain progress are shared.
 *
 * Lists (per pool): FREE blocks form a singly linked stack through `next`; EVICTABLE blocks
 * form a doubly linked LRU list (head = released longest ago = evicted first). USED blocks are
 * on no list. Closed sequence ids form a stack through kv_seq.next_free.
 */
#ifndef TS_KV_KV_INTERNAL_H
#define TS_KV_KV_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/types.h>

#include "kv/kv.h"

#define KV_HASH_BYTES 32
#define KV_NONE       (-1)

enum kv_block_state {
    KV_BLOCK_FREE = 0,
    KV_BLOCK_EVICTABLE = 1,
    KV_BLOCK_USED = 2,
};

typedef struct kv_block {
    uint32_t ref;  /* block-table entries holding this block */
    uint32_t fill; /* tokens written, 0..block_size */
    int32_t prev;  /* LRU list only */
    int32_t next;  /* free stack or LRU list */
    uint8_t state; /* enum kv_block_state */
    bool has_hash; /* hash is the chain hash of this full, committed block */
    bool cached;   /* hash is registered in the prefix table (implies has_hash) */
    uint8_t hash[KV_HASH_BYTES];
} kv_block;

typedef struct kv_pool {
    uint32_t n_blocks;
    uint32_t window;   /* 0: sequences keep every block; else positions a query sees */
    kv_block *blocks;  /* [n_blocks] */
    int32_t *tokens;   /* [n_blocks, block_size] token ids written into each block */
    int32_t *tables;   /* [max_seqs, max_blocks_per_seq] block ids, KV_NONE when unused */
    int32_t *htab;     /* [htab_mask + 1] open-addressing prefix table of block ids */
    uint32_t *scratch; /* [n_blocks] per-call counters for ts_kv_can_append */
    uint32_t htab_mask;

    int32_t free_head;
    uint32_t n_free;
    int32_t lru_head;
    int32_t lru_tail;
    uint32_t n_evictable;
    uint32_t n_cached;
} kv_pool;

typedef struct kv_seq {
    bool open;
    uint32_t n_tokens;               /* tokens with slots */
    uint32_t n_committed;            /* <= n_tokens */
    uint32_t n_blocks;               /* ceil(n_tokens / block_size): entries of every table */
    uint32_t n_hashed;               /* leading blocks whose chain hash is known */
    uint32_t first[TS_KV_MAX_POOLS]; /* per pool: the first entry still held (0 for the full
                                        pool; kv_window_first(pool, n_committed) otherwise) */
    int32_t next_free;               /* closed-id stack */
    uint8_t root[KV_HASH_BYTES];     /* chain start: SHA-256(tag || salt) */
} kv_seq;

struct ts_kv {
    uint32_t block_size;
    uint32_t max_seqs;
    uint32_t max_seq_len;
    uint32_t max_blocks_per_seq;
    bool prefix_cache;

    uint32_t n_pools; /* 1, or 2 with a sliding-window pool */
    kv_pool pools[TS_KV_MAX_POOLS];
    kv_seq *seqs;    /* [max_seqs] */
    uint8_t *hashes; /* [max_blocks_per_seq, KV_HASH_BYTES] prefix-walk scratch (prefix cache) */

    int32_t seq_free_head;
    uint32_t n_seqs;

    ts_kv_copy copies[TS_KV_MAX_POOLS]; /* an append copies at most its last block per pool */
    uint32_t n_copies;

    uint64_t prefix_queries;
    uint64_t prefix_query_tokens;
    uint64_t prefix_hit_tokens;
    uint64_t n_evictions;
    uint64_t n_cow_copies;

    EVP_MD_CTX *md_ctx; /* reused SHA-256 context */
    EVP_MD *md;         /* fetched SHA-256 implementation */
};

/* kv_pool.c — block lists. */
int32_t kv_block_take(ts_kv *kv, kv_pool *p); /* free first, else evict LRU; KV_NONE if none */
void kv_block_release(kv_pool *p, int32_t b); /* ref--; to free stack or LRU at 0 */
void kv_block_acquire(kv_pool *p, int32_t b); /* ref++; leaves the LRU at 0 -> 1 */
uint32_t kv_blocks_available(const kv_pool *p);

/* kv_prefix.c — hashing and the prefix table. */
ts_status kv_hash_root(const ts_kv *kv, const void *salt, size_t salt_len,
                       uint8_t out[KV_HASH_BYTES], ts_error *err);
ts_status kv_hash_block(const ts_kv *kv, const uint8_t parent[KV_HASH_BYTES], const int32_t *tokens,
                        uint8_t out[KV_HASH_BYTES], ts_error *err);
int32_t kv_htab_find(const kv_pool *p, const uint8_t hash[KV_HASH_BYTES]);
void kv_htab_insert(kv_pool *p, int32_t b); /* b's hash must not be present */
void kv_htab_remove(kv_pool *p, int32_t b); /* b must be present */
ts_status kv_md_open(ts_kv *kv, ts_error *err);
void kv_md_close(ts_kv *kv);

static inline int32_t *kv_table(const ts_kv *kv, const kv_pool *p, uint32_t seq) {
    return p->tables + (uint64_t)seq * kv->max_blocks_per_seq;
}

/* The first table entry a sequence of pool p must still hold when `next` is the earliest
 * position it will compute: the block of position next - window + 1 (a key j is visible to
 * a query q >= next only when q - j < window, so every j <= next - window is dead). 0 for
 * the full pool. */
static inline uint32_t kv_window_first(const ts_kv *kv, const kv_pool *p, uint32_t next) {
    if (p->window == 0 || next < p->window) {
        return 0;
    }
    return (next - p->window + 1) / kv->block_size;
}

#endif /* TS_KV_KV_INTERNAL_H */
