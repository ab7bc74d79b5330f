"""Fixtures of the package's tests: the real model (SmolLM2-135M-Instruct, as the server's
tests use) and the tiny models tests/python/tiny_py_models writes (run_tests.sh sets
TS_TINY_DIR; TS_BIN is the tessera binary of the same build).

Tests that need the real model skip without it, saying why; with CI=true its absence fails
them instead (CI fetches it: scripts/fetch_model.py smollm2).
"""
import os

import pytest

import tessera

REAL = os.environ.get("TS_MODEL") or os.path.expanduser(
    "~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf")
TINY_DIR = os.environ.get("TS_TINY_DIR", "")
THREADS = 2


def _need(path: str, what: str) -> str:
    if os.path.exists(path):
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {what} is absent: {path}")
    pytest.skip(f"needs {what} at {path}")
    return path


@pytest.fixture(scope="session")
def real_path() -> str:
    return _need(REAL, "the real model (python3 scripts/fetch_model.py smollm2; or TS_MODEL)")


@pytest.fixture(scope="session")
def tiny_chat_path() -> str:
    return _need(os.path.join(TINY_DIR, "tiny-chat.gguf"),
                 "the tiny chat model (tiny_py_models; run_tests.sh sets TS_TINY_DIR)")


@pytest.fixture(scope="session")
def tiny_bert_path() -> str:
    return _need(os.path.join(TINY_DIR, "tiny-bert.gguf"),
                 "the tiny BERT model (tiny_py_models; run_tests.sh sets TS_TINY_DIR)")


@pytest.fixture(scope="session")
def real(real_path):
    with tessera.Model(real_path, n_ctx=1024, n_threads=THREADS) as m:
        yield m


@pytest.fixture(scope="session")
def tiny(tiny_chat_path):
    with tessera.Model(tiny_chat_path, n_threads=THREADS) as m:
        yield m


@pytest.fixture(scope="session")
def tessera_bin() -> str:
    b = os.environ.get("TS_BIN", "")
    if not b or not os.access(b, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no tessera binary (TS_BIN={b!r})")
        pytest.skip("needs the tessera binary (TS_BIN)")
    return b
