/*
 * kv_pool.c — creating the block manager and moving blocks between its lists.
 *
 * ts_kv_create computes the size of every array first (overflow-checked) and makes a single
 * allocation holding the ts_kv struct and all of them. Block lists:
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

static void lru_unlink(ts_kv *kv, int32_t b) {
    kv_block *blk = &kv->blocks[b];
    if (blk->prev != KV_NONE) {
        kv->blocks[blk->prev].next = blk->next;
    } else {
        kv->lru_head = blk->next;
    }
    if (blk->next != KV_NONE) {
        kv->blocks[blk->next].prev = blk->prev;
    } else {
        kv->lru_tail = blk->prev;
    }
    blk->prev = blk->next = KV_NONE;
    kv->n_evictable--;
}

static void lru_push_tail(ts_kv *kv, int32_t b) {
    kv_block *blk = &kv->blocks[b];
    blk->prev = kv->lru_tail;
    blk->next = KV_NONE;
    if (kv->lru_tail != KV_NONE) {
        kv->blocks[kv->lru_tail].next = b;
    } else {
        kv->lru_head = b;
    }
    kv->lru_tail = b;
    blk->state = KV_BLOCK_EVICTABLE;
    kv->n_evictable++;
}

static void free_push(ts_kv *kv, int32_t b) {
    kv_block *blk = &kv->blocks[b];
    blk->state = KV_BLOCK_FREE;
    blk->has_hash = false;
    blk->fill = 0;
    blk->prev = KV_NONE;
    blk->next = kv->free_head;
    kv->free_head = b;
    kv->n_free++;
}

/* Drops b from the prefix table; it keeps its place on whatever list it is on. */
static void uncache(ts_kv *kv, int32_t b) {
    kv_htab_remove(kv, b);
    kv->blocks[b].cached = false;
    kv->n_cached--;
}

uint32_t kv_blocks_available(const ts_kv *kv) {
    return kv->n_free + kv->n_evictable;
}

int32_t kv_block_take(ts_kv *kv) {
    int32_t b = kv->free_head;
    if (b != KV_NONE) {
        kv->free_head = kv->blocks[b].next;
        kv->n_free--;
    } else if (kv->lru_head != KV_NONE) {
        b = kv->lru_head;
        lru_unlink(kv, b);
        uncache(kv, b);
        kv->n_evictions++;
    } else {
        return KV_NONE;
    }
    kv_block *blk = &kv->blocks[b];
    blk->state = KV_BLOCK_USED;
    blk->ref = 1;
    blk->fill = 0;
    blk->has_hash = false;
    blk->prev = blk->next = KV_NONE;
    return b;
}

void kv_block_acquire(ts_kv *kv, int32_t b) {
    kv_block *blk = &kv->blocks[b];
    if (blk->ref == 0) {
        /* Only cached blocks can be found while unreferenced. */
        lru_unlink(kv, b);
        blk->state = KV_BLOCK_USED;
    }
    blk->ref++;
}

void kv_block_release(ts_kv *kv, int32_t b) {
    kv_block *blk = &kv->blocks[b];
    if (--blk->ref > 0) {
        return;
    }
    if (blk->cached) {
        lru_push_tail(kv, b);
    } else {
        free_push(kv, b);
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
    if ((uint64_t)cfg->n_blocks * *bs > (uint64_t)INT32_MAX + 1) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: config %" PRIu32 " blocks x %" PRIu32 " tokens exceeds the "
                            "2^31 token slots a pool addresses (slots are int32)",
                            cfg->n_blocks, *bs);
    }
    return TS_OK;
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
    /* A table never holds more blocks than the pool has (no block twice in one table). */
    uint64_t per_seq = max_len / bs + (max_len % bs != 0);
    if (per_seq > cfg->n_blocks) {
        per_seq = cfg->n_blocks;
    }
    uint64_t htab_cap = 0;
    if (cfg->prefix_cache) {
        htab_cap = 1;
        while (htab_cap < 2ull * cfg->n_blocks) {
            htab_cap <<= 1;
        }
    }

    size_t size = sizeof(ts_kv), at_blocks, at_tokens, at_tables, at_seqs, at_htab, at_scratch;
    if (!layout_add(&size, cfg->n_blocks, sizeof(kv_block), &at_blocks) ||
        !layout_add(&size, pool_tokens, sizeof(int32_t), &at_tokens) ||
        !layout_add(&size, (uint64_t)cfg->max_seqs * per_seq, sizeof(int32_t), &at_tables) ||
        !layout_add(&size, cfg->max_seqs, sizeof(kv_seq), &at_seqs) ||
        !layout_add(&size, htab_cap, sizeof(int32_t), &at_htab) ||
        !layout_add(&size, cfg->n_blocks, sizeof(uint32_t), &at_scratch)) {
        return ts_error_set(err, TS_ERR_OVERFLOW,
                            "kv: pool of %" PRIu32 " blocks and %" PRIu32 " sequences x %" PRIu64
                            " blocks does not fit in memory",
                            cfg->n_blocks, cfg->max_seqs, per_seq);
    }
    char *mem = malloc(size);
    if (mem == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM,
                            "kv: cannot allocate %zu bytes of block-manager tables for %" PRIu32
                            " blocks and %" PRIu32 " sequences",
                            size, cfg->n_blocks, cfg->max_seqs);
    }
    ts_kv *kv = (ts_kv *)mem;
    memset(kv, 0, sizeof *kv);
    kv->n_blocks = cfg->n_blocks;
    kv->block_size = bs;
    kv->max_seqs = cfg->max_seqs;
    kv->max_seq_len = max_len > UINT32_MAX ? UINT32_MAX : (uint32_t)max_len;
    kv->max_blocks_per_seq = (uint32_t)per_seq;
    kv->prefix_cache = cfg->prefix_cache;
    kv->blocks = (kv_block *)(mem + at_blocks);
    kv->tokens = (int32_t *)(mem + at_tokens);
    kv->tables = (int32_t *)(mem + at_tables);
    kv->seqs = (kv_seq *)(mem + at_seqs);
    kv->htab = htab_cap != 0 ? (int32_t *)(mem + at_htab) : NULL;
    kv->htab_mask = htab_cap != 0 ? (uint32_t)(htab_cap - 1) : 0;
    kv->scratch = (uint32_t *)(mem + at_scratch);

    memset(kv->tokens, 0, (size_t)pool_tokens * sizeof(int32_t));
    memset(kv->scratch, 0, (size_t)cfg->n_blocks * sizeof(uint32_t));
    for (uint64_t i = 0; i < htab_cap; i++) {
        kv->htab[i] = KV_NONE;
    }
    for (uint64_t i = 0; i < (uint64_t)cfg->max_seqs * per_seq; i++) {
        kv->tables[i] = KV_NONE;
    }
    /* Free stack in ascending id order: block 0 is taken first. */
    kv->free_head = KV_NONE;
    kv->lru_head = kv->lru_tail = KV_NONE;
    for (uint32_t i = kv->n_blocks; i-- > 0;) {
        memset(&kv->blocks[i], 0, sizeof kv->blocks[i]);
        free_push(kv, (int32_t)i);
    }
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

const int32_t *ts_kv_block_tables(const ts_kv *kv, uint32_t *stride) {
    if (stride != NULL) {
        *stride = kv != NULL ? kv->max_blocks_per_seq : 0;
    }
    return kv != NULL ? kv->tables : NULL;
}

void ts_kv_get_stats(const ts_kv *kv, ts_kv_stats *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (kv == NULL) {
        return;
    }
    out->n_blocks = kv->n_blocks;
    out->block_size = kv->block_size;
    out->n_free = kv->n_free;
    out->n_evictable = kv->n_evictable;
    out->n_used = kv->n_blocks - kv->n_free - kv->n_evictable;
    out->n_cached = kv->n_cached;
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
    while (kv->lru_head != KV_NONE) {
        int32_t b = kv->lru_head;
        lru_unlink(kv, b);
        uncache(kv, b);
        free_push(kv, b);
    }
    /* Blocks still in use stay in their tables but can no longer be found. Their chain
     * hashes stay valid (sequences keep hashing later blocks from them). */
    for (uint32_t b = 0; b < kv->n_blocks; b++) {
        if (kv->blocks[b].cached) {
            uncache(kv, (int32_t)b);
        }
    }
    kv->n_copies = 0;
}
