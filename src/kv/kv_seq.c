/*
 * kv_seq.c — sequences: block tables, appends with copy-on-write, commits, forks, prefix
 * reuse, and the capacity queries the scheduler asks before it schedules or preempts.
 *
 * A sequence has one table per pool, indexed alike (entry i holds positions
 * [i * block_size, (i + 1) * block_size)), and every call does the same to each pool. The one
 * difference: in the sliding-window pool a sequence holds the entries from first[pool] on
 * (kv_window_first of its committed length); ts_kv_seq_commit releases the older ones, and a
 * prefix hit takes only the blocks from there.
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

static const char *pool_name(uint32_t pool) {
    return pool == TS_KV_POOL_FULL ? "full" : "sliding-window";
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

static ts_status limit_blocks(const ts_kv *kv, uint32_t seq, uint32_t pool, uint32_t n,
                              uint32_t need, ts_error *err) {
    const kv_pool *p = &kv->pools[pool];
    return ts_error_set(err, TS_ERR_LIMIT,
                        "kv: sequence %" PRIu32 ": appending %" PRIu32 " tokens to %" PRIu32
                        " needs %" PRIu32 " blocks of the %s pool but only %" PRIu32
                        " are available (%" PRIu32 " free + %" PRIu32 " cached) of %" PRIu32
                        "; preempt or finish sequences, or give the cache more memory",
                        seq, n, kv->seqs[seq].n_tokens, need, pool_name(pool),
                        kv_blocks_available(p), p->n_free, p->n_evictable, p->n_blocks);
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
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t *tbl = kv_table(kv, p, seq);
        for (uint32_t i = s->n_blocks; i-- > s->first[pi];) {
            kv_block_release(p, tbl[i]);
            tbl[i] = KV_NONE;
        }
        s->first[pi] = 0;
    }
    s->n_tokens = s->n_committed = s->n_blocks = s->n_hashed = 0;
    kv->n_copies = 0;
}

/* Releases the blocks of seq's windowed tables that no query from its next position on can
 * see, oldest first (so the LRU list evicts them in the order they left the window). */
static void release_window(ts_kv *kv, uint32_t seq) {
    kv_seq *s = &kv->seqs[seq];
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t *tbl = kv_table(kv, p, seq);
        uint32_t lo = kv_window_first(kv, p, s->n_committed);
        for (; s->first[pi] < lo; s->first[pi]++) {
            kv_block_release(p, tbl[s->first[pi]]);
            tbl[s->first[pi]] = KV_NONE;
        }
    }
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

/* The cached prefix a sequence under `root` can take over from tokens[0..n - 1) (one token is
 * always left to compute); reads only. Hashes the chain into kv->hashes while the full pool
 * holds each block, then keeps the longest run of m of those blocks that every windowed pool
 * can continue: it must hold blocks kv_window_first(m * block_size) .. m - 1, the keys that the
 * query at position m * block_size can see. *n_hit gets m; idle[pool] how many of the blocks
 * the pool would hand out are unreferenced (they leave its evictable list when taken). */
static ts_status walk_prefix(ts_kv *kv, const uint8_t root[KV_HASH_BYTES], const int32_t *tokens,
                             uint32_t n, uint32_t *n_hit, uint32_t idle[TS_KV_MAX_POOLS],
                             ts_error *err) {
    const uint32_t bs = kv->block_size;
    *n_hit = 0;
    memset(idle, 0, TS_KV_MAX_POOLS * sizeof idle[0]);
    if (!kv->prefix_cache || n == 0) {
        return TS_OK;
    }
    uint32_t max_blocks = (n - 1) / bs;
    if (max_blocks > kv->max_blocks_per_seq) {
        max_blocks = kv->max_blocks_per_seq;
    }
    uint32_t m_full = 0;
    const uint8_t *parent = root;
    for (uint32_t i = 0; i < max_blocks; i++) {
        uint8_t *h = kv->hashes + (uint64_t)i * KV_HASH_BYTES;
        ts_status st = kv_hash_block(kv, parent, tokens + (uint64_t)i * bs, h, err);
        if (st != TS_OK) {
            return st;
        }
        if (kv_htab_find(&kv->pools[TS_KV_POOL_FULL], h) == KV_NONE) {
            break;
        }
        m_full = i + 1;
        parent = h;
    }
    /* run[pool]: blocks run[pool] .. m - 1 are all cached in the pool. */
    uint32_t run[TS_KV_MAX_POOLS] = {0};
    uint32_t best = 0;
    for (uint32_t m = 1; m <= m_full; m++) {
        bool ok = true;
        for (uint32_t pi = 1; pi < kv->n_pools; pi++) {
            const kv_pool *p = &kv->pools[pi];
            if (kv_htab_find(p, kv->hashes + (uint64_t)(m - 1) * KV_HASH_BYTES) == KV_NONE) {
                run[pi] = m;
            }
            ok = ok && run[pi] <= kv_window_first(kv, p, m * bs);
        }
        best = ok ? m : best;
    }
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        const kv_pool *p = &kv->pools[pi];
        for (uint32_t i = kv_window_first(kv, p, best * bs); i < best; i++) {
            int32_t b = kv_htab_find(p, kv->hashes + (uint64_t)i * KV_HASH_BYTES);
            idle[pi] += p->blocks[b].ref == 0;
        }
    }
    *n_hit = best;
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
    uint32_t hits, idle[TS_KV_MAX_POOLS];
    st = walk_prefix(kv, s->root, tokens, n, &hits, idle, err);
    if (st != TS_OK) {
        return st;
    }
    uint32_t got = hits * kv->block_size;
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t *tbl = kv_table(kv, p, seq);
        s->first[pi] = kv_window_first(kv, p, got);
        for (uint32_t i = s->first[pi]; i < hits; i++) {
            tbl[i] = kv_htab_find(p, kv->hashes + (uint64_t)i * KV_HASH_BYTES);
            kv_block_acquire(p, tbl[i]);
        }
    }
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
    uint32_t blocks_after = div_up(new_len, bs);
    bool cow[TS_KV_MAX_POOLS] = {false};
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        const kv_pool *p = &kv->pools[pi];
        /* The partly filled last block is always held: it is inside every window. */
        cow[pi] = s->n_tokens % bs != 0 && p->blocks[kv_table(kv, p, seq)[s->n_blocks - 1]].ref > 1;
        uint32_t need = blocks_after - s->n_blocks + (cow[pi] ? 1 : 0);
        if (need > kv_blocks_available(p) || blocks_after > kv->max_blocks_per_seq) {
            return limit_blocks(kv, seq, pi, n, need, err);
        }
    }
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t *tbl = kv_table(kv, p, seq);
        if (cow[pi]) {
            int32_t src = tbl[s->n_blocks - 1];
            int32_t dst = kv_block_take(kv, p);
            p->blocks[dst].fill = p->blocks[src].fill;
            memcpy(p->tokens + (uint64_t)dst * bs, p->tokens + (uint64_t)src * bs,
                   p->blocks[src].fill * sizeof(int32_t));
            kv_block_release(p, src);
            tbl[s->n_blocks - 1] = dst;
            kv->copies[kv->n_copies++] = (ts_kv_copy){.pool = (int32_t)pi, .src = src, .dst = dst};
            kv->n_cow_copies++;
        }
        for (uint32_t bi = s->n_blocks; bi < blocks_after; bi++) {
            tbl[bi] = kv_block_take(kv, p);
        }
        for (uint32_t i = 0; i < n; i++) {
            uint32_t pos = s->n_tokens + i;
            int32_t b = tbl[pos / bs];
            p->tokens[(uint64_t)b * bs + pos % bs] = tokens[i];
            p->blocks[b].fill = pos % bs + 1;
            if (pi == TS_KV_POOL_FULL && slots != NULL) {
                slots[i] = (int32_t)((uint32_t)b * bs + pos % bs);
            }
        }
    }
    s->n_blocks = blocks_after;
    s->n_tokens = (uint32_t)new_len;
    return TS_OK;
}

/* Gives block i of seq (full and committed) its chain hash in every pool that lacks it, and
 * registers it in the pool's prefix table unless an identical block is there already. The
 * full pool's block is hashed from its tokens and parent; the other pools' block at i holds
 * the same tokens after the same prefix, so it takes the same name. */
static ts_status hash_block(ts_kv *kv, uint32_t seq, uint32_t i, ts_error *err) {
    const kv_seq *s = &kv->seqs[seq];
    const kv_pool *full = &kv->pools[TS_KV_POOL_FULL];
    const int32_t *ftbl = kv_table(kv, full, seq);
    const kv_block *fb = &full->blocks[ftbl[i]];
    uint8_t h[KV_HASH_BYTES];
    if (fb->has_hash) {
        memcpy(h, fb->hash, KV_HASH_BYTES);
    } else {
        const uint8_t *parent = i == 0 ? s->root : full->blocks[ftbl[i - 1]].hash;
        ts_status st =
            kv_hash_block(kv, parent, full->tokens + (uint64_t)ftbl[i] * kv->block_size, h, err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t b = kv_table(kv, p, seq)[i];
        /* A block shared by a fork or a prefix hit may already carry its hash. */
        if (b == KV_NONE || p->blocks[b].has_hash) {
            continue;
        }
        kv_block *blk = &p->blocks[b];
        memcpy(blk->hash, h, KV_HASH_BYTES);
        blk->has_hash = true;
        /* An identical block computed by another sequence may be cached already; this one
         * then stays private and is freed, not cached, when released. */
        if (kv_htab_find(p, blk->hash) == KV_NONE) {
            kv_htab_insert(p, b);
            blk->cached = true;
            p->n_cached++;
        }
    }
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
    while (kv->prefix_cache && (uint64_t)(s->n_hashed + 1) * kv->block_size <= committed) {
        st = hash_block(kv, seq, s->n_hashed, err);
        if (st != TS_OK) {
            return st;
        }
        s->n_hashed++;
    }
    s->n_committed = committed;
    release_window(kv, seq);
    return TS_OK;
}

ts_status ts_kv_seq_drop(ts_kv *kv, uint32_t seq, uint32_t n, ts_error *err) {
    ts_status st = get_seq(kv, seq, "drop", err);
    if (st != TS_OK) {
        return st;
    }
    kv_seq *s = &kv->seqs[seq];
    if (n > s->n_tokens - s->n_committed) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: drop: sequence %" PRIu32 " has %" PRIu32
                            " uncommitted tokens, cannot drop %" PRIu32,
                            seq, s->n_tokens - s->n_committed, n);
    }
    const uint32_t bs = kv->block_size;
    uint32_t new_len = s->n_tokens - n;
    uint32_t blocks_after = div_up(new_len, bs);
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *p = &kv->pools[pi];
        int32_t *tbl = kv_table(kv, p, seq);
        /* Blocks past the new end hold only uncommitted tokens: appended by this sequence,
         * never hashed nor shared. */
        for (uint32_t bi = blocks_after; bi < s->n_blocks; bi++) {
            kv_block_release(p, tbl[bi]);
            tbl[bi] = KV_NONE;
        }
        if (new_len % bs != 0) { /* the last block was written by the append: private */
            p->blocks[tbl[blocks_after - 1]].fill = new_len % bs;
        }
    }
    s->n_blocks = blocks_after;
    s->n_tokens = new_len;
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
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        kv_pool *pool = &kv->pools[pi];
        const int32_t *ptbl = kv_table(kv, pool, parent);
        int32_t *ctbl = kv_table(kv, pool, id);
        for (uint32_t i = p->first[pi]; i < p->n_blocks; i++) {
            ctbl[i] = ptbl[i];
            kv_block_acquire(pool, ptbl[i]);
        }
        c->first[pi] = p->first[pi];
    }
    c->n_tokens = p->n_tokens;
    c->n_committed = p->n_committed;
    c->n_blocks = p->n_blocks;
    c->n_hashed = p->n_hashed;
    *child = id;
    return TS_OK;
}

/* Blocks that appending n_new[i] tokens to seqs[i], for every i, takes from pool pi: new
 * blocks plus copy-on-write copies (scratch[] is all zero between calls). */
static uint64_t append_need(ts_kv *kv, uint32_t pi, const uint32_t *seqs, const uint32_t *n_new,
                            uint32_t count) {
    kv_pool *p = &kv->pools[pi];
    const uint32_t bs = kv->block_size;
    uint64_t need = 0;
    /* Pass 1: count new blocks, and count the writers of each shared, partly filled last
     * block in scratch[]. */
    for (uint32_t i = 0; i < count; i++) {
        const kv_seq *s = &kv->seqs[seqs[i]];
        if (n_new[i] == 0) {
            continue;
        }
        need += div_up((uint64_t)s->n_tokens + n_new[i], bs) - s->n_blocks;
        if (s->n_tokens % bs != 0) {
            int32_t last = kv_table(kv, p, seqs[i])[s->n_blocks - 1];
            if (p->blocks[last].ref > 1) {
                p->scratch[last]++;
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
        int32_t last = kv_table(kv, p, seqs[i])[s->n_blocks - 1];
        uint32_t k = p->scratch[last];
        if (k != 0) {
            need += k == p->blocks[last].ref ? k - 1 : k;
            p->scratch[last] = 0;
        }
    }
    return need;
}

ts_status ts_kv_can_append(ts_kv *kv, const uint32_t *seqs, const uint32_t *n_new, uint32_t count,
                           bool *ok, uint32_t *n_blocks_needed, ts_error *err) {
    if (kv == NULL || ok == NULL || (count != 0 && (seqs == NULL || n_new == NULL))) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: can_append: NULL argument");
    }
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
    *ok = true;
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        uint64_t need = append_need(kv, pi, seqs, n_new, count);
        *ok = *ok && need <= kv_blocks_available(&kv->pools[pi]);
        if (pi == TS_KV_POOL_FULL && n_blocks_needed != NULL) {
            *n_blocks_needed = need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
        }
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
    uint32_t hits = 0, idle[TS_KV_MAX_POOLS] = {0};
    if (kv->prefix_cache) {
        uint8_t root[KV_HASH_BYTES];
        ts_status st = kv_hash_root(kv, salt, salt_len, root, err);
        if (st == TS_OK) {
            st = walk_prefix(kv, root, tokens, n, &hits, idle, err);
        }
        if (st != TS_OK) {
            return st;
        }
    }
    uint32_t blocks = div_up(n_alloc, kv->block_size);
    uint32_t need = blocks > hits ? blocks - hits : 0;
    /* Unreferenced hits leave the evictable list when reused, so they are not available. */
    *ok = true;
    for (uint32_t pi = 0; pi < kv->n_pools; pi++) {
        *ok = *ok && need <= kv_blocks_available(&kv->pools[pi]) - idle[pi];
    }
    if (n_cached != NULL) {
        *n_cached = hits * kv->block_size;
    }
    return TS_OK;
}

const int32_t *ts_kv_seq_block_table(const ts_kv *kv, ts_kv_pool pool, uint32_t seq,
                                     uint32_t *n_blocks) {
    if (kv == NULL || (uint32_t)pool >= kv->n_pools || seq >= kv->max_seqs || !kv->seqs[seq].open) {
        if (n_blocks != NULL) {
            *n_blocks = 0;
        }
        return NULL;
    }
    if (n_blocks != NULL) {
        *n_blocks = kv->seqs[seq].n_blocks;
    }
    return kv_table(kv, &kv->pools[pool], seq);
}

ts_status ts_kv_seq_slot(const ts_kv *kv, ts_kv_pool pool, uint32_t seq, uint32_t pos,
                         int32_t *slot, ts_error *err) {
    ts_status st = get_seq(kv, seq, "seq_slot", err);
    if (st != TS_OK) {
        return st;
    }
    if (slot == NULL || (uint32_t)pool >= kv->n_pools) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: seq_slot: NULL slot pointer or pool %d of %" PRIu32, (int)pool,
                            kv->n_pools);
    }
    if (pos >= kv->seqs[seq].n_tokens) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: seq_slot: position %" PRIu32 " of sequence %" PRIu32
                            " is past its %" PRIu32 " tokens",
                            pos, seq, kv->seqs[seq].n_tokens);
    }
    int32_t b = kv_table(kv, &kv->pools[pool], seq)[pos / kv->block_size];
    if (b == KV_NONE) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: seq_slot: position %" PRIu32 " of sequence %" PRIu32
                            " left the window; its %s block was released",
                            pos, seq, pool_name(pool));
    }
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
    out->swa_first = kv->n_pools > TS_KV_POOL_SWA ? s->first[TS_KV_POOL_SWA] : 0;
    return TS_OK;
}
