/*
 * jinja_value.c — values with Python's semantics: constructors, truthiness, equality,
 * ordering, str() and repr(), iteration and length, and the Unicode helpers (UTF-8,
 * whitespace, case) that strings need.
 *
 * Strings count code points the way Python does (len("é") == 1) while stored as UTF-8.
 * Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin;
 * other scripts are left unchanged (docs/templates.md lists this difference).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"
#include "util/utf8.h"

/* ---- constructors ------------------------------------------------------------------- */

jj_value jj_cstr(const char *s) {
    return jj_str(s, strlen(s));
}

jj_value jj_undef(const char *name, size_t n) {
    return (jj_value){.type = JJ_UNDEF, .s = {name, n}};
}

jj_value jj_undef_msg(jj_ctx *c, const char *fmt, ...) {
    char tmp[400];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    size_t n = k < 0 ? 0 : (size_t)k >= sizeof(tmp) ? sizeof(tmp) - 1 : (size_t)k;
    return (jj_value){
        .type = JJ_UNDEF, .flags = JJ_F_UNDEF_MSG, .s = {jj_strdup(c->arena, tmp, n), n}};
}

jj_value jj_new_list(jj_ctx *c, size_t cap) {
    /* Never an empty allocation, so items is never NULL (memcpy of 0 items stays defined). */
    jj_list *l = jj_alloc(c->arena, sizeof(*l));
    cap = cap ? cap : 4;
    l->v = jj_alloc(c->arena, cap * sizeof(jj_value));
    l->cap = cap;
    return (jj_value){.type = JJ_LIST, .l = l};
}

jj_value jj_new_dict(jj_ctx *c, size_t cap) {
    jj_dict *d = jj_alloc(c->arena, sizeof(*d));
    cap = cap ? cap : 4;
    d->keys = jj_alloc(c->arena, cap * sizeof(jj_value));
    d->vals = jj_alloc(c->arena, cap * sizeof(jj_value));
    d->cap = cap;
    return (jj_value){.type = JJ_DICT, .d = d};
}

void jj_note_depth(jj_ctx *c, uint32_t *depth, jj_value v) {
    uint32_t d = v.type == JJ_LIST ? v.l->depth : v.type == JJ_DICT ? v.d->depth : 0;
    if (d + 1 > *depth) {
        if (d + 1 > JJ_MAX_VALUE_DEPTH) {
            jj_fail(c, TS_ERR_LIMIT, "value nested deeper than %d levels", JJ_MAX_VALUE_DEPTH);
        }
        *depth = d + 1;
    }
}

void jj_list_push(jj_ctx *c, jj_list *l, jj_value v) {
    jj_note_depth(c, &l->depth, v);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jj_value *nv = jj_alloc(c->arena, cap * sizeof(jj_value));
        if (l->n) {
            memcpy(nv, l->v, l->n * sizeof(jj_value));
        }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

bool jj_str_eq(jj_value v, const char *s) {
    size_t n = strlen(s);
    return v.type == JJ_STR && v.s.n == n && memcmp(v.s.p, s, n) == 0;
}

/* ---- Python semantics --------------------------------------------------------------- */

bool jj_truthy(jj_value v) {
    switch (v.type) {
    case JJ_UNDEF:
    case JJ_NONE:
        return false;
    case JJ_BOOL:
    case JJ_INT:
        return v.i != 0;
    case JJ_FLOAT:
        return v.f != 0.0;
    case JJ_STR:
        return v.s.n > 0;
    case JJ_LIST:
        return (v.flags & JJ_F_GEN) || v.l->n > 0;
    case JJ_DICT:
        return v.d->n > 0;
    default:
        return true;
    }
}

static bool is_num(jj_value v) {
    return v.type == JJ_BOOL || v.type == JJ_INT || v.type == JJ_FLOAT;
}

bool jj_equal(jj_ctx *c, jj_value a, jj_value b) {
    jj_work(c, 1); /* every comparison costs at least a unit: `x in big_list` in a loop */
    if (is_num(a) && is_num(b)) {
        if (a.type == JJ_FLOAT || b.type == JJ_FLOAT) {
            double x = a.type == JJ_FLOAT ? a.f : (double)a.i;
            double y = b.type == JJ_FLOAT ? b.f : (double)b.i;
            return x == y;
        }
        return a.i == b.i;
    }
    if (a.type != b.type) {
        return false;
    }
    switch (a.type) {
    case JJ_UNDEF:
    case JJ_NONE:
        return true;
    case JJ_STR:
        if (a.s.n != b.s.n) {
            return false;
        }
        jj_work(c, a.s.n);
        return memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case JJ_LIST:
        if ((a.flags | b.flags) & JJ_F_GEN) {
            return a.l == b.l;
        }
        if ((a.flags & JJ_F_TUPLE) != (b.flags & JJ_F_TUPLE) || a.l->n != b.l->n) {
            return false;
        }
        if (a.l == b.l) {
            return true;
        }
        /* The values compared, in bytes: a unit per element undercharged element-wise
         * compares of big lists some 5x against the time budget. */
        jj_work(c, a.l->n * sizeof(jj_value));
        for (size_t i = 0; i < a.l->n; i++) {
            if (!jj_equal(c, a.l->v[i], b.l->v[i])) {
                return false;
            }
        }
        return true;
    case JJ_DICT:
        if (a.d->n != b.d->n) {
            return false;
        }
        if (a.d == b.d) {
            return true;
        }
        jj_work(c, a.d->n * sizeof(jj_value));
        for (size_t i = 0; i < a.d->n; i++) {
            const jj_value *o = jj_dict_find(c, b.d, a.d->keys[i]);
            if (!o || !jj_equal(c, a.d->vals[i], *o)) {
                return false;
            }
        }
        return true;
    case JJ_NS:
        return a.d == b.d;
    case JJ_FUNC:
        return a.fn == b.fn;
    case JJ_LOOP:
        return a.loop == b.loop;
    default:
        return false;
    }
}

const char *jj_type_name(jj_value v) {
    switch (v.type) {
    case JJ_UNDEF:
        return "Undefined";
    case JJ_NONE:
        return "NoneType";
    case JJ_BOOL:
        return "bool";
    case JJ_INT:
        return "int";
    case JJ_FLOAT:
        return "float";
    case JJ_STR:
        return "str";
    case JJ_LIST:
        return v.flags & JJ_F_GEN ? "generator" : v.flags & JJ_F_TUPLE ? "tuple" : "list";
    case JJ_DICT:
        return "dict";
    case JJ_NS:
        return "Namespace";
    case JJ_FUNC:
        return v.fn->kind == JJ_FN_MACRO ? "Macro" : "function";
    case JJ_LOOP:
        return "LoopContext";
    default:
        return "object";
    }
}

int jj_compare(jj_ctx *c, jj_value a, jj_value b, const char *op) {
    jj_work(c, 1);
    if (is_num(a) && is_num(b)) {
        if (a.type != JJ_FLOAT && b.type != JJ_FLOAT) {
            return (a.i > b.i) - (a.i < b.i);
        }
        double x = a.type == JJ_FLOAT ? a.f : (double)a.i;
        double y = b.type == JJ_FLOAT ? b.f : (double)b.i;
        return (x > y) - (x < y);
    }
    if (a.type == JJ_STR && b.type == JJ_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        jj_work(c, n);
        int r = n ? memcmp(a.s.p, b.s.p, n) : 0;
        if (r) {
            return r < 0 ? -1 : 1;
        }
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if (a.type == JJ_LIST && b.type == JJ_LIST &&
        (a.flags & JJ_F_TUPLE) == (b.flags & JJ_F_TUPLE)) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jj_equal(c, a.l->v[i], b.l->v[i])) {
                continue;
            }
            return jj_compare(c, a.l->v[i], b.l->v[i], op);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    if (a.type == JJ_UNDEF) {
        jj_undef_fail(c, a);
    }
    if (b.type == JJ_UNDEF) {
        jj_undef_fail(c, b);
    }
    jj_fail(c, TS_ERR_TYPE, "'%s' not supported between instances of '%s' and '%s'", op,
            jj_type_name(a), jj_type_name(b));
}

void jj_undef_fail(jj_ctx *c, jj_value u) {
    if (u.flags & JJ_F_UNDEF_UNSAFE) {
        jj_fail(c, TS_ERR_UNSUPPORTED, "%.*s", (int)u.s.n, u.s.p);
    }
    if (u.flags & JJ_F_UNDEF_MSG) {
        jj_fail(c, TS_ERR_FORMAT, "%.*s", (int)u.s.n, u.s.p);
    }
    jj_fail(c, TS_ERR_FORMAT, "'%.*s' is undefined", (int)u.s.n, u.s.p);
}

/* ---- printing ----------------------------------------------------------------------- */

void jj_float_repr(double f, char out[40]) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    /* The shortest %e form that reads back as f: its digits and decimal exponent. */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) {
            break;
        }
    }
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg) {
        p++;
    }
    for (; *p && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9') {
            digits[nd++] = *p;
        }
    }
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
    }
    char *o = out;
    if (neg) {
        *o++ = '-';
    }
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) {
                *o++ = (size_t)i < nd ? digits[i] : '0';
            }
            *o++ = '.';
            if ((size_t)exp + 1 < nd) {
                for (size_t i = (size_t)exp + 1; i < nd; i++) {
                    *o++ = digits[i];
                }
            } else {
                *o++ = '0';
            }
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) {
                *o++ = '0';
            }
            for (size_t i = 0; i < nd; i++) {
                *o++ = digits[i];
            }
        }
        *o = 0;
        return;
    }
    *o++ = digits[0];
    if (nd > 1) {
        *o++ = '.';
        for (size_t i = 1; i < nd; i++) {
            *o++ = digits[i];
        }
    }
    snprintf(o, 16, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

/* Python's str.isprintable(), close enough: controls, separators other than the space,
 * format characters, surrogates and private use are not printable. */
static bool printable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) {
        return false;
    }
    if (cp < 0x300) {
        return true;
    }
    if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61c || cp == 0x6dd || cp == 0x70f || cp == 0x180e ||
        cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
        (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || (cp >= 0xd800 && cp <= 0xf8ff) ||
        cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) || cp == 0xfffe || cp == 0xffff ||
        cp >= 0xf0000 || (cp >= 0xe0000 && cp <= 0xe0fff)) {
        return false;
    }
    return true;
}

static void repr_str(ts_buf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    ts_buf_putc(b, q);
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = jj_utf8_decode(s + i, n - i, &adv);
        if (cp == (uint32_t)q || cp == '\\') {
            ts_buf_putc(b, '\\');
            ts_buf_putc(b, (char)cp);
        } else if (cp == '\n') {
            ts_buf_puts(b, "\\n");
        } else if (cp == '\r') {
            ts_buf_puts(b, "\\r");
        } else if (cp == '\t') {
            ts_buf_puts(b, "\\t");
        } else if (!printable(cp)) {
            if (cp < 0x100) {
                ts_buf_printf(b, "\\x%02x", (unsigned)cp);
            } else if (cp < 0x10000) {
                ts_buf_printf(b, "\\u%04x", (unsigned)cp);
            } else {
                ts_buf_printf(b, "\\U%08x", (unsigned)cp);
            }
        } else {
            ts_buf_put(b, s + i, adv);
        }
        i += adv;
    }
    ts_buf_putc(b, q);
}

static void repr_depth(jj_ctx *c, ts_buf *b, jj_value v, int depth);

static void str_depth(jj_ctx *c, ts_buf *b, jj_value v, int depth) {
    char tmp[40];
    switch (v.type) {
    case JJ_UNDEF:
        return;
    case JJ_NONE:
        ts_buf_puts(b, "None");
        return;
    case JJ_BOOL:
        ts_buf_puts(b, v.i ? "True" : "False");
        return;
    case JJ_INT:
        ts_buf_printf(b, "%" PRId64, v.i);
        return;
    case JJ_FLOAT:
        jj_float_repr(v.f, tmp);
        ts_buf_puts(b, tmp);
        return;
    case JJ_STR:
        ts_buf_put(b, v.s.p, v.s.n);
        return;
    default:
        repr_depth(c, b, v, depth);
    }
}

static void repr_depth(jj_ctx *c, ts_buf *b, jj_value v, int depth) {
    if (depth > 512) {
        jj_fail(c, TS_ERR_LIMIT, "value nested deeper than 512 levels");
    }
    switch (v.type) {
    case JJ_STR:
        repr_str(b, v.s.p, v.s.n);
        return;
    case JJ_UNDEF:
        ts_buf_puts(b, "Undefined");
        return;
    case JJ_LIST: {
        if (v.flags & JJ_F_GEN) {
            ts_buf_puts(b, "<generator object>");
            return;
        }
        bool tuple = v.flags & JJ_F_TUPLE;
        ts_buf_putc(b, tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) {
                ts_buf_puts(b, ", ");
            }
            repr_depth(c, b, v.l->v[i], depth + 1);
        }
        if (tuple && v.l->n == 1) {
            ts_buf_putc(b, ',');
        }
        ts_buf_putc(b, tuple ? ')' : ']');
        return;
    }
    case JJ_DICT:
    case JJ_NS:
        if (v.type == JJ_NS) {
            ts_buf_puts(b, "<Namespace ");
        }
        ts_buf_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) {
                ts_buf_puts(b, ", ");
            }
            repr_depth(c, b, v.d->keys[i], depth + 1);
            ts_buf_puts(b, ": ");
            repr_depth(c, b, v.d->vals[i], depth + 1);
        }
        ts_buf_putc(b, '}');
        if (v.type == JJ_NS) {
            ts_buf_putc(b, '>');
        }
        return;
    case JJ_FUNC:
        if (v.fn->kind == JJ_FN_MACRO) {
            ts_buf_printf(b, "<Macro '%.*s'>", (int)v.fn->name_n, v.fn->name);
        } else {
            ts_buf_printf(b, "<built-in method %.*s>", (int)v.fn->name_n, v.fn->name);
        }
        return;
    case JJ_LOOP:
        ts_buf_printf(b, "<LoopContext %zu/%zu>", v.loop->index0 + 1, v.loop->items->n);
        return;
    default:
        str_depth(c, b, v, depth);
    }
}

void jj_str_to(jj_ctx *c, ts_buf *b, jj_value v) {
    str_depth(c, b, v, 0);
}
void jj_repr_to(jj_ctx *c, ts_buf *b, jj_value v) {
    repr_depth(c, b, v, 0);
}

jj_value jj_to_str(jj_ctx *c, jj_value v) {
    if (v.type == JJ_STR) {
        return v;
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    jj_str_to(c, &b, v);
    return jj_str(b.p ? b.p : "", b.n);
}

/* ---- iteration and length ----------------------------------------------------------- */

jj_value jj_iterate(jj_ctx *c, jj_value v) {
    switch (v.type) {
    case JJ_LIST:
        return v;
    case JJ_UNDEF:
        return jj_new_list(c, 0);
    case JJ_DICT: {
        jj_value l = jj_new_list(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) {
            l.l->v[i] = v.d->keys[i];
        }
        l.l->n = v.d->n;
        return l;
    }
    case JJ_STR: {
        jj_value l = jj_new_list(c, jj_utf8_count(c, v.s.p, v.s.n));
        for (size_t i = 0; i < v.s.n;) {
            size_t adv;
            jj_utf8_decode(v.s.p + i, v.s.n - i, &adv);
            l.l->v[l.l->n++] = jj_str(v.s.p + i, adv);
            i += adv;
        }
        return l;
    }
    default:
        jj_fail(c, TS_ERR_TYPE, "'%s' object is not iterable", jj_type_name(v));
    }
}

int64_t jj_length(jj_ctx *c, jj_value v) {
    switch (v.type) {
    case JJ_UNDEF:
        return 0;
    case JJ_STR:
        return (int64_t)jj_utf8_count(c, v.s.p, v.s.n);
    case JJ_LIST:
        if (v.flags & JJ_F_GEN) {
            break;
        }
        return (int64_t)v.l->n;
    case JJ_DICT:
        return (int64_t)v.d->n;
    default:
        break;
    }
    jj_fail(c, TS_ERR_TYPE, "object of type '%s' has no len()", jj_type_name(v));
}

/* ---- UTF-8 and Unicode -------------------------------------------------------------- */

/* Decodes one code point with util/utf8.h; an invalid byte decodes as itself (U+0080..U+00FF)
 * so arbitrary bytes survive printing unchanged. */
uint32_t jj_utf8_decode(const char *s, size_t n, size_t *adv) {
    uint32_t cp;
    size_t k = n ? ts_utf8_decode(s, n, &cp) : 0;
    if (k == 0) {
        *adv = 1;
        return (unsigned char)s[0];
    }
    *adv = k;
    return cp;
}

void jj_utf8_put(ts_buf *b, uint32_t cp) {
    char t[4];
    ts_buf_put(b, t, ts_utf8_encode(cp, t));
}

/* Length of the code point at s[0..n) as jj_utf8_decode reads it, with ASCII and two-byte
 * sequences decided inline: counting and indexing walk whole strings, and a hostile template
 * makes them walk megabytes, so the common cases must not cost a call each. */
static inline size_t cp_len(const char *s, size_t n) {
    unsigned char b = (unsigned char)s[0];
    if (b < 0x80) {
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf && n >= 2 && ((unsigned char)s[1] & 0xc0) == 0x80) {
        return 2;
    }
    size_t adv;
    jj_utf8_decode(s, n, &adv);
    return adv;
}

/* Eight bytes at a time while they are all ASCII (each is then one code point). */
static inline bool ascii8(const char *s) {
    uint64_t x;
    memcpy(&x, s, 8);
    return (x & UINT64_C(0x8080808080808080)) == 0;
}

/* Both walks charge two units per byte: they cost about twice a byte copy. */
size_t jj_utf8_count(jj_ctx *c, const char *s, size_t n) {
    jj_work(c, 2 * (uint64_t)n);
    size_t k = 0, i = 0;
    while (i < n) {
        if (n - i >= 8 && ascii8(s + i)) {
            i += 8;
            k += 8;
            continue;
        }
        i += cp_len(s + i, n - i);
        k++;
    }
    return k;
}

size_t jj_utf8_offset(jj_ctx *c, const char *s, size_t n, int64_t cp) {
    size_t i = 0;
    int64_t k = 0;
    while (k < cp && i < n) {
        if (cp - k >= 8 && n - i >= 8 && ascii8(s + i)) {
            i += 8;
            k += 8;
            continue;
        }
        i += cp_len(s + i, n - i);
        k++;
    }
    jj_work(c, 2 * (uint64_t)i);
    return i;
}

bool jj_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool jj_is_digit(uint32_t cp) {
    return cp >= '0' && cp <= '9';
}

bool jj_is_alpha(uint32_t cp) {
    if (cp < 0x80) {
        return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    }
    if (cp == 0xaa || cp == 0xb5 || cp == 0xba) {
        return true;
    }
    if (cp < 0xc0 || cp == 0xd7 || cp == 0xf7) {
        return false;
    }
    /* Punctuation, symbols and spaces of the common blocks are not letters. */
    if ((cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) ||
        (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff20) ||
        (cp >= 0xff3b && cp <= 0xff40) || (cp >= 0xff5b && cp <= 0xff65) ||
        (cp >= 0x1f000 && cp <= 0x1faff) || (cp >= 0xd800 && cp <= 0xf8ff)) {
        return false;
    }
    return !jj_is_space(cp);
}

uint32_t jj_upper(uint32_t cp) {
    if (cp < 0x80) {
        return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    }
    if (cp == 0xb5) {
        return 0x39c;
    }
    if (cp == 0xff) {
        return 0x178;
    }
    if (cp >= 0xe0 && cp <= 0xfe && cp != 0xf7) {
        return cp - 32;
    }
    if (cp >= 0x100 && cp <= 0x17f) {
        if (cp == 0x131) {
            return 'I';
        }
        if (cp == 0x17f) {
            return 'S';
        }
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) {
            return (cp & 1) ? cp : cp - 1;
        }
        if (cp == 0x130 || cp == 0x138 || cp == 0x149 || cp == 0x178) {
            return cp;
        }
        return (cp & 1) ? cp - 1 : cp;
    }
    if (cp >= 0x3b1 && cp <= 0x3c9 && cp != 0x3c2) {
        return cp - 32;
    }
    if (cp == 0x3c2) {
        return 0x3a3;
    }
    if (cp >= 0x3ac && cp <= 0x3af) {
        return cp == 0x3ac ? 0x386 : cp - 37;
    }
    if (cp >= 0x430 && cp <= 0x44f) {
        return cp - 32;
    }
    if (cp >= 0x450 && cp <= 0x45f) {
        return cp - 80;
    }
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48a && cp <= 0x4bf)) {
        return (cp & 1) ? cp - 1 : cp;
    }
    if (cp >= 0xff41 && cp <= 0xff5a) {
        return cp - 32;
    }
    return cp;
}

uint32_t jj_lower(uint32_t cp) {
    if (cp < 0x80) {
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    }
    if (cp >= 0xc0 && cp <= 0xde && cp != 0xd7) {
        return cp + 32;
    }
    if (cp == 0x178) {
        return 0xff;
    }
    if (cp >= 0x100 && cp <= 0x17f) {
        if (cp == 0x130) {
            return 'i';
        }
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) {
            return (cp & 1) ? cp + 1 : cp;
        }
        if (cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17f) {
            return cp;
        }
        return (cp & 1) ? cp : cp + 1;
    }
    if (cp >= 0x391 && cp <= 0x3a9 && cp != 0x3a2) {
        return cp + 32;
    }
    if (cp == 0x386) {
        return 0x3ac;
    }
    if (cp >= 0x388 && cp <= 0x38a) {
        return cp + 37;
    }
    if (cp >= 0x410 && cp <= 0x42f) {
        return cp + 32;
    }
    if (cp >= 0x400 && cp <= 0x40f) {
        return cp + 80;
    }
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48a && cp <= 0x4bf)) {
        return (cp & 1) ? cp : cp + 1;
    }
    if (cp >= 0xff21 && cp <= 0xff3a) {
        return cp + 32;
    }
    return cp;
}
