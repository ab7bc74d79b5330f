/*
 * jinja_filters.c — jinja2's filters and tests that chat templates use, with jinja2's
 * argument names and defaults (x|join(d='', attribute=None), x|default(v, boolean=False),
 * x|tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False) as Hugging
 * Face overrides it, ...). Tests are in jinja_tests.c, `str % args` in jinja_str.c.
 *
 * Filters not listed here are compile errors outside an if (runtime errors inside one), as
 * jinja2 does; docs/templates.md lists which exist.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

static bool name_is(const char *name, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static const char *const FILTERS[] = {
    "abs",     "attr",      "batch",     "capitalize", "center", "count",      "d",
    "default", "dictsort",  "e",         "escape",     "first",  "float",      "forceescape",
    "format",  "indent",    "int",       "items",      "join",   "last",       "length",
    "list",    "lower",     "map",       "max",        "min",    "reject",     "rejectattr",
    "replace", "reverse",   "round",     "safe",       "select", "selectattr", "sort",
    "string",  "striptags", "sum",       "title",      "tojson", "trim",       "truncate",
    "unique",  "upper",     "wordcount", NULL};

static bool listed(const char *const *list, const char *name, size_t n) {
    for (int i = 0; list[i]; i++) {
        if (name_is(name, n, list[i])) {
            return true;
        }
    }
    return false;
}

bool jj_filter_exists(const char *name, size_t n) {
    return listed(FILTERS, name, n);
}

/* ---- helpers ------------------------------------------------------------------------ */

static jj_value buf_value(ts_buf *b) {
    return jj_str(b->p ? b->p : "", b->n);
}

static jj_value str_of(jj_ctx *c, jj_value v) {
    return jj_to_str(c, v);
}

int64_t jj_int_arg(jj_ctx *c, const jj_value *v, int64_t dflt, const char *what) {
    if (!v || v->type == JJ_NONE) {
        return dflt;
    }
    if (v->type == JJ_INT || v->type == JJ_BOOL) {
        return v->i;
    }
    if (v->type == JJ_FLOAT && v->f > -9.2e18 && v->f < 9.2e18) {
        return (int64_t)v->f;
    }
    jj_fail(c, TS_ERR_TYPE, "%s: expected an integer, got '%s'", what, jj_type_name(*v));
}

static bool bool_arg(const jj_value *v, bool dflt) {
    return v ? jj_truthy(*v) : dflt;
}

/* jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, as items first. */
static jj_value attr_path(jj_ctx *c, jj_value v, jj_value path) {
    if (path.type != JJ_STR) {
        return jj_getitem(c, v, path);
    }
    const char *p = path.s.p, *end = p + path.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        const char *q = dot ? dot : end;
        bool digits = q > p;
        for (const char *r = p; r < q; r++) {
            digits &= *r >= '0' && *r <= '9';
        }
        jj_value key = jj_str(p, (size_t)(q - p));
        if (digits && q - p < 18) {
            key = jj_int(strtoll(p, NULL, 10));
        }
        v = jj_getitem(c, v, key);
        if (!dot) {
            break;
        }
        p = dot + 1;
    }
    return v;
}

/* Case-insensitive sort keys lowercase strings (jinja2's ignore_case). */
static jj_value fold(jj_ctx *c, jj_value v, bool case_sensitive) {
    return !case_sensitive && v.type == JJ_STR ? jj_case(c, v, 'l') : v;
}

typedef struct sort_item {
    jj_value key, val;
    size_t idx;
} sort_item;

typedef struct sort_ctx {
    jj_ctx *c;
    bool reverse;
} sort_ctx;

/* A stable merge sort with a context (qsort has neither). */
static void merge_sort(sort_ctx *s, sort_item *a, sort_item *tmp, size_t n) {
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    merge_sort(s, a, tmp, h);
    merge_sort(s, a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = jj_compare(s->c, a[j].key, a[i].key, "<");
        if (s->reverse) {
            r = -r;
        }
        tmp[k++] = r < 0 ? a[j++] : a[i++];
    }
    while (i < h) {
        tmp[k++] = a[i++];
    }
    while (j < n) {
        tmp[k++] = a[j++];
    }
    memcpy(a, tmp, n * sizeof(*a));
}

static void sort_items(jj_ctx *c, sort_item *items, size_t n, bool reverse) {
    sort_ctx s = {c, reverse};
    sort_item *tmp = jj_alloc(c->arena, (n ? n : 1) * sizeof(*tmp));
    jj_step(c, n * 4);
    merge_sort(&s, items, tmp, n);
}

static jj_value list_of(jj_ctx *c, const sort_item *items, size_t n, bool vals) {
    jj_value l = jj_new_list(c, n);
    for (size_t i = 0; i < n; i++) {
        l.l->v[i] = vals ? items[i].val : items[i].key;
    }
    l.l->n = n;
    return l;
}

jj_value jj_html_escape(jj_ctx *c, jj_value v) {
    if (v.type == JJ_STR && (v.flags & JJ_F_SAFE)) {
        return v;
    }
    jj_value s = str_of(c, v);
    ts_buf b;
    jj_buf_init(&b, c->arena);
    for (size_t i = 0; i < s.s.n; i++) {
        switch (s.s.p[i]) {
        case '&':
            ts_buf_puts(&b, "&amp;");
            break;
        case '<':
            ts_buf_puts(&b, "&lt;");
            break;
        case '>':
            ts_buf_puts(&b, "&gt;");
            break;
        case '"':
            ts_buf_puts(&b, "&#34;");
            break;
        case '\'':
            ts_buf_puts(&b, "&#39;");
            break;
        default:
            ts_buf_putc(&b, s.s.p[i]);
        }
    }
    jj_value r = buf_value(&b);
    r.flags = JJ_F_SAFE;
    return r;
}

/* ---- select / map ------------------------------------------------------------------- */

/* Applies the test named by args->pos[first] with the remaining positionals as arguments;
 * with no test name, truthiness. */
static bool run_test(jj_ctx *c, jj_value v, const jj_args *a, int first) {
    if (a->n_pos <= first) {
        return jj_truthy(v);
    }
    jj_value name = a->pos[first];
    if (name.type != JJ_STR) {
        jj_fail(c, TS_ERR_TYPE, "the test name must be a string");
    }
    if (!jj_test_exists(name.s.p, name.s.n)) {
        jj_fail(c, TS_ERR_UNSUPPORTED, "no test named '%.*s'", (int)name.s.n, name.s.p);
    }
    jj_args rest = {.pos = a->pos + first + 1,
                    .n_pos = a->n_pos - first - 1,
                    .kw_names = a->kw_names,
                    .kw_n = a->kw_n,
                    .kw = a->kw,
                    .n_kw = a->n_kw};
    return jj_test(c, name.s.p, name.s.n, v, &rest);
}

/* jinja2's generator filters skip a falsy input without iterating it (none|map(...) is
 * empty) and return a generator. */
static jj_value gen_input(jj_ctx *c, jj_value v) {
    return jj_truthy(v) ? jj_iterate(c, v) : jj_new_list(c, 0);
}

static jj_value do_select(jj_ctx *c, jj_value seq, const jj_args *a, bool attr, bool keep) {
    jj_value items = gen_input(c, seq);
    jj_value out = jj_new_list(c, 0);
    out.flags = JJ_F_GEN;
    if (attr && a->n_pos < 1) {
        jj_fail(c, TS_ERR_TYPE, "selectattr/rejectattr need an attribute name");
    }
    for (size_t i = 0; i < items.l->n; i++) {
        jj_step(c, 1);
        jj_value v = items.l->v[i];
        jj_value probe = attr ? attr_path(c, v, a->pos[0]) : v;
        if (run_test(c, probe, a, attr ? 1 : 0) == keep) {
            jj_list_push(c, out.l, v);
        }
    }
    return out;
}

static jj_value do_map(jj_ctx *c, jj_value seq, const jj_args *a) {
    jj_value items = gen_input(c, seq);
    jj_value out = jj_new_list(c, items.l->n);
    out.flags = JJ_F_GEN;
    const jj_value *attr = jj_arg(a, -1, "attribute");
    const jj_value *dflt = jj_arg(a, -1, "default");
    if (!attr && a->n_pos < 1) {
        jj_fail(c, TS_ERR_TYPE, "map needs a filter name or attribute=");
    }
    jj_value fname = attr ? jj_none() : a->pos[0];
    if (!attr && (fname.type != JJ_STR || !jj_filter_exists(fname.s.p, fname.s.n))) {
        jj_fail(c, TS_ERR_UNSUPPORTED, "no filter named '%.*s'",
                fname.type == JJ_STR ? (int)fname.s.n : 1, fname.type == JJ_STR ? fname.s.p : "?");
    }
    jj_args rest = {.pos = a->pos + 1,
                    .n_pos = a->n_pos - 1,
                    .kw_names = a->kw_names,
                    .kw_n = a->kw_n,
                    .kw = a->kw,
                    .n_kw = a->n_kw};
    for (size_t i = 0; i < items.l->n; i++) {
        jj_step(c, 1);
        jj_value v = items.l->v[i];
        if (attr) {
            v = attr_path(c, v, *attr);
            if (v.type == JJ_UNDEF && dflt) {
                v = *dflt;
            }
        } else {
            v = jj_filter(c, fname.s.p, fname.s.n, v, &rest);
        }
        out.l->v[out.l->n++] = v;
    }
    return out;
}

/* ---- filters ------------------------------------------------------------------------ */

static jj_value f_join(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"d", "attribute", NULL};
    jj_args_check(c, a, "join", 2, kw);
    const jj_value *d = jj_arg(a, 0, "d");
    const jj_value *attr = jj_arg(a, 1, "attribute");
    jj_value sep = d ? str_of(c, *d) : jj_cstr("");
    jj_value items = jj_iterate(c, v);
    ts_buf b;
    jj_buf_init(&b, c->arena);
    for (size_t i = 0; i < items.l->n; i++) {
        if (i) {
            ts_buf_put(&b, sep.s.p, sep.s.n);
        }
        jj_value it = attr ? attr_path(c, items.l->v[i], *attr) : items.l->v[i];
        jj_str_to(c, &b, it);
    }
    jj_step(c, items.l->n);
    return buf_value(&b);
}

static jj_value f_indent(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"width", "first", "blank", NULL};
    jj_args_check(c, a, "indent", 3, kw);
    const jj_value *w = jj_arg(a, 0, "width");
    bool first = bool_arg(jj_arg(a, 1, "first"), false);
    bool blank = bool_arg(jj_arg(a, 2, "blank"), false);
    jj_value ind;
    if (w && w->type == JJ_STR) {
        ind = *w;
    } else {
        int64_t width = jj_int_arg(c, w, 4, "indent width");
        if (width < 0) {
            width = 0;
        }
        if (width > 4096) {
            jj_fail(c, TS_ERR_LIMIT, "indent width %" PRId64 " is too large", width);
        }
        char *sp = jj_alloc(c->arena, (size_t)width + 1);
        memset(sp, ' ', (size_t)width);
        ind = jj_str(sp, (size_t)width);
    }
    /* jinja2 appends "\n" to the value, which only a string allows. */
    if (v.type == JJ_UNDEF) {
        jj_undef_fail(c, v);
    }
    if (v.type != JJ_STR) {
        jj_fail(c, TS_ERR_TYPE, "unsupported operand type(s) for +=: '%s' and 'str'",
                jj_type_name(v));
    }
    jj_value s = str_of(c, v);
    /* jinja2 appends "\n" and splits lines, which drops one trailing newline's line. */
    jj_value lines;
    {
        ts_buf t;
        jj_buf_init(&t, c->arena);
        ts_buf_put(&t, s.s.p, s.s.n);
        ts_buf_putc(&t, '\n');
        jj_args none = {0};
        jj_value joined = buf_value(&t);
        lines = jj_str_method(c, joined, "splitlines", 10, &none);
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    if (first) {
        ts_buf_put(&b, ind.s.p, ind.s.n);
    }
    for (size_t i = 0; i < lines.l->n; i++) {
        jj_value line = lines.l->v[i];
        if (i > 0) {
            ts_buf_putc(&b, '\n');
            if (blank || line.s.n) {
                ts_buf_put(&b, ind.s.p, ind.s.n);
            }
        }
        ts_buf_put(&b, line.s.p, line.s.n);
    }
    jj_step(c, lines.l->n);
    return buf_value(&b);
}

static jj_value f_truncate(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"length", "killwords", "end", "leeway", NULL};
    jj_args_check(c, a, "truncate", 4, kw);
    int64_t length = jj_int_arg(c, jj_arg(a, 0, "length"), 255, "truncate length");
    bool killwords = bool_arg(jj_arg(a, 1, "killwords"), false);
    const jj_value *e = jj_arg(a, 2, "end");
    jj_value end = e ? str_of(c, *e) : jj_cstr("...");
    int64_t leeway = jj_int_arg(c, jj_arg(a, 3, "leeway"), 5, "truncate leeway");
    /* jinja2 measures the value itself: a string, or a list/dict short enough to return as
     * is; anything else has no len(). */
    if (v.type != JJ_STR) {
        int64_t len = jj_length(c, v); /* undefined: 0, returned as is */
        if (len <= length + leeway) {
            return v;
        }
        jj_fail(c, TS_ERR_TYPE, "truncate needs a string, not '%s'", jj_type_name(v));
    }
    jj_value s = str_of(c, v);
    int64_t n = (int64_t)jj_utf8_count(c, s.s.p, s.s.n);
    int64_t end_n = (int64_t)jj_utf8_count(c, end.s.p, end.s.n);
    if (length < end_n) {
        jj_fail(c, TS_ERR_RANGE, "expected length >= %" PRId64 ", got %" PRId64, end_n, length);
    }
    if (leeway < 0) {
        jj_fail(c, TS_ERR_RANGE, "expected leeway >= 0, got %" PRId64, leeway);
    }
    if (n <= length + leeway) {
        return s;
    }
    size_t cut = jj_utf8_offset(c, s.s.p, s.s.n, length - end_n);
    ts_buf b;
    jj_buf_init(&b, c->arena);
    if (killwords) {
        ts_buf_put(&b, s.s.p, cut);
    } else {
        /* s[:length - len(end)].rsplit(" ", 1)[0] */
        size_t k = cut;
        while (k > 0 && s.s.p[k - 1] != ' ') {
            k--;
        }
        ts_buf_put(&b, s.s.p, k ? k - 1 : cut);
    }
    ts_buf_put(&b, end.s.p, end.s.n);
    return buf_value(&b);
}

static jj_value f_sort(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
    jj_args_check(c, a, "sort", 3, kw);
    bool reverse = bool_arg(jj_arg(a, 0, "reverse"), false);
    bool cs = bool_arg(jj_arg(a, 1, "case_sensitive"), false);
    const jj_value *attr = jj_arg(a, 2, "attribute");
    jj_value items = jj_iterate(c, v);
    size_t n = items.l->n;
    sort_item *s = jj_alloc(c->arena, (n ? n : 1) * sizeof(*s));
    for (size_t i = 0; i < n; i++) {
        jj_value k = attr ? attr_path(c, items.l->v[i], *attr) : items.l->v[i];
        s[i] = (sort_item){fold(c, k, cs), items.l->v[i], i};
    }
    sort_items(c, s, n, reverse);
    return list_of(c, s, n, true);
}

static jj_value f_dictsort(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
    jj_args_check(c, a, "dictsort", 3, kw);
    bool cs = bool_arg(jj_arg(a, 0, "case_sensitive"), false);
    const jj_value *by = jj_arg(a, 1, "by");
    bool reverse = bool_arg(jj_arg(a, 2, "reverse"), false);
    bool by_value = false;
    if (by) {
        if (jj_str_eq(*by, "value")) {
            by_value = true;
        } else if (!jj_str_eq(*by, "key")) {
            jj_fail(c, TS_ERR_RANGE, "You can only sort by either \"key\" or \"value\"");
        }
    }
    if (v.type != JJ_DICT) {
        if (v.type == JJ_UNDEF) {
            jj_undef_fail(c, v);
        }
        jj_fail(c, TS_ERR_TYPE, "dictsort needs a mapping, not '%s'", jj_type_name(v));
    }
    size_t n = v.d->n;
    sort_item *s = jj_alloc(c->arena, (n ? n : 1) * sizeof(*s));
    for (size_t i = 0; i < n; i++) {
        jj_value pair = jj_new_list(c, 2);
        pair.flags = JJ_F_TUPLE;
        pair.l->v[0] = v.d->keys[i];
        pair.l->v[1] = v.d->vals[i];
        pair.l->n = 2;
        s[i] = (sort_item){fold(c, by_value ? v.d->vals[i] : v.d->keys[i], cs), pair, i};
    }
    sort_items(c, s, n, reverse);
    return list_of(c, s, n, true);
}

static jj_value f_unique(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    jj_args_check(c, a, "unique", 2, kw);
    bool cs = bool_arg(jj_arg(a, 0, "case_sensitive"), false);
    const jj_value *attr = jj_arg(a, 1, "attribute");
    jj_value items = jj_iterate(c, v);
    jj_value out = jj_new_list(c, 0), seen = jj_new_dict(c, 0); /* hashed: linear overall */
    out.flags = JJ_F_GEN;
    for (size_t i = 0; i < items.l->n; i++) {
        jj_value k = attr ? attr_path(c, items.l->v[i], *attr) : items.l->v[i];
        k = fold(c, k, cs);
        if ((k.type == JJ_LIST && !(k.flags & JJ_F_TUPLE)) || k.type == JJ_DICT) {
            jj_fail(c, TS_ERR_TYPE, "unhashable type: '%s'", jj_type_name(k));
        }
        jj_step(c, 1);
        if (jj_dict_find(c, seen.d, k)) {
            continue;
        }
        jj_dict_set(c, seen.d, k, jj_none());
        jj_list_push(c, out.l, items.l->v[i]);
    }
    return out;
}

static jj_value f_minmax(jj_ctx *c, jj_value v, const jj_args *a, bool max) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    jj_args_check(c, a, max ? "max" : "min", 2, kw);
    bool cs = bool_arg(jj_arg(a, 0, "case_sensitive"), false);
    const jj_value *attr = jj_arg(a, 1, "attribute");
    jj_value items = jj_iterate(c, v);
    if (items.l->n == 0) {
        return jj_undef_msg(c, "No aggregated item, sequence was empty.");
    }
    size_t best = 0;
    jj_value best_key = fold(c, attr ? attr_path(c, items.l->v[0], *attr) : items.l->v[0], cs);
    for (size_t i = 1; i < items.l->n; i++) {
        jj_value k = fold(c, attr ? attr_path(c, items.l->v[i], *attr) : items.l->v[i], cs);
        int r = jj_compare(c, k, best_key, max ? ">" : "<");
        if (max ? r > 0 : r < 0) {
            best = i;
            best_key = k;
        }
    }
    jj_step(c, items.l->n);
    return items.l->v[best];
}

static jj_value f_sum(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"attribute", "start", NULL};
    jj_args_check(c, a, "sum", 2, kw);
    const jj_value *attr = jj_arg(a, 0, "attribute");
    const jj_value *start = jj_arg(a, 1, "start");
    jj_value items = jj_iterate(c, v);
    jj_value acc = start ? *start : jj_int(0);
    for (size_t i = 0; i < items.l->n; i++) {
        jj_value x = attr ? attr_path(c, items.l->v[i], *attr) : items.l->v[i];
        bool ai = acc.type == JJ_INT || acc.type == JJ_BOOL,
             xi = x.type == JJ_INT || x.type == JJ_BOOL;
        if ((ai || acc.type == JJ_FLOAT) && (xi || x.type == JJ_FLOAT)) {
            if (ai && xi) {
                int64_t r;
                if (__builtin_add_overflow(acc.i, x.i, &r)) {
                    jj_fail(c, TS_ERR_RANGE, "integer overflow in sum");
                }
                acc = jj_int(r);
            } else {
                acc = jj_float((ai ? (double)acc.i : acc.f) + (xi ? (double)x.i : x.f));
            }
        } else {
            jj_fail(c, TS_ERR_TYPE, "unsupported operand type(s) for +: '%s' and '%s'",
                    jj_type_name(acc), jj_type_name(x));
        }
    }
    jj_step(c, items.l->n);
    return acc;
}

static jj_value f_batch(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"linecount", "fill_with", NULL};
    jj_args_check(c, a, "batch", 2, kw);
    int64_t size = jj_int_arg(c, jj_arg(a, 0, "linecount"), 0, "batch size");
    const jj_value *fill = jj_arg(a, 1, "fill_with");
    if (size <= 0) {
        jj_fail(c, TS_ERR_RANGE, "batch size must be positive");
    }
    jj_value items = jj_iterate(c, v);
    jj_value out = jj_new_list(c, 0), cur = jj_new_list(c, 0);
    out.flags = JJ_F_GEN;
    for (size_t i = 0; i < items.l->n; i++) {
        if ((int64_t)cur.l->n == size) {
            jj_list_push(c, out.l, cur);
            cur = jj_new_list(c, 0);
        }
        jj_list_push(c, cur.l, items.l->v[i]);
    }
    if (cur.l->n) {
        if (fill) {
            while ((int64_t)cur.l->n < size) {
                jj_list_push(c, cur.l, *fill);
            }
        }
        jj_list_push(c, out.l, cur);
    }
    jj_step(c, items.l->n);
    return out;
}

static jj_value f_striptags(jj_ctx *c, jj_value v) {
    /* Removes <...> tags and <!-- --> comments, then collapses whitespace. */
    jj_value s = str_of(c, v);
    jj_work(c, (uint64_t)s.s.n);
    ts_buf b;
    jj_buf_init(&b, c->arena);
    /* Once a search for "-->" or ">" fails, no later one can succeed: remembering that keeps
     * a string of many unclosed "<" linear. */
    bool no_close_comment = false, no_close_tag = false;
    for (size_t i = 0; i < s.s.n; i++) {
        if (s.s.p[i] == '<' && !no_close_comment && i + 3 < s.s.n &&
            memcmp(s.s.p + i, "<!--", 4) == 0) {
            const char *e = jj_search(c, s.s.p + i + 4, s.s.n - i - 4, "-->", 3, false);
            if (e) {
                i = (size_t)(e - s.s.p) + 2;
                continue;
            }
            no_close_comment = true;
        }
        if (s.s.p[i] == '<' && !no_close_tag) {
            const char *e = memchr(s.s.p + i, '>', s.s.n - i);
            jj_work(c, e ? (size_t)(e - s.s.p) - i : s.s.n - i);
            if (e) {
                i = (size_t)(e - s.s.p);
                continue;
            }
            no_close_tag = true;
        }
        ts_buf_putc(&b, s.s.p[i]);
    }
    jj_value words = jj_split_value(c, buf_value(&b), jj_none(), -1);
    ts_buf o;
    jj_buf_init(&o, c->arena);
    for (size_t i = 0; i < words.l->n; i++) {
        if (i) {
            ts_buf_putc(&o, ' ');
        }
        ts_buf_put(&o, words.l->v[i].s.p, words.l->v[i].s.n);
    }
    return buf_value(&o);
}

static jj_value f_tojson(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jj_args_check(c, a, "tojson", 4, kw);
    bool ascii = bool_arg(jj_arg(a, 0, "ensure_ascii"), false);
    const jj_value *ind = jj_arg(a, 1, "indent");
    const jj_value *seps = jj_arg(a, 2, "separators");
    bool sort_keys = bool_arg(jj_arg(a, 3, "sort_keys"), false);
    bool indent_set = ind && ind->type != JJ_NONE;
    const char *indent = "";
    size_t indent_n = 0;
    if (indent_set) {
        if (ind->type == JJ_STR) {
            indent = ind->s.p;
            indent_n = ind->s.n;
        } else {
            int64_t w = jj_int_arg(c, ind, 0, "tojson indent");
            if (w > 256) {
                jj_fail(c, TS_ERR_LIMIT, "tojson indent %" PRId64 " is too large", w);
            }
            indent_n = w > 0 ? (size_t)w : 0;
            char *sp = jj_alloc(c->arena, indent_n + 1);
            memset(sp, ' ', indent_n);
            indent = sp;
        }
    }
    const char *item_sep = indent_set ? "," : ", ", *key_sep = ": ";
    if (seps && seps->type != JJ_NONE) {
        if (seps->type != JJ_LIST || seps->l->n != 2 || seps->l->v[0].type != JJ_STR ||
            seps->l->v[1].type != JJ_STR) {
            jj_fail(c, TS_ERR_TYPE, "tojson separators must be a pair of strings");
        }
        item_sep = jj_strdup(c->arena, seps->l->v[0].s.p, seps->l->v[0].s.n);
        key_sep = jj_strdup(c->arena, seps->l->v[1].s.p, seps->l->v[1].s.n);
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    jj_json_dump(c, &b, v, indent, indent_n, indent_set, item_sep, key_sep, sort_keys, ascii);
    return buf_value(&b);
}

static jj_value first_last(jj_ctx *c, jj_value v, bool last) {
    if (last && v.type == JJ_LIST && (v.flags & JJ_F_GEN)) {
        jj_fail(c, TS_ERR_TYPE, "'generator' object is not reversible");
    }
    jj_value items = jj_iterate(c, v);
    if (items.l->n == 0) {
        return jj_undef_msg(c, "No %s item, sequence was empty.", last ? "last" : "first");
    }
    return items.l->v[last ? items.l->n - 1 : 0];
}

jj_value jj_filter(jj_ctx *c, const char *name, size_t n, jj_value v, const jj_args *a) {
    jj_step(c, 1);
#define IS(lit)       name_is(name, n, lit)
#define NOARGS(fname) jj_args_check(c, a, fname, 0, NULL)
    if (IS("tojson")) {
        return f_tojson(c, v, a);
    }
    if (IS("trim")) {
        static const char *const kw[] = {"chars", NULL};
        jj_args_check(c, a, "trim", 1, kw);
        const jj_value *ch = jj_arg(a, 0, "chars");
        return jj_strip(c, str_of(c, v), ch ? *ch : jj_none(), true, true);
    }
    if (IS("length") || IS("count")) {
        NOARGS("length");
        if (v.type == JJ_NS || v.type == JJ_FUNC || v.type == JJ_LOOP) {
            return jj_int(v.type == JJ_LOOP ? (int64_t)v.loop->items->n : 0);
        }
        return jj_int(jj_length(c, v));
    }
    if (IS("upper") || IS("lower") || IS("capitalize")) {
        NOARGS("upper/lower/capitalize");
        return jj_case(c, str_of(c, v), IS("upper") ? 'u' : IS("lower") ? 'l' : 'c');
    }
    if (IS("title")) {
        /* jinja2's title: words begin after "-", whitespace or an opening bracket. */
        NOARGS("title");
        jj_value s = str_of(c, v);
        ts_buf b;
        jj_buf_init(&b, c->arena);
        bool start = true;
        for (size_t i = 0; i < s.s.n;) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
            bool sep =
                cp == '-' || jj_is_space(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            uint32_t out = sep ? cp : start ? jj_upper(cp) : jj_lower(cp);
            jj_utf8_put(&b, out);
            start = sep;
            i += adv;
        }
        return buf_value(&b);
    }
    if (IS("join")) {
        return f_join(c, v, a);
    }
    if (IS("map")) {
        return do_map(c, v, a);
    }
    if (IS("select") || IS("reject")) {
        return do_select(c, v, a, false, IS("select"));
    }
    if (IS("selectattr") || IS("rejectattr")) {
        return do_select(c, v, a, true, IS("selectattr"));
    }
    if (IS("first") || IS("last")) {
        NOARGS("first/last");
        return first_last(c, v, IS("last"));
    }
    if (IS("default") || IS("d")) {
        static const char *const kw[] = {"default_value", "boolean", NULL};
        jj_args_check(c, a, "default", 2, kw);
        const jj_value *d = jj_arg(a, 0, "default_value");
        bool boolean = bool_arg(jj_arg(a, 1, "boolean"), false);
        if (v.type == JJ_UNDEF || (boolean && !jj_truthy(v))) {
            return d ? *d : jj_cstr("");
        }
        return v;
    }
    if (IS("items")) {
        NOARGS("items");
        jj_value l = jj_new_list(c, v.type == JJ_DICT ? v.d->n : 0);
        l.flags = JJ_F_GEN;
        if (v.type == JJ_UNDEF) {
            return l;
        }
        if (v.type != JJ_DICT) {
            jj_fail(c, TS_ERR_TYPE, "Can only get item pairs from a mapping.");
        }
        for (size_t i = 0; i < v.d->n; i++) {
            jj_value t = jj_new_list(c, 2);
            t.flags = JJ_F_TUPLE;
            t.l->v[0] = v.d->keys[i];
            t.l->v[1] = v.d->vals[i];
            t.l->n = 2;
            l.l->v[l.l->n++] = t;
        }
        return l;
    }
    if (IS("list")) {
        NOARGS("list");
        jj_value items = jj_iterate(c, v);
        jj_value l = jj_new_list(c, items.l->n);
        memcpy(l.l->v, items.l->v, items.l->n * sizeof(jj_value));
        l.l->n = items.l->n;
        return l;
    }
    if (IS("string")) {
        NOARGS("string");
        return str_of(c, v);
    }
    if (IS("replace")) {
        static const char *const kw[] = {"old", "new", "count", NULL};
        jj_args_check(c, a, "replace", 3, kw);
        const jj_value *o = jj_arg(a, 0, "old"), *nw = jj_arg(a, 1, "new");
        if (!o || !nw) {
            jj_fail(c, TS_ERR_TYPE, "replace needs old and new");
        }
        return jj_replace(c, str_of(c, v), str_of(c, *o), str_of(c, *nw),
                          jj_int_arg(c, jj_arg(a, 2, "count"), -1, "replace count"));
    }
    if (IS("int")) {
        return jj_filter_int(c, v, a);
    }
    if (IS("float")) {
        return jj_filter_float(c, v, a);
    }
    if (IS("round")) {
        return jj_filter_round(c, v, a);
    }
    if (IS("unique")) {
        return f_unique(c, v, a);
    }
    if (IS("dictsort")) {
        return f_dictsort(c, v, a);
    }
    if (IS("sort")) {
        return f_sort(c, v, a);
    }
    if (IS("indent")) {
        return f_indent(c, v, a);
    }
    if (IS("safe")) {
        NOARGS("safe");
        jj_value s = str_of(c, v);
        s.flags |= JJ_F_SAFE;
        return s;
    }
    if (IS("escape") || IS("e") || IS("forceescape")) {
        NOARGS("escape");
        if (IS("forceescape")) {
            v.flags &= (uint8_t)~JJ_F_SAFE;
        }
        return jj_html_escape(c, v);
    }
    if (IS("abs")) {
        NOARGS("abs");
        if (v.type == JJ_FLOAT) {
            return jj_float(fabs(v.f));
        }
        if (v.type == JJ_INT || v.type == JJ_BOOL) {
            if (v.i == INT64_MIN) {
                jj_fail(c, TS_ERR_RANGE, "integer overflow in abs");
            }
            return jj_int(v.i < 0 ? -v.i : v.i);
        }
        jj_fail(c, TS_ERR_TYPE, "bad operand type for abs(): '%s'", jj_type_name(v));
    }
    if (IS("sum")) {
        return f_sum(c, v, a);
    }
    if (IS("min") || IS("max")) {
        return f_minmax(c, v, a, IS("max"));
    }
    if (IS("reverse")) {
        NOARGS("reverse");
        if (v.type == JJ_STR) {
            jj_value chars = jj_iterate(c, v);
            ts_buf b;
            jj_buf_init(&b, c->arena);
            for (size_t i = chars.l->n; i > 0; i--) {
                ts_buf_put(&b, chars.l->v[i - 1].s.p, chars.l->v[i - 1].s.n);
            }
            return buf_value(&b);
        }
        jj_value items = jj_iterate(c, v);
        jj_value l = jj_new_list(c, items.l->n);
        for (size_t i = 0; i < items.l->n; i++) {
            l.l->v[i] = items.l->v[items.l->n - 1 - i];
        }
        l.l->n = items.l->n;
        /* reversed(list) is an iterator; a generator is reversed into a new list. */
        if (v.type == JJ_LIST && !(v.flags & JJ_F_GEN)) {
            l.flags = JJ_F_GEN;
        }
        return l;
    }
    if (IS("batch")) {
        return f_batch(c, v, a);
    }
    if (IS("wordcount")) {
        NOARGS("wordcount");
        jj_value s = str_of(c, v);
        jj_work(c, 2 * (uint64_t)s.s.n);
        int64_t k = 0;
        bool in = false;
        for (size_t i = 0; i < s.s.n;) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
            bool w = jj_is_alpha(cp) || jj_is_digit(cp) || cp == '_';
            k += w && !in;
            in = w;
            i += adv;
        }
        return jj_int(k);
    }
    if (IS("center")) {
        static const char *const kw[] = {"width", NULL};
        jj_args_check(c, a, "center", 1, kw);
        jj_value w = jj_int(jj_int_arg(c, jj_arg(a, 0, "width"), 80, "center width"));
        jj_args pa = {.pos = &w, .n_pos = 1};
        return jj_str_method(c, str_of(c, v), "center", 6, &pa);
    }
    if (IS("format")) {
        jj_value args;
        if (a->n_kw) {
            args = jj_new_dict(c, (size_t)a->n_kw);
            for (int i = 0; i < a->n_kw; i++) {
                jj_dict_set(c, args.d, jj_str(a->kw_names[i], a->kw_n[i]), a->kw[i]);
            }
        } else {
            args = jj_new_list(c, (size_t)a->n_pos);
            args.flags = JJ_F_TUPLE;
            for (int i = 0; i < a->n_pos; i++) {
                args.l->v[i] = a->pos[i];
            }
            args.l->n = (size_t)a->n_pos;
        }
        return jj_format_percent(c, str_of(c, v), args);
    }
    if (IS("truncate")) {
        return f_truncate(c, v, a);
    }
    if (IS("striptags")) {
        NOARGS("striptags");
        return f_striptags(c, v);
    }
    if (IS("attr")) {
        jj_args_check(c, a, "attr", 1, NULL);
        if (a->n_pos != 1 || a->pos[0].type != JJ_STR) {
            jj_fail(c, TS_ERR_TYPE, "attr needs an attribute name");
        }
        if (v.type == JJ_DICT) { /* attr() never falls back to items */
            return jj_undef_msg(c, "'dict object' has no attribute '%.*s'", (int)a->pos[0].s.n,
                                a->pos[0].s.p);
        }
        return jj_getattr(c, v, a->pos[0].s.p, a->pos[0].s.n);
    }
#undef IS
#undef NOARGS
    jj_fail(c, TS_ERR_UNSUPPORTED, "no filter named '%.*s'", (int)n, name);
}
