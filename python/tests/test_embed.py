"""embed(): an encoder's vectors; a text-generation model says it is not an embedding model."""
import math

import pytest

import tessera
from conftest import THREADS


@pytest.fixture(scope="module")
def bert(tiny_bert_path):
    with tessera.Model(tiny_bert_path, n_threads=THREADS) as m:
        yield m


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def test_encoder_vectors(bert):
    n_embd = bert.info["n_embd"]
    assert bert.info["encoder"] is True
    vecs = bert.embed(["hello world", "a cat sat", "hello world"])
    assert len(vecs) == 3
    assert all(len(v) == n_embd for v in vecs)
    assert all(abs(norm(v) - 1.0) < 1e-4 for v in vecs)
    assert vecs[0] == vecs[2]  # deterministic, and independent of the batch's other inputs
    assert vecs[0] != vecs[1]
    one = bert.embed("hello world")
    assert isinstance(one, list) and isinstance(one[0], float)
    assert max(abs(a - b) for a, b in zip(one, vecs[0])) < 1e-5


def test_pooling_and_normalize(bert):
    raw = bert.embed("a cat sat", normalize=False)
    unit = bert.embed("a cat sat")
    n = norm(raw)
    assert n > 0
    assert max(abs(a / n - b) for a, b in zip(raw, unit)) < 1e-5
    cls = bert.embed("a cat sat", pooling="cls")
    assert cls != unit
    with pytest.raises(tessera.InvalidArgumentError):
        bert.embed("x", pooling="median")


def test_encoder_does_not_generate(bert):
    with pytest.raises(tessera.TesseraError):
        bert.generate("hello", max_tokens=4)


def test_decoder_is_not_an_embedding_model(tiny, tiny_chat_path):
    with pytest.raises(tessera.UnsupportedError, match="not an embedding model"):
        tiny.embed(["hello"])
    with tessera.Model(tiny_chat_path, n_threads=THREADS, embedding=True) as m:
        v = m.embed(["hello", "world"])
        assert len(v) == 2 and len(v[0]) == m.info["n_embd"]
        assert abs(norm(v[0]) - 1.0) < 1e-4
