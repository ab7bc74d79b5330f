/*
 * jinja_eval.c — walks the node tree: statements write to the context's output buffer,
 * expressions produce values.
 *
 * Scopes follow jinja2: a for loop's body gets a fresh scope on every iteration (so a `set`
 * inside a loop neither leaks out nor survives to the next iteration; templates carry state
 * across iterations in a namespace()), a macro call gets a scope whose parent is the scope the
 * macro was defined in, `with` opens a scope, and `if` does not. Lookups go from the innermost
 * scope outwards, then to the render's variables, then to the globals.
 *
 * Every statement, expression node and loop iteration costs a step (ctx->max_steps), and the
 * operations whose cost grows with their data charge work (jj_work); macro calls and captured
 * blocks count toward the depth limit; output beyond max_output fails. Nothing here recurses
 * in proportion to the input: expression and block nesting is capped at compile time, an
 * elif chain is walked in a loop, and macro recursion is bounded by max_depth and a stack
 * budget.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_internal.h"

typedef enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE } flow;

void jj_fail(jj_ctx *c, ts_status st, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ts_error_set(c->err, st, "template:%d: %s", c->line, msg);
    jj_arena_fail(c->arena);
}

void jj_step(jj_ctx *c, uint64_t n) {
    c->steps += n;
    if (c->steps > c->max_steps) {
        jj_fail(c, TS_ERR_LIMIT, "step limit of %" PRIu64 " reached (max_steps)", c->max_steps);
    }
    /* The clock and the cancel callback are read every few thousand steps, and by the work
     * counter every JJ_STOP_EVERY units, so neither many cheap steps nor few costly ones
     * outrun the deadline by much. */
    if (c->steps >= c->next_stop_check) {
        c->next_stop_check = c->steps + 4096;
        jj_arena_check_stop(c->arena);
    }
}

/* The C stack a render may use below its start, whatever max_depth says: macro recursion
 * is the only unbounded recursion (expressions are capped at compile time). */
#define STACK_BUDGET ((uintptr_t)1 << 20)

void jj_enter(jj_ctx *c) {
    if (++c->depth > c->max_depth) {
        jj_fail(c, TS_ERR_LIMIT, "nesting depth limit of %d reached (max_depth)", c->max_depth);
    }
    char here;
    uintptr_t at = (uintptr_t)&here;
    uintptr_t used = c->stack_base > at ? c->stack_base - at : at - c->stack_base;
    if (used > STACK_BUDGET) {
        jj_fail(c, TS_ERR_LIMIT, "nesting uses more than %zu KiB of stack (max_depth %d)",
                (size_t)(STACK_BUDGET >> 10), c->max_depth);
    }
}

void jj_leave(jj_ctx *c) {
    c->depth--;
}

/* ---- scopes ------------------------------------------------------------------------- */

static jj_frame *frame_new(jj_ctx *c, jj_frame *parent) {
    jj_frame *f = jj_alloc(c->arena, sizeof(*f));
    f->parent = parent;
    return f;
}

/* A loop's scope for its next iteration: jinja2 gives each iteration a fresh scope, and since
 * the render's arena only grows, a new one per iteration would make memory grow with the
 * iteration count. The previous iteration's scope is emptied and reused instead, unless a
 * macro or call block captured it (or a scope inside it), which must keep its names. */
static jj_frame *frame_fresh(jj_ctx *c, jj_frame *prev, jj_frame *parent) {
    if (!prev || prev->captured) {
        return frame_new(c, parent);
    }
    prev->names.n = 0;
    if (prev->names.index) {
        memset(prev->names.index, 0, prev->names.index_cap * sizeof(uint32_t));
    }
    return prev;
}

static void frame_set(jj_ctx *c, jj_frame *f, const char *name, size_t n, jj_value v) {
    jj_dict_set(c, &f->names, jj_str(name, n), v);
}

static jj_value lookup(jj_ctx *c, jj_frame *f, const char *name, size_t n) {
    for (; f; f = f->parent) {
        const jj_value *v = jj_dict_get(&f->names, name, n);
        if (v) {
            return *v;
        }
    }
    const jj_value *v = jj_dict_get(c->vars, name, n);
    if (v) {
        return *v;
    }
    return jj_global(c, name, n);
}

/* ---- output ------------------------------------------------------------------------- */

static void out_check(jj_ctx *c) {
    if (c->out->n > c->max_output) {
        jj_fail(c, TS_ERR_LIMIT, "output limit of %zu bytes reached (max_output)", c->max_output);
    }
}

static void emit_value(jj_ctx *c, jj_value v) {
    jj_str_to(c, c->out, v);
    out_check(c);
}

/* ---- arithmetic --------------------------------------------------------------------- */

static const char *op_text(int op) {
    static const char *const t[] = {
        [OP_ADD] = "+",       [OP_SUB] = "-", [OP_MUL] = "*",  [OP_DIV] = "/",
        [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**", [OP_TILDE] = "~",
        [OP_EQ] = "==",       [OP_NE] = "!=", [OP_LT] = "<",   [OP_LE] = "<=",
        [OP_GT] = ">",        [OP_GE] = ">=", [OP_IN] = "in",  [OP_NOTIN] = "not in",
    };
    return op < (int)(sizeof(t) / sizeof(t[0])) && t[op] ? t[op] : "?";
}

static bool is_intlike(jj_value v) {
    return v.type == JJ_INT || v.type == JJ_BOOL;
}
static bool is_number(jj_value v) {
    return is_intlike(v) || v.type == JJ_FLOAT;
}
static double as_double(jj_value v) {
    return v.type == JJ_FLOAT ? v.f : (double)v.i;
}

JJ_NORETURN static void overflow(jj_ctx *c) {
    jj_fail(c, TS_ERR_RANGE, "integer overflow (the engine's integers are 64-bit)");
}

JJ_NORETURN static void bad_operands(jj_ctx *c, int op, jj_value a, jj_value b) {
    if (a.type == JJ_UNDEF) {
        jj_undef_fail(c, a);
    }
    if (b.type == JJ_UNDEF) {
        jj_undef_fail(c, b);
    }
    jj_fail(c, TS_ERR_TYPE, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
            jj_type_name(a), jj_type_name(b));
}

static jj_value repeat(jj_ctx *c, jj_value seq, int64_t times) {
    if (times < 0) {
        times = 0;
    }
    if (seq.type == JJ_STR) {
        /* The result's size is checked before anything is allocated or looped over (an empty
         * string times 10**12 is empty at once). */
        if (times == 0 || seq.s.n == 0) {
            return jj_str("", 0);
        }
        if (seq.s.n > c->max_output / (uint64_t)times) {
            jj_fail(c, TS_ERR_LIMIT,
                    "string repetition of %zu bytes %" PRId64
                    " times exceeds the string limit of %zu bytes (max_output)",
                    seq.s.n, times, c->max_output);
        }
        size_t total = seq.s.n * (size_t)times, done = seq.s.n;
        char *p = jj_alloc(c->arena, total + 1);
        memcpy(p, seq.s.p, seq.s.n);
        while (done < total) { /* doubling copies: log(times) memcpy calls */
            size_t k = done < total - done ? done : total - done;
            memcpy(p + done, p, k);
            done += k;
        }
        return jj_str(p, total);
    }
    if (times == 0 || seq.l->n == 0) {
        jj_value r = jj_new_list(c, 0);
        r.flags = seq.flags;
        return r;
    }
    if (seq.l->n > (1u << 24) / (uint64_t)times) {
        jj_fail(c, TS_ERR_LIMIT, "list repetition of %zu items %" PRId64 " times exceeds %u items",
                seq.l->n, times, 1u << 24);
    }
    jj_value r = jj_new_list(c, seq.l->n * (size_t)times);
    for (int64_t i = 0; i < times; i++) {
        for (size_t k = 0; k < seq.l->n; k++) {
            jj_list_push(c, r.l, seq.l->v[k]);
        }
    }
    r.flags = seq.flags;
    jj_step(c, (uint64_t)times * seq.l->n);
    return r;
}

static jj_value int_pow(jj_ctx *c, int64_t base, int64_t e) {
    int64_t r = 1;
    while (e > 0) {
        if (e & 1) {
            if (__builtin_mul_overflow(r, base, &r)) {
                overflow(c);
            }
        }
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base)) {
            overflow(c);
        }
    }
    return jj_int(r);
}

static jj_value arith(jj_ctx *c, int op, jj_value a, jj_value b) {
    if (op == OP_TILDE) {
        ts_buf buf;
        jj_buf_init(&buf, c->arena);
        jj_str_to(c, &buf, a);
        jj_str_to(c, &buf, b);
        return jj_str(buf.p ? buf.p : "", buf.n);
    }
    if (is_number(a) && is_number(b)) {
        bool ints = is_intlike(a) && is_intlike(b);
        int64_t x = a.i, y = b.i, r;
        double fx = as_double(a), fy = as_double(b);
        switch (op) {
        case OP_ADD:
            if (!ints) {
                return jj_float(fx + fy);
            }
            if (__builtin_add_overflow(x, y, &r)) {
                overflow(c);
            }
            return jj_int(r);
        case OP_SUB:
            if (!ints) {
                return jj_float(fx - fy);
            }
            if (__builtin_sub_overflow(x, y, &r)) {
                overflow(c);
            }
            return jj_int(r);
        case OP_MUL:
            if (!ints) {
                return jj_float(fx * fy);
            }
            if (__builtin_mul_overflow(x, y, &r)) {
                overflow(c);
            }
            return jj_int(r);
        case OP_DIV:
            if (fy == 0.0) {
                jj_fail(c, TS_ERR_RANGE, "division by zero");
            }
            return jj_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0) {
                    jj_fail(c, TS_ERR_RANGE, "integer division or modulo by zero");
                }
                if (x == INT64_MIN && y == -1) {
                    overflow(c);
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jj_int(op == OP_MOD ? m : q);
            }
            if (fy == 0.0) {
                jj_fail(c, TS_ERR_RANGE, "float division or modulo by zero");
            }
            if (op == OP_FLOORDIV) {
                return jj_float(floor(fx / fy));
            }
            {
                double m = fmod(fx, fy);
                if (m != 0.0 && ((m < 0) != (fy < 0))) {
                    m += fy;
                } else if (m == 0.0) {
                    m = copysign(0.0, fy);
                }
                return jj_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                return int_pow(c, x, y);
            }
            if (fx == 0.0 && fy < 0) {
                jj_fail(c, TS_ERR_RANGE, "0.0 cannot be raised to a negative power");
            }
            return jj_float(pow(fx, fy));
        default:
            break;
        }
    }
    if (op == OP_ADD && a.type == JJ_STR && b.type == JJ_STR && ((a.flags | b.flags) & JJ_F_SAFE)) {
        /* Markup + str escapes the plain side (|safe makes Markup; autoescape is off). */
        a = jj_html_escape(c, a);
        b = jj_html_escape(c, b);
        jj_value r = arith(c, op, jj_str(a.s.p, a.s.n), jj_str(b.s.p, b.s.n));
        r.flags = JJ_F_SAFE;
        return r;
    }
    if (op == OP_ADD && a.type == JJ_STR && b.type == JJ_STR) {
        if (a.s.n + b.s.n > c->max_output) {
            jj_fail(c, TS_ERR_LIMIT,
                    "a string would exceed the output limit of %zu bytes "
                    "(max_output)",
                    c->max_output);
        }
        char *p = jj_alloc(c->arena, a.s.n + b.s.n + 1);
        memcpy(p, a.s.p, a.s.n);
        memcpy(p + a.s.n, b.s.p, b.s.n);
        return jj_str(p, a.s.n + b.s.n);
    }
    if (op == OP_ADD && a.type == JJ_LIST && b.type == JJ_LIST &&
        (a.flags & JJ_F_TUPLE) == (b.flags & JJ_F_TUPLE)) {
        jj_value r = jj_new_list(c, a.l->n + b.l->n);
        memcpy(r.l->v, a.l->v, a.l->n * sizeof(jj_value));
        memcpy(r.l->v + a.l->n, b.l->v, b.l->n * sizeof(jj_value));
        r.l->n = a.l->n + b.l->n;
        r.flags = a.flags;
        return r;
    }
    if (op == OP_MUL && (a.type == JJ_STR || a.type == JJ_LIST) && is_intlike(b)) {
        return repeat(c, a, b.i);
    }
    if (op == OP_MUL && (b.type == JJ_STR || b.type == JJ_LIST) && is_intlike(a)) {
        return repeat(c, b, a.i);
    }
    if (op == OP_MOD && a.type == JJ_STR) {
        return jj_format_percent(c, a, b);
    }
    if (op == OP_ADD && a.type == JJ_STR && b.type != JJ_UNDEF) {
        jj_fail(c, TS_ERR_TYPE, "can only concatenate str (not \"%s\") to str", jj_type_name(b));
    }
    bad_operands(c, op, a, b);
}

static bool contains(jj_ctx *c, jj_value container, jj_value item) {
    switch (container.type) {
    case JJ_STR:
        if (item.type != JJ_STR) {
            if (item.type == JJ_UNDEF) {
                jj_undef_fail(c, item);
            }
            jj_fail(c, TS_ERR_TYPE, "'in <string>' requires string as left operand, not %s",
                    jj_type_name(item));
        }
        return jj_search(c, container.s.p, container.s.n, item.s.p, item.s.n, false) != NULL;
    case JJ_LIST:
        jj_step(c, container.l->n);
        for (size_t i = 0; i < container.l->n; i++) {
            if (jj_equal(c, container.l->v[i], item)) {
                return true;
            }
        }
        return false;
    case JJ_DICT:
        if ((item.type == JJ_LIST && !(item.flags & JJ_F_TUPLE)) || item.type == JJ_DICT) {
            jj_fail(c, TS_ERR_TYPE, "unhashable type: '%s'", jj_type_name(item));
        }
        return jj_dict_find(c, container.d, item) != NULL;
    case JJ_UNDEF:
        return false;
    default:
        jj_fail(c, TS_ERR_TYPE, "argument of type '%s' is not iterable", jj_type_name(container));
    }
}

static jj_value binop(jj_ctx *c, int op, jj_value a, jj_value b) {
    switch (op) {
    case OP_EQ:
        return jj_bool(jj_equal(c, a, b));
    case OP_NE:
        return jj_bool(!jj_equal(c, a, b));
    case OP_LT:
        return jj_bool(jj_compare(c, a, b, "<") < 0);
    case OP_LE:
        return jj_bool(jj_compare(c, a, b, "<=") <= 0);
    case OP_GT:
        return jj_bool(jj_compare(c, a, b, ">") > 0);
    case OP_GE:
        return jj_bool(jj_compare(c, a, b, ">=") >= 0);
    case OP_IN:
        return jj_bool(contains(c, b, a));
    case OP_NOTIN:
        return jj_bool(!contains(c, b, a));
    default:
        return arith(c, op, a, b);
    }
}

/* ---- slicing ------------------------------------------------------------------------ */

static int64_t slice_index(jj_ctx *c, jj_value v, const char *what) {
    if (is_intlike(v)) {
        return v.i;
    }
    jj_fail(c, TS_ERR_TYPE, "slice %s must be an integer or None, not '%s'", what, jj_type_name(v));
}

/* Python's slice.indices(): clamps start/stop for a sequence of length n. */
static void slice_bounds(jj_ctx *c, jj_value lo, jj_value hi, jj_value st, int64_t n,
                         int64_t *start, int64_t *stop, int64_t *step) {
    *step = st.type == JJ_NONE || st.type == JJ_UNDEF ? 1 : slice_index(c, st, "step");
    if (*step == 0) {
        jj_fail(c, TS_ERR_RANGE, "slice step cannot be zero");
    }
    bool neg = *step < 0;
    int64_t lower = neg ? -1 : 0, upper = neg ? n - 1 : n;
    if (lo.type == JJ_NONE || lo.type == JJ_UNDEF) {
        *start = neg ? upper : lower;
    } else {
        int64_t s = slice_index(c, lo, "indices");
        if (s < 0) {
            s += n;
            if (s < lower) {
                s = lower;
            }
        } else if (s > upper) {
            s = upper;
        }
        *start = s;
    }
    if (hi.type == JJ_NONE || hi.type == JJ_UNDEF) {
        *stop = neg ? lower : upper;
    } else {
        int64_t s = slice_index(c, hi, "indices");
        if (s < 0) {
            s += n;
            if (s < lower) {
                s = lower;
            }
        } else if (s > upper) {
            s = upper;
        }
        *stop = s;
    }
}

static jj_value do_slice(jj_ctx *c, jj_value obj, jj_value lo, jj_value hi, jj_value st) {
    if (obj.type == JJ_UNDEF) {
        jj_undef_fail(c, obj);
    }
    if ((obj.type != JJ_STR && obj.type != JJ_LIST) || (obj.flags & JJ_F_GEN)) {
        return jj_undef_msg(c, "'%s object' has no element slice", jj_type_name(obj));
    }
    if (obj.type == JJ_STR &&
        (st.type == JJ_NONE || st.type == JJ_UNDEF || (is_intlike(st) && st.i == 1))) {
        /* s[a:b]: byte offsets of the two code points, without a list of every character
         * (templates cut long message texts this way). */
        int64_t n = (int64_t)jj_utf8_count(c, obj.s.p, obj.s.n), start, stop, step;
        slice_bounds(c, lo, hi, st, n, &start, &stop, &step);
        if (stop <= start) {
            return jj_str("", 0);
        }
        size_t from = jj_utf8_offset(c, obj.s.p, obj.s.n, start);
        size_t to = from + jj_utf8_offset(c, obj.s.p + from, obj.s.n - from, stop - start);
        return jj_str(obj.s.p + from, to - from);
    }
    jj_value items = obj.type == JJ_STR ? jj_iterate(c, obj) : obj;
    int64_t n = (int64_t)items.l->n, start, stop, step;
    slice_bounds(c, lo, hi, st, n, &start, &stop, &step);
    jj_value r = jj_new_list(c, 0);
    r.flags = obj.flags & JJ_F_TUPLE;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        jj_list_push(c, r.l, items.l->v[i]);
        if (__builtin_add_overflow(i, step, &i)) {
            break;
        }
    }
    jj_step(c, r.l->n);
    if (obj.type != JJ_STR) {
        return r;
    }
    ts_buf b;
    jj_buf_init(&b, c->arena);
    for (size_t i = 0; i < r.l->n; i++) {
        ts_buf_put(&b, r.l->v[i].s.p, r.l->v[i].s.n);
    }
    return jj_str(b.p ? b.p : "", b.n);
}

/* ---- expressions -------------------------------------------------------------------- */

static void eval_args(jj_ctx *c, jj_frame *f, const jj_nodes *items, jj_args *out) {
    int n = items->n;
    *out = (jj_args){0};
    if (!n) {
        return;
    }
    out->pos = jj_alloc(c->arena, (size_t)n * sizeof(jj_value));
    out->kw = jj_alloc(c->arena, (size_t)n * sizeof(jj_value));
    out->kw_names = jj_alloc(c->arena, (size_t)n * sizeof(char *));
    out->kw_n = jj_alloc(c->arena, (size_t)n * sizeof(size_t));
    for (int i = 0; i < n; i++) {
        const jj_node *a = items->v[i];
        if (a->kind == N_KWARG) {
            out->kw_names[out->n_kw] = a->name;
            out->kw_n[out->n_kw] = a->name_n;
            out->kw[out->n_kw++] = jj_eval(c, f, a->a);
        } else {
            out->pos[out->n_pos++] = jj_eval(c, f, a);
        }
    }
}

static jj_value eval_call(jj_ctx *c, jj_frame *f, const jj_node *n, jj_value caller);

static jj_value apply_filter(jj_ctx *c, jj_frame *f, const jj_node *n, jj_value v) {
    jj_args args;
    eval_args(c, f, &n->items, &args);
    c->line = n->line;
    if (!n->fn_known) {
        jj_fail(c, TS_ERR_UNSUPPORTED, "no filter named '%.*s'", (int)n->name_n, n->name);
    }
    return jj_filter(c, n->name, n->name_n, v, &args);
}

/* A filter chain whose innermost a is NULL applied to text (filter blocks, block set). */
static jj_value apply_chain(jj_ctx *c, jj_frame *f, const jj_node *n, jj_value text) {
    if (!n) {
        return text;
    }
    jj_value inner = apply_chain(c, f, n->a, text);
    return apply_filter(c, f, n, inner);
}

jj_value jj_eval(jj_ctx *c, jj_frame *f, const jj_node *n) {
    jj_step(c, 1);
    c->line = n->line;
    switch (n->kind) {
    case N_CONST:
        return n->v;
    case N_NAME:
        return lookup(c, f, n->name, n->name_n);
    case N_LIST:
    case N_TUPLE: {
        jj_value l = jj_new_list(c, (size_t)n->items.n);
        for (int i = 0; i < n->items.n; i++) {
            l.l->v[i] = jj_eval(c, f, n->items.v[i]);
            jj_note_depth(c, &l.l->depth, l.l->v[i]);
        }
        l.l->n = (size_t)n->items.n;
        if (n->kind == N_TUPLE) {
            l.flags = JJ_F_TUPLE;
        }
        return l;
    }
    case N_DICT: {
        jj_value d = jj_new_dict(c, (size_t)n->items.n / 2);
        for (int i = 0; i + 1 < n->items.n; i += 2) {
            jj_value k = jj_eval(c, f, n->items.v[i]);
            jj_value v = jj_eval(c, f, n->items.v[i + 1]);
            if (k.type == JJ_LIST && !(k.flags & JJ_F_TUPLE)) {
                jj_fail(c, TS_ERR_TYPE, "unhashable type: 'list'");
            }
            if (k.type == JJ_DICT || k.type == JJ_UNDEF) {
                if (k.type == JJ_UNDEF) {
                    jj_undef_fail(c, k);
                }
                jj_fail(c, TS_ERR_TYPE, "unhashable type: 'dict'");
            }
            jj_dict_set(c, d.d, k, v);
        }
        return d;
    }
    case N_ATTR: {
        jj_value obj = jj_eval(c, f, n->a);
        c->line = n->line;
        return jj_getattr(c, obj, n->name, n->name_n);
    }
    case N_ITEM: {
        jj_value obj = jj_eval(c, f, n->a);
        jj_value key = jj_eval(c, f, n->b);
        c->line = n->line;
        return jj_getitem(c, obj, key);
    }
    case N_SLICE: {
        jj_value obj = jj_eval(c, f, n->a);
        jj_value parts[3];
        for (int i = 0; i < 3; i++) {
            parts[i] = n->items.v[i] ? jj_eval(c, f, n->items.v[i]) : jj_none();
        }
        c->line = n->line;
        return do_slice(c, obj, parts[0], parts[1], parts[2]);
    }
    case N_CALL:
        return eval_call(c, f, n, (jj_value){.type = JJ_UNDEF});
    case N_FILTER:
        return apply_filter(c, f, n, jj_eval(c, f, n->a));
    case N_TEST: {
        jj_value v = jj_eval(c, f, n->a);
        jj_args args;
        eval_args(c, f, &n->items, &args);
        c->line = n->line;
        if (!n->fn_known) {
            jj_fail(c, TS_ERR_UNSUPPORTED, "no test named '%.*s'", (int)n->name_n, n->name);
        }
        bool r = jj_test(c, n->name, n->name_n, v, &args);
        return jj_bool(n->op ? !r : r);
    }
    case N_UNARY: {
        jj_value v = jj_eval(c, f, n->a);
        c->line = n->line;
        if (n->op == OP_NOT) {
            return jj_bool(!jj_truthy(v));
        }
        if (v.type == JJ_UNDEF) {
            jj_undef_fail(c, v);
        }
        if (v.type == JJ_FLOAT) {
            return jj_float(n->op == OP_NEG ? -v.f : v.f);
        }
        if (is_intlike(v)) {
            if (n->op == OP_NEG && v.i == INT64_MIN) {
                overflow(c);
            }
            return jj_int(n->op == OP_NEG ? -v.i : v.i);
        }
        jj_fail(c, TS_ERR_TYPE, "bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+",
                jj_type_name(v));
    }
    case N_BINOP: {
        jj_value a = jj_eval(c, f, n->a);
        jj_value b = jj_eval(c, f, n->b);
        c->line = n->line;
        return binop(c, n->op, a, b);
    }
    case N_AND: {
        jj_value a = jj_eval(c, f, n->a);
        return jj_truthy(a) ? jj_eval(c, f, n->b) : a;
    }
    case N_OR: {
        jj_value a = jj_eval(c, f, n->a);
        return jj_truthy(a) ? a : jj_eval(c, f, n->b);
    }
    case N_COND:
        if (jj_truthy(jj_eval(c, f, n->b))) {
            return jj_eval(c, f, n->a);
        }
        if (n->c) {
            return jj_eval(c, f, n->c);
        }
        return jj_undef_msg(c,
                            "the inline if-expression on line %d evaluated to false and no "
                            "else section was defined.",
                            n->line);
    default:
        jj_fail(c, TS_ERR_INTERNAL, "node kind %d is not an expression", n->kind);
    }
}

static jj_value eval_call(jj_ctx *c, jj_frame *f, const jj_node *n, jj_value caller) {
    jj_value fn = jj_eval(c, f, n->a);
    jj_args args;
    eval_args(c, f, &n->items, &args);
    c->line = n->line;
    if (caller.type == JJ_FUNC) {
        if (fn.type != JJ_FUNC || fn.fn->kind != JJ_FN_MACRO) {
            jj_fail(c, TS_ERR_TYPE, "a call block needs a macro to call");
        }
        jj_func bound = *fn.fn;
        bound.caller = caller;
        return jj_call_macro(c, &bound, &args);
    }
    return jj_call(c, fn, &args);
}

/* ---- statements --------------------------------------------------------------------- */

static flow exec_body(jj_ctx *c, jj_frame *f, const jj_nodes *body);

/* Renders body into a string (macro bodies, block set, filter blocks, caller()). *fl gets
 * a break/continue that ended the body early (inline blocks pass it to their loop). */
static jj_value capture(jj_ctx *c, jj_frame *f, const jj_nodes *body, flow *fl) {
    ts_buf buf, *saved = c->out;
    jj_buf_init(&buf, c->arena);
    c->out = &buf;
    jj_enter(c);
    *fl = exec_body(c, f, body);
    jj_leave(c);
    c->out = saved;
    return jj_str(buf.p ? buf.p : "", buf.n);
}

static void assign(jj_ctx *c, jj_frame *f, const jj_nodes *targets, jj_value v, int line) {
    if (targets->n == 1) {
        const jj_node *t = targets->v[0];
        if (t->kind == N_ATTR) {
            jj_value ns = lookup(c, f, t->a->name, t->a->name_n);
            c->line = line;
            if (ns.type != JJ_NS) {
                jj_fail(c, TS_ERR_TYPE, "cannot assign attribute on non-namespace object");
            }
            if (t->name_n && t->name[0] == '_') {
                jj_fail(c, TS_ERR_UNSUPPORTED,
                        "chat templates cannot store underscore-prefixed attributes on a "
                        "namespace, but got '%.*s'",
                        (int)t->name_n, t->name);
            }
            jj_dict_set(c, ns.d, jj_str(t->name, t->name_n), v);
            return;
        }
        frame_set(c, f, t->name, t->name_n, v);
        return;
    }
    c->line = line;
    jj_value items = jj_iterate(c, v);
    if (items.l->n != (size_t)targets->n) {
        jj_fail(c, TS_ERR_TYPE, "%s values to unpack (expected %d, got %zu)",
                items.l->n > (size_t)targets->n ? "too many" : "not enough", targets->n,
                items.l->n);
    }
    for (int i = 0; i < targets->n; i++) {
        frame_set(c, f, targets->v[i]->name, targets->v[i]->name_n, items.l->v[i]);
    }
}

static flow exec_for(jj_ctx *c, jj_frame *f, const jj_node *n) {
    jj_value seq = jj_iterate(c, jj_eval(c, f, n->a));
    c->line = n->line;
    if (n->b) {
        /* "for x in xs if cond": filter first, so loop.length counts what remains. */
        jj_value kept = jj_new_list(c, 0);
        jj_frame *tmp = NULL;
        for (size_t i = 0; i < seq.l->n; i++) {
            jj_step(c, 1);
            tmp = frame_fresh(c, tmp, f);
            assign(c, tmp, &n->items, seq.l->v[i], n->line);
            if (jj_truthy(jj_eval(c, tmp, n->b))) {
                jj_list_push(c, kept.l, seq.l->v[i]);
            }
        }
        seq = kept;
    }
    if (seq.l->n == 0) {
        return exec_body(c, f, &n->orelse);
    }
    jj_loop *loop = jj_alloc(c->arena, sizeof(*loop));
    loop->items = seq.l;
    jj_value loopv = {.type = JJ_LOOP, .loop = loop};
    jj_frame *it = NULL;
    for (size_t i = 0; i < seq.l->n; i++) {
        jj_step(c, 1);
        loop->index0 = i;
        it = frame_fresh(c, it, f);
        frame_set(c, it, "loop", 4, loopv);
        assign(c, it, &n->items, seq.l->v[i], n->line);
        if (exec_body(c, it, &n->body) == FLOW_BREAK) {
            break;
        }
    }
    return FLOW_NEXT;
}

static jj_value make_func(jj_ctx *c, int kind, const jj_node *node, jj_frame *closure) {
    jj_func *fn = jj_alloc(c->arena, sizeof(*fn));
    fn->kind = kind;
    fn->macro = node;
    fn->closure = closure;
    for (jj_frame *fr = closure; fr && !fr->captured; fr = fr->parent) {
        fr->captured = true; /* see frame_fresh */
    }
    fn->name = kind == JJ_FN_MACRO ? node->name : "caller";
    fn->name_n = kind == JJ_FN_MACRO ? node->name_n : 6;
    return (jj_value){.type = JJ_FUNC, .fn = fn};
}

jj_value jj_call_macro(jj_ctx *c, jj_func *fn, const jj_args *args) {
    const jj_node *m = fn->macro;
    jj_enter(c);
    jj_frame *f = frame_new(c, fn->closure);
    int np = m->items.n;
    jj_value varargs = jj_new_list(c, 0);
    varargs.flags = JJ_F_TUPLE;
    for (int i = 0; i < args->n_pos; i++) {
        if (i < np) {
            frame_set(c, f, m->items.v[i]->name, m->items.v[i]->name_n, args->pos[i]);
        } else {
            jj_list_push(c, varargs.l, args->pos[i]);
        }
    }
    jj_value kwargs = jj_new_dict(c, 0);
    for (int k = 0; k < args->n_kw; k++) {
        int i = 0;
        for (; i < np; i++) {
            if (m->items.v[i]->name_n == args->kw_n[k] &&
                memcmp(m->items.v[i]->name, args->kw_names[k], args->kw_n[k]) == 0) {
                break;
            }
        }
        if (i == np) {
            jj_dict_set(c, kwargs.d, jj_str(args->kw_names[k], args->kw_n[k]), args->kw[k]);
            continue;
        }
        if (i < args->n_pos) {
            jj_fail(c, TS_ERR_TYPE, "macro '%.*s' got multiple values for argument '%.*s'",
                    (int)fn->name_n, fn->name, (int)args->kw_n[k], args->kw_names[k]);
        }
        frame_set(c, f, args->kw_names[k], args->kw_n[k], args->kw[k]);
    }
    /* Parameters still unbound take their defaults (evaluated in the macro's scope, so a
     * default may use an earlier parameter) or are undefined. */
    for (int i = args->n_pos; i < np; i++) {
        const jj_node *p = m->items.v[i];
        if (jj_dict_get(&f->names, p->name, p->name_n)) {
            continue;
        }
        jj_value v = m->items2.v[i] ? jj_eval(c, f, m->items2.v[i])
                                    : jj_undef_msg(c, "parameter '%.*s' was not provided",
                                                   (int)p->name_n, p->name);
        frame_set(c, f, p->name, p->name_n, v);
    }
    frame_set(c, f, "varargs", 7, varargs);
    frame_set(c, f, "kwargs", 6, kwargs);
    if (fn->kind == JJ_FN_MACRO && fn->caller.type == JJ_FUNC) {
        frame_set(c, f, "caller", 6, fn->caller);
    }
    flow fl; /* always FLOW_NEXT: break/continue cannot appear in a macro body */
    jj_value r = capture(c, f, &m->body, &fl);
    jj_leave(c);
    return r;
}

static flow exec_stmt(jj_ctx *c, jj_frame *f, const jj_node *n) {
    jj_step(c, 1);
    c->line = n->line;
    switch (n->kind) {
    case S_DATA:
        ts_buf_put(c->out, n->v.s.p, n->v.s.n);
        out_check(c);
        return FLOW_NEXT;
    case S_OUTPUT:
        emit_value(c, jj_eval(c, f, n->a));
        return FLOW_NEXT;
    case S_IF:
        /* An elif chain is an S_IF alone in its parent's else branch: walk it in a loop, so a
         * chain of any length renders without recursing per branch. */
        for (;;) {
            if (jj_truthy(jj_eval(c, f, n->a))) {
                return exec_body(c, f, &n->body);
            }
            if (n->orelse.n != 1 || n->orelse.v[0]->kind != S_IF) {
                return exec_body(c, f, &n->orelse);
            }
            n = n->orelse.v[0];
            jj_step(c, 1);
            c->line = n->line;
        }
    case S_FOR:
        return exec_for(c, f, n);
    case S_SET:
        assign(c, f, &n->items, jj_eval(c, f, n->a), n->line);
        return FLOW_NEXT;
    case S_SETBLOCK: {
        /* A break inside the block leaves the loop at once: nothing is assigned. */
        /* The body has its own scope, as in jinja2: a set inside it stays inside. */
        flow fl;
        jj_value v = capture(c, frame_new(c, f), &n->body, &fl);
        if (fl != FLOW_NEXT) {
            return fl;
        }
        v = apply_chain(c, f, n->b, v);
        frame_set(c, f, n->name, n->name_n, v);
        return FLOW_NEXT;
    }
    case S_MACRO:
        frame_set(c, f, n->name, n->name_n, make_func(c, JJ_FN_MACRO, n, f));
        return FLOW_NEXT;
    case S_CALLBLOCK: {
        jj_value caller = make_func(c, JJ_FN_CALLER, n, f);
        emit_value(c, eval_call(c, f, n->a, caller));
        return FLOW_NEXT;
    }
    case S_FILTERBLOCK: {
        flow fl;
        jj_value v = capture(c, frame_new(c, f), &n->body, &fl);
        if (fl != FLOW_NEXT) {
            return fl;
        }
        emit_value(c, apply_chain(c, f, n->b, v));
        return FLOW_NEXT;
    }
    case S_WITH: {
        jj_frame *w = frame_new(c, f);
        for (int i = 0; i < n->items.n; i++) {
            frame_set(c, w, n->items.v[i]->name, n->items.v[i]->name_n,
                      jj_eval(c, f, n->items2.v[i]));
        }
        return exec_body(c, w, &n->body);
    }
    case S_BREAK:
        return FLOW_BREAK;
    case S_CONTINUE:
        return FLOW_CONTINUE;
    case S_GENERATION:
        return exec_body(c, f, &n->body);
    default:
        jj_fail(c, TS_ERR_INTERNAL, "node kind %d is not a statement", n->kind);
    }
}

static flow exec_body(jj_ctx *c, jj_frame *f, const jj_nodes *body) {
    for (int i = 0; i < body->n; i++) {
        flow fl = exec_stmt(c, f, body->v[i]);
        if (fl != FLOW_NEXT) {
            return fl;
        }
    }
    return FLOW_NEXT;
}

/* caller(args) inside a macro invoked by a call block: renders the block's body in the
 * scope the call block sits in, with the block's own parameters bound. */
jj_value jj_call_caller(jj_ctx *c, jj_func *fn, const jj_args *args) {
    jj_func m = *fn;
    m.caller = (jj_value){.type = JJ_UNDEF};
    return jj_call_macro(c, &m, args);
}

void jj_exec_template(jj_ctx *c, const jj_nodes *body) {
    jj_frame *root = frame_new(c, NULL);
    exec_body(c, root, body);
}
