/*
 * schema_alt.c — alternatives (tg_xalt): duplicates dropped, and alternatives that begin with a
 * string literal factored into a trie of their common prefixes, so that an enum of 100,000
 * strings is one deterministic expression (the matcher keeps one parser stack where an
 * alternation would open 100,000 of them, past its limit) and compiles in linear time.
 *
 * The trie works on GBNF literal text in whole units (an escape such as \x1F or \" is one unit,
 * so is a UTF-8 character), never splitting one; it is written without recursion (a literal can
 * be as long as the schema) and cut into rules every TRIE_NEST levels, under the GBNF reader's
 * nesting limit.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"
#include "util/buf.h"
#include "util/utf8.h"

/* Length of the GBNF literal unit at p (an escape or one UTF-8 character); never past the NUL. */
static size_t unit_len(const char *p) {
    size_t n = 1;
    if (p[0] == '\\') {
        n = p[1] == 'x' ? 4 : p[1] == 'u' ? 6 : p[1] == 'U' ? 10 : 2;
    } else {
        n = ts_utf8_lead_len((unsigned char)p[0]);
        n = n ? n : 1;
    }
    for (size_t k = 1; k < n; k++) {
        if (!p[k]) {
            return k;
        }
    }
    return n;
}

/* True when expression e has a "|" outside groups, literals and classes. */
static bool top_bar(const char *e) {
    int depth = 0;
    for (const char *p = e; *p; p++) {
        if (*p == '"' || *p == '[') {
            char close = *p == '"' ? '"' : ']';
            for (p++; *p && *p != close; p++) {
                if (*p == '\\' && p[1]) {
                    p++;
                }
            }
            if (!*p) {
                return true; /* malformed: never factored */
            }
        } else if (*p == '(') {
            depth++;
        } else if (*p == ')') {
            depth--;
        } else if (*p == '|' && depth == 0) {
            return true;
        }
    }
    return false;
}

/* e begins with a GBNF string literal followed by nothing or by " " and a sequence: *len gets
 * the literal's content length, *rest what follows ("" when nothing). */
static bool lead_literal(const char *e, size_t *len, const char **rest) {
    if (e[0] != '"') {
        return false;
    }
    size_t i = 1;
    while (e[i] && e[i] != '"') {
        i += unit_len(e + i);
    }
    if (e[i] != '"') {
        return false;
    }
    if (e[i + 1] == '\0') {
        *rest = e + i + 1;
    } else if (e[i + 1] == ' ' && !top_bar(e + i + 2)) {
        *rest = e + i + 2;
    } else {
        return false;
    }
    *len = i - 1;
    return true;
}

/* e is a bare rule name. */
static bool rule_name_only(const char *e) {
    for (const char *p = e; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-')) {
            return false;
        }
    }
    return *e != '\0';
}

typedef struct lit {
    const char *s; /* content (between the quotes) */
    size_t n;
    const char *rest; /* what follows the literal in the alternative ("" when nothing) */
} lit;

static int cmp_lit(const void *a, const void *b) {
    const lit *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int r = memcmp(x->s, y->s, m);
    if (r) {
        return r;
    }
    if (x->n != y->n) {
        return (x->n > y->n) - (x->n < y->n);
    }
    return strcmp(x->rest, y->rest);
}

/* One node of the literal trie being written: the literals [lo, hi) share content[0..off);
 * L is their common prefix (in whole units) once opened; next the first literal not yet
 * written among its children. A node deeper than TRIE_NEST groups below the last rule boundary
 * writes into a buffer of its own that becomes a rule, so the GBNF reader's nesting limit is
 * never reached. */
typedef struct tframe {
    size_t lo, hi, off, L, next;
    size_t bufof; /* the frame whose buffer this one writes to; SIZE_MAX: the root buffer */
    ts_buf own;
    int depth;
    size_t n_alts; /* alternatives written at this node so far */
    bool opened, any;
} tframe;

#define TRIE_NEST 96

/* Counts an alternative of trie node f: each is a parser stack when the node is reached, so a
 * node with more than the matcher follows (many values that differ only after a shared
 * literal, or in thousands of distinct first characters) is refused, naming the limit. */
static bool node_alt(sctx *c, tframe *f) {
    if (++f->n_alts > TS_SCHEMA_MAX_ALTS) {
        tg_sfail(c, TS_ERR_LIMIT,
                 "more than %d alternatives after a common beginning (the grammar matcher "
                 "follows at most that many at once)",
                 TS_SCHEMA_MAX_ALTS);
        return false;
    }
    return true;
}

static void put_lit(ts_buf *b, const char *s, size_t n) {
    ts_buf_putc(b, '"');
    ts_buf_put(b, s, n);
    ts_buf_putc(b, '"');
}

/* The rest of literal x from content offset off on: its remaining characters, then x->rest. */
static void put_tail(ts_buf *b, const lit *x, size_t off) {
    if (off < x->n) {
        put_lit(b, x->s + off, x->n - off);
        if (*x->rest) {
            ts_buf_putc(b, ' ');
        }
    }
    if (*x->rest) {
        ts_buf_puts(b, x->rest);
    } else if (off >= x->n) {
        ts_buf_puts(b, "\"\"");
    }
}

/* The literals as one expression with their common prefixes factored out: a deterministic
 * grammar (one stack however many literals there are, where an alternation of 100,000 strings
 * would open 100,000 stacks at its start). Iterative: the trie can be as deep as a literal is
 * long. lits sorted and distinct. */
static char *lit_trie(sctx *c, lit *lits, size_t n) {
    ts_buf root = {0};
    tframe *fr = NULL;
    size_t sp = 0, cap = 0;
    char *result = NULL;
#define TBUF(f) ((f)->bufof == SIZE_MAX ? &root : &fr[(f)->bufof].own)
    cap = 64;
    fr = malloc(cap * sizeof *fr);
    if (!fr) {
        return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    fr[sp++] = (tframe){.lo = 0, .hi = n, .off = 0, .bufof = SIZE_MAX};
    while (sp && c->st == TS_OK) {
        tframe *f = &fr[sp - 1];
        ts_buf *b = TBUF(f);
        bool done = false;
        if (!f->opened) {
            const lit *a = &lits[f->lo], *z = &lits[f->hi - 1];
            if (f->hi - f->lo == 1) {
                put_tail(b, a, f->off);
                done = true;
            } else {
                /* Common prefix of the first and last (sorted: of all), in whole units. */
                size_t L = f->off;
                while (L < a->n && L < z->n) {
                    size_t u = unit_len(a->s + L);
                    if (L + u > z->n || memcmp(a->s + L, z->s + L, u) != 0) {
                        break;
                    }
                    L += u;
                }
                if (L > f->off) {
                    put_lit(b, a->s + f->off, L - f->off);
                    ts_buf_putc(b, ' ');
                }
                ts_buf_puts(b, "( ");
                f->L = L;
                f->next = f->lo;
                /* The literals that end here (the shortest sort first), each with its rest. */
                while (f->next < f->hi && lits[f->next].n == L) {
                    if (f->any) {
                        ts_buf_puts(b, " | ");
                    }
                    put_tail(b, &lits[f->next], L);
                    f->any = true;
                    if (!node_alt(c, f)) {
                        break;
                    }
                    f->next++;
                }
                f->opened = true;
            }
        } else if (f->next < f->hi) {
            size_t g = f->next, L = f->L;
            size_t u = unit_len(lits[g].s + L);
            size_t e = g + 1;
            while (e < f->hi && lits[e].n >= L + u &&
                   memcmp(lits[e].s + L, lits[g].s + L, u) == 0) {
                e++;
            }
            if (f->any) {
                ts_buf_puts(b, " | ");
            }
            f->any = true;
            f->next = e;
            if (!node_alt(c, f)) {
                break;
            }
            if (sp == cap) {
                tframe *q = realloc(fr, 2 * cap * sizeof *fr);
                if (!q) {
                    tg_sfail(c, TS_ERR_NOMEM, "out of memory");
                    break;
                }
                fr = q;
                cap *= 2;
                f = &fr[sp - 1];
            }
            bool split = f->depth + 1 >= TRIE_NEST;
            fr[sp] = (tframe){.lo = g,
                              .hi = e,
                              .off = L,
                              .bufof = split ? sp : f->bufof,
                              .depth = split ? 0 : f->depth + 1};
            sp++;
            if (!tg_poll(c)) { /* once per trie node: polls the stop every 1,024 */
                break;
            }
        } else {
            ts_buf_puts(b, " )");
            done = true;
        }
        if (!done) {
            continue;
        }
        f = &fr[sp - 1];
        if (f->bufof == sp - 1) { /* its own buffer: a rule, named in the parent's text */
            bool oom = f->own.oom;
            char *text = ts_buf_take(&f->own);
            char *name = oom || !text ? tg_sfail(c, TS_ERR_NOMEM, "out of memory")
                                      : tg_rule_add(c, "enum-trie", text);
            free(text);
            if (name) {
                ts_buf_puts(TBUF(&fr[sp - 2]), name);
            }
        }
        sp--;
    }
#undef TBUF
    for (size_t i = 0; i < sp; i++) {
        ts_buf_free(&fr[i].own);
    }
    free(fr);
    if (c->st == TS_OK && root.oom) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    if (c->st == TS_OK) {
        result = tg_xdup(c, root.p ? root.p : "\"\"");
    }
    ts_buf_free(&root);
    return result;
}

char *tg_xalt(sctx *c, char **items, size_t n) {
    if (c->st != TS_OK) {
        return NULL;
    }
    /* Distinct non-empty items (the same alternative twice only makes matching ambiguous),
     * found with a hash set so that an enum of 100,000 values is not 10^10 comparisons. */
    char **keep = malloc((n ? n : 1) * sizeof *keep);
    lit *lits = malloc((n ? n : 1) * sizeof *lits);
    strmap seen = {0};
    char *result = NULL;
    if (!keep || !lits) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t k = 0, nl = 0;
    for (size_t i = 0; i < n; i++) {
        if (!items[i]) {
            goto done;
        }
        if (items[i] == X_EMPTY) {
            continue;
        }
        bool dup = false;
        if (n <= 16) { /* a few items: comparing is cheaper than a table */
            for (size_t j = 0; j < k && !dup; j++) {
                dup = strcmp(keep[j], items[i]) == 0;
            }
        } else {
            dup = tg_smap_get(&seen, items[i]) >= 0;
            if (!dup && !tg_smap_put(c, &seen, items[i], 0)) {
                goto done;
            }
        }
        if ((i & 1023) == 1023 && !tg_poll(c)) {
            goto done;
        }
        if (!dup) {
            keep[k++] = items[i];
        }
    }
    if (!k) {
        result = X_EMPTY;
        goto done;
    }
    /* Among many alternatives, one that names a rule whose body begins with a literal (a $ref
     * to a constant) is replaced by that body, so that it joins the trie. A rule still being
     * compiled has no body yet and stays a name. */
    for (size_t i = 0; k >= TS_SCHEMA_TRIE_MIN && i < k; i++) {
        size_t len;
        const char *rest;
        if (keep[i][0] == '"' || !rule_name_only(keep[i])) {
            continue;
        }
        int32_t r = tg_rule_find(c, keep[i]);
        const char *body = r >= 0 ? c->rules[r].body : NULL;
        if (body && lead_literal(body, &len, &rest)) {
            keep[i] = (char *)body;
        }
    }
    for (size_t i = 0; i < k; i++) {
        size_t len;
        const char *rest;
        if (lead_literal(keep[i], &len, &rest)) {
            lits[nl++] = (lit){keep[i] + 1, len, rest};
        }
    }
    if (nl >= TS_SCHEMA_TRIE_MIN) {
        qsort(lits, nl, sizeof *lits, cmp_lit);
        char *trie = lit_trie(c, lits, nl);
        if (!trie) {
            goto done;
        }
        size_t o = 0;
        for (size_t i = 0; i < k; i++) {
            size_t len;
            const char *rest;
            if (!lead_literal(keep[i], &len, &rest)) {
                keep[o++] = keep[i];
            }
        }
        keep[o++] = trie;
        k = o;
    }
    /* Every remaining alternative is at least one parser stack whenever this union starts, so
     * past the matcher's limit the grammar could never get through it: refused here, naming
     * the limit, rather than compiled into a grammar that fails when a sequence reaches it. */
    if (k > TS_SCHEMA_MAX_ALTS) {
        tg_sfail(c, TS_ERR_LIMIT,
                 "%zu alternatives that do not begin with a constant text (at most %d: the "
                 "grammar matcher follows that many at once)",
                 k, TS_SCHEMA_MAX_ALTS);
        goto done;
    }
    ts_buf b = {0};
    ts_buf_puts(&b, k > 1 ? "( " : "");
    for (size_t i = 0; i < k; i++) {
        if (i) {
            ts_buf_puts(&b, " | ");
        }
        ts_buf_puts(&b, *keep[i] ? keep[i] : "\"\"");
    }
    ts_buf_puts(&b, k > 1 ? " )" : "");
    if (b.oom) {
        ts_buf_free(&b);
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    result = tg_xdup(c, b.p);
    ts_buf_free(&b);
done:
    free(keep);
    free(lits);
    tg_smap_free(&seen);
    return result;
}
