"""POST /v1/embeddings with the openai client and raw HTTP: the decoder under test (TS_MODEL,
whose vectors are its last token's final hidden state) and, when present, a BERT embedding
model (TS_EMBED_MODEL, default ~/.cache/tessera/models/all-MiniLM-L6-v2.F32.gguf: mean pooling;
tests that need it skip without it)."""
import base64
import os
import threading

import pytest

EMBED_MODEL = os.environ.get(
    "TS_EMBED_MODEL", os.path.expanduser("~/.cache/tessera/models/all-MiniLM-L6-v2.F32.gguf"))


def norm(v):
    return sum(x * x for x in v) ** 0.5


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / norm(a) / norm(b)


def test_embeddings_decoder(client, model_id, server):
    texts = ["The cat sat on the mat.", "A dog barked at the moon.", "hello"]
    r = client.embeddings.create(model=model_id, input=texts)
    assert r.object == "list" and r.model == model_id
    assert [d.index for d in r.data] == [0, 1, 2]
    assert all(d.object == "embedding" for d in r.data)
    dims = {len(d.embedding) for d in r.data}
    assert len(dims) == 1
    for d in r.data:
        assert abs(norm(d.embedding) - 1) < 1e-5
    counts = [server.json("POST", "/tokenize", {"prompt": t})[1]["count"] for t in texts]
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(counts)
    # One input alone gives the vector it got beside the others.
    one = client.embeddings.create(model=model_id, input=texts[1]).data[0].embedding
    assert max(abs(x - y) for x, y in zip(one, r.data[1].embedding)) < 1e-5
    # Token ids give what the text's ids give.
    _, tok = server.json("POST", "/tokenize", {"prompt": texts[0]})
    by_ids = client.embeddings.create(model=model_id, input=[tok["tokens"]]).data[0].embedding
    assert max(abs(x - y) for x, y in zip(by_ids, r.data[0].embedding)) < 1e-5
    # base64: little-endian float32 of the same numbers.
    status, body = server.json("POST", "/v1/embeddings",
                               {"input": texts[0], "encoding_format": "base64"})
    assert status == 200
    raw = base64.b64decode(body["data"][0]["embedding"])
    import struct
    floats = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert max(abs(x - y) for x, y in zip(floats, r.data[0].embedding)) < 1e-6


def test_embeddings_beside_generation(client, model_id):
    alone = client.embeddings.create(model=model_id, input="The cat sat on the mat.")
    out = {}

    def generate():
        out["r"] = client.completions.create(model=model_id, prompt="Once upon a time",
                                             max_tokens=48, temperature=0)

    t = threading.Thread(target=generate)
    t.start()
    vecs = [client.embeddings.create(model=model_id, input="The cat sat on the mat.")
            for _ in range(4)]
    t.join()
    assert out["r"].usage.completion_tokens > 0
    for v in vecs:
        assert max(abs(x - y) for x, y in zip(v.data[0].embedding, alone.data[0].embedding)) < 1e-5


@pytest.mark.parametrize("body,param,needle", [
    ({}, "input", "required"),
    ({"input": []}, "input", "empty array"),
    ({"input": ""}, "input", "empty string"),
    ({"input": ["ok", 5]}, "input", "input[1] must be a string or an array of token ids"),
    ({"input": {"text": "x"}}, "input", "got an object"),
    ({"input": [1, 10 ** 9]}, "input", "token id"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format", "base64"),
    ({"input": "x", "dimensions": 3}, "dimensions", "vector size"),
    ({"input": "word " * 2000}, "input", "embeds at most"),
])
def test_embeddings_errors(server, body, param, needle):
    status, r = server.json("POST", "/v1/embeddings", body)
    assert status == 400, r
    assert r["error"]["type"] == "invalid_request_error"
    assert r["error"]["param"] == param
    assert needle in r["error"]["message"]


def test_embeddings_error_client(client, model_id):
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=model_id, input=[])
    assert e.value.status_code == 400


def test_embeddings_unknown_model(client):
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="x")


@pytest.fixture(scope="module")
def encoder(make_server_module):
    if not os.path.exists(EMBED_MODEL):
        pytest.skip(f"no embedding model at {EMBED_MODEL} (set TS_EMBED_MODEL)")
    return make_server_module(model=EMBED_MODEL)


@pytest.fixture(scope="module")
def make_server_module():
    from conftest import Server
    started = []

    def make(*args, **kw):
        s = Server(list(args) + ["--quiet"], **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        rc, log = s.stop()
        assert rc == 0, log


@pytest.mark.optional_model
def test_encoder_embeddings(encoder):
    openai = pytest.importorskip("openai")
    c = openai.OpenAI(base_url=encoder.url + "/v1", api_key=encoder.api_key, max_retries=0)
    texts = ["A cat is sitting on a mat.", "There is a cat on the mat.",
             "The stock market fell sharply today."]
    r = c.embeddings.create(model=c.models.list().data[0].id, input=texts)
    v = [d.embedding for d in r.data]
    assert all(abs(norm(x) - 1) < 1e-5 for x in v)
    # A sentence-embedding model puts the paraphrase nearer than the unrelated sentence.
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.2
    # The [CLS] ... [SEP] wrapping counts in usage.
    assert r.usage.prompt_tokens == sum(
        encoder.json("POST", "/tokenize", {"prompt": t})[1]["count"] for t in texts)


@pytest.mark.optional_model
def test_encoder_refuses_generation(encoder):
    status, r = encoder.json("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 3})
    assert status == 400
    assert r["error"]["code"] == "model_not_supported"
    assert "/v1/embeddings" in r["error"]["message"]
    status, r = encoder.json("POST", "/v1/embeddings", {"input": "word " * 600})
    assert status == 400 and r["error"]["code"] == "context_length_exceeded"
