"""Fixtures for the server tests: start `tessera serve` on a free loopback port and talk to it.

TS_BIN is the tessera binary and TS_MODEL the GGUF model (run_py_tests.sh sets both). Each
server listens on 127.0.0.1 with --port 0 and the test reads the port it printed, so parallel
runs never collide. Servers are stopped with SIGTERM and must exit 0.

TS_MODEL_KIND=tiny says that TS_MODEL is the tiny random-weight model (run_py_tests.sh writes it
when the real one is absent): tests marked real_model, which judge what the model answers, are
then skipped with the reason.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

API_KEY = "test-key-123"
TINY = os.environ.get("TS_MODEL_KIND") == "tiny"


def pytest_collection_modifyitems(config, items):
    if not TINY:
        return
    why = pytest.mark.skip(reason="needs the real model (SmolLM2-135M-Instruct; set TS_MODEL): "
                                  "running on the tiny random-weight model, whose answers mean "
                                  "nothing")
    for item in items:
        if item.get_closest_marker("real_model") is not None:
            item.add_marker(why)
PORT_RE = re.compile(r"listening on http://127\.0\.0\.1:(\d+) ")


class Server:
    def __init__(self, args, api_key=API_KEY, startup_timeout=60, model=None):
        self.api_key = api_key
        self.log = tempfile.NamedTemporaryFile(prefix="tessera-serve-", suffix=".log", delete=False)
        cmd = [os.environ["TS_BIN"], "serve", "-m", model or os.environ["TS_MODEL"], "--host",
               "127.0.0.1", "--port", "0"]
        if api_key:
            cmd += ["--api-key", api_key]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + startup_timeout
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = PORT_RE.search(line)
            if m:
                self.port = int(m.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                return
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError(f"tessera serve did not start: {line!r}\n{self.log_text()}")

    def log_text(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def headers(self, extra=None):
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, body=None, headers=None, auth=True, timeout=60):
        """One HTTP request on a fresh connection; returns (status, headers, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = self.headers(headers) if auth else dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, dict(resp.getheaders()), data

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.request(method, path, body, **kw)
        return status, json.loads(data)

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("tessera serve did not stop after SIGTERM:\n" + self.log_text())
        self.proc.stdout.close()
        rc = self.proc.returncode
        text = self.log_text()
        os.unlink(self.log.name)
        return rc, text


@pytest.fixture(scope="session")
def server():
    """The shared server: 32 sequences at once, a small context, an API key."""
    s = Server(["--max-seqs", "32", "--ctx", "1024", "--quiet"])
    yield s
    rc, log = s.stop()
    assert rc == 0, log


@pytest.fixture
def make_server():
    """Starts extra servers with other options; stops them (checking exit 0) after the test."""
    started = []

    def make(*args, **kw):
        s = Server(args, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        rc, log = s.stop()
        assert rc == 0, log


@pytest.fixture(scope="session")
def tiny_model():
    """A tiny model's path: TS_MODEL when that is the tiny one, else one written by
    TS_TINY_WRITER into a fresh temporary directory; None when there is no writer."""
    if TINY:
        yield os.environ["TS_MODEL"]
        return
    writer = os.environ.get("TS_TINY_WRITER")
    if not writer or not os.access(writer, os.X_OK):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tessera-tiny-") as d:
        path = os.path.join(d, "tiny-server-model.gguf")
        subprocess.run([writer, path], check=True)
        yield path


@pytest.fixture(scope="session")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.api_key, max_retries=0,
                         timeout=120)


@pytest.fixture(scope="session")
def model_id(server):
    status, body = server.json("GET", "/v1/models")
    assert status == 200
    return body["data"][0]["id"]


def sse_events(resp):
    """Yields the data payloads of an http.client streaming response (str, '[DONE]' included)."""
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data: "):
                    yield line[6:].decode()


# A Hermes-style template (tools in the system turn, <tool_call> JSON, <tool_response>), with
# a <think> block opened by the generation prompt when enable_thinking is set.
HERMES_TEMPLATE = """\
{%- if tools %}<|im_start|>system
You may call functions. To call one, answer <tool_call>{"name": N, "arguments": {...}}</tool_call>.
<tools>
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{%- for tc in m.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": \
{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking %}<think>
{% endif %}{% endif %}"""


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    """A server on the Hermes-style template above (tools rendered, <tool_call> JSON,
    <tool_response>, <think> on enable_thinking); one per test module."""
    path = tmp_path_factory.mktemp("tpl") / "hermes.jinja"
    path.write_text(HERMES_TEMPLATE)
    s = Server(["--ctx", "1024", "--quiet", "--chat-template-file", str(path)])
    yield s
    rc, log = s.stop()
    assert rc == 0, log
