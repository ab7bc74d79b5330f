/*
 * schema_regex.c — JSON Schema "pattern" (a regular expression) to GBNF over the JSON-encoded
 * string content.
 *
 * Semantics: a string is valid when the pattern matches somewhere in it (Python's re.search,
 * ECMA-262's RegExp.test), so an alternative that does not start with ^ gets any characters in
 * front and one that does not end with $ any characters behind. The subset: literals, escapes
 * of punctuation, \t \n \r \f \v \0 \xHH \uHHHH, classes [...] and [^...] with ranges, \d \w \s
 * and their negations, ".", groups ( ), (?: ), (?<name> ), (?P<name> ), alternation, and the
 * quantifiers * + ? {m} {m,} {m,n} (lazy forms too: they match the same strings). Everything
 * else (backreferences, lookaround, \b, \p{...}, inline flags, anchors inside groups) is
 * TS_ERR_UNSUPPORTED naming the construct.
 *
 * Python and ECMA disagree on what \d \w \s and "." match beyond ASCII, so each escape carries
 * two sets: `lo`, characters every dialect matches, and `hi`, characters some dialect matches.
 * A positive class is the union of the `lo` sets, a negated class the complement of the union
 * of the `hi` sets: the grammar never accepts a string some dialect rejects.
 *
 * A matched character is written raw where JSON allows it, else with its short JSON escape;
 * other encodings (\u escapes of ordinary characters) are not accepted — a subset again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"
#include "util/buf.h"

typedef struct rx {
    sctx *c;
    const char *s;
    size_t i, n;
    int depth;
    int top_pieces;  /* pieces in the top-level sequence */
    bool top_single; /* that piece's atom is one character */
    char *top_atom;
    bool anch_both, alts; /* ^...$ ; more than one top-level alternative */
} rx;

typedef struct rnode {
    char *e;          /* GBNF expression, X_EMPTY when nothing matches */
    int64_t min, max; /* matched length in code points; max -1: unbounded */
} rnode;

#define LEN_CAP ((int64_t)1 << 40)

static char *rx_fail(rx *r, const char *what) {
    return tg_sfail(r->c, TS_ERR_UNSUPPORTED, "'pattern': %s at offset %zu of the pattern", what,
                    r->i);
}

static char *rx_bad(rx *r, const char *what) {
    return tg_sfail(r->c, TS_ERR_FORMAT, "'pattern': %s at offset %zu of the pattern", what, r->i);
}

/* ---- character sets for escapes ---------------------------------------------------------- */

static void set_digit(sctx *c, cpset *lo, cpset *hi) {
    tg_cps_add(c, lo, '0', '9');
    tg_cps_add(c, hi, '0', '9');
    tg_cps_add(c, hi, 0x660, 0x10FFFF); /* the first non-ASCII digit is U+0660 */
}

static void set_word(sctx *c, cpset *lo, cpset *hi) {
    const uint32_t r[4][2] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    for (int i = 0; i < 4; i++) {
        tg_cps_add(c, lo, r[i][0], r[i][1]);
        tg_cps_add(c, hi, r[i][0], r[i][1]);
    }
    tg_cps_add(c, hi, 0xAA, 0x10FFFF); /* the first non-ASCII word character is U+00AA */
}

static void set_space(sctx *c, cpset *lo, cpset *hi) {
    /* In both Python's str.isspace() and ECMA-262's WhiteSpace/LineTerminator. */
    const uint32_t both[][2] = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},
                                {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                                {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) {
        tg_cps_add(c, lo, both[i][0], both[i][1]);
        tg_cps_add(c, hi, both[i][0], both[i][1]);
    }
    tg_cps_add(c, hi, 0x1C, 0x1F); /* Python only */
    tg_cps_add(c, hi, 0x85, 0x85);
    tg_cps_add(c, hi, 0xFEFF, 0xFEFF); /* ECMA only */
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* Parses the escape after a backslash (r->i at the character after it). Sets *cp for a single
 * character (returns 1), or lo/hi for a class escape (returns 2). 0: error. */
static int rx_escape(rx *r, bool in_class, uint32_t *cp, cpset *lo, cpset *hi) {
    if (r->i >= r->n) {
        rx_bad(r, "a trailing backslash");
        return 0;
    }
    char ch = r->s[r->i++];
    bool neg = false;
    switch (ch) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S': {
        neg = ch == 'D' || ch == 'W' || ch == 'S';
        cpset l = {0}, h = {0};
        char k = (char)(ch | 0x20);
        if (k == 'd') {
            set_digit(r->c, &l, &h);
        } else if (k == 'w') {
            set_word(r->c, &l, &h);
        } else {
            set_space(r->c, &l, &h);
        }
        tg_cps_normalize(&l);
        tg_cps_normalize(&h);
        if (neg) {
            cpset nl = tg_cps_complement(r->c, &h), nh = tg_cps_complement(r->c, &l);
            l = nl;
            h = nh;
        }
        tg_cps_add_set(r->c, lo, &l);
        tg_cps_add_set(r->c, hi, &h);
        return 2;
    }
    case 't':
        *cp = '\t';
        return 1;
    case 'n':
        *cp = '\n';
        return 1;
    case 'r':
        *cp = '\r';
        return 1;
    case 'f':
        *cp = '\f';
        return 1;
    case 'v':
        *cp = '\v';
        return 1;
    case '0':
        if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
            rx_fail(r, "an octal escape");
            return 0;
        }
        *cp = 0;
        return 1;
    case 'x':
    case 'u': {
        int nd = ch == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < nd; k++) {
            int h = r->i < r->n ? hexval(r->s[r->i]) : -1;
            if (h < 0) {
                rx_fail(r, ch == 'x' ? "a malformed \\x escape" : "a malformed \\u escape");
                return 0;
            }
            v = v * 16 + (uint32_t)h;
            r->i++;
        }
        *cp = v;
        return 1;
    }
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 1;
        }
        rx_fail(r, "the word boundary \\b");
        return 0;
    case 'B':
        rx_fail(r, "the assertion \\B");
        return 0;
    case 'A':
    case 'Z':
    case 'z':
    case 'G':
        rx_fail(r, "an anchor escape (\\A \\Z \\z \\G)");
        return 0;
    case 'p':
    case 'P':
        rx_fail(r, "a Unicode property escape (\\p, \\P)");
        return 0;
    case 'k':
        rx_fail(r, "a named backreference (\\k)");
        return 0;
    case 'c':
        rx_fail(r, "a control escape (\\c)");
        return 0;
    default:
        break;
    }
    if (ch >= '1' && ch <= '9') {
        rx_fail(r, "a backreference");
        return 0;
    }
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
        rx_fail(r, "an unknown escape");
        return 0;
    }
    /* An escaped punctuation or non-ASCII character stands for itself. */
    r->i--;
    size_t l = ts_utf8_decode(r->s + r->i, r->n - r->i, cp);
    if (!l) {
        rx_bad(r, "invalid UTF-8");
        return 0;
    }
    r->i += l;
    return 1;
}

/* The GBNF for one literal character in a JSON string. */
static char *lit_char(sctx *c, uint32_t cp) {
    if (cp < 0x20 && cp != '\b' && cp != '\f' && cp != '\n' && cp != '\r' && cp != '\t') {
        return tg_xf(c, "\"\\\\u00%02x\"", cp); /* json.dumps writes other controls like this */
    }
    /* ASCII characters are encoded once per compile: a long literal pattern would otherwise
     * fill the arena with copies of the same few classes. */
    if (cp < 128 && c->ascii_json[cp]) {
        return c->ascii_json[cp];
    }
    cpset s = {0};
    tg_cps_add(c, &s, cp, cp);
    char *e = tg_cps_json(c, &s);
    if (cp < 128) {
        c->ascii_json[cp] = e;
    }
    return e;
}

static char *rx_class(rx *r) {
    sctx *c = r->c;
    bool neg = false;
    if (r->i < r->n && r->s[r->i] == '^') {
        neg = true;
        r->i++;
    }
    if (r->i < r->n && r->s[r->i] == ']') {
        return rx_fail(r, "a class starting with ']' (dialects disagree)");
    }
    cpset lo = {0}, hi = {0};
    for (;;) {
        if (r->i >= r->n) {
            return rx_bad(r, "an unterminated character class");
        }
        if (r->s[r->i] == ']') {
            r->i++;
            break;
        }
        if (r->s[r->i] == '[' && r->i + 1 < r->n && r->s[r->i + 1] == ':') {
            return rx_fail(r, "a POSIX class [:name:]");
        }
        uint32_t a = 0;
        int kind;
        if (r->s[r->i] == '\\') {
            r->i++;
            kind = rx_escape(r, true, &a, &lo, &hi);
            if (!kind) {
                return NULL;
            }
        } else {
            size_t l = ts_utf8_decode(r->s + r->i, r->n - r->i, &a);
            if (!l) {
                return rx_bad(r, "invalid UTF-8");
            }
            r->i += l;
            kind = 1;
        }
        if (kind == 2) {
            if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
                return rx_fail(r, "a range from a class escape");
            }
            continue;
        }
        uint32_t b = a;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                cpset dl = {0}, dh = {0};
                int k2 = rx_escape(r, true, &b, &dl, &dh);
                if (!k2) {
                    return NULL;
                }
                if (k2 == 2) {
                    return rx_fail(r, "a range to a class escape");
                }
            } else {
                size_t l = ts_utf8_decode(r->s + r->i, r->n - r->i, &b);
                if (!l) {
                    return rx_bad(r, "invalid UTF-8");
                }
                r->i += l;
            }
            if (b < a) {
                return rx_bad(r, "a range out of order");
            }
        }
        tg_cps_add(c, &lo, a, b);
        tg_cps_add(c, &hi, a, b);
    }
    tg_cps_normalize(&lo);
    tg_cps_normalize(&hi);
    if (neg) {
        cpset s = tg_cps_complement(c, &hi);
        return tg_cps_json(c, &s);
    }
    return tg_cps_json(c, &lo);
}

static rnode rx_alt(rx *r, bool top);

static bool is_quant_brace(const rx *r, size_t at) {
    /* {m}, {m,}, {m,n} with decimal m, n; anything else is a literal "{". */
    size_t i = at + 1;
    size_t d0 = i;
    while (i < r->n && r->s[i] >= '0' && r->s[i] <= '9') {
        i++;
    }
    if (i == d0) {
        return false;
    }
    if (i < r->n && r->s[i] == '}') {
        return true;
    }
    if (i >= r->n || r->s[i] != ',') {
        return false;
    }
    i++;
    while (i < r->n && r->s[i] >= '0' && r->s[i] <= '9') {
        i++;
    }
    return i < r->n && r->s[i] == '}';
}

/* One atom (r->i at its first character). */
static rnode rx_atom(rx *r) {
    sctx *c = r->c;
    rnode no = {NULL, 0, 0};
    char ch = r->s[r->i];
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            const char *g = r->s + r->i + 1;
            size_t left = r->n - r->i - 1;
            if (left >= 1 && g[0] == ':') {
                r->i += 2;
            } else if (left >= 2 && (g[0] == '<' || (g[0] == 'P' && g[1] == '<')) &&
                       !(g[0] == '<' && (g[1] == '=' || g[1] == '!'))) {
                const char *end = memchr(g, '>', left);
                if (!end) {
                    return rx_bad(r, "an unterminated group name"), no;
                }
                r->i = (size_t)(end - r->s) + 1;
            } else if (left >= 1 && (g[0] == '=' || g[0] == '!')) {
                return rx_fail(r, "a lookahead assertion"), no;
            } else if (left >= 2 && g[0] == '<') {
                return rx_fail(r, "a lookbehind assertion"), no;
            } else {
                return rx_fail(r, "a group extension (?...) such as inline flags"), no;
            }
        }
        if (++r->depth > 64) {
            return tg_sfail(c, TS_ERR_LIMIT,
                            "'pattern': groups nested deeper than 64 at offset %zu of the pattern",
                            r->i),
                   no;
        }
        rnode in = rx_alt(r, false);
        r->depth--;
        if (!in.e) {
            return no;
        }
        if (r->i >= r->n || r->s[r->i] != ')') {
            return rx_bad(r, "a missing ')'"), no;
        }
        r->i++;
        in.e = in.e == X_EMPTY ? X_EMPTY : tg_xgroup(c, in.e);
        return in;
    }
    if (ch == '[') {
        r->i++;
        char *e = rx_class(r);
        return (rnode){e, 1, 1};
    }
    if (ch == '.') {
        r->i++;
        cpset s = {0};
        tg_cps_add(c, &s, 0, 0x09);
        tg_cps_add(c, &s, 0x0B, 0x0C);
        tg_cps_add(c, &s, 0x0E, 0x2027);
        tg_cps_add(c, &s, 0x202A, 0x10FFFF);
        return (rnode){tg_cps_json(c, &s), 1, 1};
    }
    if (ch == '\\') {
        r->i++;
        uint32_t cp = 0;
        cpset lo = {0}, hi = {0};
        int k = rx_escape(r, false, &cp, &lo, &hi);
        if (!k) {
            return no;
        }
        if (k == 2) {
            tg_cps_normalize(&lo);
            return (rnode){tg_cps_json(c, &lo), 1, 1};
        }
        return (rnode){lit_char(c, cp), 1, 1};
    }
    if (ch == '^' || ch == '$') {
        return rx_fail(r, "an anchor (^ or $) inside a group or in the middle of the pattern"), no;
    }
    if (ch == '*' || ch == '+' || ch == '?' || (ch == '{' && is_quant_brace(r, r->i))) {
        return rx_bad(r, "a quantifier with nothing to repeat"), no;
    }
    uint32_t cp;
    size_t l = ts_utf8_decode(r->s + r->i, r->n - r->i, &cp);
    if (!l) {
        return rx_bad(r, "invalid UTF-8"), no;
    }
    r->i += l;
    return (rnode){lit_char(c, cp), 1, 1};
}

static int64_t len_mul(int64_t a, int64_t m) {
    if (a < 0) {
        return m == 0 ? 0 : -1;
    }
    if (m < 0) {
        return a == 0 ? 0 : -1;
    }
    int64_t v = a * m;
    return v > LEN_CAP ? LEN_CAP : v;
}

static int64_t len_add(int64_t a, int64_t b) {
    if (a < 0 || b < 0) {
        return -1;
    }
    int64_t v = a + b;
    return v > LEN_CAP ? LEN_CAP : v;
}

/* An atom and its quantifier. */
static rnode rx_piece(rx *r) {
    sctx *c = r->c;
    size_t at = r->i;
    rnode a = rx_atom(r);
    if (!a.e) {
        return a;
    }
    if (r->depth == 0) {
        r->top_pieces++;
        r->top_atom = a.e;
        r->top_single = a.min == 1 && a.max == 1 && r->s[at] != '(';
    }
    if (r->i >= r->n) {
        return a;
    }
    char q = r->s[r->i];
    int64_t m, n;
    if (q == '*') {
        m = 0, n = -1;
        r->i++;
    } else if (q == '+') {
        m = 1, n = -1;
        r->i++;
    } else if (q == '?') {
        m = 0, n = 1;
        r->i++;
    } else if (q == '{' && is_quant_brace(r, r->i)) {
        r->i++;
        m = strtoll(r->s + r->i, NULL, 10);
        while (r->s[r->i] >= '0' && r->s[r->i] <= '9') {
            r->i++;
        }
        n = m;
        if (r->s[r->i] == ',') {
            r->i++;
            n = r->s[r->i] == '}' ? -1 : strtoll(r->s + r->i, NULL, 10);
            while (r->s[r->i] >= '0' && r->s[r->i] <= '9') {
                r->i++;
            }
        }
        r->i++; /* '}' */
        if (m > TS_SCHEMA_MAX_REPEAT || n > TS_SCHEMA_MAX_REPEAT) {
            char msg[80];
            snprintf(msg, sizeof msg, "a repetition bound above %d", TS_SCHEMA_MAX_REPEAT);
            return (rnode){rx_fail(r, msg), 0, 0};
        }
        if (n >= 0 && n < m) {
            return (rnode){rx_bad(r, "a repetition {m,n} with n < m"), 0, 0};
        }
    } else {
        return a;
    }
    if (r->i < r->n && r->s[r->i] == '?') {
        r->i++; /* lazy: the same set of strings */
    } else if (r->i < r->n && r->s[r->i] == '+') {
        return (rnode){rx_fail(r, "a possessive quantifier"), 0, 0};
    }
    if (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '?' ||
                        (r->s[r->i] == '{' && is_quant_brace(r, r->i)))) {
        return (rnode){rx_bad(r, "a repeated quantifier"), 0, 0};
    }
    rnode out = {NULL, len_mul(a.min, m), n < 0 ? (a.max == 0 ? 0 : -1) : len_mul(a.max, n)};
    if (a.e == X_EMPTY) {
        out.e = m == 0 ? tg_xdup(c, "") : X_EMPTY;
        out.min = out.max = 0;
        return out;
    }
    if (!*a.e || n == 0) {
        out.e = tg_xdup(c, "");
        return out;
    }
    char *g = tg_xgroup(c, a.e);
    if (m == 0 && n < 0) {
        out.e = tg_xf(c, "%s*", g);
    } else if (m == 1 && n < 0) {
        out.e = tg_xf(c, "%s+", g);
    } else if (m == 0 && n == 1) {
        out.e = tg_xf(c, "%s?", g);
    } else if (m == n) {
        out.e = m == 1 ? g : tg_xf(c, "%s{%lld}", g, (long long)m);
    } else if (n < 0) {
        out.e = tg_xf(c, "%s{%lld,}", g, (long long)m);
    } else {
        out.e = tg_xf(c, "%s{%lld,%lld}", g, (long long)m, (long long)n);
    }
    return out;
}

/* A sequence up to "|", ")" or the end. At the top, a leading ^ and a trailing $ anchor it. */
static rnode rx_seq(rx *r, bool top) {
    sctx *c = r->c;
    bool a_start = false, a_end = false;
    if (top && r->i < r->n && r->s[r->i] == '^') {
        a_start = true;
        r->i++;
    }
    /* The pieces are joined in a buffer: appending to a string copied each time made a long
     * pattern quadratic. */
    ts_buf b = {0};
    bool empty = false;
    int64_t mn = 0, mx = 0;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (top && r->s[r->i] == '$' && (r->i + 1 == r->n || r->s[r->i + 1] == '|')) {
            a_end = true;
            r->i++;
            break;
        }
        rnode p = tg_poll(c) ? rx_piece(r) : (rnode){NULL, 0, 0};
        if (!p.e) {
            ts_buf_free(&b);
            return (rnode){NULL, 0, 0};
        }
        mn = len_add(mn, p.min);
        mx = len_add(mx, p.max);
        if (empty || p.e == X_EMPTY) {
            empty = true;
        } else if (*p.e) {
            if (b.n) {
                ts_buf_putc(&b, ' ');
            }
            ts_buf_puts(&b, b.n ? tg_xgroup(c, p.e) : p.e);
        }
    }
    if (b.oom) {
        ts_buf_free(&b);
        return (rnode){tg_sfail(c, TS_ERR_NOMEM, "out of memory"), 0, 0};
    }
    char *acc = empty ? X_EMPTY : tg_xdup(c, b.p ? b.p : "");
    ts_buf_free(&b);
    if (!acc) {
        return (rnode){NULL, 0, 0};
    }
    if (top && r->i < r->n && r->s[r->i] == ')') {
        return (rnode){rx_bad(r, "an unbalanced ')'"), 0, 0};
    }
    if (top) {
        r->anch_both = a_start && a_end;
    }
    if (top && acc != X_EMPTY && (!a_start || !a_end)) {
        char *any = tg_prim(c, "char");
        if (!any) {
            return (rnode){NULL, 0, 0};
        }
        const char *lead = a_start ? "" : "char* ";
        const char *trail = a_end ? "" : " char*";
        acc = *acc ? tg_xf(c, "%s%s%s", lead, tg_xgroup(c, acc), trail) : tg_xdup(c, "char*");
        mx = -1;
    }
    return (rnode){acc, mn, mx};
}

#define RX_MAX_ALTS 4096

static rnode rx_alt(rx *r, bool top) {
    sctx *c = r->c;
    char **items = NULL;
    size_t k = 0, cap = 0;
    int64_t mn = LEN_CAP, mx = 0;
    for (;;) {
        rnode s = rx_seq(r, top);
        if (!s.e) {
            return s;
        }
        if (k == RX_MAX_ALTS) {
            return (rnode){
                tg_sfail(c, TS_ERR_LIMIT,
                         "'pattern': more than %d alternatives in one group at offset %zu "
                         "of the pattern",
                         RX_MAX_ALTS, r->i),
                0, 0};
        }
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            char **q = tg_xalloc(c, cap * sizeof *q);
            if (!q) {
                return (rnode){NULL, 0, 0};
            }
            if (k) {
                memcpy(q, items, k * sizeof *q);
            }
            items = q;
        }
        items[k++] = s.e;
        if (s.e != X_EMPTY) {
            mn = s.min < mn ? s.min : mn;
            mx = (mx < 0 || s.max < 0) ? -1 : (s.max > mx ? s.max : mx);
        }
        if (r->i < r->n && r->s[r->i] == '|') {
            if (top) {
                r->alts = true;
            }
            r->i++;
            continue;
        }
        break;
    }
    char *e = tg_xalt(c, items, k);
    if (e == X_EMPTY) {
        mn = mx = 0;
    }
    return (rnode){e, mn, mx};
}

char *tg_regex_expr(sctx *c, const char *pattern, int64_t *minlen, int64_t *maxlen) {
    rx r = {.c = c, .s = pattern, .i = 0, .n = strlen(pattern), .depth = 0};
    rnode t = rx_alt(&r, true);
    if (!t.e) {
        return NULL;
    }
    if (r.i != r.n) {
        return rx_bad(&r, "an unbalanced ')'");
    }
    *minlen = t.min;
    *maxlen = t.max;
    return t.e;
}

char *tg_regex_single(sctx *c, const char *pattern) {
    rx r = {.c = c, .s = pattern, .i = 0, .n = strlen(pattern), .depth = 0};
    ts_error keep = *c->err;
    ts_status st = c->st;
    rnode t = rx_alt(&r, true);
    bool ok = t.e && r.i == r.n && !r.alts && r.anch_both && r.top_pieces == 1 && r.top_single;
    *c->err = keep;
    c->st = st;
    return ok ? r.top_atom : NULL;
}

char *tg_rep_expr(sctx *c, const char *x, int64_t m, int64_t n) {
    const int64_t B = 256;
    if (n >= 0 && n < m) {
        return X_EMPTY;
    }
    if (m > TS_SCHEMA_MAX_REPEAT) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "a minimum length or count above %d",
                        TS_SCHEMA_MAX_REPEAT);
    }
    if (n >= 0 && n - m > TS_SCHEMA_MAX_UPPER) {
        return tg_sfail(c, TS_ERR_LIMIT,
                        "a maximum length or count of %lld is more than %lld above its minimum "
                        "(the grammar's repetition limit)",
                        (long long)n, (long long)TS_SCHEMA_MAX_UPPER);
    }
    if (x == X_EMPTY) {
        return m == 0 ? tg_xdup(c, "") : X_EMPTY;
    }
    const char *g = tg_xgroup(c, x);
    if (!g) {
        return NULL;
    }
    if (n < 0) {
        return m == 0 ? tg_xf(c, "%s*", g) : tg_xf(c, "%s{%lld,}", g, (long long)m);
    }
    if (n <= 1000) {
        return n == m ? tg_xf(c, "%s{%lld}", g, (long long)m)
                      : tg_xf(c, "%s{%lld,%lld}", g, (long long)m, (long long)n);
    }
    /* x{0,K}, K = qB + r: either fewer than q full blocks of B and a partial one, or q full
     * blocks and up to r more. Each length has one parse. */
    int64_t k = n - m, q = k / B, rr = k % B;
    char *upto = tg_xf(c, "( ( %s{%lld} ){0,%lld} %s{0,%lld} | ( %s{%lld} ){%lld} %s{0,%lld} )", g,
                       (long long)B, (long long)(q - 1), g, (long long)(B - 1), g, (long long)B,
                       (long long)q, g, (long long)rr);
    if (!upto || m == 0) {
        return upto;
    }
    return tg_xf(c, "%s{%lld} %s", g, (long long)m, upto);
}
