"""Speculative decoding through the server (docs/speculative.md, "Interfaces").

A server started with --draft-max 8 drafts n-gram tokens for every request unless the request
turns it off ("speculative.n_max": 0, "speculative": false, ...). Speculation may only change
the speed: the same request with and without it must give the same text, greedy or seeded.
"""
import pytest

from conftest import TINY

# A prompt whose answer repeats its input, where n-gram drafts are accepted.
CODE = """def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def describe(width, height):
    return f"{width}x{height}: area {area(width, height)}, perimeter {perimeter(width, height)}"
"""
REPEAT = "Repeat this Python code exactly, changing nothing:\n\n" + CODE


@pytest.fixture(scope="module")
def spec_server(make_server_module):
    return make_server_module("--draft-max", "8", "--max-seqs", "4", "--ctx", "2048", "--quiet")


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


def chat(server, extra, max_tokens=48):
    body = {"messages": [{"role": "user", "content": REPEAT}], "max_tokens": max_tokens}
    body.update(extra)
    status, out = server.json("POST", "/v1/chat/completions", body, timeout=300)
    assert status == 200, out
    return out["choices"][0]["message"]["content"]


def completion(server, extra, max_tokens=48):
    body = {"prompt": REPEAT + "\n" + CODE[:40], "max_tokens": max_tokens}
    body.update(extra)
    status, out = server.json("POST", "/v1/completions", body, timeout=300)
    assert status == 200, out
    return out["choices"][0]["text"]


GREEDY = {"temperature": 0}
SEEDED = {"temperature": 0.8, "seed": 42}
OFF_FORMS = [{"speculative.n_max": 0}, {"speculative": False}, {"speculative": {"n_max": 0}},
             {"speculative.n_max": False}]


def test_models_reports_speculation(spec_server):
    status, body = spec_server.json("GET", "/v1/models")
    assert status == 200
    spec = body["data"][0]["speculative"]
    assert spec["type"] == "ngram"
    assert spec["n_max"] == 8
    assert spec["n_min"] >= 1


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_chat_same_with_and_without(spec_server, sampling):
    on = chat(spec_server, dict(sampling))
    off = chat(spec_server, dict(sampling, **{"speculative.n_max": 0}))
    assert on == off
    assert on  # something was generated
    smaller = chat(spec_server, dict(sampling, speculative={"n_max": 2, "n_min": 1}))
    assert smaller == on


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_completion_same_with_and_without(spec_server, sampling):
    on = completion(spec_server, dict(sampling))
    for off_form in OFF_FORMS:
        assert completion(spec_server, dict(sampling, **off_form)) == on, off_form


def test_ollama_and_anthropic_carry_the_fields(spec_server):
    body = {"model": "x", "prompt": REPEAT, "stream": False,
            "options": {"temperature": 0, "num_predict": 24}}
    status, on = spec_server.json("POST", "/api/generate", body, timeout=300)
    assert status == 200, on
    body["options"]["speculative.n_max"] = 0
    status, off = spec_server.json("POST", "/api/generate", body, timeout=300)
    assert status == 200, off
    assert on["response"] == off["response"]
    body["options"]["speculative.n_max"] = 99
    status, _ = spec_server.json("POST", "/api/generate", body)
    assert status == 400
    status, out = spec_server.json("POST", "/v1/messages", {
        "model": "x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
        "speculative.n_max": "eight"})
    assert status == 400, out
    assert "speculative.n_max" in out["error"]["message"]


def test_metrics_counters(spec_server):
    chat(spec_server, dict(GREEDY), max_tokens=64)
    m = spec_server.metrics()
    for name in ["tessera_spec_drafted_tokens_total", "tessera_spec_accepted_tokens_total",
                 "tessera_spec_verifications_total"]:
        assert name in m, name
    assert m["tessera_spec_accepted_tokens_total"] <= m["tessera_spec_drafted_tokens_total"]
    status, _, text = spec_server.request("GET", "/metrics")
    assert b"# TYPE tessera_spec_drafted_tokens_total counter" in text
    assert b"# HELP tessera_spec_verifications_total " in text
    if not TINY:
        # The real model repeats the code: its n-grams are found and drafted.
        before = m["tessera_spec_drafted_tokens_total"]
        chat(spec_server, dict(GREEDY), max_tokens=64)
        after = spec_server.metrics()
        assert after["tessera_spec_drafted_tokens_total"] > 0
        assert after["tessera_spec_drafted_tokens_total"] > before
        assert after["tessera_spec_verifications_total"] > 0
        assert after["tessera_spec_accepted_tokens_total"] > 0


@pytest.mark.parametrize("extra,param,needle", [
    ({"speculative.n_max": -1}, "speculative.n_max", "in [0, 64]"),
    ({"speculative.n_max": 65}, "speculative.n_max", "got 65"),
    ({"speculative.n_max": 2.5}, "speculative.n_max", "integer"),
    ({"speculative.n_max": "8"}, "speculative.n_max", "got a string"),
    ({"speculative.n_max": True}, "speculative.n_max", "got a boolean"),
    ({"speculative.n_min": 100}, "speculative.n_min", "in [0, 64]"),
    ({"speculative.p_min": 2}, "speculative.p_min", "[0, 1]"),
    ({"speculative": 3}, "speculative", "an object"),
    ({"speculative": {"n_max": -3}}, "speculative.n_max", "in [0, 64]"),
    ({"speculative": {"n_max": 2, "n_min": 4}}, "speculative.n_min", "more than"),
    ({"speculative": {"n_max": 2}, "speculative.n_max": 2}, "speculative", "not both"),
])
def test_bad_values(spec_server, extra, param, needle):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    body.update(extra)
    status, out = spec_server.json("POST", "/v1/chat/completions", body)
    assert status == 400, out
    assert out["error"]["param"] == param
    assert needle in out["error"]["message"], out["error"]["message"]


def test_p_min_accepted(spec_server):
    # llama-server's draft-model threshold: accepted and ignored.
    text = chat(spec_server, dict(GREEDY, **{"speculative.p_min": 0.75, "speculative.n_min": 1}),
                max_tokens=8)
    assert text == chat(spec_server, dict(GREEDY), max_tokens=8)
