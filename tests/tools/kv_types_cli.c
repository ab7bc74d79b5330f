/*
 * kv_types_cli.c — the KV cache type options of the `tessera` binary as a user types them, on
 * tiny random-weight models: `run` with -ctk q8_0 -ctv q4_0 (head_dim 32) generates and its
 * KV line names both types (also with the decomposed attention and the reference backend); an
 * unknown type, a block type the model's head size (16) does not allow, and a missing value are
 * errors that name the option, the type and the head size; `bench -d` (context depth) runs
 * generation after cached tokens with separate K/V types and reports them (markdown and JSON).
 * Skips when TS_BIN is unset.
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

typedef struct fx {
    char hd32[400], hd16[400], out[512], err[512];
} fx;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int setup(void **state) {
    fx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    ts_error e = {0};
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    assert_non_null(ts_tiny_temp_path(x->hd16, sizeof x->hd16, "kvt16"));
    assert_int_equal(ts_tiny_write(&s, x->hd16, &e), TS_OK);
    s.head_dim = 32;
    assert_non_null(ts_tiny_temp_path(x->hd32, sizeof x->hd32, "kvt32"));
    assert_int_equal(ts_tiny_write(&s, x->hd32, &e), TS_OK);
    snprintf(x->out, sizeof x->out, "%s.out", x->hd32);
    snprintf(x->err, sizeof x->err, "%s.err", x->hd32);
    *state = x;
    return 0;
}

static int teardown(void **state) {
    fx *x = *state;
    unlink(x->hd16);
    unlink(x->hd32);
    unlink(x->out);
    unlink(x->err);
    free(x);
    return 0;
}

/* Runs `tessera ARGS`; returns the exit status, the outputs in x->out / x->err. */
static int tessera(fx *x, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", cli_bin(), args);
    return cli_run_to(cmd, x->out, x->err);
}

static void expect_in(const char *path, const char *needle) {
    const char *text = slurp(path);
    if (strstr(text, needle) == NULL) {
        fail_msg("'%s' not in:\n%s", needle, text);
    }
}

static void test_run_types(void **state) {
    fx *x = *state;
    if (cli_bin() == NULL) {
        skip();
    }
    char args[1024];
    snprintf(args, sizeof args,
             "run -m %s -p 'hello there' -n 6 --temp 0 --ctx 64 -ctk q8_0 "
             "-ctv q4_0",
             x->hd32);
    if (tessera(x, args) != 0) {
        fail_msg("run: %s", slurp(x->err));
    }
    expect_in(x->err, "(K q8_0, V q4_0)");
    /* The long option names, and --kv-type for both. */
    snprintf(args, sizeof args,
             "run -m %s -p 'hello' -n 2 --temp 0 --ctx 64 --kv-type q5_0 "
             "--cache-type-v bf16",
             x->hd32);
    assert_int_equal(tessera(x, args), 0);
    expect_in(x->err, "(K q5_0, V bf16)");
    /* The decomposed attention (GET_ROWS of the cache blocks, dequantized) and the reference
     * backend read the same caches. */
    snprintf(args, sizeof args,
             "run -m %s -p 'hello' -n 3 --temp 0 --ctx 64 -ctk q4_0 -ctv q8_0 --override "
             "attention=decomposed",
             x->hd32);
    if (tessera(x, args) != 0) {
        fail_msg("decomposed: %s", slurp(x->err));
    }
    expect_in(x->err, "(K q4_0, V q8_0)");
    snprintf(args, sizeof args,
             "run -m %s -p 'hello' -n 3 --temp 0 --ctx 64 -ctk q5_0 -ctv q4_0 --backend ref",
             x->hd32);
    if (tessera(x, args) != 0) {
        fail_msg("ref: %s", slurp(x->err));
    }
    expect_in(x->err, "(K q5_0, V q4_0)");
}

static void test_errors(void **state) {
    fx *x = *state;
    if (cli_bin() == NULL) {
        skip();
    }
    char args[1024];
    snprintf(args, sizeof args, "run -m %s -p hi -n 2 --ctx 64 --cache-type-k q4_1", x->hd32);
    assert_int_not_equal(tessera(x, args), 0);
    expect_in(x->err, "cache-type-k 'q4_1' is not a KV cache type (f16, bf16, f32, q8_0, q5_0, "
                      "q4_0)");
    snprintf(args, sizeof args, "run -m %s -p hi -n 2 --ctx 64 -ctv q5_0", x->hd16);
    assert_int_not_equal(tessera(x, args), 0);
    expect_in(x->err, "cache-type-v 'q5_0' needs a head size that is a multiple of its block of "
                      "32, but the model's head_dim is 16");
    snprintf(args, sizeof args, "run -m %s -p hi -n 2 --ctx 64 --kv-type q8_0", x->hd16);
    assert_int_not_equal(tessera(x, args), 0);
    expect_in(x->err, "kv-type 'q8_0' needs a head size");
    snprintf(args, sizeof args, "run -m %s -p hi -n 2 -ctk", x->hd32);
    assert_int_not_equal(tessera(x, args), 0);
    expect_in(x->err, "-ctk needs a value");
    /* bench refuses a depth with --batch, and reports a bad type like run. */
    snprintf(args, sizeof args, "bench -m %s -p 0 -n 2 -r 1 -t 1 -d 16 --batch 2", x->hd32);
    assert_int_equal(tessera(x, args), 2);
    expect_in(x->err, "-d/--n-depth");
    snprintf(args, sizeof args, "bench -m %s -p 0 -n 2 -r 1 -t 1 -ctk q4_0", x->hd16);
    assert_int_not_equal(tessera(x, args), 0);
    expect_in(x->err, "cache-type-k 'q4_0'");
}

static void test_bench_depth(void **state) {
    fx *x = *state;
    if (cli_bin() == NULL) {
        skip();
    }
    char args[1024];
    snprintf(args, sizeof args, "bench -m %s -p 8 -n 4 -r 1 -t 1 -d 0,40 -ctk q8_0 -ctv q4_0",
             x->hd32);
    if (tessera(x, args) != 0) {
        fail_msg("bench: %s", slurp(x->err));
    }
    expect_in(x->out, "KV cache: K q8_0, V q4_0");
    expect_in(x->out, "| pp8 |");
    expect_in(x->out, "| tg4 |");
    expect_in(x->out, "| pp8 @ d40 |");
    expect_in(x->out, "| tg4 @ d40 |");
    snprintf(args, sizeof args, "bench -m %s -p 0 -n 4 -r 1 -t 1 --n-depth 20 -ctv q5_0 -o json",
             x->hd32);
    assert_int_equal(tessera(x, args), 0);
    expect_in(x->out, "\"kv_type_k\": \"f16\", \"kv_type_v\": \"q5_0\", \"n_depth\": 20");
    expect_in(x->out, "\"test\": \"tg4 @ d20\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_types),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bench_depth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
