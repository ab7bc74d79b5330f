/*
 * jinja_lex.c — template source to tokens, with jinja2's whitespace control.
 *
 * The source arrives with its newlines normalized to "\n" and one trailing newline removed
 * (jinja.c does it, as jinja2 does with keep_trailing_newline off). Text between tags becomes
 * TK_DATA; a tag's start and end become TK_VAR_* / TK_BLOCK_* with the expression tokens in
 * between; comments vanish and raw blocks become TK_DATA.
 *
 * Whitespace, as jinja2's lexer does it:
 *   - a "-" after a tag's start ({%- {{- {#-) strips all whitespace before the tag;
 *   - a "-" before a tag's end (-%} -}} -#}) strips all whitespace after it;
 *   - trim_blocks: the first newline after a block or comment end (%} #}) is dropped, unless
 *     the end is written +%};
 *   - lstrip_blocks: spaces and tabs between the start of a line and a block or comment tag
 *     are dropped, unless the tag starts {%+ (never for {{ ).
 * Inside a tag, "}}" / "%}" end it only when brackets are balanced ({'a': {'b': 1}}).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

typedef struct lexer {
    jj_arena *a;
    const char *s;
    size_t n, pos;
    int line;
    int trim, lstrip;
    bool line_starting; /* the previous match ended with a newline (or nothing came yet) */
    jj_tok *toks;
    size_t n_toks, cap;
} lexer;

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        k += s[i] == '\n';
    }
    return k;
}

static jj_tok *emit(lexer *L, int type, int line) {
    if (L->n_toks == L->cap) {
        /* The tokens live in the arena's scratch block, grown in place and freed once the
         * parser is done: a template's nodes stay, its tokens do not. They count toward the
         * compile memory limit while they live. */
        jj_arena *a = L->a;
        size_t cap = L->cap ? L->cap * 2 : 256;
        size_t bytes = cap * sizeof(jj_tok);
        if (a->limit && a->used_total + bytes > a->limit) {
            jj_compile_fail(a, TS_ERR_LIMIT, line,
                            "the template has too many tokens (%zu) for the compile memory "
                            "limit of %zu bytes",
                            L->n_toks, a->limit);
        }
        jj_tok *t = realloc(a->scratch, bytes);
        if (!t) {
            jj_compile_fail(a, TS_ERR_NOMEM, line, "out of memory (%zu bytes of tokens)", bytes);
        }
        a->used_total += bytes - a->scratch_size;
        a->scratch = t;
        a->scratch_size = bytes;
        L->toks = t;
        L->cap = cap;
    }
    jj_tok *t = &L->toks[L->n_toks++];
    memset(t, 0, sizeof(*t));
    t->type = (uint8_t)type;
    t->line = line;
    return t;
}

static bool starts(const lexer *L, size_t pos, const char *lit) {
    size_t k = strlen(lit);
    return pos + k <= L->n && memcmp(L->s + pos, lit, k) == 0;
}

/* Emits the text [from, to) as data, applying the strip sign of the tag that follows it. */
static void emit_text(lexer *L, size_t from, size_t to, char sign, bool is_var) {
    size_t end = to;
    if (sign == '-') {
        while (end > from && is_ws(L->s[end - 1])) {
            end--;
        }
    } else if (sign != '+' && L->lstrip && !is_var) {
        size_t l_pos = to;
        while (l_pos > from && L->s[l_pos - 1] != '\n') {
            l_pos--;
        }
        if (l_pos > from || L->line_starting) {
            bool all_ws = l_pos < to;
            for (size_t i = l_pos; i < to && all_ws; i++) {
                all_ws = is_ws(L->s[i]);
            }
            if (all_ws) {
                end = l_pos;
            }
        }
    }
    if (end > from) {
        jj_tok *t = emit(L, TK_DATA, L->line);
        t->s = L->s + from;
        t->n = end - from;
    }
    L->line += count_nl(L->s + from, to - from);
}

/* After a block or comment end: "+" keeps everything, "-" strips all whitespace, otherwise
 * trim_blocks drops one newline. Sets line_starting. */
static void after_end(lexer *L, char sign, bool trim_ok) {
    size_t start = L->pos;
    if (sign == '-') {
        while (L->pos < L->n && is_ws(L->s[L->pos])) {
            L->pos++;
        }
    } else if (sign != '+' && trim_ok && L->trim && L->pos < L->n && L->s[L->pos] == '\n') {
        L->pos++;
    }
    L->line += count_nl(L->s + start, L->pos - start);
    L->line_starting = L->pos > start ? L->s[L->pos - 1] == '\n' : false;
}

static void lex_comment(lexer *L) {
    int line = L->line;
    for (size_t i = L->pos; i + 1 < L->n; i++) {
        char sign = 0;
        if ((L->s[i] == '-' || L->s[i] == '+') && starts(L, i + 1, "#}")) {
            sign = L->s[i];
        } else if (!starts(L, i, "#}")) {
            continue;
        }
        L->line += count_nl(L->s + L->pos, i - L->pos);
        L->pos = i + (sign ? 3 : 2);
        after_end(L, sign, true);
        return;
    }
    jj_compile_fail(L->a, TS_ERR_FORMAT, line, "missing end of comment tag");
}

/* At pos (just after "{%" and its sign): "\s*raw\s*(-%}|%})"? Returns the position after it. */
static size_t match_word_tag(const lexer *L, size_t pos, const char *word, char *end_sign) {
    while (pos < L->n && is_ws(L->s[pos])) {
        pos++;
    }
    size_t k = strlen(word);
    if (pos + k > L->n || memcmp(L->s + pos, word, k) != 0) {
        return 0;
    }
    pos += k;
    if (pos < L->n && (isalnum((unsigned char)L->s[pos]) || L->s[pos] == '_')) {
        return 0;
    }
    while (pos < L->n && is_ws(L->s[pos])) {
        pos++;
    }
    *end_sign = 0;
    if (pos < L->n && (L->s[pos] == '-' || L->s[pos] == '+') && starts(L, pos + 1, "%}")) {
        *end_sign = L->s[pos];
        return pos + 3;
    }
    if (starts(L, pos, "%}")) {
        return pos + 2;
    }
    return 0;
}

static void lex_raw(lexer *L, char begin_end_sign) {
    /* jinja2's raw begin has no trim_blocks newline: only "-%}" strips after it. */
    if (begin_end_sign == '-') {
        after_end(L, '-', false);
    } else {
        L->line_starting = false;
    }
    int line = L->line;
    for (size_t i = L->pos; i + 1 < L->n; i++) {
        if (!starts(L, i, "{%")) {
            continue;
        }
        size_t p = i + 2;
        char sign = 0;
        if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) {
            sign = L->s[p++];
        }
        char end_sign;
        size_t after = match_word_tag(L, p, "endraw", &end_sign);
        if (!after) {
            continue;
        }
        emit_text(L, L->pos, i, sign, false);
        L->line += count_nl(L->s + i, after - i);
        L->pos = after;
        after_end(L, end_sign, true);
        return;
    }
    jj_compile_fail(L->a, TS_ERR_FORMAT, line, "missing end of raw directive");
}

/* Decodes a string literal's body as Python's unicode-escape does after jinja2's lexer. */
static void decode_string(lexer *L, jj_tok *t, const char *s, size_t n) {
    ts_buf b;
    jj_buf_init(&b, L->a);
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch != '\\' || i + 1 >= n) {
            ts_buf_putc(&b, ch);
            continue;
        }
        char e = s[++i];
        int hex = 0;
        switch (e) {
        case '\n':
            break;
        case '\\':
            ts_buf_putc(&b, '\\');
            break;
        case '\'':
            ts_buf_putc(&b, '\'');
            break;
        case '"':
            ts_buf_putc(&b, '"');
            break;
        case 'a':
            ts_buf_putc(&b, '\a');
            break;
        case 'b':
            ts_buf_putc(&b, '\b');
            break;
        case 'f':
            ts_buf_putc(&b, '\f');
            break;
        case 'n':
            ts_buf_putc(&b, '\n');
            break;
        case 'r':
            ts_buf_putc(&b, '\r');
            break;
        case 't':
            ts_buf_putc(&b, '\t');
            break;
        case 'v':
            ts_buf_putc(&b, '\v');
            break;
        case 'x':
            hex = 2;
            break;
        case 'u':
            hex = 4;
            break;
        case 'U':
            hex = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0;
                int k = 0;
                for (; k < 3 && i < n && s[i] >= '0' && s[i] <= '7'; k++, i++) {
                    v = v * 8 + (uint32_t)(s[i] - '0');
                }
                i--;
                jj_utf8_put(&b, v);
            } else {
                ts_buf_putc(&b, '\\');
                ts_buf_putc(&b, e);
            }
        }
        if (hex) {
            uint32_t v = 0;
            for (int k = 0; k < hex; k++) {
                char h = i + 1 + (size_t)k < n ? s[i + 1 + (size_t)k] : 0;
                if (!isxdigit((unsigned char)h)) {
                    jj_compile_fail(L->a, TS_ERR_FORMAT, L->line,
                                    "truncated \\%c escape in a string literal", e);
                }
                v = v * 16 +
                    (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
            }
            i += (size_t)hex;
            if (v > 0x10FFFF) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "escape \\U%08x is not a code point",
                                (unsigned)v);
            }
            /* Python keeps a surrogate escape as a lone surrogate, which no UTF-8 text can
             * hold: the rendered prompt could not be encoded (jinja2's caller fails there). */
            if (v >= 0xD800 && v <= 0xDFFF) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, L->line,
                                "escape \\u%04x is a lone UTF-16 surrogate, not a character",
                                (unsigned)v);
            }
            jj_utf8_put(&b, v);
        }
    }
    t->s = b.p ? b.p : "";
    t->n = b.n;
}

static const struct {
    const char *s;
    uint8_t op;
} ops[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},   {"==", OP_EQ},      {"!=", OP_NE},      {">=", OP_GE},
    {"<=", OP_LE},       {"+", OP_ADD},    {"-", OP_SUB},      {"/", OP_DIV},      {"*", OP_MUL},
    {"%", OP_MOD},       {"~", OP_TILDE},  {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"(", OP_LPAREN},
    {")", OP_RPAREN},    {"{", OP_LBRACE}, {"}", OP_RBRACE},   {">", OP_GT},       {"<", OP_LT},
    {"=", OP_ASSIGN},    {".", OP_DOT},    {":", OP_COLON},    {"|", OP_PIPE},     {",", OP_COMMA},
    {";", OP_SEMICOLON},
};

/* Lexes a number at pos: integers (decimal with "_", 0b/0o/0x) and floats. */
static void lex_number(lexer *L) {
    const char *s = L->s;
    size_t p = L->pos, n = L->n;
    char digits[128];
    size_t nd = 0;
    int base = 10;
    if (s[p] == '0' && p + 1 < n && strchr("bBoOxX", s[p + 1]) && s[p + 1]) {
        char k = (char)tolower(s[p + 1]);
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        p += 2;
    }
    bool is_float = false;
    for (; p < n; p++) {
        char ch = s[p];
        bool ok = base == 16 ? isxdigit((unsigned char)ch) : isdigit((unsigned char)ch);
        if (ch == '_' && p + 1 < n && isalnum((unsigned char)s[p + 1])) {
            continue;
        }
        if (!ok) {
            if (base == 10 && ch == '.' && !is_float && p + 1 < n &&
                isdigit((unsigned char)s[p + 1])) {
                is_float = true;
            } else if (base == 10 && (ch == 'e' || ch == 'E')) {
                size_t q = p + 1;
                if (q < n && (s[q] == '+' || s[q] == '-')) {
                    q++;
                }
                if (q >= n || !isdigit((unsigned char)s[q])) {
                    break;
                }
                is_float = true;
                if (nd + (q - p) >= sizeof(digits)) {
                    break;
                }
                for (; p < q; p++) {
                    digits[nd++] = s[p];
                }
                p--;
                continue;
            } else {
                break;
            }
        }
        if (nd + 1 >= sizeof(digits)) {
            jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "number literal too long");
        }
        digits[nd++] = ch;
    }
    digits[nd] = 0;
    jj_tok *t = emit(L, is_float ? TK_FLOAT : TK_INT, L->line);
    if (is_float) {
        t->f = strtod(digits, NULL);
    } else {
        uint64_t v = 0;
        for (size_t i = 0; i < nd; i++) {
            int d =
                isdigit((unsigned char)digits[i]) ? digits[i] - '0' : tolower(digits[i]) - 'a' + 10;
            if (v > (UINT64_C(0x7fffffffffffffff) - (uint64_t)d) / (uint64_t)base) {
                jj_compile_fail(L->a, TS_ERR_UNSUPPORTED, L->line,
                                "integer literal does not fit in 64 bits");
            }
            v = v * (uint64_t)base + (uint64_t)d;
        }
        t->i = (int64_t)v;
    }
    L->pos = p;
}

/* Lexes the inside of a tag up to its end; is_var: {{ }} rather than {% %}. */
static void lex_tag(lexer *L, bool is_var, int begin_line) {
    char stack[256];
    int depth = 0;
    for (;;) {
        if (L->pos >= L->n) {
            jj_compile_fail(L->a, TS_ERR_FORMAT, begin_line,
                            "unexpected end of template: %s tag not closed",
                            is_var ? "'{{'" : "'{%'");
        }
        const char *end = is_var ? "}}" : "%}";
        if (depth == 0) {
            char sign = 0;
            size_t p = L->pos;
            if ((L->s[p] == '-' || (!is_var && L->s[p] == '+')) && starts(L, p + 1, end)) {
                sign = L->s[p++];
            }
            if (starts(L, p, end)) {
                emit(L, is_var ? TK_VAR_END : TK_BLOCK_END, L->line);
                L->pos = p + 2;
                after_end(L, sign, !is_var);
                return;
            }
        }
        char ch = L->s[L->pos];
        if (is_ws(ch)) {
            L->line += ch == '\n';
            L->pos++;
            continue;
        }
        if (isdigit((unsigned char)ch)) {
            lex_number(L);
            continue;
        }
        if (isalpha((unsigned char)ch) || ch == '_') {
            size_t p = L->pos;
            while (p < L->n && (isalnum((unsigned char)L->s[p]) || L->s[p] == '_')) {
                p++;
            }
            jj_tok *t = emit(L, TK_NAME, L->line);
            t->s = L->s + L->pos;
            t->n = p - L->pos;
            L->pos = p;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t p = L->pos + 1;
            int line = L->line;
            while (p < L->n && L->s[p] != ch) {
                if (L->s[p] == '\\') {
                    p++;
                }
                p++;
            }
            if (p >= L->n) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, line, "unterminated string literal");
            }
            jj_tok *t = emit(L, TK_STRING, line);
            decode_string(L, t, L->s + L->pos + 1, p - L->pos - 1);
            L->line += count_nl(L->s + L->pos, p - L->pos);
            L->pos = p + 1;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof(ops) / sizeof(ops[0]); k++) {
            if (starts(L, L->pos, ops[k].s)) {
                break;
            }
        }
        if (k == sizeof(ops) / sizeof(ops[0])) {
            if ((unsigned char)ch < 0x20 || (unsigned char)ch >= 0x7f) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "unexpected byte 0x%02x in a tag",
                                (unsigned char)ch);
            }
            jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "unexpected char '%c' in a tag", ch);
        }
        uint8_t op = ops[k].op;
        if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
            if (depth == (int)sizeof(stack)) {
                jj_compile_fail(L->a, TS_ERR_LIMIT, L->line,
                                "brackets nested deeper than %d (the nesting limit)",
                                (int)sizeof(stack));
            }
            stack[depth++] = op == OP_LPAREN ? ')' : op == OP_LBRACKET ? ']' : '}';
        } else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
            if (depth == 0) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "unexpected '%c'", ch);
            }
            if (stack[depth - 1] != ch) {
                jj_compile_fail(L->a, TS_ERR_FORMAT, L->line, "unexpected '%c', expected '%c'", ch,
                                stack[depth - 1]);
            }
            depth--;
        }
        jj_tok *t = emit(L, TK_OP, L->line);
        t->op = op;
        t->s = L->s + L->pos;
        t->n = strlen(ops[k].s);
        L->pos += t->n;
    }
}

void jj_lex(jj_arena *a, const char *src, size_t len, int trim_blocks, int lstrip_blocks,
            jj_tok **toks, size_t *n_toks) {
    lexer L = {.a = a,
               .s = src,
               .n = len,
               .line = 1,
               .trim = trim_blocks,
               .lstrip = lstrip_blocks,
               .line_starting = true};
    while (L.pos < L.n) {
        /* The next tag start. */
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && strchr("{%#", L.s[t + 1]))) {
            t++;
        }
        if (t + 1 >= L.n) {
            emit_text(&L, L.pos, L.n, 0, true);
            break;
        }
        char kind = L.s[t + 1];
        size_t p = t + 2;
        char sign = 0;
        if (p < L.n && (L.s[p] == '-' || L.s[p] == '+')) {
            sign = L.s[p++];
        }
        char raw_end_sign = 0;
        size_t raw_after = kind == '%' ? match_word_tag(&L, p, "raw", &raw_end_sign) : 0;
        emit_text(&L, L.pos, t, sign, kind == '{');
        int line = L.line;
        if (raw_after) {
            L.line += count_nl(L.s + t, raw_after - t);
            L.pos = raw_after;
            lex_raw(&L, raw_end_sign);
        } else if (kind == '#') {
            L.pos = p;
            lex_comment(&L);
        } else {
            emit(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, line);
            L.pos = p;
            lex_tag(&L, kind == '{', line);
        }
    }
    emit(&L, TK_EOF, L.line);
    *toks = L.toks;
    *n_toks = L.n_toks;
}
