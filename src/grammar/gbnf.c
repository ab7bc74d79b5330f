/*
 * gbnf.c — the GBNF reader: llama.cpp's grammar text to rule bodies (gcheck.c then checks them
 * and lays out the compiled grammar).
 *
 * The format, as llama.cpp reads it:
 *
 *     grammar  := space (rule)*            rule := name space "::=" space alts (newline | end)
 *     alts     := seq ("|" space seq)*     seq  := (item repeat*)*
 *     item     := "literal" | [class] | [^class] | . | name | "(" space alts ")"
 *     repeat   := * | + | ? | {m} | {m,} | {m,n}
 *
 * A name is [a-zA-Z0-9_-]+ (llama.cpp: without '_'). Comments run from '#' to the end of the
 * line. Inside parentheses and after '|' a newline is plain space; at the top level it ends the
 * rule. Characters are Unicode code points written as UTF-8 or as escapes \xHH \uHHHH
 * \UHHHHHHHH \t \r \n \\ \" \[ \]. Token references (<name>, <[id]>, !<...>) from newer
 * llama.cpp are not supported (TS_ERR_UNSUPPORTED).
 *
 * Groups and repetitions become synthesized rules, the way the matcher wants them:
 *     S{m,n} -> S (m times) R(n-m)     R(k) ::= S R(k-1) |      R(1) ::= S |
 *     S{m,}  -> S (m times) R          R    ::= S R |
 * so x* is a right-recursive tail call the matcher runs in constant stack depth.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "util/error.h"
#include "util/stop.h"
#include "util/utf8.h"

#define REPEAT_UNBOUNDED UINT32_MAX

typedef struct reader {
    const char *s;
    size_t n, i;
    ts_error *err;
    bool failed;
    gbuild_rule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *names; /* open addressing: rule id + 1, 0 = empty (user rules only) */
    uint32_t names_cap;
    gclass *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *ranges;
    uint32_t n_ranges, cap_ranges;
    uint32_t *ctab; /* class dedup: class id + 1 */
    uint32_t ctab_cap;
    uint32_t *tmp; /* (lo, hi) pairs of the class being read */
    uint32_t n_tmp, cap_tmp;
    uint32_t *rep; /* the symbol being repeated */
    uint32_t cap_rep;
    size_t n_elems; /* elements in all bodies */
    uint32_t depth;
    const ts_stop *stop; /* polled every POLL_EVERY elements; may be NULL */
    uint32_t poll;
    /* line_col's cursor: the line and column at byte lc_off. Positions are asked for mostly in
     * increasing order, so counting on from the last answer keeps the reader linear (counting
     * from the start each time made a file of many rules quadratic). */
    size_t lc_off;
    uint32_t lc_line, lc_col;
} reader;

#define POLL_EVERY 4096u

static void line_col(reader *r, size_t off, uint32_t *line, uint32_t *col) {
    if (off > r->n) {
        off = r->n;
    }
    if (off < r->lc_off || r->lc_line == 0) {
        r->lc_off = 0;
        r->lc_line = 1;
        r->lc_col = 1;
    }
    uint32_t l = r->lc_line, c = r->lc_col;
    const char *s = r->s;
    for (size_t k = r->lc_off; k < off; k++) {
        if (s[k] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    r->lc_off = off;
    r->lc_line = l;
    r->lc_col = c;
    *line = l;
    *col = c;
}

TS_PRINTF(4, 5)
static bool fail(reader *r, size_t off, ts_status st, const char *fmt, ...) {
    if (r->failed) {
        return false;
    }
    char msg[TS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line, col;
    line_col(r, off, &line, &col);
    ts_error_set(r->err, st, "grammar:%u:%u: %s", line, col, msg);
    r->failed = true;
    return false;
}

/* Stops the read when the caller asked (ts_stop); called every POLL_EVERY elements. */
static bool poll_stop(reader *r) {
    if (r->failed || !r->stop || ++r->poll % POLL_EVERY != 0) {
        return !r->failed;
    }
    if (ts_stop_check(r->stop, "grammar", r->err) != TS_OK) {
        r->failed = true;
        return false;
    }
    return true;
}

static bool nomem(reader *r) {
    if (!r->failed) {
        ts_error_set(r->err, TS_ERR_NOMEM, "grammar: out of memory");
    }
    r->failed = true;
    return false;
}

/* Grows *p (elements of size sz) so that it holds at least need. */
static bool grow(reader *r, void **p, uint32_t *cap, uint32_t need, size_t sz) {
    if (need <= *cap) {
        return true;
    }
    uint32_t c = *cap ? *cap : 16;
    while (c < need) {
        c = c > UINT32_MAX / 2 ? need : c * 2;
    }
    void *q = realloc(*p, (size_t)c * sz);
    if (!q) {
        return nomem(r);
    }
    *p = q;
    *cap = c;
    return true;
}

static int peek(const reader *r) {
    return r->i < r->n ? (unsigned char)r->s[r->i] : -1;
}

static int peek_at(const reader *r, size_t k) {
    return r->i + k < r->n ? (unsigned char)r->s[r->i + k] : -1;
}

static void describe(const reader *r, char *buf, size_t size) {
    int c = peek(r);
    if (c < 0) {
        snprintf(buf, size, "end of input");
    } else if (c >= 0x20 && c < 0x7f) {
        snprintf(buf, size, "'%c'", c);
    } else if (c == '\n' || c == '\r') {
        snprintf(buf, size, "end of line");
    } else {
        snprintf(buf, size, "byte 0x%02x", (unsigned)c);
    }
}

static void skip_space(reader *r, bool newline_ok) {
    for (;;) {
        int c = peek(r);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            r->i++;
        } else if (c == '#') {
            while (r->i < r->n && r->s[r->i] != '\n' && r->s[r->i] != '\r') {
                r->i++;
            }
        } else {
            return;
        }
    }
}

static bool is_name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* ---- rules ---------------------------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t k = 0; k < n; k++) {
        h = (h ^ (unsigned char)s[k]) * 16777619u;
    }
    return h;
}

static bool new_rule(reader *r, uint32_t origin, uint32_t *id) {
    if (r->n_rules >= TS_GRAMMAR_MAX_RULES) {
        return fail(r, r->i, TS_ERR_LIMIT, "more than %u rules (groups and repetitions count)",
                    TS_GRAMMAR_MAX_RULES);
    }
    if (!grow(r, (void **)&r->rules, &r->cap_rules, r->n_rules + 1, sizeof *r->rules)) {
        return false;
    }
    *id = r->n_rules++;
    r->rules[*id] = (gbuild_rule){.origin = origin == UINT32_MAX ? *id : origin};
    return true;
}

/* The user rule called name (created undefined on first sight). */
static bool rule_by_name(reader *r, const char *name, size_t len, size_t off, uint32_t *id) {
    if (r->names_cap < 2 * (r->n_rules + 1)) {
        uint32_t cap = r->names_cap ? r->names_cap * 2 : 64;
        while (cap < 2 * (r->n_rules + 1)) {
            cap *= 2;
        }
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) {
            return nomem(r);
        }
        for (uint32_t k = 0; k < r->names_cap; k++) {
            uint32_t v = r->names[k];
            if (!v) {
                continue;
            }
            const char *nm = r->rules[v - 1].name;
            uint32_t h = hash_bytes(nm, strlen(nm)) & (cap - 1);
            while (t[h]) {
                h = (h + 1) & (cap - 1);
            }
            t[h] = v;
        }
        free(r->names);
        r->names = t;
        r->names_cap = cap;
    }
    uint32_t h = hash_bytes(name, len) & (r->names_cap - 1);
    while (r->names[h]) {
        const char *nm = r->rules[r->names[h] - 1].name;
        if (strlen(nm) == len && memcmp(nm, name, len) == 0) {
            *id = r->names[h] - 1;
            return true;
        }
        h = (h + 1) & (r->names_cap - 1);
    }
    if (!new_rule(r, UINT32_MAX, id)) {
        return false;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        return nomem(r);
    }
    memcpy(copy, name, len);
    copy[len] = 0;
    r->rules[*id].name = copy;
    line_col(r, off, &r->rules[*id].ref_line, &r->rules[*id].ref_col);
    r->names[h] = *id + 1;
    return true;
}

static bool push_elem(reader *r, uint32_t rule, uint32_t e) {
    if (!poll_stop(r)) {
        return false;
    }
    if (r->n_elems >= TS_GRAMMAR_MAX_ELEMS) {
        return fail(r, r->i, TS_ERR_LIMIT,
                    "the grammar expands to more than %u elements (repetitions count)",
                    TS_GRAMMAR_MAX_ELEMS);
    }
    gbuild_rule *ru = &r->rules[rule];
    if (!grow(r, (void **)&ru->body, &ru->cap, ru->n + 1, sizeof *ru->body)) {
        return false;
    }
    ru->body[ru->n++] = e;
    r->n_elems++;
    return true;
}

/* ---- characters and classes ---------------------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static bool read_char(reader *r, uint32_t *cp) {
    size_t at = r->i;
    int c = peek(r);
    if (c < 0) {
        return fail(r, at, TS_ERR_FORMAT, "unexpected end of input inside a literal or class");
    }
    if (c == 0) {
        return fail(r, at, TS_ERR_FORMAT, "NUL byte in the grammar");
    }
    if (c != '\\') {
        size_t len = ts_utf8_decode(r->s + r->i, r->n - r->i, cp);
        if (!len) {
            return fail(r, at, TS_ERR_FORMAT, "invalid UTF-8 (byte 0x%02x)", (unsigned)c);
        }
        r->i += len;
        return true;
    }
    int e = peek_at(r, 1);
    int digits = 0;
    switch (e) {
    case 'x':
        digits = 2;
        break;
    case 'u':
        digits = 4;
        break;
    case 'U':
        digits = 8;
        break;
    case 't':
        *cp = '\t';
        r->i += 2;
        return true;
    case 'r':
        *cp = '\r';
        r->i += 2;
        return true;
    case 'n':
        *cp = '\n';
        r->i += 2;
        return true;
    case '\\':
    case '"':
    case '[':
    case ']':
        *cp = (uint32_t)e;
        r->i += 2;
        return true;
    default:
        if (e < 0) {
            return fail(r, at, TS_ERR_FORMAT, "unexpected end of input after '\\'");
        }
        if (e >= 0x20 && e < 0x7f) {
            return fail(r, at, TS_ERR_FORMAT, "unknown escape '\\%c'", e);
        }
        return fail(r, at, TS_ERR_FORMAT, "unknown escape '\\' + byte 0x%02x", (unsigned)e);
    }
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = hexval(peek_at(r, 2 + (size_t)k));
        if (h < 0) {
            return fail(r, at, TS_ERR_FORMAT, "'\\%c' needs %d hex digits", e, digits);
        }
        v = (v << 4) | (uint32_t)h;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        return fail(r, at, TS_ERR_FORMAT, "'\\%c' escape U+%X is not a Unicode scalar value", e, v);
    }
    *cp = v;
    r->i += 2 + (size_t)digits;
    return true;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Interns the class made of r->tmp's ranges (negated or not); *id its index. */
static bool finish_class(reader *r, bool neg, uint32_t *id) {
    uint32_t n = r->n_tmp;
    if (n) {
        qsort(r->tmp, n, 2 * sizeof(uint32_t), cmp_range);
    }
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t lo = r->tmp[2 * k], hi = r->tmp[2 * k + 1];
        if (m && lo <= r->tmp[2 * (m - 1) + 1] + 1) {
            if (hi > r->tmp[2 * (m - 1) + 1]) {
                r->tmp[2 * (m - 1) + 1] = hi;
            }
        } else {
            r->tmp[2 * m] = lo;
            r->tmp[2 * m + 1] = hi;
            m++;
        }
    }
    gclass c = {.n = m, .neg = neg};
    for (uint32_t k = 0; k < m; k++) {
        for (uint32_t cp = r->tmp[2 * k]; cp <= r->tmp[2 * k + 1] && cp < 128; cp++) {
            c.ascii[cp >> 5] |= 1u << (cp & 31);
        }
    }
    if (neg) {
        for (int w = 0; w < 4; w++) {
            c.ascii[w] = ~c.ascii[w];
        }
    }
    /* Non-ASCII: none when no range reaches 128, all when the ranges cover every scalar value
     * from 128 on (surrogates aside); the negation swaps the two. */
    bool any = false, low = false, high = false;
    for (uint32_t k = 0; k < m; k++) {
        uint32_t lo = r->tmp[2 * k], hi = r->tmp[2 * k + 1];
        any |= hi >= 0x80;
        low |= lo <= 0x80 && hi >= 0xD7FF;
        high |= lo <= 0xE000 && hi >= 0x10FFFF;
    }
    c.uni = !any ? GCLASS_NONE : (low && high) ? GCLASS_ALL : GCLASS_MIXED;
    if (neg && c.uni != GCLASS_MIXED) {
        c.uni = c.uni == GCLASS_NONE ? GCLASS_ALL : GCLASS_NONE;
    }
    uint32_t h = hash_bytes((const char *)r->tmp, (size_t)m * 8) ^ (neg ? 0x9e3779b9u : 0);
    if (r->ctab_cap < 2 * (r->n_classes + 1)) {
        uint32_t cap = r->ctab_cap ? r->ctab_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) {
            return nomem(r);
        }
        for (uint32_t k = 0; k < r->ctab_cap; k++) {
            uint32_t v = r->ctab[k];
            if (!v) {
                continue;
            }
            const gclass *o = &r->classes[v - 1];
            uint32_t hh =
                hash_bytes((const char *)(r->ranges + 2 * (size_t)o->off), (size_t)o->n * 8) ^
                (o->neg ? 0x9e3779b9u : 0);
            hh &= cap - 1;
            while (t[hh]) {
                hh = (hh + 1) & (cap - 1);
            }
            t[hh] = v;
        }
        free(r->ctab);
        r->ctab = t;
        r->ctab_cap = cap;
    }
    uint32_t slot = h & (r->ctab_cap - 1);
    while (r->ctab[slot]) {
        const gclass *o = &r->classes[r->ctab[slot] - 1];
        if (o->n == m && o->neg == c.neg &&
            (m == 0 || memcmp(r->ranges + 2 * (size_t)o->off, r->tmp, (size_t)m * 8) == 0)) {
            *id = r->ctab[slot] - 1;
            return true;
        }
        slot = (slot + 1) & (r->ctab_cap - 1);
    }
    if (r->n_ranges + m > TS_GRAMMAR_MAX_ELEMS) {
        return fail(r, r->i, TS_ERR_LIMIT, "character classes hold more than %u ranges",
                    TS_GRAMMAR_MAX_ELEMS);
    }
    if (!grow(r, (void **)&r->ranges, &r->cap_ranges, 2 * (r->n_ranges + m), sizeof *r->ranges) ||
        !grow(r, (void **)&r->classes, &r->cap_classes, r->n_classes + 1, sizeof *r->classes)) {
        return false;
    }
    c.off = r->n_ranges;
    if (m) {
        memcpy(r->ranges + 2 * (size_t)r->n_ranges, r->tmp, (size_t)m * 8);
    }
    r->n_ranges += m;
    *id = r->n_classes;
    r->classes[r->n_classes++] = c;
    r->ctab[slot] = *id + 1;
    return true;
}

static bool tmp_range(reader *r, uint32_t lo, uint32_t hi) {
    if (!grow(r, (void **)&r->tmp, &r->cap_tmp, 2 * (r->n_tmp + 1), sizeof *r->tmp)) {
        return false;
    }
    r->tmp[2 * r->n_tmp] = lo;
    r->tmp[2 * r->n_tmp + 1] = hi;
    r->n_tmp++;
    return true;
}

/* [...] or [^...]; r->i at '['. */
static bool read_class(reader *r, uint32_t *id) {
    size_t open = r->i;
    r->i++;
    bool neg = false;
    if (peek(r) == '^') {
        neg = true;
        r->i++;
    }
    r->n_tmp = 0;
    while (peek(r) != ']') {
        if (peek(r) < 0) {
            return fail(r, open, TS_ERR_FORMAT, "unterminated character class");
        }
        uint32_t lo, hi;
        size_t at = r->i;
        if (!read_char(r, &lo)) {
            return false;
        }
        hi = lo;
        if (peek(r) == '-' && peek_at(r, 1) != ']' && peek_at(r, 1) >= 0) {
            r->i++;
            if (!read_char(r, &hi)) {
                return false;
            }
            if (hi < lo) {
                return fail(r, at, TS_ERR_FORMAT, "range U+%X-U+%X is backwards", lo, hi);
            }
        }
        if (!tmp_range(r, lo, hi)) {
            return false;
        }
    }
    r->i++;
    return finish_class(r, neg, id);
}

/* ---- sequences, alternatives, repetition --------------------------------------------------- */

static bool read_alts(reader *r, uint32_t rule, bool nested);

static bool read_count(reader *r, uint32_t *v) {
    size_t at = r->i;
    if (peek(r) < '0' || peek(r) > '9') {
        return fail(r, at, TS_ERR_FORMAT, "expected a number in '{...}'");
    }
    uint64_t x = 0;
    while (peek(r) >= '0' && peek(r) <= '9') {
        x = x * 10 + (uint64_t)(peek(r) - '0');
        if (x > TS_GRAMMAR_MAX_REPEAT) {
            return fail(r, at, TS_ERR_LIMIT, "repetition count above the limit of %u",
                        TS_GRAMMAR_MAX_REPEAT);
        }
        r->i++;
    }
    *v = (uint32_t)x;
    return true;
}

/* Rewrites rule's body[start..] (one symbol S) as S{min,max}. */
static bool repeat(reader *r, uint32_t rule, uint32_t start, uint32_t min, uint32_t max) {
    gbuild_rule *ru = &r->rules[rule];
    uint32_t len = ru->n - start;
    if (len == 0) {
        return true; /* an empty literal repeated is still empty */
    }
    if (!grow(r, (void **)&r->rep, &r->cap_rep, len, sizeof *r->rep)) {
        return false;
    }
    memcpy(r->rep, ru->body + start, (size_t)len * sizeof *r->rep);
    r->n_elems -= len;
    ru->n = start;
    for (uint32_t k = 0; k < min; k++) {
        for (uint32_t j = 0; j < len; j++) {
            if (!push_elem(r, rule, r->rep[j])) {
                return false;
            }
        }
    }
    uint32_t origin = r->rules[rule].origin;
    if (max == REPEAT_UNBOUNDED) {
        uint32_t rr;
        if (!new_rule(r, origin, &rr)) {
            return false;
        }
        for (uint32_t j = 0; j < len; j++) {
            if (!push_elem(r, rr, r->rep[j])) {
                return false;
            }
        }
        if (!push_elem(r, rr, GE_MAKE(GE_REF, rr)) || !push_elem(r, rr, GE_MAKE(GE_ALT, 0))) {
            return false;
        }
        return push_elem(r, rule, GE_MAKE(GE_REF, rr));
    }
    uint32_t prev = UINT32_MAX;
    for (uint32_t k = min; k < max; k++) {
        uint32_t rr;
        if (!new_rule(r, origin, &rr)) {
            return false;
        }
        for (uint32_t j = 0; j < len; j++) {
            if (!push_elem(r, rr, r->rep[j])) {
                return false;
            }
        }
        if (prev != UINT32_MAX && !push_elem(r, rr, GE_MAKE(GE_REF, prev))) {
            return false;
        }
        if (!push_elem(r, rr, GE_MAKE(GE_ALT, 0))) {
            return false;
        }
        prev = rr;
    }
    if (prev != UINT32_MAX) {
        return push_elem(r, rule, GE_MAKE(GE_REF, prev));
    }
    return true;
}

static bool read_seq(reader *r, uint32_t rule, bool nested) {
    uint32_t last = UINT32_MAX; /* body index where the last symbol starts */
    for (;;) {
        int c = peek(r);
        size_t at = r->i;
        uint32_t start = r->rules[rule].n;
        if (c == '"') {
            r->i++;
            while (peek(r) != '"') {
                if (peek(r) < 0) {
                    return fail(r, at, TS_ERR_FORMAT, "unterminated string literal");
                }
                uint32_t cp, id;
                if (!read_char(r, &cp)) {
                    return false;
                }
                r->n_tmp = 0;
                if (!tmp_range(r, cp, cp) || !finish_class(r, false, &id) ||
                    !push_elem(r, rule, GE_MAKE(GE_CLASS, id))) {
                    return false;
                }
            }
            r->i++;
            last = start;
        } else if (c == '[') {
            uint32_t id;
            if (!read_class(r, &id) || !push_elem(r, rule, GE_MAKE(GE_CLASS, id))) {
                return false;
            }
            last = start;
        } else if (c == '.') {
            uint32_t id;
            r->i++;
            r->n_tmp = 0;
            if (!finish_class(r, true, &id) || !push_elem(r, rule, GE_MAKE(GE_CLASS, id))) {
                return false;
            }
            last = start;
        } else if (c == '<' || (c == '!' && peek_at(r, 1) == '<')) {
            return fail(r, at, TS_ERR_UNSUPPORTED,
                        "token references (<...>, <[id]>, !<...>) are not supported; write the "
                        "token's text as a string literal");
        } else if (is_name_char(c)) {
            size_t b = r->i;
            while (is_name_char(peek(r))) {
                r->i++;
            }
            uint32_t id;
            if (!rule_by_name(r, r->s + b, r->i - b, b, &id) ||
                !push_elem(r, rule, GE_MAKE(GE_REF, id))) {
                return false;
            }
            last = start;
        } else if (c == '(') {
            if (r->depth >= TS_GRAMMAR_MAX_NEST) {
                return fail(r, at, TS_ERR_LIMIT, "parentheses nested deeper than %u",
                            TS_GRAMMAR_MAX_NEST);
            }
            r->i++;
            skip_space(r, true);
            uint32_t sub;
            if (!new_rule(r, r->rules[rule].origin, &sub)) {
                return false;
            }
            r->depth++;
            if (!read_alts(r, sub, true)) {
                return false;
            }
            r->depth--;
            if (peek(r) != ')') {
                char what[32];
                describe(r, what, sizeof what);
                return fail(r, r->i, TS_ERR_FORMAT,
                            "expected ')' to close the '(' at offset "
                            "%zu, found %s",
                            at, what);
            }
            r->i++;
            if (!push_elem(r, rule, GE_MAKE(GE_REF, sub))) {
                return false;
            }
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == UINT32_MAX) {
                return fail(r, at, TS_ERR_FORMAT, "'%c' has nothing before it to repeat", c);
            }
            uint32_t min, max;
            r->i++;
            if (c == '*') {
                min = 0, max = REPEAT_UNBOUNDED;
            } else if (c == '+') {
                min = 1, max = REPEAT_UNBOUNDED;
            } else if (c == '?') {
                min = 0, max = 1;
            } else {
                skip_space(r, nested);
                if (!read_count(r, &min)) {
                    return false;
                }
                skip_space(r, nested);
                max = min;
                if (peek(r) == ',') {
                    r->i++;
                    skip_space(r, nested);
                    max = REPEAT_UNBOUNDED;
                    if (peek(r) >= '0' && peek(r) <= '9') {
                        if (!read_count(r, &max)) {
                            return false;
                        }
                        skip_space(r, nested);
                    }
                }
                if (peek(r) != '}') {
                    char what[32];
                    describe(r, what, sizeof what);
                    return fail(r, r->i, TS_ERR_FORMAT, "expected '}' or ',' in '{...}', found %s",
                                what);
                }
                r->i++;
                if (max < min) {
                    return fail(r, at, TS_ERR_FORMAT, "{%u,%u}: the maximum is below the minimum",
                                min, max);
                }
            }
            if (!repeat(r, rule, last, min, max)) {
                return false;
            }
        } else {
            return true;
        }
        skip_space(r, nested);
    }
}

static bool read_alts(reader *r, uint32_t rule, bool nested) {
    if (!read_seq(r, rule, nested)) {
        return false;
    }
    while (peek(r) == '|') {
        if (!push_elem(r, rule, GE_MAKE(GE_ALT, 0))) {
            return false;
        }
        r->i++;
        skip_space(r, true);
        if (!read_seq(r, rule, nested)) {
            return false;
        }
    }
    return true;
}

static bool read_rule(reader *r) {
    size_t at = r->i;
    if (!is_name_char(peek(r))) {
        char what[32];
        describe(r, what, sizeof what);
        return fail(r, at, TS_ERR_FORMAT, "expected a rule name, found %s", what);
    }
    while (is_name_char(peek(r))) {
        r->i++;
    }
    uint32_t id;
    if (!rule_by_name(r, r->s + at, r->i - at, at, &id)) {
        return false;
    }
    gbuild_rule *ru = &r->rules[id];
    if (ru->defined) {
        return fail(r, at, TS_ERR_FORMAT, "rule '%s' is defined twice (first at %u:%u)", ru->name,
                    ru->def_line, ru->def_col);
    }
    ru->defined = true;
    line_col(r, at, &ru->def_line, &ru->def_col);
    skip_space(r, false);
    if (!(peek(r) == ':' && peek_at(r, 1) == ':' && peek_at(r, 2) == '=')) {
        char what[32];
        describe(r, what, sizeof what);
        return fail(r, r->i, TS_ERR_FORMAT, "expected '::=' after rule name '%s', found %s",
                    r->rules[id].name, what);
    }
    r->i += 3;
    skip_space(r, true);
    if (!read_alts(r, id, false)) {
        return false;
    }
    int c = peek(r);
    if (c == '\r') {
        r->i += peek_at(r, 1) == '\n' ? 2 : 1;
    } else if (c == '\n') {
        r->i++;
    } else if (c >= 0) {
        char what[32];
        describe(r, what, sizeof what);
        return fail(r, r->i, TS_ERR_FORMAT, "unexpected %s in rule '%s'", what, r->rules[id].name);
    }
    skip_space(r, true);
    return true;
}

static void reader_free(reader *r) {
    for (uint32_t k = 0; k < r->n_rules; k++) {
        free(r->rules[k].body);
        free(r->rules[k].name);
    }
    free(r->rules);
    free(r->names);
    free(r->classes);
    free(r->ranges);
    free(r->ctab);
    free(r->tmp);
    free(r->rep);
}

/* A rule reachable from the start with more alternatives that begin with a character than the
 * matcher follows at once (TS_GRAMMAR_MAX_STACKS) could never be entered: each such alternative
 * is a parser stack of its own whenever the rule starts. Refused by name (TS_ERR_LIMIT), here
 * and not when a sequence reaches it. Linear: one pass over the reachable rules. */
static ts_status wide_rules(const reader *r, const ts_grammar *g, ts_error *err) {
    uint8_t *seen = calloc(g->n_rules ? g->n_rules : 1, 1);
    uint32_t *todo = malloc((g->n_rules ? g->n_rules : 1) * sizeof *todo);
    ts_status st = TS_OK;
    if (!seen || !todo) {
        st = ts_error_set(err, TS_ERR_NOMEM, "grammar: out of memory");
        goto done;
    }
    uint32_t n = 0;
    seen[g->root] = 1;
    todo[n++] = g->root;
    while (n && st == TS_OK) {
        uint32_t rule = todo[--n], wide = 0;
        for (uint32_t a = g->rule_alt[rule]; a < g->rule_alt[rule + 1]; a++) {
            wide += GE_TYPE(g->elems[g->alt_start[a]]) == GE_CLASS;
            for (uint32_t e = g->alt_start[a]; GE_TYPE(g->elems[e]) != GE_END; e++) {
                uint32_t x = g->elems[e];
                if (GE_TYPE(x) == GE_REF && !seen[GE_VAL(x)]) {
                    seen[GE_VAL(x)] = 1;
                    todo[n++] = GE_VAL(x);
                }
            }
        }
        if (wide > TS_GRAMMAR_MAX_STACKS) {
            const gbuild_rule *o = &r->rules[r->rules[rule].origin];
            st = ts_error_set(err, TS_ERR_LIMIT,
                              "grammar:%u:%u: rule '%s' has %u alternatives that begin with a "
                              "character, more than the %u parser stacks the matcher follows at "
                              "once; factor their common prefixes (\"ab\" | \"ac\" -> \"a\" [bc])",
                              o->def_line, o->def_col, o->name ? o->name : "?", wide,
                              TS_GRAMMAR_MAX_STACKS);
        }
    }
done:
    free(seen);
    free(todo);
    return st;
}

ts_status ts_grammar_from_gbnf(const char *text, size_t len, const char *root, ts_grammar **out,
                               ts_error *err) {
    return ts_grammar_from_gbnf_ex(text, len, root, NULL, out, err);
}

ts_status ts_grammar_from_gbnf_ex(const char *text, size_t len, const char *root,
                                  const ts_stop *stop, ts_grammar **out, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    if (!out) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "grammar: out is NULL");
    }
    *out = NULL;
    if (!text && len) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "grammar: text is NULL");
    }
    if (len > TS_GRAMMAR_MAX_TEXT) {
        return ts_error_set(err, TS_ERR_LIMIT, "grammar: %zu bytes of text, the limit is %u", len,
                            TS_GRAMMAR_MAX_TEXT);
    }
    if (!root) {
        root = "root";
    }
    ts_status st = ts_stop_check(stop, "grammar", err);
    if (st != TS_OK) {
        return st;
    }
    reader r = {.s = text ? text : "", .n = len, .err = err, .stop = stop};
    /* Non-NULL from the start: empty classes ('.') index these arrays with zero lengths. */
    if (grow(&r, (void **)&r.ranges, &r.cap_ranges, 16, sizeof *r.ranges)) {
        grow(&r, (void **)&r.tmp, &r.cap_tmp, 16, sizeof *r.tmp);
    }
    skip_space(&r, true);
    while (!r.failed && r.i < r.n) {
        read_rule(&r);
    }
    ts_grammar *g = NULL;
    if (r.failed) {
        st = err->status;
        goto done;
    }
    uint32_t root_id = UINT32_MAX;
    for (uint32_t k = 0; k < r.n_rules; k++) {
        const gbuild_rule *ru = &r.rules[k];
        if (ru->name && !ru->defined) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "grammar:%u:%u: rule '%s' is used but never defined", ru->ref_line,
                              ru->ref_col, ru->name);
            goto done;
        }
        if (ru->name && strcmp(ru->name, root) == 0) {
            root_id = k;
        }
    }
    if (root_id == UINT32_MAX) {
        st = ts_error_set(err, TS_ERR_FORMAT, "grammar: no rule named '%s' to start from", root);
        goto done;
    }
    if ((st = ts_stop_check(stop, "grammar", err)) != TS_OK) {
        goto done;
    }
    st = ts_grammar_check_and_build(r.rules, r.n_rules, root_id, r.classes, r.n_classes, r.ranges,
                                    r.n_ranges, &g, err);
    if (st != TS_OK) {
        goto done;
    }
    r.classes = NULL; /* now owned by the grammar */
    r.ranges = NULL;
    /* The matcher holds at most TS_GRAMMAR_MAX_STACKS stacks in a state: a start rule with more
     * alternatives open at once than that could never begin, so it is refused here, by name,
     * rather than failing later where it would look like a lack of memory. */
    if ((st = ts_stop_check(stop, "grammar", err)) != TS_OK ||
        (st = wide_rules(&r, g, err)) != TS_OK ||
        (st = tg_gmatch_check_start(g, root, err)) != TS_OK) {
        ts_grammar_free(g);
        goto done;
    }
    *out = g;
done:
    reader_free(&r);
    return st;
}
