/*
 * test_hooks.c — dump, profile and compare hooks. The compare test injects a broken kernel
 * (a test backend wrapping the CPU backend that perturbs one node's output) and checks that
 * the compare hook names exactly that node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cpu/cpu.h"
#include "backends/harness.h"
#include "backends/ref/ref.h"
#include "ir/functional.h"
#include "ir/hooks.h"

/* ---- a deliberately broken backend: cpu, but node `target` gets +1 at element 0 ---- */

typedef struct broken {
    ts_backend *cpu;
    const char *target;
    const ts_eval_cb *outer;
} broken;

static const char *br_name(void *c) {
    (void)c;
    return "broken-cpu";
}
static ts_status br_alloc(void *c, size_t s, ts_buffer **o, ts_error *e) {
    return ts_backend_buffer_alloc(((broken *)c)->cpu, s, o, e);
}
static void br_free(void *c, ts_buffer *b) {
    ts_backend_buffer_free(((broken *)c)->cpu, b);
}
static ts_status br_set(void *c, ts_buffer *b, size_t o, const void *s, size_t n, ts_error *e) {
    return ts_backend_buffer_set(((broken *)c)->cpu, b, o, s, n, e);
}
static ts_status br_get(void *c, ts_buffer *b, size_t o, void *d, size_t n, ts_error *e) {
    return ts_backend_buffer_get(((broken *)c)->cpu, b, o, d, n, e);
}
static bool br_supports(void *c, const ts_tensor *n) {
    return ts_backend_supports_op(((broken *)c)->cpu, n);
}
static bool br_before(ts_tensor *n, void *u) {
    broken *b = u;
    return b->outer == NULL || b->outer->before == NULL || b->outer->before(n, b->outer->user);
}
static bool br_after(ts_tensor *n, void *u) {
    broken *b = u;
    if (strcmp(n->name, b->target) == 0) {
        ((float *)n->data)[0] += 1.0f;
    }
    return b->outer == NULL || b->outer->after == NULL || b->outer->after(n, b->outer->user);
}
static ts_status br_compute(void *c, ts_graph *g, const ts_eval_cb *cb, ts_error *e) {
    broken *b = c;
    b->outer = cb;
    ts_eval_cb mine = {br_before, br_after, b};
    return b->cpu->iface->graph_compute(b->cpu->ctx, g, &mine, e);
}
static void br_destroy(void *c) {
    (void)c;
}
static const ts_backend_iface k_broken = {
    .name = br_name, .buffer_alloc = br_alloc, .buffer_free = br_free, .buffer_set = br_set,
    .buffer_get = br_get, .supports_op = br_supports, .graph_compute = br_compute,
    .destroy = br_destroy,
};

/* x -> rms_norm -> linear -> silu -> linear -> + x */
static ts_tensor *build_mlp(harness *h) {
    int64_t xn[2] = {32, 3}, w1n[2] = {32, 48}, w2n[2] = {48, 32}, nn[1] = {32};
    ts_tensor *x = h_param(h, "x", TS_TYPE_F32, 2, xn);
    ts_tensor *w1 = h_param(h, "w1", TS_TYPE_F16, 2, w1n);
    ts_tensor *w2 = h_param(h, "w2", TS_TYPE_F32, 2, w2n);
    ts_tensor *nw = h_param(h, "norm_w", TS_TYPE_F32, 1, nn);
    h_fill(h, x, 1.0f);
    h_fill(h, w1, 0.3f);
    h_fill(h, w2, 0.3f);
    h_fill(h, nw, 1.0f);
    ts_tensor *n = ts_rms_norm(h->g, x, nw, 1e-5f);
    ts_tensor_set_name(n, "attn_norm");
    ts_tensor *u = ts_linear(h->g, n, w1, NULL);
    ts_tensor_set_name(u, "ffn_up");
    ts_tensor *a = ts_op_silu(h->g, u);
    ts_tensor_set_name(a, "ffn_act");
    ts_tensor *d = ts_linear(h->g, a, w2, NULL);
    ts_tensor_set_name(d, "ffn_down");
    ts_tensor *y = ts_op_add(h->g, d, x);
    ts_tensor_set_name(y, "out");
    return ts_graph_output(h->g, y);
}

typedef struct fx {
    ts_backend *ref, *cpu;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    ts_error err = {0};
    ts_cpu_params p = {.n_threads = 2, .isa = -1};
    if (ts_ref_backend_create(&f->ref, &err) != TS_OK ||
        ts_cpu_backend_create(&p, &f->cpu, &err) != TS_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    ts_backend_destroy(f->ref);
    ts_backend_destroy(f->cpu);
    free(f);
    return 0;
}

static void test_compare_pinpoints_broken_node(void **state) {
    fx *f = *state;
    ts_error err = {0};
    broken br = {f->cpu, "ffn_act", NULL};
    ts_backend bad = {&k_broken, &br};
    ts_backend *cmp = NULL;
    assert_int_equal(ts_hook_compare_create(&bad, f->ref, 1e-3, &cmp, &err), TS_OK);
    harness h;
    h_init(&h, f->ref, 11);
    ts_tensor *y = build_mlp(&h);
    float *r = h_run(&h, cmp, y, &err);
    assert_non_null(r);
    free(r);
    const ts_compare_result *res = ts_hook_compare_result(cmp);
    assert_true(res->diverged);
    assert_string_equal(res->name, "ffn_act");
    assert_int_equal(res->op, TS_OP_SILU);
    assert_int_equal(ts_graph_node(h.g, res->node), ts_graph_find(h.g, "ffn_act"));
    assert_int_equal(res->index, 0);
    assert_true(res->max_abs > 0.99 && res->max_abs < 1.01);
    h_free(&h);
    ts_backend_destroy(cmp);

    /* The healthy CPU backend agrees with the reference on every node. */
    assert_int_equal(ts_hook_compare_create(f->cpu, f->ref, 1e-3, &cmp, &err), TS_OK);
    h_init(&h, f->ref, 11);
    y = build_mlp(&h);
    r = h_run(&h, cmp, y, &err);
    assert_non_null(r);
    free(r);
    res = ts_hook_compare_result(cmp);
    assert_false(res->diverged);
    assert_int_equal(res->compared, ts_graph_n_nodes(h.g));
    h_free(&h);
    ts_backend_destroy(cmp);
}

static void test_dump(void **state) {
    fx *f = *state;
    ts_error err = {0};
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    ts_backend *dump = NULL;
    assert_int_equal(ts_hook_dump_create(f->cpu, tmp, 4, &dump, &err), TS_OK);
    harness h;
    h_init(&h, f->ref, 12);
    ts_tensor *y = build_mlp(&h);
    float *r = h_run(&h, dump, y, &err);
    assert_non_null(r);
    rewind(tmp);
    char line[512];
    int lines = 0;
    bool saw_act = false;
    while (fgets(line, sizeof line, tmp) != NULL) {
        lines++;
        assert_non_null(strstr(line, "sum="));
        if (strstr(line, "ffn_act") != NULL) {
            saw_act = strstr(line, "SILU") != NULL && strstr(line, "[48, 3]") != NULL;
        }
        if (strstr(line, " out ") != NULL) {
            char want[32];
            snprintf(want, sizeof want, "[%.6g", r[0]);
            assert_non_null(strstr(line, want));
        }
    }
    assert_int_equal(lines, ts_graph_n_nodes(h.g));
    assert_true(saw_act);
    free(r);
    fclose(tmp);
    h_free(&h);
    ts_backend_destroy(dump);
}

static void test_profile(void **state) {
    fx *f = *state;
    ts_error err = {0};
    ts_backend *prof = NULL;
    assert_int_equal(ts_hook_profile_create(f->cpu, &prof, &err), TS_OK);
    harness h;
    h_init(&h, f->ref, 13);
    ts_tensor *y = build_mlp(&h);
    for (int i = 0; i < 2; i++) {
        float *r = h_run(&h, prof, y, &err);
        assert_non_null(r);
        free(r);
    }
    uint64_t ns = 0, count = 0;
    ts_hook_profile_op(prof, TS_OP_MUL_MAT, &ns, &count);
    assert_int_equal(count, 4);
    assert_true(ns > 0);
    FILE *tmp = tmpfile();
    ts_hook_profile_report(prof, tmp);
    rewind(tmp);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "| MUL_MAT | 4 |"));
    assert_non_null(strstr(buf, "ffn_act"));
    fclose(tmp);
    ts_hook_profile_reset(prof);
    ts_hook_profile_op(prof, TS_OP_MUL_MAT, &ns, &count);
    assert_int_equal(count, 0);
    h_free(&h);
    ts_backend_destroy(prof);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_pinpoints_broken_node),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
