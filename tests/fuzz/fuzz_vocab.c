/*
 * fuzz_vocab.c — libFuzzer entry for the vocabulary loader: a tokenizer built from hostile GGUF
 * metadata (token arrays, scores, types, merges, special token ids out of range, odd models).
 *
 * Each input is a GGUF file. When the reader accepts it, ts_tokenizer_create must either fail
 * with a message or give a tokenizer that works: every token's text is readable, a few fixed
 * strings tokenize to in-range ids and detokenize, and the streaming detokenizer accepts every
 * id. A broken invariant traps; a crash, leak, huge allocation or hang is reported by libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
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

/* Tokenizes text with both special-token settings; every id must be in range and
 * detokenize. */
static void roundtrip(const ts_tokenizer *t, const char *text) {
    uint32_t n_vocab = ts_tokenizer_n_vocab(t);
    for (int mode = 0; mode < 4; mode++) {
        ts_error err = {0};
        ts_token *ids = NULL;
        size_t n = 0;
        if (ts_tokenizer_tokenize(t, text, strlen(text), mode & 1, mode & 2, &ids, &n, &err) !=
            TS_OK) {
            CHECK(err.msg[0] != '\0');
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            CHECK(ids[i] >= 0 && (uint32_t)ids[i] < n_vocab);
        }
        char *back = NULL;
        size_t back_len = 0;
        if (ts_tokenizer_detokenize(t, ids, n, mode & 2, &back, &back_len, &err) == TS_OK) {
            free(back);
        }
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_gguf *g = NULL;
    ts_error err = {0};
    if (ts_gguf_open_memory(data, size, &g, &err) != TS_OK) {
        return 0;
    }
    ts_tokenizer *t = NULL;
    if (ts_tokenizer_create(g, &t, &err) != TS_OK) {
        CHECK(t == NULL && err.msg[0] != '\0');
        ts_gguf_close(g);
        return 0;
    }
    uint32_t n_vocab = ts_tokenizer_n_vocab(t);
    CHECK(n_vocab > 0);
    const char *text = NULL;
    size_t len = 0;
    for (uint32_t id = 0; id < n_vocab; id++) {
        if (ts_tokenizer_token_text(t, (ts_token)id, &text, &len, &err) == TS_OK && len > 0) {
            CHECK(text != NULL);
            volatile char c = text[len - 1];
            (void)c;
        }
    }
    /* Out-of-range ids are errors, not reads. */
    text = NULL;
    len = 0;
    CHECK(ts_tokenizer_token_text(t, (ts_token)n_vocab, &text, &len, &err) != TS_OK);
    CHECK(ts_tokenizer_token_text(t, -1, &text, &len, &err) != TS_OK);
    roundtrip(t, "Hello world! 123 <s> </s> <|im_start|>user\n\xc3\xa9\xe2\x96\x81 a  b\t");
    roundtrip(t, "");
    ts_detok_stream *s = NULL;
    if (ts_detok_stream_create(t, true, &s, &err) == TS_OK) {
        for (uint32_t id = 0; id < n_vocab && id < 4096; id++) {
            const char *piece;
            size_t pl;
            if (ts_detok_stream_push(s, (ts_token)id, &piece, &pl, &err) != TS_OK) {
                break;
            }
        }
        const char *rest;
        size_t rl;
        (void)ts_detok_stream_flush(s, &rest, &rl, &err);
        ts_detok_stream_destroy(s);
    }
    ts_tokenizer_destroy(t);
    ts_gguf_close(g);
    return 0;
}
