"""Shared helpers for the reference-data generators in scripts/reference/.

Everything here is plain bookkeeping: float32 formatting for JSON, version strings for the
"how" field, file hashing. No model logic lives here.
"""
import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "tests" / "data" / "reference"


def f32(x):
    """A float32 value as the shortest decimal that reads back to the same float32.

    Parsing the returned Python float as float32 (strtof in C) gives exactly `x`.
    """
    return float(np.format_float_scientific(np.float32(x), unique=True))


def f32_list(a):
    return [f32(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def sha256_file(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def versions():
    import gguf  # noqa: F401  (only for the version)
    import torch
    import transformers
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gguf": version("gguf"),
        "numpy": np.__version__,
        "tokenizers": version("tokenizers"),
        "platform": platform.platform(),
    }


def command_line():
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(REPO)
    except ValueError:
        pass
    return " ".join(["python3", str(script)] + sys.argv[1:])


def write_json(path, obj):
    """Compact but line-broken JSON: one top-level key per line keeps diffs readable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")
    return path
