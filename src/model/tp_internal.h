/*
 * tp_internal.h — what forward.c and tp.c share inside the model layer: a forward for one
 * rank of a group, and the leader's side of the group protocol (tp.h).
 */
#ifndef TS_MODEL_TP_INTERNAL_H
#define TS_MODEL_TP_INTERNAL_H

#include "model/forward.h"
#include "model/tp.h"

typedef struct ts_tp_lead ts_tp_lead;

/* A forward for shard comm->rank of comm->size (comm NULL: the whole model), with comm
 * attached to the graph's collectives. cfg->tp is ignored. */
ts_status ts_forward_create_rank(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                                 ts_registry *reg, ts_comm *comm, ts_forward **out, ts_error *err);
/* Binds the batch and runs this rank's graph; logits NULL on followers. A compute failure
 * marks the communicator broken. */
ts_status ts_forward_run_rank(ts_forward *f, const ts_batch *bt, float *logits,
                              const ts_eval_cb *cb, ts_error *err);
ts_status ts_forward_copy_block_rank(ts_forward *f, int32_t src, int32_t dst, ts_error *err);

/* Leader: starts in-process followers (cfg->tp->peers), runs the handshake and makes the
 * leader's own shard in *out; *lead holds the group until ts_tp_lead_stop. */
ts_status ts_tp_lead_start(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                           ts_registry *reg, ts_forward **out, ts_tp_lead **lead, ts_error *err);
/* Sends a step's batch / a block copy to the followers. */
ts_status ts_tp_lead_send_run(ts_tp_lead *lead, const ts_batch *bt, ts_error *err);
ts_status ts_tp_lead_send_copy(ts_tp_lead *lead, int32_t src, int32_t dst, ts_error *err);
/* Sends quit, joins in-process followers, frees. NULL is a no-op. */
void ts_tp_lead_stop(ts_tp_lead *lead);

#endif /* TS_MODEL_TP_INTERNAL_H */
