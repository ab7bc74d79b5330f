/*
 * schema.c — JSON Schema to GBNF (ts_schema_to_gbnf).
 *
 * The language of the output is a subset of the JSON documents valid under the schema, and
 * equal to it up to these documented restrictions (docs/schema.md): object properties come in
 * the order "properties" lists them, extra properties (when allowed) after the listed ones;
 * whitespace between tokens is 0 to 20 of [ \t\n\r] (none before or after the document);
 * strings are written as JSON encoders write them (the grammar's `string` accepts every escape,
 * but constants, keys and patterns are matched in their usual encoding); numbers with bounds
 * are written without exponent. Everything a schema says that cannot be expressed this way is
 * TS_ERR_UNSUPPORTED naming the keyword and its JSON pointer: the grammar never accepts a
 * document the schema rejects.
 *
 * A schema without "type" accepts every type; when it uses keywords of some types only
 * (properties -> object, items -> array, minLength -> string, minimum -> number...), the grammar
 * allows just those types, as generators expect.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/schema_internal.h"
#include "util/buf.h"
#include "util/utf8.h"

/* Keywords that constrain and that the compiler does not handle (some only in cases). */
/* clang-format off */
static const char *const unsupported_kw[] = {
    "not", "if", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
    "$dynamicRef", "$recursiveRef", NULL};
/* clang-format on */

/* Formats a validator may check that have no grammar here. Other unknown formats are
 * annotations (validators ignore them) and so are ignored. */
static const char *const unsupported_fmt[] = {"duration",      "idn-email",
                                              "idn-hostname",  "ipv6",
                                              "uri-reference", "iri",
                                              "iri-reference", "uri-template",
                                              "json-pointer",  "relative-json-pointer",
                                              "regex",         NULL};

static const char *const known_fmt[] = {"date-time", "date", "time",     "email", "uuid",
                                        "uri",       "ipv4", "hostname", NULL};

static bool in_list(const char *k, const char *const *l) {
    for (size_t i = 0; l[i]; i++) {
        if (!strcmp(k, l[i])) {
            return true;
        }
    }
    return false;
}

static const cJSON *get(const cJSON *s, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(s, k);
}

/* A rule-name hint from the current JSON pointer (its last part). */
char *tg_hint(sctx *c, const char *suffix) {
    const char *p = c->path;
    size_t n = c->path_len;
    if (n > 40) {
        p += n - 40;
    }
    return tg_xf(c, "s%s%s%s", p, *suffix ? "-" : "", suffix);
}

bool tg_get_count(sctx *c, const cJSON *s, const char *k, int64_t *v) {
    const cJSON *x = get(s, k);
    if (!x) {
        return false;
    }
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble != floor(x->valuedouble)) {
        tg_sfail(c, TS_ERR_FORMAT, "'%s' must be a non-negative integer", k);
        return false;
    }
    *v = x->valuedouble > 1e15 ? (int64_t)1e15 : (int64_t)x->valuedouble;
    return true;
}

/* ---- strings ----------------------------------------------------------------------------- */

static char *compile_string(sctx *c, const cJSON *s) {
    int64_t minl = 0, maxl = -1;
    bool has_min = tg_get_count(c, s, "minLength", &minl);
    bool has_max = tg_get_count(c, s, "maxLength", &maxl);
    if (c->st != TS_OK) {
        return NULL;
    }
    if (has_max && maxl < minl) {
        return X_EMPTY;
    }
    const cJSON *pat = get(s, "pattern");
    const cJSON *fmt = get(s, "format");
    if (pat && !cJSON_IsString(pat)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'pattern' must be a string");
    }
    if (fmt && !cJSON_IsString(fmt)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'format' must be a string");
    }
    if (fmt && in_list(fmt->valuestring, unsupported_fmt)) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'format': '%s' is not supported", fmt->valuestring);
    }
    if (fmt && !in_list(fmt->valuestring, known_fmt)) {
        fmt = NULL;
    }
    char *body = NULL;
    int64_t emin = 0, emax = -1;
    if (pat && fmt) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'pattern' together with 'format' ('%s')",
                        fmt->valuestring);
    }
    if (pat) {
        size_t saved = tg_path_push(c, "pattern");
        char *single = (has_min || has_max) ? tg_regex_single(c, pat->valuestring) : NULL;
        body = tg_regex_expr(c, pat->valuestring, &emin, &emax);
        if (body && body != X_EMPTY && single) {
            /* ^X{a,b}$ with lengths: one repetition with the intersected bounds. */
            int64_t lo = emin > minl ? emin : minl;
            int64_t hi = emax < 0 ? maxl : (has_max && maxl < emax ? maxl : emax);
            body = tg_rep_expr(c, single, lo, hi);
            emin = lo;
            emax = hi;
            if (body && !*body) {
                body = tg_xdup(c, "\"\"");
            }
        }
        tg_path_pop(c, saved);
    } else if (fmt) {
        body = tg_format_expr(c, fmt->valuestring, &emin, &emax);
    }
    if (!body && (pat || fmt)) {
        return NULL;
    }
    if (body) {
        if (body == X_EMPTY) {
            return X_EMPTY;
        }
        /* Lengths must already follow from the pattern/format. */
        bool min_ok = !has_min || emin >= minl;
        bool max_ok = !has_max || (emax >= 0 && emax <= maxl);
        if (!min_ok || !max_ok) {
            if (has_max && emin > maxl) {
                return X_EMPTY;
            }
            return tg_sfail(
                c, TS_ERR_UNSUPPORTED,
                "'minLength'/'maxLength' together with '%s' (lengths it does not imply)",
                pat ? "pattern" : "format");
        }
        return tg_xf(c, "\"\\\"\" %s \"\\\"\"", tg_xgroup(c, body));
    }
    if (!has_min && !has_max) {
        return tg_prim(c, "string");
    }
    if (!tg_prim(c, "cpchar")) {
        return NULL;
    }
    char *rep = tg_rep_expr(c, "cpchar", minl, has_max ? maxl : -1);
    if (!rep || rep == X_EMPTY) {
        return rep;
    }
    return tg_xf(c, "\"\\\"\" %s \"\\\"\"", *rep ? rep : "");
}

/* ---- numbers ----------------------------------------------------------------------------- */

static char *compile_number(sctx *c, const cJSON *s, bool integer) {
    const cJSON *mo = get(s, "multipleOf");
    if (mo) {
        if (!cJSON_IsNumber(mo) || mo->valuedouble <= 0) {
            return tg_sfail(c, TS_ERR_FORMAT, "'multipleOf' must be a positive number");
        }
        if (mo->valuedouble == 1) {
            integer = true;
        } else if (!(integer && mo->valuedouble == floor(mo->valuedouble) && mo->valuedouble < 1)) {
            return tg_sfail(c, TS_ERR_UNSUPPORTED, "'multipleOf' (other than 1) is not supported");
        }
    }
    for (int i = 0; i < 4; i++) {
        static const char *const kw[] = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum"};
        const cJSON *x = get(s, kw[i]);
        if (x && !cJSON_IsNumber(x) && !(i >= 2 && cJSON_IsBool(x))) {
            return tg_sfail(c, TS_ERR_FORMAT, "'%s' must be a number", kw[i]);
        }
    }
    bool has_lo, lo_ex, has_hi, hi_ex;
    double lo = 0, hi = 0;
    tg_bounds(s, false, &has_lo, &lo, &lo_ex);
    tg_bounds(s, true, &has_hi, &hi, &hi_ex);
    if (!integer) {
        return tg_num_range(c, has_lo, lo, lo_ex, has_hi, hi, hi_ex);
    }
    /* Integer bounds; beyond ±9e18 they are clamped inward (a subset). */
    const double cap = 9e18;
    int64_t ilo = 0, ihi = 0;
    if (has_lo) {
        double v = lo_ex ? floor(lo) + 1 : ceil(lo);
        if (v > cap) {
            return X_EMPTY;
        }
        ilo = v < -cap ? (int64_t)-cap : (int64_t)v;
    }
    if (has_hi) {
        double v = hi_ex ? ceil(hi) - 1 : floor(hi);
        if (v < -cap) {
            return X_EMPTY;
        }
        ihi = v > cap ? (int64_t)cap : (int64_t)v;
    }
    return tg_int_range(c, has_lo, ilo, has_hi, ihi);
}

/* ---- enum / const ------------------------------------------------------------------------ */

/* Whether value v meets the keywords of s that apply to its type (only the ones checked
 * here; others make the enum unsupported). */
static int value_ok(sctx *c, const cJSON *s, const cJSON *v, int types) {
    int vt = tg_value_type(v);
    if (types >= 0 && !(vt & types)) {
        return 0;
    }
    for (const cJSON *e = s->child; e; e = e->next) {
        const char *k = e->string;
        if (tg_is_annotation(k) || !strcmp(k, "type") || !strcmp(k, "enum") ||
            !strcmp(k, "const")) {
            continue;
        }
        bool str_kw = !strcmp(k, "minLength") || !strcmp(k, "maxLength");
        bool num_kw = !strcmp(k, "minimum") || !strcmp(k, "maximum") ||
                      !strcmp(k, "exclusiveMinimum") || !strcmp(k, "exclusiveMaximum");
        bool obj_kw = !strcmp(k, "properties") || !strcmp(k, "required") ||
                      !strcmp(k, "additionalProperties") || !strcmp(k, "minProperties") ||
                      !strcmp(k, "maxProperties");
        bool arr_kw = !strcmp(k, "items") || !strcmp(k, "prefixItems") || !strcmp(k, "minItems") ||
                      !strcmp(k, "maxItems") || !strcmp(k, "uniqueItems") ||
                      !strcmp(k, "additionalItems");
        bool fmt_kw = !strcmp(k, "format") || !strcmp(k, "pattern");
        if ((str_kw || fmt_kw) && !(vt & T_STR)) {
            continue;
        }
        if (num_kw && !(vt & T_NUM)) {
            continue;
        }
        if (obj_kw && !(vt & T_OBJ)) {
            continue;
        }
        if (arr_kw && !(vt & T_ARR)) {
            continue;
        }
        if (str_kw && cJSON_IsNumber(e)) {
            size_t l = ts_utf8_count(v->valuestring, strlen(v->valuestring));
            if (!strcmp(k, "minLength") ? l < e->valuedouble : l > e->valuedouble) {
                return 0;
            }
            continue;
        }
        if (num_kw) {
            bool has, ex;
            double b;
            for (int up = 0; up < 2; up++) {
                tg_bounds(s, up, &has, &b, &ex);
                double x = v->valuedouble;
                if (has && (up ? (x > b || (ex && x == b)) : (x < b || (ex && x == b)))) {
                    return 0;
                }
            }
            continue;
        }
        if (!strcmp(k, "format") && cJSON_IsString(e) && !in_list(e->valuestring, known_fmt) &&
            !in_list(e->valuestring, unsupported_fmt)) {
            continue;
        }
        tg_sfail(c, TS_ERR_UNSUPPORTED, "'enum'/'const' together with '%s'", k);
        return -1;
    }
    return 1;
}

static char *compile_enum(sctx *c, const cJSON *s) {
    const cJSON *cst = get(s, "const");
    const cJSON *en = get(s, "enum");
    if (en && !cJSON_IsArray(en)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'enum' must be an array");
    }
    int types = tg_explicit_types(c, s);
    if (c->st != TS_OK) {
        return NULL;
    }
    size_t nv = en ? (size_t)cJSON_GetArraySize(en) : 1;
    char **alts = tg_xalloc(c, (nv + 1) * sizeof *alts);
    if (!alts) {
        return NULL;
    }
    size_t k = 0;
    const cJSON *first = en ? en->child : cst;
    char *cst_canon = cst && en ? tg_canon_json(c, cst) : NULL;
    if (cst && en && !cst_canon) {
        return NULL;
    }
    for (const cJSON *v = first; v; v = en ? v->next : NULL) {
        if (!tg_poll(c)) {
            return NULL;
        }
        if (cst_canon) {
            char *a = tg_canon_json(c, v);
            if (!a) {
                return NULL;
            }
            if (strcmp(a, cst_canon)) {
                continue;
            }
        }
        int ok = value_ok(c, s, v, types);
        if (ok < 0) {
            return NULL;
        }
        if (ok) {
            alts[k++] = tg_const_expr(c, v);
        }
    }
    char *e = tg_xalt(c, alts, k);
    if (e && e != X_EMPTY && k > 1) {
        e = tg_rule_add(c, tg_hint(c, "enum"), e);
    }
    return e;
}

/* ---- anyOf / oneOf ----------------------------------------------------------------------- */

static bool constraining_siblings(const cJSON *s, const char *const *skip) {
    for (const cJSON *e = s->child; e; e = e->next) {
        if (!tg_is_annotation(e->string) && !in_list(e->string, skip)) {
            return true;
        }
    }
    return false;
}

static char *compile_union(sctx *c, const cJSON *s, const char *kw) {
    const cJSON *list = get(s, kw);
    if (!cJSON_IsArray(list) || !list->child) {
        return tg_sfail(c, TS_ERR_FORMAT, "'%s' must be a non-empty array", kw);
    }
    bool one = !strcmp(kw, "oneOf");
    static const char *const skip[] = {"anyOf", "oneOf", NULL};
    bool sib = constraining_siblings(s, skip);
    cJSON *sibling = NULL;
    if (sib) {
        sibling = tg_own(c, cJSON_CreateObject());
        if (!sibling) {
            return NULL;
        }
        for (const cJSON *e = s->child; e; e = e->next) {
            if (strcmp(e->string, kw)) {
                cJSON *r = cJSON_IsObject(e)  ? cJSON_CreateObjectReference(e->child)
                           : cJSON_IsArray(e) ? cJSON_CreateArrayReference(e->child)
                                              : cJSON_Duplicate(e, false);
                if (!r) {
                    return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
                }
                cJSON_AddItemToObject(sibling, e->string, r);
            }
        }
    }
    size_t n = (size_t)cJSON_GetArraySize(list);
    const cJSON **br = tg_xalloc(c, n * sizeof *br);
    char **alts = tg_xalloc(c, n * sizeof *alts);
    if (!br || !alts) {
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        br[i] = e;
        if (sib) {
            /* The branch and the siblings: {"allOf": [siblings, branch]} merged. */
            cJSON *pair = tg_own(c, cJSON_CreateObject());
            if (!pair) {
                return NULL;
            }
            cJSON *arr = cJSON_AddArrayToObject(pair, "allOf");
            cJSON_AddItemToArray(arr, cJSON_CreateObjectReference(sibling->child));
            cJSON_AddItemToArray(arr, cJSON_IsObject(e) ? cJSON_CreateObjectReference(e->child)
                                                        : cJSON_Duplicate(e, false));
            size_t saved = tg_path_push(c, kw);
            tg_path_push_i(c, (int)i);
            br[i] = tg_merge(c, pair);
            tg_path_pop(c, saved);
            if (!br[i]) {
                return NULL;
            }
        }
    }
    if (one) {
        /* Disjointness is proved pair by pair: n^2 / 2 proofs, so the branch count is bounded. */
        if (n > TS_SCHEMA_MAX_ONEOF) {
            return tg_sfail(c, TS_ERR_LIMIT,
                            "'oneOf' with %zu branches (at most %d: each pair must be proved "
                            "disjoint; 'anyOf' has no such limit)",
                            n, TS_SCHEMA_MAX_ONEOF);
        }
        for (size_t a = 0; a < n; a++) {
            for (size_t b = a + 1; b < n; b++) {
                if (!tg_poll(c) || !tg_disjoint(c, br[a], br[b])) {
                    return tg_sfail(c, TS_ERR_UNSUPPORTED,
                                    "'oneOf': branches %zu and %zu may both match (only "
                                    "provably disjoint branches are supported)",
                                    a, b);
                }
            }
        }
        if (c->st != TS_OK) {
            return NULL;
        }
    }
    for (i = 0; i < n; i++) {
        size_t saved = tg_path_push(c, kw);
        tg_path_push_i(c, (int)i);
        alts[i] = tg_compile(c, br[i]);
        tg_path_pop(c, saved);
        if (!alts[i]) {
            return NULL;
        }
    }
    char *e = tg_xalt(c, alts, n);
    if (e && e != X_EMPTY && n > 1) {
        e = tg_rule_add(c, tg_hint(c, kw), e);
    }
    return e;
}

/* ---- $ref -------------------------------------------------------------------------------- */

/* Compiles node into a rule of its own, once per key: a $ref target (key: the target) or a
 * schema that is merged (key: its first member, which cJSON references share, so the merged
 * copies of one schema meet the same rule). Recursion then ends at the rule's name; meeting a
 * key again before entering any object or array would be a grammar that never ends. */
static char *memo_rule(sctx *c, const cJSON *key, const char *hint_name, const cJSON *node,
                       bool do_merge, const char *what) {
    /* cJSON nodes are at least 8-byte aligned: the low bit tells merges from $ref targets. */
    uintptr_t mkey = (uintptr_t)key | (do_merge ? 1u : 0u);
    int32_t have = tg_pmap_get(&c->refmap, mkey);
    if (have >= 0) {
        sref *r = &c->refs[have];
        if (r->busy) {
            r->used = true;
        }
        if (r->busy && r->nest == c->nest) {
            return tg_sfail(c, TS_ERR_FORMAT,
                            "%s refers back to itself before any object or array (a cycle with "
                            "no base case)",
                            what);
        }
        return r->name;
    }
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 16;
        sref *r = realloc(c->refs, cap * sizeof *r);
        if (!r) {
            return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        }
        c->refs = r;
        c->cap_refs = cap;
    }
    int32_t idx = tg_rule_reserve(c, hint_name);
    if (idx < 0) {
        return NULL;
    }
    size_t ri = c->n_refs++;
    c->refs[ri] = (sref){
        .node = key, .name = c->rules[idx].name, .nest = c->nest, .busy = true, .merged = do_merge};
    if (!tg_pmap_put(c, &c->refmap, mkey, (int32_t)ri)) {
        return NULL;
    }
    char *body = NULL;
    if (do_merge) {
        const cJSON *m = tg_merge(c, node);
        body = m ? tg_compile(c, m) : NULL;
    } else {
        body = tg_compile(c, node);
    }
    c->refs[ri].busy = false;
    if (!body) {
        return NULL;
    }
    if (body == X_EMPTY) {
        if (c->refs[ri].used) {
            return tg_sfail(c, TS_ERR_UNSUPPORTED, "%s accepts no value", what);
        }
        c->rules[idx].dead = true;
        c->refs[ri].name = X_EMPTY;
        return X_EMPTY;
    }
    tg_rule_set_body(c, idx, body);
    return c->rules[idx].name;
}

static char *compile_ref(sctx *c, const char *ref) {
    const cJSON *t = tg_resolve_ref(c, ref);
    if (!t) {
        return NULL;
    }
    const char *last = strrchr(ref, '/');
    /* Errors inside the target name its own pointer. */
    char saved_path[sizeof c->path];
    size_t saved_len = c->path_len;
    memcpy(saved_path, c->path, sizeof saved_path);
    const char *frag = strchr(ref, '#');
    snprintf(c->path, sizeof c->path, "%s", frag && frag[1] ? frag + 1 : "");
    c->path_len = strlen(c->path);
    char *what = tg_xf(c, "'$ref': '%.200s'", ref);
    char *r = what ? memo_rule(c, cJSON_IsObject(t) && t->child ? t->child : t,
                               tg_xf(c, "ref-%s", last ? last + 1 : "root"), t, false, what)
                   : NULL;
    memcpy(c->path, saved_path, sizeof saved_path);
    c->path_len = saved_len;
    return r;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static int inferred_types(const cJSON *s) {
    static const char *const obj[] = {"properties",    "required",      "additionalProperties",
                                      "minProperties", "maxProperties", NULL};
    static const char *const arr[] = {
        "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", NULL};
    static const char *const num[] = {"minimum",          "maximum",    "exclusiveMinimum",
                                      "exclusiveMaximum", "multipleOf", NULL};
    int m = 0;
    for (const cJSON *e = s->child; e; e = e->next) {
        if (in_list(e->string, obj)) {
            m |= T_OBJ;
        } else if (in_list(e->string, arr)) {
            m |= T_ARR;
        } else if (in_list(e->string, str)) {
            m |= T_STR;
        } else if (in_list(e->string, num)) {
            m |= T_NUM;
        }
    }
    return m ? m : T_ALL;
}

static char *compile_types(sctx *c, const cJSON *s) {
    int t = tg_explicit_types(c, s);
    if (c->st != TS_OK) {
        return NULL;
    }
    if (t < 0) {
        t = inferred_types(s);
    }
    if (t == T_ALL && !s->child) {
        return tg_prim(c, "value");
    }
    if (t & T_NUM) {
        t &= ~T_INT;
    }
    char *alts[7];
    size_t k = 0;
    for (int b = 1; b <= T_INT; b <<= 1) {
        if (!(t & b)) {
            continue;
        }
        switch (b) {
        case T_NULL:
            alts[k++] = tg_prim(c, "null");
            break;
        case T_BOOL:
            alts[k++] = tg_prim(c, "boolean");
            break;
        case T_OBJ:
            alts[k++] = tg_compile_object(c, s);
            break;
        case T_ARR:
            alts[k++] = tg_compile_array(c, s);
            break;
        case T_STR:
            alts[k++] = compile_string(c, s);
            break;
        case T_NUM:
            alts[k++] = compile_number(c, s, false);
            break;
        case T_INT:
            alts[k++] = compile_number(c, s, true);
            break;
        default:
            break;
        }
        if (!alts[k - 1]) {
            return NULL;
        }
    }
    return tg_xalt(c, alts, k);
}

char *tg_compile(sctx *c, const cJSON *s) {
    if (c->st != TS_OK) {
        return NULL;
    }
    if (cJSON_IsTrue(s)) {
        return tg_prim(c, "value");
    }
    if (cJSON_IsFalse(s)) {
        return X_EMPTY;
    }
    if (!cJSON_IsObject(s)) {
        return tg_sfail(c, TS_ERR_FORMAT, "a schema must be an object or a boolean");
    }
    if (!tg_poll(c)) {
        return NULL;
    }
    if (++c->depth > TS_SCHEMA_MAX_DEPTH) {
        c->depth--;
        return tg_sfail(c, TS_ERR_LIMIT, "the schema nests deeper than %d", TS_SCHEMA_MAX_DEPTH);
    }
    char *r = NULL;
    for (const cJSON *e = s->child; e; e = e->next) {
        if (in_list(e->string, unsupported_kw)) {
            /* Trivial forms that constrain nothing. */
            bool empty_obj = cJSON_IsObject(e) && !e->child;
            if (empty_obj &&
                (!strcmp(e->string, "patternProperties") || !strcmp(e->string, "dependencies") ||
                 !strcmp(e->string, "dependentRequired") ||
                 !strcmp(e->string, "dependentSchemas") || !strcmp(e->string, "propertyNames"))) {
                continue;
            }
            if (cJSON_IsTrue(e) && (!strcmp(e->string, "propertyNames") ||
                                    !strcmp(e->string, "unevaluatedProperties") ||
                                    !strcmp(e->string, "unevaluatedItems"))) {
                continue;
            }
            tg_sfail(c, TS_ERR_UNSUPPORTED, "'%s' is not supported", e->string);
            goto out;
        }
    }
    const cJSON *ref = get(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) {
            tg_sfail(c, TS_ERR_FORMAT, "'$ref' must be a string");
            goto out;
        }
        static const char *const skip[] = {"$ref", NULL};
        if (!constraining_siblings(s, skip)) {
            r = compile_ref(c, ref->valuestring);
            goto out;
        }
    }
    if (ref || get(s, "allOf")) {
        r = memo_rule(c, s->child, tg_hint(c, "all"), s, true, "a schema with $ref/allOf");
        goto out;
    }
    bool any = get(s, "anyOf") != NULL, one = get(s, "oneOf") != NULL;
    if (any && one) {
        /* anyOf ∧ oneOf: the oneOf branches each with the anyOf (kept as a sibling). */
        r = compile_union(c, s, "oneOf");
        goto out;
    }
    if (any || one) {
        r = compile_union(c, s, any ? "anyOf" : "oneOf");
        goto out;
    }
    if (get(s, "enum") || get(s, "const")) {
        r = compile_enum(c, s);
        goto out;
    }
    r = compile_types(c, s);
out:
    c->depth--;
    return c->st == TS_OK ? r : NULL;
}

/* ---- entry ------------------------------------------------------------------------------- */

ts_status ts_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf, ts_error *err) {
    return ts_schema_to_gbnf_ex(schema_json, len, NULL, gbnf, err);
}

/* The rules as GBNF text ("name ::= body" lines, dead rules left out); NULL with an error. */
static char *write_rules(sctx *c) {
    ts_buf b = {0};
    for (size_t i = 0; i < c->n_rules && c->st == TS_OK; i++) {
        const srule *r = &c->rules[i];
        if (r->dead) {
            continue;
        }
        if (!r->body) {
            tg_sfail(c, TS_ERR_INTERNAL, "rule '%s' has no body", r->name);
            break;
        }
        ts_buf_puts(&b, r->name);
        ts_buf_puts(&b, " ::= ");
        ts_buf_puts(&b, *r->body ? r->body : "\"\"");
        ts_buf_putc(&b, '\n');
        if (b.n > TS_SCHEMA_MAX_OUTPUT) {
            tg_sfail(c, TS_ERR_LIMIT, "the grammar would be more than %u bytes",
                     TS_SCHEMA_MAX_OUTPUT);
        }
    }
    if (c->st == TS_OK && b.oom) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    if (c->st != TS_OK) {
        ts_buf_free(&b);
        return NULL;
    }
    return ts_buf_take(&b);
}

ts_status ts_schema_to_gbnf_ex(const char *schema_json, size_t len, const ts_stop *stop,
                               char **gbnf, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    ts_error_clear(err);
    if (!gbnf || (!schema_json && len)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "schema: NULL argument");
    }
    *gbnf = NULL;
    if (len > TS_SCHEMA_MAX_BYTES) {
        return ts_error_set(err, TS_ERR_LIMIT, "schema: %zu bytes is more than the %u allowed", len,
                            TS_SCHEMA_MAX_BYTES);
    }
    ts_status st = ts_stop_check(stop, "schema", err);
    if (st != TS_OK) {
        return st;
    }
    /* JSON text is UTF-8; keys and strings go into the grammar as they are. */
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t l = ts_utf8_decode(schema_json + i, len - i, &cp);
        if (!l) {
            return ts_error_set(err, TS_ERR_FORMAT, "schema: invalid UTF-8 at byte %zu", i);
        }
        i += l;
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(schema_json ? schema_json : "", len, &end, false);
    if (!doc) {
        size_t at = end && end >= schema_json ? (size_t)(end - schema_json) : 0;
        return ts_error_set(err, TS_ERR_FORMAT,
                            "schema: not valid JSON (error near byte %zu; nesting is limited to "
                            "%d levels)",
                            at, CJSON_NESTING_LIMIT);
    }
    for (; end && (size_t)(end - schema_json) < len; end++) {
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            cJSON_Delete(doc);
            return ts_error_set(err, TS_ERR_FORMAT, "schema: text after the JSON value at byte %zu",
                                (size_t)(end - schema_json));
        }
    }
    sctx c = {.err = err, .st = TS_OK, .doc = doc, .stop = stop};
    int32_t root = tg_rule_reserve(&c, "root");
    char *body = tg_compile(&c, doc);
    if (body == X_EMPTY) {
        tg_sfail(&c, TS_ERR_UNSUPPORTED, "the schema accepts no JSON value");
    }
    if (c.st == TS_OK) {
        tg_rule_set_body(&c, root, body);
    }
    char *out = c.st == TS_OK ? write_rules(&c) : NULL;
    for (size_t i = 0; i < c.n_owned; i++) {
        cJSON_Delete(c.owned[i]);
    }
    free(c.owned);
    free(c.refs);
    free(c.rules);
    ts_schema_maps_free(&c);
    ts_schema_arena_free(&c);
    cJSON_Delete(doc);
    if (c.st != TS_OK) {
        return c.st;
    }
    *gbnf = out;
    return TS_OK;
}
