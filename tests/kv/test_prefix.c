/* test_prefix.c — automatic prefix caching: hits reuse the same blocks and count tokens, the
 * hash chain separates contexts and salts, eviction is LRU, admission queries are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv/kv_test.h"

/* Distinct token runs: run(k)[i] = 100 * k + i. */
static void run(int32_t *out, int k, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        out[i] = 100 * k + (int32_t)i;
    }
}

/* Opens a sequence, matches its prefix, appends the rest and commits everything. */
static uint32_t prefill(ts_kv *kv, const void *salt, size_t salt_len, const int32_t *tokens,
                        uint32_t n, uint32_t *n_cached) {
    uint32_t seq, cached = 0;
    assert_int_equal(ts_kv_seq_open(kv, salt, salt_len, &seq, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_match_prefix(kv, seq, tokens, n, &cached, &(ts_error){0}), TS_OK);
    kvt_append(kv, seq, tokens + cached, n - cached, NULL);
    assert_int_equal(ts_kv_seq_commit(kv, seq, n - cached, &(ts_error){0}), TS_OK);
    if (n_cached != NULL) {
        *n_cached = cached;
    }
    kvt_check(kv);
    return seq;
}

static void test_hit_reuses_blocks(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(16, 4, 4, 0, true);
    int32_t t[16];
    run(t, 1, 16);
    uint32_t cached = 99;
    uint32_t a = prefill(kv, NULL, 0, t, 10, &cached);
    assert_int_equal(cached, 0);
    assert_int_equal(kvt_stats(kv).n_cached, 2); /* two full committed blocks */
    uint32_t nb;
    int32_t a_blocks[3];
    memcpy(a_blocks, ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &nb), sizeof a_blocks);

    /* While a is alive: b shares its two full blocks (ref 2). */
    uint32_t b = prefill(kv, NULL, 0, t, 14, &cached);
    assert_int_equal(cached, 8);
    const int32_t *bt = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, b, &nb);
    assert_int_equal(nb, 4);
    assert_int_equal(bt[0], a_blocks[0]);
    assert_int_equal(bt[1], a_blocks[1]);
    assert_int_not_equal(bt[2], a_blocks[2]); /* a's third block was partial: never cached */
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.prefix_queries, 2);
    assert_int_equal(s.prefix_query_tokens, 24);
    assert_int_equal(s.prefix_hit_tokens, 8);
    assert_int_equal(s.n_cached, 3); /* b's third block is full and new */

    /* After both close, the cached blocks are evictable and still hit. */
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, b, &(ts_error){0}), TS_OK);
    s = kvt_stats(kv);
    assert_int_equal(s.n_evictable, 3);
    assert_int_equal(s.n_used, 0);
    assert_int_equal(s.n_free, 13);
    kvt_check(kv);
    uint32_t c = prefill(kv, NULL, 0, t, 16, &cached);
    assert_int_equal(cached, 12);
    bt = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c, &nb);
    assert_int_equal(bt[0], a_blocks[0]);
    assert_int_equal(bt[1], a_blocks[1]);
    assert_int_equal(kvt_stats(kv).n_evictable, 0);
    assert_int_equal(kvt_stats(kv).prefix_hit_tokens, 20);
    ts_kv_seq_info info;
    ts_kv_seq_get_info(kv, c, &info, &(ts_error){0});
    assert_int_equal(info.n_tokens, 16);
    assert_int_equal(info.n_committed, 16);
    /* Prefix reuse needs an empty sequence. */
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_match_prefix(kv, c, t, 16, &cached, &err), TS_ERR_STATE);
    ts_kv_destroy(kv);
}

/* At least one token is always left to compute; a recomputed duplicate is not cached twice. */
static void test_last_token_and_duplicates(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(8, 4, 4, 0, true);
    int32_t t[8];
    run(t, 2, 8);
    uint32_t cached;
    uint32_t a = prefill(kv, NULL, 0, t, 8, &cached);
    assert_int_equal(kvt_stats(kv).n_cached, 2);
    uint32_t b = prefill(kv, NULL, 0, t, 8, &cached);
    assert_int_equal(cached, 4); /* 8 tokens: only the first block, the second is recomputed */
    assert_int_equal(kvt_stats(kv).n_cached, 2);
    assert_int_equal(kvt_stats(kv).n_used, 3);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, b, &(ts_error){0}), TS_OK);
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.n_evictable, 2);
    assert_int_equal(s.n_free, 6); /* b's private duplicate went back to the free stack */
    uint32_t one;
    assert_int_equal(ts_kv_seq_open(kv, NULL, 0, &one, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_match_prefix(kv, one, t, 1, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    assert_int_equal(ts_kv_seq_match_prefix(kv, one, t, 0, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

static void test_salt_separates(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(16, 4, 8, 0, true);
    int32_t t[9];
    run(t, 3, 9);
    uint32_t cached;
    uint32_t a = prefill(kv, "tenant-a", 8, t, 9, &cached);
    uint32_t b = prefill(kv, "tenant-b", 8, t, 9, &cached);
    assert_int_equal(cached, 0);
    uint32_t c = prefill(kv, NULL, 0, t, 9, &cached);
    assert_int_equal(cached, 0);
    uint32_t d = prefill(kv, "tenant-a", 8, t, 9, &cached);
    assert_int_equal(cached, 8);
    /* A salt that is a prefix of another is still a different salt. */
    uint32_t e = prefill(kv, "tenant-", 7, t, 9, &cached);
    assert_int_equal(cached, 0);
    uint32_t nb;
    const int32_t *at = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &nb);
    const int32_t *dt = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, d, &nb);
    assert_int_equal(at[0], dt[0]);
    assert_int_equal(at[1], dt[1]);
    assert_int_equal(kvt_stats(kv).n_cached, 8);
    ts_error err = {0};
    uint32_t f;
    assert_int_equal(ts_kv_seq_open(kv, NULL, 3, &f, &err), TS_ERR_INVALID_ARG);
    (void)b, (void)c, (void)e;
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* The same block of tokens after different histories has different hashes: no false hit. */
static void test_chain_context(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(32, 4, 6, 0, true);
    int32_t p1[4], p2[4], p3[4], same[4];
    run(p1, 10, 4);
    run(p2, 11, 4);
    run(p3, 12, 4);
    run(same, 13, 4);
    int32_t x[9], y[9], z[9];
    memcpy(x, p1, sizeof p1), memcpy(x + 4, same, sizeof same), x[8] = 7;
    memcpy(y, p2, sizeof p2), memcpy(y + 4, same, sizeof same), y[8] = 7;
    memcpy(z, p3, sizeof p3), memcpy(z + 4, same, sizeof same), z[8] = 7;
    uint32_t cached, nb;
    uint32_t a = prefill(kv, NULL, 0, x, 9, &cached);
    uint32_t b = prefill(kv, NULL, 0, y, 9, &cached);
    assert_int_equal(cached, 0);
    assert_int_equal(kvt_stats(kv).n_cached, 4); /* both "same" blocks are cached separately */
    const int32_t *at = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &nb);
    const int32_t *bt = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, b, &nb);
    assert_int_not_equal(at[1], bt[1]);
    /* A query after p2 finds b's blocks, not a's. */
    uint32_t c = prefill(kv, NULL, 0, y, 9, &cached);
    assert_int_equal(cached, 8);
    const int32_t *ct = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c, &nb);
    assert_int_equal(ct[0], bt[0]);
    assert_int_equal(ct[1], bt[1]);
    /* After an unknown first block nothing matches, though block 2's tokens are cached. */
    uint32_t d = prefill(kv, NULL, 0, z, 9, &cached);
    assert_int_equal(cached, 0);
    /* A query starting with "same" does not find the blocks that held it at position 1. */
    int32_t w[5];
    memcpy(w, same, sizeof same), w[4] = 7;
    uint32_t e = prefill(kv, NULL, 0, w, 5, &cached);
    assert_int_equal(cached, 0);
    (void)d, (void)e;
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* Released cached blocks are evicted least recently released first, after free blocks; a
 * closed sequence's tail goes before its prefix. */
static void test_lru_eviction(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(4, 4, 4, 0, true);
    int32_t ta[5], tb[5], tc[5], td[9];
    run(ta, 20, 5);
    run(tb, 21, 5);
    run(tc, 22, 5);
    run(td, 23, 9);
    uint32_t cached;
    /* Each prefills 4 tokens (one full block), then closes: a, b, c in that order. */
    uint32_t a = prefill(kv, NULL, 0, ta, 4, &cached);
    uint32_t b = prefill(kv, NULL, 0, tb, 4, &cached);
    uint32_t c = prefill(kv, NULL, 0, tc, 4, &cached);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, b, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, c, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_evictable, 3);
    assert_int_equal(kvt_stats(kv).n_free, 1);
    /* d needs two blocks: the free one, then the oldest cached (a's). */
    uint32_t d = prefill(kv, NULL, 0, td, 8, &cached);
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.n_evictions, 1);
    assert_int_equal(s.n_evictable, 2);
    bool ok;
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, ta, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0); /* a's block is gone */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tb, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tc, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4);
    /* Closing d releases its tail block first: LRU is now b, c, d[1], d[0]. */
    assert_int_equal(ts_kv_seq_close(kv, d, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, td, 9, 9, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 8);
    /* A hit on b's block and its release moves it to the tail: c, d[1], d[0], b. */
    uint32_t b2;
    assert_int_equal(ts_kv_seq_open(kv, NULL, 0, &b2, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_match_prefix(kv, b2, tb, 5, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4);
    assert_int_equal(kvt_stats(kv).n_evictable, 3);
    assert_int_equal(ts_kv_seq_close(kv, b2, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    /* Fresh tokens take blocks one at a time and evict in exactly that order. */
    int32_t te[16];
    run(te, 24, 16);
    uint32_t e = prefill(kv, NULL, 0, te, 6, &cached); /* evicts c, then d[1] */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tc, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, td, 9, 9, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4); /* d's prefix block outlived its tail */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tb, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4);
    kvt_append(kv, e, te + 6, 3, NULL); /* third block: evicts d[0] */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, td, 9, 9, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tb, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 4);
    kvt_append(kv, e, te + 9, 4, NULL); /* fourth block: evicts b */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, tb, 5, 5, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    assert_int_equal(kvt_stats(kv).n_evictions, 5);
    ts_error err = {0};
    assert_int_equal(ts_kv_append(kv, e, te, 4, NULL, &err), TS_ERR_LIMIT);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* The admission query is exact, counts unreferenced hits as unavailable and changes nothing. */
static void test_can_admit(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(4, 4, 4, 32, true); /* sequences may be longer than the pool */
    int32_t t[20], u[16];
    run(t, 30, 20);
    run(u, 31, 16);
    uint32_t cached;
    uint32_t a = prefill(kv, NULL, 0, t, 12, &cached);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK); /* 3 evictable + 1 free */
    ts_kv_stats before = kvt_stats(kv);
    bool ok = false;
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, t, 13, 16, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_true(ok); /* 3 hits + 1 new block of the 1 left */
    assert_int_equal(cached, 12);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, t, 13, 20, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_false(ok); /* 2 new blocks, but the 3 hits are not available to evict */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, u, 16, 16, &ok, &cached, &(ts_error){0}), TS_OK);
    assert_true(ok); /* 4 new blocks: 1 free + 3 evictions */
    assert_int_equal(cached, 0);
    ts_error err = {0};
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, u, 16, 17, &ok, &cached, &err), TS_OK);
    assert_false(ok);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, u, 16, 33, &ok, &cached, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "max_seq_len 32"));
    ts_kv_stats after = kvt_stats(kv);
    assert_memory_equal(&before, &after, sizeof before);
    /* The answers hold when acted on. */
    uint32_t b = prefill(kv, NULL, 0, t, 13, &cached);
    assert_int_equal(cached, 12);
    kvt_append(kv, b, t + 13, 3, NULL);
    assert_int_equal(ts_kv_append(kv, b, t, 1, NULL, &err), TS_ERR_LIMIT);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

static void test_clear_and_off(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(8, 4, 4, 0, true);
    int32_t t[9];
    run(t, 40, 9);
    uint32_t cached;
    uint32_t a = prefill(kv, NULL, 0, t, 9, &cached);
    uint32_t b = prefill(kv, NULL, 0, t, 9, &cached);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    ts_kv_prefix_clear(kv);
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.n_cached, 0);
    assert_int_equal(s.n_evictable, 0);
    kvt_check(kv);
    uint32_t c = prefill(kv, NULL, 0, t, 9, &cached);
    assert_int_equal(cached, 0);
    (void)b, (void)c;
    ts_kv_destroy(kv);

    kv = kvt_create(8, 4, 4, 0, false);
    a = prefill(kv, NULL, 0, t, 9, &cached);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    b = prefill(kv, NULL, 0, t, 9, &cached);
    assert_int_equal(cached, 0);
    s = kvt_stats(kv);
    assert_int_equal(s.n_cached, 0);
    assert_int_equal(s.prefix_queries, 0);
    assert_int_equal(ts_kv_seq_close(kv, b, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_free, 8);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* Forks share hashed blocks; committing the same blocks from two sequences caches them once. */
static void test_fork_commit(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(8, 4, 4, 0, true);
    int32_t t[12];
    run(t, 50, 12);
    uint32_t p, c, cached;
    assert_int_equal(ts_kv_seq_open(kv, "s", 1, &p, &(ts_error){0}), TS_OK);
    kvt_append(kv, p, t, 10, NULL);
    assert_int_equal(ts_kv_seq_commit(kv, p, 3, &(ts_error){0}), TS_OK);
    /* 7 uncommitted tokens shared. */
    assert_int_equal(ts_kv_seq_fork(kv, p, &c, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_commit(kv, c, 7, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_cached, 2);
    assert_int_equal(ts_kv_seq_commit(kv, p, 7, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_cached, 2);
    kvt_check(kv);
    /* Both write token 11: the first copies the shared partial block. */
    assert_int_equal(kvt_append(kv, c, t + 10, 2, NULL), 1);
    assert_int_equal(kvt_append(kv, p, t + 10, 2, NULL), 0);
    assert_int_equal(ts_kv_seq_commit(kv, c, 2, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_commit(kv, p, 2, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_cached, 3); /* same tokens: p's block is a duplicate */
    assert_int_equal(ts_kv_seq_close(kv, p, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, c, &(ts_error){0}), TS_OK);
    uint32_t q;
    assert_int_equal(ts_kv_seq_open(kv, "s", 1, &q, &(ts_error){0}), TS_OK);
    t[11] = 0;
    assert_int_equal(ts_kv_seq_match_prefix(kv, q, t, 12, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 8); /* the third block's tokens differ now */
    kvt_check(kv);
    ts_kv_destroy(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_reuses_blocks), cmocka_unit_test(test_last_token_and_duplicates),
        cmocka_unit_test(test_salt_separates),    cmocka_unit_test(test_chain_context),
        cmocka_unit_test(test_lru_eviction),      cmocka_unit_test(test_can_admit),
        cmocka_unit_test(test_clear_and_off),     cmocka_unit_test(test_fork_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
