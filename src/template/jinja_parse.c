/*
 * jinja_parse.c — tokens to a tree of statements and expressions (nodes in the compile arena).
 *
 * A recursive-descent parser with jinja2's grammar and precedence (lowest first): inline if,
 * or, and, not, comparisons and in, + -, ~, * / // %, ** (left-associative, as in jinja2),
 * unary - +, then primaries with their postfixes (.attr, [item], [a:b:c], calls) and filters
 * and tests (x|f(args), x is t args). Nesting (brackets, unary operators, blocks) is capped at
 * MAX_NEST so hostile input cannot exhaust the C stack.
 *
 * As in jinja2, an unknown filter or test is a compile error unless it sits inside an if
 * statement or an inline if, where it fails only if evaluated.
 */
#include <stdio.h>
#include <string.h>

#include "template/jinja_internal.h"

#define MAX_NEST 256

typedef struct parser {
    jj_arena *a;
    const jj_tok *t;
    size_t pos, n;
    int nest;    /* current nesting, capped at MAX_NEST */
    int in_loop; /* inside a for body of the current function (break/continue allowed) */
} parser;

static const jj_tok *cur(const parser *P) {
    return &P->t[P->pos];
}
static const jj_tok *peek(const parser *P, size_t k) {
    size_t i = P->pos + k;
    return &P->t[i < P->n ? i : P->n - 1];
}
static void advance(parser *P) {
    if (P->pos + 1 < P->n) {
        P->pos++;
    }
}

static bool is_name(const jj_tok *t, const char *name) {
    return t->type == TK_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}
static bool is_op(const jj_tok *t, int op) {
    return t->type == TK_OP && t->op == op;
}

static const char *describe(const jj_tok *t, char buf[64]) {
    switch (t->type) {
    case TK_EOF:
        return "end of template";
    case TK_DATA:
        return "template data";
    case TK_VAR_BEGIN:
        return "'{{'";
    case TK_VAR_END:
        return "'}}'";
    case TK_BLOCK_BEGIN:
        return "'{%'";
    case TK_BLOCK_END:
        return "'%}'";
    case TK_STRING:
        return "string literal";
    case TK_INT:
        return "integer";
    case TK_FLOAT:
        return "float";
    default:
        snprintf(buf, 64, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
        return buf;
    }
}

JJ_NORETURN static void fail_unexpected(parser *P, const char *wanted) {
    char buf[64];
    const jj_tok *t = cur(P);
    if (wanted) {
        jj_compile_fail(P->a, TS_ERR_FORMAT, t->line, "expected %s, got %s", wanted,
                        describe(t, buf));
    }
    jj_compile_fail(P->a, TS_ERR_FORMAT, t->line, "unexpected %s", describe(t, buf));
}

static void expect_op(parser *P, int op, const char *what) {
    if (!is_op(cur(P), op)) {
        fail_unexpected(P, what);
    }
    advance(P);
}

static void expect_type(parser *P, int type, const char *what) {
    if (cur(P)->type != type) {
        fail_unexpected(P, what);
    }
    advance(P);
}

static void nest_in(parser *P) {
    if (++P->nest > MAX_NEST) {
        jj_compile_fail(P->a, TS_ERR_LIMIT, cur(P)->line,
                        "nesting deeper than %d (brackets, operators or blocks)", MAX_NEST);
    }
}
static void nest_out(parser *P) {
    P->nest--;
}

/* Left-leaning chains (a + b + c, x|f|g, a.b.c, f()()) deepen the tree one level per link
 * without recursing in the parser; each link counts toward the nesting cap until the chain
 * ends, so evaluation depth stays bounded too. */
static void chain_link(parser *P, int *links) {
    nest_in(P);
    (*links)++;
}

static jj_node *chain_end(parser *P, int links, jj_node *n) {
    P->nest -= links;
    return n;
}

static jj_node *new_node(parser *P, int kind, int line) {
    jj_node *n = jj_alloc(P->a, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* Appends to a node list; capacity is implied by the count (4, then powers of two). */
static void push(parser *P, jj_nodes *l, jj_node *n) {
    if (l->n == 0 || (l->n >= 4 && (l->n & (l->n - 1)) == 0)) {
        int cap = l->n ? l->n * 2 : 4;
        jj_node **v = jj_alloc(P->a, (size_t)cap * sizeof(*v));
        if (l->n) {
            memcpy(v, l->v, (size_t)l->n * sizeof(*v));
        }
        l->v = v;
    }
    l->v[l->n++] = n;
}

static void set_name(jj_node *n, const jj_tok *t) {
    n->name = t->s;
    n->name_n = t->n;
}

static jj_node *parse_expr(parser *P); /* with inline if */
static jj_node *parse_or(parser *P);
static jj_node *parse_unary(parser *P, bool with_filter);
static jj_node *parse_tuple(parser *P, bool explicit_parens);

/* ---- expressions -------------------------------------------------------------------- */

static void parse_call_args(parser *P, jj_node *call) {
    expect_op(P, OP_LPAREN, "'('");
    bool kw_seen = false;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (call->items.n > 0) {
            expect_op(P, OP_COMMA, "',' or ')'");
        }
        if (is_op(cur(P), OP_RPAREN)) {
            break;
        }
        if (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_POW)) {
            jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, cur(P)->line,
                            "*args / **kwargs in a call are not supported");
        }
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), OP_ASSIGN)) {
            jj_node *kw = new_node(P, N_KWARG, cur(P)->line);
            set_name(kw, cur(P));
            advance(P);
            advance(P);
            kw->a = parse_expr(P);
            push(P, &call->items, kw);
            kw_seen = true;
        } else {
            if (kw_seen) {
                jj_compile_fail(P->a, TS_ERR_FORMAT, cur(P)->line,
                                "positional argument after a keyword argument");
            }
            push(P, &call->items, parse_expr(P));
        }
    }
    advance(P);
}

static jj_node *parse_subscript(parser *P, jj_node *obj) {
    const jj_tok *t = cur(P);
    if (is_op(t, OP_DOT)) {
        advance(P);
        const jj_tok *k = cur(P);
        if (k->type == TK_NAME) {
            jj_node *n = new_node(P, N_ATTR, k->line);
            n->a = obj;
            set_name(n, k);
            advance(P);
            return n;
        }
        if (k->type != TK_INT) {
            fail_unexpected(P, "an attribute name");
        }
        jj_node *n = new_node(P, N_ITEM, k->line);
        n->a = obj;
        n->b = new_node(P, N_CONST, k->line);
        n->b->v = jj_int(k->i);
        advance(P);
        return n;
    }
    /* [ ... ]: an index, a slice, or a tuple of them (the latter is not supported). */
    advance(P);
    nest_in(P);
    jj_node *parts[3] = {0};
    int colons = 0;
    for (;;) {
        if (is_op(cur(P), OP_COLON)) {
            if (++colons > 2) {
                fail_unexpected(P, "']'");
            }
            advance(P);
            continue;
        }
        if (is_op(cur(P), OP_RBRACKET)) {
            break;
        }
        if (parts[colons]) {
            fail_unexpected(P, "':' or ']'");
        }
        parts[colons] = parse_expr(P);
        if (is_op(cur(P), OP_COMMA)) {
            jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, cur(P)->line,
                            "tuple subscripts (x[a, b]) are not supported");
        }
    }
    advance(P);
    nest_out(P);
    jj_node *n;
    if (colons == 0) {
        if (!parts[0]) {
            jj_compile_fail(P->a, TS_ERR_FORMAT, t->line, "empty subscript []");
        }
        n = new_node(P, N_ITEM, t->line);
        n->b = parts[0];
    } else {
        n = new_node(P, N_SLICE, t->line);
        for (int i = 0; i < 3; i++) {
            push(P, &n->items, parts[i]);
        }
    }
    n->a = obj;
    return n;
}

static jj_node *parse_postfix(parser *P, jj_node *n) {
    int links = 0;
    for (;;) {
        const jj_tok *t = cur(P);
        if (is_op(t, OP_DOT) || is_op(t, OP_LBRACKET) || is_op(t, OP_LPAREN)) {
            chain_link(P, &links);
        }
        if (is_op(t, OP_DOT) || is_op(t, OP_LBRACKET)) {
            n = parse_subscript(P, n);
        } else if (is_op(t, OP_LPAREN)) {
            jj_node *call = new_node(P, N_CALL, t->line);
            call->a = n;
            nest_in(P);
            parse_call_args(P, call);
            nest_out(P);
            n = call;
        } else {
            return chain_end(P, links, n);
        }
    }
}

/* A dotted filter/test name; only plain names exist, so dots are an unknown name. */
static void parse_dotted_name(parser *P, jj_node *n) {
    const jj_tok *t = cur(P);
    if (t->type != TK_NAME) {
        fail_unexpected(P, "a name");
    }
    set_name(n, t);
    advance(P);
    while (is_op(cur(P), OP_DOT) && peek(P, 1)->type == TK_NAME) {
        advance(P);
        n->name_n = (size_t)(cur(P)->s + cur(P)->n - n->name);
        advance(P);
    }
}

static void check_known(jj_node *n, bool is_filter) {
    n->fn_known =
        is_filter ? jj_filter_exists(n->name, n->name_n) : jj_test_exists(n->name, n->name_n);
}

static jj_node *parse_filter(parser *P, jj_node *value) {
    advance(P); /* | */
    jj_node *n = new_node(P, N_FILTER, cur(P)->line);
    n->a = value;
    parse_dotted_name(P, n);
    if (is_op(cur(P), OP_LPAREN)) {
        nest_in(P);
        parse_call_args(P, n);
        nest_out(P);
    }
    check_known(n, true);
    return n;
}

static jj_node *parse_test(parser *P, jj_node *value) {
    advance(P); /* is */
    jj_node *n = new_node(P, N_TEST, cur(P)->line);
    n->a = value;
    if (is_name(cur(P), "not")) {
        n->op = 1;
        advance(P);
    }
    parse_dotted_name(P, n);
    const jj_tok *t = cur(P);
    if (is_op(t, OP_LPAREN)) {
        nest_in(P);
        parse_call_args(P, n);
        nest_out(P);
    } else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT ||
                t->type == TK_FLOAT || is_op(t, OP_LPAREN) || is_op(t, OP_LBRACKET) ||
                is_op(t, OP_LBRACE)) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) {
            jj_compile_fail(P->a, TS_ERR_FORMAT, t->line,
                            "you cannot chain multiple tests with is");
        }
        nest_in(P);
        jj_node *arg = parse_unary(P, false);
        nest_out(P);
        push(P, &n->items, arg);
    }
    check_known(n, false);
    return n;
}

static jj_node *parse_filter_expr(parser *P, jj_node *n) {
    int links = 0;
    for (;;) {
        const jj_tok *t = cur(P);
        if (is_op(t, OP_PIPE) || is_name(t, "is") || is_op(t, OP_LPAREN)) {
            chain_link(P, &links);
        }
        if (is_op(t, OP_PIPE)) {
            n = parse_filter(P, n);
        } else if (is_name(t, "is")) {
            n = parse_test(P, n);
        } else if (is_op(t, OP_LPAREN)) {
            n = parse_postfix(P, n);
        } else {
            return chain_end(P, links, n);
        }
    }
}

static jj_node *parse_list_like(parser *P, int kind, int close) {
    jj_node *n = new_node(P, kind, cur(P)->line);
    advance(P);
    nest_in(P);
    while (!is_op(cur(P), close)) {
        if (n->items.n > 0) {
            expect_op(P, OP_COMMA, "','");
        }
        if (is_op(cur(P), close)) {
            break;
        }
        push(P, &n->items, parse_expr(P));
        if (kind == N_DICT) {
            expect_op(P, OP_COLON, "':'");
            push(P, &n->items, parse_expr(P));
        }
    }
    advance(P);
    nest_out(P);
    return n;
}

static jj_node *parse_primary(parser *P) {
    const jj_tok *t = cur(P);
    jj_node *n;
    switch (t->type) {
    case TK_NAME:
        n = new_node(P, N_CONST, t->line);
        if (is_name(t, "true") || is_name(t, "True")) {
            n->v = jj_bool(true);
        } else if (is_name(t, "false") || is_name(t, "False")) {
            n->v = jj_bool(false);
        } else if (is_name(t, "none") || is_name(t, "None")) {
            n->v = jj_none();
        } else {
            n->kind = N_NAME;
            set_name(n, t);
        }
        advance(P);
        return n;
    case TK_STRING: {
        n = new_node(P, N_CONST, t->line);
        /* Adjacent literals concatenate ("a" "b"). */
        size_t total = 0, i = P->pos;
        for (; i < P->n && P->t[i].type == TK_STRING; i++) {
            total += P->t[i].n;
        }
        char *s = jj_alloc(P->a, total + 1);
        size_t off = 0;
        for (; P->pos < i; P->pos++) {
            memcpy(s + off, P->t[P->pos].s, P->t[P->pos].n);
            off += P->t[P->pos].n;
        }
        n->v = jj_str(s, total);
        return n;
    }
    case TK_INT:
        n = new_node(P, N_CONST, t->line);
        n->v = jj_int(t->i);
        advance(P);
        return n;
    case TK_FLOAT:
        n = new_node(P, N_CONST, t->line);
        n->v = jj_float(t->f);
        advance(P);
        return n;
    case TK_OP:
        if (t->op == OP_LPAREN) {
            advance(P);
            nest_in(P);
            n = parse_tuple(P, true);
            nest_out(P);
            expect_op(P, OP_RPAREN, "')'");
            return n;
        }
        if (t->op == OP_LBRACKET) {
            return parse_list_like(P, N_LIST, OP_RBRACKET);
        }
        if (t->op == OP_LBRACE) {
            return parse_list_like(P, N_DICT, OP_RBRACE);
        }
        break;
    default:
        break;
    }
    fail_unexpected(P, NULL);
}

static jj_node *parse_unary(parser *P, bool with_filter) {
    const jj_tok *t = cur(P);
    jj_node *n;
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        advance(P);
        nest_in(P);
        n = new_node(P, N_UNARY, t->line);
        n->op = t->op == OP_SUB ? OP_NEG : OP_POS;
        n->a = parse_unary(P, false);
        nest_out(P);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) {
        n = parse_filter_expr(P, n);
    }
    return n;
}

static jj_node *binop(parser *P, int op, jj_node *a, jj_node *b, int line) {
    jj_node *n = new_node(P, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jj_node *parse_pow(parser *P) {
    jj_node *n = parse_unary(P, true);
    int links = 0;
    while (is_op(cur(P), OP_POW)) {
        int line = cur(P)->line;
        advance(P);
        chain_link(P, &links);
        n = binop(P, OP_POW, n, parse_unary(P, true), line);
    }
    return chain_end(P, links, n);
}

static jj_node *parse_math2(parser *P) {
    jj_node *n = parse_pow(P);
    int links = 0;
    for (;;) {
        const jj_tok *t = cur(P);
        if (!(is_op(t, OP_MUL) || is_op(t, OP_DIV) || is_op(t, OP_FLOORDIV) || is_op(t, OP_MOD))) {
            return chain_end(P, links, n);
        }
        advance(P);
        chain_link(P, &links);
        n = binop(P, t->op, n, parse_pow(P), t->line);
    }
}

static jj_node *parse_concat(parser *P) {
    jj_node *n = parse_math2(P);
    int links = 0;
    while (is_op(cur(P), OP_TILDE)) {
        int line = cur(P)->line;
        advance(P);
        chain_link(P, &links);
        n = binop(P, OP_TILDE, n, parse_math2(P), line);
    }
    return chain_end(P, links, n);
}

static jj_node *parse_math1(parser *P) {
    jj_node *n = parse_concat(P);
    int links = 0;
    for (;;) {
        const jj_tok *t = cur(P);
        if (!(is_op(t, OP_ADD) || is_op(t, OP_SUB))) {
            return chain_end(P, links, n);
        }
        advance(P);
        chain_link(P, &links);
        n = binop(P, t->op, n, parse_concat(P), t->line);
    }
}

static int compare_op(parser *P) {
    const jj_tok *t = cur(P);
    if (t->type == TK_OP && t->op >= OP_EQ && t->op <= OP_GE) {
        return t->op;
    }
    if (is_name(t, "in")) {
        return OP_IN;
    }
    if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
        return OP_NOTIN;
    }
    return 0;
}

/* a < b < c is (a < b) and (b < c), as in Python (b is evaluated twice here). */
static jj_node *parse_compare(parser *P) {
    jj_node *left = parse_math1(P);
    jj_node *result = NULL;
    int op, links = 0;
    while ((op = compare_op(P)) != 0) {
        int line = cur(P)->line;
        advance(P);
        chain_link(P, &links);
        if (op == OP_NOTIN) {
            advance(P);
        }
        jj_node *right = parse_math1(P);
        jj_node *cmp = binop(P, op, left, right, line);
        if (result) {
            jj_node *and = new_node(P, N_AND, line);
            and->a = result;
            and->b = cmp;
            result = and;
        } else {
            result = cmp;
        }
        left = right;
    }
    return chain_end(P, links, result ? result : left);
}

static jj_node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        jj_node *n = new_node(P, N_UNARY, cur(P)->line);
        n->op = OP_NOT;
        advance(P);
        nest_in(P);
        n->a = parse_not(P);
        nest_out(P);
        return n;
    }
    return parse_compare(P);
}

static jj_node *parse_and(parser *P) {
    jj_node *n = parse_not(P);
    int links = 0;
    while (is_name(cur(P), "and")) {
        jj_node *m = new_node(P, N_AND, cur(P)->line);
        advance(P);
        chain_link(P, &links);
        m->a = n;
        m->b = parse_not(P);
        n = m;
    }
    return chain_end(P, links, n);
}

static jj_node *parse_or(parser *P) {
    jj_node *n = parse_and(P);
    int links = 0;
    while (is_name(cur(P), "or")) {
        jj_node *m = new_node(P, N_OR, cur(P)->line);
        advance(P);
        chain_link(P, &links);
        m->a = n;
        m->b = parse_and(P);
        n = m;
    }
    return chain_end(P, links, n);
}

static jj_node *parse_expr(parser *P) {
    nest_in(P);
    jj_node *n = parse_or(P);
    int links = 0;
    while (is_name(cur(P), "if")) {
        jj_node *c = new_node(P, N_COND, cur(P)->line);
        advance(P);
        chain_link(P, &links);
        c->a = n;
        c->b = parse_or(P);
        if (is_name(cur(P), "else")) {
            advance(P);
            c->c = parse_expr(P);
        }
        n = c;
    }
    nest_out(P);
    return chain_end(P, links, n);
}

/* Expressions separated by commas: one alone is itself, several (or a trailing comma) a
 * tuple; "()" is the empty tuple when explicit_parens. */
static jj_node *parse_tuple(parser *P, bool explicit_parens) {
    int line = cur(P)->line;
    jj_node *first = NULL;
    jj_node *tuple = NULL;
    for (;;) {
        const jj_tok *t = cur(P);
        if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(t, OP_RPAREN) ||
            (tuple && (is_name(t, "in") || is_op(t, OP_ASSIGN)))) {
            break;
        }
        jj_node *e = parse_expr(P);
        if (!first) {
            first = e;
        } else {
            if (!tuple) {
                tuple = new_node(P, N_TUPLE, line);
                push(P, &tuple->items, first);
            }
            push(P, &tuple->items, e);
        }
        if (!is_op(cur(P), OP_COMMA)) {
            break;
        }
        advance(P);
        if (!tuple) {
            tuple = new_node(P, N_TUPLE, line);
            push(P, &tuple->items, first);
        }
    }
    if (tuple) {
        return tuple;
    }
    if (first) {
        return first;
    }
    if (explicit_parens) {
        return new_node(P, N_TUPLE, line);
    }
    fail_unexpected(P, "an expression");
}

/* ---- statements --------------------------------------------------------------------- */

static void parse_body(parser *P, jj_nodes *body, const char *const *ends, int *which);

/* Assignment targets: a name, names separated by commas, or (for set) name.attr. */
static void parse_targets(parser *P, jj_nodes *targets, bool allow_attr) {
    bool parens = is_op(cur(P), OP_LPAREN);
    if (parens) {
        advance(P);
    }
    for (;;) {
        const jj_tok *t = cur(P);
        if (t->type != TK_NAME) {
            fail_unexpected(P, "a variable name");
        }
        jj_node *n = new_node(P, N_NAME, t->line);
        set_name(n, t);
        advance(P);
        if (allow_attr && targets->n == 0 && is_op(cur(P), OP_DOT)) {
            advance(P);
            if (cur(P)->type != TK_NAME) {
                fail_unexpected(P, "an attribute name");
            }
            jj_node *attr = new_node(P, N_ATTR, t->line);
            attr->a = n;
            set_name(attr, cur(P));
            advance(P);
            push(P, targets, attr);
            return;
        }
        push(P, targets, n);
        if (!is_op(cur(P), OP_COMMA)) {
            break;
        }
        advance(P);
    }
    if (parens) {
        expect_op(P, OP_RPAREN, "')'");
    }
}

static void expect_block_end(parser *P) {
    expect_type(P, TK_BLOCK_END, "'%}'");
}

/* Macro / caller parameters: (a, b=default, ...). */
static void parse_params(parser *P, jj_node *n) {
    expect_op(P, OP_LPAREN, "'('");
    while (!is_op(cur(P), OP_RPAREN)) {
        if (n->items.n > 0) {
            expect_op(P, OP_COMMA, "','");
        }
        const jj_tok *t = cur(P);
        if (t->type != TK_NAME) {
            fail_unexpected(P, "a parameter name");
        }
        jj_node *p = new_node(P, N_NAME, t->line);
        set_name(p, t);
        advance(P);
        jj_node *def = NULL;
        if (is_op(cur(P), OP_ASSIGN)) {
            advance(P);
            def = parse_expr(P);
        } else if (n->items2.n > 0 && n->items2.v[n->items2.n - 1]) {
            jj_compile_fail(P->a, TS_ERR_FORMAT, t->line,
                            "parameter '%.*s' without a default after one with a default",
                            (int)t->n, t->s);
        }
        push(P, &n->items, p);
        push(P, &n->items2, def);
    }
    advance(P);
}

static jj_node *parse_filter_chain(parser *P) {
    /* The chain starts from the body's text: an N_FILTER whose a is NULL. */
    jj_node *n = NULL;
    int links = 0;
    do {
        chain_link(P, &links);
        jj_node *f = new_node(P, N_FILTER, cur(P)->line);
        f->a = n;
        parse_dotted_name(P, f);
        if (is_op(cur(P), OP_LPAREN)) {
            nest_in(P);
            parse_call_args(P, f);
            nest_out(P);
        }
        check_known(f, true);
        n = f;
    } while (is_op(cur(P), OP_PIPE) && (advance(P), true));
    return chain_end(P, links, n);
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_FOR2[] = {"endfor", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_CALL[] = {"endcall", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_WITH[] = {"endwith", NULL};
static const char *const END_GEN[] = {"endgeneration", NULL};

/* if / elif / else: each elif becomes an S_IF alone in the previous branch's orelse. The
 * chain is built in a loop, not by recursion, so its length is bounded only by the source
 * size (the evaluator walks it in a loop too). */
static jj_node *parse_if(parser *P, int line) {
    jj_node *first = new_node(P, S_IF, line), *n = first;
    for (;;) {
        n->a = parse_tuple(P, false);
        expect_block_end(P);
        int which;
        parse_body(P, &n->body, END_IF, &which);
        if (which == 0) {
            jj_node *next = new_node(P, S_IF, cur(P)->line);
            push(P, &n->orelse, next);
            n = next;
            continue;
        }
        if (which == 1) {
            expect_block_end(P);
            parse_body(P, &n->orelse, END_IF + 2, &which);
        }
        expect_block_end(P);
        return first;
    }
}

static jj_node *parse_statement(parser *P) {
    const jj_tok *t = cur(P);
    int line = t->line;
    if (t->type != TK_NAME) {
        fail_unexpected(P, "a tag name");
    }
    advance(P);
    int saved_loop = P->in_loop;
    jj_node *n;
    int which;
    if (is_name(t, "if")) {
        return parse_if(P, line);
    } else if (is_name(t, "for")) {
        n = new_node(P, S_FOR, line);
        parse_targets(P, &n->items, false);
        if (!is_name(cur(P), "in")) {
            fail_unexpected(P, "'in'");
        }
        advance(P);
        /* The iterable is a tuple expression without an inline if (jinja2's
         * with_condexpr=False), so "for x in xs if cond" filters. */
        n->a = parse_or(P);
        if (is_name(cur(P), "if")) {
            advance(P);
            n->b = parse_expr(P);
        }
        if (is_name(cur(P), "recursive")) {
            jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, cur(P)->line,
                            "recursive for loops are not supported");
        }
        expect_block_end(P);
        P->in_loop = 1;
        parse_body(P, &n->body, END_FOR, &which);
        P->in_loop = saved_loop; /* the else branch runs after the loop */
        if (which == 0) {
            expect_block_end(P);
            parse_body(P, &n->orelse, END_FOR2, &which);
        }
        expect_block_end(P);
    } else if (is_name(t, "set")) {
        n = new_node(P, S_SET, line);
        parse_targets(P, &n->items, true);
        if (is_op(cur(P), OP_ASSIGN)) {
            advance(P);
            n->a = parse_tuple(P, false);
            expect_block_end(P);
        } else {
            if (n->items.n != 1 || n->items.v[0]->kind != N_NAME) {
                fail_unexpected(P, "'='");
            }
            n->kind = S_SETBLOCK;
            n->name = n->items.v[0]->name;
            n->name_n = n->items.v[0]->name_n;
            if (is_op(cur(P), OP_PIPE)) {
                advance(P);
                n->b = parse_filter_chain(P);
            }
            expect_block_end(P);
            parse_body(P, &n->body, END_SET, &which);
            expect_block_end(P);
        }
    } else if (is_name(t, "macro")) {
        n = new_node(P, S_MACRO, line);
        P->in_loop = 0; /* a macro body is a function of its own, as in jinja2 */
        if (cur(P)->type != TK_NAME) {
            fail_unexpected(P, "a macro name");
        }
        set_name(n, cur(P));
        advance(P);
        parse_params(P, n);
        expect_block_end(P);
        parse_body(P, &n->body, END_MACRO, &which);
        expect_block_end(P);
    } else if (is_name(t, "call")) {
        n = new_node(P, S_CALLBLOCK, line);
        P->in_loop = 0;
        if (is_op(cur(P), OP_LPAREN)) {
            parse_params(P, n);
        }
        n->a = parse_expr(P);
        if (n->a->kind != N_CALL) {
            jj_compile_fail(P->a, TS_ERR_FORMAT, line, "expected a call after 'call'");
        }
        expect_block_end(P);
        parse_body(P, &n->body, END_CALL, &which);
        expect_block_end(P);
    } else if (is_name(t, "filter")) {
        n = new_node(P, S_FILTERBLOCK, line);
        n->b = parse_filter_chain(P);
        expect_block_end(P);
        parse_body(P, &n->body, END_FILTER, &which);
        expect_block_end(P);
    } else if (is_name(t, "with")) {
        n = new_node(P, S_WITH, line);
        while (!(cur(P)->type == TK_BLOCK_END)) {
            if (n->items.n > 0) {
                expect_op(P, OP_COMMA, "','");
            }
            jj_nodes one = {0};
            parse_targets(P, &one, false);
            if (one.n != 1) {
                jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, line, "with: one name per value");
            }
            expect_op(P, OP_ASSIGN, "'='");
            push(P, &n->items, one.v[0]);
            push(P, &n->items2, parse_expr(P));
        }
        expect_block_end(P);
        parse_body(P, &n->body, END_WITH, &which);
        expect_block_end(P);
    } else if (is_name(t, "print")) {
        n = new_node(P, S_OUTPUT, line);
        n->a = parse_tuple(P, false);
        expect_block_end(P);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->in_loop) {
            jj_compile_fail(P->a, TS_ERR_FORMAT, line, "'%.*s' outside loop", (int)t->n, t->s);
        }
        n = new_node(P, is_name(t, "break") ? S_BREAK : S_CONTINUE, line);
        expect_block_end(P);
    } else if (is_name(t, "generation")) {
        n = new_node(P, S_GENERATION, line);
        P->in_loop = 0; /* transformers makes it a call block */
        expect_block_end(P);
        parse_body(P, &n->body, END_GEN, &which);
        expect_block_end(P);
    } else {
        jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, line, "unknown tag '%.*s'", (int)t->n, t->s);
    }
    P->in_loop = saved_loop;
    return n;
}

/* Parses statements until "{% <one of ends>" (consumed, *which its index) or, with ends
 * NULL, the end of the template. */
static void parse_body(parser *P, jj_nodes *body, const char *const *ends, int *which) {
    int start_line = cur(P)->line;
    nest_in(P);
    for (;;) {
        const jj_tok *t = cur(P);
        switch (t->type) {
        case TK_EOF:
            if (ends) {
                jj_compile_fail(P->a, TS_ERR_FORMAT, t->line,
                                "unexpected end of template: the block from line %d needs "
                                "'%s'",
                                start_line,
                                ends[0] && ends[1] && !ends[2] && ends[1][0] == 'e' ? ends[1]
                                                                                    : ends[0]);
            }
            nest_out(P);
            return;
        case TK_DATA: {
            jj_node *n = new_node(P, S_DATA, t->line);
            n->v = jj_str(t->s, t->n);
            push(P, body, n);
            advance(P);
            break;
        }
        case TK_VAR_BEGIN: {
            jj_node *n = new_node(P, S_OUTPUT, t->line);
            advance(P);
            n->a = parse_tuple(P, false);
            expect_type(P, TK_VAR_END, "'}}'");
            push(P, body, n);
            break;
        }
        case TK_BLOCK_BEGIN: {
            advance(P);
            const jj_tok *name = cur(P);
            if (ends) {
                for (int i = 0; ends[i]; i++) {
                    if (is_name(name, ends[i])) {
                        advance(P);
                        *which = i;
                        nest_out(P);
                        return;
                    }
                }
            }
            if (name->type == TK_NAME && name->n > 3 && memcmp(name->s, "end", 3) == 0 &&
                strchr("isfmcwgs", name->s[3])) {
                jj_compile_fail(P->a, TS_ERR_FORMAT, name->line, "unexpected '%.*s'%s",
                                (int)name->n, name->s, ends ? "" : " outside of any block");
            }
            if (name->type == TK_NAME && (is_name(name, "elif") || is_name(name, "else"))) {
                jj_compile_fail(P->a, TS_ERR_FORMAT, name->line, "unexpected '%.*s'", (int)name->n,
                                name->s);
            }
            if (is_name(name, "include") || is_name(name, "extends") || is_name(name, "import") ||
                is_name(name, "from") || is_name(name, "block") || is_name(name, "autoescape")) {
                jj_compile_fail(P->a, TS_ERR_UNSUPPORTED, name->line,
                                "the '%.*s' tag is not supported (templates are standalone)",
                                (int)name->n, name->s);
            }
            push(P, body, parse_statement(P));
            break;
        }
        default:
            fail_unexpected(P, NULL);
        }
    }
}

void jj_parse(jj_arena *a, const jj_tok *toks, size_t n_toks, jj_nodes *body) {
    parser P = {.a = a, .t = toks, .n = n_toks};
    parse_body(&P, body, NULL, NULL);
    jj_check_unknown(a, body);
}
