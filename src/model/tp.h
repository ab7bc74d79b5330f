/*
 * tp.h — running a model as a tensor-parallel group: one leader, size - 1 followers.
 *
 * Every rank holds one shard (shard.h) of the model on its own backend: a forward made with
 * ts_forward_create_shard, with its own graph and KV cache, and a communicator
 * (parallel/comm.h) whose collectives the graph's ALL_REDUCE_SUM / ALL_GATHER ops call. Rank 0,
 * the leader, is a runner (runner.h, ts_tp_runner_create): the engine drives it as it drives
 * a single-device runner. The other ranks run ts_tp_follow, which executes what the leader
 * tells it, so all ranks step together:
 *
 *   create   the leader broadcasts its forward configuration and a hash of the model file
 *            (header and a sample of every tensor); each rank checks the hash against its own
 *            file, plans its shard and builds its forward; the ranks exchange their status and
 *            the KV bytes of their shard, so that every rank fails (with the failing rank's
 *            message) if one does.
 *   step     the leader checks the batch, then broadcasts it (token ids, positions, slots,
 *            block tables, outputs); every rank binds it and runs its graph; the leader reads
 *            the logits and embeddings (the residual stream is complete on every rank).
 *   copy     KV block copy-on-write, on every rank's cache.
 *   quit     sent when the leader's runner is destroyed; followers return TS_OK.
 *
 * Transports: in-process (ts_tp_config.peers: the runner starts one thread per follower on
 * the backends given, each running ts_tp_follow, and joins them when destroyed) or one process
 * per rank (MPI: a tool calls ts_tp_follow on ranks > 0 and makes the runner on rank 0).
 *
 * Failures: a rank whose step fails after the batch went out marks the communicator broken
 * (ts_comm_fail), so the others return an error instead of waiting; collectives have
 * deadlines. A follower idles without deadline between steps (a server may wait hours for a
 * request); if the leader's process dies, mpirun ends the followers.
 */
#ifndef TS_MODEL_TP_H
#define TS_MODEL_TP_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/backend.h"
#include "ir/registry.h"
#include "model/model.h"
#include "model/runner.h"
#include "parallel/comm.h"

typedef struct ts_tp_config {
    int size;             /* ranks in the group, >= 1 */
    ts_comm *comm;        /* the leader's communicator (rank 0 of size; borrowed) */
    ts_backend **peers;   /* in-process: backends of ranks 1..size-1 (borrowed), or NULL */
    ts_comm **peer_comms; /* in-process: communicators of ranks 1..size-1 (borrowed) */
} ts_tp_config;

/* The leader's runner of a group of tp->size ranks (tp borrowed for the call; the
 * communicators and peer backends it names must outlive the runner). This process is rank 0
 * and holds shard 0 on b (borrowed); with tp->peers the runner starts the followers as
 * threads, else other processes run ts_tp_follow. size 1 is a single-device runner
 * (ts_forward_runner_create). kv_bytes counts the shards in this process: the leader's and the
 * in-process followers'. Destroying the runner sends quit and joins in-process followers. reg
 * (may be NULL) chooses functionals for every in-process shard. */
ts_status ts_tp_runner_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                              ts_registry *reg, const ts_tp_config *tp, ts_runner **out,
                              ts_error *err);

/* Runs follower rank comm->rank (> 0) on backend b for one leader runner: from its handshake
 * until the leader's runner is destroyed (TS_OK), or until something fails (the error; the
 * communicator is marked broken). When instead of a new runner the leader calls ts_tp_end,
 * returns TS_OK with *ended = true. m is this process's model (checked against the leader's
 * by hash); reg (may be NULL) chooses functionals and must match the leader's. A
 * process-per-rank tool calls it in a loop until *ended. */
ts_status ts_tp_follow(const ts_model *m, ts_backend *b, ts_registry *reg, ts_comm *comm,
                       bool *ended, ts_error *err);

/* Leader: tells followers waiting for a next runner that there will be none. */
ts_status ts_tp_end(ts_comm *comm, ts_error *err);

/* SHA-256 over the model file's size, its header (metadata and tensor table) and the first
 * 256 bytes of every tensor: equal files give equal hashes; a different model, quantization
 * or tensor data almost surely does not. */
ts_status ts_tp_model_hash(const ts_model *m, uint8_t out[32], ts_error *err);

#endif /* TS_MODEL_TP_H */
