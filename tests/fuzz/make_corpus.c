/*
 * make_corpus.c — writes the GGUF fuzzer's seed corpus: small valid files from our writer.
 *
 * usage: fuzz_gguf_corpus DIR. Each seed covers a different part of the format (every scalar
 * type, strings with odd bytes, string arrays, nested arrays, tensors of block types at
 * alignments 32 and 64, a version-2 header) so the fuzzer starts from deep, valid structure.
 * The outputs are committed in tests/fuzz/corpus/gguf/ (named without .gguf, which .gitignore
 * reserves for model files); rerun this after format changes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static int fail(const char *what, const ts_error *err) {
    fprintf(stderr, "fuzz_gguf_corpus: %s: %s\n", what, err->msg);
    return 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) != TS_OK) {                                                                     \
            return fail(#call, &err);                                                              \
        }                                                                                          \
    } while (0)

static int save(ts_gguf_writer *w, const char *dir, const char *name) {
    ts_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TRY(ts_gguf_writer_write(w, path, &err));
    ts_gguf_writer_destroy(w);
    return 0;
}

static int seed_scalars(const char *dir) {
    ts_error err = {0};
    ts_gguf_writer *w;
    TRY(ts_gguf_writer_create(&w, &err));
    uint8_t u8 = 7;
    int8_t i8 = -7;
    uint16_t u16 = 700;
    int16_t i16 = -700;
    int64_t i64 = -70000000000;
    double f64 = 0.25;
    TRY(ts_gguf_writer_add_scalar(w, "u8", TS_GGUF_UINT8, &u8, &err));
    TRY(ts_gguf_writer_add_scalar(w, "i8", TS_GGUF_INT8, &i8, &err));
    TRY(ts_gguf_writer_add_scalar(w, "u16", TS_GGUF_UINT16, &u16, &err));
    TRY(ts_gguf_writer_add_scalar(w, "i16", TS_GGUF_INT16, &i16, &err));
    TRY(ts_gguf_writer_add_u32(w, "u32", 70000, &err));
    TRY(ts_gguf_writer_add_i32(w, "i32", -70000, &err));
    TRY(ts_gguf_writer_add_f32(w, "f32", 1.5f, &err));
    TRY(ts_gguf_writer_add_bool(w, "bool", true, &err));
    TRY(ts_gguf_writer_add_u64(w, "u64", 1ull << 40, &err));
    TRY(ts_gguf_writer_add_scalar(w, "i64", TS_GGUF_INT64, &i64, &err));
    TRY(ts_gguf_writer_add_scalar(w, "f64", TS_GGUF_FLOAT64, &f64, &err));
    TRY(ts_gguf_writer_add_str(w, "bin", "a\0\xff\n", 4, &err));
    TRY(ts_gguf_writer_add_cstr(w, "general.architecture", "llama", &err));
    return save(w, dir, "scalars");
}

static int seed_arrays(const char *dir) {
    ts_error err = {0};
    ts_gguf_writer *w;
    TRY(ts_gguf_writer_create(&w, &err));
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "", "a b"};
    const float scores[6] = {0, 0, 0, -1.5f, -2, -3};
    const int32_t types[6] = {2, 3, 3, 1, 1, 1};
    const uint8_t flags[3] = {1, 0, 1};
    TRY(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", "llama", &err));
    TRY(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 6, &err));
    TRY(ts_gguf_writer_add_array(w, "tokenizer.ggml.scores", TS_GGUF_FLOAT32, scores, 6, &err));
    TRY(ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32, types, 6, &err));
    TRY(ts_gguf_writer_add_array(w, "flags", TS_GGUF_BOOL, flags, 3, &err));
    TRY(ts_gguf_writer_add_array(w, "empty", TS_GGUF_UINT64, NULL, 0, &err));
    return save(w, dir, "arrays");
}

/* [[["x"], []], [[1, 2]]] encoded by hand: arrays of arrays of strings and of uint16. */
static int seed_nested(const char *dir) {
    ts_error err = {0};
    ts_gguf_writer *w;
    TRY(ts_gguf_writer_create(&w, &err));
    uint8_t b[256];
    size_t o = 0;
#define PUT32(v) (memcpy(b + o, &(uint32_t){(v)}, 4), o += 4)
#define PUT64(v) (memcpy(b + o, &(uint64_t){(v)}, 8), o += 8)
    PUT32(TS_GGUF_ARRAY), PUT64(2);
    PUT32(TS_GGUF_ARRAY), PUT64(2);
    PUT32(TS_GGUF_STRING), PUT64(1), PUT64(1), b[o++] = 'x';
    PUT32(TS_GGUF_STRING), PUT64(0);
    PUT32(TS_GGUF_ARRAY), PUT64(1);
    PUT32(TS_GGUF_UINT16), PUT64(2);
    memcpy(b + o, &(uint16_t){1}, 2), o += 2;
    memcpy(b + o, &(uint16_t){2}, 2), o += 2;
    TRY(ts_gguf_writer_add_encoded(w, "nested", TS_GGUF_ARRAY, b, o, &err));
    o = 0;
    for (int level = 1; level < 8; level++) {
        PUT32(TS_GGUF_ARRAY), PUT64(1);
    }
    PUT32(TS_GGUF_INT8), PUT64(1);
    b[o++] = 0x80;
    TRY(ts_gguf_writer_add_encoded(w, "deep", TS_GGUF_ARRAY, b, o, &err));
#undef PUT32
#undef PUT64
    return save(w, dir, "nested");
}

static int seed_tensors(const char *dir, uint32_t align, const char *name) {
    ts_error err = {0};
    ts_gguf_writer *w;
    TRY(ts_gguf_writer_create(&w, &err));
    TRY(ts_gguf_writer_set_alignment(w, align, &err));
    TRY(ts_gguf_writer_add_cstr(w, "general.architecture", "llama", &err));
    TRY(ts_gguf_writer_add_u32(w, "llama.block_count", 1, &err));
    static uint8_t data[1024];
    for (size_t i = 0; i < sizeof data; i++) {
        data[i] = (uint8_t)(i * 37);
    }
    const int64_t embd[] = {32, 2}, norm[] = {8}, k[] = {256}, f16[] = {3, 2, 2},
                  q8[] = {32, 1, 1, 2};
    TRY(ts_gguf_writer_add_tensor(w, "token_embd.weight", TS_TYPE_Q4_0, 2, embd, data, &err));
    TRY(ts_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", TS_TYPE_F32, 1, norm, data, &err));
    TRY(ts_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", TS_TYPE_Q4_K, 1, k, data, &err));
    TRY(ts_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", TS_TYPE_F16, 3, f16, data, &err));
    TRY(ts_gguf_writer_add_tensor(w, "output.weight", TS_TYPE_Q8_0, 4, q8, data, &err));
    return save(w, dir, name);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gguf_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = seed_scalars(dir) || seed_arrays(dir) || seed_nested(dir) ||
             seed_tensors(dir, 32, "tensors32") || seed_tensors(dir, 64, "tensors64");
    if (rc != 0) {
        return 1;
    }
    /* A version-2 file: the same layout with the version field changed. */
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s/scalars", dir);
    snprintf(out, sizeof out, "%s/scalars_v2", dir);
    FILE *f = fopen(in, "rb");
    static uint8_t buf[1 << 16];
    size_t n = f != NULL ? fread(buf, 1, sizeof buf, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[4] = 2;
    f = fopen(out, "wb");
    if (n < 24 || f == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_gguf_corpus: cannot write %s\n", out);
        return 1;
    }
    return 0;
}
