/* arch.c — the registry tables of supported architectures (see arch.h). */
#include "model/arch.h"

#include <string.h>

/* Shorthands: R = required, O = optional (probed); shapes in symbolic dims. */
#define T(name_, role_, req_, d0_, d1_)                                                            \
    {                                                                                              \
        name_, role_, req_, {                                                                      \
            d0_, d1_, TS_DIM_NONE                                                                  \
        }                                                                                          \
    }
#define T3(name_, role_, req_, d0_, d1_, d2_)                                                      \
    {                                                                                              \
        name_, role_, req_, {                                                                      \
            d0_, d1_, d2_                                                                          \
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

#define GATED_FFN                                                                                 \
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),                         \
        T("blk.{L}.ffn_gate.weight", TS_ROLE_FFN_GATE, R, TS_DIM_EMBD, TS_DIM_FF),                \
        T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_UP, R, TS_DIM_EMBD, TS_DIM_FF),                    \
        T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, R, TS_DIM_FF, TS_DIM_EMBD)

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
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_gate.weight", TS_ROLE_FFN_GATE, O, TS_DIM_EMBD, TS_DIM_FF),
    T("blk.{L}.ffn_up.weight", TS_ROLE_FFN_UP, O, TS_DIM_EMBD, TS_DIM_FF),
    T("blk.{L}.ffn_down.weight", TS_ROLE_FFN_DOWN, O, TS_DIM_FF, TS_DIM_EMBD),
    MOE_FFN(O),
};

/* Qwen3-MoE: Qwen3 attention (per-head Q/K norms), every layer's FFN a mixture of experts. */
static const ts_tensor_pattern k_qwen3moe[] = {
    GLOBAL_TENSORS(O),
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
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(R),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.ffn_norm.weight", TS_ROLE_FFN_NORM, R, TS_DIM_EMBD, NONE),
    MOE_FFN(R),
    T("blk.{L}.ffn_gate_inp_shexp.weight", TS_ROLE_FFN_GATE_INP_SHEXP, O, TS_DIM_EMBD, NONE),
    T("blk.{L}.ffn_gate_shexp.weight", TS_ROLE_FFN_GATE_SHEXP, R, TS_DIM_EMBD, TS_DIM_FF_SHEXP),
    T("blk.{L}.ffn_up_shexp.weight", TS_ROLE_FFN_UP_SHEXP, R, TS_DIM_EMBD, TS_DIM_FF_SHEXP),
    T("blk.{L}.ffn_down_shexp.weight", TS_ROLE_FFN_DOWN_SHEXP, R, TS_DIM_FF_SHEXP, TS_DIM_EMBD),
};

static const ts_tensor_pattern k_qwen2[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(R),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    GATED_FFN,
};

static const ts_tensor_pattern k_qwen3[] = {
    GLOBAL_TENSORS(O),
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_q_norm.weight", TS_ROLE_ATTN_Q_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_k_norm.weight", TS_ROLE_ATTN_K_NORM, R, TS_DIM_HEAD, NONE),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    GATED_FFN,
};

/* Phi-3 fuses Q, K and V into one projection and gate and up into one [n_embd, 2*n_ff]
 * matrix whose first half is the gate. */
static const ts_tensor_pattern k_phi3[] = {
    GLOBAL_TENSORS(R),
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

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const ts_arch_desc k_archs[] = {
    {"llama", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NORMAL, false, 0, 0.0f, k_llama, N(k_llama)},
    {"qwen2", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NEOX, false, 0, 0.0f, k_qwen2, N(k_qwen2)},
    {"qwen3", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NEOX, false, 0, 0.0f, k_qwen3, N(k_qwen3)},
    {"phi3", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NEOX, false, 0, 0.0f, k_phi3, N(k_phi3)},
    {"gemma2", TS_NORM_RMS, TS_FFN_GEGLU_TANH, TS_POS_ROPE_NEOX, true, 2, 0.0f, k_gemma2,
     N(k_gemma2)},
    {"gemma3", TS_NORM_RMS, TS_FFN_GEGLU_TANH, TS_POS_ROPE_NEOX, true, 6, 10000.0f, k_gemma3,
     N(k_gemma3)},
    {"gpt2", TS_NORM_LAYER, TS_FFN_GELU, TS_POS_LEARNED, false, 0, 0.0f, k_gpt2, N(k_gpt2)},
    {"qwen3moe", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NEOX, false, 0, 0.0f, k_qwen3moe,
     N(k_qwen3moe)},
    {"qwen2moe", TS_NORM_RMS, TS_FFN_SWIGLU, TS_POS_ROPE_NEOX, false, 0, 0.0f, k_qwen2moe,
     N(k_qwen2moe)},
};

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
    return "llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2, qwen3moe, qwen2moe";
}
