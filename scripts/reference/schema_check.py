#!/usr/bin/env python3
"""Labels JSON Schema test instances with the reference validator (the `jsonschema` package).

    /work/venv-ref/bin/python scripts/reference/schema_check.py SRC.json OUT.json

SRC holds cases [{"name", "schema", "instances": [TEXT, ...]}] where each instance is JSON text
(compact, as a model would write it). OUT gets the same cases with "instances": [[TEXT, valid]]:
valid is what jsonschema says (the schema's own draft, or 2020-12 when it names none; formats
checked). Instances that are not JSON are labelled false. An instance that starts with "!" is
written without the "!" and marked "restricted": the document is valid but outside the
compiler's documented subset (property order, whitespace bound...), so the test expects it
rejected. tests/grammar/test_schema.c reads OUT and checks that the compiled grammar accepts
exactly the valid, unrestricted instances.
"""
import json
import sys

import jsonschema


def label(schema, text):
    try:
        inst = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return v.is_valid(inst)


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        cases = json.load(f)
    res = []
    for c in cases:
        insts = []
        for t in c["instances"]:
            restricted = t.startswith("!")
            text = t[1:] if restricted else t
            ok = label(c["schema"], text)
            if restricted and not ok:
                sys.exit(f"{c['name']}: restricted instance {text!r} is not valid")
            insts.append([text, ok, restricted] if restricted else [text, ok])
        res.append({"name": c["name"], "schema": c["schema"], "instances": insts})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = sum(len(c["instances"]) for c in res)
    v = sum(1 for c in res for i in c["instances"] if i[1])
    print(f"{len(res)} schemas, {n} instances, {v} valid")


if __name__ == "__main__":
    main()
