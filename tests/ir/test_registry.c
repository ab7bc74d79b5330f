/*
 * test_registry.c — functional registry: defaults, selection, GGUF-style override strings,
 * CLI parsing, scoped push/pop, errors listing the choices, dispatch from functionals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/functional.h"
#include "ir/registry.h"

static const char *active(ts_registry *r, const char *fam) {
    const char *name = NULL;
    assert_non_null(ts_registry_get(r, fam, &name));
    return name;
}

static void test_defaults_and_select(void **state) {
    (void)state;
    ts_error err = {0};
    ts_registry *r = NULL;
    assert_int_equal(ts_registry_create(&r, &err), TS_OK);
    assert_string_equal(active(r, "attention"), "paged");
    assert_string_equal(active(r, "matmul"), "direct");
    assert_string_equal(active(r, "norm"), "fused");
    assert_int_equal(ts_registry_select(r, "attention", "decomposed", &err), TS_OK);
    assert_string_equal(active(r, "attention"), "decomposed");
    assert_int_equal(ts_registry_select(r, "attention", "flash", &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "'flash'"));
    assert_non_null(strstr(err.msg, "choices: paged, decomposed"));
    assert_int_equal(ts_registry_select(r, "atention", "paged", &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "families: matmul, norm, glu, rope, attention"));
    assert_null(ts_registry_get(r, "nope", NULL));
    char desc[512];
    ts_registry_describe(r, desc, sizeof desc);
    assert_non_null(strstr(desc, "attention: paged decomposed*"));
    ts_registry_destroy(r);
}

static void test_apply_and_args(void **state) {
    (void)state;
    ts_error err = {0};
    ts_registry *r = NULL;
    assert_int_equal(ts_registry_create(&r, &err), TS_OK);
    /* GGUF metadata string: several pairs. */
    assert_int_equal(ts_registry_apply(r, "attention=decomposed, norm=separate",
                                       "GGUF tessera.overrides", &err), TS_OK);
    assert_string_equal(active(r, "attention"), "decomposed");
    assert_string_equal(active(r, "norm"), "separate");
    /* All or nothing: a bad pair leaves the earlier good one unapplied. */
    assert_int_equal(ts_registry_apply(r, "glu=separate;matmul=bogus", "GGUF tessera.overrides",
                                       &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "GGUF tessera.overrides"));
    assert_non_null(strstr(err.msg, "choices: direct, dequant"));
    assert_string_equal(active(r, "glu"), "fused");
    assert_int_equal(ts_registry_apply(r, "attention", "x", &err), TS_ERR_FORMAT);
    assert_int_equal(ts_registry_apply(r, "=paged", "x", &err), TS_ERR_FORMAT);
    /* CLI: both spellings consumed, other arguments kept in order. */
    char a0[] = "run", a1[] = "-m", a2[] = "model.gguf", a3[] = "--override",
         a4[] = "attention=paged", a5[] = "--override=glu=separate", a6[] = "-n";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, NULL};
    int argc = 7;
    assert_int_equal(ts_registry_parse_args(r, &argc, argv, &err), TS_OK);
    assert_int_equal(argc, 4);
    assert_string_equal(argv[1], "-m");
    assert_string_equal(argv[2], "model.gguf");
    assert_string_equal(argv[3], "-n");
    assert_string_equal(active(r, "attention"), "paged");
    assert_string_equal(active(r, "glu"), "separate");
    char b0[] = "run", b1[] = "--override";
    char *argv2[] = {b0, b1, NULL};
    argc = 2;
    assert_int_equal(ts_registry_parse_args(r, &argc, argv2, &err), TS_ERR_INVALID_ARG);
    ts_registry_destroy(r);
}

static void test_scopes(void **state) {
    (void)state;
    ts_error err = {0};
    ts_registry *r = NULL;
    assert_int_equal(ts_registry_create(&r, &err), TS_OK);
    assert_int_equal(ts_registry_pop(r, &err), TS_ERR_STATE);
    assert_int_equal(ts_registry_push(r, &err), TS_OK);
    assert_int_equal(ts_registry_select(r, "attention", "decomposed", &err), TS_OK);
    assert_int_equal(ts_registry_push(r, &err), TS_OK);
    assert_int_equal(ts_registry_select(r, "matmul", "dequant", &err), TS_OK);
    assert_int_equal(ts_registry_pop(r, &err), TS_OK);
    assert_string_equal(active(r, "matmul"), "direct");
    assert_string_equal(active(r, "attention"), "decomposed");
    assert_int_equal(ts_registry_pop(r, &err), TS_OK);
    assert_string_equal(active(r, "attention"), "paged");
    ts_registry_destroy(r);
}

static int custom_calls;
static ts_tensor *custom_matmul(ts_graph *g, ts_tensor *w, ts_tensor *x) {
    custom_calls++;
    return ts_op_mul_mat(g, w, x);
}

static void test_dispatch(void **state) {
    (void)state;
    ts_error err = {0};
    ts_registry *r = NULL;
    assert_int_equal(ts_registry_create(&r, &err), TS_OK);
    assert_int_equal(ts_registry_add(r, "matmul", "custom", (ts_impl_fn)custom_matmul, &err),
                     TS_OK);
    assert_int_equal(ts_registry_add(r, "matmul", "custom", (ts_impl_fn)custom_matmul, &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_registry_add(r, "bad name", "x", (ts_impl_fn)custom_matmul, &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_registry_apply(r, "matmul=custom norm=separate glu=separate", NULL, &err),
                     TS_OK);
    ts_graph *g = NULL;
    assert_int_equal(ts_graph_create(&g, r, &err), TS_OK);
    int64_t xn[2] = {32, 2}, wn[2] = {32, 16}, nn[1] = {32};
    ts_tensor *x = ts_graph_input(g, "x", TS_TYPE_F32, 2, xn);
    ts_tensor *h = ts_rms_norm(g, x, ts_graph_param(g, "nw", TS_TYPE_F32, 1, nn), 1e-5f);
    ts_tensor *w = ts_graph_param(g, "w", TS_TYPE_F32, 2, wn);
    ts_tensor *y = ts_glu(g, TS_GLU_SILU, ts_linear(g, h, w, NULL), ts_linear(g, h, w, NULL));
    ts_graph_output(g, y);
    assert_int_equal(ts_graph_build(g, &err), TS_OK);
    assert_int_equal(custom_calls, 2);
    int ops[TS_OP_COUNT] = {0};
    for (int i = 0; i < ts_graph_n_nodes(g); i++) {
        ops[ts_graph_node(g, i)->op]++;
    }
    assert_int_equal(ops[TS_OP_SWIGLU], 0);
    assert_int_equal(ops[TS_OP_SILU], 1);
    assert_int_equal(ops[TS_OP_MUL], 2); /* norm weight + glu */
    ts_graph_destroy(g);
    ts_registry_destroy(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_select),
        cmocka_unit_test(test_apply_and_args),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
