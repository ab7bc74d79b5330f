#!/usr/bin/env bash
# Builds tessera and runs every test: scripts/test.sh [BUILD_DIR] [extra cmake args...]
# Environment: TS_JOBS (parallel build/test jobs, default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
build=${1:-build}
shift || true
jobs=${TS_JOBS:-$(nproc)}
# TS_SHARED: libtessera.so too, which the Python package's test (python/package) packages
# instead of compiling the library a second time.
cmake -S . -B "$build" -DTS_WERROR=ON -DTS_BUILD_TESTS=ON -DTS_MPI=ON -DTS_SHARED=ON "$@" >/dev/null
cmake --build "$build" -j "$jobs"
rc=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" || rc=$?
# What did not run, and why (tests/run_test.sh writes a TS-NOT-RUN line for each part a test
# could not run: no model, no MPI, an instruction set this CPU lacks, no browser).
log="$build/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
    notrun=$(grep -a '^TS-NOT-RUN: ' "$log" | sed 's/^TS-NOT-RUN: //' | sort -u || true)
    if [ -n "$notrun" ]; then
        echo "summary: $(printf '%s\n' "$notrun" | wc -l) parts of tests did not run (reported as skipped, not passed):"
        printf '%s\n' "$notrun" | sed 's/^/  not run: /'
    else
        echo "summary: every test ran in full"
    fi
fi
exit "$rc"
