/*
 * test_schema.c — the JSON Schema compiler (ts_schema_to_gbnf).
 *
 * Golden checks of the GBNF for small schemas; semantic checks over
 * tests/data/grammar/schema_cases.json (labels from the `jsonschema` package, written by
 * scripts/reference/schema_check.py): the compiled grammar must accept exactly the valid
 * instances, except those marked restricted (valid, but outside the documented subset: they
 * must be rejected, which shows the restriction is what the docs say); and the errors: bad
 * JSON, oversized and deeply nested schemas, $ref cycles, unsupported keywords named with
 * their JSON pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "tessera.h"

static char *compile_ok(const char *schema) {
    char *g = NULL;
    ts_error err;
    ts_status st = ts_schema_to_gbnf(schema, strlen(schema), &g, &err);
    if (st != TS_OK)
        fail_msg("schema %s: %s", schema, err.msg);
    return g;
}

static ts_status compile_err(const char *schema, size_t len, ts_error *err) {
    char *g = NULL;
    ts_status st = ts_schema_to_gbnf(schema, len, &g, err);
    assert_null(g);
    return st;
}

/* The rule named name in the GBNF text (its body), for golden checks. */
static char *rule_body(const char *g, const char *name) {
    size_t n = strlen(name);
    for (const char *p = g; p && *p;) {
        if (!strncmp(p, name, n) && !strncmp(p + n, " ::= ", 5)) {
            const char *b = p + n + 5, *e = strchr(b, '\n');
            return strndup(b, e ? (size_t)(e - b) : strlen(b));
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

static bool matches(const ts_grammar *gr, const char *text) {
    ts_gmatch *m = ts_gmatch_create(gr);
    assert_non_null(m);
    bool ok = ts_gmatch_accept_bytes(m, text, strlen(text)) && ts_gmatch_is_accepting(m);
    ts_gmatch_free(m);
    return ok;
}

static void test_golden(void **state) {
    (void)state;
    char *g = compile_ok("{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}");
    char *r = rule_body(g, "root");
    assert_string_equal(r, "( [0-9] | [1-9] [0-9] | \"1\" ( [0-4] [0-9] | \"50\" ) )");
    free(r);
    free(g);

    g = compile_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},"
                   "\"required\":[\"a\"],\"additionalProperties\":false}");
    r = rule_body(g, "root");
    char *obj = rule_body(g, r);
    assert_non_null(obj);
    assert_string_equal(obj, "\"{\" ws \"\\\"a\\\"\" ws \":\" ws boolean ws \"}\"");
    char *ws = rule_body(g, "ws");
    assert_string_equal(ws, "[\\x20\\t\\n\\r]{0,20}");
    free(ws);
    free(obj);
    free(r);
    free(g);

    g = compile_ok("{\"enum\":[\"a\\\"b\",null]}");
    r = rule_body(g, "root");
    char *e = rule_body(g, r);
    assert_string_equal(e, "( \"\\\"a\\\\\\\"b\\\"\" | \"null\" )");
    free(e);
    free(r);
    free(g);

    /* A pattern: anchored, so no padding; \d is ASCII digits. */
    g = compile_ok("{\"type\":\"string\",\"pattern\":\"^\\\\d{2}$\"}");
    r = rule_body(g, "root");
    assert_string_equal(r, "\"\\\"\" [0-9]{2} \"\\\"\"");
    free(r);
    free(g);
}

static void test_cases(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/schema_cases.json", TS_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    cJSON *cases = cJSON_Parse(text);
    free(text);
    assert_non_null(cases);
    int n_cases = 0, n_inst = 0, bad = 0;
    for (cJSON *c = cases->child; c; c = c->next) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "schema"));
        ts_grammar *gr = NULL;
        ts_error err;
        ts_status st = ts_grammar_from_schema(schema, strlen(schema), &gr, &err);
        if (st != TS_OK)
            fail_msg("%s: %s", name, err.msg);
        for (cJSON *i = cJSON_GetObjectItem(c, "instances")->child; i; i = i->next) {
            const char *doc = cJSON_GetStringValue(cJSON_GetArrayItem(i, 0));
            bool valid = cJSON_IsTrue(cJSON_GetArrayItem(i, 1));
            bool restricted = cJSON_IsTrue(cJSON_GetArrayItem(i, 2));
            bool want = valid && !restricted;
            bool got = matches(gr, doc);
            if (got != want) {
                print_error("%s: %s %s but the grammar %s it\n", name, doc,
                            valid ? (restricted ? "is valid (restricted)" : "is valid")
                                  : "is invalid",
                            got ? "accepts" : "rejects");
                bad++;
            }
            n_inst++;
        }
        ts_grammar_free(gr);
        cJSON_free(schema);
        n_cases++;
    }
    cJSON_Delete(cases);
    assert_true(n_cases >= 30);
    assert_true(n_inst >= 200);
    assert_int_equal(bad, 0);
}

static void expect(const char *schema, ts_status want, const char *needle) {
    ts_error err;
    ts_status st = compile_err(schema, strlen(schema), &err);
    if (st != want || !strstr(err.msg, needle))
        fail_msg("schema %s: got %d '%s', want %d with '%s'", schema, st, err.msg, want, needle);
}

static void test_errors(void **state) {
    (void)state;
    expect("{\"type\":", TS_ERR_FORMAT, "not valid JSON");
    expect("{} x", TS_ERR_FORMAT, "text after");
    expect("[1]", TS_ERR_FORMAT, "must be an object or a boolean");
    expect("{\"type\":\"strin\"}", TS_ERR_FORMAT, "unknown type 'strin'");
    expect("{\"properties\":{\"a\":{\"not\":{}}}}", TS_ERR_UNSUPPORTED,
           "schema: /properties/a: 'not' is not supported");
    expect("{\"items\":{\"uniqueItems\":true,\"type\":\"array\"}}", TS_ERR_UNSUPPORTED,
           "/items: 'uniqueItems'");
    expect("{\"$ref\":\"#\"}", TS_ERR_FORMAT, "cycle with no base case");
    expect("{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", TS_ERR_FORMAT, "no base case");
    expect("{\"$ref\":\"http://example.com/s.json\"}", TS_ERR_UNSUPPORTED, "another document");
    expect("{\"$ref\":\"#/definitions/nope\"}", TS_ERR_FORMAT, "does not resolve");
    expect("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", TS_ERR_UNSUPPORTED, "backreference");
    expect("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", TS_ERR_UNSUPPORTED, "lookahead");
    expect("{\"type\":\"string\",\"pattern\":\"[a-\"}", TS_ERR_FORMAT, "unterminated");
    expect("{\"type\":\"string\",\"format\":\"ipv6\"}", TS_ERR_UNSUPPORTED, "'ipv6'");
    expect("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":3}]}", TS_ERR_UNSUPPORTED,
           "may both match");
    expect("false", TS_ERR_UNSUPPORTED, "accepts no JSON value");
    expect("{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false}",
           TS_ERR_UNSUPPORTED, "accepts no JSON value");

    /* Oversized: more than 1 MiB. */
    size_t big = (1u << 20) + 16;
    char *s = malloc(big + 1);
    memset(s, ' ', big);
    s[0] = '{';
    s[big - 1] = '}';
    s[big] = 0;
    ts_error err;
    assert_int_equal(compile_err(s, big, &err), TS_ERR_LIMIT);
    free(s);

    /* Deep nesting: items inside items, beyond the compile depth but within cJSON's. */
    size_t depth = 400, len = 0;
    s = malloc(depth * 12 + 8);
    for (size_t i = 0; i < depth; i++)
        len += (size_t)sprintf(s + len, "{\"items\":");
    len += (size_t)sprintf(s + len, "{}");
    for (size_t i = 0; i < depth; i++)
        s[len++] = '}';
    s[len] = 0;
    ts_status st = compile_err(s, len, &err);
    assert_int_equal(st, TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "deeper"));
    free(s);

    /* Arguments. */
    char *g = (char *)1;
    assert_int_equal(ts_schema_to_gbnf(NULL, 3, &g, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_schema_to_gbnf("{}", 2, NULL, NULL), TS_ERR_INVALID_ARG);
}

/* Every rule the compiler writes is read by the GBNF reader, with the repetition forms for long
 * strings and large integer ranges. */
static void test_large_bounds(void **state) {
    (void)state;
    ts_grammar *gr = NULL;
    ts_error err;
    const char *s = "{\"type\":\"string\",\"maxLength\":5000}";
    assert_int_equal(ts_grammar_from_schema(s, strlen(s), &gr, &err), TS_OK);
    char *doc = malloc(5003);
    doc[0] = '"';
    memset(doc + 1, 'x', 5000);
    doc[5001] = '"';
    doc[5002] = 0;
    assert_true(matches(gr, doc));
    doc[4999] = '"';
    doc[5000] = 0;
    assert_true(matches(gr, doc));
    memset(doc + 1, 'y', 5001);
    doc[5002] = '"';
    doc[5003 - 1] = '"';
    char *longer = malloc(5004);
    longer[0] = '"';
    memset(longer + 1, 'z', 5001);
    longer[5002] = '"';
    longer[5003] = 0;
    assert_false(matches(gr, longer));
    free(longer);
    free(doc);
    ts_grammar_free(gr);

    s = "{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}";
    assert_int_equal(ts_grammar_from_schema(s, strlen(s), &gr, &err), TS_OK);
    assert_true(matches(gr, "9007199254740991"));
    assert_true(matches(gr, "-9007199254740991"));
    assert_true(matches(gr, "0"));
    assert_false(matches(gr, "9007199254740992"));
    assert_false(matches(gr, "-9007199254740992"));
    ts_grammar_free(gr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_large_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
