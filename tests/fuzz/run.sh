#!/usr/bin/env bash
# Fuzzes one parser: tests/fuzz/run.sh [SECONDS] [gguf|api|template|chat_out|grammar|schema|tokenizer|model|vocab]
# (defaults: 60, gguf).
#
#   gguf  the GGUF reader (fuzz_gguf; seeds in corpus/gguf, dictionary gguf.dict)
#   api   the server's request-body parser (fuzz_api; seeds in corpus/api)
#   template  the Jinja engine (fuzz_template; seeds in corpus/template, dictionary jinja.dict)
#   chat_out  the chat answer parser: tool calls, reasoning (fuzz_chat_out; corpus/chat_out)
#   grammar   the GBNF reader and matcher (fuzz_grammar; seeds in corpus/grammar, dictionary
#             gbnf.dict); every mask is checked against the per-token reference
#   schema    the JSON Schema compiler (fuzz_schema; seeds in corpus/schema, dictionary
#             schema.dict); what compiles must be GBNF the reader accepts
#   tokenizer tokenize / detokenize / streaming over three built-in vocabularies
#             (fuzz_tokenizer; seeds in corpus/tokenizer)
#   model     the model loader on hostile GGUF files (fuzz_model; seeds in corpus/model: one
#             small model per family, written by fuzz_model_corpus; dictionary gguf.dict)
#   vocab     the vocabulary loader on hostile tokenizer metadata (fuzz_vocab; seeds in
#             corpus/vocab; dictionary gguf.dict)
#
# Configures a clang build with -DTS_FUZZ=ON in build-fuzz/, builds the harness, and runs it for
# SECONDS on a scratch copy of its corpus (the committed seeds stay untouched). Exits non-zero
# when libFuzzer reports a crash, leak, timeout or undefined behaviour; the reproducer is then
# in build-fuzz/artifacts/ (replay: build-fuzz/tests/fuzz/fuzz_TARGET FILE).
set -euo pipefail

secs=${1:-60}
target=${2:-gguf}
case $secs in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS] [gguf|api|template|chat_out|grammar|schema|tokenizer|model|vocab]" >&2; exit 2 ;;
esac
case $target in
    gguf) extra=(-max_len=16384 -dict="$(cd "$(dirname "$0")" && pwd)/gguf.dict") ;;
    api) extra=(-max_len=4096) ;;
    template) extra=(-max_len=4096 -dict="$(cd "$(dirname "$0")" && pwd)/jinja.dict") ;;
    chat_out) extra=(-max_len=4096) ;;
    grammar) extra=(-max_len=4096 -dict="$(cd "$(dirname "$0")" && pwd)/gbnf.dict") ;;
    schema) extra=(-max_len=4096 -dict="$(cd "$(dirname "$0")" && pwd)/schema.dict") ;;
    tokenizer) extra=(-max_len=4096) ;;
    model) extra=(-max_len=65536 -dict="$(cd "$(dirname "$0")" && pwd)/gguf.dict") ;;
    vocab) extra=(-max_len=65536 -dict="$(cd "$(dirname "$0")" && pwd)/gguf.dict") ;;
    *) echo "usage: $0 [SECONDS] [gguf|api|template|chat_out|grammar|schema|tokenizer|model|vocab]" >&2; exit 2 ;;
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
cmake --build "$build" --target "fuzz_$target" -j2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/tests/fuzz/corpus/"$target"/* "$work"/
mkdir -p "$build/artifacts"
"$build/tests/fuzz/fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    "${extra[@]}" -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$work"
