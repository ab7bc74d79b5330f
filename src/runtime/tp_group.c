/*
 * tp_group.c — the shards of a tensor-parallel context.
 *
 * tp = N (N > 1): N shards in this process. The leader's backend is the context's own; N - 1
 * more backends of the same kind are made here, each with the threads of one shard, and N
 * in-process communicators connect them. The leader's runner starts the follower threads.
 * tp_mpi: one shard per MPI process (mpirun -np N). Rank 0 returns to the caller and makes the
 * leader's runner; ranks > 0 follow every forward rank 0 makes (ts_tp_follow) until rank 0
 * ends the group, then return with *follower set. A failing rank ends the job (MPI_Abort) so
 * that no rank waits forever.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cuda/cuda.h"
#include "backends/ref/ref.h"
#include "runtime/runtime.h"
#include "util/error.h"

ts_status rt_backend_create(const char *name, int n_threads, int device, bool retune,
                            bool repack, ts_backend **out, ts_error *err) {
    if (strcmp(name, "auto") == 0) {
        name = ts_cuda_device_count() > 0 ? "cuda" : "cpu";
    }
    if (strcmp(name, "cuda") == 0) {
        ts_cuda_params p = ts_cuda_params_default();
        p.device = device;
        return ts_cuda_backend_create(&p, out, err);
    }
    if (strcmp(name, "cpu") == 0) {
        ts_cpu_params p = ts_cpu_params_default();
        if (n_threads > 0) {
            p.n_threads = n_threads;
        }
        p.retune = retune;
        p.no_repack = !repack;
        return ts_cpu_backend_create(&p, out, err);
    }
    if (strcmp(name, "ref") == 0) {
        return ts_ref_backend_create(out, err);
    }
    return ts_error_set(err, TS_ERR_INVALID_ARG, "unknown backend '%s' (choose cpu, ref, cuda or auto)", name);
}

/* A rank > 0 of an MPI job: follows every forward rank 0 makes until it ends the group. */
static ts_status follow_mpi(tp_group *g, const ts_context_params *p, const ts_model *m,
                            ts_registry *reg, int threads, ts_error *err) {
    ts_backend *b = NULL;
    ts_status st =
        rt_backend_create(p->backend, threads, p->device, false, p->no_repack == 0, &b, err);
    bool ended = false;
    while (st == TS_OK && !ended) {
        st = ts_tp_follow(m, b, reg, g->comms[0], &ended, err);
    }
    ts_backend_destroy(b);
    if (st != TS_OK) {
        ts_comm_abort(g->comms[0], err->msg);
    }
    return st;
}

ts_status rt_tp_group_open(tp_group *g, const ts_context_params *p, const ts_model *m,
                           ts_registry *reg, int threads, bool *follower, ts_error *err) {
    memset(g, 0, sizeof *g);
    *follower = false;
    g->size = 1;
    g->mpi = p->tp_mpi != 0;
    ts_status st = TS_OK;
    if (g->mpi) {
        g->comms = calloc(1, sizeof *g->comms);
        st = g->comms == NULL ? ts_error_set(err, TS_ERR_NOMEM, "out of memory")
                              : ts_comm_mpi_create(&g->comms[0], err);
        if (st != TS_OK) {
            return ts_error_prefix(err, "tp-mpi: ");
        }
        g->size = g->comms[0]->size;
        if (g->comms[0]->rank > 0) {
            *follower = true;
            return follow_mpi(g, p, m, reg, threads, err);
        }
    } else if (p->tp > 1) {
        g->size = p->tp;
        g->comms = calloc((size_t)p->tp, sizeof *g->comms);
        g->peers = calloc((size_t)p->tp, sizeof *g->peers);
        st = g->comms == NULL || g->peers == NULL ? ts_error_set(err, TS_ERR_NOMEM, "out of memory")
                                                  : ts_comm_local_create(p->tp, g->comms, err);
        for (int k = 1; st == TS_OK && k < p->tp; k++) {
            st = rt_backend_create(p->backend, threads, p->device, false, p->no_repack == 0,
                                   &g->peers[k - 1], err);
        }
        if (st != TS_OK) {
            return ts_error_prefix(err, "tp %d: ", p->tp);
        }
    } else {
        return TS_OK;
    }
    g->cfg = (ts_tp_config){
        .size = g->size,
        .comm = g->comms[0],
        .peers = g->mpi ? NULL : g->peers,
        .peer_comms = g->mpi ? NULL : g->comms + 1,
    };
    return TS_OK;
}

void rt_tp_group_close(tp_group *g) {
    if (g->comms == NULL) {
        return;
    }
    if (g->mpi && g->comms[0] != NULL && g->comms[0]->rank == 0 && g->size > 1) {
        ts_error err = {0};
        if (ts_tp_end(g->comms[0], &err) != TS_OK) {
            ts_comm_abort(g->comms[0], err.msg);
        }
    }
    int n = g->mpi ? 1 : g->size;
    for (int k = 0; k < n; k++) {
        ts_comm_destroy(g->comms[k]);
    }
    for (int k = 0; g->peers != NULL && k + 1 < g->size; k++) {
        ts_backend_destroy(g->peers[k]);
    }
    free(g->comms);
    free(g->peers);
    memset(g, 0, sizeof *g);
}

void rt_tp_group_abort(tp_group *g, const char *why) {
    if (g->mpi && g->comms != NULL && g->comms[0] != NULL && g->size > 1) {
        ts_comm_abort(g->comms[0], why);
    }
}
