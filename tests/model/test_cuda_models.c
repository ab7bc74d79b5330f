/*
 * test_cuda_models.c — whole tiny models on the CUDA backend against the reference: every
 * architecture's logits for a 40-token prompt, and batch invariance (a sequence's logits are
 * the same bits alone and sharing a step with another sequence, in prefill and in decode).
 * Needs a build with TS_CUDA and a CUDA device; otherwise it reports itself not run.
 *
 * Tolerance (relative RMS of the logits): 1e-4 for F32 weights, 2e-3 otherwise. The CUDA
 * kernels dequantize weights exactly as the reference does and keep activations in f32, so
 * the difference is summation order plus the f16 KV cache rounding a value the other way.
 * Against the CPU backend, which rounds activations to the weight type's dot-product partner,
 * the tolerances are test_forward.c's CPU-vs-reference ones (1e-4, 5e-3 for F16, 3e-2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cuda/cuda.h"
#include "common/skip.h"
#include "fwd_util.h"

#define N_PROMPT 40
#define V        TS_TINY_MIN_VOCAB

static ts_backend *g_cuda;

static int setup(void **state) {
    (void)state;
    ts_error err = {0};
    if (ts_cuda_device_count() > 0 && ts_cuda_backend_create(NULL, &g_cuda, &err) != TS_OK) {
        fprintf(stderr, "cuda: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ts_backend_destroy(g_cuda);
    return 0;
}

#define NEED_DEVICE()                                                                              \
    do {                                                                                           \
        if (g_cuda == NULL) {                                                                      \
            TS_SKIP("CUDA models: %s", ts_cuda_built() ? "no CUDA device on this machine"          \
                                                       : "built without CUDA (-DTS_CUDA=ON)");     \
        }                                                                                          \
    } while (0)

static const int32_t k_table0[FU_MAX_BLK] = {5, 2, 9, 11, 0, 1, 3, 4};
static const int32_t k_table1[FU_MAX_BLK] = {6, 7, 8, 10, 12, 13, 14, 15};

/* One step of n parts on a fresh forward of m on b; logits of every token. */
static void step(const ts_model *m, ts_backend *b, const fu_part *parts, int n, float *logits) {
    ts_forward_config c = fu_config(128, 16);
    ts_forward *f = fu_forward(m, b, NULL, &c);
    assert_non_null(f);
    ts_error err = {0};
    if (fu_step(f, parts, n, logits, &err) != TS_OK) {
        fail_msg("forward on %s: %s", ts_backend_name(b), err.msg);
    }
    ts_forward_destroy(f);
}

static void test_archs_vs_ref(void **state) {
    (void)state;
    NEED_DEVICE();
    const ts_type types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q8_0,
                             TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_MXFP4};
    ts_backend *ref = fu_backend(false), *cpu = fu_backend(true);
    assert_non_null(ref);
    assert_non_null(cpu);
    size_t n = (size_t)N_PROMPT * V;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    int32_t prompt[N_PROMPT];
    fu_prompt(prompt, N_PROMPT, V, 1);
    fu_part p = {.tokens = prompt, .start = 0, .count = N_PROMPT};
    memcpy(p.table, k_table0, sizeof p.table);
    for (int ai = 0; ts_tiny_archs[ai] != NULL; ai++) {
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[ai]);
            s.wtype = types[ti];
            if (s.wtype == TS_TYPE_MXFP4 && s.n_expert == 0) {
                continue;
            }
            if (s.n_expert > 0 && ts_type_block_size(s.wtype) > 1) {
                s.n_expert_used = s.n_expert; /* see test_forward.c: no near-tie routing */
            }
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            step(m, ref, &p, 1, a);
            step(m, g_cuda, &p, 1, b);
            step(m, cpu, &p, 1, c);
            double e = fu_nrmse(b, a, n), tol = s.wtype == TS_TYPE_F32 ? 1e-4 : 2e-3;
            double ec = fu_nrmse(b, c, n);
            double tol_cpu = s.wtype == TS_TYPE_F32 ? 1e-4 : s.wtype == TS_TYPE_F16 ? 5e-3 : 3e-2;
            printf("  %-9s %-5s cuda vs ref: nrmse %.2e, max |d| %.2e (tolerance %.0e); "
                   "vs cpu %.2e (%.0e)\n",
                   s.arch, ts_type_name(s.wtype), e, fu_max_abs(b, a, n), tol, ec, tol_cpu);
            if (!(e <= tol) || !(ec <= tol_cpu)) {
                fail_msg("%s %s: nrmse %g (tolerance %g) against ref, %g (%g) against cpu", s.arch,
                         ts_type_name(s.wtype), e, tol, ec, tol_cpu);
            }
            ts_model_close(m);
        }
    }
    free(a);
    free(b);
    free(c);
    ts_backend_destroy(ref);
    ts_backend_destroy(cpu);
}

/* Sequence 0's logits alone and next to sequence 1, in a prefill step and in a decode step. */
static void test_batch_invariance(void **state) {
    (void)state;
    NEED_DEVICE();
    const char *archs[] = {"llama", "gemma2", "qwen3moe"};
    const ts_type types[] = {TS_TYPE_F16, TS_TYPE_Q4_0};
    int32_t p0[N_PROMPT], p1[N_PROMPT];
    fu_prompt(p0, N_PROMPT, V, 3);
    fu_prompt(p1, N_PROMPT, V, 4);
    size_t n = (size_t)2 * N_PROMPT * V;
    float *alone = malloc(n * sizeof(float)), *both = malloc(n * sizeof(float));
    for (size_t ai = 0; ai < sizeof archs / sizeof archs[0]; ai++) {
        for (size_t ti = 0; ti < 2; ti++) {
            ts_tiny_spec s = ts_tiny_spec_default(archs[ai]);
            s.wtype = types[ti];
            ts_model *m = fu_open_tiny(&s);
            assert_non_null(m);
            /* Prefill: 40 tokens of sequence 0 alone, then with 17 of sequence 1 in the same
             * step. Decode-sized: sequence 0's first token alone, then next to the prefill. */
            fu_part a = {.tokens = p0, .start = 0, .count = N_PROMPT};
            fu_part b = {.tokens = p1, .start = 0, .count = 17};
            memcpy(a.table, k_table0, sizeof a.table);
            memcpy(b.table, k_table1, sizeof b.table);
            fu_part parts[2] = {a, b};
            step(m, g_cuda, &a, 1, alone);
            step(m, g_cuda, parts, 2, both);
            if (memcmp(alone, both, (size_t)N_PROMPT * V * sizeof(float)) != 0) {
                fail_msg("%s %s: prefill logits of a sequence change when another shares the "
                         "step",
                         archs[ai], ts_type_name(s.wtype));
            }
            fu_part d = {.tokens = p0, .start = 0, .count = 1};
            memcpy(d.table, k_table0, sizeof d.table);
            fu_part dparts[2] = {d, b};
            step(m, g_cuda, &d, 1, alone);
            step(m, g_cuda, dparts, 2, both);
            if (memcmp(alone, both, (size_t)V * sizeof(float)) != 0) {
                fail_msg("%s %s: a decode token's logits change when a prefill shares the step",
                         archs[ai], ts_type_name(s.wtype));
            }
            ts_model_close(m);
        }
    }
    free(alone);
    free(both);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_archs_vs_ref),
        cmocka_unit_test(test_batch_invariance),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
