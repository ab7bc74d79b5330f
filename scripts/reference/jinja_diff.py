#!/usr/bin/env python3
"""Differential fuzzing of tessera's Jinja engine against Python's jinja2.

Generates random templates (expressions with filters, tests and operators; statements with
loops, conditionals, sets, macros, call and filter blocks, raw blocks, comments and random
whitespace control), renders each with jinja2 configured as Hugging Face's
apply_chat_template does (see jinja_cases.py) and with tests/template/jinja_render.c, and
reports every template where the two disagree: different output, or one fails and the other
does not.

    cmake --build build-h --target template_jinja_render
    /work/venv-ref/bin/python scripts/reference/jinja_diff.py \\
        --render build-h/tests/template/template_jinja_render --seed 1 -n 1000

Exits non-zero when a mismatch is found; the first few are printed in full. A mismatch that
is a deliberate difference (docs/templates.md, "Differences from jinja2") is not a bug; add
any other to jinja_cases.py once fixed.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jinja_cases import NOW, make_env_render  # noqa: E402

VARS = {"s": "  Hello, World  ", "n": 3, "f": -2.5, "l": [3, "a", 1.5, None, True],
        "d": {"b": 2, "a": [1, 2], "c": {"x": "y"}}, "e": "", "z": 0, "u": "héllo 🎉",
        "m": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}],
        "t": True, "nn": None, "xs": [1, 2, 3]}

ATOMS = ["s", "n", "f", "l", "d", "e", "z", "u", "m", "t", "nn", "missing", "1", "0", "-3",
         "2.5", "'abc'", "'A b'", "[1, 2]", "[]", "{}", "{'k': 1}", "none", "true", "(1, 'x')",
         "m[0]", "d.c", "l[1:]", "u[::-1]", "s.strip()", "s.split(',')", "d.items()|list",
         "range(3)|list", "n ** 2", "'%s'|format(n)", "l|length"]
FILTERS = ["trim", "upper", "lower", "length", "first", "last", "list", "string", "tojson",
           "join(',')", "default('D')", "default('D', true)", "int", "float", "abs", "sort",
           "reverse|list", "unique|list", "map('string')|list", "select|list", "reject|list",
           "title", "capitalize", "items|list", "dictsort", "sum", "min", "max", "indent(2)",
           "replace('l', 'L')", "round", "safe", "e", "count", "tojson(indent=1)",
           "batch(2)|list", "selectattr('role')|list", "map(attribute='role')|list",
           "wordcount", "center(9)", "truncate(5, true, '.', 0)"]
TESTS = ["defined", "none", "string", "number", "integer", "mapping", "sequence", "iterable",
         "odd", "even", "true", "false", "boolean", "float", "lower", "upper", "callable"]
OPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]

STMT_EXPRS = ["x", "i", "xs", "loop.index", "loop.first", "ns.v", "d.a", "s.split()",
              "m[0].role", "'q'", "1", "y", "xs|length", "i * 2", "x ~ i", "loop.last",
              "d['b'][0]", "caller is defined"]
TEXTS = ["", " ", "\n", "  \n", "\n  ", "A", " B\n", "\t", "\n\n"]


def expr(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.35:
        return rng.choice(ATOMS)
    if r < 0.6:
        return f"({expr(rng, depth + 1)})|{rng.choice(FILTERS)}"
    if r < 0.7:
        return f"({expr(rng, depth + 1)}) is {rng.choice(['', 'not '])}{rng.choice(TESTS)}"
    if r < 0.9:
        return f"({expr(rng, depth + 1)}) {rng.choice(OPS)} ({expr(rng, depth + 1)})"
    if r < 0.95:
        return f"({expr(rng, depth + 1)}) if ({expr(rng, depth + 1)}) else ({expr(rng, depth + 1)})"
    return f"not ({expr(rng, depth + 1)})"


def tag(rng, body):
    sign = lambda: rng.choice(["", "-", "+"]) if rng.random() < 0.4 else ""  # noqa: E731
    return "{%" + sign() + " " + body + " " + sign() + "%}"


def block(rng, depth=0):
    out = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        out.append(rng.choice(TEXTS))
        if r < 0.3 or depth > 2:
            out.append("{{" + rng.choice(["", "-"]) + " " + rng.choice(STMT_EXPRS) + " "
                       + rng.choice(["", "-"]) + "}}")
        elif r < 0.45:
            it = rng.choice(["xs", "d", "s", "m", "range(2)", "xs if x > 1"])
            orelse = tag(rng, "else") + block(rng, depth + 1) if rng.random() < 0.2 else ""
            out.append(tag(rng, "for x in " + it) + block(rng, depth + 1) + orelse
                       + tag(rng, "endfor"))
        elif r < 0.6:
            s = tag(rng, "if " + rng.choice(STMT_EXPRS)) + block(rng, depth + 1)
            if rng.random() < 0.3:
                s += tag(rng, "elif " + rng.choice(STMT_EXPRS)) + block(rng, depth + 1)
            if rng.random() < 0.3:
                s += tag(rng, "else") + block(rng, depth + 1)
            out.append(s + tag(rng, "endif"))
        elif r < 0.7:
            out.append(tag(rng, f"set {rng.choice(['y', 'i', 'ns.v'])} = {rng.choice(STMT_EXPRS)}"))
        elif r < 0.75:
            out.append(tag(rng, "set y") + block(rng, depth + 1) + tag(rng, "endset"))
        elif r < 0.8:
            out.append(rng.choice(["{# c #}", "{#- c -#}", "{#+ c #}",
                                   "{% raw %}{{x}}{% endraw %}", "{%- raw -%} r {%- endraw -%}"]))
        elif r < 0.85:
            out.append(tag(rng, "macro mm(i, x=2)") + block(rng, depth + 1)
                       + tag(rng, "endmacro") + "{{ mm(5) }}")
        elif r < 0.9:
            out.append("{% if loop is defined and loop.index > 1 %}{% break %}{% endif %}")
        elif r < 0.95:
            out.append(tag(rng, "filter upper") + block(rng, depth + 1) + tag(rng, "endfilter"))
        else:
            out.append(tag(rng, "call(x) wrap()") + block(rng, depth + 1) + tag(rng, "endcall"))
        out.append(rng.choice(TEXTS))
    return "".join(out)


def statement_template(rng):
    return ("{% set ns = namespace(v=0) %}{% macro wrap() %}<{{ caller(7) }}>{% endmacro %}"
            + rng.choice(["", "\n", "  "]) + block(rng) + rng.choice(["", "\n"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--render", required=True, help="path of template_jinja_render")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=1000, help="templates to try")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vars_text = json.dumps(VARS, ensure_ascii=False)
    mismatches = 0
    with tempfile.TemporaryDirectory() as tmp:
        tpl_path, vars_path = os.path.join(tmp, "t.jinja"), os.path.join(tmp, "vars.json")
        with open(vars_path, "w", encoding="utf-8") as f:
            f.write(vars_text)
        for i in range(args.n):
            src = "{{ %s }}" % expr(rng) if i % 2 == 0 else statement_template(rng)
            try:
                # A fresh copy each time: jinja2 can mutate its inputs (|indent on a list
                # extends the list before failing).
                want = ("ok", make_env_render(src).render(**json.loads(vars_text)))
            except Exception as exc:  # noqa: BLE001 - any refusal is compared as a refusal
                want = ("error", f"{type(exc).__name__}: {exc}")
            with open(tpl_path, "w", encoding="utf-8") as f:
                f.write(src)
            r = subprocess.run([args.render, tpl_path, vars_path, str(NOW)], capture_output=True)
            text = r.stdout.decode("utf-8", "replace")
            got = ("ok", text) if r.returncode == 0 else ("error", text.strip())
            if got[0] != want[0] or (got[0] == "ok" and got[1] != want[1]):
                mismatches += 1
                if mismatches <= 5:
                    print(f"MISMATCH {src!r}\n  jinja2: {want!r:.400}\n  ours:   {got!r:.400}")
    print(f"{mismatches} mismatches in {args.n} templates (seed {args.seed})")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
