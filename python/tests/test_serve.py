"""tessera.serve: the library's HTTP server in this process."""
import json
import urllib.error
import urllib.request

import pytest

import tessera
from conftest import THREADS


def post(url, body, key=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, json.loads(r.read())


def test_serve_answers_and_stops(tiny_chat_path):
    srv = tessera.serve(tiny_chat_path, port=0, block=False, api_key="k123",
                        model_name="tiny", n_threads=THREADS)
    with srv:
        assert srv.port > 0
        with urllib.request.urlopen(srv.url + "/health", timeout=30) as r:
            assert r.status == 200
        req = urllib.request.Request(srv.url + "/v1/models",
                                     headers={"Authorization": "Bearer k123"})
        with urllib.request.urlopen(req, timeout=30) as r:
            ids = [m["id"] for m in json.loads(r.read())["data"]]
        assert ids == ["tiny"]
        status, body = post(srv.url + "/v1/chat/completions",
                            {"model": "tiny", "max_tokens": 8, "temperature": 0,
                             "messages": [{"role": "user", "content": "hi"}]}, key="k123")
        assert status == 200 and body["object"] == "chat.completion"
        with pytest.raises(urllib.error.HTTPError) as e:
            post(srv.url + "/v1/chat/completions", {"messages": []}, key="wrong")
        assert e.value.code == 401
        # The served model belongs to the server's engine thread.
        with pytest.raises(tessera.StateError, match="served"):
            srv.model.generate("hi")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(srv.url + "/health", timeout=5)


def test_serve_on_an_open_model(tiny_chat_path):
    with tessera.Model(tiny_chat_path, n_threads=THREADS) as m:
        with tessera.Server(m, port=0) as srv:
            status, body = post(srv.url + "/v1/completions",
                                {"prompt": "Once", "max_tokens": 4, "temperature": 0})
            assert status == 200 and body["choices"][0]["text"] is not None
        # Usable again once the server stopped; same greedy answer as through the server.
        assert m.generate("Once", max_tokens=4, temperature=0) == body["choices"][0]["text"]


def test_serve_port_taken(tiny_chat_path):
    with tessera.Model(tiny_chat_path, n_threads=THREADS) as a, \
            tessera.Model(tiny_chat_path, n_threads=THREADS) as b:
        with tessera.Server(a, port=0) as srv:
            with pytest.raises(tessera.StateError, match="served"):
                tessera.Server(a, port=0)
            with pytest.raises(tessera.TesseraError) as e:
                tessera.Server(b, port=srv.port)
            assert str(srv.port) in str(e.value)
        # b was never served: it still generates.
        assert isinstance(b.generate("hi", max_tokens=2, temperature=0), str)


def test_serve_blocks_until_interrupted(tiny_chat_path):
    """serve(block=True) prints where it listens, serves, and shuts down on Ctrl-C (SIGINT)."""
    import re
    import signal
    import subprocess
    import sys
    code = ("import tessera, sys; tessera.serve(sys.argv[1], port=0, n_threads=1); "
            "print('stopped', flush=True)")
    p = subprocess.Popen([sys.executable, "-c", code, tiny_chat_path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        m = None
        while m is None and len(lines) < 5:
            lines.append(p.stdout.readline())
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", lines[-1])
            if not lines[-1]:
                break
        assert m, (lines, p.poll())
        with urllib.request.urlopen(m.group(1) + "/health", timeout=30) as r:
            assert r.status == 200
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert (p.returncode, out.strip()) == (0, "stopped"), err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
