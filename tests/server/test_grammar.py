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



def test_too_many_open_alternatives_is_400(server):
    """A schema the compiler takes but whose alternatives, once open together, pass the matcher's
    parser-stack limit: the answer is a 400 naming the limit (it was a 500 "no token of the
    vocabulary can continue the output"), streamed or not."""
    from conftest import TINY
    wide = {"anyOf": [{"type": "object", "properties": {"k%d" % i: {"const": i}}}
                      for i in range(3000)]}
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 16,
            "response_format": {"type": "json_schema", "json_schema": {"name": "w",
                                                                       "schema": wide}}}
    status, _, data = server.request("POST", "/v1/chat/completions", body)
    assert status in (200, 400) if TINY else status == 400, data
    if status == 400:
        err = json.loads(data)["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == "response_format", err
        assert "4096 parser stacks" in err["message"], err
    status, _, data = server.request("POST", "/v1/chat/completions", dict(body, stream=True))
    assert status == 200
    if not TINY:
        assert b"4096 parser stacks" in data and b"invalid_request_error" in data, data
    assert b'"code":500' not in data and b"server_error" not in data, data
    assert server.request("GET", "/health")[0] == 200



def test_schema_without_finite_values_is_named(server):
    """A '$ref' cycle every value must go round again (a required property, minItems) has no
    finite instance: the 400 says so, not "the generated grammar does not compile (a bug)"."""
    for schema in ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
                   {"type": "array", "items": {"$ref": "#"}, "minItems": 1}):
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "c", "schema": schema}}}
        status, _, data = server.request("POST", "/v1/chat/completions", body)
        assert status == 400, data
        err = json.loads(data)["error"]
        assert "no finite JSON value" in err["message"] and "a bug" not in err["message"], err
        assert err["param"] == "response_format", err


def test_tool_parameters_refs_resolve_in_the_parameters(server):
    """tool_choice "required" embeds each tool's parameters in one calls schema; their local
    "$ref"s ("#/$defs/n", "#", as pydantic writes them) still mean the parameters' own root
    (they were a 400 "'$ref': '#/$defs/n' does not resolve")."""
    params = {"type": "object", "$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "properties": {"a": {"$ref": "#/$defs/n"},
                             "b": {"const": {"$ref": "#/not/a/ref"}}},
              "required": ["a", "b"]}
    other = {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}
    tool = {"type": "function", "function": {"name": "f", "parameters": params}}
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        body = {"messages": [{"role": "user", "content": "call f"}], "max_tokens": 48,
                "tools": [other, tool], "tool_choice": choice}
        status, _, data = server.request("POST", "/v1/chat/completions", body)
        assert status == 200, data
        msg = json.loads(data)["choices"][0]["message"]
        for call in msg.get("tool_calls") or []:
            if call["function"]["name"] == "f":
                args = json.loads(call["function"]["arguments"])
                assert 0 <= args["a"] <= 9 and args["b"] == {"$ref": "#/not/a/ref"}, args


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"], "additionalProperties": False}}}


def check_calls(choice, names, cut=False):
    calls = choice.message.tool_calls
    assert calls, choice.message.content
    # Parallel calls may go on until max_tokens cuts the last one (left as content).
    assert choice.finish_reason == "tool_calls" or (cut and choice.finish_reason == "length")
    for c in calls:
        assert c.function.name in names
        args = json.loads(c.function.arguments)
        if c.function.name == "get_weather":
            assert list(args) == ["city"] and isinstance(args["city"], str)
        else:
            assert args == {"zone": "UTC"} or args == {"zone": "CET"}


@pytest.fixture(scope="module")
def hermes_client(tmp_path_factory):
    openai = pytest.importorskip("openai")
    from conftest import Server
    from test_tools import TEMPLATE
    path = tmp_path_factory.mktemp("tpl") / "hermes.jinja"
    path.write_text(TEMPLATE)
    s = Server(["--ctx", "1024", "--quiet", "--chat-template-file", str(path)])
    yield openai.OpenAI(base_url=s.url + "/v1", api_key=s.api_key, max_retries=0, timeout=120)
    rc, log = s.stop()
    assert rc == 0, log


@pytest.mark.real_model
@pytest.mark.parametrize("which", ["hermes", "generic"])
def test_tool_choice_constrains_the_call(which, hermes_client, client):
    c = hermes_client if which == "hermes" else client
    model = c.models.list().data[0].id
    user = [{"role": "user", "content": "What is the weather in Oslo, and the time?"}]
    r = c.chat.completions.create(model=model, messages=user, tools=[WEATHER, TIME],
                                  tool_choice="required", temperature=0.9, seed=4, n=3,
                                  max_tokens=120, parallel_tool_calls=False)
    for ch in r.choices:
        check_calls(ch, ("get_weather", "get_time"))
        assert len(ch.message.tool_calls) == 1
    r = c.chat.completions.create(model=model, messages=user, tools=[WEATHER, TIME],
                                  tool_choice="required", temperature=0.9, seed=4,
                                  max_tokens=120)
    check_calls(r.choices[0], ("get_weather", "get_time"), cut=True)
    r = c.chat.completions.create(model=model, messages=user, tools=[WEATHER, TIME],
                                  tool_choice={"type": "function",
                                               "function": {"name": "get_time"}},
                                  temperature=0.9, seed=5, max_tokens=120,
                                  parallel_tool_calls=False)
    check_calls(r.choices[0], ("get_time",))
    assert len(r.choices[0].message.tool_calls) == 1
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=model, messages=user, tools=[WEATHER],
                                  tool_choice="required",
                                  response_format={"type": "json_object"})
    assert "cannot be combined" in str(e.value)


def test_metrics_count_masks(client, model_id, server):
    client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_object"}, max_tokens=8, temperature=0)
    status, _, body = server.request("GET", "/metrics")
    assert status == 200
    masks = [line for line in body.decode().splitlines()
             if line.startswith("tessera_grammar_masks_total ")]
    assert masks and float(masks[0].split()[1]) >= 8
