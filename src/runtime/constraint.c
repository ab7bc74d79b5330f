/*
 * constraint.c — ts_constraint: a compiled grammar, a matcher and the llm's vocabulary trie,
 * the pieces a constrained request uses inside the engine, for tools and callers on their own.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "runtime/runtime.h"
#include "util/error.h"

struct ts_constraint {
    const ts_gvocab *v; /* the llm's (borrowed) */
    ts_grammar *g;
    ts_gmatch *m;
};

/* The llm's vocabulary trie, built by the first caller; a racing second build is dropped. */
static ts_status llm_gvocab(ts_llm *llm, const ts_gvocab **out, ts_error *err) {
    ts_gvocab *v = atomic_load(&llm->gvocab);
    if (v == NULL) {
        ts_status st = ts_engine_gvocab_build(llm->tok, ts_llm_n_vocab(llm), &v, err);
        if (st != TS_OK) {
            return st;
        }
        ts_gvocab *expected = NULL;
        if (!atomic_compare_exchange_strong(&llm->gvocab, &expected, v)) {
            ts_gvocab_free(v);
            v = expected;
        }
    }
    *out = v;
    return TS_OK;
}

ts_status ts_constraint_create(ts_llm *llm, ts_grammar_kind kind, const char *text, size_t len,
                               ts_constraint **out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (llm == NULL || out == NULL || (text == NULL && kind != TS_GRAMMAR_JSON_OBJECT)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_constraint_create: llm, text and out are required");
    }
    *out = NULL;
    ts_grammar *g = NULL;
    ts_status st;
    len = len == 0 && text != NULL ? strlen(text) : len;
    switch (kind) {
    case TS_GRAMMAR_GBNF:
        st = ts_grammar_from_gbnf(text, len, "root", &g, err);
        break;
    case TS_GRAMMAR_JSON_SCHEMA:
        st = ts_grammar_from_schema(text, len, &g, err);
        break;
    case TS_GRAMMAR_JSON_OBJECT:
        st = ts_grammar_from_schema("{\"type\":\"object\"}", 17, &g, err);
        break;
    default:
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_constraint_create: unknown kind %d",
                            (int)kind);
    }
    const ts_gvocab *v = NULL;
    if (st == TS_OK) {
        st = llm_gvocab(llm, &v, err);
    }
    ts_constraint *c = NULL;
    if (st == TS_OK) {
        c = calloc(1, sizeof *c);
        if (c == NULL || (c->m = ts_gmatch_create(g)) == NULL) {
            free(c);
            st = ts_error_set(err, TS_ERR_NOMEM, "ts_constraint_create: out of memory");
        }
    }
    if (st != TS_OK) {
        ts_grammar_free(g);
        return st;
    }
    c->v = v;
    c->g = g;
    *out = c;
    return TS_OK;
}

void ts_constraint_destroy(ts_constraint *c) {
    if (c == NULL) {
        return;
    }
    ts_gmatch_free(c->m);
    ts_grammar_free(c->g);
    free(c);
}

ts_status ts_constraint_reset(ts_constraint *c, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    ts_gmatch *m = ts_gmatch_create(c->g);
    if (m == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_constraint_reset: out of memory");
    }
    ts_gmatch_free(c->m);
    c->m = m;
    return TS_OK;
}

int32_t ts_constraint_mask(ts_constraint *c, uint32_t *allowed) {
    return ts_gmatch_mask(c->m, c->v, allowed);
}

int ts_constraint_accept(ts_constraint *c, int32_t token) {
    if (token < 0 || token >= ts_gvocab_size(c->v)) {
        return 0;
    }
    return ts_gmatch_accept_token(c->m, c->v, token);
}

int ts_constraint_is_accepting(const ts_constraint *c) {
    return ts_gmatch_is_accepting(c->m);
}

ts_status ts_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (schema == NULL || gbnf == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_json_schema_to_gbnf: schema and gbnf "
                            "are required");
    }
    return ts_schema_to_gbnf(schema, len == 0 ? strlen(schema) : len, gbnf, err);
}
