/*
 * test_hostile.c — grammars and schemas built to be expensive (the inputs an attacker sends in
 * a request body): each must compile to a correct grammar quickly or be refused with a limit
 * error that names the limit, never an out-of-memory or internal error, never a stack
 * overflow. Also: stopping a compile (cancel callback, deadline) and the bounded digits and
 * whitespace that make a constrained generation always end.
 *
 * Every input is written here by a program (no data files). Times are asserted loosely (the
 * limit is what a request may cost on a loaded machine, sanitizers included); the point is the
 * growth: the quadratic steps this replaces took minutes on the same inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "grammar/grammar.h"
#include "tessera.h"
#include "util/buf.h"
#include "util/stop.h"

/* Seconds any one compile here may take (sanitizer builds run several times slower). */
#define MAX_SECONDS 20.0

static double seconds(void) {
    return (double)ts_now_ns() / 1e9;
}

/* The text b holds (never NULL). */
static const char *text_of(ts_buf *b) {
    assert_false(b->oom);
    return b->p ? b->p : "";
}

static bool matches(const ts_grammar *g, const char *text) {
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    bool ok = ts_gmatch_accept_bytes(m, text, strlen(text)) && ts_gmatch_is_accepting(m);
    ts_gmatch_free(m);
    return ok;
}

/* A prefix of some sentence (the matcher did not refuse it). */
static bool prefix_ok(const ts_grammar *g, const char *text) {
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    bool ok = ts_gmatch_accept_bytes(m, text, strlen(text));
    ts_gmatch_free(m);
    return ok;
}

static ts_grammar *schema_ok(const char *schema, double *took) {
    ts_grammar *g = NULL;
    ts_error err;
    double t0 = seconds();
    ts_status st = ts_grammar_from_schema(schema, strlen(schema), &g, &err);
    *took = seconds() - t0;
    if (st != TS_OK) {
        fail_msg("schema of %zu bytes: %s", strlen(schema), err.msg);
    }
    assert_true(*took < MAX_SECONDS);
    return g;
}

static ts_grammar *gbnf_ok(const char *text, double *took) {
    ts_grammar *g = NULL;
    ts_error err;
    double t0 = seconds();
    ts_status st = ts_grammar_from_gbnf(text, strlen(text), "root", &g, &err);
    *took = seconds() - t0;
    if (st != TS_OK) {
        fail_msg("grammar of %zu bytes: %s", strlen(text), err.msg);
    }
    assert_true(*took < MAX_SECONDS);
    return g;
}

/* The compile fails with st and a message containing what (the limit's name). */
static void schema_refused(const char *schema, ts_status st, const char *what) {
    ts_grammar *g = NULL;
    ts_error err;
    double t0 = seconds();
    ts_status got = ts_grammar_from_schema(schema, strlen(schema), &g, &err);
    assert_true(seconds() - t0 < MAX_SECONDS);
    assert_null(g);
    if (got != st || !strstr(err.msg, what)) {
        fail_msg("expected status %d with '%s', got %d: %s", st, what, got, err.msg);
    }
}

static void gbnf_refused(const char *text, ts_status st, const char *what) {
    ts_grammar *g = NULL;
    ts_error err;
    double t0 = seconds();
    ts_status got = ts_grammar_from_gbnf(text, strlen(text), "root", &g, &err);
    assert_true(seconds() - t0 < MAX_SECONDS);
    assert_null(g);
    if (got != st || !strstr(err.msg, what)) {
        fail_msg("expected status %d with '%s', got %d: %s", st, what, got, err.msg);
    }
}

/* The i-th enum string: distinct, sharing prefixes the way real lists do. */
static void enum_word(char *out, size_t size, int i) {
    static const char *const stem[] = {"al", "be", "ga", "de", "om"};
    snprintf(out, size, "%s%d", stem[i % 5], i);
}

/* ---- sizes ---------------------------------------------------------------------------------- */

static void test_enum_100k(void **state) {
    (void)state;
    enum { N = 100000 };
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"enum\":[");
    char w[64];
    for (int i = 0; i < N; i++) {
        enum_word(w, sizeof w, i);
        ts_buf_printf(&b, "%s\"%s\"", i ? "," : "", w);
    }
    ts_buf_puts(&b, "]}");
    assert_true(b.n < (1u << 20));
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("enum of %d strings (%zu bytes): %.3f s\n", N, b.n, took);
    for (int i = 0; i < N; i += 9973) {
        char doc[80];
        enum_word(w, sizeof w, i);
        snprintf(doc, sizeof doc, "\"%s\"", w);
        assert_true(matches(g, doc));
        snprintf(doc, sizeof doc, "\"%sx\"", w); /* one character more */
        assert_false(matches(g, doc));
    }
    assert_false(matches(g, "\"al1\""));   /* 1 is be's */
    assert_false(matches(g, "\"al\""));    /* a prefix only */
    assert_false(matches(g, "\"ze5\""));   /* no such stem */
    assert_true(prefix_ok(g, "\"ga9999")); /* ga99992 is in the list */
    ts_grammar_free(g);
    ts_buf_free(&b);
}

static void test_anyof_consts(void **state) {
    (void)state;
    enum { N = 20000 };
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"anyOf\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s{\"const\":%d}", i ? "," : "", 3 * i);
    }
    ts_buf_puts(&b, "]}");
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("anyOf of %d consts: %.3f s\n", N, took);
    assert_true(matches(g, "0"));
    assert_true(matches(g, "59997"));
    assert_true(matches(g, "300.0")); /* 300 as 300.0: the same number */
    assert_false(matches(g, "301"));
    assert_false(matches(g, "60000"));
    ts_grammar_free(g);
    ts_buf_free(&b);
}

static void test_anyof_objects(void **state) {
    (void)state;
    /* Alternatives that share no literal prefix: the start state would hold one stack per
     * branch. Within the matcher's limit it compiles; past it, the limit is named. */
    for (int n = 1000; n <= 9000; n += 8000) {
        ts_buf b = {0};
        ts_buf_puts(&b, "{\"anyOf\":[");
        for (int i = 0; i < n; i++) {
            ts_buf_printf(&b,
                          "%s{\"type\":\"object\",\"properties\":{\"k%d\":{\"const\":%d}},"
                          "\"required\":[\"k%d\"],\"additionalProperties\":false}",
                          i ? "," : "", i, i, i);
        }
        ts_buf_puts(&b, "]}");
        if (n < 4096) {
            double took;
            ts_grammar *g = schema_ok(text_of(&b), &took);
            assert_true(matches(g, "{\"k7\":7}"));
            assert_false(matches(g, "{\"k7\":8}"));
            ts_grammar_free(g);
        } else {
            schema_refused(text_of(&b), TS_ERR_LIMIT, "4096");
        }
        ts_buf_free(&b);
    }
    /* The same union inside an array: refused at compile too, not when a sequence reaches it. */
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"type\":\"array\",\"items\":{\"anyOf\":[");
    for (int i = 0; i < 5000; i++) {
        ts_buf_printf(&b,
                      "%s{\"properties\":{\"k%d\":{\"type\":\"integer\"}},\"required\":[\"k%d\"]}",
                      i ? "," : "", i, i);
    }
    ts_buf_puts(&b, "]}}");
    schema_refused(text_of(&b), TS_ERR_LIMIT, "/items: more than 4096 alternatives");
    ts_buf_free(&b);
}

static void test_optional_properties(void **state) {
    (void)state;
    /* 1000 optional properties: any may come first or next (a trie of keys after "{"). */
    for (int n = 1000; n <= 3000; n += 2000) {
        ts_buf b = {0};
        ts_buf_puts(&b, "{\"properties\":{");
        for (int i = 0; i < n; i++) {
            ts_buf_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
        }
        ts_buf_puts(&b, "}}");
        if (n <= 1024) {
            double took;
            ts_grammar *g = schema_ok(text_of(&b), &took);
            assert_true(matches(g, "{}"));
            assert_true(matches(g, "{\"p0\":1,\"p999\":2}"));
            assert_true(matches(g, "{\"p500\":1,\"p501\":2,\"zz\":3}"));
            assert_false(matches(g, "{\"p501\":1,\"p500\":2}")); /* schema order */
            ts_grammar_free(g);
        } else {
            schema_refused(text_of(&b), TS_ERR_LIMIT, "3000 optional properties in a row");
        }
        ts_buf_free(&b);
    }
}

static void test_big_const(void **state) {
    (void)state;
    enum { N = 50000 };
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"const\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s%d", i ? "," : "", i % 10);
    }
    ts_buf_puts(&b, "]}");
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("a constant array of %d numbers: %.3f s\n", N, took);
    assert_true(prefix_ok(g, "[0, 1,2,3 ,4"));
    assert_false(prefix_ok(g, "[0,2"));
    ts_grammar_free(g);
    ts_buf_free(&b);
}

static void test_merges(void **state) {
    (void)state;
    enum { N = 40000 };
    double took;
    /* allOf of two large enums: their intersection (every third value of the first). */
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"allOf\":[{\"enum\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s%d", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]},{\"enum\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s%d", i ? "," : "", 3 * i);
    }
    ts_buf_puts(&b, "]}]}");
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("allOf of two enums of %d: %.3f s\n", N, took);
    assert_true(matches(g, "39999"));
    assert_false(matches(g, "40000")); /* only in the second */
    assert_false(matches(g, "39998")); /* only in the first */
    ts_grammar_free(g);
    ts_buf_free(&b);

    /* oneOf of two large disjoint enums: proved disjoint with a hash set. */
    ts_buf_puts(&b, "{\"oneOf\":[{\"enum\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s%d", i ? "," : "", 2 * i);
    }
    ts_buf_puts(&b, "]},{\"enum\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s%d", i ? "," : "", 2 * i + 1);
    }
    ts_buf_puts(&b, "]}]}");
    g = schema_ok(text_of(&b), &took);
    print_message("oneOf of two enums of %d: %.3f s\n", N, took);
    assert_true(matches(g, "79999"));
    ts_grammar_free(g);
    ts_buf_free(&b);

    /* allOf of two objects of many properties each (required every other one). */
    ts_buf_puts(&b, "{\"allOf\":[");
    for (int part = 0; part < 2; part++) {
        ts_buf_puts(&b, part ? ",{\"properties\":{" : "{\"properties\":{");
        for (int i = 0; i < 5000; i++) {
            ts_buf_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i + part * 2500);
        }
        ts_buf_puts(&b, "},\"required\":[");
        for (int i = 0; i < 5000; i += 2) {
            ts_buf_printf(&b, "%s\"p%d\"", i ? "," : "", i + part * 2500);
        }
        ts_buf_puts(&b, "]}");
    }
    ts_buf_puts(&b, "]}");
    g = schema_ok(text_of(&b), &took);
    print_message("allOf of two objects of 5000 properties: %.3f s\n", took);
    ts_buf doc = {0};
    ts_buf_putc(&doc, '{');
    for (int i = 0; i < 7500; i += 2) {
        ts_buf_printf(&doc, "%s\"p%d\":%d", i ? "," : "", i, i);
    }
    ts_buf_puts(&doc, ",\"p7499\":1}");
    assert_true(matches(g, text_of(&doc)));
    ts_buf_free(&doc);
    ts_grammar_free(g);
    ts_buf_free(&b);

    /* Siblings merged into every anyOf branch: many branches times many properties. */
    ts_buf_puts(&b, "{\"properties\":{");
    for (int i = 0; i < 5000; i++) {
        ts_buf_printf(&b, "%s\"p%d\":{}", i ? "," : "", i);
    }
    ts_buf_puts(&b, "},\"anyOf\":[");
    for (int i = 0; i < 2000; i++) {
        ts_buf_printf(&b, "%s{\"required\":[\"p%d\"]}", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]}");
    schema_refused(text_of(&b), TS_ERR_LIMIT, "merges would copy more than");
    ts_buf_free(&b);
}

static void test_many_properties(void **state) {
    (void)state;
    enum { N = 5000 };
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    }
    ts_buf_puts(&b, "},\"required\":[");
    for (int i = 0; i < N; i += 2) {
        ts_buf_printf(&b, "%s\"p%d\"", i ? "," : "", i);
    }
    ts_buf_puts(&b, ",\"p0\"]}"); /* required twice: still once */
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("%d properties: %.3f s\n", N, took);
    ts_buf doc = {0};
    ts_buf_putc(&doc, '{');
    for (int i = 0; i < N; i += 2) {
        ts_buf_printf(&doc, "%s\"p%d\":%d", i ? "," : "", i, i);
    }
    ts_buf_putc(&doc, '}');
    assert_true(matches(g, text_of(&doc)));
    /* An extra key (additionalProperties allows any) after the listed ones, but not a listed
     * one again under another spelling. */
    doc.p[doc.n - 1] = '\0';
    doc.n--;
    ts_buf_puts(&doc, ",\"p1x\":true}");
    assert_true(matches(g, text_of(&doc)));
    assert_false(matches(g, "{\"p1\":1}")); /* p0 is required */
    ts_grammar_free(g);
    ts_buf_free(&doc);
    ts_buf_free(&b);
}

static void test_long_pattern(void **state) {
    (void)state;
    enum { N = 100000 };
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"type\":\"string\",\"pattern\":\"^");
    for (int i = 0; i < N; i++) {
        ts_buf_putc(&b, (char)('a' + i % 26));
    }
    ts_buf_puts(&b, "$\"}");
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("pattern of %d characters: %.3f s\n", N, took);
    assert_true(prefix_ok(g, "\"abcdefghijklmnopqrstuvwxyzab"));
    assert_false(prefix_ok(g, "\"abcdefghijklmnopqrstuvwxyzb"));
    ts_grammar_free(g);
    ts_buf_free(&b);
}

/* ---- GBNF ----------------------------------------------------------------------------------- */

static void test_gbnf_chain(void **state) {
    (void)state;
    enum { N = 10000 };
    /* r0 ::= "a" r1, ..., a chain of tail references: constant stack depth. */
    ts_buf b = {0};
    ts_buf_puts(&b, "root ::= r0\n");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "r%d ::= \"a\" r%d\n", i, i + 1);
    }
    ts_buf_printf(&b, "r%d ::= \"a\"\n", N);
    double took;
    ts_grammar *g = gbnf_ok(text_of(&b), &took);
    print_message("%d chained rules: %.3f s\n", N, took);
    char *as = malloc(N + 2);
    assert_non_null(as);
    memset(as, 'a', N + 1);
    as[N + 1] = '\0';
    assert_true(matches(g, as));
    as[N] = '\0';
    assert_false(matches(g, as));
    ts_grammar_free(g);
    ts_buf_free(&b);

    /* With something after each reference the stack grows one entry per rule: a^n b^n. */
    ts_buf_puts(&b, "root ::= r0\n");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "r%d ::= \"a\" r%d \"b\"\n", i, i + 1);
    }
    ts_buf_printf(&b, "r%d ::= \"c\"\n", N);
    g = gbnf_ok(text_of(&b), &took);
    ts_buf doc = {0};
    for (int i = 0; i < N; i++) {
        ts_buf_putc(&doc, 'a');
    }
    ts_buf_putc(&doc, 'c');
    for (int i = 0; i < N; i++) {
        ts_buf_putc(&doc, 'b');
    }
    assert_true(matches(g, text_of(&doc)));
    doc.p[--doc.n] = '\0';
    assert_false(matches(g, text_of(&doc)));
    ts_grammar_free(g);
    ts_buf_free(&doc);
    ts_buf_free(&b);

    /* Every rule an alternative of the one before: all 10,000 open at the start. */
    ts_buf_puts(&b, "root ::= r0\n");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "r%d ::= \"x%d\" | r%d\n", i, i, i + 1);
    }
    ts_buf_printf(&b, "r%d ::= \"y\"\n", N);
    gbnf_refused(text_of(&b), TS_ERR_LIMIT, "parser stacks");
    ts_buf_free(&b);
    free(as);
}

static void test_gbnf_many_alternatives(void **state) {
    (void)state;
    ts_buf b = {0};
    ts_buf_puts(&b, "root ::= ");
    for (int i = 0; i < 50000; i++) {
        ts_buf_printf(&b, "%s\"w%d\"", i ? " | " : "", i);
    }
    ts_buf_putc(&b, '\n');
    gbnf_refused(text_of(&b), TS_ERR_LIMIT, "4096 parser stacks");
    ts_buf_free(&b);
    /* Not at the start: found by name wherever it is reachable. */
    ts_buf_puts(&b, "root ::= \"x\" big\nbig ::= ");
    for (int i = 0; i < 5000; i++) {
        ts_buf_printf(&b, "%s\"w%d\"", i ? " | " : "", i);
    }
    ts_buf_puts(&b, "\nunused ::= big\n");
    gbnf_refused(text_of(&b), TS_ERR_LIMIT, "grammar:2:1: rule 'big' has 5000 alternatives");
    ts_buf_free(&b);
}

/* "y ::= x | x | ... (k times)", "x ::= " j one-character alternatives (the printable ASCII
 * characters, over and over): a closure through y looks up x's j alternatives k times although
 * it makes only j + k nodes. */
static void shared_alternatives(ts_buf *b, const char *root, int k, int j) {
    ts_buf_printf(b, "root ::= %s\ny ::= ", root);
    for (int i = 0; i < k; i++) {
        ts_buf_puts(b, i ? " | x" : "x");
    }
    ts_buf_puts(b, "\nx ::= ");
    for (int i = 0; i < j; i++) {
        ts_buf_printf(b, "%s\"\\x%02X\"", i ? " | " : "", ' ' + i % 95);
    }
    ts_buf_putc(b, '\n');
}

/* The closure's work is bounded by what it looks up, not only by the nodes it makes: a rule of
 * many alternatives referenced from many places used to cost seconds per step (64M lookups for
 * 20k nodes) under a bound that counted nodes. */
static void test_closure_work(void **state) {
    (void)state;
    ts_buf b = {0};
    /* At the start: refused at compile, by the limit, fast. */
    shared_alternatives(&b, "y+", 16000, 4000);
    gbnf_refused(text_of(&b), TS_ERR_LIMIT, "steps");
    ts_buf_free(&b);
    /* Later: the step that opens it is refused (the limit is then reported), fast. */
    shared_alternatives(&b, "\"q\" y+", 16000, 4000);
    double took;
    ts_grammar *g = gbnf_ok(text_of(&b), &took);
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    double t0 = seconds();
    assert_false(ts_gmatch_accept_bytes(m, "q", 1));
    assert_true(seconds() - t0 < MAX_SECONDS / 4);
    assert_true(ts_gmatch_hit_limit(m));
    ts_gmatch_free(m);
    ts_grammar_free(g);
    ts_buf_free(&b);
}

/* A mask whose steps are each within the closure bound but that takes many of them gives up
 * past TS_GRAMMAR_MAX_MASK_WORK: empty, with the limit set, rather than taking seconds per token.
 * The same matcher still follows bytes and computes the masks it can afford. */
static void test_mask_work(void **state) {
    (void)state;
    ts_buf b = {0};
    /* Every byte of a two-character token enters a y: a closure of 1 + 501 + 500 * 401 + 400
     * steps (201k, within the closure bound), and the 95 first and 95 second bytes are 190 of
     * them (38M), more than a mask's budget (33.5M). */
    shared_alternatives(&b, "[ -~] y y", 500, 400);
    double took;
    ts_grammar *g = gbnf_ok(text_of(&b), &took);
    static char pieces[95 * 95 + 1][3];
    const char *ptr[95 * 95 + 1];
    size_t lens[95 * 95 + 1];
    int32_t n = 0;
    for (int x = 0; x < 95; x++) {
        for (int y = 0; y < 95; y++, n++) {
            pieces[n][0] = (char)(' ' + x), pieces[n][1] = (char)(' ' + y);
            ptr[n] = pieces[n], lens[n] = 2;
        }
    }
    ptr[n] = "a", lens[n] = 1, n++; /* one token that can come first */
    ts_gvocab *v = NULL;
    ts_error err;
    assert_int_equal(ts_gvocab_create(ptr, lens, n, NULL, 0, &v, &err), TS_OK);
    uint32_t *mask = calloc(((size_t)n + 31) / 32, sizeof *mask);
    assert_non_null(mask);
    ts_gmatch *m = ts_gmatch_create(g);
    assert_non_null(m);
    assert_false(ts_gmatch_hit_limit(m));
    double t0 = seconds();
    assert_int_equal(ts_gmatch_mask(m, v, mask), 0);
    assert_true(seconds() - t0 < MAX_SECONDS / 4);
    assert_true(ts_gmatch_mask_gave_up(m));
    assert_true(ts_gmatch_hit_limit(m));
    for (int32_t w = 0; w < (n + 31) / 32; w++) {
        assert_int_equal(mask[w], 0);
    }
    /* Not the grammar's answer: the bytes are still followed and a mask that costs less is
     * computed. After "a", only the first byte of a token enters a y (the second ends the
     * sentence): 95 big steps, and every two-character token is allowed, and "a". */
    assert_true(ts_gmatch_accept_bytes(m, "a", 1));
    assert_int_equal(ts_gmatch_mask(m, v, mask), 95 * 95 + 1);
    assert_false(ts_gmatch_mask_gave_up(m));
    ts_gmatch_free(m);
    free(mask);
    ts_gvocab_free(v);
    ts_grammar_free(g);
    ts_buf_free(&b);
}

/* ---- nesting -------------------------------------------------------------------------------- */

static void test_deep_nesting(void **state) {
    (void)state;
    ts_buf b = {0};
    /* Schemas: arrays, objects, anyOf, nested deeper than the compiler's depth limit. */
    static const char *const open[] = {
        "{\"type\":\"array\",\"items\":", "{\"type\":\"object\",\"properties\":{\"a\":",
        "{\"anyOf\":[", "{\"allOf\":["};
    static const char *const close[] = {"}", "}}", "]}", "]}"};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 300; i++) { /* within cJSON's 1000 levels */
            ts_buf_puts(&b, open[k]);
        }
        ts_buf_puts(&b, "{\"type\":\"integer\"}");
        for (int i = 0; i < 300; i++) {
            ts_buf_puts(&b, close[k]);
        }
        schema_refused(text_of(&b), TS_ERR_LIMIT, "deeper than");
        ts_buf_free(&b);
    }
    /* Within the limit it compiles. */
    for (int i = 0; i < 40; i++) {
        ts_buf_puts(&b, open[0]);
    }
    ts_buf_puts(&b, "{\"type\":\"integer\"}");
    for (int i = 0; i < 40; i++) {
        ts_buf_puts(&b, close[0]);
    }
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    ts_grammar_free(g);
    ts_buf_free(&b);

    /* A constant nested deeply (under cJSON's own limit of 1000). */
    ts_buf_puts(&b, "{\"const\":");
    for (int i = 0; i < 900; i++) {
        ts_buf_putc(&b, '[');
    }
    for (int i = 0; i < 900; i++) {
        ts_buf_putc(&b, ']');
    }
    ts_buf_putc(&b, '}');
    schema_refused(text_of(&b), TS_ERR_LIMIT, "deeper than");
    ts_buf_free(&b);

    /* Regex groups. */
    ts_buf_puts(&b, "{\"type\":\"string\",\"pattern\":\"");
    for (int i = 0; i < 5000; i++) {
        ts_buf_putc(&b, '(');
    }
    ts_buf_putc(&b, 'a');
    for (int i = 0; i < 5000; i++) {
        ts_buf_putc(&b, ')');
    }
    ts_buf_puts(&b, "\"}");
    schema_refused(text_of(&b), TS_ERR_LIMIT, "groups nested deeper than 64");
    ts_buf_free(&b);

    /* GBNF parentheses. */
    ts_buf_puts(&b, "root ::= ");
    for (int i = 0; i < 100000; i++) {
        ts_buf_putc(&b, '(');
    }
    ts_buf_puts(&b, "\"a\"");
    for (int i = 0; i < 100000; i++) {
        ts_buf_putc(&b, ')');
    }
    ts_buf_putc(&b, '\n');
    gbnf_refused(text_of(&b), TS_ERR_LIMIT, "nested deeper than 256");
    ts_buf_free(&b);

    /* $ref chains: each definition refers to the next. */
    ts_buf_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < 2000; i++) {
        ts_buf_printf(&b, "%s\"d%d\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d%d\"}}",
                      i ? "," : "", i, i + 1);
    }
    ts_buf_puts(&b, ",\"d2000\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/d0\"}");
    schema_refused(text_of(&b), TS_ERR_LIMIT, "deeper than");
    ts_buf_free(&b);
}

static void test_many_refs(void **state) {
    (void)state;
    enum { N = 15000 };
    /* A $ref to each of thousands of definitions: lookups by index, constants in a trie. */
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s\"d%d\":{\"const\":\"v%d\"}", i ? "," : "", i, i);
    }
    ts_buf_puts(&b, "},\"type\":\"array\",\"items\":{\"anyOf\":[");
    for (int i = 0; i < N; i++) {
        ts_buf_printf(&b, "%s{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]}}");
    double took;
    ts_grammar *g = schema_ok(text_of(&b), &took);
    print_message("%d $refs to %d definitions: %.3f s\n", N, N, took);
    assert_true(matches(g, "[\"v0\",\"v14999\"]"));
    assert_false(matches(g, "[\"v15000\"]"));
    ts_grammar_free(g);
    ts_buf_free(&b);
}

static void test_oneof_limit(void **state) {
    (void)state;
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"oneOf\":[");
    for (int i = 0; i < 5000; i++) {
        ts_buf_printf(&b, "%s{\"const\":%d}", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]}");
    schema_refused(text_of(&b), TS_ERR_LIMIT, "'oneOf' with 5000 branches");
    ts_buf_free(&b);
}

/* Upper lengths past what the grammar's repetitions can write are refused with the schema's words
 * for them (not a position in the generated grammar); large ones that fit compile. */
static void test_huge_upper_bounds(void **state) {
    (void)state;
    schema_refused("{\"type\":\"string\",\"maxLength\":1e15}", TS_ERR_LIMIT,
                   "a maximum length or count of 1000000000000000");
    schema_refused("{\"type\":\"string\",\"minLength\":5,\"maxLength\":2560006}", TS_ERR_LIMIT,
                   "a maximum length or count of 2560006 is more than 2560000 above");
    double took;
    ts_grammar_free(schema_ok("{\"type\":\"string\",\"maxLength\":2000000}", &took));
}

/* ---- stopping ------------------------------------------------------------------------------- */

typedef struct counter {
    int calls, fire_at;
} counter;

static int cancel_after(void *user) {
    counter *c = user;
    return ++c->calls >= c->fire_at;
}

static void test_stop(void **state) {
    (void)state;
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"enum\":[");
    for (int i = 0; i < 50000; i++) {
        ts_buf_printf(&b, "%s\"v%d\"", i ? "," : "", i);
    }
    ts_buf_puts(&b, "]}");
    const char *schema = text_of(&b);
    ts_error err;
    ts_grammar *g = NULL;

    /* A cancel that fires on its third call stops the compile. */
    counter cnt = {0, 3};
    ts_stop stop = {.cancel = cancel_after, .user = &cnt};
    ts_status st = ts_grammar_from_schema_ex(schema, b.n, &stop, &g, &err);
    assert_int_equal(st, TS_ERR_ABORTED);
    assert_null(g);
    assert_non_null(strstr(err.msg, "cancelled"));
    assert_int_equal(cnt.calls, 3);

    char *gbnf = NULL;
    cnt = (counter){0, 2};
    st = ts_schema_to_gbnf_ex(schema, b.n, &stop, &gbnf, &err);
    assert_int_equal(st, TS_ERR_ABORTED);
    assert_null(gbnf);

    /* A deadline in the past: TS_ERR_LIMIT. */
    ts_stop late = {.deadline_ns = ts_now_ns() - 1};
    st = ts_grammar_from_schema_ex(schema, b.n, &late, &g, &err);
    assert_int_equal(st, TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "time limit"));

    /* The GBNF reader, past its first rules. */
    assert_int_equal(ts_schema_to_gbnf(schema, b.n, &gbnf, &err), TS_OK);
    cnt = (counter){0, 2};
    st = ts_grammar_from_gbnf_ex(gbnf, strlen(gbnf), "root", &stop, &g, &err);
    assert_int_equal(st, TS_ERR_ABORTED);
    assert_null(g);
    assert_non_null(strstr(err.msg, "grammar: cancelled"));
    st = ts_grammar_from_gbnf_ex(gbnf, strlen(gbnf), "root", &late, &g, &err);
    assert_int_equal(st, TS_ERR_LIMIT);

    /* A stop that never fires changes nothing. */
    cnt = (counter){0, 1 << 30};
    assert_int_equal(ts_grammar_from_gbnf_ex(gbnf, strlen(gbnf), "root", &stop, &g, &err), TS_OK);
    assert_true(cnt.calls >= 2);
    assert_true(matches(g, "\"v4242\""));
    ts_grammar_free(g);
    free(gbnf);
    ts_buf_free(&b);
}

/* ---- bounded output ------------------------------------------------------------------------- */

static ts_grammar *schema_small(const char *schema) {
    double took;
    return schema_ok(schema, &took);
}

static void test_bounded_digits(void **state) {
    (void)state;
    const char *sixteen = "1234567890123456", *seventeen = "12345678901234567";
    ts_grammar *g = schema_small("{\"type\":\"integer\"}");
    assert_true(matches(g, sixteen));
    assert_true(matches(g, "-1234567890123456"));
    assert_false(matches(g, seventeen));
    assert_false(prefix_ok(g, seventeen)); /* refused as it is written, not just at the end */
    assert_true(matches(g, "0"));
    ts_grammar_free(g);

    g = schema_small("{\"type\":\"number\"}");
    assert_true(matches(g, "1234567890123456.1234567890123456"));
    assert_false(prefix_ok(g, "1.12345678901234567"));
    assert_false(prefix_ok(g, seventeen));
    assert_true(matches(g, "1e-300"));
    assert_false(prefix_ok(g, "1e12345678901234567"));
    ts_grammar_free(g);

    /* One bound only: the open side is bounded too. */
    g = schema_small("{\"type\":\"integer\",\"minimum\":5}");
    assert_true(matches(g, sixteen));
    assert_false(prefix_ok(g, seventeen));
    assert_false(matches(g, "4"));
    ts_grammar_free(g);
    g = schema_small("{\"type\":\"integer\",\"maximum\":-5}");
    assert_true(matches(g, "-1234567890123456"));
    assert_false(prefix_ok(g, "-12345678901234567"));
    ts_grammar_free(g);
    g = schema_small("{\"type\":\"number\",\"minimum\":0.5}");
    assert_true(matches(g, "0.5"));
    assert_false(matches(g, "0.4999"));
    assert_true(matches(g, "2.1234567890123456"));
    assert_false(prefix_ok(g, "2.12345678901234567"));
    ts_grammar_free(g);
}

static void test_bounded_whitespace(void **state) {
    (void)state;
    ts_grammar *g = schema_small("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                                 "\"array\",\"items\":{\"type\":\"integer\"}}}}");
    char doc[128];
    snprintf(doc, sizeof doc, "{%20s\"a\":[1,2]}", "");
    assert_true(matches(g, doc));
    snprintf(doc, sizeof doc, "{%21s", "");
    assert_false(prefix_ok(g, doc));
    snprintf(doc, sizeof doc, "{\"a\":[1,%21s", "");
    assert_false(prefix_ok(g, doc));
    ts_grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_100k),
        cmocka_unit_test(test_anyof_consts),
        cmocka_unit_test(test_anyof_objects),
        cmocka_unit_test(test_optional_properties),
        cmocka_unit_test(test_big_const),
        cmocka_unit_test(test_merges),
        cmocka_unit_test(test_many_properties),
        cmocka_unit_test(test_long_pattern),
        cmocka_unit_test(test_gbnf_chain),
        cmocka_unit_test(test_gbnf_many_alternatives),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_many_refs),
        cmocka_unit_test(test_oneof_limit),
        cmocka_unit_test(test_huge_upper_bounds),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_closure_work),
        cmocka_unit_test(test_mask_work),
        cmocka_unit_test(test_bounded_digits),
        cmocka_unit_test(test_bounded_whitespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
