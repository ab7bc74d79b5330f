/*
 * test_tokenizer.c — vocabulary validation, special tokens, byte fallback, streaming, invalid
 * and long input, and the default model's tokenizer.
 *
 * Small vocabularies are written with the GGUF writer into memory so each rule can be tested
 * on its own; the real vocabularies in TS_TESTDATA_DIR and the SmolLM2 model in
 * ~/.cache/tessera/models are used when present (skipped with a message otherwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tokenizer.h"

#include "common/skip.h"

/* ---- a tiny SentencePiece vocabulary ---------------------------------------------------- */

typedef struct vocab_spec {
    const char *model;
    const char **tokens;
    size_t n;
    const float *scores; /* NULL: none */
    size_t n_scores;
    const int32_t *types; /* NULL: none */
    size_t n_types;
    const char **merges; /* NULL: none */
    size_t n_merges;
    const char *pre; /* NULL: none */
    int64_t bos;     /* -2: key absent */
} vocab_spec;

typedef struct built {
    void *mem;
    ts_gguf *g;
    ts_tokenizer *t;
} built;

static ts_status build(const vocab_spec *v, built *b, ts_error *err) {
    memset(b, 0, sizeof *b);
    ts_gguf_writer *w = NULL;
    assert_int_equal(ts_gguf_writer_create(&w, err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.model", v->model, err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", v->tokens, v->n, err),
                     TS_OK);
    if (v->scores) {
        assert_int_equal(ts_gguf_writer_add_array(w, "tokenizer.ggml.scores", TS_GGUF_FLOAT32,
                                                  v->scores, v->n_scores, err),
                         TS_OK);
    }
    if (v->types) {
        assert_int_equal(ts_gguf_writer_add_array(w, "tokenizer.ggml.token_type", TS_GGUF_INT32,
                                                  v->types, v->n_types, err),
                         TS_OK);
    }
    if (v->merges) {
        assert_int_equal(
            ts_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", v->merges, v->n_merges, err),
            TS_OK);
    }
    if (v->pre) {
        assert_int_equal(ts_gguf_writer_add_cstr(w, "tokenizer.ggml.pre", v->pre, err), TS_OK);
    }
    if (v->bos != -2) {
        assert_int_equal(
            ts_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos, err), TS_OK);
    }
    size_t size = 0;
    assert_int_equal(ts_gguf_writer_write_mem(w, &b->mem, &size, err), TS_OK);
    ts_gguf_writer_destroy(w);
    assert_int_equal(ts_gguf_open_memory(b->mem, size, &b->g, err), TS_OK);
    return ts_tokenizer_create(b->g, &b->t, err);
}

static void unbuild(built *b) {
    ts_tokenizer_destroy(b->t);
    ts_gguf_close(b->g);
    free(b->mem);
}

/* SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then a few pieces. */
#define SPM_N (3 + 256 + 8)
static const char *g_spm_tokens[SPM_N];
static char g_byte_names[256][7];
static float g_spm_scores[SPM_N];
static int32_t g_spm_types[SPM_N];

static vocab_spec spm_spec(void) {
    static const char *const pieces[8] = {"▁", "h", "e", "l", "o", "▁h", "▁he", "▁hello"};
    g_spm_tokens[0] = "<unk>", g_spm_types[0] = TS_TOKEN_TYPE_UNKNOWN;
    g_spm_tokens[1] = "<s>", g_spm_types[1] = TS_TOKEN_TYPE_CONTROL;
    g_spm_tokens[2] = "</s>", g_spm_types[2] = TS_TOKEN_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(g_byte_names[b], sizeof g_byte_names[b], "<0x%02X>", b);
        g_spm_tokens[3 + b] = g_byte_names[b];
        g_spm_types[3 + b] = TS_TOKEN_TYPE_BYTE;
    }
    for (int i = 0; i < 8; i++) {
        g_spm_tokens[259 + i] = pieces[i];
        g_spm_types[259 + i] = TS_TOKEN_TYPE_NORMAL;
        g_spm_scores[259 + i] = (float)(-10 + i); /* longer pieces score higher */
    }
    /* "ll" and "▁hel" are missing on purpose: "▁hello" cannot be reached by merging. */
    vocab_spec v = {"llama", g_spm_tokens, SPM_N, g_spm_scores, SPM_N, g_spm_types,
                    SPM_N,   NULL,         0,     NULL,         -2};
    return v;
}

static void expect_ids(const ts_tokenizer *t, const char *text, size_t len, bool add_special,
                       bool parse_special, const ts_token *want, size_t n_want) {
    ts_error err = {0};
    ts_token *ids = NULL;
    size_t n = 0;
    assert_int_equal(
        ts_tokenizer_tokenize(t, text, len, add_special, parse_special, &ids, &n, &err), TS_OK);
    if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        printf("'%.*s': got", (int)len, text);
        for (size_t i = 0; i < n; i++) {
            printf(" %d", ids[i]);
        }
        printf("\n");
        fail();
    }
    free(ids);
}

static void test_spm_basics(void **state) {
    (void)state;
    vocab_spec v = spm_spec();
    built b;
    ts_error err = {0};
    assert_int_equal(build(&v, &b, &err), TS_OK);
    const ts_tokenizer_special *sp = ts_tokenizer_get_special(b.t);
    assert_int_equal(sp->bos, 1);
    assert_int_equal(sp->eos, 2);
    assert_true(sp->add_bos);
    assert_true(sp->add_space_prefix);
    assert_true(ts_tokenizer_is_eog(b.t, 2));
    /* "hello" -> " hello" -> ▁he + l + l + o (no "ll" piece). */
    const ts_token hello[] = {265, 262, 262, 263};
    expect_ids(b.t, "hello", 5, false, false, hello, 4);
    const ts_token hello_bos[] = {1, 265, 262, 262, 263};
    expect_ids(b.t, "hello", 5, true, false, hello_bos, 5);
    /* "é" has no piece: byte fallback to <0xC3> <0xA9> after the prefix space. */
    const ts_token e_acute[] = {259, 3 + 0xC3, 3 + 0xA9};
    expect_ids(b.t, "\xC3\xA9", 2, false, false, e_acute, 3);
    /* Control tokens are text unless parse_special; after one, the space prefix comes back. */
    const ts_token parsed[] = {2, 265, 262, 262, 263};
    expect_ids(b.t, "</s>hello", 9, false, true, parsed, 5);
    ts_token *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_tokenizer_tokenize(b.t, "</s>hello", 9, false, false, &ids, &n, &err),
                     TS_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_not_equal(ids[i], 2);
    }
    /* Detokenize drops the prefix space at the start and after special tokens. */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ts_tokenizer_detokenize(b.t, ids, n, false, &text, &len, &err), TS_OK);
    assert_string_equal(text, "</s>hello");
    free(text);
    free(ids);
    assert_int_equal(ts_tokenizer_detokenize(b.t, parsed, 5, true, &text, &len, &err), TS_OK);
    assert_string_equal(text, "</s>hello");
    free(text);
    assert_int_equal(ts_tokenizer_detokenize(b.t, parsed, 5, false, &text, &len, &err), TS_OK);
    assert_string_equal(text, "hello");
    free(text);
    /* Out-of-range ids are errors, not crashes. */
    const ts_token bad[] = {5, SPM_N};
    assert_int_equal(ts_tokenizer_detokenize(b.t, bad, 2, false, &text, &len, &err), TS_ERR_RANGE);
    unbuild(&b);
}

static void test_stream_utf8(void **state) {
    (void)state;
    vocab_spec v = spm_spec();
    built b;
    ts_error err = {0};
    assert_int_equal(build(&v, &b, &err), TS_OK);
    ts_detok_stream *s = NULL;
    assert_int_equal(ts_detok_stream_create(b.t, false, &s, &err), TS_OK);
    const char *out;
    size_t len;
    /* "€" = E2 82 AC split over three byte tokens: nothing until the last byte. */
    assert_int_equal(ts_detok_stream_push(s, 3 + 0xE2, &out, &len, &err), TS_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ts_detok_stream_push(s, 3 + 0x82, &out, &len, &err), TS_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ts_detok_stream_push(s, 3 + 0xAC, &out, &len, &err), TS_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xE2\x82\xAC", 3);
    /* A byte that cannot start a character becomes U+FFFD at once. */
    assert_int_equal(ts_detok_stream_push(s, 3 + 0xFF, &out, &len, &err), TS_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xEF\xBF\xBD", 3);
    /* A lead byte followed by ASCII: U+FFFD, then the ASCII. */
    assert_int_equal(ts_detok_stream_push(s, 3 + 0xC3, &out, &len, &err), TS_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ts_detok_stream_push(s, 3 + 'A', &out, &len, &err), TS_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(out,
                        "\xEF\xBF\xBD"
                        "A",
                        4);
    /* An unfinished character at the end is flushed as U+FFFD. */
    assert_int_equal(ts_detok_stream_push(s, 3 + 0xF0, &out, &len, &err), TS_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ts_detok_stream_flush(s, &out, &len, &err), TS_OK);
    assert_int_equal(len, 3);
    assert_int_equal(ts_detok_stream_push(s, SPM_N + 5, &out, &len, &err), TS_ERR_RANGE);
    ts_detok_stream_destroy(s);
    unbuild(&b);
}

static void expect_bad(vocab_spec v, ts_status want, const char *needle) {
    built b;
    ts_error err = {0};
    ts_status st = build(&v, &b, &err);
    if (st != want || strstr(err.msg, needle) == NULL) {
        printf("status %d, message '%s' (wanted %d with '%s')\n", st, err.msg, want, needle);
        fail();
    }
    assert_null(b.t);
    unbuild(&b);
}

static void test_validation(void **state) {
    (void)state;
    vocab_spec v = spm_spec();
    v.n_scores = SPM_N - 1;
    expect_bad(v, TS_ERR_FORMAT, "scores");
    v = spm_spec();
    v.n_types = 4;
    expect_bad(v, TS_ERR_FORMAT, "token_type");
    v = spm_spec();
    v.model = "t5x";
    expect_bad(v, TS_ERR_UNSUPPORTED, "'t5x'");
    v = spm_spec();
    v.bos = SPM_N + 7;
    expect_bad(v, TS_ERR_RANGE, "bos_token_id");
    /* A byte token that is not <0xNN>. */
    v = spm_spec();
    const char *saved = g_spm_tokens[3 + 0x41];
    g_spm_tokens[3 + 0x41] = "<0xZZ>";
    expect_bad(v, TS_ERR_FORMAT, "<0xZZ>");
    g_spm_tokens[3 + 0x41] = "h"; /* duplicates token 260 */
    expect_bad(v, TS_ERR_FORMAT, "duplicates");
    g_spm_tokens[3 + 0x41] = saved;
    g_spm_types[5] = 9;
    expect_bad(v, TS_ERR_FORMAT, "type 9");
    g_spm_types[5] = TS_TOKEN_TYPE_BYTE;
    v = spm_spec();
    v.scores = NULL;
    built b;
    ts_error err = {0};
    assert_int_equal(build(&v, &b, &err), TS_OK); /* scores are optional */
    unbuild(&b);
}

/* A byte-level BPE vocabulary: the printable ASCII bytes, "Ġ" (space), and a few merges. */
static void test_bpe_validation(void **state) {
    (void)state;
    static const char *tokens[100];
    static char one[95][2];
    size_t n = 0;
    for (int c = 0x21; c <= 0x7E; c++) {
        one[c - 0x21][0] = (char)c;
        tokens[n++] = one[c - 0x21];
    }
    tokens[n++] = "Ġ";
    tokens[n++] = "Ġh";
    tokens[n++] = "he";
    size_t base = n;
    const char *merges[] = {"Ġ h", "h e"};
    vocab_spec v = {"gpt2", tokens, base, NULL, 0, NULL, 0, merges, 2, "gpt-2", -2};
    built b;
    ts_error err = {0};
    assert_int_equal(build(&v, &b, &err), TS_OK);
    ts_token gh = 95, he = 96, e = 'e' - 0x21;
    /* "he he": the regex gives "he" and " he"; "Ġ h" outranks "h e" in the second. */
    const ts_token want2[] = {he, gh, e};
    expect_ids(b.t, "he he", 5, false, false, want2, 3);
    /* Bytes without a token (here: "\n") are dropped when there is no unknown token, and the
     * rest still tokenizes. */
    const ts_token want3[] = {he};
    expect_ids(b.t, "he\n", 3, false, false, want3, 1);
    unbuild(&b);
    const char *bad_merge[] = {"Ġ h", "h q x"};
    v.merges = bad_merge;
    expect_bad(v, TS_ERR_FORMAT, "merge 1");
    const char *bad_form[] = {"Ġh"};
    v.merges = bad_form;
    v.n_merges = 1;
    expect_bad(v, TS_ERR_FORMAT, "left right");
    v.merges = merges;
    v.n_merges = 2;
    v.pre = "unheard-of";
    expect_bad(v, TS_ERR_UNSUPPORTED, "'unheard-of'");
}

/* ---- real vocabularies ------------------------------------------------------------------- */

static bool open_real(const char *path, built *b) {
    memset(b, 0, sizeof *b);
    ts_error err = {0};
    if (ts_gguf_open(path, &b->g, &err) != TS_OK) {
        TS_NOT_RUN("model %s is absent or unreadable: %s (python3 scripts/fetch_model.py)", path, err.msg);
        return false;
    }
    assert_int_equal(ts_tokenizer_create(b->g, &b->t, &err), TS_OK);
    return true;
}

/* Deterministic pseudo-random bytes (xorshift). */
static void fill_random(char *buf, size_t n, uint64_t seed, bool ascii_only) {
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        buf[i] = ascii_only ? (char)(' ' + seed % 95) : (char)(seed >> 24);
    }
}

static void roundtrip(const ts_tokenizer *t, const char *text, size_t len) {
    ts_error err = {0};
    ts_token *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_tokenizer_tokenize(t, text, len, false, false, &ids, &n, &err), TS_OK);
    char *back = NULL;
    size_t back_len = 0;
    assert_int_equal(ts_tokenizer_detokenize(t, ids, n, false, &back, &back_len, &err), TS_OK);
    assert_int_equal(back_len, len);
    assert_memory_equal(back, text, len);
    /* Deterministic: the same input gives the same ids. */
    ts_token *ids2 = NULL;
    size_t n2 = 0;
    assert_int_equal(ts_tokenizer_tokenize(t, text, len, false, false, &ids2, &n2, &err), TS_OK);
    assert_int_equal(n, n2);
    assert_memory_equal(ids, ids2, n * sizeof *ids);
    free(ids);
    free(ids2);
    free(back);
}

static void test_invalid_and_long_input(void **state) {
    (void)state;
    const char *names[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf",
                           "ggml-vocab-deepseek-llm.gguf"};
    for (size_t k = 0; k < 3; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/%s", TS_TESTDATA_DIR, names[k]);
        built b;
        if (!open_real(path, &b)) {
            continue;
        }
        /* Arbitrary bytes (invalid UTF-8, NUL) survive a round trip exactly. Not so for
         * deepseek-llm: its vocabulary spells the byte-level characters of bytes that never
         * occur in UTF-8 (0xF5..0xFF, ...) as user-defined tokens standing for the Latin-1
         * characters themselves, so an invalid byte 0xFC comes back as "ü". There the input
         * must still tokenize without error and deterministically. */
        char buf[4096];
        for (uint64_t seed = 1; seed <= 20; seed++) {
            fill_random(buf, sizeof buf, seed * 0x9E3779B97F4A7C15ULL, false);
            if (k < 2) {
                roundtrip(b.t, buf, sizeof buf);
            } else {
                ts_error err = {0};
                ts_token *ids = NULL;
                size_t n = 0;
                assert_int_equal(
                    ts_tokenizer_tokenize(b.t, buf, sizeof buf, false, false, &ids, &n, &err),
                    TS_OK);
                assert_true(n > 0);
                free(ids);
            }
        }
        /* A long input: 1 MiB of mixed text, and one 128 KiB "word". */
        size_t big = 1 << 20;
        char *text = malloc(big);
        assert_non_null(text);
        fill_random(text, big, 42, true);
        roundtrip(b.t, text, big);
        memset(text, 'a', 128 * 1024);
        roundtrip(b.t, text, 128 * 1024);
        free(text);
        unbuild(&b);
    }
}

/* SmolLM2's tokenizer. The expected ids come from Hugging Face `tokenizers` 0.23.3 with a BPE
 * model built from this GGUF's own vocabulary and merges and SmolLM2's pre-tokenizer
 * (Digits(individual_digits) + ByteLevel(add_prefix_space=False)), its control tokens added
 * as special tokens (described in docs/tokenizer.md). */
static void test_smollm(void **state) {
    (void)state;
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    built b;
    if (!open_real(path, &b)) {
        skip();
        return;
    }
    assert_string_equal(ts_tokenizer_pre_name(b.t), "smollm");
    static const struct {
        const char *text;
        ts_token ids[20];
        size_t n;
    } cases[] = {
        {"Hello, world!", {19556, 28, 905, 17}, 4},
        {" The quick brown fox jumps over the lazy dog.\n",
         {378, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 198},
         11},
        {"def f(x):\n    return x**2  # 12345",
         {1604, 275, 24, 104, 727, 472, 1003, 1792, 828, 34, 216, 907, 216, 33, 34, 35, 36, 37},
         18},
        {"Ünïcödé — 日本語 🚀",
         {142, 246, 94, 25972, 83, 7466, 84, 2756, 1841, 17097, 241, 115, 40993, 179, 120, 248,
          15107, 244, 218},
         19},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_ids(b.t, cases[i].text, strlen(cases[i].text), false, false, cases[i].ids,
                   cases[i].n);
        expect_ids(b.t, cases[i].text, strlen(cases[i].text), true, false, cases[i].ids,
                   cases[i].n); /* add_bos_token is false for SmolLM2 */
        roundtrip(b.t, cases[i].text, strlen(cases[i].text));
    }
    const char chat[] = "<|im_start|>user\nHi there<|im_end|>\n";
    const ts_token chat_ids[] = {1, 4093, 198, 26843, 665, 2, 198};
    expect_ids(b.t, chat, sizeof chat - 1, false, true, chat_ids, 7);
    assert_true(ts_tokenizer_is_eog(b.t, 2)); /* <|im_end|> */
    char *text = NULL;
    size_t len = 0;
    ts_error err = {0};
    assert_int_equal(ts_tokenizer_detokenize(b.t, chat_ids, 7, true, &text, &len, &err), TS_OK);
    assert_string_equal(text, chat);
    free(text);
    assert_int_equal(ts_tokenizer_detokenize(b.t, chat_ids, 7, false, &text, &len, &err), TS_OK);
    assert_string_equal(text, "user\nHi there\n");
    free(text);
    unbuild(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_basics),
        cmocka_unit_test(test_stream_utf8),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_bpe_validation),
        cmocka_unit_test(test_invalid_and_long_input),
        cmocka_unit_test(test_smollm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
