/*
 * gcheck.c — checks a grammar the reader produced and lays it out for the matcher.
 *
 * Three properties are proved here, each a compile error naming the rule when it fails:
 *   - productive: every rule derives at least one finite string ("can never finish");
 *   - no left recursion that grows the stack: in the graph where rule A has an edge to B when
 *     B can start A (everything before B in some alternative of A can be empty), no cycle may
 *     hold an edge whose reference is followed by more elements. A cycle of tail references
 *     only (R ::= G R | with G nullable, from (x?)*) is harmless: the matcher's tail calls keep
 *     the stack as it is and its closure revisits the same stack, which it skips.
 *   - every reference names a defined rule (the reader checks user rules by name).
 * Nullable and productive sets are computed with worklists (linear in the grammar), the cycle
 * check with an iterative Tarjan SCC pass, so hostile grammars cannot make this quadratic or
 * overflow the C stack.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "util/error.h"

void ts_grammar_free(ts_grammar *g) {
    if (!g) {
        return;
    }
    free(g->elems);
    free(g->alt_start);
    free(g->rule_alt);
    free(g->classes);
    free(g->ranges);
    free(g);
}

static const char *rule_name(const gbuild_rule *rules, uint32_t r) {
    return rules[rules[r].origin].name ? rules[rules[r].origin].name : "?";
}

/* Tarjan's strongly connected components over the edge lists (CSR: off[n + 1], to[]),
 * iteratively. comp[v] receives the component of v. Returns false when out of memory. */
static bool scc(uint32_t n, const uint32_t *off, const uint32_t *to, uint32_t *comp) {
    uint32_t *index = malloc((size_t)n * sizeof *index);
    uint32_t *low = malloc((size_t)n * sizeof *low);
    uint32_t *stack = malloc((size_t)n * sizeof *stack);
    uint32_t *call = malloc((size_t)n * sizeof *call); /* DFS path: vertex */
    uint32_t *next = malloc((size_t)n * sizeof *next); /* DFS path: next edge to try */
    bool *on = calloc(n ? n : 1, sizeof *on);
    bool ok = index && low && stack && call && next && on;
    if (ok) {
        for (uint32_t v = 0; v < n; v++) {
            index[v] = UINT32_MAX;
        }
        uint32_t counter = 0, sp = 0, n_comp = 0;
        for (uint32_t s = 0; s < n; s++) {
            if (index[s] != UINT32_MAX) {
                continue;
            }
            uint32_t depth = 0;
            call[depth] = s;
            next[depth] = off[s];
            index[s] = low[s] = counter++;
            stack[sp++] = s;
            on[s] = true;
            while (depth != UINT32_MAX) {
                uint32_t v = call[depth];
                if (next[depth] < off[v + 1]) {
                    uint32_t w = to[next[depth]++];
                    if (index[w] == UINT32_MAX) {
                        depth++;
                        call[depth] = w;
                        next[depth] = off[w];
                        index[w] = low[w] = counter++;
                        stack[sp++] = w;
                        on[w] = true;
                    } else if (on[w] && index[w] < low[v]) {
                        low[v] = index[w];
                    }
                    continue;
                }
                if (low[v] == index[v]) {
                    uint32_t w;
                    do {
                        w = stack[--sp];
                        on[w] = false;
                        comp[w] = n_comp;
                    } while (w != v);
                    n_comp++;
                }
                if (depth == 0) {
                    depth = UINT32_MAX;
                } else {
                    depth--;
                    uint32_t u = call[depth];
                    if (low[v] < low[u]) {
                        low[u] = low[v];
                    }
                }
            }
        }
    }
    free(index);
    free(low);
    free(stack);
    free(call);
    free(next);
    free(on);
    return ok;
}

ts_status ts_grammar_check_and_build(gbuild_rule *rules, uint32_t n_rules, uint32_t root,
                                     gclass *classes, uint32_t n_classes, uint32_t *ranges,
                                     uint32_t n_ranges, ts_grammar **out, ts_error *err) {
    ts_status st = TS_OK;
    ts_grammar *g = calloc(1, sizeof *g);
    uint32_t *ref_cnt = NULL, *ref_off = NULL, *ref_alt = NULL, *alt_rule = NULL;
    uint32_t *pending = NULL, *work = NULL, *e_off = NULL, *e_to = NULL, *comp = NULL;
    uint8_t *e_tail = NULL;
    bool *nullable = NULL, *productive = NULL, *alt_nullable_dead = NULL;
    if (!g) {
        goto nomem;
    }

    /* Layout: count elements (body + one END per alternative) and alternatives. */
    size_t n_elems = 0, n_alts = 0;
    for (uint32_t r = 0; r < n_rules; r++) {
        size_t alts = 1;
        for (uint32_t k = 0; k < rules[r].n; k++) {
            alts += GE_TYPE(rules[r].body[k]) == GE_ALT;
        }
        n_alts += alts;
        n_elems += rules[r].n + 1; /* each ALT becomes an END, plus the last END */
    }
    if (n_elems > TS_GRAMMAR_MAX_ELEMS + TS_GRAMMAR_MAX_RULES) {
        st = ts_error_set(err, TS_ERR_LIMIT, "grammar: %zu elements, above the limit", n_elems);
        goto fail;
    }
    g->elems = malloc(n_elems * sizeof *g->elems);
    g->alt_start = malloc(n_alts * sizeof *g->alt_start);
    g->rule_alt = malloc(((size_t)n_rules + 1) * sizeof *g->rule_alt);
    alt_rule = malloc(n_alts * sizeof *alt_rule);
    if (!g->elems || !g->alt_start || !g->rule_alt || !alt_rule) {
        goto nomem;
    }
    {
        uint32_t e = 0, a = 0;
        for (uint32_t r = 0; r < n_rules; r++) {
            g->rule_alt[r] = a;
            alt_rule[a] = r;
            g->alt_start[a++] = e;
            for (uint32_t k = 0; k < rules[r].n; k++) {
                uint32_t x = rules[r].body[k];
                if (GE_TYPE(x) == GE_ALT) {
                    g->elems[e++] = GE_MAKE(GE_END, 0);
                    alt_rule[a] = r;
                    g->alt_start[a++] = e;
                } else {
                    g->elems[e++] = x;
                }
            }
            g->elems[e++] = GE_MAKE(GE_END, 0);
        }
        g->rule_alt[n_rules] = a;
        g->n_elems = e;
        g->n_alts = a;
    }
    g->n_rules = n_rules;
    g->root = root;

    /* Reverse index: for every rule, the alternatives referencing it (once per reference). */
    ref_cnt = calloc((size_t)n_rules + 1, sizeof *ref_cnt);
    ref_off = calloc((size_t)n_rules + 2, sizeof *ref_off);
    pending = malloc((size_t)g->n_alts * sizeof *pending);
    work = malloc(((size_t)n_rules + 1) * sizeof *work);
    nullable = calloc((size_t)n_rules + 1, sizeof *nullable);
    productive = calloc((size_t)n_rules + 1, sizeof *productive);
    alt_nullable_dead = calloc((size_t)g->n_alts + 1, sizeof *alt_nullable_dead);
    if (!ref_cnt || !ref_off || !pending || !work || !nullable || !productive ||
        !alt_nullable_dead) {
        goto nomem;
    }
    size_t n_refs = 0;
    for (uint32_t e = 0; e < g->n_elems; e++) {
        if (GE_TYPE(g->elems[e]) == GE_REF) {
            ref_cnt[GE_VAL(g->elems[e])]++;
            n_refs++;
        }
    }
    ref_alt = malloc((n_refs ? n_refs : 1) * sizeof *ref_alt);
    if (!ref_alt) {
        goto nomem;
    }
    for (uint32_t r = 0; r < n_rules; r++) {
        ref_off[r + 1] = ref_off[r] + ref_cnt[r];
    }
    memset(ref_cnt, 0, ((size_t)n_rules + 1) * sizeof *ref_cnt);
    for (uint32_t a = 0; a < g->n_alts; a++) {
        for (uint32_t e = g->alt_start[a]; GE_TYPE(g->elems[e]) != GE_END; e++) {
            if (GE_TYPE(g->elems[e]) == GE_REF) {
                uint32_t t = GE_VAL(g->elems[e]);
                ref_alt[ref_off[t] + ref_cnt[t]++] = a;
            }
        }
    }

    /* Nullable: an alternative is nullable when it has no class and all its refs are. */
    {
        uint32_t nw = 0;
        for (uint32_t a = 0; a < g->n_alts; a++) {
            pending[a] = 0;
            for (uint32_t e = g->alt_start[a]; GE_TYPE(g->elems[e]) != GE_END; e++) {
                if (GE_TYPE(g->elems[e]) == GE_CLASS) {
                    alt_nullable_dead[a] = true;
                } else {
                    pending[a]++;
                }
            }
            uint32_t r = alt_rule[a];
            if (!alt_nullable_dead[a] && pending[a] == 0 && !nullable[r]) {
                nullable[r] = true;
                work[nw++] = r;
            }
        }
        while (nw) {
            uint32_t t = work[--nw];
            for (uint32_t k = ref_off[t]; k < ref_off[t + 1]; k++) {
                uint32_t a = ref_alt[k];
                if (--pending[a] == 0 && !alt_nullable_dead[a] && !nullable[alt_rule[a]]) {
                    nullable[alt_rule[a]] = true;
                    work[nw++] = alt_rule[a];
                }
            }
        }
    }
    /* Productive: an alternative is productive when all its refs are. */
    {
        uint32_t nw = 0;
        for (uint32_t a = 0; a < g->n_alts; a++) {
            pending[a] = 0;
            for (uint32_t e = g->alt_start[a]; GE_TYPE(g->elems[e]) != GE_END; e++) {
                pending[a] += GE_TYPE(g->elems[e]) == GE_REF;
            }
            uint32_t r = alt_rule[a];
            if (pending[a] == 0 && !productive[r]) {
                productive[r] = true;
                work[nw++] = r;
            }
        }
        while (nw) {
            uint32_t t = work[--nw];
            for (uint32_t k = ref_off[t]; k < ref_off[t + 1]; k++) {
                uint32_t a = ref_alt[k];
                if (--pending[a] == 0 && !productive[alt_rule[a]]) {
                    productive[alt_rule[a]] = true;
                    work[nw++] = alt_rule[a];
                }
            }
        }
        /* Name a user rule when one is at fault, else the rule a synthesized one came from. */
        uint32_t bad = UINT32_MAX;
        for (uint32_t r = 0; r < n_rules; r++) {
            if (!productive[r] && (bad == UINT32_MAX || (rules[r].name && !rules[bad].name))) {
                bad = r;
            }
        }
        if (bad != UINT32_MAX) {
            const gbuild_rule *o = &rules[rules[bad].origin];
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "grammar:%u:%u: rule '%s' can never finish (every alternative "
                              "recurses without end)",
                              o->def_line, o->def_col, rule_name(rules, bad));
            goto fail;
        }
    }

    /* Left edges A -> B (B may begin A), with a tail flag (nothing follows the reference). */
    {
        size_t n_edges = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                e_off = calloc((size_t)n_rules + 1, sizeof *e_off);
                e_to = malloc((n_edges ? n_edges : 1) * sizeof *e_to);
                e_tail = malloc(n_edges ? n_edges : 1);
                if (!e_off || !e_to || !e_tail) {
                    goto nomem;
                }
            }
            n_edges = 0;
            for (uint32_t r = 0; r < n_rules; r++) {
                if (pass == 1) {
                    e_off[r] = (uint32_t)n_edges;
                }
                for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                    for (uint32_t e = g->alt_start[a]; GE_TYPE(g->elems[e]) == GE_REF; e++) {
                        uint32_t t = GE_VAL(g->elems[e]);
                        if (pass == 1) {
                            e_to[n_edges] = t;
                            e_tail[n_edges] = GE_TYPE(g->elems[e + 1]) == GE_END;
                        }
                        n_edges++;
                        if (!nullable[t]) {
                            break;
                        }
                    }
                }
            }
            if (pass == 1) {
                e_off[n_rules] = (uint32_t)n_edges;
            }
        }
        comp = malloc(((size_t)n_rules + 1) * sizeof *comp);
        if (!comp || !scc(n_rules, e_off, e_to, comp)) {
            goto nomem;
        }
        uint32_t bad = UINT32_MAX;
        for (uint32_t r = 0; r < n_rules; r++) {
            for (uint32_t k = e_off[r]; k < e_off[r + 1]; k++) {
                if (!e_tail[k] && comp[e_to[k]] == comp[r] &&
                    (bad == UINT32_MAX || (rules[r].name && !rules[bad].name))) {
                    bad = r;
                }
            }
        }
        if (bad != UINT32_MAX) {
            const gbuild_rule *o = &rules[rules[bad].origin];
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "grammar:%u:%u: rule '%s' is left-recursive (it can reach itself "
                              "without consuming input); rewrite it with repetition, e.g. "
                              "a ::= b (\"+\" b)*",
                              o->def_line, o->def_col, rule_name(rules, bad));
            goto fail;
        }
    }

    g->classes = classes;
    g->n_classes = n_classes;
    g->ranges = ranges;
    g->n_ranges = n_ranges;
    *out = g;
    g = NULL;
    goto done;
nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "grammar: out of memory");
fail:
    ts_grammar_free(g);
done:
    free(ref_cnt);
    free(ref_off);
    free(ref_alt);
    free(alt_rule);
    free(pending);
    free(work);
    free(nullable);
    free(productive);
    free(alt_nullable_dead);
    free(e_off);
    free(e_to);
    free(e_tail);
    free(comp);
    return st;
}
