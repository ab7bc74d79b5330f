#!/usr/bin/env bash
# Fuzzes the GGUF reader: tests/fuzz/run.sh [SECONDS] (default 60).
#
# Configures a clang build with -DTS_FUZZ=ON in build-fuzz/, builds fuzz_gguf, and runs it for
# SECONDS on a scratch copy of tests/fuzz/corpus/gguf (the committed seeds stay untouched).
# Exits non-zero when libFuzzer reports a crash, leak, timeout or undefined behaviour; the
# reproducer is then in build-fuzz/artifacts/ (replay: build-fuzz/tests/fuzz/fuzz_gguf FILE).
set -euo pipefail

secs=${1:-60}
case $secs in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-fuzz
cc=${CC:-clang}
if ! command -v "$cc" >/dev/null; then
    echo "run.sh: $cc not found; install clang (Debian: apt-get install clang)" >&2
    exit 2
fi

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DTS_FUZZ=ON -DTS_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_gguf -j2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/tests/fuzz/corpus/gguf/* "$work"/
mkdir -p "$build/artifacts"
"$build/tests/fuzz/fuzz_gguf" -max_total_time="$secs" -max_len=16384 -timeout=10 \
    -rss_limit_mb=2048 -dict="$root/tests/fuzz/gguf.dict" \
    -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$work"
