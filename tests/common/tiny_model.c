/* tiny_model.c — small random-weight GGUF models for tests (see tiny_model.h). */
#include "common/tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "util/error.h"

const char *const ts_tiny_archs[] = {
    "llama",    "qwen2",    "qwen3",        "phi3",    "gemma2",  "gemma3",
    "gpt2",     "granite",  "smollm3",      "olmo2",   "exaone4", "cohere2",
    "ernie4_5", "qwen3moe", "qwen2moe",     "mixtral", "olmoe",   "granitemoe",
    "dots1",    "glm4moe",  "ernie4_5_moe", "gpt-oss", NULL};
const char *const ts_tiny_encoders[] = {"bert", "nomic-bert", NULL};

/* What a tensor's values look like. */
typedef enum kind {
    K_MATRIX,
    K_EMBD,
    K_OUTPUT,
    K_NORM,
    K_BIAS,
    K_POS,
    K_EXTRA,
    K_ROUTER,
    K_SINK
} kind;

typedef struct tdesc {
    char name[64];
    kind k;
    ts_type type;
    uint32_t n_dims;
    int64_t ne[3];
} tdesc;

typedef struct tlist {
    tdesc v[512];
    int n;
    const ts_tiny_spec *spec;
    ts_status st;
    ts_error *err;
} tlist;

ts_tiny_spec ts_tiny_spec_default(const char *arch) {
    ts_tiny_spec s;
    memset(&s, 0, sizeof s);
    s.arch = arch;
    s.seed = 1234;
    s.wtype = TS_TYPE_F32;
    s.vec_type = TS_TYPE_F32;
    s.n_vocab = TS_TINY_MIN_VOCAB;
    s.n_ctx_train = 256;
    s.n_embd = 64;
    s.n_ff = 128;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.rope_base = 10000.0f;
    s.norm_eps = 1e-5f;
    s.logit_scale = 1.0f;
    if (arch != NULL && strcmp(arch, "gemma2") == 0) {
        s.n_swa = 8;
        s.attn_softcap = 50.0f;
        s.final_softcap = 30.0f;
        s.tied_output = true;
        s.norm_eps = 1e-6f;
    } else if (arch != NULL && strcmp(arch, "gemma3") == 0) {
        s.n_swa = 8;
        s.head_dim = 32;
        s.tied_output = true;
        s.norm_eps = 1e-6f;
        s.rope_base = 1000000.0f;
    } else if (arch != NULL && strcmp(arch, "gpt2") == 0) {
        s.n_head_kv = 4; /* GPT-2 has no GQA */
    } else if (arch != NULL && strcmp(arch, "ernie4_5") == 0) {
        s.head_dim = 32; /* 4 heads of 32 != n_embd 64, as ERNIE 4.5 0.3B's 16 of 128 */
        s.tied_output = true;
    } else if (arch != NULL && strcmp(arch, "smollm3") == 0) {
        s.n_layer = 4; /* the 4th layer is the NoPE one */
        s.tied_output = true;
    } else if (arch != NULL && strcmp(arch, "cohere2") == 0) {
        /* A window layer with RoPE, then a global one without (the key moves the default
         * pattern, 3 + 1, to 1 + 1 so that 2 layers hold both kinds). */
        s.swa_pattern = 2;
        s.n_swa = 8;
        s.tied_output = true;
    } else if (arch != NULL && strcmp(arch, "gpt-oss") == 0) {
        /* Layer 0 a window of 8, layer 1 full; experts of 64 units (two MXFP4 blocks: a
         * shard of two still holds whole blocks). */
        s.n_swa = 8;
        s.head_dim = 32;
        s.n_expert = 4;
        s.n_expert_used = 2;
        s.n_ff_exp = 64;
        s.rope_base = 150000.0f;
    } else if (arch != NULL && strcmp(arch, "bert") == 0) {
        s.n_head_kv = 4; /* BERT has no GQA */
        s.norm_eps = 1e-12f;
        s.pooling = 1; /* mean, as sentence-transformers models */
    } else if (arch != NULL && strcmp(arch, "nomic-bert") == 0) {
        s.n_head_kv = 4; /* no GQA */
        s.norm_eps = 1e-12f;
        s.pooling = 1;
        s.rope_base = 1000.0f; /* nomic-embed-text v1.5's rotary_emb_base */
    }
    if (arch != NULL && (strcmp(arch, "qwen3moe") == 0 || strcmp(arch, "qwen2moe") == 0 ||
                         strcmp(arch, "mixtral") == 0 || strcmp(arch, "olmoe") == 0 ||
                         strcmp(arch, "granitemoe") == 0)) {
        /* Mixtral, OLMoE and Granite MoE files have no expert_feed_forward_length: their
         * experts have feed_forward_length units. */
        bool ff_exp = strcmp(arch, "qwen3moe") == 0 || strcmp(arch, "qwen2moe") == 0;
        s.n_expert = 6;
        s.n_expert_used = 2;
        s.n_ff_exp = 64;
        s.n_ff = ff_exp ? s.n_ff : 64;
        /* Qwen2-MoE's shared expert is gated, Granite's (GraniteMoeShared) is not. */
        s.n_ff_shexp = strcmp(arch, "qwen2moe") == 0     ? 96
                       : strcmp(arch, "granitemoe") == 0 ? 32
                                                         : 0;
        s.arch_name = strcmp(arch, "mixtral") == 0 ? "llama" : NULL;
        s.head_dim = strcmp(arch, "qwen3moe") == 0 ? 32 : 0;
        s.rope_base = ff_exp ? 1000000.0f : 10000.0f;
        s.norm_eps = 1e-6f;
    } else if (arch != NULL && strcmp(arch, "ernie4_5_moe") == 0) {
        /* ernie4_5's attention; layer 0 dense, then experts chosen by softmax + selection
         * bias, renormalized, and a shared expert of two experts' width. */
        s.arch_name = "ernie4_5-moe";
        s.n_layer = 3;
        s.head_dim = 32;
        s.tied_output = true;
        s.n_expert = 6;
        s.n_expert_used = 2;
        s.n_ff_exp = 32;
        s.n_ff_shexp = 64;
    } else if (arch != NULL && strcmp(arch, "glm4moe") == 0) {
        /* GLM-4.5's shape: q/k/v biases, per-head Q/K norms, RoPE on half of each head, layer
         * 0 dense, then dots1's routing with one shared expert. */
        s.n_layer = 3;
        s.head_dim = 32;
        s.n_rot = 16;
        s.n_expert = 6;
        s.n_expert_used = 2;
        s.n_ff_exp = 32;
        s.n_ff_shexp = 32;
        s.moe_gating = 2;
        s.moe_norm = 1;
        s.moe_w_scale = 1.5f;
    } else if (arch != NULL && strcmp(arch, "dots1") == 0) {
        /* Layer 0 dense, layers 1-2 experts chosen by sigmoid + selection bias, renormalized
         * and scaled, plus two shared experts' worth of units (expert_shared_count 2). */
        s.n_layer = 3;
        s.n_expert = 6;
        s.n_expert_used = 2;
        s.n_ff_exp = 32;
        s.n_ff_shexp = 64;
        s.moe_gating = 2;
        s.moe_norm = 1;
        s.moe_w_scale = 2.5f;
        s.norm_eps = 1e-6f;
    }
    return s;
}

/* ---- the tensor list of each family -------------------------------------------------- */

static void add3(tlist *l, kind k, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt,
                 int64_t il);

static void add(tlist *l, kind k, int64_t ne0, int64_t ne1, const char *fmt, int64_t il) {
    add3(l, k, ne0, ne1, 0, fmt, il);
}

/* A tensor [ne0], [ne0, ne1] or (ne2 > 0: stacked experts) [ne0, ne1, ne2]. */
static void add3(tlist *l, kind k, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt,
                 int64_t il) {
    if (l->n == (int)(sizeof l->v / sizeof l->v[0])) {
        l->st = ts_error_set(l->err, TS_ERR_LIMIT, "tiny: too many tensors");
        return;
    }
    tdesc *d = &l->v[l->n];
    snprintf(d->name, sizeof d->name, fmt, (long long)il);
    if (l->spec->omit != NULL && strcmp(l->spec->omit, d->name) == 0) {
        return;
    }
    d->k = k;
    d->n_dims = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    d->ne[0] = ne0;
    d->ne[1] = ne1 > 0 ? ne1 : 1;
    d->ne[2] = ne2 > 0 ? ne2 : 1;
    bool matrix = k == K_MATRIX || k == K_EMBD || k == K_OUTPUT;
    d->type = matrix ? l->spec->wtype : l->spec->vec_type;
    if (k == K_POS || k == K_EXTRA || k == K_ROUTER || k == K_SINK) {
        d->type = TS_TYPE_F32;
    }
    if (l->spec->reshape != NULL && strcmp(l->spec->reshape, d->name) == 0) {
        if (d->n_dims >= 2) {
            d->ne[1] += 1;
        } else {
            d->ne[0] += 1;
        }
    }
    if (l->spec->retype != NULL && strcmp(l->spec->retype, d->name) == 0) {
        d->type = l->spec->retype_to;
    }
    l->n++;
}

static bool is(const ts_tiny_spec *s, const char *arch) {
    return strcmp(s->arch, arch) == 0;
}

/* BERT after token_embd: learned positions, two token types, LayerNorms with biases after the
 * embeddings and after each residual add, biases on every projection. */
static void build_bert(tlist *l) {
    const ts_tiny_spec *s = l->spec;
    int64_t E = s->n_embd, F = s->n_ff;
    add(l, K_POS, E, s->n_ctx_train, "position_embd.weight", 0);
    add(l, K_POS, E, 2, "token_types.weight", 0);
    add(l, K_NORM, E, 0, "token_embd_norm.weight", 0);
    add(l, K_BIAS, E, 0, "token_embd_norm.bias", 0);
    for (int64_t il = 0; il < s->n_layer; il++) {
        static const char *const proj[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
        char name[64];
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "blk.%%lld.%s.weight", proj[k]);
            add(l, K_MATRIX, E, E, name, il);
            snprintf(name, sizeof name, "blk.%%lld.%s.bias", proj[k]);
            add(l, K_BIAS, E, 0, name, il);
        }
        add(l, K_NORM, E, 0, "blk.%lld.attn_output_norm.weight", il);
        add(l, K_BIAS, E, 0, "blk.%lld.attn_output_norm.bias", il);
        add(l, K_MATRIX, E, F, "blk.%lld.ffn_up.weight", il);
        add(l, K_BIAS, F, 0, "blk.%lld.ffn_up.bias", il);
        add(l, K_MATRIX, F, E, "blk.%lld.ffn_down.weight", il);
        add(l, K_BIAS, E, 0, "blk.%lld.ffn_down.bias", il);
        add(l, K_NORM, E, 0, "blk.%lld.layer_output_norm.weight", il);
        add(l, K_BIAS, E, 0, "blk.%lld.layer_output_norm.bias", il);
    }
}

/* nomic-bert after token_embd: two token types, LayerNorms with biases after the embeddings and
 * after each residual add, a fused bias-free QKV, a bias-free SwiGLU MLP; RoPE, no position
 * table. */
static void build_nomic_bert(tlist *l) {
    const ts_tiny_spec *s = l->spec;
    int64_t E = s->n_embd, F = s->n_ff;
    add(l, K_POS, E, 2, "token_types.weight", 0);
    add(l, K_NORM, E, 0, "token_embd_norm.weight", 0);
    add(l, K_BIAS, E, 0, "token_embd_norm.bias", 0);
    for (int64_t il = 0; il < s->n_layer; il++) {
        add(l, K_MATRIX, E, 3 * E, "blk.%lld.attn_qkv.weight", il);
        add(l, K_MATRIX, E, E, "blk.%lld.attn_output.weight", il);
        add(l, K_NORM, E, 0, "blk.%lld.attn_output_norm.weight", il);
        add(l, K_BIAS, E, 0, "blk.%lld.attn_output_norm.bias", il);
        add(l, K_MATRIX, E, F, "blk.%lld.ffn_gate.weight", il);
        add(l, K_MATRIX, E, F, "blk.%lld.ffn_up.weight", il);
        add(l, K_MATRIX, F, E, "blk.%lld.ffn_down.weight", il);
        add(l, K_NORM, E, 0, "blk.%lld.layer_output_norm.weight", il);
        add(l, K_BIAS, E, 0, "blk.%lld.layer_output_norm.bias", il);
    }
}

static void build_list(tlist *l) {
    const ts_tiny_spec *s = l->spec;
    int64_t E = s->n_embd, F = s->n_ff, V = s->n_vocab;
    int64_t D = s->head_dim > 0 ? s->head_dim : s->n_embd / s->n_head;
    int64_t Q = s->n_head * D, KV = s->n_head_kv * D;
    bool gpt2 = is(s, "gpt2"), phi3 = is(s, "phi3"), gemma = is(s, "gemma2") || is(s, "gemma3");
    /* OLMo 2 / EXAONE 4 norm block outputs only; OLMo 2's Q/K norms span the projection. */
    bool post_only = is(s, "olmo2") || is(s, "exaone4");
    bool qk_norm = is(s, "qwen3") || is(s, "gemma3") || is(s, "qwen3moe") || post_only ||
                   is(s, "olmoe") || is(s, "dots1") || is(s, "glm4moe");
    bool qk_full = is(s, "olmo2") || is(s, "olmoe");
    int64_t qn = qk_full ? Q : D, kn = qk_full ? KV : D;
    bool parallel = is(s, "cohere2"); /* one norm feeds attention and FFN */
    bool oss = is(s, "gpt-oss");      /* biases everywhere, attention sinks */
    bool bias = is(s, "qwen2") || is(s, "qwen2moe") || is(s, "glm4moe") || s->qkv_bias || oss;
    bool moe = is(s, "qwen3moe") || is(s, "qwen2moe") || is(s, "mixtral") || is(s, "olmoe") ||
               is(s, "granitemoe") || is(s, "dots1") || is(s, "glm4moe") || is(s, "ernie4_5_moe") ||
               oss;
    /* exp_probs_b, and a dense layer 0 */
    bool sel_bias = is(s, "dots1") || is(s, "glm4moe") || is(s, "ernie4_5_moe");
    int64_t n_dense = sel_bias ? 1 : 0;
    /* Mixtral's, OLMoE's and Granite MoE's experts have feed_forward_length units (they have no
     * expert_feed_forward_length). */
    bool ff_exp = is(s, "qwen3moe") || is(s, "qwen2moe") || sel_bias || oss;
    int64_t X = s->n_expert, FE = ff_exp ? s->n_ff_exp : F, FS = s->n_ff_shexp;

    add(l, K_EMBD, E, V, "token_embd.weight", 0);
    if (is(s, "bert")) {
        build_bert(l);
        return;
    }
    if (is(s, "nomic-bert")) {
        build_nomic_bert(l);
        return;
    }
    if (gpt2) {
        add(l, K_POS, E, s->n_ctx_train, "position_embd.weight", 0);
    }
    add(l, K_NORM, E, 0, "output_norm.weight", 0);
    if (gpt2) {
        add(l, K_BIAS, E, 0, "output_norm.bias", 0);
    }
    if ((!s->tied_output || phi3 || is(s, "olmo2")) && !parallel) {
        add(l, K_OUTPUT, E, V, "output.weight", 0);
    }
    for (int64_t il = 0; il < s->n_layer + s->n_nextn; il++) {
        if (il >= s->n_layer) {
            /* A multi-token-prediction block (GLM-4.5): what the forward pass leaves alone. */
            add(l, K_MATRIX, 2 * E, E, "blk.%lld.nextn.eh_proj.weight", il);
            add(l, K_NORM, E, 0, "blk.%lld.nextn.enorm.weight", il);
            add(l, K_NORM, E, 0, "blk.%lld.nextn.hnorm.weight", il);
        }
        if (!post_only) {
            add(l, K_NORM, E, 0, "blk.%lld.attn_norm.weight", il);
        }
        if (gpt2) {
            add(l, K_BIAS, E, 0, "blk.%lld.attn_norm.bias", il);
        }
        if (gpt2 || phi3) {
            add(l, K_MATRIX, E, Q + 2 * KV, "blk.%lld.attn_qkv.weight", il);
            if (gpt2) {
                add(l, K_BIAS, Q + 2 * KV, 0, "blk.%lld.attn_qkv.bias", il);
            }
        } else {
            add(l, K_MATRIX, E, Q, "blk.%lld.attn_q.weight", il);
            add(l, K_MATRIX, E, KV, "blk.%lld.attn_k.weight", il);
            add(l, K_MATRIX, E, KV, "blk.%lld.attn_v.weight", il);
            if (bias) {
                add(l, K_BIAS, Q, 0, "blk.%lld.attn_q.bias", il);
                add(l, K_BIAS, KV, 0, "blk.%lld.attn_k.bias", il);
                add(l, K_BIAS, KV, 0, "blk.%lld.attn_v.bias", il);
            }
        }
        if (qk_norm) {
            add(l, K_NORM, qn, 0, "blk.%lld.attn_q_norm.weight", il);
            add(l, K_NORM, kn, 0, "blk.%lld.attn_k_norm.weight", il);
        }
        add(l, K_MATRIX, Q, E, "blk.%lld.attn_output.weight", il);
        if (gpt2 || oss) {
            add(l, K_BIAS, E, 0, "blk.%lld.attn_output.bias", il);
        }
        if (oss) {
            add(l, K_SINK, s->n_head, 0, "blk.%lld.attn_sinks.weight", il);
        }
        if (gemma || post_only) {
            add(l, K_NORM, E, 0, "blk.%lld.post_attention_norm.weight", il);
        }
        if (!post_only && !parallel) {
            /* GLM-4.5's GGUF calls the norm before the FFN post_attention_norm. */
            add(l, K_NORM, E, 0,
                is(s, "glm4moe") ? "blk.%lld.post_attention_norm.weight"
                                 : "blk.%lld.ffn_norm.weight",
                il);
        }
        if (gpt2) {
            add(l, K_BIAS, E, 0, "blk.%lld.ffn_norm.bias", il);
            add(l, K_MATRIX, E, F, "blk.%lld.ffn_up.weight", il);
            add(l, K_BIAS, F, 0, "blk.%lld.ffn_up.bias", il);
        } else if (phi3) {
            add(l, K_MATRIX, E, 2 * F, "blk.%lld.ffn_up.weight", il);
        } else if (moe && il >= n_dense) {
            add(l, K_ROUTER, E, X, "blk.%lld.ffn_gate_inp.weight", il);
            if (sel_bias) {
                add(l, K_BIAS, X, 0, "blk.%lld.exp_probs_b.bias", il);
            }
            add3(l, K_MATRIX, E, FE, X, "blk.%lld.ffn_gate_exps.weight", il);
            add3(l, K_MATRIX, E, FE, X, "blk.%lld.ffn_up_exps.weight", il);
            add3(l, K_MATRIX, FE, E, X, "blk.%lld.ffn_down_exps.weight", il);
            if (oss) {
                add(l, K_BIAS, X, 0, "blk.%lld.ffn_gate_inp.bias", il);
                add(l, K_BIAS, FE, X, "blk.%lld.ffn_gate_exps.bias", il);
                add(l, K_BIAS, FE, X, "blk.%lld.ffn_up_exps.bias", il);
                add(l, K_BIAS, E, X, "blk.%lld.ffn_down_exps.bias", il);
            }
            if (FS > 0 && is(s, "qwen2moe")) {
                add(l, K_NORM, E, 0, "blk.%lld.ffn_gate_inp_shexp.weight", il);
            }
            if (FS > 0) {
                add(l, K_MATRIX, E, FS, "blk.%lld.ffn_gate_shexp.weight", il);
                add(l, K_MATRIX, E, FS, "blk.%lld.ffn_up_shexp.weight", il);
                add(l, K_MATRIX, FS, E, "blk.%lld.ffn_down_shexp.weight", il);
            }
            continue;
        } else {
            add(l, K_MATRIX, E, F, "blk.%lld.ffn_gate.weight", il);
            add(l, K_MATRIX, E, F, "blk.%lld.ffn_up.weight", il);
        }
        add(l, K_MATRIX, F, E, "blk.%lld.ffn_down.weight", il);
        if (gpt2) {
            add(l, K_BIAS, E, 0, "blk.%lld.ffn_down.bias", il);
        }
        if (gemma || post_only) {
            add(l, K_NORM, E, 0, "blk.%lld.post_ffw_norm.weight", il);
        }
    }
    for (int i = 0; i < 3; i++) {
        if (s->extra[i] != NULL) {
            add(l, K_EXTRA, s->extra_ne0, 0, s->extra[i], 0);
        }
    }
}

/* ---- values ---------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float uniform(uint64_t *x) {
    return (float)((double)(splitmix(x) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static uint64_t name_seed(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = name; *p; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    }
    return h;
}

static void fill_values(const ts_tiny_spec *s, const tdesc *d, float *v, int64_t n) {
    uint64_t st = name_seed(s->seed, d->name);
    float a = 1.0f;
    switch (d->k) {
    case K_MATRIX:
        a = sqrtf(3.0f / (float)d->ne[0]);
        break;
    case K_ROUTER:
        a = 4.0f * sqrtf(3.0f / (float)d->ne[0]);
        break;
    case K_OUTPUT:
        a = s->logit_scale * sqrtf(3.0f / (float)d->ne[0]);
        break;
    case K_EMBD:
        a = 1.0f;
        break;
    case K_POS:
        a = 0.3f;
        break;
    case K_EXTRA:
        a = 1.0f;
        break;
    case K_BIAS:
        a = 0.1f;
        break;
    case K_SINK:
        a = 2.0f;
        break;
    case K_NORM:
        a = 0.2f;
        break;
    }
    for (int64_t i = 0; i < n; i++) {
        v[i] = a * uniform(&st) + (d->k == K_NORM ? 1.0f : 0.0f);
    }
    if (d->k == K_EXTRA) {
        for (int64_t i = 0; i < n; i++) {
            v[i] = 2.5f + 1.5f * v[i];
        }
        if (s->extra_first != 0.0f && n > 0) {
            v[0] = s->extra_first;
        }
    }
}

typedef struct fill_ctx {
    const ts_tiny_spec *spec;
    const tlist *list;
} fill_ctx;

static ts_status fill(void *ctx, uint64_t index, void *dst, size_t nbytes, ts_error *err) {
    const fill_ctx *fc = ctx;
    const tdesc *d = &fc->list->v[index];
    int64_t n = d->ne[0] * d->ne[1] * d->ne[2], rows = d->ne[1] * d->ne[2];
    if (d->type == TS_TYPE_I32 || d->type == TS_TYPE_I8 || d->type == TS_TYPE_I16) {
        memset(dst, 0, nbytes);
        return TS_OK;
    }
    const ts_quant_ops *ops = ts_quant_ops_get(d->type, TS_ISA_SCALAR);
    if (ops == NULL || ops->from_float == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "tiny: cannot write '%s' as %s", d->name,
                            ts_type_name(d->type));
    }
    float *v = malloc((size_t)n * sizeof *v);
    if (v == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tiny: out of memory");
    }
    fill_values(fc->spec, d, v, n);
    size_t row = 0;
    ts_type_row_bytes(d->type, (uint64_t)d->ne[0], &row);
    if (row * (size_t)rows != nbytes) {
        free(v);
        return ts_error_set(err, TS_ERR_INTERNAL, "tiny: '%s' has %zu bytes, expected %zu", d->name,
                            nbytes, row * (size_t)rows);
    }
    for (int64_t r = 0; r < rows; r++) {
        ops->from_float(v + r * d->ne[0], (char *)dst + (size_t)r * row, d->ne[0]);
    }
    free(v);
    return TS_OK;
}

/* ---- vocabulary ------------------------------------------------------------------------- */

typedef struct vocab {
    char **tok;
    float *score;
    int32_t *type;
    int64_t n;
} vocab;

static void vocab_free(vocab *vb) {
    for (int64_t i = 0; i < vb->n; i++) {
        free(vb->tok[i]);
    }
    free(vb->tok);
    free(vb->score);
    free(vb->type);
}

static void vpush(vocab *vb, const char *text, int32_t type, float score) {
    vb->tok[vb->n] = strdup(text);
    vb->type[vb->n] = type;
    vb->score[vb->n] = score;
    vb->n++;
}

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

static ts_status build_vocab(int64_t n, vocab *vb, ts_error *err) {
    vb->n = 0;
    vb->tok = calloc((size_t)n, sizeof *vb->tok);
    vb->score = calloc((size_t)n, sizeof *vb->score);
    vb->type = calloc((size_t)n, sizeof *vb->type);
    if (!vb->tok || !vb->score || !vb->type) {
        return ts_error_set(err, TS_ERR_NOMEM, "tiny: out of memory");
    }
    vpush(vb, "<unk>", 2, 0.0f);
    vpush(vb, "<s>", 3, 0.0f);
    vpush(vb, "</s>", 3, 0.0f);
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        vpush(vb, t, 6, 0.0f);
    }
    static const char *const words[] = {
        SP,      SP "the", SP "cat", SP "sat", SP "on", SP "mat", SP "hello", SP "world", SP "a",
        SP "is", SP "of",  SP "and", "th",     "he",    "in",     "er",       "an",       "re",
        ".",     ",",      "!",      "?",      "0",     "1",      "2",        "3",        "4",
        "5",     "6",      "7",      "8",      "9",     SP "t",   SP "c",     SP "s",     SP "o",
        SP "m",  SP "h",   SP "w",   "e",      "t",     "a",      "o",        "i",        "n",
        "s",     "h",      "r",      "d",      "l",     "c",      "u",        "m",        "w",
        "f",     "g",      "y",      "p",      "b",     "v",      "k",        "x",        "j",
        "q",     "z",
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0] && vb->n < n; i++) {
        vpush(vb, words[i], 1, (float)strlen(words[i]) - 10.0f);
    }
    static const char *const syl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi"};
    for (int64_t k = 0; vb->n < n; k++) {
        char t[32];
        snprintf(t, sizeof t, SP "%s%s%s", syl[k % 8], syl[(k / 8) % 8], syl[(k / 64) % 8]);
        if (k >= 512) {
            snprintf(t, sizeof t, SP "w%lld", (long long)k);
        }
        vpush(vb, t, 1, -20.0f - (float)k);
    }
    for (int64_t i = 0; i < vb->n; i++) {
        if (vb->tok[i] == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tiny: out of memory");
        }
    }
    return TS_OK;
}

/* ---- metadata ----------------------------------------------------------------------------- */

static ts_status key_u32(ts_gguf_writer *w, const ts_tiny_spec *s, const char *suffix, int64_t v,
                         ts_error *err) {
    if (s->omit_key != NULL && strcmp(s->omit_key, suffix) == 0) {
        return TS_OK;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.%s", s->arch_name ? s->arch_name : s->arch, suffix);
    return ts_gguf_writer_add_u32(w, key, (uint32_t)v, err);
}

static ts_status key_f32(ts_gguf_writer *w, const ts_tiny_spec *s, const char *suffix, float v,
                         ts_error *err) {
    if (s->omit_key != NULL && strcmp(s->omit_key, suffix) == 0) {
        return TS_OK;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.%s", s->arch_name ? s->arch_name : s->arch, suffix);
    return ts_gguf_writer_add_f32(w, key, v, err);
}

static ts_status write_meta(ts_gguf_writer *w, const ts_tiny_spec *s, const vocab *vb,
                            ts_error *err) {
    char name[64];
    snprintf(name, sizeof name, "tiny-%s", s->arch);
    const char *arch = s->arch_name ? s->arch_name : s->arch;
    bool gpt2 = is(s, "gpt2"), cohere2 = is(s, "cohere2"), bert = is(s, "bert");
    bool encoder = bert || is(s, "nomic-bert");
    bool layer_norm = gpt2 || cohere2;
    ts_status st;
    if ((st = ts_gguf_writer_add_cstr(w, "general.architecture", arch, err)) ||
        (st = ts_gguf_writer_add_cstr(w, "general.name", name, err)) ||
        (st = key_u32(w, s, "context_length", s->n_ctx_train, err)) ||
        (st = key_u32(w, s, "embedding_length", s->n_embd, err)) ||
        (st = key_u32(w, s, "block_count", s->n_layer + s->n_nextn, err)) ||
        (st = key_u32(w, s, "feed_forward_length", s->n_ff, err)) ||
        (st = key_u32(w, s, "attention.head_count", s->n_head, err)) ||
        (st = key_u32(w, s, "attention.head_count_kv", s->n_head_kv, err)) ||
        (st = key_f32(w, s,
                      layer_norm || encoder ? "attention.layer_norm_epsilon"
                                            : "attention.layer_norm_rms_epsilon",
                      s->norm_eps, err))) {
        return st;
    }
    char causal[96];
    snprintf(causal, sizeof causal, "%s.attention.causal", arch);
    if (encoder && ((st = ts_gguf_writer_add_bool(w, causal, false, err)) ||
                    (st = key_u32(w, s, "pooling_type", s->pooling, err)))) {
        return st;
    }
    if (!gpt2 && !bert && (st = key_f32(w, s, "rope.freq_base", s->rope_base, err))) {
        return st;
    }
    if (s->n_rot > 0 && (st = key_u32(w, s, "rope.dimension_count", s->n_rot, err))) {
        return st;
    }
    if (s->n_nextn > 0 && (st = key_u32(w, s, "nextn_predict_layers", s->n_nextn, err))) {
        return st;
    }
    if (s->head_dim > 0 && ((st = key_u32(w, s, "attention.key_length", s->head_dim, err)) ||
                            (st = key_u32(w, s, "attention.value_length", s->head_dim, err)))) {
        return st;
    }
    if (s->n_expert > 0 && ((st = key_u32(w, s, "expert_count", s->n_expert, err)) ||
                            (st = key_u32(w, s, "expert_used_count", s->n_expert_used, err)))) {
        return st;
    }
    bool sel_bias = is(s, "dots1") || is(s, "glm4moe") || is(s, "ernie4_5_moe");
    bool ernie_moe = is(s, "ernie4_5_moe");
    if (s->n_expert > 0 &&
        (is(s, "qwen3moe") || is(s, "qwen2moe") || sel_bias || is(s, "gpt-oss")) &&
        (st = key_u32(w, s, "expert_feed_forward_length", s->n_ff_exp, err))) {
        return st;
    }
    /* dots1, glm4moe and ernie4_5-moe give their shared expert as a count of expert widths
     * (ERNIE's converter also writes its width) and their dense layers. */
    if (sel_bias &&
        ((st = key_u32(w, s, "expert_shared_count", s->n_ff_shexp / s->n_ff_exp, err)) ||
         (st = key_u32(w, s, "leading_dense_block_count", 1, err)))) {
        return st;
    }
    if (ernie_moe && (st = key_u32(w, s, "interleave_moe_layer_step", 1, err))) {
        return st;
    }
    if (s->n_ff_shexp > 0 && (!sel_bias || ernie_moe) &&
        (st = key_u32(w, s, "expert_shared_feed_forward_length", s->n_ff_shexp, err))) {
        return st;
    }
    if (s->moe_gating > 0 && (st = key_u32(w, s, "expert_gating_func", s->moe_gating, err))) {
        return st;
    }
    if (s->moe_w_scale > 0 && (st = key_f32(w, s, "expert_weights_scale", s->moe_w_scale, err))) {
        return st;
    }
    if (s->moe_norm > 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.expert_weights_norm", s->arch_name ? s->arch_name : s->arch);
        if ((st = ts_gguf_writer_add_bool(w, key, s->moe_norm == 1, err))) {
            return st;
        }
    }
    if (s->n_swa > 0 &&
        (st = key_u32(w, s, "attention.sliding_window", s->n_swa, err))) {
        return st;
    }
    if (s->swa_pattern > 0 &&
        (st = key_u32(w, s, "attention.sliding_window_pattern", s->swa_pattern, err))) {
        return st;
    }
    if (s->attn_softcap > 0 &&
        (st = key_f32(w, s, "attn_logit_softcapping", s->attn_softcap, err))) {
        return st;
    }
    if (s->final_softcap > 0 &&
        (st = key_f32(w, s, "final_logit_softcapping", s->final_softcap, err))) {
        return st;
    }
    /* Granite's muP multipliers and logit divisor, Cohere's logit multiplier: values away from
     * 1 so that a loader ignoring one gives other logits. */
    if ((is(s, "granite") || is(s, "granitemoe")) &&
        ((st = key_f32(w, s, "embedding_scale", 1.5f, err)) ||
         (st = key_f32(w, s, "residual_scale", 0.5f, err)) ||
         (st = key_f32(w, s, "attention.scale", 0.15f, err)) ||
         (st = key_f32(w, s, "logit_scale", 4.0f, err)))) {
        return st;
    }
    if (cohere2 && (st = key_f32(w, s, "logit_scale", 0.5f, err))) {
        return st;
    }
    if ((st = ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", "llama", err)) ||
        (st = ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", (const char *const *)vb->tok,
                                           (uint64_t)vb->n, err)) ||
        (st = ts_gguf_writer_add_array(w, "tokenizer.ggml.scores", TS_GGUF_FLOAT32, vb->score,
                                       (uint64_t)vb->n, err)) ||
        (st = ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32, vb->type,
                                       (uint64_t)vb->n, err)) ||
        (st = ts_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", TS_TINY_BOS, err)) ||
        (st = ts_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", TS_TINY_EOS, err)) ||
        (st = ts_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0, err)) ||
        (st = ts_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", !s->no_add_bos, err)) ||
        (st = ts_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false, err))) {
        return st;
    }
    if (s->chat_template != NULL) {
        return ts_gguf_writer_add_cstr(w, "tokenizer.chat_template", s->chat_template, err);
    }
    return TS_OK;
}

static bool known_arch(const char *arch) {
    for (int i = 0; arch != NULL && ts_tiny_archs[i] != NULL; i++) {
        if (strcmp(arch, ts_tiny_archs[i]) == 0) {
            return true;
        }
    }
    for (int i = 0; arch != NULL && ts_tiny_encoders[i] != NULL; i++) {
        if (strcmp(arch, ts_tiny_encoders[i]) == 0) {
            return true;
        }
    }
    return false;
}

ts_status ts_tiny_write(const ts_tiny_spec *s, const char *path, ts_error *err) {
    if (!known_arch(s->arch)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tiny: unknown family '%s'",
                            s->arch ? s->arch : "(null)");
    }
    if (s->n_vocab < TS_TINY_MIN_VOCAB || s->n_head < 1 || s->n_head_kv < 1 ||
        s->n_head % s->n_head_kv != 0 || s->n_layer + s->n_nextn < 1 || s->n_layer < 0 ||
        s->n_nextn < 0 || s->n_embd < 1 || s->n_ff < 1) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tiny: bad sizes for '%s'", s->arch);
    }
    tlist *l = calloc(1, sizeof *l);
    ts_gguf_writer *w = NULL;
    vocab vb = {0};
    if (l == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tiny: out of memory");
    }
    l->spec = s;
    l->err = err;
    build_list(l);
    ts_status st = l->st;
    if (st == TS_OK) {
        st = build_vocab(s->n_vocab, &vb, err);
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_create(&w, err);
    }
    if (st == TS_OK) {
        st = write_meta(w, s, &vb, err);
    }
    for (int i = 0; st == TS_OK && i < l->n; i++) {
        const tdesc *d = &l->v[i];
        st = ts_gguf_writer_add_tensor(w, d->name, d->type, d->n_dims, d->ne, NULL, err);
    }
    fill_ctx fc = {s, l};
    if (st == TS_OK) {
        ts_gguf_writer_set_fill(w, fill, &fc);
        st = ts_gguf_writer_write(w, path, err);
    }
    ts_gguf_writer_destroy(w);
    vocab_free(&vb);
    free(l);
    return st;
}

const char *ts_tiny_temp_path(char *buf, size_t size, const char *tag) {
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0') {
        dir = "/tmp";
    }
    snprintf(buf, size, "%s/ts_tiny_%s_XXXXXX.gguf", dir, tag ? tag : "");
    int fd = mkstemps(buf, 5);
    if (fd < 0) {
        return NULL;
    }
    close(fd);
    return buf;
}
