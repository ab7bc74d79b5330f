"""Tool calling and reasoning through the openai client, end to end.

The small test model knows no tool format, so it cannot be made to call a tool without a
grammar; these tests check what it can: requests with tools and tool round trips are served,
answers come back in OpenAI's shapes, a streamed answer adds up to the non-streamed one, and a
template whose generation prompt opens a <think> block makes the answer reasoning_content.
The parsing of each family's calls is tested in test_chat_out.c with recorded outputs.
"""
import json

import pytest

from conftest import HERMES_TEMPLATE as TEMPLATE  # noqa: F401 (other files import it)

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]


@pytest.fixture(scope="module")
def tclient(tool_server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=tool_server.url + "/v1", api_key=tool_server.api_key,
                         max_retries=0, timeout=120)


def model_of(client):
    return client.models.list().data[0].id


def collect_stream(stream):
    """The streamed deltas of choice 0 put back together as a message."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in stream:
        for ch in chunk.choices:
            d = ch.delta
            content += d.content or ""
            reasoning += getattr(d, "reasoning_content", None) or ""
            for tc in d.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    call["id"] = tc.id
                    assert tc.type == "function"
                if tc.function and tc.function.name:
                    call["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
            if ch.finish_reason:
                finish = ch.finish_reason
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


def test_tools_stream_matches_whole(tclient):
    model = model_of(tclient)
    args = dict(model=model, tools=TOOLS, max_tokens=24, temperature=0, seed=5,
                messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    r = tclient.chat.completions.create(**args)
    m = r.choices[0].message
    assert m.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
             for c in m.tool_calls or []]
    for c in calls:
        assert c["id"].startswith("call_")
        assert isinstance(json.loads(c["arguments"]), dict)
    content, reasoning, scalls, finish = collect_stream(
        tclient.chat.completions.create(stream=True, **args))
    assert content == (m.content or "")
    assert reasoning == (getattr(m, "reasoning_content", None) or "")
    assert [(c["name"], c["arguments"]) for c in scalls] == \
        [(c["name"], c["arguments"]) for c in calls]
    assert finish == r.choices[0].finish_reason


def test_tool_round_trip_accepted(tclient):
    model = model_of(tclient)
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_abc", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temp_c\": 21}"},
    ]
    r = tclient.chat.completions.create(model=model, tools=TOOLS, messages=messages,
                                        max_tokens=8, temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens > 20


def test_tool_choice_none_and_named(tclient):
    model = model_of(tclient)
    for choice in ("none", "required",
                   {"type": "function", "function": {"name": "get_weather"}}):
        r = tclient.chat.completions.create(
            model=model, tools=TOOLS, tool_choice=choice, max_tokens=6, temperature=0,
            parallel_tool_calls=False,
            messages=[{"role": "user", "content": "Weather in Oslo?"}])
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
        if choice == "none":
            assert not r.choices[0].message.tool_calls


def test_reasoning_opened_by_the_prompt(tclient):
    """The generation prompt ends with "<think>\\n": the answer is reasoning until </think>,
    and the small model never closes it, so all of it is reasoning_content."""
    model = model_of(tclient)
    args = dict(model=model, max_tokens=16, temperature=0, seed=1,
                extra_body={"chat_template_kwargs": {"enable_thinking": True}},
                messages=[{"role": "user", "content": "Count to three."}])
    r = tclient.chat.completions.create(**args)
    m = r.choices[0].message
    reasoning = getattr(m, "reasoning_content", None) or ""
    assert reasoning != ""
    content, sreasoning, calls, finish = collect_stream(
        tclient.chat.completions.create(stream=True, **args))
    assert (content, sreasoning, calls) == (m.content, reasoning, [])
    assert finish == r.choices[0].finish_reason

    # Without the opened block the same question is answered as content.
    r2 = tclient.chat.completions.create(
        model=model, max_tokens=16, temperature=0, seed=1,
        messages=[{"role": "user", "content": "Count to three."}])
    assert r2.choices[0].message.content != ""
    assert getattr(r2.choices[0].message, "reasoning_content", None) is None


def few_shot(city, n=2):
    """Earlier turns where the assistant called get_weather: enough for the small model to
    write a call itself (it leaves out the opening <tool_call>, which the parser accepts)."""
    msgs = []
    for i, c in enumerate(["Paris", "Oslo", "Madrid"][:n]):
        msgs.append({"role": "user", "content": f"What is the weather in {c}?"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}]})
    msgs.append({"role": "user", "content": f"What is the weather in {city}?"})
    return msgs


@pytest.mark.real_model
def test_model_calls_a_tool(tclient):
    """Greedy SmolLM2-135M-Instruct answers the few-shot prompt with a call (checked by hand:
    '{"name": "get_weather", "arguments": {"city": "Rome"}}\\n</tool_call>')."""
    model = model_of(tclient)
    args = dict(model=model, tools=TOOLS, max_tokens=40, temperature=0,
                messages=few_shot("Rome"))
    r = tclient.chat.completions.create(**args)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert ch.message.content is None
    assert len(ch.message.tool_calls) == 1
    call = ch.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_") and len(call.id) == 29
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Rome"}

    content, reasoning, calls, finish = collect_stream(
        tclient.chat.completions.create(stream=True, **args))
    assert (content, reasoning, finish) == ("", "", "tool_calls")
    assert [(c["name"], c["arguments"]) for c in calls] == \
        [("get_weather", call.function.arguments)]
    assert calls[0]["id"].startswith("call_") and calls[0]["id"] != call.id

    # The round trip: the call and its result go back, the model answers.
    messages = args["messages"] + [
        {"role": "assistant", "content": None,
         "tool_calls": [c.model_dump(exclude_none=True) for c in ch.message.tool_calls]},
        {"role": "tool", "tool_call_id": call.id, "content": "{\"temp_c\": 24}"},
    ]
    r2 = tclient.chat.completions.create(model=model, tools=TOOLS, messages=messages,
                                         max_tokens=8, temperature=0)
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens

    # tool_choice "none": the same answer is text.
    r3 = tclient.chat.completions.create(tool_choice="none", **args)
    assert r3.choices[0].finish_reason == "stop"
    assert r3.choices[0].message.tool_calls is None
    assert "get_weather" in r3.choices[0].message.content


@pytest.mark.real_model
def test_each_choice_has_its_own_parser(tclient):
    """n=2: both choices are parsed on their own, streamed and not."""
    model = model_of(tclient)
    args = dict(model=model, tools=TOOLS, max_tokens=40, temperature=0, n=2,
                messages=few_shot("Rome"))
    r = tclient.chat.completions.create(**args)
    assert [c.finish_reason for c in r.choices] == ["tool_calls", "tool_calls"]
    ids = [c.message.tool_calls[0].id for c in r.choices]
    assert ids[0] != ids[1]
    per = {}
    for chunk in tclient.chat.completions.create(stream=True, **args):
        for ch in chunk.choices:
            p = per.setdefault(ch.index, {"args": "", "names": [], "finish": None})
            for tc in ch.delta.tool_calls or []:
                assert tc.index == 0
                if tc.function.name:
                    p["names"].append(tc.function.name)
                p["args"] += tc.function.arguments or ""
            p["finish"] = ch.finish_reason or p["finish"]
    for i in (0, 1):
        assert per[i]["names"] == ["get_weather"]
        assert json.loads(per[i]["args"]) == {"city": "Rome"}
        assert per[i]["finish"] == "tool_calls"


@pytest.mark.real_model
def test_logprobs_and_stop_with_tools(tclient):
    """Logprobs cover every token whether its text became content or a call, streamed and
    not; a stop string still ends the answer before the parser sees it."""
    model = model_of(tclient)
    args = dict(model=model, tools=TOOLS, max_tokens=40, temperature=0, logprobs=True,
                top_logprobs=2, messages=few_shot("Rome"))
    r = tclient.chat.completions.create(**args)
    whole = [e.token for e in r.choices[0].logprobs.content]
    assert r.choices[0].finish_reason == "tool_calls"
    streamed = []
    for chunk in tclient.chat.completions.create(stream=True, **args):
        for ch in chunk.choices:
            if ch.logprobs and ch.logprobs.content:
                streamed += [e.token for e in ch.logprobs.content]
    assert streamed == whole

    # A stop string inside the call: the call is cut, so its text is content.
    r2 = tclient.chat.completions.create(model=model, tools=TOOLS, max_tokens=40, temperature=0,
                                         stop=["Rome"], messages=few_shot("Rome"))
    ch = r2.choices[0]
    assert ch.finish_reason == "stop"
    assert ch.message.tool_calls is None
    assert ch.message.content.startswith("{\"name\": \"get_weather\"")


@pytest.mark.real_model
def test_model_template_without_tools(client, model_id):
    """The shared server runs the model's own template, which never mentions tools: the server
    describes them in the system turn and reads the generic answer (a bare JSON call)."""
    msgs = []
    for c in ("London", "Paris"):
        msgs.append({"role": "user", "content": f"What is the weather in {c}?"})
        msgs.append({"role": "assistant",
                     "content": json.dumps({"name": "get_weather", "arguments": {"city": c}})})
    msgs.append({"role": "user", "content": "What is the weather in Tokyo?"})
    args = dict(model=model_id, tools=TOOLS, max_tokens=40, temperature=0, messages=msgs)
    r = client.chat.completions.create(**args)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch.message
    assert [(c.function.name, json.loads(c.function.arguments))
            for c in ch.message.tool_calls] == [("get_weather", {"city": "Tokyo"})]
    content, reasoning, calls, finish = collect_stream(
        client.chat.completions.create(stream=True, **args))
    assert (content, reasoning, finish) == ("", "", "tool_calls")
    assert json.loads(calls[0]["arguments"]) == {"city": "Tokyo"}


def test_tools_bad_requests(client, model_id):
    openai = pytest.importorskip("openai")
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=user, tools=TOOLS,
                                       tool_choice={"type": "function",
                                                    "function": {"name": "nope"}})
    assert "not in tools" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=user,
                                       tools=[{"type": "function", "function": {"name": ""}}])
    assert "tools[0].function.name" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=user, tool_choice="required")
    assert "needs tools" in str(e.value)
