/*
 * schema_merge.c — allOf as one schema, $ref resolution, type sets and the disjointness test
 * that lets oneOf compile as an alternation.
 *
 * Merging: the parts of an allOf (and a $ref with sibling keywords, which is an allOf of the
 * target and the siblings) are flattened — nested allOf and $ref are opened — and combined
 * keyword by keyword into a new schema object: type sets intersect, required lists join, bounds
 * take the tighter value, enum/const intersect, each property gets the allOf of what every part
 * says about it (its "properties" entry, else its "additionalProperties"), anyOf lists multiply
 * out. A keyword that two parts give differently and that cannot be combined (two patterns, two
 * tuples...) is TS_ERR_UNSUPPORTED. The merged objects hold cJSON references to the parts'
 * subschemas, never copies of them, and live in c->owned until the compiler ends.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"

/* ---- owned objects ----------------------------------------------------------------------- */

cJSON *tg_own(sctx *c, cJSON *j) {
    if (c->st != TS_OK) {
        cJSON_Delete(j);
        return NULL;
    }
    if (!j) {
        return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 32;
        cJSON **o = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            cJSON_Delete(j);
            return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        }
        c->owned = o;
        c->cap_owned = cap;
    }
    if (c->n_owned >= 200000) {
        cJSON_Delete(j);
        return tg_sfail(c, TS_ERR_LIMIT, "allOf/anyOf combinations grow too large");
    }
    c->owned[c->n_owned++] = j;
    return j;
}

/* A non-owning view of j to put into a merged object. */
static cJSON *jref(const cJSON *j) {
    if (cJSON_IsObject(j)) {
        return cJSON_CreateObjectReference(j->child);
    }
    if (cJSON_IsArray(j)) {
        return cJSON_CreateArrayReference(j->child);
    }
    return cJSON_Duplicate(j, false);
}

static bool add_ref(sctx *c, cJSON *obj, const char *key, const cJSON *v) {
    cJSON *r = jref(v);
    if (!r) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        return false;
    }
    cJSON_AddItemToObject(obj, key, r);
    return true;
}

/* {"allOf": [parts...]} (owned), or the single part itself. */
static const cJSON *all_of(sctx *c, const cJSON **parts, size_t n) {
    if (n == 1) {
        return parts[0];
    }
    cJSON *o = tg_own(c, cJSON_CreateObject());
    if (!o) {
        return NULL;
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "allOf");
    if (!arr) {
        return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *r = jref(parts[i]);
        if (!r) {
            return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        }
        cJSON_AddItemToArray(arr, r);
    }
    return o;
}

/* ---- $ref -------------------------------------------------------------------------------- */

/* Child seg of object or array cur (NULL when absent). cJSON finds children by walking them,
 * so a schema with thousands of $defs and a $ref to each would be quadratic: a container with
 * more than a few children gets an index (by key and by position) on its first lookup. */
static const cJSON *child_of(sctx *c, const cJSON *cur, const char *seg) {
    bool arr = cJSON_IsArray(cur);
    long idx = -1;
    if (arr) {
        char *end;
        idx = strtol(seg, &end, 10);
        if (!*seg || *end || idx < 0) {
            return NULL;
        }
    }
    int32_t at = tg_pmap_get(&c->kidx, (uintptr_t)cur);
    if (at < 0) {
        size_t n = 0;
        for (const cJSON *e = cur->child; e && n <= 32; e = e->next) {
            n++;
        }
        if (n <= 32) {
            return arr ? cJSON_GetArrayItem(cur, (int)idx)
                       : cJSON_GetObjectItemCaseSensitive(cur, seg);
        }
        n = (size_t)cJSON_GetArraySize(cur);
        if (c->n_kix == c->cap_kix) {
            size_t cap = c->cap_kix ? 2 * c->cap_kix : 8;
            kindex *q = realloc(c->kix, cap * sizeof *q);
            if (!q) {
                return tg_sfail(c, TS_ERR_NOMEM, "out of memory");
            }
            c->kix = q;
            c->cap_kix = cap;
        }
        kindex *k = &c->kix[c->n_kix];
        *k = (kindex){.kids = tg_xalloc(c, (n + 1) * sizeof *k->kids), .n = n};
        if (!k->kids) {
            return NULL;
        }
        c->n_kix++;
        size_t i = 0;
        for (const cJSON *e = cur->child; e; e = e->next, i++) {
            k->kids[i] = e;
            /* The first of equal keys wins, as in cJSON_GetObjectItemCaseSensitive. */
            if (!arr && e->string && tg_smap_get(&k->by_key, e->string) < 0 &&
                !tg_smap_put(c, &k->by_key, e->string, (int32_t)i)) {
                return NULL;
            }
        }
        at = (int32_t)(c->n_kix - 1);
        if (!tg_pmap_put(c, &c->kidx, (uintptr_t)cur, at)) {
            return NULL;
        }
    }
    const kindex *k = &c->kix[at];
    if (arr) {
        return (size_t)idx < k->n ? k->kids[idx] : NULL;
    }
    int32_t i = tg_smap_get(&k->by_key, seg);
    return i >= 0 ? k->kids[i] : NULL;
}

const cJSON *tg_resolve_ref(sctx *c, const char *ref) {
    const char *p = ref;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(c->doc, "$id");
    if (!id) {
        id = cJSON_GetObjectItemCaseSensitive(c->doc, "id");
    }
    if (*p != '#' && cJSON_IsString(id) && *id->valuestring) {
        /* A reference spelled with the document's own $id. */
        size_t n = strcspn(id->valuestring, "#");
        if (!strncmp(p, id->valuestring, n) && p[n] == '#') {
            p += n;
        }
    }
    if (*p != '#') {
        return tg_sfail(
            c, TS_ERR_UNSUPPORTED,
            "'$ref': '%.200s' points into another document (only \"#...\" is supported)", ref);
    }
    p++;
    if (*p && *p != '/') {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'$ref': '%.200s' names an anchor ($anchor / $id)",
                        ref);
    }
    const cJSON *cur = c->doc;
    while (*p == '/') {
        p++;
        char seg[512];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '%' && p[0] && p[1]) {
                int hv = 0, ok = 1;
                for (int k = 0; k < 2; k++) {
                    char h = p[k];
                    hv = hv * 16 + (h >= '0' && h <= '9'   ? h - '0'
                                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                           : (ok = 0));
                }
                if (ok) {
                    ch = (char)hv;
                    p += 2;
                }
            } else if (ch == '~' && (*p == '0' || *p == '1')) {
                ch = *p++ == '0' ? '~' : '/';
            }
            if (n + 1 >= sizeof seg) {
                return tg_sfail(c, TS_ERR_LIMIT, "'$ref': a segment longer than 500 bytes");
            }
            seg[n++] = ch;
        }
        seg[n] = '\0';
        cur = cJSON_IsArray(cur) || cJSON_IsObject(cur) ? child_of(c, cur, seg) : NULL;
        if (c->st != TS_OK) {
            return NULL;
        }
        if (!cur) {
            return tg_sfail(c, TS_ERR_FORMAT, "'$ref': '%.200s' does not resolve", ref);
        }
    }
    if (*p) {
        return tg_sfail(c, TS_ERR_FORMAT, "'$ref': '%.200s' is not a JSON pointer", ref);
    }
    if (!cJSON_IsObject(cur) && !cJSON_IsBool(cur)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'$ref': '%.200s' does not point at a schema", ref);
    }
    return cur;
}

/* ---- keyword classes --------------------------------------------------------------------- */

static const char *const annotations[] = {"$schema",
                                          "$id",
                                          "id",
                                          "$comment",
                                          "$anchor",
                                          "$dynamicAnchor",
                                          "$vocabulary",
                                          "title",
                                          "description",
                                          "default",
                                          "examples",
                                          "example",
                                          "deprecated",
                                          "readOnly",
                                          "writeOnly",
                                          "$defs",
                                          "definitions",
                                          "contentEncoding",
                                          "contentMediaType",
                                          "contentSchema",
                                          "then",
                                          "else",
                                          NULL};

bool tg_is_annotation(const char *k) {
    for (size_t i = 0; annotations[i]; i++) {
        if (!strcmp(k, annotations[i])) {
            return true;
        }
    }
    /* Not a JSON Schema keyword at all (x-..., nullable, discriminator...): validators ignore
     * unknown keywords, so do we. */
    static const char *const known[] = {"type",
                                        "enum",
                                        "const",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "prefixItems",
                                        "additionalItems",
                                        "minItems",
                                        "maxItems",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "multipleOf",
                                        "anyOf",
                                        "oneOf",
                                        "allOf",
                                        "not",
                                        "$ref",
                                        "if",
                                        "minProperties",
                                        "maxProperties",
                                        "uniqueItems",
                                        "contains",
                                        "minContains",
                                        "maxContains",
                                        "patternProperties",
                                        "propertyNames",
                                        "dependentRequired",
                                        "dependentSchemas",
                                        "dependencies",
                                        "unevaluatedProperties",
                                        "unevaluatedItems",
                                        "$dynamicRef",
                                        "$recursiveRef",
                                        "$recursiveAnchor",
                                        NULL};
    for (size_t i = 0; known[i]; i++) {
        if (!strcmp(k, known[i])) {
            return false;
        }
    }
    return true;
}

/* ---- types ------------------------------------------------------------------------------- */

static const char *const type_names[] = {"null",   "boolean", "object", "array",
                                         "string", "number",  "integer"};

int tg_type_bit(const char *name) {
    for (int i = 0; i < 7; i++) {
        if (!strcmp(name, type_names[i])) {
            return 1 << i;
        }
    }
    return 0;
}

const char *tg_type_name(int bit) {
    for (int i = 0; i < 7; i++) {
        if (bit == 1 << i) {
            return type_names[i];
        }
    }
    return "?";
}

int tg_value_type(const cJSON *v) {
    if (cJSON_IsNull(v)) {
        return T_NULL;
    }
    if (cJSON_IsBool(v)) {
        return T_BOOL;
    }
    if (cJSON_IsObject(v)) {
        return T_OBJ;
    }
    if (cJSON_IsArray(v)) {
        return T_ARR;
    }
    if (cJSON_IsString(v)) {
        return T_STR;
    }
    double x = v->valuedouble;
    return (isfinite(x) && x == floor(x)) ? (T_NUM | T_INT) : T_NUM;
}

/* The "type" keyword as a mask (integer counted in number's bit too when asked); -1 when
 * absent, 0 with an error when malformed. */
int tg_explicit_types(sctx *c, const cJSON *s) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!t) {
        return -1;
    }
    int m = 0;
    if (cJSON_IsString(t)) {
        m = tg_type_bit(t->valuestring);
        if (!m) {
            tg_sfail(c, TS_ERR_FORMAT, "'type': unknown type '%.100s'", t->valuestring);
        }
        return m;
    }
    if (!cJSON_IsArray(t)) {
        tg_sfail(c, TS_ERR_FORMAT, "'type' must be a string or an array of strings");
        return 0;
    }
    for (const cJSON *e = t->child; e; e = e->next) {
        int b = cJSON_IsString(e) ? tg_type_bit(e->valuestring) : 0;
        if (!b) {
            tg_sfail(c, TS_ERR_FORMAT, "'type': an unknown type in the list");
            return 0;
        }
        m |= b;
    }
    return m;
}

/* The types a schema can accept for certain (an over-approximation: T_ALL when unsure). */
int tg_sem_types(sctx *c, const cJSON *s, int depth) {
    if (cJSON_IsFalse(s)) {
        return 0;
    }
    if (!cJSON_IsObject(s) || depth > 16) {
        return T_ALL;
    }
    int m = T_ALL;
    int t = tg_explicit_types(c, s);
    if (t > 0) {
        m &= t & T_NUM ? t | T_INT : t;
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cst) {
        m &= tg_value_type(cst) | (tg_value_type(cst) & T_INT ? T_NUM : 0);
    }
    if (cJSON_IsArray(en)) {
        int vm = 0;
        for (const cJSON *e = en->child; e; e = e->next) {
            vm |= tg_value_type(e);
        }
        m &= vm;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(ref)) {
        ts_error keep = *c->err;
        ts_status st = c->st;
        const cJSON *target = tg_resolve_ref(c, ref->valuestring);
        if (target) {
            m &= tg_sem_types(c, target, depth + 1);
        }
        *c->err = keep;
        c->st = st;
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (!cJSON_IsArray(any)) {
        any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    }
    if (cJSON_IsArray(any)) {
        int u = 0;
        for (const cJSON *e = any->child; e; e = e->next) {
            u |= tg_sem_types(c, e, depth + 1);
        }
        m &= u;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (cJSON_IsArray(all)) {
        for (const cJSON *e = all->child; e; e = e->next) {
            m &= tg_sem_types(c, e, depth + 1);
        }
    }
    return m;
}

/* ---- disjointness (for oneOf) ------------------------------------------------------------ */

static const cJSON *deref(sctx *c, const cJSON *s) {
    for (int i = 0; i < 16 && cJSON_IsObject(s); i++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(ref) || s->child->next) {
            return s;
        }
        ts_error keep = *c->err;
        ts_status st = c->st;
        const cJSON *t = tg_resolve_ref(c, ref->valuestring);
        *c->err = keep;
        c->st = st;
        if (!t) {
            return s;
        }
        s = t;
    }
    return s;
}

/* The const/enum values of s as canonical strings; false when s has neither. */
static bool value_set(sctx *c, const cJSON *s, char ***vals, size_t *n) {
    *n = 0;
    if (!cJSON_IsObject(s)) {
        return false;
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cst) {
        *vals = tg_xalloc(c, sizeof **vals);
        if (!*vals) {
            return false;
        }
        (*vals)[0] = tg_canon_json(c, cst);
        *n = 1;
        return true;
    }
    if (cJSON_IsArray(en)) {
        size_t k = (size_t)cJSON_GetArraySize(en);
        *vals = tg_xalloc(c, (k + 1) * sizeof **vals);
        if (!*vals) {
            return false;
        }
        for (const cJSON *e = en->child; e; e = e->next) {
            (*vals)[(*n)++] = tg_canon_json(c, e);
        }
        return true;
    }
    return false;
}

/* The const/enum values of s as a set of canonical strings (arena keys); false when s has
 * neither (or on error). The caller frees the map. */
static bool value_map(sctx *c, const cJSON *s, strmap *m) {
    char **v;
    size_t n;
    if (!value_set(c, s, &v, &n)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] && tg_smap_get(m, v[i]) < 0 && !tg_smap_put(c, m, v[i], 0)) {
            return false;
        }
    }
    return true;
}

static bool values_disjoint(sctx *c, const cJSON *a, const cJSON *b) {
    if (cJSON_IsFalse(a) || cJSON_IsFalse(b)) {
        return true;
    }
    char **va;
    size_t na;
    strmap mb = {0};
    if (!value_set(c, a, &va, &na) || !value_map(c, b, &mb)) {
        tg_smap_free(&mb);
        return false;
    }
    /* A hash set, not every pair; and a budget over the whole oneOf, since each pair of
     * branches canonicalizes its values again. */
    c->disjoint_work += na + mb.n;
    if (c->disjoint_work > TS_SCHEMA_MAX_DISJOINT) {
        tg_smap_free(&mb);
        tg_sfail(c, TS_ERR_LIMIT,
                 "'oneOf': more than %d enum/const values to compare while proving the branches "
                 "disjoint",
                 TS_SCHEMA_MAX_DISJOINT);
        return false;
    }
    bool disjoint = true;
    for (size_t i = 0; i < na && disjoint; i++) {
        disjoint = !va[i] || tg_smap_get(&mb, va[i]) < 0;
    }
    tg_smap_free(&mb);
    return disjoint;
}

static bool in_required(const cJSON *s, const char *k) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (!cJSON_IsArray(req)) {
        return false;
    }
    for (const cJSON *e = req->child; e; e = e->next) {
        if (cJSON_IsString(e) && !strcmp(e->valuestring, k)) {
            return true;
        }
    }
    return false;
}

/* s forbids key k: properties[k] is false, or k is unlisted and additionalProperties false. */
static bool forbids(const cJSON *s, const char *k) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *p = cJSON_IsObject(props) ? cJSON_GetObjectItemCaseSensitive(props, k) : NULL;
    if (p) {
        return cJSON_IsFalse(p);
    }
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    return cJSON_IsFalse(ap) && !(cJSON_IsObject(pp) && pp->child);
}

static bool objects_disjoint(sctx *c, const cJSON *a, const cJSON *b) {
    for (int side = 0; side < 2; side++) {
        const cJSON *x = side ? b : a, *y = side ? a : b;
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(x, "required");
        const cJSON *px = cJSON_GetObjectItemCaseSensitive(x, "properties");
        const cJSON *py = cJSON_GetObjectItemCaseSensitive(y, "properties");
        if (!cJSON_IsArray(req)) {
            continue;
        }
        for (const cJSON *e = req->child; e; e = e->next) {
            if (!cJSON_IsString(e)) {
                continue;
            }
            const char *k = e->valuestring;
            if (forbids(y, k)) {
                return true;
            }
            const cJSON *sx = cJSON_IsObject(px) ? cJSON_GetObjectItemCaseSensitive(px, k) : NULL;
            const cJSON *sy = cJSON_IsObject(py) ? cJSON_GetObjectItemCaseSensitive(py, k) : NULL;
            if (sx && sy && values_disjoint(c, deref(c, sx), deref(c, sy))) {
                return true;
            }
            if (sx && sy && !(tg_sem_types(c, sx, 0) & tg_sem_types(c, sy, 0))) {
                return true;
            }
        }
        (void)in_required;
    }
    return false;
}

bool tg_disjoint(sctx *c, const cJSON *a, const cJSON *b) {
    a = deref(c, a);
    b = deref(c, b);
    if (cJSON_IsFalse(a) || cJSON_IsFalse(b)) {
        return true;
    }
    int ta = tg_sem_types(c, a, 0), tb = tg_sem_types(c, b, 0);
    if (!(ta & tb)) {
        return true;
    }
    if (values_disjoint(c, a, b)) {
        return true;
    }
    /* Both can only be objects: look for a required property the other cannot match. */
    if ((ta & tb) == T_OBJ && cJSON_IsObject(a) && cJSON_IsObject(b)) {
        return objects_disjoint(c, a, b);
    }
    return false;
}

/* ---- merging ----------------------------------------------------------------------------- */

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
                !add_ref(c, restobj, e->string, e)) {
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
            const cJSON *m = ok ? all_of(c, say, ns) : NULL;
            ok = m && add_ref(c, props, e->string, m);
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
            if (!value_set(c, first, &fv, &fn)) {
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
                has[i] = parts[i] != first && value_map(c, parts[i], &sets[i]);
            }
            size_t idx = 0;
            const cJSON *ev = cst ? cst : en->child;
            for (; c->st == TS_OK && ev && idx < fn; idx++, ev = cst ? NULL : ev->next) {
                bool keep = fv[idx] != NULL;
                for (size_t i = 0; i < n && keep; i++) {
                    keep = !has[i] || tg_smap_get(&sets[i], fv[idx]) >= 0;
                }
                if (keep) {
                    cJSON_AddItemToArray(arr, jref(ev));
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
                const cJSON *m = all_of(c, aps, na);
                if (!m || !add_ref(c, out, "additionalProperties", m)) {
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
            if (!add_ref(c, out, one ? "oneOf" : "anyOf", lists[0])) {
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
                                cJSON_AddItemToArray(arr, jref(q));
                            }
                        }
                        cJSON_AddItemToArray(arr, jref(b));
                        cJSON_AddItemToArray(next, o);
                    }
                }
                cJSON_Delete(prod);
                prod = next;
            }
            if (!tg_own(c, prod)) {
                return NULL;
            }
            if (!add_ref(c, out, "anyOf", prod)) {
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
                if (!add_ref(c, out, k, e)) {
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
                const cJSON *m = all_of(c, others, no);
                if (!m || !add_ref(c, out, k, m)) {
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
