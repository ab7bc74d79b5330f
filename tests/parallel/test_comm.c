/*
 * test_comm.c — the in-process communicator: every collective against sums computed here
 * (f32 exactly, f16/bf16 as "f32 sum rounded once"), uneven chunking, in place, 1..4 ranks;
 * and its failure modes: a missing rank times out (naming it) instead of hanging, a failed
 * rank wakes the waiting ones, mismatched collectives are an error, MPI/NCCL absent in this
 * build say so.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/comm.h"
#include "quant/quant.h"

typedef struct job {
    ts_comm *c;
    int which; /* test body */
    ts_type type;
    size_t count;
    ts_status st;
    ts_error err;
    int bad; /* mismatching elements */
} job;

/* Deterministic value of element i on rank r. */
static float val(int r, size_t i) {
    return (float)((int)((i * 7 + (size_t)r * 13) % 23) - 11) * 0.37f + (float)r * 0.01f;
}

static float rt(float v, ts_type t) { /* round trip through type t */
    return t == TS_TYPE_F16    ? ts_f16_to_f32(ts_f32_to_f16(v))
           : t == TS_TYPE_BF16 ? ts_bf16_to_f32(ts_f32_to_bf16(v))
                               : v;
}

static void put(void *p, size_t i, float v, ts_type t) {
    if (t == TS_TYPE_F32) {
        ((float *)p)[i] = v;
    } else {
        ((uint16_t *)p)[i] = t == TS_TYPE_F16 ? ts_f32_to_f16(v) : ts_f32_to_bf16(v);
    }
}

static float get(const void *p, size_t i, ts_type t) {
    if (t == TS_TYPE_F32) {
        return ((const float *)p)[i];
    }
    uint16_t h = ((const uint16_t *)p)[i];
    return t == TS_TYPE_F16 ? ts_f16_to_f32(h) : ts_bf16_to_f32(h);
}

/* The expected sum: the ranks' stored values added in rank order in f32, rounded once. */
static float want_sum(int n, size_t i, ts_type t) {
    float s = rt(val(0, i), t);
    for (int r = 1; r < n; r++) {
        s += rt(val(r, i), t);
    }
    return rt(s, t);
}

static void *run_job(void *arg) {
    job *j = arg;
    int n = j->c->size, r = j->c->rank;
    size_t es = ts_comm_type_size(j->type), cnt = j->count;
    char *send = malloc(cnt * (size_t)n * es + 1);
    char *recv = malloc(cnt * (size_t)n * es + 1);
    for (size_t i = 0; i < cnt * (size_t)n; i++) {
        put(send, i, val(r, i), j->type);
    }
    switch (j->which) {
    case 0: /* all-reduce, separate buffers */
    case 1: /* all-reduce in place */
        j->st = ts_comm_all_reduce_sum(j->c, send, j->which ? send : recv, cnt, j->type, &j->err);
        for (size_t i = 0; j->st == TS_OK && i < cnt; i++) {
            j->bad += get(j->which ? send : recv, i, j->type) != want_sum(n, i, j->type);
        }
        break;
    case 2: /* reduce-scatter */
        j->st = ts_comm_reduce_scatter_sum(j->c, send, recv, cnt, j->type, &j->err);
        for (size_t i = 0; j->st == TS_OK && i < cnt; i++) {
            j->bad += get(recv, i, j->type) != want_sum(n, (size_t)r * cnt + i, j->type);
        }
        break;
    case 3: /* all-gather of cnt f32 */
        j->st = ts_comm_all_gather(j->c, send, recv, cnt * 4, &j->err);
        for (int k = 0; j->st == TS_OK && k < n; k++) {
            for (size_t i = 0; i < cnt; i++) {
                j->bad += ((float *)recv)[(size_t)k * cnt + i] != val(k, i);
            }
        }
        break;
    case 4: /* broadcast from the last rank, then a barrier */
        j->st = ts_comm_broadcast(j->c, send, cnt * 4, n - 1, 0, &j->err);
        for (size_t i = 0; j->st == TS_OK && i < cnt; i++) {
            j->bad += ((float *)send)[i] != val(n - 1, i);
        }
        if (j->st == TS_OK) {
            j->st = ts_comm_barrier(j->c, &j->err);
        }
        break;
    case 5: /* mismatch: rank 0 reduces cnt, the others cnt + 1 */
        j->st = ts_comm_all_reduce_sum(j->c, send, recv, r == 0 ? cnt : cnt + 1, j->type, &j->err);
        break;
    case 6: /* rank 0 fails before the collective; the others must not hang */
        if (r == 0) {
            ts_comm_fail(j->c, "simulated crash");
            j->st = TS_ERR_ABORTED;
        } else {
            j->st = ts_comm_all_reduce_sum(j->c, send, recv, cnt, j->type, &j->err);
        }
        break;
    }
    free(send);
    free(recv);
    return NULL;
}

/* Runs body `which` on n ranks (threads); returns the jobs (caller frees). */
static job *run_group(int n, int which, ts_type type, size_t count, int timeout_ms) {
    ts_comm *c[8];
    ts_error err = {0};
    assert_int_equal(ts_comm_local_create(n, c, &err), TS_OK);
    job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t th[8];
    for (int r = 0; r < n; r++) {
        ts_comm_set_timeout(c[r], timeout_ms);
        jobs[r] = (job){.c = c[r], .which = which, .type = type, .count = count};
        assert_int_equal(pthread_create(&th[r], NULL, run_job, &jobs[r]), 0);
    }
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
    }
    for (int r = 0; r < n; r++) {
        ts_comm_destroy(c[r]);
        jobs[r].c = NULL;
    }
    return jobs;
}

static void test_collectives(void **state) {
    (void)state;
    const ts_type types[] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_BF16};
    const size_t counts[] = {1, 7, 1000};
    for (int n = 1; n <= 4; n++) {
        for (int which = 0; which <= 4; which++) {
            for (int ti = 0; ti < 3; ti++) {
                for (int ci = 0; ci < 3; ci++) {
                    if (which >= 3 && ti > 0) {
                        continue;
                    }
                    job *j = run_group(n, which, types[ti], counts[ci], 10000);
                    for (int r = 0; r < n; r++) {
                        if (j[r].st != TS_OK || j[r].bad != 0) {
                            fail_msg("n %d body %d type %d count %zu rank %d: st %d bad %d: %s", n,
                                     which, ti, counts[ci], r, j[r].st, j[r].bad, j[r].err.msg);
                        }
                    }
                    free(j);
                }
            }
        }
    }
}

static void test_stats(void **state) {
    (void)state;
    ts_comm *c[1];
    ts_error err = {0};
    assert_int_equal(ts_comm_local_create(1, c, &err), TS_OK);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    assert_int_equal(ts_comm_all_reduce_sum(c[0], x, y, 8, TS_TYPE_F32, &err), TS_OK);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(c[0]->stats.calls[TS_COLL_ALL_REDUCE], 1);
    assert_int_equal(c[0]->stats.payload_bytes, 32);
    assert_int_equal(c[0]->stats.wire_bytes, 0); /* one rank moves nothing */
    assert_int_equal(ts_comm_all_reduce_sum(c[0], x, y, 8, TS_TYPE_Q8_0, &err), TS_ERR_TYPE);
    assert_non_null(strstr(err.msg, "F32, F16 and BF16"));
    ts_comm_destroy(c[0]);
}

static void test_mismatch(void **state) {
    (void)state;
    job *j = run_group(3, 5, TS_TYPE_F32, 10, 10000);
    for (int r = 0; r < 3; r++) {
        assert_int_not_equal(j[r].st, TS_OK);
        assert_non_null(strstr(j[r].err.msg, "mismatched collectives"));
    }
    free(j);
}

static void test_failed_rank(void **state) {
    (void)state;
    job *j = run_group(3, 6, TS_TYPE_F32, 10, 60000); /* fail, not the timeout, must wake */
    for (int r = 1; r < 3; r++) {
        assert_int_equal(j[r].st, TS_ERR_ABORTED);
        assert_non_null(strstr(j[r].err.msg, "rank 0 failed: simulated crash"));
    }
    free(j);
}

static void test_timeout(void **state) {
    (void)state;
    /* Rank 1 never arrives: rank 0 gives up after its timeout, naming rank 1, and the group
     * stays broken (the next call fails at once). */
    ts_comm *c[2];
    ts_error err = {0};
    assert_int_equal(ts_comm_local_create(2, c, &err), TS_OK);
    ts_comm_set_timeout(c[0], 200);
    float x[4] = {0};
    assert_int_equal(ts_comm_all_reduce_sum(c[0], x, x, 4, TS_TYPE_F32, &err), TS_ERR_ABORTED);
    assert_non_null(strstr(err.msg, "timed out after 200 ms"));
    assert_non_null(strstr(err.msg, "rank(s) 1"));
    assert_int_equal(ts_comm_barrier(c[1], &err), TS_ERR_ABORTED);
    assert_non_null(strstr(err.msg, "group broken"));
    ts_comm_destroy(c[0]);
    ts_comm_destroy(c[1]);
}

static void test_absent_transports(void **state) {
    (void)state;
    ts_error err = {0};
    ts_comm *c = NULL;
    if (!ts_comm_mpi_available()) {
        assert_int_equal(ts_comm_mpi_create(&c, &err), TS_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "-DTS_MPI=ON"));
    } else if (getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMI_SIZE") == NULL &&
               getenv("PMIX_RANK") == NULL) {
        /* Built with MPI but not under mpirun: a clear error, no MPI_Init that could hang. */
        assert_int_equal(ts_comm_mpi_create(&c, &err), TS_ERR_STATE);
        assert_non_null(strstr(err.msg, "not started by mpirun"));
    }
    assert_null(c);
    if (!ts_comm_nccl_available()) {
        ts_comm *l[1];
        assert_int_equal(ts_comm_local_create(1, l, &err), TS_OK);
        assert_int_equal(ts_comm_nccl_create(l[0], 0, &c, &err), TS_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "without CUDA"));
        ts_comm_destroy(l[0]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives), cmocka_unit_test(test_stats),
        cmocka_unit_test(test_mismatch),    cmocka_unit_test(test_failed_rank),
        cmocka_unit_test(test_timeout),     cmocka_unit_test(test_absent_transports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
