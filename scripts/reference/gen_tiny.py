#!/usr/bin/env python3
"""Tiny random-weight models per architecture: HF weights and the logits transformers computes.

    python3 scripts/reference/gen_tiny.py [--archs llama,qwen2,...] [--out-dir DIR]

For each arch this writes into tests/data/reference/tiny/:
  <arch>.bin          the model's parameters, float32, HF names and shapes (format in
                      docs/reference.md, "Tiny weight files")
  <arch>.logits.json  config, the GGUF metadata a converter writes for it, the fixed token
                      sequence, float32 logits of every position, per-tensor checks and the
                      HF -> GGUF name mapping with its transforms
  <arch>.embd.json    instead of logits for an encoder (tiny_archs.ENCODERS): two inputs of
                      different lengths, each run alone (no padding) with token type 0, the
                      final hidden state of every position and the pooled vectors (mean, cls,
                      last; each also L2-normalised), float32

Weights: torch.manual_seed(SEED), the transformers model is built from the config, then every
parameter is redrawn from a torch.Generator seeded with SEED (in named_parameters() order) so
that every term of the forward pass matters (HF's own init makes norms exactly 1, biases 0 and
weights too small to exercise attention):
  norm weights  1 + 0.1*N(0,1)   (gemma: 0.1*N(0,1), because HF gemma computes x*(1+w))
  biases        0.1*N(0,1)
  embeddings    0.5*N(0,1)
  matrices      N(0,1)/sqrt(fan_in)
and then (DeepSeek-V3-style routers, e.g. dots1) each e_score_correction_bias buffer 0.1*N(0,1),
stored in the .bin after the parameters.
"""
import argparse
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import tiny_archs  # noqa: E402

MAGIC = b"TSRTINY1"


def build(arch):
    import torch
    import transformers
    from transformers.pytorch_utils import Conv1D

    cfg_cls, model_cls, kwargs, _ = tiny_archs.ARCHS[arch]
    config = getattr(transformers, cfg_cls)(**kwargs)
    torch.manual_seed(tiny_archs.SEED)
    extra = {"add_pooling_layer": False} if arch in tiny_archs.ENCODERS else {}
    model = getattr(transformers, model_cls)._from_config(
        config, attn_implementation="eager", dtype=torch.float32, **extra
    )
    model.eval()

    conv_weights = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, Conv1D)}
    gemma = arch.startswith("gemma")
    gen = torch.Generator().manual_seed(tiny_archs.SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            is_norm = p.dim() == 1 and name.endswith("weight")
            if name.endswith("e_score_correction_bias"):
                val = 0.1 * z  # ERNIE 4.5's selection bias, a [1, n_expert] parameter
            elif is_norm:
                val = 0.1 * z if gemma else 1.0 + 0.1 * z
            elif p.dim() == 1:
                val = 0.1 * z
            elif "embed_tokens" in name or ".wte." in name or ".wpe." in name or (
                "_embeddings." in name
            ):
                val = 0.5 * z
            else:
                fan_in = p.shape[0] if name in conv_weights else p.shape[-1]
                val = z / float(np.sqrt(fan_in))
            if arch == "gpt_oss" and name.endswith(".self_attn.sinks"):
                val = 2.0 * z  # sinks that take a visible share of each softmax
            elif arch == "gpt_oss" and name.endswith("mlp.experts.gate_up_proj"):
                val = 6.0 * z / float(np.sqrt(p.shape[1]))  # x @ W: fan-in is dim 1; the
                # clamp at 7 acts on a good share of gate and up values
            elif arch == "gpt_oss" and name.endswith("mlp.experts.down_proj"):
                val = z / float(np.sqrt(p.shape[1]))
            p.copy_(val)
        # A router's selection bias is a buffer (DeepSeek-V3's e_score_correction_bias, zero
        # at init): redrawn too (after every parameter, so the parameters' values do not
        # depend on it) and stored like a parameter (selection_buffers).
        for name, b in selection_buffers(model):
            b.copy_(0.1 * torch.randn(b.shape, generator=gen, dtype=torch.float32))
    return model, config


def selection_buffers(model):
    """(name, buffer) of the routers' expert-selection biases, which the weight file holds."""
    return [(n, b) for n, b in model.named_buffers() if n.endswith("e_score_correction_bias")]


def write_bin(path, tensors):
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<I", len(tensors)))
        for name, a in tensors:
            nb = name.encode("utf-8")
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<I", a.ndim))
            f.write(struct.pack(f"<{a.ndim}I", *a.shape))
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read_bin(path):
    """Reader used to verify each written file (the same checks a C reader makes)."""
    data = Path(path).read_bytes()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic")
    (n,) = struct.unpack_from("<I", data, 8)
    off, out = 12, []
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", data, off)
        name = data[off + 4 : off + 4 + ln].decode("utf-8")
        off += 4 + ln
        (nd,) = struct.unpack_from("<I", data, off)
        dims = struct.unpack_from(f"<{nd}I", data, off + 4)
        off += 4 + 4 * nd
        cnt = int(np.prod(dims))
        a = np.frombuffer(data, dtype="<f4", count=cnt, offset=off).reshape(dims)
        off += 4 * cnt
        out.append((name, a))
    if off != len(data):
        raise ValueError(f"{path}: {len(data) - off} trailing bytes")
    return out


def pooled(hidden):
    """Pooled vectors of one input's [n_tokens, n_embd] hidden states, float64 math."""
    h = hidden.astype(np.float64)
    out = {"mean": h.mean(axis=0), "cls": h[0], "last": h[-1]}
    for k in list(out):
        out[k + "_norm"] = out[k] / np.linalg.norm(out[k])
    return {k: common.f32_list(v.astype(np.float32)) for k, v in out.items()}


def encoder_outputs(model):
    """Final hidden states of each input run alone, checked to repeat exactly."""
    import torch

    out = []
    for toks in (tiny_archs.TOKENS, tiny_archs.TOKENS_B):
        ids = torch.tensor([toks])
        kw = dict(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        with torch.no_grad():
            h = model(**kw).last_hidden_state[0].float().numpy()
            again = model(**kw).last_hidden_state[0].float().numpy()
        if not np.array_equal(h, again):
            raise SystemExit("repeated forward pass differs")
        out.append(h)
    return out


def run_arch(arch, out_dir):
    import torch

    model, config = build(arch)
    tensors = [(n, p.detach().float().numpy().copy()) for n, p in model.named_parameters()]
    tensors += [(n, b.detach().float().numpy().copy()) for n, b in selection_buffers(model)]
    # Tensors a converter computes from the config (llama3's rope_freqs, Phi-3's LongRoPE
    # factors) follow the parameters, under their GGUF names.
    extra = tiny_archs.extra_tensors(arch, config.to_dict())
    tensors += extra
    extra_names = {n for n, _ in extra}
    if arch in tiny_archs.ENCODERS:
        hidden = encoder_outputs(model)
    else:
        ids = torch.tensor([tiny_archs.TOKENS])
        with torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
            again = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
        if not np.array_equal(logits, again):
            raise SystemExit(f"{arch}: repeated forward pass differs")

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_path = out_dir / f"{arch}.bin"
    write_bin(bin_path, tensors)
    back = read_bin(bin_path)
    if [n for n, _ in back] != [n for n, _ in tensors] or not all(
        np.array_equal(a, b) for (_, a), (_, b) in zip(back, tensors)
    ):
        raise SystemExit(f"{arch}: {bin_path} does not read back")

    gguf_arch = tiny_archs.ARCHS[arch][3]
    table = []
    for name, a in tensors:
        a64 = a.astype(np.float64)
        if name in extra_names:
            entries = [(name, "")]
        else:
            entries = tiny_archs.gguf_entries(arch, name)
        for gguf, how in entries:
            table.append(
                {
                    "hf": name,
                    "shape": list(a.shape),
                    "sum": float(a64.sum()),
                    "l2": float(np.sqrt((a64 * a64).sum())),
                    "gguf": gguf,
                    "transform": how,
                }
            )
    cfg = config.to_dict()
    doc = {
        "arch": arch,
        "gguf_arch": gguf_arch,
        "config_class": tiny_archs.ARCHS[arch][0],
        "model_class": tiny_archs.ARCHS[arch][1],
        "config": cfg,
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "gguf_metadata": tiny_archs.gguf_metadata(arch, cfg),
        "tensors": table,
        "weights_file": bin_path.name,
        "how": {
            "engine": "Hugging Face transformers, model built from config with random weights",
            "seed": tiny_archs.SEED,
            "init": "torch.manual_seed(seed); model; then each parameter in named_parameters() "
            "order redrawn from torch.Generator().manual_seed(seed): norm weights 1+0.1*N "
            "(gemma 0.1*N, HF gemma scales by 1+w), biases 0.1*N, embeddings 0.5*N, matrices "
            "N/sqrt(fan_in)",
            "dtype": "float32",
            "attn_implementation": "eager",
            "forward": "one forward pass over 'tokens' from position 0, no cache; logits of "
            "every position, float32",
            "tensors": "named_parameters() (a tied lm_head is not listed: it is the embedding); "
            "sum and l2 in float64",
            "versions": common.versions(),
            "command": common.command_line(),
        },
    }
    if selection_buffers(model):
        doc["how"]["init"] += (
            "; then each router selection bias buffer (e_score_correction_bias) 0.1*N"
        )
        doc["how"]["tensors"] += "; the selection bias buffers follow the parameters"
    if arch in tiny_archs.ENCODERS:
        doc["inputs"] = [tiny_archs.TOKENS, tiny_archs.TOKENS_B]
        doc["hidden"] = [[common.f32_list(row) for row in h] for h in hidden]
        doc["pooled"] = [pooled(h) for h in hidden]
        doc["how"]["forward"] = (
            "each input alone from position 0, token_type_ids 0, no padding; the final "
            "hidden state (last_hidden_state) of every position, float32; pooled vectors "
            "computed from it in float64: mean over the tokens, first (cls), last, each also "
            "divided by its L2 norm"
        )
        common.write_json(out_dir / f"{arch}.embd.json", doc)
        return bin_path
    doc["tokens"] = tiny_archs.TOKENS
    doc["logits_shape"] = list(logits.shape)
    doc["logits"] = [common.f32_list(row) for row in logits]
    doc["argmax"] = [int(i) for i in logits.argmax(axis=-1)]
    common.write_json(out_dir / f"{arch}.logits.json", doc)
    return bin_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--archs", default=",".join(tiny_archs.ARCHS))
    ap.add_argument("--out-dir", default=str(common.OUT_DIR / "tiny"))
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    for arch in args.archs.split(","):
        if arch not in tiny_archs.ARCHS:
            raise SystemExit(f"unknown arch '{arch}' (known: {', '.join(tiny_archs.ARCHS)})")
        path = run_arch(arch, args.out_dir)
        print(f"{path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
