/*
 * test_draft_ngram.c — the n-gram drafter (src/engine/draft_ngram.h) against a brute-force
 * reference: random sequences over small alphabets (so that matches are frequent) grown a few
 * tokens at a time, with resets and shrinking histories; hand cases for each rule of the
 * semantics; argument errors; and the cost of indexing a 32k-token prompt and of the
 * incremental calls after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/draft_ngram.h"
#include "engine/draft_ngram_internal.h"
#include "engine/sampler_rng.h"
#include "util/error.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* The specification, literally: for L from n_max down to n_min, for e from n-1 down to L,
 * the first e with tokens[e-L..e) == tokens[n-L..n) proposes tokens[e..min(e+max, n)). */
static int32_t ref_propose(const int32_t *tokens, int32_t n, int32_t n_min, int32_t n_max,
                           int32_t *out, int32_t max) {
    if (max <= 0) {
        return 0;
    }
    for (int32_t l = n_max; l >= n_min; l--) {
        if (l > n) {
            continue;
        }
        for (int32_t e = n - 1; e >= l; e--) {
            bool same = true;
            for (int32_t k = 1; k <= l && same; k++) {
                same = tokens[e - k] == tokens[n - k];
            }
            if (same) {
                int32_t count = 0;
                for (int32_t i = e; i < n && count < max; i++) {
                    out[count++] = tokens[i];
                }
                return count;
            }
        }
    }
    return 0;
}

static ts_ngram *make(int32_t n_min, int32_t n_max) {
    ts_ngram *x = NULL;
    ts_error err = {0};
    ts_status st = ts_ngram_create(n_min, n_max, &x, &err);
    if (st != TS_OK) {
        fail_msg("ts_ngram_create(%d, %d) failed: %s", n_min, n_max, err.msg);
    }
    return x;
}

/* Checks the drafter's proposal for tokens[0..n) against the reference. */
static void check_one(ts_ngram *x, const int32_t *tokens, int32_t n, int32_t n_min, int32_t n_max,
                      int32_t max, const char *what) {
    int32_t want[64];
    int32_t got[64];
    assert_true(max <= 64);
    memset(got, 0xff, sizeof got);
    int32_t nw = ref_propose(tokens, n, n_min, n_max, want, max);
    int32_t ng = ts_ngram_propose(x, tokens, n, got, max);
    if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got) != 0) {
        fail_msg("%s: n_min %d n_max %d max %d n %d: proposed %d tokens, reference %d", what, n_min,
                 n_max, max, n, ng, nw);
    }
    /* Nothing past the count is written. */
    for (int32_t i = ng; i < 64; i++) {
        assert_int_equal(got[i], -1);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- hand cases ------------------------------------------------------------------------- */

static void test_no_match(void **state) {
    (void)state;
    ts_ngram *x = make(1, 4);
    const int32_t t[] = {1, 2, 3, 4, 5};
    int32_t out[8];
    for (int32_t n = 0; n <= 5; n++) {
        assert_int_equal(ts_ngram_propose(x, t, n, out, 8), 0);
    }
    ts_ngram_destroy(x);
}

static void test_overlap_with_suffix(void **state) {
    (void)state;
    /* "a a a a": the 3-gram "a a a" occurred ending at e = 3 = n - 1, overlapping the suffix;
     * what followed it is the single last token. */
    ts_ngram *x = make(1, 3);
    const int32_t t[] = {7, 7, 7, 7};
    int32_t out[8] = {0};
    assert_int_equal(ts_ngram_propose(x, t, 4, out, 5), 1);
    assert_int_equal(out[0], 7);
    /* One token: no earlier occurrence (the suffix itself never counts). */
    ts_ngram_reset(x);
    assert_int_equal(ts_ngram_propose(x, t, 1, out, 5), 0);
    /* Two tokens: the 1-gram "a" ends at e = 1, proposing t[1..2). */
    assert_int_equal(ts_ngram_propose(x, t, 2, out, 5), 1);
    assert_int_equal(out[0], 7);
    ts_ngram_destroy(x);
}

static void test_most_recent_wins(void **state) {
    (void)state;
    ts_ngram *x = make(2, 2);
    /* "1 2" ends at e = 2 (then 9) and at e = 5 (then 8): the later one is proposed. */
    const int32_t t[] = {1, 2, 9, 1, 2, 8, 1, 2};
    int32_t out[8] = {0};
    assert_int_equal(ts_ngram_propose(x, t, 8, out, 3), 3);
    assert_int_equal(out[0], 8);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 2);
    ts_ngram_destroy(x);
}

static void test_longest_wins(void **state) {
    (void)state;
    /* "1 2 3" ends at e = 4 (then 6); the shorter "2 3" ends later, at e = 7 (then 7). */
    const int32_t t[] = {5, 1, 2, 3, 6, 2, 3, 7, 1, 2, 3};
    int32_t out[8] = {0};
    ts_ngram *x = make(1, 3);
    assert_int_equal(ts_ngram_propose(x, t, 11, out, 1), 1);
    assert_int_equal(out[0], 6);
    ts_ngram_destroy(x);
    /* Without length 3 the most recent "2 3" wins. */
    x = make(1, 2);
    assert_int_equal(ts_ngram_propose(x, t, 11, out, 1), 1);
    assert_int_equal(out[0], 7);
    ts_ngram_destroy(x);
    /* With only length 3 and above, nothing shorter is considered. */
    x = make(3, 5);
    assert_int_equal(ts_ngram_propose(x, t, 11, out, 2), 2);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 2);
    ts_ngram_destroy(x);
}

static void test_clipped_at_history_end(void **state) {
    (void)state;
    ts_ngram *x = make(2, 2);
    const int32_t t[] = {1, 2, 3, 1, 2};
    int32_t out[16] = {0};
    /* "1 2" ends at e = 2; only t[2..5) exists after it. */
    assert_int_equal(ts_ngram_propose(x, t, 5, out, 10), 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 2);
    /* max <= 0 proposes nothing and writes nothing. */
    out[0] = -5;
    assert_int_equal(ts_ngram_propose(x, t, 5, out, 0), 0);
    assert_int_equal(ts_ngram_propose(x, t, 5, out, -3), 0);
    assert_int_equal(out[0], -5);
    /* The same n again gives the same answer (nothing new to index). */
    assert_int_equal(ts_ngram_propose(x, t, 5, out, 2), 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 1);
    ts_ngram_destroy(x);
}

static void test_reset_forgets(void **state) {
    (void)state;
    ts_ngram *x = make(1, 2);
    const int32_t a[] = {4, 5, 6, 4, 5};
    const int32_t b[] = {9, 8, 7, 6, 5};
    int32_t out[8] = {0};
    assert_int_equal(ts_ngram_propose(x, a, 5, out, 4), 3);
    assert_int_equal(out[0], 6);
    /* After a reset, a different history of the same length is indexed from scratch: "5"
     * alone has no earlier occurrence in b, whatever a held. */
    ts_ngram_reset(x);
    assert_int_equal(ts_ngram_propose(x, b, 5, out, 4), 0);
    /* And the original history again gives its original answer. */
    ts_ngram_reset(x);
    assert_int_equal(ts_ngram_propose(x, a, 5, out, 4), 3);
    assert_int_equal(out[0], 6);
    ts_ngram_destroy(x);
}

static void test_shrinking_rebuilds(void **state) {
    (void)state;
    ts_ngram *x = make(1, 3);
    /* Index a long history where "3" was followed by 1, then call with a shorter history of
     * different content: the index must not answer from the old tokens. */
    const int32_t a[] = {3, 1, 3, 1, 3, 1, 3, 1, 3};
    const int32_t b[] = {3, 2, 3, 2, 3};
    int32_t out[8] = {0};
    assert_int_equal(ts_ngram_propose(x, a, 9, out, 1), 1);
    assert_int_equal(out[0], 1);
    assert_int_equal(ts_ngram_propose(x, b, 5, out, 1), 1);
    assert_int_equal(out[0], 2);
    /* Shorter still: "3" ends at e = 1, followed by "2 3". */
    assert_int_equal(ts_ngram_propose(x, b, 3, out, 8), 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    ts_ngram_destroy(x);
}

/* ---- randomized comparison with the reference ------------------------------------------ */

typedef struct setting {
    int32_t n_min, n_max, max;
} setting;

static void test_random_vs_reference(void **state) {
    (void)state;
    const setting settings[] = {{1, 1, 4}, {1, 3, 8},   {2, 4, 5}, {3, 3, 16}, {1, 16, 10},
                                {4, 8, 3}, {16, 16, 4}, {2, 5, 1}, {1, 6, 64}};
    const int32_t alphabets[] = {1, 2, 3, 5, 20};
    enum { LEN = 400 };
    int32_t *tokens = malloc(LEN * sizeof *tokens);
    assert_non_null(tokens);
    ts_rng rng;
    ts_rng_seed(&rng, 29);
    int64_t calls = 0;
    int64_t matched = 0;
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        setting s = settings[si];
        ts_ngram *x = make(s.n_min, s.n_max);
        for (size_t ai = 0; ai < sizeof alphabets / sizeof alphabets[0]; ai++) {
            for (int rep = 0; rep < 6; rep++) {
                int32_t alpha = alphabets[ai];
                /* Some sequences repeat an earlier stretch on purpose, as code rewrites do. */
                for (int32_t i = 0; i < LEN; i++) {
                    bool copy = rep % 2 == 1 && i > 40 && ts_rng_uniform(&rng) < 0.8;
                    tokens[i] = copy ? tokens[i - 1 - (int32_t)(ts_rng_next(&rng) % 40)]
                                     : (int32_t)(ts_rng_next(&rng) % (uint64_t)alpha) * 7919;
                }
                ts_ngram_reset(x);
                int32_t n = 0;
                while (n < LEN) {
                    /* Grow by 0 (the same n again) to 6 tokens. */
                    int32_t step = (int32_t)(ts_rng_next(&rng) % 7);
                    n = n + step < LEN ? n + step : LEN;
                    int32_t max = 1 + (int32_t)(ts_rng_next(&rng) % (uint64_t)s.max);
                    int32_t probe[64];
                    matched += ref_propose(tokens, n, s.n_min, s.n_max, probe, max) > 0;
                    check_one(x, tokens, n, s.n_min, s.n_max, max, "random growth");
                    calls++;
                    uint64_t event = ts_rng_next(&rng) % 100;
                    if (event == 0) {
                        /* The sequence starts over with the same tokens (preemption). */
                        ts_ngram_reset(x);
                    } else if (event == 1 && n > 0) {
                        /* A shorter history whose tail differs: a rebuild must follow. */
                        n = (int32_t)(ts_rng_next(&rng) % (uint64_t)n);
                        for (int32_t i = n; i < LEN; i++) {
                            tokens[i] = (int32_t)(ts_rng_next(&rng) % (uint64_t)alpha) * 7919;
                        }
                        check_one(x, tokens, n, s.n_min, s.n_max, s.max, "after shrinking");
                        calls++;
                    }
                }
            }
        }
        ts_ngram_destroy(x);
    }
    free(tokens);
    printf("random: %lld calls compared, %lld with a match\n", (long long)calls,
           (long long)matched);
    /* The small alphabets must exercise matches, or the comparison proves little. */
    assert_true(matched > calls / 2);
}

/* A large vocabulary over a long history: many distinct n-grams, tables that grow many times
 * (and so many hash-equal probes across unrelated n-grams), checked at sampled points. */
static void test_long_history_vs_reference(void **state) {
    (void)state;
    enum { LEN = 20000 };
    int32_t *tokens = malloc(LEN * sizeof *tokens);
    assert_non_null(tokens);
    ts_rng rng;
    ts_rng_seed(&rng, 4242);
    for (int32_t i = 0; i < LEN; i++) {
        bool copy = i > 1000 && ts_rng_uniform(&rng) < 0.5;
        tokens[i] = copy ? tokens[i - 1 - (int32_t)(ts_rng_next(&rng) % 1000)]
                         : (int32_t)(ts_rng_next(&rng) % 50000);
    }
    const setting settings[] = {{1, 4, 8}, {2, 16, 16}, {3, 6, 5}};
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        setting s = settings[si];
        ts_ngram *x = make(s.n_min, s.n_max);
        for (int32_t n = 1; n <= LEN; n += 1 + (int32_t)(ts_rng_next(&rng) % 997)) {
            check_one(x, tokens, n, s.n_min, s.n_max, s.max, "long history");
        }
        ts_ngram_destroy(x);
    }
    free(tokens);
}

/* Hashes cut to 0..3 bits: nearly every probe meets a slot of equal hash holding another
 * n-gram, so only the comparison of tokens keeps the proposals equal to the reference. */
static void test_hash_collisions(void **state) {
    (void)state;
    enum { LEN = 300 };
    int32_t tokens[LEN];
    ts_rng rng;
    ts_rng_seed(&rng, 1729);
    const setting settings[] = {{1, 3, 6}, {2, 6, 4}, {1, 16, 8}};
    const int32_t alphabets[] = {3, 6, 40};
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        setting s = settings[si];
        ts_ngram *x = make(s.n_min, s.n_max);
        for (int32_t bits = 0; bits <= 3; bits++) {
            for (size_t ai = 0; ai < sizeof alphabets / sizeof alphabets[0]; ai++) {
                for (int32_t i = 0; i < LEN; i++) {
                    tokens[i] = (int32_t)(ts_rng_next(&rng) % (uint64_t)alphabets[ai]);
                }
                ts_ngram_weaken_hash(x, bits);
                for (int32_t n = 0; n <= LEN; n += (int32_t)(ts_rng_next(&rng) % 4)) {
                    check_one(x, tokens, n, s.n_min, s.n_max, s.max, "weak hash");
                    if (n == LEN) {
                        break;
                    }
                }
            }
        }
        ts_ngram_destroy(x);
    }
}

/* ---- argument errors -------------------------------------------------------------------- */

static void test_create_errors(void **state) {
    (void)state;
    const int32_t bad[][2] = {{0, 1}, {-1, 3}, {2, 1}, {1, 17}, {17, 17}, {5, 4}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_ngram *x = (ts_ngram *)&x; /* not NULL, so that clearing it is observed */
        ts_error err = {0};
        ts_status st = ts_ngram_create(bad[i][0], bad[i][1], &x, &err);
        assert_int_equal(st, TS_ERR_INVALID_ARG);
        assert_int_equal(err.status, TS_ERR_INVALID_ARG);
        assert_null(x);
        char want[64];
        snprintf(want, sizeof want, "n_min %d .. n_max %d", bad[i][0], bad[i][1]);
        if (strstr(err.msg, want) == NULL) {
            fail_msg("error message '%s' does not name '%s'", err.msg, want);
        }
    }
    ts_error err = {0};
    assert_int_equal(ts_ngram_create(1, 4, NULL, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "out is NULL"));
    /* The extremes of the range are accepted. */
    ts_ngram_destroy(make(1, 1));
    ts_ngram_destroy(make(16, 16));
    ts_ngram_destroy(make(1, 16));
    /* NULL arguments elsewhere are harmless. */
    ts_ngram_destroy(NULL);
    ts_ngram_reset(NULL);
    int32_t out[4];
    const int32_t t[] = {1, 1, 1};
    assert_int_equal(ts_ngram_propose(NULL, t, 3, out, 4), 0);
    ts_ngram *x = make(1, 2);
    assert_int_equal(ts_ngram_propose(x, NULL, 3, out, 4), 0);
    assert_int_equal(ts_ngram_propose(x, t, -1, out, 4), 0);
    assert_int_equal(ts_ngram_propose(x, t, 3, NULL, 4), 0);
    assert_int_equal(ts_ngram_propose(x, t, 3, out, 4), 1);
    ts_ngram_destroy(x);
}

/* ---- cost ------------------------------------------------------------------------------- */

/* Indexing a 32k-token prompt, then 2000 calls that each add one token. A drafter that
 * rescanned the history per call would spend about 2000 times the indexing time there. */
static void test_cost(void **state) {
    (void)state;
    enum { PROMPT = 32768, GEN = 2000, LEN = PROMPT + GEN };
    int32_t *tokens = malloc(LEN * sizeof *tokens);
    assert_non_null(tokens);
    ts_rng rng;
    ts_rng_seed(&rng, 7);
    /* Half fresh tokens, half copies of recent stretches: a document and its rewrite. */
    for (int32_t i = 0; i < LEN; i++) {
        bool copy = i > 4096 && (i / 64) % 2 == 1;
        tokens[i] = copy ? tokens[i - 4096] : (int32_t)(ts_rng_next(&rng) % 32000);
    }
    const setting settings[] = {{1, 4, 8}, {2, 8, 8}, {1, 16, 8}};
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        setting s = settings[si];
        ts_ngram *x = make(s.n_min, s.n_max);
        int32_t out[16];
        double t0 = now_s();
        int32_t got = ts_ngram_propose(x, tokens, PROMPT, out, s.max);
        double t_index = now_s() - t0;
        (void)got;
        int64_t proposed = 0;
        t0 = now_s();
        for (int32_t n = PROMPT + 1; n <= LEN; n++) {
            proposed += ts_ngram_propose(x, tokens, n, out, s.max);
        }
        double t_gen = now_s() - t0;
        /* Reindexing after a reset reuses the tables' memory. */
        ts_ngram_reset(x);
        t0 = now_s();
        (void)ts_ngram_propose(x, tokens, PROMPT, out, s.max);
        double t_reindex = now_s() - t0;
        printf("n-grams %2d..%-2d: index %d tokens %.3f ms (again after reset %.3f ms); "
               "%d one-token calls %.3f ms (%.2f us/call), %lld tokens proposed\n",
               s.n_min, s.n_max, PROMPT, t_index * 1e3, t_reindex * 1e3, GEN, t_gen * 1e3,
               t_gen * 1e6 / GEN, (long long)proposed);
        /* Generous bounds (sanitizer builds and a loaded host included): the issue is a
         * quadratic path, not a constant factor. */
        assert_true(t_index < 0.5);
        assert_true(t_gen < 0.5 * t_index + 0.02);
        ts_ngram_destroy(x);
    }
    free(tokens);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_match),
        cmocka_unit_test(test_overlap_with_suffix),
        cmocka_unit_test(test_most_recent_wins),
        cmocka_unit_test(test_longest_wins),
        cmocka_unit_test(test_clipped_at_history_end),
        cmocka_unit_test(test_reset_forgets),
        cmocka_unit_test(test_shrinking_rebuilds),
        cmocka_unit_test(test_random_vs_reference),
        cmocka_unit_test(test_long_history_vs_reference),
        cmocka_unit_test(test_hash_collisions),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
