/*
 * registry.c — functional families and their named implementations (see registry.h).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/registry.h"
#include "util/error.h"

#define NAME_MAX_LEN 48

typedef struct impl {
    char name[NAME_MAX_LEN];
    ts_impl_fn fn;
} impl;

typedef struct family {
    char name[NAME_MAX_LEN];
    impl *impls;
    int n_impls;
    int active;
} family;

struct ts_registry {
    family *fams;
    int n_fams;
    int *stack; /* saved `active` of every family, n_fams entries per level */
    int *stack_fams; /* family count at each level */
    int depth;
};

/* Defined in functional.c: registers the built-in implementations. */
ts_status ts_functional_register_builtins(ts_registry *r, ts_error *err);

ts_status ts_registry_create_empty(ts_registry **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: create: out is NULL");
    }
    *out = calloc(1, sizeof **out);
    return *out ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "registry: out of memory");
}

ts_status ts_registry_create(ts_registry **out, ts_error *err) {
    ts_status st = ts_registry_create_empty(out, err);
    if (st == TS_OK && (st = ts_functional_register_builtins(*out, err)) != TS_OK) {
        ts_registry_destroy(*out);
        *out = NULL;
    }
    return st;
}

void ts_registry_destroy(ts_registry *r) {
    if (r == NULL) {
        return;
    }
    for (int i = 0; i < r->n_fams; i++) {
        free(r->fams[i].impls);
    }
    free(r->fams);
    free(r->stack);
    free(r->stack_fams);
    free(r);
}

static family *find_family(const ts_registry *r, const char *name, size_t len) {
    for (int i = 0; i < r->n_fams; i++) {
        if (strlen(r->fams[i].name) == len && strncmp(r->fams[i].name, name, len) == 0) {
            return &r->fams[i];
        }
    }
    return NULL;
}

static int find_impl(const family *f, const char *name, size_t len) {
    for (int i = 0; i < f->n_impls; i++) {
        if (strlen(f->impls[i].name) == len && strncmp(f->impls[i].name, name, len) == 0) {
            return i;
        }
    }
    return -1;
}

static void list_families(const ts_registry *r, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_fams && used < size; i++) {
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 r->fams[i].name);
    }
}

static void list_impls(const family *f, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->n_impls && used < size; i++) {
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 f->impls[i].name);
    }
}

ts_status ts_registry_add(ts_registry *r, const char *fam_name, const char *name, ts_impl_fn fn,
                          ts_error *err) {
    if (r == NULL || fam_name == NULL || name == NULL || fn == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: add: NULL argument");
    }
    if (strlen(fam_name) == 0 || strlen(fam_name) >= NAME_MAX_LEN || strlen(name) == 0 ||
        strlen(name) >= NAME_MAX_LEN || strpbrk(fam_name, "=,; ") || strpbrk(name, "=,; ")) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "registry: add '%s=%s': names must be 1..%d characters without "
                            "'=', ',', ';' or spaces", fam_name, name, NAME_MAX_LEN - 1);
    }
    if (r->depth > 0) {
        return ts_error_set(err, TS_ERR_STATE,
                            "registry: add '%s=%s' inside a pushed scope", fam_name, name);
    }
    family *f = find_family(r, fam_name, strlen(fam_name));
    if (f == NULL) {
        family *p = realloc(r->fams, (size_t)(r->n_fams + 1) * sizeof *p);
        if (p == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "registry: out of memory");
        }
        r->fams = p;
        f = &r->fams[r->n_fams++];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", fam_name);
    }
    if (find_impl(f, name, strlen(name)) >= 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "registry: '%s' already has an implementation named '%s'", fam_name,
                            name);
    }
    impl *p = realloc(f->impls, (size_t)(f->n_impls + 1) * sizeof *p);
    if (p == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "registry: out of memory");
    }
    f->impls = p;
    snprintf(f->impls[f->n_impls].name, NAME_MAX_LEN, "%s", name);
    f->impls[f->n_impls].fn = fn;
    f->n_impls++;
    return TS_OK;
}

/* Resolves family/name (lengths given) to indices, with an error listing the choices. */
static ts_status resolve(const ts_registry *r, const char *fam, size_t fam_len, const char *name,
                         size_t name_len, const char *origin, family **out_f, int *out_i,
                         ts_error *err) {
    char choices[256];
    family *f = find_family(r, fam, fam_len);
    if (f == NULL) {
        list_families(r, choices, sizeof choices);
        return ts_error_set(err, TS_ERR_NOT_FOUND,
                            "registry%s%s: unknown functional family '%.*s' (families: %s)",
                            origin ? " " : "", origin ? origin : "", (int)fam_len, fam, choices);
    }
    int i = find_impl(f, name, name_len);
    if (i < 0) {
        list_impls(f, choices, sizeof choices);
        return ts_error_set(err, TS_ERR_NOT_FOUND,
                            "registry%s%s: unknown implementation '%.*s' for '%s' (choices: %s)",
                            origin ? " " : "", origin ? origin : "", (int)name_len, name,
                            f->name, choices);
    }
    *out_f = f;
    *out_i = i;
    return TS_OK;
}

ts_status ts_registry_select(ts_registry *r, const char *fam, const char *name, ts_error *err) {
    if (r == NULL || fam == NULL || name == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: select: NULL argument");
    }
    family *f;
    int i;
    ts_status st = resolve(r, fam, strlen(fam), name, strlen(name), NULL, &f, &i, err);
    if (st == TS_OK) {
        f->active = i;
    }
    return st;
}

static bool is_sep(char c) {
    return c == ',' || c == ';' || isspace((unsigned char)c);
}

/* Walks the pairs of spec; when apply is false only validates. */
static ts_status walk_spec(ts_registry *r, const char *spec, const char *origin, bool apply,
                           ts_error *err) {
    const char *p = spec;
    while (*p) {
        while (*p && is_sep(*p)) {
            p++;
        }
        if (!*p) {
            break;
        }
        const char *start = p;
        while (*p && !is_sep(*p)) {
            p++;
        }
        const char *eq = memchr(start, '=', (size_t)(p - start));
        if (eq == NULL || eq == start || eq + 1 == p) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "registry %s: '%.*s' is not of the form family=implementation",
                                origin, (int)(p - start), start);
        }
        family *f;
        int i;
        ts_status st = resolve(r, start, (size_t)(eq - start), eq + 1, (size_t)(p - eq - 1),
                               origin, &f, &i, err);
        if (st != TS_OK) {
            return st;
        }
        if (apply) {
            f->active = i;
        }
    }
    return TS_OK;
}

ts_status ts_registry_apply(ts_registry *r, const char *spec, const char *origin,
                            ts_error *err) {
    if (r == NULL || spec == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: apply: NULL argument");
    }
    origin = origin ? origin : "overrides";
    ts_status st = walk_spec(r, spec, origin, false, err);
    return st != TS_OK ? st : walk_spec(r, spec, origin, true, err);
}

ts_status ts_registry_parse_args(ts_registry *r, int *argc, char **argv, ts_error *err) {
    if (r == NULL || argc == NULL || argv == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: parse_args: NULL argument");
    }
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *spec = NULL;
        if (strcmp(argv[i], "--override") == 0) {
            if (i + 1 >= *argc) {
                return ts_error_set(err, TS_ERR_INVALID_ARG,
                                    "--override needs a value like attention=decomposed");
            }
            spec = argv[++i];
        } else if (strncmp(argv[i], "--override=", 11) == 0) {
            spec = argv[i] + 11;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        ts_status st = ts_registry_apply(r, spec, "--override", err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (int i = out; i < *argc; i++) {
        argv[i] = NULL;
    }
    *argc = out;
    return TS_OK;
}

ts_status ts_registry_push(ts_registry *r, ts_error *err) {
    if (r == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "registry: push: NULL registry");
    }
    int total = 0;
    for (int d = 0; d < r->depth; d++) {
        total += r->stack_fams[d];
    }
    int *s = realloc(r->stack, (size_t)(total + r->n_fams + 1) * sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "registry: out of memory");
    }
    r->stack = s;
    int *sf = realloc(r->stack_fams, (size_t)(r->depth + 1) * sizeof *sf);
    if (sf == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "registry: out of memory");
    }
    r->stack_fams = sf;
    for (int i = 0; i < r->n_fams; i++) {
        r->stack[total + i] = r->fams[i].active;
    }
    r->stack_fams[r->depth++] = r->n_fams;
    return TS_OK;
}

ts_status ts_registry_pop(ts_registry *r, ts_error *err) {
    if (r == NULL || r->depth == 0) {
        return ts_error_set(err, TS_ERR_STATE, "registry: pop without a matching push");
    }
    r->depth--;
    int total = 0;
    for (int d = 0; d < r->depth; d++) {
        total += r->stack_fams[d];
    }
    for (int i = 0; i < r->stack_fams[r->depth]; i++) {
        r->fams[i].active = r->stack[total + i];
    }
    return TS_OK;
}

ts_impl_fn ts_registry_get(const ts_registry *r, const char *fam, const char **name) {
    if (r == NULL || fam == NULL) {
        return NULL;
    }
    family *f = find_family(r, fam, strlen(fam));
    if (f == NULL || f->n_impls == 0) {
        return NULL;
    }
    if (name != NULL) {
        *name = f->impls[f->active].name;
    }
    return f->impls[f->active].fn;
}

void ts_registry_describe(const ts_registry *r, char *buf, size_t size) {
    size_t used = 0;
    if (size == 0) {
        return;
    }
    buf[0] = '\0';
    for (int i = 0; r != NULL && i < r->n_fams && used < size; i++) {
        const family *f = &r->fams[i];
        used += (size_t)snprintf(buf + used, size - used, "%s:", f->name);
        for (int j = 0; j < f->n_impls && used < size; j++) {
            used += (size_t)snprintf(buf + used, size - used, " %s%s", f->impls[j].name,
                                     j == f->active ? "*" : "");
        }
        if (used < size) {
            used += (size_t)snprintf(buf + used, size - used, "\n");
        }
    }
}
