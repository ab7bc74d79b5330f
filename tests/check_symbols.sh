#!/usr/bin/env bash
# Checks that every external symbol the static libraries define starts with "ts_" or the
# prefix of its layer, so that an embedder's own function names (bounds, prim, xalloc, ...)
# never clash with ours at link time:
#
#   tests/check_symbols.sh path/to/libts_LAYER.a [...]
#
# Layer prefixes are for internal functions shared between a layer's files; the public API
# (include/tessera.h) is all ts_. Exits 1 listing each offending symbol and its archive.
set -euo pipefail
command -v nm >/dev/null || { echo "not run: nm is not installed (binutils)"; exit 0; }

prefix_of() {
    case "$1" in
        cpu) echo cpu_ ;;
        cuda) echo cu_ ;;
        ref) echo ref_ ;;
        gguf) echo gguf_ ;;
        tokenizer) echo tok_ ;;
        template) echo jj_ ;;
        grammar) echo tg_ ;;
        kv) echo kv_ ;;
        runtime) echo rt_ ;;
        server) echo srv_ ;;
        *) echo ts_ ;;
    esac
}

bad=0
for lib in "$@"; do
    layer=$(basename "$lib" .a)
    layer=${layer#libts_}
    p=$(prefix_of "$layer")
    # Defined, external: code (T), data (D, B, R), common (C), weak (W, V) symbols.
    while read -r sym; do
        case "$sym" in
            # Names starting with "__" are reserved for the compiler and its tools (the
            # sanitizers' __odr_asan.*, __asan_*): no embedder's name can clash with them.
            ts_* | "$p"* | __*) ;;
            *) echo "libts_$layer.a: external symbol '$sym' lacks the prefix ts_ or $p"; bad=1 ;;
        esac
    done < <(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRCWV]$/ {print $3}')
done
if [ "$bad" -ne 0 ]; then
    exit 1
fi
echo "checked $# archives: every external symbol is prefixed"
