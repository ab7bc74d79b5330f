/* test_match.c — the grammar matcher: which byte strings are prefixes of a sentence and which
 * are sentences, for many grammars (arithmetic, JSON, repetition bounds, Unicode classes, UTF-8
 * split across calls, ambiguity), plus state handling (a refused input changes nothing, clones
 * are independent), the bound on live stacks, deep nesting and table compaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grammar/grammar.h"
#include "grammar/grammar_impl.h"

static ts_grammar *compile(const char *text) {
    ts_grammar *g = NULL;
    ts_error err = {0};
    ts_status st = ts_grammar_from_gbnf(text, strlen(text), NULL, &g, &err);
    if (st != TS_OK)
        fail_msg("grammar does not compile: %s\n%s", err.msg, text);
    return g;
}

/* 0: refused; 1: a prefix of a sentence; 2: a sentence. */
static int run(const ts_grammar *g, const char *input, size_t len) {
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    int r = ts_gmatch_accept_bytes(m, input, len) ? 1 + ts_gmatch_is_accepting(m) : 0;
    ts_gmatch_free(m);
    return r;
}

/* Same, one byte per call (a character split across tokens). */
static int run_bytewise(const ts_grammar *g, const char *input, size_t len) {
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    int r = 1;
    for (size_t i = 0; i < len && r; i++)
        if (!ts_gmatch_accept_bytes(m, input + i, 1))
            r = 0;
    if (r)
        r += ts_gmatch_is_accepting(m);
    ts_gmatch_free(m);
    return r;
}

typedef struct mcase {
    const char *input;
    int want; /* 0 refused, 1 prefix, 2 sentence */
} mcase;

static void check_cases(const char *grammar, const mcase *cases, size_t n) {
    ts_grammar *g = compile(grammar);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cases[i].input);
        int got = run(g, cases[i].input, len);
        int got_b = run_bytewise(g, cases[i].input, len);
        if (got != cases[i].want || got_b != cases[i].want)
            fail_msg("grammar:\n%s\ninput '%s': want %d, got %d (bytewise %d)", grammar,
                     cases[i].input, cases[i].want, got, got_b);
    }
    ts_grammar_free(g);
}

#define CASES(g, ...)                                                                              \
    do {                                                                                           \
        static const mcase c_[] = {__VA_ARGS__};                                                   \
        check_cases(g, c_, sizeof c_ / sizeof c_[0]);                                              \
    } while (0)

static const char ARITH[] = "root  ::= (expr \"=\" ws term \"\\n\")+\n"
                            "expr  ::= term ([-+*/] term)*\n"
                            "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
                            "ident ::= [a-z] [a-z0-9_]* ws\n"
                            "num   ::= [0-9]+ ws\n"
                            "ws    ::= [ \\t\\n]*\n";

static void test_arithmetic(void **state) {
    (void)state;
    CASES(ARITH, {"", 1}, {"a", 1}, {"a=b\n", 2}, {"x1+(y*2)= 42\n", 2}, {"a=b\nc=d\n", 2},
          {"a=b", 1}, {"+a", 0}, {"a==b", 0}, {"(a", 1}, {"(a)", 1}, {"a)", 0}, {"A", 0},
          {"a = b\n", 2}, {"12=3\n4", 1}, {"a=b\n\n", 2}, {"a=b\n=", 0});
}

static void test_json(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/json.gbnf", TS_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    CASES(text, {"{}", 2}, {" { } ", 2}, {"{\"a\":1}", 2}, {"{\"a\" : [1, 2.5e-3, -0, true]}", 2},
          {"{\"a\":", 1}, {"{\"a\" 1}", 0}, {"[01]", 0}, {"[0.]", 0}, {"[0.5", 1}, {"-", 1},
          {"-0", 2}, {"1e", 1}, {"1e+", 1}, {"1e+5", 2}, {"\"\\u00e9\"", 2}, {"\"\\u00g\"", 0},
          {"\"a\nb\"", 0}, {"\"\\q\"", 0}, {"\"é日本𝄞\"", 2}, {"[[[[[]]]]]", 2}, {"[[[[[]]]]", 1},
          {"[1,]", 0}, {"[1,2", 1}, {"{\"a\":1,}", 0}, {"nul", 1}, {"null", 2}, {"nulls", 0},
          {"tru", 1}, {"{\"k\":{\"k\":{\"k\":[{}]}}}", 2}, {"\"\xc3\"", 0}, {"\"\xc3", 1},
          {"\"\xff\"", 0});
}

static void test_repetition(void **state) {
    (void)state;
    CASES("root ::= \"a\"{3}", {"aa", 1}, {"aaa", 2}, {"aaaa", 0});
    CASES("root ::= \"a\"{2,}", {"a", 1}, {"aa", 2}, {"aaaaaaaaaaaa", 2}, {"ab", 0});
    CASES("root ::= \"ab\"{1,3} \"c\"", {"abc", 2}, {"ababc", 2}, {"abababc", 2}, {"ababababc", 0},
          {"c", 0}, {"aba", 1});
    CASES("root ::= [0-9]{0,2} \"x\"", {"x", 2}, {"1x", 2}, {"12x", 2}, {"123", 0});
    CASES("root ::= (\"a\" | \"bc\"){2} \"!\"", {"aa!", 2}, {"abc!", 2}, {"bcbc!", 2}, {"a!", 0},
          {"abcbc", 0});
    CASES("root ::= \"x\"? \"y\"+ \"z\"*", {"", 1}, {"x", 1}, {"y", 2}, {"xyyyzz", 2}, {"xz", 0},
          {"yzy", 0});
    CASES("root ::= \"a\"{0}", {"", 2}, {"a", 0});
    CASES("root ::= (\"a\"?)* \"b\"", {"b", 2}, {"aaab", 2}, {"aaa", 1}, {"ba", 0});
    CASES("root ::= \"\"* \"q\"", {"q", 2});
    /* a large bound, checked at its edges */
    ts_grammar *g = compile("root ::= \"a\"{1000,2000}");
    char *buf = malloc(2002);
    memset(buf, 'a', 2001);
    assert_int_equal(run(g, buf, 999), 1);
    assert_int_equal(run(g, buf, 1000), 2);
    assert_int_equal(run(g, buf, 2000), 2);
    assert_int_equal(run(g, buf, 2001), 0);
    free(buf);
    ts_grammar_free(g);
}

static void test_unicode(void **state) {
    (void)state;
    CASES("root ::= [ぁ-ゟ]+", {"あいう", 2}, {"ア", 0}, {"a", 0}, {"\xe3", 1},
          {"\xe3\x81", 1},      /* U+3040..U+307F meets ぁ-ゟ */
          {"\xe3\x80", 0},      /* U+3000..U+303F does not */
          {"\xe3\x81\x80", 0},  /* U+3040 itself is not in the class */
          {"\xe3\x81\x81", 2}); /* ぁ */
    CASES("root ::= [^a]*", {"bc", 2}, {"a", 0}, {"é𝄞日", 2}, {"\xc0\x80", 0}, /* overlong */
          {"\xe0\x80\x80", 0},                                                 /* overlong */
          {"\xed\xa0\x80", 0},                                                 /* a surrogate */
          {"\xf4\x90\x80\x80", 0},                                             /* above U+10FFFF */
          {"\xf0\x9d\x84", 1}, {"\x80", 0}, {"\xf8", 0});
    CASES("root ::= \"\\u00e9\" \"\\U0001D11E\" [\\x41-\\x43]", {"é𝄞B", 2}, {"é𝄞D", 0});
    CASES("root ::= .+", {"x", 2}, {"\n", 2}, {"é", 2}, {"\xed\xbf\xbf", 0});
    CASES("root ::= [\\u0100-\\u017F]", {"\xc4", 1}, {"\xc5", 1}, {"\xc6", 0}, {"\xc3", 0});
    /* Unicode line separators excluded, as a list grammar does */
    CASES("root ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"", {"- a\n", 2},
          {"- a\xc2\x85", 0}, {"- a\xe2\x80\xa8", 0}, {"- a\xe2\x80\xa7\n", 2});
}

static void test_state_kept_on_refusal(void **state) {
    (void)state;
    ts_grammar *g = compile("root ::= \"abc\" | \"abd\"");
    ts_gmatch *m = ts_gmatch_create(g);
    assert_true(ts_gmatch_accept_bytes(m, "ab", 2));
    assert_false(ts_gmatch_accept_bytes(m, "cx", 2)); /* c ok, x not: nothing consumed */
    assert_false(ts_gmatch_is_accepting(m));
    ts_gmatch *c = ts_gmatch_clone(m);
    assert_true(ts_gmatch_accept_bytes(m, "c", 1));
    assert_true(ts_gmatch_is_accepting(m));
    assert_false(ts_gmatch_is_accepting(c));
    assert_true(ts_gmatch_accept_bytes(c, "d", 1));
    assert_true(ts_gmatch_is_accepting(c));
    assert_false(ts_gmatch_accept_bytes(c, "d", 1));
    assert_true(ts_gmatch_accept_bytes(c, "", 0));
    ts_gmatch_free(c);
    ts_gmatch_free(m);
    ts_grammar_free(g);
    /* bad arguments */
    assert_null(ts_gmatch_create(NULL));
    assert_null(ts_gmatch_clone(NULL));
    assert_false(ts_gmatch_accept_bytes(NULL, "a", 1));
    assert_false(ts_gmatch_is_accepting(NULL));
    ts_gmatch_free(NULL);
}

static void test_ambiguity(void **state) {
    (void)state;
    /* Highly ambiguous: every split of the a's into 1s and 2s is a parse. */
    ts_grammar *g = compile("root ::= (\"a\" | \"aa\" | \"a\" \"a\")* \"b\"");
    size_t n = 20000;
    char *buf = malloc(n + 1);
    memset(buf, 'a', n);
    buf[n] = 'b';
    assert_int_equal(run(g, buf, n + 1), 2);
    assert_int_equal(run_bytewise(g, buf, n), 1);
    ts_grammar_free(g);
    /* x? x? ... x?: the classic slow case stays linear. */
    char text[4096] = "root ::= ";
    for (int i = 0; i < 200; i++)
        strcat(text, "\"x\"? ");
    strcat(text, "\"y\"");
    g = compile(text);
    memset(buf, 'x', 200);
    buf[200] = 'y';
    assert_int_equal(run(g, buf, 201), 2);
    assert_int_equal(run(g, buf, 150), 1);
    buf[0] = 'y';
    assert_int_equal(run(g, buf, 1), 2);
    ts_grammar_free(g);
    free(buf);
}

static void test_stack_limit(void **state) {
    (void)state;
    /* After k a's the parse may have used any count between k/2 and k of the repetition: the
     * number of live stacks grows with k until it passes the limit, and then the input is
     * refused (never wrongly accepted). */
    ts_grammar *g = compile("root ::= x{0,10000} \"!\"\nx ::= \"a\" | \"aa\"");
    ts_gmatch *m = ts_gmatch_create(g);
    size_t k = 0;
    while (k < 20000 && ts_gmatch_accept_bytes(m, "a", 1))
        k++;
    assert_true(k > 1000);
    assert_true(k < 20000);
    assert_true(ts_gmatch_accept_bytes(m, "!", 1));
    ts_gmatch_free(m);
    ts_grammar_free(g);
}

static void test_deep_nesting(void **state) {
    (void)state;
    ts_grammar *g = compile("root ::= v\nv ::= \"[\" (v (\",\" v)*)? \"]\" | \"0\"");
    size_t depth = 100000;
    char *buf = malloc(2 * depth + 1);
    for (size_t i = 0; i < depth; i++) {
        buf[i] = '[';
        buf[2 * depth - 1 - i] = ']';
    }
    buf[2 * depth] = 0;
    assert_int_equal(run(g, buf, 2 * depth), 2);
    assert_int_equal(run(g, buf, 2 * depth - 1), 1);
    ts_grammar_free(g);
    free(buf);
}

static void test_compaction(void **state) {
    (void)state;
    /* Nesting makes a new stack node per byte: 3M bytes pass the node table's limit, so the
     * tables are rebuilt from the current state during the walk, and the result must be the same
     * as without. */
    ts_grammar *g = compile("root ::= v\nv ::= \"[\" v? \"]\"");
    size_t depth = 1500000;
    char *buf = malloc(2 * depth);
    memset(buf, '[', depth);
    memset(buf + depth, ']', depth);
    ts_gmatch *m = ts_gmatch_create(g);
    for (size_t i = 0; i < 2 * depth; i += 4096) {
        size_t n = 2 * depth - i < 4096 ? 2 * depth - i : 4096;
        assert_true(ts_gmatch_accept_bytes(m, buf + i, n));
        if (i + n < 2 * depth)
            assert_false(ts_gmatch_is_accepting(m));
    }
    assert_true(ts_gmatch_is_accepting(m));
    assert_false(ts_gmatch_accept_bytes(m, "]", 1));
    ts_gmatch_free(m);
    ts_grammar_free(g);
    free(buf);
}

static void test_root_and_empty(void **state) {
    (void)state;
    ts_grammar *g = NULL;
    ts_error err = {0};
    const char *text = "a ::= \"x\" b\nb ::= \"y\"\nroot ::= \"z\"";
    assert_int_equal(ts_grammar_from_gbnf(text, strlen(text), "a", &g, &err), TS_OK);
    assert_int_equal(run(g, "xy", 2), 2);
    assert_int_equal(run(g, "z", 1), 0);
    ts_grammar_free(g);
    CASES("root ::= \"\"", {"", 2}, {"a", 0});
    CASES("root ::= ws\nws ::= | \" \" | \"\\n\" [ \\t]{0,3}", {"", 2}, {" ", 2}, {"\n\t\t", 2},
          {"  ", 0}, {"\n    ", 0});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_repetition),
        cmocka_unit_test(test_unicode),
        cmocka_unit_test(test_state_kept_on_refusal),
        cmocka_unit_test(test_ambiguity),
        cmocka_unit_test(test_stack_limit),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_root_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
