"""Tool calling and reasoning through the official openai client against `tessera serve`.

SmolLM2-135M does not call tools on its own, so each conversation shows it two earlier calls
(few-shot, greedy): the model then writes the third call itself, and the server must turn that
text into `tool_calls`, streamed and not. Two template paths are covered: the model's own
template, which does not render tools (the server describes them in the system turn and reads
the generic JSON answer), and a Hermes-style template given with --chat-template-file
(<tool_call> tags, tools listed by the template)."""
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HERMES = os.path.join(HERE, "data", "tools_chatml.jinja")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}


def few_shot(call_text, city="Tokyo"):
    """Two earlier questions answered by a call in the model's format, then the real one."""
    msgs = []
    for c in ("London", "Paris"):
        msgs.append({"role": "user", "content": f"What is the weather in {c}?"})
        msgs.append({"role": "assistant", "content": call_text(c)})
    msgs.append({"role": "user", "content": f"What is the weather in {city}?"})
    return msgs


def generic_call(city):
    return json.dumps({"name": "get_weather", "arguments": {"city": city}})


def hermes_call(city):
    return "<tool_call>" + generic_call(city) + "</tool_call>"


def check_call(msg, city):
    assert msg.tool_calls, f"no tool call parsed from {msg.content!r}"
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": city}
    assert not msg.content


def stream_call(client, model_id, messages):
    """Streams a request; returns (tool call deltas merged per index, content, finishes)."""
    calls, content, finishes = {}, "", []
    for chunk in client.chat.completions.create(model=model_id, messages=messages,
                                                tools=[WEATHER], temperature=0, max_tokens=60,
                                                stream=True):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        if ch.finish_reason:
            finishes.append(ch.finish_reason)
        content += ch.delta.content or ""
        for d in ch.delta.tool_calls or []:
            slot = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            if d.id:
                assert slot["id"] is None, "a call's id is sent once"
                slot["id"] = d.id
            if d.function and d.function.name:
                slot["name"] += d.function.name
            if d.function and d.function.arguments:
                slot["arguments"] += d.function.arguments
    return calls, content, finishes


def test_tool_call_generic(client, model_id):
    """The model's own template: tools described by the server, the JSON answer parsed."""
    r = client.chat.completions.create(model=model_id, messages=few_shot(generic_call),
                                       tools=[WEATHER], temperature=0, max_tokens=60)
    check_call(r.choices[0].message, "Tokyo")
    assert r.choices[0].finish_reason == "tool_calls"

    calls, content, finishes = stream_call(client, model_id, few_shot(generic_call))
    assert finishes == ["tool_calls"] and content == ""
    assert list(calls) == [0] and calls[0]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {"city": "Tokyo"}

    # tool_choice "none": the same answer stays content.
    r = client.chat.completions.create(model=model_id, messages=few_shot(generic_call),
                                       tools=[WEATHER], tool_choice="none", temperature=0,
                                       max_tokens=60)
    assert not r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason in ("stop", "length")


@pytest.fixture(scope="module")
def hermes(make_server_module):
    return make_server_module("--chat-template-file", HERMES, "--ctx", "2048", "--quiet")


@pytest.fixture(scope="module")
def make_server_module():
    from conftest import Server
    started = []

    def make(*args):
        s = Server(args)
        started.append(s)
        return s

    yield make
    for s in started:
        rc, log = s.stop()
        assert rc == 0, log


def test_tool_round_trip_hermes(hermes):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=hermes.url + "/v1", api_key=hermes.api_key, max_retries=0,
                           timeout=120)
    model_id = client.models.list().data[0].id
    msgs = few_shot(hermes_call)
    r = client.chat.completions.create(model=model_id, messages=msgs, tools=[WEATHER],
                                       temperature=0, max_tokens=60)
    msg = r.choices[0].message
    check_call(msg, "Tokyo")
    assert r.choices[0].finish_reason == "tool_calls"

    # The round trip: the call goes back as an assistant turn, its result as a tool turn.
    msgs.append({"role": "assistant", "content": None,
                 "tool_calls": [tc.model_dump() for tc in msg.tool_calls]})
    msgs.append({"role": "tool", "tool_call_id": msg.tool_calls[0].id,
                 "content": json.dumps({"temperature_c": 21, "sky": "clear"})})
    status, body = hermes.json("POST", "/tokenize", {"messages": msgs, "tools": [WEATHER],
                                                     "add_generation_prompt": True})
    assert status == 200, body
    r2 = client.chat.completions.create(model=model_id, messages=msgs, tools=[WEATHER],
                                        temperature=0, max_tokens=30)
    assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens

    # Streaming gives the same call in deltas.
    calls, content, finishes = stream_call(client, model_id, few_shot(hermes_call))
    assert finishes == ["tool_calls"] and content == ""
    assert calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == {"city": "Tokyo"}


def test_tools_bad_requests(client, model_id):
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "x"}],
                                       tools=[WEATHER], tool_choice={"type": "function",
                                                                     "function": {"name": "nope"}})
    assert "not in tools" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "x"}],
                                       tools=[{"type": "function", "function": {"name": ""}}])
    assert "tools[0].function.name" in str(e.value)


def test_reasoning(hermes):
    """enable_thinking (chat_template_kwargs) opens <think> in the prompt: what the model writes
    up to </think> is reasoning_content, streamed and not, and never content."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=hermes.url + "/v1", api_key=hermes.api_key, max_retries=0,
                           timeout=120)
    model_id = client.models.list().data[0].id
    msgs = []
    for q, a in (("Hi!", "Hello! How can I help?"), ("Thanks!", "You are welcome.")):
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant",
                     "content": f"<think>\nThe user wrote {q}. I answer politely.\n</think>\n{a}"})
    msgs.append({"role": "user", "content": "Good morning!"})
    kw = {"chat_template_kwargs": {"enable_thinking": True}}
    status, tok = hermes.json("POST", "/tokenize", {"messages": msgs, **kw})
    assert status == 200
    r = client.chat.completions.create(model=model_id, messages=msgs, temperature=0,
                                       max_tokens=60, extra_body=kw)
    msg = r.choices[0].message
    reasoning = msg.model_extra.get("reasoning_content") if msg.model_extra else None
    assert reasoning, f"no reasoning_content: {msg}"
    assert "<think>" not in (msg.content or "") and "</think>" not in (msg.content or "")
    assert "</think>" not in reasoning

    streamed_r, streamed_c = "", ""
    for chunk in client.chat.completions.create(model=model_id, messages=msgs, temperature=0,
                                                max_tokens=60, extra_body=kw, stream=True):
        if chunk.choices:
            d = chunk.choices[0].delta
            streamed_r += (d.model_extra or {}).get("reasoning_content") or ""
            streamed_c += d.content or ""
    assert streamed_r == reasoning
    assert streamed_c == (msg.content or "")

    # Without the kwarg the prompt opens no <think>, and the answer is content.
    r = client.chat.completions.create(model=model_id, temperature=0, max_tokens=20,
                                       messages=[{"role": "user", "content": "Hi!"}])
    assert r.choices[0].message.content
