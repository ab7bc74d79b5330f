/*
 * tp.h — running a forward pass as a tensor-parallel group: one leader, size - 1 followers.
 *
 * Every rank holds one shard (shard.h) of the model on its own backend, with its own graph and
 * KV cache, and a communicator (parallel/comm.h) whose collectives the graph's ALL_REDUCE_SUM /
 * ALL_GATHER ops call. Rank 0, the leader, is an ordinary ts_forward made with
 * ts_forward_config.tp set: the engine drives it as it drives a single-device forward. The
 * other ranks run ts_tp_follow, which executes what the leader tells it, so all ranks step
 * together:
 *
 *   create   the leader broadcasts its forward configuration and a hash of the model file
 *            (header and a sample of every tensor); each rank checks the hash against its own
 *            file, plans its shard and builds its forward; the ranks exchange their status so
 *            that every rank fails (with the failing rank's message) if one does.
 *   step     the leader broadcasts the batch (token ids, positions, slots, block tables,
 *            outputs); every rank binds it and runs its graph; the leader reads the logits.
 *   copy     KV block copy-on-write, on every rank's cache.
 *   quit     sent by ts_forward_destroy; followers return TS_OK.
 *
 * Transports: in-process (ts_tp_config.peers: the leader starts one thread per follower on
 * the backends given, each running ts_tp_follow) or one process per rank (MPI: a tool calls
 * ts_tp_follow on ranks > 0 and makes the leader's forward on rank 0).
 *
 * Failures: a rank whose step fails marks the communicator broken (ts_comm_fail), so the
 * others return an error instead of waiting; collectives have deadlines. A follower idles
 * without deadline between steps (a server may wait hours for a request); if the leader's
 * process dies, mpirun ends the followers.
 */
#ifndef TS_MODEL_TP_H
#define TS_MODEL_TP_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/backend.h"
#include "ir/registry.h"
#include "model/model.h"
#include "parallel/comm.h"

typedef struct ts_tp_config {
    int size;             /* ranks in the group, >= 1 */
    ts_comm *comm;        /* the leader's communicator (rank 0 of size; borrowed) */
    ts_backend **peers;   /* in-process: backends of ranks 1..size-1 (borrowed), or NULL */
    ts_comm **peer_comms; /* in-process: communicators of ranks 1..size-1 (borrowed) */
} ts_tp_config;

/* Runs follower rank comm->rank (> 0) on backend b for one leader forward: from its
 * handshake until ts_forward_destroy on the leader (TS_OK), or until something fails (the
 * error; the communicator is marked broken). When instead of a new forward the leader calls
 * ts_tp_end, returns TS_OK with *ended = true. m is this process's model (checked against the
 * leader's by hash); reg (may be NULL) chooses functionals and must match the leader's. A
 * process-per-rank tool calls it in a loop until *ended. */
ts_status ts_tp_follow(const ts_model *m, ts_backend *b, ts_registry *reg, ts_comm *comm,
                       bool *ended, ts_error *err);

/* Leader: tells followers waiting for a next forward that there will be none. */
ts_status ts_tp_end(ts_comm *comm, ts_error *err);

/* SHA-256 over the model file's size, its header (metadata and tensor table) and the first
 * 256 bytes of every tensor: equal files give equal hashes; a different model, quantization
 * or tensor data almost surely does not. */
ts_status ts_tp_model_hash(const ts_model *m, uint8_t out[32], ts_error *err);

#endif /* TS_MODEL_TP_H */
