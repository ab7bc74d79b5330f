"""Errors come back as TesseraError subclasses by status, carrying the library's message."""

import pytest

import tessera
from conftest import THREADS


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.gguf")
    with pytest.raises(tessera.TesseraIOError) as e:
        tessera.Model(path)
    assert isinstance(e.value, tessera.TesseraError)
    assert isinstance(e.value, OSError)
    assert e.value.status == -3
    assert "nope.gguf" in str(e.value)
    assert e.value.status_name.startswith("TS_ERR_IO")


def test_malformed_gguf(tmp_path, tiny_chat_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all, just text\n" * 4)
    with pytest.raises(tessera.FormatError) as e:
        tessera.Model(str(bad))
    assert e.value.status == -4 and "bad.gguf" in str(e.value)
    # A real file cut short: its header promises more than is there.
    with open(tiny_chat_path, "rb") as f:
        head = f.read(4096)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(head)
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Model(str(cut))
    assert e.value.status in (-4, -8) and "cut.gguf" in str(e.value)


def test_prompt_longer_than_context(tiny_chat_path):
    with tessera.Model(tiny_chat_path, n_ctx=64, n_threads=THREADS) as m:
        assert m.n_ctx == 64
        long = " ".join(["word"] * 200)
        assert len(m.tokenize(long)) > 64
        with pytest.raises(tessera.LimitError) as e:
            m.generate(long, max_tokens=8)
        assert e.value.status == -11
        assert "64" in str(e.value)
        with pytest.raises(tessera.LimitError):
            m.chat([{"role": "user", "content": long}], max_tokens=8)
        # The model still works after a refused request.
        assert isinstance(m.generate("hi", max_tokens=4, temperature=0), str)


def test_bad_context_parameters(tiny_chat_path):
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Model(tiny_chat_path, backend="quantum")
    assert "quantum" in str(e.value)
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Model(tiny_chat_path, kv_type="q3_z")
    assert "q3_z" in str(e.value)


def test_closed_model(tiny_chat_path):
    m = tessera.Model(tiny_chat_path, n_threads=THREADS)
    m.close()
    m.close()  # twice is fine
    with pytest.raises(tessera.StateError, match="closed"):
        m.generate("hi")
    with pytest.raises(tessera.StateError):
        m.tokenize("hi")


def test_chat_template_errors(tiny_chat_path):
    # A template that does not compile: the context is refused, naming the line.
    with pytest.raises(tessera.FormatError, match="template:1"):
        tessera.Model(tiny_chat_path, n_threads=THREADS,
                      chat_template_source="{% for m in messages %}{{ m.content")
    # One that raises while rendering: the chat call fails with the template's message.
    src = "{% if messages[0].role == 'system' %}{{ raise_exception('no system role') }}" \
          "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    with tessera.Model(tiny_chat_path, n_threads=THREADS, chat_template_source=src) as m:
        with pytest.raises(tessera.AbortedError) as e:
            m.chat([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}],
                   max_tokens=4)
        assert str(e.value).startswith("chat template") and "no system role" in str(e.value)
        r = m.chat([{"role": "user", "content": "hi"}], max_tokens=4)
        assert r["object"] == "chat.completion"
