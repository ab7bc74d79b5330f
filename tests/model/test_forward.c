/*
 * test_forward.c — the forward graph of every architecture over the paged KV cache, driven
 * through the forward API with hand-built batches:
 *
 *  - CPU backend vs the reference backend for every architecture and weight type (F32, F16,
 *    Q8_0, Q4_0, Q4_1): a 40-token prompt over a non-contiguous block table (3 blocks,
 *    longer than the Gemma sliding window), logits of every position compared by relative
 *    RMS error (tolerances below, chosen from the activation type each weight type's dot
 *    product uses);
 *  - paged vs decomposed attention (registry override attention=decomposed);
 *  - a prompt fed in 3 chunks over 3 steps, and token by token, vs one-shot prefill;
 *  - two sequences in one step vs each alone; copy-on-write block copies; f32 and q8_0 vs
 *    f16 cache;
 *  - embeddings (the final hidden state after the output norm) through the single-device
 *    runner: CPU vs reference, logits = output weight x embeddings (x logit scale,
 *    + soft-capping), and
 *    asking for them changes no logit;
 *  - bad batches and configurations are errors, not wild reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/quick.h"
#include "fwd_util.h"

#define N_PROMPT 40
#define V TS_TINY_MIN_VOCAB

static const int32_t k_table[FU_MAX_BLK] = {5, 2, 9, 11, 0, 1, 3, 4};

/* Relative RMS tolerance of CPU vs reference logits by weight type. The CPU backend rounds
 * activations to the weight type's dot-product partner (F32: none; F16: f16; Q8_0, Q4_0:
 * Q8_0; Q4_1: Q8_1) before each matrix product, the reference computes in f32/f64; errors of
 * ~2^-8 relative per product accumulate over 2 layers and a dozen products. */
static double cpu_tol(ts_type t) {
    switch (t) {
    case TS_TYPE_F32: return 1e-4;
    case TS_TYPE_F16: return 5e-3;
    default: return 3e-2;
    }
}

/* Logits of all N_PROMPT positions of the standard prompt in one step. */
static void prefill(ts_forward *f, const int32_t *prompt, int n, float *logits) {
    fu_part p = {.tokens = prompt, .start = 0, .count = n};
    memcpy(p.table, k_table, sizeof p.table);
    ts_error err = {0};
    if (fu_step(f, &p, 1, logits, &err) != TS_OK) {
        fail_msg("forward: %s", err.msg);
    }
}

/* Runs the prompt on a fresh forward context of model m on backend b (registry reg) with a KV
 * cache of type kv. */
static void run_prompt_kv(const ts_model *m, ts_backend *b, ts_registry *reg, ts_type kv,
                          const int32_t *prompt, int n, float *logits) {
    ts_forward_config c = fu_config(64, 16);
    c.kv_type_k = c.kv_type_v = kv;
    ts_forward *f = fu_forward(m, b, reg, &c);
    assert_non_null(f);
    prefill(f, prompt, n, logits);
    ts_forward_destroy(f);
}

/* The same with the default f16 cache. */
static void run_prompt(const ts_model *m, ts_backend *b, ts_registry *reg, const int32_t *prompt,
                       int n, float *logits) {
    run_prompt_kv(m, b, reg, TS_TYPE_F16, prompt, n, logits);
}

static void test_cpu_vs_ref(void **state) {
    (void)state;
    /* MXFP4 (gpt-oss's expert type) for the mixtures of experts only. */
    const ts_type types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_Q8_0,
                             TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_MXFP4};
    ts_backend *ref = fu_backend(false), *cpu = fu_backend(true);
    assert_non_null(ref);
    assert_non_null(cpu);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 1);
    const size_t n_types = sizeof types / sizeof types[0];
    for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
        for (size_t ti = 0; ti < n_types; ti++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
            s.wtype = types[ti];
            if (s.wtype == TS_TYPE_MXFP4 && s.n_expert == 0) {
                continue;
            }
            /* Quick (sanitizer) runs: every architecture in F32 and in one other type, taken
             * in turn, so every type still runs on several architectures. */
            if (TS_QUICK && ti != 0 && ti != 1 + (size_t)ai % (n_types - 1)) {
                continue;
            }
            /* Expert choice is discontinuous: the rounding of a quantized run moves a layer's
             * hidden state by ~1%, enough to swap two experts of near-equal score for some
             * token, which changes its logits by far more than the tolerance. With quantized
             * weights the MoE models route every token to every expert (the weights stay a
             * smooth softmax); F32 and F16 keep top-2 of 6, experts without tokens included. */
            if (s.n_expert > 0 && ts_type_block_size(s.wtype) > 1) {
                s.n_expert_used = s.n_expert;
            }
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            run_prompt(m, ref, NULL, prompt, N_PROMPT, a);
            run_prompt(m, cpu, NULL, prompt, N_PROMPT, b);
            double e = fu_nrmse(b, a, n);
            double spread = fu_nrmse(a, a + V, n - V); /* logits do differ by position */
            printf("  %-7s %-5s cpu vs ref: nrmse %.2e, max |d| %.2e (tolerance %.0e)\n", s.arch,
                   ts_type_name(s.wtype), e, fu_max_abs(b, a, n), cpu_tol(s.wtype));
            if (!(e <= cpu_tol(s.wtype)) || !(spread > 0.1)) {
                fail_msg("%s %s: nrmse %g (tolerance %g), position spread %g", s.arch,
                         ts_type_name(s.wtype), e, cpu_tol(s.wtype), spread);
            }
            ts_model_close(m);
        }
    }
    free(a);
    free(b);
    ts_backend_destroy(ref);
    ts_backend_destroy(cpu);
}

/* attention=decomposed (gather + matmul + mask + softmax) against the paged ATTENTION op, on
 * both backends, with an f32 and an f16 cache; softcapping (Gemma 2), sliding windows (Gemma
 * 2/3, Cohere 2), NoPE layers, GQA and per-head norms all go through both. */
static void test_decomposed_vs_paged(void **state) {
    (void)state;
    ts_registry *reg = NULL;
    ts_error err = {0};
    assert_int_equal(ts_registry_create(&reg, &err), TS_OK);
    assert_int_equal(ts_registry_apply(reg, "attention=decomposed", "test", &err), TS_OK);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 2);
    for (int cpu = 0; cpu < 2; cpu++) {
        ts_backend *be = fu_backend(cpu);
        assert_non_null(be);
        for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            for (int f16 = 0; f16 < 2; f16++) {
                ts_type kv = f16 ? TS_TYPE_F16 : TS_TYPE_F32;
                run_prompt_kv(m, be, NULL, kv, prompt, N_PROMPT, a);
                run_prompt_kv(m, be, reg, kv, prompt, N_PROMPT, b);
                double e = fu_nrmse(b, a, n);
                printf("  %-7s %s %s cache decomposed vs paged: nrmse %.2e\n", s.arch,
                       cpu ? "cpu" : "ref", ts_type_name(kv), e);
                /* The reference sums in f64 either way; the CPU backend's fused attention and
                 * its matmul/softmax sequence sum f32 in different orders. An f16 cache adds
                 * rounding flips: K/V rows that differ in their last f32 bits between the two
                 * paths can round to neighbouring f16 values (seen up to 1.1e-5 on the
                 * reference, Cohere 2). */
                double tol = f16 ? (cpu ? 5e-5 : 3e-5) : (cpu ? 5e-6 : 1e-6);
                if (!(e <= tol)) {
                    fail_msg("%s on %s, %s cache: decomposed vs paged nrmse %g > %g", s.arch,
                             cpu ? "cpu" : "ref", ts_type_name(kv), e, tol);
                }
            }
            ts_model_close(m);
        }
        ts_backend_destroy(be);
    }
    free(a);
    free(b);
    ts_registry_destroy(reg);
}

/* The prompt fed in pieces over several steps (the KV cache carrying the earlier pieces)
 * gives the logits of one-shot prefill. chunks: sizes summing to N_PROMPT. */
static void check_chunked(const ts_model *m, ts_backend *be, const int *chunks, int n_chunks,
                          double tol, const char *what) {
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 3);
    ts_forward_config c = fu_config(64, 16);
    ts_forward *f = fu_forward(m, be, NULL, &c);
    assert_non_null(f);
    prefill(f, prompt, N_PROMPT, a);
    /* The same context again, over a different block table: nothing of the first run may
     * leak into the second. */
    int32_t start = 0;
    for (int i = 0; i < n_chunks; i++) {
        fu_part p = {.tokens = prompt + start, .start = start, .count = chunks[i]};
        for (int j = 0; j < FU_MAX_BLK; j++) {
            p.table[j] = 15 - j;
        }
        ts_error err = {0};
        if (fu_step(f, &p, 1, b + (size_t)start * V, &err) != TS_OK) {
            fail_msg("%s: step %d: %s", what, i, err.msg);
        }
        start += chunks[i];
    }
    assert_int_equal(start, N_PROMPT);
    double e = fu_nrmse(b, a, n);
    if (!(e <= tol)) {
        fail_msg("%s %s: chunked vs one-shot nrmse %g > %g", m->hp.arch->name, what, e, tol);
    }
    ts_forward_destroy(f);
    free(a);
    free(b);
}

static void test_chunked_prefill(void **state) {
    (void)state;
    const int three[] = {13, 14, 13};
    const int uneven[] = {1, 16, 2, 21};
    int ones[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) {
        ones[i] = 1;
    }
    for (int cpu = 0; cpu < 2; cpu++) {
        ts_backend *be = fu_backend(cpu);
        assert_non_null(be);
        /* The reference computes every row on its own, so pieces change nothing; the CPU
         * backend's batched kernels may sum in another order than its single-row ones. */
        double tol = cpu ? 1e-5 : 0.0;
        for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
            s.wtype = TS_TYPE_Q8_0;
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            check_chunked(m, be, three, 3, tol, "3 chunks");
            check_chunked(m, be, uneven, 4, tol, "1+16+2+21");
            check_chunked(m, be, ones, N_PROMPT, tol, "token by token");
            ts_model_close(m);
        }
        ts_backend_destroy(be);
    }
}

/* Two sequences in one step (different lengths, interleaved blocks) give the logits each
 * gives alone. */
static void test_two_sequences(void **state) {
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        ts_backend *be = fu_backend(cpu);
        for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            int32_t p0[23], p1[9];
            fu_prompt(p0, 23, V, 4);
            fu_prompt(p1, 9, V, 5);
            fu_part parts[2] = {{.tokens = p0, .start = 0, .count = 23, .table = {4, 6}},
                                {.tokens = p1, .start = 0, .count = 9, .table = {5}}};
            float *both = malloc(32 * V * sizeof *both), *one = malloc(32 * V * sizeof *one);
            ts_forward_config c = fu_config(64, 16);
            ts_forward *f = fu_forward(m, be, NULL, &c);
            ts_error err = {0};
            assert_int_equal(fu_step(f, parts, 2, both, &err), TS_OK);
            ts_forward_destroy(f);
            for (int i = 0; i < 2; i++) {
                f = fu_forward(m, be, NULL, &c);
                assert_int_equal(fu_step(f, &parts[i], 1, one, &err), TS_OK);
                const float *want = i == 0 ? both : both + 23 * V;
                double e = fu_nrmse(one, want, (size_t)parts[i].count * V);
                if (!(e <= (cpu ? 1e-5 : 0.0))) {
                    fail_msg("%s seq %d: batched vs alone nrmse %g", s.arch, i, e);
                }
                ts_forward_destroy(f);
            }
            free(both);
            free(one);
            ts_model_close(m);
        }
        ts_backend_destroy(be);
    }
}

/* A decode step reading blocks copied with ts_forward_copy_block equals one reading the
 * originals. */
static void test_copy_block(void **state) {
    (void)state;
    ts_backend *be = fu_backend(true);
    ts_tiny_spec s = ts_tiny_spec_default("qwen3");
    ts_model *m = fu_open_tiny(&s);
    assert_non_null(m);
    int32_t prompt[21];
    fu_prompt(prompt, 21, V, 6);
    ts_forward_config c = fu_config(64, 16);
    ts_forward *f = fu_forward(m, be, NULL, &c);
    float *pre = malloc(20 * V * sizeof *pre), *x = malloc(V * sizeof *x),
          *y = malloc(V * sizeof *y);
    ts_error err = {0};
    fu_part p = {.tokens = prompt, .start = 0, .count = 20, .table = {0, 1}};
    assert_int_equal(fu_step(f, &p, 1, pre, &err), TS_OK);
    assert_int_equal(ts_forward_copy_block(f, TS_FORWARD_POOL_FULL, 0, 7, &err), TS_OK);
    assert_int_equal(ts_forward_copy_block(f, TS_FORWARD_POOL_FULL, 1, 8, &err), TS_OK);
    fu_part d = {.tokens = prompt + 20, .start = 20, .count = 1, .table = {0, 1}};
    assert_int_equal(fu_step(f, &d, 1, x, &err), TS_OK);
    /* The copy's table writes the new token into block 8, leaving block 1 as it was. */
    fu_part d2 = {.tokens = prompt + 20, .start = 20, .count = 1, .table = {7, 8}};
    assert_int_equal(fu_step(f, &d2, 1, y, &err), TS_OK);
    assert_memory_equal(x, y, V * sizeof *x);
    /* Blocks never written hold zeros (not garbage): finite logits that differ. */
    fu_part d3 = {.tokens = prompt + 20, .start = 20, .count = 1, .table = {12, 13}};
    assert_int_equal(fu_step(f, &d3, 1, y, &err), TS_OK);
    for (int i = 0; i < V; i++) {
        assert_true(isfinite(y[i]));
    }
    assert_true(fu_nrmse(y, x, V) > 1e-3);
    assert_int_equal(ts_forward_copy_block(f, TS_FORWARD_POOL_FULL, 0, 16, &err), TS_ERR_RANGE);
    assert_int_equal(ts_forward_copy_block(f, TS_FORWARD_POOL_FULL, -1, 3, &err), TS_ERR_RANGE);
    free(pre);
    free(x);
    free(y);
    ts_forward_destroy(f);
    ts_model_close(m);
    ts_backend_destroy(be);
}

/* An f32 cache holds what the f16 cache rounds: close logits, twice the bytes. */
static void test_kv_types(void **state) {
    (void)state;
    ts_backend *be = fu_backend(true);
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    ts_model *m = fu_open_tiny(&s);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 7);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    ts_forward_config c = fu_config(64, 16);
    ts_forward *f16 = fu_forward(m, be, NULL, &c);
    c.kv_type_k = c.kv_type_v = TS_TYPE_F32;
    ts_forward *f32 = fu_forward(m, be, NULL, &c);
    assert_non_null(f16);
    assert_non_null(f32);
    assert_int_equal(ts_forward_kv_bytes(f32), 2 * ts_forward_kv_bytes(f16));
    /* 2 layers x K,V x 16 blocks x 16 tokens x 2 heads x 16 dims x 2 bytes */
    assert_true(ts_forward_kv_bytes(f16) >= 2 * 2 * 16 * 16 * 2 * 16 * 2);
    assert_true(ts_forward_arena_bytes(f16) > 0);
    prefill(f16, prompt, N_PROMPT, a);
    prefill(f32, prompt, N_PROMPT, b);
    double e = fu_nrmse(a, b, n);
    assert_true(e > 0.0 && e < 5e-3);
    ts_forward_destroy(f16);
    ts_forward_destroy(f32);
    free(a);
    free(b);
    ts_model_close(m);
    ts_backend_destroy(be);
}

/* A Q8_0 cache (head_dim 32: one block per K/V row): 34 bytes per 32 elements against f16's
 * 64, logits within 3e-2 relative RMS of the f16 cache's (Q8_0 rounds each element to 1/127
 * of its block's largest magnitude, ~2^-8 relative, the same order as f16 weights' error in
 * cpu_tol), on the CPU backend and the reference alike. */
static void test_kv_q8_0(void **state) {
    (void)state;
    ts_backend *cpu = fu_backend(true), *ref = fu_backend(false);
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.head_dim = 32;
    ts_model *m = fu_open_tiny(&s);
    assert_int_equal(m->hp.head_dim, 32);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 11);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *r = malloc(n * sizeof *r);
    ts_forward_config c = fu_config(64, 16);
    ts_forward *f16 = fu_forward(m, cpu, NULL, &c);
    c.kv_type_k = c.kv_type_v = TS_TYPE_Q8_0;
    ts_forward *q8 = fu_forward(m, cpu, NULL, &c);
    ts_forward *q8_ref = fu_forward(m, ref, NULL, &c);
    assert_non_null(f16);
    assert_non_null(q8);
    assert_non_null(q8_ref);
    /* 2 layers x K,V x 16 blocks x 16 tokens x 2 heads x 34 bytes (one block of 32) */
    size_t q8_bytes = ts_forward_kv_bytes(q8), f16_bytes = ts_forward_kv_bytes(f16);
    assert_true(q8_bytes >= 2 * 2 * 16 * 16 * 2 * 34);
    assert_true(q8_bytes * 64 <= f16_bytes * 34 + 64 * 4096);
    prefill(f16, prompt, N_PROMPT, a);
    prefill(q8, prompt, N_PROMPT, b);
    prefill(q8_ref, prompt, N_PROMPT, r);
    double e = fu_nrmse(b, a, n), e_ref = fu_nrmse(b, r, n);
    if (!(e > 0.0 && e < 3e-2)) {
        fail_msg("q8_0 vs f16 cache logits: nrmse %.3g", e);
    }
    /* CPU and reference quantize the same rows identically; they differ only as the f32
     * forward does (1e-4), plus the rare K/V element whose rounding that difference flips. */
    if (!(e_ref < 1e-3)) {
        fail_msg("q8_0 cache: cpu vs ref logits nrmse %.3g", e_ref);
    }
    ts_forward_destroy(f16);
    ts_forward_destroy(q8);
    ts_forward_destroy(q8_ref);
    free(a);
    free(b);
    free(r);
    ts_model_close(m);
    ts_backend_destroy(cpu);
    ts_backend_destroy(ref);
}

/* Host-side logits of one embedding row: W (F32 [n_embd, n_vocab]) x e, soft-capped as the
 * forward does. */
static void host_logits(const ts_model *m, const float *e, float *out) {
    const ts_gguf_tensor *w = m->tied_output ? ts_model_tensor(m, TS_ROLE_TOKEN_EMBD, 0)
                                             : ts_model_tensor(m, TS_ROLE_OUTPUT, 0);
    assert_int_equal(w->type, TS_TYPE_F32);
    int64_t n_embd = m->hp.n_embd;
    float cap = m->hp.final_softcap;
    for (int64_t v = 0; v < m->hp.n_vocab; v++) {
        const float *row = (const float *)w->data + v * n_embd;
        double acc = 0;
        for (int64_t i = 0; i < n_embd; i++) {
            acc += (double)row[i] * (double)e[i];
        }
        acc *= m->hp.logit_mul; /* Granite, Cohere */
        out[v] = cap > 0.0f ? cap * tanhf((float)acc / cap) : (float)acc;
    }
}

/* Embeddings through a runner on both backends, for every architecture (F32 weights). */
static void test_embeddings(void **state) {
    (void)state;
    ts_backend *be[2] = {fu_backend(false), fu_backend(true)};
    assert_non_null(be[0]);
    assert_non_null(be[1]);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 9);
    fu_part p = {.tokens = prompt, .start = 0, .count = N_PROMPT};
    memcpy(p.table, k_table, sizeof p.table);
    for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
        ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
        ts_model *m = fu_open_tiny(&s);
        assert_non_null(m);
        size_t ne = (size_t)N_PROMPT * (size_t)m->hp.n_embd, nl = (size_t)N_PROMPT * V;
        float *embd[2], *logits[2];
        float *plain = malloc(nl * sizeof *plain), *host = malloc(V * sizeof *host);
        ts_forward_config c = fu_config(64, 16);
        for (int k = 0; k < 2; k++) {
            embd[k] = malloc(ne * sizeof *embd[k]);
            logits[k] = malloc(nl * sizeof *logits[k]);
            ts_runner *r = NULL;
            ts_error err = {0};
            assert_int_equal(ts_forward_runner_create(m, be[k], &c, NULL, &r, &err), TS_OK);
            assert_int_equal(r->n_shards, 1);
            assert_int_equal(r->cfg.n_blocks, c.n_blocks);
            assert_int_equal(r->cfg.max_outputs, c.max_outputs);
            assert_true(r->kv_bytes > 0);
            if (fu_run(r, &p, 1, logits[k], embd[k], &err) != TS_OK) {
                fail_msg("%s: %s", s.arch, err.msg);
            }
            ts_runner_destroy(r);
            /* The same step on a fresh runner without embeddings: the same logits, bit for
             * bit (keeping the hidden state readable changes no computation). */
            assert_int_equal(ts_forward_runner_create(m, be[k], &c, NULL, &r, &err), TS_OK);
            assert_int_equal(fu_run(r, &p, 1, plain, NULL, &err), TS_OK);
            assert_memory_equal(plain, logits[k], nl * sizeof *plain);
            ts_runner_destroy(r);
        }
        /* The CPU's F32 products round nothing: as close as its logits (cpu_tol). */
        double e_cpu = fu_nrmse(embd[1], embd[0], ne);
        double spread = fu_nrmse(embd[0], embd[0] + m->hp.n_embd, ne - (size_t)m->hp.n_embd);
        /* The reference's logits are the output matrix times its embeddings, up to f32
         * summation order. */
        double e_out = 0;
        for (int t = 0; t < N_PROMPT; t++) {
            host_logits(m, embd[0] + (size_t)t * (size_t)m->hp.n_embd, host);
            double et = fu_nrmse(logits[0] + (size_t)t * V, host, V);
            e_out = et > e_out ? et : e_out;
        }
        printf("  %-7s embeddings cpu vs ref nrmse %.2e (rows differ by %.2f), logits vs "
               "W x embd %.2e\n",
               s.arch, e_cpu, spread, e_out);
        if (!(e_cpu < cpu_tol(TS_TYPE_F32)) || !(spread > 0.1) || !(e_out < 1e-5)) {
            fail_msg("%s: embeddings cpu vs ref %g, row spread %g, logits vs W x embd %g", s.arch,
                     e_cpu, spread, e_out);
        }
        for (int k = 0; k < 2; k++) {
            free(embd[k]);
            free(logits[k]);
        }
        free(plain);
        free(host);
        ts_model_close(m);
    }
    ts_backend_destroy(be[0]);
    ts_backend_destroy(be[1]);
}

static void expect_bad_batch(ts_forward *f, const ts_batch *b, const char *part) {
    float logits[2 * V];
    ts_error err = {0};
    assert_int_equal(ts_forward_run(f, b, logits, NULL, &err), TS_ERR_RANGE);
    if (strstr(err.msg, part) == NULL) {
        fail_msg("message '%s' lacks '%s'", err.msg, part);
    }
}

/* The routing keys: sigmoid gating (weights as they are, or renormalized), weights not
 * renormalized, a weight scale; each changes the logits of the tiny Mixtral and runs alike on
 * CPU and reference (F32 weights). */
static void test_moe_routing_keys(void **state) {
    (void)state;
    ts_backend *ref = fu_backend(false), *cpu = fu_backend(true);
    size_t n = (size_t)N_PROMPT * V;
    float *base = malloc(n * sizeof *base), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 3);
    ts_tiny_spec s0 = ts_tiny_spec_default("mixtral");
    ts_model *m = fu_open_tiny(&s0);
    assert_non_null(m);
    assert_true(m->hp.moe_norm_w && m->hp.moe_gating == TS_MOE_SOFTMAX);
    run_prompt(m, ref, NULL, prompt, N_PROMPT, base);
    ts_model_close(m);
    static const char *const whats[] = {"sigmoid, no norm", "softmax, no norm", "scale 2.5",
                                        "sigmoid, norm"};
    for (int v = 0; v < 4; v++) {
        ts_tiny_spec s = ts_tiny_spec_default("mixtral");
        const char *what = whats[v];
        bool sigmoid = v == 0 || v == 3;
        s.moe_gating = sigmoid ? 2 : 1;
        s.moe_norm = v < 2 ? 2 : 1;
        s.moe_w_scale = v == 2 ? 2.5f : 0.0f;
        m = fu_open_tiny(&s);
        assert_non_null(m);
        assert_int_equal(m->hp.moe_gating, sigmoid ? TS_MOE_SIGMOID : TS_MOE_SOFTMAX);
        assert_int_equal(m->hp.moe_norm_w, v >= 2);
        run_prompt(m, ref, NULL, prompt, N_PROMPT, a);
        run_prompt(m, cpu, NULL, prompt, N_PROMPT, b);
        double e = fu_nrmse(b, a, n), d = fu_nrmse(a, base, n);
        printf("  mixtral %-16s cpu vs ref nrmse %.2e, vs default routing %.3f\n", what, e, d);
        assert_true(e < 1e-4);
        assert_true(d > 0.01);
        ts_model_close(m);
    }
    free(base);
    free(a);
    free(b);
    ts_backend_destroy(ref);
    ts_backend_destroy(cpu);
}

/* GLM-4.5's multi-token-prediction block after the last layer changes nothing: the logits
 * equal those of the same file without it (every other tensor has the same values). */
static void test_nextn_block_not_run(void **state) {
    (void)state;
    ts_backend *ref = fu_backend(false);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 5);
    ts_tiny_spec s = ts_tiny_spec_default("glm4moe");
    ts_model *m = fu_open_tiny(&s);
    assert_non_null(m);
    run_prompt(m, ref, NULL, prompt, N_PROMPT, a);
    ts_model_close(m);
    s.n_nextn = 1;
    m = fu_open_tiny(&s);
    assert_non_null(m);
    assert_int_equal(m->hp.n_layer, 3);
    run_prompt(m, ref, NULL, prompt, N_PROMPT, b);
    ts_model_close(m);
    assert_memory_equal(a, b, n * sizeof *a);
    free(a);
    free(b);
    ts_backend_destroy(ref);
}

static void test_bad_batches(void **state) {
    (void)state;
    ts_backend *be = fu_backend(false);
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    ts_model *m = fu_open_tiny(&s);
    ts_forward_config c = fu_config(8, 4);
    ts_forward *f = fu_forward(m, be, NULL, &c);
    assert_non_null(f);
    int32_t tok[2] = {5, 6}, pos[2] = {0, 1}, seq[2] = {0, 0}, slots[2] = {0, 1};
    int32_t table[FU_MAX_BLK] = {0, -1, -1, -1, -1, -1, -1, -1}, len[1] = {2}, out[1] = {1};
    ts_batch ok = {2, tok, pos, seq, slots, 1, table, len, 1, out, NULL, NULL};
    float logits[2 * V];
    ts_error err = {0};
    assert_int_equal(ts_forward_run(f, &ok, logits, NULL, &err), TS_OK);

    ts_batch b = ok;
    int32_t bad_tok[2] = {5, V};
    b.tokens = bad_tok;
    expect_bad_batch(f, &b, "token 1 has id 320");
    b = ok;
    int32_t bad_pos[2] = {0, 2};
    b.pos = bad_pos; /* position past the sequence length */
    expect_bad_batch(f, &b, "token 1");
    b = ok;
    int32_t bad_slots[2] = {0, 4 * FU_BLOCK};
    b.slots = bad_slots;
    expect_bad_batch(f, &b, "slot 64");
    b = ok;
    int32_t bad_table[FU_MAX_BLK] = {4, -1, -1, -1, -1, -1, -1, -1};
    b.block_table = bad_table;
    expect_bad_batch(f, &b, "block 0 is 4");
    b = ok;
    int32_t long_len[1] = {17}; /* needs a second block, which is -1 */
    b.seq_len = long_len;
    expect_bad_batch(f, &b, "block 1 is -1");
    b = ok;
    int32_t bad_out[1] = {2};
    b.outputs = bad_out;
    expect_bad_batch(f, &b, "output 0 is token 2");
    b = ok;
    b.n_tokens = 9;
    expect_bad_batch(f, &b, "exceeds the bucket");
    b = ok;
    int32_t bad_seq[2] = {0, 1};
    b.seq = bad_seq;
    expect_bad_batch(f, &b, "seq 1");
    ts_forward_destroy(f);

    /* Configurations. */
    ts_forward *g = NULL;
    c = fu_config(8, 4);
    c.max_outputs = 9;
    assert_int_equal(ts_forward_create(m, be, &c, NULL, &g, &err), TS_ERR_INVALID_ARG);
    c = fu_config(8, 0);
    assert_int_equal(ts_forward_create(m, be, &c, NULL, &g, &err), TS_ERR_INVALID_ARG);
    /* The default tiny llama has head_dim 16: too short for a Q8_0 block of 32. */
    c = fu_config(8, 4);
    c.kv_type_k = c.kv_type_v = TS_TYPE_Q8_0;
    assert_int_equal(m->hp.head_dim, 16);
    assert_int_equal(ts_forward_create(m, be, &c, NULL, &g, &err), TS_ERR_UNSUPPORTED);
    assert_null(g);
    if (strstr(err.msg, "head_dim is 16") == NULL || strstr(err.msg, "Q8_0") == NULL) {
        fail_msg("message '%s' does not name Q8_0 and head_dim 16", err.msg);
    }
    /* Only V quantized: refused the same way, naming V. */
    c.kv_type_k = TS_TYPE_F16;
    c.kv_type_v = TS_TYPE_Q4_0;
    assert_int_equal(ts_forward_create(m, be, &c, NULL, &g, &err), TS_ERR_UNSUPPORTED);
    assert_null(g);
    if (strstr(err.msg, "V cache type Q4_0") == NULL) {
        fail_msg("message '%s' does not name the V cache's Q4_0", err.msg);
    }
    ts_model_close(m);
    ts_backend_destroy(be);
}

/* The sliding-window layers' own pool: its size, the same logits as with one pool whether or
 * not the window's dead blocks are mapped, -1 rejected only for a block a token sees, copies
 * per pool, and no such pool for a model without sliding-window layers. */
static void test_window_pool(void **state) {
    (void)state;
    ts_backend *be = fu_backend(true);
    ts_error err = {0};
    ts_tiny_spec s = ts_tiny_spec_default("gemma3");
    s.n_swa = 4;
    s.n_layer = 6; /* layers 0..4 local, 5 global */
    ts_model *m = fu_open_tiny(&s);
    assert_non_null(m);
    ts_forward_config c = fu_config(64, 8);
    ts_forward *one = fu_forward(m, be, NULL, &c);
    c.n_blocks_swa = 4;
    ts_forward *two = fu_forward(m, be, NULL, &c);
    assert_non_null(one);
    assert_non_null(two);
    /* K and V of 16 tokens x 2 heads x 32 in f16: 4096 bytes a block and layer. */
    assert_int_equal(ts_forward_kv_bytes(one), 6 * 8 * 4096);
    assert_int_equal(ts_forward_kv_swa_bytes(one), 0);
    assert_int_equal(ts_forward_kv_bytes(two), 1 * 8 * 4096 + 5 * 4 * 4096);
    assert_int_equal(ts_forward_kv_swa_bytes(two), 5 * 4 * 4096);

    int32_t prompt[41];
    fu_prompt(prompt, 41, V, 3);
    float *want = malloc(40 * V * sizeof *want), *got = malloc(40 * V * sizeof *got);
    fu_part pre = {.tokens = prompt, .start = 0, .count = 40, .table = {5, 1, 7}};
    assert_int_equal(fu_step(one, &pre, 1, want, &err), TS_OK);
    fu_batch fb;
    fu_make_batch(&pre, 1, &fb);
    int32_t swa_table[FU_MAX_BLK] = {2, 0, 3, -1, -1, -1, -1, -1}, swa_slots[40];
    for (int32_t p = 0; p < 40; p++) {
        swa_slots[p] = swa_table[p / FU_BLOCK] * FU_BLOCK + p % FU_BLOCK;
    }
    fb.b.slots_swa = swa_slots;
    fb.b.block_table_swa = swa_table;
    assert_int_equal(ts_forward_run(two, &fb.b, got, NULL, &err), TS_OK);
    assert_memory_equal(got, want, 40 * V * sizeof *got);

    /* Position 40 sees keys 37..40 in the window: block 2 only; blocks 0 and 1 may be -1. */
    fu_part dec = {.tokens = prompt + 40, .start = 40, .count = 1, .table = {5, 1, 7}};
    assert_int_equal(fu_step(one, &dec, 1, want, &err), TS_OK);
    fu_make_batch(&dec, 1, &fb);
    int32_t slot = 3 * FU_BLOCK + 40 % FU_BLOCK, released[FU_MAX_BLK] = {-1, -1, 3, -1};
    fb.b.slots_swa = &slot;
    fb.b.block_table_swa = released;
    assert_int_equal(ts_forward_run(two, &fb.b, got, NULL, &err), TS_OK);
    assert_memory_equal(got, want, V * sizeof *got);
    released[2] = -1;
    assert_int_equal(ts_forward_check_batch(two, &fb.b, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "window pool"));
    released[2] = 4; /* past the pool */
    assert_int_equal(ts_forward_check_batch(two, &fb.b, &err), TS_ERR_RANGE);
    released[2] = 3;
    released[0] = 4;
    assert_int_equal(ts_forward_check_batch(two, &fb.b, &err), TS_ERR_RANGE);
    released[0] = -1;
    fb.b.block_table_swa = NULL;
    assert_int_equal(ts_forward_check_batch(two, &fb.b, &err), TS_ERR_INVALID_ARG);

    assert_int_equal(ts_forward_copy_block(two, TS_FORWARD_POOL_SWA, 3, 1, &err), TS_OK);
    assert_int_equal(ts_forward_copy_block(two, TS_FORWARD_POOL_SWA, 4, 1, &err), TS_ERR_RANGE);
    assert_int_equal(ts_forward_copy_block(two, TS_FORWARD_POOL_FULL, 7, 4, &err), TS_OK);
    assert_int_equal(ts_forward_copy_block(two, 2, 0, 1, &err), TS_ERR_RANGE);
    assert_int_equal(ts_forward_copy_block(one, TS_FORWARD_POOL_SWA, 0, 1, &err), TS_ERR_RANGE);
    free(want);
    free(got);
    ts_forward_destroy(one);
    ts_forward_destroy(two);
    ts_model_close(m);

    /* A model without sliding-window layers cannot have the pool. */
    s = ts_tiny_spec_default("llama");
    m = fu_open_tiny(&s);
    ts_forward *f = NULL;
    assert_int_equal(ts_forward_create(m, be, &c, NULL, &f, &err), TS_ERR_INVALID_ARG);
    assert_null(f);
    assert_non_null(strstr(err.msg, "no sliding-window layers"));
    ts_model_close(m);
    ts_backend_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_vs_ref),      cmocka_unit_test(test_decomposed_vs_paged),
        cmocka_unit_test(test_chunked_prefill), cmocka_unit_test(test_two_sequences),
        cmocka_unit_test(test_copy_block),      cmocka_unit_test(test_kv_types),
        cmocka_unit_test(test_kv_q8_0),         cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_embeddings),      cmocka_unit_test(test_moe_routing_keys),
        cmocka_unit_test(test_window_pool),
        cmocka_unit_test(test_nextn_block_not_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
