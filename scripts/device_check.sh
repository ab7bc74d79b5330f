#!/usr/bin/env bash
# device_check.sh — one prepared check of the CUDA backend on a GPU machine (H100/H200, 16
# cores, no network, only the repository's working tree copied): builds tessera with
# -DTS_CUDA=ON (Release, only the targets it needs), runs the CUDA tests, measures the
# device's copy bandwidth, writes random-weight Llama models of real shapes with tessera's own
# GGUF writer (bench/synth_model.c; Q4_K_M through `tessera quantize`), and prints one table
# of `tessera bench --backend cuda` figures (tg128, pp512, batched). Aims to finish within 8
# minutes: each stage checks the time left and the slow ones are skipped, saying so.
#
# How to run it through the device tool (from the repository root, after preparing the
# libraries the GPU machine may lack, on this machine, once):
#
#     scripts/device_debs.sh                         # downloads .debs/ (git-ignored)
#     run(command="bash scripts/device_check.sh", carry=[".debs"], timeout_s=540)
#
# Output: everything goes to stdout and to $OUT/device_check.log; the bench table also to
# $OUT/device_check.md and each test's output to $OUT/tests/. Without $OUT, to
# ./device-check-out/. Knobs (environment): TS_DC_BUDGET (seconds, default 450),
# TS_DC_ARCH (CMAKE_CUDA_ARCHITECTURES, default 90), TS_DC_SKIP_8B=1, TS_DC_JOBS (default
# nproc), TS_DC_BUILD (build directory, default build-device; a second run reuses it).
#
# Exit: 0 when the build worked and no test failed (skipped stages are reported, not failed);
# 1 when the build or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T0=$(date +%s)
BUDGET=${TS_DC_BUDGET:-450}
OUTDIR=${OUT:-$ROOT/device-check-out}
mkdir -p "$OUTDIR/tests"
LOG=$OUTDIR/device_check.log
exec > >(tee -a "$LOG") 2>&1
JOBS=${TS_DC_JOBS:-$(nproc)}
BUILD=${TS_DC_BUILD:-$ROOT/build-device}
WORK=${TMPDIR:-/tmp}/tessera-device-check
mkdir -p "$WORK"
STATUS=0

elapsed() { echo $(($(date +%s) - T0)); }
left() { echo $((BUDGET - $(elapsed))); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*"; }

say "device_check: $(date -u '+%F %T') UTC, budget ${BUDGET}s, $JOBS jobs"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 |
        sed 's/^/  gpu: /'
else
    say "no nvidia-smi on this machine"
fi
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null && nvcc --version | tail -1 | sed 's/^/  nvcc: /'

# ---- libraries: this machine's own, else the .debs/ carried from device_debs.sh ----
PREFIX=$ROOT/.debs-root
LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu
CMAKE_EXTRA=()
if [ -d "$ROOT/.debs" ] && ls "$ROOT"/.debs/*.deb >/dev/null 2>&1; then
    rm -rf "$PREFIX"
    for d in "$ROOT"/.debs/*.deb; do dpkg -x "$d" "$PREFIX"; done
    # Prefer the machine's own copy of a shared library: drop ours, and point our
    # development symlinks (libfoo.so -> libfoo.so.N) at the machine's file.
    for so in "$LIBDIR"/*.so.*; do
        [ -e "$so" ] || continue
        name=$(basename "$so")
        sys=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
        if [ -n "$sys" ] && [ "$sys" != "$so" ] && [ -e "$sys" ]; then
            rm -f "$so"
        fi
    done
    for link in "$LIBDIR"/*.so; do
        [ -L "$link" ] || continue
        target=$(readlink "$link")
        if [ ! -e "$LIBDIR/$(basename "$target")" ]; then
            sys=$(ldconfig -p 2>/dev/null |
                  awk -v n="$(basename "$target")" '$1 == n {print $NF; exit}')
            [ -n "$sys" ] && ln -sf "$sys" "$link"
        fi
    done
    # pkg-config files name /usr; make them name the unpacked tree.
    for pc in "$LIBDIR"/pkgconfig/*.pc "$PREFIX"/usr/share/pkgconfig/*.pc; do
        [ -e "$pc" ] && sed -i -E "s#=/usr#=$PREFIX/usr#g" "$pc"
    done
    export PKG_CONFIG_PATH=$LIBDIR/pkgconfig:$PREFIX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export CMAKE_PREFIX_PATH=$PREFIX/usr
    if ! command -v pkg-config >/dev/null && [ -x "$PREFIX/usr/bin/pkgconf" ]; then
        CMAKE_EXTRA+=(-DPKG_CONFIG_EXECUTABLE="$PREFIX/usr/bin/pkgconf")
    fi
    [ -e /usr/include/openssl/ssl.h ] || CMAKE_EXTRA+=(-DOPENSSL_ROOT_DIR="$PREFIX/usr")
    say "libraries: unpacked $(ls "$ROOT"/.debs/*.deb | wc -l) packages from .debs/"
else
    say "libraries: no .debs/ carried; using the machine's own (scripts/device_debs.sh)"
fi
# NCCL (the tensor-parallel transport) is optional here: the system's, PyTorch's, or none.
NCCL_ARGS=(-DTS_NCCL=OFF)
for lib in /usr/lib/x86_64-linux-gnu/libnccl.so /usr/local/cuda/lib64/libnccl.so; do
    [ -e "$lib" ] && NCCL_ARGS=(-DTS_NCCL=ON)
done

# ---- build ----
GEN=()
[ ! -e "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null && GEN=(-G Ninja)
say "configure: TS_CUDA=ON, Release, CUDA arch ${TS_DC_ARCH:-90}, ${NCCL_ARGS[*]}"
if ! cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON \
        -DTS_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES="${TS_DC_ARCH:-90}" "${NCCL_ARGS[@]}" \
        "${CMAKE_EXTRA[@]}" >"$OUTDIR/configure.log" 2>&1; then
    tail -30 "$OUTDIR/configure.log"
    say "FAILED: configure (see configure.log)"
    exit 1
fi
TARGETS=(tessera synth_model cuda_bandwidth backends_test_cuda_plan backends_test_cuda_dequant
         backends_test_cuda_ops model_test_cuda_models)
say "build: ${TARGETS[*]}"
if ! cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" >"$OUTDIR/build.log" 2>&1; then
    grep -E "error|Error" "$OUTDIR/build.log" | head -40
    say "FAILED: build (see build.log)"
    exit 1
fi
say "build: done"
BIN=$BUILD/tessera

# ---- tests (exit 77 = not run, reported as such) ----
run_test() {
    local exe=$1 name
    name=$(basename "$exe")
    timeout "$2" bash "$ROOT/tests/run_test.sh" "$exe" >"$OUTDIR/tests/$name.log" 2>&1
    local rc=$?
    case $rc in
        0) say "test $name: passed" ;;
        77) say "test $name: NOT RUN ($(grep -m1 'not run' "$OUTDIR/tests/$name.log"))" ;;
        124) say "test $name: TIMED OUT after $2 s"; STATUS=1 ;;
        *) say "test $name: FAILED (rc $rc)"; grep -E "FAIL|Error|error" "$OUTDIR/tests/$name.log" |
               head -20; STATUS=1 ;;
    esac
}
run_test "$(find "$BUILD" -name backends_test_cuda_plan -type f | head -1)" 60
run_test "$(find "$BUILD" -name backends_test_cuda_dequant -type f | head -1)" 60
run_test "$(find "$BUILD" -name backends_test_cuda_ops -type f | head -1)" 150
run_test "$(find "$BUILD" -name model_test_cuda_models -type f | head -1)" 150

# ---- device bandwidth ----
"$BUILD/cuda_bandwidth" 2>&1 | sed 's/^/  /' | tee "$OUTDIR/bandwidth.txt"

# ---- models (written in parallel: each writer is one thread) ----
MODELS=()
PIDS=()
make_model() { # out shape type [quantize-to]: writes OUT, then OUT with .ok beside it
    local out=$1 t0
    t0=$(date +%s)
    if "$BUILD/synth_model" "$2" "$out" --type "$3" >"$out.log" 2>&1; then
        echo "$(($(date +%s) - t0))" >"$out.ok"
    fi
    if [ -n "${4:-}" ] && [ -e "$out.ok" ]; then
        local q=${out%-*}-$4.gguf
        t0=$(date +%s)
        "$BIN" quantize "$out" "$q" "$4" >"$q.log" 2>&1 && echo "$(($(date +%s) - t0))" >"$q.ok"
    fi
}
rm -f "$WORK"/*.gguf "$WORK"/*.ok "$WORK"/*.tmp.*
make_model "$WORK/llama1b-BF16.gguf" llama-1b BF16 Q4_K_M &
PIDS+=($!)
for t in Q8_0 Q4_0; do
    make_model "$WORK/llama1b-$t.gguf" llama-1b "$t" &
    PIDS+=($!)
done
if [ "${TS_DC_SKIP_8B:-0}" != 1 ]; then
    make_model "$WORK/llama8b-Q4_0.gguf" llama-8b Q4_0 &
    PIDS+=($!)
fi
while [ "$(left)" -gt 150 ] && [ -n "$(jobs -rp)" ]; do
    sleep 2
done
for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
        pkill -P "$pid" 2>/dev/null # the writer or quantizer this job started
        kill "$pid" 2>/dev/null
        say "models: stopped job $pid (out of time)"
    fi
done
wait "${PIDS[@]}" 2>/dev/null
for name in llama1b-BF16 llama1b-Q8_0 llama1b-Q4_0 llama1b-Q4_K_M llama8b-Q4_0; do
    f=$WORK/$name.gguf
    if [ -e "$f.ok" ]; then
        say "model $name: written in $(cat "$f.ok") s ($(du -h "$f" | cut -f1))"
        MODELS+=("$f")
    else
        why=$(tail -1 "$f.log" 2>/dev/null)
        say "model $name: not made (${why:-stopped unfinished, or its source was not made})"
    fi
done

# ---- bench ----
TABLE=$OUTDIR/device_check.md
{
    echo "| model | test | t/s | GB/s |"
    echo "|---|---|---:|---:|"
} >"$TABLE"
bench_rows() { # model label args...
    local m=$1 label=$2
    shift 2
    local limit=$(($(left) - 10))
    [ "$limit" -gt 120 ] && limit=120
    [ "$limit" -lt 20 ] && limit=20
    timeout "$limit" "$BIN" bench -m "$m" --backend cuda "$@" -o csv >"$WORK/bench.csv" \
        2>"$WORK/bench.err" || {
        say "bench $label $*: failed: $(tail -2 "$WORK/bench.err" | tr '\n' ' ')"
        return
    }
    cat "$WORK/bench.csv" >>"$OUTDIR/bench_raw.csv"
    # The CSV's header names its columns: pp/tg runs have test, ts, ts_sd and gbs; batched
    # runs pp, tg, b and prompt/gen/total t/s.
    awk -F, -v label="$label" 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
        col["test"] {printf "| %s | %s | %s ± %s | %s |\n", label, $(col["test"]),
                     $(col["ts"]), $(col["ts_sd"]), $(col["gbs"])}
        col["b"] {printf "| %s | B=%s pp%s tg%s | prompt %s, gen %s, total %s | |\n", label,
                  $(col["b"]), $(col["pp"]), $(col["tg"]), $(col["prompt_ts"]),
                  $(col["gen_ts"]), $(col["total_ts"])}' "$WORK/bench.csv" >>"$TABLE"
}
for m in "${MODELS[@]}"; do
    [ "$(left)" -gt 30 ] || { say "bench: out of time before $(basename "$m")"; break; }
    bench_rows "$m" "$(basename "$m" .gguf)" -p 512 -n 128 -r 2
done
if [ "$(left)" -gt 40 ] && [ -e "$WORK/llama1b-Q4_0.gguf" ]; then
    bench_rows "$WORK/llama1b-Q4_0.gguf" "llama1b-Q4_0 batched" --batch 1,8,32 --pp 128 \
        --tg 32 -r 1
fi
say "results (tessera bench --backend cuda; random-weight models of real shapes):"
cat "$TABLE"
rm -f "$WORK"/*.gguf "$WORK"/*.ok "$WORK"/*.tmp.*
say "device_check: done, status $STATUS"
exit $STATUS
