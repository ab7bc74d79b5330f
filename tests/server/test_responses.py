"""OpenAI Responses (/v1/responses, GET/DELETE /v1/responses/{id}) through the official `openai`
SDK, end to end: plain and streamed answers (with the typed events in their order), a tool
round trip (function_call, then function_call_output), text.format json_schema,
previous_response_id chaining, store=false, the store's bounds (the oldest dropped first), and
errors in OpenAI's shape (malformed items, an unknown call_id or previous_response_id, an
oversized body) after which the other dialects keep serving.

The same engine serves every dialect, so a greedy answer through /v1/responses equals the one
through /v1/chat/completions for the same conversation.
"""
import json

import pytest


openai = pytest.importorskip("openai")

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 24}},
                   "required": ["city"]},
    "strict": True,
}


def make_client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.api_key, max_retries=0,
                         timeout=120)


@pytest.fixture(scope="module")
def rclient(server):
    return make_client(server)


@pytest.fixture(scope="module")
def tclient(tool_server):
    c = make_client(tool_server)
    c.model_id = tool_server.json("GET", "/v1/models")[1]["data"][0]["id"]
    return c


def sse(server, body):
    """(event name, data) pairs of a raw streamed /v1/responses answer."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", "/v1/responses", body=json.dumps(body), headers=server.headers())
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    raw = resp.read().decode()
    conn.close()
    out = []
    for frame in raw.split("\n\n"):
        if not frame.strip() or frame.startswith(":"):
            continue
        lines = frame.split("\n")
        assert lines[0].startswith("event: "), frame
        assert lines[1].startswith("data: "), frame
        name, data = lines[0][7:], json.loads(lines[1][6:])
        assert data["type"] == name
        out.append((name, data))
    return out


def test_plain(rclient, client, model_id):
    r = rclient.responses.create(model=model_id, input="Say hello.", max_output_tokens=8,
                                 temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.model == model_id
    assert r.status in ("completed", "incomplete")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in r.output] == ["message"]
    msg = r.output[0]
    assert msg.role == "assistant" and msg.status == "completed"
    assert [p.type for p in msg.content] == ["output_text"]
    assert 0 < r.usage.output_tokens <= 8
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens >= 0
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    # The same engine: the chat answer for the same turns is the same text.
    c = client.chat.completions.create(model=model_id, max_tokens=8, temperature=0,
                                       messages=[{"role": "user", "content": "Say hello."}])
    assert r.output_text == c.choices[0].message.content
    assert r.usage.output_tokens == c.usage.completion_tokens


def test_items_and_instructions(rclient, client, model_id):
    """instructions + message items (developer, parts) read as the chat turns they name."""
    r = rclient.responses.create(
        model=model_id, max_output_tokens=10, temperature=0, instructions="You are terse.",
        input=[{"role": "developer", "content": "Answer in English."},
               {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Name a colour."}]}])
    c = client.chat.completions.create(
        model=model_id, max_tokens=10, temperature=0,
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "system", "content": "Answer in English."},
                  {"role": "user", "content": "Name a colour."}])
    assert r.output_text == c.choices[0].message.content
    assert r.instructions == "You are terse."


def test_stream_event_order(server, rclient, model_id):
    body = {"model": model_id, "input": "Count: one, two,", "max_output_tokens": 10,
            "temperature": 0, "stream": True}
    events = sse(server, body)
    names = [n for n, _ in events]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] in ("response.completed", "response.incomplete")
    assert names[2:5] == ["response.output_item.added", "response.content_part.added",
                          "response.output_text.delta"]
    assert names[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    assert set(names[5:-4]) == {"response.output_text.delta"}
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    done = [d for n, d in events if n == "response.output_text.done"][0]
    assert done["text"] == deltas
    final = events[-1][1]["response"]
    assert final["output"][0]["content"][0]["text"] == deltas
    assert events[0][1]["response"]["status"] == "in_progress"
    assert events[0][1]["response"]["id"] == final["id"]
    # The SDK's stream helper adds up to the non-streamed answer.
    args = dict(model=model_id, input="Count: one, two,", max_output_tokens=10, temperature=0)
    with rclient.responses.stream(**args) as stream:
        pieces = [e.delta for e in stream if e.type == "response.output_text.delta"]
        # The helper's final response needs response.completed (not .incomplete).
        got = stream.get_final_response() if names[-1] == "response.completed" else None
    whole = rclient.responses.create(**args)
    assert "".join(pieces) == whole.output_text == deltas
    assert whole.status == final["status"]
    if got is not None:
        assert got.output_text == deltas
        assert got.usage.output_tokens == whole.usage.output_tokens
    # stream=True yields the typed events too.
    types = [e.type for e in rclient.responses.create(stream=True, **args)]
    assert types[0] == "response.created" and types[-1] in ("response.completed",
                                                             "response.incomplete")


def test_tool_round_trip(tool_server, tclient):
    model = tclient.model_id
    args = dict(model=model, max_output_tokens=200, temperature=0, tools=[WEATHER],
                tool_choice={"type": "function", "name": "get_weather"},
                parallel_tool_calls=False, input="What is the weather in Paris?")
    r = tclient.responses.create(**args)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1, r.output
    call = calls[0]
    assert call.name == "get_weather" and call.call_id and call.id.startswith("fc_")
    assert isinstance(json.loads(call.arguments).get("city"), str)
    # Streamed: the same call, with function_call_arguments events.
    events = sse(tool_server, dict(args, stream=True))
    names = [n for n, _ in events]
    assert "response.function_call_arguments.delta" in names
    done = [d for n, d in events if n == "response.function_call_arguments.done"]
    assert [d["arguments"] for d in done] == [call.arguments]
    # The result goes back as a function_call_output naming the call.
    r2 = tclient.responses.create(
        model=model, max_output_tokens=8, temperature=0, tools=[WEATHER],
        input=[{"role": "user", "content": "What is the weather in Paris?"},
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id,
                "output": "21 C and sunny"}])
    assert r2.status in ("completed", "incomplete")
    # An output naming no call is the SDK's BadRequestError with OpenAI's message.
    with pytest.raises(openai.BadRequestError) as ei:
        tclient.responses.create(
            model=model, max_output_tokens=8, tools=[WEATHER],
            input=[{"role": "user", "content": "Hi"},
                   {"type": "function_call_output", "call_id": "call_nope", "output": "x"}])
    assert "No tool call found for function call output with call_id call_nope" in \
        str(ei.value)
    assert ei.value.body["param"] == "input[1].call_id"


def test_reasoning_items(tool_server, tclient):
    """reasoning.effort opens <think> in the hermes template's generation prompt: the answer
    starts as a reasoning item (streamed as reasoning_text deltas), its tokens counted."""
    args = dict(model=tclient.model_id, input="Why is the sky blue?", max_output_tokens=12,
                temperature=0, reasoning={"effort": "high"})
    r = tclient.responses.create(**args)
    assert r.output[0].type == "reasoning" and r.output[0].id.startswith("rs_")
    text = r.output[0].content[0].text
    assert text and r.output[0].content[0].type == "reasoning_text"
    assert 0 < r.usage.output_tokens_details.reasoning_tokens <= r.usage.output_tokens
    assert r.reasoning.effort == "high"
    events = sse(tool_server, dict(args, stream=True))
    names = [n for n, _ in events]
    assert names[2] == "response.output_item.added"
    assert events[2][1]["item"]["type"] == "reasoning"
    deltas = "".join(d["delta"] for n, d in events if n == "response.reasoning_text.delta")
    assert deltas == text
    assert [d["text"] for n, d in events if n == "response.reasoning_text.done"] == [text]
    # effort none: no <think>, no reasoning item.
    r = tclient.responses.create(**dict(args, reasoning={"effort": "none"}))
    assert all(o.type != "reasoning" for o in r.output)
    assert r.usage.output_tokens_details.reasoning_tokens == 0


def test_json_schema(rclient, model_id):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    r = rclient.responses.create(
        model=model_id, input="Give a number as JSON.", max_output_tokens=40, temperature=0,
        text={"format": {"type": "json_schema", "name": "num", "schema": schema,
                         "strict": True}})
    if r.status == "completed":
        v = json.loads(r.output_text)
        assert isinstance(v["n"], int) and set(v) == {"n"}
    else:
        assert r.output_text.startswith("{")
    assert r.text.format.type == "json_schema"


def test_previous_response_and_store(server, rclient, model_id):
    first = rclient.responses.create(model=model_id, input="My name is Ada.",
                                     max_output_tokens=6, temperature=0)
    got = rclient.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text
    second = rclient.responses.create(model=model_id, input="What is my name?",
                                      previous_response_id=first.id, max_output_tokens=6,
                                      temperature=0)
    assert second.previous_response_id == first.id
    # Chaining equals sending the whole conversation.
    whole = rclient.responses.create(
        model=model_id, max_output_tokens=6, temperature=0, store=False,
        input=[{"role": "user", "content": "My name is Ada."},
               {"role": "assistant", "content": first.output_text},
               {"role": "user", "content": "What is my name?"}])
    assert second.output_text == whole.output_text
    assert second.usage.input_tokens == whole.usage.input_tokens
    # store=false: never kept.
    with pytest.raises(openai.NotFoundError) as ei:
        rclient.responses.retrieve(whole.id)
    assert f"Response with id '{whole.id}' not found." in str(ei.value)
    # DELETE, then the id is gone (for GET and as a previous response).
    deleted = server.json("DELETE", f"/v1/responses/{first.id}")
    assert deleted == (200, {"id": first.id, "object": "response", "deleted": True})
    with pytest.raises(openai.NotFoundError):
        rclient.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as ei:
        rclient.responses.create(model=model_id, input="Hi", previous_response_id=first.id)
    assert f"Previous response with id '{first.id}' not found." in str(ei.value)
    assert ei.value.body["param"] == "previous_response_id"
    rclient.responses.delete(second.id)
    assert server.request("DELETE", f"/v1/responses/{second.id}")[0] == 404


def test_store_bounds(make_server):
    s = make_server("--ctx", "512", "--quiet", "--responses-max", "2")
    c = make_client(s)
    model = s.json("GET", "/v1/models")[1]["data"][0]["id"]
    ids = [c.responses.create(model=model, input=f"n{i}", max_output_tokens=2).id
           for i in range(3)]
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(ids[0])  # the oldest went first
    assert [c.responses.retrieve(i).id for i in ids[1:]] == ids[1:]
    # The byte bound: metadata is echoed (and stored) but not rendered, so two responses
    # of 600 KB each do not fit 1 MiB together: the first goes when the second comes.
    s2 = make_server("--ctx", "512", "--quiet", "--responses-max-bytes", "1")
    c2 = make_client(s2)
    meta = {"blob": "x" * 600000}
    a = c2.responses.create(model=model, input="a", max_output_tokens=2, metadata=meta)
    assert c2.responses.retrieve(a.id).metadata == meta
    b = c2.responses.create(model=model, input="b", max_output_tokens=2, metadata=meta)
    with pytest.raises(openai.NotFoundError):
        c2.responses.retrieve(a.id)
    assert c2.responses.retrieve(b.id).id == b.id
    small = c2.responses.create(model=model, input="c", max_output_tokens=2)
    assert c2.responses.retrieve(small.id).id == small.id


@pytest.mark.parametrize("body, param, words", [
    ({"input": 5}, "input", "input must be a string or an array"),
    ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0].role",
     "must be one of user, assistant, system, developer"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content", "input_image"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
     "input[0].arguments", "must be a string"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]", "item_reference"),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]", "web_search"),
    ({"input": "hi", "tool_choice": "sometimes"}, "tool_choice", "tool_choice must be"),
    ({"input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type", "yaml"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens", "positive integer"),
    ({"input": "hi", "store": "yes"}, "store", "store must be a boolean"),
    ({"input": "hi", "previous_response_id": "resp_nope"}, "previous_response_id",
     "Previous response with id 'resp_nope' not found."),
])
def test_errors(server, client, model_id, body, param, words):
    status, got = server.json("POST", "/v1/responses", dict(body, model=model_id))
    assert status == 400, got
    err = got["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert words in err["message"], err
    # The other dialects keep serving.
    r = client.chat.completions.create(model=model_id, max_tokens=1,
                                       messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].finish_reason in ("stop", "length")


def test_error_shapes(server, model_id):
    status, got = server.json("POST", "/v1/responses", "{not json")
    assert status == 400 and got["error"]["type"] == "invalid_request_error"
    status, got = server.json("POST", "/v1/responses", {"model": "other", "input": "hi"})
    assert status == 404 and "error" in got
    status, _, data = server.request("POST", "/v1/responses", "x" * (2 << 20))
    assert status == 413 and json.loads(data)["error"]["code"] == "body_too_large"
    status, got = server.json("GET", "/v1/responses/resp_unknown")
    assert status == 404 and got["error"]["message"] == \
        "Response with id 'resp_unknown' not found."
    status, headers, _ = server.request("PUT", "/v1/responses/resp_unknown")
    assert status == 405 and headers["Allow"] == "GET, HEAD, DELETE"
    status, headers, _ = server.request("OPTIONS", "/v1/responses/resp_unknown")
    assert status == 204 and headers["Allow"] == "GET, HEAD, DELETE, OPTIONS"
    status, got = server.json("GET", "/v1/responses/a/b")
    assert status == 404
    status, got = server.json("GET", "/v1/responses/x", auth=False)
    assert status == 401
