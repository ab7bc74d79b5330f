/*
 * jinja_internal.h — the pieces of the Jinja engine shared by its files.
 *
 * Memory: a compiled template lives in one arena (nodes, constant strings; its tokens only
 * while it is parsed); a render has its own arena for every value, scope and buffer it
 * creates, freed at once when the render ends. Nothing inside the engine is freed piecemeal, so
 * values are plain structs copied by value and shared freely (lists and dicts are mutable only
 * through namespace attributes and `set`, which rebinds names; no template can mutate a list or
 * dict).
 *
 * Errors: every failure is ts_error_set() into the caller's ts_error ("template:LINE: ..."),
 * then jj_arena_fail(), which longjmps to the public entry point (jinja.c) that owns the
 * arena; it frees the arena and returns the status. Code between a setjmp and the longjmp
 * therefore never holds malloc'd memory outside the arena (the lexer's token array is the
 * arena's scratch block, freed with it). The arena caps its total size (max_memory), counts
 * the render's work (max_work) and checks the caller's stop (cancel, deadline), so a render
 * that builds a huge string or grinds through a big one fails with TS_ERR_LIMIT instead of
 * exhausting memory or time. Text is built in util/buf.h buffers whose storage comes from
 * the arena (jj_buf_init).
 *
 * Files: jinja_lex.c (source -> tokens), jinja_parse.c (tokens -> nodes), jinja_eval.c
 * (statements and expressions, scopes, macros), jinja_value.c (strings, lists, dicts,
 * Python-style printing and comparison, Unicode), jinja_call.c (attribute access, globals,
 * dict/list/loop methods), jinja_str.c (str methods, str % args), jinja_filters.c (filters),
 * jinja_mem.c (the arena and its budgets, arena-backed buffers, hashed dicts, search),
 * jinja_check.c (unknown filters and tests at compile time), jinja_filters_num.c (int,
 * float, round),
 * jinja_tests.c (is-tests), jinja_json.c (the vars reader and tojson), jinja.c (the API).
 */
#ifndef TS_TEMPLATE_JINJA_INTERNAL_H
#define TS_TEMPLATE_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"
#include "util/buf.h"
#include "util/error.h"

#if defined(__GNUC__)
#define JJ_NORETURN __attribute__((noreturn))
#else
#define JJ_NORETURN
#endif

/* ---- arena -------------------------------------------------------------------------- */

typedef struct jj_chunk jj_chunk;
typedef struct jj_arena {
    jj_chunk *head;         /* newest chunk first */
    size_t used_total;      /* bytes handed out plus chunk overhead */
    size_t limit;           /* 0: none; reaching it fails through fail_jmp */
    const char *limit_name; /* the option or constant that set limit, for its message */
    size_t max_string; /* 0: none; a ts_buf in the arena growing past it fails (TS_ERR_LIMIT) */
    const int *line;   /* the line being rendered, for limit messages; NULL when compiling */
    jmp_buf *fail_jmp; /* where an allocation failure or the limit unwinds to */
    ts_error *err;     /* receives the failure's message */
    /* The render's work budget (0: none, as when compiling). Every byte allocated costs a
     * unit, and operations whose cost grows with their data (searching, comparing, hashing,
     * counting code points) charge what they touch through jj_work, so no single step can
     * hide unbounded work. */
    uint64_t work, max_work;
    uint64_t next_stop_check; /* work count at which stop is checked again */
    const ts_stop *stop;      /* cancel / deadline; NULL: none */
    /* A malloc'd block the arena frees with itself (the lexer's token array, which is
     * realloc'd as it grows and freed as soon as the parser is done). */
    void *scratch;
    size_t scratch_size;
} jj_arena;

void jj_arena_init(jj_arena *a, size_t limit, jmp_buf *fail_jmp, ts_error *err);
/* Unwinds to the entry point that owns the arena (fail_jmp) once the error is in a->err: every
 * failure of a compile or render is ts_error_set() and then this, so the public functions
 * return a ts_status with a "template:LINE: ..." message like the rest of the library. */
JJ_NORETURN void jj_arena_fail(jj_arena *a);
void jj_arena_free(jj_arena *a);
void *jj_alloc(jj_arena *a, size_t size); /* zeroed, 16-byte aligned; charges size as work */
/* Charges n units of work, failing past max_work ("work limit ... (max_work)"); checks the
 * stop (cancel, deadline) every JJ_STOP_EVERY units. */
void jj_arena_work(jj_arena *a, uint64_t n);
/* Checks the stop now; unwinds with its status and "template:LINE: ..." when it says stop. */
void jj_arena_check_stop(jj_arena *a);
#define JJ_STOP_EVERY (UINT64_C(1) << 20)
char *jj_strdup(jj_arena *a, const char *s, size_t n); /* NUL-terminated copy */

/* Binds a util/buf.h buffer to the arena: its storage comes from the arena (growth copies;
 * the old block stays there), and growing past max_string fails (TS_ERR_LIMIT). Such a
 * buffer is never freed on its own and never reports oom (a failure unwinds instead). */
void jj_buf_init(ts_buf *b, jj_arena *a);

/* ---- values ------------------------------------------------------------------------- */

typedef enum jj_type {
    JJ_UNDEF, /* s: how it came about (see jj_undef_*); falsy, prints "", iterates empty */
    JJ_NONE,
    JJ_BOOL,  /* i: 0 or 1 */
    JJ_INT,   /* i */
    JJ_FLOAT, /* f */
    JJ_STR,   /* s: UTF-8 bytes, not NUL-terminated */
    JJ_LIST,  /* l; flag JJ_F_TUPLE for tuples */
    JJ_DICT,  /* d: insertion-ordered */
    JJ_NS,    /* d: a namespace()'s attributes */
    JJ_FUNC,  /* fn: macro, global function, bound method */
    JJ_LOOP,  /* loop: the `loop` variable of a for statement */
} jj_type;

enum {
    JJ_F_TUPLE = 1,        /* JJ_LIST: a tuple (prints with parentheses) */
    JJ_F_SAFE = 2,         /* JJ_STR: marked safe (|safe, |escape); printing is unchanged */
    JJ_F_UNDEF_MSG = 4,    /* JJ_UNDEF: s is the whole message, not a variable name */
    JJ_F_UNDEF_UNSAFE = 8, /* JJ_UNDEF: a forbidden attribute; using it is a security error */
    JJ_F_GEN = 16          /* JJ_LIST: a generator in jinja2 (map, select, ...): always true,
                              no len(), no indexing, not JSON */
};

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_func jj_func;
typedef struct jj_loop jj_loop;

typedef struct jj_value {
    uint8_t type;  /* jj_type */
    uint8_t flags; /* JJ_F_* */
    union {
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jj_list *l;
        jj_dict *d;
        jj_func *fn;
        jj_loop *loop;
    };
} jj_value;

/* depth: 1 + the deepest item's depth, kept by jj_list_push / jj_dict_set / literals and
 * capped at JJ_MAX_VALUE_DEPTH, so printing, comparing and JSON never recurse without bound
 * (a template can nest a value in itself level by level: ns.v = [ns.v]). */
struct jj_list {
    jj_value *v;
    size_t n, cap;
    uint32_t depth;
};

/* A dict keeps its items in insertion order in keys/vals and, once it has more than
 * JJ_DICT_LINEAR items, an open-addressing index over them (slots hold item index + 1, 0 is
 * empty; index_cap is a power of two at least twice n), so inserting and finding are O(1)
 * on average however large a hostile template or request makes it. Items are never
 * removed (templates cannot mutate dicts). */
struct jj_dict {
    jj_value *keys;
    jj_value *vals;
    size_t n, cap;
    uint32_t depth;
    uint32_t *index;
    size_t index_cap;
};

#define JJ_DICT_LINEAR 8

#define JJ_MAX_VALUE_DEPTH 512

/* ---- tokens and nodes --------------------------------------------------------------- */

typedef enum jj_tok_type {
    TK_EOF,
    TK_DATA,        /* text between tags, whitespace control already applied */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_NAME,
    TK_STRING, /* text decoded (escapes resolved) */
    TK_INT,
    TK_FLOAT,
    TK_OP, /* op: one of jj_op */
} jj_tok_type;

typedef enum jj_op {
    OP_NONE,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOTIN,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMICOLON,
    OP_NOT,
    OP_NEG,
    OP_POS, /* unary, in nodes only */
} jj_op;

typedef struct jj_tok {
    uint8_t type; /* jj_tok_type */
    uint8_t op;   /* jj_op for TK_OP */
    int line;
    const char *s; /* TK_DATA / TK_NAME / TK_STRING text; arena or source */
    size_t n;
    union {
        int64_t i; /* TK_INT */
        double f;  /* TK_FLOAT */
    };
} jj_tok;

typedef struct jj_node jj_node;
typedef struct jj_nodes {
    jj_node **v;
    int n;
} jj_nodes;

/*
 * Node kinds and the fields each uses (unused fields are zero):
 *   N_CONST      v
 *   N_NAME       name
 *   N_LIST/N_TUPLE items
 *   N_DICT       items (key, value, key, value, ...)
 *   N_ATTR       a . name
 *   N_ITEM       a [ b ]
 *   N_SLICE      a [ items[0] : items[1] : items[2] ] (entries may be NULL)
 *   N_CALL       a ( items ); keyword arguments are N_KWARG items after the positional ones
 *   N_KWARG      name = a
 *   N_FILTER     a | name ( items ); a is NULL in a filter block's chain (the body's text)
 *   N_TEST       a is [not: op=1] name ( items ); fn_known: the test exists
 *   N_UNARY      op (OP_NOT/OP_NEG/OP_POS) a
 *   N_BINOP      a op b (arithmetic, ~, comparisons, in, not in)
 *   N_AND/N_OR   a, b
 *   N_COND       a if b else c (c may be NULL)
 *   S_DATA       v (a string)
 *   S_OUTPUT     a
 *   S_IF         a: condition; body; orelse (elif is an S_IF alone in orelse)
 *   S_FOR        targets: items; a: iterable; b: filter condition or NULL; body; orelse
 *   S_SET        targets: items (N_NAME, or one N_ATTR for ns.x); a: value
 *   S_SETBLOCK   name; body; b: filter chain or NULL
 *   S_MACRO      name; items: N_NAME params; defaults: items2 (aligned, NULL for none); body
 *   S_CALLBLOCK  a: the N_CALL; items/items2: caller's params and defaults; body
 *   S_FILTERBLOCK b: filter chain whose innermost a is NULL; body
 *   S_WITH       items: targets; items2: values; body
 *   S_BREAK, S_CONTINUE
 *   S_GENERATION body (rendered as is)
 */
typedef enum jj_kind {
    N_CONST,
    N_NAME,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_KWARG,
    N_FILTER,
    N_TEST,
    N_UNARY,
    N_BINOP,
    N_AND,
    N_OR,
    N_COND,
    S_DATA,
    S_OUTPUT,
    S_IF,
    S_FOR,
    S_SET,
    S_SETBLOCK,
    S_MACRO,
    S_CALLBLOCK,
    S_FILTERBLOCK,
    S_WITH,
    S_BREAK,
    S_CONTINUE,
    S_GENERATION,
} jj_kind;

struct jj_node {
    uint8_t kind;     /* jj_kind */
    uint8_t op;       /* jj_op, or the negation of N_TEST */
    uint8_t fn_known; /* N_FILTER / N_TEST: the name exists (else a runtime error) */
    int line;
    jj_node *a, *b, *c;
    jj_nodes items, items2;
    jj_nodes body, orelse;
    /* No node kind uses both a constant and a name: sharing their room keeps a node at 128
     * bytes in the arena (a 2 MiB template of literals makes a million of them). */
    union {
        jj_value v;
        struct {
            const char *name;
            size_t name_n;
        };
    };
};
_Static_assert(sizeof(jj_node) <= 128, "jj_node grew past two arena granules of 64 bytes");

struct ts_tpl {
    jj_arena arena;  /* everything below lives here */
    jj_nodes body;   /* the top-level statements */
    const char *src; /* the normalized source, to compile again with other whitespace options */
    size_t src_n;
    bool trim_blocks, lstrip_blocks; /* the settings body was compiled with */
};

/* Fails a compile with "template:LINE: " + message, unwinding via a->fail_jmp. */
JJ_NORETURN void jj_compile_fail(jj_arena *a, ts_status st, int line, const char *fmt, ...)
    TS_PRINTF(4, 5);

/* Lexes src (newlines already normalized) into *toks; errors unwind via arena->fail_jmp. */
void jj_lex(jj_arena *a, const char *src, size_t len, int trim_blocks, int lstrip_blocks,
            jj_tok **toks, size_t *n_toks);
/* Parses tokens into a statement list. */
void jj_parse(jj_arena *a, const jj_tok *toks, size_t n_toks, jj_nodes *body);
/* Fails the compile at an unknown filter or test outside a soft scope (jinja_check.c). */
void jj_check_unknown(jj_arena *a, const jj_nodes *body);

/* Whether a filter / test of that name exists (jinja_filters.c, jinja_tests.c). */
bool jj_filter_exists(const char *name, size_t n);
bool jj_test_exists(const char *name, size_t n);

/* ---- rendering ---------------------------------------------------------------------- */

/* A scope: names bound by set, for, macro parameters. Its names are a dict of string keys
 * (hashed), so a template with 100k distinct set names stays linear. */
typedef struct jj_frame jj_frame;
struct jj_frame {
    jj_frame *parent; /* NULL: the template's globals come next */
    jj_dict names;    /* name (JJ_STR) -> value */
    bool captured;    /* a macro or caller() closes over this scope or one inside it */
};

typedef struct jj_ctx {
    jj_arena *arena;
    ts_error *err;
    ts_buf *out; /* where output goes now (the result, or a capture) */
    size_t max_output;
    uint64_t steps, max_steps;
    uint64_t next_stop_check; /* step count at which the stop is checked again */
    int depth, max_depth;
    int64_t now;
    jj_dict *vars;        /* the render's variables */
    int line;             /* line of the node being evaluated, for messages */
    uintptr_t stack_base; /* address of a local at the render's start (see jj_enter) */
} jj_ctx;

/* Unwinds with status and "template:LINE: " + message. */
JJ_NORETURN void jj_fail(jj_ctx *c, ts_status st, const char *fmt, ...) TS_PRINTF(3, 4);
void jj_step(jj_ctx *c, uint64_t n);
/* Charges n units of work (see jj_arena). */
static inline void jj_work(jj_ctx *c, uint64_t n) {
    jj_arena_work(c->arena, n);
}
void jj_enter(jj_ctx *c); /* nesting depth +1, failing past max_depth */
void jj_leave(jj_ctx *c);

/* Value constructors. */
static inline jj_value jj_none(void) {
    return (jj_value){.type = JJ_NONE};
}
static inline jj_value jj_bool(bool b) {
    return (jj_value){.type = JJ_BOOL, .i = b};
}
static inline jj_value jj_int(int64_t i) {
    return (jj_value){.type = JJ_INT, .i = i};
}
static inline jj_value jj_float(double f) {
    return (jj_value){.type = JJ_FLOAT, .f = f};
}
static inline jj_value jj_str(const char *p, size_t n) {
    return (jj_value){.type = JJ_STR, .s = {p, n}};
}
jj_value jj_cstr(const char *s);
jj_value jj_undef(const char *name, size_t n);                          /* "'name' is undefined" */
jj_value jj_undef_msg(jj_ctx *c, const char *fmt, ...) TS_PRINTF(2, 3); /* whole message */
jj_value jj_new_list(jj_ctx *c, size_t cap);
jj_value jj_new_dict(jj_ctx *c, size_t cap);
void jj_list_push(jj_ctx *c, jj_list *l, jj_value v);
/* Raises depth for an item of value v, failing past JJ_MAX_VALUE_DEPTH. */
void jj_note_depth(jj_ctx *c, uint32_t *depth, jj_value v);
void jj_dict_set(jj_ctx *c, jj_dict *d, jj_value k, jj_value v);
jj_value *jj_dict_get(const jj_dict *d, const char *key, size_t n); /* NULL if absent */
jj_value *jj_dict_find(jj_ctx *c, const jj_dict *d, jj_value key);  /* NULL if absent */

/* Python semantics. */
bool jj_truthy(jj_value v);
bool jj_equal(jj_ctx *c, jj_value a, jj_value b); /* charges the bytes and items compared */
int jj_compare(jj_ctx *c, jj_value a, jj_value b, const char *op); /* <0, 0, >0; TypeError */
const char *jj_type_name(jj_value v); /* Python's: 'str', 'int', 'list', 'dict', ... */
void jj_undef_fail(jj_ctx *c, jj_value u) JJ_NORETURN;
/* str(v) appended to b (strings raw, the rest as Python prints them). */
void jj_str_to(jj_ctx *c, ts_buf *b, jj_value v);
void jj_repr_to(jj_ctx *c, ts_buf *b, jj_value v);
jj_value jj_to_str(jj_ctx *c, jj_value v);  /* str(v) as a string value */
void jj_float_repr(double f, char out[40]); /* Python's repr(float) */
/* Iteration: the items of a list, the keys of a dict, the characters of a string; an
 * undefined is empty; anything else is a TypeError. */
jj_value jj_iterate(jj_ctx *c, jj_value v);
/* Length in code points for strings, items otherwise. */
int64_t jj_length(jj_ctx *c, jj_value v);
/* Code points in s (each invalid byte counts as one) / byte offset of code point cp; both
 * charge the bytes they walk as work. */
size_t jj_utf8_count(jj_ctx *c, const char *s, size_t n);
size_t jj_utf8_offset(jj_ctx *c, const char *s, size_t n, int64_t cp);
bool jj_str_eq(jj_value v, const char *s);
/* The first (or, from_right, the last) occurrence of nd in h, or NULL; an empty needle is
 * found at the start (end). Charges the bytes scanned and compared as work. */
const char *jj_search(jj_ctx *c, const char *h, size_t hn, const char *nd, size_t nn,
                      bool from_right);

/* Attribute / item access as jinja2's sandboxed getattr / getitem. */
jj_value jj_getattr(jj_ctx *c, jj_value obj, const char *name, size_t n);
jj_value jj_getitem(jj_ctx *c, jj_value obj, jj_value key);

/* Calls: positional args, then keyword args (names aligned with values). */
typedef struct jj_args {
    jj_value *pos;
    int n_pos;
    const char **kw_names;
    size_t *kw_n;
    jj_value *kw;
    int n_kw;
} jj_args;

/* Looks up a keyword argument or the positional at index (-1: keyword only); NULL if none. */
jj_value *jj_arg(const jj_args *a, int index, const char *name);
void jj_args_check(jj_ctx *c, const jj_args *a, const char *fname, int max_pos,
                   const char *const *kw_allowed);

struct jj_func {
    int kind;         /* JJ_FN_* */
    const char *name; /* global or method name */
    size_t name_n;
    jj_value self;        /* bound methods */
    const jj_node *macro; /* JJ_FN_MACRO / JJ_FN_CALLER */
    jj_frame *closure;    /* scope where the macro was defined */
    jj_value caller;      /* JJ_FN_MACRO called from a call block: its caller() */
};

enum { JJ_FN_GLOBAL, JJ_FN_METHOD, JJ_FN_MACRO, JJ_FN_CALLER };

struct jj_loop {
    jj_list *items;
    size_t index0;
    jj_value changed_last; /* loop.changed(): the values of its previous call */
};

/* Calls fn (a macro, caller, global or bound method); anything else is a TypeError. */
jj_value jj_call(jj_ctx *c, jj_value fn, const jj_args *args);
jj_value jj_global(jj_ctx *c, const char *name, size_t n); /* builtin globals or undefined */
jj_value jj_call_macro(jj_ctx *c, jj_func *fn, const jj_args *args);
jj_value jj_call_caller(jj_ctx *c, jj_func *fn, const jj_args *args);
/* Renders a compiled body at the top level (jinja_eval.c). */
void jj_exec_template(jj_ctx *c, const jj_nodes *body);
/* str % args, Python's printf-style formatting (jinja_str.c). */
jj_value jj_format_percent(jj_ctx *c, jj_value fmt, jj_value args);

/* An integer argument of a filter (default when absent or none; a TypeError otherwise). */
int64_t jj_int_arg(jj_ctx *c, const jj_value *v, int64_t dflt, const char *what);
/* The int, float and round filters (jinja_filters_num.c). */
jj_value jj_filter_int(jj_ctx *c, jj_value v, const jj_args *a);
jj_value jj_filter_float(jj_ctx *c, jj_value v, const jj_args *a);
jj_value jj_filter_round(jj_ctx *c, jj_value v, const jj_args *a);

/* Applies filter `name` to v / runs test `name` on v, with the call's arguments. */
jj_value jj_filter(jj_ctx *c, const char *name, size_t n, jj_value v, const jj_args *args);
bool jj_test(jj_ctx *c, const char *name, size_t n, jj_value v, const jj_args *args);

/* String operations shared by methods and filters (jinja_str.c). */
jj_value jj_str_method(jj_ctx *c, jj_value s, const char *name, size_t n, const jj_args *a);
/* chars: str or none; charges what it tests as work */
jj_value jj_strip(jj_ctx *c, jj_value s, jj_value chars, bool left, bool right);
jj_value jj_case(jj_ctx *c, jj_value s, char mode); /* 'u' 'l' 's' 'c' 't' */
jj_value jj_replace(jj_ctx *c, jj_value s, jj_value old, jj_value new, int64_t count);
/* markupsafe's escape: & < > " ' as entities; a safe string is returned as is. */
jj_value jj_html_escape(jj_ctx *c, jj_value v);
jj_value jj_split_value(jj_ctx *c, jj_value s, jj_value sep, int64_t maxsplit);

/* Parses strict JSON (RFC 8259) into values: integers that fit int64 stay integers, other
 * numbers are floats, object keys keep their order (a repeated key keeps its first place and
 * its last value, as Python's json does). Errors: TS_ERR_FORMAT "vars: JSON offset N: ...". */
jj_value jj_json_parse(jj_ctx *c, const char *s, size_t n);
/* Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys) appended to b. */
void jj_json_dump(jj_ctx *c, ts_buf *b, jj_value v, const char *indent, size_t indent_n,
                  bool indent_set, const char *item_sep, const char *key_sep, bool sort_keys,
                  bool ensure_ascii);

/* Evaluates an expression node (jinja_eval.c). */
jj_value jj_eval(jj_ctx *c, jj_frame *f, const jj_node *n);

/* Unicode helpers (jinja_value.c). */
uint32_t jj_utf8_decode(const char *s, size_t n, size_t *adv);
void jj_utf8_put(ts_buf *b, uint32_t cp);
bool jj_is_space(uint32_t cp);
uint32_t jj_upper(uint32_t cp);
uint32_t jj_lower(uint32_t cp);
bool jj_is_alpha(uint32_t cp);
bool jj_is_digit(uint32_t cp);

#endif /* TS_TEMPLATE_JINJA_INTERNAL_H */
