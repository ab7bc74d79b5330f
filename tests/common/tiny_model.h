/*
 * tiny_model.h — writes small random-weight GGUF models for tests.
 *
 * For each architecture tessera supports (llama, qwen2, qwen3, phi3, gemma2, gemma3, gpt2,
 * granite, smollm3, olmo2, exaone4, cohere2, ernie4_5, and the mixture-of-experts families
 * qwen3moe, qwen2moe, mixtral (a llama with experts whose GGUF says "llama"), olmoe,
 * granitemoe, here with GraniteMoeShared's ungated shared expert, dots1, a dense first
 * layer and then experts chosen with a selection bias, and glm4moe, the same with q/k/v
 * biases and RoPE on half of each head) the
 * writer knows, independently of src/model/arch.c, which tensors a GGUF of that family holds
 * and with which shapes (the llama.cpp naming and layout conventions), and writes the
 * hyperparameter keys src/model/hparams.c reads. So a test that loads these files checks the
 * registry tables against a second statement of the same facts.
 *
 * Weights come from a deterministic PRNG (splitmix64) seeded by the spec's seed and the tensor
 * name, so omitting or retyping one tensor leaves every other tensor's values unchanged.
 * Matrices have entries uniform in [-a, a] with a = sqrt(3 / fan_in) (unit-variance outputs),
 * norm weights are 1 + small noise, biases are small. An expert router (ffn_gate_inp) has
 * entries 4x larger, so that the experts' scores are well apart (a near tie would let the
 * rounding of a quantized run pick another expert), and stays F32 as llama.cpp's quantizer
 * leaves it. Matrices and token_embd are stored in
 * spec.wtype (F32, F16, BF16 or any type the quant layer can quantize, e.g. Q8_0, Q4_0, Q4_1);
 * vectors are F32 unless spec.vec_type says otherwise.
 *
 * The vocabulary is a SentencePiece ("llama") one: <unk>, <s>, </s>, the 256 byte tokens
 * <0x00>..<0xFF>, "▁", letters, digits, punctuation and a few words, padded with pseudo-words
 * up to spec.n_vocab tokens (at least TS_TINY_MIN_VOCAB). bos = 1, eos = 2 (an end-of-generation
 * token), add_bos_token = true unless spec.no_add_bos.
 *
 * Fault injection (for loader error tests): `omit` leaves one tensor out, `reshape` writes one
 * tensor with one extra row (or element, for vectors), `retype` stores one tensor as
 * `retype_to`, `arch_name` overrides general.architecture, `omit_key` leaves one metadata key
 * out (its suffix after "<arch>."), `extra` adds tensors.
 *
 * Not thread-safe only in the sense that a spec must not change while it is being written.
 */
#ifndef TS_TESTS_TINY_MODEL_H
#define TS_TESTS_TINY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"
#include "tessera.h"

#define TS_TINY_MIN_VOCAB 320
#define TS_TINY_BOS       1
#define TS_TINY_EOS       2

typedef struct ts_tiny_spec {
    const char *arch;      /* layout family: one of ts_tiny_archs */
    const char *arch_name; /* general.architecture written (NULL: arch) */
    uint64_t seed;
    ts_type wtype;    /* matrices and token_embd */
    ts_type vec_type; /* norm weights and biases: F32 (default), F16 or BF16 */
    int64_t n_vocab;  /* rows of token_embd = tokenizer size (>= TS_TINY_MIN_VOCAB) */
    int64_t n_ctx_train;
    int64_t n_embd;
    int64_t n_ff;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;    /* 0: n_embd / n_head (no key_length key); else written explicitly */
    int64_t n_swa;       /* attention.sliding_window (0: not written; gemma2/gemma3/cohere2/
                            gpt-oss write one by default) */
    float attn_softcap;  /* gemma2 attn_logit_softcapping (0: not written) */
    float final_softcap; /* gemma2 final_logit_softcapping (0: not written) */
    float rope_base;
    float norm_eps;
    bool tied_output;    /* leave out output.weight (where the family allows it) */
    bool qkv_bias;       /* llama/qwen3/gemma: also write the optional Q/K/V biases */
    float logit_scale;   /* multiplies the output matrix (1: unit-variance logits) */
    int64_t swa_pattern; /* attention.sliding_window_pattern (0: key not written) */
    uint32_t pooling;    /* encoders: <arch>.pooling_type written (bert default: 1, mean) */
    bool no_add_bos;     /* write add_bos_token = false (tokenizing adds no BOS, as SmolLM2's) */
    const char *chat_template; /* tokenizer.chat_template written (NULL: none) */
    /* Fault injection (NULL: none). */
    const char *omit;
    const char *reshape;
    const char *retype;
    ts_type retype_to;
    const char *omit_key;
    /* Extra F32 vectors of extra_ne0 entries in [1, 4) (entry 0 = extra_first when nonzero),
     * written after the family's tensors: RoPE factors, or a tensor no family uses. */
    const char *extra[3];
    int64_t extra_ne0;
    float extra_first;
    /* Mixture of experts (qwen3moe, qwen2moe, mixtral, olmoe, granitemoe, dots1, glm4moe;
     * ignored by the dense families). */
    int64_t n_expert;      /* experts per layer */
    int64_t n_expert_used; /* experts per token */
    int64_t n_ff_exp;      /* hidden units of an expert (expert_feed_forward_length) */
    int64_t n_ff_shexp;    /* qwen2moe, granitemoe, dots1, glm4moe: units of the shared expert */
    int moe_gating;        /* expert_gating_func written (1 softmax, 2 sigmoid); 0: key absent */
    int moe_norm;          /* expert_weights_norm: 1 true, 2 false; 0: key absent */
    float moe_w_scale;     /* expert_weights_scale; 0: key absent */
    int64_t n_rot;         /* rope.dimension_count written (0: not written, all of head_dim) */
    /* glm4moe: trailing multi-token-prediction blocks (nextn_predict_layers): block_count is
     * n_layer + n_nextn, each extra block an expert layer plus its nextn.* tensors. */
    int64_t n_nextn;
} ts_tiny_spec;

/* The supported families, NULL-terminated. */
extern const char *const ts_tiny_archs[];
/* The encoder families (embeddings only; not in ts_tiny_archs), NULL-terminated. */
extern const char *const ts_tiny_encoders[];

/* A small default model of the family: n_embd 64, n_ff 128, 2 layers, 4 heads (2 KV heads),
 * context 256, vocabulary TS_TINY_MIN_VOCAB, F32 weights, family-typical extras (Gemma 2
 * softcapping and sliding window 8, Gemma 3 key_length 32 and sliding window 8, Qwen 2 biases,
 * Gemma tied output; SmolLM3 has 4 layers, so that one is a NoPE layer; Cohere 2 a sliding
 * window of 8 and pattern 2 (a window layer, then a global NoPE one); Granite's multipliers
 * and Cohere's logit scale are away from 1; ERNIE 4.5 key_length 32, tied;
 * the MoE families 6 experts, 2 per token, 64 units each, Qwen2-MoE a
 * shared expert of 96 and Q/K/V biases, Qwen3-MoE key_length 32 and Q/K norms). */
ts_tiny_spec ts_tiny_spec_default(const char *arch);

/* Writes the model to path. Errors (unknown family, bad sizes, writer failures) come back
 * with a message. */
ts_status ts_tiny_write(const ts_tiny_spec *spec, const char *path, ts_error *err);

/* A fresh path in $TMPDIR (or /tmp) for a test file, unique per process and call, ending in
 * "<tag>_XXXXXX.gguf" (created empty, so no other process takes it). Returns buf, or NULL
 * when the file cannot be made. */
const char *ts_tiny_temp_path(char *buf, size_t size, const char *tag);

#endif /* TS_TESTS_TINY_MODEL_H */
