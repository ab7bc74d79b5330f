/* tp_setup.c — --tp / --tp-mpi group setup for the tools (tp_setup.h). */
#include "tp_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int ts_cli_tp_threads(int threads, int size) {
    int t = size > 0 ? threads / size : threads;
    return t > 0 ? t : 1;
}

/* A rank > 0 of an MPI job: follow every forward rank 0 makes until it ends the group. */
static int follow_mpi(ts_cli_tp *tp, const ts_model *m, ts_registry *reg, ts_cli_backend_fn make,
                      void *user, int threads) {
    ts_error err = {0};
    ts_backend *b = NULL;
    ts_status st = make(user, threads, &b, &err);
    bool ended = false;
    while (st == TS_OK && !ended) {
        st = ts_tp_follow(m, b, reg, tp->comms[0], &ended, &err);
    }
    ts_backend_destroy(b);
    if (st != TS_OK) {
        ts_comm_abort(tp->comms[0], err.msg);
        return 1;
    }
    return 0;
}

int ts_cli_tp_open(ts_cli_tp *tp, int size, bool mpi, const ts_model *m, ts_registry *reg,
                   ts_cli_backend_fn make, void *user, int threads, bool *follower) {
    memset(tp, 0, sizeof *tp);
    *follower = false;
    tp->size = 1;
    tp->mpi = mpi;
    ts_error err = {0};
    ts_status st = TS_OK;
    if (mpi) {
        tp->comms = calloc(1, sizeof *tp->comms);
        st = tp->comms == NULL ? ts_error_set(&err, TS_ERR_NOMEM, "out of memory")
                               : ts_comm_mpi_create(&tp->comms[0], &err);
        if (st != TS_OK) {
            fprintf(stderr, "error: --tp-mpi: %s\n", err.msg);
            return 1;
        }
        tp->size = tp->comms[0]->size;
        if (tp->comms[0]->rank > 0) {
            *follower = true;
            return follow_mpi(tp, m, reg, make, user, threads);
        }
    } else if (size > 1) {
        tp->size = size;
        tp->comms = calloc((size_t)size, sizeof *tp->comms);
        tp->peers = calloc((size_t)size, sizeof *tp->peers);
        st = tp->comms == NULL || tp->peers == NULL
                 ? ts_error_set(&err, TS_ERR_NOMEM, "out of memory")
                 : ts_comm_local_create(size, tp->comms, &err);
        for (int k = 1; st == TS_OK && k < size; k++) {
            st = make(user, threads, &tp->peers[k - 1], &err);
        }
        if (st != TS_OK) {
            fprintf(stderr, "error: --tp %d: %s\n", size, err.msg);
            return 1;
        }
    } else {
        return 0;
    }
    tp->cfg = (ts_tp_config){
        .size = tp->size,
        .comm = tp->comms[0],
        .peers = mpi ? NULL : tp->peers,
        .peer_comms = mpi ? NULL : tp->comms + 1,
    };
    return 0;
}

void ts_cli_tp_close(ts_cli_tp *tp) {
    if (tp->comms == NULL) {
        return;
    }
    if (tp->mpi && tp->comms[0] != NULL && tp->comms[0]->rank == 0 && tp->size > 1) {
        ts_error err = {0};
        if (ts_tp_end(tp->comms[0], &err) != TS_OK) {
            ts_comm_abort(tp->comms[0], err.msg);
        }
    }
    int n = tp->mpi ? 1 : tp->size;
    for (int k = 0; k < n; k++) {
        ts_comm_destroy(tp->comms[k]);
    }
    for (int k = 0; tp->peers != NULL && k + 1 < tp->size; k++) {
        ts_backend_destroy(tp->peers[k]);
    }
    free(tp->comms);
    free(tp->peers);
    memset(tp, 0, sizeof *tp);
}

void ts_cli_tp_abort(ts_cli_tp *tp, const char *why) {
    if (tp->mpi && tp->comms != NULL && tp->comms[0] != NULL && tp->size > 1) {
        ts_comm_abort(tp->comms[0], why);
    }
}

void ts_cli_tp_report(const ts_cli_tp *tp, double per, const char *unit) {
    if (tp->size <= 1 || tp->comms == NULL || per <= 0) {
        return;
    }
    const ts_comm_stats *s = &tp->comms[0]->stats;
    fprintf(stderr,
            "tp: %d ranks over %s: %llu all-reduce and %llu all-gather calls; %.1f KiB payload "
            "and %.1f KiB ring traffic per %s per rank\n",
            tp->size, ts_comm_name(tp->comms[0]), (unsigned long long)s->calls[TS_COLL_ALL_REDUCE],
            (unsigned long long)s->calls[TS_COLL_ALL_GATHER], s->payload_bytes / per / 1024.0,
            s->wire_bytes / per / 1024.0, unit);
}
