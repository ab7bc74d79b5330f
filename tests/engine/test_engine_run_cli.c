/*
 * test_engine_run_cli.c — `tessera run` end to end on a tiny model: streaming a single prompt,
 * a file of prompts generated as one batch (each prompt's text equal to its single run),
 * determinism, the reference backend, and the exit codes and messages of bad invocations.
 * Runs the binary named by $TS_BIN (CTest sets it; skipped when it is unset or missing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/tiny_model.h"

#include "common/skip.h"

typedef struct fx {
    const char *bin;
    char dir[256];
    char model[512];
    char prompts[512];
} fx;

typedef struct result {
    int rc;
    char out[16384];
    char err[16384];
} result;

static void slurp(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f) {
        fclose(f);
    }
}

/* Runs "$TS_BIN run <args>" with stdout and stderr captured. */
static void run(const fx *f, const char *args, result *r) {
    char cmd[4096], out[600], err[600];
    snprintf(out, sizeof out, "%s/out.txt", f->dir);
    snprintf(err, sizeof err, "%s/err.txt", f->dir);
    snprintf(cmd, sizeof cmd, "'%s' run -t 2 %s > '%s' 2> '%s'", f->bin, args, out, err);
    int st = system(cmd);
    r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->bin = getenv("TS_BIN");
    snprintf(f->dir, sizeof f->dir, "/tmp/ts_run_cli_XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->model, sizeof f->model, "%s/tiny.gguf", f->dir);
    snprintf(f->prompts, sizeof f->prompts, "%s/prompts.txt", f->dir);
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    ts_error err = {0};
    if (ts_tiny_write(&s, f->model, &err) != TS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        free(f);
        return -1;
    }
    FILE *p = fopen(f->prompts, "w");
    fputs("the cat\nhello world\n\nsat on the mat\n", p);
    fclose(p);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    char path[600];
    const char *names[] = {"tiny.gguf", "prompts.txt", "out.txt", "err.txt"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", f->dir, names[i]);
        unlink(path);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static fx *need_bin(void **state) {
    fx *f = *state;
    if (f->bin == NULL || access(f->bin, X_OK) != 0) {
        TS_SKIP("TS_BIN is not set to an executable tessera binary");
    }
    return f;
}

static void expect_in(const char *text, const char *needle) {
    if (strstr(text, needle) == NULL) {
        fail_msg("expected \"%s\" in:\n%s", needle, text);
    }
}

static void test_single_prompt(void **state) {
    fx *f = need_bin(state);
    char args[2048];
    snprintf(args, sizeof args, "-m '%s' -p 'hello world' -n 8 --temp 0 --ignore-eos", f->model);
    result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    run(f, args, a);
    if (a->rc != 0) {
        fail_msg("rc %d: %s", a->rc, a->err);
    }
    /* The prompt, then the generated text, streamed. */
    assert_int_equal(strncmp(a->out, "hello world", 11), 0);
    assert_true(strlen(a->out) > 12);
    expect_in(a->err, "generation: 8 tokens");
    expect_in(a->err, "1 sequence,");
    run(f, args, b);
    assert_int_equal(b->rc, 0);
    assert_string_equal(a->out, b->out); /* greedy: the same text every time */
    /* The scalar reference backend generates the same tokens. */
    snprintf(args, sizeof args,
             "-m '%s' -p 'hello world' -n 8 --temp 0 --ignore-eos --backend ref", f->model);
    run(f, args, b);
    assert_int_equal(b->rc, 0);
    assert_string_equal(a->out, b->out);
    /* Seeded sampling is reproducible too. */
    snprintf(args, sizeof args, "-m '%s' -p 'hello' -n 10 --temp 1 --seed 9 --ignore-eos",
             f->model);
    run(f, args, a);
    run(f, args, b);
    assert_int_equal(a->rc, 0);
    assert_string_equal(a->out, b->out);
    free(a);
    free(b);
}

/* Each prompt of the file (empty lines skipped) generated in one batch gives the text a
 * single run of that prompt gives. */
static void test_prompt_file(void **state) {
    fx *f = need_bin(state);
    char args[2048];
    snprintf(args, sizeof args, "-m '%s' -f '%s' -n 6 --temp 0 --ignore-eos", f->model,
             f->prompts);
    result *batch = calloc(1, sizeof *batch), *one = calloc(1, sizeof *one);
    run(f, args, batch);
    if (batch->rc != 0) {
        fail_msg("rc %d: %s", batch->rc, batch->err);
    }
    expect_in(batch->err, "3 sequences");
    expect_in(batch->err, "generation: 18 tokens");
    const char *prompts[] = {"the cat", "hello world", "sat on the mat"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "-m '%s' -p '%s' -n 6 --temp 0 --ignore-eos", f->model,
                 prompts[i]);
        run(f, args, one);
        assert_int_equal(one->rc, 0);
        /* Single run: "<prompt><text>\n"; batch: "--- [i] <prompt>\n<text>\n". */
        char want[4096];
        size_t n = strlen(one->out);
        while (n > 0 && one->out[n - 1] == '\n') {
            n--;
        }
        snprintf(want, sizeof want, "--- [%d] %s\n%.*s\n", i, prompts[i],
                 (int)(n - strlen(prompts[i])), one->out + strlen(prompts[i]));
        expect_in(batch->out, want);
    }
    free(batch);
    free(one);
}

static void test_errors(void **state) {
    fx *f = need_bin(state);
    result *r = calloc(1, sizeof *r);
    char args[2048];
    run(f, "-p hi", r); /* no model */
    assert_int_equal(r->rc, 2);
    expect_in(r->err, "no model");
    snprintf(args, sizeof args, "-m '%s'", f->model); /* no prompt */
    run(f, args, r);
    assert_int_equal(r->rc, 2);
    expect_in(r->err, "-p PROMPT or -f FILE");
    run(f, "-m /nonexistent/x.gguf -p hi", r);
    assert_int_equal(r->rc, 1);
    expect_in(r->err, "/nonexistent/x.gguf");
    snprintf(args, sizeof args, "-m '%s' -p hi --backend gpu9", f->model);
    run(f, args, r);
    assert_int_equal(r->rc, 1);
    expect_in(r->err, "unknown backend 'gpu9'");
    snprintf(args, sizeof args, "-m '%s' -p hi -n x", f->model);
    run(f, args, r);
    assert_int_equal(r->rc, 2);
    expect_in(r->err, "bad value 'x'");
    snprintf(args, sizeof args, "-m '%s' -p hi --frobnicate 1", f->model);
    run(f, args, r);
    assert_int_equal(r->rc, 2);
    expect_in(r->err, "--frobnicate");
    /* A prompt longer than the context is refused with the numbers. */
    snprintf(args, sizeof args,
             "-m '%s' -c 16 -p 'the cat sat on the mat and the cat sat on the mat again and "
             "again' -n 4",
             f->model);
    run(f, args, r);
    assert_int_equal(r->rc, 1);
    expect_in(r->err, "context");
    snprintf(args, sizeof args, "-m '%s' -f '%s/none.txt' -n 4", f->model, f->dir);
    run(f, args, r);
    assert_int_equal(r->rc, 1);
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_prompt),
        cmocka_unit_test(test_prompt_file),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
