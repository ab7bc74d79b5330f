"""Concurrency and lifecycle: 32 parallel streams, disconnects free KV blocks, graceful and
forced shutdown."""
import http.client
import json
import signal
import socket
import threading
import time

import pytest

from conftest import TINY, sse_events

CMPL = "/v1/completions"
CHAT = "/v1/chat/completions"


def stream_request(server, path, body, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body), headers=server.headers())
    resp = conn.getresponse()
    return conn, resp


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


@pytest.mark.slow
def test_32_parallel_streams(server):
    n_req, max_tokens = 32, 6
    results = [None] * n_req
    errors = []

    def worker(i):
        try:
            body = {"messages": [{"role": "user", "content": f"Say the number {i}."}],
                    "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
                    "stream_options": {"include_usage": True}, "temperature": 0.8, "seed": i}
            conn, resp = stream_request(server, CHAT, body)
            assert resp.status == 200, resp.read()
            events = list(sse_events(resp))
            conn.close()
            results[i] = events
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))

    before = server.metrics()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_req)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(170)
    assert not errors, errors
    for i, events in enumerate(results):
        assert events is not None, f"request {i} did not finish"
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        usage = chunks[-1]["usage"]
        assert usage["completion_tokens"] == max_tokens, (i, usage)
        status, tok = server.json("POST", "/tokenize", {
            "messages": [{"role": "user", "content": f"Say the number {i}."}]})
        assert usage["prompt_tokens"] == tok["count"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + max_tokens
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]
                    and c["choices"][0]["finish_reason"]]
        assert finishes == ["length"]
    after = server.metrics()
    key = 'tessera_http_requests_total{endpoint="/v1/chat/completions",status="200"}'
    assert after.get(key, 0) - before.get(key, 0) == n_req
    assert after["tessera_generation_tokens_total"] - before["tessera_generation_tokens_total"] \
        == n_req * max_tokens
    # The engine batched them: far fewer steps than 32 * (prefill + 6 decodes) one at a time.
    steps = after["tessera_engine_steps_total"] - before["tessera_engine_steps_total"]
    assert steps < n_req * max_tokens, steps
    print(f"32 streams x {max_tokens} tokens in {time.time() - t0:.1f} s, {steps:.0f} steps")


def test_disconnect_streaming_frees_blocks(server):
    before = server.metrics()
    body = {"prompt": "Write a very long essay about the sea.", "max_tokens": 900,
            "ignore_eos": True, "stream": True}
    conn, resp = stream_request(server, CMPL, body)
    assert resp.status == 200
    events = sse_events(resp)
    for _ in range(3):
        next(events)
    assert server.metrics()["tessera_kv_blocks_used"] > 0
    # Hang up mid-stream (RST rather than a polite FIN makes no difference to the server).
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    m = wait_for(lambda: (lambda m: m if m["tessera_kv_blocks_used"] == 0
                          and m["tessera_requests_in_flight"] == 0 else None)(server.metrics()),
                 10, "blocks to be freed after the disconnect")
    assert m["tessera_requests_aborted_total"] == before["tessera_requests_aborted_total"] + 1
    assert m["tessera_num_requests_running"] == 0
    # Far fewer than 900 tokens were generated for it.
    assert m["tessera_engine_generated_tokens_total"] - \
        before["tessera_engine_generated_tokens_total"] < 300


def test_disconnect_while_queued(make_server):
    s = make_server("--max-seqs", "1", "--ctx", "1024", "--quiet")
    done = {}

    def first():
        # The tiny model is fast: it needs a longer answer to be seen running.
        done["r"] = s.request("POST", CMPL, {"prompt": "Hello", "max_tokens": 900 if TINY else 40,
                                             "ignore_eos": True})

    t = threading.Thread(target=first)
    t.start()
    wait_for(lambda: s.metrics()["tessera_num_requests_running"] >= 1, 20, "first request")
    # A non-streaming request that waits in the queue, then its client leaves.
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    conn.request("POST", CMPL, body=json.dumps({"prompt": "Queued", "max_tokens": 40}),
                 headers=s.headers())
    wait_for(lambda: s.metrics()["tessera_requests_in_flight"] >= 2, 10, "second request queued")
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    wait_for(lambda: s.metrics()["tessera_requests_aborted_total"] >= 1, 10, "queued abort")
    t.join(120)
    assert done["r"][0] == 200
    # Idle, and every block given back (a request's last event can reach its client just
    # before the engine releases its blocks; a leak still fails here, at the timeout).
    m = wait_for(lambda: (lambda m: m if m["tessera_requests_in_flight"] == 0
                          and m["tessera_kv_blocks_used"] == 0 else None)(s.metrics()),
                 10, "idle with every KV block free")
    assert m['tessera_http_requests_total{endpoint="/v1/completions",status="499"}'] == 1


def test_graceful_shutdown_finishes_requests(make_server):
    s = make_server("--ctx", "512", "--quiet", "--shutdown-grace", "30")
    out = {}
    n_tokens = 400 if TINY else 20  # the tiny model must still be running at the signal

    def req():
        out["r"] = s.request("POST", CMPL, {"prompt": "Hi", "max_tokens": n_tokens,
                                            "ignore_eos": True})

    t = threading.Thread(target=req)
    t.start()
    wait_for(lambda: s.metrics()["tessera_requests_in_flight"] >= 1, 10, "request admitted")
    s.proc.send_signal(signal.SIGTERM)
    t.join(60)
    status, _, data = out["r"]
    assert status == 200
    assert json.loads(data)["usage"]["completion_tokens"] == n_tokens
    assert s.proc.wait(30) == 0
    # No longer listening.
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        refused = False
    except OSError:
        refused = True
    assert refused


def test_forced_shutdown_ends_streams_with_error(make_server):
    s = make_server("--ctx", "2048", "--quiet", "--shutdown-grace", "1")
    conn, resp = stream_request(s, CMPL, {"prompt": "Go on", "max_tokens": 1500,
                                          "ignore_eos": True, "stream": True})
    assert resp.status == 200
    events = sse_events(resp)
    next(events)
    t0 = time.time()
    s.proc.send_signal(signal.SIGINT)
    rest = list(events)
    assert rest[-1] == "[DONE]"
    err = json.loads(rest[-2])["error"]
    assert err["code"] == "server_shutdown"
    assert s.proc.wait(30) == 0
    assert time.time() - t0 < 15
    conn.close()
