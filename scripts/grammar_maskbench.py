#!/usr/bin/env python3
"""Runs the JSON Schema compiler over MaskBench (github guidance-ai/jsonschemabench, maskbench/data).

    scripts/grammar_maskbench.py [--data DIR] [--bin build-h/schema_maskbench] [-v] [--limit N]

Serializes every schema and test instance compactly with Python's json (separators (",", ":"),
ensure_ascii=False: numbers keep their exact text, 1.0 stays 1.0) into a JSON-lines file next to
the data, then runs bench/schema_maskbench.c over it: each schema is compiled to GBNF, the GBNF
read, and every instance matched byte by byte. Prints how many compile, how many pass (every
valid instance accepted, every invalid one rejected), invalid instances accepted (must be 0),
and the histogram of compile errors. The data stays outside the repository (default
~/.cache/tessera/maskbench/data; bring it with the `fetch` of github:guidance-ai/jsonschemabench).
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/tessera/maskbench/data"))
    ap.add_argument("--bin", default=os.path.join(here, "..", "build-h", "schema_maskbench"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (sorted)")
    ap.add_argument("--match", default="", help="only files whose name contains this")
    ap.add_argument("-v", action="store_true", help="list every mismatch and compile error")
    ap.add_argument("--jsonl", action="store_true", help="one result object per file")
    a = ap.parse_args()
    names = sorted(n for n in os.listdir(a.data) if n.endswith(".json") and a.match in n)
    if a.limit:
        names = names[: a.limit]
    cases = os.path.join(os.path.dirname(os.path.abspath(a.data)), "cases.jsonl")

    def dump(v):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

    with open(cases, "w", encoding="utf-8") as out:
        for n in names:
            with open(os.path.join(a.data, n), encoding="utf-8") as f:
                d = json.load(f)
            tests = [[bool(t["valid"]), dump(t["data"])] for t in d.get("tests", [])]
            out.write(dump({"file": n, "schema": dump(d["schema"]), "tests": tests}) + "\n")
    cmd = [a.bin] + (["-v"] if a.v else []) + (["--jsonl"] if a.jsonl else []) + ["--cases", cases]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
