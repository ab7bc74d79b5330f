/*
 * schema_util.c — the JSON Schema compiler's plumbing: errors with the JSON pointer, the
 * expression arena, the rule table (unique names, shared bodies), GBNF literals and classes,
 * and sets of code points rendered as GBNF classes or as JSON-string characters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"
#include "util/buf.h"
#include "util/json_str.h"
#include "util/utf8.h"

const char ts_schema_empty_marker[] = "<empty>";

struct ablock {
    ablock *next;
    size_t used, cap;
    char data[];
};

void *tg_sfail(sctx *c, ts_status st, const char *fmt, ...) {
    if (c->st != TS_OK) {
        return NULL;
    }
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A long pointer keeps its end (where the problem is) so the message still fits. */
    const char *path = c->path_len ? c->path : "/";
    const char *more = "";
    if (c->path_len > 160) {
        path = c->path + c->path_len - 160;
        more = "...";
    }
    c->st = ts_error_set(c->err, st, "schema: %s%s: %s", more, path, msg);
    return NULL;
}

void *tg_xalloc(sctx *c, size_t n) {
    if (c->st != TS_OK) {
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (!c->arena || c->arena->cap - c->arena->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (c->arena_total + cap > TS_SCHEMA_MAX_ARENA) {
            return tg_sfail(c, TS_ERR_LIMIT, "the grammar would exceed %u MiB while compiling",
                            TS_SCHEMA_MAX_ARENA >> 20);
        }
        ablock *b = malloc(sizeof *b + cap);
        if (!b) {
            return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        }
        b->next = c->arena;
        b->used = 0;
        b->cap = cap;
        c->arena = b;
        c->arena_total += cap;
    }
    void *p = c->arena->data + c->arena->used;
    c->arena->used += n;
    return p;
}

bool tg_poll(sctx *c) {
    if (c->st != TS_OK) {
        return false;
    }
    if (!c->stop || ++c->steps % 1024 != 0) {
        return true;
    }
    ts_status st = ts_stop_check(c->stop, "schema", c->err);
    if (st != TS_OK) {
        c->st = st;
        return false;
    }
    return true;
}

void ts_schema_arena_free(sctx *c) {
    while (c->arena) {
        ablock *n = c->arena->next;
        free(c->arena);
        c->arena = n;
    }
}

char *tg_xdup(sctx *c, const char *s) {
    if (!s) {
        return NULL;
    }
    size_t n = strlen(s);
    char *p = tg_xalloc(c, n + 1);
    if (p) {
        memcpy(p, s, n + 1);
    }
    return p;
}

/* xf for a format whose only conversions are %s (most of the compiler's): lengths, then one
 * copy, where vsnprintf would format everything twice (once to measure). NULL when fmt has
 * another conversion. */
static char *xf_strings(sctx *c, const char *fmt, va_list ap) {
    const char *args[8];
    size_t lens[8], na = 0, total = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            total++;
            continue;
        }
        if (p[1] != 's' || na == 8) {
            return NULL;
        }
        p++;
        args[na] = va_arg(ap, const char *);
        lens[na] = strlen(args[na]);
        total += lens[na++];
    }
    char *out = tg_xalloc(c, total + 1);
    if (!out) {
        return NULL;
    }
    size_t o = 0, k = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            out[o++] = *p;
            continue;
        }
        p++;
        memcpy(out + o, args[k], lens[k]);
        o += lens[k++];
    }
    out[o] = '\0';
    return out;
}

char *tg_xf(sctx *c, const char *fmt, ...) {
    if (c->st != TS_OK) {
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    char *fast = xf_strings(c, fmt, ap);
    va_end(ap);
    if (fast || c->st != TS_OK) {
        return fast;
    }
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return tg_sfail(c, TS_ERR_INTERNAL, "formatting failed");
    }
    char *p = tg_xalloc(c, (size_t)n + 1);
    if (!p) {
        return NULL;
    }
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

/* ---- JSON pointer ------------------------------------------------------------------------ */

size_t tg_path_push(sctx *c, const char *key) {
    size_t saved = c->path_len;
    size_t i = c->path_len;
    const size_t cap = sizeof c->path - 4;
    if (i < cap) {
        c->path[i++] = '/';
    }
    for (const char *k = key; *k && i < cap; k++) {
        if (*k == '~' || *k == '/') {
            c->path[i++] = '~';
            if (i < cap) {
                c->path[i++] = *k == '~' ? '0' : '1';
            }
        } else {
            c->path[i++] = *k;
        }
    }
    if (i >= cap) {
        memcpy(c->path + cap - 3, "...", 3);
        i = cap;
    }
    c->path[i] = '\0';
    c->path_len = i;
    return saved;
}

size_t tg_path_push_i(sctx *c, int i) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", i);
    return tg_path_push(c, buf);
}

void tg_path_pop(sctx *c, size_t saved) {
    c->path_len = saved;
    c->path[saved] = '\0';
}

/* ---- string maps (open addressing, keys in the arena) ------------------------------------ */

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    }
    return h;
}

int32_t *tg_smap_ref(const strmap *m, const char *key) {
    if (!m->cap) {
        return NULL;
    }
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) {
            return NULL;
        }
        if (strcmp(m->keys[i], key) == 0) {
            return &m->vals[i];
        }
    }
}

int32_t tg_smap_get(const strmap *m, const char *key) {
    const int32_t *v = tg_smap_ref(m, key);
    return v ? *v : -1;
}

/* ---- pointer maps (open addressing) ------------------------------------------------------ */

static size_t hash_ptr(uintptr_t p) {
    uint64_t x = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

int32_t tg_pmap_get(const pmap *m, uintptr_t key) {
    if (!m->cap) {
        return -1;
    }
    for (size_t i = hash_ptr(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) {
            return -1;
        }
        if (m->keys[i] == key) {
            return m->vals[i];
        }
    }
}

bool tg_pmap_put(sctx *c, pmap *m, uintptr_t key, int32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        uintptr_t *keys = calloc(cap, sizeof *keys);
        int32_t *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            tg_sfail(c, TS_ERR_NOMEM, "out of memory");
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) {
                continue;
            }
            size_t j = hash_ptr(m->keys[i]) & (cap - 1);
            while (keys[j]) {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t i = hash_ptr(key) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) {
        i = (i + 1) & (m->cap - 1);
    }
    m->n += !m->keys[i];
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

void tg_pmap_free(pmap *m) {
    free(m->keys);
    free(m->vals);
    *m = (pmap){0};
}

bool tg_smap_put(sctx *c, strmap *m, char *key, int32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        char **keys = calloc(cap, sizeof *keys);
        int32_t *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            tg_sfail(c, TS_ERR_NOMEM, "out of memory");
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) {
                continue;
            }
            size_t j = hash_str(m->keys[i]) & (cap - 1);
            while (keys[j]) {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i]) {
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return true;
}

void tg_smap_free(strmap *m) {
    free(m->keys);
    free(m->vals);
    *m = (strmap){0};
}

void ts_schema_maps_free(sctx *c) {
    tg_smap_free(&c->by_body);
    tg_smap_free(&c->by_name);
    tg_smap_free(&c->name_next);
    tg_smap_free(&c->other_memo);
    tg_pmap_free(&c->refmap);
    tg_pmap_free(&c->kidx);
    for (size_t i = 0; i < c->n_kix; i++) {
        tg_smap_free(&c->kix[i].by_key);
    }
    free(c->kix);
    c->kix = NULL;
    c->n_kix = 0;
}

/* ---- rules ------------------------------------------------------------------------------- */

static char *unique_name(sctx *c, const char *hint) {
    char base[72];
    size_t n = 0;
    for (const char *h = hint; *h && n < 48; h++) {
        char ch = *h;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok) {
            base[n++] = ch;
        } else if (n && base[n - 1] != '-') {
            base[n++] = '-';
        }
    }
    while (n && base[n - 1] == '-') {
        n--;
    }
    if (!n) {
        memcpy(base, "r", 1);
        n = 1;
    }
    base[n] = '\0';
    if (tg_smap_get(&c->by_name, base) < 0) {
        return tg_xdup(c, base);
    }
    /* Suffixes go on from where the last rule with this base stopped: trying -1, -2, ... each
     * time made many rules of one hint (long pointers cut to one prefix) quadratic. */
    int32_t *at = tg_smap_ref(&c->name_next, base);
    int32_t i = at ? *at : 1;
    for (;; i++) {
        char *cand = tg_xf(c, "%s-%d", base, (int)i);
        if (!cand) {
            return NULL;
        }
        if (tg_smap_get(&c->by_name, cand) < 0) {
            if (at) {
                *at = i + 1;
            } else {
                char *key = tg_xdup(c, base);
                if (!key || !tg_smap_put(c, &c->name_next, key, i + 1)) {
                    return NULL;
                }
            }
            return cand;
        }
    }
}

int32_t tg_rule_find(sctx *c, const char *name) {
    return tg_smap_get(&c->by_name, name);
}

int32_t tg_rule_reserve(sctx *c, const char *hint) {
    if (c->st != TS_OK) {
        return -1;
    }
    if (c->n_rules >= TS_SCHEMA_MAX_RULES) {
        tg_sfail(c, TS_ERR_LIMIT, "the grammar would need more than %d rules", TS_SCHEMA_MAX_RULES);
        return -1;
    }
    char *name = unique_name(c, hint);
    if (!name) {
        return -1;
    }
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? c->cap_rules * 2 : 64;
        srule *r = realloc(c->rules, cap * sizeof *r);
        if (!r) {
            tg_sfail(c, TS_ERR_NOMEM, "out of memory");
            return -1;
        }
        c->rules = r;
        c->cap_rules = cap;
    }
    int32_t idx = (int32_t)c->n_rules++;
    c->rules[idx] = (srule){.name = name, .body = NULL};
    if (!tg_smap_put(c, &c->by_name, name, idx)) {
        return -1;
    }
    return idx;
}

void tg_rule_set_body(sctx *c, int32_t idx, const char *body) {
    if (c->st != TS_OK || idx < 0) {
        return;
    }
    c->rules[idx].body = (char *)body;
    if (tg_smap_get(&c->by_body, body) < 0) {
        tg_smap_put(c, &c->by_body, (char *)body, idx);
    }
}

char *tg_rule_add(sctx *c, const char *hint, const char *body) {
    if (c->st != TS_OK || !body) {
        return NULL;
    }
    if (body == X_EMPTY) {
        return X_EMPTY;
    }
    int32_t have = tg_smap_get(&c->by_body, body);
    if (have >= 0) {
        return c->rules[have].name;
    }
    int32_t idx = tg_rule_reserve(c, hint);
    if (idx < 0) {
        return NULL;
    }
    char *b = tg_xdup(c, body);
    if (!b) {
        return NULL;
    }
    tg_rule_set_body(c, idx, b);
    return c->rules[idx].name;
}

/* ---- expressions ------------------------------------------------------------------------- */

/* True when e can be placed in a sequence without parentheses: no top-level space or "|". */
static bool atomic(const char *e) {
    int depth = 0;
    bool in_lit = false, in_cls = false;
    for (const char *p = e; *p; p++) {
        if (in_lit || in_cls) {
            if (*p == '\\' && p[1]) {
                p++;
            } else if (in_lit && *p == '"') {
                in_lit = false;
            } else if (in_cls && *p == ']') {
                in_cls = false;
            }
            continue;
        }
        switch (*p) {
        case '"':
            in_lit = true;
            break;
        case '[':
            in_cls = true;
            break;
        case '(':
            depth++;
            break;
        case ')':
            depth--;
            break;
        case ' ':
        case '|':
            if (depth == 0) {
                return false;
            }
            break;
        default:
            break;
        }
    }
    return true;
}

char *tg_xgroup(sctx *c, const char *e) {
    if (!e || e == X_EMPTY) {
        return (char *)e;
    }
    if (!*e) {
        return tg_xdup(c, "\"\"");
    }
    if (atomic(e)) {
        return (char *)e;
    }
    return tg_xf(c, "( %s )", e);
}

/* ---- literals and classes ---------------------------------------------------------------- */

char *tg_gbnf_lit(sctx *c, const char *s, size_t n) {
    char *out = tg_xalloc(c, n * 4 + 3);
    if (!out) {
        return NULL;
    }
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if (ch == '\r') {
            out[o++] = '\\';
            out[o++] = 'r';
        } else if (ch == '\t') {
            out[o++] = '\\';
            out[o++] = 't';
        } else if (ch < 0x20 || ch == 0x7F) {
            o += (size_t)snprintf(out + o, 5, "\\x%02X", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

char *tg_json_quote(sctx *c, const char *s) {
    if (c->st != TS_OK) {
        return NULL;
    }
    ts_buf b = {0};
    ts_json_put_str(&b, s, strlen(s), 0);
    if (b.oom) {
        ts_buf_free(&b);
        return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    char *r = tg_xdup(c, b.p);
    ts_buf_free(&b);
    return r;
}

/* ---- code point sets --------------------------------------------------------------------- */

void tg_cps_add(sctx *c, cpset *s, uint32_t lo, uint32_t hi) {
    if (c->st != TS_OK || lo > hi) {
        return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        uint32_t(*r)[2] = tg_xalloc(c, cap * sizeof *r);
        if (!r) {
            return;
        }
        if (s->n) {
            memcpy(r, s->r, s->n * sizeof *r);
        }
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
}

void tg_cps_add_set(sctx *c, cpset *s, const cpset *t) {
    for (size_t i = 0; i < t->n; i++) {
        tg_cps_add(c, s, t->r[i][0], t->r[i][1]);
    }
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

void tg_cps_normalize(cpset *s) {
    if (s->n < 2) {
        return;
    }
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t o = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[o][1] + 1) {
            if (s->r[i][1] > s->r[o][1]) {
                s->r[o][1] = s->r[i][1];
            }
        } else {
            o++;
            s->r[o][0] = s->r[i][0];
            s->r[o][1] = s->r[i][1];
        }
    }
    s->n = o + 1;
}

cpset tg_cps_complement(sctx *c, const cpset *s) {
    cpset t = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i][0] > next) {
            tg_cps_add(c, &t, next, s->r[i][0] - 1);
        }
        next = s->r[i][1] + 1;
    }
    if (next <= 0x10FFFF) {
        tg_cps_add(c, &t, next, 0x10FFFF);
    }
    return t;
}

bool tg_cps_has(const cpset *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++) {
        if (cp >= s->r[i][0] && cp <= s->r[i][1]) {
            return true;
        }
    }
    return false;
}

static int put_cp(char *o, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x80) {
        return sprintf(o, "\\x%02X", cp);
    }
    if (cp < 0x10000) {
        return sprintf(o, "\\u%04X", cp);
    }
    return sprintf(o, "\\U%08X", cp);
}

char *tg_cps_class(sctx *c, const cpset *s) {
    if (c->st != TS_OK) {
        return NULL;
    }
    if (!s->n) {
        return X_EMPTY;
    }
    char *out = tg_xalloc(c, s->n * 24 + 3);
    if (!out) {
        return NULL;
    }
    size_t o = 0;
    out[o++] = '[';
    for (size_t i = 0; i < s->n; i++) {
        o += (size_t)put_cp(out + o, s->r[i][0]);
        if (s->r[i][1] != s->r[i][0]) {
            if (s->r[i][1] != s->r[i][0] + 1) {
                out[o++] = '-';
            }
            o += (size_t)put_cp(out + o, s->r[i][1]);
        }
    }
    out[o++] = ']';
    out[o] = '\0';
    return out;
}

char *tg_cps_json(sctx *c, const cpset *in) {
    if (c->st != TS_OK) {
        return NULL;
    }
    cpset s = {0};
    tg_cps_add_set(c, &s, in);
    tg_cps_normalize(&s);
    /* Raw characters: all but the quote, the backslash and the control characters. */
    cpset raw = {0};
    for (size_t i = 0; i < s.n; i++) {
        uint32_t lo = s.r[i][0], hi = s.r[i][1];
        if (lo < 0x20) {
            lo = 0x20;
        }
        for (uint32_t cut = 0; cut < 2 && lo <= hi; cut++) {
            uint32_t x = cut ? '\\' : '"';
            if (x >= lo && x <= hi) {
                if (x > lo) {
                    tg_cps_add(c, &raw, lo, x - 1);
                }
                lo = x + 1;
            }
        }
        if (lo <= hi) {
            tg_cps_add(c, &raw, lo, hi);
        }
    }
    tg_cps_normalize(&raw);
    char *items[8];
    size_t n = 0;
    items[n++] = tg_cps_class(c, &raw);
    static const struct {
        uint32_t cp;
        const char *lit;
    } esc[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\b', "\"\\\\b\""},
               {'\f', "\"\\\\f\""},   {'\n', "\"\\\\n\""},    {'\r', "\"\\\\r\""},
               {'\t', "\"\\\\t\""}};
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++) {
        if (tg_cps_has(&s, esc[i].cp)) {
            items[n++] = tg_xdup(c, esc[i].lit);
        }
    }
    return tg_xalt(c, items, n);
}
