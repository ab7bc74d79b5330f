/*
 * schema_merge.c — what merging builds on: owned objects and references, $ref resolution, type
 * sets, and the disjointness test that lets oneOf compile as an alternation. The merge itself is
 * in schema_allof.c.
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
cJSON *tg_jref(const cJSON *j) {
    if (cJSON_IsObject(j)) {
        return cJSON_CreateObjectReference(j->child);
    }
    if (cJSON_IsArray(j)) {
        return cJSON_CreateArrayReference(j->child);
    }
    return cJSON_Duplicate(j, false);
}

bool tg_add_ref(sctx *c, cJSON *obj, const char *key, const cJSON *v) {
    cJSON *r = tg_jref(v);
    if (!r) {
        tg_sfail(c, TS_ERR_NOMEM, "out of memory");
        return false;
    }
    cJSON_AddItemToObject(obj, key, r);
    return true;
}

/* {"allOf": [parts...]} (owned), or the single part itself. */
const cJSON *tg_all_of(sctx *c, const cJSON **parts, size_t n) {
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
        cJSON *r = tg_jref(parts[i]);
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
bool tg_value_set(sctx *c, const cJSON *s, char ***vals, size_t *n) {
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
bool tg_value_map(sctx *c, const cJSON *s, strmap *m) {
    char **v;
    size_t n;
    if (!tg_value_set(c, s, &v, &n)) {
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
    if (!tg_value_set(c, a, &va, &na) || !tg_value_map(c, b, &mb)) {
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
