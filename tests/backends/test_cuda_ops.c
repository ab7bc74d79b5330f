/*
 * test_cuda_ops.c — every op of the CUDA backend against the reference backend, on a CUDA
 * device; without one (or in a build without CUDA) the program reports itself not run.
 *
 * Tolerances (normalized RMS error against the reference, which computes in double):
 * element-wise and row ops 1e-5; GET_ROWS and copies from block types 0 (dequantization is
 * bit-exact with src/quant's to_float); MUL_MAT with float weights 1e-5 (F32) / 2e-3 (F16) /
 * 1e-2 (BF16), block types 1e-5 (the CUDA kernel multiplies the exact dequantized weights by
 * f32 activations; the CPU's 1e-2 comes from quantizing activations, which the GPU does not);
 * attention 1e-5 (f32 from the same cache values; a q8_0 cache is quantized like the
 * reference, checked through the output).
 *
 * Batch invariance: a MUL_MAT column and an ATTENTION token must come out bit for bit the
 * same alone and inside a larger batch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cuda_harness.h"
#include "backends/ref/ref.h"
#include "ir/functional.h"
#include "quant/quant.h"

#include "common/skip.h"

typedef struct fixture {
    ts_backend *ref;
    ts_backend *cuda;
} fixture;

static fixture *F;

static int setup(void **state) {
    (void)state;
    F = calloc(1, sizeof *F);
    ts_error err = {0};
    if (F == NULL || ts_ref_backend_create(&F->ref, &err) != TS_OK) {
        return -1;
    }
    if (ts_cuda_device_count() > 0 && ts_cuda_backend_create(NULL, &F->cuda, &err) != TS_OK) {
        fprintf(stderr, "cuda: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ts_backend_destroy(F->ref);
    ts_backend_destroy(F->cuda);
    free(F);
    return 0;
}

#define NEED_DEVICE()                                                                              \
    do {                                                                                           \
        if (F->cuda == NULL) {                                                                     \
            TS_SKIP("CUDA kernels: %s", ts_cuda_built() ? "no CUDA device on this machine"         \
                                                        : "built without CUDA (-DTS_CUDA=ON)");    \
        }                                                                                          \
    } while (0)

/* Runs h's graph on the reference and on CUDA; asserts nrmse(out) <= tol. Returns the CUDA
 * output (caller frees) for further checks. */
static float *check(harness *h, ts_tensor *out, double tol, const char *what) {
    ts_error err = {0};
    assert_non_null(out);
    float *want = h_run(h, F->ref, out, &err);
    if (want == NULL) {
        fail_msg("%s: ref: %s", what, err.msg);
    }
    float *got = h_run_cuda(h, F->cuda, out, &err);
    if (got == NULL) {
        fail_msg("%s: cuda: %s", what, err.msg);
    }
    int64_t n = ts_tensor_nelements(out);
    double e = h_nrmse(got, want, n);
    if (!(e <= tol)) {
        fail_msg("%s: nrmse %.3g > %.3g (max abs %.3g)", what, e, tol, h_max_abs(got, want, n));
    }
    free(want);
    return got;
}

static void check_free(harness *h, ts_tensor *out, double tol, const char *what) {
    free(check(h, out, tol, what));
}

/* A [ne0, ne1, ne2] f32 input filled with [-1, 1]; strided: a transposed view. */
static ts_tensor *input3(harness *h, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                         bool strided) {
    int64_t ne[3] = {strided ? ne1 : ne0, strided ? ne0 : ne1, ne2};
    ts_tensor *t = h_param(h, name, TS_TYPE_F32, 3, ne);
    h_fill(h, t, 1.0f);
    return strided ? ts_op_transpose(h->g, t) : t;
}

static const ts_type k_weight_types[] = {
    TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q4_0,   TS_TYPE_Q4_1,
    TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_Q8_0, TS_TYPE_Q2_K,   TS_TYPE_Q3_K,
    TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K, TS_TYPE_IQ4_NL, TS_TYPE_MXFP4,
};
#define N_WTYPES (sizeof k_weight_types / sizeof k_weight_types[0])

static double mm_tol(ts_type t) {
    return t == TS_TYPE_F16 ? 2e-3 : t == TS_TYPE_BF16 ? 1e-2 : 1e-5;
}

static void test_mul_mat_types(void **state) {
    (void)state;
    NEED_DEVICE();
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        ts_type id = k_weight_types[ti];
        int64_t bs = (int64_t)ts_type_block_size(id);
        int64_t k = bs >= 256 ? 2 * bs : 3 * (bs > 32 ? bs : 32);
        int64_t ms[3] = {1, 5, 70};
        for (int mi = 0; mi < 3; mi++) {
            for (int strided = 0; strided < 2; strided++) {
                harness h;
                h_init(&h, F->ref, (uint64_t)id * 31 + (uint64_t)mi * 7 + (uint64_t)strided);
                int64_t wne[2] = {k, 37};
                ts_tensor *w = h_param(&h, "w", id, 2, wne);
                h_fill(&h, w, 1.0f);
                ts_tensor *x = input3(&h, "x", k, ms[mi], 1, strided);
                char what[96];
                snprintf(what, sizeof what, "MUL_MAT %s k=%lld m=%lld%s", ts_type_name(id),
                         (long long)k, (long long)ms[mi], strided ? " (x transposed)" : "");
                check_free(&h, ts_op_mul_mat(h.g, w, x), mm_tol(id), what);
                h_free(&h);
            }
        }
    }
}

static void test_mul_mat_broadcast(void **state) {
    (void)state;
    NEED_DEVICE();
    ts_type types[2] = {TS_TYPE_F32, TS_TYPE_F16};
    for (int ti = 0; ti < 2; ti++) {
        harness h;
        h_init(&h, F->ref, 99 + (uint64_t)ti);
        int64_t wne[3] = {64, 2, 19};
        ts_tensor *wp = h_param(&h, "w", types[ti], 3, wne);
        h_fill(&h, wp, 1.0f);
        ts_tensor *w = ts_op_permute(h.g, wp, 0, 2, 1, 3);
        int64_t xne[4] = {64, 9, 6, 2};
        ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 4, xne);
        h_fill(&h, x, 1.0f);
        check_free(&h, ts_op_mul_mat(h.g, w, x), mm_tol(types[ti]), "MUL_MAT broadcast");
        h_free(&h);
    }
}

/* Column j of a product is the same bits whether the batch has 1 column or 70. */
static void test_mul_mat_batch_invariance(void **state) {
    (void)state;
    NEED_DEVICE();
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        ts_type id = k_weight_types[ti];
        int64_t k = 512, m_big = 70;
        float *col[2] = {NULL, NULL};
        for (int big = 0; big < 2; big++) {
            harness h;
            h_init(&h, F->ref, 4242);
            int64_t wne[2] = {k, 45};
            ts_tensor *w = h_param(&h, "w", id, 2, wne);
            h_fill(&h, w, 1.0f);
            int64_t xne[2] = {k, big ? m_big : 1};
            ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 2, xne);
            h_fill(&h, x, 1.0f); /* column 0 gets the same values either way */
            ts_error err = {0};
            ts_tensor *y = ts_op_mul_mat(h.g, w, x);
            col[big] = h_run_cuda(&h, F->cuda, y, &err);
            if (col[big] == NULL) {
                fail_msg("batch invariance %s: %s", ts_type_name(id), err.msg);
            }
            h_free(&h);
        }
        if (memcmp(col[0], col[1], 45 * sizeof(float)) != 0) {
            fail_msg("MUL_MAT %s: column 0 differs between a batch of 1 and of %lld",
                     ts_type_name(id), (long long)m_big);
        }
        free(col[0]);
        free(col[1]);
    }
}

static void test_get_rows(void **state) {
    (void)state;
    NEED_DEVICE();
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        ts_type id = k_weight_types[ti];
        harness h;
        h_init(&h, F->ref, 7 + (uint64_t)id);
        int64_t bs = (int64_t)ts_type_block_size(id);
        int64_t ne[2] = {bs * 2 > 64 ? bs * 2 : 64, 11};
        ts_tensor *a = h_param(&h, "a", id, 2, ne);
        h_fill(&h, a, 2.0f);
        int64_t ine[2] = {3, 2};
        ts_tensor *idx = h_param(&h, "idx", TS_TYPE_I32, 2, ine);
        int32_t iv[6] = {10, 0, -1, 5, 5, 3};
        h_set_i32(&h, idx, iv, 6);
        char what[64];
        snprintf(what, sizeof what, "GET_ROWS %s", ts_type_name(id));
        check_free(&h, ts_op_get_rows(h.g, a, idx), 0.0, what);
        h_free(&h);
    }
}

static void test_binary_unary_glu(void **state) {
    (void)state;
    NEED_DEVICE();
    int64_t bshapes[4][3] = {{13, 7, 3}, {13, 1, 3}, {1, 7, 1}, {13, 1, 1}};
    for (int op = 0; op < 2; op++) {
        for (int bi = 0; bi < 4; bi++) {
            harness h;
            h_init(&h, F->ref, 50 + (uint64_t)(op * 8 + bi));
            ts_tensor *a = input3(&h, "a", 13, 7, 3, bi & 1);
            ts_tensor *b = h_param(&h, "b", TS_TYPE_F32, 3, bshapes[bi]);
            h_fill(&h, b, 1.0f);
            check_free(&h, op ? ts_op_mul(h.g, a, b) : ts_op_add(h.g, a, b), 1e-6, "ADD/MUL");
            h_free(&h);
        }
    }
    for (int kind = 0; kind < 6; kind++) {
        harness h;
        h_init(&h, F->ref, 70 + (uint64_t)kind);
        ts_tensor *a = input3(&h, "a", 33, 5, 2, kind & 1);
        ts_tensor *s = ts_op_scale(h.g, a, 4.0f);
        ts_tensor *y = kind == 0   ? ts_op_scale(h.g, a, -1.75f)
                       : kind == 1 ? ts_op_silu(h.g, s)
                       : kind == 2 ? ts_op_gelu(h.g, s, TS_GELU_ERF)
                       : kind == 3 ? ts_op_gelu(h.g, s, TS_GELU_TANH)
                       : kind == 4 ? ts_op_sigmoid(h.g, s)
                                   : ts_op_log(h.g, ts_op_sigmoid(h.g, s));
        check_free(&h, y, 1e-5, "SCALE/SILU/GELU/SIGMOID/LOG");
        h_free(&h);
    }
    for (int kind = 0; kind < 4; kind++) {
        harness h;
        h_init(&h, F->ref, 80 + (uint64_t)kind);
        ts_tensor *g = ts_op_scale(h.g, input3(&h, "g", 45, 3, 1, kind == 1), 8.0f);
        ts_tensor *u = ts_op_scale(h.g, input3(&h, "u", 45, 3, 1, false), 8.0f);
        ts_tensor *y = kind == 0   ? ts_op_swiglu(h.g, g, u)
                       : kind == 3 ? ts_op_swiglu_oai(h.g, g, u, 1.702f, 7.0f)
                                   : ts_op_geglu(h.g, g, u, kind == 1 ? TS_GELU_ERF : TS_GELU_TANH);
        check_free(&h, y, 1e-5, "SWIGLU/GEGLU/SWIGLU_OAI");
        h_free(&h);
    }
}

static void test_norms_softmax(void **state) {
    (void)state;
    NEED_DEVICE();
    for (int kind = 0; kind < 4; kind++) {
        harness h;
        h_init(&h, F->ref, 90 + (uint64_t)kind);
        ts_tensor *a = input3(&h, "a", 577, 6, 2, kind & 1);
        int64_t wn[1] = {577};
        ts_tensor *w = h_param(&h, "w", TS_TYPE_F32, 1, wn);
        ts_tensor *b = h_param(&h, "b", TS_TYPE_F32, 1, wn);
        h_fill(&h, w, 1.0f);
        h_fill(&h, b, 1.0f);
        ts_tensor *y = kind < 2 ? ts_op_rms_norm(h.g, a, kind ? w : NULL, 1e-5f)
                                : ts_op_norm(h.g, a, w, kind == 3 ? b : NULL, 1e-5f);
        check_free(&h, y, 1e-5, "RMS_NORM/NORM");
        h_free(&h);
    }
    for (int kind = 0; kind < 4; kind++) {
        harness h;
        h_init(&h, F->ref, 110 + (uint64_t)kind);
        ts_tensor *a = input3(&h, "a", 300, 4, 3, false);
        int64_t mn[2] = {300, 4}, sn[1] = {3};
        ts_tensor *mask = h_param(&h, "mask", TS_TYPE_F32, 2, mn);
        h_fill(&h, mask, 1.0f);
        ts_tensor *sinks = h_param(&h, "sinks", TS_TYPE_F32, 1, sn);
        h_fill(&h, sinks, 2.0f);
        ts_tensor *y = ts_op_softmax_ext(h.g, a, kind & 1 ? mask : NULL, kind >= 2 ? sinks : NULL,
                                         3.0f, kind == 3 ? 2.5f : 0.0f);
        check_free(&h, y, 1e-5, "SOFTMAX");
        h_free(&h);
    }
}

static void test_rope(void **state) {
    (void)state;
    NEED_DEVICE();
    for (int c = 0; c < 8; c++) {
        harness h;
        h_init(&h, F->ref, 100 + (uint64_t)c);
        int64_t hd = 64, nh = 3, nt = 5;
        ts_tensor *x = input3(&h, "x", hd, nh, nt, false);
        int64_t pn[1] = {nt}, fn[1] = {24};
        ts_tensor *pos = h_param(&h, "pos", TS_TYPE_I32, 1, pn);
        int32_t pv[5] = {0, 1, 17, 5000, 131000};
        h_set_i32(&h, pos, pv, 5);
        ts_rope_params p = ts_rope_params_plain(c & 1 ? 48 : 64, (ts_rope_mode)(c & 1),
                                                c & 2 ? 500000.0f : 10000.0f);
        if (c & 2) { /* llama3 / long-rope style factors */
            p.n_rot = 48;
            p.freq_factors = h_param(&h, "ff", TS_TYPE_F32, 1, fn);
            h_fill(&h, p.freq_factors, 1.0f);
            ts_tensor *ff = p.freq_factors;
            float v[24];
            for (int i = 0; i < 24; i++) {
                v[i] = 1.0f + (float)i * 0.5f;
            }
            ts_error err = {0};
            ts_backend_tensor_set(F->ref, ff, 0, v, sizeof v, &err);
        }
        if (c & 4) { /* YaRN */
            p.freq_scale = 0.25f;
            p.ext_factor = 1.0f;
            p.attn_factor = 1.1f;
            float corr[2];
            ts_rope_yarn_corr_dims(p.n_rot, p.freq_base, 4096, 32.0f, 1.0f, corr);
            p.corr_lo = corr[0];
            p.corr_hi = corr[1];
        }
        check_free(&h, ts_op_rope_ext(h.g, x, pos, &p), 1e-5, "ROPE");
        h_free(&h);
    }
}

static void test_copies(void **state) {
    (void)state;
    NEED_DEVICE();
    ts_type to[4] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_BF16, TS_TYPE_Q8_0};
    for (int ti = 0; ti < 4; ti++) {
        harness h;
        h_init(&h, F->ref, 130 + (uint64_t)ti);
        ts_tensor *a = input3(&h, "a", 64, 6, 2, ti == 1);
        ts_tensor *c = ts_op_cast(h.g, a, to[ti]);
        check_free(&h, ts_op_cast(h.g, c, TS_TYPE_F32), 0.0, "CAST");
        h_free(&h);
    }
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        harness h;
        h_init(&h, F->ref, 140 + ti);
        int64_t ne[2] = {512, 3};
        ts_tensor *a = h_param(&h, "a", k_weight_types[ti], 2, ne);
        h_fill(&h, a, 1.0f);
        check_free(&h, ts_op_cast(h.g, ts_op_cont(h.g, a), TS_TYPE_F32), 0.0, "CONT/CAST blocks");
        h_free(&h);
    }
    harness h;
    h_init(&h, F->ref, 150);
    ts_tensor *a = input3(&h, "a", 20, 6, 2, true);
    ts_tensor *b = input3(&h, "b", 20, 3, 2, false);
    check_free(&h, ts_op_concat(h.g, ts_op_cont(h.g, a), b, 1), 0.0, "CONT + CONCAT");
    h_free(&h);
}

static void test_index_ops(void **state) {
    (void)state;
    NEED_DEVICE();
    harness h;
    h_init(&h, F->ref, 160);
    ts_tensor *a = input3(&h, "a", 129, 7, 2, false);
    check_free(&h, ts_op_argmax(h.g, a), 0.0, "ARGMAX");
    h_free(&h);
    h_init(&h, F->ref, 161);
    a = input3(&h, "a", 60, 9, 1, false);
    ts_tensor *top = ts_op_topk(h.g, a, 6);
    check_free(&h, top, 0.0, "TOPK");
    check_free(&h, ts_op_gather(h.g, a, top), 0.0, "GATHER");
    h_free(&h);
}

static void test_mul_mat_id(void **state) {
    (void)state;
    NEED_DEVICE();
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        for (int xu1 = 0; xu1 < 2; xu1++) {
            ts_type id = k_weight_types[ti];
            harness h;
            h_init(&h, F->ref, 170 + ti * 2 + (uint64_t)xu1);
            int64_t k = ts_type_block_size(id) >= 256 ? 256 : 64;
            int64_t wne[3] = {k, 24, 6}, ine[2] = {2, 9};
            ts_tensor *w = h_param(&h, "w", id, 3, wne);
            h_fill(&h, w, 1.0f);
            ts_tensor *x = input3(&h, "x", k, xu1 ? 1 : 2, 9, false);
            ts_tensor *ids = h_param(&h, "ids", TS_TYPE_I32, 2, ine);
            int32_t iv[18] = {0, 5, 3, 1, 5, 0, 2, 2, 4, 1, 0, 3, 5, 4, 1, 1, 3, 0};
            h_set_i32(&h, ids, iv, 18);
            char what[64];
            snprintf(what, sizeof what, "MUL_MAT_ID %s xu=%d", ts_type_name(id), xu1 ? 1 : 2);
            check_free(&h, ts_op_mul_mat_id(h.g, w, x, ids), mm_tol(id), what);
            h_free(&h);
        }
    }
}

/* ---- paged attention ---- */

enum { HD = 64, NH = 8, NKV = 2, BS = 16, NBLK = 80, MAXB = 40, NSEQ = 3 };

typedef struct attn_case {
    ts_type cache;
    float softcap;
    int window;
    bool sinks;
} attn_case;

/* Sequence 0: a 600-key history (two key chunks) decoding token 600; sequence 1: a 4-token
 * prefill from 0; sequence 2: 37 cached keys and 2 new tokens. n_tok = 7, or with `alone`
 * the decode token only (views of the same parameters), for batch invariance. The sequences'
 * blocks are disjoint, so the other tokens' stores cannot change what token 0 reads. */
static ts_tensor *attn_graph(harness *h, const attn_case *c, bool alone) {
    static const int32_t seq[7] = {0, 1, 1, 1, 1, 2, 2}, pos[7] = {600, 0, 1, 2, 3, 37, 38};
    int32_t len[NSEQ] = {601, 4, 39};
    int nt = 7;
    int32_t table[MAXB * NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        for (int b = 0; b < MAXB; b++) {
            table[s * MAXB + b] = s == 0 ? (b * 7 + 3) % 60 : (b < 3 ? 60 + s * 5 + b : -1);
        }
    }
    int64_t qn[3] = {HD, NH, nt}, rn[3] = {HD, NKV, nt}, cn[4] = {HD, NKV, BS, NBLK};
    int64_t tn[2] = {MAXB, NSEQ}, tok[1] = {nt}, sn[1] = {NSEQ}, hn[1] = {NH};
    ts_tensor *q = h_param(h, "q", TS_TYPE_F32, 3, qn);
    ts_tensor *kr = h_param(h, "k_new", TS_TYPE_F32, 3, rn);
    ts_tensor *vr = h_param(h, "v_new", TS_TYPE_F32, 3, rn);
    ts_tensor *kc = h_param(h, "k_cache", c->cache, 4, cn);
    ts_tensor *vc = h_param(h, "v_cache", c->cache, 4, cn);
    ts_tensor *tab = h_param(h, "table", TS_TYPE_I32, 2, tn);
    ts_tensor *st = h_param(h, "seq", TS_TYPE_I32, 1, tok);
    ts_tensor *pt = h_param(h, "pos", TS_TYPE_I32, 1, tok);
    ts_tensor *lt = h_param(h, "len", TS_TYPE_I32, 1, sn);
    ts_tensor *slots = h_param(h, "slots", TS_TYPE_I32, 1, tok);
    h_fill(h, q, 1.0f);
    h_fill(h, kr, 1.0f);
    h_fill(h, vr, 1.0f);
    h_fill(h, kc, 1.0f);
    h_fill(h, vc, 1.0f);
    int32_t sl[7];
    for (int t = 0; t < nt; t++) {
        sl[t] = table[seq[t] * MAXB + pos[t] / BS] * BS + pos[t] % BS;
    }
    h_set_i32(h, tab, table, MAXB * NSEQ);
    h_set_i32(h, st, seq, nt);
    h_set_i32(h, pt, pos, nt);
    h_set_i32(h, lt, len, NSEQ);
    h_set_i32(h, slots, sl, nt);
    if (alone) { /* the same parameters, token 0 only */
        int64_t q1[3] = {HD, NH, 1}, r1[3] = {HD, NKV, 1}, t1[1] = {1};
        q = ts_op_view(h->g, q, 3, q1, NULL, 0);
        kr = ts_op_view(h->g, kr, 3, r1, NULL, 0);
        vr = ts_op_view(h->g, vr, 3, r1, NULL, 0);
        st = ts_op_view(h->g, st, 1, t1, NULL, 0);
        pt = ts_op_view(h->g, pt, 1, t1, NULL, 0);
        slots = ts_op_view(h->g, slots, 1, t1, NULL, 0);
    }
    ts_tensor *ks = ts_op_kv_store(h->g, kc, kr, slots);
    ts_tensor *vs = ts_op_kv_store(h->g, vc, vr, slots);
    ts_tensor *sinks = NULL;
    if (c->sinks) {
        sinks = h_param(h, "sinks", TS_TYPE_F32, 1, hn);
        h_fill(h, sinks, 2.0f);
    }
    return ts_op_attention_ext(h->g, q, ks, vs, tab, st, pt, lt, sinks, 0.125f, c->softcap,
                               c->window);
}

static const attn_case k_attn_cases[] = {
    {TS_TYPE_F32, 0.0f, 0, false},  {TS_TYPE_F16, 0.0f, 0, false},   {TS_TYPE_Q8_0, 0.0f, 0, false},
    {TS_TYPE_F16, 30.0f, 0, false}, {TS_TYPE_F16, 0.0f, 100, false}, {TS_TYPE_F16, 0.0f, 0, true},
    {TS_TYPE_Q8_0, 20.0f, 3, true},
};

static void test_attention(void **state) {
    (void)state;
    NEED_DEVICE();
    for (size_t ci = 0; ci < sizeof k_attn_cases / sizeof k_attn_cases[0]; ci++) {
        harness h;
        h_init(&h, F->ref, 200 + ci);
        char what[96];
        snprintf(what, sizeof what, "ATTENTION case %zu (%s cache)", ci,
                 ts_type_name(k_attn_cases[ci].cache));
        float *all = check(&h, attn_graph(&h, &k_attn_cases[ci], false), 1e-5, what);
        h_free(&h);
        /* The decode token alone gives the same bits as inside the batch of 7. */
        h_init(&h, F->ref, 200 + ci);
        ts_error err = {0};
        ts_tensor *y = attn_graph(&h, &k_attn_cases[ci], true);
        float *one = h_run_cuda(&h, F->cuda, y, &err);
        if (one == NULL) {
            fail_msg("%s alone: %s", what, err.msg);
        }
        if (memcmp(one, all, HD * NH * sizeof(float)) != 0) {
            fail_msg("%s: token 0 differs alone and in a batch", what);
        }
        free(one);
        free(all);
        h_free(&h);
    }
}

static void test_attn_mask(void **state) {
    (void)state;
    NEED_DEVICE();
    harness h;
    h_init(&h, F->ref, 300);
    int64_t tok[1] = {4}, sn[1] = {2};
    ts_tensor *seq = h_param(&h, "seq", TS_TYPE_I32, 1, tok);
    ts_tensor *pos = h_param(&h, "pos", TS_TYPE_I32, 1, tok);
    ts_tensor *len = h_param(&h, "len", TS_TYPE_I32, 1, sn);
    int32_t sv[4] = {0, 0, 1, 1}, pv[4] = {5, 6, 0, 2}, lv[2] = {7, 3};
    h_set_i32(&h, seq, sv, 4);
    h_set_i32(&h, pos, pv, 4);
    h_set_i32(&h, len, lv, 2);
    check_free(&h, ts_op_attn_mask(h.g, seq, pos, len, 8, 3), 0.0, "ATTN_MASK");
    h_free(&h);
}

/* A bad index is a compute error naming the node, not a crash or silent garbage. */
static void test_faults(void **state) {
    (void)state;
    NEED_DEVICE();
    harness h;
    h_init(&h, F->ref, 400);
    int64_t ne[2] = {64, 5}, ine[1] = {2};
    ts_tensor *a = h_param(&h, "a", TS_TYPE_F32, 2, ne);
    ts_tensor *idx = h_param(&h, "idx", TS_TYPE_I32, 1, ine);
    int32_t iv[2] = {1, 5};
    h_set_i32(&h, idx, iv, 2);
    ts_tensor *y = ts_op_get_rows(h.g, a, idx);
    ts_tensor_set_name(y, "rows");
    ts_error err = {0};
    float *r = h_run_cuda(&h, F->cuda, y, &err);
    assert_null(r);
    assert_non_null(strstr(err.msg, "rows"));
    assert_non_null(strstr(err.msg, "past the 5 rows"));
    h_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_mat_types),
        cmocka_unit_test(test_mul_mat_broadcast),
        cmocka_unit_test(test_mul_mat_batch_invariance),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_binary_unary_glu),
        cmocka_unit_test(test_norms_softmax),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_index_ops),
        cmocka_unit_test(test_mul_mat_id),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attn_mask),
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
