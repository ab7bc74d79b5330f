/*
 * jinja_check.c — the compile-time check for unknown filters and tests (jinja2 refuses them
 * when it compiles a template, except inside an if statement or an inline if of their own
 * scope, where they fail only if evaluated).
 *
 * The walk recurses along the tree, whose depth the parser caps at its nesting limit, except
 * along elif chains (an S_IF alone in an S_IF's else branch), which it follows in a loop.
 */
#include "template/jinja_internal.h"

/* An unknown filter or test is a compile error unless it sits in an if statement or an
 * inline if of its own scope (jinja2's "soft" frames): there it fails only if evaluated.
 * Loops, macros, call / filter / set blocks and with open scopes that are not soft. The
 * walk's depth is bounded by the parser's nesting cap. */
static void check_unknown(jj_arena *a, const jj_node *n, bool soft);

static void check_list(jj_arena *a, const jj_nodes *l, bool soft) {
    for (int i = 0; i < l->n; i++) {
        if (l->v[i]) {
            check_unknown(a, l->v[i], soft);
        }
    }
}

static void check_unknown(jj_arena *a, const jj_node *n, bool soft) {
    /* An elif chain is walked in a loop (see parse_if); its other parts are bounded by the
     * nesting cap. */
    while (n->kind == S_IF && n->orelse.n == 1 && n->orelse.v[0]->kind == S_IF) {
        check_unknown(a, n->a, true);
        check_list(a, &n->body, true);
        n = n->orelse.v[0];
    }
    if ((n->kind == N_FILTER || n->kind == N_TEST) && !n->fn_known && !soft) {
        jj_compile_fail(a, TS_ERR_UNSUPPORTED, n->line, "no %s named '%.*s'",
                        n->kind == N_FILTER ? "filter" : "test", (int)n->name_n, n->name);
    }
    bool inner = soft;
    switch (n->kind) {
    case S_IF:
    case N_COND:
        inner = true;
        break;
    case S_FOR:
        if (n->a) {
            check_unknown(a, n->a, soft); /* the iterable belongs to the outer scope */
        }
        inner = false;
        if (n->b) {
            check_unknown(a, n->b, inner);
        }
        check_list(a, &n->items, inner);
        check_list(a, &n->body, inner);
        check_list(a, &n->orelse, inner);
        return;
    case S_MACRO:
    case S_CALLBLOCK:
    case S_FILTERBLOCK:
    case S_SETBLOCK:
    case S_WITH:
        inner = false;
        break;
    default:
        break;
    }
    if (n->kind == S_CALLBLOCK || n->kind == S_WITH) {
        /* The call / the values are evaluated in the enclosing scope. */
        if (n->a) {
            check_unknown(a, n->a, soft);
        }
        check_list(a, &n->items2, n->kind == S_WITH ? soft : inner);
        check_list(a, &n->items, inner);
        check_list(a, &n->body, inner);
        return;
    }
    const jj_node *kids[3] = {n->a, n->b, n->c};
    for (int i = 0; i < 3; i++) {
        if (kids[i]) {
            check_unknown(a, kids[i], inner);
        }
    }
    check_list(a, &n->items, inner);
    check_list(a, &n->items2, inner);
    check_list(a, &n->body, inner);
    check_list(a, &n->orelse, inner);
}

void jj_check_unknown(jj_arena *a, const jj_nodes *body) {
    check_list(a, body, false);
}
