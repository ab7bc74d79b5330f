/*
 * test_templates_real.c — the Jinja engine against Python jinja2 on real chat templates.
 *
 * Every <name>.expected.json (written by scripts/reference/template_cases.py) names a template
 * <name>.jinja beside it and holds cases: "vars", the exact JSON string jinja2 rendered with, and
 * the reference result — "expected" (the rendered text), "raised" (the template's own
 * raise_exception message) or "error" (any other jinja2 / Python error). A case passes when
 *   expected: ts_tpl_render returns TS_OK and the same bytes;
 *   raised:   TS_ERR_ABORTED with the message "template raised: " + message;
 *   error:    any other failure (not TS_OK, not TS_ERR_ABORTED), at compile or render time.
 * strftime_now reads the file's fixed clock ("now"), passed as ts_tpl_options.now.
 *
 * Two directories are read: tests/data/templates/real/ (templates of permissively licensed
 * models, committed) and the outside directory $TS_TEMPLATES_DIR, else
 * ~/.cache/tessera/templates/llama.cpp (the others; skipped with a message when absent). A
 * template found in both is checked once, from the repository. The test prints one line per
 * template and each failing case with its first differing byte, then the total rate, and fails
 * when that rate is below 98% or when a committed case not marked "known_diff" fails.
 * TS_TEMPLATES_ONLY=name,... checks only the templates whose file name contains one of them.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "template/jinja.h"

#define MIN_RATE      0.98
#define RAISED_PREFIX "template raised: "

typedef struct tally {
    int found;       /* cases seen */
    int passed;      /* cases that matched the reference */
    int regressions; /* committed cases without known_diff that failed */
    int templates;   /* templates seen */
} tally;

/* Names already checked (from the repository), so the outside copy is not counted twice. */
typedef struct name_set {
    char **names;
    int n, cap;
} name_set;

static int name_set_has(const name_set *s, const char *name) {
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->names[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void name_set_add(name_set *s, const char *name) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->names = realloc(s->names, (size_t)s->cap * sizeof *s->names);
        assert_non_null(s->names);
    }
    s->names[s->n] = strdup(name);
    assert_non_null(s->names[s->n]);
    s->n++;
}

static void name_set_free(name_set *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->names[i]);
    }
    free(s->names);
}

/* TS_TEMPLATES_ONLY=a,b limits the run to templates whose file name contains a or b (to debug one
 * template); unset, every template is checked. */
static int selected(const char *file) {
    const char *only = getenv("TS_TEMPLATES_ONLY");
    if (only == NULL || only[0] == '\0') {
        return 1;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (tok[0] != '\0' && strstr(file, tok) != NULL) {
            return 1;
        }
    }
    return 0;
}

/* The whole file, NUL-terminated; NULL when it cannot be read. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap + 1);
            assert_non_null(nb);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Appends up to max bytes of s to out, escaping control bytes (UTF-8 bytes are kept). */
static void escape_into(char *out, size_t cap, const char *s, size_t len, size_t max) {
    size_t o = strlen(out);
    for (size_t i = 0; i < len && i < max && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            o += (size_t)snprintf(out + o, cap - o, "\\n");
        } else if (c == '\t') {
            o += (size_t)snprintf(out + o, cap - o, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
            out[o] = '\0';
        }
    }
}

/* "at byte N: want «...» got «...»" around the first difference of two texts. */
static void describe_diff(char *why, size_t cap, const char *want, size_t want_len, const char *got,
                          size_t got_len) {
    size_t i = 0;
    while (i < want_len && i < got_len && want[i] == got[i]) {
        i++;
    }
    size_t from = i > 30 ? i - 30 : 0;
    /* Start the context on a UTF-8 character boundary. */
    while (from > 0 && ((unsigned char)want[from] & 0xc0) == 0x80) {
        from--;
    }
    snprintf(why, cap, "lengths %zu/%zu, first difference at byte %zu: want \"", want_len, got_len,
             i);
    escape_into(why, cap, want + from, want_len - from, i - from + 50);
    strncat(why, "\" got \"", cap - strlen(why) - 1);
    escape_into(why, cap, got + from, got_len > from ? got_len - from : 0, i - from + 50);
    strncat(why, "\"", cap - strlen(why) - 1);
}

/* One case against the compiled template (t NULL: compiling failed with compile_err). Returns
 * nonzero when it matches the reference; why says how it differs otherwise. */
static int check_case(const ts_tpl *t, const ts_error *compile_err, const cJSON *c, int64_t now,
                      char *why, size_t cap) {
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(c, "vars");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "expected");
    const cJSON *raised = cJSON_GetObjectItemCaseSensitive(c, "raised");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(c, "error");
    assert_true(cJSON_IsString(vars));
    assert_true(cJSON_IsString(want) || cJSON_IsString(raised) || cJSON_IsObject(error));
    why[0] = '\0';

    if (t == NULL) {
        if (error != NULL) {
            return 1;
        }
        snprintf(why, cap, "compile failed: %s", compile_err->msg);
        return 0;
    }
    ts_tpl_options opt = {.now = now};
    ts_error err = {0};
    char *out = NULL;
    size_t out_len = 0;
    ts_status st =
        ts_tpl_render(t, vars->valuestring, strlen(vars->valuestring), &opt, &out, &out_len, &err);
    int ok = 0;
    if (want != NULL) {
        size_t want_len = strlen(want->valuestring);
        if (st != TS_OK) {
            snprintf(why, cap, "want a rendering, got %s: %s", ts_status_str(st), err.msg);
        } else if (out_len != want_len || memcmp(out, want->valuestring, want_len) != 0) {
            describe_diff(why, cap, want->valuestring, want_len, out, out_len);
        } else {
            ok = 1;
        }
    } else if (raised != NULL) {
        char msg[TS_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, RAISED_PREFIX "%s", raised->valuestring);
        if (st == TS_ERR_ABORTED && strcmp(err.msg, msg) == 0) {
            ok = 1;
        } else if (st == TS_OK) {
            snprintf(why, cap, "want raise_exception(\"%s\"), got a rendering of %zu bytes",
                     raised->valuestring, out_len);
        } else {
            snprintf(why, cap, "want TS_ERR_ABORTED \"%s\", got %s \"%s\"", msg, ts_status_str(st),
                     err.msg);
        }
    } else {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(error, "type");
        const cJSON *emsg = cJSON_GetObjectItemCaseSensitive(error, "message");
        const char *ts = cJSON_IsString(type) ? type->valuestring : "?";
        const char *ms = cJSON_IsString(emsg) ? emsg->valuestring : "?";
        if (st != TS_OK && st != TS_ERR_ABORTED) {
            ok = 1;
        } else if (st == TS_OK) {
            snprintf(why, cap, "want an error (jinja2: %s: %.120s), got a rendering of %zu bytes",
                     ts, ms, out_len);
        } else {
            snprintf(why, cap, "want an error (jinja2: %s: %.120s), got raise_exception: %s", ts,
                     ms, err.msg);
        }
    }
    free(out);
    return ok;
}

/* Every case of one expected file. committed: its failures without known_diff are
 * regressions. */
static void check_file(const char *dir, const char *file, int committed, name_set *seen,
                       tally *all) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len = 0;
    char *text = slurp(path, &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (doc == NULL) {
        fail_msg("%s: not valid JSON", path);
    }
    const cJSON *tname = cJSON_GetObjectItemCaseSensitive(doc, "template");
    const cJSON *now = cJSON_GetObjectItemCaseSensitive(doc, "now");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    assert_true(cJSON_IsString(tname) && cJSON_IsNumber(now) && cJSON_IsArray(cases));
    if (name_set_has(seen, tname->valuestring) || !selected(tname->valuestring)) {
        cJSON_Delete(doc);
        free(text);
        return;
    }
    name_set_add(seen, tname->valuestring);

    snprintf(path, sizeof path, "%s/%s", dir, tname->valuestring);
    size_t src_len = 0;
    char *src = slurp(path, &src_len);
    if (src == NULL) {
        fail_msg("%s: the template of %s/%s is missing", path, dir, file);
    }
    ts_tpl *t = NULL;
    ts_error cerr = {0};
    if (ts_tpl_compile(src, src_len, &t, &cerr) != TS_OK) {
        t = NULL;
    }

    int n = 0, passed = 0;
    char report[32768];
    report[0] = '\0';
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
        const cJSON *known = cJSON_GetObjectItemCaseSensitive(c, "known_diff");
        char why[1536];
        int ok = check_case(t, &cerr, c, (int64_t)now->valuedouble, why, sizeof why);
        n++;
        passed += ok;
        char line[2048];
        line[0] = '\0';
        if (!ok) {
            int regression = committed && !cJSON_IsString(known);
            all->regressions += regression;
            snprintf(line, sizeof line, "    %s %s: %s%s%s%s\n", regression ? "FAIL" : "fail",
                     cJSON_IsString(name) ? name->valuestring : "?", why,
                     cJSON_IsString(known) ? " (known_diff: " : "",
                     cJSON_IsString(known) ? known->valuestring : "",
                     cJSON_IsString(known) ? ")" : "");
        } else if (cJSON_IsString(known)) {
            snprintf(line, sizeof line, "    note %s: passes now; remove its known_diff\n",
                     cJSON_IsString(name) ? name->valuestring : "?");
        }
        strncat(report, line, sizeof report - strlen(report) - 1);
    }
    printf("  %-50s %2d/%2d%s\n", tname->valuestring, passed, n, committed ? "" : "  (outside)");
    fputs(report, stdout);
    all->found += n;
    all->passed += passed;
    all->templates++;

    ts_tpl_free(t);
    free(src);
    cJSON_Delete(doc);
    free(text);
}

static int is_expected_file(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    const char *suffix = ".expected.json";
    size_t s = strlen(suffix);
    return n > s && strcmp(e->d_name + n - s, suffix) == 0;
}

/* Checks every expected file of dir; returns how many there were (-1: no such directory). */
static int check_dir(const char *dir, int committed, name_set *seen, tally *all) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, is_expected_file, alphasort);
    if (n < 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        check_file(dir, list[i]->d_name, committed, seen, all);
        free(list[i]);
    }
    free(list);
    return n;
}

static void test_real_templates(void **state) {
    (void)state;
    tally all = {0};
    name_set seen = {0};

    const char *repo_dir = TS_SOURCE_DIR "/tests/data/templates/real";
    printf("templates of the repository (%s):\n", repo_dir);
    int n_repo = check_dir(repo_dir, 1, &seen, &all);
    if (n_repo <= 0) {
        fail_msg("no expected files in %s", repo_dir);
    }

    char outside[4096];
    const char *env = getenv("TS_TEMPLATES_DIR");
    const char *home = getenv("HOME");
    if (env != NULL && env[0] != '\0') {
        snprintf(outside, sizeof outside, "%s", env);
    } else {
        snprintf(outside, sizeof outside, "%s/.cache/tessera/templates/llama.cpp",
                 home ? home : ".");
    }
    int before = all.templates;
    printf("templates outside the repository (%s):\n", outside);
    int n_out = check_dir(outside, 0, &seen, &all);
    if (n_out <= 0) {
        printf("  skipped: no *.expected.json there (bring the templates and run "
               "scripts/reference/template_cases.py; see docs/templates-conformance.md)\n");
    } else if (all.templates == before) {
        printf("  (all of them are in the repository)\n");
    }

    double rate = all.found ? (double)all.passed / all.found : 0.0;
    printf("total: %d/%d template x conversation pairs match jinja2 (%.2f%%) over %d templates; "
           "%d committed regression(s)\n",
           all.passed, all.found, 100.0 * rate, all.templates, all.regressions);
    fflush(stdout);
    name_set_free(&seen);
    assert_true(all.found > 0);
    if (rate < MIN_RATE) {
        fail_msg("match rate %.2f%% is below %.0f%%", 100.0 * rate, 100.0 * MIN_RATE);
    }
    assert_int_equal(all.regressions, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
