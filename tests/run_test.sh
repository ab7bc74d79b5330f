#!/usr/bin/env bash
# Runs one test program for CTest and says honestly whether it ran:
#
#   tests/run_test.sh PROGRAM [ARGS...]
#
# A program that fails keeps its exit status. A program that exits 0 but skipped something —
# cmocka prints "[  SKIPPED ]" for a case that called skip(), and our programs print a line
# "not run: REASON" for a part they could not run (no model, no MPI, an instruction set this
# CPU lacks) — exits 77, which CTest reports as skipped ("did not run"), never as passed; the
# reasons are repeated last as "TS-NOT-RUN: ..." lines that scripts/test.sh gathers into its
# summary.
#
# Under CI=true a test that could not run because the model is missing fails instead: CI
# fetches the models, so their absence means the run tested less than it claims. Such tests
# name scripts/fetch_model.py in their reason (tests/common/skip.h).
set -uo pipefail
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -ne 0 ] && exit "$rc"
reasons=$(grep -E '^\[  SKIPPED \]|not run: ' "$out" | grep -v '^\[  SKIPPED \] [0-9]* test' || true)
[ -z "$reasons" ] && exit 0
while IFS= read -r line; do
    echo "TS-NOT-RUN: $(basename "$1"): $line"
done <<<"$(grep -E 'not run: ' "$out" || echo "a cmocka case called skip()")"
if [ "${CI:-}" = "true" ] && grep -qiE '(not run|skip).*fetch_model' "$out"; then
    echo "FAIL: CI=true and the model this test needs is absent (python3 scripts/fetch_model.py)"
    exit 1
fi
exit 77
