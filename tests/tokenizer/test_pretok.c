/*
 * test_pretok.c — pre-tokenizer splits against Hugging Face `tokenizers`.
 *
 * pretok_expected.h holds, for every pre-tokenizer family and sample text, where HF's
 * Split(Regex, "isolated") sequence cuts the text (byte offsets of piece ends); it is produced
 * by gen_pretok_expected.py from the same regex facts. Here tessera's PCRE2 splitter must cut
 * at exactly the same places. Also: every pre-tokenizer name used in GGUF files is accepted,
 * an unknown one is an error naming it, and invalid UTF-8 splits without error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tok_internal.h"
#include "pretok_expected.h"

static ts_status split(const char *pre, const char *text, size_t len, char *ends, size_t cap,
                       ts_error *err) {
    ts_tokenizer t;
    memset(&t, 0, sizeof t);
    ts_status st = tok_pretok_init(&t, pre, err);
    tok_spans spans = {0};
    if (st == TS_OK) {
        st = tok_pretok_split(&t, text, len, &spans, err);
    }
    size_t n = 0, expect_off = 0;
    ends[0] = '\0';
    for (size_t i = 0; st == TS_OK && i < spans.n; i++) {
        assert_int_equal(spans.v[i].off, expect_off); /* pieces tile the text */
        expect_off += spans.v[i].len;
        n += (size_t)snprintf(ends + n, cap - n, "%s%zu", i ? "," : "", expect_off);
        assert_true(n < cap);
    }
    if (st == TS_OK) {
        assert_int_equal(expect_off, len);
    }
    free(spans.v);
    tok_pretok_free(&t);
    return st;
}

static void test_matches_hf(void **state) {
    (void)state;
    int failures = 0;
    size_t n_cases = sizeof k_pretok_cases / sizeof k_pretok_cases[0];
    for (size_t i = 0; i < n_cases; i++) {
        const pretok_case *c = &k_pretok_cases[i];
        const char *text = k_pretok_inputs[c->input];
        char ends[4096];
        ts_error err = {0};
        assert_int_equal(split(c->pre, text, strlen(text), ends, sizeof ends, &err), TS_OK);
        if (strcmp(ends, c->ends) != 0) {
            failures++;
            printf("%s input %d '%s':\n  got  %s\n  want %s\n", c->pre, c->input, text, ends,
                   c->ends);
        }
    }
    printf("%zu cases, %d differ from Hugging Face tokenizers\n", n_cases, failures);
    assert_int_equal(failures, 0);
}

static void test_names(void **state) {
    (void)state;
    static const char *const names[] = {
        "default",      "llama3",    "llama-bpe",  "deepseek-llm", "deepseek-coder",
        "deepseek-v3",  "falcon",    "mpt",        "starcoder",    "gpt-2",
        "refact",       "command-r", "qwen2",      "stablelm2",    "olmo",
        "dbrx",         "smaug-bpe", "poro-chat",  "chatglm-bpe",  "viking",
        "jais",         "tekken",    "smollm",     "codeshell",    "bloom",
        "gpt3-finnish", "exaone",    "chameleon",  "minerva-7b",   "gpt-4o",
        "superbpe",     "trillion",  "bailingmoe", "seed-coder"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char ends[256];
        ts_error err = {0};
        ts_status st = split(names[i], "Hello world 123", 15, ends, sizeof ends, &err);
        if (st != TS_OK) {
            printf("%s: %s\n", names[i], err.msg);
        }
        assert_int_equal(st, TS_OK);
    }
    char ends[64];
    ts_error err = {0};
    assert_int_equal(split("no-such-pre", "x", 1, ends, sizeof ends, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'no-such-pre'"));
}

static void test_invalid_utf8(void **state) {
    (void)state;
    /* Invalid bytes never match a class: they become pieces of their own. */
    const char text[] = "ab\xff\xfe cd\xe2\x82 \xc3\x28x\0y";
    char ends[256];
    ts_error err = {0};
    assert_int_equal(split("llama3", text, sizeof text - 1, ends, sizeof ends, &err), TS_OK);
    assert_int_equal(split("gpt-2", text, sizeof text - 1, ends, sizeof ends, &err), TS_OK);
    /* ab / ff fe / " cd" / e2 82 / " " / c3 / "(" / x / NUL / y */
    assert_string_equal(ends, "2,4,7,9,10,11,12,13,14,15");
    /* Zero-width cuts (superbpe's thousands grouping) step over characters safely. */
    assert_int_equal(split("superbpe", "1234567", 7, ends, sizeof ends, &err), TS_OK);
    assert_string_equal(ends, "1,4,7");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_hf),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
