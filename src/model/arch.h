/*
 * arch.h — the architecture registry: what each supported model family is, as data.
 *
 * An architecture is described by a ts_arch_desc: the metadata prefix its hyperparameters use
 * (`<prefix>.<suffix>` keys), its fixed traits (norm kind, feed-forward kind, RoPE layout,
 * embedding scaling, extra norms) and the GGUF tensors it may hold, as name patterns with `{L}`
 * for the layer index, each with a role, an expected shape (in symbolic dimensions resolved from
 * the hyperparameters), and whether it is required. Features such as QKV bias, fused QKV or a
 * separate output matrix are not listed per architecture but probed from the tensors a file
 * actually holds (a pattern marked optional). Adding an architecture means adding a table here,
 * not if/else chains in the loader or graph builder.
 *
 * Constant data only; thread-safe.
 */
#ifndef TS_MODEL_ARCH_H
#define TS_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/functional.h" /* ts_norm_kind: RMSNorm or LayerNorm */

typedef enum ts_ffn_kind {
    TS_FFN_SWIGLU = 0,    /* down(silu(gate(x)) * up(x)) */
    TS_FFN_GEGLU_TANH = 1, /* down(gelu_tanh(gate(x)) * up(x)) */
    TS_FFN_GELU = 2,      /* down(gelu_tanh(up(x) + b) + b) — GPT-2 */
    TS_FFN_GELU_ERF = 3,  /* down(gelu_erf(up(x) + b) + b) — BERT */
    /* gpt-oss experts: down((clamp(up, -7, 7) + 1) * g * sigmoid(1.702 g)), g = min(gate, 7)
     * (the SWIGLU_OAI op; llama.cpp fixes alpha and limit, no metadata key) */
    TS_FFN_SWIGLU_OAI = 4,
} ts_ffn_kind;

/* How positions enter the model. */
typedef enum ts_pos_kind {
    TS_POS_LEARNED = 0,     /* learned absolute position embeddings (GPT-2) */
    TS_POS_ROPE_NORMAL = 1, /* RoPE on adjacent pairs (x0,x1), (x2,x3), ... */
    TS_POS_ROPE_NEOX = 2,   /* RoPE on halves: (x_i, x_{i + d/2}) */
} ts_pos_kind;

/* Symbolic dimensions of expected tensor shapes, resolved from hyperparameters. */
typedef enum ts_dim {
    TS_DIM_NONE = 0,
    TS_DIM_EMBD,     /* n_embd */
    TS_DIM_VOCAB,    /* n_vocab */
    TS_DIM_FF,       /* n_ff */
    TS_DIM_FF2,      /* 2 * n_ff (fused gate+up) */
    TS_DIM_Q,        /* n_head * head_dim_k */
    TS_DIM_KV,       /* n_head_kv * head_dim_k (== value dim for supported archs) */
    TS_DIM_QKV,      /* Q + 2 * KV (fused projection) */
    TS_DIM_HEAD,     /* head_dim_k (per-head Q/K norms) */
    TS_DIM_CTX_TRAIN, /* n_ctx_train (learned position table) */
    TS_DIM_TOKEN_TYPES, /* n_token_types (rows of an encoder's token-type table) */
    TS_DIM_ROT_HALF, /* n_rot / 2 (RoPE frequency factors, one per rotated pair) */
    TS_DIM_EXPERT,    /* n_expert (mixture of experts: experts per layer) */
    TS_DIM_FF_EXP,    /* n_ff_exp: hidden units of one expert */
    TS_DIM_FF_SHEXP,  /* n_ff_shexp: hidden units of the shared expert */
    TS_DIM_N_HEAD,    /* n_head (per-head attention sinks) */
} ts_dim;

/* What a tensor is for; the model's layer struct has one slot per role. */
typedef enum ts_role {
    TS_ROLE_TOKEN_EMBD = 0,
    TS_ROLE_POS_EMBD,
    TS_ROLE_OUTPUT_NORM,
    TS_ROLE_OUTPUT_NORM_B,
    TS_ROLE_OUTPUT,
    TS_ROLE_ROPE_FREQS,         /* llama3 scaling: per-pair divisors of the RoPE angle */
    TS_ROLE_ROPE_FACTORS_LONG,  /* Phi-3 longrope: divisors when the context exceeds the */
    TS_ROLE_ROPE_FACTORS_SHORT, /* original one (long), else the short ones */
    TS_ROLE_TOKEN_TYPES,     /* encoders: token-type (segment) embeddings */
    TS_ROLE_TOKEN_EMBD_NORM, /* encoders: LayerNorm of the summed input embeddings */
    TS_ROLE_TOKEN_EMBD_NORM_B,
    /* Per-layer roles start here. In an encoder (post-norm, ts_encoder_desc) the
     * ATTN_NORM and FFN_NORM roles are the norms after each residual add (BERT's
     * attn_output_norm and layer_output_norm) rather than before each sublayer. */
    TS_ROLE_ATTN_NORM,
    TS_ROLE_ATTN_NORM_B,
    TS_ROLE_ATTN_Q,
    TS_ROLE_ATTN_K,
    TS_ROLE_ATTN_V,
    TS_ROLE_ATTN_Q_B,
    TS_ROLE_ATTN_K_B,
    TS_ROLE_ATTN_V_B,
    TS_ROLE_ATTN_QKV,
    TS_ROLE_ATTN_QKV_B,
    TS_ROLE_ATTN_Q_NORM,
    TS_ROLE_ATTN_K_NORM,
    TS_ROLE_ATTN_OUT,
    TS_ROLE_ATTN_OUT_B,
    TS_ROLE_ATTN_POST_NORM,
    TS_ROLE_FFN_NORM,
    TS_ROLE_FFN_NORM_B,
    TS_ROLE_FFN_GATE,
    TS_ROLE_FFN_UP,
    TS_ROLE_FFN_UP_B,
    TS_ROLE_FFN_GATE_UP,
    TS_ROLE_FFN_DOWN,
    TS_ROLE_FFN_DOWN_B,
    TS_ROLE_FFN_POST_NORM,
    /* Mixture of experts (forward.c: moe_block). The expert matrices are 3-D, one [k, n]
     * matrix per expert stacked along ne[2]. */
    TS_ROLE_FFN_GATE_INP,       /* router [n_embd, n_expert] */
    TS_ROLE_FFN_GATE_EXPS,      /* [n_embd, n_ff_exp, n_expert] */
    TS_ROLE_FFN_UP_EXPS,        /* [n_embd, n_ff_exp, n_expert] */
    TS_ROLE_FFN_DOWN_EXPS,      /* [n_ff_exp, n_embd, n_expert] */
    TS_ROLE_FFN_GATE_INP_SHEXP, /* shared expert's sigmoid gate [n_embd] (Qwen2-MoE) */
    TS_ROLE_FFN_GATE_SHEXP,     /* shared expert [n_embd, n_ff_shexp] */
    TS_ROLE_FFN_UP_SHEXP,       /* [n_embd, n_ff_shexp] */
    TS_ROLE_FFN_DOWN_SHEXP,     /* [n_ff_shexp, n_embd] */
    /* gpt-oss: attention sinks (one logit per head joining the softmax, ir.h ATTENTION),
     * the router's bias and the experts' biases (one row per expert). */
    TS_ROLE_ATTN_SINKS,         /* [n_head] */
    TS_ROLE_FFN_GATE_INP_B,     /* [n_expert] */
    TS_ROLE_FFN_GATE_EXPS_B,    /* [n_ff_exp, n_expert] */
    TS_ROLE_FFN_UP_EXPS_B,      /* [n_ff_exp, n_expert] */
    TS_ROLE_FFN_DOWN_EXPS_B,    /* [n_embd, n_expert] */
    TS_ROLE_FFN_EXP_PROBS_B,    /* [n_expert] selection bias: experts are chosen by score + bias
                                   but weighted by the unbiased score (DeepSeek-V3, dots.llm1) */
    TS_ROLE_FFN_GATE_B,         /* [n_ff] gate bias of a gated FFN (llama's mlp_bias; its up and
                                   down biases are FFN_UP_B / FFN_DOWN_B) */
    TS_ROLE_COUNT
} ts_role;

#define TS_ROLE_FIRST_LAYER TS_ROLE_ATTN_NORM

/* How <arch>.logit_scale enters the logits (the key means opposite things in two families). */
typedef enum ts_logit_scale_use {
    TS_LOGIT_SCALE_NONE = 0, /* the key is not read */
    TS_LOGIT_SCALE_MUL = 1,  /* logits *= logit_scale (Cohere) */
    TS_LOGIT_SCALE_DIV = 2,  /* logits /= logit_scale (Granite's logits_scaling) */
} ts_logit_scale_use;

typedef struct ts_tensor_pattern {
    const char *name;   /* GGUF name; "{L}" stands for the layer index */
    const char *alt;    /* another name writers give the same tensor (NULL: none); `name` wins
                           when a file holds both */
    ts_role role;
    bool required;      /* a missing required tensor is an error naming it */
    ts_dim shape[3];    /* expected [ne0, ne1, ne2]; ne1 TS_DIM_NONE for vectors, ne2 TS_DIM_NONE
                           for vectors and matrices (3-D: stacked experts) */
} ts_tensor_pattern;

typedef struct ts_arch_desc {
    const char *name; /* general.architecture value, also the metadata key prefix */
    ts_norm_kind norm;
    ts_ffn_kind ffn;
    ts_pos_kind pos;
    bool embd_scale;   /* multiply token embeddings by sqrt(n_embd) (Gemma) */
    int swa_pattern;   /* sliding-window layers: 0 none; n: the default period when the
                          file gives a window but no sliding_window_pattern, layer il local
                          when il % n < n - 1 (Gemma 2: 2, Gemma 3: 6, EXAONE 4 and OLMo 3: 4) */
    float swa_rope_base; /* RoPE base of local layers when they use their own (Gemma 3) */
    const ts_tensor_pattern *tensors;
    size_t n_tensors;
    /* Traits of the families added later; zero means "as llama". A family without pre-norms
     * (OLMo 2, EXAONE 4) simply lists no attn_norm / ffn_norm tensors: a block whose norm
     * the table lacks reads the residual stream itself. */
    /* Attention and FFN both read h = norm(x) and join x together: x + attn(h) + ffn(h)
     * (Cohere 2); the table has no ffn_norm. */
    bool parallel_block;
    /* n > 0: layer il has no RoPE when (il + 1) % n == 0 (SmolLM3: 4). */
    int nope_step;
    /* Only sliding-window layers use RoPE, the global ones none (Cohere 2); which is which
     * follows the swa pattern. */
    bool rope_swa_only;
    /* The same, but only in a model with a window (attention.sliding_window > 0); without
     * one, every layer uses RoPE (EXAONE 4: the 32B interleaves windowed RoPE layers with
     * global NoPE ones, the 1.2B has no window; transformers rotates a layer when the config's
     * sliding_window is None or the layer slides). */
    bool rope_swa_only_if_swa;
    /* Sliding-window layers use plain RoPE (rope.freq_base_swa, no scaling) even when the
     * model's RoPE is scaled: OLMo 3 scales only its global layers (transformers'
     * per-layer-type rope_parameters; llama.cpp's olmo2 graph). Gemma 3's local base implies
     * the same. */
    bool swa_rope_plain;
    /* <arch>.expert_gating_func defaults to sigmoid, the family's only router (dots.llm1,
     * GLM-4.5: llama.cpp's converter writes no key for dots1), instead of softmax. */
    bool moe_sigmoid;
    /* The Q / K RMS norms span the whole projection ([n_head * head_dim], OLMo 2), not each
     * head. */
    bool qk_norm_full;
    /* Reads <arch>.embedding_scale, residual_scale and attention.scale (Granite's muP
     * multipliers). */
    bool mup_scales;
    ts_logit_scale_use logit_scale;
    /* The routed experts' weights are the gating probabilities as they are, not renormalized
     * over the chosen experts, unless <arch>.expert_weights_norm says otherwise (Qwen2-MoE,
     * OLMoE: llama.cpp's graphs for them never renormalize; dots.llm1 files carry the key). */
    bool moe_raw_w;
} ts_arch_desc;

/* How an encoder turns per-token hidden states into one vector per input (llama.cpp's
 * <arch>.pooling_type values). */
typedef enum ts_pool_kind {
    TS_POOL_NONE = 0, /* no pooling: one vector per token */
    TS_POOL_MEAN = 1, /* mean over the input's tokens */
    TS_POOL_CLS = 2,  /* the first token (BERT's [CLS]) */
    TS_POOL_LAST = 3, /* the last token (causal embedding models) */
} ts_pool_kind;

/* What makes an architecture a bidirectional encoder (the BERT family). Architectures without
 * an entry are causal decoders. An encoder's attention sees every token of its input (the
 * whole input must be in one step), it has no output matrix (it gives hidden states, not
 * logits) and its blocks are post-norm: x = norm(x + attn(x)); x = norm(x + ffn(x)). */
typedef struct ts_encoder_desc {
    const char *name;     /* general.architecture value */
    bool token_types;     /* adds row 0 of token_types (segment A) to every token */
    ts_pool_kind pooling; /* default when <arch>.pooling_type is absent */
} ts_encoder_desc;

/* The encoder traits of architecture name, or NULL for a causal decoder. */
const ts_encoder_desc *ts_arch_encoder(const char *name);

/* The descriptor for general.architecture == name, or NULL when unsupported. */
const ts_arch_desc *ts_arch_find(const char *name);

/* Comma-separated list of supported architecture names (for error messages). */
const char *ts_arch_supported_list(void);

#endif /* TS_MODEL_ARCH_H */
