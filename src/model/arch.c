/* arch.c — the registry tables of supported architectures (see arch.h). */
#include "model/arch.h"

#include <string.h>

/* Shorthands: R = required, O = optional (probed); shapes in symbolic dims. */
#define T(name_, role_, req_, d0_, d1_) {name_, role_, req_, {d0_, d1_}}
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

/* llama.cpp's converter writes Llama 3.1's scaling as one global tensor. */
#define ROPE_FREQS T("rope_freqs.weight", TS_ROLE_ROPE_FREQS, O, TS_DIM_ROT_HALF, NONE)

static const ts_tensor_pattern k_llama[] = {
    GLOBAL_TENSORS(O),
    ROPE_FREQS,
    T("blk.{L}.attn_norm.weight", TS_ROLE_ATTN_NORM, R, TS_DIM_EMBD, NONE),
    SEPARATE_QKV(O),
    T("blk.{L}.attn_output.weight", TS_ROLE_ATTN_OUT, R, TS_DIM_Q, TS_DIM_EMBD),
    T("blk.{L}.attn_output.bias", TS_ROLE_ATTN_OUT_B, O, TS_DIM_EMBD, NONE),
    GATED_FFN,
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

/* Phi-3 fuses Q, K and V into one projection and gate and up into one [n_embd, 2*n_ff]
 * matrix whose first half is the gate. Long-context Phi-3 files carry LongRoPE's two sets of
 * per-pair divisors. */
static const ts_tensor_pattern k_phi3[] = {
    GLOBAL_TENSORS(R),
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
    return "llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2";
}
