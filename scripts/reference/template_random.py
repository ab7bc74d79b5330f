#!/usr/bin/env python3
"""Random conversations for the real chat templates: a differential check of tessera's Jinja
engine against jinja2 beyond the fixed cases of template_cases.py.

    /work/venv-ref/bin/python scripts/reference/template_random.py --seed 1 --count 60 --out DIR
    TS_TEMPLATES_DIR=DIR build/tests/template/template_test_templates_real

Writes into DIR (outside the repository; it is emptied first) every template of
--templates-dir as rnd-<name>.jinja with rnd-<name>.expected.json holding --count random
conversations (random roles and turns, tool calls with object or JSON-string arguments of random
nested values, tool results, reasoning, random tool schemas, enable_thinking, reasoning_effort,
documents), rendered by jinja2 exactly as template_cases.py does. The "rnd-" prefix keeps the
test from skipping them as copies of the committed templates. Nothing here is committed: the
seed reproduces a run.
"""
import argparse
import json
import os
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import template_cases as tc  # noqa: E402

R = random.Random(1)

# Pieces of text that stress escaping, whitespace control and look-alike syntax.
PIECES = ["hi", "", " lead/trail ", "multi\nline\n\n", "{{ x }}", "{% raw %}", "</s><|im_end|>",
          "tab\t", "ünï©ødé 日本 🚀", "a\\b\"c'd", "<think>x</think>y", "  ", "\u2028", "0", "None",
          "true"]
FLOATS = [0.5, -1.25, 1e-9, 3.0, 1e21, 123456.789]


def txt():
    return "".join(R.choice(PIECES) for _ in range(R.randint(0, 3)))


def val(depth=0):
    """A random JSON value: scalars always, lists and objects up to depth 2."""
    kind = R.randint(0, 7 if depth < 2 else 4)
    if kind == 0:
        return R.randint(-10**12, 10**12)
    if kind == 1:
        return R.choice(FLOATS)
    if kind == 2:
        return txt()
    if kind == 3:
        return R.choice([True, False, None])
    if kind == 4:
        return R.randint(0, 3)
    if kind == 5:
        return [val(depth + 1) for _ in range(R.randint(0, 3))]
    if kind == 6:
        return {txt() or "k": val(depth + 1) for _ in range(R.randint(0, 3))}
    return {"a": val(depth + 1)}


def msgs():
    """An optional system message, then 1-5 user turns, each but maybe the last answered; an
    answer may carry reasoning and tool calls (followed by their tool results)."""
    ms = []
    if R.random() < 0.5:
        ms.append({"role": "system", "content": txt()})
    n = R.randint(1, 5)
    for i in range(n):
        ms.append({"role": "user", "content": txt() or "q"})
        if i == n - 1 and R.random() >= 0.3:
            break
        m = {"role": "assistant", "content": txt()}
        if R.random() < 0.3:
            m["reasoning_content"] = txt() or "r"
        calls = []
        if R.random() < 0.3:
            args = {txt() or "k": val() for _ in range(R.randint(0, 3))}
            if R.random() < 0.3:
                args = json.dumps(args, ensure_ascii=False)
            calls = [tc.call("abcdefgh%d" % j, R.choice(["get_weather", "search_flights"]), args)
                     for j in range(R.randint(1, 2))]
            m["tool_calls"] = calls
        ms.append(m)
        for c in calls:
            ms.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                       "content": txt() or "{}"})
    return ms


def conversations(count):
    convs = []
    for i in range(count):
        extra = {}
        if R.random() < 0.3:
            extra["enable_thinking"] = R.choice([True, False])
        if R.random() < 0.5:
            extra["tools"] = [tool() for _ in range(R.randint(0, 3))]
        if R.random() < 0.2:
            extra["reasoning_effort"] = R.choice(["low", "medium", "high", txt()])
        if R.random() < 0.2:
            extra["documents"] = [{"title": txt(), "text": txt()} for _ in range(R.randint(0, 2))]
        convs.append(("rnd%d" % i, msgs(), R.random() < 0.4, R.random() < 0.7, extra))
    return convs


def tool():
    props = {txt() or "p": {"type": R.choice(["string", "integer", "number", "boolean", "array",
                                               "object", ["string", "null"]]),
                            "description": txt(), "enum": [val(), val()]}
             for _ in range(R.randint(0, 3))}
    fields = [("name", txt() or "f"), ("description", txt()),
              ("parameters", {"type": "object", "properties": props, "required": [txt()]})]
    return {"type": "function", "function": dict(R.sample(fields, R.randint(1, 3)))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--out", required=True)
    ap.add_argument("--templates-dir", default=os.environ.get(
        "TS_TEMPLATES_DIR", str(Path.home() / ".cache/tessera/templates/llama.cpp")))
    args = ap.parse_args()
    R.seed(args.seed)
    out = Path(args.out)
    if out.resolve() == Path(args.templates_dir).resolve():
        sys.exit("--out must not be the templates directory (it is emptied)")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tc.CONVERSATIONS[:] = conversations(args.count)
    files = sorted(Path(args.templates_dir).glob("*.jinja"))
    if not files:
        sys.exit(f"no *.jinja in {args.templates_dir}")
    for f in files:
        shutil.copyfile(f, out / f.name)
        tc.process(out / f.name, out / (f.stem + ".expected.json"))
        exp = out / (f.stem + ".expected.json")
        d = json.loads(exp.read_text(encoding="utf-8"))
        d["template"] = "rnd-" + f.name
        (out / d["template"]).write_bytes((out / f.name).read_bytes())
        (out / ("rnd-" + exp.name)).write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
        (out / f.name).unlink()
        exp.unlink()
    print(f"{len(files)} templates x {args.count} conversations in {out}")


if __name__ == "__main__":
    main()
