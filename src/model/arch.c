/* arch.c — the registry tables of supported architectures (see arch.h). */
#include "model/arch.h"

#include <string.h>

/* Shorthands: R = required, O = optional (probed); shapes in symbolic dims. */
#define T(name_, role_, req_, d0_, d1_)                                                            \
    {                                                                                              \
        name_, NULL, role_, req_, {                                                                \
            d0_, d1_, TS_DIM_NONE                                                                  \
        }                                                                                          \
    }
#define T3(name_, role_, req_, d0_, d1_, d2_)                                                      \
    {                                                                                              \
        name_, NULL, role_, req_, {                                                                \
            d0_, d1_, d2_                                                                          \
        }                                                                                          \
    }
/* A tensor that writers name in two ways (alt_: the second name). */
#define TA(name_, alt_, role_, req_, d0_, d1_)                                                     \
    {                                                                                              \
        name_, alt_, role_, req_, {                                                                \
            d0_, d1_, TS_DIM_NONE                                                                  \
        }                                                                                          \
    }
#define R true
#define O false
#define NONE TS_DIM_NONE

#define GLOBAL_TENSORS(output_req)                                                                \
    T("token_embd.weight", TS_ROLE_TOKEN_EMBD, R, TS_DIM_EMBD, TS_DIM_VOCAB),                     \
        T("output_norm.weight", TS_ROLE_OUTPUT_NORM, R, TS_DIM_EMBD, NONE),                       \
        T("output.weight", TS_ROLE_OUTPUT, output_req, TS_DIM_EMBD, TS_DIM_VOCAB)

#define SEPARATE_QKV(bias_req)                                                                    \
    T("blk.{L}.attn_q.weight", TS_ROLE_ATTN_Q, R, TS_DIM_EMBD, TS_DIM_Q),                         \
        T("blk.{L}.attn_k.weight", TS_ROLE_ATTN_K, R, TS_DIM_EMBD, TS_DIM_KV),                    \
        T("blk.{L}.attn_v.weight", TS_ROLE_ATTN_V, R, TS_DIM_EMBD, TS_DIM_KV),                    \
        T("blk.{L}.attn_q.bias", TS_ROLE_ATTN_Q_B, bias_req, TS_DIM_Q, NONE),                     \
        T("blk.{L}.attn_k.bias", TS_ROLE_ATTN_K_B, bias_req, TS_DIM_KV, NONE),                    \
        T("blk.{L}.attn_v.bias", TS_ROLE_ATTN_V_B, bias_req, TS_DIM_KV, NONE)

/* A gated dense FFN's three matrices (req_: required, or optional where a layer may hold
 * experts instead). */
#define DENSE_FFN(req_)                                                                            \
    T("blk.{L}.ffn_gate.weight", TS_ROLE_FFN_GATE, req_, TS_DIM_EMBD, TS_DIM_FF),                  \
        T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_UP, req_, TS_DIM_EMBD, TS_DIM_FF),                  \
        T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, req_, TS_DIM_FF, TS_DIM_EMBD)

#define GATED_FFN                                                                                  \
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE), DENSE_FFN(R)

/* A mixture's shared expert: gate, up and down of n_ff_shexp units. */
#define SHARED_EXPERT(req_)                                                                        \
    T("blk.{L}.ffn_gate_shexp.weight", TS_ROLE_FFN_GATE_SHEXP, req_, TS_DIM_EMBD,                  \
      TS_DIM_FF_SHEXP),                                                                            \
        T("blk.{L}.ffn_up_shexp.weight", TS_ROLE_FFN_UP_SHEXP, req_, TS_DIM_EMBD,                  \
          TS_DIM_FF_SHEXP),                                                                        \
        T("blk.{L}.ffn_down_shexp.weight", TS_ROLE_FFN_DOWN_SHEXP, req_, TS_DIM_FF_SHEXP,          \
          TS_DIM_EMBD)

/* llama.cpp's converter writes Llama 3.1's scaling as one global tensor. */
#define ROPE_FREQS T("rope_freqs.weight", TS_ROLE_ROPE_FREQS, O, TS_DIM_ROT_HALF, NONE)

/* A mixture-of-experts FFN: router, stacked experts (req_: required, or optional in an
 * architecture whose layers may be dense instead; model.c checks that every layer has one
 * complete FFN and names what is missing). */
#define MOE_FFN(req_)                                                                              \
    T("blk.{L}.ffn_gate_inp.weight", TS_ROLE_FFN_GATE_INP, req_, TS_DIM_EMBD, TS_DIM_EXPERT),      \
        T3("blk.{L}.ffn_gate_exps.weight", TS_ROLE_FFN_GATE_EXPS, req_, TS_DIM_EMBD,               \
           TS_DIM_FF_EXP, TS_DIM_EXPERT),                                                          \
        T3("blk.{L}.ffn_up_exps.weight", TS_ROLE_FFN_UP_EXPS, req_, TS_DIM_EMBD, TS_DIM_FF_EXP,    \
           TS_DIM_EXPERT),                                                                         \
        T3("blk.{L}.ffn_down_exps.weight", TS_ROLE_FFN_DOWN_EXPS, req_, TS_DIM_FF_EXP,             \
           TS_DIM_EMBD, TS_DIM_EXPERT)

/* LLaMA layers have a dense FFN or (Mixtral, which GGUF files call "llama") experts. */
static const ts_tensor_pattern k_llama[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    DENSE_FFN(O),
    /* mlp_bias configs: the converter writes the three biases, llama.cpp adds them. */
    T("blk.{L}.ffn_gate.bias", TS_ROLE_FFN_GATE_B, O, TS_DIM_FF, NONE),
    T("blk.{L}.ffn_up.bias", TS_ROLE_FFN_UP_B, O, TS_DIM_FF, NONE),
    T("blk.{L}.ffn_down.bias", TS_ROLE_FFN_DOWN_B, O, TS_DIM_EMBD, NONE),
    MOE_FFN(O),
};

/* Qwen3-MoE: Qwen3 attention (per-head Q/K norms), every layer's FFN a mixture of experts. */
static const ts_tensor_pattern k_qwen3moe[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    MOE_FFN(R),
};

/* Qwen2-MoE: Qwen2 attention (QKV biases); experts plus a shared expert whose output is scaled
 * by sigmoid(gate_inp_shexp · x). */
static const ts_tensor_pattern k_qwen2moe[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(R),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    MOE_FFN(R),
    T("blk.{L}.ffn_gate_inp_shexp.weight", TS_ROLE_FFN_GATE_INP_SHEXP, O, TS_DIM_EMBD, NONE),
    SHARED_EXPERT(R),
};

/* gpt-oss: biased attention with per-head sinks, every other layer a sliding window; a
 * mixture of experts with a biased router and biased experts whose activation is the clamped
 * SwiGLU (TS_FFN_SWIGLU_OAI). */
static const ts_tensor_pattern k_gpt_oss[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_sinks.weight", TS_ROLE_ATTN_SINKS, R, TS_DIM_N_HEAD, NONE),
    /* llama.cpp's converter (and llama.cpp) call the norm before the experts
     * post_attention_norm, as GLM-4.5's; files written the llama way call it ffn_norm. */
    TA("blk.{L}.ffn_norm.weight", "blk.{L}.post_attention_norm.weight", TS_ROLE_FFN_NORM, R,
       TS_DIM_EMBD, NONE),
    MOE_FFN(R),
    T("blk.{L}.ffn_gate_inp.bias", TS_ROLE_FFN_GATE_INP_B, O, TS_DIM_EXPERT, NONE),
    T("blk.{L}.ffn_gate_exps.bias", TS_ROLE_FFN_GATE_EXPS_B, O, TS_DIM_FF_EXP, TS_DIM_EXPERT),
    T("blk.{L}.ffn_up_exps.bias", TS_ROLE_FFN_UP_EXPS_B, O, TS_DIM_FF_EXP, TS_DIM_EXPERT),
    T("blk.{L}.ffn_down_exps.bias", TS_ROLE_FFN_DOWN_EXPS_B, O, TS_DIM_EMBD, TS_DIM_EXPERT),
};

/* OLMoE: OLMo 2's Q / K norms over the whole projection in llama's pre-norm blocks; every
 * layer's FFN a mixture of experts. */
static const ts_tensor_pattern k_olmoe[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_Q, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_KV, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    MOE_FFN(R),
};

/* Granite MoE (and GraniteMoeShared, which GGUF files also call "granitemoe"): llama
 * attention, experts, and optionally a shared expert added without a gate. */
static const ts_tensor_pattern k_granitemoe[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    MOE_FFN(R),
    SHARED_EXPERT(O),
};

/* dots.llm1: Qwen3 attention (per-head Q/K norms); the leading layers dense, the others
 * experts chosen by sigmoid score + selection bias, plus an ungated shared expert. */
static const ts_tensor_pattern k_dots1[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    DENSE_FFN(O),
    MOE_FFN(O),
    T("blk.{L}.exp_probs_b.bias", TS_ROLE_FFN_EXP_PROBS_B, O, TS_DIM_EXPERT, NONE),
    SHARED_EXPERT(O),
};

/* GLM-4.5: q/k/v biases, optional per-head Q/K norms; the norm before the FFN is called
 * post_attention_norm; dense leading layers, then dots1's experts (selection bias, shared
 * expert). */
static const ts_tensor_pattern k_glm4moe[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, O, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, O, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    TA("blk.{L}.post_attention_norm.weight", "blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R,
       TS_DIM_EMBD, NONE),
    DENSE_FFN(O),
    MOE_FFN(O),
    T("blk.{L}.exp_probs_b.bias", TS_ROLE_FFN_EXP_PROBS_B, O, TS_DIM_EXPERT, NONE),
    SHARED_EXPERT(O),
};

/* ERNIE 4.5 MoE: llama attention; dense leading layers, then experts chosen by softmax +
 * selection bias, plus an ungated shared expert. */
static const ts_tensor_pattern k_ernie4_5_moe[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    DENSE_FFN(O),
    MOE_FFN(O),
    T("blk.{L}.exp_probs_b.bias", TS_ROLE_FFN_EXP_PROBS_B, O, TS_DIM_EXPERT, NONE),
    SHARED_EXPERT(O),
};

static const ts_tensor_pattern k_qwen2[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(R),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    GATED_FFN,
};

static const ts_tensor_pattern k_qwen3[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    GATED_FFN,
};

/* Phi-3 (and Phi-4-mini, also written as phi3) fuses Q, K and V into one projection and gate and up into one [n_embd, 2*n_ff]
 * matrix whose first half is the gate. Long-context Phi-3 files carry LongRoPE's two sets of
 * per-pair divisors. */
static const ts_tensor_pattern k_phi3[] = {
    GLOBAL_TENSORS(O), /* Phi-4-mini ties the output to the embedding */
    T("rope_factors_long.weight", TS_ROLE_ROPE_FACTORS_LONG, O, TS_DIM_ROT_HALF, NONE),
    T("rope_factors_short.weight", TS_ROLE_ROPE_FACTORS_SHORT, O, TS_DIM_ROT_HALF, NONE),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_qkv.weight", TS_ROLE_ATTN_QKV, R, TS_DIM_EMBD, TS_DIM_QKV),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_GATE_UP, R, TS_DIM_EMBD, TS_DIM_FF2),
    T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, R, TS_DIM_FF, TS_DIM_EMBD),
};

#define GEMMA_LAYER                                                                               \
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),                       \
        SEPARATE_QKV(O),                                                                          \
        T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),              \
        T("blk.{L}.post_attention_norm.weight", TS_ROLE_ATTN_POST_NORM, R, TS_DIM_EMBD, NONE),    \
        GATED_FFN,                                                                                \
        T("blk.{L}.post_ffw_norm.weight", TS_ROLE_FFN_POST_NORM, R, TS_DIM_EMBD, NONE)

static const ts_tensor_pattern k_gemma2[] = {
    GLOBAL_TENSORS(O),
    GEMMA_LAYER,
};

static const ts_tensor_pattern k_gemma3[] = {
    GLOBAL_TENSORS(O),
    GEMMA_LAYER,
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_HEAD, NONE),
};

static const ts_tensor_pattern k_gpt2[] = {
    GLOBAL_TENSORS(O),
    T("position_embd.weight", TS_ROLE_POS_EMBD, R, TS_DIM_EMBD, TS_DIM_CTX_TRAIN),
    T("output_norm.bias", TS_ROLE_OUTPUT_NORM_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_norm.bias", TS_ROLE_ATTN_NORM_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_qkv.weight", TS_ROLE_ATTN_QKV, R, TS_DIM_EMBD, TS_DIM_QKV),
    T("blk.{L}.attn_qkv.bias", TS_ROLE_ATTN_QKV_B, R, TS_DIM_QKV, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_norm.bias", TS_ROLE_FFN_NORM_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_UP, R, TS_DIM_EMBD, TS_DIM_FF),
    T("blk.{L}.ffn_up.bias", TS_ROLE_FFN_UP_B, R, TS_DIM_FF, NONE),
    T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, R, TS_DIM_FF, TS_DIM_EMBD),
    T("blk.{L}.ffn_down.bias", TS_ROLE_FFN_DOWN_B, R, TS_DIM_EMBD, NONE),
};

/* OLMo 2 and EXAONE 4 norm the outputs of attention and FFN instead of their inputs (no
 * attn_norm / ffn_norm) and Q / K after the projection: OLMo 2 over the whole projection,
 * EXAONE 4 per head. */
#define POST_NORM_LAYER(qk_dim, kv_dim)                                                            \
    SEPARATE_QKV(O),                                                                               \
        T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, qk_dim, NONE),                     \
        T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, kv_dim, NONE),                     \
        T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),               \
        T("blk.{L}.post_attention_norm.weight", TS_ROLE_ATTN_POST_NORM, R, TS_DIM_EMBD, NONE),     \
        DENSE_FFN(R),                                                                              \
        T("blk.{L}.post_ffw_norm.weight", TS_ROLE_FFN_POST_NORM, R, TS_DIM_EMBD, NONE)

static const ts_tensor_pattern k_olmo2[] = {
    GLOBAL_TENSORS(R),
    POST_NORM_LAYER(TS_DIM_Q, TS_DIM_KV),
};

static const ts_tensor_pattern k_exaone4[] = {
    GLOBAL_TENSORS(O),
    POST_NORM_LAYER(TS_DIM_HEAD, TS_DIM_HEAD),
};

/* Cohere 2 (Command R7B): one bias-free LayerNorm feeds attention and FFN in parallel; the
 * output matrix is always the token embedding (llama.cpp's runtime ignores an output.weight). */
static const ts_tensor_pattern k_cohere2[] = {
    T("token_embd.weight", TS_ROLE_TOKEN_EMBD, R, TS_DIM_EMBD, TS_DIM_VOCAB),
    T("output_norm.weight", TS_ROLE_OUTPUT_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_q.weight", TS_ROLE_ATTN_Q, R, TS_DIM_EMBD, TS_DIM_Q),
    T("blk.{L}.attn_k.weight", TS_ROLE_ATTN_K, R, TS_DIM_EMBD, TS_DIM_KV),
    T("blk.{L}.attn_v.weight", TS_ROLE_ATTN_V, R, TS_DIM_EMBD, TS_DIM_KV),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    DENSE_FFN(R),
};

/* BERT (and models converted to its layout: RoBERTa, XLM-RoBERTa with the position table
 * shifted by the converter): learned positions, token types, a LayerNorm over the input
 * embeddings, post-norm blocks with biases everywhere and a GELU (erf) MLP. */
static const ts_tensor_pattern k_bert[] = {
    T("token_embd.weight", TS_ROLE_TOKEN_EMBD, R, TS_DIM_EMBD, TS_DIM_VOCAB),
    T("position_embd.weight", TS_ROLE_POS_EMBD, R, TS_DIM_EMBD, TS_DIM_CTX_TRAIN),
    T("token_types.weight", TS_ROLE_TOKEN_TYPES, O, TS_DIM_EMBD, TS_DIM_TOKEN_TYPES),
    T("token_embd_norm.weight", TS_ROLE_TOKEN_EMBD_NORM, R, TS_DIM_EMBD, NONE),
    T("token_embd_norm.bias", TS_ROLE_TOKEN_EMBD_NORM_B, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_qkv.weight", TS_ROLE_ATTN_QKV, O, TS_DIM_EMBD, TS_DIM_QKV),
    T("blk.{L}.attn_qkv.bias", TS_ROLE_ATTN_QKV_B, O, TS_DIM_QKV, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_output_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_output_norm.bias", TS_ROLE_ATTN_NORM_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_UP, R, TS_DIM_EMBD, TS_DIM_FF),
    T("blk.{L}.ffn_up.bias", TS_ROLE_FFN_UP_B, O, TS_DIM_FF, NONE),
    T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, R, TS_DIM_FF, TS_DIM_EMBD),
    T("blk.{L}.ffn_down.bias", TS_ROLE_FFN_DOWN_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.layer_output_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.layer_output_norm.bias", TS_ROLE_FFN_NORM_B, R, TS_DIM_EMBD, NONE),
};

/* nomic-bert (nomic-embed-text v1 / v1.5): BERT's post-norm encoder with RoPE (halves, no
 * position table), a fused bias-free QKV projection and a bias-free SwiGLU MLP (the original
 * checkpoint's fc11 is ffn_up, fc12 the gate ffn_gate, fc2 ffn_down). */
static const ts_tensor_pattern k_nomic_bert[] = {
    T("token_embd.weight", TS_ROLE_TOKEN_EMBD, R, TS_DIM_EMBD, TS_DIM_VOCAB),
    T("token_types.weight", TS_ROLE_TOKEN_TYPES, O, TS_DIM_EMBD, TS_DIM_TOKEN_TYPES),
    T("token_embd_norm.weight", TS_ROLE_TOKEN_EMBD_NORM, R, TS_DIM_EMBD, NONE),
    T("token_embd_norm.bias", TS_ROLE_TOKEN_EMBD_NORM_B, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_qkv.weight", TS_ROLE_ATTN_QKV, R, TS_DIM_EMBD, TS_DIM_QKV),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.attn_output_norm.bias", TS_ROLE_ATTN_NORM_B, R, TS_DIM_EMBD, NONE),
    DENSE_FFN(R),
    T("blk.{L}.layer_output_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.layer_output_norm.bias", TS_ROLE_FFN_NORM_B, R, TS_DIM_EMBD, NONE),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const ts_encoder_desc k_encoders[] = {
    {.name = "bert", .token_types = true, .pooling = TS_POOL_CLS},
    {.name = "nomic-bert", .token_types = true, .pooling = TS_POOL_MEAN},
};

static const ts_arch_desc k_archs[] = {
    {.name = "llama",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_llama,
     .n_tensors = N(k_llama)},
    {.name = "qwen2",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_qwen2,
     .n_tensors = N(k_qwen2)},
    {.name = "qwen3",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_qwen3,
     .n_tensors = N(k_qwen3)},
    {.name = "phi3",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_phi3,
     .n_tensors = N(k_phi3)},
    {.name = "gemma2",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_GEGLU_TANH,
     .pos = TS_POS_ROPE_NEOX,
     .embd_scale = true,
     .swa_pattern = 2,
     .tensors = k_gemma2,
     .n_tensors = N(k_gemma2)},
    {.name = "gemma3",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_GEGLU_TANH,
     .pos = TS_POS_ROPE_NEOX,
     .embd_scale = true,
     .swa_pattern = 6,
     .swa_rope_base = 10000.0f,
     .tensors = k_gemma3,
     .n_tensors = N(k_gemma3)},
    {.name = "gpt2",
     .norm = TS_NORM_LAYER,
     .ffn = TS_FFN_GELU,
     .pos = TS_POS_LEARNED,
     .tensors = k_gpt2,
     .n_tensors = N(k_gpt2)},
    /* Granite: llama with muP multipliers (embedding, residual, attention) and logits divided
     * by logit_scale. */
    {.name = "granite",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_llama,
     .n_tensors = N(k_llama),
     .mup_scales = true,
     .logit_scale = TS_LOGIT_SCALE_DIV},
    /* SmolLM3: llama whose every 4th layer has no RoPE (llama.cpp fixes the step; no key). */
    {.name = "smollm3",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_llama,
     .n_tensors = N(k_llama),
     .nope_step = 4},
    /* OLMo 2, and OLMo 3 (written as olmo2: a window of sliding_window tokens on the layers
     * the per-layer pattern marks, every 4th layer global by default; RoPE everywhere, the
     * scaled kind (YaRN) on the global layers only). */
    {.name = "olmo2",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .swa_pattern = 4,
     .swa_rope_plain = true,
     .tensors = k_olmo2,
     .n_tensors = N(k_olmo2),
     .qk_norm_full = true},
    /* EXAONE 4: the 1.2B has no window; the 32B (sliding_window and a per-layer pattern, every
     * 4th layer global by default) uses RoPE on its windowed layers only. */
    {.name = "exaone4",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .swa_pattern = 4,
     .tensors = k_exaone4,
     .n_tensors = N(k_exaone4),
     .rope_swa_only_if_swa = true},
    /* ERNIE 4.5 (dense): llama's tensors; its RoPE rotates adjacent pairs in HF already, so
     * the converter writes Q and K unpermuted. */
    {.name = "ernie4_5",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_llama,
     .n_tensors = N(k_llama)},
    /* Cohere 2: three sliding-window layers with RoPE, then one global layer without. */
    {.name = "cohere2",
     .norm = TS_NORM_LAYER,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .swa_pattern = 4,
     .tensors = k_cohere2,
     .n_tensors = N(k_cohere2),
     .parallel_block = true,
     .rope_swa_only = true,
     .logit_scale = TS_LOGIT_SCALE_MUL},
    {.name = "qwen3moe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_qwen3moe,
     .n_tensors = N(k_qwen3moe)},
    {.name = "qwen2moe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_qwen2moe,
     .n_tensors = N(k_qwen2moe),
     .moe_raw_w = true},
    /* gpt-oss: layer il is local when il % 2 == 0 (llama.cpp's swa pattern 2, HF's
     * layer_types). */
    {.name = "gpt-oss",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU_OAI,
     .pos = TS_POS_ROPE_NEOX,
     .swa_pattern = 2,
     .tensors = k_gpt_oss,
     .n_tensors = N(k_gpt_oss)},
    {.name = "olmoe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_olmoe,
     .n_tensors = N(k_olmoe),
     .qk_norm_full = true,
     .moe_raw_w = true},
    /* Granite MoE: granite's muP multipliers and logit divisor; softmax over the chosen
     * experts' router logits (renormalized weights). */
    {.name = "granitemoe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_granitemoe,
     .n_tensors = N(k_granitemoe),
     .mup_scales = true,
     .logit_scale = TS_LOGIT_SCALE_DIV},
    /* dots.llm1: its converter always writes expert_weights_norm (without it llama.cpp does
     * not renormalize) but never expert_gating_func: the router is always a sigmoid. */
    {.name = "dots1",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_dots1,
     .n_tensors = N(k_dots1),
     .moe_raw_w = true,
     .moe_sigmoid = true},
    /* ERNIE 4.5 MoE (GGUF "ernie4_5-moe"): ernie4_5's unpermuted interleaved RoPE; softmax
     * gating, renormalized (llama.cpp's graph always does). */
    {.name = "ernie4_5-moe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NORMAL,
     .tensors = k_ernie4_5_moe,
     .n_tensors = N(k_ernie4_5_moe)},
    /* GLM-4.5 / 4.5-Air: RoPE (NeoX) on rope.dimension_count of each head's dims; sigmoid
     * gating is llama.cpp's default for it (and what its converter writes). */
    {.name = "glm4moe",
     .norm = TS_NORM_RMS,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_glm4moe,
     .n_tensors = N(k_glm4moe),
     .moe_raw_w = true,
     .moe_sigmoid = true},
    {.name = "bert",
     .norm = TS_NORM_LAYER,
     .ffn = TS_FFN_GELU_ERF,
     .pos = TS_POS_LEARNED,
     .tensors = k_bert,
     .n_tensors = N(k_bert)},
    {.name = "nomic-bert",
     .norm = TS_NORM_LAYER,
     .ffn = TS_FFN_SWIGLU,
     .pos = TS_POS_ROPE_NEOX,
     .tensors = k_nomic_bert,
     .n_tensors = N(k_nomic_bert)},
};

const ts_encoder_desc *ts_arch_encoder(const char *name) {
    for (size_t i = 0; name != NULL && i < N(k_encoders); i++) {
        if (strcmp(k_encoders[i].name, name) == 0) {
            return &k_encoders[i];
        }
    }
    return NULL;
}

const ts_arch_desc *ts_arch_find(const char *name) {
    if (name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < N(k_archs); i++) {
        if (strcmp(k_archs[i].name, name) == 0) {
            return &k_archs[i];
        }
    }
    return NULL;
}

const char *ts_arch_supported_list(void) {
    return "llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2, granite, smollm3, olmo2, exaone4, "
           "ernie4_5, cohere2, bert, qwen3moe, qwen2moe, gpt-oss, nomic-bert, olmoe, granitemoe, "
           "dots1, glm4moe, ernie4_5-moe";
}
