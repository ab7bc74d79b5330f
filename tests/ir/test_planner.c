/*
 * test_planner.c — the activation planner: no two simultaneously live tensors overlap, the
 * arena is smaller than the sum of all tensors, in-place reuse happens, and random graphs
 * computed in the planned arena give exactly the values of a direct evaluation.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/ref/ref.h"
#include "ir/backend.h"
#include "ir/functional.h"
#include "ir/plan.h"

/* Asserts the plan's invariants for g. */
static void check_plan(ts_graph *g) {
    const ts_plan *p = ts_graph_plan(g);
    assert_non_null(p);
    int n_nodes = ts_graph_n_nodes(g);
    int inplace = 0;
    for (int32_t i = 0; i < p->n_entries; i++) {
        const ts_plan_entry *a = &p->entries[i];
        assert_true(a->offset % TS_PLAN_ALIGN == 0);
        assert_true(a->offset + a->size <= p->peak_bytes);
        assert_true(a->first <= a->last);
        ts_tensor *t = ts_graph_tensor(g, a->tensor);
        assert_true(a->size >= ts_tensor_nbytes_max(t));
        if (t->flags & (TS_TENSOR_INPUT | TS_TENSOR_OUTPUT)) {
            assert_int_equal(a->last, n_nodes);
        }
        inplace += a->inplace_of >= 0;
        for (int32_t j = 0; j < p->n_entries; j++) {
            const ts_plan_entry *b = &p->entries[j];
            if (i == j) {
                continue;
            }
            bool live_together = a->first <= b->last && b->first <= a->last;
            bool handoff = (b->inplace_of == a->tensor && a->last == b->first) ||
                           (a->inplace_of == b->tensor && b->last == a->first);
            bool overlap = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            if (live_together && !handoff && overlap) {
                fail_msg("'%s' [%d, %d] @%zu+%zu overlaps '%s' [%d, %d] @%zu+%zu", t->name,
                         a->first, a->last, a->offset, a->size, ts_graph_tensor(g, b->tensor)->name,
                         b->first, b->last, b->offset, b->size);
            }
        }
    }
    (void)inplace;
}

/* A 4-layer llama-style decoder (weights unbound: planning needs shapes only). */
static void test_llama_plan(void **state) {
    (void)state;
    ts_error err = {0};
    ts_graph *g = NULL;
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    enum { D = 64, HD = 16, NH = 4, NKV = 2, FF = 128, T = 32, V = 100, BS = 16, NB = 8 };
    int sym = ts_graph_dim(g, "n_tokens", T);
    int64_t tn[1] = {T}, en[2] = {D, V}, dn[1] = {D}, bt[2] = {4, 2}, sn[1] = {2};
    ts_tensor *tok = ts_tensor_dynamic(g, ts_graph_input(g, "tokens", TS_TYPE_I32, 1, tn), 0, sym);
    ts_tensor *pos = ts_tensor_dynamic(g, ts_graph_input(g, "pos", TS_TYPE_I32, 1, tn), 0, sym);
    ts_tensor *seq = ts_tensor_dynamic(g, ts_graph_input(g, "seq", TS_TYPE_I32, 1, tn), 0, sym);
    ts_tensor *slot = ts_tensor_dynamic(g, ts_graph_input(g, "slot", TS_TYPE_I32, 1, tn), 0, sym);
    ts_tensor *table = ts_graph_input(g, "table", TS_TYPE_I32, 2, bt);
    ts_tensor *len = ts_graph_input(g, "len", TS_TYPE_I32, 1, sn);
    ts_tensor *x = ts_op_get_rows(g, ts_graph_param(g, "token_embd", TS_TYPE_Q8_0, 2, en), tok);
    for (int l = 0; l < 4; l++) {
        int64_t wq[2] = {D, D}, wkv[2] = {D, HD * NKV}, wg[2] = {D, FF}, wd[2] = {FF, D};
        int64_t cn[4] = {HD, NKV, BS, NB};
        ts_tensor *h = ts_rms_norm(g, x, ts_graph_param(g, "attn_norm", TS_TYPE_F32, 1, dn), 1e-5f);
        int64_t q3[3] = {HD, NH, T}, k3[3] = {HD, NKV, T}, d2[2] = {D, T};
        ts_tensor *q = ts_op_reshape(
            g, ts_linear(g, h, ts_graph_param(g, "wq", TS_TYPE_Q4_0, 2, wq), NULL), 3, q3);
        ts_tensor *k = ts_op_reshape(
            g, ts_linear(g, h, ts_graph_param(g, "wk", TS_TYPE_Q4_0, 2, wkv), NULL), 3, k3);
        ts_tensor *v = ts_op_reshape(
            g, ts_linear(g, h, ts_graph_param(g, "wv", TS_TYPE_Q4_0, 2, wkv), NULL), 3, k3);
        q = ts_rope(g, q, pos, HD, TS_ROPE_NEOX, 10000.0f, 1.0f);
        k = ts_rope(g, k, pos, HD, TS_ROPE_NEOX, 10000.0f, 1.0f);
        ts_tensor *kc =
            ts_op_kv_store(g, ts_graph_param(g, "k_cache", TS_TYPE_F16, 4, cn), k, slot);
        ts_tensor *vc =
            ts_op_kv_store(g, ts_graph_param(g, "v_cache", TS_TYPE_F16, 4, cn), v, slot);
        ts_attn_args a = {q, kc, vc, table, seq, pos, len, 0.25f, 0.0f, 0, NULL};
        ts_tensor *o = ts_op_reshape(g, ts_attention(g, &a), 2, d2);
        x = ts_op_add(g, x, ts_linear(g, o, ts_graph_param(g, "wo", TS_TYPE_Q4_0, 2, wq), NULL));
        h = ts_rms_norm(g, x, ts_graph_param(g, "ffn_norm", TS_TYPE_F32, 1, dn), 1e-5f);
        ts_tensor *gate = ts_linear(g, h, ts_graph_param(g, "wg", TS_TYPE_Q4_0, 2, wg), NULL);
        ts_tensor *up = ts_linear(g, h, ts_graph_param(g, "wu", TS_TYPE_Q4_0, 2, wg), NULL);
        ts_tensor *f = ts_glu(g, TS_GLU_SILU, gate, up);
        x = ts_op_add(g, x, ts_linear(g, f, ts_graph_param(g, "wd", TS_TYPE_Q4_0, 2, wd), NULL));
    }
    ts_tensor *logits = ts_linear(g, ts_rms_norm(g, x, NULL, 1e-5f),
                                  ts_graph_param(g, "output", TS_TYPE_Q8_0, 2, en), NULL);
    ts_graph_output(g, logits);
    if (ts_graph_build(g, &err) != TS_OK) {
        fail_msg("build: %s", err.msg);
    }
    check_plan(g);
    const ts_plan *p = ts_graph_plan(g);
    int inplace = 0;
    for (int32_t i = 0; i < p->n_entries; i++) {
        inplace += p->entries[i].inplace_of >= 0;
    }
    assert_true(inplace > 0);
    /* Reuse keeps the arena to a few layers' worth of activations. */
    assert_true(p->peak_bytes * 4 < p->naive_bytes);
    printf("  llama plan: %d nodes, peak %zu bytes, naive %zu bytes, %d in place\n",
           ts_graph_n_nodes(g), p->peak_bytes, p->naive_bytes, inplace);
    ts_graph_destroy(g);
}

/* Random DAGs of elementwise ops: planned execution equals direct evaluation exactly. */
static void test_random_dags(void **state) {
    (void)state;
    ts_error err = {0};
    ts_backend *ref = NULL;
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    uint64_t rng = 12345;
    for (int trial = 0; trial < 40; trial++) {
        enum { N = 24, MAXT = 64 };
        ts_graph *g = NULL;
        assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
        int64_t ne[2] = {8, 3};
        ts_tensor *t[MAXT];
        float val[MAXT][N];
        int nt = 0;
        for (int i = 0; i < 3; i++) {
            t[nt] = ts_graph_input(g, "in", TS_TYPE_F32, 2, ne);
            for (int k = 0; k < N; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                val[nt][k] = (float)((rng >> 40) % 2000) / 1000.0f - 1.0f;
            }
            nt++;
        }
        int n_ops = 10 + trial % 20;
        for (int i = 0; i < n_ops && nt < MAXT; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int a = (int)((rng >> 33) % (uint64_t)nt), b = (int)((rng >> 45) % (uint64_t)nt);
            int op = (int)((rng >> 20) % 4);
            for (int k = 0; k < N; k++) {
                double x = val[a][k], y = val[b][k];
                val[nt][k] = op == 0   ? (float)(val[a][k] + val[b][k])
                             : op == 1 ? (float)(val[a][k] * val[b][k])
                             : op == 2 ? (float)(x * 0.5f)
                                       : (float)(x / (1.0 + exp(-x)));
                (void)y;
            }
            t[nt] = op == 0   ? ts_op_add(g, t[a], t[b])
                    : op == 1 ? ts_op_mul(g, t[a], t[b])
                    : op == 2 ? ts_op_scale(g, t[a], 0.5f)
                              : ts_op_silu(g, t[a]);
            nt++;
            if (((rng >> 10) & 3) == 0) {
                ts_graph_output(g, t[nt - 1]);
            }
        }
        ts_graph_output(g, t[nt - 1]);
        assert_int_equal(ts_graph_build(g, &err), TS_OK);
        check_plan(g);
        assert_int_equal(ts_graph_alloc(g, ref, &err), TS_OK);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(ts_backend_tensor_set(ref, t[i], 0, val[i], sizeof val[i], &err),
                             TS_OK);
        }
        assert_int_equal(ts_graph_compute(g, ref, NULL, &err), TS_OK);
        for (int i = 3; i < nt; i++) {
            if (!(t[i]->flags & TS_TENSOR_OUTPUT)) {
                continue;
            }
            float got[N];
            assert_int_equal(ts_backend_tensor_get(ref, t[i], 0, got, sizeof got, &err), TS_OK);
            assert_memory_equal(got, val[i], sizeof got);
        }
        ts_graph_destroy(g);
    }
    ts_backend_destroy(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_plan),
        cmocka_unit_test(test_random_dags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
