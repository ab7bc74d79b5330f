/*
 * jinja_call.c — attribute and item access as jinja2's ImmutableSandboxedEnvironment does
 * it, calls, the globals (range, namespace, dict, raise_exception, strftime_now) and the
 * methods of strings, dicts, lists and the loop object.
 *
 * Access: x.name looks for a method first, then a dict key; x[key] looks for the item
 * first, then (for a string key) a method. A missing one is undefined with jinja2's message.
 * Methods that would mutate a list or dict (append, pop, update, ...) and names starting
 * with "_" give an "unsafe" undefined: testing it with `is defined` is fine, using it fails
 * with the sandbox's security message (TS_ERR_UNSUPPORTED).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template/jinja_internal.h"

#define MAX_RANGE 100000 /* jinja2's sandbox refuses larger ranges */

static bool name_is(const char *name, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static bool in_list(const char *name, size_t n, const char *const *list) {
    for (int i = 0; list[i]; i++) {
        if (name_is(name, n, list[i])) {
            return true;
        }
    }
    return false;
}

/* ---- arguments ---------------------------------------------------------------------- */

jj_value *jj_arg(const jj_args *a, int index, const char *name) {
    if (name) {
        for (int i = 0; i < a->n_kw; i++) {
            if (name_is(a->kw_names[i], a->kw_n[i], name)) {
                return &a->kw[i];
            }
        }
    }
    if (index >= 0 && index < a->n_pos) {
        return &a->pos[index];
    }
    return NULL;
}

void jj_args_check(jj_ctx *c, const jj_args *a, const char *fname, int max_pos,
                   const char *const *kw_allowed) {
    if (a->n_pos > max_pos) {
        jj_fail(c, TS_ERR_TYPE, "%s takes at most %d positional argument%s (%d given)", fname,
                max_pos, max_pos == 1 ? "" : "s", a->n_pos);
    }
    for (int i = 0; i < a->n_kw; i++) {
        int k = 0;
        for (; kw_allowed && kw_allowed[k]; k++) {
            if (name_is(a->kw_names[i], a->kw_n[i], kw_allowed[k])) {
                if (k < a->n_pos) {
                    jj_fail(c, TS_ERR_TYPE, "%s got multiple values for argument '%s'", fname,
                            kw_allowed[k]);
                }
                break;
            }
        }
        if (!kw_allowed || !kw_allowed[k]) {
            jj_fail(c, TS_ERR_TYPE, "%s got an unexpected keyword argument '%.*s'", fname,
                    (int)a->kw_n[i], a->kw_names[i]);
        }
    }
}

static jj_value bound(jj_ctx *c, jj_value self, const char *name, size_t n, int kind) {
    jj_func *fn = jj_alloc(c->arena, sizeof(*fn));
    fn->kind = kind;
    fn->self = self;
    fn->name = name;
    fn->name_n = n;
    return (jj_value){.type = JJ_FUNC, .fn = fn};
}

/* ---- attribute and item access ------------------------------------------------------ */

static const char *const STR_METHODS[] = {
    "strip",        "lstrip",  "rstrip",     "split",   "rsplit",     "startswith",
    "endswith",     "upper",   "lower",      "title",   "capitalize", "swapcase",
    "replace",      "find",    "rfind",      "index",   "rindex",     "count",
    "join",         "format",  "splitlines", "isdigit", "isdecimal",  "isnumeric",
    "isalpha",      "isalnum", "isspace",    "isupper", "islower",    "removeprefix",
    "removesuffix", "zfill",   "ljust",      "rjust",   "center",     "partition",
    "rpartition",   NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const DICT_MUTATORS[] = {"update",     "pop",   "popitem",
                                            "setdefault", "clear", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
static const char *const LIST_MUTATORS[] = {"append",  "extend", "insert", "pop", "remove",
                                            "reverse", "sort",   "clear",  NULL};

static jj_value unsafe(jj_ctx *c, jj_value obj, const char *name, size_t n) {
    jj_value u = jj_undef_msg(c, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n,
                              name, jj_type_name(obj));
    u.flags |= JJ_F_UNDEF_UNSAFE;
    return u;
}

static jj_value no_attr(jj_ctx *c, jj_value obj, const char *name, size_t n) {
    if (obj.type == JJ_NONE) {
        return jj_undef_msg(c, "'None' has no attribute '%.*s'", (int)n, name);
    }
    return jj_undef_msg(c, "'%s object' has no attribute '%.*s'", jj_type_name(obj), (int)n, name);
}

static jj_value loop_attr(jj_ctx *c, jj_value v, const char *name, size_t n, bool *found) {
    const jj_loop *L = v.loop;
    int64_t len = (int64_t)L->items->n, i = (int64_t)L->index0;
    *found = true;
    if (name_is(name, n, "index")) {
        return jj_int(i + 1);
    }
    if (name_is(name, n, "index0")) {
        return jj_int(i);
    }
    if (name_is(name, n, "revindex")) {
        return jj_int(len - i);
    }
    if (name_is(name, n, "revindex0")) {
        return jj_int(len - i - 1);
    }
    if (name_is(name, n, "first")) {
        return jj_bool(i == 0);
    }
    if (name_is(name, n, "last")) {
        return jj_bool(i == len - 1);
    }
    if (name_is(name, n, "length")) {
        return jj_int(len);
    }
    if (name_is(name, n, "depth")) {
        return jj_int(1);
    }
    if (name_is(name, n, "depth0")) {
        return jj_int(0);
    }
    if (name_is(name, n, "previtem")) {
        return i > 0 ? L->items->v[i - 1] : jj_undef_msg(c, "there is no previous item");
    }
    if (name_is(name, n, "nextitem")) {
        return i + 1 < len ? L->items->v[i + 1] : jj_undef_msg(c, "there is no next item");
    }
    if (name_is(name, n, "cycle") || name_is(name, n, "changed")) {
        return bound(c, v, name, n, JJ_FN_METHOD);
    }
    *found = false;
    return jj_none();
}

jj_value jj_getattr(jj_ctx *c, jj_value obj, const char *name, size_t n) {
    switch (obj.type) {
    case JJ_UNDEF:
        jj_undef_fail(c, obj);
    case JJ_DICT:
        if (in_list(name, n, DICT_METHODS)) {
            return bound(c, obj, name, n, JJ_FN_METHOD);
        }
        if (in_list(name, n, DICT_MUTATORS)) {
            return unsafe(c, obj, name, n);
        }
        {
            const jj_value *v = jj_dict_get(obj.d, name, n);
            if (v) {
                return *v;
            }
        }
        return no_attr(c, obj, name, n);
    case JJ_NS: {
        const jj_value *v = jj_dict_get(obj.d, name, n);
        return v ? *v : no_attr(c, obj, name, n);
    }
    case JJ_STR:
        if (in_list(name, n, STR_METHODS)) {
            return bound(c, obj, name, n, JJ_FN_METHOD);
        }
        break;
    case JJ_LIST:
        if (in_list(name, n, LIST_METHODS)) {
            return bound(c, obj, name, n, JJ_FN_METHOD);
        }
        if (!(obj.flags & JJ_F_TUPLE) && in_list(name, n, LIST_MUTATORS)) {
            return unsafe(c, obj, name, n);
        }
        break;
    case JJ_LOOP: {
        bool found;
        jj_value v = loop_attr(c, obj, name, n, &found);
        if (found) {
            return v;
        }
        break;
    }
    default:
        break;
    }
    if (n && name[0] == '_') {
        return unsafe(c, obj, name, n);
    }
    return no_attr(c, obj, name, n);
}

jj_value jj_getitem(jj_ctx *c, jj_value obj, jj_value key) {
    switch (obj.type) {
    case JJ_UNDEF:
        jj_undef_fail(c, obj);
    case JJ_DICT: {
        const jj_value *v = jj_dict_find(c, obj.d, key);
        if (v) {
            return *v;
        }
        break;
    }
    case JJ_LIST:
    case JJ_STR:
        if ((key.type == JJ_INT || key.type == JJ_BOOL) && !(obj.flags & JJ_F_GEN)) {
            int64_t len = obj.type == JJ_LIST ? (int64_t)obj.l->n : jj_length(c, obj);
            int64_t i = key.i < 0 ? key.i + len : key.i;
            if (i >= 0 && i < len) {
                if (obj.type == JJ_LIST) {
                    return obj.l->v[i];
                }
                size_t off = jj_utf8_offset(c, obj.s.p, obj.s.n, i), adv;
                jj_utf8_decode(obj.s.p + off, obj.s.n - off, &adv);
                return jj_str(obj.s.p + off, adv);
            }
        }
        break;
    case JJ_NS:
    case JJ_LOOP:
        if (key.type == JJ_STR) {
            return jj_getattr(c, obj, key.s.p, key.s.n);
        }
        break;
    default:
        break;
    }
    if (key.type == JJ_STR && obj.type != JJ_NS && obj.type != JJ_LOOP) {
        jj_value v = jj_getattr(c, obj, key.s.p, key.s.n);
        if (v.type != JJ_UNDEF || (v.flags & JJ_F_UNDEF_UNSAFE)) {
            return v;
        }
    }
    if (key.type == JJ_STR) {
        return no_attr(c, obj, key.s.p, key.s.n);
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    jj_repr_to(c, &b, key);
    if (obj.type == JJ_NONE) {
        return jj_undef_msg(c, "None has no element %.*s", (int)(b.n > 100 ? 100 : b.n), b.p);
    }
    return jj_undef_msg(c, "'%s object' has no element %.*s", jj_type_name(obj),
                        (int)(b.n > 100 ? 100 : b.n), b.p);
}

/* ---- globals ------------------------------------------------------------------------ */

static const char *const GLOBALS[] = {"range",           "namespace",    "dict",
                                      "raise_exception", "strftime_now", NULL};

jj_value jj_global(jj_ctx *c, const char *name, size_t n) {
    for (int i = 0; GLOBALS[i]; i++) {
        if (name_is(name, n, GLOBALS[i])) {
            return bound(c, jj_none(), GLOBALS[i], strlen(GLOBALS[i]), JJ_FN_GLOBAL);
        }
    }
    return jj_undef(name, n);
}

static int64_t want_int(jj_ctx *c, jj_value v, const char *what) {
    if (v.type == JJ_INT || v.type == JJ_BOOL) {
        return v.i;
    }
    if (v.type == JJ_UNDEF) {
        jj_undef_fail(c, v);
    }
    jj_fail(c, TS_ERR_TYPE, "%s: '%s' object cannot be interpreted as an integer", what,
            jj_type_name(v));
}

static jj_value g_range(jj_ctx *c, const jj_args *a) {
    jj_args_check(c, a, "range()", 3, NULL);
    if (a->n_pos == 0) {
        jj_fail(c, TS_ERR_TYPE, "range expected at least 1 argument, got 0");
    }
    int64_t start = 0, stop, step = 1;
    if (a->n_pos == 1) {
        stop = want_int(c, a->pos[0], "range()");
    } else {
        start = want_int(c, a->pos[0], "range()");
        stop = want_int(c, a->pos[1], "range()");
        if (a->n_pos == 3) {
            step = want_int(c, a->pos[2], "range()");
        }
    }
    if (step == 0) {
        jj_fail(c, TS_ERR_RANGE, "range() arg 3 must not be zero");
    }
    /* The count without overflow: ceil((stop - start) / step) when positive. */
    /* In doubles: differences of extreme int64 values (and -INT64_MIN) overflow int64. */
    double count = step > 0 ? ((double)stop - (double)start) / (double)step
                            : ((double)start - (double)stop) / -(double)step;
    if (count > MAX_RANGE) {
        jj_fail(c, TS_ERR_LIMIT,
                "range too big: the sandbox blocks ranges larger than MAX_RANGE (%d)", MAX_RANGE);
    }
    jj_value l = jj_new_list(c, count > 0 ? (size_t)count + 1 : 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        jj_list_push(c, l.l, jj_int(i));
        if (__builtin_add_overflow(i, step, &i)) {
            break;
        }
    }
    jj_step(c, l.l->n);
    return l;
}

/* dict(mapping or pairs, **kw) and namespace(...) share this: a new dict from arguments. */
static jj_value dict_from_args(jj_ctx *c, const jj_args *a, const char *fname) {
    if (a->n_pos > 1) {
        jj_fail(c, TS_ERR_TYPE, "%s expected at most 1 positional argument, got %d", fname,
                a->n_pos);
    }
    jj_value d = jj_new_dict(c, 0);
    if (a->n_pos == 1) {
        jj_value src = a->pos[0];
        if (src.type == JJ_DICT || src.type == JJ_NS) {
            for (size_t i = 0; i < src.d->n; i++) {
                jj_dict_set(c, d.d, src.d->keys[i], src.d->vals[i]);
            }
        } else {
            jj_value items = jj_iterate(c, src);
            for (size_t i = 0; i < items.l->n; i++) {
                jj_value pair = jj_iterate(c, items.l->v[i]);
                if (pair.l->n != 2) {
                    jj_fail(c, TS_ERR_TYPE,
                            "%s: sequence element #%zu has length %zu; 2 is required", fname, i,
                            pair.l->n);
                }
                jj_dict_set(c, d.d, pair.l->v[0], pair.l->v[1]);
            }
        }
    }
    for (int i = 0; i < a->n_kw; i++) {
        jj_dict_set(c, d.d, jj_str(a->kw_names[i], a->kw_n[i]), a->kw[i]);
    }
    return d;
}

static jj_value g_strftime(jj_ctx *c, const jj_args *a) {
    jj_args_check(c, a, "strftime_now()", 1, NULL);
    if (a->n_pos != 1 || a->pos[0].type != JJ_STR) {
        jj_fail(c, TS_ERR_TYPE, "strftime_now() needs one string argument (the format)");
    }
    time_t t = (time_t)c->now;
    struct tm tm;
    gmtime_r(&t, &tm);
    char fmt[256], out[512];
    if (a->pos[0].s.n >= sizeof(fmt)) {
        jj_fail(c, TS_ERR_RANGE, "strftime_now(): format longer than %zu bytes", sizeof(fmt));
    }
    memcpy(fmt, a->pos[0].s.p, a->pos[0].s.n);
    fmt[a->pos[0].s.n] = 0;
    size_t n = a->pos[0].s.n ? strftime(out, sizeof(out), fmt, &tm) : 0;
    if (n == 0 && a->pos[0].s.n > 0 && strchr(fmt, '%') == NULL) {
        /* strftime returns 0 both for an empty result and for a too-small buffer. */
        n = strlen(fmt) < sizeof(out) ? (size_t)snprintf(out, sizeof(out), "%s", fmt) : 0;
    }
    return jj_str(jj_strdup(c->arena, out, n), n);
}

static jj_value call_global(jj_ctx *c, const jj_func *fn, const jj_args *a) {
    const char *name = fn->name;
    size_t n = fn->name_n;
    if (name_is(name, n, "range")) {
        return g_range(c, a);
    }
    if (name_is(name, n, "dict")) {
        return dict_from_args(c, a, "dict()");
    }
    if (name_is(name, n, "namespace")) {
        jj_value d = dict_from_args(c, a, "namespace()");
        for (size_t i = 0; i < d.d->n; i++) {
            if (d.d->keys[i].type == JJ_STR && d.d->keys[i].s.n && d.d->keys[i].s.p[0] == '_') {
                jj_fail(c, TS_ERR_UNSUPPORTED,
                        "chat templates cannot store underscore-prefixed attributes on a "
                        "namespace, but got '%.*s'",
                        (int)d.d->keys[i].s.n, d.d->keys[i].s.p);
            }
        }
        d.type = JJ_NS;
        return d;
    }
    if (name_is(name, n, "raise_exception")) {
        jj_value msg = a->n_pos ? jj_to_str(c, a->pos[0]) : jj_cstr("");
        int shown = msg.s.n > TS_ERROR_MSG_MAX ? TS_ERROR_MSG_MAX : (int)msg.s.n;
        ts_error_set(c->err, TS_ERR_ABORTED, "template raised: %.*s", shown, msg.s.p);
        jj_arena_fail(c->arena);
    }
    if (name_is(name, n, "strftime_now")) {
        return g_strftime(c, a);
    }
    jj_fail(c, TS_ERR_INTERNAL, "unknown global '%.*s'", (int)n, name);
}

/* ---- string methods ----------------------------------------------------------------- */

jj_value jj_str_method(jj_ctx *c, jj_value s, const char *name, size_t n, const jj_args *a);

static jj_value loop_method(jj_ctx *c, jj_value self, const char *name, size_t n,
                            const jj_args *a) {
    if (name_is(name, n, "cycle")) {
        if (a->n_pos == 0) {
            jj_fail(c, TS_ERR_TYPE, "no items for cycling given");
        }
        return a->pos[self.loop->index0 % (size_t)a->n_pos];
    }
    /* changed(*values): whether the values differ from the previous call's. */
    jj_value now = jj_new_list(c, (size_t)a->n_pos);
    for (int i = 0; i < a->n_pos; i++) {
        now.l->v[i] = a->pos[i];
    }
    now.l->n = (size_t)a->n_pos;
    bool changed =
        self.loop->changed_last.type != JJ_LIST || !jj_equal(c, self.loop->changed_last, now);
    self.loop->changed_last = now;
    return jj_bool(changed);
}

static jj_value dict_method(jj_ctx *c, jj_value self, const char *name, size_t n,
                            const jj_args *a) {
    const jj_dict *d = self.d;
    if (name_is(name, n, "get")) {
        jj_args_check(c, a, "dict.get()", 2, NULL);
        if (a->n_pos < 1) {
            jj_fail(c, TS_ERR_TYPE, "get expected at least 1 argument, got 0");
        }
        const jj_value *v = jj_dict_find(c, d, a->pos[0]);
        return v ? *v : a->n_pos > 1 ? a->pos[1] : jj_none();
    }
    jj_args_check(c, a, "dict method", 0, NULL);
    if (name_is(name, n, "copy")) {
        jj_value r = jj_new_dict(c, d->n);
        for (size_t i = 0; i < d->n; i++) {
            jj_dict_set(c, r.d, d->keys[i], d->vals[i]);
        }
        return r;
    }
    jj_value l = jj_new_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (name_is(name, n, "keys")) {
            l.l->v[i] = d->keys[i];
        } else if (name_is(name, n, "values")) {
            l.l->v[i] = d->vals[i];
        } else {
            jj_value t = jj_new_list(c, 2);
            t.flags = JJ_F_TUPLE;
            t.l->v[0] = d->keys[i];
            t.l->v[1] = d->vals[i];
            t.l->n = 2;
            l.l->v[i] = t;
        }
    }
    l.l->n = d->n;
    jj_step(c, d->n);
    return l;
}

static jj_value list_method(jj_ctx *c, jj_value self, const char *name, size_t n,
                            const jj_args *a) {
    if (name_is(name, n, "copy")) {
        jj_value r = jj_new_list(c, self.l->n);
        memcpy(r.l->v, self.l->v, self.l->n * sizeof(jj_value));
        r.l->n = self.l->n;
        return r;
    }
    jj_args_check(c, a, name_is(name, n, "index") ? "list.index()" : "list.count()", 1, NULL);
    if (a->n_pos != 1) {
        jj_fail(c, TS_ERR_TYPE, "%.*s() takes exactly one argument", (int)n, name);
    }
    jj_step(c, self.l->n);
    int64_t count = 0;
    for (size_t i = 0; i < self.l->n; i++) {
        if (!jj_equal(c, self.l->v[i], a->pos[0])) {
            continue;
        }
        if (name_is(name, n, "index")) {
            return jj_int((int64_t)i);
        }
        count++;
    }
    if (name_is(name, n, "index")) {
        jj_fail(c, TS_ERR_RANGE, "list.index(x): x not in list");
    }
    return jj_int(count);
}

jj_value jj_call(jj_ctx *c, jj_value fn, const jj_args *args) {
    if (fn.type == JJ_UNDEF) {
        jj_undef_fail(c, fn);
    }
    if (fn.type != JJ_FUNC) {
        jj_fail(c, TS_ERR_TYPE, "'%s' object is not callable", jj_type_name(fn));
    }
    jj_func *f = fn.fn;
    switch (f->kind) {
    case JJ_FN_MACRO:
        return jj_call_macro(c, f, args);
    case JJ_FN_CALLER:
        return jj_call_caller(c, f, args);
    case JJ_FN_GLOBAL:
        return call_global(c, f, args);
    default:
        break;
    }
    switch (f->self.type) {
    case JJ_STR:
        return jj_str_method(c, f->self, f->name, f->name_n, args);
    case JJ_DICT:
        return dict_method(c, f->self, f->name, f->name_n, args);
    case JJ_LIST:
        return list_method(c, f->self, f->name, f->name_n, args);
    case JJ_LOOP:
        return loop_method(c, f->self, f->name, f->name_n, args);
    default:
        jj_fail(c, TS_ERR_INTERNAL, "method on a '%s'", jj_type_name(f->self));
    }
}
