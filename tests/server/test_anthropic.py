"""Anthropic Messages (/v1/messages, /v1/messages/count_tokens) through the official `anthropic`
SDK, end to end: plain and streamed answers (with Anthropic's event order), a tool round trip
(tool_use, then tool_result), JSON through tool forcing, stop sequences, x-api-key and Bearer
auth, count_tokens, and errors raised as the SDK's exception classes carrying our message.

The same engine serves both dialects, so a greedy answer through /v1/messages equals the one
through /v1/chat/completions for the same conversation.
"""
import json

import pytest


anthropic = pytest.importorskip("anthropic")

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object",
                     "properties": {"city": {"type": "string", "maxLength": 24}},
                     "required": ["city"]},
}
UNIT = {
    "name": "pick_unit",
    "description": "Picks a temperature unit",
    "input_schema": {"type": "object",
                     "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                     "required": ["unit"]},
}


def make_client(server, **kw):
    args = dict(base_url=server.url, max_retries=0, timeout=120)
    if "auth_token" not in kw:
        args["api_key"] = server.api_key
    args.update(kw)
    return anthropic.Anthropic(**args)


@pytest.fixture(scope="module")
def aclient(server):
    return make_client(server)


@pytest.fixture(scope="module")
def tclient(tool_server):
    c = make_client(tool_server)
    c.model_id = tool_server.json("GET", "/v1/models")[1]["data"][0]["id"]
    return c


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def sse(server, body, headers=None):
    """(event name, data) pairs of a raw streamed /v1/messages answer."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    h = {"Content-Type": "application/json", "x-api-key": server.api_key,
         "anthropic-version": "2023-06-01"}
    h.update(headers or {})
    conn.request("POST", "/v1/messages", body=json.dumps(body), headers=h)
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    raw = resp.read().decode()
    conn.close()
    out = []
    for frame in raw.split("\n\n"):
        if not frame.strip():
            continue
        lines = frame.split("\n")
        assert lines[0].startswith("event: "), frame
        assert lines[1].startswith("data: "), frame
        name, data = lines[0][7:], json.loads(lines[1][6:])
        assert data["type"] == name
        out.append((name, data))
    return out


def test_plain(aclient, model_id):
    m = aclient.messages.create(model=model_id, max_tokens=8, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": "Say hello."}])
    assert m.type == "message" and m.role == "assistant"
    assert m.model == model_id
    assert m.id.startswith("msg")
    assert [b.type for b in m.content] == ["text"]
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.stop_sequence is None
    assert 0 < m.usage.output_tokens <= 8
    assert m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0) > 5


def test_any_model_name(aclient, model_id):
    """Coding agents send their own model names: any is served, the answer carries ours, and it
    is the answer the server's own name gets."""
    args = dict(max_tokens=8, extra_body={"temperature": 0},
                messages=[{"role": "user", "content": "Say hello."}])
    m = aclient.messages.create(model="claude-sonnet-4-5", **args)
    assert m.model == model_id
    assert m.content[0].text == aclient.messages.create(model=model_id, **args).content[0].text


def test_same_engine_as_openai(aclient, client, model_id):
    """system (as blocks) + user: the greedy answer equals OpenAI chat's for the same turns."""
    m = aclient.messages.create(
        model=model_id, max_tokens=12, extra_body={"temperature": 0},
        system=[{"type": "text", "text": "You are terse."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}])
    r = client.chat.completions.create(
        model=model_id, max_tokens=12, extra_body={"temperature": 0},
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Name a colour."}])
    assert text_of(m) == r.choices[0].message.content
    assert m.usage.output_tokens == r.usage.completion_tokens
    want = {"stop": "end_turn", "length": "max_tokens"}[r.choices[0].finish_reason]
    assert m.stop_reason == want


def test_stream_event_order(server, aclient, model_id):
    body = {"model": model_id, "max_tokens": 10, "temperature": 0, "stream": True,
            "messages": [{"role": "user", "content": "Count: one, two,"}]}
    events = sse(server, body)
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    middle = names[2:-2]
    # Blocks: start, deltas, stop; indices count up from 0.
    i, index = 0, 0
    while i < len(middle):
        assert middle[i] == "content_block_start"
        assert events[2 + i][1]["index"] == index
        i += 1
        while middle[i] == "content_block_delta":
            assert events[2 + i][1]["index"] == index
            i += 1
        assert middle[i] == "content_block_stop"
        i += 1
        index += 1
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == []
    assert start["stop_reason"] is None and start["usage"]["input_tokens"] > 0
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] in ("end_turn", "max_tokens")
    assert 0 < delta["usage"]["output_tokens"] <= 10
    # The SDK's stream adds up to the non-streamed answer.
    args = dict(model=model_id, max_tokens=10, extra_body={"temperature": 0},
                messages=[{"role": "user", "content": "Count: one, two,"}])
    with aclient.messages.stream(**args) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    whole = aclient.messages.create(**args)
    assert "".join(pieces) == text_of(whole) == text_of(final)
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_tool_round_trip(tclient):
    model = tclient.model_id
    args = dict(model=model, max_tokens=200, extra_body={"temperature": 0}, tools=[WEATHER],
                tool_choice={"type": "tool", "name": "get_weather",
                             "disable_parallel_tool_use": True},
                messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    m = tclient.messages.create(**args)
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1, m.content
    assert uses[0].name == "get_weather"
    assert isinstance(uses[0].input, dict) and isinstance(uses[0].input.get("city"), str)
    assert m.stop_reason == "tool_use"
    # Streamed: the same call, as content_block_start + input_json_delta.
    with tclient.messages.stream(**args) as stream:
        final = stream.get_final_message()
    suses = [b for b in final.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in suses] == [(u.name, u.input) for u in uses]
    assert final.stop_reason == "tool_use"
    # The result goes back as a tool_result answering the tool_use's id.
    r = tclient.messages.create(
        model=model, max_tokens=8, extra_body={"temperature": 0}, tools=[WEATHER],
        messages=[{"role": "user", "content": "What is the weather in Paris?"},
                  {"role": "assistant", "content": m.content},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": uses[0].id,
                       "content": [{"type": "text", "text": "21 C and sunny"}]},
                      {"type": "text", "text": "Thanks!"}]}])
    assert r.role == "assistant" and r.stop_reason in ("end_turn", "max_tokens", "tool_use")
    count = tclient.messages.count_tokens(
        model=model, tools=[WEATHER],
        messages=[{"role": "user", "content": "What is the weather in Paris?"},
                  {"role": "assistant", "content": m.content},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": uses[0].id,
                       "content": "21 C and sunny"}]}])
    # The result reached the prompt: more tokens than the question with its tools alone.
    alone = tclient.messages.count_tokens(
        model=model, tools=[WEATHER],
        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert count.input_tokens > alone.input_tokens + 5


def test_json_through_tool_forcing(aclient, model_id):
    """tool_choice any on the default model (its template renders no tools): the answer is a
    call of the only tool, whose input follows the schema (an enum)."""
    m = aclient.messages.create(model=model_id, max_tokens=400, extra_body={"temperature": 0},
                                tools=[UNIT], tool_choice={"type": "any"},
                                messages=[{"role": "user", "content": "Pick a unit."}])
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1, m.content
    assert uses[0].name == "pick_unit"
    assert uses[0].input["unit"] in ("celsius", "fahrenheit")
    assert m.stop_reason == "tool_use"


def test_json_output_config(aclient, model_id):
    """output_config.format json_schema constrains the text to the schema."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    m = aclient.messages.create(model=model_id, max_tokens=40, extra_body={"temperature": 0},
                                output_config={"format": {"type": "json_schema",
                                                          "schema": schema}},
                                messages=[{"role": "user", "content": "Is water wet?"}])
    out = json.loads(text_of(m))
    assert set(out) == {"ok"} and isinstance(out["ok"], bool)


def test_thinking_block(tclient):
    """thinking enabled opens <think> in the hermes template's generation prompt: the answer
    starts as a thinking block (streamed as thinking_delta)."""
    model = tclient.model_id
    args = dict(model=model, max_tokens=6, extra_body={"temperature": 0},
                thinking={"type": "enabled", "budget_tokens": 1024},
                messages=[{"role": "user", "content": "Hi"}])
    m = tclient.messages.create(**args)
    assert m.content[0].type == "thinking" and m.content[0].thinking
    with tclient.messages.stream(**args) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert "thinking_delta" in kinds
    assert final.content[0].thinking == m.content[0].thinking
    # thinking disabled: no <think>, no thinking block.
    args["thinking"] = {"type": "disabled"}
    m = tclient.messages.create(**args)
    assert all(b.type != "thinking" for b in m.content)


@pytest.mark.real_model
def test_stop_sequences(aclient, model_id):
    args = dict(model=model_id, max_tokens=24, extra_body={"temperature": 0},
                messages=[{"role": "user", "content": "Count from 1 to 20, separated by commas."}])
    base = text_of(aclient.messages.create(**args))
    assert len(base) > 6, base
    stop = base[3:5]
    m = aclient.messages.create(stop_sequences=["\x01never", stop], **args)
    assert m.stop_reason == "stop_sequence"
    assert m.stop_sequence == stop
    assert text_of(m) == base[:base.index(stop)]
    with aclient.messages.stream(stop_sequences=[stop], **args) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_auth(server, model_id):
    args = dict(model=model_id, max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    # x-api-key (the SDK's api_key) and Authorization: Bearer (its auth_token) both work.
    assert make_client(server).messages.create(**args).type == "message"
    assert make_client(server, auth_token=server.api_key).messages.create(**args).type == "message"
    with pytest.raises(anthropic.AuthenticationError) as e:
        make_client(server, api_key="wrong").messages.create(**args)
    assert "invalid API key" in str(e.value)
    assert e.value.body["error"]["type"] == "authentication_error"


def test_count_tokens(aclient, model_id):
    msgs = [{"role": "user", "content": "How many tokens is this?"}]
    c = aclient.messages.count_tokens(model=model_id, messages=msgs, system="Be brief.")
    m = aclient.messages.create(model=model_id, max_tokens=1, messages=msgs, system="Be brief.")
    assert c.input_tokens == m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
    longer = aclient.messages.count_tokens(
        model=model_id, system="Be brief.",
        messages=[{"role": "user", "content": "How many tokens is this? " * 5}])
    assert longer.input_tokens > c.input_tokens


def test_errors(server, aclient, client, model_id):
    user = {"role": "user", "content": "Hi"}
    cases = [
        ([{"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "AAAA"}}]}],
         {}, "image block"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x",
                                        "content": "42"}]}],
         {}, "matches no tool_use"),
        ([user, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                    "name": "f", "input": {}}]},
          user, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "late"}]}],
         {}, "matches no tool_use"),
        ([{"role": "system", "content": "x"}], {}, "top-level \"system\""),
        ([{"role": "user", "content": [{"type": "nonsense"}]}], {}, "'nonsense'"),
        ([user], {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
         "server tools"),
        ([user], {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}},
         "not in tools"),
        ([user], {"stop_sequences": [""]}, "stop_sequences[0]"),
    ]
    for messages, extra, needle in cases:
        with pytest.raises(anthropic.BadRequestError) as e:
            aclient.messages.create(model=model_id, max_tokens=4, messages=messages, **extra)
        assert needle in str(e.value), (needle, str(e.value))
        assert e.value.body == {"type": "error", "error": {
            "type": "invalid_request_error", "message": e.value.body["error"]["message"]}}
    with pytest.raises(anthropic.NotFoundError) as e:
        aclient.post("/v1/messages/nope", cast_to=object, body={})
    assert "/v1/messages/nope" in str(e.value) or "not found" in str(e.value).lower()
    # Raw bodies the SDK would not send: no max_tokens, not JSON, not an object.
    for body, needle in [({"model": model_id, "messages": [user]}, "max_tokens: field required"),
                         ("{not json", "not valid JSON"), ("[1]", "JSON object"),
                         ({"max_tokens": 4, "messages": [user], "temperature": "hot"},
                          "temperature")]:
        status, out = server.json("POST", "/v1/messages", body,
                                  headers={"x-api-key": server.api_key})
        assert status == 400, out
        assert out["type"] == "error" and out["error"]["type"] == "invalid_request_error"
        assert needle in out["error"]["message"], (needle, out)
    # Unknown paths under /v1/messages answer in Anthropic's shape; others in OpenAI's.
    status, out = server.json("POST", "/v1/messages/batches", {})
    assert status == 404 and out["error"]["type"] == "not_found_error"
    status, out = server.json("GET", "/v1/messages")
    assert status == 405 and out["type"] == "error"
    # The other dialects keep serving.
    r = client.chat.completions.create(model=model_id, max_tokens=2, messages=[user])
    assert r.choices[0].message.role == "assistant"


def test_oversized_body(make_server, model_id):
    s = make_server("--ctx", "256", "--quiet", "--max-body", "64K")
    big = {"model": model_id, "max_tokens": 4,
           "messages": [{"role": "user", "content": "x" * (100 << 10)}]}
    c = make_client(s)
    with pytest.raises(anthropic.APIStatusError) as e:
        c.messages.create(**big)
    assert e.value.status_code == 413
    assert e.value.body["error"]["type"] == "request_too_large"
    assert "larger than the limit" in e.value.body["error"]["message"] or \
        "too large" in e.value.body["error"]["message"]
    m = c.messages.create(model=model_id, max_tokens=2,
                          messages=[{"role": "user", "content": "Hi"}])
    assert m.type == "message"


def test_max_tokens_is_a_cap(make_server, model_id):
    """max_tokens beyond the context is cut to the room left (Anthropic clients send 32000)."""
    s = make_server("--ctx", "96", "--quiet")
    m = make_client(s).messages.create(model=model_id, max_tokens=1_000_000, extra_body={"temperature": 0},
                                       messages=[{"role": "user", "content": "Hi"}])
    assert m.type == "message"
    prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
    assert 0 < m.usage.output_tokens <= 96 - prompt


def test_metrics_label(server, aclient, model_id):
    aclient.messages.count_tokens(model=model_id, messages=[{"role": "user", "content": "Hi"}])
    m = server.metrics()
    assert m['tessera_http_requests_total{endpoint="/v1/messages/count_tokens",status="200"}'] >= 1
    assert m['tessera_http_requests_total{endpoint="/v1/messages",status="200"}'] >= 1


def test_chat_profile_in_models(tool_server, server):
    """/v1/models tells how answers are read: the context's chat profile."""
    info = tool_server.json("GET", "/v1/models")[1]["data"][0]["chat_template"]
    assert (info["name"], info["tool_format"], info["reasoning_format"]) == \
        ("jinja", "hermes", "think")
    info = server.json("GET", "/v1/models")[1]["data"][0]["chat_template"]
    assert info["tool_format"] in ("generic", "hermes", "llama3")
