"""The Ollama API (/api/chat, /api/generate, /api/embed, /api/embeddings, /api/tags, /api/show,
/api/ps, /api/version) through the official `ollama` Python client, end to end: plain and
streamed (NDJSON) answers, format "json" and schemas, options (num_predict, stop, seed), think,
a tool round trip (tool_calls, then a tool message), a call really returned (a `format` schema
holding the model to the generic call shape), embeddings, the model endpoints, and errors
as the client's ResponseError carrying our message; the other dialects keep serving.
"""
import http.client
import json

import pytest


ollama = pytest.importorskip("ollama")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def make_client(server):
    return ollama.Client(host=server.url, headers={"Authorization": f"Bearer {server.api_key}"},
                         timeout=120)


@pytest.fixture(scope="module")
def oc(server):
    return make_client(server)


def raw(server, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    h = {"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"}
    h.update(headers or {})
    data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    conn.request(method, path, body=data, headers=h)
    resp = conn.getresponse()
    out = resp.status, resp.getheader("Content-Type"), resp.read().decode()
    conn.close()
    return out


HELLO = [{"role": "user", "content": "Say hello."}]


def test_chat_plain(oc, model_id):
    r = oc.chat(model=model_id, messages=HELLO, options={"num_predict": 8, "temperature": 0})
    assert r.done and r.done_reason in ("stop", "length")
    assert r.message.role == "assistant" and isinstance(r.message.content, str)
    assert r.eval_count >= 1 and r.prompt_eval_count >= 1
    assert r.total_duration >= r.eval_duration >= 0 and r.load_duration == 0
    assert r.model == model_id and r.created_at


def test_chat_stream_equals_plain(oc, server, model_id):
    opts = {"num_predict": 12, "temperature": 0}
    whole = oc.chat(model=model_id, messages=HELLO, options=opts)
    parts = list(oc.chat(model=model_id, messages=HELLO, options=opts, stream=True))
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].eval_count == whole.eval_count
    # On the wire: NDJSON, one object a line.
    status, ctype, text = raw(server, "POST", "/api/chat",
                              {"model": model_id, "messages": HELLO, "options": opts})
    assert status == 200 and ctype == "application/x-ndjson"
    lines = [json.loads(x) for x in text.strip().split("\n")]
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] in ("stop", "length")


def test_generate(oc, model_id):
    opts = {"num_predict": 10, "temperature": 0}
    r = oc.generate(model=model_id, prompt="The capital of France is", options=opts)
    assert r.done and isinstance(r.response, str) and r.eval_count >= 1
    parts = list(oc.generate(model=model_id, prompt="The capital of France is", options=opts,
                             stream=True))
    assert "".join(p.response for p in parts) == r.response
    # raw: the prompt as it is, no template: fewer prompt tokens than through the template.
    rr = oc.generate(model=model_id, prompt="The capital of France is", raw=True, options=opts)
    assert rr.done and rr.prompt_eval_count < r.prompt_eval_count
    assert rr.eval_count == 10 or rr.done_reason == "stop"
    # With a system prompt: the system text reaches the prompt.
    rs = [oc.generate(model=model_id, prompt="The capital of France is", system=text,
                      options=opts).prompt_eval_count for text in ("Be brief.", "Be brief. " * 20)]
    assert rs[1] > rs[0] + 20


def test_load_request(oc, model_id):
    r = oc.generate(model=model_id)
    assert r.done and r.done_reason == "load"
    r = oc.chat(model=model_id, messages=[])
    assert r.done and r.done_reason == "load"


def test_format_json_and_schema(oc, model_id):
    r = oc.chat(model=model_id, messages=[{"role": "user", "content": "A person as JSON."}],
                format="json", options={"num_predict": 60, "temperature": 0})
    if r.done_reason == "stop":
        assert isinstance(json.loads(r.message.content), dict), r.message.content
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = oc.chat(model=model_id, messages=[{"role": "user", "content": "Is it ok?"}],
                format=schema, options={"num_predict": 40, "temperature": 0})
    assert r.done_reason == "stop"
    assert isinstance(json.loads(r.message.content)["ok"], bool)
    g = oc.generate(model=model_id, prompt="Is it ok?", format=schema,
                    options={"num_predict": 40, "temperature": 0})
    assert g.done_reason == "stop"
    assert isinstance(json.loads(g.response)["ok"], bool)


def test_options(oc, model_id):
    r = oc.generate(model=model_id, prompt="Count: 1, 2, 3,", raw=True,
                    options={"num_predict": 5, "temperature": 0})
    assert r.eval_count == 5 and r.done_reason == "length"
    # stop: the answer ends before the stop string, which it does not hold.
    full = oc.generate(model=model_id, prompt="Count: 1, 2, 3,", raw=True,
                       options={"num_predict": 24, "temperature": 0}).response
    if len(full) > 4:
        cut = full[2:4]
        s = oc.generate(model=model_id, prompt="Count: 1, 2, 3,", raw=True,
                        options={"num_predict": 24, "temperature": 0, "stop": [cut]})
        assert s.response == full[:full.index(cut)] and s.done_reason == "stop"
    # seed: the same seed gives the same sampled answer.
    o = {"num_predict": 16, "temperature": 1.0, "seed": 1234, "top_k": 40, "top_p": 0.9,
         "min_p": 0.01, "repeat_penalty": 1.1, "presence_penalty": 0.1,
         "frequency_penalty": 0.1, "num_ctx": 100000}
    a = oc.generate(model=model_id, prompt="Once upon a time", options=o).response
    b = oc.generate(model=model_id, prompt="Once upon a time", options=o).response
    assert a == b


def test_think(oc, model_id):
    for think in (True, False):
        r = oc.chat(model=model_id, messages=HELLO, think=think, options={"num_predict": 8})
        assert r.done and r.message.role == "assistant"


def test_tools_round_trip(tool_server):
    c = make_client(tool_server)
    model = tool_server.json("GET", "/v1/models")[1]["data"][0]["id"]
    q = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = c.chat(model=model, messages=q, tools=[WEATHER], options={"num_predict": 60,
                                                                   "temperature": 0})
    for call in r.message.tool_calls or []:
        assert isinstance(call.function.name, str)
        assert isinstance(call.function.arguments, dict)
    # Streamed: the same answer, tool calls as lines of their own.
    parts = list(c.chat(model=model, messages=q, tools=[WEATHER], stream=True,
                        options={"num_predict": 60, "temperature": 0}))
    assert "".join(p.message.content for p in parts) == r.message.content
    scalls = [t for p in parts for t in (p.message.tool_calls or [])]
    assert [(t.function.name, t.function.arguments) for t in scalls] == \
        [(t.function.name, t.function.arguments) for t in r.message.tool_calls or []]
    # The call and its result go back; the result reaches the prompt.
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    convo = q + [{"role": "assistant", "content": "", "tool_calls": [call]}]
    with_result = convo + [{"role": "tool", "content": "21 C and sunny",
                            "tool_name": "get_weather"}]
    a = c.chat(model=model, messages=convo + [{"role": "user", "content": "ok"}],
               tools=[WEATHER], options={"num_predict": 1})
    b = c.chat(model=model, messages=with_result, tools=[WEATHER], options={"num_predict": 1})
    assert b.prompt_eval_count > a.prompt_eval_count - 4
    status, _, text = raw(tool_server, "POST", "/api/chat", {
        "model": model, "stream": False, "options": {"num_predict": 1},
        "messages": q + [{"role": "tool", "content": "x"}]})
    assert status == 400 and "tool" in json.loads(text)["error"]


def test_embed(oc, model_id):
    r = oc.embed(model=model_id, input=["hello", "world"])
    assert len(r.embeddings) == 2 and len(r.embeddings[0]) > 8
    one = oc.embed(model=model_id, input="hello")
    assert one.embeddings[0] == pytest.approx(r.embeddings[0], abs=1e-5)
    legacy = oc.embeddings(model=model_id, prompt="hello")
    assert list(legacy.embedding) == pytest.approx(r.embeddings[0], abs=1e-5)


def test_model_endpoints(oc, server, model_id):
    tags = oc.list()
    assert len(tags.models) == 1
    m = tags.models[0]
    assert m.model == model_id and m.size > 0 and m.digest
    assert m.details.format == "gguf" and m.details.family and m.details.quantization_level
    show = oc.show(model_id)
    assert "completion" in show.capabilities and show.modelinfo
    assert show.details.format == "gguf"
    ps = oc.ps()
    assert ps.models[0].model == model_id
    status, _, text = raw(server, "GET", "/api/version")
    assert status == 200 and json.loads(text)["version"]


def test_errors(oc, server, model_id):
    with pytest.raises(ollama.ResponseError) as e:
        oc.pull("llama3")
    assert e.value.status_code == 501 and "not supported" in e.value.error
    for path in ("/api/push", "/api/create", "/api/copy"):
        status, _, text = raw(server, "POST", path, {"model": "x"})
        assert status == 501 and "not supported" in json.loads(text)["error"]
    status, ctype, text = raw(server, "POST", "/api/chat", b"{not json")
    assert status == 400 and "not valid JSON" in json.loads(text)["error"]
    status, _, text = raw(server, "POST", "/api/chat",
                          {"model": model_id, "messages": HELLO, "options": {"temperature": "hot"}})
    assert status == 400 and "options.temperature" in json.loads(text)["error"]
    status, _, text = raw(server, "POST", "/api/generate",
                          {"model": model_id, "prompt": "x", "template": "{{ .Prompt }}"})
    assert status == 400 and "template" in json.loads(text)["error"]
    status, _, text = raw(server, "POST", "/api/generate",
                          {"model": model_id, "prompt": "x", "images": ["aGk="]})
    assert status == 400 and "images" in json.loads(text)["error"]
    status, _, text = raw(server, "POST", "/api/chat",
                          {"model": model_id, "messages": HELLO, "format": "yaml"})
    assert status == 400 and "format must be" in json.loads(text)["error"]
    status, _, text = raw(server, "GET", "/api/nothing")
    assert status == 404 and "error" in json.loads(text)
    status, _, text = raw(server, "POST", "/api/chat", b"{" + b" " * (2 << 20) + b"}")
    assert status == 413 and "limit" in json.loads(text)["error"]
    # Any model name is served (one model per server).
    r = oc.chat(model="llama3:latest", messages=HELLO, options={"num_predict": 2})
    assert r.done
    # The other dialects keep serving.
    status, _, text = raw(server, "POST", "/v1/chat/completions",
                          {"model": model_id, "messages": HELLO, "max_tokens": 2})
    assert status == 200 and json.loads(text)["choices"]


def test_tool_call_answer(oc, server, model_id):
    """A call really comes back: with the generic tool format (a template that names no call
    markers, as SmolLM2's and the tiny model's), an answer that is {"name", "arguments"} is a
    call; `format` holds the model to that shape, so message.tool_calls is filled, arguments an
    object, in the whole answer and in the stream's lines alike."""
    status, _, text = raw(server, "GET", "/v1/models")
    assert status == 200
    assert json.loads(text)["data"][0]["chat_template"]["tool_format"] == "generic"
    shape = {"type": "object", "properties": {
        "name": {"const": "get_weather"},
        "arguments": {"type": "object", "properties": {"city": {"type": "string",
                                                                "maxLength": 12}},
                      "required": ["city"], "additionalProperties": False}},
        "required": ["name", "arguments"], "additionalProperties": False}
    q = [{"role": "user", "content": "What is the weather in Paris?"}]
    opts = {"num_predict": 400, "temperature": 0}  # room for the tiny model's whitespace
    r = oc.chat(model=model_id, messages=q, tools=[WEATHER], format=shape, options=opts)
    calls = r.message.tool_calls or []
    assert len(calls) == 1, r.message
    assert calls[0].function.name == "get_weather"
    assert isinstance(calls[0].function.arguments, dict)
    assert isinstance(calls[0].function.arguments["city"], str)
    assert not (r.message.content or "").strip()
    parts = list(oc.chat(model=model_id, messages=q, tools=[WEATHER], format=shape,
                         options=opts, stream=True))
    scalls = [t for p in parts for t in (p.message.tool_calls or [])]
    assert [(t.function.name, t.function.arguments) for t in scalls] == \
        [(calls[0].function.name, calls[0].function.arguments)]
    # The call goes back with its result: the next answer is an ordinary one.
    convo = q + [{"role": "assistant", "content": "", "tool_calls": [calls[0]]},
                 {"role": "tool", "content": "21 C and sunny", "tool_name": "get_weather"}]
    after = oc.chat(model=model_id, messages=convo, tools=[WEATHER],
                    options={"num_predict": 4, "temperature": 0})
    assert after.done
