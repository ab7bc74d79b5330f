/*
 * jinja_str.c — Python's str methods that templates call (strip, split, startswith,
 * replace, title, format, ...), shared with the filters that wrap them (trim, replace,
 * upper, title, capitalize, ...), and printf-style `str % args` / the format filter. Indices
 * and lengths count code points, as in Python.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_internal.h"

static bool name_is(const char *name, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static jj_value buf_value(ts_buf *b) {
    return jj_str(b->p ? b->p : "", b->n);
}

static bool cp_in(uint32_t cp, jj_value chars) {
    for (size_t i = 0; i < chars.s.n;) {
        size_t adv;
        if (jj_utf8_decode(chars.s.p + i, chars.s.n - i, &adv) == cp) {
            return true;
        }
        i += adv;
    }
    return false;
}

/* Strips whitespace (chars undefined/none) or the given characters from either side. Each
 * code point looked at charges its test: two units, or the length of chars it is searched
 * in (a hostile strip of megabytes by megabytes of characters stops at max_work). */
jj_value jj_strip(jj_ctx *c, jj_value s, jj_value chars, bool left, bool right) {
    bool ws = chars.type != JJ_STR;
    uint64_t cost = ws ? 2 : 2 + (uint64_t)chars.s.n;
    size_t a = 0, b = s.s.n;
    while (left && a < b) {
        jj_work(c, cost);
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.s.p + a, b - a, &adv);
        if (ws ? !jj_is_space(cp) : !cp_in(cp, chars)) {
            break;
        }
        a += adv;
    }
    while (right && b > a) {
        jj_work(c, cost);
        size_t start = b - 1;
        while (start > a && ((unsigned char)s.s.p[start] & 0xc0) == 0x80) {
            start--;
        }
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.s.p + start, b - start, &adv);
        if (start + adv != b) {
            start = b - 1, cp = (unsigned char)s.s.p[start];
        }
        if (ws ? !jj_is_space(cp) : !cp_in(cp, chars)) {
            break;
        }
        b = start;
    }
    return jj_str(s.s.p + a, b - a);
}

/* mode: 'u' upper, 'l' lower, 's' swapcase, 'c' capitalize, 't' title (Python's str.title:
 * a letter after a non-letter starts a word). */
jj_value jj_case(jj_ctx *c, jj_value s, char mode) {
    jj_work(c, 2 * (uint64_t)s.s.n); /* one pass over every code point */
    ts_buf b;
    jj_buf_init(&b, c->arena);
    bool prev_alpha = false, first = true;
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
        uint32_t out = cp;
        switch (mode) {
        case 'u':
            out = jj_upper(cp);
            break;
        case 'l':
            out = jj_lower(cp);
            break;
        case 's':
            out = jj_upper(cp) != cp ? jj_upper(cp) : jj_lower(cp);
            break;
        case 'c':
            out = first ? jj_upper(cp) : jj_lower(cp);
            break;
        case 't':
            out = prev_alpha ? jj_lower(cp) : jj_upper(cp);
            break;
        default:
            break;
        }
        prev_alpha = jj_is_alpha(cp);
        first = false;
        if (out == cp) {
            ts_buf_put(&b, s.s.p + i, adv);
        } else {
            jj_utf8_put(&b, out);
        }
        i += adv;
    }
    return buf_value(&b);
}

jj_value jj_replace(jj_ctx *c, jj_value s, jj_value old, jj_value new, int64_t count) {
    ts_buf b;
    jj_buf_init(&b, c->arena);
    if (old.s.n == 0) {
        /* Python inserts new between every character (and at both ends). */
        int64_t done = 0;
        for (size_t i = 0; i <= s.s.n;) {
            if (count < 0 || done < count) {
                ts_buf_put(&b, new.s.p, new.s.n);
                done++;
            }
            if (i == s.s.n) {
                break;
            }
            size_t adv;
            jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
            ts_buf_put(&b, s.s.p + i, adv);
            i += adv;
        }
        jj_step(c, s.s.n);
        return buf_value(&b);
    }
    const char *p = s.s.p, *end = s.s.p + s.s.n;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const char *hit = jj_search(c, p, (size_t)(end - p), old.s.p, old.s.n, false);
        if (!hit) {
            break;
        }
        ts_buf_put(&b, p, (size_t)(hit - p));
        ts_buf_put(&b, new.s.p, new.s.n);
        p = hit + old.s.n;
        done++;
    }
    ts_buf_put(&b, p, (size_t)(end - p));
    jj_step(c, (uint64_t)done);
    return buf_value(&b);
}

/* Python's str.split / rsplit; sep undefined/none splits on runs of whitespace. */
static jj_value split(jj_ctx *c, jj_value s, jj_value sep, int64_t maxsplit, bool from_right) {
    jj_work(c, 2 * (uint64_t)s.s.n); /* whitespace splitting reads every code point */
    jj_value out = jj_new_list(c, 0);
    if (sep.type == JJ_STR) {
        if (sep.s.n == 0) {
            jj_fail(c, TS_ERR_RANGE, "empty separator");
        }
        if (!from_right) {
            const char *p = s.s.p, *end = s.s.p + s.s.n;
            for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
                const char *hit = jj_search(c, p, (size_t)(end - p), sep.s.p, sep.s.n, false);
                if (!hit) {
                    break;
                }
                jj_list_push(c, out.l, jj_str(p, (size_t)(hit - p)));
                p = hit + sep.s.n;
            }
            jj_list_push(c, out.l, jj_str(p, (size_t)(end - p)));
        } else {
            size_t end = s.s.n;
            jj_value rev = jj_new_list(c, 0);
            for (int64_t k = 0; maxsplit < 0 || k < maxsplit; k++) {
                size_t i = end;
                bool found = false;
                const char *hit = jj_search(c, s.s.p, end, sep.s.p, sep.s.n, true);
                if (hit) {
                    found = true;
                    i = (size_t)(hit - s.s.p) + sep.s.n;
                }
                if (!found) {
                    break;
                }
                jj_list_push(c, rev.l, jj_str(s.s.p + i, end - i));
                end = i - sep.s.n;
            }
            jj_list_push(c, out.l, jj_str(s.s.p, end));
            for (size_t i = rev.l->n; i > 0; i--) {
                jj_list_push(c, out.l, rev.l->v[i - 1]);
            }
        }
        jj_step(c, out.l->n);
        return out;
    }
    /* Whitespace splitting: the words, with maxsplit leaving the rest (left-stripped) as is. */
    jj_value words = jj_new_list(c, 0);
    size_t i = 0;
    int64_t k = 0;
    jj_value trimmed = from_right ? jj_strip(c, s, jj_none(), false, true) : s;
    if (from_right && maxsplit >= 0) {
        /* rsplit with a limit: split from the right. */
        size_t end = trimmed.s.n;
        jj_value rev = jj_new_list(c, 0);
        while (k < maxsplit) {
            size_t e = end;
            while (e > 0 && jj_is_space((unsigned char)trimmed.s.p[e - 1])) {
                e--;
            }
            if (e == 0) {
                break;
            }
            size_t b = e;
            while (b > 0 && !jj_is_space((unsigned char)trimmed.s.p[b - 1])) {
                b--;
            }
            if (b == 0) {
                end = e;
                break;
            }
            jj_list_push(c, rev.l, jj_str(trimmed.s.p + b, e - b));
            end = b;
            k++;
        }
        jj_value head = jj_strip(c, jj_str(trimmed.s.p, end), jj_none(), false, true);
        if (head.s.n) {
            jj_list_push(c, out.l, head);
        }
        for (size_t r = rev.l->n; r > 0; r--) {
            jj_list_push(c, out.l, rev.l->v[r - 1]);
        }
        return out;
    }
    while (i < s.s.n) {
        size_t adv;
        while (i < s.s.n && jj_is_space(jj_utf8_decode(s.s.p + i, s.s.n - i, &adv))) {
            i += adv;
        }
        if (i >= s.s.n) {
            break;
        }
        if (maxsplit >= 0 && k == maxsplit) {
            jj_list_push(c, words.l, jj_str(s.s.p + i, s.s.n - i));
            break;
        }
        size_t b = i;
        while (i < s.s.n && !jj_is_space(jj_utf8_decode(s.s.p + i, s.s.n - i, &adv))) {
            i += adv;
        }
        jj_list_push(c, words.l, jj_str(s.s.p + b, i - b));
        k++;
    }
    jj_step(c, words.l->n);
    return words;
}

static jj_value want_str(jj_ctx *c, const jj_value *v, const char *what) {
    if (!v) {
        jj_fail(c, TS_ERR_TYPE, "%s: missing argument", what);
    }
    if (v->type == JJ_UNDEF) {
        jj_undef_fail(c, *v);
    }
    if (v->type != JJ_STR) {
        jj_fail(c, TS_ERR_TYPE, "%s: must be str, not %s", what, jj_type_name(*v));
    }
    return *v;
}

static int64_t opt_int(jj_ctx *c, const jj_value *v, int64_t dflt, const char *what) {
    if (!v || v->type == JJ_NONE) {
        return dflt;
    }
    if (v->type == JJ_INT || v->type == JJ_BOOL) {
        return v->i;
    }
    jj_fail(c, TS_ERR_TYPE, "%s: '%s' object cannot be interpreted as an integer", what,
            jj_type_name(*v));
}

static bool affix(jj_ctx *c, jj_value s, const jj_value *arg, bool end, const char *what) {
    if (arg && arg->type == JJ_LIST && (arg->flags & JJ_F_TUPLE)) {
        for (size_t i = 0; i < arg->l->n; i++) {
            if (affix(c, s, &arg->l->v[i], end, what)) {
                return true;
            }
        }
        return false;
    }
    jj_value p = want_str(c, arg, what);
    if (p.s.n > s.s.n) {
        return false;
    }
    jj_work(c, p.s.n);
    return memcmp(end ? s.s.p + s.s.n - p.s.n : s.s.p, p.s.p, p.s.n) == 0;
}

/* Python's str.format with {} / {0} / {name} fields, !r / !s conversions and {{ }}. */
static jj_value format(jj_ctx *c, jj_value fmt, const jj_args *a) {
    ts_buf b;
    jj_buf_init(&b, c->arena);
    int auto_idx = 0;
    const char *p = fmt.s.p, *end = p + fmt.s.n;
    while (p < end) {
        if (*p == '{' && p + 1 < end && p[1] == '{') {
            ts_buf_putc(&b, '{');
            p += 2;
            continue;
        }
        if (*p == '}' && p + 1 < end && p[1] == '}') {
            ts_buf_putc(&b, '}');
            p += 2;
            continue;
        }
        if (*p == '}') {
            jj_fail(c, TS_ERR_FORMAT, "format: single '}' encountered in format string");
        }
        if (*p != '{') {
            ts_buf_putc(&b, *p++);
            continue;
        }
        const char *q = ++p;
        while (q < end && *q != '}') {
            q++;
        }
        if (q >= end) {
            jj_fail(c, TS_ERR_FORMAT, "format: single '{' encountered in format string");
        }
        const char *field = p, *fend = q;
        char conv = 0;
        for (const char *r = field; r < fend; r++) {
            if (*r == ':') {
                jj_fail(c, TS_ERR_UNSUPPORTED, "format: format specs ({x:spec}) are not supported");
            }
            if (*r == '!' && r + 1 < fend) {
                conv = r[1];
                fend = r;
                break;
            }
        }
        const jj_value *v;
        if (fend == field) {
            v = jj_arg(a, auto_idx++, NULL);
        } else if (*field >= '0' && *field <= '9') {
            int idx = 0; /* saturates: any index past the arguments is simply missing */
            for (const char *r = field; r < fend && *r >= '0' && *r <= '9'; r++) {
                idx = idx > 100000 ? idx : idx * 10 + (*r - '0');
            }
            v = idx < a->n_pos ? &a->pos[idx] : NULL;
        } else {
            v = NULL;
            for (int i = 0; i < a->n_kw; i++) {
                if (a->kw_n[i] == (size_t)(fend - field) &&
                    memcmp(a->kw_names[i], field, a->kw_n[i]) == 0) {
                    v = &a->kw[i];
                }
            }
        }
        if (!v) {
            jj_fail(c, TS_ERR_RANGE, "format: no argument for field '{%.*s}'", (int)(q - field),
                    field);
        }
        if (conv == 'r') {
            jj_repr_to(c, &b, *v);
        } else {
            jj_str_to(c, &b, *v);
        }
        p = q + 1;
    }
    return buf_value(&b);
}

static int64_t find(jj_ctx *c, jj_value s, jj_value sub, bool from_right) {
    const char *hit = jj_search(c, s.s.p, s.s.n, sub.s.p, sub.s.n, from_right);
    return hit ? (int64_t)jj_utf8_count(c, s.s.p, (size_t)(hit - s.s.p)) : -1;
}

static jj_value pad(jj_ctx *c, jj_value s, const jj_args *a, char how) {
    int64_t width = opt_int(c, jj_arg(a, 0, NULL), 0, "width");
    jj_value fill = a->n_pos > 1 ? want_str(c, &a->pos[1], "fillchar") : jj_cstr(" ");
    int64_t len = (int64_t)jj_utf8_count(c, s.s.p, s.s.n);
    if (width <= len) {
        return s;
    }
    if (width > (int64_t)c->max_output) {
        jj_fail(c, TS_ERR_LIMIT, "padding width beyond the output limit");
    }
    int64_t total = width - len, left = how == 'l' ? 0 : how == 'r' ? total : total / 2;
    if (how == 'c') {
        left = total / 2 + (total & width & 1);
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    for (int64_t i = 0; i < left; i++) {
        ts_buf_put(&b, fill.s.p, fill.s.n);
    }
    ts_buf_put(&b, s.s.p, s.s.n);
    for (int64_t i = left; i < total; i++) {
        ts_buf_put(&b, fill.s.p, fill.s.n);
    }
    return buf_value(&b);
}

static bool all_chars(jj_value s, bool (*pred)(uint32_t)) {
    if (s.s.n == 0) {
        return false;
    }
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        if (!pred(jj_utf8_decode(s.s.p + i, s.s.n - i, &adv))) {
            return false;
        }
        i += adv;
    }
    return true;
}

static bool is_alnum(uint32_t cp) {
    return jj_is_alpha(cp) || jj_is_digit(cp);
}

/* isupper / islower: at least one cased character and none of the other case. */
static bool cased(jj_value s, bool upper) {
    bool any = false;
    for (size_t i = 0; i < s.s.n;) {
        size_t adv;
        uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
        i += adv;
        bool is_up = jj_lower(cp) != cp, is_low = jj_upper(cp) != cp;
        if (upper ? is_low : is_up) {
            return false;
        }
        any |= upper ? is_up : is_low;
    }
    return any;
}

jj_value jj_split_value(jj_ctx *c, jj_value s, jj_value sep, int64_t maxsplit) {
    return split(c, s, sep, maxsplit, false);
}

jj_value jj_str_method(jj_ctx *c, jj_value s, const char *name, size_t n, const jj_args *a) {
    const jj_value *a0 = jj_arg(a, 0, NULL);
    jj_value none = jj_none();
    jj_step(c, 1 + s.s.n / 64);
    if (name_is(name, n, "strip") || name_is(name, n, "lstrip") || name_is(name, n, "rstrip")) {
        jj_args_check(c, a, "strip()", 1, NULL);
        jj_value chars = a0 ? *a0 : none;
        if (chars.type != JJ_STR && chars.type != JJ_NONE) {
            jj_fail(c, TS_ERR_TYPE, "%.*s arg must be None or str", (int)n, name);
        }
        return jj_strip(c, s, chars, name[0] != 'r', name[0] != 'l');
    }
    if (name_is(name, n, "split") || name_is(name, n, "rsplit")) {
        static const char *const kw[] = {"sep", "maxsplit", NULL};
        jj_args_check(c, a, "split()", 2, kw);
        const jj_value *sep = jj_arg(a, 0, "sep");
        int64_t maxsplit = opt_int(c, jj_arg(a, 1, "maxsplit"), -1, "maxsplit");
        jj_value sv = sep ? *sep : none;
        if (sv.type != JJ_STR && sv.type != JJ_NONE) {
            jj_fail(c, TS_ERR_TYPE, "must be str or None, not %s", jj_type_name(sv));
        }
        return split(c, s, sv, maxsplit, name[0] == 'r');
    }
    if (name_is(name, n, "startswith") || name_is(name, n, "endswith")) {
        jj_args_check(c, a, "startswith()", 1, NULL);
        return jj_bool(affix(c, s, a0, name[0] == 'e', "startswith/endswith"));
    }
    if (name_is(name, n, "upper")) {
        return jj_case(c, s, 'u');
    }
    if (name_is(name, n, "lower")) {
        return jj_case(c, s, 'l');
    }
    if (name_is(name, n, "title")) {
        return jj_case(c, s, 't');
    }
    if (name_is(name, n, "capitalize")) {
        return jj_case(c, s, 'c');
    }
    if (name_is(name, n, "swapcase")) {
        return jj_case(c, s, 's');
    }
    if (name_is(name, n, "replace")) {
        jj_args_check(c, a, "replace()", 3, NULL);
        return jj_replace(c, s, want_str(c, a0, "replace()"),
                          want_str(c, jj_arg(a, 1, NULL), "replace()"),
                          opt_int(c, jj_arg(a, 2, NULL), -1, "replace()"));
    }
    if (name_is(name, n, "find") || name_is(name, n, "rfind") || name_is(name, n, "index") ||
        name_is(name, n, "rindex")) {
        jj_args_check(c, a, "find()", 1, NULL);
        int64_t r = find(c, s, want_str(c, a0, "find()"), name[0] == 'r');
        if (r < 0 && (name_is(name, n, "index") || name_is(name, n, "rindex"))) {
            jj_fail(c, TS_ERR_RANGE, "substring not found");
        }
        return jj_int(r);
    }
    if (name_is(name, n, "count")) {
        jj_args_check(c, a, "count()", 1, NULL);
        jj_value sub = want_str(c, a0, "count()");
        if (sub.s.n == 0) {
            return jj_int((int64_t)jj_utf8_count(c, s.s.p, s.s.n) + 1);
        }
        int64_t k = 0;
        const char *p = s.s.p, *end = s.s.p + s.s.n, *hit;
        while ((hit = jj_search(c, p, (size_t)(end - p), sub.s.p, sub.s.n, false)) != NULL) {
            k++;
            p = hit + sub.s.n;
        }
        return jj_int(k);
    }
    if (name_is(name, n, "join")) {
        jj_args_check(c, a, "join()", 1, NULL);
        if (!a0) {
            jj_fail(c, TS_ERR_TYPE, "join() takes exactly one argument");
        }
        jj_value items = jj_iterate(c, *a0);
        ts_buf b;
        jj_buf_init(&b, c->arena);
        for (size_t i = 0; i < items.l->n; i++) {
            if (items.l->v[i].type != JJ_STR) {
                jj_fail(c, TS_ERR_TYPE, "sequence item %zu: expected str instance, %s found", i,
                        jj_type_name(items.l->v[i]));
            }
            if (i) {
                ts_buf_put(&b, s.s.p, s.s.n);
            }
            ts_buf_put(&b, items.l->v[i].s.p, items.l->v[i].s.n);
        }
        jj_step(c, items.l->n);
        return buf_value(&b);
    }
    if (name_is(name, n, "format")) {
        return format(c, s, a);
    }
    if (name_is(name, n, "splitlines")) {
        jj_work(c, 2 * (uint64_t)s.s.n);
        static const char *const kw[] = {"keepends", NULL};
        jj_args_check(c, a, "splitlines()", 1, kw);
        const jj_value *ke = jj_arg(a, 0, "keepends");
        bool keep = ke && jj_truthy(*ke);
        jj_value out = jj_new_list(c, 0);
        size_t start = 0;
        for (size_t i = 0; i < s.s.n;) {
            size_t adv;
            uint32_t cp = jj_utf8_decode(s.s.p + i, s.s.n - i, &adv);
            bool nl = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c ||
                      cp == 0x1d || cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            if (!nl) {
                i += adv;
                continue;
            }
            size_t after = i + adv;
            if (cp == '\r' && after < s.s.n && s.s.p[after] == '\n') {
                after++;
            }
            jj_list_push(c, out.l, jj_str(s.s.p + start, (keep ? after : i) - start));
            start = i = after;
        }
        if (start < s.s.n) {
            jj_list_push(c, out.l, jj_str(s.s.p + start, s.s.n - start));
        }
        return out;
    }
    if (n > 2 && name[0] == 'i' && name[1] == 's') {
        jj_work(c, 2 * (uint64_t)s.s.n); /* the is* methods below read every code point */
    }
    if (name_is(name, n, "isdigit") || name_is(name, n, "isdecimal") ||
        name_is(name, n, "isnumeric")) {
        return jj_bool(all_chars(s, jj_is_digit));
    }
    if (name_is(name, n, "isalpha")) {
        return jj_bool(all_chars(s, jj_is_alpha));
    }
    if (name_is(name, n, "isalnum")) {
        return jj_bool(all_chars(s, is_alnum));
    }
    if (name_is(name, n, "isspace")) {
        return jj_bool(all_chars(s, jj_is_space));
    }
    if (name_is(name, n, "isupper")) {
        return jj_bool(cased(s, true));
    }
    if (name_is(name, n, "islower")) {
        return jj_bool(cased(s, false));
    }
    if (name_is(name, n, "removeprefix") || name_is(name, n, "removesuffix")) {
        jj_args_check(c, a, "removeprefix()", 1, NULL);
        jj_value p = want_str(c, a0, "removeprefix()");
        bool suffix = name[6] == 's';
        if (affix(c, s, a0, suffix, "removeprefix()")) {
            return suffix ? jj_str(s.s.p, s.s.n - p.s.n) : jj_str(s.s.p + p.s.n, s.s.n - p.s.n);
        }
        return s;
    }
    if (name_is(name, n, "zfill")) {
        int64_t width = opt_int(c, a0, 0, "zfill()");
        int64_t len = (int64_t)jj_utf8_count(c, s.s.p, s.s.n);
        if (width <= len) {
            return s;
        }
        if (width > (int64_t)c->max_output) {
            jj_fail(c, TS_ERR_LIMIT, "zfill width beyond the output limit");
        }
        ts_buf b;
        jj_buf_init(&b, c->arena);
        size_t sign = s.s.n && (s.s.p[0] == '-' || s.s.p[0] == '+');
        ts_buf_put(&b, s.s.p, sign);
        for (int64_t i = len; i < width; i++) {
            ts_buf_putc(&b, '0');
        }
        ts_buf_put(&b, s.s.p + sign, s.s.n - sign);
        return buf_value(&b);
    }
    if (name_is(name, n, "ljust")) {
        return pad(c, s, a, 'l');
    }
    if (name_is(name, n, "rjust")) {
        return pad(c, s, a, 'r');
    }
    if (name_is(name, n, "center")) {
        return pad(c, s, a, 'c');
    }
    if (name_is(name, n, "partition") || name_is(name, n, "rpartition")) {
        jj_value sep = want_str(c, a0, "partition()");
        if (sep.s.n == 0) {
            jj_fail(c, TS_ERR_RANGE, "empty separator");
        }
        jj_value t = jj_new_list(c, 3);
        t.flags = JJ_F_TUPLE;
        t.l->n = 3;
        int64_t at = find(c, s, sep, name[0] == 'r');
        if (at < 0) {
            bool r = name[0] == 'r';
            t.l->v[0] = r ? jj_cstr("") : s;
            t.l->v[1] = jj_cstr("");
            t.l->v[2] = r ? s : jj_cstr("");
            return t;
        }
        size_t off = jj_utf8_offset(c, s.s.p, s.s.n, at);
        t.l->v[0] = jj_str(s.s.p, off);
        t.l->v[1] = sep;
        t.l->v[2] = jj_str(s.s.p + off + sep.s.n, s.s.n - off - sep.s.n);
        return t;
    }
    jj_fail(c, TS_ERR_INTERNAL, "str.%.*s is listed but not implemented", (int)n, name);
}

/* ---- printf-style formatting -------------------------------------------------------- */

/* The largest width or precision a % format may ask for: far beyond any real use, small
 * enough that the result stays a few hundred KiB. */
#define MAX_FORMAT_WIDTH 100000

/* Reads a width / precision's digits at *pp: -1 when there are none; past MAX_FORMAT_WIDTH
 * an error naming the number as written (read without overflow however long it is). */
static int64_t read_spec_num(jj_ctx *c, const char **pp, const char *end, const char *what) {
    const char *p = *pp, *start = p;
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v <= MAX_FORMAT_WIDTH) {
            v = v * 10 + (*p - '0');
        }
        p++;
    }
    *pp = p;
    if (p == start) {
        return -1;
    }
    if (v > MAX_FORMAT_WIDTH) {
        jj_fail(c, TS_ERR_LIMIT, "format %s %.*s exceeds the limit of %d", what,
                (int)(p - start > 30 ? 30 : p - start), start, MAX_FORMAT_WIDTH);
    }
    return v;
}

static void pad_spaces(ts_buf *b, int64_t n) {
    static const char spaces[] = "                                ";
    while (n > 0) {
        size_t k = n > 32 ? 32 : (size_t)n;
        ts_buf_put(b, spaces, k);
        n -= (int64_t)k;
    }
}

/* "%" flags [width] [.prec] length conv into spec (64 bytes: at most 5 flags and two
 * six-digit numbers). */
static void make_spec(char spec[64], const char *flags, size_t nf, int64_t width, int64_t prec,
                      const char *length, char conv, bool drop_hash) {
    size_t k = 0;
    spec[k++] = '%';
    for (size_t i = 0; i < nf; i++) {
        if (!(drop_hash && flags[i] == '#')) {
            spec[k++] = flags[i];
        }
    }
    if (width >= 0) {
        k += (size_t)snprintf(spec + k, 64 - k, "%d", (int)width);
    }
    if (prec >= 0) {
        k += (size_t)snprintf(spec + k, 64 - k, ".%d", (int)prec);
    }
    snprintf(spec + k, 64 - k, "%s%c", length, conv);
}

jj_value jj_format_percent(jj_ctx *c, jj_value fmt, jj_value args) {
    ts_buf b;
    jj_buf_init(&b, c->arena);
    bool tuple = args.type == JJ_LIST && (args.flags & JJ_F_TUPLE);
    bool mapping = args.type == JJ_DICT;
    size_t next = 0;
    const char *p = fmt.s.p, *end = p + fmt.s.n;
    while (p < end) {
        if (*p != '%') {
            ts_buf_putc(&b, *p++);
            continue;
        }
        if (++p >= end) {
            jj_fail(c, TS_ERR_FORMAT, "incomplete format");
        }
        if (*p == '%') {
            ts_buf_putc(&b, '%');
            p++;
            continue;
        }
        jj_value v;
        if (*p == '(') {
            const char *q = memchr(p, ')', (size_t)(end - p));
            if (!q || !mapping) {
                jj_fail(c, TS_ERR_FORMAT, "format requires a mapping");
            }
            const jj_value *hit = jj_dict_get(args.d, p + 1, (size_t)(q - p - 1));
            if (!hit) {
                jj_fail(c, TS_ERR_RANGE, "format key '%.*s' not found", (int)(q - p - 1), p + 1);
            }
            v = *hit;
            p = q + 1;
        } else if (tuple) {
            if (next >= args.l->n) {
                jj_fail(c, TS_ERR_TYPE, "not enough arguments for format string");
            }
            v = args.l->v[next++];
        } else {
            if (next++ > 0) {
                jj_fail(c, TS_ERR_TYPE, "not enough arguments for format string");
            }
            v = args;
        }
        /* Flags, width and precision as Python reads them. Width and precision are bounded
         * (a format must not ask for gigabytes of padding or digits) and what is allowed is
         * printed in full; numbers then go to C's printf with the same spec. */
        char flags[8];
        size_t nf = 0;
        while (p < end && *p && strchr("-+ #0", *p)) {
            if (nf < 5 && !memchr(flags, *p, nf)) {
                flags[nf++] = *p;
            }
            p++;
        }
        int64_t width = read_spec_num(c, &p, end, "width");
        int64_t prec = -1;
        if (p < end && *p == '.') {
            p++;
            prec = read_spec_num(c, &p, end, "precision");
            prec = prec < 0 ? 0 : prec;
        }
        if (p >= end) {
            jj_fail(c, TS_ERR_FORMAT, "incomplete format");
        }
        char conv = *p++;
        bool left = memchr(flags, '-', nf) != NULL;
        switch (conv) {
        case 's':
        case 'r': {
            ts_buf sb;
            jj_buf_init(&sb, c->arena);
            if (conv == 'r') {
                jj_repr_to(c, &sb, v);
            } else {
                jj_str_to(c, &sb, v);
            }
            /* Python counts code points for both the precision (a cut) and the width. */
            size_t bytes = sb.n;
            if (prec >= 0) {
                bytes = jj_utf8_offset(c, sb.p ? sb.p : "", sb.n, prec);
            }
            int64_t len = width > 0 ? (int64_t)jj_utf8_count(c, sb.p ? sb.p : "", bytes) : 0;
            if (!left) {
                pad_spaces(&b, width - len);
            }
            ts_buf_put(&b, sb.p, bytes);
            if (left) {
                pad_spaces(&b, width - len);
            }
            break;
        }
        case 'd':
        case 'i':
        case 'x':
        case 'X':
        case 'o': {
            if (v.type == JJ_FLOAT && conv != 'd' && conv != 'i') {
                jj_fail(c, TS_ERR_TYPE, "%%%c format: an integer is required, not float", conv);
            }
            char spec[64];
            if (v.type == JJ_FLOAT) {
                if (!isfinite(v.f)) {
                    jj_fail(c, TS_ERR_RANGE, "cannot convert float %s to integer",
                            isnan(v.f) ? "NaN" : "infinity");
                }
                if (fabs(v.f) >= 9.2e18) {
                    /* Python prints the float's exact integer value; so does %.0f. */
                    make_spec(spec, flags, nf, width, 0, "", 'f', false);
                    ts_buf_printf(&b, spec, trunc(v.f));
                    break;
                }
                v = jj_int((int64_t)v.f);
            }
            if (v.type != JJ_INT && v.type != JJ_BOOL) {
                jj_fail(c, TS_ERR_TYPE, "%%%c format: a real number is required, not %s", conv,
                        jj_type_name(v));
            }
            /* '#' means nothing for %d in Python and is undefined for it in C. */
            make_spec(spec, flags, nf, width, prec, "ll", conv == 'i' ? 'd' : conv,
                      conv == 'd' || conv == 'i');
            ts_buf_printf(&b, spec, (long long)v.i);
            break;
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G': {
            if (v.type != JJ_INT && v.type != JJ_BOOL && v.type != JJ_FLOAT) {
                jj_fail(c, TS_ERR_TYPE, "must be real number, not %s", jj_type_name(v));
            }
            double d = v.type == JJ_FLOAT ? v.f : (double)v.i;
            char spec[64];
            make_spec(spec, flags, nf, width, prec, "", conv, false);
            ts_buf_printf(&b, spec, d);
            break;
        }
        default:
            jj_fail(c, TS_ERR_UNSUPPORTED, "unsupported format character '%c'", conv);
        }
    }
    /* Python: a lone argument no conversion used is an error unless it is a mapping or a
     * sequence other than str (those have __getitem__ and count as a mapping). */
    bool unused = tuple ? next < args.l->n
                        : next == 0 && !mapping && args.type != JJ_LIST && args.type != JJ_NS;
    if (unused) {
        jj_fail(c, TS_ERR_TYPE, "not all arguments converted during string formatting");
    }
    return buf_value(&b);
}
