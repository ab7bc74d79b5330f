/*
 * test_engine_grammar_cli.c — `tessera grammar bench` on the fixed MaskBench-format subset in
 * tests/data/grammar/maskbench/ (20 hand-written schemas whose valid / invalid labels were
 * checked with Python's jsonschema): every schema compiles, every valid instance is accepted
 * token by token with each token in its mask, no invalid instance is accepted. Runs $TS_BIN
 * with SmolLM2's vocabulary; skipped when the binary or the model is absent.
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

#include "common/skip.h"

static char out[1 << 20], errbuf[1 << 16];

static void slurp(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f) {
        fclose(f);
    }
}

/* Runs `tessera grammar ARGS`; stdout and stderr land in out and errbuf through files of
 * unique names (tests run in parallel, possibly several builds at once). */
static int run(const char *args) {
    const char *tmp = getenv("TMPDIR");
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/ts_gbench_out_XXXXXX", tmp != NULL ? tmp : "/tmp");
    snprintf(err_path, sizeof err_path, "%s/ts_gbench_err_XXXXXX", tmp != NULL ? tmp : "/tmp");
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    assert_true(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' grammar %s > '%s' 2> '%s'", getenv("TS_BIN"), args, out_path,
             err_path);
    int st = system(cmd);
    slurp(out_path, out, sizeof out);
    slurp(err_path, errbuf, sizeof errbuf);
    unlink(out_path);
    unlink(err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_bench_subset(void **state) {
    (void)state;
    const char *bin = getenv("TS_BIN");
    const char *home = getenv("HOME");
    char model[512];
    snprintf(model, sizeof model, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (bin == NULL || access(bin, X_OK) != 0) {
        TS_SKIP("TS_BIN is not set to an executable tessera binary");
    }
    if (access(model, R_OK) != 0) {
        TS_SKIP_NO_MODEL(model);
    }
    char args[2048];
    snprintf(args, sizeof args,
             "bench -m '%s' --no-mask-list --json %s/tests/data/grammar/maskbench/*.json", model,
             TS_SOURCE_DIR);
    int rc = run(args);
    if (rc != 0) {
        fail_msg("rc %d\n%s\n%s", rc, out, errbuf);
    }
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++) {
        lines++;
    }
    assert_int_equal(lines, 20);
    assert_null(strstr(out, "\"compile_error\":\""));
    if (strstr(errbuf, "\"files\":20,\"compiled\":20,\"passing\":20,\"valid_rejected\":0,"
                       "\"invalid_accepted\":0") == NULL) {
        fail_msg("summary: %s", errbuf);
    }
    /* Bad invocations: usage errors, a file that is not MaskBench. */
    assert_int_equal(run("bench --json x.json"), 2);
    assert_int_equal(run("frobnicate"), 2);
    snprintf(args, sizeof args, "bench -m '%s' --json %s/README.md", model, TS_SOURCE_DIR);
    assert_int_equal(run(args), 0);
    assert_non_null(strstr(out, "not a MaskBench file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bench_subset)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
