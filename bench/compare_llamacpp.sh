#!/usr/bin/env bash
# compare_llamacpp.sh — tessera vs llama.cpp on the same GGUF, side by side in one run.
#
# The machine may be shared, so absolute t/s drift with other people's load. The runs are
# interleaved (tessera, llama.cpp, tessera, llama.cpp, ...; --rounds pairs) so that a load
# change hits both, and the script reports the ratio tessera / llama.cpp per test, computed
# from the best round of each tool (the least-disturbed one), next to the mean ratio of the
# rounds taken pairwise.
#
# It builds nothing: pass the paths of existing binaries.
#
# usage:
#   bench/compare_llamacpp.sh --tessera PATH --llama-bench PATH -m MODEL
#                             [-p 512] [-n 128] [-r 3] [-t 2] [--rounds 2]
#   bench/compare_llamacpp.sh --tessera PATH --batched-bench PATH -m MODEL --batch
#                             [--npp 128] [--ntg 128] [--npl 1,4,16,32] [-t 2] [--rounds 2]
# Needs jq. Output: a markdown table on stdout; raw per-round numbers on stderr.
set -euo pipefail

die() { echo "compare_llamacpp: $*" >&2; exit 2; }

TESSERA="" LBENCH="" BBENCH="" MODEL=""
PP=512 TG=128 REPS=3 THREADS=2 ROUNDS=2 BATCH=0
NPP=128 NTG=128 NPL=1,4,16,32
while [ $# -gt 0 ]; do
    case "$1" in
    --tessera) TESSERA=$2; shift 2 ;;
    --llama-bench) LBENCH=$2; shift 2 ;;
    --batched-bench) BBENCH=$2; shift 2 ;;
    -m) MODEL=$2; shift 2 ;;
    -p) PP=$2; shift 2 ;;
    -n) TG=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --batch) BATCH=1; shift ;;
    --npp) NPP=$2; shift 2 ;;
    --ntg) NTG=$2; shift 2 ;;
    --npl) NPL=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
command -v jq >/dev/null || die "jq is required"
[ -x "$TESSERA" ] || die "--tessera '$TESSERA' is not an executable"
[ -f "$MODEL" ] || die "-m '$MODEL' is not a file"
for v in PP TG REPS THREADS ROUNDS NPP NTG; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[[ $NPL =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--npl must be a comma-separated list of integers"
[ "$ROUNDS" -ge 1 ] || die "--rounds must be at least 1"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Each runner appends "test value" lines to a file (value = t/s).
run_tessera() { # out
    "$TESSERA" bench -m "$MODEL" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -o csv 2>/dev/null |
        awk -F, 'NR > 1 && ($6 ~ /^(pp|tg)/) { print $6, $7 }' >>"$1"
}
run_llama() { # out
    "$LBENCH" -m "$MODEL" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -o json 2>/dev/null |
        jq -r '.[] | (if .n_prompt > 0 then "pp\(.n_prompt)" else "tg\(.n_gen)" end)
                     + " " + (.avg_ts | tostring)' >>"$1"
}
run_tessera_batch() { # out
    "$TESSERA" bench -m "$MODEL" --batch "$NPL" --pp "$NPP" --tg "$NTG" -r 1 -t "$THREADS" \
        -o csv 2>/dev/null | awk -F, 'NR > 1 { print "b" $6, $9 }' >>"$1"
}
run_llama_batch() { # out
    local maxpl ctx
    maxpl=$(tr ',' '\n' <<<"$NPL" | sort -n | tail -1)
    ctx=$(( maxpl * (NPP + NTG) + 256 ))
    "$LBENCH_BATCHED" -m "$MODEL" -c "$ctx" -npp "$NPP" -ntg "$NTG" -npl "$NPL" -t "$THREADS" \
        --output-format jsonl 2>/dev/null |
        jq -r 'select(.pl != null) | "b\(.pl) \(.speed_tg)"' >>"$1"
}

if [ "$BATCH" -eq 1 ]; then
    [ -x "$BBENCH" ] || die "--batch needs --batched-bench PATH (an executable)"
    LBENCH_BATCHED=$BBENCH
    TRUN=run_tessera_batch LRUN=run_llama_batch
    WHAT="batched generation t/s (npp $NPP, ntg $NTG), $THREADS threads"
else
    [ -x "$LBENCH" ] || die "--llama-bench '$LBENCH' is not an executable"
    TRUN=run_tessera LRUN=run_llama
    WHAT="llama-bench rules (-p $PP -n $TG -r $REPS), $THREADS threads"
fi

for i in $(seq 1 "$ROUNDS"); do
    : >"$TMP/t$i" && : >"$TMP/l$i"
    $TRUN "$TMP/t$i"
    $LRUN "$TMP/l$i"
    [ -s "$TMP/t$i" ] || die "round $i: tessera produced no results"
    [ -s "$TMP/l$i" ] || die "round $i: llama.cpp produced no results"
    echo "round $i tessera: $(tr '\n' ' ' <"$TMP/t$i")" >&2
    echo "round $i llama.cpp: $(tr '\n' ' ' <"$TMP/l$i")" >&2
done

echo "model: $(basename "$MODEL"); $WHAT; $ROUNDS interleaved rounds"
echo
echo "| test | tessera t/s (best) | llama.cpp t/s (best) | ratio (best) | ratio (mean of rounds) |"
echo "|---|---:|---:|---:|---:|"
for test in $(awk '{ print $1 }' "$TMP/t1"); do
    awk -v test="$test" -v rounds="$ROUNDS" -v dir="$TMP" '
        BEGIN {
            bt = 0; bl = 0; sum = 0; n = 0
            for (i = 1; i <= rounds; i++) {
                t = ""; l = ""
                while ((getline line < (dir "/t" i)) > 0) { split(line, f, " "); if (f[1] == test) t = f[2] }
                while ((getline line < (dir "/l" i)) > 0) { split(line, f, " "); if (f[1] == test) l = f[2] }
                close(dir "/t" i); close(dir "/l" i)
                if (t == "" || l == "") continue
                if (t + 0 > bt) bt = t + 0
                if (l + 0 > bl) bl = l + 0
                if (l + 0 > 0) { sum += t / l; n++ }
            }
            if (n == 0) { printf "| %s | - | - | - | - |\n", test; exit }
            printf "| %s | %.2f | %.2f | %.2fx | %.2fx |\n", test, bt, bl, bt / bl, sum / n
        }'
done
