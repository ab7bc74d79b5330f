"""Constrained output through the openai client: response_format json_object / json_schema,
llama-server's grammar (GBNF) and json_schema fields, and the refusals of the schema compiler.

The small test model does not write valid JSON on its own; with the grammar every answer that
finishes with "stop" must parse and fit its schema (checked by hand below, field by field).
"""
import json
import time

import pytest

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"enum": ["Paris", "Rome", "Oslo"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}


def check_person(text):
    v = json.loads(text)
    assert isinstance(v, dict)
    assert set(v) <= {"name", "age", "city", "tags"} and {"name", "age", "city"} <= set(v)
    assert isinstance(v["name"], str) and len(v["name"]) <= 20
    assert isinstance(v["age"], int) and 0 <= v["age"] <= 150
    assert v["city"] in ("Paris", "Rome", "Oslo")
    if "tags" in v:
        assert isinstance(v["tags"], list) and len(v["tags"]) <= 3
        assert all(isinstance(t, str) and len(t) <= 10 for t in v["tags"])
    return v


def person_format():
    return {"type": "json_schema",
            "json_schema": {"name": "person", "strict": True, "schema": PERSON}}


def test_chat_json_schema(client, model_id):
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format=person_format(), temperature=0.9, seed=3, n=3, max_tokens=200)
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.finish_reason == "stop", c.message.content
        check_person(c.message.content)


def test_chat_json_schema_streamed(client, model_id):
    stream = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "A person, please."}],
        response_format=person_format(), temperature=0, max_tokens=200, stream=True)
    text, finish = "", None
    for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert finish == "stop"
    check_person(text)


def test_completions_json_object(client, model_id):
    r = client.completions.create(model=model_id, prompt="The answer as JSON:",
                                  max_tokens=120, temperature=0.7, seed=5,
                                  extra_body={"response_format": {"type": "json_object"}})
    c = r.choices[0]
    if c.finish_reason == "stop":
        assert isinstance(json.loads(c.text), dict)
    else:
        assert c.text.lstrip().startswith("{")


def test_gbnf_grammar_and_json_schema_fields(client, model_id):
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "Is the sky blue?"}],
        temperature=1.0, seed=1, n=4, max_tokens=10,
        extra_body={"grammar": 'root ::= "yes" | "no" | "maybe"'})
    for c in r.choices:
        assert c.message.content in ("yes", "no", "maybe")
        assert c.finish_reason == "stop"
    r = client.completions.create(
        model=model_id, prompt="Pick a number:", max_tokens=20, temperature=1.0, seed=2,
        extra_body={"json_schema": {"type": "integer", "minimum": 10, "maximum": 99}})
    assert 10 <= json.loads(r.choices[0].text) <= 99


def test_refusals(client, model_id):
    openai = pytest.importorskip("openai")
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=model_id, messages=user,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "n", "schema": {"not": {"type": "null"}}}})
    assert "'not'" in str(e.value) and e.value.body["param"] == "response_format"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=user,
                                       extra_body={"grammar": "root ::= missing"})
    assert e.value.body["param"] == "grammar" and "missing" in str(e.value)
    # Deep nesting and endless recursion are refused quickly.
    deep = {"type": "object"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    t0 = time.time()
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=model_id, messages=user,
            response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": deep}})
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=model_id, messages=user,
            response_format={"type": "json_schema", "json_schema": {
                "name": "r", "schema": {"$ref": "#/$defs/a",
                                        "$defs": {"a": {"$ref": "#/$defs/a"}}}}})
    assert time.time() - t0 < 5
