/*
 * kv_check.c — ts_kv_check: recount everything the manager tracks incrementally and compare.
 *
 * Checked for each pool, in order: the free stack and the LRU list (membership, links, block
 * states, their counters); every block's state against its ref count; the prefix table against
 * the blocks marked cached; every open sequence's lengths, block table and per-block fill (in
 * a windowed pool: -1 exactly for the entries before the window); the hash chain of every
 * hashed block (recomputed from the tokens, the parent taken from the full pool's table); ref
 * counts against the number of table entries; and that any block held by two tables sits at
 * the same position in both after the same block or an identical prefix (sharing only through
 * a common prefix or a fork).
 *
 * Works on a private scratch allocation so the manager itself stays const.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "util/error.h"

typedef struct check_scratch {
    uint32_t *refs;      /* [n_blocks] table entries seen per block */
    uint32_t *first_seq; /* [n_blocks] first sequence seen holding the block, + 1 */
    uint32_t *first_idx; /* [n_blocks] its position there */
    uint8_t *listed;     /* [n_blocks] found on the free stack or the LRU list */
} check_scratch;

#define FAIL(...) return ts_error_set(err, TS_ERR_INTERNAL, "kv: invariant: " __VA_ARGS__)

static const char *pool_name(uint32_t pi) {
    return pi == TS_KV_POOL_FULL ? "full" : "sliding-window";
}

static ts_status check_lists(const kv_pool *p, uint32_t pi, check_scratch *cs, ts_error *err) {
    uint32_t n = 0;
    for (int32_t b = p->free_head; b != KV_NONE; b = p->blocks[b].next) {
        if (b < 0 || (uint32_t)b >= p->n_blocks || n >= p->n_blocks || cs->listed[b]) {
            FAIL("%s pool: free stack is corrupt at entry %" PRIu32 " (block %" PRId32 ")",
                 pool_name(pi), n, b);
        }
        const kv_block *blk = &p->blocks[b];
        if (blk->state != KV_BLOCK_FREE || blk->ref != 0 || blk->cached || blk->has_hash) {
            FAIL("%s pool: block %" PRId32 " on the free stack has state %d, ref %" PRIu32
                 ", cached %d, hashed %d",
                 pool_name(pi), b, blk->state, blk->ref, blk->cached, blk->has_hash);
        }
        cs->listed[b] = 1;
        n++;
    }
    if (n != p->n_free) {
        FAIL("%s pool: free stack holds %" PRIu32 " blocks, counter says %" PRIu32, pool_name(pi),
             n, p->n_free);
    }
    n = 0;
    int32_t prev = KV_NONE;
    for (int32_t b = p->lru_head; b != KV_NONE; b = p->blocks[b].next) {
        if (b < 0 || (uint32_t)b >= p->n_blocks || cs->listed[b]) {
            FAIL("%s pool: LRU list is corrupt at entry %" PRIu32 " (block %" PRId32 ")",
                 pool_name(pi), n, b);
        }
        const kv_block *blk = &p->blocks[b];
        if (blk->state != KV_BLOCK_EVICTABLE || blk->ref != 0 || !blk->cached ||
            blk->prev != prev) {
            FAIL("%s pool: block %" PRId32 " on the LRU list has state %d, ref %" PRIu32
                 ", cached %d, prev %" PRId32 " (expected %" PRId32 ")",
                 pool_name(pi), b, blk->state, blk->ref, blk->cached, blk->prev, prev);
        }
        cs->listed[b] = 1;
        prev = b;
        n++;
    }
    if (n != p->n_evictable || prev != p->lru_tail) {
        FAIL("%s pool: LRU list holds %" PRIu32 " blocks ending at %" PRId32
             ", counters say %" PRIu32 " ending at %" PRId32,
             pool_name(pi), n, prev, p->n_evictable, p->lru_tail);
    }
    return TS_OK;
}

static ts_status check_blocks(const ts_kv *kv, const kv_pool *p, uint32_t pi,
                              const check_scratch *cs, ts_error *err) {
    uint32_t used = 0, cached = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++) {
        const kv_block *blk = &p->blocks[b];
        if (blk->state == KV_BLOCK_USED) {
            if (blk->ref == 0 || cs->listed[b]) {
                FAIL("%s pool: block %" PRIu32 " is used with ref %" PRIu32 " and listed %d",
                     pool_name(pi), b, blk->ref, cs->listed[b]);
            }
            used++;
        } else if (!cs->listed[b]) {
            FAIL("%s pool: block %" PRIu32 " in state %d is on no list (lost)", pool_name(pi), b,
                 blk->state);
        }
        if (blk->fill > kv->block_size || (blk->has_hash && blk->fill != kv->block_size) ||
            (blk->cached && !blk->has_hash)) {
            FAIL("%s pool: block %" PRIu32 " has fill %" PRIu32 ", hashed %d, cached %d",
                 pool_name(pi), b, blk->fill, blk->has_hash, blk->cached);
        }
        if (blk->cached) {
            if (kv_htab_find(p, blk->hash) != (int32_t)b) {
                FAIL("%s pool: cached block %" PRIu32 " is not found under its hash", pool_name(pi),
                     b);
            }
            cached++;
        }
    }
    if (used + p->n_free + p->n_evictable != p->n_blocks) {
        FAIL("%s pool: %" PRIu32 " used + %" PRIu32 " free + %" PRIu32 " evictable != %" PRIu32
             " blocks",
             pool_name(pi), used, p->n_free, p->n_evictable, p->n_blocks);
    }
    uint32_t entries = 0;
    for (uint64_t i = 0; p->htab != NULL && i <= p->htab_mask; i++) {
        int32_t b = p->htab[i];
        if (b == KV_NONE) {
            continue;
        }
        if (b < 0 || (uint32_t)b >= p->n_blocks || !p->blocks[b].cached) {
            FAIL("%s pool: prefix table slot %" PRIu64 " holds block %" PRId32
                 " that is not cached",
                 pool_name(pi), i, b);
        }
        entries++;
    }
    if (cached != p->n_cached || entries != p->n_cached) {
        FAIL("%s pool: %" PRIu32 " blocks marked cached, %" PRIu32
             " table entries, counter %" PRIu32,
             pool_name(pi), cached, entries, p->n_cached);
    }
    return TS_OK;
}

/* True when sequences a and b hold the same history before position i * block_size: the
 * same full-pool block at i - 1, or blocks named by the same (whole-prefix) hash. */
static bool same_history(const ts_kv *kv, uint32_t a, uint32_t b, uint32_t i) {
    if (i == 0) {
        return true;
    }
    const kv_pool *full = &kv->pools[TS_KV_POOL_FULL];
    const kv_block *x = &full->blocks[kv_table(kv, full, a)[i - 1]];
    const kv_block *y = &full->blocks[kv_table(kv, full, b)[i - 1]];
    return x == y || (x->has_hash && y->has_hash && memcmp(x->hash, y->hash, KV_HASH_BYTES) == 0);
}

/* One open sequence in one pool: table entries, fills, hash chain, sharing. */
static ts_status check_seq_pool(const ts_kv *kv, uint32_t id, uint32_t pi, check_scratch *cs,
                                ts_error *err) {
    const kv_seq *s = &kv->seqs[id];
    const kv_pool *p = &kv->pools[pi];
    const kv_pool *full = &kv->pools[TS_KV_POOL_FULL];
    const uint32_t bs = kv->block_size;
    const int32_t *tbl = kv_table(kv, p, id);
    const int32_t *ftbl = kv_table(kv, full, id);
    if (s->first[pi] != kv_window_first(kv, p, s->n_committed)) {
        FAIL("sequence %" PRIu32 ": %s table starts at entry %" PRIu32 ", its window at %" PRIu32,
             id, pool_name(pi), s->first[pi], kv_window_first(kv, p, s->n_committed));
    }
    for (uint32_t i = 0; i < kv->max_blocks_per_seq; i++) {
        int32_t b = tbl[i];
        if (i < s->first[pi] || i >= s->n_blocks) {
            if (b != KV_NONE) {
                FAIL("sequence %" PRIu32 ": unused %s table entry %" PRIu32 " holds %" PRId32, id,
                     pool_name(pi), i, b);
            }
            continue;
        }
        if (b < 0 || (uint32_t)b >= p->n_blocks || p->blocks[b].state != KV_BLOCK_USED) {
            FAIL("sequence %" PRIu32 ": %s table entry %" PRIu32 " is block %" PRId32
                 " which is not in use",
                 id, pool_name(pi), i, b);
        }
        const kv_block *blk = &p->blocks[b];
        uint32_t want_fill = s->n_tokens - i * bs < bs ? s->n_tokens - i * bs : bs;
        if (blk->fill != want_fill || (i < s->n_hashed && !blk->has_hash)) {
            FAIL("sequence %" PRIu32 ": %s block %" PRId32 " at %" PRIu32 " has fill %" PRIu32
                 " (want %" PRIu32 "), hashed %d",
                 id, pool_name(pi), b, i, blk->fill, want_fill, blk->has_hash);
        }
        if (pi != TS_KV_POOL_FULL &&
            memcmp(p->tokens + (uint64_t)b * bs, full->tokens + (uint64_t)ftbl[i] * bs,
                   want_fill * sizeof(int32_t)) != 0) {
            FAIL("sequence %" PRIu32 ": %s block %" PRId32 " at %" PRIu32
                 " holds other tokens than the full pool's",
                 id, pool_name(pi), b, i);
        }
        if (i < s->n_hashed) {
            uint8_t h[KV_HASH_BYTES];
            const uint8_t *parent = i == 0 ? s->root : full->blocks[ftbl[i - 1]].hash;
            ts_status st = kv_hash_block(kv, parent, p->tokens + (uint64_t)b * bs, h, err);
            if (st != TS_OK) {
                return st;
            }
            if (memcmp(h, blk->hash, KV_HASH_BYTES) != 0) {
                FAIL("sequence %" PRIu32 ": %s block %" PRId32 " at %" PRIu32
                     " has a hash that does not match its tokens and parent",
                     id, pool_name(pi), b, i);
            }
        }
        cs->refs[b]++;
        if (cs->first_seq[b] == 0) {
            cs->first_seq[b] = id + 1;
            cs->first_idx[b] = i;
            continue;
        }
        uint32_t other = cs->first_seq[b] - 1;
        /* The blocks before it must be the same block, or name the same prefix: a sequence
         * that recomputed a block another had cached holds a private twin of it, and the
         * block after the twin is found through the cached one's (equal) hash. */
        if (other == id || cs->first_idx[b] != i || !same_history(kv, id, other, i)) {
            FAIL("%s block %" PRId32 " is at position %" PRIu32 " of sequence %" PRIu32
                 " and at %" PRIu32 " of sequence %" PRIu32
                 " without a shared prefix (neither a prefix hit nor a fork)",
                 pool_name(pi), b, i, id, cs->first_idx[b], other);
        }
    }
    return TS_OK;
}

static ts_status check_seq(const ts_kv *kv, uint32_t id, ts_error *err) {
    const kv_seq *s = &kv->seqs[id];
    const uint32_t bs = kv->block_size;
    uint32_t want_blocks = (uint32_t)(((uint64_t)s->n_tokens + bs - 1) / bs);
    uint32_t want_hashed = kv->prefix_cache ? s->n_committed / bs : 0;
    if (s->n_committed > s->n_tokens || s->n_tokens > kv->max_seq_len ||
        s->n_blocks != want_blocks || s->n_hashed != want_hashed) {
        FAIL("sequence %" PRIu32 ": tokens %" PRIu32 ", committed %" PRIu32 ", blocks %" PRIu32
             " (want %" PRIu32 "), hashed %" PRIu32 " (want %" PRIu32 ")",
             id, s->n_tokens, s->n_committed, s->n_blocks, want_blocks, s->n_hashed, want_hashed);
    }
    return TS_OK;
}

static ts_status check_seqs(const ts_kv *kv, ts_error *err) {
    uint32_t open = 0, closed = 0;
    for (uint32_t id = 0; id < kv->max_seqs; id++) {
        if (!kv->seqs[id].open) {
            continue;
        }
        open++;
        ts_status st = check_seq(kv, id, err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (int32_t id = kv->seq_free_head; id != KV_NONE; id = kv->seqs[id].next_free) {
        if (id < 0 || (uint32_t)id >= kv->max_seqs || kv->seqs[id].open || closed >= kv->max_seqs) {
            FAIL("closed-sequence stack is corrupt at %" PRId32, id);
        }
        closed++;
    }
    if (open != kv->n_seqs || open + closed != kv->max_seqs) {
        FAIL("%" PRIu32 " open + %" PRIu32 " closed sequences, counter %" PRIu32 ", max %" PRIu32,
             open, closed, kv->n_seqs, kv->max_seqs);
    }
    return TS_OK;
}

/* Every table of one pool against its blocks' ref counts. */
static ts_status check_tables(const ts_kv *kv, uint32_t pi, check_scratch *cs, ts_error *err) {
    const kv_pool *p = &kv->pools[pi];
    for (uint32_t id = 0; id < kv->max_seqs; id++) {
        ts_status st = kv->seqs[id].open ? check_seq_pool(kv, id, pi, cs, err) : TS_OK;
        if (st != TS_OK) {
            return st;
        }
    }
    for (uint32_t b = 0; b < p->n_blocks; b++) {
        if (cs->refs[b] != p->blocks[b].ref) {
            FAIL("%s pool: block %" PRIu32 " has ref %" PRIu32 " but %" PRIu32 " table entries",
                 pool_name(pi), b, p->blocks[b].ref, cs->refs[b]);
        }
        if (p->scratch[b] != 0) {
            FAIL("%s pool: can_append scratch for block %" PRIu32 " was left at %" PRIu32,
                 pool_name(pi), b, p->scratch[b]);
        }
    }
    return TS_OK;
}

ts_status ts_kv_check(const ts_kv *kv, ts_error *err) {
    if (kv == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: check: NULL manager");
    }
    ts_status st = check_seqs(kv, err);
    for (uint32_t pi = 0; st == TS_OK && pi < kv->n_pools; pi++) {
        size_t n = kv->pools[pi].n_blocks;
        void *mem = calloc(n, 3 * sizeof(uint32_t) + 1);
        if (mem == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM,
                                "kv: check: cannot allocate scratch for %zu blocks", n);
        }
        check_scratch cs = {
            .refs = mem,
            .first_seq = (uint32_t *)mem + n,
            .first_idx = (uint32_t *)mem + 2 * n,
            .listed = (uint8_t *)((uint32_t *)mem + 3 * n),
        };
        st = check_lists(&kv->pools[pi], pi, &cs, err);
        if (st == TS_OK) {
            st = check_blocks(kv, &kv->pools[pi], pi, &cs, err);
        }
        if (st == TS_OK) {
            st = check_tables(kv, pi, &cs, err);
        }
        free(mem);
    }
    return st;
}
