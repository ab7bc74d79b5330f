/* test_blocks.c — block pool, block tables, slots, fork + copy-on-write, limits, preemption
 * queries. Prefix caching is off here (test_prefix.c covers it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv/kv_test.h"

static int32_t toks[256];

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < 256; i++) {
        toks[i] = 1000 + i;
    }
    return 0;
}

static void test_create_errors(void **state) {
    (void)state;
    ts_kv *kv = (ts_kv *)1;
    ts_error err = {0};
    ts_kv_config cfg = {.n_blocks = 0, .max_seqs = 4};
    assert_int_equal(ts_kv_create(&cfg, &kv, &err), TS_ERR_INVALID_ARG);
    assert_null(kv);
    assert_non_null(strstr(err.msg, "n_blocks"));
    cfg = (ts_kv_config){.n_blocks = 4, .max_seqs = 0};
    assert_int_equal(ts_kv_create(&cfg, &kv, &err), TS_ERR_INVALID_ARG);
    cfg = (ts_kv_config){.n_blocks = 1u << 28, .block_size = 16, .max_seqs = 1};
    assert_int_equal(ts_kv_create(&cfg, &kv, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "2^31"));
    assert_int_equal(ts_kv_create(NULL, &kv, &err), TS_ERR_INVALID_ARG);
    ts_kv_destroy(NULL);
}

static void test_defaults(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(8, 0, 2, 0, false);
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.block_size, TS_KV_DEFAULT_BLOCK_SIZE);
    assert_int_equal(s.n_blocks, 8);
    assert_int_equal(s.n_free, 8);
    assert_int_equal(s.n_used, 0);
    uint32_t stride = 0;
    const int32_t *all = ts_kv_block_tables(kv, TS_KV_POOL_FULL, &stride);
    assert_non_null(all);
    assert_int_equal(stride, 8); /* max_seq_len defaults to the whole pool */
    for (uint32_t i = 0; i < 2 * stride; i++) {
        assert_int_equal(all[i], -1);
    }
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* Appends spread over blocks; slots are block * block_size + offset in token order. */
static void test_append_slots(void **state) {
    (void)state;
    const uint32_t bs = 4;
    ts_kv *kv = kvt_create(8, bs, 2, 0, false);
    uint32_t a = kvt_open(kv);
    int32_t slots[10];
    assert_int_equal(kvt_append(kv, a, toks, 3, slots), 0);
    assert_int_equal(kvt_append(kv, a, toks + 3, 7, slots + 3), 0);
    uint32_t nb = 0;
    const int32_t *tbl = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &nb);
    assert_int_equal(nb, 3);
    for (uint32_t pos = 0; pos < 10; pos++) {
        assert_int_equal(slots[pos], tbl[pos / bs] * (int32_t)bs + (int32_t)(pos % bs));
        int32_t slot = -1;
        assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_FULL, a, pos, &slot, &(ts_error){0}), TS_OK);
        assert_int_equal(slot, slots[pos]);
    }
    int32_t slot;
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_FULL, a, 10, &slot, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "position 10"));
    /* Distinct blocks, all in use. */
    assert_true(tbl[0] != tbl[1] && tbl[1] != tbl[2] && tbl[0] != tbl[2]);
    ts_kv_stats s = kvt_stats(kv);
    assert_int_equal(s.n_used, 3);
    assert_int_equal(s.n_free, 5);
    ts_kv_seq_info info;
    assert_int_equal(ts_kv_seq_get_info(kv, a, &info, &(ts_error){0}), TS_OK);
    assert_int_equal(info.n_tokens, 10);
    assert_int_equal(info.n_committed, 0);
    assert_int_equal(info.n_blocks, 3);
    /* The whole-pool view holds the same row. */
    uint32_t stride;
    const int32_t *all = ts_kv_block_tables(kv, TS_KV_POOL_FULL, &stride);
    assert_memory_equal(all + (size_t)a * stride, tbl, 3 * sizeof(int32_t));
    assert_int_equal(all[(size_t)a * stride + 3], -1);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* Repeated open/append/close returns every block; nothing leaks across cycles. */
static void test_alloc_free_cycles(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(16, 4, 4, 0, false);
    for (int round = 0; round < 50; round++) {
        uint32_t seqs[4];
        for (int i = 0; i < 4; i++) {
            seqs[i] = kvt_open(kv);
            kvt_append(kv, seqs[i], toks, (uint32_t)(1 + (round + i) % 16), NULL);
        }
        kvt_check(kv);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(ts_kv_seq_close(kv, seqs[i], &(ts_error){0}), TS_OK);
        }
        ts_kv_stats s = kvt_stats(kv);
        assert_int_equal(s.n_free, 16);
        assert_int_equal(s.n_seqs, 0);
        kvt_check(kv);
    }
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_close(kv, 0, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "not open"));
    assert_int_equal(ts_kv_append(kv, 99, toks, 1, NULL, &err), TS_ERR_INVALID_ARG);
    uint32_t nb = 7;
    assert_null(ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, 99, &nb));
    assert_int_equal(nb, 0);
    assert_null(ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, 0, &nb)); /* closed */
    int32_t slot;
    assert_int_equal(ts_kv_seq_slot(kv, TS_KV_POOL_FULL, 0, 0, &slot, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_seq_commit(kv, 0, 0, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_seq_reset(kv, 0, &err), TS_ERR_INVALID_ARG);
    ts_kv_destroy(kv);
}

/* Out of blocks: TS_ERR_LIMIT with a message, nothing changed, and room again after a free. */
static void test_out_of_blocks(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(4, 4, 3, 0, false);
    uint32_t a = kvt_open(kv), b = kvt_open(kv);
    kvt_append(kv, a, toks, 10, NULL); /* 3 blocks */
    ts_error err = {0};
    assert_int_equal(ts_kv_append(kv, b, toks, 5, NULL, &err), TS_ERR_LIMIT);
    assert_int_equal(err.status, TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "needs 2 blocks"));
    assert_non_null(strstr(err.msg, "only 1 are available"));
    ts_kv_seq_info info;
    assert_int_equal(ts_kv_seq_get_info(kv, b, &info, &(ts_error){0}), TS_OK);
    assert_int_equal(info.n_tokens, 0);
    assert_int_equal(kvt_stats(kv).n_free, 1);
    kvt_check(kv);
    /* Filling a's last block needs no new block; the 13th token does. */
    kvt_append(kv, a, toks, 2, NULL);
    kvt_append(kv, b, toks, 4, NULL);
    assert_int_equal(ts_kv_append(kv, a, toks, 1, NULL, &err), TS_ERR_LIMIT);
    /* max_seqs */
    uint32_t c = kvt_open(kv), d;
    assert_int_equal(ts_kv_seq_open(kv, NULL, 0, &d, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "max_seqs"));
    assert_int_equal(ts_kv_seq_fork(kv, a, &d, &err), TS_ERR_LIMIT);
    /* Preemption frees a's blocks for b. */
    assert_int_equal(ts_kv_seq_reset(kv, a, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_free, 3);
    kvt_append(kv, b, toks, 12, NULL);
    assert_int_equal(ts_kv_seq_get_info(kv, a, &info, &(ts_error){0}), TS_OK);
    assert_int_equal(info.n_tokens, 0);
    kvt_check(kv);
    assert_int_equal(ts_kv_seq_close(kv, c, &(ts_error){0}), TS_OK);
    ts_kv_destroy(kv);
}

static void test_max_seq_len(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(16, 4, 2, 10, false);
    uint32_t stride;
    ts_kv_block_tables(kv, TS_KV_POOL_FULL, &stride);
    assert_int_equal(stride, 3);
    uint32_t a = kvt_open(kv);
    kvt_append(kv, a, toks, 10, NULL);
    ts_error err = {0};
    assert_int_equal(ts_kv_append(kv, a, toks, 1, NULL, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "max_seq_len 10"));
    bool ok = true;
    uint32_t n1 = 1;
    assert_int_equal(ts_kv_can_append(kv, &a, &n1, 1, &ok, NULL, &err), TS_ERR_LIMIT);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

static void test_commit(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(8, 4, 2, 0, false);
    uint32_t a = kvt_open(kv);
    kvt_append(kv, a, toks, 6, NULL);
    assert_int_equal(ts_kv_seq_commit(kv, a, 4, &(ts_error){0}), TS_OK);
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_commit(kv, a, 3, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "2 uncommitted"));
    assert_int_equal(ts_kv_seq_commit(kv, a, 2, &(ts_error){0}), TS_OK);
    ts_kv_seq_info info;
    ts_kv_seq_get_info(kv, a, &info, &(ts_error){0});
    assert_int_equal(info.n_committed, 6);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* Dropping uncommitted tokens (rejected drafts) leaves the sequence as if they had never been
 * appended: the same block count and fills, the blocks holding only them freed, no hash for
 * them; and a forked sibling's shared block is never touched. */
static void test_drop(void **state) {
    (void)state;
    const uint32_t bs = 4;
    ts_kv *kv = kvt_create(16, bs, 4, 0, true);
    uint32_t a = kvt_open(kv), b = kvt_open(kv);
    kvt_append(kv, a, toks, 6, NULL);
    ts_kv_seq_commit(kv, a, 6, &(ts_error){0});
    kvt_append(kv, b, toks, 6, NULL);
    ts_kv_seq_commit(kv, b, 6, &(ts_error){0});
    uint32_t used = kvt_stats(kv).n_used;
    /* a drafts 7 tokens (into a third and fourth block), keeps 1 of them. */
    kvt_append(kv, a, toks + 6, 7, NULL);
    assert_int_equal(kvt_stats(kv).n_used, used + 2);
    ts_error err = {0};
    assert_int_equal(ts_kv_seq_drop(kv, a, 8, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "7 uncommitted"));
    assert_int_equal(ts_kv_seq_drop(kv, a, 6, &(ts_error){0}), TS_OK);
    ts_kv_seq_info info;
    ts_kv_seq_get_info(kv, a, &info, &(ts_error){0});
    assert_int_equal(info.n_tokens, 7);
    assert_int_equal(info.n_committed, 6);
    assert_int_equal(kvt_stats(kv).n_used, used);
    kvt_check(kv);
    /* Committing the kept token and appending on gives what b got without drafts. */
    ts_kv_seq_commit(kv, a, 1, &(ts_error){0});
    kvt_append(kv, a, toks + 7, 2, NULL);
    ts_kv_seq_commit(kv, a, 2, &(ts_error){0});
    kvt_append(kv, b, toks + 6, 3, NULL);
    ts_kv_seq_commit(kv, b, 3, &(ts_error){0});
    kvt_check(kv);
    uint32_t na, nb;
    const int32_t *ta = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &na);
    const int32_t *tb = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, b, &nb);
    assert_int_equal(na, nb);
    /* The prefix cache knows a's two full blocks by the tokens a kept: a new sequence with
     * those tokens finds both; one whose 8th token is a dropped draft's finds only the first. */
    uint32_t d = kvt_open(kv), hit = 0;
    assert_int_equal(ts_kv_seq_match_prefix(kv, d, toks, 9, &hit, &(ts_error){0}), TS_OK);
    assert_int_equal(hit, 8);
    ts_kv_seq_close(kv, d, &(ts_error){0});
    int32_t other[9];
    memcpy(other, toks, sizeof other);
    other[7] = toks[7 + 1];
    d = kvt_open(kv);
    assert_int_equal(ts_kv_seq_match_prefix(kv, d, other, 9, &hit, &(ts_error){0}), TS_OK);
    assert_int_equal(hit, 4);
    ts_kv_seq_close(kv, d, &(ts_error){0});
    /* Dropping everything uncommitted from a block boundary frees the new block. */
    kvt_append(kv, a, toks, 3, NULL); /* 9 + 3 = 12: the third block is full */
    assert_int_equal(ts_kv_seq_drop(kv, a, 3, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    /* A fork shares the partial block; the child's draft copies it, and the drop leaves the
     * parent's block as it was. */
    uint32_t c = UINT32_MAX;
    assert_int_equal(ts_kv_seq_fork(kv, a, &c, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_append(kv, c, toks + 50, 5, NULL), 1);
    assert_int_equal(ts_kv_seq_drop(kv, c, 5, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    const int32_t *tc = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c, &nb);
    ta = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, a, &na);
    (void)tb;
    assert_int_equal(nb, na);
    assert_true(tc[2] != ta[2]); /* c's copy, not a's block */
    ts_kv_destroy(kv);
}

/* Fork shares every block; the first writer into the shared partial block gets a copy, the
 * last one writes in place; full shared blocks are never copied. */
static void test_fork_cow(void **state) {
    (void)state;
    const uint32_t bs = 4;
    ts_kv *kv = kvt_create(16, bs, 4, 0, false);
    uint32_t p = kvt_open(kv);
    kvt_append(kv, p, toks, 6, NULL); /* blocks: [full, 2 of 4] */
    ts_kv_seq_commit(kv, p, 6, &(ts_error){0});
    uint32_t nb;
    const int32_t *pt = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, p, &nb);
    int32_t b0 = pt[0], b1 = pt[1];

    uint32_t c1 = UINT32_MAX, c2 = UINT32_MAX;
    assert_int_equal(ts_kv_seq_fork(kv, p, &c1, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_fork(kv, p, &c2, &(ts_error){0}), TS_OK);
    const int32_t *t1 = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c1, &nb);
    assert_int_equal(nb, 2);
    assert_int_equal(t1[0], b0);
    assert_int_equal(t1[1], b1);
    ts_kv_seq_info info;
    ts_kv_seq_get_info(kv, c1, &info, &(ts_error){0});
    assert_int_equal(info.n_tokens, 6);
    assert_int_equal(info.n_committed, 6);
    assert_int_equal(kvt_stats(kv).n_used, 2);
    kvt_check(kv);

    /* Three sequences hold b1 (ref 3): exactly two copies will be needed for all to append. */
    uint32_t three[3] = {p, c1, c2}, ones[3] = {1, 1, 1}, need = 0;
    bool ok = false;
    assert_int_equal(ts_kv_can_append(kv, three, ones, 3, &ok, &need, &(ts_error){0}), TS_OK);
    assert_true(ok);
    assert_int_equal(need, 2);
    kvt_check(kv); /* scratch left clean */

    /* c1 writes first: copy b1 -> fresh block. */
    int32_t slot = -1;
    assert_int_equal(kvt_append(kv, c1, toks + 100, 1, &slot), 1);
    uint32_t n_copies;
    const ts_kv_copy *cp = ts_kv_copies(kv, &n_copies);
    assert_int_equal(n_copies, 1);
    assert_int_equal(cp[0].src, b1);
    assert_true(cp[0].dst != b1 && cp[0].dst != b0);
    t1 = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c1, &nb);
    assert_int_equal(t1[0], b0);
    assert_int_equal(t1[1], cp[0].dst);
    assert_int_equal(slot, cp[0].dst * (int32_t)bs + 2);
    int32_t c1_block = cp[0].dst;
    kvt_check(kv);

    /* c2 writes: b1 still shared with p -> another copy. */
    assert_int_equal(kvt_append(kv, c2, toks + 100, 3, NULL), 1);
    cp = ts_kv_copies(kv, &n_copies);
    assert_int_equal(cp[0].src, b1);
    assert_true(cp[0].dst != c1_block);
    /* c2 crossed into a third block: 6 + 3 = 9 tokens. */
    ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c2, &nb);
    assert_int_equal(nb, 3);

    /* p is now b1's only holder: writes in place, no copy. */
    assert_int_equal(kvt_append(kv, p, toks + 6, 1, &slot), 0);
    assert_int_equal(slot, b1 * (int32_t)bs + 2);
    assert_int_equal(kvt_stats(kv).n_cow_copies, 2);
    kvt_check(kv);

    /* A fork at a block boundary shares only full blocks: appends never copy. */
    uint32_t c3;
    kvt_append(kv, p, toks + 7, 1, NULL); /* p: 8 tokens, 2 full blocks */
    assert_int_equal(ts_kv_seq_fork(kv, p, &c3, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_append(kv, c3, toks, 1, NULL), 0);
    assert_int_equal(kvt_append(kv, p, toks, 1, NULL), 0);
    kvt_check(kv);

    /* Closing the parent keeps blocks the children still hold. */
    assert_int_equal(ts_kv_seq_close(kv, p, &(ts_error){0}), TS_OK);
    kvt_check(kv);
    t1 = ts_kv_seq_block_table(kv, TS_KV_POOL_FULL, c1, &nb);
    assert_int_equal(t1[0], b0);
    assert_int_equal(ts_kv_seq_close(kv, c1, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, c2, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_seq_close(kv, c3, &(ts_error){0}), TS_OK);
    assert_int_equal(kvt_stats(kv).n_free, 16);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* COW needs a block too: when none is left the append fails with TS_ERR_LIMIT, unchanged. */
static void test_cow_out_of_blocks(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(2, 4, 2, 0, false);
    uint32_t p = kvt_open(kv), c;
    kvt_append(kv, p, toks, 6, NULL);
    assert_int_equal(ts_kv_seq_fork(kv, p, &c, &(ts_error){0}), TS_OK);
    uint32_t one = 1, need = 0;
    bool ok = true;
    assert_int_equal(ts_kv_can_append(kv, &c, &one, 1, &ok, &need, &(ts_error){0}), TS_OK);
    assert_false(ok);
    assert_int_equal(need, 1);
    ts_error err = {0};
    assert_int_equal(ts_kv_append(kv, c, toks, 1, NULL, &err), TS_ERR_LIMIT);
    uint32_t n_copies = 9;
    ts_kv_copies(kv, &n_copies);
    assert_int_equal(n_copies, 0);
    kvt_check(kv);
    /* Once the parent is gone the child owns the block and writes in place. */
    assert_int_equal(ts_kv_seq_close(kv, p, &(ts_error){0}), TS_OK);
    assert_int_equal(ts_kv_can_append(kv, &c, &one, 1, &ok, &need, &(ts_error){0}), TS_OK);
    assert_true(ok);
    assert_int_equal(need, 0);
    assert_int_equal(kvt_append(kv, c, toks, 2, NULL), 0);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

/* can_append counts new blocks across sequences and agrees with what appends then do. */
static void test_can_append(void **state) {
    (void)state;
    ts_kv *kv = kvt_create(6, 4, 3, 0, false);
    uint32_t a = kvt_open(kv), b = kvt_open(kv);
    kvt_append(kv, a, toks, 3, NULL);
    kvt_append(kv, b, toks, 4, NULL);
    uint32_t seqs[2] = {a, b}, n[2] = {1, 1}, need = 0;
    bool ok = false;
    assert_int_equal(ts_kv_can_append(kv, seqs, n, 2, &ok, &need, &(ts_error){0}), TS_OK);
    assert_true(ok);
    assert_int_equal(need, 1); /* a fits in its block, b starts a new one */
    n[0] = 6;
    n[1] = 12; /* a: 9 tokens -> 3 blocks (+2); b: 16 -> 4 blocks (+3) */
    assert_int_equal(ts_kv_can_append(kv, seqs, n, 2, &ok, &need, &(ts_error){0}), TS_OK);
    assert_false(ok);
    assert_int_equal(need, 5);
    n[1] = 8; /* b: 12 -> 3 blocks (+2): 4 needed, 4 free */
    assert_int_equal(ts_kv_can_append(kv, seqs, n, 2, &ok, &need, &(ts_error){0}), TS_OK);
    assert_true(ok);
    assert_int_equal(need, 4);
    kvt_append(kv, a, toks, 6, NULL);
    kvt_append(kv, b, toks, 8, NULL);
    assert_int_equal(kvt_stats(kv).n_free, 0);
    ts_error err = {0};
    uint32_t bad = 2;
    assert_int_equal(ts_kv_can_append(kv, &bad, n, 1, &ok, NULL, &err), TS_ERR_INVALID_ARG);
    kvt_check(kv);
    ts_kv_destroy(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors), cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_append_slots),  cmocka_unit_test(test_alloc_free_cycles),
        cmocka_unit_test(test_out_of_blocks), cmocka_unit_test(test_max_seq_len),
        cmocka_unit_test(test_commit),        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_fork_cow),      cmocka_unit_test(test_cow_out_of_blocks),
        cmocka_unit_test(test_can_append),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
