/* test_window.c — the sliding-window pool: which blocks a sequence keeps as it grows, that
 * released blocks are reused, copy-on-write and forks in both pools, the capacity queries,
 * and the rule for reusing a cached prefix (its window blocks must still be cached). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv/kv_test.h"

#define BS     4u
#define WINDOW 6u

static ts_kv *make(uint32_t n_blocks, uint32_t n_blocks_swa, bool prefix) {
    ts_kv_config cfg = {.n_blocks = n_blocks,
                        .block_size = BS,
                        .max_seqs = 4,
                        .prefix_cache = prefix,
                        .n_blocks_swa = n_blocks_swa,
                        .swa_window = WINDOW};
    ts_kv *kv = NULL;
    ts_error err = {0};
    if (ts_kv_create(&cfg, &kv, &err) != TS_OK) {
        fail_msg("ts_kv_create: %s", err.msg);
    }
    return kv;
}

/* Token i of the test's sequences (distinct per position and stream). */
static int32_t tok(int stream, uint32_t i) {
    return (int32_t)(1000 * stream + i);
}

static void append_commit(ts_kv *kv, uint32_t seq, int stream, uint32_t from, uint32_t n) {
    int32_t t[64];
    assert_true(n <= 64);
    for (uint32_t i = 0; i < n; i++) {
        t[i] = tok(stream, from + i);
    }
    kvt_append(kv, seq, t, n, NULL);
    assert_int_equal(ts_kv_seq_commit(kv, seq, n, &(ts_error){0}), TS_OK);
    kvt_check(kv);
}

/* The first sliding-window entry a sequence with `committed` tokens needs. */
static uint32_t first_needed(uint32_t committed) {
    return committed >= WINDOW ? (committed - WINDOW + 1) / BS : 0;
}

/* seq's sliding-window table is -1 before its window and valid from there; every position a
 * query at `committed` or later can see has a slot. */
static void check_window(ts_kv *kv, uint32_t seq, uint32_t n_tokens, uint32_t committed) {
    uint32_t nb = 0;
    const int32_t *t = ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, seq, &nb);
    assert_non_null(t);
    assert_int_equal(nb, (n_tokens + BS - 1) / BS);
    for (uint32_t i = 0; i < nb; i++) {
        if (i < first_needed(committed)) {
            assert_int_equal(t[i], -1);
        } else {
            assert_true(t[i] >= 0);
        }
    }
    for (uint32_t pos = committed >= WINDOW ? committed - WINDOW + 1 : 0; pos < n_tokens; pos++) {
        int32_t slot = -1;
        assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_SWA, seq, pos, &slot, &(ts_error){0}),
                         TS_OK);
        assert_int_equal(slot, t[pos / BS] * (int32_t)BS + (int32_t)(pos % BS));
    }
}

/* A long sequence decoded token by token keeps only the blocks of its last window - 1
 * positions in the sliding-window pool (5 positions: at most 2 blocks of 4) while the full
 * pool keeps everything, and released blocks are taken again. */
static void test_release_and_reuse(void **state) {
    (void)state;
    ts_kv *kv = make(64, 5, false);
    uint32_t a = kvt_open(kv);
    append_commit(kv, a, 1, 0, 20);
    ts_kv_stats st = kvt_stats(kv);
    assert_int_equal(st.n_used, 5);
    assert_int_equal(st.swa.n_blocks, 5);
    assert_int_equal(st.swa.n_used, 2); /* positions 15..19: blocks 3 and 4 */
    check_window(kv, a, 20, 20);
    int32_t slot;
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_SWA, a, 11, &slot, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "left the window"));
    assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_FULL, a, 11, &slot, &err), TS_OK);
    ts_kv_seq_info info;
    assert_int_equal(ts_kv_seq_get_info(kv, a, &info, &err), TS_OK);
    assert_int_equal(info.swa_first, 3);

    /* 5 sliding-window blocks serve 200 tokens: the released ones come back. */
    for (uint32_t n = 20; n < 200; n++) {
        append_commit(kv, a, 1, n, 1);
        st = kvt_stats(kv);
        assert_true(st.swa.n_used <= 2);
        assert_int_equal(st.n_used, (n + 1 + BS - 1) / BS);
        check_window(kv, a, n + 1, n + 1);
    }
    /* Appended but not committed tokens keep the window where the committed ones put it. */
    int32_t more[5] = {tok(1, 200), tok(1, 201), tok(1, 202), tok(1, 203), tok(1, 204)};
    kvt_append(kv, a, more, 5, NULL);
    check_window(kv, a, 205, 200);
    assert_int_equal(ts_kv_seq_commit(kv, a, 5, &err), TS_OK);
    check_window(kv, a, 205, 205);
    kvt_check(kv);
    assert_int_equal(ts_kv_seq_close(kv, a, &err), TS_OK);
    st = kvt_stats(kv);
    assert_int_equal(st.swa.n_free, 5);
    assert_int_equal(st.n_free, 64);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* The sliding-window pool limits an append by itself: its blocks must hold every token of
 * the append at once, and the error names it. */
static void test_window_pool_limits(void **state) {
    (void)state;
    ts_kv *kv = make(64, 3, false);
    uint32_t a = kvt_open(kv);
    int32_t t[16];
    for (uint32_t i = 0; i < 16; i++) {
        t[i] = tok(2, i);
    }
    bool ok = true;
    uint32_t need = 0, n13 = 13, n12 = 12;
    assert_int_equal(ts_kv_can_append(kv, &a, &n13, 1, &ok, &need, &(ts_error){0}), TS_OK);
    assert_false(ok);
    assert_int_equal(need, 4); /* the full pool's need; it has room */
    ts_error err = {0};
    assert_int_equal(ts_kv_append(kv, a, t, 13, NULL, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "sliding-window pool"));
    kvt_check(kv);
    assert_int_equal(ts_kv_can_append(kv, &a, &n12, 1, &ok, &need, &(ts_error){0}), TS_OK);
    assert_true(ok);
    bool admit = true;
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, t, 16, 13, &admit, NULL, &(ts_error){0}), TS_OK);
    assert_false(admit);
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, t, 16, 12, &admit, NULL, &(ts_error){0}), TS_OK);
    assert_true(admit);
    /* Committed in steps, a sequence of 60 tokens runs on the same 3 blocks. */
    append_commit(kv, a, 2, 0, 12);
    for (uint32_t n = 12; n < 60; n += 4) {
        append_commit(kv, a, 2, n, 4);
    }
    assert_int_equal(kvt_stats(kv).n_used, 15);
    assert_true(kvt_stats(kv).swa.n_used <= 3);
    ts_kv_destroy(kv);
}

/* A fork shares both pools' blocks; the first write into the shared partial last block
 * copies it in each pool, and the window releases each sequence's references. */
static void test_fork_cow(void **state) {
    (void)state;
    ts_kv *kv = make(32, 12, true);
    uint32_t a = kvt_open(kv);
    append_commit(kv, a, 3, 0, 10); /* blocks 0..2; window keeps blocks 1 and 2 */
    uint32_t c = UINT32_MAX;
    assert_int_equal(ts_kv_seq_fork(kv, a, &c, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    ts_kv_stats st = kvt_stats(kv);
    assert_int_equal(st.n_used, 3);
    assert_int_equal(st.swa.n_used, 2);
    int32_t x = tok(3, 10), y = tok(4, 10);
    assert_int_equal(kvt_append(kv, a, &x, 1, NULL), 2);
    uint32_t n_copies = 0;
    const ts_kv_copy *cp = ts_kv_copies(kv, &n_copies);
    assert_int_equal(cp[0].pool, TS_KV_POOL_FULL);
    assert_int_equal(cp[1].pool, TS_KV_POOL_SWA);
    uint32_t nb;
    assert_int_equal(cp[1].dst, ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, a, &nb)[2]);
    assert_int_equal(cp[1].src, ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, c, &nb)[2]);
    assert_int_equal(kvt_append(kv, c, &y, 1, NULL), 0); /* now unshared: written in place */
    assert_int_equal(ts_kv_seq_commit(kv, a, 1, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_commit(kv, c, 1, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    /* Both grow apart; the shared block 1 is released by each when it leaves its window. */
    for (uint32_t n = 11; n < 30; n++) {
        append_commit(kv, a, 3, n, 1);
        append_commit(kv, c, 4, n, 1);
        assert_true(kvt_stats(kv).swa.n_used <= 6);
    }
    check_window(kv, a, 30, 30);
    check_window(kv, c, 30, 30);
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, c, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    assert_int_equal(kvt_stats(kv).swa.n_used, 0);
    ts_kv_destroy(kv);
}

/* Prefix reuse after the first blocks left the window: a hit takes only the window's blocks
 * (released ones stay findable), and a prefix whose window blocks were evicted is not reused
 * even though the full pool still holds all of it. */
static void test_prefix_after_window(void **state) {
    (void)state;
    ts_kv *kv = make(32, 6, true);
    int32_t prompt[41];
    for (uint32_t i = 0; i < 41; i++) {
        prompt[i] = tok(5, i);
    }
    /* a computes 40 tokens in steps of 4 and finishes. */
    uint32_t a = kvt_open(kv);
    for (uint32_t n = 0; n < 40; n += 4) {
        append_commit(kv, a, 5, n, 4);
    }
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    kvt_check(kv);

    /* b continues it: all 10 blocks match; of the window pool only blocks 8 and 9
     * (positions 35..39, seen from position 40) are taken, the rest of its table is -1. */
    bool ok = false;
    uint32_t cached = 0;
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, prompt, 41, 41, &ok, &cached, &(ts_error){0}),
                     TS_OK);
    assert_int_equal(cached, 40);
    uint32_t b = kvt_open(kv);
    assert_int_equal(ts_kv_seq_match_prefix(kv, b, prompt, 41, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 40);
    kvt_check(kv);
    check_window(kv, b, 40, 40);
    assert_int_equal(kvt_stats(kv).swa.n_used, 2);
    assert_int_equal(ts_kv_seq_close(kv, b, &(ts_error){0}), TS_OK);

    /* Another sequence takes every window block, evicting a's cached ones. */
    uint32_t c = kvt_open(kv);
    for (uint32_t n = 0; n < 24; n += 4) {
        int32_t t[4] = {tok(6, n), tok(6, n + 1), tok(6, n + 2), tok(6, n + 3)};
        kvt_append(kv, c, t, 4, NULL);
    }
    assert_int_equal(kvt_stats(kv).swa.n_used, 6);
    assert_int_equal(ts_kv_seq_close(kv, c, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    assert_int_equal(kvt_stats(kv).n_cached, 10); /* the full pool still has all of a */

    /* Now no prefix of a can be continued: each length's window blocks are gone. */
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, prompt, 41, 41, &ok, &cached, &(ts_error){0}),
                     TS_OK);
    assert_int_equal(cached, 0);
    uint32_t d = kvt_open(kv);
    assert_int_equal(ts_kv_seq_match_prefix(kv, d, prompt, 41, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 0);
    kvt_check(kv);

    /* Recomputing it caches the window blocks again, and the next continuation hits. */
    for (uint32_t n = 0; n < 40; n += 4) {
        append_commit(kv, d, 5, n, 4);
    }
    uint32_t e = kvt_open(kv);
    assert_int_equal(ts_kv_seq_match_prefix(kv, e, prompt, 41, &cached, &(ts_error){0}), TS_OK);
    assert_int_equal(cached, 40);
    kvt_check(kv);
    /* d and e share the window blocks 8 and 9. */
    uint32_t nb;
    const int32_t *td = ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, d, &nb);
    const int32_t *te = ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, e, &nb);
    assert_int_equal(td[8], te[8]);
    assert_int_equal(td[9], te[9]);
    ts_kv_destroy(kv);
}

/* A cached prefix whose last window blocks were evicted is reused up to the longest length
 * whose window is still cached. */
static void test_prefix_shorter_window(void **state) {
    (void)state;
    ts_kv *kv = make(32, 8, true);
    int32_t prompt[33];
    for (uint32_t i = 0; i < 33; i++) {
        prompt[i] = tok(7, i);
    }
    uint32_t a = kvt_open(kv);
    append_commit(kv, a, 7, 0, 4);
    append_commit(kv, a, 7, 4, 4);
    /* a forks after 2 blocks: the child keeps blocks 0 and 1 held while a goes on. */
    uint32_t keep = UINT32_MAX;
    assert_int_equal(ts_kv_seq_fork(kv, a, &keep, &(ts_error){0}), TS_OK);
    for (uint32_t n = 8; n < 32; n += 4) {
        append_commit(kv, a, 7, n, 4);
    }
    /* Evict a's released window blocks (2..5) by taking the free and evictable ones. */
    assert_int_equal(ts_kv_seq_close(kv, a, &(ts_error){0}), TS_OK);
    uint32_t c = kvt_open(kv);
    int32_t t[24];
    for (uint32_t i = 0; i < 24; i++) {
        t[i] = tok(8, i);
    }
    ts_kv_stats st = kvt_stats(kv);
    /* a's blocks 6 and 7 were released last, 7 first: all but block 6 are taken. */
    uint32_t take = st.swa.n_free + st.swa.n_evictable - 1;
    kvt_append(kv, c, t, take * BS, NULL);
    kvt_check(kv);
    /* Length 8 still has its window (blocks 0 and 1, held by the fork); 32 (blocks 6, 7) and
     * 28 (blocks 5, 6) do not. */
    uint32_t cached = 0;
    bool ok = false;
    assert_int_equal(ts_kv_can_admit(kv, NULL, 0, prompt, 33, 33, &ok, &cached, &(ts_error){0}),
                     TS_OK);
    assert_int_equal(cached, 8);
    ts_kv_destroy(kv);
}

static void test_config_errors(void **state) {
    (void)state;
    ts_kv_config cfg = {.n_blocks = 8, .block_size = 4, .max_seqs = 2, .n_blocks_swa = 4};
    ts_kv *kv = NULL;
    ts_error err = {0};
    assert_int_equal(ts_kv_create(&cfg, &kv, &err), TS_ERR_INVALID_ARG);
    assert_null(kv);
    assert_non_null(strstr(err.msg, "window"));
    /* Without a window pool the window calls answer for the full pool only. */
    kv = kvt_create(8, 4, 2, 0, true);
    uint32_t stride = 99;
    assert_null(ts_kv_block_tables(kv, TS_KV_POOL_SWA, &stride));
    assert_int_equal(stride, 0);
    assert_non_null(ts_kv_block_tables(kv, TS_KV_POOL_FULL, &stride));
    uint32_t a = kvt_open(kv);
    int32_t t[3] = {1, 2, 3};
    kvt_append(kv, a, t, 3, NULL);
    int32_t slot;
    assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_SWA, a, 0, &slot, &err), TS_ERR_INVALID_ARG);
    assert_null(ts_kv_seq_block_table(kv, TS_KV_POOL_SWA, a, NULL));
    assert_int_equal(kvt_stats(kv).swa.n_blocks, 0);
    ts_kv_destroy(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_and_reuse),
        cmocka_unit_test(test_window_pool_limits),
        cmocka_unit_test(test_fork_cow),
        cmocka_unit_test(test_prefix_after_window),
        cmocka_unit_test(test_prefix_shorter_window),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
