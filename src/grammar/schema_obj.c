/*
 * schema_obj.c — objects and arrays of the JSON Schema compiler: properties in the order the
 * schema lists them (required ones must appear, optional ones may be left out, extra ones after
 * them with a key that is none of the listed ones), tuples, item counts.
 *
 * Large inputs stay near-linear: required and listed names are looked up in sorted arrays, the
 * grammar of "a key that is none of these" walks the sorted keys as a trie in place (large
 * subtrees become rules so their text is not copied at every level), and the sequence of
 * properties after the first required one is written once.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_internal.h"
#include "util/buf.h"
#include "util/utf8.h"

static const cJSON *get(const cJSON *s, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(s, k);
}

/* ---- objects ----------------------------------------------------------------------------- */

/* The content and closing quote of a key that is none of keys[lo..hi) (sorted, so that the keys
 * sharing a prefix are neighbours and the trie of keys is walked in place): each character has
 * one encoding (cps_json), so "not equal as text" is "not equal as string". anych: any string
 * character. Recursion is one level per character of the longest key, checked before descent. */
static char *key_not_in(sctx *c, const char **keys, size_t lo, size_t hi, size_t off, int depth,
                        const char *anych) {
    if (c->st != TS_OK || !tg_poll(c)) {
        return NULL;
    }
    if (depth > 256) {
        return tg_sfail(c, TS_ERR_LIMIT, "property names longer than 256 characters");
    }
    bool terminal = false;
    cpset kids = {0};
    size_t cap_items = (hi - lo < 256 ? hi - lo : 256) + 2; /* children, the end, the rest */
    char **items = tg_xalloc(c, cap_items * sizeof *items);
    if (!items) {
        return NULL;
    }
    size_t k = 0;
    /* Children: the distinct next code points among keys with this prefix (sorted: in runs). */
    for (size_t i = lo; i < hi;) {
        const char *s = keys[i] + off;
        if (!*s) {
            terminal = true;
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = ts_utf8_decode(s, strnlen(s, 4), &cp);
        if (!l) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < hi && strncmp(keys[j] + off, s, l) == 0) {
            j++;
        }
        tg_cps_add(c, &kids, cp, cp);
        /* One character's JSON encodings; ASCII ones are written once per compile (objects by
         * the thousand would otherwise fill the arena with copies). */
        char *ch = cp < 128 ? c->ascii_json[cp] : NULL;
        if (!ch) {
            cpset one = {0};
            tg_cps_add(c, &one, cp, cp);
            ch = tg_cps_json(c, &one);
            if (cp < 128) {
                c->ascii_json[cp] = ch;
            }
        }
        if (ch == X_EMPTY) { /* a control character no extra key can be written with */
            i = j;
            continue;
        }
        char *rest = key_not_in(c, keys, i, j, off + l, depth + 1, anych);
        if (!rest || !ch) {
            return NULL;
        }
        /* A large subtree becomes a rule: inlined, its text would be copied once per level
         * above it (many long keys would fill the arena). */
        if (strlen(rest) > 2048) {
            rest = tg_rule_add(c, "xkey-part", rest);
        }
        if (!rest) {
            return NULL;
        }
        if (k + 2 >= cap_items) {
            return tg_sfail(c, TS_ERR_LIMIT, "more than 256 property names share a prefix");
        }
        items[k++] = tg_xf(c, "%s %s", tg_xgroup(c, ch), tg_xgroup(c, rest));
        i = j;
    }
    if (!terminal) {
        items[k++] = tg_xdup(c, "\"\\\"\"");
    }
    /* A character no key continues with, then anything. */
    cpset all = {0};
    tg_cps_add(c, &all, 0x08, 0x0A); /* \b \t \n */
    tg_cps_add(c, &all, 0x0C, 0x0D); /* \f \r */
    tg_cps_add(c, &all, 0x20, 0x10FFFF);
    cpset other = {0};
    cpset nk_set = tg_cps_complement(c, &kids);
    for (size_t i = 0; i < nk_set.n; i++) {
        /* intersect with `all` */
        for (size_t j = 0; j < all.n; j++) {
            uint32_t a = nk_set.r[i][0] > all.r[j][0] ? nk_set.r[i][0] : all.r[j][0];
            uint32_t b = nk_set.r[i][1] < all.r[j][1] ? nk_set.r[i][1] : all.r[j][1];
            if (a <= b) {
                tg_cps_add(c, &other, a, b);
            }
        }
    }
    /* Many nodes have the same set of next characters (every digit, say): their "any other
     * character" class is written once and looked up after. */
    char *oth = NULL;
    ts_buf key = {0};
    for (size_t i = 0; i < kids.n; i++) {
        ts_buf_printf(&key, "%x-%x,", kids.r[i][0], kids.r[i][1]);
    }
    char *kkey = key.oom ? NULL : tg_xdup(c, key.p ? key.p : "");
    ts_buf_free(&key);
    if (!kkey) {
        return c->st == TS_OK ? tg_sfail(c, TS_ERR_NOMEM, "out of memory") : NULL;
    }
    int32_t memo = tg_smap_get(&c->other_memo, kkey);
    if (memo >= 0) {
        oth = c->other_exprs[memo];
    } else {
        oth = tg_cps_json(c, &other);
        if (oth && oth != X_EMPTY && strlen(oth) > 24) {
            oth = tg_rule_add(c, "key-other", oth); /* long: named once, used by many nodes */
        }
        if (oth && c->n_other_exprs < sizeof c->other_exprs / sizeof c->other_exprs[0]) {
            c->other_exprs[c->n_other_exprs] = oth;
            if (!tg_smap_put(c, &c->other_memo, kkey, (int32_t)c->n_other_exprs++)) {
                return NULL;
            }
        }
    }
    if (oth && oth != X_EMPTY) {
        items[k++] = tg_xf(c, "%s %s* \"\\\"\"", tg_xgroup(c, oth), tg_xgroup(c, anych));
    }
    return tg_xalt(c, items, k);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* keys (n, copied) sorted, in the arena. */
static const char **sorted_keys(sctx *c, const char **keys, size_t n) {
    const char **s = tg_xalloc(c, (n + 1) * sizeof *s);
    if (!s) {
        return NULL;
    }
    if (n) {
        memcpy(s, keys, n * sizeof *s);
    }
    qsort(s, n, sizeof *s, cmp_str);
    return s;
}

static bool in_sorted(const char **s, size_t n, const char *k) {
    return n && bsearch(&k, s, n, sizeof *s, cmp_str) != NULL;
}

typedef struct prop {
    const char *key;
    char *kv;       /* "key" ws ":" ws value (or the name of a rule with that body) */
    char *lit_text; /* the text itself, where kv became a rule name */
    bool req;
} prop;

char *tg_compile_object(sctx *c, const cJSON *s) {
    const cJSON *props = get(s, "properties");
    const cJSON *req = get(s, "required");
    const cJSON *ap = get(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'properties' must be an object");
    }
    if (req && !cJSON_IsArray(req)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'required' must be an array");
    }
    if (ap && !cJSON_IsObject(ap) && !cJSON_IsBool(ap)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'additionalProperties' must be a schema");
    }
    for (const cJSON *e = req ? req->child : NULL; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            return tg_sfail(c, TS_ERR_FORMAT, "'required' must list strings");
        }
    }
    if (!tg_prim(c, "ws")) {
        return NULL;
    }

    size_t np = (size_t)(props ? cJSON_GetArraySize(props) : 0);
    size_t nr = (size_t)(req ? cJSON_GetArraySize(req) : 0);
    prop *P = tg_xalloc(c, (np + nr + 1) * sizeof *P);
    const char **keys = tg_xalloc(c, (np + nr + 1) * sizeof *keys);
    if (!P || !keys) {
        return NULL;
    }
    size_t n = 0, nkeys = 0;
    /* Sorted copies of the required and the listed names, looked up by binary search: a
     * schema with thousands of properties must not compare every pair. */
    const char **req_sorted = tg_xalloc(c, (nr + 1) * sizeof *req_sorted);
    const char **prop_sorted = tg_xalloc(c, (np + 1) * sizeof *prop_sorted);
    if (!req_sorted || !prop_sorted) {
        return NULL;
    }
    size_t ri = 0, pi = 0;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        req_sorted[ri++] = r->valuestring;
    }
    for (const cJSON *e = props ? props->child : NULL; e; e = e->next) {
        prop_sorted[pi++] = e->string;
    }
    qsort(req_sorted, ri, sizeof *req_sorted, cmp_str);
    qsort(prop_sorted, pi, sizeof *prop_sorted, cmp_str);
    c->nest++;
    /* Listed properties, in order. */
    for (const cJSON *e = props ? props->child : NULL; e; e = e->next) {
        bool is_req = in_sorted(req_sorted, ri, e->string);
        keys[nkeys++] = e->string;
        size_t saved = tg_path_push(c, "properties");
        tg_path_push(c, e->string);
        char *v = tg_compile(c, e);
        tg_path_pop(c, saved);
        if (!v) {
            return c->nest--, NULL;
        }
        if (v == X_EMPTY) {
            if (is_req) {
                return c->nest--, X_EMPTY;
            }
            continue;
        }
        char *kq = tg_json_quote(c, e->string);
        char *kl = kq ? tg_gbnf_lit(c, kq, strlen(kq)) : NULL;
        P[n++] = (prop){.key = e->string,
                        .kv = tg_xf(c, "%s ws \":\" ws %s", kl, tg_xgroup(c, v)),
                        .req = is_req};
    }
    /* Additional properties: the schema for unlisted keys. */
    char *extra = NULL, *pkey = NULL;
    const cJSON *pp = get(s, "patternProperties");
    if (pp && !cJSON_IsObject(pp)) {
        return c->nest--, tg_sfail(c, TS_ERR_FORMAT, "'patternProperties' must be an object");
    }
    if (pp && pp->child) {
        /* Supported: pattern schemas that constrain nothing next to allowed extras (no
         * effect), or no listed keys, additionalProperties false and one schema for every
         * pattern (keys matching any pattern, with that schema). */
        bool trivial = true, same = true;
        char *first = tg_canon_json(c, pp->child);
        for (const cJSON *e = pp->child; e; e = e->next) {
            bool t = cJSON_IsTrue(e);
            if (cJSON_IsObject(e)) {
                t = true;
                for (const cJSON *k = e->child; k; k = k->next) {
                    t = t && tg_is_annotation(k->string);
                }
            }
            trivial = trivial && t;
            char *cv = tg_canon_json(c, e);
            same = same && cv && first && !strcmp(cv, first);
        }
        if (c->st != TS_OK) {
            return c->nest--, NULL;
        }
        if (trivial && (!ap || cJSON_IsTrue(ap))) {
            /* Every key may appear with any value either way. */
        } else if (cJSON_IsFalse(ap) && n == 0 && !props && !req && same) {
            char **alts = tg_xalloc(c, (size_t)cJSON_GetArraySize(pp) * sizeof *alts);
            size_t na = 0;
            for (const cJSON *e = pp->child; e && alts; e = e->next) {
                int64_t mn, mx;
                size_t saved = tg_path_push(c, "patternProperties");
                tg_path_push(c, e->string);
                alts[na++] = tg_regex_expr(c, e->string, &mn, &mx);
                tg_path_pop(c, saved);
                if (!alts[na - 1]) {
                    return c->nest--, NULL;
                }
            }
            char *kre = alts ? tg_xalt(c, alts, na) : NULL;
            if (!kre) {
                return c->nest--, NULL;
            }
            size_t saved = tg_path_push(c, "patternProperties");
            tg_path_push(c, pp->child->string);
            extra = tg_compile(c, pp->child);
            tg_path_pop(c, saved);
            if (!extra) {
                return c->nest--, NULL;
            }
            if (kre != X_EMPTY && extra != X_EMPTY) {
                pkey = tg_rule_add(c, tg_hint(c, "pkey"),
                                   tg_xf(c, "\"\\\"\" %s \"\\\"\"", tg_xgroup(c, kre)));
            } else {
                extra = X_EMPTY;
            }
        } else {
            return c->nest--,
                   tg_sfail(c, TS_ERR_UNSUPPORTED, "'patternProperties' is not supported");
        }
    }
    if (extra) {
        /* set by patternProperties */
    } else if (!ap || cJSON_IsTrue(ap)) {
        extra = tg_prim(c, "value");
    } else if (cJSON_IsFalse(ap)) {
        extra = X_EMPTY;
    } else {
        size_t saved = tg_path_push(c, "additionalProperties");
        extra = tg_compile(c, ap);
        tg_path_pop(c, saved);
    }
    if (!extra) {
        return c->nest--, NULL;
    }
    /* Required keys that "properties" does not list take the additional schema (each once: a
     * hash set of the names added so far). */
    strmap added_set = {0};
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (in_sorted(prop_sorted, pi, r->valuestring)) {
            continue;
        }
        bool dup = tg_smap_get(&added_set, r->valuestring) >= 0;
        if (!dup && !tg_smap_put(c, &added_set, r->valuestring, 0)) {
            tg_smap_free(&added_set);
            return c->nest--, NULL;
        }
        if (dup) {
            continue;
        }
        if (extra == X_EMPTY) {
            tg_smap_free(&added_set);
            return c->nest--, X_EMPTY;
        }
        keys[nkeys++] = r->valuestring;
        char *kq = tg_json_quote(c, r->valuestring);
        char *kl = kq ? tg_gbnf_lit(c, kq, strlen(kq)) : NULL;
        P[n++] = (prop){.key = r->valuestring,
                        .kv = tg_xf(c, "%s ws \":\" ws %s", kl, tg_xgroup(c, extra)),
                        .req = true};
    }
    tg_smap_free(&added_set);
    char *ekv = NULL;
    if (extra != X_EMPTY) {
        char *key = NULL;
        if (nkeys) {
            if (!c->any_key_char) {
                cpset all = {0};
                tg_cps_add(c, &all, 0x08, 0x0A); /* \b \t \n */
                tg_cps_add(c, &all, 0x0C, 0x0D); /* \f \r */
                tg_cps_add(c, &all, 0x20, 0x10FFFF);
                /* A rule: the class is long and every key trie node names it. */
                c->any_key_char = tg_rule_add(c, "key-char", tg_cps_json(c, &all));
            }
            const char **sk = sorted_keys(c, keys, nkeys);
            char *anych = c->any_key_char;
            key = sk && anych ? key_not_in(c, sk, 0, nkeys, 0, 0, anych) : NULL;
        }
        if (nkeys && !key) {
            return c->nest--, NULL;
        }
        if (pkey) {
            key = pkey;
        } else if (key) {
            key = tg_rule_add(c, tg_hint(c, "xkey"), tg_xf(c, "\"\\\"\" %s", tg_xgroup(c, key)));
        } else {
            key = tg_prim(c, "string");
        }
        ekv = tg_xf(c, "%s ws \":\" ws %s", key, tg_xgroup(c, extra));
    }
    c->nest--;
    if (c->st != TS_OK) {
        return NULL;
    }

    /* After a property, any optional one after it may come next (up to the next required
     * one): each is a parser stack or two in the matcher's state, so a long run of optional
     * properties would pass its limit (TS_GRAMMAR_MAX_STACKS) in the middle of an object.
     * Refused here, naming the limit, instead. */
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < n; i++) {
        run = P[i].req ? 0 : run + 1;
        longest = run > longest ? run : longest;
    }
    if (longest > TS_SCHEMA_MAX_OPTIONAL) {
        return tg_sfail(c, TS_ERR_LIMIT,
                        "%zu optional properties in a row (at most %d: any of them may come "
                        "next, and the grammar matcher follows at most 4096 parser stacks at "
                        "once); make some of them required",
                        longest, TS_SCHEMA_MAX_OPTIONAL);
    }

    /* minProperties / maxProperties when they follow from the rest. */
    int64_t minp = 0, maxp = -1;
    bool has_minp = tg_get_count(c, s, "minProperties", &minp);
    bool has_maxp = tg_get_count(c, s, "maxProperties", &maxp);
    if (c->st != TS_OK) {
        return NULL;
    }
    size_t nreq = 0;
    for (size_t i = 0; i < n; i++) {
        nreq += P[i].req;
    }
    /* minProperties 1 without required properties: the object is not empty. */
    bool nonempty = has_minp && minp == 1 && nreq == 0;
    if (has_minp && (size_t)minp > nreq && !nonempty) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'minProperties' above the number of required ones");
    }
    if (has_maxp && (size_t)maxp < nreq) {
        return X_EMPTY;
    }
    if (has_maxp && (ekv || (size_t)maxp < n)) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED,
                        "'maxProperties' below the number of properties that may appear");
    }

    /* The first present property is one of the optional ones before the first required one,
     * or that required one; after it, the rest is a flat sequence. */
    size_t first_req = n;
    for (size_t i = 0; i < n && first_req == n; i++) {
        if (P[i].req) {
            first_req = i;
        }
    }
    size_t n_first = first_req < n ? first_req + 1 : n;
    bool many = n_first + (first_req == n && ekv) > 1;
    /* With many optional properties before the first required one, each may be the first one
     * written: the alternatives keep their key literal in front (lit_text) so that they are
     * factored into a trie of keys (tg_xalt), one parser stack after "{" instead of one per
     * property, past the matcher's limit for thousands of them. */
    bool by_key = n_first >= TS_SCHEMA_TRIE_MIN;
    if (many) {
        for (size_t i = 0; i < n_first; i++) {
            P[i].lit_text = P[i].kv;
            P[i].kv = tg_rule_add(c, tg_hint(c, tg_xf(c, "%s-kv", P[i].key)), P[i].kv);
        }
    }
    /* nf[i]: the properties from i on, each after a comma. */
    char **nf = tg_xalloc(c, (n + 1) * sizeof *nf);
    if (!nf) {
        return NULL;
    }
    /* pieces[i]: property i after a comma; the tail from n_first on is one flat sequence
     * (written once: building it suffix by suffix would copy it n times). */
    char **piece = tg_xalloc(c, (n + 1) * sizeof *piece);
    if (!piece) {
        return NULL;
    }
    size_t flat_len = 1;
    for (size_t i = 0; i < n; i++) {
        piece[i] = P[i].req ? tg_xf(c, "ws \",\" ws %s", tg_xgroup(c, P[i].kv))
                            : tg_xf(c, "( ws \",\" ws %s )?", tg_xgroup(c, P[i].kv));
        if (!piece[i]) {
            return NULL;
        }
        if (i >= n_first) {
            flat_len += strlen(piece[i]) + 1;
        }
    }
    piece[n] = ekv ? tg_xf(c, "( ws \",\" ws %s )*", tg_xgroup(c, ekv)) : tg_xdup(c, "");
    if (!piece[n]) {
        return NULL;
    }
    flat_len += strlen(piece[n]) + 1;
    char *flat = tg_xalloc(c, flat_len);
    if (!flat) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = n_first; i <= n; i++) {
        size_t l = strlen(piece[i]);
        if (!l) {
            continue;
        }
        if (o) {
            flat[o++] = ' ';
        }
        memcpy(flat + o, piece[i], l);
        o += l;
    }
    flat[o] = '\0';
    nf[n_first] = flat;
    if (many && *flat && n_first >= 1) {
        nf[n_first] = tg_rule_add(c, tg_hint(c, tg_xf(c, "r%zu", n_first)), flat);
    }
    for (size_t i = n_first; i-- > 1;) {
        nf[i] = *nf[i + 1] ? tg_xf(c, "%s %s", piece[i], nf[i + 1]) : piece[i];
        if (many && nf[i]) {
            nf[i] = tg_rule_add(c, tg_hint(c, tg_xf(c, "r%zu", i)), nf[i]);
        }
        if (!nf[i]) {
            return NULL;
        }
    }
    char **alts = tg_xalloc(c, (n_first + 2) * sizeof *alts);
    if (!alts) {
        return NULL;
    }
    size_t k = 0;
    for (size_t j = 0; j < n_first; j++) {
        const char *kv = by_key && P[j].lit_text ? P[j].lit_text : P[j].kv;
        alts[k++] =
            *nf[j + 1] ? tg_xf(c, "%s %s", by_key ? kv : tg_xgroup(c, kv), nf[j + 1]) : (char *)kv;
    }
    if (first_req == n && ekv) {
        alts[k++] = tg_xf(c, "%s ( ws \",\" ws %s )*", tg_xgroup(c, ekv), tg_xgroup(c, ekv));
    }
    char *members = tg_xalt(c, alts, k);
    if (!members) {
        return NULL;
    }
    char *body;
    if (members == X_EMPTY) {
        body = nonempty ? X_EMPTY : tg_xdup(c, "\"{\" ws \"}\"");
    } else if (first_req == n && nonempty) {
        body = tg_xf(c, "\"{\" ws %s ws \"}\"", members);
    } else if (first_req == n) {
        body = tg_xf(c, "\"{\" ws ( %s ws )? \"}\"", members);
    } else {
        body = tg_xf(c, "\"{\" ws %s ws \"}\"", members);
    }
    if (body == X_EMPTY) {
        return X_EMPTY;
    }
    return tg_rule_add(c, tg_hint(c, "obj"), body);
}

/* ---- arrays ------------------------------------------------------------------------------ */

char *tg_compile_array(sctx *c, const cJSON *s) {
    const cJSON *prefix = get(s, "prefixItems");
    const cJSON *items = get(s, "items");
    const cJSON *addl = get(s, "additionalItems");
    const char *prefix_kw = "prefixItems", *rest_kw = "items";
    if (prefix && !cJSON_IsArray(prefix)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'prefixItems' must be an array");
    }
    if (cJSON_IsArray(items)) {
        if (prefix) {
            return tg_sfail(c, TS_ERR_FORMAT, "'items' is an array next to 'prefixItems'");
        }
        prefix = items; /* draft 4 to 2019-09 tuples */
        items = addl;
        prefix_kw = "items";
        rest_kw = "additionalItems";
    }
    if (items && !cJSON_IsObject(items) && !cJSON_IsBool(items)) {
        return tg_sfail(c, TS_ERR_FORMAT, "'%s' must be a schema", rest_kw);
    }
    int64_t m = 0, M = -1;
    tg_get_count(c, s, "minItems", &m);
    tg_get_count(c, s, "maxItems", &M);
    if (c->st != TS_OK) {
        return NULL;
    }
    const cJSON *uniq = get(s, "uniqueItems");
    if (cJSON_IsTrue(uniq) && !(M >= 0 && M <= 1)) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'uniqueItems' is not supported");
    }
    size_t k = (size_t)(prefix ? cJSON_GetArraySize(prefix) : 0);
    if (!tg_prim(c, "ws")) {
        return NULL;
    }
    c->nest++;
    char **pe = tg_xalloc(c, (k + 1) * sizeof *pe);
    if (!pe) {
        return c->nest--, NULL;
    }
    size_t i = 0;
    for (const cJSON *e = prefix ? prefix->child : NULL; e; e = e->next, i++) {
        size_t saved = tg_path_push(c, prefix_kw);
        tg_path_push_i(c, (int)i);
        pe[i] = tg_compile(c, e);
        tg_path_pop(c, saved);
        if (!pe[i]) {
            return c->nest--, NULL;
        }
    }
    char *rest;
    if (!items || cJSON_IsTrue(items)) {
        rest = tg_prim(c, "value");
    } else if (cJSON_IsFalse(items)) {
        rest = X_EMPTY;
    } else {
        size_t saved = tg_path_push(c, rest_kw);
        rest = tg_compile(c, items);
        tg_path_pop(c, saved);
    }
    c->nest--;
    if (!rest) {
        return NULL;
    }
    if (rest == X_EMPTY && (M < 0 || M > (int64_t)k)) {
        M = (int64_t)k;
    }
    if (M >= 0 && m > M) {
        return X_EMPTY;
    }
    if (m > TS_SCHEMA_MAX_REPEAT || M > TS_SCHEMA_MAX_REPEAT) {
        return tg_sfail(c, TS_ERR_UNSUPPORTED, "'%s' above %d",
                        m > TS_SCHEMA_MAX_REPEAT ? "minItems" : "maxItems", TS_SCHEMA_MAX_REPEAT);
    }
    if (M == 0) {
        return tg_rule_add(c, tg_hint(c, "arr"), "\"[\" ws \"]\"");
    }
    /* tail(i): what follows element i-1; built from the end. */
    int64_t rmin = m > (int64_t)k ? m - (int64_t)k : 0;
    char *tail;
    int64_t first_rest = k > 0 ? (int64_t)k : 1; /* index of the first element of the rest */
    rmin = m > first_rest ? m - first_rest : 0;
    int64_t rmax = M < 0 ? -1 : M - first_rest;
    if (rest == X_EMPTY || rmax == 0) {
        tail = rest == X_EMPTY && rmin > 0 ? X_EMPTY : tg_xdup(c, "");
    } else {
        char *g = tg_xf(c, "( ws \",\" ws %s )", tg_xgroup(c, rest));
        if (rmax < 0) {
            tail = rmin == 0 ? tg_xf(c, "%s*", g) : tg_xf(c, "%s{%lld,}", g, (long long)rmin);
        } else if (rmin == 0 && rmax == 1) {
            tail = tg_xf(c, "%s?", g);
        } else if (rmin == rmax) {
            tail = tg_xf(c, "%s{%lld}", g, (long long)rmin);
        } else {
            tail = tg_xf(c, "%s{%lld,%lld}", g, (long long)rmin, (long long)rmax);
        }
    }
    for (size_t j = k; j-- > 1;) {
        /* element j of the prefix, then tail */
        if (M >= 0 && (int64_t)j >= M) {
            tail = tg_xdup(c, "");
            continue;
        }
        char *piece;
        if (pe[j] == X_EMPTY || tail == X_EMPTY) {
            piece = X_EMPTY;
        } else {
            piece = *tail ? tg_xf(c, "ws \",\" ws %s %s", tg_xgroup(c, pe[j]), tail)
                          : tg_xf(c, "ws \",\" ws %s", tg_xgroup(c, pe[j]));
        }
        if ((int64_t)j < m) {
            tail = piece;
        } else {
            tail = piece == X_EMPTY ? tg_xdup(c, "") : tg_xf(c, "( %s )?", piece);
        }
        if (!tail) {
            return NULL;
        }
    }
    char *first = k > 0 ? pe[0] : rest;
    char *elems;
    if (first == X_EMPTY || tail == X_EMPTY) {
        elems = X_EMPTY;
    } else {
        elems = *tail ? tg_xf(c, "%s %s", tg_xgroup(c, first), tail) : first;
    }
    if (!elems) {
        return NULL;
    }
    char *body;
    if (elems == X_EMPTY) {
        body = m > 0 ? X_EMPTY : tg_xdup(c, "\"[\" ws \"]\"");
    } else if (m == 0) {
        body = tg_xf(c, "\"[\" ws ( %s ws )? \"]\"", elems);
    } else {
        body = tg_xf(c, "\"[\" ws %s ws \"]\"", elems);
    }
    if (!body || body == X_EMPTY) {
        return body;
    }
    return tg_rule_add(c, tg_hint(c, "arr"), body);
}
