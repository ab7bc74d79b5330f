"""The official openai client and curl against `tessera serve`: completions and chat, streaming
and not, usage, finish reasons, logprobs, stop strings, n, seeds, tokenize/detokenize."""
import json
import shutil
import subprocess

import pytest


def test_models(client, model_id):
    models = client.models.list()
    assert [m.id for m in models.data] == [model_id]
    assert models.data[0].object == "model"


def test_completion(client, model_id, server):
    r = client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=5,
                                  temperature=0)
    assert r.id.startswith("cmpl-")
    assert r.object == "text_completion"
    assert r.model == model_id
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].finish_reason in ("length", "stop")
    status, tok = server.json("POST", "/tokenize", {"prompt": "The capital of France is"})
    assert status == 200
    assert r.usage.prompt_tokens == tok["count"]
    assert r.usage.completion_tokens <= 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 5
    # Greedy is deterministic: the same request gives the same text.
    r2 = client.completions.create(model=model_id, prompt="The capital of France is",
                                   max_tokens=5, temperature=0)
    assert r2.choices[0].text == r.choices[0].text


def test_completion_stream(client, model_id):
    chunks = list(client.completions.create(model=model_id, prompt="Once upon a time",
                                            max_tokens=6, temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    full = client.completions.create(model=model_id, prompt="Once upon a time", max_tokens=6,
                                     temperature=0, extra_body={"ignore_eos": True})
    assert full.choices[0].text == text


def test_chat(client, model_id):
    r = client.chat.completions.create(model=model_id, max_tokens=8, temperature=0,
                                       messages=[{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Say hello."}])
    assert r.id.startswith("chatcmpl-")
    assert r.object == "chat.completion"
    msg = r.choices[0].message
    assert msg.role == "assistant" and len(msg.content) > 0
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 8
    assert r.usage.prompt_tokens > 5


def test_chat_stream(client, model_id):
    stream = client.chat.completions.create(
        model=model_id, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Count to five."}])
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens == (chunks[-1].usage.prompt_tokens
                                             + chunks[-1].usage.completion_tokens)
    assert all(c.id == chunks[0].id for c in chunks)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1
    whole = client.chat.completions.create(model=model_id, max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": "Count to five."}])
    assert whole.choices[0].message.content == text
    assert whole.usage.completion_tokens == chunks[-1].usage.completion_tokens


def test_parallel_samples_and_seed(client, model_id):
    kw = dict(model=model_id, max_tokens=6, temperature=1.0, seed=1234, n=3,
              messages=[{"role": "user", "content": "Name a colour."}])
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert 3 <= a.usage.completion_tokens <= 18
    assert a.usage.prompt_tokens == b.usage.prompt_tokens


def test_multiple_prompts(client, model_id):
    r = client.completions.create(model=model_id, prompt=["Hello", "Goodbye"], max_tokens=3,
                                  temperature=0, n=2, extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    assert r.usage.completion_tokens == 12
    # Choices 0,1 belong to "Hello" (greedy: equal), 2,3 to "Goodbye".
    assert r.choices[0].text == r.choices[1].text
    assert r.choices[2].text == r.choices[3].text


def test_stop_string(client, model_id):
    base = client.completions.create(model=model_id, prompt="1, 2, 3, 4,", max_tokens=12,
                                     temperature=0, extra_body={"ignore_eos": True})
    text = base.choices[0].text
    assert len(text) > 4
    stop = text[2:4]
    r = client.completions.create(model=model_id, prompt="1, 2, 3, 4,", max_tokens=12,
                                  temperature=0, stop=[stop], extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == text[:text.index(stop)]


def test_logprobs(client, model_id):
    r = client.chat.completions.create(model=model_id, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=3,
                                       messages=[{"role": "user", "content": "Hi"}])
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert entry.top_logprobs[0].token == entry.token
        assert abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-5
        assert entry.bytes is not None
    c = client.completions.create(model=model_id, prompt="Hello", max_tokens=3, temperature=0,
                                  logprobs=2, extra_body={"ignore_eos": True})
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == 3 and len(lp.token_logprobs) == 3 and len(lp.top_logprobs) == 3
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    assert lp.text_offset[0] == 0


@pytest.mark.real_model
def test_logit_bias_bans_token(client, model_id, server):
    r = client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=1,
                                  temperature=0, logprobs=1)
    first = r.choices[0].text
    status, tok = server.json("POST", "/tokenize", {"prompt": first, "add_special_tokens": False})
    banned = tok["tokens"][0]
    r2 = client.completions.create(model=model_id, prompt="The capital of France is", max_tokens=1,
                                   temperature=0, logit_bias={str(banned): -100})
    assert r2.choices[0].text != first


def test_tokenize_detokenize(server):
    status, t = server.json("POST", "/tokenize", {"prompt": "Hello world"})
    assert status == 200 and t["count"] == len(t["tokens"]) and t["max_model_len"] == 1024
    status, d = server.json("POST", "/detokenize", {"tokens": t["tokens"]})
    assert status == 200 and d["prompt"].endswith("Hello world")
    status, c = server.json("POST", "/tokenize",
                            {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and c["count"] > 3


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl(server, model_id):
    base = ["curl", "-sS", "--max-time", "60", "-H", "Content-Type: application/json",
            "-H", f"Authorization: Bearer {server.api_key}"]
    out = subprocess.run(base + [server.url + "/v1/chat/completions", "-d", json.dumps({
        "model": model_id, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}]})],
        capture_output=True, text=True, check=True).stdout
    body = json.loads(out)
    assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] <= 4
    out = subprocess.run(base + ["-N", server.url + "/v1/completions", "-d", json.dumps({
        "prompt": "Hi", "max_tokens": 3, "stream": True, "ignore_eos": True})],
        capture_output=True, text=True, check=True).stdout
    events = [e[6:] for e in out.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert sum(1 for e in events[:-1] if json.loads(e)["choices"][0]["finish_reason"]) == 1
    out = subprocess.run(["curl", "-sS", server.url + "/health"], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == {"status": "ok"}
