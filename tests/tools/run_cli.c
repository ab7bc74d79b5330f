/*
 * run_cli.c — `tessera run -f PROMPTS` as a user runs it, on a tiny random-weight model: every
 * prompt of the file gets its own answer block; a prompt the engine rejects (longer than the
 * context) is reported on stderr and marked skipped, the others still run, and the exit status
 * says that something was skipped. A missing or empty prompts file is an error. `--retune` is
 * accepted and `--profile` names the chosen CPU kernels. `bench` reports the resident memory the
 * runs held, repacked weights included. Skips when TS_BIN is unset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tiny_model.h"
#include "tools/cli_util.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_prompts_file_skips_rejected(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char model[400], prompts[512], out[512], err[512], cmd[2000];
    assert_non_null(ts_tiny_temp_path(model, sizeof model, "runf"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, model, &e), TS_OK);
    snprintf(prompts, sizeof prompts, "%s.prompts", model);
    snprintf(out, sizeof out, "%s.out", model);
    snprintf(err, sizeof err, "%s.err", model);

    FILE *f = fopen(prompts, "wb");
    assert_non_null(f);
    fputs("hello there\n\n", f); /* the empty line is not a prompt */
    for (int i = 0; i < 400; i++) {
        fputs("word ", f); /* far more tokens than the 64-token context */
    }
    fputs("\nsecond good prompt\n", f);
    fclose(f);

    snprintf(cmd, sizeof cmd, "%s run -m %s -f %s -n 4 --temp 0 --ctx 64", cli_bin(), model,
             prompts);
    assert_int_equal(cli_run_to(cmd, out, err), 1);
    char *o = strdup(slurp(out));
    const char *r = slurp(err);
    assert_non_null(strstr(o, "--- [0] hello there"));
    assert_non_null(strstr(o, "--- [2] second good prompt"));
    assert_non_null(strstr(o, "(skipped: see the error above)"));
    assert_non_null(strstr(r, "error: prompt 1:"));
    assert_non_null(strstr(r, "context"));
    assert_non_null(strstr(r, "1 of 3 prompts were skipped"));
    assert_non_null(strstr(r, "generation:"));
    free(o);

    /* All good: exit 0. */
    f = fopen(prompts, "wb");
    assert_non_null(f);
    fputs("one\ntwo\n", f);
    fclose(f);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    assert_non_null(strstr(slurp(out), "--- [1] two"));

    /* No prompts at all, and a missing file: errors. */
    f = fopen(prompts, "wb");
    assert_non_null(f);
    fputs("\n\n", f);
    fclose(f);
    assert_int_equal(cli_run_to(cmd, out, err), 1);
    assert_non_null(strstr(slurp(err), "holds no prompts"));
    unlink(prompts);
    assert_int_equal(cli_run_to(cmd, out, err), 1);
    assert_non_null(strstr(slurp(err), prompts));

    unlink(out);
    unlink(err);
    unlink(model);
}

/* --retune measures the CPU kernels again (into TS_CACHE_DIR, set by CTest) and --profile
 * prints the choice. */
static void test_retune_profile(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char model[400], out[512], err[512], cmd[2000];
    assert_non_null(ts_tiny_temp_path(model, sizeof model, "retune"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, model, &e), TS_OK);
    snprintf(out, sizeof out, "%s.out", model);
    snprintf(err, sizeof err, "%s.err", model);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hello -n 2 --temp 0 --ctx 64 --retune --profile",
             cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    const char *r = slurp(err);
    assert_non_null(strstr(r, "kernels (one row / several): "));
    assert_null(strstr(r, "notice:"));
    unlink(out);
    unlink(err);
    unlink(model);
}

/* Speculative decoding from the command line: `run` prints its summary line; `bench --draft`
 * compares plain and speculative decoding (n-gram and a draft model: the same tiny model),
 * checks their outputs are identical and reports the acceptance. */
static void test_speculative(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char model[400], out[512], err[512], cmd[2000];
    assert_non_null(ts_tiny_temp_path(model, sizeof model, "spec"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, model, &e), TS_OK);
    snprintf(out, sizeof out, "%s.out", model);
    snprintf(err, sizeof err, "%s.err", model);
    /* The tiny model's greedy output loops: n-gram drafts are accepted. */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'a b c a b c a b c' -n 64 --temp 0 --ctx 256 "
             "--draft-max 8 -t 2",
             cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    const char *r = slurp(err);
    assert_non_null(strstr(r, "speculative (ngram, draft-max 8): "));
    assert_non_null(strstr(r, " accepted ("));
    for (int with_model = 0; with_model < 2; with_model++) {
        char md[600] = "";
        if (with_model) {
            snprintf(md, sizeof md, "-md %s", model);
        }
        snprintf(cmd, sizeof cmd,
                 "%s bench -m %s %s --draft 6 -r 1 -n 48 -t 2 -p 'x y z x y z' "
                 "-o json",
                 cli_bin(), model, md);
        assert_int_equal(cli_run_to(cmd, out, err), 0);
        const char *j = slurp(out);
        assert_non_null(strstr(j, "\"test\": \"spec\""));
        assert_non_null(strstr(j, "\"identical\": true"));
        assert_non_null(strstr(j, with_model ? "\"drafter\": \"" : "\"drafter\": \"ngram\""));
        assert_null(strstr(j, "\"accepted\": 0,"));
    }
    /* A bad setting is refused naming it. */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 --spec-type medusa", cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 1);
    assert_non_null(strstr(slurp(err), "spec-type"));
    unlink(out);
    unlink(err);
    unlink(model);
}

/* A tensor the architecture does not use: `run` warns on stderr naming it and still runs;
 * `inspect` lists it under "model:". */
static void test_unused_tensor_reported(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char model[400], out[512], err[512], cmd[2000];
    assert_non_null(ts_tiny_temp_path(model, sizeof model, "unused"));
    ts_tiny_spec spec = ts_tiny_spec_default("qwen2");
    spec.extra[0] = "rope_factors_long.weight"; /* Phi-3's; qwen2 has no use for it */
    spec.extra_ne0 = 8;
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, model, &e), TS_OK);
    snprintf(out, sizeof out, "%s.out", model);
    snprintf(err, sizeof err, "%s.err", model);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hello -n 2 --temp 0", cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    const char *r = slurp(err);
    assert_non_null(strstr(r, "warning: 1 tensor of the file is not used by architecture "
                              "'qwen2' (the output may be wrong): rope_factors_long.weight"));
    snprintf(cmd, sizeof cmd, "%s inspect %s", cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    const char *o = slurp(out);
    assert_non_null(strstr(o, "model:\n  loads as   qwen2\n"));
    assert_non_null(strstr(o, "unused     1 tensors (not used by the architecture): "
                              "rope_factors_long.weight"));
    unlink(model);
    unlink(out);
    unlink(err);
}

/* `bench`'s memory line: the figure for the runs counts the weights as the runs hold them,
 * packed copies included (repacking forced: TS_ISA at the AVX2 level packs every type with a
 * packed gemm there). The copies live with each context, so that figure is at least the
 * load line's (taken while the first context lived) and at least the bytes repacked; the line
 * used to print only the figure after the runs, with every context gone (a 1B Q8_0 model:
 * 224 MB after the runs against 1502 MB while they ran). */
static void test_bench_memory(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
#if defined(__x86_64__)
    const char *isa = __builtin_cpu_supports("avx2") ? "TS_ISA=avx2 " : "";
#else
    const char *isa = "";
#endif
    char model[400], out[512], err[512], cmd[2000];
    assert_non_null(ts_tiny_temp_path(model, sizeof model, "benchmem"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.wtype = TS_TYPE_Q4_0;
    spec.n_embd = 1024;
    spec.n_ff = 4096;
    spec.n_layer = 4;
    spec.n_head = 8;
    spec.n_head_kv = 8;
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, model, &e), TS_OK);
    snprintf(out, sizeof out, "%s.out", model);
    snprintf(err, sizeof err, "%s.err", model);
    snprintf(cmd, sizeof cmd, "%s%s bench -m %s -p 16 -n 4 -r 1 -t 2", isa, cli_bin(), model);
    assert_int_equal(cli_run_to(cmd, out, err), 0);
    const char *o = slurp(out);
    double repacked = -1, loaded = -1, during = -1, after = -1, peak = -1;
    const char *l = strstr(o, "of which repacking ");
    assert_non_null(l);
    assert_int_equal(sscanf(l,
                            "of which repacking %lf MB of weights: %*f ms); resident memory "
                            "%lf MB",
                            &repacked, &loaded),
                     2);
    l = strstr(o, "resident memory during the runs: ");
    assert_non_null(l);
    assert_int_equal(sscanf(l,
                            "resident memory during the runs: %lf MB (after them %lf MB, "
                            "peak %lf MB)",
                            &during, &after, &peak),
                     3);
    printf("repacked %.0f MB; resident at load %.0f MB, during %.0f MB, after %.0f MB, peak %.0f "
           "MB\n",
           repacked, loaded, during, after, peak);
    assert_true(repacked > 0 || isa[0] == '\0');
    assert_true(during <= peak && during >= repacked && during >= 0.95 * loaded);
    unlink(out);
    unlink(err);
    unlink(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_memory),
        cmocka_unit_test(test_prompts_file_skips_rejected),
        cmocka_unit_test(test_retune_profile),
        cmocka_unit_test(test_speculative),
        cmocka_unit_test(test_unused_tensor_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
