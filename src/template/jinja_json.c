/*
 * jinja_json.c — the render's variables from JSON, and values back to JSON as Python's
 * json.dumps writes them (the tojson filter).
 *
 * The reader is strict (RFC 8259: no comments, trailing commas, NaN or control characters
 * in strings; UTF-8 checked) and keeps what Python's json keeps: integers vs floats and key
 * order. Nesting is capped at MAX_JSON_DEPTH. The writer matches json.dumps byte for byte:
 * ", " / ": " separators (or "," with an indent), floats as repr() (1.0, 1e-05, 1e+20),
 * non-ASCII kept unless ensure_ascii, and \" \\ \n \r \t \b \f with \u00XX for the other
 * control characters.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"
#include "util/json_str.h"
#include "util/utf8.h"

#define MAX_JSON_DEPTH 512

typedef struct jreader {
    jj_ctx *c;
    const char *s;
    size_t n, pos;
    int depth;
} jreader;

JJ_NORETURN static void jfail(jreader *r, const char *what) {
    ts_error_set(r->c->err, TS_ERR_FORMAT, "vars: JSON offset %zu: %s", r->pos, what);
    jj_arena_fail(r->c->arena);
}

static void skip_ws(jreader *r) {
    while (r->pos < r->n && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' ||
                             r->s[r->pos] == '\r')) {
        r->pos++;
    }
}

static bool lit(jreader *r, const char *word) {
    size_t k = strlen(word);
    if (r->pos + k <= r->n && memcmp(r->s + r->pos, word, k) == 0) {
        r->pos += k;
        return true;
    }
    return false;
}

static int hex4(jreader *r) {
    if (r->pos + 4 > r->n) {
        jfail(r, "truncated \\u escape");
    }
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = r->s[r->pos + (size_t)i];
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) {
            jfail(r, "bad \\u escape");
        }
        v = v * 16 + d;
    }
    r->pos += 4;
    return v;
}

static jj_value read_string(jreader *r) {
    r->pos++; /* " */
    ts_buf b;
    jj_buf_init(&b, r->c->arena);
    size_t run = r->pos;
    for (;;) {
        if (r->pos >= r->n) {
            jfail(r, "unterminated string");
        }
        unsigned char ch = (unsigned char)r->s[r->pos];
        if (ch == '"') {
            ts_buf_put(&b, r->s + run, r->pos - run);
            r->pos++;
            break;
        }
        if (ch < 0x20) {
            jfail(r, "control character in a string");
        }
        if (ch >= 0x80) {
            uint32_t cp;
            size_t adv = ts_utf8_decode(r->s + r->pos, r->n - r->pos, &cp);
            if (adv == 0) {
                jfail(r, "invalid UTF-8 in a string");
            }
            r->pos += adv;
            continue;
        }
        if (ch != '\\') {
            r->pos++;
            continue;
        }
        ts_buf_put(&b, r->s + run, r->pos - run);
        r->pos++;
        if (r->pos >= r->n) {
            jfail(r, "unterminated escape");
        }
        char e = r->s[r->pos++];
        switch (e) {
        case '"':
            ts_buf_putc(&b, '"');
            break;
        case '\\':
            ts_buf_putc(&b, '\\');
            break;
        case '/':
            ts_buf_putc(&b, '/');
            break;
        case 'b':
            ts_buf_putc(&b, '\b');
            break;
        case 'f':
            ts_buf_putc(&b, '\f');
            break;
        case 'n':
            ts_buf_putc(&b, '\n');
            break;
        case 'r':
            ts_buf_putc(&b, '\r');
            break;
        case 't':
            ts_buf_putc(&b, '\t');
            break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(r);
            if (cp >= 0xd800 && cp < 0xdc00 && r->pos + 6 <= r->n && r->s[r->pos] == '\\' &&
                r->s[r->pos + 1] == 'u') {
                size_t save = r->pos;
                r->pos += 2;
                uint32_t lo = (uint32_t)hex4(r);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else {
                    r->pos = save;
                }
            }
            /* A lone surrogate is kept as its 3-byte form, as Python keeps it in a str. */
            jj_utf8_put(&b, cp);
            break;
        }
        default:
            jfail(r, "bad escape");
        }
        run = r->pos;
    }
    return jj_str(b.p ? b.p : "", b.n);
}

static jj_value read_number(jreader *r) {
    size_t start = r->pos;
    bool is_float = false;
    if (r->s[r->pos] == '-') {
        r->pos++;
    }
    if (r->pos >= r->n || r->s[r->pos] < '0' || r->s[r->pos] > '9') {
        jfail(r, "bad number");
    }
    if (r->s[r->pos] == '0') {
        r->pos++;
    } else {
        while (r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9') {
            r->pos++;
        }
    }
    if (r->pos < r->n && r->s[r->pos] == '.') {
        is_float = true;
        r->pos++;
        if (r->pos >= r->n || r->s[r->pos] < '0' || r->s[r->pos] > '9') {
            jfail(r, "bad number: digits must follow '.'");
        }
        while (r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9') {
            r->pos++;
        }
    }
    if (r->pos < r->n && (r->s[r->pos] == 'e' || r->s[r->pos] == 'E')) {
        is_float = true;
        r->pos++;
        if (r->pos < r->n && (r->s[r->pos] == '+' || r->s[r->pos] == '-')) {
            r->pos++;
        }
        if (r->pos >= r->n || r->s[r->pos] < '0' || r->s[r->pos] > '9') {
            jfail(r, "bad number: digits must follow the exponent");
        }
        while (r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9') {
            r->pos++;
        }
    }
    char buf[400];
    size_t len = r->pos - start;
    if (len >= sizeof(buf)) {
        jfail(r, "number too long");
    }
    memcpy(buf, r->s + start, len);
    buf[len] = 0;
    if (is_float) {
        return jj_float(strtod(buf, NULL));
    }
    bool neg = buf[0] == '-';
    uint64_t v = 0;
    for (const char *p = buf + neg; *p; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
            jfail(r, "integer out of the 64-bit range");
        }
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)INT64_MAX + neg) {
        jfail(r, "integer out of the 64-bit range");
    }
    return jj_int(neg ? (int64_t)(0 - v) : (int64_t)v);
}

static jj_value read_value(jreader *r) {
    skip_ws(r);
    if (r->pos >= r->n) {
        jfail(r, "unexpected end of input");
    }
    char ch = r->s[r->pos];
    if (ch == '{' || ch == '[') {
        if (++r->depth > MAX_JSON_DEPTH) {
            jfail(r, "nested deeper than 512 levels");
        }
        r->pos++;
        bool obj = ch == '{';
        jj_value v = obj ? jj_new_dict(r->c, 0) : jj_new_list(r->c, 0);
        skip_ws(r);
        if (r->pos < r->n && r->s[r->pos] == (obj ? '}' : ']')) {
            r->pos++;
            r->depth--;
            return v;
        }
        for (;;) {
            if (obj) {
                skip_ws(r);
                if (r->pos >= r->n || r->s[r->pos] != '"') {
                    jfail(r, "expected a string key");
                }
                jj_value k = read_string(r);
                skip_ws(r);
                if (r->pos >= r->n || r->s[r->pos] != ':') {
                    jfail(r, "expected ':'");
                }
                r->pos++;
                jj_dict_set(r->c, v.d, k, read_value(r));
            } else {
                jj_list_push(r->c, v.l, read_value(r));
            }
            skip_ws(r);
            if (r->pos < r->n && r->s[r->pos] == ',') {
                r->pos++;
                continue;
            }
            if (r->pos < r->n && r->s[r->pos] == (obj ? '}' : ']')) {
                r->pos++;
                break;
            }
            jfail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        r->depth--;
        return v;
    }
    if (ch == '"') {
        return read_string(r);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        return read_number(r);
    }
    if (lit(r, "true")) {
        return jj_bool(true);
    }
    if (lit(r, "false")) {
        return jj_bool(false);
    }
    if (lit(r, "null")) {
        return jj_none();
    }
    jfail(r, "unexpected character");
}

jj_value jj_json_parse(jj_ctx *c, const char *s, size_t n) {
    jreader r = {.c = c, .s = s, .n = n};
    jj_value v = read_value(&r);
    skip_ws(&r);
    if (r.pos != r.n) {
        jfail(&r, "trailing characters after the value");
    }
    return v;
}

/* ---- writer ------------------------------------------------------------------------- */

typedef struct jwriter {
    jj_ctx *c;
    ts_buf *b;
    const char *indent;
    size_t indent_n;
    bool indent_set, sort_keys, ascii;
    const char *item_sep, *key_sep;
} jwriter;

/* util/json_str.h writes what json.dumps writes for a str: the short escapes, \u00XX for the
 * other control characters, and with ensure_ascii every code point past 0x7E as \uXXXX
 * (surrogate pairs past U+FFFF). */
static void put_string(jwriter *w, const char *s, size_t n) {
    jj_work(w->c, n);
    ts_json_put_str(w->b, s, n, w->ascii ? TS_JSON_ASCII : 0);
}

static void newline(jwriter *w, int level) {
    ts_buf_putc(w->b, '\n');
    for (int i = 0; i < level; i++) {
        ts_buf_put(w->b, w->indent, w->indent_n);
    }
}

static void put_float(jwriter *w, double f) {
    if (isnan(f)) {
        ts_buf_puts(w->b, "NaN");
    } else if (isinf(f)) {
        ts_buf_puts(w->b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        char tmp[40];
        jj_float_repr(f, tmp);
        ts_buf_puts(w->b, tmp);
    }
}

/* A dict key as json.dumps converts it: str as is, numbers, bools and None as text. */
static jj_value key_text(jwriter *w, jj_value k) {
    char tmp[40];
    switch (k.type) {
    case JJ_STR:
        return k;
    case JJ_INT:
        snprintf(tmp, sizeof(tmp), "%" PRId64, k.i);
        break;
    case JJ_BOOL:
        return jj_cstr(k.i ? "true" : "false");
    case JJ_NONE:
        return jj_cstr("null");
    case JJ_FLOAT:
        if (isnan(k.f)) {
            return jj_cstr("NaN");
        }
        if (isinf(k.f)) {
            return jj_cstr(k.f < 0 ? "-Infinity" : "Infinity");
        }
        jj_float_repr(k.f, tmp);
        break;
    default:
        jj_fail(w->c, TS_ERR_TYPE, "keys must be str, int, float, bool or None, not %s",
                jj_type_name(k));
    }
    size_t n = strlen(tmp);
    return jj_str(jj_strdup(w->c->arena, tmp, n), n);
}

static int cmp_keys(jwriter *w, const jj_value *a, const jj_value *b) {
    return jj_compare(w->c, *a, *b, "<");
}

static void dump(jwriter *w, jj_value v, int level) {
    if (level > MAX_JSON_DEPTH) {
        jj_fail(w->c, TS_ERR_LIMIT, "tojson: value nested deeper than %d levels", MAX_JSON_DEPTH);
    }
    jj_step(w->c, 1);
    switch (v.type) {
    case JJ_NONE:
        ts_buf_puts(w->b, "null");
        return;
    case JJ_BOOL:
        ts_buf_puts(w->b, v.i ? "true" : "false");
        return;
    case JJ_INT:
        ts_buf_printf(w->b, "%" PRId64, v.i);
        return;
    case JJ_FLOAT:
        put_float(w, v.f);
        return;
    case JJ_STR:
        put_string(w, v.s.p, v.s.n);
        return;
    case JJ_LIST:
        if (v.flags & JJ_F_GEN) {
            jj_fail(w->c, TS_ERR_TYPE, "Object of type generator is not JSON serializable");
        }
        if (v.l->n == 0) {
            ts_buf_puts(w->b, "[]");
            return;
        }
        ts_buf_putc(w->b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) {
                ts_buf_puts(w->b, w->item_sep);
            }
            if (w->indent_set) {
                newline(w, level + 1);
            }
            dump(w, v.l->v[i], level + 1);
        }
        if (w->indent_set) {
            newline(w, level);
        }
        ts_buf_putc(w->b, ']');
        return;
    case JJ_DICT: {
        if (v.d->n == 0) {
            ts_buf_puts(w->b, "{}");
            return;
        }
        size_t n = v.d->n;
        size_t *order = jj_alloc(w->c->arena, n * sizeof(*order));
        for (size_t i = 0; i < n; i++) {
            order[i] = i;
        }
        if (w->sort_keys) {
            /* Insertion sort keeps it simple; dicts in templates are small. */
            jj_step(w->c, n * n / 4);
            for (size_t i = 1; i < n; i++) {
                size_t k = order[i], j = i;
                while (j > 0 && cmp_keys(w, &v.d->keys[k], &v.d->keys[order[j - 1]]) < 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = k;
            }
        }
        ts_buf_putc(w->b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) {
                ts_buf_puts(w->b, w->item_sep);
            }
            if (w->indent_set) {
                newline(w, level + 1);
            }
            jj_value k = key_text(w, v.d->keys[order[i]]);
            put_string(w, k.s.p, k.s.n);
            ts_buf_puts(w->b, w->key_sep);
            dump(w, v.d->vals[order[i]], level + 1);
        }
        if (w->indent_set) {
            newline(w, level);
        }
        ts_buf_putc(w->b, '}');
        return;
    }
    default:
        jj_fail(w->c, TS_ERR_TYPE, "Object of type %s is not JSON serializable", jj_type_name(v));
    }
}

void jj_json_dump(jj_ctx *c, ts_buf *b, jj_value v, const char *indent, size_t indent_n,
                  bool indent_set, const char *item_sep, const char *key_sep, bool sort_keys,
                  bool ensure_ascii) {
    jwriter w = {.c = c,
                 .b = b,
                 .indent = indent,
                 .indent_n = indent_n,
                 .indent_set = indent_set,
                 .sort_keys = sort_keys,
                 .ascii = ensure_ascii,
                 .item_sep = item_sep,
                 .key_sep = key_sep};
    dump(&w, v, 0);
}
