#!/usr/bin/env bash
# Runs the Python tests of `tessera serve` (tests/server/test_*.py) with pytest.
#
#   TS_BIN=build/tessera bash tests/server/run_py_tests.sh [pytest args...]
#
# TS_BIN         the tessera binary (default: build/tessera next to this checkout)
# TS_MODEL       the GGUF model (default ~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf).
#                When that file does not exist the tests run on a tiny random-weight model
#                written by TS_TINY_WRITER, and those that judge the model's answers skip.
# TS_TINY_WRITER the tiny_server_model program (default: build/tests/server/tiny_server_model);
#                test_conn.py runs on its model even when the real one is there
# TS_WORK_DIR    where the tiny model is written (default: a fresh mktemp -d, removed at exit)
# TS_VENV        virtual environment for the Python packages (default ~/.cache/tessera/venv-test;
#                outside the repository). Created on first use; the packages and versions of
#                requirements.txt are installed into it.
#
# Exit status 77 (CTest: skipped) when neither model can be had, or python3 -m venv or the
# packages are not available. The browser test additionally needs Debian's chromium and
# chromium-driver and skips itself without them.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TS_BIN:-$root/build/tessera}"
model="${TS_MODEL:-$HOME/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
venv="${TS_VENV:-$HOME/.cache/tessera/venv-test}"

skip() {
    echo "SKIP: $*"
    echo "TS-NOT-RUN: ${TS_TEST_NAME:-server/python}: not run: $*"
    exit 77
}

[ -x "$bin" ] || skip "no tessera binary at $bin (set TS_BIN)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
model_kind=real
writer="${TS_TINY_WRITER:-$root/build/tests/server/tiny_server_model}"
# A sanitizer build serves 10-50x slower, and what it looks for (memory errors, undefined
# behaviour, leaks) lives in the HTTP, parsing and lifecycle code, not in what the model answers:
# it serves the tiny model, and the tests that judge answers (real_model) or generate many
# tokens (slow) are left out of its run. They run in the plain build (docs/testing.md).
sanitized=0
if grep -q "__asan_init\|__ubsan_handle" "$bin" 2>/dev/null; then
    sanitized=1
fi
if [ ! -f "$model" ] || [ "$sanitized" = 1 ]; then
    [ -x "$writer" ] || skip "no model at $model (set TS_MODEL; scripts/fetch_model.py smollm2)" \
        "and no tiny_server_model at $writer (set TS_TINY_WRITER)"
    if [ -n "${TS_WORK_DIR:-}" ]; then
        work="$TS_WORK_DIR"
        mkdir -p "$work"
    else
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
    fi
    if [ "$sanitized" = 1 ]; then
        echo "sanitizer build: running on the tiny model, without the slow and real_model tests"
    else
        echo "no model at $model: running on a tiny model (tests that need the real one skip)"
    fi
    if [ "${CI:-}" = "true" ] && [ "$sanitized" = 0 ]; then
        echo "FAIL: CI=true and the model is absent: $model (python3 scripts/fetch_model.py smollm2)"
        exit 1
    fi
    model="$work/tiny-server-model.gguf"
    "$writer" "$model" || { echo "tiny_server_model failed"; exit 1; }
    model_kind=tiny
fi

# server/python and server/python_optional may start at once on a fresh machine: one of them
# creates the venv and installs the packages while the other waits (flock).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
command -v flock >/dev/null && flock 9
# Debian's python3 is preferred: its venv module is packaged as python3-venv.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    "$py" -m venv "$venv" >/dev/null 2>&1 || skip "cannot create a venv with $py -m venv " \
        "(apt-get install python3-venv)"
fi
# The pinned versions of requirements.txt, installed when any is missing or different.
req="$here/requirements.txt"
if ! "$venv/bin/python" - "$req" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, want = line.split("==")
        assert version(name) == want, name
PY
then
    echo "installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >/dev/null 2>&1 ||
        skip "pip could not install the packages of $req into $venv"
fi

exec 9>&-

# TS_PY_MARKERS selects tests by marker (pytest -m), as CTest's server/python and
# server/python_optional do; a sanitizer build leaves out slow and real_model (above).
markers="${TS_PY_MARKERS:-}"
if [ "$sanitized" = 1 ]; then
    markers="${markers:+($markers) and }not slow and not real_model"
fi
extra=()
[ -n "$markers" ] && extra=(-m "$markers")

# TS_TINY_WRITER also serves test_conn.py, whose servers always run the tiny model.
export TS_BIN="$bin" TS_MODEL="$model" TS_MODEL_KIND="$model_kind" TS_TINY_WRITER="$writer"
export PYTHONDONTWRITEBYTECODE=1
cd "$here"
out="$(mktemp)"
"$venv/bin/python" -m pytest -p no:cacheprovider -q -rs --durations=8 "${extra[@]}" "$@" . |
    tee "$out"
rc=${PIPESTATUS[0]}
# pytest: 5 means no test was collected, which must not pass silently.
[ "$rc" -eq 5 ] && echo "no tests collected" && rm -f "$out" && exit 1
# A skipped pytest test did not run: the suite is then reported as skipped (77), never as
# passed, with one TS-NOT-RUN line per reason for scripts/test.sh's summary (docs/testing.md).
skipped=$(grep -E '^SKIPPED \[' "$out" || true)
rm -f "$out"
if [ "$rc" -eq 0 ] && [ -n "$skipped" ]; then
    while IFS= read -r line; do
        echo "TS-NOT-RUN: ${TS_TEST_NAME:-server/python}: not run: ${line#SKIPPED }"
    done <<<"$skipped"
    exit 77
fi
exit "$rc"
