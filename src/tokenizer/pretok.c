/*
 * pretok.c — pre-tokenizers: the regexes that cut text into words before BPE merging.
 *
 * Each `tokenizer.ggml.pre` value names a list of regexes (the facts of each model's
 * tokenizer.json). They are applied in order: the first splits the text, every later one
 * splits each piece the previous one produced, and both the matches and the text between
 * matches become pieces. Zero-width matches only cut. The patterns run on PCRE2 with UTF and
 * UCP (Unicode properties for \s, \p{..}, case folding) and PCRE2_MATCH_INVALID_UTF, so
 * invalid UTF-8 never matches a class and ends up in pieces of its own instead of failing.
 * Non-ASCII characters in the patterns are written as \\x{...} so that no editor or tool can
 * silently normalise them (several are canonically equivalent to other code points).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

/* GPT-2's ByteLevel pattern, shared by many models. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Llama 3 (tiktoken cl100k style): digits in groups of up to three. */
#define RE_LLAMA3                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 2: like Llama 3 but every digit alone. */
#define RE_QWEN2                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"      \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
/* Upper/lower-case aware word pattern of Tekken and GPT-4o. */
#define RE_UPPER       "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER       "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)"

typedef struct pretok_def {
    const char *names; /* '|'-separated names that select it */
    bool ignore_merges;
    bool add_bos; /* default for add_bos_token when the file does not say */
    bool no_bos;  /* the vocabulary has no usable bos (ChatGLM) */
    const char *regex[TOK_MAX_REGEX];
} pretok_def;

static const pretok_def k_pretoks[] = {
    {"default",
     false,
     false,
     false,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|dbrx|smaug-bpe",
     true,
     true,
     false,
     {RE_LLAMA3}},
    {"deepseek-llm",
     false,
     false,
     false,
     {"[\r\n]",
      "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
      "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
      "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
      "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
      "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-"
      "\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
      "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
      "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
      "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
      "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
      "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
      "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
      "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-"
      "\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
      "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}"
      "-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
      "\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}+"}},
    {"deepseek-coder",
     false,
     false,
     false,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
      "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense",
     false,
     false,
     false,
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", false, false, false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
     false,
     false,
     false,
     {"\\p{N}", RE_GPT2}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|"
     "roberta-bpe|a.x-4.0|mellum|exaone4|mpt|olmo|jais|trillion|granite-docling",
     false,
     false,
     false,
     {RE_GPT2}},
    {"qwen2|deepseek-r1-qwen|megrez|kormo|stablelm2|hunyuan", false, false, false, {RE_QWEN2}},
    {"poro-chat|bloom|gpt3-finnish", false, false, false, {RE_BLOOM}},
    {"chatglm-bpe|glm4", false, false, true, {RE_LLAMA3}},
    {"viking", false, false, false, {RE_BLOOM, "\\p{N}"}},
    {"tekken",
     true,
     true,
     false,
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER
      "+" RE_LOWER "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"chameleon",
     false,
     true,
     false,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2}},
    {"gpt-4o|llama4|minimax-m2",
     false,
     false,
     false,
     {"[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTRACTION
      "?|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*" RE_CONTRACTION
      "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"superbpe", false, false, false, {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}},
    {"bailingmoe|bailingmoe2|llada-moe",
     false,
     false,
     false,
     {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"seed-coder",
     false,
     false,
     false,
     {RE_CONTRACTION "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
};

/* True when `name` is one of the '|'-separated entries of `names`. */
static bool name_in(const char *names, const char *name) {
    size_t n = strlen(name);
    const char *p = names;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) {
            return true;
        }
        if (bar == NULL) {
            return false;
        }
        p = bar + 1;
    }
}

ts_status tok_pretok_init(ts_tokenizer *t, const char *name, ts_error *err) {
    const pretok_def *def = NULL;
    for (size_t i = 0; i < sizeof k_pretoks / sizeof k_pretoks[0]; i++) {
        if (name_in(k_pretoks[i].names, name)) {
            def = &k_pretoks[i];
            break;
        }
    }
    if (def == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "tokenizer: unknown pre-tokenizer '%s' (tokenizer.ggml.pre); "
                            "see docs/tokenizer.md for the supported names",
                            name);
    }
    t->ignore_merges = def->ignore_merges;
    t->sp.add_bos = def->add_bos;
    if (def->no_bos) {
        t->sp.bos = TS_TOKEN_NULL;
    }
    for (size_t i = 0; i < TOK_MAX_REGEX && def->regex[i] != NULL; i++) {
        int code = 0;
        PCRE2_SIZE at = 0;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)def->regex[i], PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
        if (re == NULL) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(code, msg, sizeof msg);
            return ts_error_set(err, TS_ERR_INTERNAL,
                                "tokenizer: pre-tokenizer '%s' regex %zu does not compile at "
                                "offset %zu: %s",
                                name, i, (size_t)at, (const char *)msg);
        }
        /* JIT is an optimisation: when it is unavailable the interpreter runs the pattern. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        t->regex[t->n_regex++] = re;
    }
    return TS_OK;
}

void tok_pretok_free(ts_tokenizer *t) {
    for (size_t i = 0; i < t->n_regex; i++) {
        pcre2_code_free(t->regex[i]);
        t->regex[i] = NULL;
    }
    t->n_regex = 0;
}

static ts_status spans_push(tok_spans *s, size_t off, size_t len, ts_error *err) {
    if (len == 0) {
        return TS_OK;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tok_span *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu text pieces", cap);
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->n++;
    return TS_OK;
}

typedef struct split_ctx {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
} split_ctx;

/* Splits text[base, base + len) with one regex, appending pieces (absolute offsets). */
static ts_status split_one(const pcre2_code *re, const split_ctx *c, const char *text, size_t base,
                           size_t len, tok_spans *out, ts_error *err) {
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + base);
    size_t pos = 0, last = 0;
    uint32_t opts = 0;
    ts_status st;
    while (pos <= len) {
        int rc = pcre2_match(re, subj, len, pos, opts, c->md, c->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (opts == 0) {
                break;
            }
            /* No non-empty match where the empty one was: step over one character. */
            opts = 0;
            uint32_t cp;
            size_t step = pos < len ? ts_utf8_decode(text + base + pos, len - pos, &cp) : 1;
            pos += step ? step : 1;
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ts_error_set(err,
                                rc == PCRE2_ERROR_JIT_STACKLIMIT ? TS_ERR_LIMIT : TS_ERR_INTERNAL,
                                "tokenizer: pre-tokenizer regex failed at byte %zu: %s", base + pos,
                                (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t s = ov[0], e = ov[1];
        if (s > last && (st = spans_push(out, base + last, s - last, err)) != TS_OK) {
            return st;
        }
        if (e > s && (st = spans_push(out, base + s, e - s, err)) != TS_OK) {
            return st;
        }
        if (e > last) {
            last = e;
        }
        pos = e;
        opts = e == s ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    }
    if (last < len) {
        return spans_push(out, base + last, len - last, err);
    }
    return TS_OK;
}

ts_status tok_pretok_split(const ts_tokenizer *t, const char *text, size_t len, tok_spans *out,
                           ts_error *err) {
    out->n = 0;
    ts_status st = spans_push(out, 0, len, err);
    if (st != TS_OK || t->n_regex == 0) {
        return st;
    }
    split_ctx c = {0};
    tok_spans next = {0};
    c.md = pcre2_match_data_create(32, NULL);
    c.mctx = pcre2_match_context_create(NULL);
    c.jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (c.md == NULL || c.mctx == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for regex match data");
        goto done;
    }
    if (c.jit != NULL) {
        pcre2_jit_stack_assign(c.mctx, NULL, c.jit);
    }
    for (size_t r = 0; r < t->n_regex; r++) {
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            st = split_one(t->regex[r], &c, text, out->v[i].off, out->v[i].len, &next, err);
            if (st != TS_OK) {
                goto done;
            }
        }
        tok_spans tmp = *out;
        *out = next;
        next = tmp;
    }
done:
    free(next.v);
    pcre2_jit_stack_free(c.jit);
    pcre2_match_context_free(c.mctx);
    pcre2_match_data_free(c.md);
    return st;
}
