"""Connections: floods of half-sent headers, clients that trickle or never read, connection
limits answered 503, CORS, bodies over the limit answered with a readable 413, and SIGTERM
while all that is open. None of it depends on the model, so these servers run the tiny model
(conftest's tiny_model) when there is one: it is fast enough to fill a slow reader's socket
buffers in a second, and it keeps this file's time short."""
import http.client
import json
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import sse_events

CMPL = "/v1/completions"
CHAT = "/v1/chat/completions"
HALF = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"


@pytest.fixture
def make_server(make_server, tiny_model):
    """conftest's make_server, on the tiny model when there is one."""
    def make(*args, **kw):
        if tiny_model is not None:
            kw.setdefault("model", tiny_model)
        return make_server(*args, **kw)
    return make


@pytest.fixture(scope="module", autouse=True)
def enough_descriptors():
    """The floods open hundreds of sockets in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2048 if hard == resource.RLIM_INFINITY else min(hard, 2048)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1200:
        pytest.skip("fewer than 1200 open files allowed (ulimit -n)")


def half_headers(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HALF)
        socks.append(s)
    return socks


def closed_by_peer(sock, timeout):
    """True when the server closes sock (end of file or reset) within timeout seconds."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def completion(server, max_tokens=4, timeout=30, headers=None):
    return server.request("POST", CMPL, {"prompt": "Hello", "max_tokens": max_tokens},
                          headers=headers, timeout=timeout)


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def assert_json_error(status, data, want, code=None):
    assert status == want, data
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    if code is not None:
        assert err["code"] == code, err
    return err


def test_half_header_flood(make_server):
    # 520 connections that never finish their header (more than the old limit of 512 threads)
    # take no worker: a normal client is served at once, and the server drops them at the
    # header deadline.
    s = make_server("--ctx", "256", "--quiet", "--header-timeout", "2")
    socks = half_headers(s.port, 520)
    t0 = time.time()
    status, _, data = completion(s, timeout=20)
    assert status == 200, data
    assert time.time() - t0 < 10
    assert s.metrics()["tessera_http_connections_open"] >= 520
    t_open = time.time()
    assert all(closed_by_peer(x, 8) for x in socks)
    assert time.time() - t_open < 8  # 2 s deadline, checked every 0.1 s, plus a loaded machine
    for x in socks:
        x.close()
    status, _, _ = s.request("GET", "/health")
    assert status == 200
    assert s.metrics()["tessera_http_connections_cut_total"] >= 520


def test_trickled_header_is_cut(make_server):
    # A header sent a byte at a time never looks idle; the deadline counts from the connect.
    s = make_server("--ctx", "256", "--quiet", "--header-timeout", "1")
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    t0 = time.time()
    cut = False
    for b in HALF * 4:
        try:
            sock.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        time.sleep(0.1)
        if time.time() - t0 > 6:
            break
    cut = cut or closed_by_peer(sock, 3)
    assert cut and time.time() - t0 < 6
    sock.close()


def test_per_address_cap_503(make_server):
    s = make_server("--ctx", "256", "--quiet", "--max-connections-per-ip", "4",
                    "--header-timeout", "30")
    socks = half_headers(s.port, 4)
    status, headers, data = completion(s)
    err = assert_json_error(status, data, 503, code="too_many_connections")
    assert "your address" in err["message"] and "4" in err["message"]
    assert headers.get("Retry-After") == "1"
    for x in socks:
        x.close()
    wait_for(lambda: completion(s)[0] == 200, 10, "a free slot after the others closed")
    assert s.metrics()["tessera_http_connections_refused_total"] >= 1


def test_connection_limit_503(make_server):
    s = make_server("--ctx", "256", "--quiet", "--max-connections", "8", "--header-timeout", "30")
    socks = half_headers(s.port, 8)
    status, headers, data = s.request("GET", "/health")
    err = assert_json_error(status, data, 503, code="too_many_connections")
    assert "connection limit (8)" in err["message"]
    assert headers.get("Connection", "").lower() == "close"
    for x in socks:
        x.close()
    wait_for(lambda: s.request("GET", "/health")[0] == 200, 10, "a free slot")


def test_slow_reader_is_cut(make_server):
    # A client that asks for a long stream and never reads: once the socket buffers are full
    # nothing moves, and --timeout later the server closes it and aborts its request, while
    # others are served meanwhile.
    s = make_server("--ctx", "4096", "--max-seqs", "32", "--quiet", "--timeout", "1")
    before = s.metrics()
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    slow.connect(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "Tell me everything", "max_tokens": 3000, "n": 16,
                       "logprobs": 5, "ignore_eos": True, "stream": True}).encode()
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + s.api_key.encode() + b"\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    t0 = time.time()
    status, _, _ = completion(s, timeout=60)
    assert status == 200
    m = wait_for(lambda: (lambda m: m if m["tessera_requests_in_flight"] == 0 else None)(
        s.metrics()), 60, "the slow reader to be cut")
    elapsed = time.time() - t0
    assert m["tessera_requests_aborted_total"] >= before["tessera_requests_aborted_total"] + 1
    assert m['tessera_http_requests_total{endpoint="/v1/completions",status="499"}'] >= 1
    # What it did get ends early: no [DONE].
    received = b""
    slow.settimeout(10)
    try:
        while True:
            chunk = slow.recv(1 << 20)
            if not chunk:
                break
            received += chunk
    except ConnectionResetError:
        pass
    slow.close()
    assert b"[DONE]" not in received
    print(f"slow reader cut after {elapsed:.1f} s, {len(received)} bytes delivered")


CORS = "http://app.example"


def test_cors(make_server):
    s = make_server("--ctx", "256", "--quiet", "--cors-origin", CORS,
                    "--cors-origin", "http://b.example, https://c.example:8443")
    # Preflight: no API key, 204, the methods and headers a browser needs.
    status, h, data = s.request("OPTIONS", CHAT, auth=False, headers={
        "Origin": CORS, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 204 and data == b""
    assert h["Access-Control-Allow-Origin"] == CORS
    assert "POST" in h["Access-Control-Allow-Methods"]
    allowed = {x.strip().lower() for x in h["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed
    assert int(h["Access-Control-Max-Age"]) > 0
    assert "Origin" in h.get("Vary", "")
    status, h, _ = s.request("OPTIONS", "/v1/models", auth=False,
                             headers={"Origin": "https://c.example:8443",
                                      "Access-Control-Request-Method": "GET"})
    assert status == 204 and h["Access-Control-Allow-Origin"] == "https://c.example:8443"
    # Answers, errors and streams carry the header for an allowed origin.
    status, h, _ = completion(s, headers={"Origin": "http://b.example"})
    assert status == 200 and h["Access-Control-Allow-Origin"] == "http://b.example"
    status, h, data = s.request("GET", "/v1/models", auth=False, headers={"Origin": CORS})
    assert_json_error(status, data, 401)
    assert h["Access-Control-Allow-Origin"] == CORS
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("POST", CHAT, body=json.dumps({"messages": [{"role": "user", "content": "Hi"}],
                                                "max_tokens": 3, "stream": True}),
                 headers=s.headers({"Origin": CORS}))
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Access-Control-Allow-Origin") == CORS
    assert list(sse_events(resp))[-1] == "[DONE]"
    conn.close()
    # Another origin: nothing, preflight included.
    for method, path in (("OPTIONS", CHAT), ("GET", "/v1/models")):
        status, h, _ = s.request(method, path, auth=method != "OPTIONS",
                                 headers={"Origin": "http://evil.example",
                                          "Access-Control-Request-Method": "POST"})
        assert not any(k.lower().startswith("access-control-") for k in h), h


def test_cors_any_and_none(make_server, server):
    s = make_server("--ctx", "256", "--quiet", "--cors-origin", "*")
    status, h, _ = s.request("GET", "/health", headers={"Origin": "http://x.example"})
    assert status == 200 and h["Access-Control-Allow-Origin"] == "*"
    # Without the option: no CORS headers at all.
    status, h, _ = server.request("OPTIONS", CHAT, auth=False, headers={
        "Origin": CORS, "Access-Control-Request-Method": "POST"})
    assert status == 204
    assert not any(k.lower().startswith("access-control-") for k in h), h
    status, h, _ = server.request("GET", "/v1/models", headers={"Origin": CORS})
    assert status == 200 and "Access-Control-Allow-Origin" not in h


@pytest.fixture
def small_body_server(make_server):
    return make_server("--ctx", "256", "--quiet", "--max-body", "64K")


def test_413_content_length(small_body_server):
    s = small_body_server
    requests = pytest.importorskip("requests")
    big = json.dumps({"prompt": "a" * (3 << 20)}).encode()
    # requests and http.client send the whole body without waiting: they must still read the
    # answer rather than a broken pipe.
    r = requests.post(s.url + CMPL, data=big, headers=s.headers(), timeout=60)
    assert_json_error(r.status_code, r.content, 413, code="body_too_large")
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("POST", CMPL, body=big, headers=s.headers())
    resp = conn.getresponse()
    assert_json_error(resp.status, resp.read(), 413, code="body_too_large")
    conn.close()
    # A body just within the limit is taken.
    status, _, data = s.request("POST", CMPL, {"prompt": "a" * 60000, "max_tokens": 1})
    assert status in (200, 400), data  # 400: longer than the context, but read and parsed


def test_unreadable_body_framing(small_body_server):
    """A transfer coding other than chunked got no answer until --timeout (501 now), and
    Content-Length headers that disagree were read by the first one (400 now, RFC 9112)."""
    s = small_body_server
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + s.api_key.encode() + b"\r\n")
    body = json.dumps({"prompt": "hi", "max_tokens": 1}).encode()
    cases = [
        (head + b"Transfer-Encoding: gzip\r\n\r\n" + body, 501, "unsupported_transfer_encoding"),
        (head + b"Transfer-Encoding: gzip, chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
         % (len(body), body), 501, "unsupported_transfer_encoding"),
        (head + b"Content-Length: %d\r\nContent-Length: 300\r\n\r\n%s" % (len(body), body),
         400, None),
    ]
    for raw, want, code in cases:
        t0 = time.time()
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(raw)
            resp = http.client.HTTPResponse(c)
            resp.begin()
            err = assert_json_error(resp.status, resp.read(), want, code=code)
        assert time.time() - t0 < 5, (raw, err)
    # Chunked alone, and repeated equal lengths, are still taken.
    for raw in (head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                % (len(body), body),
                head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), len(body), body)):
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(raw)
            resp = http.client.HTTPResponse(c)
            resp.begin()
            assert resp.status == 200, resp.read()


def test_413_announced_client_waits(small_body_server):
    # A client that announces a large body and waits for an answer before sending it (without
    # "Expect: 100-continue") gets the 413 without sending anything.
    s = small_body_server
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        t0 = time.time()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + s.api_key.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (2 << 20))
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        assert_json_error(resp.status, resp.read(), 413, code="body_too_large")
        assert time.time() - t0 < 5


def test_413_chunked(small_body_server):
    s = small_body_server
    requests = pytest.importorskip("requests")

    def pieces():
        for _ in range(64):
            yield b"a" * 65536

    r = requests.post(s.url + CMPL, data=pieces(), headers=s.headers(), timeout=60)
    assert_json_error(r.status_code, r.content, 413, code="body_too_large")
    status, _, _ = s.request("GET", "/health")
    assert status == 200


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_413_curl(small_body_server):
    s = small_body_server
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(json.dumps({"prompt": "a" * (2 << 20)}).encode())
        f.flush()
        for extra in ([], ["-H", "Expect:"], ["-H", "Transfer-Encoding: chunked"]):
            out = subprocess.run(
                ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60",
                 "-H", "Content-Type: application/json", "-H",
                 f"Authorization: Bearer {s.api_key}", *extra, "--data-binary", "@" + f.name,
                 s.url + CMPL], capture_output=True, timeout=90)
            assert out.returncode == 0, (extra, out.stderr)
            body, code = out.stdout.rsplit(b"\n", 1)
            assert_json_error(int(code), body, 413, code="body_too_large")


def test_streams_and_requests_beside_a_flood(make_server):
    # Concurrency with the event thread: parked streams and blocking requests run together
    # while hundreds of half-open connections sit beside them.
    s = make_server("--ctx", "512", "--max-seqs", "16", "--quiet", "--header-timeout", "30")
    socks = half_headers(s.port, 300)
    n = 16
    results = [None] * n
    max_tokens = 32

    def one(i):
        try:
            body = {"prompt": f"Count {i}", "max_tokens": max_tokens, "ignore_eos": True,
                    "stream": i % 2 == 0}
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
            conn.request("POST", CMPL, body=json.dumps(body), headers=s.headers())
            resp = conn.getresponse()
            if body["stream"]:
                events = list(sse_events(resp))
                assert events[-1] == "[DONE]"
                results[i] = sum(1 for e in events[:-1]
                                 if json.loads(e)["choices"] and json.loads(e)["choices"][0]["text"])
            else:
                results[i] = json.loads(resp.read())["usage"]["completion_tokens"]
            conn.close()
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for i, r in enumerate(results):
        assert isinstance(r, int) and r > 0, (i, r)
        if i % 2:
            assert r == max_tokens
    for x in socks:
        x.close()


def test_sigterm_with_floods_open(make_server):
    # Half-open connections, a client that never reads and a running stream do not hold up
    # the exit: the stream ends with an error event and the process exits within the grace.
    s = make_server("--ctx", "4096", "--quiet", "--shutdown-grace", "1", "--header-timeout", "60")
    socks = half_headers(s.port, 300)
    idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(50)]
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("POST", CMPL, body=json.dumps({"prompt": "Go", "max_tokens": 4000,
                                                "ignore_eos": True, "stream": True}),
                 headers=s.headers())
    resp = conn.getresponse()
    events = sse_events(resp)
    next(events)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    rest = list(events)
    assert rest[-1] == "[DONE]"
    assert json.loads(rest[-2])["error"]["code"] == "server_shutdown"
    assert s.proc.wait(20) == 0
    assert time.time() - t0 < 8, time.time() - t0
    for x in socks + idle:
        assert closed_by_peer(x, 2)
        x.close()
    conn.close()
