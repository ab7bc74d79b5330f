/*
 * test_ops.c — the collective IR ops on the reference and CPU backends against values
 * computed here, for 1..3 ranks (threads, in-process communicator), F32 and F16, gathers and
 * scatters along an inner and an outer axis, and a dynamic token dimension run below its
 * maximum (so the kernels' staging paths run, not only the dense fast path). The CPU results
 * must equal the reference bit for bit (same communicator, same summation order).
 * Also: building errors (bad axis, non-dividing scatter, dynamic axis) and a graph run without
 * a communicator.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "ir/backend.h"
#include "parallel/comm.h"
#include "quant/quant.h"

#define E0   6 /* dim 0 */
#define TMAX 5 /* dynamic dim 1 */
#define E2   2 /* dim 2 */
#define TRUN 3 /* tokens of the run */

typedef struct rank_job {
    ts_comm *comm;
    bool cpu;
    ts_type type;
    float out[4][E0 * 3 * TMAX * E2]; /* the four ops' outputs, dense */
    ts_status st;
    ts_error err;
} rank_job;

static float in_val(int r, int64_t i0, int64_t i1, int64_t i2) {
    return (float)(((i0 * 5 + i1 * 3 + i2 * 7 + r * 11) % 17) - 8) * 0.25f;
}

static void *rank_main(void *arg) {
    rank_job *j = arg;
    int R = j->comm->size, r = j->comm->rank;
    ts_backend *b = NULL;
    ts_graph *g = NULL;
    ts_error *err = &j->err;
    ts_cpu_params p = ts_cpu_params_default();
    p.n_threads = 2;
    ts_status st = j->cpu ? ts_cpu_backend_create(&p, &b, err) : ts_ref_backend_create(&b, err);
    if (st == TS_OK) {
        st = ts_graph_create(&g, NULL, err);
    }
    ts_tensor *outs[4] = {0};
    ts_tensor *a = NULL;
    if (st == TS_OK) {
        int sym = ts_graph_dim(g, "T", TMAX);
        int64_t ne[3] = {E0, TMAX, E2};
        a = ts_tensor_dynamic(g, ts_graph_input(g, "a", j->type, 3, ne), 1, sym);
        outs[0] = ts_op_all_reduce_sum(g, a, 0, R);
        outs[1] = ts_op_all_gather(g, a, 0, 0, R);
        outs[2] = ts_op_all_gather(g, a, 2, 0, R);
        outs[3] = ts_op_reduce_scatter_sum(g, a, 0, 0, R);
        for (int k = 0; k < 4; k++) {
            ts_graph_output(g, outs[k]);
        }
        st = ts_graph_build(g, err);
    }
    if (st == TS_OK) {
        st = ts_graph_set_comm(g, 0, j->comm, err);
    }
    if (st == TS_OK) {
        st = ts_graph_alloc(g, b, err);
    }
    if (st == TS_OK) {
        st = ts_graph_set_dim(g, 0, TRUN, err);
    }
    if (st == TS_OK) {
        float v[E0 * TRUN * E2];
        int k = 0;
        for (int i2 = 0; i2 < E2; i2++) {
            for (int i1 = 0; i1 < TRUN; i1++) {
                for (int i0 = 0; i0 < E0; i0++) {
                    v[k++] = in_val(r, i0, i1, i2);
                }
            }
        }
        st = ts_backend_tensor_set_f32(b, a, v, k, err);
    }
    if (st == TS_OK) {
        st = ts_graph_compute(g, b, NULL, err);
    }
    for (int k = 0; st == TS_OK && k < 4; k++) {
        st = ts_backend_tensor_get_f32(b, outs[k], j->out[k], ts_tensor_nelements(outs[k]), err);
    }
    if (st != TS_OK) {
        ts_comm_fail(j->comm, err->msg);
    }
    j->st = st;
    ts_graph_destroy(g);
    ts_backend_destroy(b);
    return NULL;
}

static float rt(float v, ts_type t) {
    return t == TS_TYPE_F16 ? ts_f16_to_f32(ts_f32_to_f16(v)) : v;
}

static float sum_at(int R, int64_t i0, int64_t i1, int64_t i2, ts_type t) {
    float s = rt(in_val(0, i0, i1, i2), t);
    for (int k = 1; k < R; k++) {
        s += rt(in_val(k, i0, i1, i2), t);
    }
    return rt(s, t);
}

static void check_rank(const rank_job *j, int R, int r) {
    ts_type t = j->type;
    int bad = 0;
    int k = 0;
    for (int64_t i2 = 0; i2 < E2; i2++) { /* all-reduce: [E0, T, E2] */
        for (int64_t i1 = 0; i1 < TRUN; i1++) {
            for (int64_t i0 = 0; i0 < E0; i0++) {
                bad += j->out[0][k++] != sum_at(R, i0, i1, i2, t);
            }
        }
    }
    k = 0;
    for (int64_t i2 = 0; i2 < E2; i2++) { /* gather axis 0: [E0 * R, T, E2] */
        for (int64_t i1 = 0; i1 < TRUN; i1++) {
            for (int64_t i0 = 0; i0 < E0 * R; i0++) {
                bad += j->out[1][k++] != rt(in_val((int)(i0 / E0), i0 % E0, i1, i2), t);
            }
        }
    }
    k = 0;
    for (int64_t i2 = 0; i2 < E2 * R; i2++) { /* gather axis 2: [E0, T, E2 * R] */
        for (int64_t i1 = 0; i1 < TRUN; i1++) {
            for (int64_t i0 = 0; i0 < E0; i0++) {
                bad += j->out[2][k++] != rt(in_val((int)(i2 / E2), i0, i1, i2 % E2), t);
            }
        }
    }
    k = 0;
    int64_t c = E0 / R;
    for (int64_t i2 = 0; i2 < E2; i2++) { /* scatter axis 0: [E0 / R, T, E2] */
        for (int64_t i1 = 0; i1 < TRUN; i1++) {
            for (int64_t i0 = 0; i0 < c; i0++) {
                bad += j->out[3][k++] != sum_at(R, r * c + i0, i1, i2, t);
            }
        }
    }
    if (bad != 0) {
        fail_msg("%s %s ranks %d rank %d: %d wrong values", j->cpu ? "cpu" : "ref", ts_type_name(t),
                 R, r, bad);
    }
}

static void test_ops_vs_expected(void **state) {
    (void)state;
    static rank_job jobs[2][3]; /* [ref, cpu][rank] */
    const ts_type types[] = {TS_TYPE_F32, TS_TYPE_F16};
    for (int ti = 0; ti < 2; ti++) {
        for (int R = 1; R <= 3; R++) {
            for (int be = 0; be < 2; be++) {
                ts_comm *c[3];
                ts_error err = {0};
                assert_int_equal(ts_comm_local_create(R, c, &err), TS_OK);
                pthread_t th[3];
                for (int r = 0; r < R; r++) {
                    memset(&jobs[be][r], 0, sizeof jobs[be][r]);
                    jobs[be][r].comm = c[r];
                    jobs[be][r].cpu = be == 1;
                    jobs[be][r].type = types[ti];
                    pthread_create(&th[r], NULL, rank_main, &jobs[be][r]);
                }
                for (int r = 0; r < R; r++) {
                    pthread_join(th[r], NULL);
                    ts_comm_destroy(c[r]);
                }
                for (int r = 0; r < R; r++) {
                    if (jobs[be][r].st != TS_OK) {
                        fail_msg("rank %d: %s", r, jobs[be][r].err.msg);
                    }
                    check_rank(&jobs[be][r], R, r);
                }
            }
            for (int r = 0; r < R; r++) {
                assert_memory_equal(jobs[0][r].out, jobs[1][r].out, sizeof jobs[0][r].out);
            }
        }
    }
}

static void test_build_errors(void **state) {
    (void)state;
    ts_graph *g = NULL;
    ts_error err = {0};
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    int sym = ts_graph_dim(g, "T", 4);
    int64_t ne[2] = {6, 4};
    ts_tensor *a = ts_tensor_dynamic(g, ts_graph_input(g, "a", TS_TYPE_F32, 2, ne), 1, sym);
    assert_null(ts_op_reduce_scatter_sum(g, a, 0, 0, 4)); /* 6 rows over 4 ranks */
    assert_int_equal(ts_graph_status(g, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "not a multiple of 4 ranks"));
    ts_graph_destroy(g);

    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    sym = ts_graph_dim(g, "T", 4);
    a = ts_tensor_dynamic(g, ts_graph_input(g, "a", TS_TYPE_F32, 2, ne), 1, sym);
    assert_null(ts_op_all_gather(g, a, 1, 0, 2)); /* the token axis is dynamic */
    assert_int_equal(ts_graph_status(g, &err), TS_ERR_RANGE);
    assert_non_null(strstr(err.msg, "dynamic"));
    ts_graph_destroy(g);

    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    ts_tensor *q = ts_graph_input(g, "q", TS_TYPE_Q8_0, 2, (int64_t[]){32, 2});
    assert_null(ts_op_all_reduce_sum(g, q, 0, 2));
    assert_int_equal(ts_graph_status(g, &err), TS_ERR_TYPE);
    ts_graph_destroy(g);

    /* A graph built for 2 ranks run with no communicator attached: a compute error. */
    assert_int_equal(ts_graph_create(&g, NULL, &err), TS_OK);
    ts_tensor *x = ts_graph_input(g, "x", TS_TYPE_F32, 1, (int64_t[]){8});
    ts_graph_output(g, ts_op_all_reduce_sum(g, x, 0, 2));
    assert_int_equal(ts_graph_build(g, &err), TS_OK);
    for (int be = 0; be < 2; be++) {
        ts_backend *b = NULL;
        if (be == 0) {
            assert_int_equal(ts_ref_backend_create(&b, &err), TS_OK);
        } else {
            assert_int_equal(ts_cpu_backend_create(NULL, &b, &err), TS_OK);
        }
        assert_int_equal(ts_graph_alloc(g, b, &err), TS_OK);
        assert_int_equal(ts_graph_compute(g, b, NULL, &err), TS_ERR_STATE);
        assert_non_null(strstr(err.msg, "no communicator"));
        ts_graph_free_arena(g);
        ts_backend_destroy(b);
    }
    ts_graph_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_vs_expected),
        cmocka_unit_test(test_build_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
