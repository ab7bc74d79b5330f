/*
 * test_ops.c — every op on the CPU backend against the reference backend.
 *
 * Random shapes with odd sizes, non-contiguous (transposed / permuted) inputs, every weight
 * type src/quant supports for MUL_MAT and GET_ROWS. The metric is the normalized RMS error
 * sqrt(sum (cpu - ref)^2 / sum ref^2). Tolerances: 1e-5 for f32 math (the CPU uses f32
 * transcendental functions and f32 accumulators where the reference uses f64); MUL_MAT
 * depends on the activation type the CPU quantizes to (vec_dot_type): F32 1e-5, F16 2e-3,
 * BF16 1e-2, 8-bit block types 1e-2 (rounding to 8 bits is ~0.4% per element).
 * CPU runs use 1 and 3 threads (3 exercises uneven splits).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "backends/harness.h"
#include "quant/quant.h"

#include <math.h>
#include <string.h>

typedef struct fixture {
    ts_backend *ref;
    ts_backend *cpu[2];
} fixture;

static fixture *F;

static int setup(void **state) {
    (void)state;
    F = calloc(1, sizeof *F);
    ts_error err = {0};
    if (ts_ref_backend_create(&F->ref, &err) != TS_OK) {
        return -1;
    }
    int threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        ts_cpu_params p = {.n_threads = threads[i], .isa = -1};
        if (ts_cpu_backend_create(&p, &F->cpu[i], &err) != TS_OK) {
            fprintf(stderr, "cpu: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ts_backend_destroy(F->ref);
    ts_backend_destroy(F->cpu[0]);
    ts_backend_destroy(F->cpu[1]);
    free(F);
    return 0;
}

/* Runs h's graph on ref and both CPU configurations; asserts nrmse(out) <= tol. */
static void check(harness *h, ts_tensor *out, double tol, const char *what) {
    ts_error err = {0};
    if (out == NULL) {
        ts_graph_status(h->g, &err);
        fail_msg("%s: build failed: %s", what, err.msg);
    }
    ts_graph_output(h->g, out);
    float *want = h_run(h, F->ref, out, &err);
    if (want == NULL) {
        fail_msg("%s: ref: %s", what, err.msg);
    }
    int64_t n = ts_tensor_nelements(out);
    for (int i = 0; i < 2; i++) {
        float *got = h_run(h, F->cpu[i], out, &err);
        if (got == NULL) {
            fail_msg("%s: cpu: %s", what, err.msg);
        }
        double e = h_nrmse(got, want, n);
        if (!(e <= tol)) {
            fail_msg("%s (cpu %d threads): nrmse %.3g > %.3g (max abs %.3g)", what,
                     i == 0 ? 1 : 3, e, tol, h_max_abs(got, want, n));
        }
        if (getenv("TS_TEST_VERBOSE") != NULL) {
            printf("  %-48s cpu%d nrmse %.3g\n", what, i == 0 ? 1 : 3, e);
        }
        free(got);
    }
    free(want);
}

/* A [ne0, ne1, ne2] f32 input; transposed (non-contiguous) when strided is set. */
static ts_tensor *input3(harness *h, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                         bool strided) {
    if (!strided) {
        int64_t ne[3] = {ne0, ne1, ne2};
        ts_tensor *t = h_param(h, name, TS_TYPE_F32, 3, ne);
        h_fill(h, t, 1.0f);
        return t;
    }
    int64_t ne[3] = {ne1, ne0, ne2};
    ts_tensor *t = h_param(h, name, TS_TYPE_F32, 3, ne);
    h_fill(h, t, 1.0f);
    return ts_op_transpose(h->g, t);
}

static double matmul_tol(ts_type vt) {
    switch (vt) {
    case TS_TYPE_F32: return 1e-5;
    case TS_TYPE_F16: return 2e-3;
    case TS_TYPE_BF16: return 1e-2;
    default: return 1e-2;
    }
}

static void test_mul_mat_types(void **state) {
    (void)state;
    int tested = 0;
    for (uint32_t id = 0; id < TS_TYPE_COUNT; id++) {
        if (!ts_type_valid(id)) {
            continue;
        }
        const ts_quant_ops *ops = ts_quant_ops_get((ts_type)id, TS_ISA_SCALAR);
        if (ops == NULL || ops->vec_dot == NULL || ops->to_float == NULL ||
            ops->from_float == NULL) {
            continue;
        }
        int64_t bs = (int64_t)ts_type_block_size(id);
        int64_t k = bs >= 256 ? 2 * bs : 3 * (bs > 32 ? bs : 32);
        int64_t ms[3] = {1, 5, 70};
        for (int mi = 0; mi < 3; mi++) {
            for (int strided = 0; strided < 2; strided++) {
                harness h;
                h_init(&h, F->ref, id * 31 + (uint64_t)mi * 7 + (uint64_t)strided);
                int64_t wne[2] = {k, 37};
                ts_tensor *w = h_param(&h, "w", (ts_type)id, 2, wne);
                h_fill(&h, w, 1.0f);
                ts_tensor *x = input3(&h, "x", k, ms[mi], 1, strided);
                char what[96];
                snprintf(what, sizeof what, "MUL_MAT %s k=%lld m=%lld%s", ts_type_name(id),
                         (long long)k, (long long)ms[mi], strided ? " (x transposed)" : "");
                check(&h, ts_op_mul_mat(h.g, w, x), matmul_tol(ops->vec_dot_type), what);
                h_free(&h);
            }
        }
        tested++;
    }
    assert_true(tested >= 3);
}

static void test_mul_mat_broadcast(void **state) {
    (void)state;
    ts_type types[2] = {TS_TYPE_F32, TS_TYPE_F16};
    for (int ti = 0; ti < 2; ti++) {
        harness h;
        h_init(&h, F->ref, 99 + (uint64_t)ti);
        /* w [k, n, 2, 1] read through a permuted view of a [k, 2, n] parameter. */
        int64_t wne[3] = {64, 2, 19};
        ts_tensor *wp = h_param(&h, "w", types[ti], 3, wne);
        h_fill(&h, wp, 1.0f);
        ts_tensor *w = ts_op_permute(h.g, wp, 0, 2, 1, 3);
        int64_t xne[4] = {64, 9, 6, 2};
        ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 4, xne);
        h_fill(&h, x, 1.0f);
        check(&h, ts_op_mul_mat(h.g, w, x), types[ti] == TS_TYPE_F32 ? 1e-5 : 2e-3,
              "MUL_MAT broadcast over dims 2/3");
        h_free(&h);
    }
}

static void test_get_rows(void **state) {
    (void)state;
    for (uint32_t id = 0; id < TS_TYPE_COUNT; id++) {
        const ts_quant_ops *ops = ts_type_valid(id) ? ts_quant_ops_get((ts_type)id, TS_ISA_SCALAR)
                                                    : NULL;
        if (ops == NULL || ops->to_float == NULL || ops->from_float == NULL) {
            continue;
        }
        harness h;
        h_init(&h, F->ref, 7 + id);
        int64_t bs = (int64_t)ts_type_block_size(id);
        int64_t ne[2] = {bs * 2 > 64 ? bs * 2 : 64, 11};
        ts_tensor *a = h_param(&h, "a", (ts_type)id, 2, ne);
        h_fill(&h, a, 2.0f);
        int64_t ine[2] = {3, 2};
        ts_tensor *idx = h_param(&h, "idx", TS_TYPE_I32, 2, ine);
        int32_t iv[6] = {10, 0, -1, 5, 5, 3};
        h_set_i32(&h, idx, iv, 6);
        char what[64];
        snprintf(what, sizeof what, "GET_ROWS %s", ts_type_name(id));
        check(&h, ts_op_get_rows(h.g, a, idx), 0.0, what);
        h_free(&h);
    }
}

static void test_binary(void **state) {
    (void)state;
    int64_t bshapes[4][3] = {{13, 7, 3}, {13, 1, 3}, {1, 7, 1}, {13, 1, 1}};
    for (int op = 0; op < 2; op++) {
        for (int bi = 0; bi < 4; bi++) {
            for (int strided = 0; strided < 2; strided++) {
                harness h;
                h_init(&h, F->ref, 50 + (uint64_t)(op * 8 + bi * 2 + strided));
                ts_tensor *a = input3(&h, "a", 13, 7, 3, strided);
                ts_tensor *b = h_param(&h, "b", TS_TYPE_F32, 3, bshapes[bi]);
                h_fill(&h, b, 1.0f);
                ts_tensor *y = op ? ts_op_mul(h.g, a, b) : ts_op_add(h.g, a, b);
                check(&h, y, 1e-6, op ? "MUL" : "ADD");
                h_free(&h);
            }
        }
    }
}

static void test_unary(void **state) {
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        for (int strided = 0; strided < 2; strided++) {
            harness h;
            h_init(&h, F->ref, 70 + (uint64_t)(kind * 2 + strided));
            ts_tensor *a = input3(&h, "a", 33, 5, 2, strided);
            ts_tensor *y = kind == 0   ? ts_op_scale(h.g, a, -1.75f)
                           : kind == 1 ? ts_op_silu(h.g, ts_op_scale(h.g, a, 6.0f))
                           : kind == 2 ? ts_op_gelu(h.g, ts_op_scale(h.g, a, 4.0f), TS_GELU_ERF)
                                       : ts_op_gelu(h.g, ts_op_scale(h.g, a, 4.0f), TS_GELU_TANH);
            check(&h, y, 1e-5, "SCALE/SILU/GELU");
            h_free(&h);
        }
    }
}

static void test_glu(void **state) {
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        harness h;
        h_init(&h, F->ref, 80 + (uint64_t)kind);
        ts_tensor *g = input3(&h, "g", 45, 3, 1, kind == 1);
        ts_tensor *u = input3(&h, "u", 45, 3, 1, false);
        ts_tensor *y = kind == 0 ? ts_op_swiglu(h.g, g, u)
                                 : ts_op_geglu(h.g, g, u, kind == 1 ? TS_GELU_ERF : TS_GELU_TANH);
        check(&h, y, 1e-5, "SWIGLU/GEGLU");
        h_free(&h);
    }
}

static void test_norms(void **state) {
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        harness h;
        h_init(&h, F->ref, 90 + (uint64_t)kind);
        ts_tensor *a = input3(&h, "a", 57, 6, 2, kind & 1);
        int64_t wn[1] = {57};
        ts_tensor *w = h_param(&h, "w", TS_TYPE_F32, 1, wn);
        ts_tensor *b = h_param(&h, "b", TS_TYPE_F32, 1, wn);
        h_fill(&h, w, 1.0f);
        h_fill(&h, b, 1.0f);
        ts_tensor *y = kind < 2 ? ts_op_rms_norm(h.g, a, kind ? w : NULL, 1e-5f)
                                : ts_op_norm(h.g, a, w, kind == 3 ? b : NULL, 1e-5f);
        check(&h, y, 1e-5, "RMS_NORM/NORM");
        h_free(&h);
    }
}

static void test_rope(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        for (int variant = 0; variant < 2; variant++) {
            harness h;
            h_init(&h, F->ref, 100 + (uint64_t)(mode * 2 + variant));
            int64_t hd = 24, nh = 3, nt = 5;
            ts_tensor *x;
            if (variant) { /* permuted input: parameter [hd, nt, nh] */
                int64_t ne[3] = {hd, nt, nh};
                ts_tensor *p = h_param(&h, "x", TS_TYPE_F32, 3, ne);
                h_fill(&h, p, 1.0f);
                x = ts_op_permute(h.g, p, 0, 2, 1, 3);
            } else {
                int64_t ne[3] = {hd, nh, nt};
                x = h_param(&h, "x", TS_TYPE_F32, 3, ne);
                h_fill(&h, x, 1.0f);
            }
            int64_t pn[1] = {nt};
            ts_tensor *pos = h_param(&h, "pos", TS_TYPE_I32, 1, pn);
            int32_t pv[5] = {0, 1, 17, 500, 3000};
            h_set_i32(&h, pos, pv, 5);
            ts_tensor *y = ts_op_rope(h.g, x, pos, variant ? 16 : 24, (ts_rope_mode)mode,
                                      10000.0f, variant ? 0.25f : 1.0f);
            check(&h, y, 1e-5, "ROPE");
            h_free(&h);
        }
    }
}

/* ROPE's scaling parameters: frequency factors (llama3 / Phi-3 longrope), the YaRN ramp with
 * its extrapolation mix, and the attention factor, alone and together, on both layouts and a
 * permuted input; CPU against the reference. */
static void test_rope_scaling(void **state) {
    (void)state;
    for (int c = 0; c < 8; c++) {
        harness h;
        h_init(&h, F->ref, 300 + (uint64_t)c);
        int64_t hd = 24, nh = 3, nt = 6, n_rot = c % 2 ? 16 : 24;
        ts_tensor *x;
        if (c % 4 == 3) { /* permuted input: parameter [hd, nt, nh] */
            int64_t ne[3] = {hd, nt, nh};
            ts_tensor *p = h_param(&h, "x", TS_TYPE_F32, 3, ne);
            h_fill(&h, p, 1.0f);
            x = ts_op_permute(h.g, p, 0, 2, 1, 3);
        } else {
            int64_t ne[3] = {hd, nh, nt};
            x = h_param(&h, "x", TS_TYPE_F32, 3, ne);
            h_fill(&h, x, 1.0f);
        }
        int64_t pn[1] = {nt};
        ts_tensor *pos = h_param(&h, "pos", TS_TYPE_I32, 1, pn);
        int32_t pv[6] = {0, 1, 9, 63, 500, 70000};
        h_set_i32(&h, pos, pv, 6);
        ts_rope_params rp = ts_rope_params_plain((int)n_rot, (ts_rope_mode)(c % 2), 10000.0f);
        if (c & 2 || c >= 6) { /* factors between 1 and 8, as llama3's and Phi-3's */
            int64_t fn[1] = {n_rot / 2};
            rp.freq_factors = h_param(&h, "ff", TS_TYPE_F32, 1, fn);
            float fv[12];
            for (int i = 0; i < n_rot / 2; i++) {
                fv[i] = 1.0f + 7.0f * (float)i / (float)(n_rot / 2);
            }
            ts_error err = {0};
            assert_int_equal(
                ts_backend_tensor_set_f32(h.host, rp.freq_factors, fv, n_rot / 2, &err), TS_OK);
        }
        if (c & 4) { /* YaRN: factor 4 over an original context of 64 */
            rp.freq_scale = 0.25f;
            rp.ext_factor = c == 7 ? 0.5f : 1.0f;
            rp.attn_factor = 1.0f + 0.1f * logf(4.0f);
            float corr[2];
            ts_rope_yarn_corr_dims((int)n_rot, rp.freq_base, 64, 32.0f, 1.0f, corr);
            rp.corr_lo = corr[0];
            rp.corr_hi = corr[1];
        } else if (c == 1) {
            rp.attn_factor = 1.19f; /* Phi-3's sqrt(1 + ln(s) / ln(n_orig)) form */
        }
        check(&h, ts_op_rope_ext(h.g, x, pos, &rp), 1e-5, "ROPE scaled");
        h_free(&h);
    }
}

/* Runs ROPE on the reference backend over x [8, 1, 4] at positions 0..3. */
static void rope_ref(const ts_rope_params *rp, const float *ff, float *out) {
    harness h;
    h_init(&h, F->ref, 400);
    int64_t ne[3] = {8, 1, 4}, pn[1] = {4}, fn[1] = {4};
    ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 3, ne);
    float xv[32];
    for (int i = 0; i < 32; i++) {
        xv[i] = (float)(i % 8) * 0.25f - 1.0f;
    }
    ts_error err = {0};
    assert_int_equal(ts_backend_tensor_set_f32(h.host, x, xv, 32, &err), TS_OK);
    ts_tensor *pos = h_param(&h, "pos", TS_TYPE_I32, 1, pn);
    int32_t pv[4] = {0, 1, 2, 3};
    h_set_i32(&h, pos, pv, 4);
    ts_rope_params p = *rp;
    if (ff != NULL) {
        p.freq_factors = h_param(&h, "ff", TS_TYPE_F32, 1, fn);
        assert_int_equal(ts_backend_tensor_set_f32(h.host, p.freq_factors, ff, 4, &err), TS_OK);
    }
    ts_tensor *y = ts_graph_output(h.g, ts_op_rope_ext(h.g, x, pos, &p));
    float *got = h_run(&h, F->ref, y, &err);
    assert_non_null(got);
    memcpy(out, got, 32 * sizeof(float));
    free(got);
    h_free(&h);
}

static void assert_close(const float *a, const float *b, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        if (fabsf(a[i] - b[i]) > 1e-6f) {
            fail_msg("%s: element %d: %.7f vs %.7f", what, i, a[i], b[i]);
        }
    }
}

/* The reference's ROPE parameters mean what ir.h says: identities between them, a value
 * computed by hand, and YaRN's correction range as transformers computes it. */
static void test_rope_semantics(void **state) {
    (void)state;
    float plain[32], got[32], want[32];
    ts_rope_params p = ts_rope_params_plain(8, TS_ROPE_NORMAL, 10000.0f);
    rope_ref(&p, NULL, plain);
    /* (x0, x1) = (-1, -0.75) at position 1, pair 0 (angle 1): by hand. */
    assert_close(
        &plain[8],
        (float[]){(float)(-cos(1.0) + 0.75 * sin(1.0)), (float)(-sin(1.0) - 0.75 * cos(1.0))}, 2,
        "pair 0 at position 1");
    /* Factors all 4 = linear scaling by 4. */
    float four[4] = {4, 4, 4, 4};
    rope_ref(&p, four, got);
    ts_rope_params lin = p;
    lin.freq_scale = 0.25f;
    rope_ref(&lin, NULL, want);
    assert_close(got, want, 32, "factors 4 vs freq_scale 1/4");
    /* Attention factor 2 doubles the rotated part only (n_rot 6 of 8). */
    ts_rope_params part = ts_rope_params_plain(6, TS_ROPE_NORMAL, 10000.0f);
    rope_ref(&part, NULL, want);
    part.attn_factor = 2.0f;
    rope_ref(&part, NULL, got);
    for (int i = 0; i < 32; i++) {
        want[i] *= i % 8 < 6 ? 2.0f : 1.0f;
    }
    assert_close(got, want, 32, "attn_factor 2");
    /* YaRN with the ramp above every pair keeps the extrapolated angles (freq_scale unused);
     * with the ramp below every pair it is plain interpolation; ext_factor 0 turns it off. */
    ts_rope_params y = p;
    y.freq_scale = 0.25f;
    y.ext_factor = 1.0f;
    y.corr_lo = 10.0f;
    y.corr_hi = 12.0f;
    rope_ref(&y, NULL, got);
    assert_close(got, plain, 32, "YaRN, all pairs extrapolated");
    y.corr_lo = -3.0f;
    y.corr_hi = -1.0f;
    rope_ref(&y, NULL, got);
    rope_ref(&lin, NULL, want);
    assert_close(got, want, 32, "YaRN, all pairs interpolated");
    /* Pair 1 halfway up the ramp [0, 2]: angle pos * 1e4^(-1/4) * (0.25 * 0.5 + 0.5). */
    y.corr_lo = 0.0f;
    y.corr_hi = 2.0f;
    rope_ref(&y, NULL, got);
    double th = 3.0 * pow(10000.0, -0.25) * 0.625, x0 = -0.5, x1 = -0.25;
    assert_close(
        &got[24 + 2],
        (float[]){(float)(x0 * cos(th) - x1 * sin(th)), (float)(x0 * sin(th) + x1 * cos(th))}, 2,
        "YaRN pair 1 at position 3");
    /* transformers' find_correction_range(32, 1, 128, 1e6, 32768) = (23, 40) (Qwen3 with
     * YaRN), and (8, 18) for gpt-oss's 64 dims, base 150000, original context 4096. */
    float corr[2];
    ts_rope_yarn_corr_dims(128, 1e6f, 32768, 32.0f, 1.0f, corr);
    assert_true(corr[0] == 23.0f && corr[1] == 40.0f);
    ts_rope_yarn_corr_dims(64, 150000.0f, 4096, 32.0f, 1.0f, corr);
    assert_true(corr[0] == 8.0f && corr[1] == 18.0f);
}

static void test_softmax(void **state) {
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        harness h;
        h_init(&h, F->ref, 110 + (uint64_t)variant);
        ts_tensor *a = input3(&h, "a", 29, 4, 3, variant == 1);
        int64_t mn[2] = {29, 4};
        ts_tensor *mask = h_param(&h, "mask", TS_TYPE_F32, 2, mn);
        float mv[29 * 4];
        for (int i = 0; i < 29 * 4; i++) {
            mv[i] = (i % 5 == 0) ? -INFINITY : 0.0f;
        }
        for (int i = 0; i < 29; i++) {
            mv[29 * 2 + i] = -INFINITY; /* a fully masked row gives zeros */
        }
        ts_error err = {0};
        assert_int_equal(ts_backend_tensor_set(h.host, mask, 0, mv, sizeof mv, &err), TS_OK);
        ts_tensor *y = ts_op_softmax(h.g, a, variant ? mask : NULL, 3.0f,
                                     variant == 2 ? 2.5f : 0.0f);
        check(&h, y, 1e-5, "SOFTMAX");
        h_free(&h);
    }
}

static void test_copies(void **state) {
    (void)state;
    ts_type dst_types[5] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_BF16, TS_TYPE_Q8_0, TS_TYPE_Q4_0};
    for (int ti = 0; ti < 5; ti++) {
        harness h;
        h_init(&h, F->ref, 120 + (uint64_t)ti);
        bool block = ts_type_block_size(dst_types[ti]) > 1;
        ts_tensor *a = input3(&h, "a", 64, 3, 2, !block);
        /* CAST to the type and back to f32 so the comparison is in f32. Quantized results
         * may differ by one rounding step where the CPU's fast quantizer rounds a tie the
         * other way, hence the tolerance for block types. */
        ts_tensor *y = ts_op_cast(h.g, ts_op_cast(h.g, a, dst_types[ti]), TS_TYPE_F32);
        check(&h, y, block ? 1e-2 : 0.0, "CAST round trip");
        h_free(&h);
    }
    /* CPY into a parameter's strided view, and CONT of a transposed tensor. */
    harness h;
    h_init(&h, F->ref, 130);
    ts_tensor *a = input3(&h, "a", 7, 9, 1, true);
    int64_t dn[2] = {9, 7};
    ts_tensor *dst = h_param(&h, "dst", TS_TYPE_F16, 2, dn);
    ts_tensor *c = ts_op_cpy(h.g, a, ts_op_transpose(h.g, dst));
    check(&h, ts_op_cont(h.g, c), 0.0, "CPY f32->f16 into a transposed view");
    h_free(&h);
    h_init(&h, F->ref, 131);
    ts_tensor *b = input3(&h, "b", 11, 5, 3, false);
    check(&h, ts_op_cont(h.g, ts_op_permute(h.g, b, 2, 0, 1, 3)), 0.0, "CONT of a permutation");
    h_free(&h);
    h_init(&h, F->ref, 132);
    ts_tensor *r = input3(&h, "r", 6, 4, 1, false);
    int64_t dn2[2] = {8, 3};
    ts_tensor *d2 = h_param(&h, "d2", TS_TYPE_F32, 2, dn2);
    check(&h, ts_op_cont(h.g, ts_op_cpy(h.g, r, d2)), 0.0, "CPY with another row length");
    h_free(&h);
}

static void test_concat_argmax(void **state) {
    (void)state;
    for (int dim = 0; dim < 3; dim++) {
        harness h;
        h_init(&h, F->ref, 140 + (uint64_t)dim);
        int64_t an[3] = {5, 4, 3}, bn[3] = {5, 4, 3};
        bn[dim] = 2;
        ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 3, an);
        ts_tensor *b = h_param(&h, "b", TS_TYPE_F32, 3, bn);
        h_fill(&h, a, 1.0f);
        h_fill(&h, b, 1.0f);
        check(&h, ts_op_concat(h.g, a, dim == 1 ? ts_op_cont(h.g, b) : b, dim), 0.0, "CONCAT");
        h_free(&h);
    }
    harness h;
    h_init(&h, F->ref, 150);
    ts_tensor *a = input3(&h, "a", 300, 7, 2, true);
    check(&h, ts_op_argmax(h.g, a), 0.0, "ARGMAX");
    h_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_mat_types), cmocka_unit_test(test_mul_mat_broadcast),
        cmocka_unit_test(test_get_rows),      cmocka_unit_test(test_binary),
        cmocka_unit_test(test_unary),         cmocka_unit_test(test_glu),
        cmocka_unit_test(test_norms),         cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_scaling),  cmocka_unit_test(test_rope_semantics),
        cmocka_unit_test(test_softmax),       cmocka_unit_test(test_copies),
        cmocka_unit_test(test_concat_argmax),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
