/* kv_test.h — helpers shared by the KV block-manager tests (include after cmocka.h). */
#ifndef TS_TESTS_KV_KV_TEST_H
#define TS_TESTS_KV_KV_TEST_H

#include <stdio.h>

#include "kv/kv.h"

/* Creates a manager or fails the test. */
static inline ts_kv *kvt_create(uint32_t n_blocks, uint32_t block_size, uint32_t max_seqs,
                                uint32_t max_seq_len, bool prefix_cache) {
    ts_kv_config cfg = {.n_blocks = n_blocks,
                        .block_size = block_size,
                        .max_seqs = max_seqs,
                        .max_seq_len = max_seq_len,
                        .prefix_cache = prefix_cache};
    ts_kv *kv = NULL;
    ts_error err = {0};
    ts_status st = ts_kv_create(&cfg, &kv, &err);
    if (st != TS_OK) {
        fprintf(stderr, "ts_kv_create: %s\n", err.msg);
    }
    assert_int_equal(st, TS_OK);
    return kv;
}

/* Runs the invariant check and prints its message when it fails. */
static inline void kvt_check(const ts_kv *kv) {
    ts_error err = {0};
    ts_status st = ts_kv_check(kv, &err);
    if (st != TS_OK) {
        fprintf(stderr, "ts_kv_check: %s\n", err.msg);
    }
    assert_int_equal(st, TS_OK);
}

static inline ts_kv_stats kvt_stats(const ts_kv *kv) {
    ts_kv_stats s;
    ts_kv_get_stats(kv, &s);
    return s;
}

/* Opens a sequence without salt or fails the test. */
static inline uint32_t kvt_open(ts_kv *kv) {
    uint32_t seq = UINT32_MAX;
    assert_int_equal(ts_kv_seq_open(kv, NULL, 0, &seq, &(ts_error){0}), TS_OK);
    return seq;
}

/* Appends n tokens or fails the test; returns how many copies the append asked for. */
static inline uint32_t kvt_append(ts_kv *kv, uint32_t seq, const int32_t *tokens, uint32_t n,
                                  int32_t *slots) {
    ts_error err = {0};
    ts_status st = ts_kv_append(kv, seq, tokens, n, slots, &err);
    if (st != TS_OK) {
        fprintf(stderr, "ts_kv_append: %s\n", err.msg);
    }
    assert_int_equal(st, TS_OK);
    uint32_t n_copies = 0;
    ts_kv_copies(kv, &n_copies);
    return n_copies;
}

#endif /* TS_TESTS_KV_KV_TEST_H */
