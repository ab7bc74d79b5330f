"""Tiny random-weight model definitions and the HF -> GGUF tensor mapping for each arch.

Used by gen_tiny.py (writes weights + logits) and check_tiny_gguf.py (round-trips the
mapping through a GGUF file that transformers loads back). The mapping below is what
docs/reference.md documents; it follows the naming and layout conventions of GGUF files
as llama.cpp's converter produces them.
"""
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
    "gpt2": (
        "GPT2Config", "GPT2LMHeadModel",
        dict(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=None,
             activation_function="gelu_new", layer_norm_epsilon=1e-5,
             bos_token_id=1, eos_token_id=2, tie_word_embeddings=True),
        "gpt2",
    ),
}

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
_GEMMA_BLOCK = dict(
    _LLAMA_BLOCK,
    **{
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
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
_BLOCK_RE = re.compile(r"^(?:model\.layers|transformer\.h)\.(\d+)\.(.+)$")


def gguf_name(arch, hf_name):
    """GGUF tensor name for an HF parameter name (KeyError when the arch has no such tensor)."""
    if hf_name in _TOP:
        return _TOP[hf_name]
    m = _BLOCK_RE.match(hf_name)
    if not m:
        raise KeyError(hf_name)
    table = {"gpt2": _GPT2_BLOCK, "gemma2": _GEMMA_BLOCK, "gemma3": _GEMMA_BLOCK,
             "mixtral": _MOE_BLOCK, "qwen3moe": _MOE_BLOCK, "qwen2moe": _MOE_BLOCK}
    return f"blk.{m.group(1)}." + table.get(arch, _LLAMA_BLOCK)[m.group(2)]


def gguf_entries(arch, hf_name):
    """[(GGUF name, transform)] of an HF parameter: one entry, or two for a fused 3-D expert
    gate_up_proj [n_expert, 2 * n_ff, n_embd], whose first half of each expert's rows is the
    gate ("half0") and second the up projection ("half1")."""
    name = gguf_name(arch, hf_name)
    if hf_name.endswith("mlp.experts.gate_up_proj"):
        return [(name, "half0"), (name.replace("ffn_gate_exps", "ffn_up_exps"), "half1")]
    return [(name, transform(arch, hf_name))]


def transform(arch, hf_name):
    """Name of the layout transform the converter applies to this tensor ("" for none)."""
    if ARCHS[arch][3] == "llama" and re.search(r"self_attn\.[qk]_proj\.(weight|bias)$", hf_name):
        return "rope_permute_q" if ".q_proj." in hf_name else "rope_permute_k"
    if arch in ("gemma2", "gemma3") and hf_name.endswith("norm.weight"):
        return "add_one"
    if hf_name.endswith("mlp.shared_expert_gate.weight"):
        return "squeeze"  # [1, n_embd] -> the 1-D [n_embd] the converter writes
    if arch == "gpt2" and re.search(r"\.(c_attn|c_proj|c_fc)\.weight$", hf_name):
        return "transpose"
    return ""


def gguf_metadata(arch, cfg):
    """The GGUF metadata a converter writes for this tiny model, from its HF config (a dict).

    A list of {"key", "type", "value"} entries; type is u32, i32, f32, bool, str or an array
    of one of them ("u32[]", ...). test_tiny_hf.c writes exactly these keys, so what the
    loader reads (and its defaults for absent keys) is exercised as with converted files.
    """
    g = ARCHS[arch][3]
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
    put("context_length", "u32", cfg["max_position_embeddings"])
    put("embedding_length", "u32", cfg["hidden_size"])
    put("block_count", "u32", cfg["num_hidden_layers"])
    put("feed_forward_length", "u32", cfg["intermediate_size"])
    put("attention.head_count", "u32", cfg["num_attention_heads"])
    put("attention.head_count_kv", "u32", cfg["num_key_value_heads"])
    put("attention.layer_norm_rms_epsilon", "f32", cfg["rms_norm_eps"])
    rope = cfg.get("rope_parameters") or {}
    if "full_attention" in rope:
        rope = rope["full_attention"]
    put("rope.freq_base", "f32", rope.get("rope_theta", 10000.0))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if arch in ("llama", "phi3", "mixtral"):
        put("rope.dimension_count", "u32", head_dim)
    if arch in ("qwen3", "gemma2", "gemma3", "qwen3moe"):
        put("attention.key_length", "u32", head_dim)
        put("attention.value_length", "u32", head_dim)
    if arch in ("gemma2", "gemma3"):
        put("attention.sliding_window", "u32", cfg["sliding_window"])
        put("attention.sliding_window_pattern", "u32", 2)
    if cfg.get("attn_logit_softcapping"):
        put("attn_logit_softcapping", "f32", cfg["attn_logit_softcapping"])
    if cfg.get("final_logit_softcapping"):
        put("final_logit_softcapping", "f32", cfg["final_logit_softcapping"])
    if arch == "mixtral":
        put("expert_count", "u32", cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
    if arch in ("qwen3moe", "qwen2moe"):
        put("expert_count", "u32", cfg.get("num_experts") or cfg["num_local_experts"])
        put("expert_used_count", "u32", cfg["num_experts_per_tok"])
        put("expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])
    if arch == "qwen2moe":
        put("expert_shared_feed_forward_length", "u32", cfg["shared_expert_intermediate_size"])
    return meta
