/*
 * test_moe.c — the mixture-of-experts ops (TOPK, GATHER, MUL_MAT_ID, SIGMOID) on the CPU
 * backend against the reference backend, and the reference against plain host loops.
 *
 * MUL_MAT_ID: every weight type with arithmetic, 1..64 tokens, 2-3 experts per token, experts
 * that get no token, x with one row per token or one per slot, x transposed (strided), and
 * weights in a constant buffer (which the CPU may repack). Tolerances as MUL_MAT's
 * (test_ops.c): they come from the activation type the CPU converts to. TOPK and GATHER are
 * exact. CPU runs use 1 and 3 threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cpu/cpu.h"
#include "backends/harness.h"
#include "backends/ref/ref.h"
#include "quant/quant.h"

static ts_backend *g_ref, *g_cpu[2];

static int setup(void **state) {
    (void)state;
    ts_error err = {0};
    if (ts_ref_backend_create(&g_ref, &err) != TS_OK) {
        return -1;
    }
    int threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        ts_cpu_params p = {.n_threads = threads[i], .isa = -1};
        if (ts_cpu_backend_create(&p, &g_cpu[i], &err) != TS_OK) {
            fprintf(stderr, "cpu: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ts_backend_destroy(g_ref);
    ts_backend_destroy(g_cpu[0]);
    ts_backend_destroy(g_cpu[1]);
    return 0;
}

/* Runs h's graph on ref and both CPU configurations; asserts nrmse(out) <= tol. Returns the
 * reference output (caller frees). */
static float *check(harness *h, ts_tensor *out, double tol, const char *what) {
    ts_error err = {0};
    if (out == NULL) {
        ts_graph_status(h->g, &err);
        fail_msg("%s: build failed: %s", what, err.msg);
    }
    ts_graph_output(h->g, out);
    float *want = h_run(h, g_ref, out, &err);
    if (want == NULL) {
        fail_msg("%s: ref: %s", what, err.msg);
    }
    int64_t n = ts_tensor_nelements(out);
    for (int i = 0; i < 2; i++) {
        float *got = h_run(h, g_cpu[i], out, &err);
        if (got == NULL) {
            fail_msg("%s: cpu: %s", what, err.msg);
        }
        double e = h_nrmse(got, want, n);
        if (!(e <= tol)) {
            fail_msg("%s (cpu %d threads): nrmse %.3g > %.3g (max abs %.3g)", what, i == 0 ? 1 : 3,
                     e, tol, h_max_abs(got, want, n));
        }
        if (getenv("TS_TEST_VERBOSE") != NULL) {
            printf("  %-56s cpu%d nrmse %.3g\n", what, i == 0 ? 1 : 3, e);
        }
        free(got);
    }
    return want;
}

/* Runs h's graph on every backend and expects a compute error whose message has `needle`. */
static void expect_error(harness *h, ts_tensor *out, const char *needle) {
    ts_error err = {0};
    assert_non_null(out);
    ts_graph_output(h->g, out);
    ts_backend *bs[3] = {g_ref, g_cpu[0], g_cpu[1]};
    for (int i = 0; i < 3; i++) {
        memset(&err, 0, sizeof err);
        float *got = h_run(h, bs[i], out, &err);
        if (got != NULL) {
            fail_msg("backend %d: expected an error with '%s'", i, needle);
        }
        if (strstr(err.msg, needle) == NULL) {
            fail_msg("backend %d: error '%s' lacks '%s'", i, err.msg, needle);
        }
    }
}

static void test_topk_semantics(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 1);
    int64_t ne[2] = {6, 2};
    ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
    float v[12] = {1, 3, 3, NAN, 2, -INFINITY, /* row 1 */ 0, 0, 0, 5, NAN, 0};
    ts_error err = {0};
    assert_int_equal(ts_backend_tensor_set(g_ref, a, 0, v, sizeof v, &err), TS_OK);
    float *got = check(&h, ts_op_topk(h.g, a, 6), 0.0, "TOPK semantics");
    int want[12] = {1, 2, 4, 0, 5, 3, /* row 1 */ 3, 0, 1, 2, 5, 4};
    for (int i = 0; i < 12; i++) {
        assert_int_equal((int)got[i], want[i]);
    }
    free(got);
    h_free(&h);
}

static void test_topk(void **state) {
    (void)state;
    int64_t ns[4] = {4, 8, 60, 128};
    int ks[4] = {1, 2, 8, 8};
    for (int i = 0; i < 4; i++) {
        for (int strided = 0; strided < 2; strided++) {
            harness h;
            h_init(&h, g_ref, 10 + (uint64_t)(i * 2 + strided));
            int64_t rows = 37;
            ts_tensor *a;
            if (strided) {
                int64_t ne[2] = {rows, ns[i]};
                a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
                h_fill(&h, a, 1.0f);
                a = ts_op_transpose(h.g, a);
            } else {
                int64_t ne[2] = {ns[i], rows};
                a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
                /* Few distinct values: many ties, which go by index. */
                int64_t cnt = ns[i] * rows;
                float *v = malloc((size_t)cnt * sizeof *v);
                for (int64_t j = 0; j < cnt; j++) {
                    v[j] = floorf(h_rand(&h) * 3.0f);
                }
                ts_error err = {0};
                assert_int_equal(ts_backend_tensor_set_f32(g_ref, a, v, cnt, &err), TS_OK);
                free(v);
            }
            char what[64];
            snprintf(what, sizeof what, "TOPK n=%lld k=%d%s", (long long)ns[i], ks[i],
                     strided ? " (transposed)" : " (ties)");
            free(check(&h, ts_op_topk(h.g, a, ks[i]), 0.0, what));
            h_free(&h);
        }
    }
}

static void test_gather(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 30);
    int64_t ane[3] = {9, 5, 3}, ine[3] = {4, 5, 3};
    ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 3, ane);
    h_fill(&h, a, 1.0f);
    ts_tensor *idx = h_param(&h, "idx", TS_TYPE_I32, 3, ine);
    int32_t iv[60];
    for (int i = 0; i < 60; i++) {
        iv[i] = (i * 7 + 3) % 9;
    }
    h_set_i32(&h, idx, iv, 60);
    float *got = check(&h, ts_op_gather(h.g, a, idx), 0.0, "GATHER");
    /* out[j, r] = a[idx[j, r], r], read back from the parameter. */
    float av[135];
    ts_error err = {0};
    assert_int_equal(ts_backend_tensor_get_f32(g_ref, a, av, 135, &err), TS_OK);
    for (int r = 0; r < 15; r++) {
        for (int j = 0; j < 4; j++) {
            assert_true(got[r * 4 + j] == av[r * 9 + iv[r * 4 + j]]);
        }
    }
    free(got);
    h_free(&h);

    h_init(&h, g_ref, 31);
    a = h_param(&h, "a", TS_TYPE_F32, 3, ane);
    idx = h_param(&h, "idx", TS_TYPE_I32, 3, ine);
    iv[17] = 9;
    h_set_i32(&h, idx, iv, 60);
    expect_error(&h, ts_op_gather(h.g, a, idx), "index 9");
    h_free(&h);
}

static void test_sigmoid(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 40);
    int64_t ne[2] = {67, 5};
    ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
    h_fill(&h, a, 8.0f);
    free(check(&h, ts_op_sigmoid(h.g, a), 1e-6, "SIGMOID"));
    h_free(&h);
}

/* LOG of sigmoid scores (what renormalizes sigmoid expert weights): CPU vs ref, and the ref
 * against log(1 / (1 + exp(-x))) of the inputs, and on a few exact values. */
static void test_log(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 41);
    int64_t ne[2] = {67, 5};
    ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
    h_fill(&h, a, 8.0f);
    float *got = check(&h, ts_op_log(h.g, ts_op_sigmoid(h.g, a)), 1e-6, "LOG(SIGMOID)");
    float av[335];
    ts_error err = {0};
    assert_int_equal(ts_backend_tensor_get_f32(g_ref, a, av, 335, &err), TS_OK);
    for (int i = 0; i < 335; i++) {
        double want = -log1p(exp(-(double)av[i]));
        assert_true(fabs(got[i] - want) <= 1e-6 * (1.0 + fabs(want)));
    }
    free(got);
    h_free(&h);

    h_init(&h, g_ref, 42);
    int64_t ne1[1] = {3};
    ts_tensor *z = h_param(&h, "z", TS_TYPE_F32, 1, ne1);
    float zv[3] = {1.0f, 0.5f, 1e-30f};
    assert_int_equal(ts_backend_tensor_set_f32(g_ref, z, zv, 3, &err), TS_OK);
    got = check(&h, ts_op_log(h.g, z), 1e-7, "LOG");
    assert_true(got[0] == 0.0f);
    assert_true(fabs(got[1] - log(0.5)) < 1e-7);
    assert_true(fabs(got[2] - log(1e-30)) < 1e-5);
    free(got);
    h_free(&h);
}

static double matmul_tol(ts_type vt) {
    switch (vt) {
    case TS_TYPE_F32:
        return 1e-5;
    case TS_TYPE_F16:
        return 2e-3;
    default:
        return 1e-2;
    }
}

/* Expert ids for n_tok tokens, n_used distinct experts each, drawn from `pool` (experts not in
 * it get no token). */
static void make_ids(harness *h, int32_t *ids, int64_t n_tok, int n_used, const int *pool,
                     int n_pool) {
    for (int64_t t = 0; t < n_tok; t++) {
        for (int e = 0; e < n_used; e++) {
            int32_t x;
            bool dup;
            do {
                x = pool[(int)((h_rand(h) * 0.5f + 0.5f) * (float)n_pool) % n_pool];
                dup = false;
                for (int f = 0; f < e; f++) {
                    dup = dup || ids[t * n_used + f] == x;
                }
            } while (dup);
            ids[t * n_used + e] = x;
        }
    }
}

/* One MUL_MAT_ID case; returns the reference output. */
static float *run_case(ts_type type, int64_t k, int64_t n, int64_t n_exp, int n_used, int64_t n_tok,
                       bool x_per_slot, bool strided, bool constant, uint64_t seed, double tol,
                       int32_t *ids_out, float **w_out, float **x_out) {
    harness h;
    h_init(&h, g_ref, seed);
    int64_t wne[3] = {k, n, n_exp};
    ts_tensor *w = h_param(&h, "w", type, 3, wne);
    h_fill(&h, w, 1.0f);
    if (constant) {
        h.bufs[h.n_bufs - 1]->constant = true;
    }
    int64_t xu = x_per_slot ? n_used : 1;
    ts_tensor *x;
    if (strided) {
        int64_t ne[3] = {xu, k, n_tok};
        x = h_param(&h, "x", TS_TYPE_F32, 3, ne);
        h_fill(&h, x, 1.0f);
        x = ts_op_permute(h.g, x, 1, 0, 2, 3);
    } else {
        int64_t ne[3] = {k, xu, n_tok};
        x = h_param(&h, "x", TS_TYPE_F32, 3, ne);
        h_fill(&h, x, 1.0f);
    }
    int64_t ine[2] = {n_used, n_tok};
    ts_tensor *ids = h_param(&h, "ids", TS_TYPE_I32, 2, ine);
    int pool[3] = {0, 2, (int)n_exp - 1}; /* the others get no token */
    int32_t *iv = malloc((size_t)(n_used * n_tok) * sizeof *iv);
    make_ids(&h, iv, n_tok, n_used, pool, 3);
    h_set_i32(&h, ids, iv, n_used * n_tok);
    char what[128];
    snprintf(what, sizeof what, "MUL_MAT_ID %s k=%lld n=%lld exp=%lld used=%d tok=%lld%s%s%s",
             ts_type_name(type), (long long)k, (long long)n, (long long)n_exp, n_used,
             (long long)n_tok, x_per_slot ? " x/slot" : "", strided ? " strided" : "",
             constant ? " const" : "");
    float *want = check(&h, ts_op_mul_mat_id(h.g, w, x, ids), tol, what);
    if (ids_out != NULL) {
        memcpy(ids_out, iv, (size_t)(n_used * n_tok) * sizeof *iv);
        ts_error err = {0};
        *w_out = malloc((size_t)(k * n * n_exp) * sizeof(float));
        *x_out = malloc((size_t)(k * xu * n_tok) * sizeof(float));
        assert_int_equal(ts_backend_tensor_get_f32(g_ref, w, *w_out, k * n * n_exp, &err), TS_OK);
        assert_int_equal(ts_backend_tensor_get_f32(g_ref, x, *x_out, k * xu * n_tok, &err), TS_OK);
    }
    free(iv);
    h_free(&h);
    return want;
}

/* The reference against the definition, computed here in double. */
/* SWIGLU_OAI (gpt-oss): CPU against the reference, with gate and up values beyond the limit
 * on both sides, and the reference against the definition at chosen points (the clamps: gate
 * only from above, up from both sides). A bad limit does not build. */
static void test_swiglu_oai(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 41);
    int64_t ne[3] = {37, 3, 4};
    ts_tensor *gt = h_param(&h, "gate", TS_TYPE_F32, 3, ne);
    ts_tensor *up = h_param(&h, "up", TS_TYPE_F32, 3, ne);
    h_fill(&h, gt, 12.0f);
    h_fill(&h, up, 12.0f);
    float *want = check(&h, ts_op_swiglu_oai(h.g, gt, up, 1.702f, 7.0f), 1e-6, "SWIGLU_OAI");
    const float *gv = gt->data, *uv = up->data;
    int clamped = 0;
    for (int64_t i = 0; i < 37 * 3 * 4; i++) {
        double x = gv[i] < 7.0f ? gv[i] : 7.0;
        double y = uv[i] < -7.0f ? -7.0 : (uv[i] > 7.0f ? 7.0 : uv[i]);
        double d = (y + 1.0) * x / (1.0 + exp(-1.702 * x));
        clamped += gv[i] > 7.0f || uv[i] > 7.0f || uv[i] < -7.0f;
        assert_float_equal(want[i], d, 1e-5 * (1.0 + fabs(d)));
    }
    assert_true(clamped > 20);
    free(want);
    assert_null(ts_op_swiglu_oai(h.g, gt, up, 1.702f, 0.0f));
    h_free(&h);
}

static void test_mul_mat_id_definition(void **state) {
    (void)state;
    const int64_t k = 24, n = 7, n_exp = 5, n_tok = 9;
    const int n_used = 2;
    for (int per_slot = 0; per_slot < 2; per_slot++) {
        int32_t ids[18];
        float *w, *x;
        float *got = run_case(TS_TYPE_F32, k, n, n_exp, n_used, n_tok, per_slot, false, false,
                              60 + (uint64_t)per_slot, 1e-5, ids, &w, &x);
        for (int64_t t = 0; t < n_tok; t++) {
            for (int e = 0; e < n_used; e++) {
                int64_t xe = per_slot ? e : 0, xu = per_slot ? n_used : 1;
                for (int64_t i = 0; i < n; i++) {
                    double acc = 0;
                    for (int64_t kk = 0; kk < k; kk++) {
                        acc += (double)w[(ids[t * n_used + e] * n + i) * k + kk] *
                               x[(t * xu + xe) * k + kk];
                    }
                    assert_true(fabs(got[(t * n_used + e) * n + i] - acc) < 1e-5);
                }
            }
        }
        free(got);
        free(w);
        free(x);
    }
}

static void test_mul_mat_id_types(void **state) {
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
        int64_t k = bs >= 256 ? bs : 2 * (bs > 32 ? bs : 32);
        int64_t toks[4] = {1, 2, 7, 64};
        for (int ti = 0; ti < 4; ti++) {
            bool odd = ti % 2 == 1;
            /* n = 48 with constant weights: whole groups of 16 rows, which may be repacked. */
            int64_t n = ti == 3 ? 48 : odd ? 37 : 32;
            free(run_case((ts_type)id, k, n, 6, 2 + ti % 2, toks[ti], odd, ti == 2, ti == 3,
                          100 + id * 8 + (uint64_t)ti, matmul_tol(ops->vec_dot_type), NULL, NULL,
                          NULL));
        }
        tested++;
    }
    assert_true(tested >= 8);
    size_t bytes = 0;
    double ms = 0;
    ts_cpu_backend_repacked(g_cpu[0], &bytes, &ms);
    printf("  repacked expert weights: %zu bytes\n", bytes);
}

/* An expert FFN in one graph: gate and up over the same activations and ids (the CPU's up
 * reuses the gate's grouping and conversion when their activation types agree), a dense
 * MUL_MAT in between, and down over the SWIGLU output. Gate / up types: equal, different with
 * the same activation type (Q4_0, Q8_0: Q8_0), different activation types (Q4_K, Q8_0). */
static void test_mul_mat_id_ffn(void **state) {
    (void)state;
    const ts_type gate_up[3][2] = {
        {TS_TYPE_Q4_0, TS_TYPE_Q4_0}, {TS_TYPE_Q4_0, TS_TYPE_Q8_0}, {TS_TYPE_Q4_K, TS_TYPE_Q8_0}};
    const int64_t toks[2] = {1, 23};
    for (int c = 0; c < 3; c++) {
        for (int ti = 0; ti < 2; ti++) {
            harness h;
            h_init(&h, g_ref, 80 + (uint64_t)(c * 2 + ti));
            int64_t E = 256, F = 64, X = 5, U = 2, T = toks[ti];
            int64_t gne[3] = {E, F, X}, dne[3] = {F, E, X}, xne[3] = {E, 1, T}, ine[2] = {U, T};
            int64_t qne[2] = {E, 16};
            ts_tensor *wg = h_param(&h, "wg", gate_up[c][0], 3, gne);
            ts_tensor *wu = h_param(&h, "wu", gate_up[c][1], 3, gne);
            ts_tensor *wd = h_param(&h, "wd", TS_TYPE_Q8_0, 3, dne);
            ts_tensor *wq = h_param(&h, "wq", TS_TYPE_Q4_0, 2, qne);
            ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 3, xne);
            ts_tensor *ids = h_param(&h, "ids", TS_TYPE_I32, 2, ine);
            h_fill(&h, wg, 1.0f);
            h_fill(&h, wu, 1.0f);
            h_fill(&h, wd, 1.0f);
            h_fill(&h, wq, 1.0f);
            h_fill(&h, x, 1.0f);
            int32_t iv[46];
            int pool[4] = {0, 1, 3, 4};
            make_ids(&h, iv, T, (int)U, pool, 4);
            h_set_i32(&h, ids, iv, U * T);
            ts_tensor *g = ts_op_mul_mat_id(h.g, wg, x, ids);
            int64_t x2[2] = {E, T};
            ts_tensor *q = ts_op_mul_mat(h.g, wq, ts_op_reshape(h.g, x, 2, x2)); /* [16, T] */
            ts_tensor *u = ts_op_mul_mat_id(h.g, wu, x, ids);
            ts_tensor *d = ts_op_mul_mat_id(h.g, wd, ts_op_swiglu(h.g, g, u), ids);
            ts_graph_output(h.g, q);
            char what[96];
            snprintf(what, sizeof what, "MUL_MAT_ID FFN gate %s up %s tok=%lld",
                     ts_type_name(gate_up[c][0]), ts_type_name(gate_up[c][1]), (long long)T);
            free(check(&h, d, 2e-2, what));
            h_free(&h);
        }
    }
}

static void test_mul_mat_id_bad_id(void **state) {
    (void)state;
    harness h;
    h_init(&h, g_ref, 70);
    int64_t wne[3] = {32, 8, 4}, xne[3] = {32, 1, 3}, ine[2] = {2, 3};
    ts_tensor *w = h_param(&h, "w", TS_TYPE_F32, 3, wne);
    ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 3, xne);
    ts_tensor *ids = h_param(&h, "ids", TS_TYPE_I32, 2, ine);
    int32_t iv[6] = {0, 1, 2, 3, 4, 0};
    h_set_i32(&h, ids, iv, 6);
    expect_error(&h, ts_op_mul_mat_id(h.g, w, x, ids), "expert id 4");
    h_free(&h);
    /* Shapes the op rejects at build time. */
    h_init(&h, g_ref, 71);
    w = h_param(&h, "w", TS_TYPE_F32, 3, wne);
    int64_t x2[3] = {32, 3, 3};
    x = h_param(&h, "x", TS_TYPE_F32, 3, x2);
    ids = h_param(&h, "ids", TS_TYPE_I32, 2, ine);
    assert_null(ts_op_mul_mat_id(h.g, w, x, ids));
    ts_error err = {0};
    assert_int_equal(ts_graph_status(h.g, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "must be [32, 1 or 2, 3]"));
    h_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_semantics),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_sigmoid),
        cmocka_unit_test(test_swiglu_oai),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_mul_mat_id_definition),
        cmocka_unit_test(test_mul_mat_id_types),
        cmocka_unit_test(test_mul_mat_id_ffn),
        cmocka_unit_test(test_mul_mat_id_bad_id),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
