/*
 * kv_seq.c — sequences: block tables, appends with copy-on-write, commits, forks, prefix
 * reuse, and the capacity queries the scheduler asks before it schedules or preempts.
 *
 * Every mutating call checks all it needs (ids, limits, free blocks) before it changes
 * anything, so a failed call leaves the manager as it was.
 */
#include <inttypes.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "util/error.h"

static uint32_t div_up(uint64_t a, uint32_t b) {
    return (uint32_t)(a / b + (a % b != 0));
}

static ts_status get_seq(const ts_kv *kv, uint32_t seq, const char *what, ts_error *err) {
    if (kv == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: %s: NULL manager", what);
    }
    if (seq >= kv->max_seqs || !kv->seqs[seq].open) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: %s: sequence %" PRIu32 " is not open (max_seqs %" PRIu32 ")", what,
                            seq, kv->max_seqs);
    }
    return TS_OK;
}

static ts_status limit_blocks(const ts_kv *kv, uint32_t seq, uint32_t n, uint32_t need,
                              ts_error *err) {
    return ts_error_set(err, TS_ERR_LIMIT,
                        "kv: sequence %" PRIu32 ": appending %" PRIu32 " tokens to %" PRIu32
                        " needs %" PRIu32 " blocks but only %" PRIu32 " are available (%" PRIu32
                        " free + %" PRIu32 " cached) of %" PRIu32
                        "; preempt or finish sequences, or give the cache more memory",
                        seq, n, kv->seqs[seq].n_tokens, need, kv_blocks_available(kv), kv->n_free,
                        kv->n_evictable, kv->n_blocks);
}

/* Takes a free sequence id and sets it up empty under `root`. */
static ts_status seq_take(ts_kv *kv, const uint8_t root[KV_HASH_BYTES], uint32_t *out,
                          ts_error *err) {
    if (kv->seq_free_head == KV_NONE) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv: all %" PRIu32 " sequences are open (max_seqs); close or "
                            "preempt one first",
                            kv->max_seqs);
    }
    uint32_t id = (uint32_t)kv->seq_free_head;
    kv_seq *s = &kv->seqs[id];
    kv->seq_free_head = s->next_free;
    memset(s, 0, sizeof *s);
    s->open = true;
    s->next_free = KV_NONE;
    memcpy(s->root, root, KV_HASH_BYTES);
    kv->n_seqs++;
    *out = id;
    return TS_OK;
}

/* Releases every block of seq, last block first: a sequence's tail is the part least likely
 * to be shared, so it should reach the LRU head (be evicted) before its prefix does. */
static void seq_drop_blocks(ts_kv *kv, uint32_t seq) {
    kv_seq *s = &kv->seqs[seq];
    int32_t *tbl = kv_table(kv, seq);
    for (uint32_t i = s->n_blocks; i-- > 0;) {
        kv_block_release(kv, tbl[i]);
        tbl[i] = KV_NONE;
    }
    s->n_tokens = s->n_committed = s->n_blocks = s->n_hashed = 0;
    kv->n_copies = 0;
}

ts_status ts_kv_seq_open(ts_kv *kv, const void *salt, size_t salt_len, uint32_t *seq,
                         ts_error *err) {
    if (kv == NULL || seq == NULL || (salt == NULL && salt_len != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: seq_open: NULL manager, id pointer or salt");
    }
    uint8_t root[KV_HASH_BYTES] = {0};
    if (kv->prefix_cache) {
        ts_status st = kv_hash_root(kv, salt, salt_len, root, err);
        if (st != TS_OK) {
            return st;
        }
    }
    return seq_take(kv, root, seq, err);
}

ts_status ts_kv_seq_reset(ts_kv *kv, uint32_t seq, ts_error *err) {
    ts_status st = get_seq(kv, seq, "seq_reset", err);
    if (st != TS_OK) {
        return st;
    }
    seq_drop_blocks(kv, seq);
    return TS_OK;
}

ts_status ts_kv_seq_close(ts_kv *kv, uint32_t seq, ts_error *err) {
    ts_status st = get_seq(kv, seq, "seq_close", err);
    if (st != TS_OK) {
        return st;
    }
    seq_drop_blocks(kv, seq);
    kv_seq *s = &kv->seqs[seq];
    s->open = false;
    s->next_free = kv->seq_free_head;
    kv->seq_free_head = (int32_t)seq;
    kv->n_seqs--;
    return TS_OK;
}

/* Walks the hash chain from root over the full blocks of tokens[0..n-1) (one token is always
 * left to compute) and stops at the first block the cache does not hold. Writes the found
 * block ids to found[] when it is not NULL; counts how many of them are unreferenced. */
static ts_status walk_prefix(ts_kv *kv, const uint8_t root[KV_HASH_BYTES], const int32_t *tokens,
                             uint32_t n, int32_t *found, uint32_t *n_hit, uint32_t *n_hit_idle,
                             ts_error *err) {
    *n_hit = 0;
    *n_hit_idle = 0;
    if (!kv->prefix_cache || n == 0) {
        return TS_OK;
    }
    uint32_t max_blocks = (n - 1) / kv->block_size;
    if (max_blocks > kv->max_blocks_per_seq) {
        max_blocks = kv->max_blocks_per_seq;
    }
    uint8_t parent[KV_HASH_BYTES], h[KV_HASH_BYTES];
    memcpy(parent, root, KV_HASH_BYTES);
    for (uint32_t i = 0; i < max_blocks; i++) {
        ts_status st = kv_hash_block(kv, parent, tokens + (uint64_t)i * kv->block_size, h, err);
        if (st != TS_OK) {
            return st;
        }
        int32_t b = kv_htab_find(kv, h);
        if (b == KV_NONE) {
            break;
        }
        if (found != NULL) {
            found[i] = b;
        }
        *n_hit_idle += kv->blocks[b].ref == 0;
        (*n_hit)++;
        memcpy(parent, h, KV_HASH_BYTES);
    }
    return TS_OK;
}

ts_status ts_kv_seq_match_prefix(ts_kv *kv, uint32_t seq, const int32_t *tokens, uint32_t n,
                                 uint32_t *n_cached, ts_error *err) {
    ts_status st = get_seq(kv, seq, "match_prefix", err);
    if (st != TS_OK) {
        return st;
    }
    if (n_cached == NULL || (tokens == NULL && n != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: match_prefix: NULL argument");
    }
    kv_seq *s = &kv->seqs[seq];
    if (s->n_tokens != 0) {
        return ts_error_set(err, TS_ERR_STATE,
                            "kv: match_prefix: sequence %" PRIu32 " already holds %" PRIu32
                            " tokens; prefix reuse needs an empty sequence",
                            seq, s->n_tokens);
    }
    if (n > kv->max_seq_len) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv: match_prefix: sequence %" PRIu32 ": %" PRIu32
                            " tokens exceed max_seq_len %" PRIu32,
                            seq, n, kv->max_seq_len);
    }
    int32_t *tbl = kv_table(kv, seq);
    uint32_t hits, idle;
    st = walk_prefix(kv, s->root, tokens, n, tbl, &hits, &idle, err);
    if (st != TS_OK) {
        for (uint32_t i = 0; i < kv->max_blocks_per_seq && tbl[i] != KV_NONE; i++) {
            tbl[i] = KV_NONE;
        }
        return st;
    }
    for (uint32_t i = 0; i < hits; i++) {
        kv_block_acquire(kv, tbl[i]);
    }
    uint32_t got = hits * kv->block_size;
    s->n_blocks = s->n_hashed = hits;
    s->n_tokens = s->n_committed = got;
    if (kv->prefix_cache) {
        kv->prefix_queries++;
        kv->prefix_query_tokens += n;
        kv->prefix_hit_tokens += got;
    }
    *n_cached = got;
    return TS_OK;
}

ts_status ts_kv_append(ts_kv *kv, uint32_t seq, const int32_t *tokens, uint32_t n, int32_t *slots,
                       ts_error *err) {
    ts_status st = get_seq(kv, seq, "append", err);
    if (st != TS_OK) {
        return st;
    }
    if (tokens == NULL && n != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: append: NULL tokens");
    }
    kv->n_copies = 0;
    kv_seq *s = &kv->seqs[seq];
    const uint32_t bs = kv->block_size;
    uint64_t new_len = (uint64_t)s->n_tokens + n;
    if (new_len > kv->max_seq_len) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv: sequence %" PRIu32 ": appending %" PRIu32 " tokens to %" PRIu32
                            " exceeds max_seq_len %" PRIu32,
                            seq, n, s->n_tokens, kv->max_seq_len);
    }
    if (n == 0) {
        return TS_OK;
    }
    int32_t *tbl = kv_table(kv, seq);
    uint32_t blocks_after = div_up(new_len, bs);
    bool cow = s->n_tokens % bs != 0 && kv->blocks[tbl[s->n_blocks - 1]].ref > 1;
    uint32_t need = blocks_after - s->n_blocks + (cow ? 1 : 0);
    if (need > kv_blocks_available(kv) || blocks_after > kv->max_blocks_per_seq) {
        return limit_blocks(kv, seq, n, need, err);
    }
    if (cow) {
        int32_t src = tbl[s->n_blocks - 1];
        int32_t dst = kv_block_take(kv);
        kv->blocks[dst].fill = kv->blocks[src].fill;
        memcpy(kv->tokens + (uint64_t)dst * bs, kv->tokens + (uint64_t)src * bs,
               kv->blocks[src].fill * sizeof(int32_t));
        kv_block_release(kv, src);
        tbl[s->n_blocks - 1] = dst;
        kv->copies[0] = (ts_kv_copy){.src = src, .dst = dst};
        kv->n_copies = 1;
        kv->n_cow_copies++;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pos = s->n_tokens + i;
        uint32_t bi = pos / bs, off = pos % bs;
        if (bi == s->n_blocks) {
            tbl[bi] = kv_block_take(kv);
            s->n_blocks++;
        }
        int32_t b = tbl[bi];
        kv->tokens[(uint64_t)b * bs + off] = tokens[i];
        kv->blocks[b].fill = off + 1;
        if (slots != NULL) {
            slots[i] = (int32_t)((uint32_t)b * bs + off);
        }
    }
    s->n_tokens = (uint32_t)new_len;
    return TS_OK;
}

ts_status ts_kv_seq_commit(ts_kv *kv, uint32_t seq, uint32_t n, ts_error *err) {
    ts_status st = get_seq(kv, seq, "commit", err);
    if (st != TS_OK) {
        return st;
    }
    kv_seq *s = &kv->seqs[seq];
    if (n > s->n_tokens - s->n_committed) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: commit: sequence %" PRIu32 " has %" PRIu32
                            " uncommitted tokens, cannot commit %" PRIu32,
                            seq, s->n_tokens - s->n_committed, n);
    }
    uint32_t committed = s->n_committed + n;
    const uint32_t bs = kv->block_size;
    int32_t *tbl = kv_table(kv, seq);
    while (kv->prefix_cache && (uint64_t)(s->n_hashed + 1) * bs <= committed) {
        int32_t b = tbl[s->n_hashed];
        kv_block *blk = &kv->blocks[b];
        /* A block shared by a fork or a prefix hit may already carry its hash. */
        if (!blk->has_hash) {
            const uint8_t *parent =
                s->n_hashed == 0 ? s->root : kv->blocks[tbl[s->n_hashed - 1]].hash;
            st = kv_hash_block(kv, parent, kv->tokens + (uint64_t)b * bs, blk->hash, err);
            if (st != TS_OK) {
                return st;
            }
            blk->has_hash = true;
            /* An identical block computed by another sequence may be cached already; this
             * one then stays private and is freed, not cached, when released. */
            if (kv_htab_find(kv, blk->hash) == KV_NONE) {
                kv_htab_insert(kv, b);
                blk->cached = true;
                kv->n_cached++;
            }
        }
        s->n_hashed++;
    }
    s->n_committed = committed;
    return TS_OK;
}

ts_status ts_kv_seq_fork(ts_kv *kv, uint32_t parent, uint32_t *child, ts_error *err) {
    ts_status st = get_seq(kv, parent, "fork", err);
    if (st != TS_OK) {
        return st;
    }
    if (child == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: fork: NULL child pointer");
    }
    uint32_t id = 0;
    st = seq_take(kv, kv->seqs[parent].root, &id, err);
    if (st != TS_OK) {
        return st;
    }
    const kv_seq *p = &kv->seqs[parent];
    kv_seq *c = &kv->seqs[id];
    const int32_t *ptbl = kv_table(kv, parent);
    int32_t *ctbl = kv_table(kv, id);
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        ctbl[i] = ptbl[i];
        kv_block_acquire(kv, ptbl[i]);
    }
    c->n_tokens = p->n_tokens;
    c->n_committed = p->n_committed;
    c->n_blocks = p->n_blocks;
    c->n_hashed = p->n_hashed;
    *child = id;
    return TS_OK;
}

ts_status ts_kv_can_append(ts_kv *kv, const uint32_t *seqs, const uint32_t *n_new, uint32_t count,
                           bool *ok, uint32_t *n_blocks_needed, ts_error *err) {
    if (kv == NULL || ok == NULL || (count != 0 && (seqs == NULL || n_new == NULL))) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: can_append: NULL argument");
    }
    const uint32_t bs = kv->block_size;
    uint64_t need = 0;
    for (uint32_t i = 0; i < count; i++) {
        ts_status st = get_seq(kv, seqs[i], "can_append", err);
        if (st != TS_OK) {
            return st;
        }
        const kv_seq *s = &kv->seqs[seqs[i]];
        if ((uint64_t)s->n_tokens + n_new[i] > kv->max_seq_len) {
            return ts_error_set(err, TS_ERR_LIMIT,
                                "kv: can_append: sequence %" PRIu32 " at %" PRIu32
                                " tokens + %" PRIu32 " exceeds max_seq_len %" PRIu32,
                                seqs[i], s->n_tokens, n_new[i], kv->max_seq_len);
        }
    }
    /* Pass 1: count new blocks, and count the writers of each shared, partly filled last
     * block in scratch[] (all zero between calls). */
    for (uint32_t i = 0; i < count; i++) {
        const kv_seq *s = &kv->seqs[seqs[i]];
        if (n_new[i] == 0) {
            continue;
        }
        need += div_up((uint64_t)s->n_tokens + n_new[i], bs) - s->n_blocks;
        if (s->n_tokens % bs != 0) {
            int32_t last = kv_table(kv, seqs[i])[s->n_blocks - 1];
            if (kv->blocks[last].ref > 1) {
                kv->scratch[last]++;
            }
        }
    }
    /* Pass 2: k writers into a block with ref r copy k times, except that when r == k the
     * last of them finds the block unshared and writes in place. */
    for (uint32_t i = 0; i < count; i++) {
        const kv_seq *s = &kv->seqs[seqs[i]];
        if (n_new[i] == 0 || s->n_tokens % bs == 0) {
            continue;
        }
        int32_t last = kv_table(kv, seqs[i])[s->n_blocks - 1];
        uint32_t k = kv->scratch[last];
        if (k != 0) {
            need += k == kv->blocks[last].ref ? k - 1 : k;
            kv->scratch[last] = 0;
        }
    }
    *ok = need <= kv_blocks_available(kv);
    if (n_blocks_needed != NULL) {
        *n_blocks_needed = need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
    }
    return TS_OK;
}

ts_status ts_kv_can_admit(ts_kv *kv, const void *salt, size_t salt_len, const int32_t *tokens,
                          uint32_t n, uint32_t n_alloc, bool *ok, uint32_t *n_cached,
                          ts_error *err) {
    if (kv == NULL || ok == NULL || (tokens == NULL && n != 0) || (salt == NULL && salt_len != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: can_admit: NULL argument");
    }
    if (n_alloc > kv->max_seq_len || n > kv->max_seq_len) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv: can_admit: a request of %" PRIu32 " tokens (%" PRIu32
                            " to allocate) exceeds max_seq_len %" PRIu32,
                            n, n_alloc, kv->max_seq_len);
    }
    uint32_t hits = 0, idle = 0;
    if (kv->prefix_cache) {
        uint8_t root[KV_HASH_BYTES];
        ts_status st = kv_hash_root(kv, salt, salt_len, root, err);
        if (st == TS_OK) {
            st = walk_prefix(kv, root, tokens, n, NULL, &hits, &idle, err);
        }
        if (st != TS_OK) {
            return st;
        }
    }
    uint32_t blocks = div_up(n_alloc, kv->block_size);
    uint32_t need = blocks > hits ? blocks - hits : 0;
    /* Unreferenced hits leave the evictable pool when reused, so they are not available. */
    *ok = need <= kv_blocks_available(kv) - idle;
    if (n_cached != NULL) {
        *n_cached = hits * kv->block_size;
    }
    return TS_OK;
}

const int32_t *ts_kv_seq_block_table(const ts_kv *kv, uint32_t seq, uint32_t *n_blocks) {
    if (kv == NULL || seq >= kv->max_seqs || !kv->seqs[seq].open) {
        if (n_blocks != NULL) {
            *n_blocks = 0;
        }
        return NULL;
    }
    if (n_blocks != NULL) {
        *n_blocks = kv->seqs[seq].n_blocks;
    }
    return kv_table(kv, seq);
}

ts_status ts_kv_seq_slot(const ts_kv *kv, uint32_t seq, uint32_t pos, int32_t *slot,
                         ts_error *err) {
    ts_status st = get_seq(kv, seq, "seq_slot", err);
    if (st != TS_OK) {
        return st;
    }
    if (slot == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: seq_slot: NULL slot pointer");
    }
    if (pos >= kv->seqs[seq].n_tokens) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: seq_slot: position %" PRIu32 " of sequence %" PRIu32
                            " is past its %" PRIu32 " tokens",
                            pos, seq, kv->seqs[seq].n_tokens);
    }
    int32_t b = kv_table(kv, seq)[pos / kv->block_size];
    *slot = (int32_t)((uint32_t)b * kv->block_size + pos % kv->block_size);
    return TS_OK;
}

ts_status ts_kv_seq_get_info(const ts_kv *kv, uint32_t seq, ts_kv_seq_info *out, ts_error *err) {
    ts_status st = get_seq(kv, seq, "seq_get_info", err);
    if (st != TS_OK) {
        return st;
    }
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: seq_get_info: NULL output");
    }
    const kv_seq *s = &kv->seqs[seq];
    out->n_tokens = s->n_tokens;
    out->n_committed = s->n_committed;
    out->n_blocks = s->n_blocks;
    return TS_OK;
}
