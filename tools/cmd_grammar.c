/*
 * cmd_grammar.c — `tessera grammar bench`: MaskBench (github guidance-ai/jsonschemabench,
 * maskbench/data) against a model's vocabulary.
 *
 * Each file is {"schema": {...}, "tests": [{"data": ..., "valid": bool}, ...], ...}. The schema
 * is compiled (ts_constraint_create: JSON Schema -> grammar -> matcher; its time is ttfm_us).
 * Each test instance is written compactly (its own text with the whitespace between tokens
 * removed, so numbers keep their spelling; strings re-encoded as JSON encoders write them:
 * only '"', '\\' and control characters escaped), tokenized without special tokens, and fed
 * token by token from a fresh matcher: before each token its mask is computed (timed) and the
 * token must be in it; at the end the matcher must be accepting. An instance accepted that way
 * counts as valid_ok when the file says it is valid and invalid_fail when it says it is not
 * (the grammar let through a document the schema rejects); a rejected one as valid_fail or
 * invalid_ok. A file passes when it compiles and has no *_fail.
 *
 * Output: one JSON object per file on stdout, then a summary object on stderr (schemas passing,
 * invalid instances accepted, mask and compile percentiles).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "common.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tessera grammar bench -m MODEL --json FILE... [--no-mask-list]\n\n"
               "  -m, --model FILE   the vocabulary to compute masks over (only the tokenizer is "
               "read)\n"
               "  --json FILE...     MaskBench files ({\"schema\":..., \"tests\":[{\"data\":..., "
               "\"valid\":b}]})\n"
               "  --no-mask-list     print mask_us as summary statistics instead of every "
               "mask's time\n\n"
               "Prints one JSON object per file (file, compile_error, ttfm_us, valid_ok, "
               "valid_fail,\ninvalid_ok, invalid_fail, mask_us) and a summary on stderr.\n");
}

/* ---- growable arrays ---------------------------------------------------------------------- */

typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec;

static bool dvec_push(dvec *d, double x) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        double *v = realloc(d->v, cap * sizeof *v);
        if (v == NULL) {
            return false;
        }
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static double pct(const dvec *d, double p) {
    if (d->n == 0) {
        return 0;
    }
    size_t k = (size_t)(p / 100.0 * (double)d->n);
    return d->v[k < d->n ? k : d->n - 1];
}

/* ---- the raw text of the test instances --------------------------------------------------- */

typedef struct scan {
    const char *p, *end;
} scan;

static void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
        s->p++;
    }
}

/* Skips a string starting at '"'; false when unterminated. */
static bool skip_string(scan *s) {
    s->p++;
    while (s->p < s->end && *s->p != '"') {
        s->p += *s->p == '\\' ? 2 : 1;
    }
    if (s->p >= s->end) {
        return false;
    }
    s->p++;
    return true;
}

/* Skips one value (the file already parsed as JSON, so it is well formed). */
static bool skip_value(scan *s) {
    skip_ws(s);
    if (s->p >= s->end) {
        return false;
    }
    if (*s->p == '"') {
        return skip_string(s);
    }
    if (*s->p == '{' || *s->p == '[') {
        int depth = 0;
        while (s->p < s->end) {
            char c = *s->p;
            if (c == '"') {
                if (!skip_string(s)) {
                    return false;
                }
                continue;
            }
            s->p++;
            if (c == '{' || c == '[') {
                depth++;
            } else if ((c == '}' || c == ']') && --depth == 0) {
                return true;
            }
        }
        return false;
    }
    while (s->p < s->end && *s->p != ',' && *s->p != '}' && *s->p != ']' && *s->p != ' ' &&
           *s->p != '\n' && *s->p != '\t' && *s->p != '\r') {
        s->p++;
    }
    return true;
}

/* Finds member `key` of the object at s->p; leaves s->p at its value. */
static bool find_member(scan *s, const char *key) {
    skip_ws(s);
    if (s->p >= s->end || *s->p != '{') {
        return false;
    }
    s->p++;
    size_t klen = strlen(key);
    for (;;) {
        skip_ws(s);
        if (s->p >= s->end || *s->p != '"') {
            return false;
        }
        const char *k = s->p + 1;
        if (!skip_string(s)) {
            return false;
        }
        bool match = (size_t)(s->p - 1 - k) == klen && memcmp(k, key, klen) == 0;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') {
            return false;
        }
        s->p++;
        skip_ws(s);
        if (match) {
            return true;
        }
        if (!skip_value(s)) {
            return false;
        }
        skip_ws(s);
        if (s->p >= s->end || *s->p != ',') {
            return false;
        }
        s->p++;
    }
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static unsigned read_u4(const char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        v = v * 16 + (unsigned)(h < 0 ? 0 : h);
    }
    return v;
}

static void put_utf8(char **o, unsigned cp) {
    char *q = *o;
    if (cp < 0x80) {
        *q++ = (char)cp;
    } else if (cp < 0x800) {
        *q++ = (char)(0xC0 | cp >> 6);
        *q++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *q++ = (char)(0xE0 | cp >> 12);
        *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *q++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *q++ = (char)(0xF0 | cp >> 18);
        *q++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *q++ = (char)(0x80 | (cp & 0x3F));
    }
    *o = q;
}

/* Writes the value text[0..n) compactly into out (at least 6 * n + 1 bytes): whitespace between
 * tokens dropped, strings re-encoded (escapes decoded, then only '"', '\\' and control characters
 * escaped; a lone surrogate keeps its \u escape). Returns the length. */
static size_t compact(const char *text, size_t n, char *out) {
    char *o = out;
    const char *p = text, *end = text + n;
    while (p < end) {
        char c = *p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p++;
            continue;
        }
        if (c != '"') {
            *o++ = c;
            p++;
            continue;
        }
        *o++ = *p++;
        while (p < end && *p != '"') {
            unsigned char b = (unsigned char)*p;
            if (b != '\\') {
                *o++ = (char)b;
                p++;
                continue;
            }
            char e = p[1];
            p += 2;
            unsigned cp = 0;
            switch (e) {
            case 'n':
                cp = '\n';
                break;
            case 't':
                cp = '\t';
                break;
            case 'r':
                cp = '\r';
                break;
            case 'b':
                cp = '\b';
                break;
            case 'f':
                cp = '\f';
                break;
            case 'u':
                cp = read_u4(p);
                p += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && p + 6 <= end && p[0] == '\\' && p[1] == 'u') {
                    unsigned lo = read_u4(p + 2);
                    if (lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        p += 6;
                    }
                }
                break;
            default:
                cp = (unsigned char)e; /* '"', '\\', '/' */
                break;
            }
            if (cp >= 0xD800 && cp < 0xE000) {
                o += sprintf(o, "\\u%04x", cp);
            } else if (cp == '"' || cp == '\\') {
                *o++ = '\\';
                *o++ = (char)cp;
            } else if (cp < 0x20) {
                const char *esc = cp == '\n'   ? "\\n"
                                  : cp == '\t' ? "\\t"
                                  : cp == '\r' ? "\\r"
                                  : cp == '\b' ? "\\b"
                                  : cp == '\f' ? "\\f"
                                               : NULL;
                o += esc ? sprintf(o, "%s", esc) : sprintf(o, "\\u%04x", cp);
            } else {
                put_utf8(&o, cp);
            }
        }
        if (p < end) {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return (size_t)(o - out);
}

/* ---- one file ----------------------------------------------------------------------------- */

typedef struct totals {
    size_t files, compiled, passing, valid_fail, invalid_fail, tokens;
    dvec masks, compile;
} totals;

typedef struct inst {
    bool valid;
    const char *text;
    size_t len;
} inst;

/* The tests' instances, as raw spans of the file text. */
static int find_instances(const char *text, size_t len, inst **out, size_t *n_out) {
    scan s = {text, text + len};
    *out = NULL;
    *n_out = 0;
    if (!find_member(&s, "tests")) {
        return 0; /* no tests: the schema is only compiled */
    }
    skip_ws(&s);
    if (s.p >= s.end || *s.p != '[') {
        return -1;
    }
    s.p++;
    size_t cap = 0;
    for (;;) {
        skip_ws(&s);
        if (s.p < s.end && *s.p == ']') {
            return 0;
        }
        const char *obj = s.p;
        scan d = s;
        scan v = s;
        if (!skip_value(&s)) {
            return -1;
        }
        if (!find_member(&d, "data")) {
            return -1;
        }
        const char *ds = d.p;
        if (!skip_value(&d)) {
            return -1;
        }
        if (!find_member(&v, "valid")) {
            return -1;
        }
        if (*n_out == cap) {
            cap = cap ? cap * 2 : 16;
            inst *x = realloc(*out, cap * sizeof *x);
            if (x == NULL) {
                return -1;
            }
            *out = x;
        }
        (*out)[(*n_out)++] =
            (inst){.valid = strncmp(v.p, "true", 4) == 0, .text = ds, .len = (size_t)(d.p - ds)};
        (void)obj;
        skip_ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
        }
    }
}

/* Feeds one instance; true when accepted. Every mask time is appended to masks. */
static bool run_instance(ts_llm *llm, ts_constraint *c, const char *doc, size_t len, uint32_t *bits,
                         dvec *masks, size_t *tokens) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_error err = {0};
    if (ts_llm_tokenize(llm, doc, len, 0, 0, &ids, &n_ids, &err) != TS_OK) {
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n_ids && ok; i++) {
        double t0 = now_us();
        ts_constraint_mask(c, bits);
        dvec_push(masks, now_us() - t0);
        int32_t t = ids[i];
        ok = (bits[t >> 5] >> (t & 31) & 1u) && ts_constraint_accept(c, t);
        (*tokens)++;
    }
    ok = ok && ts_constraint_is_accepting(c);
    ts_free(ids);
    return ok;
}

static void bench_file(ts_llm *llm, const char *path, bool list, uint32_t *bits, totals *t) {
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "file", path);
    size_t len = 0;
    char *text = ts_cli_read_file(path, &len);
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    const cJSON *schema = root ? cJSON_GetObjectItemCaseSensitive(root, "schema") : NULL;
    inst *insts = NULL;
    size_t n_insts = 0;
    char errmsg[TS_ERROR_MSG_MAX + 64] = "";
    if (text == NULL) {
        snprintf(errmsg, sizeof errmsg, "cannot read the file");
    } else if (schema == NULL) {
        snprintf(errmsg, sizeof errmsg, "not a MaskBench file (no \"schema\")");
    } else if (find_instances(text, len, &insts, &n_insts) != 0) {
        snprintf(errmsg, sizeof errmsg, "not a MaskBench file (bad \"tests\")");
    }
    ts_constraint *c = NULL;
    double ttfm = 0;
    if (errmsg[0] == '\0') {
        char *sj = cJSON_PrintUnformatted(schema);
        ts_error err = {0};
        double t0 = now_us();
        ts_status st =
            sj ? ts_constraint_create(llm, TS_GRAMMAR_JSON_SCHEMA, sj, 0, &c, &err) : TS_ERR_NOMEM;
        ttfm = now_us() - t0;
        if (st != TS_OK) {
            snprintf(errmsg, sizeof errmsg, "%s", sj ? err.msg : "out of memory");
        }
        free(sj);
    }
    t->files++;
    int vo = 0, vf = 0, io = 0, inf = 0;
    dvec masks = {0};
    if (c != NULL) {
        t->compiled++;
        dvec_push(&t->compile, ttfm);
        for (size_t i = 0; i < n_insts; i++) {
            char *doc = malloc(6 * insts[i].len + 1);
            if (doc == NULL || ts_constraint_reset(c, NULL) != TS_OK) {
                free(doc);
                break;
            }
            size_t dlen = compact(insts[i].text, insts[i].len, doc);
            bool ok = run_instance(llm, c, doc, dlen, bits, &masks, &t->tokens);
            free(doc);
            if (insts[i].valid) {
                ok ? vo++ : vf++;
            } else {
                ok ? inf++ : io++;
            }
        }
        if (vf == 0 && inf == 0) {
            t->passing++;
        }
        t->valid_fail += (size_t)vf;
        t->invalid_fail += (size_t)inf;
    }
    if (errmsg[0] != '\0') {
        cJSON_AddStringToObject(out, "compile_error", errmsg);
    } else {
        cJSON_AddNullToObject(out, "compile_error");
    }
    cJSON_AddNumberToObject(out, "ttfm_us", c ? (double)(long long)(ttfm * 10) / 10 : 0);
    cJSON_AddNumberToObject(out, "valid_ok", vo);
    cJSON_AddNumberToObject(out, "valid_fail", vf);
    cJSON_AddNumberToObject(out, "invalid_ok", io);
    cJSON_AddNumberToObject(out, "invalid_fail", inf);
    if (list) {
        cJSON *a = cJSON_AddArrayToObject(out, "mask_us");
        for (size_t i = 0; i < masks.n; i++) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(long long)(masks.v[i] * 10) / 10));
        }
    }
    for (size_t i = 0; i < masks.n; i++) {
        dvec_push(&t->masks, masks.v[i]);
    }
    if (!list) {
        if (masks.n > 0) {
            qsort(masks.v, masks.n, sizeof *masks.v, cmp_double);
        }
        cJSON *m = cJSON_AddObjectToObject(out, "mask_us");
        cJSON_AddNumberToObject(m, "n", (double)masks.n);
        cJSON_AddNumberToObject(m, "p50", (double)(long long)(pct(&masks, 50) * 10) / 10);
        cJSON_AddNumberToObject(m, "p99", (double)(long long)(pct(&masks, 99) * 10) / 10);
        cJSON_AddNumberToObject(m, "max",
                                masks.n ? (double)(long long)(masks.v[masks.n - 1] * 10) / 10 : 0);
    }
    char *line = cJSON_PrintUnformatted(out);
    if (line != NULL) {
        printf("%s\n", line);
        free(line);
    }
    fflush(stdout);
    cJSON_Delete(out);
    free(masks.v);
    ts_constraint_destroy(c);
    free(insts);
    cJSON_Delete(root);
    free(text);
}

static int bench(int argc, char **argv) {
    const char *model = NULL;
    bool list = true;
    int first = 0, n_files = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-m") == 0 || strcmp(argv[i], "--model") == 0) && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--no-mask-list") == 0) {
            list = false;
        } else if (strcmp(argv[i], "--json") == 0) {
            first = i + 1;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                i++;
                n_files++;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "error: unknown option: %s\n\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (model == NULL || n_files == 0) {
        fprintf(stderr, "error: give -m MODEL and --json FILE...\n\n");
        usage(stderr);
        return 2;
    }
    ts_llm_params lp = {.vocab_only = 1};
    ts_llm *llm = NULL;
    ts_error err = {0};
    if (ts_llm_open(model, &lp, &llm, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    int32_t n_vocab = ts_llm_n_vocab(llm);
    uint32_t *bits = malloc(((size_t)n_vocab + 31) / 32 * sizeof *bits);
    /* The vocabulary trie is built once, before the first file is timed. */
    ts_constraint *warm = NULL;
    double t0 = now_us();
    if (bits == NULL ||
        ts_constraint_create(llm, TS_GRAMMAR_JSON_OBJECT, NULL, 0, &warm, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", bits ? err.msg : "out of memory");
        free(bits);
        ts_llm_close(llm);
        return 1;
    }
    double t_vocab = now_us() - t0;
    ts_constraint_destroy(warm);
    totals t = {0};
    for (int i = 0; i < n_files; i++) {
        bench_file(llm, argv[first + i], list, bits, &t);
    }
    if (t.masks.n > 0) { /* qsort takes no NULL array, even for zero items */
        qsort(t.masks.v, t.masks.n, sizeof *t.masks.v, cmp_double);
    }
    if (t.compile.n > 0) {
        qsort(t.compile.v, t.compile.n, sizeof *t.compile.v, cmp_double);
    }
    fprintf(stderr,
            "{\"summary\":true,\"model\":\"%s\",\"n_vocab\":%d,\"vocab_trie_ms\":%.1f,"
            "\"files\":%zu,\"compiled\":%zu,\"passing\":%zu,\"valid_rejected\":%zu,"
            "\"invalid_accepted\":%zu,\"tokens\":%zu,\"masks\":%zu,\"mask_p50_us\":%.1f,"
            "\"mask_p99_us\":%.1f,\"mask_p999_us\":%.1f,\"mask_max_us\":%.1f,"
            "\"compile_p50_us\":%.1f,\"compile_p99_us\":%.1f}\n",
            model, n_vocab, t_vocab / 1e3, t.files, t.compiled, t.passing, t.valid_fail,
            t.invalid_fail, t.tokens, t.masks.n, pct(&t.masks, 50), pct(&t.masks, 99),
            pct(&t.masks, 99.9), t.masks.n ? t.masks.v[t.masks.n - 1] : 0, pct(&t.compile, 50),
            pct(&t.compile, 99));
    free(t.masks.v);
    free(t.compile.v);
    free(bits);
    ts_llm_close(llm);
    return t.invalid_fail > 0 ? 1 : 0;
}

int ts_cmd_grammar(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
        return bench(argc - 2, argv + 2);
    }
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "error: tessera grammar: the subcommand is 'bench'\n\n");
    usage(stderr);
    return 2;
}
