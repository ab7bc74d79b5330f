/*
 * schema_prim.c — grammars for JSON primitives: the shared rules (ws, string, number, value...),
 * integer ranges as exact digit grammars, decimal ranges for bounded numbers, string formats and
 * constant values.
 *
 * Integer ranges: [lo, hi] splits into the negative and the non-negative part; each part splits
 * by number of digits, and a range of equally long digit strings is written digit by digit
 * (equal prefix, then "first digit = lo's / between / = hi's"). Bounded numbers are written
 * without an exponent as I("." F)?: the integer part picks the region (at a bound's integer part
 * the fraction is compared digit by digit with the bound's fraction, which is exact in decimal).
 * Bounds are compared as decimals written by their shortest round-trip form; see docs/schema.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"
#include "util/buf.h"

static const struct {
    const char *name, *body;
} prims[] = {
    {"ws", "[\\x20\\t\\n\\r]{0,20}"},
    {"char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"},
    {"string", "\"\\\"\" char* \"\\\"\""},
    /* One code point of a string: a surrogate pair written as two \u escapes is one code point,
     * lone surrogates are left out so that counting stays exact. */
    {"cpchar", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] | \"\\\\u\" ( [0-9a-cA-CeEfF] "
               "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "
               "\"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} )"},
    /* Digits are bounded as llama.cpp bounds them (an integral part of at most 16 digits, a
     * fraction of at most 16, an exponent of at most 16), so a constrained generation cannot
     * spin in digits until max_tokens: a required tool call always ends. */
    {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
    {"number", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? "
               "[0-9]{1,16} )?"},
    {"zero-frac", "( \".\" \"0\"{1,16} )?"}, /* an integral constant's optional .000 */
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value", "object | array | string | number | boolean | null"},
    {"object", "\"{\" ws ( string ws \":\" ws value ( ws \",\" ws string ws \":\" ws value )* ws "
               ")? \"}\""},
    {"array", "\"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\""},
};

/* Rules a primitive's body names (created first so the names in the body are right). */
static const char *prim_deps(const char *name) {
    if (!strcmp(name, "string")) {
        return "char";
    }
    if (!strcmp(name, "value")) {
        return "object array string number boolean null";
    }
    if (!strcmp(name, "object")) {
        return "ws string value";
    }
    if (!strcmp(name, "array")) {
        return "ws value";
    }
    return "";
}

char *tg_prim(sctx *c, const char *name) {
    if (c->st != TS_OK) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++) {
        if (strcmp(prims[i].name, name) != 0) {
            continue;
        }
        /* Primitive rules keep their own names: the bodies refer to each other by them. A
         * schema-derived rule never takes these names (rule hints are never bare primitive
         * names), and a second call finds the existing rule by its body. */
        int32_t have = tg_rule_find(c, name);
        if (have >= 0) {
            return c->rules[have].name;
        }
        int32_t idx = tg_rule_reserve(c, name);
        if (idx < 0) {
            return NULL;
        }
        tg_rule_set_body(c, idx, prims[i].body);
        const char *deps = prim_deps(name);
        char dep[16];
        while (*deps) {
            size_t n = strcspn(deps, " ");
            memcpy(dep, deps, n);
            dep[n] = '\0';
            if (!tg_prim(c, dep)) {
                return NULL;
            }
            deps += n + (deps[n] == ' ');
        }
        return c->rules[idx].name;
    }
    return tg_sfail(c, TS_ERR_INTERNAL, "no primitive '%s'", name);
}

/* ---- integer ranges ---------------------------------------------------------------------- */

static char *lit_str(sctx *c, const char *s) {
    return tg_gbnf_lit(c, s, strlen(s));
}

static char *digit_class(sctx *c, int a, int b) {
    if (a > b) {
        return X_EMPTY;
    }
    if (a == b) {
        return tg_xf(c, "\"%d\"", a);
    }
    if (a == 0 && b == 9) {
        return tg_xdup(c, "[0-9]");
    }
    return tg_xf(c, "[%d-%d]", a, b);
}

static char *seq2(sctx *c, const char *a, const char *b) {
    if (!a || !b) {
        return NULL;
    }
    if (a == X_EMPTY || b == X_EMPTY) {
        return X_EMPTY;
    }
    if (!*a) {
        return (char *)b;
    }
    if (!*b) {
        return (char *)a;
    }
    /* Two plain literals ("12" "3") read better as one ("123"). */
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 2 && lb >= 2 && a[0] == '"' && b[0] == '"' && a[la - 1] == '"' && b[lb - 1] == '"' &&
        !strpbrk(a + 1, "\\ ") && !strpbrk(b + 1, "\\ ") && strchr(a + 1, '"') == a + la - 1 &&
        strchr(b + 1, '"') == b + lb - 1) {
        return tg_xf(c, "%.*s%s", (int)(la - 1), a, b + 1);
    }
    return tg_xf(c, "%s %s", tg_xgroup(c, a), tg_xgroup(c, b));
}

static char *any_digits(sctx *c, size_t n) {
    if (n == 0) {
        return tg_xdup(c, "");
    }
    if (n == 1) {
        return tg_xdup(c, "[0-9]");
    }
    return tg_xf(c, "[0-9]{%zu}", n);
}

/* Digit strings of length n (n >= 1) from lo to hi inclusive (both n digits, lo <= hi). */
static char *same_len(sctx *c, const char *lo, const char *hi, size_t n) {
    if (c->st != TS_OK) {
        return NULL;
    }
    if (n == 0) {
        return tg_xdup(c, "");
    }
    if (lo[0] == hi[0]) {
        size_t p = 0;
        char d[24];
        while (p < n && lo[p] == hi[p]) {
            d[p] = lo[p];
            p++;
        }
        d[p] = 0;
        return seq2(c, lit_str(c, d), same_len(c, lo + p, hi + p, n - p));
    }
    bool lo_zeros = strspn(lo + 1, "0") == n - 1, hi_nines = strspn(hi + 1, "9") == n - 1;
    int start = lo[0] - '0', end = hi[0] - '0';
    char *alts[3];
    size_t k = 0;
    char nines[24], zeros[24];
    memset(nines, '9', n - 1);
    nines[n - 1] = 0;
    memset(zeros, '0', n - 1);
    zeros[n - 1] = 0;
    if (!lo_zeros) {
        char d[2] = {lo[0], 0};
        alts[k++] = seq2(c, lit_str(c, d), same_len(c, lo + 1, nines, n - 1));
        start++;
    }
    if (!hi_nines) {
        end--;
    }
    if (start <= end) {
        alts[k++] = seq2(c, digit_class(c, start, end), any_digits(c, n - 1));
    }
    if (!hi_nines) {
        char d[2] = {hi[0], 0};
        alts[k++] = seq2(c, lit_str(c, d), same_len(c, zeros, hi + 1, n - 1));
    }
    return tg_xalt(c, alts, k);
}

/* Decimal strings without leading zeros for a <= v <= b (b_inf: no upper bound). */
static char *uint_range(sctx *c, uint64_t a, bool b_inf, uint64_t b) {
    if (!b_inf && a > b) {
        return X_EMPTY;
    }
    char as[24], bs[24];
    snprintf(as, sizeof as, "%" PRIu64, a);
    snprintf(bs, sizeof bs, "%" PRIu64, b);
    size_t la = strlen(as), lb = b_inf ? la : strlen(bs);
    char *alts[24];
    size_t k = 0;
    for (size_t len = la; len <= lb; len++) {
        char lo[24], hi[24];
        if (len == la) {
            memcpy(lo, as, la + 1);
        } else {
            lo[0] = '1';
            memset(lo + 1, '0', len - 1);
            lo[len] = 0;
        }
        if (!b_inf && len == lb) {
            memcpy(hi, bs, lb + 1);
        } else {
            memset(hi, '9', len);
            hi[len] = 0;
        }
        alts[k++] = same_len(c, lo, hi, len);
    }
    /* No upper bound: longer numbers up to TS_SCHEMA_MAX_DIGITS digits (or lo's length). */
    if (b_inf && la < TS_SCHEMA_MAX_DIGITS) {
        alts[k++] = la + 1 == TS_SCHEMA_MAX_DIGITS
                        ? tg_xf(c, "[1-9] [0-9]{%zu}", la)
                        : tg_xf(c, "[1-9] [0-9]{%zu,%d}", la, TS_SCHEMA_MAX_DIGITS - 1);
    }
    return tg_xalt(c, alts, k);
}

char *tg_int_range(sctx *c, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    if (!has_lo && !has_hi) {
        return tg_prim(c, "integer");
    }
    if (has_lo && has_hi && lo > hi) {
        return X_EMPTY;
    }
    char *alts[2];
    size_t k = 0;
    /* Negative part: "-" then the magnitudes in [max(-hi, 1), -lo]. "-0" is left out. */
    if (!has_lo || lo < 0) {
        uint64_t mag_lo = 1;
        if (has_hi && hi < 0) {
            mag_lo = (uint64_t)(-(hi + 1)) + 1;
        }
        uint64_t mag_hi = has_lo ? (uint64_t)(-(lo + 1)) + 1 : 0;
        alts[k++] = seq2(c, tg_xdup(c, "\"-\""), uint_range(c, mag_lo, !has_lo, mag_hi));
    }
    if (!has_hi || hi >= 0) {
        uint64_t a = has_lo && lo > 0 ? (uint64_t)lo : 0;
        alts[k++] = uint_range(c, a, !has_hi, has_hi ? (uint64_t)hi : 0);
    }
    return tg_xalt(c, alts, k);
}

/* ---- decimal ranges ---------------------------------------------------------------------- */

/* Fraction digits are bounded like the integer part's (TS_SCHEMA_MAX_DIGITS after each fixed
 * prefix of a bound's digits), so a bounded number cannot run on either. */
#define FRAC_ANY    "[0-9]{0,16}"
#define FRAC_ANY1   "[0-9]{1,16}"
#define FRAC_ZEROS  "\"0\"{0,16}"
#define FRAC_ZEROS1 "\"0\"{1,16}"

/* A non-negative bound as integer part and fraction digits (no trailing zeros). */
typedef struct dec {
    uint64_t ip;
    char fp[40];
} dec;

/* The shortest decimal that reads back as x, in positional form. |x| < 1e16. */
static dec dec_of(double x) {
    dec d = {0};
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) {
            break;
        }
    }
    /* buf: d.ddddde[+-]XX */
    char digits[40];
    size_t nd = 0;
    const char *p = buf;
    for (; *p && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9' && nd < 20) {
            digits[nd++] = *p;
        }
    }
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    /* value = 0.digits * 10^(exp10 + 1) */
    int point = exp10 + 1;
    size_t f = 0;
    for (int i = 0; i < (int)nd || i < point; i++) {
        int dg = i < (int)nd ? digits[i] - '0' : 0;
        if (i < point) {
            d.ip = d.ip * 10 + (uint64_t)dg;
        } else if (f < sizeof d.fp - 1) {
            d.fp[f++] = (char)('0' + dg);
        }
    }
    for (int i = point; i < 0 && f < sizeof d.fp - 1; i++) {
        memmove(d.fp + 1, d.fp, f);
        d.fp[0] = '0';
        f++;
    }
    while (f && d.fp[f - 1] == '0') {
        f--;
    }
    d.fp[f] = 0;
    return d;
}

static int dig(const char *f, size_t i) {
    return i < strlen(f) ? f[i] - '0' : 0;
}
static const char *rest(const char *f) {
    return *f ? f + 1 : f;
}

/* Digit strings D (possibly empty) with 0.D >= 0.f (> when excl). */
static char *ge_rest(sctx *c, const char *f, bool excl);
/* Non-empty digit strings D with 0.D >= 0.f (> when excl). */
static char *ge_digits(sctx *c, const char *f, bool excl) {
    int d = dig(f, 0);
    char *alts[2] = {seq2(c, digit_class(c, d + 1, 9), tg_xdup(c, FRAC_ANY)),
                     seq2(c, digit_class(c, d, d), ge_rest(c, rest(f), excl))};
    return tg_xalt(c, alts, 2);
}

static char *ge_rest(sctx *c, const char *f, bool excl) {
    if (!*f) {
        return tg_xdup(c, excl ? FRAC_ANY " [1-9] " FRAC_ANY : FRAC_ANY);
    }
    return ge_digits(c, f, excl);
}

/* Digit strings D (possibly empty) with 0.D <= 0.f (< when excl). */
static char *le_rest(sctx *c, const char *f, bool excl);
static char *le_digits(sctx *c, const char *f, bool excl) {
    int d = dig(f, 0);
    char *alts[2] = {seq2(c, digit_class(c, 0, d - 1), tg_xdup(c, FRAC_ANY)),
                     seq2(c, digit_class(c, d, d), le_rest(c, rest(f), excl))};
    return tg_xalt(c, alts, 2);
}

static char *le_rest(sctx *c, const char *f, bool excl) {
    if (!*f) {
        return excl ? X_EMPTY : tg_xdup(c, FRAC_ZEROS);
    }
    char *e = le_digits(c, f, excl);
    if (!e || e == X_EMPTY) {
        return tg_xdup(c, "");
    }
    return tg_xf(c, "%s?", tg_xgroup(c, e));
}

/* Digit strings D (possibly empty, unless nonempty) with 0.fa <= 0.D <= 0.fb (exclusivity as
 * given); 0.fa <= 0.fb. */
static char *between(sctx *c, const char *fa, bool ea, const char *fb, bool eb, bool nonempty) {
    if (c->st != TS_OK) {
        return NULL;
    }
    if (!*fa && !*fb) {
        if (ea || eb) {
            return X_EMPTY;
        }
        return tg_xdup(c, nonempty ? FRAC_ZEROS1 : FRAC_ZEROS);
    }
    char *alts[4];
    size_t k = 0;
    if (!nonempty && !*fa && !ea) {
        alts[k++] = tg_xdup(c, "");
    }
    int da = dig(fa, 0), db = dig(fb, 0);
    if (da == db) {
        alts[k++] = seq2(c, digit_class(c, da, da), between(c, rest(fa), ea, rest(fb), eb, false));
    } else {
        alts[k++] = seq2(c, digit_class(c, da, da), ge_rest(c, rest(fa), ea));
        alts[k++] = seq2(c, digit_class(c, da + 1, db - 1), tg_xdup(c, FRAC_ANY));
        alts[k++] = seq2(c, digit_class(c, db, db), le_rest(c, rest(fb), eb));
    }
    char *e = tg_xalt(c, alts, k);
    return e;
}

/* The optional fraction suffix ("." digits)? whose value v = 0.F satisfies the bounds. */
static char *frac_suffix(sctx *c, const char *e_digits, bool absent_ok) {
    if (!e_digits) {
        return NULL;
    }
    char *present = e_digits == X_EMPTY ? X_EMPTY : seq2(c, tg_xdup(c, "\".\""), e_digits);
    if (!present) {
        return NULL;
    }
    if (!absent_ok) {
        return present;
    }
    if (present == X_EMPTY) {
        return tg_xdup(c, "");
    }
    return tg_xf(c, "%s?", tg_xgroup(c, present));
}

/* Non-negative decimals v with a <= v (or <) and v <= b (or <); b_inf: no upper bound. */
static char *pos_range(sctx *c, dec a, bool ea, bool b_inf, dec b, bool eb) {
    char ipa[24];
    snprintf(ipa, sizeof ipa, "%" PRIu64, a.ip);
    char *alts[3];
    size_t k = 0;
    if (!b_inf && a.ip == b.ip) {
        bool absent_ok = !*a.fp && !ea && (*b.fp || !eb);
        char *d = between(c, a.fp, ea, b.fp, eb, true);
        if (d && !absent_ok && d == X_EMPTY) {
            return X_EMPTY;
        }
        return seq2(c, lit_str(c, ipa), frac_suffix(c, d, absent_ok));
    }
    /* integer part = a.ip */
    alts[k++] = seq2(c, lit_str(c, ipa), frac_suffix(c, ge_digits(c, a.fp, ea), !*a.fp && !ea));
    /* a.ip < integer part < b.ip: any fraction */
    if (b_inf || b.ip > a.ip + 1) {
        alts[k++] = seq2(c, uint_range(c, a.ip + 1, b_inf, b_inf ? 0 : b.ip - 1),
                         tg_xdup(c, "( \".\" " FRAC_ANY1 " )?"));
    }
    if (!b_inf) {
        char ipb[24];
        snprintf(ipb, sizeof ipb, "%" PRIu64, b.ip);
        char *le = *b.fp ? le_digits(c, b.fp, eb) : (eb ? X_EMPTY : tg_xdup(c, FRAC_ZEROS1));
        bool absent_ok = *b.fp || !eb;
        char *suf = frac_suffix(c, le, absent_ok);
        if (suf && absent_ok && le == X_EMPTY) {
            suf = tg_xdup(c, "");
        }
        alts[k++] = (!absent_ok && le == X_EMPTY) ? X_EMPTY : seq2(c, lit_str(c, ipb), suf);
    }
    return tg_xalt(c, alts, k);
}

char *tg_num_range(sctx *c, bool has_lo, double lo, bool lo_excl, bool has_hi, double hi,
                   bool hi_excl) {
    if (!has_lo && !has_hi) {
        return tg_prim(c, "number");
    }
    /* Magnitudes beyond 1e15 are clamped inward (a subset: never a looser grammar). */
    const double cap = 1e15;
    if (!has_lo || lo < -cap) {
        has_lo = true, lo = -cap, lo_excl = false;
    }
    if (!has_hi || hi > cap) {
        has_hi = true, hi = cap, hi_excl = false;
    }
    if (lo > hi || (lo == hi && (lo_excl || hi_excl))) {
        return X_EMPTY;
    }
    char *alts[2];
    size_t k = 0;
    /* Negative values: "-" then magnitudes m in (0, -lo] ∩ [-hi, ...). */
    if (lo < 0) {
        dec mlo = {0};
        bool mlo_excl = true; /* m > 0: zero belongs to the non-negative part */
        if (hi < 0) {
            mlo = dec_of(-hi), mlo_excl = hi_excl;
        }
        alts[k++] =
            seq2(c, tg_xdup(c, "\"-\""), pos_range(c, mlo, mlo_excl, false, dec_of(-lo), lo_excl));
    }
    if (hi >= 0 && !(hi == 0 && hi_excl)) {
        dec a = {0};
        bool ea = false;
        if (lo > 0) {
            a = dec_of(lo), ea = lo_excl;
        } else if (lo == 0) {
            ea = lo_excl;
        }
        alts[k++] = pos_range(c, a, ea, false, dec_of(hi), hi_excl);
    }
    return tg_xalt(c, alts, k);
}

/* ---- formats ----------------------------------------------------------------------------- */

#define HEX "[0-9a-fA-F]"
#define D31 "( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
#define D30 "( \"0\" [1-9] | [12] [0-9] | \"30\" )"
#define D28 "( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )"
/* Years 0001-9999; leap years (divisible by 4, centuries by 400) may have 02-29. */
#define YEAR "( \"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9]{2} | [1-9] [0-9]{3} )"
#define LEAP                                                                                       \
    "( [0-9]{2} ( [02468] [48] | [2468] \"0\" | [13579] [26] ) | ( [02468] [48] | [2468] \"0\" "   \
    "| [13579] [26] ) \"00\" )"
#define DATE                                                                                       \
    "( " YEAR " \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" " D31 " | ( \"0\" [469] | \"11\" ) "  \
    "\"-\" " D30 " | \"02-\" " D28 " ) | " LEAP " \"-02-29\" )"
#define TIME                                                                                       \
    "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? ( \"Z\" "  \
    "| [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"
#define LABEL "[a-zA-Z0-9] ( [a-zA-Z0-9-]{0,61} [a-zA-Z0-9] )?"
#define OCTET "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9]{2} | [1-9] [0-9] | [0-9] )"
/* URI pieces (RFC 3986); "%" must start a %XX escape. */
#define UNRES "[a-zA-Z0-9._~-]"
#define SUBD  "[!$&'()*+,;=]"
#define PCT   "\"%\" " HEX " " HEX
#define PCHAR "( " UNRES " | " PCT " | " SUBD " | [:@] )"

char *tg_format_expr(sctx *c, const char *fmt, int64_t *minlen, int64_t *maxlen) {
    *minlen = 0;
    *maxlen = -1;
    const char *body = NULL;
    if (!strcmp(fmt, "date")) {
        body = DATE;
        *minlen = *maxlen = 10;
    } else if (!strcmp(fmt, "time")) {
        body = TIME;
        *minlen = 9;
    } else if (!strcmp(fmt, "date-time")) {
        body = DATE " \"T\" " TIME;
        *minlen = 20;
    } else if (!strcmp(fmt, "uuid")) {
        body = HEX "{8} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{12}";
        *minlen = *maxlen = 36;
    } else if (!strcmp(fmt, "email")) {
        /* A conservative subset: dot-atom local part of at most 64 characters, a domain of two
         * to four labels. */
        body = "[a-zA-Z0-9_+-]{1,32} ( \".\" [a-zA-Z0-9_+-]{1,15} ){0,2} \"@\" " LABEL
               " ( \".\" " LABEL " ){1,2}";
        *minlen = 5;
    } else if (!strcmp(fmt, "hostname")) {
        body = LABEL " ( \".\" " LABEL " ){0,2}";
        *minlen = 1;
    } else if (!strcmp(fmt, "ipv4")) {
        body = OCTET " \".\" " OCTET " \".\" " OCTET " \".\" " OCTET;
        *minlen = 7;
        *maxlen = 15;
    } else if (!strcmp(fmt, "uri")) {
        body = "[a-zA-Z] [a-zA-Z0-9+.-]* \":\" ( \"//\" ( ( " UNRES " | " PCT " | " SUBD
               " | \":\" )* \"@\" )? ( " UNRES " | " PCT " | " SUBD " )* ( \":\" [0-9]* )? "
               "( \"/\" " PCHAR "* )* | \"/\" ( " PCHAR "+ ( \"/\" " PCHAR "* )* )? | " PCHAR
               "+ ( \"/\" " PCHAR "* )* | \"\" ) ( \"?\" ( " PCHAR " | [/?] )* )? ( \"#\" ( " PCHAR
               " | [/?] )* )?";
        *minlen = 2;
    } else {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'format': '%s' is not supported", fmt);
    }
    char hint[32];
    snprintf(hint, sizeof hint, "fmt-%s", fmt);
    return tg_rule_add(c, hint, body);
}

/* ---- constants --------------------------------------------------------------------------- */

char *tg_canon_json(sctx *c, const cJSON *v) {
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    char *r = tg_xdup(c, s);
    cJSON_free(s);
    return r;
}

static char *num_lit(sctx *c, double x) {
    if (!isfinite(x)) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "a non-finite number");
    }
    if (x == floor(x) && fabs(x) < 1e15) {
        /* 1, 1.0 and 1.00 are the same number to JSON Schema. The zeros are one shared rule:
         * an enum of thousands of integers would otherwise expand them once per value. */
        if (!tg_prim(c, "zero-frac")) {
            return NULL;
        }
        return tg_xf(c, "\"%.0f\" zero-frac", x);
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) {
            break;
        }
    }
    return lit_str(c, buf);
}

char *tg_const_expr(sctx *c, const cJSON *v) {
    if (c->st != TS_OK) {
        return NULL;
    }
    if (++c->depth > TS_SCHEMA_MAX_DEPTH) {
        c->depth--;
        return tg_sfail(c, TS_ERR_LIMIT, "a constant nested deeper than %d", TS_SCHEMA_MAX_DEPTH);
    }
    char *r = NULL;
    if (cJSON_IsNull(v)) {
        r = tg_xdup(c, "\"null\"");
    } else if (cJSON_IsTrue(v)) {
        r = tg_xdup(c, "\"true\"");
    } else if (cJSON_IsFalse(v)) {
        r = tg_xdup(c, "\"false\"");
    } else if (cJSON_IsNumber(v)) {
        r = num_lit(c, v->valuedouble);
    } else if (cJSON_IsString(v)) {
        char *q = tg_json_quote(c, v->valuestring);
        r = q ? lit_str(c, q) : NULL;
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        /* The members are joined in one buffer: appending to a copied string made a constant
         * of many elements quadratic. */
        bool obj = cJSON_IsObject(v);
        ts_buf b = {0};
        ts_buf_puts(&b, obj ? "( \"{\" ws" : "( \"[\" ws");
        bool first = true;
        for (const cJSON *e = v->child; e && tg_prim(c, "ws") && tg_poll(c); e = e->next) {
            char *ev = tg_const_expr(c, e);
            if (ev && obj) {
                char *kq = tg_json_quote(c, e->string);
                ev = tg_xf(c, "%s ws \":\" ws %s", kq ? lit_str(c, kq) : "", tg_xgroup(c, ev));
            } else if (ev) {
                ev = tg_xgroup(c, ev);
            }
            if (!ev) {
                break;
            }
            ts_buf_puts(&b, first ? " " : " \",\" ws ");
            ts_buf_puts(&b, ev);
            ts_buf_puts(&b, " ws");
            first = false;
        }
        ts_buf_puts(&b, obj ? " \"}\" )" : " \"]\" )");
        if (c->st == TS_OK && b.oom) {
            tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        }
        r = c->st == TS_OK ? tg_xdup(c, b.p) : NULL;
        ts_buf_free(&b);
    } else {
        r = tg_sfail(c, TS_ERR_FORMAT, "an invalid JSON value");
    }
    c->depth--;
    return r;
}
