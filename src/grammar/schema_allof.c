/*
 * schema_allof.c — merging: a schema's allOf parts and $ref targets (and anyOf siblings, which
 * the compiler merges into each branch) opened and combined into one schema: types intersect,
 * bounds take the tighter value, enums intersect, each property gets every part's constraint,
 * anyOf lists multiply out (at most 64 combinations). What cannot be combined exactly is
 * TS_ERR_UNSUPPORTED naming the keyword.
 *
 * Merges reference their parts' members (cJSON references), so a merged schema costs one item
 * per member; names and values are matched through hash maps, and the total copied over a
 * compile is bounded (TS_SCHEMA_MAX_MERGE), since one schema can ask for many merges.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"

/* Opens $ref and allOf in s, appending the plain parts to list. */
static bool flatten(sctx *c, const cJSON *s, const cJSON ***list, size_t *n, size_t *cap,
                    int depth) {
    if (c->st != TS_OK) {
        return false;
    }
    if (depth > 32) {
        tg_sfail(c, TS_ERR_LIMIT, "allOf/$ref nested deeper than 32 while merging (a $ref cycle?)");
        return false;
    }
    if (cJSON_IsTrue(s)) {
        return true;
    }
    if (!cJSON_IsObject(s) && !cJSON_IsFalse(s)) {
        tg_sfail(c, TS_ERR_FORMAT, "a schema must be an object or a boolean");
        return false;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (ref || all) {
        if (ref && !cJSON_IsString(ref)) {
            tg_sfail(c, TS_ERR_FORMAT, "'$ref' must be a string");
            return false;
        }
        if (all && (!cJSON_IsArray(all) || !all->child)) {
            tg_sfail(c, TS_ERR_FORMAT, "'allOf' must be a non-empty array");
            return false;
        }
        /* The rest of s without $ref and allOf. */
        cJSON *restobj = tg_own(c, cJSON_CreateObject());
        if (!restobj) {
            return false;
        }
        for (const cJSON *e = s->child; e; e = e->next) {
            if (strcmp(e->string, "$ref") && strcmp(e->string, "allOf") &&
                !tg_add_ref(c, restobj, e->string, e)) {
                return false;
            }
        }
        if (restobj->child && !flatten(c, restobj, list, n, cap, depth + 1)) {
            return false;
        }
        if (ref) {
            const cJSON *t = tg_resolve_ref(c, ref->valuestring);
            if (!t || !flatten(c, t, list, n, cap, depth + 1)) {
                return false;
            }
        }
        for (const cJSON *e = all ? all->child : NULL; e; e = e->next) {
            if (!flatten(c, e, list, n, cap, depth + 1)) {
                return false;
            }
        }
        return true;
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        const cJSON **l = tg_xalloc(c, nc * sizeof *l);
        if (!l) {
            return false;
        }
        if (*n) {
            memcpy(l, *list, *n * sizeof *l);
        }
        *list = l;
        *cap = nc;
    }
    (*list)[(*n)++] = s;
    return true;
}

static const cJSON *get(const cJSON *s, const char *k) {
    return cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, k) : NULL;
}

/* Draft-4's boolean exclusiveMinimum/Maximum turned into the numeric form. */
static void bound_of(const cJSON *s, bool upper, bool *has, double *v, bool *excl) {
    const cJSON *b = get(s, upper ? "maximum" : "minimum");
    const cJSON *x = get(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    *has = false;
    *excl = false;
    if (cJSON_IsNumber(b)) {
        *has = true;
        *v = b->valuedouble;
        *excl = cJSON_IsTrue(x);
    }
    if (cJSON_IsNumber(x)) {
        double xv = x->valuedouble;
        if (!*has || (upper ? xv <= *v : xv >= *v)) {
            *has = true;
            *v = xv;
            *excl = true;
        }
    }
}

void tg_bounds(const cJSON *s, bool upper, bool *has, double *v, bool *excl) {
    bound_of(s, upper, has, v, excl);
}

static const char *const min_kw[] = {"minLength", "minItems", "minProperties", NULL};
static const char *const max_kw[] = {"maxLength", "maxItems", "maxProperties", NULL};

static bool in_list(const char *k, const char *const *l) {
    for (size_t i = 0; l[i]; i++) {
        if (!strcmp(k, l[i])) {
            return true;
        }
    }
    return false;
}

/* Counts work done copying schemas into merges: a merge references every property and value
 * of its parts, and a schema can make many merges of large parts (anyOf siblings merged into
 * each branch), so the total is bounded. */
static bool merge_budget(sctx *c, size_t n) {
    c->merge_work += n;
    if (c->merge_work > TS_SCHEMA_MAX_MERGE) {
        tg_sfail(c, TS_ERR_LIMIT,
                 "allOf/$ref/anyOf merges would copy more than %d properties and values",
                 TS_SCHEMA_MAX_MERGE);
        return false;
    }
    return tg_poll(c);
}

/* props gets each property any part lists, as the allOf of what every part says of it (its
 * properties entry or its additionalProperties). Names are looked up in hash maps (one per
 * part), not by walking the objects: parts with thousands of properties stay linear. */
static bool merge_properties(sctx *c, const cJSON **parts, size_t n, cJSON *props) {
    strmap *by_part = calloc(n, sizeof *by_part);
    strmap seen = {0};
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const cJSON *pp = get(parts[i], "properties");
        if (pp && !cJSON_IsObject(pp)) {
            free(by_part);
            tg_sfail(c, TS_ERR_FORMAT, "'properties' must be an object");
            return false;
        }
        total += (size_t)(pp ? cJSON_GetArraySize(pp) : 0);
    }
    const cJSON **flat = malloc((total ? total : 1) * sizeof *flat);
    bool ok = by_part && flat;
    if (!ok) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const cJSON *pp = get(parts[i], "properties");
        for (const cJSON *e = pp ? pp->child : NULL; ok && e; e = e->next) {
            flat[k] = e;
            ok = tg_smap_get(&by_part[i], e->string) >= 0 ||
                 tg_smap_put(c, &by_part[i], e->string, (int32_t)k);
            k++;
        }
    }
    for (size_t i = 0; ok && i < n; i++) {
        const cJSON *pp = get(parts[i], "properties");
        for (const cJSON *e = pp ? pp->child : NULL; ok && e; e = e->next) {
            if (tg_smap_get(&seen, e->string) >= 0) {
                continue;
            }
            ok = tg_smap_put(c, &seen, e->string, 0) && merge_budget(c, n);
            const cJSON *say[64];
            size_t ns = 0;
            for (size_t j = 0; ok && j < n && ns < 64; j++) {
                int32_t at = tg_smap_get(&by_part[j], e->string);
                const cJSON *pj = at >= 0 ? flat[at] : get(parts[j], "additionalProperties");
                if (pj) {
                    say[ns++] = pj;
                }
            }
            const cJSON *m = ok ? tg_all_of(c, say, ns) : NULL;
            ok = m && tg_add_ref(c, props, e->string, m);
        }
    }
    for (size_t i = 0; by_part && i < n; i++) {
        tg_smap_free(&by_part[i]);
    }
    free(by_part);
    free(flat);
    tg_smap_free(&seen);
    return ok && c->st == TS_OK;
}

const cJSON *tg_merge(sctx *c, const cJSON *s) {
    const cJSON **parts = NULL;
    size_t n = 0, cap = 0;
    if (!flatten(c, s, &parts, &n, &cap, 0)) {
        return NULL;
    }
    cJSON *out = tg_own(c, cJSON_CreateObject());
    if (!out) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsFalse(parts[i])) {
            return tg_own(c, cJSON_CreateFalse());
        }
    }
    if (n == 0) {
        return out;
    }
    if (n == 1) {
        return parts[0];
    }

    /* type */
    int tm = T_ALL;
    bool any_type = false;
    for (size_t i = 0; i < n; i++) {
        int t = tg_explicit_types(c, parts[i]);
        if (c->st != TS_OK) {
            return NULL;
        }
        if (t < 0) {
            continue;
        }
        any_type = true;
        /* integer ∩ number = integer */
        int tt = t & T_NUM ? t | T_INT : t;
        tm &= tt;
    }
    if (any_type) {
        if (!tm) {
            return tg_own(c, cJSON_CreateFalse());
        }
        if (tm & T_INT && tm & T_NUM) {
            bool all_num = true;
            for (size_t i = 0; i < n; i++) {
                int t = tg_explicit_types(c, parts[i]);
                if (t > 0 && !(t & T_NUM)) {
                    all_num = false;
                }
            }
            if (!all_num) {
                tm &= ~T_NUM;
            }
        }
        cJSON *arr = cJSON_AddArrayToObject(out, "type");
        for (int b = 1; b <= T_INT; b <<= 1) {
            if (tm & b) {
                cJSON_AddItemToArray(arr, cJSON_CreateString(tg_type_name(b)));
            }
        }
    }

    /* bounds */
    for (int upper = 0; upper < 2; upper++) {
        bool have = false, excl = false;
        double v = 0;
        for (size_t i = 0; i < n; i++) {
            bool h, e;
            double x;
            bound_of(parts[i], upper, &h, &x, &e);
            if (!h) {
                continue;
            }
            if (!have || (upper ? (x < v || (x == v && e)) : (x > v || (x == v && e)))) {
                have = true;
                v = x;
                excl = e;
            }
        }
        if (have) {
            cJSON_AddNumberToObject(out,
                                    upper ? (excl ? "exclusiveMaximum" : "maximum")
                                          : (excl ? "exclusiveMinimum" : "minimum"),
                                    v);
        }
    }

    /* enum / const: the values every part allows */
    {
        const cJSON *first = NULL;
        for (size_t i = 0; i < n && !first; i++) {
            if (get(parts[i], "enum") || get(parts[i], "const")) {
                first = parts[i];
            }
        }
        if (first) {
            char **fv;
            size_t fn;
            if (!tg_value_set(c, first, &fv, &fn)) {
                return tg_sfail(c, TS_ERR_FORMAT, "'enum' must be an array");
            }
            const cJSON *en = get(first, "enum");
            const cJSON *cst = get(first, "const");
            cJSON *arr = cJSON_AddArrayToObject(out, "enum");
            /* The other parts' values as hash sets, made once (not once per value). */
            strmap *sets = calloc(n, sizeof *sets);
            bool *has = calloc(n, sizeof *has);
            if (!sets || !has) {
                free(sets);
                free(has);
                return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
            }
            for (size_t i = 0; i < n && merge_budget(c, fn); i++) {
                has[i] = parts[i] != first && tg_value_map(c, parts[i], &sets[i]);
            }
            size_t idx = 0;
            const cJSON *ev = cst ? cst : en->child;
            for (; c->st == TS_OK && ev && idx < fn; idx++, ev = cst ? NULL : ev->next) {
                bool keep = fv[idx] != NULL;
                for (size_t i = 0; i < n && keep; i++) {
                    keep = !has[i] || tg_smap_get(&sets[i], fv[idx]) >= 0;
                }
                if (keep) {
                    cJSON_AddItemToArray(arr, tg_jref(ev));
                }
            }
            for (size_t i = 0; i < n; i++) {
                tg_smap_free(&sets[i]);
            }
            free(sets);
            free(has);
            if (c->st != TS_OK) {
                return NULL;
            }
        }
    }

    /* properties / additionalProperties / required */
    {
        bool any_props = false;
        for (size_t i = 0; i < n; i++) {
            if (get(parts[i], "properties") || get(parts[i], "additionalProperties")) {
                any_props = true;
            }
        }
        if (any_props) {
            cJSON *props = cJSON_AddObjectToObject(out, "properties");
            if (!merge_properties(c, parts, n, props)) {
                return NULL;
            }
            const cJSON *aps[64];
            size_t na = 0;
            for (size_t i = 0; i < n && na < 64; i++) {
                const cJSON *ap = get(parts[i], "additionalProperties");
                if (ap) {
                    aps[na++] = ap;
                }
            }
            if (na) {
                const cJSON *m = tg_all_of(c, aps, na);
                if (!m || !tg_add_ref(c, out, "additionalProperties", m)) {
                    return NULL;
                }
            }
        }
        cJSON *req = NULL;
        strmap req_seen = {0}; /* names already in req */
        for (size_t i = 0; i < n; i++) {
            const cJSON *r = get(parts[i], "required");
            if (!r) {
                continue;
            }
            if (!cJSON_IsArray(r)) {
                tg_smap_free(&req_seen);
                return tg_sfail(c, TS_ERR_FORMAT, "'required' must be an array");
            }
            if (!req) {
                req = cJSON_AddArrayToObject(out, "required");
            }
            for (const cJSON *e = r->child; e; e = e->next) {
                if (!cJSON_IsString(e)) {
                    tg_smap_free(&req_seen);
                    return tg_sfail(c, TS_ERR_FORMAT, "'required' must list strings");
                }
                if (!merge_budget(c, 1)) {
                    tg_smap_free(&req_seen);
                    return NULL;
                }
                if (tg_smap_get(&req_seen, e->valuestring) < 0) {
                    if (!tg_smap_put(c, &req_seen, e->valuestring, 0)) {
                        tg_smap_free(&req_seen);
                        return NULL;
                    }
                    cJSON_AddItemToArray(req, cJSON_CreateString(e->valuestring));
                }
            }
        }
        tg_smap_free(&req_seen);
    }

    /* anyOf / oneOf: one list is kept; several anyOf lists multiply out */
    {
        const cJSON *lists[16];
        size_t nl = 0;
        bool one = false;
        for (size_t i = 0; i < n; i++) {
            const cJSON *a = get(parts[i], "anyOf"), *o = get(parts[i], "oneOf");
            if (a && nl < 16) {
                lists[nl++] = a;
            }
            if (o && nl < 16) {
                lists[nl++] = o;
                one = true;
            }
        }
        if (nl == 1) {
            if (!tg_add_ref(c, out, one ? "oneOf" : "anyOf", lists[0])) {
                return NULL;
            }
        } else if (nl > 1) {
            if (one) {
                return tg_sfail(c, TS_ERR_UNSUPPORTED,
                                "'allOf' combining 'oneOf' with another 'anyOf'/'oneOf'");
            }
            cJSON *prod = cJSON_CreateArray();
            cJSON_AddItemToArray(prod, cJSON_CreateObject()); /* the empty product: {} */
            for (size_t l = 0; l < nl; l++) {
                cJSON *next = cJSON_CreateArray();
                int count = 0;
                for (const cJSON *p = prod->child; p; p = p->next) {
                    for (const cJSON *b = lists[l]->child; b; b = b->next) {
                        if (++count > 64) {
                            cJSON_Delete(prod);
                            cJSON_Delete(next);
                            return tg_sfail(c, TS_ERR_UNSUPPORTED,
                                            "'allOf' of 'anyOf' lists with more than 64 "
                                            "combinations");
                        }
                        cJSON *o = cJSON_CreateObject();
                        cJSON *arr = cJSON_AddArrayToObject(o, "allOf");
                        if (p->child) {
                            for (const cJSON *q = p->child->child; q; q = q->next) {
                                cJSON_AddItemToArray(arr, tg_jref(q));
                            }
                        }
                        cJSON_AddItemToArray(arr, tg_jref(b));
                        cJSON_AddItemToArray(next, o);
                    }
                }
                cJSON_Delete(prod);
                prod = next;
            }
            if (!tg_own(c, prod)) {
                return NULL;
            }
            if (!tg_add_ref(c, out, "anyOf", prod)) {
                return NULL;
            }
        }
    }

    /* everything else: min/max take the tighter value; other keywords must agree */
    static const char *const done[] = {
        "type",  "minimum", "maximum",    "exclusiveMinimum",     "exclusiveMaximum",
        "enum",  "const",   "properties", "additionalProperties", "required",
        "anyOf", "oneOf",   NULL};
    for (size_t i = 0; i < n; i++) {
        for (const cJSON *e = parts[i]->child; e; e = e->next) {
            const char *k = e->string;
            if (in_list(k, done) || tg_is_annotation(k) ||
                cJSON_GetObjectItemCaseSensitive(out, k)) {
                continue;
            }
            bool mn = in_list(k, min_kw), mx = in_list(k, max_kw);
            if (mn || mx) {
                double v = 0;
                bool have = false;
                for (size_t j = 0; j < n; j++) {
                    const cJSON *x = get(parts[j], k);
                    if (!cJSON_IsNumber(x)) {
                        continue;
                    }
                    if (!have || (mn ? x->valuedouble > v : x->valuedouble < v)) {
                        v = x->valuedouble;
                    }
                    have = true;
                }
                if (have) {
                    cJSON_AddNumberToObject(out, k, v);
                }
                continue;
            }
            const cJSON *others[64];
            size_t no = 0;
            bool same = true;
            char *cv = tg_canon_json(c, e);
            for (size_t j = 0; j < n && no < 64; j++) {
                const cJSON *x = get(parts[j], k);
                if (!x) {
                    continue;
                }
                others[no++] = x;
                char *xv = tg_canon_json(c, x);
                if (!cv || !xv) {
                    return NULL;
                }
                same = same && !strcmp(cv, xv);
            }
            if (same) {
                if (!tg_add_ref(c, out, k, e)) {
                    return NULL;
                }
            } else if (!strcmp(k, "items") || !strcmp(k, "additionalItems") ||
                       !strcmp(k, "contains")) {
                for (size_t j = 0; j < no; j++) {
                    if (cJSON_IsArray(others[j])) {
                        return tg_sfail(c, TS_ERR_UNSUPPORTED,
                                        "'allOf' with two different tuple 'items'");
                    }
                }
                const cJSON *m = tg_all_of(c, others, no);
                if (!m || !tg_add_ref(c, out, k, m)) {
                    return NULL;
                }
            } else if (!strcmp(k, "uniqueItems")) {
                cJSON_AddTrueToObject(out, k);
            } else {
                return tg_sfail(c, TS_ERR_UNSUPPORTED,
                                "'allOf' with different values of '%s' in two parts", k);
            }
        }
    }
    return out;
}
