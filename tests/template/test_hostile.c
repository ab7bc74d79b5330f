/* test_hostile.c — hostile chat templates and requests against the engine's limits.
 *
 * Chat templates arrive inside downloaded model files, so every template here is built by the
 * test to attack one resource: the C stack (long elif chains, deep nesting), work that grows
 * with data rather than with steps (searching, comparing, counting, hashing big strings and
 * dicts), memory (huge repeats and literals), printf-style widths, and odd values (NUL bytes,
 * 1e300|int, range() at the int64 edges). Each must end in the right answer or in an error
 * that names the limit that stopped it; where a limit stops it, the test also moves that
 * limit and checks that the template then gets further or succeeds, so a test fails when some
 * other limit (or none) is what stopped the template. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/jinja.h"

/* ---- helpers ------------------------------------------------------------------------- */

/* Checks of the work and memory limits run with the deadline out of the way: on a loaded
 * machine (or under sanitizers) the default 5 s could otherwise stop them first. */
static const ts_stop far_stop = {.deadline_ns = INT64_MAX};

/* A growable string the templates are built in. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(k >= 0);
    if (t->n + (size_t)k + 1 > t->cap) {
        t->cap = (t->n + (size_t)k + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)k;
}

/* Compiles src[0..n) and renders it with vars under o; returns the status of whichever step
 * failed. *out (malloc'd, or NULL) gets the text. */
static ts_status render_n(const char *src, size_t n, const char *vars, const ts_tpl_options *o,
                          char **out, ts_error *err) {
    ts_tpl *t = NULL;
    *out = NULL;
    ts_status st = ts_tpl_compile(src, n, &t, err);
    if (st != TS_OK) {
        return st;
    }
    size_t len = 0;
    st = ts_tpl_render(t, vars, strlen(vars), o, out, &len, err);
    ts_tpl_free(t);
    return st;
}

static ts_status render(const char *src, const ts_tpl_options *o, char **out, ts_error *err) {
    return render_n(src, strlen(src), "{}", o, out, err);
}

/* Renders and requires success with exactly want. */
static void expect_ok(const char *src, const ts_tpl_options *o, const char *want) {
    char *out;
    ts_error err = {0};
    ts_status st = render(src, o, &out, &err);
    if (st != TS_OK) {
        fail_msg("%.80s: %s", src, err.msg);
    }
    assert_string_equal(out, want);
    free(out);
}

/* Renders and requires status st with a message containing each of the given pieces. */
static void expect_fail(const char *src, const ts_tpl_options *o, ts_status st, const char *piece1,
                        const char *piece2) {
    char *out;
    ts_error err = {0};
    ts_status got = render(src, o, &out, &err);
    if (got != st || (piece1 && !strstr(err.msg, piece1)) || (piece2 && !strstr(err.msg, piece2))) {
        fail_msg("%.80s: want %s with '%s' '%s', got %s: %s", src, ts_status_str(st),
                 piece1 ? piece1 : "", piece2 ? piece2 : "", ts_status_str(got), err.msg);
    }
    assert_null(out);
}

/* ---- the C stack --------------------------------------------------------------------- */

/* if / elif x 30000 renders the right branch; a chain near the source limit still compiles
 * and renders (each elif used to be one C call deep, at compile and at render). */
static void test_elif_chain(void **state) {
    (void)state;
    const int counts[] = {30000, 80000};
    for (size_t k = 0; k < 2; k++) {
        int n = counts[k];
        text t = {0};
        add(&t, "{%% if x == 0 %%}zero");
        for (int i = 1; i < n; i++) {
            add(&t, "{%%elif x==%d%%}b%d", i, i);
        }
        add(&t, "{%% else %%}none{%% endif %%}");
        assert_true(t.n < ((size_t)2 << 20));
        char vars[64], want[32], *out;
        snprintf(vars, sizeof(vars), "{\"x\": %d}", n - 1);
        snprintf(want, sizeof(want), "b%d", n - 1);
        ts_error err = {0};
        assert_int_equal(render_n(t.p, t.n, vars, NULL, &out, &err), TS_OK);
        assert_string_equal(out, want);
        free(out);
        assert_int_equal(render_n(t.p, t.n, "{\"x\": -1}", NULL, &out, &err), TS_OK);
        assert_string_equal(out, "none");
        free(out);
        free(t.p);
    }
    /* An unknown filter deep in the chain is still soft (fails only when that branch runs). */
    text t = {0};
    add(&t, "{%% if x == 0 %%}a");
    for (int i = 1; i < 50000; i++) {
        add(&t, "{%%elif x==%d%%}b", i);
    }
    add(&t, "{%%elif x==-5%%}{{ x|nosuchfilter }}{%% endif %%}");
    char *out;
    ts_error err = {0};
    assert_int_equal(render_n(t.p, t.n, "{\"x\": 3}", NULL, &out, &err), TS_OK);
    assert_string_equal(out, "b");
    free(out);
    assert_int_equal(render_n(t.p, t.n, "{\"x\": -5}", NULL, &out, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "nosuchfilter"));
    free(t.p);
}

/* Nesting of blocks, brackets and operator chains stops at the compile nesting limit, and
 * just under it renders. */
static void test_deep_nesting_limit(void **state) {
    (void)state;
    const char *open[] = {"{% if true %}", "{% for i in [1] %}", "{% set x %}", "{% with %}"};
    const char *close[] = {"{% endif %}", "{% endfor %}", "{% endset %}{{ x }}", "{% endwith %}"};
    for (size_t k = 0; k < 4; k++) {
        for (int depth = 200; depth <= 300; depth += 100) {
            text t = {0};
            for (int i = 0; i < depth; i++) {
                add(&t, "%s", open[k]);
            }
            add(&t, "x");
            for (int i = 0; i < depth; i++) {
                add(&t, "%s", close[k]);
            }
            char *out;
            ts_error err = {0};
            ts_tpl_options o = {.max_depth = 1000};
            ts_status st = render_n(t.p, t.n, "{}", &o, &out, &err);
            if (depth == 200) {
                if (st != TS_OK) {
                    fail_msg("%s x %d: %s", open[k], depth, err.msg);
                }
                assert_string_equal(out, "x");
                free(out);
            } else {
                assert_int_equal(st, TS_ERR_LIMIT);
                assert_non_null(strstr(err.msg, "nesting deeper than 256"));
            }
            free(t.p);
        }
    }
    /* Parentheses and an operator chain: 100 fine, 100000 refused by the same limit. */
    for (int depth = 100; depth <= 100000; depth = depth == 100 ? 100000 : 200000) {
        text t = {0}, c = {0};
        add(&t, "{{ ");
        add(&c, "{{ 0");
        for (int i = 0; i < depth; i++) {
            add(&t, "(");
            add(&c, " + 1");
        }
        add(&t, "7");
        for (int i = 0; i < depth; i++) {
            add(&t, ")");
        }
        add(&t, " }}");
        add(&c, " }}");
        char *out, want[32];
        ts_error err = {0};
        ts_status st = render_n(t.p, t.n, "{}", NULL, &out, &err);
        ts_status st2;
        if (depth == 100) {
            assert_int_equal(st, TS_OK);
            assert_string_equal(out, "7");
            free(out);
            st2 = render_n(c.p, c.n, "{}", NULL, &out, &err);
            assert_int_equal(st2, TS_OK);
            snprintf(want, sizeof(want), "%d", depth);
            assert_string_equal(out, want);
            free(out);
        } else {
            assert_int_equal(st, TS_ERR_LIMIT);
            assert_non_null(strstr(err.msg, "nested deeper than 256"));
            st2 = render_n(c.p, c.n, "{}", NULL, &out, &err);
            assert_int_equal(st2, TS_ERR_LIMIT);
            assert_non_null(strstr(err.msg, "nesting deeper than 256"));
        }
        free(t.p);
        free(c.p);
    }
}

/* ---- work that grows with data --------------------------------------------------------- */

/* A loop that touches a 4 MB string on each of n iterations: under the default work budget a
 * few iterations succeed and many stop at max_work; a smaller max_work stops the few too. */
static void check_work_loop(const char *body, const char *want_few, bool with_default) {
    char src[512];
    const char *setup = "{% set s = 'a' * 4000000 %}{% set t = 'a' * 4000000 %}";
    snprintf(src, sizeof(src), "%s{%% for i in range(%d) %%}%s{%% endfor %%}", setup, 5, body);
    ts_tpl_options dflt = {.stop = &far_stop};
    expect_ok(src, &dflt, want_few);
    ts_tpl_options small = {.max_work = 20000000, .stop = &far_stop};
    expect_fail(src, &small, TS_ERR_LIMIT, "work limit of 20000000 units", "(max_work");
    if (with_default) {
        snprintf(src, sizeof(src), "%s{%% for i in range(%d) %%}%s{%% endfor %%}", setup, 100000,
                 body);
        expect_fail(src, &dflt, TS_ERR_LIMIT, "work limit of 1000000000 units", "(max_work");
    }
}

static void test_work_budget(void **state) {
    (void)state;
    check_work_loop("{{ ('b' * 300) in s }}", "FalseFalseFalseFalseFalse", false);
    check_work_loop("{{ s == t }}", "TrueTrueTrueTrueTrue", true);
    check_work_loop("{{ s < t }}", "FalseFalseFalseFalseFalse", false);
    check_work_loop("{{ s|length }}", "40000004000000400000040000004000000", true);
    check_work_loop("{{ s[3999999] }}", "aaaaa", false);
    check_work_loop("{{ s.rfind('b') }}", "-1-1-1-1-1", true);
    check_work_loop("{{ s.find('ab') }}", "-1-1-1-1-1", false);
    check_work_loop("{{ s.count('b') }}", "00000", false);
    check_work_loop("{{ s[1:2] }}", "aaaaa", false);
    check_work_loop("{{ s.endswith(t) }}", "TrueTrueTrueTrueTrue", false);
    check_work_loop("{{ s.isalpha() }}", "TrueTrueTrueTrueTrue", false);
    check_work_loop("{{ (s ~ ' ').strip('a')|length }}", "11111", false);
    check_work_loop("{{ ('x' ~ s).lstrip('xa')|length }}", "00000", false);
    /* Unclosed tags: each '<' used to search the rest of the string again. */
    ts_tpl_options lin = {.max_work = 40000000, .stop = &far_stop};
    expect_ok("{{ ('<' * 1000000 ~ ' <!--' * 100000)|striptags|length }}", &lin, "1500000");
}

/* Element-wise compares of big lists charge the values they touch (a unit per element let
 * `l == m` of 100k-item lists in a loop run to the time limit instead of the work limit). */
static void test_list_compare(void **state) {
    (void)state;
    const char *setup = "{% set l = range(100000)|list %}{% set m = range(100000)|list %}";
    char src[512];
    snprintf(src, sizeof(src), "%s{%% for i in range(5) %%}{{ l == m }}{%% endfor %%}", setup);
    ts_tpl_options dflt = {.stop = &far_stop};
    expect_ok(src, &dflt, "TrueTrueTrueTrueTrue");
    /* 1000 compares touch 100M values (2.4 GB of them): past the default budget, though a unit
     * per element would have let them through. */
    snprintf(src, sizeof(src), "%s{%% for i in range(1000) %%}{{ l == m }}{%% endfor %%}", setup);
    expect_fail(src, &dflt, TS_ERR_LIMIT, "work limit of 1000000000 units", "(max_work");
    ts_tpl_options big = {.max_work = UINT64_C(1) << 40, .stop = &far_stop};
    snprintf(src, sizeof(src), "%s{%% for i in range(20) %%}{{ l == m }}{%% endfor %%}|", setup);
    char want[128] = "";
    for (int i = 0; i < 20; i++) {
        strcat(want, "True");
    }
    strcat(want, "|");
    expect_ok(src, &big, want);
}

/* A needle that matches at almost every position makes a naive search quadratic: the work
 * charged per candidate stops it. */
static void test_quadratic_search(void **state) {
    (void)state;
    const char *src = "{% set s = 'a' * 1000000 %}{% set n = 'a' * 100000 ~ 'b' %}{{ n in s }}";
    expect_fail(src, NULL, TS_ERR_LIMIT, "(max_work", NULL);
    ts_tpl_options big = {.max_work = UINT64_C(1) << 40, .max_steps = UINT64_C(1) << 40};
    ts_stop past = {.deadline_ns = 1};
    big.stop = &past; /* with the work budget out of the way, the deadline stops it */
    expect_fail(src, &big, TS_ERR_LIMIT, "time limit reached", NULL);
}

/* dict() of 50k pairs, a 50k-item dict literal by loop, unique of 50k items and 100k set
 * names: right answers within a work budget that only linear inserts and lookups meet. */
static void test_big_dicts_and_names(void **state) {
    (void)state;
    ts_tpl_options lin = {.max_work = 60000000, .stop = &far_stop};
    ts_tpl_options tiny = {.max_work = 2000000, .stop = &far_stop};
    char *out;
    ts_error err = {0};
    /* dict() of 50k pairs (the last repeats a key: it keeps its place, takes the value). */
    text d = {0};
    add(&d, "{%% set d = dict([");
    for (int i = 0; i < 50000; i++) {
        add(&d, "('k%d', %d), ", i, i);
    }
    add(&d, "('k7', 77)]) %%}{{ d|length }} {{ d.k49999 }} {{ d['k7'] }} {{ (d|list)[7] }}");
    assert_int_equal(render_n(d.p, d.n, "{}", &lin, &out, &err), TS_OK);
    assert_string_equal(out, "50000 49999 77 k7");
    free(out);
    assert_int_equal(render_n(d.p, d.n, "{}", &tiny, &out, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "(max_work"));
    free(d.p);
    /* A dict grown key by key through a namespace, and unique over 100k items. */
    expect_ok("{{ (range(50000)|list + range(50000)|list)|unique|list|length }}", &lin, "50000");
    /* 100k distinct set names in one scope. */
    text s = {0};
    for (int i = 0; i < 100000; i++) {
        add(&s, "{%%set v%d=%d%%}", i, i);
    }
    add(&s, "{{ v0 + v99999 + v5 }}");
    assert_int_equal(render_n(s.p, s.n, "{}", &lin, &out, &err), TS_OK);
    assert_string_equal(out, "100004");
    free(out);
    assert_int_equal(render_n(s.p, s.n, "{}", &tiny, &out, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "(max_work"));
    free(s.p);
}

/* ---- printf-style formats ----------------------------------------------------------------- */

static void test_format_widths(void **state) {
    (void)state;
    expect_fail("{{ '%2147483647d' % 1 }}", NULL, TS_ERR_LIMIT,
                "format width 2147483647 exceeds the limit of 100000", NULL);
    expect_fail("{{ '%.2147483647f' % 1.5 }}", NULL, TS_ERR_LIMIT,
                "format precision 2147483647 exceeds the limit of 100000", NULL);
    expect_fail("{{ '%99999999999999999999999s' % 'a' }}", NULL, TS_ERR_LIMIT, "format width",
                NULL);
    expect_fail("{{ '%100001s' % 'a' }}", NULL, TS_ERR_LIMIT, "format width 100001", NULL);
    /* What is allowed is printed in full (it used to be cut at 511 bytes). */
    expect_ok("{{ ('%99999s' % 'a')|length }}", NULL, "99999");
    expect_ok("{{ ('%-100000d' % 7)|length }}", NULL, "100000");
    expect_ok("{{ ('%.1000f' % 1.5)|length }}", NULL, "1002");
    expect_ok("{{ ('%600s' % 'x')[-3:] }}", NULL, "  x");
    expect_ok("[{{ '%5s|%-5s|%.2s|%5.1s' % ('ab', 'cd', 'éfg', 'xyz') }}]", NULL,
              "[   ab|cd   |éf|    x]");
    expect_ok("{{ '%05d|%+d|%x|%.3f|%e' % (42, 5, 255, 2.5, 10.0) }}", NULL,
              "00042|+5|ff|2.500|1.000000e+01");
}

/* ---- memory and sizes ---------------------------------------------------------------------- */

static void test_repeat_and_memory(void **state) {
    (void)state;
    /* '' * 10**12 is empty at once; 'x' * 10**12 is refused before allocating. */
    expect_ok("[{{ '' * 10**12 }}]", NULL, "[]");
    expect_ok("[{{ 'ab' * 0 }}{{ 'ab' * -5 }}{{ [] * 10**12 }}]", NULL, "[[]]");
    expect_fail("{{ 'x' * 10**12 }}", NULL, TS_ERR_LIMIT, "exceeds the string limit", "max_output");
    expect_fail("{{ ('x' * 5000000)|length }}", NULL, TS_ERR_LIMIT, "max_output", NULL);
    ts_tpl_options more = {.max_output = 8000000};
    expect_ok("{{ ('x' * 5000000)|length }}", &more, "5000000");
    /* Twenty 4 MB strings held at once: past a 64 MiB memory limit, within 128 MiB. */
    const char *hold = "{% set ns = namespace(l=[]) %}{% for i in range(20) %}"
                       "{% set ns.l = ns.l + ['x' * 4000000] %}{% endfor %}{{ ns.l|length }}";
    ts_tpl_options m64 = {.max_memory = (size_t)64 << 20, .stop = &far_stop};
    expect_fail(hold, &m64, TS_ERR_LIMIT, "memory limit of 67108864 bytes", "(max_memory)");
    ts_tpl_options m128 = {.max_memory = (size_t)128 << 20, .stop = &far_stop};
    expect_ok(hold, &m128, "20");
}

/* A 10 MB template is refused at once by the source limit; one under it of many tags or many
 * literals compiles and renders. */
static void test_big_templates(void **state) {
    (void)state;
    text t = {0};
    for (int i = 0; i < 2000000; i++) {
        add(&t, "{{x}}");
    }
    ts_tpl *tpl = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(t.p, t.n, &tpl, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "source of 10000000 bytes exceeds the limit of 2097152"));
    assert_null(tpl);
    /* 400k tags (2 MB): compiles, renders 400k values. */
    t.n = 2000000;
    char *out;
    assert_int_equal(render_n(t.p, t.n, "{\"x\": 1}", NULL, &out, &err), TS_OK);
    assert_int_equal(strlen(out), 400000);
    free(out);
    free(t.p);
    /* A million list literals. */
    text l = {0};
    add(&l, "{{ [");
    for (int i = 0; i < 1000000; i++) {
        add(&l, "1,");
    }
    add(&l, "2]|length }}");
    assert_int_equal(render_n(l.p, l.n, "{}", NULL, &out, &err), TS_OK);
    assert_string_equal(out, "1000001");
    free(out);
    free(l.p);
}

/* ---- odd values ------------------------------------------------------------------------------ */

static void test_nul_byte(void **state) {
    (void)state;
    const char src[] = "line one\n{{ 1 }}\nab\0cd";
    ts_tpl *t = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, sizeof(src) - 1, &t, &err), TS_ERR_FORMAT);
    assert_string_equal(err.msg, "template:3: NUL byte at offset 19");
    assert_null(t);
    /* Without the NUL the same text compiles. */
    assert_int_equal(ts_tpl_compile(src, 19, &t, &err), TS_OK);
    ts_tpl_free(t);
}

/* A surrogate escape cannot become UTF-8 text: refused at compile, as a pair too (Python keeps
 * the two halves apart); the characters around the range still decode. */
static void test_surrogate_escape(void **state) {
    (void)state;
    expect_fail("{{ '\\udcff' }}", NULL, TS_ERR_FORMAT, "\\udcff is a lone UTF-16 surrogate",
                NULL);
    expect_fail("{{ '\\ud83d\\ude00' }}", NULL, TS_ERR_FORMAT, "\\ud83d is a lone", NULL);
    expect_ok("{{ '\\ud7ff\\ue000\\U0001F600' }}", NULL,
              "\xed\x9f\xbf\xee\x80\x80\xf0\x9f\x98\x80");
}

static void test_int_filter(void **state) {
    (void)state;
    expect_fail("{{ 1e300|int }}", NULL, TS_ERR_RANGE, "int: 1e+300 does not fit", NULL);
    expect_fail("{{ -1e19|int }}", NULL, TS_ERR_RANGE, "int: -1e+19 does not fit", NULL);
    expect_fail("{{ '1e300'|int }}", NULL, TS_ERR_RANGE, "1e+300", NULL);
    expect_fail("{{ '99999999999999999999'|int }}", NULL, TS_ERR_RANGE,
                "'99999999999999999999' does not fit", NULL);
    expect_fail("{{ 'inf'|float|int }}", NULL, TS_ERR_RANGE, "infinity", NULL);
    expect_ok("{{ 'nan'|float|int }}|{{ 'nan'|float|int(7) }}", NULL, "0|7");
    expect_ok("{{ 1e18|int }}|{{ -9.2e18|int }}|{{ 2.9|int }}|{{ -2.9|int }}", NULL,
              "1000000000000000000|-9200000000000000000|2|-2");
    expect_ok("{{ '  42 '|int }}|{{ '1_000'|int }}|{{ '4.7'|int }}|{{ 'x'|int(3) }}", NULL,
              "42|1000|4|3");
    /* A numeric string longer than the old 64-byte buffer is read whole. */
    expect_ok("{{ ('0' * 100 ~ '12')|int }}", NULL, "12");
}

static void test_range_extremes(void **state) {
    (void)state;
    const char *min = "(-9223372036854775807 - 1)", *max = "9223372036854775807";
    char src[256];
    snprintf(src, sizeof(src), "{{ range(%s, %s, %s)|list }}", min, max, min);
    expect_ok(src, NULL, "[]");
    snprintf(src, sizeof(src), "{{ range(%s - 1, %s, %s)|list }}", max, min, min);
    expect_ok(src, NULL, "[9223372036854775806, -2]");
    snprintf(src, sizeof(src), "{{ range(%s - 2, %s)|list }}", max, max);
    expect_ok(src, NULL, "[9223372036854775805, 9223372036854775806]");
    snprintf(src, sizeof(src), "{{ range(%s, %s, 3)|list|length }}", max, min);
    expect_ok(src, NULL, "0");
    snprintf(src, sizeof(src), "{{ range(%s + 3, %s, -1)|list }}", min, min);
    expect_ok(src, NULL, "[-9223372036854775805, -9223372036854775806, -9223372036854775807]");
    snprintf(src, sizeof(src), "{{ range(%s, %s)|length }}", min, max);
    expect_fail(src, NULL, TS_ERR_LIMIT, "range too big", NULL);
    snprintf(src, sizeof(src), "{{ range(%s, %s, %s)|list }}", max, min, min);
    expect_ok(src, NULL, "[9223372036854775807, -1]");
}

/* ---- the request's variables ----------------------------------------------------------------- */

/* A 100k-key object in the variables converts in linear time: within a work budget a
 * quadratic insert (5e9 key compares) could not meet. */
static void test_json_big_object(void **state) {
    (void)state;
    text v = {0};
    add(&v, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"obj\": {");
    for (int i = 0; i < 100000; i++) {
        add(&v, "%s\"key%d\": %d", i ? ", " : "", i, i);
    }
    add(&v, ", \"key5\": 55}}]}");
    const char *src = "{{ messages[0].obj|length }} {{ messages[0].obj.key99999 }} "
                      "{{ messages[0].obj['key5'] }}";
    ts_tpl *t;
    ts_error err = {0};
    assert_int_equal(ts_tpl_compile(src, strlen(src), &t, &err), TS_OK);
    ts_tpl_options lin = {.max_work = 100000000, .stop = &far_stop};
    char *out;
    size_t n;
    assert_int_equal(ts_tpl_render(t, v.p, v.n, &lin, &out, &n, &err), TS_OK);
    assert_string_equal(out, "100000 99999 55");
    free(out);
    /* The budget is what bounds it: a tenth of the vars' size in work is not enough. */
    ts_tpl_options tiny = {.max_work = v.n / 10, .stop = &far_stop};
    assert_int_equal(ts_tpl_render(t, v.p, v.n, &tiny, &out, &n, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "(max_work"));
    ts_tpl_free(t);
    free(v.p);
}

/* ---- steps, time and cancel --------------------------------------------------------------------
 */

static int cancel_now(void *user) {
    (void)user;
    return 1;
}

static void test_steps_time_cancel(void **state) {
    (void)state;
    const char *loop = "{% for i in range(100000) %}{% for j in range(20) %}{% endfor %}"
                       "{% endfor %}done";
    ts_tpl_options few = {.max_steps = 1000000, .stop = &far_stop};
    expect_fail(loop, &few, TS_ERR_LIMIT, "step limit of 1000000 reached (max_steps)", NULL);
    ts_tpl_options many = {.max_steps = 10000000, .stop = &far_stop};
    expect_ok(loop, &many, "done");
    /* A deadline already past and a cancel callback stop the same loop. */
    ts_stop past = {.deadline_ns = 1};
    ts_tpl_options o = {.stop = &past};
    expect_fail(loop, &o, TS_ERR_LIMIT, "template:1: time limit reached", NULL);
    ts_stop cancel = {.cancel = cancel_now};
    o.stop = &cancel;
    expect_fail(loop, &o, TS_ERR_ABORTED, "cancelled", NULL);
    /* A far deadline lets it finish. */
    ts_stop far = {.deadline_ns = INT64_MAX};
    o.stop = &far;
    expect_ok(loop, &o, "done");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elif_chain),
        cmocka_unit_test(test_deep_nesting_limit),
        cmocka_unit_test(test_work_budget),
        cmocka_unit_test(test_list_compare),
        cmocka_unit_test(test_quadratic_search),
        cmocka_unit_test(test_big_dicts_and_names),
        cmocka_unit_test(test_format_widths),
        cmocka_unit_test(test_repeat_and_memory),
        cmocka_unit_test(test_big_templates),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_surrogate_escape),
        cmocka_unit_test(test_int_filter),
        cmocka_unit_test(test_range_extremes),
        cmocka_unit_test(test_json_big_object),
        cmocka_unit_test(test_steps_time_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
