"""Tiny random-weight model definitions and the HF -> GGUF tensor mapping for each arch.

Used by gen_tiny.py (writes weights + logits) and check_tiny_gguf.py (round-trips the
mapping through a GGUF file that transformers loads back). The mapping below is what
docs/reference.md documents; it follows the naming and layout conventions of GGUF files
as llama.cpp's converter produces them.
"""
import math
import re

SEED = 20240601
TOKENS = [1, 17, 42, 99, 3, 200, 255, 128, 64, 7, 150, 33]

_COMMON = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)

# arch -> (transformers config class, model class, config kwargs, GGUF arch name)
ARCHS = {
    "llama": (
        "LlamaConfig", "LlamaForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "llama",
    ),
    # llama with every bias (attention_bias: q/k/v/o; mlp_bias: gate/up/down), as the
    # converter writes them.
    "llama_bias": (
        "LlamaConfig", "LlamaForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=True,
             mlp_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "llama",
    ),
    "qwen2": (
        "Qwen2Config", "Qwen2ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-6, tie_word_embeddings=True,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen2",
    ),
    "qwen3": (
        "Qwen3Config", "Qwen3ForCausalLM",
        dict(_COMMON, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=True,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen3",
    ),
    "phi3": (
        "Phi3Config", "Phi3ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False,
             original_max_position_embeddings=128, sliding_window=None,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "phi3",
    ),
    "gemma2": (
        "Gemma2Config", "Gemma2ForCausalLM",
        dict(_COMMON, head_dim=16, query_pre_attn_scalar=16, rms_norm_eps=1e-6,
             hidden_activation="gelu_pytorch_tanh", sliding_window=4,
             layer_types=["sliding_attention", "full_attention"],
             attn_logit_softcapping=2.0, final_logit_softcapping=5.0,
             tie_word_embeddings=True,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "gemma2",
    ),
    "gemma3": (
        "Gemma3TextConfig", "Gemma3ForCausalLM",
        dict(_COMMON, head_dim=16, query_pre_attn_scalar=16, rms_norm_eps=1e-6,
             hidden_activation="gelu_pytorch_tanh", sliding_window=4,
             layer_types=["sliding_attention", "full_attention"],
             attn_logit_softcapping=None, final_logit_softcapping=None,
             tie_word_embeddings=True,
             rope_parameters={
                 "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
             }),
        "gemma3",
    ),
    # Granite: muP multipliers all != 1 so that each one matters.
    "granite": (
        "GraniteConfig", "GraniteForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-6, tie_word_embeddings=True,
             embedding_multiplier=2.5, residual_multiplier=0.6, attention_multiplier=0.2,
             logits_scaling=2.0,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "granite",
    ),
    # SmolLM3: 4 layers, the 4th without RoPE (no_rope_layer_interval 4).
    "smollm3": (
        "SmolLM3Config", "SmolLM3ForCausalLM",
        dict(_COMMON, num_hidden_layers=4, rms_norm_eps=1e-6, tie_word_embeddings=True,
             no_rope_layer_interval=4, use_sliding_window=False,
             rope_parameters={"rope_type": "default", "rope_theta": 50000.0}),
        "smollm3",
    ),
    # OLMo 2: post-norms, Q/K norms over the whole projection.
    "olmo2": (
        "Olmo2Config", "Olmo2ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-6, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        "olmo2",
    ),
    # EXAONE 4 without sliding windows (the 1.2B's shape): post-norms, per-head Q/K norms.
    "exaone4": (
        "Exaone4Config", "Exaone4ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
             layer_types=["full_attention", "full_attention"],
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "exaone4",
    ),
    # EXAONE 4 32B's layout on 4 layers: three sliding-window layers (window 4, RoPE) then one
    # global layer without RoPE; the converter writes the per-layer pattern as a bool array.
    "exaone4_swa": (
        "Exaone4Config", "Exaone4ForCausalLM",
        dict(_COMMON, num_hidden_layers=4, rms_norm_eps=1e-5, tie_word_embeddings=False,
             sliding_window=4,
             layer_types=["sliding_attention"] * 3 + ["full_attention"],
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "exaone4",
    ),
    # OLMo 3 (GGUF arch olmo2): OLMo 2's blocks, 4 layers, window 4 on all but every 4th layer,
    # RoPE everywhere; the converter writes the per-layer pattern as a bool array.
    "olmo3": (
        "Olmo3Config", "Olmo3ForCausalLM",
        dict(_COMMON, num_hidden_layers=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
             sliding_window=4,
             layer_types=["sliding_attention"] * 3 + ["full_attention"],
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        "olmo2",
    ),
    # OLMo 3 with YaRN on its global layer only (transformers' per-layer-type rope_parameters;
    # the window layers keep plain RoPE): factor 4 over an original context of 32.
    "olmo3_yarn": (
        "Olmo3Config", "Olmo3ForCausalLM",
        dict(_COMMON, num_hidden_layers=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
             sliding_window=4,
             layer_types=["sliding_attention"] * 3 + ["full_attention"],
             rope_parameters={
                 "full_attention": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                    "original_max_position_embeddings": 32},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        "olmo2",
    ),
    # Cohere 2: 4 layers so the default pattern gives 3 window layers (RoPE) and 1 global
    # layer (NoPE); window 4 < 12 tokens.
    "cohere2": (
        "Cohere2Config", "Cohere2ForCausalLM",
        dict(_COMMON, num_hidden_layers=4, layer_norm_eps=1e-5, tie_word_embeddings=True,
             sliding_window=4, logit_scale=0.25,
             rope_parameters={"rope_type": "default", "rope_theta": 50000.0}),
        "cohere2",
    ),
    # ERNIE 4.5 (dense): llama blocks, head_dim 16 (4*16 != 32), RoPE on interleaved pairs in
    # HF already (GGUF "normal" mode, no permutation).
    "ernie4_5": (
        "Ernie4_5Config", "Ernie4_5ForCausalLM",
        dict(_COMMON, head_dim=16, rms_norm_eps=1e-5, tie_word_embeddings=True, use_bias=False,
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        "ernie4_5",
    ),
    # RoPE scaling variants (GGUF arch in the last field). Llama 3.1's scaling with an original
    # context of 100: with head_dim 8 and theta 1e4 the pair wavelengths 6.3, 63, 628 and 6283
    # fall in all three bands (kept, smoothed, divided by the factor). The converter writes it
    # as the rope_freqs.weight tensor (extra_tensors).
    "llama3_rope": (
        "LlamaConfig", "LlamaForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False,
             rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 100}),
        "llama",
    ),
    # YaRN, factor 4 over an original context of 256 (max 1024): with head_dim 16 and theta
    # 1e4 the ramp runs over pairs 0..4, so pair 0 keeps its angle, pairs 1-3 mix and 4-7 are
    # interpolated; cos and sin are scaled by 0.1 ln(4) + 1.
    "qwen3_yarn": (
        "Qwen3Config", "Qwen3ForCausalLM",
        dict(_COMMON, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=True,
             max_position_embeddings=1024,
             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                              "original_max_position_embeddings": 256}),
        "qwen3",
    ),
    # YaRN with every parameter given: attention_factor 1.25 (not 0.1 ln 4 + 1), beta_fast 16,
    # beta_slow 2 over an original context of 1024: with head_dim 8 and theta 1e4 the ramp runs
    # over pairs 1..2 (the defaults 32 / 1 would make it 0..3), so pairs 0-1 keep their angle
    # and pairs 2-3 are interpolated.
    "qwen2_yarn": (
        "Qwen2Config", "Qwen2ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-6, tie_word_embeddings=True,
             max_position_embeddings=4096,
             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                              "original_max_position_embeddings": 1024,
                              "attention_factor": 1.25, "beta_fast": 16.0, "beta_slow": 2.0}),
        "qwen2",
    ),
    # Phi-3 LongRoPE with an original context of 8: the 12 tokens exceed it, so transformers
    # uses the long factors (it picks by sequence length); tessera picks them because the
    # context (16 in test_tiny_hf.c) exceeds it. cos and sin are scaled by
    # sqrt(1 + ln(128 / 8) / ln(8)).
    "phi3_longrope": (
        "Phi3Config", "Phi3ForCausalLM",
        dict(_COMMON, rms_norm_eps=1e-5, tie_word_embeddings=False,
             original_max_position_embeddings=8, sliding_window=None,
             rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                              "short_factor": [1.0, 1.25, 1.5, 2.0],
                              "long_factor": [1.0, 3.0, 9.0, 24.0]}),
        "phi3",
    ),
    # Mixtral: GGUF files call it "llama" (a llama whose layers hold experts).
    "mixtral": (
        "MixtralConfig", "MixtralForCausalLM",
        dict(_COMMON, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
             rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "llama",
    ),
    "qwen3moe": (
        "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
        dict(_COMMON, head_dim=16, moe_intermediate_size=32, num_experts=4,
             num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
             mlp_only_layers=[], rms_norm_eps=1e-6, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen3moe",
    ),
    "qwen2moe": (
        "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
        dict(_COMMON, moe_intermediate_size=32, shared_expert_intermediate_size=48,
             num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1,
             mlp_only_layers=[], rms_norm_eps=1e-6, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen2moe",
    ),
    # gpt-oss: attention with biases and sinks, layer 0 a sliding window of 4, layer 1 full;
    # experts with biases and the clamped SwiGLU (gen_tiny.py scales gate_up so that the clamp
    # at 7 acts, and the sinks so that they matter); YaRN with truncate (llama.cpp's ramp is
    # always floored/ceiled; the real config says truncate false, see docs/architecture.md).
    "gpt_oss": (
        "GptOssConfig", "GptOssForCausalLM",
        dict(_COMMON, head_dim=16, intermediate_size=32, num_local_experts=4,
             num_experts_per_tok=2, sliding_window=4,
             layer_types=["sliding_attention", "full_attention"], rms_norm_eps=1e-5,
             tie_word_embeddings=False, attention_bias=True,
             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                              "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True,
                              "original_max_position_embeddings": 32}),
        "gpt-oss",
    ),
    # OLMoE: pre-norm blocks, Q/K norms over the whole projection (k_norm over the KV heads with
    # GQA), softmax top-k without renormalisation (norm_topk_prob False as OLMoE-1B-7B; the
    # converter writes no expert_feed_forward_length: the experts have feed_forward_length
    # units).
    "olmoe": (
        "OlmoeConfig", "OlmoeForCausalLM",
        dict(_COMMON, intermediate_size=32, num_experts=4, num_experts_per_tok=2,
             norm_topk_prob=False, clip_qkv=None, rms_norm_eps=1e-5, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "olmoe",
    ),
    # Granite MoE: granite's muP multipliers (all != 1) and experts weighted by a softmax over
    # the chosen experts' router logits.
    "granitemoe": (
        "GraniteMoeConfig", "GraniteMoeForCausalLM",
        dict(_COMMON, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
             rms_norm_eps=1e-6, tie_word_embeddings=True,
             embedding_multiplier=2.5, residual_multiplier=0.6, attention_multiplier=0.2,
             logits_scaling=2.0,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "granitemoe",
    ),
    # GraniteMoeShared: the same plus a shared expert added ungated; GGUF "granitemoe".
    "granitemoeshared": (
        "GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM",
        dict(_COMMON, intermediate_size=32, shared_intermediate_size=48, num_local_experts=4,
             num_experts_per_tok=2, rms_norm_eps=1e-6, tie_word_embeddings=False,
             embedding_multiplier=2.5, residual_multiplier=0.6, attention_multiplier=0.2,
             logits_scaling=2.0,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "granitemoe",
    ),
    # dots.llm1: Qwen3 attention (per-head Q/K norms); layer 0 dense (first_k_dense_replace 1),
    # layers 1-2 six experts of 16 units chosen by sigmoid(logits) + e_score_correction_bias
    # (a buffer, which gen_tiny.py redraws and stores like a parameter), weighted by the
    # unbiased sigmoid renormalized (norm_topk_prob) times routed_scaling_factor 2.5, plus two
    # shared experts (one MLP of 2 * 16 units) added ungated.
    "dots1": (
        "Dots1Config", "Dots1ForCausalLM",
        dict(_COMMON, num_hidden_layers=3, moe_intermediate_size=16, n_routed_experts=6,
             num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1, n_group=1,
             topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, sliding_window=None,
             rms_norm_eps=1e-6, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        "dots1",
    ),
    # GLM-4.5 (glm4moe): q/k/v biases, per-head Q/K norms (use_qk_norm), RoPE (NeoX) on the
    # first half of each head (partial_rotary_factor 0.5, head_dim 16); dots1's router (sigmoid
    # + selection bias, renormalized, times routed_scaling_factor 1.5) and shared expert; layer 0
    # dense. No MTP layer (num_mtp_layers 0: the converter then writes nextn_predict_layers 0).
    "glm4moe": (
        "Glm4MoeConfig", "Glm4MoeForCausalLM",
        dict(_COMMON, num_hidden_layers=3, head_dim=16, moe_intermediate_size=16,
             n_routed_experts=6, num_experts_per_tok=2, n_shared_experts=1,
             first_k_dense_replace=1, n_group=1, topk_group=1, norm_topk_prob=True,
             routed_scaling_factor=1.5, use_qk_norm=True, attention_bias=True,
             num_mtp_layers=0, rms_norm_eps=1e-5, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                              "partial_rotary_factor": 0.5}),
        "glm4moe",
    ),
    # ERNIE 4.5 MoE: ernie4_5's attention (head_dim 16, interleaved RoPE, unpermuted); layer 0
    # dense, layers 1-2 six experts of 16 units, top-2 by softmax + moe_statics'
    # e_score_correction_bias (a [1, n_expert] parameter, drawn 0.1*N like a bias), weighted by
    # the unbiased probabilities renormalized, plus 2 shared experts (one MLP of 32 units; the
    # converter writes its width as intermediate_size / num_key_value_heads, 64 / 2).
    "ernie4_5_moe": (
        "Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM",
        dict(_COMMON, num_hidden_layers=3, head_dim=16, moe_num_experts=6, moe_k=2,
             moe_intermediate_size=16, moe_num_shared_experts=2, moe_layer_start_index=1,
             moe_layer_end_index=2, moe_layer_interval=1, use_bias=False, rms_norm_eps=1e-5,
             tie_word_embeddings=True,
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        "ernie4_5-moe",
    ),
    "gpt2": (
        "GPT2Config", "GPT2LMHeadModel",
        dict(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=None,
             activation_function="gelu_new", layer_norm_epsilon=1e-5,
             bos_token_id=1, eos_token_id=2, tie_word_embeddings=True),
        "gpt2",
    ),
    # Encoders: gen_tiny writes <arch>.embd.json (hidden states and pooled vectors) instead of
    # logits (see ENCODERS).
    "bert": (
        "BertConfig", "BertModel",
        dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=64, type_vocab_size=2,
             layer_norm_eps=1e-12, hidden_act="gelu", pad_token_id=0),
        "bert",
    ),
    # nomic-embed-text v1.5's layout: RoPE (base 1000), no position table, bias-free SwiGLU.
    "nomic_bert": (
        "NomicBertConfig", "NomicBertModel",
        dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=64, type_vocab_size=2,
             layer_norm_eps=1e-12, hidden_act="silu", pad_token_id=0,
             rope_parameters={"rope_type": "default", "rope_theta": 1000.0}),
        "nomic-bert",
    ),
}

# Encoder archs -> the pooling their GGUF metadata names (pooling_type: 1 mean, 2 cls).
ENCODERS = {"bert": 1, "nomic_bert": 1}
# A second input of the encoder's batch, so that the reference covers two sequences of
# different lengths attending only within themselves.
TOKENS_B = [5, 77, 19, 240, 8, 61, 130]

# Per-block HF suffix -> GGUF suffix. Block prefix: "model.layers.{i}." / "transformer.h.{i}."
# -> "blk.{i}.". Gemma 2/3 differ from llama in the two norms around the MLP.
_LLAMA_BLOCK = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.o_proj.bias": "attn_output.bias",
    "mlp.gate_proj.bias": "ffn_gate.bias",
    "mlp.up_proj.bias": "ffn_up.bias",
    "mlp.down_proj.bias": "ffn_down.bias",
}
# Mixture of experts (transformers 5 stores experts as 3-D parameters; gate_up_proj is split).
_MOE_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "mlp.gate.weight": "ffn_gate_inp.weight",
        "mlp.experts.gate_up_proj": "ffn_gate_exps.weight",  # and ffn_up_exps: gguf_entries
        "mlp.experts.down_proj": "ffn_down_exps.weight",
        "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
        "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
        "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
        "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    },
)
# gpt-oss: HF's experts are x @ W ([n_expert, in, out]) with gate and up interleaved along
# the last dim of gate_up_proj (gate at even, up at odd columns): gguf_entries de-interleaves.
_GPT_OSS_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "self_attn.o_proj.bias": "attn_output.bias",
        "self_attn.sinks": "attn_sinks.weight",
        "mlp.router.weight": "ffn_gate_inp.weight",
        "mlp.router.bias": "ffn_gate_inp.bias",
        "mlp.experts.gate_up_proj": "ffn_gate_exps.weight",  # and ffn_up_exps: gguf_entries
        "mlp.experts.gate_up_proj_bias": "ffn_gate_exps.bias",  # and ffn_up_exps.bias
        "mlp.experts.down_proj": "ffn_down_exps.weight",
        "mlp.experts.down_proj_bias": "ffn_down_exps.bias",
    },
)
# Granite MoE: a router, 3-D experts (gate_up_proj split as above) and the shared expert's
# fused input_linear [2 * n_ff_shexp, n_embd] (gate rows first), split the same way.
_GRANITEMOE_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "block_sparse_moe.router.weight": "ffn_gate_inp.weight",
        "block_sparse_moe.experts.gate_up_proj": "ffn_gate_exps.weight",
        "block_sparse_moe.experts.down_proj": "ffn_down_exps.weight",
        "shared_mlp.input_linear.weight": "ffn_gate_shexp.weight",  # and ffn_up_shexp
        "shared_mlp.output_linear.weight": "ffn_down_shexp.weight",
    },
)
# dots.llm1 and GLM-4.5 (DeepSeek-V3's router): the selection bias buffer and the shared
# experts' MLP. GLM-4.5's GGUF calls the norm before the MLP post_attention_norm.
_DOTS1_BLOCK = dict(
    _MOE_BLOCK,
    **{
        "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
        "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
        "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
        "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
    },
)
_ERNIE_MOE_BLOCK = dict(
    _DOTS1_BLOCK, **{"mlp.gate.moe_statics.e_score_correction_bias": "exp_probs_b.bias"}
)
_GLM4MOE_BLOCK = dict(
    _DOTS1_BLOCK, **{"post_attention_layernorm.weight": "post_attention_norm.weight"}
)
_GEMMA_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    },
)
_POSTNORM_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    },
)
_GPT2_BLOCK = {
    "ln_1.weight": "attn_norm.weight",
    "ln_1.bias": "attn_norm.bias",
    "attn.c_attn.weight": "attn_qkv.weight",
    "attn.c_attn.bias": "attn_qkv.bias",
    "attn.c_proj.weight": "attn_output.weight",
    "attn.c_proj.bias": "attn_output.bias",
    "ln_2.weight": "ffn_norm.weight",
    "ln_2.bias": "ffn_norm.bias",
    "mlp.c_fc.weight": "ffn_up.weight",
    "mlp.c_fc.bias": "ffn_up.bias",
    "mlp.c_proj.weight": "ffn_down.weight",
    "mlp.c_proj.bias": "ffn_down.bias",
}
_TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "transformer.wte.weight": "token_embd.weight",
    "transformer.wpe.weight": "position_embd.weight",
    "transformer.ln_f.weight": "output_norm.weight",
    "transformer.ln_f.bias": "output_norm.bias",
}
_BERT_TOP = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
_BERT_BLOCK = {
    "attention.self.query.weight": "attn_q.weight",
    "attention.self.query.bias": "attn_q.bias",
    "attention.self.key.weight": "attn_k.weight",
    "attention.self.key.bias": "attn_k.bias",
    "attention.self.value.weight": "attn_v.weight",
    "attention.self.value.bias": "attn_v.bias",
    "attention.output.dense.weight": "attn_output.weight",
    "attention.output.dense.bias": "attn_output.bias",
    "attention.output.LayerNorm.weight": "attn_output_norm.weight",
    "attention.output.LayerNorm.bias": "attn_output_norm.bias",
    "intermediate.dense.weight": "ffn_up.weight",
    "intermediate.dense.bias": "ffn_up.bias",
    "output.dense.weight": "ffn_down.weight",
    "output.dense.bias": "ffn_down.bias",
    "output.LayerNorm.weight": "layer_output_norm.weight",
    "output.LayerNorm.bias": "layer_output_norm.bias",
}
# transformers' NomicBertModel (its conversion mapping renames the original checkpoint's
# Wqkv, fc11 (up), fc12 (gate), fc2, norm1, norm2, emb_ln; llama.cpp's converter reads those
# and writes Wqkv fused as attn_qkv, which the fuse_qkv transform rebuilds from q/k/v).
_NOMIC_BLOCK = {
    "self_attn.q_proj.weight": "attn_qkv.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "attn_output_norm.weight",
    "post_attention_layernorm.bias": "attn_output_norm.bias",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "post_mlp_layernorm.weight": "layer_output_norm.weight",
    "post_mlp_layernorm.bias": "layer_output_norm.bias",
}
_BLOCK_RE = re.compile(r"^(?:model\.layers|transformer\.h|encoder\.layer|layers)\.(\d+)\.(.+)$")


def _gguf_arch(arch):
    """The GGUF architecture of an ARCHS entry (variants such as "llama3_rope" map to theirs)."""
    return ARCHS[arch][3] if arch in ARCHS else arch


def gguf_name(arch, hf_name):
    """GGUF tensor name for an HF parameter name (KeyError when the arch has no such tensor)."""
    arch = _gguf_arch(arch)
    if hf_name in _TOP:
        return _TOP[hf_name]
    if arch in ("bert", "nomic-bert") and hf_name in _BERT_TOP:
        return _BERT_TOP[hf_name]
    m = _BLOCK_RE.match(hf_name)
    if not m:
        raise KeyError(hf_name)
    table = {"gpt2": _GPT2_BLOCK, "gemma2": _GEMMA_BLOCK, "gemma3": _GEMMA_BLOCK,
             "olmo2": _POSTNORM_BLOCK, "exaone4": _POSTNORM_BLOCK,
             "bert": _BERT_BLOCK, "nomic-bert": _NOMIC_BLOCK,
             "llama": _MOE_BLOCK, "qwen3moe": _MOE_BLOCK, "qwen2moe": _MOE_BLOCK,
             "gpt-oss": _GPT_OSS_BLOCK,
             "olmoe": _MOE_BLOCK, "granitemoe": _GRANITEMOE_BLOCK, "dots1": _DOTS1_BLOCK,
             "glm4moe": _GLM4MOE_BLOCK, "ernie4_5-moe": _ERNIE_MOE_BLOCK}
    return f"blk.{m.group(1)}." + table.get(arch, _LLAMA_BLOCK)[m.group(2)]


def gguf_entries(arch, hf_name):
    """[(GGUF name, transform)] of an HF parameter: one entry, or two for a fused 3-D expert
    gate_up_proj [n_expert, 2 * n_ff, n_embd], whose first half of each expert's rows is the
    gate ("half0") and second the up projection ("half1"), or a fused 2-D shared expert
    input_linear [2 * n_ff, n_embd] (Granite), split the same way; none for the k_proj / v_proj of
    nomic-bert, which the q_proj's fused attn_qkv entry ("fuse_qkv") holds."""
    if _gguf_arch(arch) == "nomic-bert" and re.search(r"self_attn\.[kv]_proj\.weight$", hf_name):
        return []
    name = gguf_name(arch, hf_name)
    if _gguf_arch(arch) == "gpt-oss" and hf_name.endswith("mlp.experts.gate_up_proj"):
        # [n_expert, n_embd, 2 n_ff] interleaved -> each half transposed to [n_ff, n_embd]
        return [(name, "deint_t0"), (name.replace("ffn_gate_exps", "ffn_up_exps"), "deint_t1")]
    if _gguf_arch(arch) == "gpt-oss" and hf_name.endswith("mlp.experts.gate_up_proj_bias"):
        return [(name, "deint0"), (name.replace("ffn_gate_exps", "ffn_up_exps"), "deint1")]
    if hf_name.endswith(".experts.gate_up_proj"):
        return [(name, "half0"), (name.replace("ffn_gate_exps", "ffn_up_exps"), "half1")]
    if hf_name.endswith("shared_mlp.input_linear.weight"):
        return [(name, "half0"), (name.replace("ffn_gate_shexp", "ffn_up_shexp"), "half1")]
    return [(name, transform(arch, hf_name))]


def transform(arch, hf_name):
    """Name of the layout transform the converter applies to this tensor ("" for none)."""
    arch = _gguf_arch(arch)
    if arch == "llama" and re.search(r"self_attn\.[qk]_proj\.(weight|bias)$", hf_name):
        return "rope_permute_q" if ".q_proj." in hf_name else "rope_permute_k"
    if arch in ("granite", "granitemoe", "smollm3") and re.search(
            r"self_attn\.[qk]_proj\.(weight|bias)$", hf_name):
        return "rope_permute_q" if ".q_proj." in hf_name else "rope_permute_k"
    if arch in ("gemma2", "gemma3") and hf_name.endswith("norm.weight"):
        return "add_one"
    if hf_name.endswith("mlp.shared_expert_gate.weight"):
        return "squeeze"  # [1, n_embd] -> the 1-D [n_embd] the converter writes
    if arch == "gpt-oss" and hf_name.endswith("mlp.experts.down_proj"):
        return "transpose3"  # [n_expert, n_ff, n_embd] (x @ W) -> [n_expert, n_embd, n_ff]
    if arch == "gpt2" and re.search(r"\.(c_attn|c_proj|c_fc)\.weight$", hf_name):
        return "transpose"
    if arch == "nomic-bert" and hf_name.endswith("self_attn.q_proj.weight"):
        return "fuse_qkv"  # rows of q_proj, then k_proj, then v_proj of the same layer
    return ""


def gguf_metadata(arch, cfg):
    """The GGUF metadata a converter writes for this tiny model, from its HF config (a dict).

    A list of {"key", "type", "value"} entries; type is u32, i32, f32, bool, str or an array
    of one of them ("u32[]", ...). test_tiny_hf.c writes exactly these keys, so what the
    loader reads (and its defaults for absent keys) is exercised as with converted files.
    """
    g = ARCHS[arch][3]
    entry, arch = arch, g
    meta = [{"key": "general.architecture", "type": "str", "value": g}]

    def put(suffix, typ, value):
        meta.append({"key": f"{g}.{suffix}", "type": typ, "value": value})

    if arch == "gpt2":
        put("context_length", "u32", cfg["n_positions"])
        put("embedding_length", "u32", cfg["n_embd"])
        put("block_count", "u32", cfg["n_layer"])
        put("feed_forward_length", "u32", cfg["n_inner"] or 4 * cfg["n_embd"])
        put("attention.head_count", "u32", cfg["n_head"])
        put("attention.layer_norm_epsilon", "f32", cfg["layer_norm_epsilon"])
        return meta
    if arch in ("bert", "nomic-bert"):
        put("context_length", "u32", cfg["max_position_embeddings"])
        put("embedding_length", "u32", cfg["hidden_size"])
        put("block_count", "u32", cfg["num_hidden_layers"])
        put("feed_forward_length", "u32", cfg["intermediate_size"])
        put("attention.head_count", "u32", cfg["num_attention_heads"])
        put("attention.layer_norm_epsilon", "f32", cfg["layer_norm_eps"])
        put("attention.causal", "bool", False)
        put("pooling_type", "u32", ENCODERS[entry])
        if arch == "nomic-bert":
            put("rope.freq_base", "f32", cfg["rope_parameters"]["rope_theta"])
        return meta
    put("context_length", "u32", cfg["max_position_embeddings"])
    put("embedding_length", "u32", cfg["hidden_size"])
    put("block_count", "u32", cfg["num_hidden_layers"])
    put("feed_forward_length", "u32", cfg["intermediate_size"])
    put("attention.head_count", "u32", cfg["num_attention_heads"])
    put("attention.head_count_kv", "u32", cfg["num_key_value_heads"])
    if arch == "cohere2":
        put("attention.layer_norm_epsilon", "f32", cfg["layer_norm_eps"])
    else:
        put("attention.layer_norm_rms_epsilon", "f32", cfg["rms_norm_eps"])
    rope = cfg.get("rope_parameters") or {}
    if "full_attention" in rope:
        rope = rope["full_attention"]
    put("rope.freq_base", "f32", rope.get("rope_theta", 10000.0))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if arch in ("llama", "phi3", "granite", "granitemoe", "smollm3", "cohere2"):
        put("rope.dimension_count", "u32", head_dim)
    if arch in ("qwen3", "gemma2", "gemma3", "qwen3moe", "gpt-oss"):
        put("attention.key_length", "u32", head_dim)
        put("attention.value_length", "u32", head_dim)
    if arch in ("gemma2", "gemma3"):
        put("attention.sliding_window", "u32", cfg["sliding_window"])
        put("attention.sliding_window_pattern", "u32", 2)
    if arch in ("granite", "granitemoe"):
        put("attention.scale", "f32", cfg["attention_multiplier"])
        put("embedding_scale", "f32", cfg["embedding_multiplier"])
        put("residual_scale", "f32", cfg["residual_multiplier"])
        put("logit_scale", "f32", cfg["logits_scaling"])
    if arch == "cohere2":
        put("attention.key_length", "u32", head_dim)
        put("attention.value_length", "u32", head_dim)
        put("logit_scale", "f32", cfg["logit_scale"])
        put("attention.sliding_window", "u32", cfg["sliding_window"])
        put("vocab_size", "u32", cfg["vocab_size"])
    if arch == "exaone4":
        put("vocab_size", "u32", cfg["vocab_size"])
    if arch in ("exaone4", "olmo2") and cfg.get("sliding_window") is not None:
        # As llama.cpp's converter: the window and one bool per layer (true: sliding).
        put("attention.sliding_window", "u32", cfg["sliding_window"])
        put("attention.sliding_window_pattern", "bool[]",
            [t == "sliding_attention" for t in cfg["layer_types"]])
    if arch in ("ernie4_5", "ernie4_5-moe"):
        put("attention.key_length", "u32", head_dim)
        put("attention.value_length", "u32", head_dim)
    if cfg.get("attn_logit_softcapping"):
        put("attn_logit_softcapping", "f32", cfg["attn_logit_softcapping"])
    if cfg.get("final_logit_softcapping"):
        put("final_logit_softcapping", "f32", cfg["final_logit_softcapping"])
    _rope_scaling_metadata(arch, cfg, rope, put)
    if entry == "mixtral":
        put("expert_count", "u32", cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
    if arch in ("qwen3moe", "qwen2moe"):
        put("expert_count", "u32", cfg.get("num_experts") or cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
        put("expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])
    if arch == "gpt-oss":
        # llama.cpp's converter: expert_feed_forward_length is the experts' size; the swa
        # pattern (every other layer) and SwiGLU's alpha / limit are fixed in llama.cpp.
        put("expert_count", "u32", cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
        put("expert_feed_forward_length", "u32", cfg["intermediate_size"])
        put("attention.sliding_window", "u32", cfg["sliding_window"])
    if arch in ("olmoe", "granitemoe"):
        put("expert_count", "u32", cfg.get("num_experts") or cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
    if arch == "granitemoe" and cfg.get("shared_intermediate_size"):
        put("expert_shared_feed_forward_length", "u32", cfg["shared_intermediate_size"])
    if arch == "dots1":
        # Dots1Model (a Qwen2MoeModel): base keys plus these; HF Dots1 always scores by sigmoid
        # (llama.cpp has no default for dots1: its files carry expert_gating_func 2).
        put("expert_count", "u32", cfg["n_routed_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
        put("expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])
        put("leading_dense_block_count", "u32", cfg["first_k_dense_replace"])
        put("expert_shared_count", "u32", cfg["n_shared_experts"])
        put("expert_weights_scale", "f32", cfg["routed_scaling_factor"])
        put("expert_weights_norm", "bool", cfg["norm_topk_prob"])
        put("expert_gating_func", "u32", 2)
    if arch == "ernie4_5-moe":
        # Ernie4_5MoeModel (conversion/ernie.py).
        put("expert_count", "u32", cfg["moe_num_experts"])
        put("expert_used_count", "u32", cfg["moe_k"])
        put("interleave_moe_layer_step", "u32", cfg["moe_layer_interval"])
        put("leading_dense_block_count", "u32", cfg["moe_layer_start_index"])
        put("expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])
        put("expert_shared_count", "u32", cfg["moe_num_shared_experts"])
        put("expert_shared_feed_forward_length", "u32",
            cfg["intermediate_size"] // cfg["num_key_value_heads"])
    if arch == "glm4moe":
        # Glm4MoeModel: rope.dimension_count = head_dim * partial_rotary_factor, key_length /
        # value_length from head_dim (TextModel), the MoE keys, gating always sigmoid.
        put("rope.dimension_count", "u32", int(head_dim * rope.get("partial_rotary_factor", 0.5)))
        put("attention.key_length", "u32", head_dim)
        put("attention.value_length", "u32", head_dim)
        put("expert_count", "u32", cfg["n_routed_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
        put("expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])
        put("expert_shared_count", "u32", cfg["n_shared_experts"])
        put("leading_dense_block_count", "u32", cfg["first_k_dense_replace"])
        put("expert_gating_func", "u32", 2)
        put("expert_weights_scale", "f32", cfg["routed_scaling_factor"])
        put("expert_weights_norm", "bool", cfg["norm_topk_prob"])
        put("nextn_predict_layers", "u32", cfg["num_nextn_predict_layers"])
    if arch == "qwen2moe":
        put("expert_shared_feed_forward_length", "u32", cfg["shared_expert_intermediate_size"])
    return meta


def _rope_scaling_metadata(g, cfg, rope, put):
    """rope.scaling.* as llama.cpp's converter writes them (its base class for linear and YaRN,
    its Phi-3 class for LongRoPE; llama3 is the rope_freqs tensor, no key)."""
    kind = rope.get("rope_type", "default")
    if kind == "linear":
        put("rope.scaling.type", "str", "linear")
        put("rope.scaling.factor", "f32", rope["factor"])
    elif kind == "yarn":
        put("rope.scaling.type", "str", "yarn")
        put("rope.scaling.factor", "f32", rope["factor"])
        put("rope.scaling.original_context_length", "u32",
            rope["original_max_position_embeddings"])
        for hf_key, suffix in (("attention_factor", "yarn_attn_factor"),
                               ("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
            if rope.get(hf_key) is not None:
                put(f"rope.scaling.{suffix}", "f32", rope[hf_key])
    elif kind == "longrope" and g == "phi3":
        n_orig = cfg["original_max_position_embeddings"]
        scale = cfg["max_position_embeddings"] / n_orig
        attn = math.sqrt(1 + math.log(scale) / math.log(n_orig)) if scale > 1.0 else 1.0
        put("rope.scaling.original_context_length", "u32", n_orig)
        put("rope.scaling.attn_factor", "f32", attn)


def extra_tensors(arch, cfg):
    """Tensors the converter computes from the config rather than copies from the weights, as
    (GGUF name, float32 array) pairs: llama3's rope_freqs.weight (the per-pair divisors, in
    float32 as convert_hf_to_gguf.py computes them) and Phi-3's rope_factors_long/short.weight.
    gen_tiny.py stores them in the .bin under their GGUF name with transform ""."""
    import numpy as np
    import torch

    rope = cfg.get("rope_parameters") or {}
    kind = rope.get("rope_type", "default")
    if kind == "llama3":
        base = rope.get("rope_theta", 10000.0)
        dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        factor = rope.get("factor", 8.0)
        low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
        n_orig = rope.get("original_max_position_embeddings", 8192)
        low_wavelen, high_wavelen = n_orig / low, n_orig / high
        out = []
        for freq in freqs:
            wavelen = 2 * math.pi / freq
            if wavelen < high_wavelen:
                out.append(1.0)
            elif wavelen > low_wavelen:
                out.append(float(factor))
            else:
                smooth = (n_orig / wavelen - low) / (high - low)
                out.append(float(1 / ((1 - smooth) / factor + smooth)))
        return [("rope_freqs.weight", np.array(out, dtype=np.float32))]
    if kind == "longrope":
        return [("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32)),
                ("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32))]
    return []
