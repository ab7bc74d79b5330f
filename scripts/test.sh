#!/usr/bin/env bash
# Builds tessera and runs every test: scripts/test.sh [BUILD_DIR] [extra cmake args...]
# Environment: TS_JOBS (parallel build/test jobs, default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
build=${1:-build}
shift || true
jobs=${TS_JOBS:-$(nproc)}
cmake -S . -B "$build" -DTS_WERROR=ON -DTS_BUILD_TESTS=ON -DTS_MPI=ON "$@" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
