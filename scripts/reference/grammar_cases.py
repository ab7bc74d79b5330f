#!/usr/bin/env python3
"""Writes tests/data/grammar/maskbench/*.json: small MaskBench-format cases (schema, tests with
valid/invalid labels checked by jsonschema, Draft 2020-12 with format checking). The real
MaskBench files have no licence file, so CI uses these. Usage: grammar_cases.py OUT_DIR"""
import json, jsonschema, os, sys
out = sys.argv[1]
C = {
 "object_required": ({"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"],"additionalProperties":False},
   [{"id":1,"name":"a"},{"id":-20,"name":"é ü ✓"}], [{"id":1},{"id":"1","name":"a"},{"id":1,"name":"a","x":2},[]]),
 "enum_const": ({"type":"object","properties":{"kind":{"enum":["a","b",3,None]},"v":{"const":"fixed"}},"required":["kind","v"]},
   [{"kind":"a","v":"fixed"},{"kind":3,"v":"fixed"},{"kind":None,"v":"fixed"}], [{"kind":"c","v":"fixed"},{"kind":"a","v":"other"}]),
 "array_bounds": ({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":3},
   [[0],[1,2,9]], [[],[1,2,3,4],[10],[-1]]),
 "string_length": ({"type":"string","minLength":2,"maxLength":5},
   ["ab","abcde","\u00e9\u00e9"], ["a","abcdef"]),
 "number_bounds": ({"type":"number","minimum":-1.5,"maximum":100},
   [0,-1.5,99.25,100], [-2,100.5]),
 "integer_excl": ({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10},
   [1,9], [0,10,5.5]),
 "anyof_types": ({"anyOf":[{"type":"string"},{"type":"integer"}]},
   ["x",5], [1.5,True,None]),
 "oneof_objects": ({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":False},
                             {"type":"object","properties":{"b":{"type":"integer"}},"required":["b"],"additionalProperties":False}]},
   [{"a":"x"},{"b":2}], [{"c":1},{"a":1}]),
 "allof_merge": ({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]},
   [{"a":1,"b":True}], [{"a":1},{"b":False}]),
 "ref_defs": ({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":False}},
              "type":"array","items":{"$ref":"#/$defs/pt"}},
   [[],[{"x":1,"y":2.5}]], [[{"x":1}],[{"x":1,"y":"2"}]]),
 "recursive_tree": ({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":False}},"$ref":"#/$defs/node"},
   [{"v":1},{"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]}], [{"v":1,"kids":[{"w":2}]},{"kids":[]}]),
 "prefix_items": ({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":False},
   [["a",1],["a"],[]], [["a",1,2],[1,"a"]]),
 "pattern_simple": ({"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},
   ["AB-123"], ["ab-123","AB-12","AB-1234"]),
 "format_date": ({"type":"object","properties":{"d":{"type":"string","format":"date"}},"required":["d"],"additionalProperties":False},
   [{"d":"2024-02-29"}], [{"d":"2024-13-01"},{"d":"yesterday"}]),
 "format_uuid": ({"type":"string","format":"uuid"},
   ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567"]),
 "nullable_union": ({"type":["string","null"]},
   ["s",None], [1,False]),
 "additional_typed": ({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}},
   [{"a":1},{"a":1,"b":"x"},{"b":"y"}], [{"b":2}]),
 "boolean_and_escapes": ({"type":"object","properties":{"flag":{"type":"boolean"},"text":{"type":"string"}},"required":["flag","text"],"additionalProperties":False},
   [{"flag":True,"text":"quote \" backslash \\ newline \n tab \t"},{"flag":False,"text":""}], [{"flag":"true","text":""}]),
 "nested_arrays": ({"type":"array","items":{"type":"array","items":{"type":"boolean"},"maxItems":2},"maxItems":2},
   [[[True],[False,True]],[]], [[[True,True,True]],[[1]]]),
 "empty_schema_any": ({},
   [1,"x",{"a":[1,{"b":None}]},[True,False]], []),
}
n = 0
for name,(schema,valid,invalid) in C.items():
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    tests = []
    for d in valid:
        assert v.is_valid(d), (name, d)
        tests.append({"description":"valid","data":d,"valid":True})
    for d in invalid:
        assert not v.is_valid(d), (name, d)
        tests.append({"description":"invalid","data":d,"valid":False})
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump({"description": name, "schema": schema, "tests": tests}, f, indent=2, ensure_ascii=False)
        f.write("\n")
    n += 1
print(n, "cases")
