/*
 * forward.c — wiring a transformer forward pass for every registered architecture.
 *
 * One graph per forward context:
 *
 *   x = GET_ROWS(token_embd, tokens) (* embd_scale) (+ GET_ROWS(position_embd, pos))
 *   per layer: x += r * [post_norm] attn([norm](x));  x += r * [post_norm] ffn([norm](x))
 *     (a family without pre-norms feeds x itself; r = residual_scale, 1 but for Granite)
 *   or, for a parallel block (Cohere 2): h = norm(x); x += attn(h) + ffn(h)
 *   embd = norm(GET_ROWS(x, outputs));  logits = (output · embd) * logit_mul
 *
 * attn: Q/K/V projections (fused or separate, optional bias), optional Q/K RMS norm (per head,
 * or over the whole projection for OLMo 2), RoPE (layout, base and scaling from hparams: linear,
 * YaRN, llama3 / Phi-3 frequency factors; sliding-window layers may have their own base; NoPE
 * layers of SmolLM3 and Cohere 2 skip it),
 * KV_STORE of this step's K/V rows into their slots, then paged ATTENTION through the block
 * tables (GQA by head mapping inside the op), output projection. ffn: SwiGLU or GEGLU over
 * separate or fused gate/up, or GELU MLP with biases (GPT-2).
 *
 * A sliding-window pool (cfg.n_blocks_swa > 0): the sliding-window layers' caches have its
 * size, and their KV_STORE and ATTENTION use its slots and tables (slots_swa, table_swa).
 *
 * Weights: every tensor the model has becomes a graph parameter bound to the mapping before
 * the wiring starts, so the wiring only looks weights up; a NULL lookup means the model lacks
 * that (optional) weight, never a failure. Builders record failures in the graph (sticky).
 *
 * Both embd and logits are graph outputs: the planner keeps them readable after the run.
 *
 * Shards (shard.h): the graph of shard (rank, size) is the same wiring over the slices the plan
 * gives — its query and KV heads, its FFN units, its vocabulary rows — read through views into
 * the mapped weights. A row-parallel projection (attention output, FFN down) is followed by an
 * ALL_REDUCE_SUM before its bias; vocab-parallel logits are ALL_GATHERed. The residual stream,
 * and so embd, is complete on every shard. With size 1 every slice is the whole tensor and the
 * graph has no collective. Which shards run together, and how, is model/tp.c's business.
 */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/functional.h"
#include "ir/plan.h"
#include "model/runner.h"
#include "model/shard.h"
#include "parallel/comm.h"
#include "util/error.h"

struct ts_forward {
    const ts_model *m;
    ts_backend *b;
    ts_forward_config cfg;
    ts_graph *g;
    int sym_tok, sym_out;
    int32_t *table_buf; /* [max_seqs, max_blocks_per_seq]: this step's tables, -1 padded */
    int32_t *len_buf;   /* [max_seqs]: this step's lengths, 0 padded */
    ts_tensor *tokens, *pos, *seq, *slots, *table, *len, *outputs; /* inputs */
    ts_tensor *embd;                                               /* [n_embd, n_out] */
    ts_tensor *logits;                                             /* [n_vocab, n_out] */
    ts_tensor **params; /* [(n_layer + 1) * TS_ROLE_COUNT]: the model's weights, NULL where
                           it has none */
    ts_tensor **cache;  /* [2 * n_layer]: K then V pool of each layer */
    ts_buffer *weights; /* wraps the mapped file */
    ts_buffer *rope_buf;     /* wraps hp.rope_llama3_factors when the metadata gives llama3 */
    ts_tensor *rope_factors; /* f32 [n_rot/2] divisors of the RoPE angles, or NULL */
    ts_buffer *kv;      /* every layer's K and V pools */
    ts_shard_plan plan; /* this rank's shard (size 1: the whole model) */
    ts_comm *comm;      /* borrowed; the collectives' group 0, NULL for the whole model */
    /* Encoders (hp.enc): */
    ts_tensor *types;     /* with token types: i32 [n_tokens], all 0 (segment A) */
    ts_tensor *horizon;   /* i32 [n_tokens], the last key position each token sees (its
                             sequence's length - 1: every key of the sequence) */
    int32_t *types_buf;   /* [max_tokens] zeros */
    int32_t *horizon_buf; /* [max_tokens] this step's horizons; scratch of the batch check */

    /* The sliding-window pool (cfg.n_blocks_swa > 0; NULL and 0 without). */
    ts_tensor *slots_swa, *table_swa; /* inputs */
    int32_t *table_swa_buf;           /* [max_seqs, max_blocks_per_seq] like table_buf */
    size_t kv_swa_bytes;              /* the sliding-window layers' part of kv */
};

#define TP_GROUP 0 /* communicator group of the tensor-parallel collectives */

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

static size_t param_slot(ts_role role, int64_t il) {
    return role < TS_ROLE_FIRST_LAYER ? (size_t)role
                                      : (size_t)(il + 1) * TS_ROLE_COUNT + (size_t)role;
}

/* Makes a graph parameter for every tensor the model has, bound where it lies in the
 * mapping. */
static ts_status make_params(ts_forward *f, ts_error *err) {
    size_t data = ts_gguf_data_offset(f->m->gguf);
    for (int r = 0; r < TS_ROLE_COUNT; r++) {
        ts_role role = (ts_role)r;
        int64_t n = role < TS_ROLE_FIRST_LAYER ? 1 : f->m->hp.n_layer;
        for (int64_t il = 0; il < n; il++) {
            const ts_gguf_tensor *gt = ts_model_tensor(f->m, role, il);
            if (gt == NULL) {
                continue;
            }
            ts_tensor *t = ts_graph_param(f->g, gt->name, gt->type, (int)gt->n_dims, gt->ne);
            if (t == NULL) {
                return ts_graph_status(f->g, err);
            }
            ts_status st = ts_tensor_bind(t, f->weights, data + gt->offset, err);
            if (st != TS_OK) {
                return st;
            }
            f->params[param_slot(role, il)] = t;
        }
    }
    return TS_OK;
}

/* The parameter of a weight, or NULL when the model has no such tensor. */
static ts_tensor *weight(const ts_forward *f, ts_role role, int64_t il) {
    return f->params[param_slot(role, il)];
}

/* This shard's slice [first, first + n) of weight t along axis: rows (ne[1]) for COL — or the
 * elements of a vector — and columns (ne[0]) for ROW; of every matrix of a 3-D (stacked
 * experts) weight. A view into the mapping, no copy. */
static ts_tensor *slice(ts_forward *f, ts_tensor *t, ts_split axis, int64_t first, int64_t n) {
    if (t == NULL || axis == TS_SPLIT_NONE || f->plan.shard.size == 1) {
        return t;
    }
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    size_t offset;
    if (t->n_dims == 1) {
        ne[0] = n;
        offset = (size_t)first * t->nb[0];
    } else if (axis == TS_SPLIT_COL) {
        ne[1] = n;
        offset = (size_t)first * t->nb[1];
    } else {
        ne[0] = n; /* shard.c checked that first and n are whole blocks */
        offset = (size_t)(first / (int64_t)ts_type_block_size(t->type)) * t->nb[0];
    }
    return ts_op_view(f->g, t, t->n_dims, ne, t->nb, offset);
}

/* Column-parallel y = W[first:first+n] x (+ b[first:first+n]): this shard's output rows. */
static ts_tensor *linear_col(ts_forward *f, ts_tensor *x, ts_role w_role, ts_role b_role,
                             int64_t il, int64_t first, int64_t n) {
    ts_split s = f->plan.split[w_role];
    ts_tensor *b = b_role < TS_ROLE_COUNT ? weight(f, b_role, il) : NULL;
    return ts_linear(f->g, x, slice(f, weight(f, w_role, il), s, first, n),
                     slice(f, b, s, first, n));
}

/* Row-parallel y = sum over shards (W[:, first:first+n] x_shard) (+ b): one all-reduce. */
static ts_tensor *linear_row(ts_forward *f, ts_tensor *x, ts_role w_role, ts_role b_role,
                             int64_t il, int64_t first, int64_t n) {
    ts_tensor *w = slice(f, weight(f, w_role, il), f->plan.split[w_role], first, n);
    ts_tensor *y = ts_linear(f->g, x, w, NULL);
    if (f->plan.shard.size > 1) {
        y = ts_op_all_reduce_sum(f->g, y, TP_GROUP, f->plan.shard.size);
    }
    ts_tensor *b = weight(f, b_role, il);
    return b != NULL ? ts_op_add(f->g, y, b) : y;
}

/* norm(x) with the layer's weights; x itself where the architecture has no such norm (OLMo 2
 * and EXAONE 4 norm the blocks' outputs instead of their inputs). */
static ts_tensor *norm(ts_forward *f, ts_tensor *x, ts_role w_role, ts_role b_role, int64_t il) {
    const ts_hparams *hp = &f->m->hp;
    ts_tensor *w = weight(f, w_role, il);
    if (w == NULL) {
        return x;
    }
    if (hp->arch->norm == TS_NORM_RMS) {
        return ts_rms_norm(f->g, x, w, hp->norm_eps);
    }
    return ts_layer_norm(f->g, x, w, weight(f, b_role, il), hp->norm_eps);
}

/* y = W x (+ b) */
static ts_tensor *linear(ts_forward *f, ts_tensor *x, ts_role w_role, ts_role b_role, int64_t il) {
    return ts_linear(f->g, x, weight(f, w_role, il), weight(f, b_role, il));
}

/* Rows [first, first + n_rows) of a [rows, T] activation, viewed as [head_dim, heads, T] and
 * made contiguous. */
static ts_tensor *split_heads(ts_forward *f, ts_tensor *a, int64_t first, int64_t heads) {
    const ts_hparams *hp = &f->m->hp;
    if (a == NULL) {
        return NULL; /* the graph's sticky error says why */
    }
    int64_t ne[3] = {hp->head_dim, heads, a->ne_max[1]};
    size_t nb[3] = {sizeof(float), (size_t)hp->head_dim * sizeof(float), a->nb[1]};
    ts_tensor *v = ts_op_view(f->g, a, 3, ne, nb, (size_t)first * sizeof(float));
    return ts_op_cont(f->g, v);
}

static ts_tensor *heads(ts_forward *f, ts_tensor *a, int64_t n) {
    if (a == NULL) {
        return NULL;
    }
    int64_t ne[3] = {f->m->hp.head_dim, n, a->ne_max[1]};
    return ts_op_reshape(f->g, a, 3, ne);
}

/* The tokens one sequence may hold: what Phi-3's long/short choice compares. */
static int64_t context_len(const ts_forward_config *c) {
    return c->n_ctx > 0 ? c->n_ctx : c->max_blocks_per_seq * c->block_size;
}

/* The frequency factors the model's RoPE divides its angles by, as a graph parameter: the
 * file's rope_freqs (llama3), the llama3 factors computed from metadata, or Phi-3's long
 * factors when the context exceeds the original one and its short ones otherwise (as
 * llama.cpp chooses; transformers switches per sequence length, see docs/architecture.md). */
static ts_status make_rope_factors(ts_forward *f, ts_error *err) {
    const ts_hparams *hp = &f->m->hp;
    ts_tensor *t = weight(f, TS_ROLE_ROPE_FREQS, 0);
    if (t == NULL && hp->rope_llama3_factors != NULL) {
        size_t bytes = (size_t)(hp->n_rot / 2) * sizeof(float);
        ts_status st =
            ts_backend_buffer_wrap(f->b, hp->rope_llama3_factors, bytes, &f->rope_buf, err);
        if (st != TS_OK) {
            return st;
        }
        int64_t ne = hp->n_rot / 2;
        t = ts_graph_param(f->g, "rope_freqs.llama3", TS_TYPE_F32, 1, &ne);
        if (t == NULL) {
            return ts_graph_status(f->g, err);
        }
        if ((st = ts_tensor_bind(t, f->rope_buf, 0, err)) != TS_OK) {
            return st;
        }
    }
    if (t == NULL && weight(f, TS_ROLE_ROPE_FACTORS_LONG, 0) != NULL) {
        bool long_ctx = context_len(&f->cfg) > hp->rope_n_ctx_orig;
        t = weight(f, long_ctx ? TS_ROLE_ROPE_FACTORS_LONG : TS_ROLE_ROPE_FACTORS_SHORT, 0);
    }
    f->rope_factors = t;
    return TS_OK;
}

/* RoPE of layer il: the model's scaling (factors, YaRN, attention factor), except on local
 * layers with their own base (Gemma 3) or of a family whose local layers go unscaled (OLMo 3),
 * which keep plain positions. */
static ts_rope_params layer_rope(const ts_forward *f, bool swa) {
    const ts_hparams *hp = &f->m->hp;
    ts_rope_mode mode = hp->arch->pos == TS_POS_ROPE_NEOX ? TS_ROPE_NEOX : TS_ROPE_NORMAL;
    float base = swa ? hp->rope_base_swa : hp->rope_base;
    ts_rope_params p = ts_rope_params_plain((int)hp->n_rot, mode, base);
    if (swa && (hp->arch->swa_rope_base > 0 || hp->arch->swa_rope_plain)) {
        return p;
    }
    p.freq_scale = hp->rope_freq_scale;
    p.freq_factors = f->rope_factors;
    p.attn_factor = hp->rope_attn_factor;
    p.ext_factor = hp->rope_ext_factor;
    if (p.ext_factor != 0.0f) {
        float corr[2];
        ts_rope_yarn_corr_dims(p.n_rot, base, hp->rope_n_ctx_orig, hp->rope_beta_fast,
                               hp->rope_beta_slow, corr);
        p.corr_lo = corr[0];
        p.corr_hi = corr[1];
    }
    return p;
}

/* True when layer il keeps its K/V in the sliding-window pool. */
static bool in_swa_pool(const ts_forward *f, int64_t il) {
    return f->cfg.n_blocks_swa > 0 && ts_hparams_layer_is_swa(&f->m->hp, il);
}

static ts_tensor *attention_block(ts_forward *f, ts_tensor *h, int64_t il) {
    const ts_hparams *hp = &f->m->hp;
    const ts_shard_plan *p = &f->plan;
    ts_graph *g = f->g;
    int64_t hd = hp->head_dim;
    int64_t n_q = hp->n_head * hd;
    int64_t n_kv = hp->n_head_kv * hd;
    ts_tensor *q, *k, *v;
    ts_tensor *qn = weight(f, TS_ROLE_ATTN_Q_NORM, il);
    ts_tensor *kn = weight(f, TS_ROLE_ATTN_K_NORM, il);
    if (hp->arch->qk_norm_full) {
        /* The norms span every head, so each shard projects all of Q and K (the plan keeps
         * them whole), norms the rows and keeps its own heads. */
        ts_tensor *qa =
            ts_rms_norm(g, linear(f, h, TS_ROLE_ATTN_Q, TS_ROLE_ATTN_Q_B, il), qn, hp->norm_eps);
        ts_tensor *ka =
            ts_rms_norm(g, linear(f, h, TS_ROLE_ATTN_K, TS_ROLE_ATTN_K_B, il), kn, hp->norm_eps);
        bool whole = p->shard.size == 1;
        q = whole ? heads(f, qa, p->n_head) : split_heads(f, qa, p->head0 * hd, p->n_head);
        k = whole ? heads(f, ka, p->n_kv) : split_heads(f, ka, p->kv0 * hd, p->n_kv);
        v = heads(f,
                  linear_col(f, h, TS_ROLE_ATTN_V, TS_ROLE_ATTN_V_B, il, p->kv0 * hd, p->n_kv * hd),
                  p->n_kv);
        qn = kn = NULL;
    } else if (ts_model_tensor(f->m, TS_ROLE_ATTN_QKV, il) != NULL && p->shard.size == 1) {
        ts_tensor *qkv = linear(f, h, TS_ROLE_ATTN_QKV, TS_ROLE_ATTN_QKV_B, il);
        q = split_heads(f, qkv, 0, hp->n_head);
        k = split_heads(f, qkv, n_q, hp->n_head_kv);
        v = split_heads(f, qkv, n_q + n_kv, hp->n_head_kv);
    } else if (ts_model_tensor(f->m, TS_ROLE_ATTN_QKV, il) != NULL) {
        /* A shard takes its heads from each of the fused matrix's three parts. */
        ts_role w = TS_ROLE_ATTN_QKV, b = TS_ROLE_ATTN_QKV_B;
        q = heads(f, linear_col(f, h, w, b, il, p->head0 * hd, p->n_head * hd), p->n_head);
        k = heads(f, linear_col(f, h, w, b, il, n_q + p->kv0 * hd, p->n_kv * hd), p->n_kv);
        v = heads(f, linear_col(f, h, w, b, il, n_q + n_kv + p->kv0 * hd, p->n_kv * hd), p->n_kv);
    } else {
        q = heads(
            f,
            linear_col(f, h, TS_ROLE_ATTN_Q, TS_ROLE_ATTN_Q_B, il, p->head0 * hd, p->n_head * hd),
            p->n_head);
        k = heads(f,
                  linear_col(f, h, TS_ROLE_ATTN_K, TS_ROLE_ATTN_K_B, il, p->kv0 * hd, p->n_kv * hd),
                  p->n_kv);
        v = heads(f,
                  linear_col(f, h, TS_ROLE_ATTN_V, TS_ROLE_ATTN_V_B, il, p->kv0 * hd, p->n_kv * hd),
                  p->n_kv);
    }
    if (qn != NULL) {
        q = ts_rms_norm(g, q, qn, hp->norm_eps);
    }
    if (kn != NULL) {
        k = ts_rms_norm(g, k, kn, hp->norm_eps);
    }
    bool swa = ts_hparams_layer_is_swa(hp, il);
    if (ts_hparams_layer_has_rope(hp, il)) {
        ts_rope_params rp = layer_rope(f, swa);
        q = ts_rope_ext(g, q, f->pos, &rp);
        k = ts_rope_ext(g, k, f->pos, &rp);
    }
    bool own = in_swa_pool(f, il);
    ts_tensor *slots = own ? f->slots_swa : f->slots;
    ts_tensor *kc = ts_op_kv_store(g, f->cache[2 * il], k, slots);
    ts_tensor *vc = ts_op_kv_store(g, f->cache[2 * il + 1], v, slots);
    ts_attn_args args = {
        .q = q,
        .k = kc,
        .v = vc,
        .table = own ? f->table_swa : f->table,
        .seq = f->seq,
        .pos = f->horizon != NULL ? f->horizon : f->pos, /* visibility: key j <= pos */
        .len = f->len,
        .scale = hp->attn_scale,
        .softcap = hp->attn_softcap,
        .window = swa ? (int)hp->n_swa : 0,
        .sinks = slice(f, weight(f, TS_ROLE_ATTN_SINKS, il), TS_SPLIT_COL, p->head0, p->n_head),
    };
    ts_tensor *a = ts_attention(g, &args);
    if (h == NULL) {
        return NULL;
    }
    int64_t ne[2] = {p->n_head * hd, h->ne_max[1]};
    a = ts_op_reshape(g, a, 2, ne);
    ts_tensor *o =
        linear_row(f, a, TS_ROLE_ATTN_OUT, TS_ROLE_ATTN_OUT_B, il, p->head0 * hd, p->n_head * hd);
    ts_tensor *post = weight(f, TS_ROLE_ATTN_POST_NORM, il);
    return post != NULL ? ts_rms_norm(g, o, post, hp->norm_eps) : o;
}

/* Rows [first, first + n) of a [rows, T] activation as a contiguous [n, T] tensor. */
static ts_tensor *split_rows(ts_forward *f, ts_tensor *a, int64_t first, int64_t n) {
    if (a == NULL) {
        return NULL;
    }
    int64_t ne[2] = {n, a->ne_max[1]};
    size_t nb[2] = {sizeof(float), a->nb[1]};
    return ts_op_cont(f->g, ts_op_view(f->g, a, 2, ne, nb, (size_t)first * sizeof(float)));
}

/* y [n, n_used, T] + the rows ids[e, t] of bias [n_all, n_expert], units [first, first + n)
 * (a shard's part); y itself without a bias. */
static ts_tensor *expert_bias(ts_forward *f, ts_tensor *y, ts_tensor *bias, ts_tensor *ids,
                              int64_t first, int64_t n) {
    if (bias == NULL || y == NULL) {
        return y;
    }
    if (n != bias->ne[0]) {
        int64_t ne[2] = {n, bias->ne[1]};
        bias = ts_op_view(f->g, bias, 2, ne, bias->nb, (size_t)first * bias->nb[0]);
    }
    return ts_op_add(f->g, y, ts_op_get_rows(f->g, bias, ids)); /* [n, n_used, T] */
}

/* The mixture of experts of layer il over h [n_embd, T]:
 *   logits = router · h                       [n_expert, T]
 *   p = softmax(logits) (or sigmoid)          ids = TOPK(p (+ exp_probs_b), n_used)  [n_used, T]
 *   w = GATHER(p, ids), or with renormalized weights p[ids] / sum(p[ids]): for softmax gating
 *       softmax(GATHER(logits, ids)), for sigmoid softmax(log(GATHER(p, ids))); times
 *       expert_weights_scale. A selection bias (DeepSeek-V3 style) only chooses the experts.
 *   y[:, e, t] = down_x(silu(gate_x(h_t)) * up_x(h_t)), x = ids[e, t]  (MUL_MAT_ID each;
 *       gpt-oss: router and experts have biases, the activation is SWIGLU_OAI)
 *   out = sum_e w[e, t] y[:, e, t]  (+ sigmoid(gate_inp_shexp · h) * shared_ffn(h))
 * A shard computes its hidden units of every expert and of the shared expert; the one
 * all-reduce sums the shards' weighted partial outputs. */
static ts_tensor *moe_block(ts_forward *f, ts_tensor *h, int64_t il) {
    const ts_hparams *hp = &f->m->hp;
    const ts_shard_plan *p = &f->plan;
    ts_graph *g = f->g;
    if (h == NULL) {
        return NULL;
    }
    int64_t n_used = hp->n_expert_used, T = h->ne_max[1];
    ts_tensor *logits = ts_linear(g, h, weight(f, TS_ROLE_FFN_GATE_INP, il),
                                  weight(f, TS_ROLE_FFN_GATE_INP_B, il));
    ts_tensor *probs = hp->moe_gating == TS_MOE_SIGMOID
                           ? ts_op_sigmoid(g, logits)
                           : ts_op_softmax(g, logits, NULL, 1.0f, 0.0f);
    ts_tensor *bias = weight(f, TS_ROLE_FFN_EXP_PROBS_B, il);
    ts_tensor *ids = ts_op_topk(g, bias != NULL ? ts_op_add(g, probs, bias) : probs, (int)n_used);
    ts_tensor *w;
    if (!hp->moe_norm_w) {
        w = ts_op_gather(g, probs, ids);
    } else if (hp->moe_gating == TS_MOE_SIGMOID) {
        w = ts_op_softmax(g, ts_op_log(g, ts_op_gather(g, probs, ids)), NULL, 1.0f, 0.0f);
    } else {
        w = ts_op_softmax(g, ts_op_gather(g, logits, ids), NULL, 1.0f, 0.0f);
    }
    if (hp->moe_w_scale != 1.0f) {
        w = ts_op_scale(g, w, hp->moe_w_scale);
    }
    int64_t x_ne[3] = {hp->n_embd, 1, T};
    ts_tensor *x = ts_op_reshape(g, h, 3, x_ne);
    ts_split cs = p->split[TS_ROLE_FFN_GATE_EXPS], rs = p->split[TS_ROLE_FFN_DOWN_EXPS];
    ts_tensor *gate = ts_op_mul_mat_id(
        g, slice(f, weight(f, TS_ROLE_FFN_GATE_EXPS, il), cs, p->ffe0, p->n_ffe), x, ids);
    ts_tensor *up = ts_op_mul_mat_id(
        g, slice(f, weight(f, TS_ROLE_FFN_UP_EXPS, il), cs, p->ffe0, p->n_ffe), x, ids);
    /* Expert biases (gpt-oss): row ids[e, t] of [n, n_expert], this shard's units of it. */
    gate = expert_bias(f, gate, weight(f, TS_ROLE_FFN_GATE_EXPS_B, il), ids, p->ffe0, p->n_ffe);
    up = expert_bias(f, up, weight(f, TS_ROLE_FFN_UP_EXPS_B, il), ids, p->ffe0, p->n_ffe);
    ts_tensor *act = hp->arch->ffn == TS_FFN_SWIGLU_OAI
                         ? ts_op_swiglu_oai(g, gate, up, 1.702f, 7.0f)
                         : ts_glu(g, TS_GLU_SILU, gate, up); /* [n_ffe, n_used, T] */
    ts_tensor *y = ts_op_mul_mat_id(
        g, slice(f, weight(f, TS_ROLE_FFN_DOWN_EXPS, il), rs, p->ffe0, p->n_ffe), act, ids);
    /* The down bias is whole on every shard: only shard 0 adds it before the all-reduce. */
    if (p->shard.rank == 0) {
        y = expert_bias(f, y, weight(f, TS_ROLE_FFN_DOWN_EXPS_B, il), ids, 0, hp->n_embd);
    }
    int64_t w_ne[3] = {1, n_used, T};
    y = ts_op_mul(g, y, ts_op_reshape(g, w, 3, w_ne)); /* [n_embd, n_used, T] */
    ts_tensor *out = NULL;
    for (int64_t e = 0; e < n_used && y != NULL; e++) {
        int64_t ne[2] = {hp->n_embd, T};
        size_t nb[2] = {sizeof(float), y->nb[2]};
        ts_tensor *ye = ts_op_view(g, y, 2, ne, nb, (size_t)e * y->nb[1]);
        out = out == NULL ? ye : ts_op_add(g, out, ye);
    }
    if (n_used == 1) {
        out = ts_op_cont(g, out);
    }
    if (weight(f, TS_ROLE_FFN_DOWN_SHEXP, il) != NULL) {
        ts_tensor *sg =
            linear_col(f, h, TS_ROLE_FFN_GATE_SHEXP, TS_ROLE_COUNT, il, p->ffs0, p->n_ffs);
        ts_tensor *su =
            linear_col(f, h, TS_ROLE_FFN_UP_SHEXP, TS_ROLE_COUNT, il, p->ffs0, p->n_ffs);
        ts_tensor *sw = slice(f, weight(f, TS_ROLE_FFN_DOWN_SHEXP, il),
                              p->split[TS_ROLE_FFN_DOWN_SHEXP], p->ffs0, p->n_ffs);
        ts_tensor *s = ts_linear(g, ts_glu(g, TS_GLU_SILU, sg, su), sw, NULL); /* [n_embd, T] */
        ts_tensor *gi = weight(f, TS_ROLE_FFN_GATE_INP_SHEXP, il);
        if (gi != NULL) {
            int64_t gi_ne[2] = {hp->n_embd, 1};
            gi = ts_op_reshape(g, gi, 2, gi_ne); /* a [n_embd] vector as a 1-row matrix */
            s = ts_op_mul(g, s, ts_op_sigmoid(g, ts_linear(g, h, gi, NULL))); /* [1, T] gate */
        }
        out = ts_op_add(g, out, s);
    }
    if (p->shard.size > 1) {
        out = ts_op_all_reduce_sum(g, out, TP_GROUP, p->shard.size);
    }
    return out;
}

static ts_tensor *ffn_block(ts_forward *f, ts_tensor *h, int64_t il) {
    const ts_hparams *hp = &f->m->hp;
    if (weight(f, TS_ROLE_FFN_GATE_INP, il) != NULL) {
        return moe_block(f, h, il);
    }
    const ts_shard_plan *p = &f->plan;
    ts_graph *g = f->g;
    ts_tensor *act;
    if (hp->arch->ffn == TS_FFN_GELU) {
        ts_tensor *u = linear_col(f, h, TS_ROLE_FFN_UP, TS_ROLE_FFN_UP_B, il, p->ff0, p->n_ff);
        act = ts_op_gelu(g, u, TS_GELU_TANH);
    } else if (hp->arch->ffn == TS_FFN_GELU_ERF) {
        ts_tensor *u = linear_col(f, h, TS_ROLE_FFN_UP, TS_ROLE_FFN_UP_B, il, p->ff0, p->n_ff);
        act = ts_op_gelu(g, u, TS_GELU_ERF);
    } else {
        ts_tensor *gate, *up;
        bool fused = ts_model_tensor(f->m, TS_ROLE_FFN_GATE_UP, il) != NULL;
        if (fused && p->shard.size == 1) {
            ts_tensor *gu = ts_linear(g, h, weight(f, TS_ROLE_FFN_GATE_UP, il), NULL);
            gate = split_rows(f, gu, 0, hp->n_ff);
            up = split_rows(f, gu, hp->n_ff, hp->n_ff);
        } else if (fused) {
            /* A shard takes its units from both halves of the fused matrix. */
            gate = linear_col(f, h, TS_ROLE_FFN_GATE_UP, TS_ROLE_COUNT, il, p->ff0, p->n_ff);
            up = linear_col(f, h, TS_ROLE_FFN_GATE_UP, TS_ROLE_COUNT, il, hp->n_ff + p->ff0,
                            p->n_ff);
        } else {
            gate = linear_col(f, h, TS_ROLE_FFN_GATE, TS_ROLE_FFN_GATE_B, il, p->ff0, p->n_ff);
            up = linear_col(f, h, TS_ROLE_FFN_UP, TS_ROLE_FFN_UP_B, il, p->ff0, p->n_ff);
        }
        act = ts_glu(g, hp->arch->ffn == TS_FFN_SWIGLU ? TS_GLU_SILU : TS_GLU_GELU_TANH, gate, up);
    }
    ts_tensor *d = linear_row(f, act, TS_ROLE_FFN_DOWN, TS_ROLE_FFN_DOWN_B, il, p->ff0, p->n_ff);
    ts_tensor *post = weight(f, TS_ROLE_FFN_POST_NORM, il);
    return post != NULL ? ts_rms_norm(g, d, post, hp->norm_eps) : d;
}

static ts_tensor *input(ts_forward *f, const char *name, int64_t n, int sym) {
    ts_tensor *t = ts_graph_input(f->g, name, TS_TYPE_I32, 1, &n);
    return t != NULL ? ts_tensor_dynamic(f->g, t, 0, sym) : NULL;
}

/* A block's output as it joins the residual stream (Granite scales it). */
static ts_tensor *residual(ts_forward *f, ts_tensor *out) {
    float s = f->m->hp.residual_scale;
    return s != 1.0f ? ts_op_scale(f->g, out, s) : out;
}

/* An encoder (BERT family, arch.h): embeddings (+ token type 0, + learned positions where the
 * architecture has a table) under a LayerNorm, then post-norm blocks whose attention (with
 * RoPE on Q and K where its positions are rotary: nomic-bert) sees every key of the token's
 * sequence (the ATTENTION op's visibility rule j <= pos, given each sequence's last position as
 * every token's horizon). embd is the last block's output at the output rows; no logits. */
static ts_status build_encoder(ts_forward *f, ts_error *err) {
    const ts_hparams *hp = &f->m->hp;
    ts_graph *g = f->g;
    f->horizon = input(f, "horizon", f->cfg.max_tokens, f->sym_tok);
    ts_tensor *x = ts_op_get_rows(g, weight(f, TS_ROLE_TOKEN_EMBD, 0), f->tokens);
    ts_tensor *types = weight(f, TS_ROLE_TOKEN_TYPES, 0);
    if (types != NULL && hp->enc->token_types) {
        f->types = input(f, "token_types", f->cfg.max_tokens, f->sym_tok);
        x = ts_op_add(g, x, ts_op_get_rows(g, types, f->types));
    }
    if (weight(f, TS_ROLE_POS_EMBD, 0) != NULL) {
        x = ts_op_add(g, x, ts_op_get_rows(g, weight(f, TS_ROLE_POS_EMBD, 0), f->pos));
    }
    x = ts_layer_norm(g, x, weight(f, TS_ROLE_TOKEN_EMBD_NORM, 0),
                      weight(f, TS_ROLE_TOKEN_EMBD_NORM_B, 0), hp->norm_eps);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        x = norm(f, ts_op_add(g, x, attention_block(f, x, il)), TS_ROLE_ATTN_NORM,
                 TS_ROLE_ATTN_NORM_B, il);
        x = norm(f, ts_op_add(g, x, ffn_block(f, x, il)), TS_ROLE_FFN_NORM, TS_ROLE_FFN_NORM_B, il);
    }
    f->embd = ts_op_get_rows(g, x, f->outputs);
    if (f->embd != NULL) {
        ts_tensor_set_name(f->embd, "embd");
        ts_graph_output(g, f->embd);
    }
    return ts_graph_build(g, err);
}

static ts_status build(ts_forward *f, ts_error *err) {
    const ts_hparams *hp = &f->m->hp;
    const ts_forward_config *c = &f->cfg;
    ts_graph *g = f->g;
    f->sym_tok = ts_graph_dim(g, "n_tokens", c->max_tokens);
    f->sym_out = ts_graph_dim(g, "n_outputs", c->max_outputs);
    f->tokens = input(f, "tokens", c->max_tokens, f->sym_tok);
    f->pos = input(f, "pos", c->max_tokens, f->sym_tok);
    f->seq = input(f, "seq", c->max_tokens, f->sym_tok);
    f->slots = input(f, "slots", c->max_tokens, f->sym_tok);
    /* Block tables and lengths keep their full size every step (unused sequences padded with
     * -1 blocks and length 0), so every attention implementation sees static shapes. */
    f->len = ts_graph_input(g, "seq_len", TS_TYPE_I32, 1, &c->max_seqs);
    f->outputs = input(f, "outputs", c->max_outputs, f->sym_out);
    int64_t table_ne[2] = {c->max_blocks_per_seq, c->max_seqs};
    f->table = ts_graph_input(g, "block_table", TS_TYPE_I32, 2, table_ne);
    if (c->n_blocks_swa > 0) {
        f->slots_swa = input(f, "slots_swa", c->max_tokens, f->sym_tok);
        f->table_swa = ts_graph_input(g, "block_table_swa", TS_TYPE_I32, 2, table_ne);
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        int64_t n_blocks = in_swa_pool(f, il) ? c->n_blocks_swa : c->n_blocks;
        int64_t cache_ne[4] = {hp->head_dim, f->plan.n_kv, c->block_size, n_blocks};
        for (int kv = 0; kv < 2; kv++) {
            ts_tensor *t =
                ts_graph_param(g, kv == 0 ? "cache_k" : "cache_v",
                               kv == 0 ? c->kv_type_k : c->kv_type_v, 4, cache_ne);
            if (t == NULL) {
                break;
            }
            ts_tensor_set_name(t, "cache_%c.%lld", kv == 0 ? 'k' : 'v', (long long)il);
            f->cache[2 * il + kv] = t;
        }
    }
    ts_status st = ts_graph_status(g, err);
    if (st == TS_OK) {
        st = make_params(f, err);
    }
    if (st == TS_OK) {
        st = make_rope_factors(f, err);
    }
    if (st != TS_OK) {
        return st;
    }

    if (hp->enc != NULL) {
        return build_encoder(f, err);
    }
    ts_tensor *x = ts_op_get_rows(g, weight(f, TS_ROLE_TOKEN_EMBD, 0), f->tokens);
    if (hp->embd_scale != 1.0f) {
        x = ts_op_scale(g, x, hp->embd_scale);
    }
    if (ts_model_tensor(f->m, TS_ROLE_POS_EMBD, 0) != NULL) {
        x = ts_op_add(g, x, ts_op_get_rows(g, weight(f, TS_ROLE_POS_EMBD, 0), f->pos));
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        ts_tensor *h = norm(f, x, TS_ROLE_ATTN_NORM, TS_ROLE_ATTN_NORM_B, il);
        if (hp->arch->parallel_block) {
            /* Cohere: x + attn(h) + ffn(h), both blocks reading the same normed input. */
            ts_tensor *a = attention_block(f, h, il);
            x = ts_op_add(g, x, ts_op_add(g, a, ffn_block(f, h, il)));
            continue;
        }
        x = ts_op_add(g, x, residual(f, attention_block(f, h, il)));
        h = norm(f, x, TS_ROLE_FFN_NORM, TS_ROLE_FFN_NORM_B, il);
        x = ts_op_add(g, x, residual(f, ffn_block(f, h, il)));
    }
    x = ts_op_get_rows(g, x, f->outputs);
    x = norm(f, x, TS_ROLE_OUTPUT_NORM, TS_ROLE_OUTPUT_NORM_B, 0);
    f->embd = x;
    if (f->embd != NULL) {
        ts_tensor_set_name(f->embd, "embd");
        ts_graph_output(g, f->embd);
    }
    ts_role out_role = f->m->tied_output ? TS_ROLE_TOKEN_EMBD : TS_ROLE_OUTPUT;
    ts_split vocab = f->plan.vocab_parallel ? TS_SPLIT_COL : TS_SPLIT_NONE;
    ts_tensor *w_out = slice(f, weight(f, out_role, 0), vocab, f->plan.vocab0, f->plan.n_vocab);
    f->logits = ts_linear(g, x, w_out, NULL);
    if (hp->logit_mul != 1.0f) {
        f->logits = ts_op_scale(g, f->logits, hp->logit_mul);
    }
    if (f->plan.vocab_parallel) {
        f->logits = ts_op_all_gather(g, f->logits, 0, TP_GROUP, f->plan.shard.size);
    }
    if (f->logits != NULL) {
        ts_tensor_set_name(f->logits, "logits");
        ts_graph_output(g, f->logits);
    }
    return ts_graph_build(g, err);
}

/* Fills a fresh buffer with zeros. A KV slot is only read after it was written through a
 * valid block table, but attention implementations that multiply masked keys' values by a
 * zero weight (the decomposed one) would turn leftover NaN bit patterns into NaN outputs;
 * zeroed memory also makes runs reproducible. */
static ts_status zero_buffer(ts_backend *b, ts_buffer *buf, ts_error *err) {
    size_t chunk = buf->size < ((size_t)1 << 20) ? buf->size : ((size_t)1 << 20);
    void *zeros = calloc(1, chunk > 0 ? chunk : 1);
    if (zeros == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "forward: out of memory");
    }
    ts_status st = TS_OK;
    for (size_t at = 0; st == TS_OK && at < buf->size; at += chunk) {
        size_t n = buf->size - at < chunk ? buf->size - at : chunk;
        st = ts_backend_buffer_set(b, buf, at, zeros, n, err);
    }
    free(zeros);
    return st;
}

static ts_status check_config(const ts_model *m, const ts_forward_config *c, ts_error *err) {
    if (c->max_tokens < 1 || c->max_seqs < 1 || c->max_outputs < 1 ||
        c->max_outputs > c->max_tokens || c->max_seqs > c->max_tokens || c->n_blocks < 1 ||
        c->block_size < 1 || c->max_blocks_per_seq < 1 || c->n_blocks > INT32_MAX / c->block_size ||
        c->n_ctx < 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "forward: invalid configuration (tokens %lld, seqs %lld, outputs "
                            "%lld, blocks %lld x %lld, table width %lld)",
                            (long long)c->max_tokens, (long long)c->max_seqs,
                            (long long)c->max_outputs, (long long)c->n_blocks,
                            (long long)c->block_size, (long long)c->max_blocks_per_seq);
    }
    bool has_swa = false;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        has_swa = has_swa || ts_hparams_layer_is_swa(&m->hp, il);
    }
    if (c->n_blocks_swa < 0 || c->n_blocks_swa > INT32_MAX / c->block_size ||
        (c->n_blocks_swa > 0 && !has_swa)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "forward: invalid sliding-window pool of %lld blocks (the model, %s, "
                            "has %ssliding-window layers)",
                            (long long)c->n_blocks_swa, m->hp.arch->name, has_swa ? "" : "no ");
    }
    for (int kv = 0; kv < 2; kv++) {
        ts_type t = kv == 0 ? c->kv_type_k : c->kv_type_v;
        if (t != TS_TYPE_F16 && t != TS_TYPE_F32 && t != TS_TYPE_BF16 && t != TS_TYPE_Q8_0 &&
            t != TS_TYPE_Q5_0 && t != TS_TYPE_Q4_0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "forward: %c cache type %s is not supported (F16, F32, BF16, "
                                "Q8_0, Q5_0, Q4_0)",
                                kv == 0 ? 'K' : 'V', ts_type_name(t) ? ts_type_name(t) : "?");
        }
        /* A block type quantizes each [head_dim] K/V row in blocks of 32. */
        int64_t blk = (int64_t)ts_type_block_size(t);
        if (blk > 1 && m->hp.head_dim % blk != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "forward: %c cache type %s needs head_dim a multiple of %lld, but "
                                "the model's head_dim is %lld",
                                kv == 0 ? 'K' : 'V', ts_type_name(t), (long long)blk,
                                (long long)m->hp.head_dim);
        }
    }
    return TS_OK;
}

ts_status ts_forward_create_shard(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                                  ts_registry *reg, ts_comm *comm, ts_forward **out,
                                  ts_error *err) {
    *out = NULL;
    ts_status st = check_config(m, cfg, err);
    if (st != TS_OK) {
        return st;
    }
    ts_forward *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "forward: out of memory");
    }
    f->m = m;
    f->b = b;
    f->cfg = *cfg;
    f->comm = comm;
    ts_shard shard = {comm != NULL ? comm->rank : 0, comm != NULL ? comm->size : 1};
    st = ts_shard_plan_make(m, shard, &f->plan, err);
    if (st != TS_OK) {
        free(f);
        return st;
    }
    size_t n_layer = (size_t)m->hp.n_layer;
    f->params = calloc((n_layer + 1) * TS_ROLE_COUNT, sizeof *f->params);
    f->cache = calloc(2 * n_layer, sizeof *f->cache);
    f->table_buf = malloc((size_t)(cfg->max_seqs * cfg->max_blocks_per_seq) * sizeof(int32_t));
    f->table_swa_buf = malloc((size_t)(cfg->max_seqs * cfg->max_blocks_per_seq) * sizeof(int32_t));
    f->len_buf = malloc((size_t)cfg->max_seqs * sizeof(int32_t));
    if (m->hp.enc != NULL) {
        f->types_buf = calloc((size_t)cfg->max_tokens, sizeof(int32_t));
        f->horizon_buf = calloc((size_t)cfg->max_tokens, sizeof(int32_t));
    }
    if (f->params == NULL || f->cache == NULL || f->table_buf == NULL || f->len_buf == NULL ||
        f->table_swa_buf == NULL ||
        (m->hp.enc != NULL && (f->types_buf == NULL || f->horizon_buf == NULL))) {
        ts_forward_destroy(f);
        return ts_error_set(err, TS_ERR_NOMEM, "forward: out of memory");
    }
    st = ts_backend_buffer_wrap(b, (void *)ts_gguf_base(m->gguf), ts_gguf_file_size(m->gguf),
                                &f->weights, err);
    if (st == TS_OK) {
        /* The model's bytes never change; backends may keep derived copies (repacked weights)
         * and, for a file mapping, hand back the pages those copies replace. */
        f->weights->constant = true;
        f->weights->file_mapped = ts_gguf_mapped(m->gguf);
    }
    if (st == TS_OK) {
        st = ts_graph_create(&f->g, reg, err);
    }
    if (st == TS_OK && comm != NULL) {
        st = ts_graph_set_comm(f->g, TP_GROUP, comm, err);
    }
    if (st == TS_OK) {
        st = build(f, err);
    }
    /* One buffer holds every layer's K and V pools (a layer's pools have its pool's size). */
    size_t kv_bytes = 0;
    for (size_t i = 0; st == TS_OK && i < 2 * n_layer; i++) {
        size_t bytes = ALIGN_UP(ts_tensor_nbytes_max(f->cache[i]), 64);
        kv_bytes += bytes;
        f->kv_swa_bytes += in_swa_pool(f, (int64_t)i / 2) ? bytes : 0;
    }
    if (st == TS_OK) {
        st = ts_backend_buffer_alloc(b, kv_bytes, &f->kv, err);
    }
    if (st == TS_OK) {
        st = zero_buffer(b, f->kv, err);
    }
    for (size_t i = 0, at = 0; st == TS_OK && i < 2 * n_layer; i++) {
        st = ts_tensor_bind(f->cache[i], f->kv, at, err);
        at += ALIGN_UP(ts_tensor_nbytes_max(f->cache[i]), 64);
    }
    if (st == TS_OK) {
        st = ts_graph_alloc(f->g, b, err);
    }
    if (st == TS_OK) {
        st = ts_backend_graph_prepare(b, f->g, err);
    }
    if (st != TS_OK) {
        ts_forward_destroy(f);
        return ts_error_prefix(err, "forward: ");
    }
    *out = f;
    return TS_OK;
}

ts_status ts_forward_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                            ts_registry *reg, ts_forward **out, ts_error *err) {
    return ts_forward_create_shard(m, b, cfg, reg, NULL, out, err);
}

void ts_forward_destroy(ts_forward *f) {
    if (f == NULL) {
        return;
    }
    ts_graph_destroy(f->g);
    if (f->kv != NULL) {
        ts_backend_buffer_free(f->b, f->kv);
    }
    if (f->weights != NULL) {
        ts_backend_buffer_free(f->b, f->weights);
    }
    if (f->rope_buf != NULL) {
        ts_backend_buffer_free(f->b, f->rope_buf);
    }
    free(f->params);
    free(f->cache);
    free(f->table_buf);
    free(f->table_swa_buf);
    free(f->len_buf);
    free(f->types_buf);
    free(f->horizon_buf);
    free(f);
}

/* An encoder's token sees every key of its sequence, so each sequence of a step must be whole:
 * positions 0..len-1, each once, with len at most the trained context (the rows of a learned
 * position table; the positions a RoPE encoder was trained on). */
static ts_status check_whole_sequences(const ts_forward *f, const ts_batch *bt, ts_error *err) {
    int32_t *count = f->horizon_buf; /* scratch: reset by the run that follows */
    for (int64_t s = 0; s < bt->n_seqs; s++) {
        count[s] = 0;
        if (bt->seq_len[s] > f->m->hp.n_ctx_train) {
            return ts_error_set(err, TS_ERR_RANGE,
                                "forward: sequence %lld has %d tokens; the encoder was trained "
                                "for %lld positions",
                                (long long)s, bt->seq_len[s], (long long)f->m->hp.n_ctx_train);
        }
    }
    for (int64_t t = 0; t < bt->n_tokens; t++) {
        count[bt->seq[t]]++;
    }
    for (int64_t s = 0; s < bt->n_seqs; s++) {
        if (count[s] != bt->seq_len[s]) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "forward: sequence %lld has %d of its %d tokens in the step; an "
                                "encoder attends both ways, so every sequence must be whole",
                                (long long)s, count[s], bt->seq_len[s]);
        }
    }
    return TS_OK;
}

/* Sequence s's sliding-window table: -1 or a block of the pool, and a block for every key one
 * of its tokens in the batch sees (from its earliest position's window on). */
static ts_status check_window_table(const ts_forward *f, const ts_batch *bt, int64_t s,
                                    ts_error *err) {
    const ts_forward_config *c = &f->cfg;
    int64_t len = bt->seq_len[s], first = len, window = f->m->hp.n_swa;
    for (int64_t t = 0; t < bt->n_tokens; t++) {
        if (bt->seq[t] == s && bt->pos[t] - window + 1 < first) {
            first = bt->pos[t] - window + 1 > 0 ? bt->pos[t] - window + 1 : 0;
        }
    }
    const int32_t *row = bt->block_table_swa + s * c->max_blocks_per_seq;
    for (int64_t j = 0; j < (len + c->block_size - 1) / c->block_size; j++) {
        bool seen = (j + 1) * c->block_size > first;
        if (row[j] < (seen ? 0 : -1) || row[j] >= c->n_blocks_swa) {
            return ts_error_set(err, TS_ERR_RANGE,
                                "forward: sequence %lld block %lld of the window pool is %d "
                                "(pool %lld, %s)",
                                (long long)s, (long long)j, row[j], (long long)c->n_blocks_swa,
                                seen ? "seen by a token" : "seen by no token");
        }
    }
    return TS_OK;
}

/* Checks every index a kernel will follow, so a bad batch is an error, not a wild read. */
ts_status ts_forward_check_batch(const ts_forward *f, const ts_batch *bt, ts_error *err) {
    const ts_forward_config *c = &f->cfg;
    if (bt->n_tokens < 1 || bt->n_tokens > c->max_tokens || bt->n_seqs < 1 ||
        bt->n_seqs > c->max_seqs || bt->n_outputs < 1 || bt->n_outputs > c->max_outputs) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "forward: batch of %lld tokens, %lld sequences, %lld outputs exceeds "
                            "the bucket (%lld, %lld, %lld)",
                            (long long)bt->n_tokens, (long long)bt->n_seqs,
                            (long long)bt->n_outputs, (long long)c->max_tokens,
                            (long long)c->max_seqs, (long long)c->max_outputs);
    }
    int64_t n_vocab = f->m->hp.n_vocab;
    int64_t n_slots = c->n_blocks * c->block_size, n_slots_swa = c->n_blocks_swa * c->block_size;
    if (c->n_blocks_swa > 0 && (bt->slots_swa == NULL || bt->block_table_swa == NULL)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "forward: the batch lacks the sliding-window pool's slots or tables");
    }
    for (int64_t t = 0; t < bt->n_tokens; t++) {
        if (bt->tokens[t] < 0 || bt->tokens[t] >= n_vocab) {
            return ts_error_set(err, TS_ERR_RANGE, "forward: token %lld has id %d (vocab %lld)",
                                (long long)t, bt->tokens[t], (long long)n_vocab);
        }
        int32_t slot_swa = c->n_blocks_swa > 0 ? bt->slots_swa[t] : -1;
        if (bt->seq[t] < 0 || bt->seq[t] >= bt->n_seqs || bt->pos[t] < 0 ||
            bt->pos[t] >= bt->seq_len[bt->seq[t]] || bt->slots[t] < -1 || bt->slots[t] >= n_slots ||
            slot_swa < -1 || slot_swa >= n_slots_swa) {
            return ts_error_set(err, TS_ERR_RANGE,
                                "forward: token %lld has seq %d, pos %d, slot %d (window pool %d) "
                                "out of range",
                                (long long)t, bt->seq[t], bt->pos[t], bt->slots[t], slot_swa);
        }
    }
    for (int64_t s = 0; s < bt->n_seqs; s++) {
        int64_t len = bt->seq_len[s];
        if (len < 1 || len > c->max_blocks_per_seq * c->block_size) {
            return ts_error_set(err, TS_ERR_RANGE, "forward: sequence %lld has length %lld",
                                (long long)s, (long long)len);
        }
        const int32_t *row = bt->block_table + s * c->max_blocks_per_seq;
        for (int64_t j = 0; j < (len + c->block_size - 1) / c->block_size; j++) {
            if (row[j] < 0 || row[j] >= c->n_blocks) {
                return ts_error_set(err, TS_ERR_RANGE,
                                    "forward: sequence %lld block %lld is %d (pool %lld)",
                                    (long long)s, (long long)j, row[j], (long long)c->n_blocks);
            }
        }
        ts_status st = c->n_blocks_swa > 0 ? check_window_table(f, bt, s, err) : TS_OK;
        if (st != TS_OK) {
            return st;
        }
    }
    if (f->m->hp.enc != NULL) {
        ts_status st = check_whole_sequences(f, bt, err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (int64_t o = 0; o < bt->n_outputs; o++) {
        if (bt->outputs[o] < 0 || bt->outputs[o] >= bt->n_tokens) {
            return ts_error_set(err, TS_ERR_RANGE, "forward: output %lld is token %d of %lld",
                                (long long)o, bt->outputs[o], (long long)bt->n_tokens);
        }
    }
    return TS_OK;
}

ts_status ts_forward_run(ts_forward *f, const ts_batch *bt, float *logits, float *embd,
                         ts_error *err) {
    ts_status st = ts_forward_check_batch(f, bt, err);
    if (st != TS_OK) {
        return st;
    }
    size_t T = (size_t)bt->n_tokens;
    size_t S = (size_t)bt->n_seqs, S_max = (size_t)f->cfg.max_seqs;
    size_t O = (size_t)bt->n_outputs;
    size_t width = (size_t)f->cfg.max_blocks_per_seq;
    int32_t *table_swa = f->table_swa_buf;
    memcpy(f->table_buf, bt->block_table, S * width * sizeof(int32_t));
    memcpy(f->len_buf, bt->seq_len, S * sizeof(int32_t));
    for (size_t i = S * width; i < S_max * width; i++) {
        f->table_buf[i] = -1;
        table_swa[i] = -1;
    }
    if (f->table_swa != NULL) {
        memcpy(table_swa, bt->block_table_swa, S * width * sizeof(int32_t));
        if ((st = ts_backend_tensor_set(f->b, f->slots_swa, 0, bt->slots_swa, T * 4, err)) ||
            (st =
                 ts_backend_tensor_set(f->b, f->table_swa, 0, table_swa, S_max * width * 4, err))) {
            return st;
        }
    }
    for (size_t i = S; i < S_max; i++) {
        f->len_buf[i] = 0;
    }
    if ((st = ts_graph_set_dim(f->g, f->sym_tok, bt->n_tokens, err)) ||
        (st = ts_graph_set_dim(f->g, f->sym_out, bt->n_outputs, err)) ||
        (st = ts_backend_tensor_set(f->b, f->tokens, 0, bt->tokens, T * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->pos, 0, bt->pos, T * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->seq, 0, bt->seq, T * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->slots, 0, bt->slots, T * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->len, 0, f->len_buf, S_max * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->table, 0, f->table_buf, S_max * width * 4, err)) ||
        (st = ts_backend_tensor_set(f->b, f->outputs, 0, bt->outputs, O * 4, err))) {
        return st;
    }
    if (f->horizon != NULL) {
        for (size_t t = 0; t < T; t++) {
            f->horizon_buf[t] = bt->seq_len[bt->seq[t]] - 1;
        }
        st = ts_backend_tensor_set(f->b, f->horizon, 0, f->horizon_buf, T * 4, err);
    }
    if (st == TS_OK && f->types != NULL) {
        st = ts_backend_tensor_set(f->b, f->types, 0, f->types_buf, T * 4, err);
    }
    if (st == TS_OK) {
        st = ts_graph_compute(f->g, f->b, NULL, err);
    }
    if (st != TS_OK) {
        return st;
    }
    if (embd != NULL) {
        size_t n_embd = (size_t)f->m->hp.n_embd;
        st = ts_backend_tensor_get(f->b, f->embd, 0, embd, O * n_embd * sizeof(float), err);
    }
    if (st != TS_OK || logits == NULL || f->logits == NULL) {
        return st;
    }
    size_t n_vocab = (size_t)f->m->hp.n_vocab;
    st = ts_backend_tensor_get(f->b, f->logits, 0, logits, O * n_vocab * sizeof(float), err);
    float cap = f->m->hp.final_softcap;
    if (st == TS_OK && cap > 0.0f) {
        /* Final logit soft-capping (Gemma 2) is elementwise on the few output rows. */
        for (size_t i = 0; i < O * n_vocab; i++) {
            logits[i] = cap * tanhf(logits[i] / cap);
        }
    }
    return st;
}

ts_status ts_forward_copy_block(ts_forward *f, int pool, int32_t src, int32_t dst, ts_error *err) {
    bool swa = pool == TS_FORWARD_POOL_SWA;
    int64_t n = swa ? f->cfg.n_blocks_swa : f->cfg.n_blocks;
    if ((pool != TS_FORWARD_POOL_FULL && !swa) || src < 0 || dst < 0 || src >= n || dst >= n) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "forward: copy of block %d to %d in pool %d (of %lld blocks)", src, dst,
                            pool, (long long)n);
    }
    /* K and V caches may be of different types: each tensor's own block size. */
    size_t most = 0;
    for (int64_t i = 0; i < 2 * f->m->hp.n_layer; i++) {
        most = f->cache[i]->nb[3] > most ? f->cache[i]->nb[3] : most;
    }
    void *tmp = malloc(most);
    if (tmp == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "forward: out of memory");
    }
    ts_status st = TS_OK;
    for (int64_t i = 0; st == TS_OK && i < 2 * f->m->hp.n_layer; i++) {
        if (in_swa_pool(f, i / 2) != swa) {
            continue;
        }
        size_t base = f->cache[i]->offset, block_bytes = f->cache[i]->nb[3];
        st = ts_backend_buffer_get(f->b, f->kv, base + (size_t)src * block_bytes, tmp, block_bytes,
                                   err);
        if (st == TS_OK) {
            st = ts_backend_buffer_set(f->b, f->kv, base + (size_t)dst * block_bytes, tmp,
                                       block_bytes, err);
        }
    }
    free(tmp);
    return st;
}

const ts_forward_config *ts_forward_get_config(const ts_forward *f) {
    return &f->cfg;
}

const ts_shard_plan *ts_forward_shard(const ts_forward *f) {
    return &f->plan;
}

ts_graph *ts_forward_graph(ts_forward *f) {
    return f->g;
}

size_t ts_forward_kv_bytes(const ts_forward *f) {
    return f->kv->size;
}

size_t ts_forward_kv_swa_bytes(const ts_forward *f) {
    return f->kv_swa_bytes;
}

size_t ts_forward_arena_bytes(const ts_forward *f) {
    const ts_plan *p = ts_graph_plan(f->g);
    return p != NULL ? p->peak_bytes : 0;
}

/* ---- the runner of one forward (runner.h) ---- */

typedef struct forward_runner {
    ts_runner base; /* first: the runner is this struct */
    ts_forward *f;  /* owned */
} forward_runner;

static ts_status fr_run(ts_runner *r, const ts_batch *batch, float *logits, float *embd,
                        ts_error *err) {
    return ts_forward_run(((forward_runner *)r)->f, batch, logits, embd, err);
}

static ts_status fr_copy_block(ts_runner *r, int pool, int32_t src, int32_t dst, ts_error *err) {
    return ts_forward_copy_block(((forward_runner *)r)->f, pool, src, dst, err);
}

static void fr_destroy(ts_runner *r) {
    ts_forward_destroy(((forward_runner *)r)->f);
    free(r);
}

static const ts_runner_vtable k_forward_runner = {
    .run = fr_run,
    .copy_block = fr_copy_block,
    .destroy = fr_destroy,
};

ts_status ts_forward_runner_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                                   ts_registry *reg, ts_runner **out, ts_error *err) {
    *out = NULL;
    forward_runner *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "forward: out of memory");
    }
    ts_status st = ts_forward_create(m, b, cfg, reg, &r->f, err);
    if (st != TS_OK) {
        free(r);
        return st;
    }
    r->base = (ts_runner){
        .vt = &k_forward_runner,
        .cfg = r->f->cfg,
        .kv_bytes = ts_forward_kv_bytes(r->f),
        .kv_swa_bytes = ts_forward_kv_swa_bytes(r->f),
        .n_shards = 1,
    };
    *out = &r->base;
    return TS_OK;
}
