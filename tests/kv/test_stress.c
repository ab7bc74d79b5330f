/* test_stress.c — thousands of random block-manager operations with a fixed seed, checked
 * against a shadow model after every one.
 *
 * The test plays the engine: it keeps each sequence's tokens itself, owns a simulated K/V
 * buffer per pool with one int32 "row" per token slot, performs the copy-on-write copies the
 * manager asks for and writes each appended token into its slots. After every operation:
 *   - ts_kv_check passes (lists, states, ref counts, sharing, hash chains);
 *   - every open sequence reads its own tokens back through its block tables, so no shared
 *     block was ever written in place and every prefix hit returned blocks holding exactly
 *     the tokens asked for — in the sliding-window pool exactly the positions its next query
 *     can see, and no others (their blocks were released);
 *   - the capacity queries (ts_kv_can_append, ts_kv_can_admit) agreed with what the appends
 *     then did: ok exactly when they succeeded.
 * At the end every sequence is closed and every block must be free or cached-evictable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv/kv_test.h"

#define MAX_SEQS 10
#define MAX_LEN  96

typedef struct shadow_seq {
    bool open;
    int salt; /* 0: none, 1: "x" */
    uint32_t n;
    uint32_t committed;
    int32_t tokens[MAX_LEN];
} shadow_seq;

typedef struct sim {
    ts_kv *kv;
    uint32_t bs;
    uint32_t n_blocks;
    uint32_t n_blocks_swa; /* 0: no sliding-window pool */
    uint32_t window;
    uint32_t max_len;
    bool prefix;
    uint64_t rng;
    int32_t *kvbuf;     /* [n_blocks * bs] the token each slot's K/V was computed for */
    int32_t *kvbuf_swa; /* [n_blocks_swa * bs] the same for the sliding-window pool */
    shadow_seq seqs[MAX_SEQS];
    uint64_t n_ops, n_limit, n_admit_ok;
} sim;

static uint32_t rnd(sim *s, uint32_t n) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (uint32_t)((s->rng * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

static const char *salt_bytes(int salt, size_t *len) {
    *len = salt ? 1 : 0;
    return salt ? "x" : NULL;
}

/* Does what the engine does with an append of positions first.. of seq: copies, then writes
 * each token into its slot of every pool. */
static void apply_append(sim *s, uint32_t seq, uint32_t first, const int32_t *tokens, uint32_t n,
                         const int32_t *slots) {
    uint32_t n_copies;
    const ts_kv_copy *cp = ts_kv_copies(s->kv, &n_copies);
    for (uint32_t i = 0; i < n_copies; i++) {
        int32_t *buf = cp[i].pool == TS_KV_POOL_SWA ? s->kvbuf_swa : s->kvbuf;
        assert_true(cp[i].pool == TS_KV_POOL_FULL || s->n_blocks_swa > 0);
        memcpy(buf + (size_t)cp[i].dst * s->bs, buf + (size_t)cp[i].src * s->bs,
               s->bs * sizeof(int32_t));
    }
    for (uint32_t i = 0; i < n; i++) {
        assert_true(slots[i] >= 0 && (uint32_t)slots[i] < s->n_blocks * s->bs);
        s->kvbuf[slots[i]] = tokens[i];
        if (s->n_blocks_swa > 0) {
            int32_t slot = -1;
            assert_int_equal(
                ts_kv_seq_slot(s->kv, TS_KV_POOL_SWA, seq, first + i, &slot, &(ts_error){0}),
                TS_OK);
            assert_true(slot >= 0 && (uint32_t)slot < s->n_blocks_swa * s->bs);
            s->kvbuf_swa[slot] = tokens[i];
        }
    }
}

/* Appends sh->tokens[sh->n .. sh->n + n) to seq; returns the status. */
static ts_status try_append(sim *s, uint32_t seq, uint32_t n) {
    shadow_seq *sh = &s->seqs[seq];
    int32_t slots[MAX_LEN];
    ts_error err = {0};
    ts_status st = ts_kv_append(s->kv, seq, sh->tokens + sh->n, n, slots, &err);
    if (st == TS_OK) {
        apply_append(s, seq, sh->n, sh->tokens + sh->n, n, slots);
        sh->n += n;
    } else {
        assert_int_equal(st, TS_ERR_LIMIT);
        assert_true(strlen(err.msg) > 0);
        s->n_limit++;
    }
    return st;
}

static void commit(sim *s, uint32_t seq, uint32_t n) {
    assert_int_equal(ts_kv_seq_commit(s->kv, seq, n, &(ts_error){0}), TS_OK);
    s->seqs[seq].committed += n;
}

/* Prompt: one of three shared system prompts, then tokens from a tiny alphabet so identical
 * blocks appear after different histories. */
static void make_prompt(sim *s, int32_t *t, uint32_t n) {
    uint32_t family = rnd(s, 3), shared = rnd(s, n + 1);
    for (uint32_t i = 0; i < n; i++) {
        t[i] = i < shared ? (int32_t)(1000 * (family + 1) + i) : (int32_t)rnd(s, 4);
    }
}

static int free_id(const sim *s) {
    for (int i = 0; i < MAX_SEQS; i++) {
        if (!s->seqs[i].open) {
            return i;
        }
    }
    return -1;
}

static int pick_open(sim *s) {
    int ids[MAX_SEQS], k = 0;
    for (int i = 0; i < MAX_SEQS; i++) {
        if (s->seqs[i].open) {
            ids[k++] = i;
        }
    }
    return k == 0 ? -1 : ids[rnd(s, (uint32_t)k)];
}

/* The first table entry of the sliding-window pool a sequence with `committed` computed
 * tokens holds: the block of the first position its next query sees. */
static uint32_t window_first(const sim *s, uint32_t committed) {
    return committed >= s->window ? (committed - s->window + 1) / s->bs : 0;
}

/* Positions of seq in the sliding-window pool: those from the window's first block on read
 * back their tokens, the ones before have no slot. */
static void verify_window(sim *s, uint32_t id) {
    const shadow_seq *sh = &s->seqs[id];
    uint32_t first = window_first(s, sh->committed);
    for (uint32_t pos = 0; pos < sh->n; pos++) {
        int32_t slot = -1;
        ts_status st = ts_kv_seq_slot(s->kv, TS_KV_POOL_SWA, id, pos, &slot, &(ts_error){0});
        if (pos / s->bs < first) {
            assert_int_equal(st, TS_ERR_RANGE);
            continue;
        }
        assert_int_equal(st, TS_OK);
        if (s->kvbuf_swa[slot] != sh->tokens[pos]) {
            fail_msg("op %llu: sequence %u position %u reads token %d from the window pool, "
                     "wrote %d",
                     (unsigned long long)s->n_ops, id, pos, s->kvbuf_swa[slot], sh->tokens[pos]);
        }
    }
}

/* Matches the prefix of sh->tokens[0..n) into an empty seq, checks the hit against the
 * simulated buffer, and appends + commits the rest when it fits. */
static void refill(sim *s, uint32_t seq, uint32_t n) {
    shadow_seq *sh = &s->seqs[seq];
    size_t salt_len;
    const char *salt = salt_bytes(sh->salt, &salt_len);
    bool ok = false;
    uint32_t predicted = 0, cached = 0;
    assert_int_equal(
        ts_kv_can_admit(s->kv, salt, salt_len, sh->tokens, n, n, &ok, &predicted, &(ts_error){0}),
        TS_OK);
    assert_int_equal(ts_kv_seq_match_prefix(s->kv, seq, sh->tokens, n, &cached, &(ts_error){0}),
                     TS_OK);
    assert_int_equal(cached, predicted);
    assert_true(cached % s->bs == 0 && (n == 0 || cached < n));
    assert_true(s->prefix || cached == 0);
    for (uint32_t pos = 0; pos < cached; pos++) {
        int32_t slot;
        assert_int_equal(ts_kv_seq_slot(s->kv, TS_KV_POOL_FULL, seq, pos, &slot, &(ts_error){0}),
                         TS_OK);
        assert_int_equal(s->kvbuf[slot], sh->tokens[pos]);
    }
    sh->n = sh->committed = cached;
    if (s->n_blocks_swa > 0) {
        verify_window(s, seq); /* a hit holds the blocks of its window */
    }
    ts_status st = try_append(s, seq, n - cached);
    assert_int_equal(st == TS_OK, ok);
    s->n_admit_ok += ok;
    if (st == TS_OK) {
        commit(s, seq, n - cached);
    }
}

static void op_open(sim *s) {
    if (free_id(s) < 0) {
        uint32_t seq;
        assert_int_equal(ts_kv_seq_open(s->kv, NULL, 0, &seq, &(ts_error){0}), TS_ERR_LIMIT);
        return;
    }
    int salt_kind = rnd(s, 4) == 0;
    size_t salt_len;
    const char *salt = salt_bytes(salt_kind, &salt_len);
    uint32_t seq = UINT32_MAX;
    assert_int_equal(ts_kv_seq_open(s->kv, salt, salt_len, &seq, &(ts_error){0}), TS_OK);
    assert_true(seq < MAX_SEQS && !s->seqs[seq].open);
    shadow_seq *sh = &s->seqs[seq];
    memset(sh, 0, sizeof *sh);
    sh->salt = salt_kind;
    sh->open = true;
    uint32_t n = 1 + rnd(s, 40);
    make_prompt(s, sh->tokens, n);
    refill(s, seq, n);
}

static void op_preempt(sim *s);
static void op_close(sim *s);

/* Decode-like appends to several sequences at once, checked against ts_kv_can_append. */
static void op_append_batch(sim *s) {
    uint32_t seqs[MAX_SEQS], n_new[MAX_SEQS], count = 0;
    for (uint32_t i = 0; i < MAX_SEQS; i++) {
        if (s->seqs[i].open && rnd(s, 2) == 0) {
            shadow_seq *sh = &s->seqs[i];
            uint32_t room = s->max_len - sh->n;
            uint32_t k = rnd(s, 3) == 0 ? 1 + rnd(s, 8) : 1;
            if (k > room) {
                continue;
            }
            for (uint32_t j = 0; j < k; j++) {
                sh->tokens[sh->n + j] = (int32_t)rnd(s, 4);
            }
            seqs[count] = i;
            n_new[count++] = k;
        }
    }
    bool ok = false;
    uint32_t need = 0;
    assert_int_equal(ts_kv_can_append(s->kv, seqs, n_new, count, &ok, &need, &(ts_error){0}),
                     TS_OK);
    kvt_check(s->kv); /* the query leaves nothing behind */
    bool all = true;
    for (uint32_t i = 0; i < count; i++) {
        if (try_append(s, seqs[i], n_new[i]) != TS_OK) {
            all = false;
        }
    }
    assert_int_equal(all, ok);
    for (uint32_t i = 0; i < count; i++) {
        shadow_seq *sh = &s->seqs[seqs[i]];
        uint32_t pending = sh->n - sh->committed;
        commit(s, seqs[i], rnd(s, 4) == 0 ? rnd(s, pending + 1) : pending);
    }
    if (!all) {
        /* Out of blocks: like the scheduler, preempt or finish someone. */
        if (rnd(s, 2) == 0) {
            op_preempt(s);
        } else {
            op_close(s);
        }
    }
}

static void op_fork(sim *s) {
    int p = pick_open(s);
    if (p < 0 || free_id(s) < 0) {
        return;
    }
    uint32_t child = UINT32_MAX;
    assert_int_equal(ts_kv_seq_fork(s->kv, (uint32_t)p, &child, &(ts_error){0}), TS_OK);
    assert_true(child < MAX_SEQS && !s->seqs[child].open);
    s->seqs[child] = s->seqs[p];
}

static void op_preempt(sim *s) {
    int id = pick_open(s);
    if (id < 0) {
        return;
    }
    assert_int_equal(ts_kv_seq_reset(s->kv, (uint32_t)id, &(ts_error){0}), TS_OK);
    shadow_seq *sh = &s->seqs[id];
    uint32_t n = sh->n;
    sh->n = sh->committed = 0;
    if (rnd(s, 2) == 0) {
        refill(s, (uint32_t)id, n); /* resume: recompute what the cache no longer has */
    }
}

static void op_close(sim *s) {
    int id = pick_open(s);
    if (id >= 0) {
        assert_int_equal(ts_kv_seq_close(s->kv, (uint32_t)id, &(ts_error){0}), TS_OK);
        s->seqs[id].open = false;
    }
}

/* Every open sequence reads back its own tokens through its slots. */
static void verify(sim *s) {
    kvt_check(s->kv);
    uint32_t open = 0;
    for (uint32_t id = 0; id < MAX_SEQS; id++) {
        const shadow_seq *sh = &s->seqs[id];
        if (!sh->open) {
            continue;
        }
        open++;
        ts_kv_seq_info info;
        assert_int_equal(ts_kv_seq_get_info(s->kv, id, &info, &(ts_error){0}), TS_OK);
        assert_int_equal(info.n_tokens, sh->n);
        assert_int_equal(info.n_committed, sh->committed);
        for (uint32_t pos = 0; pos < sh->n; pos++) {
            int32_t slot;
            assert_int_equal(ts_kv_seq_slot(s->kv, TS_KV_POOL_FULL, id, pos, &slot, &(ts_error){0}),
                             TS_OK);
            if (s->kvbuf[slot] != sh->tokens[pos]) {
                fail_msg("op %llu: sequence %u position %u reads token %d, wrote %d",
                         (unsigned long long)s->n_ops, id, pos, s->kvbuf[slot], sh->tokens[pos]);
            }
        }
        if (s->n_blocks_swa > 0) {
            assert_int_equal(info.swa_first, window_first(s, sh->committed));
            verify_window(s, id);
        }
    }
    assert_int_equal(kvt_stats(s->kv).n_seqs, open);
}

/* n_blocks_swa > 0 adds a sliding-window pool of that many blocks and the given window. */
static void run_stress(uint32_t n_blocks, uint32_t bs, uint32_t max_len, bool prefix, uint64_t seed,
                       uint32_t n_ops, uint32_t n_blocks_swa, uint32_t window) {
    sim *s = calloc(1, sizeof *s);
    assert_non_null(s);
    ts_kv_config cfg = {.n_blocks = n_blocks,
                        .block_size = bs,
                        .max_seqs = MAX_SEQS,
                        .max_seq_len = max_len,
                        .prefix_cache = prefix,
                        .n_blocks_swa = n_blocks_swa,
                        .swa_window = window};
    assert_int_equal(ts_kv_create(&cfg, &s->kv, &(ts_error){0}), TS_OK);
    s->bs = bs;
    s->n_blocks = n_blocks;
    s->n_blocks_swa = n_blocks_swa;
    s->window = window;
    s->max_len = max_len;
    s->prefix = prefix;
    s->rng = seed;
    s->kvbuf = malloc((size_t)n_blocks * bs * sizeof(int32_t));
    s->kvbuf_swa = malloc(((size_t)n_blocks_swa * bs + 1) * sizeof(int32_t));
    assert_non_null(s->kvbuf);
    assert_non_null(s->kvbuf_swa);
    for (size_t i = 0; i < (size_t)n_blocks * bs; i++) {
        s->kvbuf[i] = -1;
    }
    for (size_t i = 0; i < (size_t)n_blocks_swa * bs; i++) {
        s->kvbuf_swa[i] = -1;
    }
    for (s->n_ops = 0; s->n_ops < n_ops; s->n_ops++) {
        uint32_t r = rnd(s, 100);
        if (r < 20) {
            op_open(s);
        } else if (r < 65) {
            op_append_batch(s);
        } else if (r < 75) {
            op_fork(s);
        } else if (r < 83) {
            op_preempt(s);
        } else if (r < 99) {
            op_close(s);
        } else {
            ts_kv_prefix_clear(s->kv);
        }
        verify(s);
    }
    for (uint32_t id = 0; id < MAX_SEQS; id++) {
        if (s->seqs[id].open) {
            assert_int_equal(ts_kv_seq_close(s->kv, id, &(ts_error){0}), TS_OK);
        }
    }
    kvt_check(s->kv);
    ts_kv_stats st = kvt_stats(s->kv);
    assert_int_equal(st.n_used, 0);
    assert_int_equal(st.n_seqs, 0);
    assert_int_equal(st.n_free + st.n_evictable, n_blocks);
    assert_int_equal(st.n_evictable, st.n_cached);
    assert_int_equal(st.swa.n_used, 0);
    assert_int_equal(st.swa.n_free + st.swa.n_evictable, n_blocks_swa);
    assert_int_equal(st.swa.n_evictable, st.swa.n_cached);
    /* The run must have exercised what it claims to test. */
    if (bs > 1) {
        assert_true(st.n_cow_copies > 0);
    } else {
        assert_int_equal(st.n_cow_copies, 0); /* one-token blocks are never partly filled */
    }
    assert_true(s->n_limit > 0);
    assert_true(s->n_admit_ok > 0);
    if (prefix) {
        assert_true(st.prefix_hit_tokens > 0);
        assert_true(st.n_evictions > 0);
    } else {
        assert_int_equal(st.n_evictable, 0);
    }
    printf("stress blocks=%u (+%u, window %u) bs=%u prefix=%d: %llu ops, %llu limits, %llu COW "
           "copies, %llu evictions, prefix hit %llu/%llu tokens\n",
           n_blocks, n_blocks_swa, window, bs, prefix, (unsigned long long)s->n_ops,
           (unsigned long long)s->n_limit, (unsigned long long)st.n_cow_copies,
           (unsigned long long)st.n_evictions, (unsigned long long)st.prefix_hit_tokens,
           (unsigned long long)st.prefix_query_tokens);
    free(s->kvbuf);
    free(s->kvbuf_swa);
    ts_kv_destroy(s->kv);
    free(s);
}

static void test_stress_prefix(void **state) {
    (void)state;
    run_stress(48, 4, 64, true, 0x5eed0001u, 10000, 0, 0);
}

static void test_stress_prefix_block16(void **state) {
    (void)state;
    run_stress(20, 16, MAX_LEN, true, 0x5eed0002u, 5000, 0, 0);
}

static void test_stress_block1(void **state) {
    (void)state;
    run_stress(80, 1, 48, true, 0x5eed0003u, 4000, 0, 0);
}

static void test_stress_no_prefix(void **state) {
    (void)state;
    run_stress(40, 3, 60, false, 0x5eed0004u, 6000, 0, 0);
}

/* A sliding-window pool smaller than the full one: blocks leave each window while the
 * sequences grow, prefix hits must find their window blocks too, and both pools run out. */
static void test_stress_window(void **state) {
    (void)state;
    run_stress(48, 4, 64, true, 0x5eed0005u, 10000, 20, 6);
}

/* Window of one block exactly, larger blocks, no prefix cache: released blocks become free. */
static void test_stress_window_no_prefix(void **state) {
    (void)state;
    run_stress(40, 3, 60, false, 0x5eed0006u, 6000, 16, 3);
}

/* Window 1 (each query sees only itself) with one-token blocks. */
static void test_stress_window_block1(void **state) {
    (void)state;
    run_stress(80, 1, 48, true, 0x5eed0007u, 4000, 24, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_window),
        cmocka_unit_test(test_stress_window_no_prefix),
        cmocka_unit_test(test_stress_window_block1),
        cmocka_unit_test(test_stress_prefix),
        cmocka_unit_test(test_stress_prefix_block16),
        cmocka_unit_test(test_stress_block1),
        cmocka_unit_test(test_stress_no_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
