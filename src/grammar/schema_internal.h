/*
 * schema_internal.h — the JSON Schema compiler's shared state (schema*.c only).
 *
 * The compiler walks the parsed schema (cJSON) once and builds GBNF text. Every schema node
 * compiles to an *expression*: a GBNF fragment that can be concatenated into a sequence as is
 * (a rule name, a literal, a class or a parenthesised group), or to X_EMPTY when the node accepts
 * no value at all (the `false` schema, an enum with no value of the allowed types...). Named
 * rules are created for $ref targets (so recursion works) and for shared pieces; identical rule
 * bodies share one rule.
 *
 * Memory: every expression string lives in the context's arena and dies with it; objects the
 * compiler builds (merged allOf schemas) are kept in `owned` and freed at the end. The arena
 * and the rule table are bounded (TS_ERR_LIMIT), so a small schema cannot make the compiler
 * allocate without end.
 *
 * Names: every function shared between the schema*.c files starts with tg_ (the library's
 * internal prefix), so that programs linking libts_grammar.a keep their own names free.
 *
 * Errors: the first error is recorded in c->err/c->st and every function then returns NULL;
 * callers check for NULL and return. Messages start with "schema: <JSON pointer>: ".
 */
#ifndef TS_GRAMMAR_SCHEMA_INTERNAL_H
#define TS_GRAMMAR_SCHEMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tessera.h"
#include "util/error.h"
#include "util/stop.h"
#include "util/utf8.h"

/* Limits (documented in docs/schema.md). */
#define TS_SCHEMA_MAX_BYTES  (1u << 20)  /* schema text */
#define TS_SCHEMA_MAX_DEPTH  96          /* nested compile steps (subschemas, merges) */
#define TS_SCHEMA_MAX_ARENA  (64u << 20) /* all expression text together */
#define TS_SCHEMA_MAX_RULES  20000       /* rules in the output */
#define TS_SCHEMA_MAX_OUTPUT (16u << 20) /* the GBNF text */
#define TS_SCHEMA_MAX_REPEAT 1000        /* {m,n} bounds from patterns and lengths */
/* Largest upper bound of a length or count (maxLength, maxItems, {m,n} of a pattern): n - m is
 * written as up to 10000 blocks of 256 (the GBNF reader's repetition limit). */
#define TS_SCHEMA_MAX_UPPER ((int64_t)256 * 10000)
#define TS_SCHEMA_WS_MAX     20          /* whitespace characters between two tokens */
#define TS_SCHEMA_MAX_DIGITS 16          /* digits of an unbounded integer part */
#define TS_SCHEMA_MAX_ALTS                                                                         \
    4096                                 /* alternatives of a union left after the literal trie:   \
                                            the matcher's parser stacks (TS_GRAMMAR_MAX_STACKS) */
#define TS_SCHEMA_MAX_DISJOINT (4 << 20) /* enum values compared proving oneOf disjoint */
#define TS_SCHEMA_MAX_MERGE    (1 << 20) /* properties and values copied into merges */
#define TS_SCHEMA_TRIE_MIN     32 /* literal-led alternatives factored into a trie (fewer: as is) */
#define TS_SCHEMA_MAX_OPTIONAL                                                                     \
    1024                        /* optional properties in a row (about two parser                  \
                                    stacks each may be open at once) */
#define TS_SCHEMA_MAX_ONEOF 256 /* oneOf branches (disjointness is proved pairwise) */

/* The marker for "this schema accepts nothing". Compared by address. */
extern const char ts_schema_empty_marker[];
#define X_EMPTY ((char *)ts_schema_empty_marker)

typedef struct ablock ablock;

typedef struct srule {
    char *name; /* arena */
    char *body; /* arena; NULL while a $ref target is being compiled */
    bool dead;  /* reserved, then found to accept nothing and never referenced: not written */
} srule;

typedef struct sref {
    const cJSON *node; /* the $ref target */
    char *name;        /* its rule */
    int nest;          /* object/array nesting when its compilation began */
    bool busy;         /* being compiled now */
    bool merged;       /* a merged schema (key: its first member) rather than a $ref target */
    bool used;         /* its name was handed out while it was being compiled */
} sref;

typedef struct strmap {
    char **keys;
    int32_t *vals;
    size_t cap, n;
} strmap;

/* Schema nodes (pointer | tag bits) -> index. Keys are never 0. */
typedef struct pmap {
    uintptr_t *keys;
    int32_t *vals;
    size_t cap, n;
} pmap;

/* An index of a large object's or array's children (for $ref lookups). */
typedef struct kindex {
    const cJSON **kids; /* [n] in order (arena) */
    size_t n;
    strmap by_key; /* key -> position (objects) */
} kindex;

typedef struct sctx {
    ts_error *err;
    ts_status st;
    const cJSON *doc; /* the schema document ($ref "#..." resolves here) */

    ablock *arena;
    size_t arena_total;

    srule *rules;
    size_t n_rules, cap_rules;
    strmap by_body;         /* rule body -> rule index */
    strmap by_name;         /* rule name -> rule index */
    strmap name_next;       /* name base -> the next suffix to try (unique names in O(1)) */
    strmap other_memo;      /* a key node's next-character set -> index in other_exprs */
    char *other_exprs[256]; /* the "any other character" classes written so far */
    char *ascii_json[128];  /* an ASCII character's JSON encodings (cps_json), once made */
    char *any_key_char;     /* any character of a key (cps_json), once made */
    size_t n_other_exprs;

    sref *refs;
    size_t n_refs, cap_refs;
    pmap refmap; /* (node | merged) -> index in refs */
    pmap kidx;   /* container -> index in kix */
    kindex *kix;
    size_t n_kix, cap_kix;

    cJSON **owned; /* schema objects built by the compiler (merges) */
    size_t n_owned, cap_owned;

    char path[512]; /* JSON pointer of the node being compiled */
    size_t path_len;
    const ts_stop *stop; /* polled every POLL_EVERY steps (tg_poll); may be NULL */
    uint32_t steps;
    size_t disjoint_work; /* values compared by oneOf disjointness proofs so far */
    size_t merge_work;    /* properties and values copied into merges so far */
    int depth;            /* compile recursion depth */
    int nest; /* objects/arrays entered: a $ref seen again at the same nest is left recursion */
} sctx;

/* ---- schema.c --------------------------------------------------------------------------- */

/* Compiles schema s to an expression (X_EMPTY: accepts nothing; NULL: error recorded). */
char *tg_compile(sctx *c, const cJSON *s);
/* A rule-name hint from the current JSON pointer (its end) and suffix. */
char *tg_hint(sctx *c, const char *suffix);
/* Keyword k of s as a non-negative integer count (capped at 1e15); false when absent or
 * malformed (then with an error). */
bool tg_get_count(sctx *c, const cJSON *s, const char *k, int64_t *v);

/* ---- schema_obj.c ----------------------------------------------------------------------- */

char *tg_compile_object(sctx *c, const cJSON *s);
char *tg_compile_array(sctx *c, const cJSON *s);

/* ---- schema_util.c ---------------------------------------------------------------------- */

/* Checks c->stop every so often (call it once per unit of work: a compiled node, an enum value,
 * an alternative); false, with the stop's error recorded, when the compile must end. */
bool tg_poll(sctx *c);

/* String and pointer maps (keys not copied; they must outlive the map). A put of a key present
 * in a pmap replaces its value; tg_smap_put does not look for the key. */
int32_t tg_smap_get(const strmap *m, const char *key);  /* -1: absent */
int32_t *tg_smap_ref(const strmap *m, const char *key); /* NULL: absent */
bool tg_smap_put(sctx *c, strmap *m, char *key, int32_t val);
void tg_smap_free(strmap *m);
int32_t tg_pmap_get(const pmap *m, uintptr_t key); /* -1: absent */
bool tg_pmap_put(sctx *c, pmap *m, uintptr_t key, int32_t val);
void tg_pmap_free(pmap *m);

/* The arena and the maps, freed at the end of a compile. */
void ts_schema_arena_free(sctx *c);
void ts_schema_maps_free(sctx *c);

/* Records the first error ("schema: <pointer>: " + message); returns NULL for tail calls. */
void *tg_sfail(sctx *c, ts_status st, const char *fmt, ...) TS_PRINTF(3, 4);
char *tg_xdup(sctx *c, const char *s);
char *tg_xf(sctx *c, const char *fmt, ...) TS_PRINTF(2, 3);
void *tg_xalloc(sctx *c, size_t n);

/* Path handling: push a key (escaped per RFC 6901) or an index; pop restores the length. */
size_t tg_path_push(sctx *c, const char *key);
size_t tg_path_push_i(sctx *c, int i);
void tg_path_pop(sctx *c, size_t saved);

/* Adds a rule named after hint (made unique) with body; a body already present returns the
 * existing rule's name. */
char *tg_rule_add(sctx *c, const char *hint, const char *body);
/* Reserves a name for a rule whose body comes later (rule_set_body). Returns its index. */
int32_t tg_rule_reserve(sctx *c, const char *hint);
void tg_rule_set_body(sctx *c, int32_t idx, const char *body);
/* The index of the rule named name, or -1. */
int32_t tg_rule_find(sctx *c, const char *name);

/* "( e )" unless e is already atomic (a name, literal, class or group). */
char *tg_xgroup(sctx *c, const char *e);
/* Alternation of the non-empty items (X_EMPTY when all are empty). */
char *tg_xalt(sctx *c, char **items, size_t n);

/* GBNF literal for bytes (UTF-8): "..." with escapes. */
char *tg_gbnf_lit(sctx *c, const char *s, size_t n);
/* The JSON encoding of a string (compact, json.dumps(ensure_ascii=False) style). */
char *tg_json_quote(sctx *c, const char *s);

/* Code point sets: sorted disjoint inclusive ranges. */
typedef struct cpset {
    uint32_t (*r)[2];
    size_t n, cap;
} cpset;
void tg_cps_add(sctx *c, cpset *s, uint32_t lo, uint32_t hi);
void tg_cps_add_set(sctx *c, cpset *s, const cpset *t);
void tg_cps_normalize(cpset *s);
cpset tg_cps_complement(sctx *c, const cpset *s);
bool tg_cps_has(const cpset *s, uint32_t cp);
/* GBNF [class] of the set (X_EMPTY when empty). */
char *tg_cps_class(sctx *c, const cpset *s);
/* The JSON-string encodings of one character of the set: raw where JSON allows, else the
 * short escape (\" \\ \b \f \n \r \t). Other control characters are left out, and "/" is only
 * raw, so every character has one encoding (key grammars rely on it). */
char *tg_cps_json(sctx *c, const cpset *s);

/* ---- schema_prim.c ---------------------------------------------------------------------- */

/* Named primitive rules (created on first use). */
char *tg_prim(sctx *c, const char *name);
/* Integers in [lo, hi] (has_lo/has_hi false: unbounded on that side). */
char *tg_int_range(sctx *c, bool has_lo, int64_t lo, bool has_hi, int64_t hi);
/* Decimal numbers (no exponent when bounded) within the bounds. */
char *tg_num_range(sctx *c, bool has_lo, double lo, bool lo_excl, bool has_hi, double hi,
                   bool hi_excl);
/* A string format; NULL with an error when unsupported. minlen/maxlen: its length range. */
char *tg_format_expr(sctx *c, const char *fmt, int64_t *minlen, int64_t *maxlen);
/* A JSON value exactly (whitespace allowed between tokens; numbers in canonical form). */
char *tg_const_expr(sctx *c, const cJSON *v);
/* Canonical compact JSON of a value (for comparing enum values); arena. */
char *tg_canon_json(sctx *c, const cJSON *v);

/* ---- schema_regex.c --------------------------------------------------------------------- */

/* The JSON-string content (between the quotes) whose decoded text matches the ECMA-262 /
 * Python `re.search` pattern. minlen/maxlen (-1: unbounded) get the matched length range. */
char *tg_regex_expr(sctx *c, const char *pattern, int64_t *minlen, int64_t *maxlen);
/* When the pattern is ^X{m,n}$ (also * + ?) for one character X: the GBNF of X (else NULL). */
char *tg_regex_single(sctx *c, const char *pattern);
/* x{m,n} (n -1: unbounded), written so that large n stays small and unambiguous. */
char *tg_rep_expr(sctx *c, const char *x, int64_t m, int64_t n);

/* ---- schema_merge.c --------------------------------------------------------------------- */

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_INT = 64 };
#define T_ALL 127

/* A reference to j (no copy); NULL when out of memory. */
cJSON *tg_jref(const cJSON *j);
/* Adds a reference to v under key to obj; false (error recorded) when out of memory. */
bool tg_add_ref(sctx *c, cJSON *obj, const char *key, const cJSON *v);
/* {"allOf": parts} (owned), or the single part itself. */
const cJSON *tg_all_of(sctx *c, const cJSON **parts, size_t n);
/* The const/enum values of s, canonical, in the arena (*vals[*n]); false when s has neither. */
bool tg_value_set(sctx *c, const cJSON *s, char ***vals, size_t *n);
/* The same values as a hash set (the caller frees it). */
bool tg_value_map(sctx *c, const cJSON *s, strmap *m);

/* Keeps j (a schema object the compiler built) until the end; NULL (j freed) on error. */
cJSON *tg_own(sctx *c, cJSON *j);
/* The schema "#/..." points at (in c->doc); NULL with an error for other references. */
const cJSON *tg_resolve_ref(sctx *c, const char *ref);
/* An annotation or a keyword JSON Schema does not define: validators ignore it. */
bool tg_is_annotation(const char *k);
int tg_type_bit(const char *name);
const char *tg_type_name(int bit);
/* The types of a JSON value (an integral number is T_NUM | T_INT). */
int tg_value_type(const cJSON *v);
/* The "type" keyword as a mask; -1 when absent; 0 with an error when malformed. */
int tg_explicit_types(sctx *c, const cJSON *s);
/* The types a schema may accept (over-approximation, for oneOf disjointness). */
int tg_sem_types(sctx *c, const cJSON *s, int depth);
/* No JSON value is valid under both a and b (a sufficient test; false when unsure). */
bool tg_disjoint(sctx *c, const cJSON *a, const cJSON *b);
/* s with its allOf and $ref opened and combined into one schema (owned, or s's part). */
const cJSON *tg_merge(sctx *c, const cJSON *s);
/* The lower (upper) bound of a number schema, draft-4 and later forms. */
void tg_bounds(const cJSON *s, bool upper, bool *has, double *v, bool *excl);

#endif /* TS_GRAMMAR_SCHEMA_INTERNAL_H */
