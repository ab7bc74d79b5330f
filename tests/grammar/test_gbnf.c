/* test_gbnf.c — the GBNF reader: the syntax llama.cpp's grammar files use (our own grammars in
 * the same style: JSON, arithmetic, chess, a C subset, English and Japanese text, lists), every
 * error with its status and "grammar:LINE:COL: what", and the limits. When TS_GBNF_DIR names a
 * directory (e.g. llama.cpp's grammars/), every *.gbnf file in it must compile too. */
#include <dirent.h>
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

static void expect_ok(const char *text) {
    ts_grammar *g = NULL;
    ts_error err = {0};
    ts_status st = ts_grammar_from_gbnf(text, strlen(text), NULL, &g, &err);
    if (st != TS_OK)
        fail_msg("grammar does not compile: %s\n%s", err.msg, text);
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    ts_gmatch_free(m);
    ts_grammar_free(g);
}

static void expect_err(const char *text, size_t len, ts_status want, const char *msg) {
    ts_grammar *g = (ts_grammar *)(uintptr_t)1;
    ts_error err = {0};
    ts_status st = ts_grammar_from_gbnf(text, len, NULL, &g, &err);
    if (st != want || !strstr(err.msg, msg))
        fail_msg("grammar:\n%s\nwant %d '%s', got %d '%s'", text, want, msg, st, err.msg);
    assert_null(g);
}

#define ERR(text, want, msg) expect_err(text, strlen(text), want, msg)

static const char *const GRAMMARS[] = {
    /* arithmetic */
    "root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] term)*\n"
    "term  ::= ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\n"
    "num   ::= [0-9]+ ws\nws    ::= [ \\t\\n]*\n",
    /* chess moves, with comments inside a multi-line group */
    "# moves\nroot ::= (\n  # the first move\n  \"1. \" move \" \" move \"\\n\"\n\n"
    "  ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n)\n"
    "move ::= (pawn | nonpawn | castle) [+#]?\npawn ::= [a-h] [1-8] (\"=\" [NBRQ])?\n"
    "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\ncastle ::= \"O-O\" \"-O\"?\n",
    /* a C subset: camelCase names, nested repetition, a class with an escaped ']' */
    "root ::= (declaration)*\n"
    "declaration ::= dataType identifier \"(\" parameter? \")\" \"{\" statement* \"}\"\n"
    "dataType  ::= \"int\" ws | \"float\" ws | \"char\" ws\n"
    "identifier ::= [a-zA-Z_] [a-zA-Z_0-9]*\nparameter ::= dataType identifier\n"
    "statement ::=\n    ( dataType identifier ws \"=\" ws expression \";\" ) |\n"
    "    ( identifier ws \"=\" ws expression \";\" ) |\n    ( \"return\" ws expression \";\" ) |\n"
    "    ( \"/*\" ( [^*] | (\"*\" [^/]) )* \"*/\" )\n"
    "expression ::= term ((\"+\" | \"-\") term)*\nterm ::= factor((\"*\" | \"/\") factor)*\n"
    "factor ::= identifier | number | \"-\" factor | \"(\" ws expression ws \")\"\n"
    "number ::= [0-9]+\nws ::= ([ \\t\\n]+)\n",
    /* English-ish text: a class holding brackets and escapes, '-' at the end */
    "root        ::= en-char+ ([ \\t\\n] en-char+)*\nen-char     ::= letter | digit | punct\n"
    "letter      ::= [a-zA-Z]\ndigit       ::= [0-9]\n"
    "punct ::= [!\"#$%&'()*+,./:;<=>?@[\\\\\\]^_`{|}~-]\n",
    /* Japanese: ranges written as UTF-8 */
    "root ::= jp-char+ ([ \\t\\n] jp-char+)*\njp-char ::= hiragana | katakana | punct | cjk\n"
    "hiragana ::= [ぁ-ゟ]\nkatakana ::= [ァ-ヿ]\npunct ::= [、-〾]\ncjk ::= [一-鿿]\n",
    /* a list with escapes \x \u in a negated class */
    "root ::= item+\n\n# Excludes line breaks\nitem ::= \"- \" "
    "[^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ "
    "\"\\n\"\n",
    /* an empty alternative first, repetition bounds with spaces, CRLF line ends */
    "root ::= ws \"x\" ws\r\nws ::= | \" \" | \"\\n\" [ \\t]{ 0 , 20 }\r\n",
    /* a rule continued after '|' on the next line; alternatives in a group across lines */
    "root ::= \"a\" |\n  \"b\" (\n \"c\"\n | \"d\" ) \".\"{2,} \"e\"{3} "
    "[\\U0001F600-\\U0001F64F]?\n",
    /* digits and dashes in names, rules used before they are defined, an unused rule */
    "root ::= rule-2 x9\nrule-2 ::= \"2\"\nx9 ::= \"9\"\nunused ::= \"u\"\n",
    /* harmless tail cycles: (x?)* and a rule whose alternative is itself */
    "root ::= (\"a\"?)* r\nr ::= r | \"b\"\n",
    /* empty literals, a lone '-' and ']' escaped in classes, any character */
    "root ::= \"\" [-] [a-] [\\]] . \"\"*\n",
};

static void test_grammars(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof GRAMMARS / sizeof GRAMMARS[0]; i++)
        expect_ok(GRAMMARS[i]);
}

static char *read_file(const char *path, size_t *len) {
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
    *len = got;
    return buf;
}

static void test_files(void **state) {
    (void)state;
    char path[1024];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/tests/data/grammar/json.gbnf", TS_SOURCE_DIR);
    char *text = read_file(path, &len);
    assert_non_null(text);
    expect_ok(text);
    free(text);
    const char *dir = getenv("TS_GBNF_DIR");
    if (!dir) {
        printf("note: set TS_GBNF_DIR to a directory of .gbnf files (llama.cpp's grammars/) "
               "to check that they all compile\n");
        return;
    }
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 5, ".gbnf") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        text = read_file(path, &len);
        assert_non_null(text);
        ts_grammar *g = NULL;
        ts_error err = {0};
        if (ts_grammar_from_gbnf(text, len, NULL, &g, &err) != TS_OK)
            fail_msg("%s: %s", path, err.msg);
        ts_grammar_free(g);
        free(text);
        n++;
    }
    closedir(d);
    printf("%d grammar files in %s compile\n", n, dir);
    assert_true(n > 0);
}

static void test_errors(void **state) {
    (void)state;
    ERR("root ::= \"abc", TS_ERR_FORMAT, "grammar:1:10: unterminated string literal");
    ERR("root ::= [abc", TS_ERR_FORMAT, "grammar:1:10: unterminated character class");
    ERR("root ::= \"a\\q\"", TS_ERR_FORMAT, "grammar:1:12: unknown escape '\\q'");
    ERR("root ::= \"\\x4\"", TS_ERR_FORMAT, "grammar:1:11: '\\x' needs 2 hex digits");
    ERR("root ::= \"\\uD800\"", TS_ERR_FORMAT, "not a Unicode scalar value");
    ERR("root ::= \"\\U00110000\"", TS_ERR_FORMAT, "not a Unicode scalar value");
    ERR("root = \"a\"", TS_ERR_FORMAT, "grammar:1:6: expected '::=' after rule name 'root'");
    ERR("\n\nroot ::= a\n", TS_ERR_FORMAT, "grammar:3:10: rule 'a' is used but never defined");
    ERR("root ::= \"a\"\nroot ::= \"b\"", TS_ERR_FORMAT,
        "grammar:2:1: rule 'root' is defined twice (first at 1:1)");
    ERR("x ::= \"a\"", TS_ERR_FORMAT, "grammar: no rule named 'root'");
    ERR("", TS_ERR_FORMAT, "no rule named 'root'");
    ERR("# only a comment\n", TS_ERR_FORMAT, "no rule named 'root'");
    ERR("root ::= root \"a\" | \"b\"", TS_ERR_FORMAT, "grammar:1:1: rule 'root' is left-recursive");
    ERR("root ::= \"x\"\nexpr ::= term \"+\" term | \"1\"\nterm ::= ws expr\nws ::= \" \"*",
        TS_ERR_FORMAT, "is left-recursive");
    ERR("root ::= \"x\" root", TS_ERR_FORMAT, "grammar:1:1: rule 'root' can never finish");
    ERR("root ::= a\na ::= \"(\" b \")\"\nb ::= a", TS_ERR_FORMAT, "can never finish");
    ERR("root ::= * \"a\"", TS_ERR_FORMAT, "grammar:1:10: '*' has nothing before it to repeat");
    ERR("root ::= \"a\"{3,2}", TS_ERR_FORMAT, "the maximum is below the minimum");
    ERR("root ::= \"a\"{x}", TS_ERR_FORMAT, "expected a number in '{...}'");
    ERR("root ::= \"a\"{2;", TS_ERR_FORMAT, "expected '}' or ','");
    ERR("root ::= (\"a\" \"b\"", TS_ERR_FORMAT, "expected ')'");
    ERR("root ::= \"a\" )", TS_ERR_FORMAT, "grammar:1:14: unexpected ')' in rule 'root'");
    ERR("root ::= \"a\"\n  \"b\"", TS_ERR_FORMAT, "grammar:2:3: expected a rule name");
    ERR("root ::= [z-a]", TS_ERR_FORMAT, "range U+7A-U+61 is backwards");
    ERR("root ::= <think> \"a\"", TS_ERR_UNSUPPORTED, "grammar:1:10: token references");
    ERR("root ::= !<[12]>", TS_ERR_UNSUPPORTED, "token references");
    ERR("root ::= \"\xff\"", TS_ERR_FORMAT, "grammar:1:11: invalid UTF-8 (byte 0xff)");
    ERR("root ::= \"\xc3\"", TS_ERR_FORMAT, "invalid UTF-8");
    ERR("root ::= \"a\"{10001}", TS_ERR_LIMIT, "repetition count above the limit");
    ERR("root ::= \"a\"{99999999999999999999999}", TS_ERR_LIMIT, "above the limit");
    expect_err("root ::= \"a\0b\"", 14, TS_ERR_FORMAT, "grammar:1:12: NUL byte");
    expect_err("root ::= \"a\" \0", 14, TS_ERR_FORMAT, "grammar:1:14: unexpected byte 0x00");

    /* limits: nesting, expanded size, text size */
    char *deep = malloc(4096);
    strcpy(deep, "root ::= ");
    for (int i = 0; i < 300; i++)
        strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 300; i++)
        strcat(deep, ")");
    ERR(deep, TS_ERR_LIMIT, "parentheses nested deeper than 256");
    free(deep);
    char big[2048] = "root ::= \"";
    memset(big + 10, 'a', 1000);
    strcpy(big + 1010, "\"{5000}");
    ERR(big, TS_ERR_LIMIT, "expands to more than");
    ts_grammar *g = NULL;
    ts_error err = {0};
    size_t huge = (size_t)TS_GRAMMAR_MAX_TEXT + 1;
    char *text = malloc(huge);
    memset(text, ' ', huge);
    assert_int_equal(ts_grammar_from_gbnf(text, huge, NULL, &g, &err), TS_ERR_LIMIT);
    free(text);
    assert_int_equal(ts_grammar_from_gbnf("root ::= \"a\"", 12, NULL, NULL, &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_grammar_from_gbnf(NULL, 3, NULL, &g, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_grammar_from_gbnf("root ::= \"a\"", 12, NULL, &g, NULL), TS_OK);
    ts_grammar_free(g);
    ts_grammar_free(NULL);
}

/* Repetition of a multi-element symbol repeats the whole symbol; nested repetition. */
static void test_expansion(void **state) {
    (void)state;
    ts_grammar *g = NULL;
    ts_error err = {0};
    const char *text = "root ::= (\"ab\"{2}){2} \"c\"";
    assert_int_equal(ts_grammar_from_gbnf(text, strlen(text), NULL, &g, &err), TS_OK);
    ts_gmatch *m = ts_gmatch_create(g);
    assert_true(ts_gmatch_accept_bytes(m, "ababababc", 9));
    assert_true(ts_gmatch_is_accepting(m));
    ts_gmatch_free(m);
    m = ts_gmatch_create(g);
    assert_false(ts_gmatch_accept_bytes(m, "abababc", 7));
    ts_gmatch_free(m);
    ts_grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grammars),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_expansion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
