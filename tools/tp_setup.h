/*
 * tp_setup.h — tensor parallelism for the model-running subcommands (--tp N, --tp-mpi).
 *
 * --tp N (N > 1): N shards in this process. The leader's backend is the command's own; N - 1
 * more backends come from the command's factory, each shard getting threads / N CPU threads,
 * and N in-process communicators connect them.
 * --tp-mpi: one shard per MPI process (mpirun -np N). Rank 0 does all I/O and runs the
 * command; ranks > 0 only follow (ts_tp_follow) and exit when rank 0 is done. A failing rank
 * ends the job (MPI_Abort) so that no rank waits forever.
 */
#ifndef TS_TOOLS_TP_SETUP_H
#define TS_TOOLS_TP_SETUP_H

#include <stdbool.h>

#include "ir/backend.h"
#include "ir/registry.h"
#include "model/tp.h"

typedef ts_status (*ts_cli_backend_fn)(void *user, int n_threads, ts_backend **out, ts_error *err);

typedef struct ts_cli_tp {
    int size; /* 1 when tensor parallelism is off */
    bool mpi;
    ts_comm **comms;    /* [size] in-process, or [1] the MPI communicator */
    ts_backend **peers; /* [size - 1] in-process follower backends */
    ts_tp_config cfg;   /* what the leader's forward gets */
} ts_cli_tp;

/* Threads each shard gets out of `threads` (at least 1). */
int ts_cli_tp_threads(int threads, int size);

/* Sets up the group. For MPI on ranks > 0 it runs the follower until rank 0 is done and sets
 * *follower (the caller then exits with the returned status: 0 or 1). Errors are printed. */
int ts_cli_tp_open(ts_cli_tp *tp, int size, bool mpi, const ts_model *m, ts_registry *reg,
                   ts_cli_backend_fn make, void *user, int threads, bool *follower);
/* Ends the group (MPI: tells the followers, finalizes). */
void ts_cli_tp_close(ts_cli_tp *tp);
/* For a leader that fails: ends an MPI job at once (no-op in-process). */
void ts_cli_tp_abort(ts_cli_tp *tp, const char *why);
/* Prints the collectives' traffic of rank 0 (calls, payload and ring bytes). */
void ts_cli_tp_report(const ts_cli_tp *tp, double per, const char *unit);

#endif /* TS_TOOLS_TP_SETUP_H */
