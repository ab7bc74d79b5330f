#!/usr/bin/env python3
"""GGUF files of the tiny models written by llama.cpp's own converter (convert_hf_to_gguf.py).

    python3 scripts/reference/gen_converted.py --converter DIR [--archs gpt_oss,dots1,...]

DIR is a directory holding llama.cpp's convert_hf_to_gguf.py with its conversion/ package and
gguf-py/ (taken from a llama.cpp checkout and kept OUTSIDE this repository; nothing of it is
committed). For each arch this rebuilds the tiny model exactly as gen_tiny.py does (same seed,
same weights: checked against the committed <arch>.bin), saves it with save_pretrained and runs
the converter on it (--outtype f32), writing tests/data/reference/tiny/<arch>.conv.gguf.
test_tiny_hf.c loads that file as it is -- the converter's tensor names, metadata keys and the
defaults it leaves out -- and compares its logits with <arch>.logits.json (transformers').

The converter needs a tokenizer, and its BPE pre-tokenizer check only knows real models; the
tiny models have none. Every model class's set_vocab is replaced by one that writes a plain
byte-level "gpt2" vocabulary of vocab_size tokens (the byte stand-ins, one merge "a b"): the
vocabulary is not what these files test. Nothing else of the converter is changed.
"""
import argparse
import json
import runpy
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import gen_tiny  # noqa: E402
import tiny_archs  # noqa: E402

# The archs whose converted files are committed (decoders; every listed family once, plus the
# variants whose metadata the converter writes differently).
# gemma3 is left out: the converter writes no sliding_window_pattern for Gemma 3, so readers
# (llama.cpp, tessera) take the real models' period 6, while the tiny model alternates.
# nomic_bert is left out: its converter class reads the tokenizer itself (it refuses the
# tiny WordLevel tokenizer.json) and expects the original checkpoint's names. Encoders are
# checked against <arch>.embd.json.
DEFAULT = [a for a in tiny_archs.ARCHS if a not in ("gemma3", "nomic_bert")]


# GGUF arch -> {key: value, or the name of the config key whose value it takes}.
CONFIG_COMPAT = {
    "cohere2": {"rotary_pct": 1.0},
    "gpt2": {"n_ctx": "n_positions"},
}


def byte_chars():
    """GPT-2's printable stand-ins for the 256 byte values (byte-level BPE's alphabet)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tiny_vocab(self):
    """A byte-level BPE vocabulary of exactly vocab_size tokens: the byte stand-ins (the last
    ones dropped to make room), then "ab" made by the one merge "a b"."""
    n = int(self.hparams.get("vocab_size", 256))
    chars = byte_chars()[: n - 1]
    if "a" not in chars or "b" not in chars:
        raise SystemExit(f"vocab_size {n} too small for the tiny vocabulary")
    w = self.gguf_writer
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(chars + ["ab"])
    w.add_token_types([1] * n)
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def convert(conv_dir, model_dir, out_path, outtype="f32"):
    conv_dir = Path(conv_dir).resolve()
    sys.path.insert(0, str(conv_dir))
    sys.path.insert(1, str(conv_dir / "gguf-py"))
    import conversion

    if not getattr(conversion, "_tiny_patched", False):
        orig = conversion.get_model_class

        def patched(*a, **k):
            cls = orig(*a, **k)
            cls.set_vocab = tiny_vocab
            return cls

        conversion.get_model_class = patched
        conversion._tiny_patched = True
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", str(model_dir), "--outtype", outtype, "--outfile",
                str(out_path)]
    try:
        runpy.run_path(str(conv_dir / "convert_hf_to_gguf.py"), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = argv


def save_model(arch, tmp):
    import torch

    model, config = gen_tiny.build(arch)
    bin_path = common.OUT_DIR / "tiny" / f"{arch}.bin"
    if bin_path.exists():
        want = dict(gen_tiny.read_bin(bin_path))
        for n, p in list(model.named_parameters()) + gen_tiny.selection_buffers(model):
            if not np.array_equal(p.detach().float().numpy(), want[n]):
                raise SystemExit(f"{arch}: rebuilt '{n}' differs from {bin_path}")
    model.save_pretrained(tmp)
    # Keys this converter reads that transformers 5 no longer writes for these configs (real
    # checkpoints' config.json files carry them); transformers ignores them.
    extra = CONFIG_COMPAT.get(tiny_archs.ARCHS[arch][3], {})
    if extra:
        path = Path(tmp) / "config.json"
        cfg = json.loads(path.read_text())
        for k, v in extra.items():
            cfg.setdefault(k, cfg[v] if isinstance(v, str) else v)
        path.write_text(json.dumps(cfg, indent=1))
    # A tokenizer.json of 256 plain tokens for the converters that read one (Gemma 3 trims
    # the embedding to its size).
    vocab = {f"<{i}>": i for i in range(config.vocab_size)}
    tok = {"version": "1.0", "added_tokens": [], "model": {"type": "WordLevel", "vocab": vocab,
                                                          "unk_token": "<0>"}}
    (Path(tmp) / "tokenizer.json").write_text(json.dumps(tok))
    return torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--converter", required=True, help="directory with convert_hf_to_gguf.py")
    ap.add_argument("--archs", default=",".join(DEFAULT))
    ap.add_argument("--out-dir", default=str(common.OUT_DIR / "tiny"))
    ap.add_argument("--outtype", default="f32",
                    help="the converter's --outtype (the committed files are f32)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    for arch in args.archs.split(","):
        if arch not in tiny_archs.ARCHS:
            raise SystemExit(f"unknown arch '{arch}' (known: {', '.join(tiny_archs.ARCHS)})")
        out = Path(args.out_dir) / f"{arch}.conv.gguf"
        with tempfile.TemporaryDirectory() as tmp:
            save_model(arch, tmp)
            convert(args.converter, tmp, out, args.outtype)
        print(f"{out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
