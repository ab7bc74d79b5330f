#!/usr/bin/env bash
# real_shapes.sh — speed at the sizes people run: random-weight models of real shapes (Llama 3.2
# 1B/3B, Qwen2.5 3B, Llama 3.1 8B, ...) in the types people download, tessera side by side with
# llama.cpp and ik_llama.cpp when their binaries are given.
#
# For each shape, bench/synth_model writes a BF16 file (weights do not change speed; shapes,
# types and vocabulary sizes do), `tessera quantize` makes each type from it, and each file is
# measured: with --llama-bench through bench/compare_llamacpp.sh (interleaved rounds, ratios),
# else with `tessera bench` alone. Files are kept in --dir (default ~/.cache/tessera/synth; an
# 8B BF16 file is 16 GB) and reused on the next run. The header says what the figures stand on:
# the host's CPU model and SIMD flags, and the memory read bandwidth tessera bench measures.
#
# It builds nothing: pass the paths of existing binaries.
#
# usage:
#   bench/real_shapes.sh --tessera PATH --synth PATH [--llama-bench PATH] [--ik-bench PATH]
#                        [--shapes llama-1b,llama-8b] [--types Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q8_0,IQ4_XS,BF16]
#                        [--dir DIR] [-p 512] [-n 128] [-r 3] [-t 2] [--rounds 2] [--drop-bf16]
# (--synth: the synth_model program of a tessera build, e.g. build/synth_model; --drop-bf16:
# remove each shape's BF16 source once its types are measured.)
set -euo pipefail

die() { echo "real_shapes: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)

TESSERA="" SYNTH="" LBENCH="" IKBENCH="" DIR="$HOME/.cache/tessera/synth"
SHAPES=llama-1b,llama-8b TYPES=Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q8_0,IQ4_XS,BF16
PP=512 TG=128 REPS=3 THREADS=2 ROUNDS=2 KEEP_BF16=1
while [ $# -gt 0 ]; do
    case "$1" in
    --tessera) TESSERA=$2; shift 2 ;;
    --synth) SYNTH=$2; shift 2 ;;
    --llama-bench) LBENCH=$2; shift 2 ;;
    --ik-bench) IKBENCH=$2; shift 2 ;;
    --shapes) SHAPES=$2; shift 2 ;;
    --types) TYPES=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -p) PP=$2; shift 2 ;;
    -n) TG=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --drop-bf16) KEEP_BF16=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -x "$TESSERA" ] || die "--tessera '$TESSERA' is not an executable"
[ -x "$SYNTH" ] || die "--synth '$SYNTH' is not an executable (a build's synth_model)"
[ -z "$LBENCH" ] || [ -x "$LBENCH" ] || die "--llama-bench '$LBENCH' is not an executable"
[ -z "$IKBENCH" ] || [ -n "$LBENCH" ] || die "--ik-bench needs --llama-bench too"
[[ $SHAPES =~ ^[a-z0-9.-]+(,[a-z0-9.-]+)*$ ]] || die "--shapes must be a comma-separated list"
[[ $TYPES =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || die "--types must be a comma-separated list"
for v in PP TG REPS THREADS ROUNDS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
mkdir -p "$DIR"

# Types `tessera quantize` makes (its usage line lists them); others are reported, not faked.
qtypes=$("$TESSERA" quantize 2>&1 | tr -s ' ,.' '\n' | grep -E '^[A-Z][A-Z0-9_]+$' || true)

echo "# real shapes, $(date -u +%Y-%m-%d)"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
echo "SIMD: $(grep -o -w -E 'avx2|fma|f16c|avx_vnni|avx512[a-z_0-9]*' /proc/cpuinfo | sort -u |
    tr '\n' ' ')"
echo "threads: $THREADS; tessera: $TESSERA"
echo

for shape in ${SHAPES//,/ }; do
    src="$DIR/$shape-bf16.gguf"
    if [ ! -f "$src" ]; then
        echo "writing $src" >&2
        "$SYNTH" "$shape" "$src.part" --type BF16 >&2 || die "synth_model failed for $shape"
        mv "$src.part" "$src"
    fi
    for type in ${TYPES//,/ }; do
        model="$DIR/$shape-$(tr 'A-Z' 'a-z' <<<"$type").gguf"
        if [ "$type" != BF16 ] && [ ! -f "$model" ]; then
            if ! grep -qx "$type" <<<"$qtypes"; then
                echo "## $shape $type: not measured (tessera quantize does not make $type)"
                echo
                continue
            fi
            echo "quantizing $model" >&2
            "$TESSERA" quantize "$src" "$model.part" "$type" >/dev/null 2>&1 ||
                die "tessera quantize $src $type failed"
            mv "$model.part" "$model"
        fi
        [ "$type" = BF16 ] && model=$src
        echo "## $shape $type ($(du -h "$model" | cut -f1))"
        if [ -n "$LBENCH" ]; then
            # The read bandwidth and resident memory, from tessera's own header (8 tokens).
            "$TESSERA" bench -m "$model" -p 0 -n 8 -r 1 -t "$THREADS" 2>/dev/null |
                grep -E '^(memory read bandwidth|load):' || true
            args=(--tessera "$TESSERA" --llama-bench "$LBENCH" -m "$model" -p "$PP" -n "$TG"
                  -r "$REPS" -t "$THREADS" --rounds "$ROUNDS")
            [ -n "$IKBENCH" ] && args+=(--ik-bench "$IKBENCH")
            bash "$here/compare_llamacpp.sh" "${args[@]}"
        else
            # tessera alone: its table has the GB/s column and the bandwidth line.
            "$TESSERA" bench -m "$model" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" 2>/dev/null
        fi
        echo
    done
    if [ "$KEEP_BF16" -eq 0 ]; then
        rm -f "$src"
    fi
done
