/*
 * synth_model.c — writes a random-weight Llama model of a real size with tessera's own GGUF
 * writer (tests/common/tiny_model.c), for benchmarks on machines without model files:
 *
 *     synth_model OUT.gguf llama1b|llama8b F16|BF16|Q8_0|Q4_0|...
 *
 * llama1b has Llama 3.2 1B's shapes (2048 wide, 8192 FFN, 16 layers, 32 heads, 8 KV heads,
 * 128256 tokens, tied output); llama8b Llama 3.1 8B's (4096, 14336, 32 layers, 32/8 heads,
 * 128256 tokens). The values are random (uniform, unit-variance outputs), so the text such a
 * model writes is noise; its speed is that of the real model of the same shapes and types.
 * Mixes like Q4_K_M come from `tessera quantize` applied to a BF16 file. Exit: 0 ok, 1 error,
 * 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "common/tiny_model.h"
#include "tessera.h"

static int usage(void) {
    fprintf(stderr, "usage: synth_model OUT.gguf llama1b|llama8b TYPE\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        return usage();
    }
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    bool big = strcmp(argv[2], "llama8b") == 0;
    if (!big && strcmp(argv[2], "llama1b") != 0) {
        return usage();
    }
    ts_type type;
    if (!ts_type_from_name(argv[3], &type)) {
        fprintf(stderr, "synth_model: unknown type '%s'\n", argv[3]);
        return 2;
    }
    s.wtype = type;
    s.n_vocab = 128256;
    s.n_ctx_train = 131072;
    s.n_embd = big ? 4096 : 2048;
    s.n_ff = big ? 14336 : 8192;
    s.n_layer = big ? 32 : 16;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.rope_base = 500000.0f;
    s.tied_output = !big;
    ts_error err = {0};
    if (ts_tiny_write(&s, argv[1], &err) != TS_OK) {
        fprintf(stderr, "synth_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}
