#!/usr/bin/env bash
# Builds the Python package (python/) with pip and runs its tests (python/tests) with pytest.
#
#   TS_BIN=build/tessera TS_TINY_WRITER=build/tests/python/tiny_py_models \
#       bash tests/python/run_tests.sh [pytest args...]
#
# TS_BIN          the tessera binary (greedy output is compared with `tessera run`'s)
# TS_TINY_WRITER  the tiny_py_models program (writes the tiny chat and BERT models)
# TS_MODEL        the real model (default ~/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf);
#                 without it the tests that need it skip, and with CI=true the run fails
# TS_PY_LIB       a libtessera.so of a TS_SHARED build of this checkout: packaged instead of
#                 compiling the library again (empty: the wheel compiles it; unset:
#                 build/libtessera.so when there is one)
# TS_WORK_DIR     where the package is installed (pip --target) and the tiny models written
#                 (default: a fresh mktemp -d, removed at exit)
# TS_PY_VENV      virtual environment for pytest, cffi and scikit-build-core (default
#                 ~/.cache/tessera/venv-py; outside the repository), made on first use with the
#                 versions of requirements.txt
#
# Exit status 77 (CTest: skipped) when python3 -m venv or the packages cannot be had, or when a
# test skipped (one TS-NOT-RUN line per reason) — never with CI=true, where that fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TS_BIN:-$root/build/tessera}"
writer="${TS_TINY_WRITER:-$root/build/tests/python/tiny_py_models}"
venv="${TS_PY_VENV:-$HOME/.cache/tessera/venv-py}"
# Unset (run by hand): the library of build/ when it has one; set but empty: compile it.
if [ -z "${TS_PY_LIB+set}" ] && [ -f "$root/build/libtessera.so" ]; then
    TS_PY_LIB="$root/build/libtessera.so"
fi
ci=0
[ "${CI:-}" = "true" ] && ci=1

skip() {
    echo "SKIP: $*"
    echo "TS-NOT-RUN: ${TS_TEST_NAME:-python/package}: not run: $*"
    [ "$ci" = 1 ] && echo "FAIL: CI=true: this must run" && exit 1
    exit 77
}

[ -x "$bin" ] || skip "no tessera binary at $bin (set TS_BIN)"
[ -x "$writer" ] || skip "no tiny_py_models at $writer (set TS_TINY_WRITER)"
if [ -n "${TS_WORK_DIR:-}" ]; then
    work="$TS_WORK_DIR"
    rm -rf "$work/site" "$work/models"
    mkdir -p "$work"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi

# The venv (shared by checkouts; its packages are pinned and the package itself never goes in).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
command -v flock >/dev/null && flock 9
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >/dev/null 2>&1 || skip "cannot create a venv with $py -m venv" \
        "(apt-get install python3-venv)"
fi
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

# pip install ./python, into a folder of its own: the package as users get it.
args=(--no-build-isolation --no-deps --disable-pip-version-check -q --target "$work/site"
      --config-settings "build-dir=$work/wheel-build")
if [ -n "${TS_PY_LIB:-}" ]; then
    [ -f "$TS_PY_LIB" ] || { echo "FAIL: TS_PY_LIB=$TS_PY_LIB does not exist"; exit 1; }
    args+=(--config-settings "cmake.define.TS_PY_PREBUILT=$TS_PY_LIB")
    echo "packaging the library of this build: $TS_PY_LIB"
else
    echo "building the library inside the wheel (CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-default})"
fi
t0=$(date +%s)
if ! "$venv/bin/python" -m pip install "${args[@]}" "$root/python"; then
    echo "FAIL: pip install ./python failed"
    exit 1
fi
echo "pip install ./python: $(($(date +%s) - t0)) s"

mkdir -p "$work/models"
"$writer" "$work/models" || { echo "FAIL: tiny_py_models failed"; exit 1; }

export TS_BIN="$bin" TS_TINY_DIR="$work/models" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
cd "$root/python/tests"
out="$(mktemp)"
"$venv/bin/python" -m pytest -p no:cacheprovider -q -rs --durations=5 "$@" . | tee "$out"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 5 ] && echo "no tests collected" && rm -f "$out" && exit 1
skipped=$(grep -E '^SKIPPED \[' "$out" || true)
rm -f "$out"
if [ "$rc" -eq 0 ] && [ -n "$skipped" ]; then
    while IFS= read -r line; do
        echo "TS-NOT-RUN: ${TS_TEST_NAME:-python/package}: not run: ${line#SKIPPED }"
    done <<<"$skipped"
    [ "$ci" = 1 ] && echo "FAIL: CI=true and tests skipped" && exit 1
    exit 77
fi
exit "$rc"
