/* test_mask.c — token masks against the plain definition: token t is allowed exactly when a
 * copy of the matcher accepts t's bytes (an eog token exactly when the matcher is accepting).
 *
 * The reference clones the matcher and feeds each token's bytes, one token at a time; the trie
 * walk must give the same bits and count. States come from random walks: at each step the mask
 * is checked, then a random allowed token is taken. Vocabularies: a synthetic one (always; it
 * holds ASCII pieces, whole multi-byte characters, split UTF-8 fragments, duplicates, empty
 * special tokens and eog tokens) and SmolLM2's real 49k vocabulary when the model is in
 * ~/.cache/tessera/models/ (skipped with a message otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grammar/grammar.h"
#include "tessera.h"

#include "common/quick.h"
#include "common/skip.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

typedef struct vocab {
    int32_t n;
    char **pieces;
    size_t *lens;
    int32_t eog[2];
    int32_t n_eog;
    ts_gvocab *v;
} vocab;

static ts_grammar *compile(const char *text) {
    ts_grammar *g = NULL;
    ts_error err = {0};
    if (ts_grammar_from_gbnf(text, strlen(text), NULL, &g, &err) != TS_OK)
        fail_msg("grammar does not compile: %s", err.msg);
    return g;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    return buf;
}

/* Reference mask: every token through a fresh clone. */
static int32_t naive_mask(const ts_gmatch *m, const vocab *vc, uint32_t *bits) {
    memset(bits, 0, ((size_t)vc->n + 31) / 32 * sizeof *bits);
    int32_t count = 0;
    for (int32_t t = 0; t < vc->n; t++) {
        bool ok;
        bool eog = false;
        for (int32_t k = 0; k < vc->n_eog; k++)
            eog |= vc->eog[k] == t;
        if (eog) {
            ok = ts_gmatch_is_accepting(m);
        } else if (vc->lens[t] == 0) {
            ok = false;
        } else {
            ts_gmatch *c = ts_gmatch_clone(m);
            assert_non_null(c);
            ok = ts_gmatch_accept_bytes(c, vc->pieces[t], vc->lens[t]);
            ts_gmatch_free(c);
        }
        if (ok) {
            bits[t >> 5] |= 1u << (t & 31);
            count++;
        }
    }
    return count;
}

/* Random walks through grammar g, checking every stride-th mask against the per-token
 * reference (every 4 x stride-th in a quick, sanitized run: the reference is the costly part);
 * returns the number of masks checked. */
static int walk(const ts_grammar *g, const vocab *vc, int walks, int steps, int stride) {
    stride *= TS_QUICK ? 4 : 1;
    size_t words = ((size_t)vc->n + 31) / 32;
    uint32_t *fast = malloc(words * sizeof *fast), *ref = malloc(words * sizeof *ref);
    int32_t *cand = malloc((size_t)vc->n * sizeof *cand);
    int masks = 0;
    for (int w = 0; w < walks; w++) {
        ts_gmatch *m = ts_gmatch_create(g);
        assert_non_null(m);
        for (int s = 0; s < steps; s++) {
            int32_t nf = ts_gmatch_mask(m, vc->v, fast);
            if (s % stride == 0) {
                int32_t nr = naive_mask(m, vc, ref);
                for (int32_t t = 0; t < vc->n; t++) {
                    bool a = fast[t >> 5] >> (t & 31) & 1u, b = ref[t >> 5] >> (t & 31) & 1u;
                    if (a != b)
                        fail_msg("walk %d step %d: token %d '%.*s': trie %d, reference %d", w, s, t,
                                 (int)vc->lens[t], vc->pieces[t], a, b);
                }
                assert_int_equal(nf, nr);
                masks++;
            }
            int32_t nc = 0;
            for (int32_t t = 0; t < vc->n; t++)
                if ((fast[t >> 5] >> (t & 31) & 1u) && vc->lens[t] > 0 && t != vc->eog[0] &&
                    (vc->n_eog < 2 || t != vc->eog[1]))
                    cand[nc++] = t;
            if (nc == 0)
                break;
            int32_t t = cand[rnd((uint32_t)nc)];
            assert_true(ts_gmatch_accept_token(m, vc->v, t));
        }
        ts_gmatch_free(m);
    }
    free(fast);
    free(ref);
    free(cand);
    return masks;
}

/* A synthetic vocabulary: single bytes, random strings over an alphabet with JSON syntax,
 * multi-byte characters and their fragments. */
static void synthetic(vocab *vc, int32_t n) {
    static const char *const atoms[] = {"{",        "}",
                                        "[",        "]",
                                        "\"",       ":",
                                        ",",        " ",
                                        "\n",       "\t",
                                        "\\",       "u",
                                        "0",        "1",
                                        "9",        "-",
                                        "+",        ".",
                                        "e",        "E",
                                        "a",        "b",
                                        "x",        "z",
                                        "=",        "(",
                                        ")",        "*",
                                        "/",        "true",
                                        "false",    "null",
                                        "é",        "日",
                                        "𝄞",        "ぁ",
                                        "ア",       "\xc3",
                                        "\xa9",     "\xe6",
                                        "\x97\xa5", "\xf0\x9d",
                                        "\x84\x9e", "\xe3\x81",
                                        "\x81",     "\xed\xa0\x80",
                                        "\xc0\x80", "\xff",
                                        "\x7f",     "\x01",
                                        "hello",    " world",
                                        "key",      "name",
                                        "日本語",   "ab cd ef",
                                        "é\"",      "x\\n"};
    size_t na = sizeof atoms / sizeof atoms[0];
    vc->n = n;
    vc->pieces = calloc((size_t)n, sizeof *vc->pieces);
    vc->lens = calloc((size_t)n, sizeof *vc->lens);
    for (int32_t t = 0; t < n; t++) {
        char buf[64];
        size_t len = 0;
        if (t < 256) { /* every byte */
            buf[len++] = (char)t;
        } else if (t % 97 == 0) { /* special token: no bytes */
        } else if (t % 89 == 0) { /* a duplicate of an earlier piece */
            int32_t o = (int32_t)rnd((uint32_t)t);
            memcpy(buf, vc->pieces[o], vc->lens[o]);
            len = vc->lens[o];
        } else {
            int parts = 1 + (int)rnd(5);
            for (int p = 0; p < parts; p++) {
                const char *a = atoms[rnd((uint32_t)na)];
                size_t al = strlen(a);
                if (len + al < sizeof buf) {
                    memcpy(buf + len, a, al);
                    len += al;
                }
            }
        }
        vc->pieces[t] = malloc(len ? len : 1);
        memcpy(vc->pieces[t], buf, len);
        vc->lens[t] = len;
    }
    vc->eog[0] = 97; /* a special (empty) token */
    vc->eog[1] = 300;
    vc->n_eog = 2;
    ts_error err = {0};
    assert_int_equal(ts_gvocab_create((const char *const *)vc->pieces, vc->lens, n, vc->eog,
                                      vc->n_eog, &vc->v, &err),
                     TS_OK);
    assert_int_equal(ts_gvocab_size(vc->v), n);
}

static void vocab_free(vocab *vc) {
    for (int32_t t = 0; t < vc->n; t++)
        free(vc->pieces[t]);
    free(vc->pieces);
    free(vc->lens);
    ts_gvocab_free(vc->v);
}

static const char *const GRAMMARS[] = {
    NULL, /* json.gbnf from the source tree */
    "root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] term)*\n"
    "term  ::= ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\n"
    "num   ::= [0-9]+ ws\nws    ::= [ \\t\\n]*\n",
    "root ::= ([ぁ-ゟ] | [一-鿿] | \"é\" | [\\U0001D100-\\U0001D1FF] | \" \")+",
    "root ::= \"{\" ( \"\\\"\" [^\"]{0,8} \"\\\"\" )? \"}\" \"\\n\"?",
    "root ::= (\"true\" | \"t\" \"r\" \"ue\" | [a-z]{2,3} \" \")* \"null\"",
    "root ::= [^\\x00-\\x7F]* \"x\"",
    /* String runs: bounded and unbounded strings, alone and beside literal keys, with the
     * classes JSON Schema and llama.cpp's json.gbnf write. */
    "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,7} \"\\\"\" [0-9]",
    "root ::= \"{\" ( \"\\\"name\\\"\" | \"\\\"\" ch{2,30} \"\\\"\" ) \":\" [0-9]+ \"}\"\n"
    "ch ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]",
    "root ::= (\"\\\"\" [^\"\\\\\\x7F\\x00-\\x1F]* \"\\\"\" \" \"?)+",
    "root ::= \"\\\"\" ( ( ch{4} ){0,3} ch{0,3} ) \"\\\"\" \"x\"\nch ::= [^\"\\\\\\x00-\\x1F]",
    "root ::= [^\"]{0,5} \"\\\"\" | [a-zé ]{1,9} \".\"",
    /* Class runs: identifiers, hex digits, letters beside a literal. */
    "root ::= \"\\\"\" [0-9a-fA-F]{6,12} \"\\\"\" | \"\\\"\" [\\x2D0-9A-Z\\x5Fa-z]{1,9} \"\\\"\" [ ]?",
    "root ::= ([a-z]+ | \"key\" [0-9]{0,3}) (\",\" [a-z]{2,4})* \".\"",
};

static void test_synthetic(void **state) {
    (void)state;
    vocab vc = {0};
    synthetic(&vc, 3000);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/json.gbnf", TS_SOURCE_DIR);
    char *json = read_file(path);
    assert_non_null(json);
    int masks = 0;
    for (size_t i = 0; i < sizeof GRAMMARS / sizeof GRAMMARS[0]; i++) {
        ts_grammar *g = compile(GRAMMARS[i] ? GRAMMARS[i] : json);
        masks += walk(g, &vc, 6, 40, 1);
        ts_grammar_free(g);
    }
    printf("%d masks equal to the reference (synthetic vocabulary of %d tokens)\n", masks, vc.n);
    free(json);
    vocab_free(&vc);
}

/* Masks in an accepting state allow eog; a token with a special (empty) piece never. */
static void test_eog(void **state) {
    (void)state;
    const char *pieces[] = {"a", "", "ab", "b", "<eos>"};
    size_t lens[] = {1, 0, 2, 1, 5};
    int32_t eog[] = {4, 4};
    ts_gvocab *v = NULL;
    ts_error err = {0};
    assert_int_equal(ts_gvocab_create(pieces, lens, 5, eog, 2, &v, &err), TS_OK);
    ts_grammar *g = compile("root ::= \"a\" \"b\"?");
    ts_gmatch *m = ts_gmatch_create(g);
    uint32_t bits[1];
    assert_int_equal(ts_gmatch_mask(m, v, bits), 2);
    assert_int_equal(bits[0], 0x5u); /* a, ab */
    assert_false(ts_gmatch_accept_token(m, v, 4));
    assert_false(ts_gmatch_accept_token(m, v, 1));
    assert_false(ts_gmatch_accept_token(m, v, 5));
    assert_false(ts_gmatch_accept_token(m, v, -1));
    assert_true(ts_gmatch_accept_token(m, v, 0));
    assert_int_equal(ts_gmatch_mask(m, v, bits), 2);
    assert_int_equal(bits[0], 0x18u); /* b, eos */
    assert_true(ts_gmatch_accept_token(m, v, 4));
    assert_true(ts_gmatch_accept_token(m, v, 3));
    assert_int_equal(ts_gmatch_mask(m, v, bits), 1);
    assert_int_equal(bits[0], 0x10u);
    ts_gmatch_free(m);
    ts_grammar_free(g);
    ts_gvocab_free(v);
    /* bad vocabularies */
    assert_int_equal(ts_gvocab_create(pieces, lens, 0, NULL, 0, &v, &err), TS_ERR_INVALID_ARG);
    int32_t bad[] = {5};
    assert_int_equal(ts_gvocab_create(pieces, lens, 5, bad, 1, &v, &err), TS_ERR_RANGE);
    assert_int_equal(ts_gvocab_create(pieces, lens, 5, NULL, 1, &v, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gvocab_size(NULL), 0);
    ts_gvocab_free(NULL);
    assert_int_equal(ts_gmatch_mask(NULL, NULL, NULL), 0);
}

static void test_real_vocab(void **state) {
    (void)state;
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    FILE *f = fopen(path, "rb");
    if (!f) {
        TS_SKIP_NO_MODEL(path);
    }
    fclose(f);
    ts_llm *llm = NULL;
    ts_error err = {0};
    ts_llm_params lp = {.vocab_only = 1};
    assert_int_equal(ts_llm_open(path, &lp, &llm, &err), TS_OK);
    vocab vc = {0};
    vc.n = ts_llm_n_vocab(llm);
    vc.pieces = calloc((size_t)vc.n, sizeof *vc.pieces);
    vc.lens = calloc((size_t)vc.n, sizeof *vc.lens);
    for (int32_t t = 0; t < vc.n; t++) {
        const char *p;
        size_t len;
        assert_int_equal(ts_llm_token_to_piece(llm, t, 0, &p, &len, &err), TS_OK);
        vc.pieces[t] = malloc(len ? len : 1);
        memcpy(vc.pieces[t], p, len);
        vc.lens[t] = len;
    }
    ts_llm_info info;
    ts_llm_get_info(llm, &info);
    vc.eog[0] = info.eos;
    vc.n_eog = 1;
    ts_llm_close(llm);
    assert_int_equal(ts_gvocab_create((const char *const *)vc.pieces, vc.lens, vc.n, vc.eog,
                                      vc.n_eog, &vc.v, &err),
                     TS_OK);
    snprintf(path, sizeof path, "%s/tests/data/grammar/json.gbnf", TS_SOURCE_DIR);
    char *json = read_file(path);
    ts_grammar *g = compile(json);
    int masks = walk(g, &vc, 2, 30, 3);
    ts_grammar_free(g);
    static const int more[] = {2, 7, 9, 11, 12}; /* unicode; string and class runs */
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) {
        g = compile(GRAMMARS[more[k]]);
        masks += walk(g, &vc, 1, 12, 4);
        ts_grammar_free(g);
    }
    printf("%d masks equal to the reference (SmolLM2 vocabulary, %d tokens)\n", masks, vc.n);
    free(json);
    vocab_free(&vc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_eog),
        cmocka_unit_test(test_real_vocab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
