"""generate(): greedy equal to `tessera run`, streams, stop strings, seeds, grammars, tokens."""
import os
import subprocess

import pytest

import tessera
from conftest import THREADS

PROMPT = "The capital of France is"


def run_greedy(tessera_bin, path, prompt, n):
    """What `tessera run` generates greedily (stdout is the prompt, the text, a newline)."""
    env = dict(os.environ)
    out = subprocess.run([tessera_bin, "run", "-m", path, "-p", prompt, "-n", str(n), "--temp",
                          "0", "-t", str(THREADS)], capture_output=True, env=env, check=True)
    text = out.stdout.decode("utf-8")
    assert text.startswith(prompt), text
    assert text.endswith("\n"), text
    return text[len(prompt):-1]


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_greedy_matches_tessera_run(which, request, tessera_bin):
    model = request.getfixturevalue(which)
    want = run_greedy(tessera_bin, model.path, PROMPT, 24)
    got = model.generate(PROMPT, max_tokens=24, temperature=0)
    assert got == want
    assert len(got) > 0
    c = model.last_completion
    assert c is not None and c.finish_reason in ("stop", "length")
    assert c.prompt_tokens == len(model.tokenize(PROMPT, parse_special=True))
    if which == "real":
        assert "Paris" in got


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_stream_joins_to_whole(which, request):
    model = request.getfixturevalue(which)
    whole = model.generate(PROMPT, max_tokens=32, temperature=0)
    pieces = list(model.generate(PROMPT, max_tokens=32, temperature=0, stream=True))
    assert len(pieces) > 1
    assert all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == whole
    # The same with sampling and a seed.
    a = model.generate(PROMPT, max_tokens=32, temperature=0.9, seed=7)
    b = "".join(model.generate(PROMPT, max_tokens=32, temperature=0.9, seed=7, stream=True))
    assert a == b


def test_stream_stopped_early_leaves_model_usable(tiny):
    it = tiny.generate(PROMPT, max_tokens=64, temperature=0, stream=True)
    next(it)
    it.close()  # aborts the request
    assert tiny.generate(PROMPT, max_tokens=8, temperature=0) == \
        tiny.generate(PROMPT, max_tokens=8, temperature=0)


def test_seed_and_sampling(real):
    a = real.generate(PROMPT, max_tokens=16, temperature=1.0, top_p=0.9, top_k=50, seed=123)
    b = real.generate(PROMPT, max_tokens=16, temperature=1.0, top_p=0.9, top_k=50, seed=123)
    assert a == b
    outs = {real.generate(PROMPT, max_tokens=12, temperature=1.5, top_k=0, top_p=1.0,
                          min_p=0.0, seed=s) for s in range(3)}
    assert len(outs) > 1  # different seeds, different samples


def test_stop_strings(real):
    whole = real.generate(PROMPT, max_tokens=24, temperature=0)
    assert "." in whole
    cut = real.generate(PROMPT, max_tokens=24, temperature=0, stop=["."])
    assert cut == whole[:whole.index(".")]
    assert real.last_completion.finish_reason == "stop"


def test_max_tokens_is_length(tiny):
    tiny.generate(PROMPT, max_tokens=5, temperature=0)
    c = tiny.last_completion
    assert c.finish_reason in ("length", "stop")
    assert c.completion_tokens <= 5


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_grammar(which, request):
    model = request.getfixturevalue(which)
    out = model.generate("Is the sky blue? Answer:", max_tokens=8, temperature=0.8, seed=1,
                         grammar='root ::= " yes" | " no"')
    assert out in (" yes", " no")
    out = model.generate("A person:", max_tokens=64, temperature=0.8, seed=2,
                         grammar='{"type":"object","properties":{"age":{"type":"integer"}},'
                                 '"required":["age"],"additionalProperties":false}',
                         grammar_kind="json_schema")
    import json
    v = json.loads(out)
    assert isinstance(v["age"], int) and list(v) == ["age"]


def test_bad_grammar_is_format_error(tiny):
    with pytest.raises(tessera.FormatError) as e:
        tiny.generate("x", max_tokens=4, grammar="root ::= (")
    assert e.value.status == -4
    assert str(e.value)


@pytest.mark.parametrize("which", ["real", "tiny"])
def test_tokenize_round_trip(which, request):
    model = request.getfixturevalue(which)
    text = "Hello, world! 123"
    ids = model.tokenize(text, add_special=False)
    assert ids and all(isinstance(i, int) for i in ids)
    assert model.detokenize(ids) == text
    info = model.info
    with_special = model.tokenize(text, add_special=True)
    if info["bos"] >= 0 and with_special[0] == info["bos"]:
        assert with_special[1:] == ids
    else:
        assert with_special[:len(ids)] == ids
    assert all(0 <= i < info["n_vocab"] for i in with_special)
