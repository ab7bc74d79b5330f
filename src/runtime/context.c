/*
 * context.c — making a context (backend by name, hooks, functional overrides, tensor-parallel
 * shards, KV cache sizing, runner, engine), tearing it down in reverse order, and what it
 * reports (info, chat template, hooks' findings, collectives' traffic).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "ir/hooks.h"
#include "model/shard.h"
#include "runtime/runtime.h"
#include "util/error.h"

ts_context_params ts_context_params_default(void) {
    ts_context_params p;
    memset(&p, 0, sizeof p);
    p.backend = "cpu";
    p.kv_type = "f16";
    p.compare_tol = 0.05;
    return p;
}

int ts_default_threads(void) {
    return ts_cpu_physical_cores();
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Checks the parameters that need no model and fills the defaults of the strings. */
static ts_status check_params(ts_context_params *p, ts_error *err) {
    if (p->backend == NULL) {
        p->backend = "cpu";
    }
    if (p->kv_type == NULL) {
        p->kv_type = "f16";
    }
    if (p->compare_tol == 0) {
        p->compare_tol = 0.05;
    }
    if (p->device < 0 || p->device > 1024) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "context: device %d is out of range",
                            p->device);
    }
    if (p->n_threads < 0 || p->n_threads > 1024 || p->tp < 0 || p->tp > 64 || p->n_ctx < 0 ||
        p->kv_tokens < 0 || p->kv_bytes < 0 || p->max_seqs < 0 || p->max_batch_tokens < 0 ||
        p->max_outputs < 0 || p->max_queue < 0 || p->dump_values < 0 || !(p->compare_tol > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "context: a parameter is out of range (threads %d, tp %d, ctx %lld, "
                            "kv tokens %lld, kv bytes %lld, max-seqs %lld, max-batch-tokens "
                            "%lld, max-outputs %lld, compare tolerance %g)",
                            p->n_threads, p->tp, (long long)p->n_ctx, (long long)p->kv_tokens,
                            (long long)p->kv_bytes, (long long)p->max_seqs,
                            (long long)p->max_batch_tokens, (long long)p->max_outputs,
                            p->compare_tol);
    }
    if (p->tp > 1 && p->tp_mpi) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp and tp-mpi exclude each other (mpirun -np sets the shard count)");
    }
    if (p->compare != NULL && strcmp(p->compare, "ref") != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "compare: only 'ref' can be compared against, not '%s'", p->compare);
    }
    if (p->compare != NULL && (p->tp > 1 || p->tp_mpi)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "compare runs one device; it cannot check a tensor-parallel run");
    }
    return TS_OK;
}

static void note_type(const char *name, const ts_gguf_tensor *t, void *user) {
    (void)name;
    bool *used = user;
    if (t->n_dims >= 2 && (unsigned)t->type < TS_TYPE_COUNT) {
        used[t->type] = true;
    }
}

/* A CPU compute backend measures (or finds in its cache) the kernels of the model's matrix
 * types now, before the shards are made (they then read the fresh cache) and so that the
 * first request does not pay for it; info.kernels names the choice. */
static ts_status tune_kernels(ts_context *ctx, ts_error *err) {
    bool used[TS_TYPE_COUNT] = {false};
    ts_model_each_param(ctx->llm->model, note_type, used);
    ts_type types[TS_TYPE_COUNT];
    int n = 0;
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        if (used[t]) {
            types[n++] = (ts_type)t;
        }
    }
    const char *notice = "";
    if (!ts_cpu_backend_kernels(ctx->compute, NULL, 0, NULL, 0, NULL, NULL)) {
        return TS_OK;
    }
    ts_status st = ts_cpu_backend_tune(ctx->compute, types, n, err);
    if (st == TS_OK) {
        ts_cpu_backend_kernels(ctx->compute, types, n, ctx->kernels, sizeof ctx->kernels, &notice,
                               &ctx->info.tune_ms);
        snprintf(ctx->kernel_notice, sizeof ctx->kernel_notice, "%s", notice);
    }
    return st;
}

/* The compute backend wrapped in the hooks asked for: compare, then profile, then dump. */
static ts_status make_backends(ts_context *ctx, const ts_context_params *p, int threads,
                               ts_error *err) {
    ts_status st = rt_backend_create(p->backend, threads, p->device, p->retune != 0,
                                     p->no_repack == 0, &ctx->compute, err);
    ctx->backend = ctx->compute;
    if (st == TS_OK) {
        st = tune_kernels(ctx, err);
    }
    if (st == TS_OK && p->compare != NULL) {
        st = ts_ref_backend_create(&ctx->oracle, err);
        if (st == TS_OK) {
            st = ts_hook_compare_create(ctx->backend, ctx->oracle, p->compare_tol,
                                        &ctx->hook_compare, err);
        }
        if (st == TS_OK) {
            ctx->backend = ctx->hook_compare;
        }
    }
    if (st == TS_OK && p->profile) {
        st = ts_hook_profile_create(ctx->backend, &ctx->hook_profile, err);
        if (st == TS_OK) {
            ctx->backend = ctx->hook_profile;
        }
    }
    if (st == TS_OK && p->dump != NULL) {
        ctx->dump_file = strcmp(p->dump, "-") == 0 ? stdout : fopen(p->dump, "w");
        if (ctx->dump_file == NULL) {
            return ts_error_set(err, TS_ERR_IO, "dump: cannot open '%s'", p->dump);
        }
        st =
            ts_hook_dump_create(ctx->backend, ctx->dump_file, p->dump_values, &ctx->hook_dump, err);
        if (st == TS_OK) {
            ctx->backend = ctx->hook_dump;
        }
    }
    return st;
}

/* The model's own overrides (GGUF key tessera.overrides), then the caller's. */
static ts_status apply_overrides(ts_context *ctx, const ts_context_params *p, ts_error *err) {
    const ts_model *m = ctx->llm->model;
    ts_error absent = {0};
    ts_gguf_str spec;
    if (ts_gguf_get_str(m->gguf, "tessera.overrides", &spec, &absent) == TS_OK) {
        char buf[512];
        if (spec.len >= sizeof buf) {
            return ts_error_set(err, TS_ERR_FORMAT, "tessera.overrides is too long (%llu bytes)",
                                (unsigned long long)spec.len);
        }
        memcpy(buf, spec.ptr, spec.len);
        buf[spec.len] = '\0';
        ts_status st = ts_registry_apply(ctx->reg, buf, "GGUF tessera.overrides", err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (int i = 0; i < p->n_overrides; i++) {
        if (p->overrides == NULL || p->overrides[i] == NULL) {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "override %d is NULL", i);
        }
        ts_status st = ts_registry_apply(ctx->reg, p->overrides[i], "override", err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

static ts_status choose_template(ts_context *ctx, const ts_context_params *p, ts_error *err) {
    ts_status st =
        rt_chat_open(&ctx->chat, ctx->llm, p->chat_template, p->chat_template_source, err);
    if (st == TS_OK) {
        ctx->chat_profile = rt_chat_profile(&ctx->chat, ctx->llm);
    }
    return st;
}

/* The KV cache types, by the names the options take (llama.cpp's). */
static const struct {
    const char *name;
    ts_type type;
} k_kv_types[] = {{"f16", TS_TYPE_F16},   {"f32", TS_TYPE_F32},   {"bf16", TS_TYPE_BF16},
                  {"q8_0", TS_TYPE_Q8_0}, {"q5_0", TS_TYPE_Q5_0}, {"q4_0", TS_TYPE_Q4_0}};

/* One cache's type from its name, checked against the model's head size: a block type
 * quantizes each [head_dim] row in blocks of 32. option: the parameter that named it. */
static ts_status kv_cache_type(const ts_context *ctx, const char *option, const char *name,
                               ts_type *out, ts_error *err) {
    for (size_t i = 0; i < sizeof k_kv_types / sizeof k_kv_types[0]; i++) {
        if (strcmp(name, k_kv_types[i].name) != 0) {
            continue;
        }
        int64_t blk = (int64_t)ts_type_block_size(k_kv_types[i].type);
        int64_t hd = ctx->llm->model->hp.head_dim;
        if (hd % blk != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "%s '%s' needs a head size that is a multiple of its block of "
                                "%lld, but the model's head_dim is %lld (use f16, bf16 or f32)",
                                option, name, (long long)blk, (long long)hd);
        }
        *out = k_kv_types[i].type;
        return TS_OK;
    }
    return ts_error_set(err, TS_ERR_INVALID_ARG,
                        "%s '%s' is not a KV cache type (f16, bf16, f32, q8_0, q5_0, q4_0)", option,
                        name);
}

/* Whether the compute backend runs KV_STORE and ATTENTION on caches of these types: asked of
 * the backend on a one-block probe graph of the model's head size, so that a type it lacks is
 * an error at load (naming the option) rather than at the first step. */
static ts_status check_kv_backend(ts_context *ctx, const ts_type types[2],
                                  const char *const options[2], const char *const names[2],
                                  ts_error *err) {
    const ts_hparams *hp = &ctx->llm->model->hp;
    ts_graph *g = NULL;
    ts_status st = ts_graph_create(&g, NULL, err);
    if (st != TS_OK) {
        return st;
    }
    int64_t hd = hp->head_dim, cache_ne[4] = {hd, 1, 1, 1}, q_ne[3] = {hd, 1, 1};
    int64_t one[1] = {1}, tab_ne[2] = {1, 1};
    ts_tensor *kc = ts_graph_param(g, "probe_k", types[0], 4, cache_ne);
    ts_tensor *vc = ts_graph_param(g, "probe_v", types[1], 4, cache_ne);
    ts_tensor *q = ts_graph_param(g, "probe_q", TS_TYPE_F32, 3, q_ne);
    static const char *const i32_names[4] = {"probe_table", "probe_seq", "probe_pos", "probe_len"};
    ts_tensor *i32[4];
    for (int i = 0; i < 4; i++) {
        i32[i] =
            ts_graph_param(g, i32_names[i], TS_TYPE_I32, i == 0 ? 2 : 1, i == 0 ? tab_ne : one);
    }
    ts_tensor *ks = ts_op_kv_store(g, kc, q, i32[1]);
    ts_tensor *vs = ts_op_kv_store(g, vc, q, i32[1]);
    ts_tensor *at = ts_op_attention(g, q, ks, vs, i32[0], i32[1], i32[2], i32[3], 1.0f, 0.0f, 0);
    st = ts_graph_status(g, err);
    const ts_tensor *nodes[3] = {ks, vs, at};
    for (int i = 0; i < 3 && st == TS_OK; i++) {
        if (ts_backend_supports_op(ctx->compute, nodes[i])) {
            continue;
        }
        if (i < 2) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "%s '%s': the %s backend cannot store into a cache of this type "
                              "(head_dim %lld)",
                              options[i], names[i], ts_backend_name(ctx->compute), (long long)hd);
        } else {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "%s '%s' with %s '%s': the %s backend cannot attend over caches of "
                              "these types (head_dim %lld)",
                              options[0], names[0], options[1], names[1],
                              ts_backend_name(ctx->compute), (long long)hd);
        }
    }
    ts_graph_destroy(g);
    return st;
}

/* Speculative decoding's settings into ec; errors name the option. */
static ts_status spec_config(const ts_context_params *p, ts_engine_config *ec, ts_error *err) {
    const char *type = p->spec_type;
    bool unset = type == NULL || *type == '\0';
    bool draft = unset ? p->draft_model != NULL
                       : strcmp(type, "draft") == 0 || strcmp(type, "draft-simple") == 0;
    bool ngram = unset ? p->draft_model == NULL && p->draft_max > 0
                       : strcmp(type, "ngram") == 0 || strncmp(type, "ngram-", 6) == 0;
    if (!unset && !ngram && !draft && strcmp(type, "none") != 0) {
        return ts_error_set(
            err, TS_ERR_INVALID_ARG,
            "spec-type: unknown speculative decoding type '%s' (ngram, draft, none)", type);
    }
    if (draft && p->draft_model == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "spec-type draft needs a draft model (--model-draft FILE)");
    }
    if (!draft && p->draft_model != NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "spec-type: a draft model (%s) is given but the type is '%s' (draft, "
                            "or leave it unset)",
                            p->draft_model, type);
    }
    if (draft && (p->tp > 1 || p->tp_mpi)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "draft model %s: speculative decoding with a draft model runs on one "
                            "device, not under tensor parallelism",
                            p->draft_model);
    }
    if (p->draft_max < 0 || p->draft_max > TS_ENGINE_MAX_DRAFT || p->draft_min < 0 ||
        p->draft_min > TS_ENGINE_MAX_DRAFT || p->spec_ngram_min < 0 || p->spec_ngram_max < 0 ||
        p->spec_ngram_min > 16 || p->spec_ngram_max > 16 || p->spec_step_tokens < 0 ||
        !(p->draft_p_min >= 0.0f && p->draft_p_min <= 1.0f)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "speculative decoding: draft-max %d and draft-min %d must be in 0..%d, "
                            "spec-ngram sizes %d..%d in 1..16, spec-step-tokens %lld >= 0, "
                            "draft-p-min %g in 0..1",
                            p->draft_max, p->draft_min, TS_ENGINE_MAX_DRAFT, p->spec_ngram_min,
                            p->spec_ngram_max, (long long)p->spec_step_tokens,
                            (double)p->draft_p_min);
    }
    const char *accept = p->spec_accept != NULL && *p->spec_accept ? p->spec_accept : "exact";
    if (strcmp(accept, "exact") != 0 && strcmp(accept, "rejection") != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "spec-accept: unknown acceptance '%s' (exact, rejection)", accept);
    }
    ec->spec_rejection = strcmp(accept, "rejection") == 0;
    if (!ngram && !draft) {
        ec->draft_max = 0;
        return TS_OK;
    }
    ec->draft_max = p->draft_max > 0 ? p->draft_max : 16;
    /* A draft of one or two tokens costs a CPU step about what four rows do (the gemm kernels
     * take activation rows by fours) and gains little: three at least by default. */
    ec->draft_min = p->draft_min > 0 ? p->draft_min : (ec->draft_max < 3 ? ec->draft_max : 3);
    if (ec->draft_min > ec->draft_max) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "speculative decoding: draft-min %d is above draft-max %d",
                            ec->draft_min, ec->draft_max);
    }
    ec->ngram_min = p->spec_ngram_min > 0 ? p->spec_ngram_min : 3;
    ec->ngram_max =
        p->spec_ngram_max > 0 ? p->spec_ngram_max : (ec->ngram_min > 4 ? ec->ngram_min : 4);
    if (ec->ngram_min > ec->ngram_max) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "speculative decoding: spec-ngram-min %d is above spec-ngram-max %d",
                            ec->ngram_min, ec->ngram_max);
    }
    if (p->spec_step_tokens > 0) {
        ec->spec_step_tokens = p->spec_step_tokens;
    }
    return TS_OK;
}

/* The engine configuration: the engine's defaults for the model, then the parameters. */
static ts_status engine_config(ts_context *ctx, const ts_context_params *p, ts_error *err) {
    ts_engine_config *ec = &ctx->ec;
    *ec = ts_engine_config_default(ctx->llm->model);
    if (p->n_ctx > 0) {
        ec->n_ctx = p->n_ctx;
    }
    if (p->kv_tokens > 0) {
        ec->kv_tokens = p->kv_tokens;
    }
    if (p->max_seqs > 0) {
        ec->max_seqs = p->max_seqs;
    }
    if (p->max_batch_tokens > 0) {
        ec->max_batch_tokens = p->max_batch_tokens;
    }
    ec->max_queue = p->max_queue;
    ec->prefix_cache = !p->no_prefix_cache;
    ts_status sst = spec_config(p, ec, err);
    if (sst != TS_OK) {
        return sst;
    }
    ec->swa_full = p->swa_full != 0;
    /* K's type: kv_type_k, else kv_type (both caches); V's likewise. The option named in an
     * error is the one that chose the type. */
    const char *names[2] = {p->kv_type_k != NULL ? p->kv_type_k : p->kv_type,
                            p->kv_type_v != NULL ? p->kv_type_v : p->kv_type};
    const char *options[2] = {p->kv_type_k != NULL ? "cache-type-k" : "kv-type",
                              p->kv_type_v != NULL ? "cache-type-v" : "kv-type"};
    ts_type types[2];
    for (int kv = 0; kv < 2; kv++) {
        ts_status st = kv_cache_type(ctx, options[kv], names[kv], &types[kv], err);
        if (st != TS_OK) {
            return st;
        }
    }
    ec->kv_type_k = types[0];
    ec->kv_type_v = types[1];
    snprintf(ctx->kv_type_k, sizeof ctx->kv_type_k, "%s", names[0]);
    snprintf(ctx->kv_type_v, sizeof ctx->kv_type_v, "%s", names[1]);
    if (types[0] == types[1]) {
        snprintf(ctx->kv_type, sizeof ctx->kv_type, "%s", names[0]);
    } else {
        snprintf(ctx->kv_type, sizeof ctx->kv_type, "%s/%s", names[0], names[1]);
    }
    return check_kv_backend(ctx, types, options, names, err);
}

/* Sliding-window layers that get their own cache (none with swa_full), and the tokens that
 * cache holds at most (ts_engine_forward_config: by the window, sequences and step tokens). */
static int64_t window_layers(const ts_context *ctx, int64_t *cap_tokens) {
    const ts_hparams *hp = &ctx->llm->model->hp;
    int64_t n = 0;
    for (int64_t il = 0; il < hp->n_layer && !ctx->ec.swa_full; il++) {
        n += ts_hparams_layer_is_swa(hp, il);
    }
    int64_t block = ctx->ec.block_size > 0 ? ctx->ec.block_size : TS_KV_DEFAULT_BLOCK_SIZE;
    int64_t seqs =
        ctx->ec.max_seqs < ctx->ec.max_batch_tokens ? ctx->ec.max_seqs : ctx->ec.max_batch_tokens;
    uint32_t blocks = 0;
    ts_error ignored = {0};
    if (n > 0 && ts_kv_blocks_for_window((uint64_t)hp->n_swa, (uint32_t)block, (uint32_t)seqs,
                                         (uint32_t)ctx->ec.max_batch_tokens, UINT32_MAX, &blocks,
                                         &ignored) != TS_OK) {
        n = 0;
    }
    *cap_tokens = (int64_t)blocks * block;
    return n;
}

/* kv_bytes -> KV tokens. Under tensor parallelism the budget is for all shards' caches
 * together: each shard holds its own KV heads (shards may hold different numbers; a
 * replicated head counts per copy). With a sliding-window cache, the budget pays for it too:
 * it holds min(tokens, its cap) tokens of the window layers. */
static ts_status kv_tokens_for_bytes(ts_context *ctx, int64_t bytes, ts_error *err) {
    const ts_hparams *hp = &ctx->llm->model->hp;
    int64_t heads = hp->n_head_kv, most = 0;
    if (ctx->tp.size > 1) {
        ts_status st = ts_shard_kv_heads(ctx->llm->model, ctx->tp.size, &heads, &most, err);
        if (st != TS_OK) {
            return st;
        }
    }
    /* One K and one V row of head_dim elements per head and layer: row is their sum. */
    size_t row = 0;
    size_t row_v = 0;
    if (!ts_type_row_bytes(ctx->ec.kv_type_k, (uint64_t)hp->head_dim, &row) ||
        !ts_type_row_bytes(ctx->ec.kv_type_v, (uint64_t)hp->head_dim, &row_v)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "kv cache %s needs head_dim a multiple of 32, but the model's "
                            "head_dim is %lld",
                            ctx->kv_type, (long long)hp->head_dim);
    }
    row += row_v;
    int64_t cap = 0, n_window = window_layers(ctx, &cap);
    int64_t per_full = (hp->n_layer - n_window) * heads * (int64_t)row;
    int64_t per_window = n_window * heads * (int64_t)row;
    int64_t per_token = per_full + per_window;
    int64_t block = ctx->ec.block_size > 0 ? ctx->ec.block_size : TS_KV_DEFAULT_BLOCK_SIZE;
    int64_t tokens = bytes / per_token;
    if (n_window > 0 && tokens > cap) {
        /* The window cache stops at its cap; the rest of the budget goes to the full one (whose
         * blocks, without full-attention layers, cost nothing: then the most it can use). */
        int64_t all = ctx->ec.n_ctx * ctx->ec.max_seqs;
        tokens = per_full > 0 ? (bytes - cap * per_window) / per_full : all;
        tokens = tokens < ((int64_t)1 << 30) ? tokens : ((int64_t)1 << 30);
    }
    if (tokens < block) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv memory of %lld bytes holds %lld tokens (%lld bytes each): less "
                            "than one block of %lld",
                            (long long)bytes, (long long)tokens, (long long)per_token,
                            (long long)block);
    }
    ctx->ec.kv_tokens = tokens;
    return TS_OK;
}

/* The runner for the engine's bucket (raised to max_outputs rows of logits) and the engine. */
static ts_status make_runner_and_engine(ts_context *ctx, const ts_context_params *p,
                                        ts_error *err) {
    const ts_model *m = ctx->llm->model;
    ts_forward_config fc;
    ts_status st = ts_engine_forward_config(m, &ctx->ec, &fc, err);
    if (st != TS_OK) {
        return st;
    }
    if (p->max_outputs > fc.max_outputs) {
        fc.max_outputs = p->max_outputs < fc.max_tokens ? p->max_outputs : fc.max_tokens;
    }
    if (m->hp.enc != NULL && p->max_outputs == 0) {
        /* An encoder has no logits, so a row per token costs only its hidden state: mean
         * pooling reads every token of inputs as long as a step. */
        fc.max_outputs = fc.max_tokens;
    }
    st = ctx->tp.size > 1
             ? ts_tp_runner_create(m, ctx->backend, &fc, ctx->reg, &ctx->tp.cfg, &ctx->runner, err)
             : ts_forward_runner_create(m, ctx->backend, &fc, ctx->reg, &ctx->runner, err);
    if (st == TS_OK) {
        st = ts_engine_create(m, ctx->llm->tok, ctx->runner, &ctx->ec, &ctx->engine, err);
    }
    if (st == TS_OK && ctx->draft_llm != NULL) {
        st = rt_draft_attach(ctx, p, err);
    }
    return st;
}

static void fill_info(ts_context *ctx, const ts_context_params *p, int threads) {
    const ts_forward_config *fc = &ctx->runner->cfg;
    ts_context_info *in = &ctx->info;
    in->backend = ts_backend_name(ctx->compute);
    in->tp = ctx->tp.size;
    in->n_threads = threads * (ctx->tp.mpi ? 1 : ctx->tp.size);
    in->n_ctx = ctx->ec.n_ctx;
    in->kv_tokens = fc->n_blocks * fc->block_size;
    in->max_seqs = fc->max_seqs;
    in->max_batch_tokens = fc->max_tokens;
    in->max_outputs = fc->max_outputs;
    in->block_size = fc->block_size;
    in->kv_type = ctx->kv_type;
    in->kv_type_k = ctx->kv_type_k;
    in->kv_type_v = ctx->kv_type_v;
    in->kv_bytes = ctx->runner->kv_bytes;
    in->kv_swa_tokens = fc->n_blocks_swa * fc->block_size;
    in->kv_swa_bytes = ctx->runner->kv_swa_bytes;
    in->spec_type = ctx->ec.draft_max == 0 ? "none" : ctx->draft_llm != NULL ? "draft" : "ngram";
    in->spec_accept = ctx->ec.spec_rejection ? "rejection" : "exact";
    in->draft_model = ctx->draft_llm != NULL ? ctx->draft_path : NULL;
    if (ctx->ec.draft_max > 0) {
        in->draft_max = ctx->ec.draft_max;
        in->draft_min = ctx->ec.draft_min;
        in->spec_ngram_min = ctx->ec.ngram_min;
        in->spec_ngram_max = ctx->ec.ngram_max;
        in->spec_step_tokens = ctx->ec.spec_step_tokens;
    }
    in->chat_template = ctx->chat.has_family ? ts_chat_family_name(ctx->chat.family.family) : NULL;
    in->chat_template_source = ctx->chat.tpl != NULL ? ctx->chat.source : NULL;
    in->chat_template_notice = ctx->chat.notice;
    in->kernels = ctx->kernels;
    in->kernel_notice = ctx->kernel_notice;
    /* The in-process shards' repacked weights too (an MPI rank's are its own). */
    for (int k = 0; k < ctx->tp.size && !ctx->tp.mpi; k++) {
        size_t bytes = 0;
        double ms = 0;
        ts_cpu_backend_repacked(k == 0 ? ctx->compute : ctx->tp.peers[k - 1], &bytes, &ms);
        in->repacked_bytes += bytes;
        in->repack_ms += ms;
    }
    if (ctx->tp.mpi) {
        size_t bytes = 0;
        ts_cpu_backend_repacked(ctx->compute, &bytes, &in->repack_ms);
        in->repacked_bytes = bytes;
    }
}

static ts_status context_create(ts_llm *llm, const ts_context_params *params, ts_context **out,
                                ts_error *err) {
    if (out != NULL) {
        *out = NULL; /* on every failure, including a NULL llm */
    }
    if (llm == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_create: llm and out are required");
    }
    if (llm->model == NULL) {
        return ts_error_set(err, TS_ERR_STATE,
                            "ts_context_create: the model was opened vocabulary-only");
    }
    double t0 = now_ms();
    ts_context_params p = params != NULL ? *params : ts_context_params_default();
    ts_status st = check_params(&p, err);
    if (st != TS_OK) {
        return st;
    }
    ts_context *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_context_create: out of memory");
    }
    ctx->llm = llm;
    int threads = p.n_threads > 0 ? p.n_threads : ts_cpu_physical_cores();
    int shard_threads = threads;
    if (p.tp > 1) {
        shard_threads = threads / p.tp > 0 ? threads / p.tp : 1;
    }
    st = make_backends(ctx, &p, shard_threads, err);
    if (st == TS_OK) {
        st = ts_registry_create(&ctx->reg, err);
    }
    if (st == TS_OK) {
        st = apply_overrides(ctx, &p, err);
    }
    if (st == TS_OK) {
        st = choose_template(ctx, &p, err);
    }
    if (st == TS_OK) {
        st = engine_config(ctx, &p, err);
    }
    bool follower = false;
    if (st == TS_OK) {
        st = rt_tp_group_open(&ctx->tp, &p, llm->model, ctx->reg, shard_threads, &follower, err);
    }
    if (follower) {
        /* An MPI rank > 0 whose group has ended: nothing is left to do in this process. */
        ts_context_destroy(ctx);
        return st;
    }
    if (st == TS_OK && p.kv_bytes > 0) {
        st = kv_tokens_for_bytes(ctx, p.kv_bytes, err);
    }
    if (st == TS_OK && p.draft_model != NULL) {
        st = rt_draft_open(ctx, p.draft_model, err);
    }
    if (st == TS_OK) {
        st = make_runner_and_engine(ctx, &p, err);
    }
    if (st != TS_OK) {
        rt_tp_group_abort(&ctx->tp, err->msg);
        ts_context_destroy(ctx);
        return st;
    }
    fill_info(ctx, &p, shard_threads);
    ctx->info.load_ms = now_ms() - t0;
    *out = ctx;
    return TS_OK;
}

ts_status ts_context_create(ts_llm *llm, const ts_context_params *params, ts_context **out,
                            ts_error *err) {
    ts_error local = {0};
    return context_create(llm, params, out, err != NULL ? err : &local);
}

void ts_context_destroy(ts_context *ctx) {
    if (ctx == NULL) {
        return;
    }
    rt_batch_free(&ctx->b);
    rt_chat_close(&ctx->chat);
    ts_engine_destroy(ctx->engine);
    ts_runner_destroy(ctx->draft_runner);
    ts_runner_destroy(ctx->runner); /* ends the group's forward: followers stop */
    ts_llm_close(ctx->draft_llm);
    free(ctx->draft_path);
    rt_tp_group_close(&ctx->tp);
    ts_registry_destroy(ctx->reg);
    ts_backend_destroy(ctx->hook_dump);
    ts_backend_destroy(ctx->hook_profile);
    ts_backend_destroy(ctx->hook_compare);
    ts_backend_destroy(ctx->oracle);
    ts_backend_destroy(ctx->compute);
    if (ctx->dump_file != NULL && ctx->dump_file != stdout) {
        fclose(ctx->dump_file);
    }
    free(ctx);
}

void ts_context_get_info(const ts_context *ctx, ts_context_info *out) {
    *out = ctx->info;
}

const ts_llm *ts_context_llm(const ts_context *ctx) {
    return ctx->llm;
}

ts_status rt_use_mode(ts_context *ctx, int mode, const char *fn, bool *claimed, ts_error *err) {
    int was = MODE_NONE;
    *claimed = atomic_compare_exchange_strong(&ctx->mode, &was, mode);
    if (*claimed || was == mode) {
        return TS_OK;
    }
    return ts_error_set(err, TS_ERR_STATE,
                        "%s: this context is used for %s; a context serves either requests or "
                        "batches (ts_context_clear ends batch use)",
                        fn, was == MODE_REQUESTS ? "requests" : "batches");
}

void rt_unclaim_mode(ts_context *ctx) {
    ctx->mode = MODE_NONE;
}

void rt_latch_compare(ts_context *ctx) {
    if (ctx->hook_compare == NULL || ctx->diverged) {
        return;
    }
    const ts_compare_result *r = ts_hook_compare_result(ctx->hook_compare);
    if (r == NULL || !r->diverged) {
        return;
    }
    ts_divergence *d = &ctx->divergence;
    memset(d, 0, sizeof *d);
    d->node = r->node;
    snprintf(d->name, sizeof d->name, "%s", r->name);
    d->op = ts_op_name(r->op);
    d->max_abs = r->max_abs;
    d->max_rel = r->max_rel;
    d->index = r->index;
    d->compared = r->compared;
    ctx->diverged = true;
}

bool ts_context_diverged(const ts_context *ctx, ts_divergence *out) {
    if (ctx->diverged && out != NULL) {
        *out = ctx->divergence;
    }
    return ctx->diverged;
}

void ts_context_get_tp_stats(const ts_context *ctx, ts_tp_stats *out) {
    memset(out, 0, sizeof *out);
    out->size = ctx->tp.size > 0 ? ctx->tp.size : 1;
    if (ctx->tp.size <= 1 || ctx->tp.comms == NULL) {
        return;
    }
    const ts_comm *c = ctx->tp.comms[0];
    out->transport = ts_comm_name(c);
    out->all_reduce_calls = c->stats.calls[TS_COLL_ALL_REDUCE];
    out->all_gather_calls = c->stats.calls[TS_COLL_ALL_GATHER];
    out->payload_bytes = c->stats.payload_bytes;
    out->wire_bytes = c->stats.wire_bytes;
}

void ts_context_report(const ts_context *ctx, FILE *f) {
    ts_tp_stats tp;
    ts_context_get_tp_stats(ctx, &tp);
    double per = (double)ctx->tokens_computed;
    if (ctx->engine != NULL && ctx->mode == MODE_REQUESTS) {
        ts_engine_stats es;
        ts_engine_get_stats(ctx->engine, &es);
        per = (double)(es.prompt_tokens + es.generated_tokens);
    }
    if (tp.size > 1 && per > 0) {
        fprintf(f,
                "tp: %d ranks over %s: %llu all-reduce and %llu all-gather calls; %.1f KiB "
                "payload and %.1f KiB ring traffic per token per rank\n",
                tp.size, tp.transport, (unsigned long long)tp.all_reduce_calls,
                (unsigned long long)tp.all_gather_calls, (double)tp.payload_bytes / per / 1024.0,
                (double)tp.wire_bytes / per / 1024.0);
    }
    if (ctx->hook_profile != NULL) {
        ts_hook_profile_report(ctx->hook_profile, f);
    }
    if (ctx->hook_compare != NULL) {
        ts_divergence d;
        if (ts_context_diverged(ctx, &d)) {
            fprintf(f,
                    "compare: node %d '%s' (%s) differs from the reference: max abs error %.6g, "
                    "max rel error %.6g (element %lld) after %d nodes agreed\n",
                    d.node, d.name, d.op, d.max_abs, d.max_rel, (long long)d.index, d.node);
        } else {
            const ts_compare_result *r = ts_hook_compare_result(ctx->hook_compare);
            fprintf(f, "compare: every node matched the reference (%d nodes in the last step)\n",
                    r ? r->compared : 0);
        }
    }
}
