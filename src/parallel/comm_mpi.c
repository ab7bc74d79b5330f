/*
 * comm_mpi.c — the MPI transport: one rank per process, started by mpirun.
 *
 * MPI is initialized once per process (MPI_THREAD_SERIALIZED: the engine's step thread makes
 * the calls, one at a time) and finalized when the communicator that initialized it is
 * destroyed. The communicator is a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so MPI
 * failures come back as errors with MPI's text instead of killing the process.
 *
 * No collective blocks without a deadline: each is started non-blocking and polled
 * (MPI_Test; yielding the core for the first 200 ms, then sleeping in growing steps up to
 * 1 ms) until it completes or the communicator's timeout passes. A timeout is reported as
 * an error; an MPI request cannot be cancelled, so the group is broken afterwards and a tool
 * should end the job with ts_comm_abort (MPI_Abort). A rank that dies is noticed by mpirun, which
 * ends the others.
 *
 * Sums follow the rule of comm.h (rank-order f32 accumulation, one rounding) so results
 * equal the in-process transport bit for bit: an all-reduce is an all-to-all of chunks, a
 * local sum of the chunk this rank owns, and an all-gather of the sums.
 *
 * Without TS_HAVE_MPI (a build without -DTS_MPI=ON) ts_comm_mpi_create explains how to get
 * the transport.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"
#include "util/error.h"

#ifdef TS_HAVE_MPI
#include <mpi.h>

typedef struct mrank {
    MPI_Comm comm;
    ts_comm *self;
    bool finalize; /* this communicator initialized MPI */
    bool broken;
    char why[TS_ERROR_MSG_MAX / 2];
    int *counts, *displs; /* [size] scratch for the v-collectives (bytes) */
    int *counts2, *displs2;
    int *ecnt, *edsp; /* [size] element chunk counts and offsets */
    void *stage;      /* reduce staging: size x chunk, grown on demand */
    size_t stage_size;
} mrank;

static ts_status mpi_err(mrank *m, int rc, const char *what, ts_error *err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    m->broken = true;
    /* The message is cut to the buffer: what failed matters more than its full text. */
    snprintf(m->why, sizeof m->why, "%.64s failed: %.180s", what, text);
    return ts_error_set(err, TS_ERR_IO, "comm mpi rank %d/%d: %s: %s", m->self->rank, m->self->size,
                        what, text);
}

static ts_status broken(mrank *m, const char *what, ts_error *err) {
    return ts_error_set(err, TS_ERR_ABORTED, "comm mpi rank %d/%d: %s: group broken: %s",
                        m->self->rank, m->self->size, what, m->why);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Polls req until it completes or wait_ms passes (< 0: no deadline). */
static ts_status wait_req(mrank *m, MPI_Request *req, int wait_ms, const char *what,
                          ts_error *err) {
    double t0 = now_ms();
    long sleep_ns = 0;
    for (int spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            return mpi_err(m, rc, what, err);
        }
        if (done) {
            return TS_OK;
        }
        if (wait_ms >= 0 && now_ms() - t0 > wait_ms) {
            m->broken = true;
            snprintf(m->why, sizeof m->why, "%s timed out after %d ms (a rank is missing)", what,
                     wait_ms);
            return ts_error_set(err, TS_ERR_ABORTED, "comm mpi rank %d/%d: %s", m->self->rank,
                                m->self->size, m->why);
        }
        /* Inside a step the peers are microseconds away: yield the core (ranks may share
         * cores) but keep polling. Idle (waiting for the next command) or after a long wait,
         * sleep in growing steps up to 1 ms so an idle rank does not burn a core. */
        if (wait_ms >= 0 && now_ms() - t0 < 200.0) {
            sched_yield();
        } else if (spins > 2000) {
            sleep_ns = sleep_ns < 1000000 ? sleep_ns + 20000 : sleep_ns;
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
        }
    }
}

static ts_status stage_reserve(mrank *m, size_t bytes, ts_error *err) {
    if (bytes <= m->stage_size) {
        return TS_OK;
    }
    void *p = realloc(m->stage, bytes);
    if (p == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "comm mpi: staging of %zu bytes", bytes);
    }
    m->stage = p;
    m->stage_size = bytes;
    return TS_OK;
}

static ts_status check_int(mrank *m, size_t bytes, const char *what, ts_error *err) {
    if (bytes > (size_t)2147483647) {
        return ts_error_set(err, TS_ERR_LIMIT, "comm mpi rank %d: %s of %zu bytes exceeds 2 GiB",
                            m->self->rank, what, bytes);
    }
    return TS_OK;
}

/* recv (this rank's chunk, `mine` elements) = rank-order sum of the chunks every rank sent:
 * an all-to-all moves chunk r of each rank's send (counts/displs in elements) to rank r. */
static ts_status sum_my_chunk(mrank *m, const void *send, const int *cnt, const int *dsp,
                              size_t mine, void *recv, ts_type type, const char *what,
                              ts_error *err) {
    int n = m->self->size;
    size_t es = ts_comm_type_size(type);
    ts_status st = stage_reserve(m, (size_t)n * mine * es + 1, err);
    if (st != TS_OK) {
        return st;
    }
    for (int k = 0; k < n; k++) {
        m->counts[k] = cnt[k] * (int)es;
        m->displs[k] = dsp[k] * (int)es;
        m->counts2[k] = (int)(mine * es);
        m->displs2[k] = (int)((size_t)k * mine * es);
    }
    MPI_Request req;
    int rc = MPI_Ialltoallv(send, m->counts, m->displs, MPI_BYTE, m->stage, m->counts2, m->displs2,
                            MPI_BYTE, m->comm, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_err(m, rc, what, err);
    }
    if ((st = wait_req(m, &req, m->self->timeout_ms, what, err)) != TS_OK) {
        return st;
    }
    const void *srcs[64];
    const void **src = n <= 64 ? srcs : malloc((size_t)n * sizeof *src);
    if (src == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "comm mpi: out of memory");
    }
    for (int k = 0; k < n; k++) {
        src[k] = (const char *)m->stage + (size_t)k * mine * es;
    }
    ts_comm_sum_range(recv, src, n, 0, mine, type);
    if (src != srcs) {
        free(src);
    }
    return TS_OK;
}

static ts_status mpi_all_reduce(void *ctx, const void *send, void *recv, size_t count, ts_type type,
                                ts_error *err) {
    mrank *m = ctx;
    int n = m->self->size, r = m->self->rank;
    size_t es = ts_comm_type_size(type);
    if (m->broken) {
        return broken(m, "all_reduce_sum", err);
    }
    ts_status st = check_int(m, count * es, "all_reduce_sum", err);
    if (st != TS_OK) {
        return st;
    }
    int *c = m->ecnt, *d = m->edsp;
    for (int k = 0; k < n; k++) {
        size_t lo, hi;
        ts_comm_chunk(count, k, n, &lo, &hi);
        c[k] = (int)(hi - lo);
        d[k] = (int)lo;
    }
    size_t mine = (size_t)c[r];
    /* The summed chunk goes straight to its place in recv; the all-to-all reads send first,
     * so in-place (send == recv) works: this rank's chunk of recv is written after. */
    char *my_out = (char *)recv + (size_t)d[r] * es;
    char tmp_small[256];
    void *sum = mine * es <= sizeof tmp_small ? tmp_small : NULL;
    if (sum == NULL) {
        sum = malloc(mine * es);
    }
    if (sum == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "comm mpi: out of memory");
    }
    if (st == TS_OK) {
        st = sum_my_chunk(m, send, c, d, mine, sum, type, "all_reduce_sum", err);
    }
    if (st == TS_OK) {
        memcpy(my_out, sum, mine * es);
        for (int k = 0; k < n; k++) {
            m->counts[k] = c[k] * (int)es;
            m->displs[k] = d[k] * (int)es;
        }
        MPI_Request req;
        int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, recv, m->counts, m->displs, MPI_BYTE,
                                 m->comm, &req);
        st = rc != MPI_SUCCESS ? mpi_err(m, rc, "all_reduce_sum", err)
                               : wait_req(m, &req, m->self->timeout_ms, "all_reduce_sum", err);
    }
    if (sum != tmp_small) {
        free(sum);
    }
    return st;
}

static ts_status mpi_reduce_scatter(void *ctx, const void *send, void *recv, size_t count,
                                    ts_type type, ts_error *err) {
    mrank *m = ctx;
    int n = m->self->size;
    if (m->broken) {
        return broken(m, "reduce_scatter_sum", err);
    }
    ts_status st =
        check_int(m, count * (size_t)n * ts_comm_type_size(type), "reduce_scatter_sum", err);
    if (st != TS_OK) {
        return st;
    }
    for (int k = 0; k < n; k++) {
        m->ecnt[k] = (int)count;
        m->edsp[k] = (int)((size_t)k * count);
    }
    return sum_my_chunk(m, send, m->ecnt, m->edsp, count, recv, type, "reduce_scatter_sum", err);
}

static ts_status mpi_all_gather(void *ctx, const void *send, void *recv, size_t bytes,
                                ts_error *err) {
    mrank *m = ctx;
    if (m->broken) {
        return broken(m, "all_gather", err);
    }
    ts_status st = check_int(m, bytes * (size_t)m->self->size, "all_gather", err);
    if (st != TS_OK) {
        return st;
    }
    MPI_Request req;
    const void *sb =
        send == (const char *)recv + (size_t)m->self->rank * bytes ? MPI_IN_PLACE : send;
    int rc = MPI_Iallgather(sb, sb == MPI_IN_PLACE ? 0 : (int)bytes, MPI_BYTE, recv, (int)bytes,
                            MPI_BYTE, m->comm, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_err(m, rc, "all_gather", err);
    }
    return wait_req(m, &req, m->self->timeout_ms, "all_gather", err);
}

static ts_status mpi_broadcast(void *ctx, void *buf, size_t bytes, int root, int wait_ms,
                               ts_error *err) {
    mrank *m = ctx;
    if (m->broken) {
        return broken(m, "broadcast", err);
    }
    ts_status st = check_int(m, bytes, "broadcast", err);
    if (st != TS_OK) {
        return st;
    }
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, m->comm, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_err(m, rc, "broadcast", err);
    }
    return wait_req(m, &req, wait_ms < 0 ? -1 : m->self->timeout_ms, "broadcast", err);
}

static ts_status mpi_barrier(void *ctx, ts_error *err) {
    mrank *m = ctx;
    if (m->broken) {
        return broken(m, "barrier", err);
    }
    MPI_Request req;
    int rc = MPI_Ibarrier(m->comm, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_err(m, rc, "barrier", err);
    }
    return wait_req(m, &req, m->self->timeout_ms, "barrier", err);
}

static void mpi_fail(void *ctx, const char *why) {
    mrank *m = ctx;
    if (!m->broken) {
        m->broken = true;
        snprintf(m->why, sizeof m->why, "rank %d failed: %s", m->self->rank, why);
    }
}

static void mpi_abort(void *ctx, const char *why) {
    mrank *m = ctx;
    mpi_fail(ctx, why);
    fprintf(stderr, "tessera: MPI rank %d of %d: %s; ending the job\n", m->self->rank,
            m->self->size, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void mpi_destroy(void *ctx) {
    mrank *m = ctx;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (m->comm != MPI_COMM_NULL) {
            MPI_Comm_free(&m->comm);
        }
        if (m->finalize) {
            MPI_Finalize();
        }
    }
    free(m->counts);
    free(m->displs);
    free(m->counts2);
    free(m->displs2);
    free(m->ecnt);
    free(m->edsp);
    free(m->stage);
    free(m);
}

static const ts_comm_iface k_mpi_iface = {
    .name = "mpi",
    .all_reduce_sum = mpi_all_reduce,
    .all_gather = mpi_all_gather,
    .reduce_scatter_sum = mpi_reduce_scatter,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .fail = mpi_fail,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

/* Whether an MPI launcher started this process (OpenMPI, MPICH/Hydra, PMIx, Slurm). */
static bool launched_by_mpirun(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (getenv(vars[i]) != NULL) {
            return true;
        }
    }
    return false;
}

bool ts_comm_mpi_available(void) {
    return true;
}

ts_status ts_comm_mpi_create(ts_comm **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "comm mpi: out is NULL");
    }
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) {
        return ts_error_set(err, TS_ERR_STATE, "comm mpi: MPI was already finalized");
    }
    if (!inited && !launched_by_mpirun()) {
        return ts_error_set(err, TS_ERR_STATE,
                            "comm mpi: this process was not started by mpirun (no MPI launcher "
                            "environment); run e.g. 'mpirun -np 2 tessera run ... --tp-mpi'");
    }
    bool we_init = false;
    if (!inited) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            return ts_error_set(err, TS_ERR_IO, "comm mpi: MPI_Init_thread failed (code %d)", rc);
        }
        we_init = true;
        if (provided < MPI_THREAD_SERIALIZED) {
            MPI_Finalize();
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "comm mpi: the MPI library gives thread level %d, tessera needs "
                                "MPI_THREAD_SERIALIZED",
                                provided);
        }
    }
    ts_comm *c = calloc(1, sizeof *c);
    mrank *m = calloc(1, sizeof *m);
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (c != NULL && m != NULL) {
        m->counts = calloc((size_t)size, sizeof(int));
        m->displs = calloc((size_t)size, sizeof(int));
        m->counts2 = calloc((size_t)size, sizeof(int));
        m->displs2 = calloc((size_t)size, sizeof(int));
        m->ecnt = calloc((size_t)size, sizeof(int));
        m->edsp = calloc((size_t)size, sizeof(int));
    }
    if (c == NULL || m == NULL || m->counts == NULL || m->displs == NULL || m->counts2 == NULL ||
        m->displs2 == NULL || m->ecnt == NULL || m->edsp == NULL) {
        if (m != NULL) {
            m->comm = MPI_COMM_NULL;
            m->finalize = we_init;
            mpi_destroy(m);
        }
        free(c);
        return ts_error_set(err, TS_ERR_NOMEM, "comm mpi: out of memory");
    }
    m->finalize = we_init;
    m->self = c;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    }
    c->iface = &k_mpi_iface;
    c->ctx = m;
    c->rank = rank;
    c->size = size;
    ts_comm_set_timeout(c, 0);
    if (rc != MPI_SUCCESS) {
        ts_status st = mpi_err(m, rc, "MPI_Comm_dup", err);
        ts_comm_destroy(c);
        return st;
    }
    *out = c;
    return TS_OK;
}

#else /* !TS_HAVE_MPI */

bool ts_comm_mpi_available(void) {
    return false;
}

ts_status ts_comm_mpi_create(ts_comm **out, ts_error *err) {
    if (out != NULL) {
        *out = NULL;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "comm mpi: this tessera was built without MPI; configure with "
                        "-DTS_MPI=ON (Debian: apt-get install libopenmpi-dev openmpi-bin)");
}

#endif /* TS_HAVE_MPI */
