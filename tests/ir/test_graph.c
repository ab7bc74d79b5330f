/*
 * test_graph.c — graph building: sticky, descriptive build errors; dynamic dimensions;
 * views with offsets read back through the backend; unbound parameters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backends/ref/ref.h"
#include "ir/backend.h"

static void test_sticky_errors(void **state) {
    (void)state;
    ts_error err = {0};
    ts_graph *g = NULL;
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    int64_t wn[2] = {32, 8}, xn[2] = {16, 3};
    ts_tensor *w = ts_graph_param(g, "blk.0.w", TS_TYPE_F32, 2, wn);
    ts_tensor *x = ts_graph_input(g, "x", TS_TYPE_F32, 2, xn);
    ts_tensor *y = ts_op_mul_mat(g, w, x);
    assert_null(y);
    assert_null(ts_op_silu(g, y)); /* NULL propagates, first error kept */
    assert_null(ts_op_reshape(g, x, 1, (int64_t[]){47}));
    assert_int_equal(ts_graph_build(g, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "MUL_MAT"));
    assert_non_null(strstr(err.msg, "'blk.0.w' [32, 8, 1, 1]"));
    assert_non_null(strstr(err.msg, "'x' [16, 3, 1, 1]"));
    ts_graph_destroy(g);

    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    int64_t qn[2] = {40, 2};
    assert_null(ts_graph_param(g, "q", TS_TYPE_Q4_0, 2, qn));
    assert_int_equal(ts_graph_build(g, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "block size 32"));
    ts_graph_destroy(g);

    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    ts_graph_input(g, "unused", TS_TYPE_F32, 2, xn);
    assert_int_equal(ts_graph_build(g, &err), TS_ERR_STATE); /* no outputs */
    ts_graph_destroy(g);
}

static void test_dynamic_dims(void **state) {
    (void)state;
    ts_error err = {0};
    ts_graph *g = NULL;
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    int sym = ts_graph_dim(g, "n_tokens", 6);
    int64_t xn[2] = {4, 6}, wn[2] = {4, 5};
    ts_tensor *x = ts_tensor_dynamic(g, ts_graph_input(g, "x", TS_TYPE_F32, 2, xn), 1, sym);
    ts_tensor *w = ts_graph_param(g, "w", TS_TYPE_F32, 2, wn);
    ts_tensor *y = ts_op_mul_mat(g, w, x);                         /* [5, T] */
    ts_tensor *r = ts_op_reshape(g, y, 3, (int64_t[]){5, 1, 6});   /* T moves to dim 2 */
    ts_tensor *t = ts_op_transpose(g, ts_op_cont(g, ts_op_reshape(g, r, 2, (int64_t[]){5, 6})));
    assert_non_null(t);
    assert_int_equal(r->dyn[2], sym);
    assert_int_equal(t->dyn[0], sym);
    assert_null(ts_op_reshape(g, y, 1, (int64_t[]){30})); /* merges the dynamic dim */
    ts_error e2 = {0};
    assert_int_equal(ts_graph_status(g, &e2), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(e2.msg, "dynamic"));
    ts_graph_destroy(g);

    /* Run with 2 of 6 tokens: only the first 2 columns are computed and read back. */
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    sym = ts_graph_dim(g, "n_tokens", 6);
    x = ts_tensor_dynamic(g, ts_graph_input(g, "x", TS_TYPE_F32, 2, xn), 1, sym);
    ts_tensor *s = ts_graph_output(g, ts_op_scale(g, x, 2.0f));
    assert_int_equal(ts_graph_build(g, &err), TS_OK);
    assert_int_equal(ts_graph_set_dim(g, sym, 0, &err), TS_ERR_RANGE);
    assert_int_equal(ts_graph_set_dim(g, sym, 2, &err), TS_OK);
    assert_int_equal(s->ne[1], 2);
    ts_backend *ref = NULL;
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    assert_int_equal(ts_graph_alloc(g, ref, &err), TS_OK);
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    assert_int_equal(ts_backend_tensor_set(ref, x, 0, in, sizeof in, &err), TS_OK);
    assert_int_equal(ts_graph_compute(g, ref, NULL, &err), TS_OK);
    assert_int_equal(ts_backend_tensor_get_f32(ref, s, out, 8, &err), TS_OK);
    for (int i = 0; i < 8; i++) {
        assert_float_equal(out[i], 2.0f * in[i], 0.0f);
    }
    assert_int_equal(ts_backend_tensor_get_f32(ref, s, out, 12, &err), TS_ERR_RANGE);
    ts_graph_destroy(g);
    ts_backend_destroy(ref);
}

static void test_views_and_binding(void **state) {
    (void)state;
    ts_error err = {0};
    ts_backend *ref = NULL;
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    ts_graph *g = NULL;
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    int64_t pn[2] = {4, 3};
    ts_tensor *p = ts_graph_param(g, "p", TS_TYPE_F32, 2, pn);
    /* Row 1 and 2 of p, as a view at an offset. */
    ts_tensor *v = ts_op_view(g, p, 2, (int64_t[]){4, 2}, NULL, 4 * sizeof(float));
    assert_null(ts_op_view(g, p, 2, (int64_t[]){4, 3}, NULL, 4));
    ts_graph_destroy(g);

    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    p = ts_graph_param(g, "p", TS_TYPE_F32, 2, pn);
    v = ts_op_view(g, p, 2, (int64_t[]){4, 2}, NULL, 4 * sizeof(float));
    ts_tensor *y = ts_graph_output(g, ts_op_add(g, v, v));
    assert_int_equal(ts_graph_build(g, &err), TS_OK);
    assert_int_equal(ts_graph_alloc(g, ref, &err), TS_OK);
    assert_int_equal(ts_graph_compute(g, ref, NULL, &err), TS_ERR_STATE);
    assert_non_null(strstr(err.msg, "'p'"));
    ts_buffer *buf = NULL;
    assert_int_equal(ts_backend_buffer_alloc(ref, 128, &buf, &err), TS_OK);
    assert_int_equal(ts_tensor_bind(p, buf, 100, &err), TS_ERR_RANGE);
    assert_int_equal(ts_tensor_bind(p, buf, 16, &err), TS_OK);
    float vals[12];
    for (int i = 0; i < 12; i++) {
        vals[i] = (float)i;
    }
    assert_int_equal(ts_backend_tensor_set(ref, p, 0, vals, sizeof vals, &err), TS_OK);
    assert_int_equal(ts_graph_compute(g, ref, NULL, &err), TS_OK);
    float got[8];
    /* Reading the view at an offset sees p's rows 1..2. */
    assert_int_equal(ts_backend_tensor_get(ref, v, 4, got, 4, &err), TS_OK);
    assert_float_equal(got[0], 5.0f, 0.0f);
    assert_int_equal(ts_backend_tensor_get_f32(ref, y, got, 8, &err), TS_OK);
    for (int i = 0; i < 8; i++) {
        assert_float_equal(got[i], 2.0f * (float)(i + 4), 0.0f);
    }
    assert_int_equal(ts_backend_tensor_get(ref, v, 30, got, 4, &err), TS_ERR_RANGE);
    ts_graph_destroy(g);
    ts_backend_buffer_free(ref, buf);
    ts_backend_destroy(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sticky_errors),
        cmocka_unit_test(test_dynamic_dims),
        cmocka_unit_test(test_views_and_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
