/*
 * synth_model.c — writes a random-weight model of a real model's shape, for speed figures at
 * the sizes people run (weights do not change speed; shapes, types and vocabulary sizes do).
 *
 *   synth_model SHAPE OUT.gguf [--type F16|BF16|F32|Q8_0|Q4_0|...] [--layers N] [--seed S]
 *   synth_model --list
 *
 * SHAPE is one of the presets below, each the published configuration of that model (hidden
 * size, FFN size, layers, heads, KV heads, head size, vocabulary, tied output, RoPE base, Q/K/V
 * biases). --type stores the matrices and the token embedding in that type (default BF16, the
 * usual source for `tessera quantize`, which makes the mixes: Q4_K_M, Q5_K_M, ...); norms stay
 * F32. --layers overrides the layer count (a quick file of the same width). The vocabulary is a
 * SentencePiece one padded with pseudo-words to the model's size (tests/common/tiny_model.h
 * writes the file, tensor by tensor, so memory stays small whatever the size).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tiny_model.h"

typedef struct shape {
    const char *name;
    const char *about;
    const char *arch;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_vocab;
    float rope_base;
    bool tied;
} shape;

static const shape k_shapes[] = {
    {"llama-1b", "Llama 3.2 1B", "llama", 2048, 8192, 16, 32, 8, 64, 128256, 500000.0f, true},
    {"llama-3b", "Llama 3.2 3B", "llama", 3072, 8192, 28, 24, 8, 128, 128256, 500000.0f, true},
    {"qwen2.5-3b", "Qwen2.5 3B", "qwen2", 2048, 11008, 36, 16, 2, 128, 151936, 1000000.0f, true},
    {"llama-8b", "Llama 3.1 8B", "llama", 4096, 14336, 32, 32, 8, 128, 128256, 500000.0f, false},
    {"qwen2.5-7b", "Qwen2.5 7B", "qwen2", 3584, 18944, 28, 28, 4, 128, 152064, 1000000.0f,
     false},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])

static void usage(FILE *f) {
    fprintf(f, "usage: synth_model SHAPE OUT.gguf [--type TYPE] [--layers N] [--seed S]\n"
               "       synth_model --list\nshapes:\n");
    for (size_t i = 0; i < N_SHAPES; i++) {
        const shape *s = &k_shapes[i];
        fprintf(f,
                "  %-11s %s: n_embd %lld, n_ff %lld, %lld layers, %lld heads / %lld KV, "
                "head %lld, vocabulary %lld%s\n",
                s->name, s->about, (long long)s->n_embd, (long long)s->n_ff,
                (long long)s->n_layer, (long long)s->n_head, (long long)s->n_head_kv,
                (long long)s->head_dim, (long long)s->n_vocab, s->tied ? ", tied output" : "");
    }
}

/* A positive integer argument, or -1. */
static long long parse_count(const char *s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    return (end == s || *end != '\0' || v <= 0) ? -1 : v;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    const shape *sh = NULL;
    for (size_t i = 0; i < N_SHAPES; i++) {
        if (strcmp(argv[1], k_shapes[i].name) == 0) {
            sh = &k_shapes[i];
        }
    }
    if (sh == NULL) {
        fprintf(stderr, "synth_model: unknown shape '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    ts_tiny_spec spec = ts_tiny_spec_default(sh->arch);
    spec.wtype = TS_TYPE_BF16;
    spec.n_embd = sh->n_embd;
    spec.n_ff = sh->n_ff;
    spec.n_layer = sh->n_layer;
    spec.n_head = sh->n_head;
    spec.n_head_kv = sh->n_head_kv;
    spec.head_dim = sh->n_embd / sh->n_head == sh->head_dim ? 0 : sh->head_dim;
    spec.n_vocab = sh->n_vocab;
    spec.n_ctx_train = 131072;
    spec.rope_base = sh->rope_base;
    spec.norm_eps = 1e-5f;
    spec.tied_output = sh->tied;
    spec.seed = 1;
    for (int i = 3; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (val == NULL) {
            fprintf(stderr, "synth_model: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--type") == 0) {
            if (!ts_type_from_name(val, &spec.wtype)) {
                fprintf(stderr, "synth_model: unknown type '%s' (e.g. BF16, F16, Q8_0, Q4_0)\n",
                        val);
                return 2;
            }
        } else if (strcmp(argv[i], "--layers") == 0) {
            long long v = parse_count(val);
            if (v < 0 || v > 1000) {
                fprintf(stderr, "synth_model: --layers must be 1..1000 (got '%s')\n", val);
                return 2;
            }
            spec.n_layer = v;
        } else if (strcmp(argv[i], "--seed") == 0) {
            long long v = parse_count(val);
            if (v < 0) {
                fprintf(stderr, "synth_model: --seed must be a positive integer (got '%s')\n",
                        val);
                return 2;
            }
            spec.seed = (uint64_t)v;
        } else {
            fprintf(stderr, "synth_model: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
        i++;
    }
    ts_error err = {0};
    if (ts_tiny_write(&spec, argv[2], &err) != TS_OK) {
        fprintf(stderr, "synth_model: %s: %s\n", argv[2], err.msg);
        return 1;
    }
    printf("wrote %s: %s shape (%s), %lld layers, %s weights\n", argv[2], sh->name, sh->about,
           (long long)spec.n_layer, ts_type_name(spec.wtype));
    return 0;
}
