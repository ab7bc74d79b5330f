#!/usr/bin/env bash
# compare_llamacpp.sh — tessera vs llama.cpp (and ik_llama.cpp) on the same GGUF, side by side
# in one run.
#
# The machine may be shared, so absolute t/s drift with other people's load. The runs are
# interleaved (tessera, llama.cpp[, ik_llama.cpp], tessera, ...; --rounds rounds) so that a
# load change hits all, and the script reports the ratio tessera / other per test, computed
# from the best round of each tool (the least-disturbed one), next to the mean ratio of the
# rounds taken pairwise. ik_llama.cpp's llama-bench runs twice per round, without and with
# run-time repacking (-rtr 1), and counts with the better of the two per test.
#
# It builds nothing: pass the paths of existing binaries.
#
# usage:
#   bench/compare_llamacpp.sh --tessera PATH --llama-bench PATH [--ik-bench PATH] -m MODEL
#                             [-p 512] [-n 128] [-r 3] [-t 2] [--rounds 2]
#                             [-d DEPTH] [-ctk TYPE] [-ctv TYPE]
#   bench/compare_llamacpp.sh --tessera PATH --batched-bench PATH [--ik-batched-bench PATH]
#                             -m MODEL --batch
#                             [--npp 128] [--ntg 128] [--npl 1,4,16,32] [-t 2] [--rounds 2]
# (--ik-bench / --ik-batched-bench: ik_llama.cpp's llama-bench / llama-batched-bench.)
# -d DEPTH runs the tests after DEPTH cached tokens (llama-bench -d; ik_llama.cpp, which has no
# -d, measures tg at that depth with -gp DEPTH,N); -ctk / -ctv set the KV cache types of all.
# Needs jq. Output: a markdown table on stdout; raw per-round numbers on stderr.
set -euo pipefail

die() { echo "compare_llamacpp: $*" >&2; exit 2; }

TESSERA="" LBENCH="" BBENCH="" IKBENCH="" IKBBENCH="" MODEL=""
PP=512 TG=128 REPS=3 THREADS=2 ROUNDS=2 BATCH=0 DEPTH=0 CTK=f16 CTV=f16
NPP=128 NTG=128 NPL=1,4,16,32
while [ $# -gt 0 ]; do
    case "$1" in
    --tessera) TESSERA=$2; shift 2 ;;
    --llama-bench) LBENCH=$2; shift 2 ;;
    --batched-bench) BBENCH=$2; shift 2 ;;
    --ik-bench) IKBENCH=$2; shift 2 ;;
    --ik-batched-bench) IKBBENCH=$2; shift 2 ;;
    -m) MODEL=$2; shift 2 ;;
    -p) PP=$2; shift 2 ;;
    -n) TG=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -d) DEPTH=$2; shift 2 ;;
    -ctk) CTK=$2; shift 2 ;;
    -ctv) CTV=$2; shift 2 ;;
    --batch) BATCH=1; shift ;;
    --npp) NPP=$2; shift 2 ;;
    --ntg) NTG=$2; shift 2 ;;
    --npl) NPL=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
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
# Test names: pp512, tg128, and with a depth tg128@d16384.
run_tessera() { # out
    "$TESSERA" bench -m "$MODEL" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -d "$DEPTH" \
        -ctk "$CTK" -ctv "$CTV" -o csv 2>/dev/null |
        awk -F, 'NR > 1 && ($6 ~ /^(pp|tg)/) { gsub(/ @ /, "@", $6); print $6, $7 }' >>"$1"
}
run_llama() { # out
    "$LBENCH" -m "$MODEL" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -d "$DEPTH" -ctk "$CTK" \
        -ctv "$CTV" -o json 2>/dev/null |
        jq -r '.[] | (if .n_prompt > 0 then "pp\(.n_prompt)" else "tg\(.n_gen)" end)
                     + (if (.n_depth // 0) > 0 then "@d\(.n_depth)" else "" end)
                     + " " + (.avg_ts | tostring)' >>"$1"
}
run_ik() { # out: the better of -rtr 0 and -rtr 1 per test
    local rtr tests=(-p "$PP" -n "$TG")
    [ "$DEPTH" -gt 0 ] && tests=(-p 0 -n 0 -gp "$DEPTH,$TG")
    for rtr in 0 1; do
        "$IKBENCH" -m "$MODEL" "${tests[@]}" -r "$REPS" -t "$THREADS" -ctk "$CTK" -ctv "$CTV" \
            -rtr "$rtr" -o json 2>/dev/null |
            jq -r '.[] | (if .n_gen > 0 and .n_prompt > 0 then "tg\(.n_gen)@d\(.n_prompt)"
                          elif .n_prompt > 0 then "pp\(.n_prompt)" else "tg\(.n_gen)" end)
                         + " " + (.avg_ts | tostring)'
    done | awk '{ if (!($1 in b) || $2 + 0 > b[$1]) b[$1] = $2 + 0 }
                END { for (t in b) print t, b[t] }' >>"$1"
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

# ik_llama.cpp's batched bench prints only its table: | PP | TG | B | N_KV | T_PP s | S_PP t/s |
# T_TG s | S_TG t/s | T s | S t/s |.
run_ik_batch() { # out
    local maxpl ctx
    maxpl=$(tr ',' '\n' <<<"$NPL" | sort -n | tail -1)
    ctx=$(( maxpl * (NPP + NTG) + 256 ))
    "$IKBBENCH" -m "$MODEL" -c "$ctx" -npp "$NPP" -ntg "$NTG" -npl "$NPL" -t "$THREADS" 2>&1 |
        awk -F'|' '$2 ~ /^ *[0-9]+ *$/ { gsub(/ /, "", $4); gsub(/ /, "", $9); print "b" $4, $9 }' \
            >>"$1"
}

IK=0
if [ "$BATCH" -eq 1 ]; then
    [ -x "$BBENCH" ] || die "--batch needs --batched-bench PATH (an executable)"
    LBENCH_BATCHED=$BBENCH
    TRUN=run_tessera_batch LRUN=run_llama_batch IKRUN=run_ik_batch
    if [ -n "$IKBBENCH" ]; then
        [ -x "$IKBBENCH" ] || die "--ik-batched-bench '$IKBBENCH' is not an executable"
        IK=1
    fi
    WHAT="batched generation t/s (npp $NPP, ntg $NTG), $THREADS threads"
else
    [ -x "$LBENCH" ] || die "--llama-bench '$LBENCH' is not an executable"
    TRUN=run_tessera LRUN=run_llama IKRUN=run_ik
    if [ -n "$IKBENCH" ]; then
        [ -x "$IKBENCH" ] || die "--ik-bench '$IKBENCH' is not an executable"
        IK=1
    fi
    WHAT="llama-bench rules (-p $PP -n $TG -r $REPS -d $DEPTH -ctk $CTK -ctv $CTV), $THREADS threads"
fi

for i in $(seq 1 "$ROUNDS"); do
    : >"$TMP/t$i" && : >"$TMP/l$i" && : >"$TMP/k$i"
    $TRUN "$TMP/t$i"
    $LRUN "$TMP/l$i"
    [ "$IK" -eq 1 ] && $IKRUN "$TMP/k$i"
    [ -s "$TMP/t$i" ] || die "round $i: tessera produced no results"
    [ -s "$TMP/l$i" ] || die "round $i: llama.cpp produced no results"
    [ "$IK" -eq 0 ] || [ -s "$TMP/k$i" ] || die "round $i: ik_llama.cpp produced no results"
    echo "round $i tessera: $(tr '\n' ' ' <"$TMP/t$i")" >&2
    echo "round $i llama.cpp: $(tr '\n' ' ' <"$TMP/l$i")" >&2
    [ "$IK" -eq 1 ] && echo "round $i ik_llama.cpp: $(tr '\n' ' ' <"$TMP/k$i")" >&2
done

# One table per other engine: prefix l = llama.cpp, k = ik_llama.cpp.
table() { # prefix name
    local other=$1 name=$2
    echo
    echo "| test | tessera t/s (best) | $name t/s (best) | ratio (best) | ratio (mean of rounds) |"
    echo "|---|---:|---:|---:|---:|"
    for test in $(awk '{ print $1 }' "$TMP/t1"); do
        awk -v test="$test" -v rounds="$ROUNDS" -v dir="$TMP" -v other="$other" '
        BEGIN {
            bt = 0; bl = 0; sum = 0; n = 0
            for (i = 1; i <= rounds; i++) {
                t = ""; l = ""
                while ((getline line < (dir "/t" i)) > 0) { split(line, f, " "); if (f[1] == test) t = f[2] }
                while ((getline line < (dir "/" other i)) > 0) { split(line, f, " "); if (f[1] == test) l = f[2] }
                close(dir "/t" i); close(dir "/" other i)
                if (t == "" || l == "") continue
                if (t + 0 > bt) bt = t + 0
                if (l + 0 > bl) bl = l + 0
                if (l + 0 > 0) { sum += t / l; n++ }
            }
            if (n == 0) { printf "| %s | - | - | - | - |\n", test; exit }
            printf "| %s | %.2f | %.2f | %.2fx | %.2fx |\n", test, bt, bl, bt / bl, sum / n
        }'
    done
}

echo "model: $(basename "$MODEL"); $WHAT; $ROUNDS interleaved rounds"
table l llama.cpp
[ "$IK" -eq 1 ] && table k ik_llama.cpp
exit 0
