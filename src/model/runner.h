/*
 * runner.h — what runs a model's forward pass for the engine: one shard on one backend, or a
 * tensor-parallel group of shards.
 *
 * A runner is made for one shape bucket (ts_forward_config: tokens, sequences and output rows
 * per step, the KV block pool) and owns the K/V storage of its blocks. The engine (and the
 * runtime's batch API) keep the block bookkeeping (src/kv/) and only ask a runner to compute a
 * batch and to copy a block (copy-on-write). Who runs the shards — one forward here, or a
 * leader forward plus followers in threads or MPI processes (model/tp.h) — is the runner's
 * business; the caller never knows.
 *
 * Implementations: ts_forward_runner_create (forward.c, one shard) and ts_tp_runner_create
 * (tp.c, a group). Not thread-safe: one thread runs steps.
 */
#ifndef TS_MODEL_RUNNER_H
#define TS_MODEL_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"

typedef struct ts_runner ts_runner;

typedef struct ts_runner_vtable {
    /* Computes one step. logits: [n_outputs][n_vocab] f32, required. embd: [n_outputs][n_embd]
     * f32, the final hidden state after the output norm, or NULL when not wanted. */
    ts_status (*run)(ts_runner *r, const ts_batch *batch, float *logits, float *embd,
                     ts_error *err);
    /* Copies KV block src to block dst of pool (TS_FORWARD_POOL_*) in every layer that keeps
     * its K/V there (on every shard). */
    ts_status (*copy_block)(ts_runner *r, int pool, int32_t src, int32_t dst, ts_error *err);
    /* Frees the runner (ends its group); NULL-safe through ts_runner_destroy. */
    void (*destroy)(ts_runner *r);
} ts_runner_vtable;

struct ts_runner {
    const ts_runner_vtable *vt;
    ts_forward_config cfg; /* the bucket it was made for */
    size_t kv_bytes;       /* K/V storage this process holds for it (all local shards) */
    size_t kv_swa_bytes;   /* the part of kv_bytes in sliding-window pools */
    int n_shards;          /* 1, or the group size */
};

static inline ts_status ts_runner_run(ts_runner *r, const ts_batch *batch, float *logits,
                                      float *embd, ts_error *err) {
    return r->vt->run(r, batch, logits, embd, err);
}

static inline ts_status ts_runner_copy_block(ts_runner *r, int pool, int32_t src, int32_t dst,
                                             ts_error *err) {
    return r->vt->copy_block(r, pool, src, dst, err);
}

static inline void ts_runner_destroy(ts_runner *r) {
    if (r != NULL) {
        r->vt->destroy(r);
    }
}

/* One shard holding the whole model on backend b (borrowed; must outlive the runner). reg
 * (borrowed, may be NULL) chooses functional implementations while building. */
ts_status ts_forward_runner_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                                   ts_registry *reg, ts_runner **out, ts_error *err);

#endif /* TS_MODEL_RUNNER_H */
