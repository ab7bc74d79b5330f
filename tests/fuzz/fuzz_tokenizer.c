/*
 * fuzz_tokenizer.c — libFuzzer entry for tokenize / detokenize / the streaming detokenizer and
 * chat template detection.
 *
 * Three small vocabularies (SentencePiece with byte fallback, byte-level BPE with merges and a
 * user-defined token, WordPiece) are built once with the GGUF writer. The first input byte
 * picks the vocabulary and the flags; the rest is the text. Invariants: tokenizing succeeds,
 * every id is in range, detokenizing succeeds, byte-level BPE round-trips exactly (and
 * SentencePiece too when the text holds no literal "▁"), the stream's output is valid UTF-8
 * and equals detokenize's when that is valid UTF-8. The whole input is also tried as a chat
 * template. A broken invariant traps.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

typedef struct fuzz_vocab {
    void *mem;
    ts_gguf *g;
    ts_tokenizer *t;
} fuzz_vocab;

/* Built on the first call and kept for the life of the fuzzing process. */
static fuzz_vocab g_vocab[3];

static void finish(ts_gguf_writer *w, fuzz_vocab *v) {
    ts_error err = {0};
    size_t size = 0;
    CHECK(ts_gguf_writer_write_mem(w, &v->mem, &size, &err) == TS_OK);
    ts_gguf_writer_destroy(w);
    CHECK(ts_gguf_open_memory(v->mem, size, &v->g, &err) == TS_OK);
    CHECK(ts_tokenizer_create(v->g, &v->t, &err) == TS_OK);
}

static void build_spm(fuzz_vocab *v) {
    static char names[256][7];
    static const char *pieces[] = {"▁", "a", "b", "ab", "▁a", "▁ab", "é", "<|x|>"};
    const char *toks[3 + 256 + 8];
    float scores[3 + 256 + 8] = {0};
    int32_t types[3 + 256 + 8];
    toks[0] = "<unk>", types[0] = TS_TOKEN_TYPE_UNKNOWN;
    toks[1] = "<s>", types[1] = TS_TOKEN_TYPE_CONTROL;
    toks[2] = "</s>", types[2] = TS_TOKEN_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(names[b], sizeof names[b], "<0x%02X>", b);
        toks[3 + b] = names[b], types[3 + b] = TS_TOKEN_TYPE_BYTE;
    }
    for (int i = 0; i < 8; i++) {
        toks[259 + i] = pieces[i];
        types[259 + i] = i == 7 ? TS_TOKEN_TYPE_USER_DEFINED : TS_TOKEN_TYPE_NORMAL;
        scores[259 + i] = (float)i;
    }
    ts_error err = {0};
    ts_gguf_writer *w = NULL;
    CHECK(ts_gguf_writer_create(&w, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", "llama", &err) == TS_OK);
    CHECK(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 267, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_array(w, "tokenizer.ggml.scores", TS_GGUF_FLOAT32, scores, 267,
                                   &err) == TS_OK);
    CHECK(ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32, types, 267,
                                   &err) == TS_OK);
    finish(w, v);
}

static void build_bpe(fuzz_vocab *v) {
    /* The 256 byte characters of the GPT-2 alphabet, then merges over a few of them. */
    static char chars[256][3];
    const char *toks[256 + 6];
    int32_t types[256 + 6];
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : next++;
        if (cp < 0x80) {
            chars[b][0] = (char)cp;
        } else {
            chars[b][0] = (char)(0xC0 | (cp >> 6));
            chars[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        toks[b] = chars[b];
        types[b] = TS_TOKEN_TYPE_NORMAL;
    }
    const char *extra[] = {"Ġa", "ab", "Ġab", "11", "<|end|>", "<user>"};
    for (int i = 0; i < 6; i++) {
        toks[256 + i] = extra[i];
        types[256 + i] = i == 4   ? TS_TOKEN_TYPE_CONTROL
                         : i == 5 ? TS_TOKEN_TYPE_USER_DEFINED
                                  : TS_TOKEN_TYPE_NORMAL;
    }
    const char *merges[] = {"Ġ a", "a b", "Ġa b", "1 1"};
    ts_error err = {0};
    ts_gguf_writer *w = NULL;
    CHECK(ts_gguf_writer_create(&w, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", "gpt2", &err) == TS_OK);
    CHECK(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.pre", "llama3", &err) == TS_OK);
    CHECK(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 262, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32, types, 262,
                                   &err) == TS_OK);
    CHECK(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, 4, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 260, &err) == TS_OK);
    finish(w, v);
}

static void build_wpm(fuzz_vocab *v) {
    const char *toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁a", "▁ab", "b", "▁é", "▁,", "▁中"};
    int32_t types[] = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1};
    ts_error err = {0};
    ts_gguf_writer *w = NULL;
    CHECK(ts_gguf_writer_create(&w, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", "bert", &err) == TS_OK);
    CHECK(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 10, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32, types, 10,
                                   &err) == TS_OK);
    CHECK(ts_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 1, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_u32(w, "tokenizer.ggml.cls_token_id", 2, &err) == TS_OK);
    CHECK(ts_gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 3, &err) == TS_OK);
    finish(w, v);
}

static bool valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = p[i] < 0x80                    ? 1
                     : p[i] >= 0xC2 && p[i] <= 0xDF ? 2
                     : p[i] >= 0xE0 && p[i] <= 0xEF ? 3
                     : p[i] >= 0xF0 && p[i] <= 0xF4 ? 4
                                                    : 0;
        if (len == 0 || i + len > n) {
            return false;
        }
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) {
                return false;
            }
        }
        if ((p[i] == 0xE0 && p[i + 1] < 0xA0) || (p[i] == 0xED && p[i + 1] >= 0xA0) ||
            (p[i] == 0xF0 && p[i + 1] < 0x90) || (p[i] == 0xF4 && p[i + 1] >= 0x90)) {
            return false;
        }
        i += len;
    }
    return true;
}

static bool has_escape_char(const char *s, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++) {
        if (memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            return true;
        }
    }
    return false;
}

static void fuzz_chat(const uint8_t *data, size_t size) {
    ts_error err = {0};
    ts_chat_template tp;
    if (ts_chat_template_detect((const char *)data, size, &tp, &err) != TS_OK) {
        return;
    }
    const ts_chat_message msgs[] = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
    char *text = NULL;
    size_t len = 0;
    CHECK(ts_chat_apply(&tp, msgs, 3, true, &text, &len, &err) == TS_OK);
    CHECK(strlen(text) == len);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (g_vocab[0].t == NULL) {
        build_spm(&g_vocab[0]);
        build_bpe(&g_vocab[1]);
        build_wpm(&g_vocab[2]);
    }
    fuzz_chat(data, size);
    if (size == 0) {
        return 0;
    }
    const ts_tokenizer *t = g_vocab[data[0] % 3].t;
    bool add_special = data[0] & 4, parse_special = data[0] & 8;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    ts_error err = {0};
    ts_token *ids = NULL;
    size_t n = 0;
    CHECK(ts_tokenizer_tokenize(t, text, len, add_special, parse_special, &ids, &n, &err) == TS_OK);
    for (size_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && (uint32_t)ids[i] < ts_tokenizer_n_vocab(t));
    }
    char *back = NULL;
    size_t back_len = 0;
    CHECK(ts_tokenizer_detokenize(t, ids, n, parse_special, &back, &back_len, &err) == TS_OK);
    ts_tokenizer_kind kind = ts_tokenizer_get_kind(t);
    bool exact = !add_special && (kind == TS_TOKENIZER_BPE ||
                                  (kind == TS_TOKENIZER_SPM && !has_escape_char(text, len)));
    if (exact) {
        CHECK(back_len == len && memcmp(back, text, len) == 0);
    }

    ts_detok_stream *s = NULL;
    CHECK(ts_detok_stream_create(t, parse_special, &s, &err) == TS_OK);
    char *streamed = malloc(back_len * 3 + 16);
    size_t sl = 0;
    CHECK(streamed != NULL);
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        CHECK(ts_detok_stream_push(s, ids[i], &piece, &pl, &err) == TS_OK);
        CHECK(valid_utf8(piece, pl));
        memcpy(streamed + sl, piece, pl);
        sl += pl;
    }
    const char *rest;
    size_t rl;
    CHECK(ts_detok_stream_flush(s, &rest, &rl, &err) == TS_OK);
    memcpy(streamed + sl, rest, rl);
    sl += rl;
    CHECK(valid_utf8(streamed, sl));
    if (valid_utf8(back, back_len)) {
        CHECK(sl == back_len && memcmp(streamed, back, sl) == 0);
    }
    ts_detok_stream_destroy(s);
    free(streamed);
    free(back);
    free(ids);
    return 0;
}
