/* test_jinja.c — the Jinja engine against Python's jinja2, plus what jinja2 cannot say.
 *
 * tests/data/templates/cases.json holds small templates with the output jinja2 gives under
 * Hugging Face's configuration (scripts/reference/jinja_cases.py writes it), or the failure
 * it gives: the status we must return and the line jinja2 names. Every case must match byte
 * for byte. The other tests cover hostile input (deep nesting, huge loops and outputs), API
 * misuse, options, and speed on a 20-message conversation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "template/jinja.h"

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

static const struct {
    const char *name;
    ts_status st;
} STATUSES[] = {
    {"TS_OK", TS_OK},
    {"TS_ERR_FORMAT", TS_ERR_FORMAT},
    {"TS_ERR_UNSUPPORTED", TS_ERR_UNSUPPORTED},
    {"TS_ERR_TYPE", TS_ERR_TYPE},
    {"TS_ERR_RANGE", TS_ERR_RANGE},
    {"TS_ERR_LIMIT", TS_ERR_LIMIT},
    {"TS_ERR_ABORTED", TS_ERR_ABORTED},
};

static ts_status status_of(const char *name) {
    for (size_t i = 0; i < sizeof(STATUSES) / sizeof(STATUSES[0]); i++)
        if (strcmp(STATUSES[i].name, name) == 0)
            return STATUSES[i].st;
    fail_msg("unknown status name %s in cases.json", name);
    return TS_ERR_INTERNAL;
}

static double opt_num(const cJSON *opts, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(opts, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Compiles and renders; returns the status of whichever failed (or TS_OK). */
static ts_status run(const char *tpl, const char *vars, const ts_tpl_options *o, char **out,
                     size_t *out_len, ts_error *err) {
    ts_tpl *t = NULL;
    ts_status st = ts_tpl_compile(tpl, strlen(tpl), &t, err);
    if (st != TS_OK)
        return st;
    st = ts_tpl_render(t, vars, strlen(vars), o, out, out_len, err);
    ts_tpl_free(t);
    return st;
}

static void test_cases(void **state) {
    (void)state;
    size_t len;
    char *text = read_file(TS_SOURCE_DIR "/tests/data/templates/cases.json", &len);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    const char *default_vars =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "default_vars"));
    int64_t now = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "now"));
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    assert_true(cJSON_GetArraySize(cases) > 200);
    int failures = 0, n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        n++;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
        const char *tpl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "template"));
        const cJSON *vj = cJSON_GetObjectItemCaseSensitive(c, "vars");
        const char *vars = vj ? cJSON_GetStringValue(vj) : default_vars;
        ts_status want =
            status_of(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status")));
        const cJSON *opts = cJSON_GetObjectItemCaseSensitive(c, "opts");
        ts_tpl_options o = {
            .now = now,
            .max_steps = (uint64_t)opt_num(opts, "max_steps"),
            .max_output = (size_t)opt_num(opts, "max_output"),
            .max_depth = (int)opt_num(opts, "max_depth"),
            .no_trim_blocks = (int)opt_num(opts, "no_trim_blocks"),
            .no_lstrip_blocks = (int)opt_num(opts, "no_lstrip_blocks"),
        };
        char *out = NULL;
        size_t out_len = 0;
        ts_error err = {0};
        ts_status st = run(tpl, vars, &o, &out, &out_len, &err);
        bool ok = st == want;
        if (ok && want == TS_OK) {
            const char *exp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "output"));
            ok = out_len == strlen(exp) && memcmp(out, exp, out_len) == 0;
            if (!ok)
                fprintf(stderr, "case %s: output differs\n  want: [%s]\n  got:  [%.*s]\n", name,
                        exp, (int)out_len, out);
        } else if (ok) {
            const cJSON *line = cJSON_GetObjectItemCaseSensitive(c, "line");
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c, "message");
            if (cJSON_IsNumber(line) && !msg) {
                char prefix[32];
                snprintf(prefix, sizeof(prefix), "template:%d:", line->valueint);
                ok = strncmp(err.msg, prefix, strlen(prefix)) == 0;
                if (!ok)
                    fprintf(stderr, "case %s: want line %d, got \"%s\"\n", name, line->valueint,
                            err.msg);
            }
            if (msg && strcmp(err.msg, cJSON_GetStringValue(msg)) != 0) {
                fprintf(stderr, "case %s: want message \"%s\", got \"%s\"\n", name,
                        cJSON_GetStringValue(msg), err.msg);
                ok = false;
            }
        } else {
            fprintf(stderr, "case %s: want %s, got %s (%s)\n", name, ts_status_str(want),
                    ts_status_str(st), err.msg);
        }
        failures += !ok;
        free(out);
    }
    cJSON_Delete(root);
    free(text);
    fprintf(stderr, "%d of %d jinja2 cases match\n", n - failures, n);
    assert_int_equal(failures, 0);
}

/* Nesting that would exhaust the C stack in a naive recursive parser fails cleanly. */
static void test_deep_nesting(void **state) {
    (void)state;
    const int depth = 100000;
    const char *shapes[][2] = {{"(", ")"}, {"[", "]"}, {"-", ""}, {"not ", ""}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        size_t lo = strlen(shapes[s][0]), lc = strlen(shapes[s][1]);
        char *src = malloc(6 + (size_t)depth * (lo + lc) + 8);
        char *p = src;
        p += sprintf(p, "{{ ");
        for (int i = 0; i < depth; i++)
            p += sprintf(p, "%s", shapes[s][0]);
        p += sprintf(p, "1");
        for (int i = 0; i < depth; i++)
            p += sprintf(p, "%s", shapes[s][1]);
        p += sprintf(p, " }}");
        ts_tpl *t = NULL;
        ts_error err = {0};
        assert_int_equal(ts_tpl_compile(src, (size_t)(p - src), &t, &err), TS_ERR_LIMIT);
        assert_non_null(strstr(err.msg, "template:1:"));
        free(src);
    }
    /* Long left-leaning chains build deep trees without nesting brackets. */
    const char *links[] = {" + 1",  " ~ 'a'", "|trim",        ".x",    "[0]", " and 1",
                           " or 1", " * 1",   " if 1 else 2", " == 1", "()"};
    for (size_t k = 0; k < sizeof(links) / sizeof(links[0]); k++) {
        size_t ll = strlen(links[k]);
        char *src = malloc(16 + 20000 * ll);
        char *p = src + sprintf(src, "{{ 1");
        for (int i = 0; i < 20000; i++)
            p += sprintf(p, "%s", links[k]);
        p += sprintf(p, " }}");
        ts_tpl *t = NULL;
        ts_error err = {0};
        ts_status st = ts_tpl_compile(src, (size_t)(p - src), &t, &err);
        if (st != TS_ERR_LIMIT)
            fprintf(stderr, "chain of '%s': %s\n", links[k], err.msg);
        assert_int_equal(st, TS_ERR_LIMIT);
        free(src);
    }
    /* Blocks nested too deeply. */
    char *src = malloc(20 * 1000 + 1);
    char *p = src;
    for (int i = 0; i < 1000; i++)
        p += sprintf(p, "{%% if 1 %%}");
    ts_tpl *t = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, (size_t)(p - src), &t, &err), TS_ERR_LIMIT);
    free(src);
    /* Moderate nesting is fine. */
    const char *ok = "{{ ((((((((((1)))))))))) + [[[[[[2]]]]]][0][0][0][0][0][0] }}";
    assert_int_equal(ts_tpl_compile(ok, strlen(ok), &t, &err), TS_OK);
    char *out;
    size_t n;
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, &out, &n, &err), TS_OK);
    assert_string_equal(out, "3");
    free(out);
    ts_tpl_free(t);
}

static void test_deep_json(void **state) {
    (void)state;
    const int depth = 100000;
    char *vars = malloc((size_t)depth * 2 + 16);
    char *p = vars;
    p += sprintf(p, "{\"x\":");
    for (int i = 0; i < depth; i++)
        *p++ = '[';
    for (int i = 0; i < depth; i++)
        *p++ = ']';
    *p++ = '}';
    ts_tpl *t;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile("{{ x }}", 7, &t, &err), TS_OK);
    char *out = NULL;
    size_t n;
    assert_int_equal(ts_tpl_render(t, vars, (size_t)(p - vars), NULL, &out, &n, &err),
                     TS_ERR_FORMAT);
    assert_null(out);
    /* A value built deeper and deeper by the template fails when printed, not crashes. */
    const char *grow = "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}"
                       "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}";
    ts_tpl *g;
    assert_int_equal(ts_tpl_compile(grow, strlen(grow), &g, &err), TS_OK);
    assert_int_equal(ts_tpl_render(g, "{}", 2, NULL, &out, &n, &err), TS_ERR_LIMIT);
    ts_tpl_free(g);
    ts_tpl_free(t);
    free(vars);
}

/* Whatever max_depth a caller allows, macro recursion stops within the stack budget, and a
 * value nested level by level stops at the value depth cap, before printing or comparing it
 * could recurse without bound. */
static void test_recursion_guards(void **state) {
    (void)state;
    const char *src =
        "{% macro r(n) %}{{ ((((((((r(n + 1) ~ 'x')))))))) }}{% endmacro %}{{ r(0) }}";
    ts_tpl *t;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, strlen(src), &t, &err), TS_OK);
    ts_tpl_options o = {.max_depth = 1000000, .max_steps = UINT64_C(1) << 40};
    char *out = NULL;
    size_t n;
    assert_int_equal(ts_tpl_render(t, "{}", 2, &o, &out, &n, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "stack"));
    ts_tpl_free(t);
    const char *eq = "{% set ns = namespace(a=[], b=[]) %}{% for i in range(2000) %}"
                     "{% set ns.a = [ns.a] %}{% set ns.b = [ns.b] %}{% endfor %}{{ ns.a == ns.b }}";
    assert_int_equal(ts_tpl_compile(eq, strlen(eq), &t, &err), TS_OK);
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, &out, &n, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "nested deeper"));
    ts_tpl_free(t);
    /* A namespace holding itself prints without looping forever. */
    const char *self = "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}";
    assert_int_equal(ts_tpl_compile(self, strlen(self), &t, &err), TS_OK);
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, &out, &n, &err), TS_ERR_LIMIT);
    ts_tpl_free(t);
}

static void test_api_misuse(void **state) {
    (void)state;
    ts_tpl *t = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(NULL, 3, &t, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_tpl_compile("x", 1, NULL, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_tpl_compile("x", 1, &t, NULL), TS_OK); /* NULL err is allowed */
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(ts_tpl_render(NULL, "{}", 2, NULL, &out, &n, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, NULL, &n, &err), TS_ERR_INVALID_ARG);
    /* Empty vars: no variables; out_len may be NULL. */
    assert_int_equal(ts_tpl_render(t, NULL, 0, NULL, &out, NULL, &err), TS_OK);
    assert_string_equal(out, "x");
    free(out);
    ts_tpl_free(t);
    ts_tpl_free(NULL);
    /* Source need not be NUL-terminated. */
    assert_int_equal(ts_tpl_compile("{{ 1 }}garbage", 7, &t, &err), TS_OK);
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, &out, &n, &err), TS_OK);
    assert_string_equal(out, "1");
    free(out);
    ts_tpl_free(t);
    /* Bytes that are not UTF-8 pass through text unchanged. */
    const char bin[] = "a\xff\xfe{{ 'b\xc3' }}";
    assert_int_equal(ts_tpl_compile(bin, sizeof(bin) - 1, &t, &err), TS_OK);
    assert_int_equal(ts_tpl_render(t, "{}", 2, NULL, &out, &n, &err), TS_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(out,
                        "a\xff\xfe"
                        "b\xc3",
                        5);
    free(out);
    ts_tpl_free(t);
}

/* One compiled template renders many times, with different variables, identically. */
static void test_reuse(void **state) {
    (void)state;
    const char *src = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
    ts_tpl *t;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, strlen(src), &t, &err), TS_OK);
    for (int i = 0; i < 100; i++) {
        char vars[128];
        snprintf(vars, sizeof(vars), "{\"messages\":[{\"role\":\"user\",\"content\":\"%d\"}]}", i);
        char want[64], *out;
        snprintf(want, sizeof(want), "<user>%d", i);
        size_t n;
        assert_int_equal(ts_tpl_render(t, vars, strlen(vars), NULL, &out, &n, &err), TS_OK);
        assert_string_equal(out, want);
        free(out);
    }
    ts_tpl_free(t);
}

/* A ChatML-with-tools template over 20 messages renders well under a millisecond. */
static void test_speed(void **state) {
    (void)state;
    const char *src =
        "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0].role == 'system' %}"
        "{{- messages[0].content + '\\n\\n' }}{%- endif %}{{- '# Tools\\n<tools>' }}"
        "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
        "{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}"
        "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
        "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
        "{%- if ns.multi_step_tool and message.role == 'user' and message.content is string %}"
        "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}"
        "{%- endfor %}"
        "{%- for message in messages %}{%- set content = message.content | trim %}"
        "{%- if message.role == 'user' or message.role == 'system' %}"
        "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}"
        "{%- elif message.role == 'assistant' %}{%- if '</think>' in content %}"
        "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
        "{{- '<|im_start|>' + message.role + '\\n' + content }}{{- '<|im_end|>\\n' }}{%- endif %}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    char vars[16384];
    char *p = vars;
    p += sprintf(p, "{\"add_generation_prompt\":true,\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
                    "\"messages\":[{\"role\":\"system\",\"content\":\"You are helpful.\"}");
    for (int i = 0; i < 19; i++)
        p += sprintf(p,
                     ",{\"role\":\"%s\",\"content\":\"%s message number %d with some text "
                     "that is about as long as a typical chat turn in a conversation.\"}",
                     i % 2 ? "assistant" : "user", i % 2 ? "<think>x</think>An" : "A", i);
    p += sprintf(p, "]}");
    ts_tpl *t;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, strlen(src), &t, &err), TS_OK);
    const int reps = 200;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < reps; i++) {
        char *out;
        size_t n;
        assert_int_equal(ts_tpl_render(t, vars, (size_t)(p - vars), NULL, &out, &n, &err), TS_OK);
        assert_true(n > 1000);
        free(out);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms =
        ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) / reps;
    fprintf(stderr, "20-message ChatML render: %.3f ms\n", ms);
    /* The 1 ms promise is for optimized builds; debug and sanitizer builds (several times
     * slower, on a shared machine) only check that nothing is pathologically slow. */
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
    const double bound_ms = 1.0;
#else
    const double bound_ms = 20.0;
#endif
    assert_true(ms < bound_ms);
    ts_tpl_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),      cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_deep_json),  cmocka_unit_test(test_recursion_guards),
        cmocka_unit_test(test_api_misuse), cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
