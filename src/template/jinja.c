/*
 * jinja.c — the engine's public functions (jinja.h): compile, render, free.
 *
 * Both entry points own an arena and a jmp_buf; everything below them allocates from the
 * arena and fails by longjmp back here with the message already in err (see
 * jinja_internal.h). A compiled template is immutable, so one may be rendered from several
 * threads at once; each render has its own arena.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/jinja_internal.h"

#include "util/stop.h"

/* Defaults (jinja.h, docs/templates.md). Real chat templates render a conversation in well
 * under a millisecond and a few hundred KiB; these stop a hostile one within seconds and
 * under 256 MiB, whichever limit it runs into first. */
#define DEFAULT_MAX_OUTPUT ((size_t)4 << 20)
#define DEFAULT_MAX_STEPS  UINT64_C(50000000)
#define DEFAULT_MAX_DEPTH  128
#define DEFAULT_MAX_WORK   UINT64_C(1000000000)
#define DEFAULT_MAX_MEMORY ((size_t)224 << 20)
#define DEFAULT_TIME_NS    (INT64_C(5) * 1000000000)

/* Compile bounds: the source size and what its tree may hold (tokens while they live, then
 * nodes and constants). Real templates are under 100 KiB. */
#define MAX_SOURCE         ((size_t)2 << 20)
#define MAX_COMPILE_MEMORY ((size_t)256 << 20)

void jj_compile_fail(jj_arena *a, ts_status st, int line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ts_error_set(a->err, st, "template:%d: %s", line, msg);
    jj_arena_fail(a);
}

/* jinja2 reads "\r\n" and "\r" as "\n" and drops one trailing newline. */
static char *normalize(jj_arena *a, const char *src, size_t len, size_t *out_len) {
    char *s = jj_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') {
                i++;
            }
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n') {
        n--;
    }
    s[n] = 0;
    *out_len = n;
    return s;
}

static ts_status compile(const char *src, size_t len, const ts_tpl_options *opt, ts_tpl **out,
                         ts_error *err) {
    ts_tpl *t = calloc(1, sizeof(*t));
    if (!t) {
        return ts_error_set(err, TS_ERR_NOMEM, "template: out of memory");
    }
    jmp_buf jmp;
    jj_arena_init(&t->arena, MAX_COMPILE_MEMORY, &jmp, err);
    t->arena.limit_name = "the compile memory limit";
    if (setjmp(jmp)) {
        jj_arena_free(&t->arena);
        free(t);
        return err->status;
    }
    size_t n;
    char *s = normalize(&t->arena, src, len, &n);
    jj_tok *toks;
    size_t n_toks;
    jj_lex(&t->arena, s, n, !(opt && opt->no_trim_blocks), !(opt && opt->no_lstrip_blocks), &toks,
           &n_toks);
    jj_parse(&t->arena, toks, n_toks, &t->body);
    /* The nodes keep no pointer into the tokens (their text points into s or the arena). */
    free(t->arena.scratch);
    t->arena.used_total -= t->arena.scratch_size;
    t->arena.scratch = NULL;
    t->arena.scratch_size = 0;
    t->src = s;
    t->src_n = n;
    t->trim_blocks = !(opt && opt->no_trim_blocks);
    t->lstrip_blocks = !(opt && opt->no_lstrip_blocks);
    t->arena.fail_jmp = NULL;
    t->arena.err = NULL;
    *out = t;
    return TS_OK;
}

ts_status ts_tpl_compile(const char *src, size_t len, ts_tpl **out, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    if (!out || (!src && len)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "template: NULL source or output");
    }
    *out = NULL;
    if (len > MAX_SOURCE) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "template: source of %zu bytes exceeds the limit of %zu bytes", len,
                            MAX_SOURCE);
    }
    /* A NUL byte would silently cut the template wherever it is later read as a C string
     * (and jinja2 reads it as text): refuse it, saying where it is. */
    const char *nul = len ? memchr(src, 0, len) : NULL;
    if (nul) {
        int line = 1;
        for (const char *p = src; p < nul; p++) {
            line += *p == '\n';
        }
        return ts_error_set(err, TS_ERR_FORMAT, "template:%d: NUL byte at offset %zu", line,
                            (size_t)(nul - src));
    }
    return compile(src ? src : "", len, NULL, out, err);
}

void ts_tpl_free(ts_tpl *t) {
    if (!t) {
        return;
    }
    jj_arena_free(&t->arena);
    free(t);
}

static ts_status render(const ts_tpl *t, const char *vars_json, size_t vars_len,
                        const ts_tpl_options *opt, char **out, size_t *out_len, ts_error *err) {
    ts_tpl_options o = opt ? *opt : (ts_tpl_options){0};
    /* Whitespace control is decided by the lexer: other settings than the compiled ones
     * need the template compiled again with them (a private copy, freed below). */
    if (!o.no_trim_blocks != t->trim_blocks || !o.no_lstrip_blocks != t->lstrip_blocks) {
        ts_tpl *variant;
        ts_status st = compile(t->src, t->src_n, &o, &variant, err);
        if (st != TS_OK) {
            return st;
        }
        st = render(variant, vars_json, vars_len, opt, out, out_len, err);
        ts_tpl_free(variant);
        return st;
    }
    jj_ctx c = {
        .err = err,
        .max_output = o.max_output ? o.max_output : DEFAULT_MAX_OUTPUT,
        .max_steps = o.max_steps ? o.max_steps : DEFAULT_MAX_STEPS,
        .max_depth = o.max_depth > 0 ? o.max_depth : DEFAULT_MAX_DEPTH,
        .now = o.now ? o.now : (int64_t)time(NULL),
        .next_stop_check = 4096,
    };
    /* The wall-clock budget: the caller's deadline, or the default one when it gives none
     * (its cancel callback is kept either way). */
    ts_stop stop = o.stop ? *o.stop : (ts_stop){0};
    if (stop.deadline_ns == 0) {
        stop.deadline_ns = ts_now_ns() + DEFAULT_TIME_NS;
    }
    jj_arena arena;
    jmp_buf jmp;
    jj_arena_init(&arena, o.max_memory ? o.max_memory : DEFAULT_MAX_MEMORY, &jmp, err);
    arena.max_string = c.max_output;
    arena.line = &c.line;
    arena.max_work = o.max_work ? o.max_work : DEFAULT_MAX_WORK;
    arena.stop = &stop;
    c.arena = &arena;
    char stack_anchor;
    c.stack_base = (uintptr_t)&stack_anchor;
    if (setjmp(jmp)) {
        jj_arena_free(&arena);
        return err->status;
    }
    jj_value vars = vars_len ? jj_json_parse(&c, vars_json, vars_len) : jj_new_dict(&c, 0);
    if (vars.type != JJ_DICT) {
        jj_arena_free(&arena);
        return ts_error_set(err, TS_ERR_FORMAT, "vars: the variables must be a JSON object");
    }
    c.vars = vars.d;
    ts_buf result;
    jj_buf_init(&result, &arena);
    c.out = &result;
    jj_exec_template(&c, &t->body);
    char *text = malloc(result.n + 1);
    if (!text) {
        jj_arena_free(&arena);
        return ts_error_set(err, TS_ERR_NOMEM, "template: out of memory (%zu bytes)", result.n + 1);
    }
    if (result.n) {
        memcpy(text, result.p, result.n);
    }
    text[result.n] = 0;
    jj_arena_free(&arena);
    *out = text;
    if (out_len) {
        *out_len = result.n;
    }
    ts_error_clear(err);
    return TS_OK;
}

ts_status ts_tpl_render(const ts_tpl *t, const char *vars_json, size_t vars_len,
                        const ts_tpl_options *opt, char **out, size_t *out_len, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    if (!t || !out || (!vars_json && vars_len)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "template: NULL template or output");
    }
    *out = NULL;
    if (out_len) {
        *out_len = 0;
    }
    return render(t, vars_json ? vars_json : "", vars_len, opt, out, out_len, err);
}
