"""Chat requests real clients send, and the work they make the server do before admission.

- An OpenAI client's tool loop (an assistant turn with content null and tool_calls, then a
  "tool" turn) on SmolLM2, whose template only concatenates role and content: the server
  rewrites what the template cannot render (X-Tessera-Template-Polyfill) and the loop works;
  a template that renders tools itself gets the request unchanged.
- Gemma 3's file has no chat template: the built-in gemma renderer serves chat without flags.
- A hostile template (--chat-template-file) is bounded: other requests are served while it
  renders, renders share one memory budget, and SIGTERM ends the server promptly mid-render.
- A huge JSON-schema enum gets a 400 or an answer within seconds, and a client that leaves
  mid-compile frees the server.

Some of these depend on the template engine's limits and the grammar compiler's cancel
(max_memory, timeout, cancel), which live in src/template/ and src/grammar/.
"""
import json
import os
import socket
import threading
import time

import pytest

from conftest import Server

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]

# A Hermes-style template that renders tools, calls and results itself.
NATIVE = """\
{%- if tools %}<|im_start|>system
<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{%- for tc in m.tool_calls %}
<tool_call>{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}\
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>{{ m.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

# Renders for a long time without growing (10^10 loop iterations over one list: about 5 s
# until the engine's step limit on this machine).
SLOW = "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}x"
# Allocates a list of 100000 numbers per iteration until the render's memory limit stops it.
HOG = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"

GEMMA = os.path.expanduser("~/.cache/tessera/models/gemma-3-270m-q4_k_m.gguf")


def loop_messages():
    """Two finished tool round trips, as the openai client sends them, then a new question."""
    msgs = []
    for i, city in enumerate(["Paris", "Oslo"]):
        msgs.append({"role": "user", "content": f"What is the weather in {city}?"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}",
                     "content": json.dumps({"temp_c": 20 + i})})
        msgs.append({"role": "assistant", "content": f"It is {20 + i} C in {city}."})
    msgs.append({"role": "user", "content": "What is the weather in Rome?"})
    return msgs


def openai_client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.api_key, max_retries=0,
                         timeout=60)


@pytest.mark.real_model  # the loop's prompt outgrows the tiny model's 1024-token context
def test_tool_loop_on_a_concatenating_template(client, model_id):
    """SmolLM2's template cannot render calls or results: they are written into the turns as
    JSON, and greedy SmolLM2 then calls the tool and answers from its result."""
    msgs = loop_messages()
    raw = client.chat.completions.with_raw_response.create(
        model=model_id, tools=TOOLS, messages=msgs, max_tokens=60, temperature=0)
    assert raw.headers.get("x-tessera-template-polyfill") == "tools,tool_calls,tool_responses"
    ch = raw.parse().choices[0]
    assert ch.finish_reason == "tool_calls", ch.message
    call = ch.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Rome"}
    msgs += [
        {"role": "assistant", "content": None,
         "tool_calls": [c.model_dump(exclude_none=True) for c in ch.message.tool_calls]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 25})},
    ]
    r = client.chat.completions.create(model=model_id, tools=TOOLS, messages=msgs,
                                       max_tokens=30, temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert "25" in r.choices[0].message.content

    # Streamed, the same request is accepted too.
    n = 0
    for chunk in client.chat.completions.create(model=model_id, tools=TOOLS, messages=msgs,
                                                max_tokens=4, stream=True):
        n += 1
    assert n > 0


def test_content_null_without_calls(server, client, model_id):
    """An assistant turn with content null (or none) and no calls renders as empty."""
    for turn in ({"role": "assistant", "content": None}, {"role": "assistant"}):
        msgs = [{"role": "user", "content": "Hi"}, turn, {"role": "user", "content": "Hello?"}]
        status, headers, data = server.request(
            "POST", "/v1/chat/completions",
            {"model": model_id, "messages": msgs, "max_tokens": 2})
        assert status == 200, data
        assert headers.get("X-Tessera-Template-Polyfill") == "null_content"


def test_model_info_names_the_template(server):
    status, body = server.json("GET", "/v1/models")
    assert status == 200
    info = body["data"][0]["chat_template"]
    assert info["name"] == "jinja"
    assert info["capabilities"] == {"probed": True, "system_role": True, "tools": False,
                                    "tool_calls": False, "tool_responses": False,
                                    "null_content": False}


def test_native_template_unchanged(make_server, tmp_path):
    path = tmp_path / "native.jinja"
    path.write_text(NATIVE)
    s = make_server("--ctx", "1024", "--quiet", "--chat-template-file", str(path))
    c = openai_client(s)
    model = c.models.list().data[0].id
    raw = c.chat.completions.with_raw_response.create(
        model=model, tools=TOOLS, messages=loop_messages(), max_tokens=4, temperature=0)
    assert raw.headers.get("x-tessera-template-polyfill") is None
    assert raw.parse().choices[0].message.role == "assistant"
    caps = s.json("GET", "/v1/models")[1]["data"][0]["chat_template"]["capabilities"]
    assert caps["tools"] and caps["tool_calls"] and caps["tool_responses"]


def test_gemma3_without_a_template(make_server):
    if not os.path.exists(GEMMA):
        pytest.skip(f"no Gemma 3 model at {GEMMA}")
    s = make_server("--ctx", "512", model=GEMMA)
    status, body = s.json("POST", "/v1/chat/completions", {
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Say hi."}], "max_tokens": 4})
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] > 5
    info = s.json("GET", "/v1/models")[1]["data"][0]["chat_template"]
    assert info["name"] == "gemma"
    assert "no chat template" in info["notice"]
    assert "using the built-in 'gemma' template" in s.log_text()


def rss_peak_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post_in_thread(server, body, out, timeout=60):
    def run():
        try:
            out.append(server.request("POST", "/v1/chat/completions", body, timeout=timeout))
        except Exception as e:  # the connection closed by the shutdown
            out.append(e)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_hostile_template_while_others_are_served(make_server, tmp_path):
    """A render that would take very long is stopped by its time limit (a 400 naming it), the
    server answers other requests meanwhile, and SIGTERM ends it within its grace period even
    while renders run."""
    path = tmp_path / "slow.jinja"
    path.write_text(SLOW)
    s = make_server("--ctx", "256", "--quiet", "--chat-template-file", str(path),
                    "--render-timeout", "1", "--shutdown-grace", "1")
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    out = []
    t = post_in_thread(s, body, out)
    time.sleep(0.2)
    t0 = time.time()
    status, _, data = s.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2})
    assert status == 200, data
    assert s.request("GET", "/health")[0] == 200
    assert time.time() - t0 < 5
    t.join(30)
    status, _, data = out[0]
    assert status == 400, data
    err = json.loads(data)["error"]
    assert err["code"] == "template_limit"
    assert "time limit" in err["message"], err

    # SIGTERM mid-render: the renders (seconds long) stop and the server exits promptly.
    # Three clients send the request again and again (a render may also end at the engine's
    # step limit), so renders are running when the signal comes.
    s2 = Server(["--ctx", "256", "--quiet", "--chat-template-file", str(path),
                 "--render-timeout", "60", "--shutdown-grace", "1"])
    out2 = []

    def again():
        while True:
            try:
                r = s2.request("POST", "/v1/chat/completions", body, timeout=30)
            except Exception as e:
                out2.append(e)
                return
            out2.append(r)
            if r[0] != 400:
                return
    threads = [threading.Thread(target=again) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    t0 = time.time()
    rc, log = s2.stop()
    assert rc == 0, log
    assert time.time() - t0 < 3, log
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    for r in out2:
        assert isinstance(r, Exception) or r[0] in (400, 503), r
        if not isinstance(r, Exception) and r[0] == 400:
            assert json.loads(r[2])["error"]["code"] == "template_limit"


def test_renders_share_one_memory_budget(make_server, tmp_path):
    """16 requests render a template that allocates without end: each is stopped by its share
    of the budget (400, the memory limit) or finds the budget full for 2 s (503), and the
    server's peak memory stays far below 16 x 224 MiB (the engine's default per render)."""
    path = tmp_path / "hog.jinja"
    path.write_text(HOG)
    s = make_server("--ctx", "256", "--quiet", "--chat-template-file", str(path),
                    "--render-memory", "128", "--render-timeout", "5")
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    out = []
    threads = [post_in_thread(s, body, out) for _ in range(16)]
    for t in threads:
        t.join(60)
    statuses = sorted(r[0] for r in out)
    assert len(statuses) == 16
    assert set(statuses) <= {400, 503}, statuses
    assert statuses.count(400) >= 2, statuses
    for status, headers, data in out:
        err = json.loads(data)["error"]
        if status == 400:
            assert err["code"] == "template_limit", err
            assert "max_memory" in err["message"] or "limit" in err["message"], err
        else:
            assert "render memory budget" in err["message"], err
    assert rss_peak_mib(s.proc.pid) < 1024
    assert s.request("GET", "/health")[0] == 200


def test_huge_enum_schema(make_server):
    """A 100k-entry enum: a 400 naming the limit or an answer, within seconds; a client that
    leaves mid-compile does not hold the server."""
    s = make_server("--ctx", "256", "--quiet", "--max-body", "8M", "--grammar-timeout", "3")
    enum = [f"{i:x}" for i in range(100000)]  # 0.8 MB of schema, within the 1 MiB limit
    body = {"messages": [{"role": "user", "content": "Pick one."}], "max_tokens": 4,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "pick", "schema": {"type": "object", "properties": {
                    "v": {"enum": enum}}, "required": ["v"]}}}}
    t0 = time.time()
    status, _, data = s.request("POST", "/v1/chat/completions", body, timeout=15)
    took = time.time() - t0
    assert status in (200, 400), data
    assert took < 10, took
    if status == 400:
        assert json.loads(data)["error"]["type"] == "invalid_request_error"

    # The same body from a client that hangs up after sending it.
    raw = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 b"Authorization: Bearer " + s.api_key.encode() + b"\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " +
                 str(len(raw)).encode() + b"\r\n\r\n" + raw)
    time.sleep(0.3)
    sock.close()
    # The compile stops: the server's CPU time hardly grows once it has noticed.
    time.sleep(0.5)
    cpu0 = cpu_seconds(s.proc.pid)
    time.sleep(1.0)
    assert cpu_seconds(s.proc.pid) - cpu0 < 0.5
    t0 = time.time()
    status, _, data = s.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}, timeout=30)
    assert status == 200, data
    assert time.time() - t0 < 10


@pytest.mark.real_model  # random weights may write whitespace until max_tokens
def test_required_tool_choice_ends_in_a_call(client, model_id):
    """tool_choice "required" with a tool whose schema does not close its properties: sampled
    answers still end in a call, well before max_tokens."""
    r = client.chat.completions.create(
        model=model_id, tools=TOOLS, tool_choice="required", temperature=1.0, seed=11, n=4,
        max_tokens=300, messages=[{"role": "user", "content": "Weather in Oslo?"}])
    for ch in r.choices:
        assert ch.finish_reason == "tool_calls", ch.message
        assert ch.message.tool_calls[0].function.name == "get_weather"
        assert set(json.loads(ch.message.tool_calls[0].function.arguments)) <= {"city"}
    assert r.usage.completion_tokens < 4 * 300


def test_grammar_compile_time_limit(make_server):
    """A compile past --grammar-timeout is the client's input: 400 naming the field and the
    limit, not a 500."""
    s = make_server("--ctx", "256", "--quiet", "--max-body", "8M", "--grammar-timeout", "0.001")
    enum = [f"{i:x}" for i in range(100000)]
    status, body = s.json("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Pick one."}], "max_tokens": 4,
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "pick", "schema": {"enum": enum}}}})
    assert status == 400, body
    assert body["error"]["param"] == "response_format"
    assert "time limit" in body["error"]["message"]
    assert "--grammar-timeout" in body["error"]["message"]
