/*
 * test_inspect.c — `tessera inspect` on good, bad and vocabulary files, and its usage errors.
 *
 * Runs the binary named by $TS_BIN (CTest sets it; the test skips when it is unset) on files
 * this test writes with the GGUF writer, and checks exit codes and output: 0 with metadata,
 * abbreviated arrays and the tensor table; valid JSON with --json; 1 with the reader's
 * message for a truncated file; 2 for usage errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"

#include "common/skip.h"

typedef struct fixture {
    const char *bin;
    char dir[256];
    char good[320];
    char bad[320];
} fixture;

/* Runs a shell command line, collecting stdout and stderr; returns the exit status. */
static int run(const char *cmd, char **out) {
    char line[2048];
    snprintf(line, sizeof line, "%s 2>&1", cmd);
    FILE *p = popen(line, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int inspect(const fixture *fx, const char *args, char **out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' inspect %s", fx->bin, args);
    return run(cmd, out);
}

static void write_good(const char *path) {
    ts_gguf_writer *w;
    ts_error err = {0};
    assert_int_equal(ts_gguf_writer_create(&w, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_cstr(w, "general.architecture", "llama", &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_cstr(w, "general.name", "tab\there \x1b[31mred", &err),
                     TS_OK);
    uint32_t ids[100];
    for (uint32_t i = 0; i < 100; i++) {
        ids[i] = i * 3;
    }
    assert_int_equal(ts_gguf_writer_add_array(w, "test.ids", TS_GGUF_UINT32, ids, 100, &err),
                     TS_OK);
    assert_int_equal(ts_gguf_writer_add_u64(w, "test.big", UINT64_MAX, &err), TS_OK);
    const int64_t ne[] = {4, 2};
    static const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(
        ts_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", TS_TYPE_F32, 2, ne, data, &err), TS_OK);
    const int64_t ne2[] = {64};
    static const uint8_t q[2 * 18];
    assert_int_equal(ts_gguf_writer_add_tensor(w, "output.weight", TS_TYPE_Q4_0, 1, ne2, q, &err),
                     TS_OK);
    assert_int_equal(ts_gguf_writer_write(w, path, &err), TS_OK);
    ts_gguf_writer_destroy(w);
}

/* The good file cut short in the middle of its tensor data. */
static void write_bad(const char *good, const char *bad) {
    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 64);
    f = fopen(bad, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n - 40, f), n - 40);
    fclose(f);
}

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->bin = getenv("TS_BIN");
    snprintf(fx->dir, sizeof fx->dir, "/tmp/ts_inspect_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->good, sizeof fx->good, "%s/good.gguf", fx->dir);
    snprintf(fx->bad, sizeof fx->bad, "%s/bad.gguf", fx->dir);
    write_good(fx->good);
    write_bad(fx->good, fx->bad);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    unlink(fx->good);
    unlink(fx->bad);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static const fixture *need_bin(void **state) {
    const fixture *fx = *state;
    if (fx->bin == NULL || access(fx->bin, X_OK) != 0) {
        TS_SKIP("TS_BIN is not set to an executable tessera binary");
    }
    return fx;
}

static void expect_in(const char *out, const char *needle) {
    if (strstr(out, needle) == NULL) {
        fail_msg("expected \"%s\" in output:\n%s", needle, out);
    }
}

static void test_good_text(void **state) {
    const fixture *fx = need_bin(state);
    char args[1024], *out;
    snprintf(args, sizeof args, "'%s' --tensors", fx->good);
    assert_int_equal(inspect(fx, args, &out), 3);
    expect_in(out, "version    3");
    expect_in(out, "general.architecture");
    expect_in(out, "\"llama\"");
    /* Control bytes are escaped, never passed to the terminal. */
    expect_in(out, "\"tab\\there \\x1b[31mred\"");
    assert_null(strchr(out, 0x1b));
    expect_in(out, "uint32[100]");
    expect_in(out, "[0, 3, 6, 9, 12, 15, 18, 21, ... (100 total)]");
    expect_in(out, "18446744073709551615");
    expect_in(out, "blk.0.attn_q.weight");
    expect_in(out, "[4, 2]");
    expect_in(out, "Q4_0");
    expect_in(out, "parameters 72");
    free(out);
    /* Without --tensors the table is absent but the totals remain. */
    snprintf(args, sizeof args, "'%s'", fx->good);
    assert_int_equal(inspect(fx, args, &out), 3);
    assert_null(strstr(out, "tensors:\n"));
    expect_in(out, "totals:");
    /* A sound GGUF file whose tensors are no model: everything is shown, and the exit status
     * says that it does not load. */
    expect_in(out, "model:\n  does not load: ");
    free(out);
}

static void test_good_json(void **state) {
    const fixture *fx = need_bin(state);
    char args[1024], *out;
    snprintf(args, sizeof args, "--json '%s' --tensors", fx->good);
    assert_int_equal(inspect(fx, args, &out), 3);
    cJSON *j = cJSON_Parse(out);
    if (j == NULL) {
        fail_msg("not JSON:\n%s", out);
    }
    assert_int_equal(cJSON_GetObjectItem(j, "version")->valuedouble, 3);
    cJSON *md = cJSON_GetObjectItem(j, "metadata");
    assert_int_equal(cJSON_GetArraySize(md), 4);
    cJSON *ids = cJSON_GetArrayItem(md, 2);
    assert_string_equal(cJSON_GetObjectItem(ids, "key")->valuestring, "test.ids");
    assert_int_equal(cJSON_GetObjectItem(ids, "count")->valuedouble, 100);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(ids, "value")), 8);
    cJSON *big = cJSON_GetArrayItem(md, 3);
    assert_string_equal(cJSON_GetObjectItem(big, "value")->valuestring, "18446744073709551615");
    cJSON *ts = cJSON_GetObjectItem(j, "tensors");
    assert_int_equal(cJSON_GetArraySize(ts), 2);
    cJSON *t1 = cJSON_GetArrayItem(ts, 1);
    assert_string_equal(cJSON_GetObjectItem(t1, "type")->valuestring, "Q4_0");
    assert_int_equal(cJSON_GetObjectItem(t1, "bytes")->valuedouble, 36);
    cJSON *tot = cJSON_GetObjectItem(j, "totals");
    assert_int_equal(cJSON_GetObjectItem(tot, "parameters")->valuedouble, 72);
    cJSON *model = cJSON_GetObjectItem(j, "model");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(model, "loads")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(model, "error")));
    cJSON_Delete(j);
    free(out);
}

static void test_bad_file(void **state) {
    const fixture *fx = need_bin(state);
    char args[1024], *out;
    snprintf(args, sizeof args, "'%s'", fx->bad);
    assert_int_equal(inspect(fx, args, &out), 1);
    expect_in(out, "tessera inspect: ");
    expect_in(out, "gguf: tensor 1 'output.weight': data [offset");
    expect_in(out, "runs past end of file");
    free(out);
    snprintf(args, sizeof args, "--json '%s/missing.gguf'", fx->dir);
    assert_int_equal(inspect(fx, args, &out), 1);
    expect_in(out, "cannot open");
    free(out);
}

static void test_usage(void **state) {
    const fixture *fx = need_bin(state);
    char args[1024], *out;
    assert_int_equal(inspect(fx, "", &out), 2);
    expect_in(out, "usage: tessera inspect");
    free(out);
    snprintf(args, sizeof args, "'%s' --frobnicate", fx->good);
    assert_int_equal(inspect(fx, args, &out), 2);
    expect_in(out, "unknown option '--frobnicate'");
    free(out);
    snprintf(args, sizeof args, "'%s' '%s'", fx->good, fx->bad);
    assert_int_equal(inspect(fx, args, &out), 2);
    free(out);
    assert_int_equal(inspect(fx, "--help", &out), 0);
    expect_in(out, "--tensors");
    free(out);
}

static void test_vocab(void **state) {
    const fixture *fx = need_bin(state);
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/vocab/*.gguf", TS_TESTDATA_DIR);
    glob_t gl;
    if (glob(pattern, 0, NULL, &gl) != 0 || gl.gl_pathc == 0) {
        TS_SKIP("no vocabulary files match %s", pattern);
    }
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        char args[1024], *out;
        snprintf(args, sizeof args, "'%s'", gl.gl_pathv[i]);
        assert_int_equal(inspect(fx, args, &out), 0);
        expect_in(out, "tokenizer.ggml.tokens");
        expect_in(out, "total)]");
        free(out);
    }
    globfree(&gl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_text), cmocka_unit_test(test_good_json),
        cmocka_unit_test(test_bad_file),  cmocka_unit_test(test_usage),
        cmocka_unit_test(test_vocab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
