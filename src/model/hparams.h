/*
 * hparams.h — a model's hyperparameters, read from GGUF metadata through the architecture's
 * key prefix (`<arch>.<suffix>`): required keys are errors when absent, optional keys take the
 * architecture's default. Plain data; thread-safe once filled.
 */
#ifndef TS_MODEL_HPARAMS_H
#define TS_MODEL_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "tessera.h"

typedef enum ts_rope_scaling {
    TS_ROPE_SCALING_LINEAR = 0, /* positions times freq_scale (also "none": freq_scale 1) */
    TS_ROPE_SCALING_YARN = 1,
    TS_ROPE_SCALING_LONGROPE = 2, /* Phi-3: the file's rope_factors_long / _short */
    TS_ROPE_SCALING_LLAMA3 = 3,   /* per-pair divisors: rope_freqs.weight or the metadata form */
} ts_rope_scaling;

/* How router logits become expert scores (llama.cpp's expert_gating_func numbering). */
typedef enum ts_moe_gating {
    TS_MOE_SOFTMAX = 1, /* softmax over all experts; top-k of the probabilities */
    TS_MOE_SIGMOID = 2, /* sigmoid of each logit */
} ts_moe_gating;

typedef struct ts_hparams {
    const ts_arch_desc *arch;
    int64_t n_vocab;     /* rows of token_embd */
    int64_t n_ctx_train; /* <arch>.context_length */
    int64_t n_embd;      /* <arch>.embedding_length */
    int64_t n_layer;     /* <arch>.block_count */
    int64_t n_ff;        /* <arch>.feed_forward_length */
    int64_t n_head;      /* <arch>.attention.head_count */
    int64_t n_head_kv;   /* <arch>.attention.head_count_kv (default n_head) */
    int64_t head_dim;    /* <arch>.attention.key_length (default n_embd / n_head) */
    int64_t n_rot;       /* <arch>.rope.dimension_count (default head_dim) */
    float norm_eps;      /* layer_norm_rms_epsilon or layer_norm_epsilon */
    float rope_base;     /* <arch>.rope.freq_base (default 10000) */
    float rope_base_swa; /* <arch>.rope.freq_base_swa: RoPE base of sliding-window layers
                            (default: the arch's, Gemma 3: 10000) */
    float rope_freq_scale; /* 1 / <arch>.rope.scaling.factor for linear scaling, else 1 */
    int64_t n_swa;       /* <arch>.attention.sliding_window; 0 = none */
    int64_t swa_pattern; /* <arch>.attention.sliding_window_pattern as a period (default: the
                            arch's): layer il is local when il % n < n - 1; 0 when the file
                            gives the pattern as a per-layer bool array instead */
    /* [n_layer]: whether layer il uses the sliding window, from the period or the per-layer
     * array (llama.cpp's converter writes either form); NULL when no layer slides (no
     * window, or a family without sliding-window layers). Owned; ts_hparams_free frees it. */
    bool *swa_layers;
    float attn_softcap;  /* <arch>.attn_logit_softcapping; 0 = none */
    float final_softcap; /* <arch>.final_logit_softcapping; 0 = none */
    float attn_scale;    /* scale of Q·K (default 1/sqrt(head_dim)) */
    float embd_scale;    /* multiplier of token embeddings (sqrt(n_embd) for Gemma, else 1) */
    /* Granite: embd_scale is <arch>.embedding_scale, attn_scale <arch>.attention.scale. */
    /* Multiplier of each block's output before the residual add (Granite
     * <arch>.residual_scale, else 1). */
    float residual_scale;
    /* Multiplier of the logits: <arch>.logit_scale (Cohere), its inverse (Granite), else 1. */
    float logit_mul;
    const ts_encoder_desc *enc; /* encoder traits (BERT family), NULL for a causal decoder */
    bool causal;                /* <arch>.attention.causal (default: false for encoders) */
    ts_pool_kind pooling;       /* <arch>.pooling_type (default: the encoder's, else LAST) */
    int64_t n_token_types;      /* rows of token_types.weight (0 when absent) */
    /* RoPE scaling beyond the linear factor (docs/architecture.md, "RoPE scaling"). */
    ts_rope_scaling rope_scaling; /* <arch>.rope.scaling.type (default linear, as llama.cpp) */
    int64_t rope_n_ctx_orig;      /* rope.scaling.original_context_length (default n_ctx_train):
                                     YaRN's ramp, Phi-3's long/short choice, llama3's bands */
    float rope_ext_factor;        /* YaRN: rope.scaling.yarn_ext_factor (default 1; 0 otherwise) */
    float rope_beta_fast;         /* YaRN: rope.scaling.yarn_beta_fast (default 32) */
    float rope_beta_slow;         /* YaRN: rope.scaling.yarn_beta_slow (default 1) */
    float rope_attn_factor; /* multiplier of cos and sin: YaRN's (rope.scaling.yarn_attn_factor,
                               default 0.1 ln(factor) + 1) times rope.scaling.attn_factor
                               (Phi-3's; default 1, or sqrt(1 + ln(s) / ln(n_ctx_orig)) for a
                               file with long/short factors, s = context / original) */
    /* llama3 given as metadata (type "llama3"): the per-pair divisors computed from
     * rope.scaling.factor, low_freq_factor, high_freq_factor and original_context_length, as
     * the converter computes rope_freqs.weight; [n_rot / 2], NULL otherwise. Owned. */
    float *rope_llama3_factors;
    /* Mixture of experts (0 experts: a dense model). */
    int64_t n_expert;      /* <arch>.expert_count (default 0) */
    int64_t n_expert_used; /* <arch>.expert_used_count: experts per token (required with experts) */
    int64_t n_ff_exp;      /* <arch>.expert_feed_forward_length (default n_ff) */
    int64_t n_ff_shexp;    /* <arch>.expert_shared_feed_forward_length (default
                              expert_shared_count * n_ff_exp, that count defaulting to 1) */
    ts_moe_gating moe_gating; /* <arch>.expert_gating_func: 1 softmax (default), 2 sigmoid */
    bool moe_norm_w;          /* <arch>.expert_weights_norm (default true; false for the
                                 archs with the moe_raw_w trait): the top-k weights are divided
                                 by their sum */
    float moe_w_scale;        /* <arch>.expert_weights_scale: multiplier of the weights; 1 = none */
} ts_hparams;

/* Reads hyperparameters for the file's general.architecture. Unknown architectures are
 * TS_ERR_UNSUPPORTED with the list of supported ones. n_vocab is taken from token_embd. */
ts_status ts_hparams_load(const ts_gguf *g, ts_hparams *hp, ts_error *err);

/* Frees what ts_hparams_load allocated (the llama3 factors, the sliding-window layers); safe
 * on a zeroed struct. */
void ts_hparams_free(ts_hparams *hp);

/* True when layer il uses sliding-window attention. */
bool ts_hparams_layer_is_swa(const ts_hparams *hp, int64_t il);

/* True when layer il applies RoPE to Q and K: not for learned positions, nor for the NoPE
 * layers of SmolLM3 (every nope_step-th), Cohere 2 and EXAONE 4 with a window (the global,
 * non-window layers). */
bool ts_hparams_layer_has_rope(const ts_hparams *hp, int64_t il);

/* Resolves a symbolic dimension to its size (0 for TS_DIM_NONE). */
int64_t ts_hparams_dim(const ts_hparams *hp, ts_dim dim);

#endif /* TS_MODEL_HPARAMS_H */
