/*
 * schema_maskbench.c — the JSON Schema compiler over MaskBench (github guidance-ai/
 * jsonschemabench, the files in maskbench/data: {"schema": ..., "tests": [{"data", "valid"}]}).
 *
 *   schema_maskbench [-v] [--jsonl] FILE...     every file: compile the schema to GBNF, read
 *                                               the GBNF, match every test instance (serialized
 *                                               compactly) byte by byte
 *   schema_maskbench [-v] [--jsonl] --cases F   the same over the cases of a JSON-lines file
 *                                               (scripts/grammar_maskbench.py writes it)
 *   schema_maskbench -p FILE                    print the GBNF of FILE's schema (or of FILE when
 *                                               it is a bare schema)
 *
 * A schema passes when it compiles and every valid instance is accepted and every invalid one
 * rejected. Prints a summary: files, compiled, passing, valid accepted / rejected, invalid
 * accepted (must be 0) / rejected, the histogram of compile errors (message with the JSON
 * pointer removed), and the compile time p50/p99. --jsonl also prints one object per file.
 * -v lists the files with an invalid instance accepted or a valid one rejected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "grammar/grammar.h"
#include "tessera.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

typedef struct hist {
    char *msg;
    int count;
} hist;

static int cmp_hist(const void *a, const void *b) {
    return ((const hist *)b)->count - ((const hist *)a)->count;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "schema: /a/b: 'not' is not supported" -> "'not' is not supported" */
static const char *strip_pointer(const char *msg) {
    const char *p = strstr(msg, ": ");
    if (p && !strncmp(msg, "schema", 6)) {
        const char *q = strstr(p + 2, ": ");
        if (q && p[2] == '/')
            return q + 2;
    }
    return msg;
}

int main(int argc, char **argv) {
    bool verbose = false, jsonl = false;
    int first = 1;
    if (argc >= 3 && !strcmp(argv[1], "-p")) {
        size_t len;
        char *text = read_file(argv[2], &len);
        if (!text) {
            fprintf(stderr, "cannot read %s\n", argv[2]);
            return 2;
        }
        cJSON *j = cJSON_Parse(text);
        cJSON *s = j ? cJSON_GetObjectItem(j, "schema") : NULL;
        char *st = s ? cJSON_PrintUnformatted(s) : NULL;
        char *g = NULL;
        ts_error err;
        ts_status rc = ts_schema_to_gbnf(st ? st : text, st ? strlen(st) : len, &g, &err);
        if (rc != TS_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        fputs(g, stdout);
        ts_grammar *gr = NULL;
        if (ts_grammar_from_gbnf(g, strlen(g), "root", &gr, &err) != TS_OK)
            fprintf(stderr, "GBNF: %s\n", err.msg);
        ts_grammar_free(gr);
        free(g);
        cJSON_free(st);
        cJSON_Delete(j);
        free(text);
        return 0;
    }
    for (; first < argc && argv[first][0] == '-' && strcmp(argv[first], "--cases"); first++) {
        if (!strcmp(argv[first], "-v"))
            verbose = true;
        else if (!strcmp(argv[first], "--jsonl"))
            jsonl = true;
    }
    int files = 0, compiled = 0, passing = 0, with_tests = 0, gbnf_fail = 0;
    long v_ok = 0, v_fail = 0, i_ok = 0, i_fail = 0;
    hist *h = NULL;
    size_t nh = 0;
    double *times = NULL;
    size_t nt = 0;
    /* Cases: --cases FILE (JSON lines {"file", "schema": text, "tests": [[valid, text]...]},
     * written by scripts/grammar_maskbench.py with Python's exact compact serialization), or
     * MaskBench files serialized here with cJSON (which prints 1.0 as 1: use --cases). */
    FILE *cases = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    if (first + 1 < argc && !strcmp(argv[first], "--cases")) {
        cases = fopen(argv[first + 1], "r");
        if (!cases) {
            fprintf(stderr, "cannot read %s\n", argv[first + 1]);
            return 2;
        }
    }
    for (int a = first;; a++) {
        cJSON *j = NULL;
        const char *name = NULL;
        if (cases) {
            if (getline(&line, &line_cap, cases) < 0)
                break;
            j = cJSON_Parse(line);
            name = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "file")) : NULL;
        } else {
            if (a >= argc)
                break;
            size_t len;
            char *text = read_file(argv[a], &len);
            j = text ? cJSON_Parse(text) : NULL;
            free(text);
            name = argv[a];
        }
        if (!j || !name) {
            fprintf(stderr, "%s: cannot read or parse\n", cases ? "a case line" : argv[a]);
            cJSON_Delete(j);
            continue;
        }
        files++;
        cJSON *schema = cJSON_GetObjectItem(j, "schema");
        char *st = cases ? strdup(cJSON_GetStringValue(schema) ? schema->valuestring : "")
                         : cJSON_PrintUnformatted(schema);
        char *g = NULL;
        ts_error err;
        double t0 = now_us();
        ts_status rc = ts_schema_to_gbnf(st, strlen(st), &g, &err);
        double t1 = now_us();
        ts_grammar *gr = NULL;
        if (rc == TS_OK) {
            times = realloc(times, (nt + 1) * sizeof *times);
            times[nt++] = t1 - t0;
            rc = ts_grammar_from_gbnf(g, strlen(g), "root", &gr, &err);
            if (rc != TS_OK) {
                gbnf_fail++;
                fprintf(stderr, "%s: GBNF does not compile: %s\n", name, err.msg);
            }
        }
        int fv_ok = 0, fv_fail = 0, fi_ok = 0, fi_fail = 0;
        if (rc == TS_OK) {
            compiled++;
            cJSON *tests = cJSON_GetObjectItem(j, "tests");
            if (cJSON_GetArraySize(tests) > 0)
                with_tests++;
            for (cJSON *t = tests ? tests->child : NULL; t; t = t->next) {
                bool valid;
                char *doc;
                if (cases) {
                    valid = cJSON_IsTrue(cJSON_GetArrayItem(t, 0));
                    doc = strdup(cJSON_GetStringValue(cJSON_GetArrayItem(t, 1)));
                } else {
                    valid = cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"));
                    char *d = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "data"));
                    doc = strdup(d);
                    cJSON_free(d);
                }
                ts_gmatch *m = ts_gmatch_create(gr);
                bool acc =
                    m && ts_gmatch_accept_bytes(m, doc, strlen(doc)) && ts_gmatch_is_accepting(m);
                ts_gmatch_free(m);
                if (valid)
                    acc ? fv_ok++ : fv_fail++;
                else
                    acc ? fi_fail++ : fi_ok++;
                if (verbose && (valid != acc))
                    fprintf(stderr, "%s: %s instance %s: %.300s\n", name,
                            valid ? "valid" : "INVALID", acc ? "accepted" : "rejected", doc);
                free(doc);
            }
            if (!fv_fail && !fi_fail)
                passing++;
        } else {
            const char *msg = strip_pointer(err.msg);
            size_t i = 0;
            for (; i < nh && strcmp(h[i].msg, msg); i++)
                ;
            if (i == nh) {
                h = realloc(h, (nh + 1) * sizeof *h);
                h[nh++] = (hist){strdup(msg), 0};
            }
            h[i].count++;
            if (verbose)
                fprintf(stderr, "%s: %s\n", name, err.msg);
        }
        v_ok += fv_ok;
        v_fail += fv_fail;
        i_ok += fi_ok;
        i_fail += fi_fail;
        if (jsonl) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", name);
            if (rc == TS_OK)
                cJSON_AddNullToObject(o, "compile_error");
            else
                cJSON_AddStringToObject(o, "compile_error", err.msg);
            cJSON_AddNumberToObject(o, "ttfm_us", t1 - t0);
            cJSON_AddNumberToObject(o, "valid_ok", fv_ok);
            cJSON_AddNumberToObject(o, "valid_fail", fv_fail);
            cJSON_AddNumberToObject(o, "invalid_ok", fi_ok);
            cJSON_AddNumberToObject(o, "invalid_fail", fi_fail);
            char *out = cJSON_PrintUnformatted(o);
            puts(out);
            cJSON_free(out);
            cJSON_Delete(o);
        }
        ts_grammar_free(gr);
        free(g);
        free(st);
        cJSON_Delete(j);
    }
    free(line);
    if (cases)
        fclose(cases);
    qsort(h, nh, sizeof *h, cmp_hist);
    qsort(times, nt, sizeof *times, cmp_dbl);
    printf("files %d  compiled %d (%.1f%%)  passing %d (%.1f%%)  gbnf-errors %d\n", files, compiled,
           files ? 100.0 * compiled / files : 0, passing, files ? 100.0 * passing / files : 0,
           gbnf_fail);
    printf("valid accepted %ld rejected %ld  invalid rejected %ld ACCEPTED %ld\n", v_ok, v_fail,
           i_ok, i_fail);
    if (nt)
        printf("compile us p50 %.0f p99 %.0f max %.0f\n", times[nt / 2], times[nt * 99 / 100],
               times[nt - 1]);
    printf("compile errors:\n");
    for (size_t i = 0; i < nh && i < 60; i++)
        printf("%6d  %s\n", h[i].count, h[i].msg);
    for (size_t i = 0; i < nh; i++)
        free(h[i].msg);
    free(h);
    free(times);
    return i_fail ? 1 : 0;
}
