/*
 * kv_check.c — ts_kv_check: recount everything the manager tracks incrementally and compare.
 *
 * Checked, in order: the free stack and the LRU list (membership, links, block states, their
 * counters); every block's state against its ref count; the prefix table against the blocks
 * marked cached; every open sequence's lengths, block table and per-block fill; the hash
 * chain of every hashed block (recomputed from the tokens); ref counts against the number of
 * table entries; and that any block held by two tables sits at the same position in both after
 * the same block or an identical prefix (sharing only through a common prefix or a fork).
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

static ts_status check_lists(const ts_kv *kv, check_scratch *cs, ts_error *err) {
    uint32_t n = 0;
    for (int32_t b = kv->free_head; b != KV_NONE; b = kv->blocks[b].next) {
        if (b < 0 || (uint32_t)b >= kv->n_blocks || n >= kv->n_blocks || cs->listed[b]) {
            FAIL("free stack is corrupt at entry %" PRIu32 " (block %" PRId32 ")", n, b);
        }
        const kv_block *blk = &kv->blocks[b];
        if (blk->state != KV_BLOCK_FREE || blk->ref != 0 || blk->cached || blk->has_hash) {
            FAIL("block %" PRId32 " on the free stack has state %d, ref %" PRIu32
                 ", cached %d, hashed %d",
                 b, blk->state, blk->ref, blk->cached, blk->has_hash);
        }
        cs->listed[b] = 1;
        n++;
    }
    if (n != kv->n_free) {
        FAIL("free stack holds %" PRIu32 " blocks, counter says %" PRIu32, n, kv->n_free);
    }
    n = 0;
    int32_t prev = KV_NONE;
    for (int32_t b = kv->lru_head; b != KV_NONE; b = kv->blocks[b].next) {
        if (b < 0 || (uint32_t)b >= kv->n_blocks || cs->listed[b]) {
            FAIL("LRU list is corrupt at entry %" PRIu32 " (block %" PRId32 ")", n, b);
        }
        const kv_block *blk = &kv->blocks[b];
        if (blk->state != KV_BLOCK_EVICTABLE || blk->ref != 0 || !blk->cached ||
            blk->prev != prev) {
            FAIL("block %" PRId32 " on the LRU list has state %d, ref %" PRIu32
                 ", cached %d, prev %" PRId32 " (expected %" PRId32 ")",
                 b, blk->state, blk->ref, blk->cached, blk->prev, prev);
        }
        cs->listed[b] = 1;
        prev = b;
        n++;
    }
    if (n != kv->n_evictable || prev != kv->lru_tail) {
        FAIL("LRU list holds %" PRIu32 " blocks ending at %" PRId32 ", counters say %" PRIu32
             " ending at %" PRId32,
             n, prev, kv->n_evictable, kv->lru_tail);
    }
    return TS_OK;
}

static ts_status check_blocks(const ts_kv *kv, const check_scratch *cs, ts_error *err) {
    uint32_t used = 0, cached = 0;
    for (uint32_t b = 0; b < kv->n_blocks; b++) {
        const kv_block *blk = &kv->blocks[b];
        if (blk->state == KV_BLOCK_USED) {
            if (blk->ref == 0 || cs->listed[b]) {
                FAIL("block %" PRIu32 " is used with ref %" PRIu32 " and listed %d", b, blk->ref,
                     cs->listed[b]);
            }
            used++;
        } else if (!cs->listed[b]) {
            FAIL("block %" PRIu32 " in state %d is on no list (lost)", b, blk->state);
        }
        if (blk->fill > kv->block_size || (blk->has_hash && blk->fill != kv->block_size) ||
            (blk->cached && !blk->has_hash)) {
            FAIL("block %" PRIu32 " has fill %" PRIu32 ", hashed %d, cached %d", b, blk->fill,
                 blk->has_hash, blk->cached);
        }
        if (blk->cached) {
            if (kv_htab_find(kv, blk->hash) != (int32_t)b) {
                FAIL("cached block %" PRIu32 " is not found under its hash", b);
            }
            cached++;
        }
    }
    if (used + kv->n_free + kv->n_evictable != kv->n_blocks) {
        FAIL("%" PRIu32 " used + %" PRIu32 " free + %" PRIu32 " evictable != %" PRIu32 " blocks",
             used, kv->n_free, kv->n_evictable, kv->n_blocks);
    }
    uint32_t entries = 0;
    for (uint64_t i = 0; kv->htab != NULL && i <= kv->htab_mask; i++) {
        int32_t b = kv->htab[i];
        if (b == KV_NONE) {
            continue;
        }
        if (b < 0 || (uint32_t)b >= kv->n_blocks || !kv->blocks[b].cached) {
            FAIL("prefix table slot %" PRIu64 " holds block %" PRId32 " that is not cached", i, b);
        }
        entries++;
    }
    if (cached != kv->n_cached || entries != kv->n_cached) {
        FAIL("%" PRIu32 " blocks marked cached, %" PRIu32 " table entries, counter %" PRIu32,
             cached, entries, kv->n_cached);
    }
    return TS_OK;
}

/* One open sequence: lengths, table entries, fills, hash chain, sharing. */
static ts_status check_seq(const ts_kv *kv, uint32_t id, check_scratch *cs, ts_error *err) {
    const kv_seq *s = &kv->seqs[id];
    const uint32_t bs = kv->block_size;
    const int32_t *tbl = kv_table(kv, id);
    uint32_t want_blocks = (uint32_t)(((uint64_t)s->n_tokens + bs - 1) / bs);
    uint32_t want_hashed = kv->prefix_cache ? s->n_committed / bs : 0;
    if (s->n_committed > s->n_tokens || s->n_tokens > kv->max_seq_len ||
        s->n_blocks != want_blocks || s->n_hashed != want_hashed) {
        FAIL("sequence %" PRIu32 ": tokens %" PRIu32 ", committed %" PRIu32 ", blocks %" PRIu32
             " (want %" PRIu32 "), hashed %" PRIu32 " (want %" PRIu32 ")",
             id, s->n_tokens, s->n_committed, s->n_blocks, want_blocks, s->n_hashed, want_hashed);
    }
    for (uint32_t i = 0; i < kv->max_blocks_per_seq; i++) {
        int32_t b = tbl[i];
        if (i >= s->n_blocks) {
            if (b != KV_NONE) {
                FAIL("sequence %" PRIu32 ": unused table entry %" PRIu32 " holds %" PRId32, id, i,
                     b);
            }
            continue;
        }
        if (b < 0 || (uint32_t)b >= kv->n_blocks || kv->blocks[b].state != KV_BLOCK_USED) {
            FAIL("sequence %" PRIu32 ": table entry %" PRIu32 " is block %" PRId32
                 " which is not in use",
                 id, i, b);
        }
        const kv_block *blk = &kv->blocks[b];
        uint32_t want_fill = s->n_tokens - i * bs < bs ? s->n_tokens - i * bs : bs;
        if (blk->fill != want_fill || (i < s->n_hashed && !blk->has_hash)) {
            FAIL("sequence %" PRIu32 ": block %" PRId32 " at %" PRIu32 " has fill %" PRIu32
                 " (want %" PRIu32 "), hashed %d",
                 id, b, i, blk->fill, want_fill, blk->has_hash);
        }
        if (i < s->n_hashed) {
            uint8_t h[KV_HASH_BYTES];
            const uint8_t *parent = i == 0 ? s->root : kv->blocks[tbl[i - 1]].hash;
            ts_status st = kv_hash_block(kv, parent, kv->tokens + (uint64_t)b * bs, h, err);
            if (st != TS_OK) {
                return st;
            }
            if (memcmp(h, blk->hash, KV_HASH_BYTES) != 0) {
                FAIL("sequence %" PRIu32 ": block %" PRId32 " at %" PRIu32
                     " has a hash that does not match its tokens and parent",
                     id, b, i);
            }
        }
        cs->refs[b]++;
        if (cs->first_seq[b] == 0) {
            cs->first_seq[b] = id + 1;
            cs->first_idx[b] = i;
            continue;
        }
        uint32_t other = cs->first_seq[b] - 1;
        const int32_t *otbl = kv_table(kv, other);
        /* The blocks before it must be the same block, or name the same prefix: a sequence
         * that recomputed a block another had cached holds a private twin of it, and the
         * block after the twin is found through the cached one's (equal) hash. */
        bool same_history =
            i == 0 || otbl[i - 1] == tbl[i - 1] ||
            (kv->blocks[otbl[i - 1]].has_hash && kv->blocks[tbl[i - 1]].has_hash &&
             memcmp(kv->blocks[otbl[i - 1]].hash, kv->blocks[tbl[i - 1]].hash, KV_HASH_BYTES) == 0);
        if (other == id || cs->first_idx[b] != i || !same_history) {
            FAIL("block %" PRId32 " is at position %" PRIu32 " of sequence %" PRIu32
                 " and at %" PRIu32 " of sequence %" PRIu32
                 " without a shared prefix (neither a prefix hit nor a fork)",
                 b, i, id, cs->first_idx[b], other);
        }
    }
    return TS_OK;
}

static ts_status check_seqs(const ts_kv *kv, check_scratch *cs, ts_error *err) {
    uint32_t open = 0, closed = 0;
    for (uint32_t id = 0; id < kv->max_seqs; id++) {
        if (!kv->seqs[id].open) {
            continue;
        }
        open++;
        ts_status st = check_seq(kv, id, cs, err);
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
    for (uint32_t b = 0; b < kv->n_blocks; b++) {
        if (cs->refs[b] != kv->blocks[b].ref) {
            FAIL("block %" PRIu32 " has ref %" PRIu32 " but %" PRIu32 " table entries", b,
                 kv->blocks[b].ref, cs->refs[b]);
        }
    }
    for (uint32_t b = 0; b < kv->n_blocks; b++) {
        if (kv->scratch[b] != 0) {
            FAIL("can_append scratch for block %" PRIu32 " was left at %" PRIu32, b,
                 kv->scratch[b]);
        }
    }
    return TS_OK;
}

ts_status ts_kv_check(const ts_kv *kv, ts_error *err) {
    if (kv == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: check: NULL manager");
    }
    size_t n = kv->n_blocks;
    void *mem = calloc(n, 3 * sizeof(uint32_t) + 1);
    if (mem == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM,
                            "kv: check: cannot allocate scratch for %zu "
                            "blocks",
                            n);
    }
    check_scratch cs = {
        .refs = mem,
        .first_seq = (uint32_t *)mem + n,
        .first_idx = (uint32_t *)mem + 2 * n,
        .listed = (uint8_t *)((uint32_t *)mem + 3 * n),
    };
    ts_status st = check_lists(kv, &cs, err);
    if (st == TS_OK) {
        st = check_blocks(kv, &cs, err);
    }
    if (st == TS_OK) {
        st = check_seqs(kv, &cs, err);
    }
    free(mem);
    return st;
}
