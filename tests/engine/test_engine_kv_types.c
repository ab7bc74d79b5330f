/*
 * test_engine_kv_types.c — the engine over K and V caches of different types (the
 * --cache-type-k / --cache-type-v choice), on tiny models with head_dim 32 (one block of 32
 * per quantized row) and the CPU backend:
 *
 *  - the runner holds K and V rows of their own sizes (q8_0: 34 bytes, q4_0: 18, ...);
 *  - prefix caching: with the cache on, every request gives the tokens of a cold run (the
 *    cached blocks hold the quantized rows a recomputation would store) and later requests
 *    find the shared full blocks; on a model with sliding-window layers (gemma2) too;
 *  - forks and preemption: n = 4 seeded sequences forked from a shared partial block (copied
 *    on write: K and V blocks of different sizes), two such requests in a pool too small for
 *    both (preempted and recomputed), give the tokens of the same request in a large pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "engine_util.h"

#define V TS_TINY_MIN_VOCAB

/* K, V pairs: llama.cpp's usual q8_0 K with q4_0 V, and each other type on one side. */
static const ts_type k_pairs[][2] = {{TS_TYPE_Q8_0, TS_TYPE_Q4_0},
                                     {TS_TYPE_F16, TS_TYPE_Q5_0},
                                     {TS_TYPE_BF16, TS_TYPE_Q8_0},
                                     {TS_TYPE_Q4_0, TS_TYPE_F32}};
enum { N_PAIRS = sizeof k_pairs / sizeof k_pairs[0] };

static eu_fx *open_hd32(const char *arch) {
    ts_tiny_spec s = ts_tiny_spec_default(arch);
    s.head_dim = 32;
    eu_fx *fx = eu_open(&s, true);
    assert_non_null(fx);
    assert_int_equal(fx->m->hp.head_dim, 32);
    return fx;
}

static ts_engine_config pair_config(const eu_fx *fx, int pi) {
    ts_engine_config c = eu_config(fx);
    c.kv_type_k = k_pairs[pi][0];
    c.kv_type_v = k_pairs[pi][1];
    return c;
}

static void run_all(ts_engine *e, eu_req *reqs, int n) {
    assert_true(eu_run(e, reqs, n, 10000) >= 0);
    for (int i = 0; i < n; i++) {
        if (reqs[i].errors) {
            fail_msg("protocol: %s", reqs[i].first_error);
        }
    }
}

/* The runner's KV bytes: each layer's K and V tensors at their own row sizes. */
static void test_kv_bytes(void **state) {
    (void)state;
    eu_fx *fx = open_hd32("llama");
    const ts_hparams *hp = &fx->m->hp;
    for (int pi = 0; pi < N_PAIRS; pi++) {
        ts_engine_config c = pair_config(fx, pi);
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        const ts_forward_config *fc = &e->runner->cfg;
        size_t rk = 0, rv = 0;
        assert_true(ts_type_row_bytes((uint32_t)c.kv_type_k, 32, &rk));
        assert_true(ts_type_row_bytes((uint32_t)c.kv_type_v, 32, &rv));
        size_t want =
            (size_t)(hp->n_layer * hp->n_head_kv * fc->n_blocks * fc->block_size) * (rk + rv);
        /* Each cache tensor is aligned to 64 bytes. */
        if (!(e->runner->kv_bytes >= want && e->runner->kv_bytes < want + 128 * hp->n_layer)) {
            fail_msg("pair %d: kv bytes %zu, want %zu", pi, e->runner->kv_bytes, want);
        }
        eu_destroy(e);
    }
    eu_close(fx);
}

/* Prefix caching with each pair, on a plain model and on one with sliding-window layers. */
static void test_prefix_cache(void **state) {
    (void)state;
    enum { N = 4, SHARED = 40 };
    const char *archs[2] = {"llama", "gemma2"};
    for (int ai = 0; ai < 2; ai++) {
        eu_fx *fx = open_hd32(archs[ai]);
        int32_t prompts[N][SHARED + 8];
        int32_t lens[N];
        for (int i = 0; i < N; i++) {
            eu_prompt(prompts[i], SHARED, V, 91);
            lens[i] = SHARED + 2 * i;
            eu_prompt(prompts[i] + SHARED, 2 * i, V, 300 + (uint32_t)i);
        }
        for (int pi = 0; pi < N_PAIRS; pi++) {
            ts_engine_config cold = pair_config(fx, pi), warm = pair_config(fx, pi);
            cold.prefix_cache = false;
            eu_req *want = calloc(N, sizeof *want), *got = calloc(N, sizeof *got);
            ts_engine *ec = eu_engine(fx, &cold), *ew = eu_engine(fx, &warm);
            assert_non_null(ec);
            assert_non_null(ew);
            ts_error err = {0};
            for (int i = 0; i < N; i++) {
                ts_request_params p = eu_greedy(12);
                assert_int_equal(eu_add(ec, prompts[i], lens[i], &p, &want[i], &err), TS_OK);
                run_all(ec, &want[i], 1);
                assert_int_equal(want[i].cached_tokens, 0);
                assert_int_equal(eu_add(ew, prompts[i], lens[i], &p, &got[i], &err), TS_OK);
                run_all(ew, &got[i], 1);
                if (!eu_same_tokens(&want[i].seq[0], &got[i].seq[0])) {
                    fail_msg("%s, %s/%s: request %d with the prefix cache differs from cold",
                             archs[ai], ts_type_name(warm.kv_type_k), ts_type_name(warm.kv_type_v),
                             i);
                }
                assert_int_equal(got[i].seq[0].n_tok, 12);
                assert_int_equal(got[i].cached_tokens, i == 0 ? 0 : 32);
            }
            ts_engine_stats st;
            ts_engine_get_stats(ew, &st);
            assert_true(st.prefix_hit_tokens >= 32 * (N - 1));
            eu_destroy(ec);
            eu_destroy(ew);
            free(want);
            free(got);
        }
        eu_close(fx);
    }
}

/* Forks (copy-on-write of the shared partial block) and preemption with each pair. */
static void test_forks_and_preemption(void **state) {
    (void)state;
    enum { N = 4, GEN = 20 };
    eu_fx *fx = open_hd32("llama");
    int32_t prompt[37]; /* 2 full blocks + a partial one that the forks share */
    eu_prompt(prompt, 37, V, 5);
    ts_request_params p = eu_greedy(GEN);
    p.sampling.temperature = 1.0f;
    p.seed = 7;
    p.has_seed = true;
    p.n = N;
    for (int pi = 0; pi < N_PAIRS; pi++) {
        ts_engine_config c = pair_config(fx, pi);
        ts_error err = {0};
        eu_req *roomy = calloc(1, sizeof *roomy), *two = calloc(2, sizeof *two);
        ts_engine *e = eu_engine(fx, &c);
        assert_non_null(e);
        assert_int_equal(eu_add(e, prompt, 37, &p, roomy, &err), TS_OK);
        run_all(e, roomy, 1);
        eu_destroy(e);
        /* Two requests of 4 sequences: 10 blocks each at the end; the pool has 12. */
        c.kv_tokens = 192;
        e = eu_engine(fx, &c);
        assert_non_null(e);
        assert_int_equal(eu_add(e, prompt, 37, &p, &two[0], &err), TS_OK);
        assert_int_equal(eu_add(e, prompt, 37, &p, &two[1], &err), TS_OK);
        run_all(e, two, 2);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < N; i++) {
                assert_int_equal(two[k].seq[i].n_tok, GEN);
                if (!eu_same_tokens(&roomy->seq[i], &two[k].seq[i])) {
                    fail_msg("%s/%s: request %d sequence %d differs from the roomy run",
                             ts_type_name(c.kv_type_k), ts_type_name(c.kv_type_v), k, i);
                }
            }
        }
        ts_engine_stats st;
        ts_engine_get_stats(e, &st);
        assert_true(st.n_preemptions > 0);
        char why[256];
        if (!eu_idle(e, why, sizeof why)) {
            fail_msg("engine not idle: %s", why);
        }
        eu_destroy(e);
        free(roomy);
        free(two);
    }
    eu_close(fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_bytes),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_forks_and_preemption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
