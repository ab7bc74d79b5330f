"""chat(): OpenAI-shaped completions and chunks, tool calls, response_format."""
import json

import pytest

import tessera

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "maxLength": 10}},
    "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_completion(r):
    assert r["object"] == "chat.completion"
    assert r["id"].startswith("chatcmpl-")
    assert isinstance(r["created"], int)
    assert len(r["choices"]) == 1
    ch = r["choices"][0]
    assert ch["index"] == 0
    assert ch["message"]["role"] == "assistant"
    assert ch["finish_reason"] in ("stop", "length", "tool_calls")
    u = r["usage"]
    assert u["prompt_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    return ch


def joined(chunks):
    """A stream's chunks folded into one message (as OpenAI clients do)."""
    content, reasoning, calls, finish, usage = "", "", {}, None, None
    for i, c in enumerate(chunks):
        assert c["object"] == "chat.completion.chunk"
        ch = c["choices"][0]
        d = ch["delta"]
        if i == 0:
            assert d["role"] == "assistant"
        content += d.get("content") or ""
        reasoning += d.get("reasoning_content") or ""
        for tc in d.get("tool_calls", []):
            calls[tc["index"]] = tc
        if ch["finish_reason"] is not None:
            finish = ch["finish_reason"]
            usage = c.get("usage")
    return content, reasoning, [calls[k] for k in sorted(calls)], finish, usage


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_plain_chat_and_stream_agree(which, request):
    model = request.getfixturevalue(which)
    msgs = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Name a fruit."}]
    r = model.chat(msgs, max_tokens=24, temperature=0)
    ch = check_completion(r)
    assert isinstance(ch["message"]["content"], str) and ch["message"]["content"]
    assert "tool_calls" not in ch["message"]
    content, _, calls, finish, usage = joined(model.chat(msgs, max_tokens=24, temperature=0,
                                                         stream=True))
    assert content == ch["message"]["content"]
    assert calls == []
    assert finish == ch["finish_reason"]
    assert usage == r["usage"]


def check_call(call, name):
    assert call["type"] == "function"
    assert call["id"].startswith("call_")
    assert call["function"]["name"] == name
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args, dict)
    return args


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_forced_tool_call(which, request):
    """tool_choice naming a function: the answer is that call, with arguments its schema takes
    (the tiny model's template is Hermes's: <tool_call> tags under a GBNF grammar; SmolLM2's is
    ChatML without tools: the generic format, tools described in a system turn)."""
    model = request.getfixturevalue(which)
    # The grammar bounds the call, whitespace included, so it ends; the random-weight model
    # fills the whitespace it allows, so it gets room.
    n = 96 if which == "real" else 600
    r = model.chat(ASK, tools=[WEATHER, TIME],
                   tool_choice={"type": "function", "function": {"name": "get_weather"}},
                   max_tokens=n, temperature=0)
    ch = check_completion(r)
    assert ch["finish_reason"] == "tool_calls", ch
    calls = ch["message"]["tool_calls"]
    assert len(calls) >= 1
    args = check_call(calls[0], "get_weather")
    assert set(args) == {"city", "unit"}
    assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit")
    # Streamed: the same call arrives whole in one delta.
    content, _, scalls, finish, _ = joined(model.chat(
        ASK, tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=n, temperature=0, stream=True))
    assert finish == "tool_calls"
    assert [c["function"] for c in scalls] == [c["function"] for c in calls]


def test_required_tool_call_and_round_trip(tiny):
    r = tiny.chat(ASK, tools=[WEATHER, TIME], tool_choice="required",
                  parallel_tool_calls=False, max_tokens=600, temperature=0.7, seed=3)
    ch = check_completion(r)
    calls = ch["message"]["tool_calls"]
    assert len(calls) == 1
    assert calls[0]["function"]["name"] in ("get_weather", "get_time")
    check_call(calls[0], calls[0]["function"]["name"])
    # The call and its result go back in, as an OpenAI client sends them.
    msgs = ASK + [ch["message"], {"role": "tool", "tool_call_id": calls[0]["id"],
                                  "content": "18 degrees, sunny"}]
    r2 = tiny.chat(msgs, tools=[WEATHER, TIME], tool_choice="none", max_tokens=8,
                   temperature=0)
    ch2 = check_completion(r2)
    assert "tool_calls" not in ch2["message"]


def test_tool_choice_errors(tiny):
    with pytest.raises(tessera.InvalidArgumentError, match="not among the tools"):
        tiny.chat(ASK, tools=[WEATHER], tool_choice={"type": "function",
                                                     "function": {"name": "nope"}})
    with pytest.raises(ValueError, match="tool_choice"):
        tiny.chat(ASK, tools=[WEATHER], tool_choice="sometimes")
    with pytest.raises(tessera.InvalidArgumentError, match="combined"):
        tiny.chat(ASK, tools=[WEATHER], tool_choice="required",
                  response_format={"type": "json_object"})


SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
                                  "maxItems": 3}},
          "required": ["name", "age", "tags"], "additionalProperties": False}


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_response_format_json_schema(which, request):
    model = request.getfixturevalue(which)
    r = model.chat([{"role": "user", "content": "Describe a person as JSON."}],
                   response_format={"type": "json_schema",
                                    "json_schema": {"name": "person", "schema": SCHEMA}},
                   max_tokens=128, temperature=0.7, seed=5)
    ch = check_completion(r)
    assert ch["finish_reason"] == "stop", ch
    v = json.loads(ch["message"]["content"])
    assert set(v) == {"name", "age", "tags"}
    assert isinstance(v["name"], str) and len(v["name"]) <= 16
    assert isinstance(v["age"], int) and 0 <= v["age"] <= 150
    assert isinstance(v["tags"], list) and len(v["tags"]) <= 3
    assert all(isinstance(t, str) for t in v["tags"])


def test_response_format_json_object(tiny):
    r = tiny.chat(ASK, response_format={"type": "json_object"}, max_tokens=200,
                  temperature=0.5, seed=9)
    ch = check_completion(r)
    if ch["finish_reason"] == "stop":
        assert isinstance(json.loads(ch["message"]["content"]), dict)
    else:  # cut by max_tokens: still the start of an object
        assert ch["message"]["content"].lstrip().startswith("{")


def test_bad_response_format(tiny):
    with pytest.raises(tessera.InvalidArgumentError, match="response_format"):
        tiny.chat(ASK, response_format={"type": "yaml"})
