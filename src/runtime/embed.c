/*
 * embed.c — the public embeddings call: the model's pooling resolved, then the engine computes
 * the inputs between steps (engine/embed.c) over the request engine's KV cache.
 */
#include <string.h>

#include "runtime/runtime.h"
#include "util/error.h"

static const char *const k_pooling_names[] = {"none", "mean", "cls", "last"};

const char *ts_pooling_name(ts_pooling p) {
    if (p == TS_POOLING_MODEL) {
        return "model";
    }
    return p >= TS_POOLING_NONE && p <= TS_POOLING_LAST ? k_pooling_names[p] : NULL;
}

ts_status ts_pooling_parse(const char *name, ts_pooling *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    for (int p = TS_POOLING_MODEL; name != NULL && out != NULL && p <= TS_POOLING_LAST; p++) {
        if (strcmp(name, ts_pooling_name((ts_pooling)p)) == 0) {
            *out = (ts_pooling)p;
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_INVALID_ARG,
                        "pooling '%s' is not one of none, mean, cls, last, model",
                        name != NULL ? name : "(null)");
}

ts_embed_params ts_embed_params_default(void) {
    return (ts_embed_params){.pooling = TS_POOLING_MODEL, .normalize = 1};
}

ts_status ts_context_embed(ts_context *ctx, const int32_t *const *inputs, const int32_t *n_tokens,
                           int32_t n_inputs, const ts_embed_params *params, float *out,
                           ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || inputs == NULL || n_tokens == NULL || out == NULL || n_inputs < 1) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_context_embed: ctx, inputs, n_tokens and out are required, with "
                            "at least one input (got %d)",
                            n_inputs);
    }
    ts_embed_params p = params != NULL ? *params : ts_embed_params_default();
    if (ts_pooling_name(p.pooling) == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_embed: pooling %d is unknown",
                            (int)p.pooling);
    }
    ts_pool_kind pool =
        p.pooling == TS_POOLING_MODEL ? ctx->llm->model->hp.pooling : (ts_pool_kind)p.pooling;
    bool claimed = false;
    ts_status st = rt_use_mode(ctx, MODE_REQUESTS, "ts_context_embed", &claimed, err);
    if (st != TS_OK) {
        return st;
    }
    st = ts_engine_embed(ctx->engine, inputs, n_tokens, n_inputs, pool, p.normalize != 0, out, err);
    rt_latch_compare(ctx);
    if (claimed && !ts_engine_has_work(ctx->engine)) {
        rt_unclaim_mode(ctx); /* embeddings alone leave the context free for either use */
    }
    return st;
}
