/*
 * jinja_tests.c — jinja2's tests (x is defined, x is divisibleby 3, ...), used by `is` and by
 * the select / reject filters, with Python's notion of each type (a bool is a number but not
 * an integer; an undefined is iterable and callable, as jinja2's Undefined is).
 */
#include <math.h>
#include <string.h>

#include "template/jinja_internal.h"

static bool name_is(const char *name, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static const char *const TESTS[] = {
    "boolean", "callable", "defined",  "divisibleby", "eq",       "equalto", "escaped",
    "even",    "false",    "filter",   "float",       "ge",       "gt",      "greaterthan",
    "in",      "integer",  "iterable", "le",          "lessthan", "lower",   "lt",
    "mapping", "ne",       "none",     "number",      "odd",      "sameas",  "sequence",
    "string",  "test",     "true",     "undefined",   "upper",    "==",      "!=",
    "<",       "<=",       ">",        ">=",          NULL};

bool jj_test_exists(const char *name, size_t n) {
    for (int i = 0; TESTS[i]; i++) {
        if (name_is(name, n, TESTS[i])) {
            return true;
        }
    }
    return false;
}

static jj_value test_arg(jj_ctx *c, const jj_args *a, const char *tname) {
    if (a->n_pos < 1) {
        jj_fail(c, TS_ERR_TYPE, "test '%s' needs an argument", tname);
    }
    return a->pos[0];
}

static bool num_mod(jj_ctx *c, jj_value v, int64_t m, int64_t want) {
    if (v.type == JJ_INT || v.type == JJ_BOOL) {
        int64_t r = v.i % m;
        if (r < 0) {
            r += m < 0 ? -m : m;
        }
        return r == want;
    }
    if (v.type == JJ_FLOAT) {
        double r = fmod(v.f, (double)m);
        if (r < 0) {
            r += fabs((double)m);
        }
        return r == (double)want;
    }
    if (v.type == JJ_UNDEF) {
        jj_undef_fail(c, v);
    }
    jj_fail(c, TS_ERR_TYPE, "unsupported operand type(s) for %%: '%s' and 'int'", jj_type_name(v));
}

bool jj_test(jj_ctx *c, const char *name, size_t n, jj_value v, const jj_args *a) {
    jj_step(c, 1);
#define IS(lit) name_is(name, n, lit)
    if (IS("defined")) {
        return v.type != JJ_UNDEF;
    }
    if (IS("undefined")) {
        return v.type == JJ_UNDEF;
    }
    if (IS("none")) {
        return v.type == JJ_NONE;
    }
    if (IS("boolean")) {
        return v.type == JJ_BOOL;
    }
    if (IS("true")) {
        return v.type == JJ_BOOL && v.i;
    }
    if (IS("false")) {
        return v.type == JJ_BOOL && !v.i;
    }
    if (IS("integer")) {
        return v.type == JJ_INT;
    }
    if (IS("float")) {
        return v.type == JJ_FLOAT;
    }
    if (IS("number")) {
        return v.type == JJ_INT || v.type == JJ_FLOAT || v.type == JJ_BOOL;
    }
    if (IS("string")) {
        return v.type == JJ_STR;
    }
    if (IS("mapping")) {
        return v.type == JJ_DICT;
    }
    if (IS("iterable")) {
        return v.type == JJ_STR || v.type == JJ_LIST || v.type == JJ_DICT || v.type == JJ_UNDEF ||
               v.type == JJ_LOOP;
    }
    if (IS("sequence")) {
        return v.type == JJ_STR || v.type == JJ_LIST || v.type == JJ_DICT || v.type == JJ_UNDEF;
    }
    if (IS("callable")) {
        return v.type == JJ_FUNC || v.type == JJ_UNDEF;
    }
    if (IS("escaped")) {
        return v.type == JJ_STR && (v.flags & JJ_F_SAFE);
    }
    if (IS("odd")) {
        return num_mod(c, v, 2, 1);
    }
    if (IS("even")) {
        return num_mod(c, v, 2, 0);
    }
    if (IS("divisibleby")) {
        jj_value d = test_arg(c, a, "divisibleby");
        if ((d.type == JJ_INT || d.type == JJ_BOOL) && d.i == 0) {
            jj_fail(c, TS_ERR_RANGE, "integer division or modulo by zero");
        }
        if (d.type != JJ_INT && d.type != JJ_BOOL) {
            jj_fail(c, TS_ERR_TYPE, "divisibleby needs an integer");
        }
        return num_mod(c, v, d.i, 0);
    }
    if (IS("eq") || IS("equalto") || IS("==")) {
        return jj_equal(c, v, test_arg(c, a, "eq"));
    }
    if (IS("ne") || IS("!=")) {
        return !jj_equal(c, v, test_arg(c, a, "ne"));
    }
    if (IS("lt") || IS("lessthan") || IS("<")) {
        return jj_compare(c, v, test_arg(c, a, "lt"), "<") < 0;
    }
    if (IS("le") || IS("<=")) {
        return jj_compare(c, v, test_arg(c, a, "le"), "<=") <= 0;
    }
    if (IS("gt") || IS("greaterthan") || IS(">")) {
        return jj_compare(c, v, test_arg(c, a, "gt"), ">") > 0;
    }
    if (IS("ge") || IS(">=")) {
        return jj_compare(c, v, test_arg(c, a, "ge"), ">=") >= 0;
    }
    if (IS("in")) {
        jj_value seq = test_arg(c, a, "in");
        if (seq.type == JJ_STR) {
            if (v.type != JJ_STR) {
                jj_fail(c, TS_ERR_TYPE, "'in <string>' requires string as left operand");
            }
            return jj_search(c, seq.s.p, seq.s.n, v.s.p, v.s.n, false) != NULL;
        }
        if (seq.type == JJ_DICT) {
            return jj_dict_find(c, seq.d, v) != NULL;
        }
        jj_value items = jj_iterate(c, seq);
        for (size_t i = 0; i < items.l->n; i++) {
            if (jj_equal(c, items.l->v[i], v)) {
                return true;
            }
        }
        return false;
    }
    if (IS("lower") || IS("upper")) {
        jj_value s = jj_to_str(c, v);
        jj_value t = jj_case(c, s, IS("lower") ? 'l' : 'u');
        bool cased = false;
        for (size_t i = 0; i < s.s.n; i++) {
            cased |= jj_upper((unsigned char)s.s.p[i]) != jj_lower((unsigned char)s.s.p[i]);
        }
        for (size_t i = 0; i < s.s.n && !cased;) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
            cased = jj_upper(cp) != jj_lower(cp);
            i += adv;
        }
        return cased && jj_equal(c, s, t);
    }
    if (IS("sameas")) {
        jj_value o = test_arg(c, a, "sameas");
        if (v.type != o.type) {
            return false;
        }
        switch (v.type) {
        case JJ_NONE:
        case JJ_UNDEF:
            return true;
        case JJ_BOOL:
            return v.i == o.i;
        case JJ_INT:
            return v.i == o.i && v.i >= -5 && v.i <= 256; /* CPython's small ints */
        case JJ_STR:
            return v.s.p == o.s.p && v.s.n == o.s.n;
        case JJ_LIST:
            return v.l == o.l;
        case JJ_DICT:
        case JJ_NS:
            return v.d == o.d;
        case JJ_FUNC:
            return v.fn == o.fn;
        default:
            return false;
        }
    }
    if (IS("filter") || IS("test")) {
        if (v.type != JJ_STR) {
            return false;
        }
        return IS("filter") ? jj_filter_exists(v.s.p, v.s.n) : jj_test_exists(v.s.p, v.s.n);
    }
#undef IS
    jj_fail(c, TS_ERR_UNSUPPORTED, "no test named '%.*s'", (int)n, name);
}
