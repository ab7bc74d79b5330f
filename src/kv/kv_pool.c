/*
 * kv_pool.c — creating the block manager and moving blocks between its lists.
 *
 * ts_kv_create computes the size of every array first (overflow-checked) and makes a single
 * allocation holding the ts_kv struct and all of them (each pool's, then the sequences').
 * Block lists, per pool:
 *   free stack  : FREE blocks (ref 0, not findable); taken first, LIFO so a just-freed block
 *                 (warm in the caller's caches) is reused first.
 *   LRU list    : EVICTABLE blocks (ref 0, registered in the prefix table); appended at the
 *                 tail on release, evicted from the head when the free stack is empty.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "util/error.h"

/* ---- block lists ------------------------------------------------------------------- */

static void lru_unlink(kv_pool *p, int32_t b) {
    kv_block *blk = &p->blocks[b];
    if (blk->prev != KV_NONE) {
        p->blocks[blk->prev].next = blk->next;
    } else {
        p->lru_head = blk->next;
    }
    if (blk->next != KV_NONE) {
        p->blocks[blk->next].prev = blk->prev;
    } else {
        p->lru_tail = blk->prev;
    }
    blk->prev = blk->next = KV_NONE;
    p->n_evictable--;
}

static void lru_push_tail(kv_pool *p, int32_t b) {
    kv_block *blk = &p->blocks[b];
    blk->prev = p->lru_tail;
    blk->next = KV_NONE;
    if (p->lru_tail != KV_NONE) {
        p->blocks[p->lru_tail].next = b;
    } else {
        p->lru_head = b;
    }
    p->lru_tail = b;
    blk->state = KV_BLOCK_EVICTABLE;
    p->n_evictable++;
}

static void free_push(kv_pool *p, int32_t b) {
    kv_block *blk = &p->blocks[b];
    blk->state = KV_BLOCK_FREE;
    blk->has_hash = false;
    blk->fill = 0;
    blk->prev = KV_NONE;
    blk->next = p->free_head;
    p->free_head = b;
    p->n_free++;
}

/* Drops b from the prefix table; it keeps its place on whatever list it is on. */
static void uncache(kv_pool *p, int32_t b) {
    kv_htab_remove(p, b);
    p->blocks[b].cached = false;
    p->n_cached--;
}

uint32_t kv_blocks_available(const kv_pool *p) {
    return p->n_free + p->n_evictable;
}

int32_t kv_block_take(ts_kv *kv, kv_pool *p) {
    int32_t b = p->free_head;
    if (b != KV_NONE) {
        p->free_head = p->blocks[b].next;
        p->n_free--;
    } else if (p->lru_head != KV_NONE) {
        b = p->lru_head;
        lru_unlink(p, b);
        uncache(p, b);
        kv->n_evictions++;
    } else {
        return KV_NONE;
    }
    kv_block *blk = &p->blocks[b];
    blk->state = KV_BLOCK_USED;
    blk->ref = 1;
    blk->fill = 0;
    blk->has_hash = false;
    blk->prev = blk->next = KV_NONE;
    return b;
}

void kv_block_acquire(kv_pool *p, int32_t b) {
    kv_block *blk = &p->blocks[b];
    if (blk->ref == 0) {
        /* Only cached blocks can be found while unreferenced. */
        lru_unlink(p, b);
        blk->state = KV_BLOCK_USED;
    }
    blk->ref++;
}

void kv_block_release(kv_pool *p, int32_t b) {
    kv_block *blk = &p->blocks[b];
    if (--blk->ref > 0) {
        return;
    }
    if (blk->cached) {
        lru_push_tail(p, b);
    } else {
        free_push(p, b);
    }
}

/* ---- create / destroy -------------------------------------------------------------- */

/* Reserves `bytes` at 16-byte alignment in a layout being measured; false on overflow. */
static bool layout_add(size_t *off, uint64_t count, size_t elem, size_t *at) {
    size_t o = (*off + 15) & ~(size_t)15;
    if (o < *off || (elem != 0 && count > (SIZE_MAX - o) / elem)) {
        return false;
    }
    *at = o;
    *off = o + (size_t)(count * elem);
    return true;
}

static ts_status check_config(const ts_kv_config *cfg, uint32_t *bs, ts_error *err) {
    *bs = cfg->block_size != 0 ? cfg->block_size : TS_KV_DEFAULT_BLOCK_SIZE;
    if (cfg->n_blocks == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: config n_blocks must be > 0");
    }
    if (cfg->max_seqs == 0 || cfg->max_seqs > (uint32_t)INT32_MAX) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: config max_seqs=%" PRIu32 " must be in [1, 2^31)", cfg->max_seqs);
    }
    if (cfg->n_blocks_swa != 0 && cfg->swa_window == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: config has a sliding-window pool of %" PRIu32
                            " blocks but no window (swa_window = 0)",
                            cfg->n_blocks_swa);
    }
    uint32_t most = cfg->n_blocks > cfg->n_blocks_swa ? cfg->n_blocks : cfg->n_blocks_swa;
    if ((uint64_t)most * *bs > (uint64_t)INT32_MAX + 1) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: config %" PRIu32 " blocks x %" PRIu32 " tokens exceeds the "
                            "2^31 token slots a pool addresses (slots are int32)",
                            most, *bs);
    }
    return TS_OK;
}

/* Where one pool's arrays lie in the manager's allocation. */
typedef struct pool_layout {
    size_t blocks, tokens, tables, htab, scratch;
    uint64_t htab_cap;
} pool_layout;

static bool layout_pool(size_t *size, uint32_t n_blocks, uint32_t bs, uint64_t table_entries,
                        bool prefix_cache, pool_layout *pl) {
    pl->htab_cap = 0;
    if (prefix_cache) {
        pl->htab_cap = 1;
        while (pl->htab_cap < 2ull * n_blocks) {
            pl->htab_cap <<= 1;
        }
    }
    return layout_add(size, n_blocks, sizeof(kv_block), &pl->blocks) &&
           layout_add(size, (uint64_t)n_blocks * bs, sizeof(int32_t), &pl->tokens) &&
           layout_add(size, table_entries, sizeof(int32_t), &pl->tables) &&
           layout_add(size, pl->htab_cap, sizeof(int32_t), &pl->htab) &&
           layout_add(size, n_blocks, sizeof(uint32_t), &pl->scratch);
}

static void init_pool(ts_kv *kv, kv_pool *p, char *mem, const pool_layout *pl, uint32_t n_blocks,
                      uint32_t window) {
    uint64_t table_entries = (uint64_t)kv->max_seqs * kv->max_blocks_per_seq;
    p->n_blocks = n_blocks;
    p->window = window;
    p->blocks = (kv_block *)(mem + pl->blocks);
    p->tokens = (int32_t *)(mem + pl->tokens);
    p->tables = (int32_t *)(mem + pl->tables);
    p->htab = pl->htab_cap != 0 ? (int32_t *)(mem + pl->htab) : NULL;
    p->htab_mask = pl->htab_cap != 0 ? (uint32_t)(pl->htab_cap - 1) : 0;
    p->scratch = (uint32_t *)(mem + pl->scratch);
    memset(p->tokens, 0, (size_t)n_blocks * kv->block_size * sizeof(int32_t));
    memset(p->scratch, 0, (size_t)n_blocks * sizeof(uint32_t));
    for (uint64_t i = 0; i < pl->htab_cap; i++) {
        p->htab[i] = KV_NONE;
    }
    for (uint64_t i = 0; i < table_entries; i++) {
        p->tables[i] = KV_NONE;
    }
    /* Free stack in ascending id order: block 0 is taken first. */
    p->free_head = KV_NONE;
    p->lru_head = p->lru_tail = KV_NONE;
    for (uint32_t i = n_blocks; i-- > 0;) {
        memset(&p->blocks[i], 0, sizeof p->blocks[i]);
        free_push(p, (int32_t)i);
    }
}

ts_status ts_kv_create(const ts_kv_config *cfg, ts_kv **out, ts_error *err) {
    if (cfg == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: create: NULL argument");
    }
    *out = NULL;
    uint32_t bs;
    ts_status st = check_config(cfg, &bs, err);
    if (st != TS_OK) {
        return st;
    }
    uint64_t pool_tokens = (uint64_t)cfg->n_blocks * bs;
    uint64_t max_len = cfg->max_seq_len != 0 ? cfg->max_seq_len : pool_tokens;
    /* A table never holds more blocks than the full pool has (no block twice in one table). */
    uint64_t per_seq = max_len / bs + (max_len % bs != 0);
    if (per_seq > cfg->n_blocks) {
        per_seq = cfg->n_blocks;
    }
    uint32_t n_pools = cfg->n_blocks_swa != 0 ? 2 : 1;
    const uint32_t pool_blocks[TS_KV_MAX_POOLS] = {cfg->n_blocks, cfg->n_blocks_swa};
    const uint32_t pool_window[TS_KV_MAX_POOLS] = {0, cfg->swa_window};

    size_t size = sizeof(ts_kv), at_seqs, at_hashes;
    pool_layout pl[TS_KV_MAX_POOLS];
    bool fits = true;
    for (uint32_t i = 0; i < n_pools && fits; i++) {
        fits = layout_pool(&size, pool_blocks[i], bs, (uint64_t)cfg->max_seqs * per_seq,
                           cfg->prefix_cache, &pl[i]);
    }
    if (!fits || !layout_add(&size, cfg->max_seqs, sizeof(kv_seq), &at_seqs) ||
        !layout_add(&size, cfg->prefix_cache ? per_seq : 0, KV_HASH_BYTES, &at_hashes)) {
        return ts_error_set(err, TS_ERR_OVERFLOW,
                            "kv: pool of %" PRIu32 " (+ %" PRIu32 ") blocks and %" PRIu32
                            " sequences x %" PRIu64 " blocks does not fit in memory",
                            cfg->n_blocks, cfg->n_blocks_swa, cfg->max_seqs, per_seq);
    }
    char *mem = malloc(size);
    if (mem == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM,
                            "kv: cannot allocate %zu bytes of block-manager tables for %" PRIu32
                            " (+ %" PRIu32 ") blocks and %" PRIu32 " sequences",
                            size, cfg->n_blocks, cfg->n_blocks_swa, cfg->max_seqs);
    }
    ts_kv *kv = (ts_kv *)mem;
    memset(kv, 0, sizeof *kv);
    kv->block_size = bs;
    kv->max_seqs = cfg->max_seqs;
    kv->max_seq_len = max_len > UINT32_MAX ? UINT32_MAX : (uint32_t)max_len;
    kv->max_blocks_per_seq = (uint32_t)per_seq;
    kv->prefix_cache = cfg->prefix_cache;
    kv->n_pools = n_pools;
    for (uint32_t i = 0; i < n_pools; i++) {
        init_pool(kv, &kv->pools[i], mem, &pl[i], pool_blocks[i], pool_window[i]);
    }
    kv->seqs = (kv_seq *)(mem + at_seqs);
    kv->hashes = cfg->prefix_cache ? (uint8_t *)(mem + at_hashes) : NULL;
    kv->seq_free_head = KV_NONE;
    for (uint32_t i = kv->max_seqs; i-- > 0;) {
        memset(&kv->seqs[i], 0, sizeof kv->seqs[i]);
        kv->seqs[i].next_free = kv->seq_free_head;
        kv->seq_free_head = (int32_t)i;
    }
    if (kv->prefix_cache) {
        st = kv_md_open(kv, err);
        if (st != TS_OK) {
            free(mem);
            return st;
        }
    }
    *out = kv;
    return TS_OK;
}

void ts_kv_destroy(ts_kv *kv) {
    if (kv == NULL) {
        return;
    }
    kv_md_close(kv);
    free(kv);
}

/* ---- read-only views --------------------------------------------------------------- */

const ts_kv_copy *ts_kv_copies(const ts_kv *kv, uint32_t *n_copies) {
    if (n_copies != NULL) {
        *n_copies = kv != NULL ? kv->n_copies : 0;
    }
    return kv != NULL ? kv->copies : NULL;
}

const int32_t *ts_kv_block_tables(const ts_kv *kv, ts_kv_pool pool, uint32_t *stride) {
    bool ok = kv != NULL && (uint32_t)pool < kv->n_pools;
    if (stride != NULL) {
        *stride = ok ? kv->max_blocks_per_seq : 0;
    }
    return ok ? kv->pools[pool].tables : NULL;
}

static ts_kv_pool_stats pool_stats(const kv_pool *p) {
    return (ts_kv_pool_stats){
        .n_blocks = p->n_blocks,
        .n_free = p->n_free,
        .n_evictable = p->n_evictable,
        .n_used = p->n_blocks - p->n_free - p->n_evictable,
        .n_cached = p->n_cached,
    };
}

void ts_kv_get_stats(const ts_kv *kv, ts_kv_stats *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (kv == NULL) {
        return;
    }
    ts_kv_pool_stats full = pool_stats(&kv->pools[TS_KV_POOL_FULL]);
    out->n_blocks = full.n_blocks;
    out->block_size = kv->block_size;
    out->n_free = full.n_free;
    out->n_evictable = full.n_evictable;
    out->n_used = full.n_used;
    out->n_cached = full.n_cached;
    if (kv->n_pools > TS_KV_POOL_SWA) {
        out->swa = pool_stats(&kv->pools[TS_KV_POOL_SWA]);
    }
    out->n_seqs = kv->n_seqs;
    out->prefix_queries = kv->prefix_queries;
    out->prefix_query_tokens = kv->prefix_query_tokens;
    out->prefix_hit_tokens = kv->prefix_hit_tokens;
    out->n_evictions = kv->n_evictions;
    out->n_cow_copies = kv->n_cow_copies;
}

void ts_kv_prefix_clear(ts_kv *kv) {
    if (kv == NULL || !kv->prefix_cache) {
        return;
    }
    for (uint32_t i = 0; i < kv->n_pools; i++) {
        kv_pool *p = &kv->pools[i];
        while (p->lru_head != KV_NONE) {
            int32_t b = p->lru_head;
            lru_unlink(p, b);
            uncache(p, b);
            free_push(p, b);
        }
        /* Blocks still in use stay in their tables but can no longer be found. Their chain
         * hashes stay valid (sequences keep hashing later blocks from them). */
        for (uint32_t b = 0; b < p->n_blocks; b++) {
            if (p->blocks[b].cached) {
                uncache(p, (int32_t)b);
            }
        }
    }
    kv->n_copies = 0;
}
