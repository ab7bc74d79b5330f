#!/usr/bin/env python3
"""Check the documented HF -> GGUF tensor mapping by a round trip through a real GGUF reader.

    python3 scripts/reference/check_tiny_gguf.py [--archs llama,...] [--keep DIR]

For each tiny arch: rebuild the model exactly as gen_tiny.py does, convert its parameters to
GGUF tensor names and layouts with the rules in tiny_archs.py (the ones docs/reference.md
documents), write a float32 GGUF with the gguf package's writer, load that GGUF back with
transformers' GGUF loader (which undoes the llama.cpp conventions: q/k un-permute, gemma norm
-1, gpt2 transpose) into a model with the same config, and compare its logits with
tests/data/reference/tiny/<arch>.logits.json. A wrong name, a missing transform or a wrong
direction of one makes the logits differ and the script exits non-zero.

Only tensors and the few metadata keys the loader needs are written: these files are a check
of the mapping, not GGUF models to ship (nothing here is committed).
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import gen_tiny  # noqa: E402
import tiny_archs  # noqa: E402


# Archs whose GGUF transformers cannot load back (their mapping is checked by test_tiny_hf.c
# only). Mixtral GGUFs say "llama"; transformers' GGUF loader maps that to LlamaForCausalLM
# and has no table for MixtralForCausalLM's experts.
SKIP = {
    "mixtral": "transformers' GGUF loader has no Mixtral (llama with experts) mapping",
    "olmoe": "transformers' GGUF loader does not read GGUF architecture 'olmoe'",
    "granitemoe": "transformers' GGUF loader does not read GGUF architecture 'granitemoe'",
    "granitemoeshared": "transformers' GGUF loader does not read GGUF architecture 'granitemoe'",
    "dots1": "transformers' GGUF loader does not read GGUF architecture 'dots1'",
    "glm4moe": "transformers' GGUF loader does not read GGUF architecture 'glm4moe'",
    "ernie4_5_moe": "transformers' GGUF loader does not read GGUF architecture 'ernie4_5-moe'",
}


def rope_permute(w, n_head):
    """HF rotate-half rows (i, i + d/2) of each head -> adjacent rows (2i, 2i + 1)."""
    rows = w.shape[0]
    d = rows // n_head
    rest = w.shape[1:]
    return w.reshape(n_head, 2, d // 2, *rest).swapaxes(1, 2).reshape(rows, *rest)


def to_gguf_tensors(arch, model, config):
    out = []
    for name, p in model.named_parameters():
        for gname, t in tiny_archs.gguf_entries(arch, name):
            out.append((gname, convert(p.detach().float().numpy().copy(), t, arch, config)))
    return out


def convert(a, t, arch, config):
    """One tensor in GGUF layout (numpy order: GGUF's ne reversed)."""
    if True:
        if t in ("half0", "half1") and a.ndim == 2:  # Granite's fused shared expert
            ff = a.shape[0] // 2
            a = np.ascontiguousarray(a[:ff] if t == "half0" else a[ff:])
        elif t in ("half0", "half1"):
            ff = a.shape[1] // 2
            a = np.ascontiguousarray(a[:, :ff] if t == "half0" else a[:, ff:])
        elif t == "squeeze":
            a = a.reshape(-1)
        elif t == "rope_permute_q":
            a = rope_permute(a, config.num_attention_heads)
        elif t == "rope_permute_k":
            a = rope_permute(a, config.num_key_value_heads)
        elif t == "add_one":
            a = a + np.float32(1.0)
        elif t == "transpose":
            a = np.ascontiguousarray(a.T)
        elif t:
            raise SystemExit(f"{arch}: unknown transform {t}")
    return a.astype(np.float32)


def write_gguf(path, arch, config, tensors):
    import gguf

    g_arch = tiny_archs.ARCHS[arch][3]
    w = gguf.GGUFWriter(str(path), g_arch)
    c = config
    if arch == "gpt2":
        w.add_block_count(c.n_layer)
        w.add_context_length(c.n_positions)
        w.add_embedding_length(c.n_embd)
        w.add_feed_forward_length(4 * c.n_embd)
        w.add_head_count(c.n_head)
        w.add_layer_norm_eps(c.layer_norm_epsilon)
    else:
        w.add_block_count(c.num_hidden_layers)
        w.add_context_length(c.max_position_embeddings)
        w.add_embedding_length(c.hidden_size)
        w.add_feed_forward_length(c.intermediate_size)
        w.add_head_count(c.num_attention_heads)
        w.add_head_count_kv(c.num_key_value_heads)
        w.add_layer_norm_rms_eps(c.rms_norm_eps)
    for m in tiny_archs.gguf_metadata(arch, c.to_dict()):
        if "expert" in m["key"]:
            w.add_uint32(m["key"], m["value"])
    w.add_vocab_size(c.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for name, a in tensors:
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_arch(arch, ref_dir, work):
    import torch
    import transformers

    model, config = gen_tiny.build(arch)
    tensors = to_gguf_tensors(arch, model, config)
    fname = f"{arch}.gguf"
    write_gguf(Path(work) / fname, arch, config, tensors)

    model_cls = getattr(transformers, tiny_archs.ARCHS[arch][1])
    back = model_cls.from_pretrained(
        str(work), gguf_file=fname, config=config, dtype=torch.float32,
        attn_implementation="eager",
    )
    back.eval()
    with torch.no_grad():
        got = back(input_ids=torch.tensor([tiny_archs.TOKENS]), use_cache=False).logits[0]
    ref = json.loads((Path(ref_dir) / f"{arch}.logits.json").read_text())
    want = np.array(ref["logits"], dtype=np.float32)
    err = float(np.abs(got.numpy() - want).max())
    ok = err <= 1e-5 * max(1.0, float(np.abs(want).max()))
    print(f"{arch}: {len(tensors)} tensors, max |logit diff| after GGUF round trip = {err:.3g}"
          f" {'ok' if ok else 'FAIL'}")
    return ok


# GGUF architectures transformers' GGUF loader reads (5.x); the later families (granite,
# smollm3, olmo2, exaone4, cohere2, ernie4_5) are checked only by test_tiny_hf.c against the
# logits transformers computes from the HF weights.
READABLE = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gpt2", "qwen3moe", "qwen2moe")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--archs", default=",".join(
        a for a in tiny_archs.ARCHS if tiny_archs.ARCHS[a][3] in READABLE))
    ap.add_argument("--ref-dir", default=str(common.OUT_DIR / "tiny"))
    ap.add_argument("--keep", help="write the GGUF files here instead of a temp dir")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        archs = []
        for a in args.archs.split(","):
            if a in SKIP:
                print(f"{a}: skipped ({SKIP[a]})")
                continue
            if a in tiny_archs.ARCHS and tiny_archs.ARCHS[a][3] not in READABLE:
                raise SystemExit(f"{a}: transformers' GGUF loader does not read GGUF "
                                 f"architecture '{tiny_archs.ARCHS[a][3]}'")
            archs.append(a)
        bad = [a for a in archs if not check_arch(a, args.ref_dir, work)]
    if bad:
        raise SystemExit(f"mapping check failed for: {', '.join(bad)}")


if __name__ == "__main__":
    main()
