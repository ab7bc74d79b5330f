#!/usr/bin/env python3
"""Reference outputs of real GGUF models, computed by Hugging Face transformers.

    python3 scripts/reference/gen_models.py [--models smollm2,gemma3] [--model-dir DIR]
                                            [--out-dir DIR]

For every model and prompt this writes, into tests/data/reference/<model>.json:
  - the prompt text and the token ids the reference tokenizer gives for it (BOS per GGUF),
  - per-position argmax ids of the prompt forward pass,
  - for the last prompt position: top-20 (id, logit), the logits of 64 fixed probe ids, and
    mean / std (population, ddof=0) of the whole logit vector,
  - the greedy continuation of N tokens (KV cache, argmax, EOS does not stop it) with the
    top-1 minus top-2 logit margin at every step,
and under "tensors" the L2 norms of a few dequantized GGUF tensors as the gguf package's
dequantizer produces them (the tensors as stored in the file, no HF layout transform).

transformers loads the GGUF with `gguf_file=` and dequantizes every weight to float32; the
forward pass runs in float32 with eager attention on one CPU thread. Nothing is fetched: the
model files come from ~/.cache/tessera/models (see scripts/fetch_model.py).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

PARAGRAPH = (
    "Lighthouses were once kept by families who lived at the foot of the tower. Every evening "
    "the keeper climbed the spiral stairs, trimmed the wick, polished the great lens and wound "
    "the clockwork that turned it. Through storms and long winter nights the beam swept across "
    "the water, warning ships away from the rocks. Today most lights are automatic, powered by "
    "the sun and watched from an office many miles away, yet people still travel to the coast "
    "to climb the old towers and look out over the sea."
)

MIXED = (
    "Order #4521: 3 × 12.5 kg @ €7,99 = €299.63 (incl. 19% VAT) — shipped 2024-03-15T08:30Z; "
    "naïve café, Ærø, 東京, Москва, emoji 🚀✨ & math: ∑ x² ≤ 10⁶?!"
)

CHAT_USER = "What is the capital of France? Answer in one word."

# Gemma 3's turn markup. The gemma-3-270m GGUF carries no tokenizer.chat_template, so the
# model's documented turn format is written out here; BOS comes from the tokenizer.
GEMMA_TURNS = "<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"

TENSORS = {
    "smollm2": [
        "token_embd.weight",
        "output_norm.weight",
        "blk.0.attn_norm.weight",
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
        "blk.0.attn_output.weight",
        "blk.0.ffn_gate.weight",
        "blk.0.ffn_up.weight",
        "blk.0.ffn_down.weight",
        "blk.29.ffn_down.weight",
    ],
    "gemma3": [
        "token_embd.weight",
        "output_norm.weight",
        "blk.0.attn_norm.weight",
        "blk.0.attn_q_norm.weight",
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
        "blk.0.attn_output.weight",
        "blk.0.ffn_gate.weight",
        "blk.0.ffn_up.weight",
        "blk.0.ffn_down.weight",
        "blk.17.ffn_down.weight",
    ],
}

TOPK = 20
N_PROBE = 64
N_GEN = 48
EMBD_ROWS = 4  # token_embd rows whose norms are recorded one by one
HEAD_VALUES = 8  # first values of row 0 of each dequantized tensor


def gguf_meta(path):
    import gguf

    r = gguf.GGUFReader(str(path))

    def get(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    return r, {
        "architecture": get("general.architecture"),
        "add_bos_token": get("tokenizer.ggml.add_bos_token"),
        "add_eos_token": get("tokenizer.ggml.add_eos_token"),
        "bos_token_id": get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": get("tokenizer.ggml.eos_token_id"),
        "tokenizer_model": get("tokenizer.ggml.model"),
        "tokenizer_pre": get("tokenizer.ggml.pre"),
        "has_chat_template": "tokenizer.chat_template" in r.fields,
    }


def tensor_refs(reader, names):
    """L2 norms (and a few values) of dequantized tensors, straight from the GGUF."""
    import gguf

    by_name = {t.name: t for t in reader.tensors}
    out = []
    for name in names:
        t = by_name[name]
        ne = [int(x) for x in t.shape]  # GGUF order: ne[0] is the contiguous dimension
        rows = t.data.reshape(-1, t.data.shape[-1]) if len(ne) > 1 else t.data.reshape(1, -1)
        rec = {"name": name, "type": t.tensor_type.name, "ne": ne}
        if name == "token_embd.weight":
            # Only the first rows: the whole embedding is large and the rows are what a test
            # of the dequantizer (and of GET_ROWS) needs.
            rows = rows[:EMBD_ROWS]
            rec["rows"] = [0, EMBD_ROWS]
        w = np.asarray(gguf.quants.dequantize(rows, t.tensor_type), dtype=np.float32)
        w = w.reshape(len(rows), -1)
        if w.shape[1] != ne[0]:
            raise SystemExit(f"{name}: dequantized row length {w.shape[1]} != ne[0] {ne[0]}")
        w64 = w.astype(np.float64)
        rec["l2"] = float(np.sqrt(np.sum(w64 * w64)))
        rec["sum"] = float(np.sum(w64))
        rec["row_l2"] = [float(np.sqrt(np.sum(r * r))) for r in w64[:EMBD_ROWS]]
        rec["row0_head"] = common.f32_list(w[0, :HEAD_VALUES])
        out.append(rec)
    return out


def render_prompts(name, tok, meta):
    prompts = [
        {"name": "capital", "text": "The capital of France is", "kind": "plain"},
        {"name": "paragraph", "text": PARAGRAPH, "kind": "plain"},
        {"name": "mixed", "text": MIXED, "kind": "plain"},
    ]
    msgs = [{"role": "user", "content": CHAT_USER}]
    if meta["has_chat_template"]:
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        how = "tokenizer.chat_template from the GGUF, add_generation_prompt=True"
    elif meta["architecture"] == "gemma3":
        text = GEMMA_TURNS.format(user=CHAT_USER)
        how = "no chat template in the GGUF; Gemma 3 turn markup written by the script"
    else:
        raise SystemExit(f"{name}: no chat template in the GGUF and no fallback known")
    prompts.append({"name": "chat", "text": text, "kind": "chat", "template": how})
    return prompts


def last_logit_summary(logits, probe_ids):
    v = logits.astype(np.float32)
    order = np.argsort(-v, kind="stable")[:TOPK]
    v64 = v.astype(np.float64)
    return {
        "top": [[int(i), common.f32(v[i])] for i in order],
        "probe": common.f32_list(v[probe_ids]),
        "mean": float(v64.mean()),
        "std": float(v64.std()),
    }


def greedy(model, ids, n):
    """Greedy decode with the KV cache; EOS does not stop it (fixed length)."""
    import torch

    out_ids, margins = [], []
    with torch.no_grad():
        res = model(input_ids=ids, use_cache=True)
        past = res.past_key_values
        logits = res.logits[0, -1]
        for step in range(n):
            top2 = torch.topk(logits, 2)
            nxt = int(top2.indices[0])
            out_ids.append(nxt)
            margins.append(common.f32(float(top2.values[0] - top2.values[1])))
            if step + 1 == n:
                break
            res = model(
                input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True
            )
            past = res.past_key_values
            logits = res.logits[0, -1]
    return out_ids, margins


def run_prompt(model, tok, prompt, probe_ids):
    import torch

    ids = tok(prompt["text"])["input_ids"]
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(input_ids=x, use_cache=False).logits[0].float().numpy()
    argmax = [int(i) for i in logits.argmax(axis=-1)]
    gen, margins = greedy(model, x, N_GEN)
    rec = dict(prompt)
    rec.update(
        {
            "ids": [int(i) for i in ids],
            "n_tokens": len(ids),
            "argmax": argmax,
            "last": last_logit_summary(logits[-1], probe_ids),
            "greedy": gen,
            "greedy_margin": margins,
            "greedy_text": tok.decode(gen),
        }
    )
    # Self-checks, recorded in the output: a repeated forward pass is bit-identical, and the
    # cached greedy decode agrees with one uncached pass over prompt + continuation.
    with torch.no_grad():
        again = model(input_ids=x, use_cache=False).logits[0].float().numpy()
        if not np.array_equal(again, logits):
            raise SystemExit(f"{prompt['name']}: second forward pass differs")
        full = torch.tensor([ids + gen[:-1]])
        fl = model(input_ids=full, use_cache=False).logits[0].float().numpy()
    nocache = [int(i) for i in fl[len(ids) - 1 :].argmax(axis=-1)]
    diff = [i for i, (a, b) in enumerate(zip(nocache, gen)) if a != b]
    rec["check"] = {
        "repeat_forward_identical": True,
        "uncached_greedy_mismatch_steps": diff,
    }
    return rec


def run_model(name, model_dir, out_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fname = MODELS[name]
    path = Path(model_dir) / fname
    if not path.is_file():
        raise SystemExit(f"{name}: {path} not found (run scripts/fetch_model.py {name})")
    reader, meta = gguf_meta(path)
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(str(model_dir), gguf_file=fname)
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), gguf_file=fname, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    print(f"{name}: loaded in {time.time() - t0:.1f}s", file=sys.stderr)

    vocab = int(model.config.vocab_size)
    probe_ids = sorted(
        int(i) for i in np.random.default_rng(20240601).choice(vocab, N_PROBE, replace=False)
    )
    prompts = []
    for p in render_prompts(name, tok, meta):
        t1 = time.time()
        prompts.append(run_prompt(model, tok, p, probe_ids))
        print(f"{name}/{p['name']}: {time.time() - t1:.1f}s", file=sys.stderr)

    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    doc = {
        "model": name,
        "file": fname,
        "sha256": common.sha256_file(path),
        "gguf": meta,
        "bos": {
            "added_by_tokenizer": bool(tok("x")["input_ids"][:1] == [meta["bos_token_id"]]),
            "gguf_add_bos_token": meta["add_bos_token"],
            "bos_token_id": meta["bos_token_id"],
        },
        "vocab_size": vocab,
        "probe_ids": probe_ids,
        "n_greedy": N_GEN,
        "prompts": prompts,
        "tensors": tensor_refs(reader, TENSORS[name]),
        "hf_config": cfg,
        "how": {
            "engine": "Hugging Face transformers, GGUF loaded with gguf_file= (weights "
            "dequantized to float32 by transformers' GGUF loader, which uses the gguf package)",
            "dtype": "float32",
            "attn_implementation": "eager",
            "torch_threads": torch.get_num_threads(),
            "tokenizer": type(tok).__name__ + " built from the GGUF vocabulary",
            "tokenize_call": "tokenizer(text) with default special-token handling: BOS per the "
            "GGUF's add_bos_token; special-token text such as <|im_start|> is parsed as "
            "special tokens",
            "greedy": "argmax at each step with the KV cache (use_cache=True), EOS does not "
            "stop it; greedy_margin is top1 - top2 logit at each step",
            "last_logits": "logits of the last prompt position: top-20 by value (ties by "
            "lower id), logits at probe_ids, mean and std (ddof=0) over the whole vocabulary",
            "probe_ids": "numpy default_rng(20240601).choice(vocab, 64, replace=False), sorted",
            "tensors": "gguf.quants.dequantize of the tensor as stored in the GGUF (no q/k "
            "un-permute, gemma norms with their +1); l2 and sum in float64 over the float32 "
            "values of the whole tensor, or of rows [rows[0], rows[1]) where 'rows' is given; "
            "ne is the GGUF dimension order (ne[0] = row length); row_l2 are the norms of the "
            "first 4 rows; row0_head the first 8 values of row 0",
            "versions": common.versions(),
            "command": common.command_line(),
        },
    }
    return common.write_json(Path(out_dir) / f"{name}.json", doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--model-dir", default=str(Path.home() / ".cache" / "tessera" / "models"))
    ap.add_argument("--out-dir", default=str(common.OUT_DIR))
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model '{name}' (known: {', '.join(MODELS)})")
        print(run_model(name, args.model_dir, args.out_dir))


if __name__ == "__main__":
    main()
