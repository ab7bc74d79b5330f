/*
 * test_tune.c — the CPU backend's kernel choice: the cache file round trip, bad cache files
 * (truncated, another CPU, a level the CPU lacks, garbage) ignored with a one-line notice and
 * rewritten, TS_ISA and explicit levels forcing the choice, and MUL_MAT with a different level
 * per type and shape class matching the reference, with the scheduler reusing converted
 * activations only between MUL_MATs whose conversion is the same.
 *
 * Every test runs with TS_CACHE_DIR set to a fresh temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_tune.h"
#include "backends/harness.h"
#include "backends/ref/ref.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ts_tune_XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        return -1;
    }
    setenv("TS_CACHE_DIR", g_dir, 1);
    unsetenv("TS_ISA");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void cache_path(char *buf, size_t size) {
    char id[128];
    cpu_id(id, sizeof id);
    snprintf(buf, size, "%s/kernels-%s.txt", g_dir, id);
}

static void write_text(const char *text) {
    char path[512];
    cache_path(path, sizeof path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The cache file's text ("" when absent), into buf. */
static void read_text(char *buf, size_t size) {
    char path[512];
    cache_path(path, sizeof path);
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
}

static void remove_cache(void) {
    char path[512];
    cache_path(path, sizeof path);
    unlink(path);
}

static ts_backend *make_cpu(int isa, bool retune) {
    ts_cpu_params p = {.n_threads = 2, .isa = isa, .retune = retune};
    ts_backend *b = NULL;
    ts_error err = {0};
    if (ts_cpu_backend_create(&p, &b, &err) != TS_OK) {
        fail_msg("cpu: %s", err.msg);
    }
    return b;
}

static const ts_type k_types[] = {TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_Q8_0, TS_TYPE_Q4_K};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

/* Describes b's choice for k_types; asserts it names every type at levels this CPU runs. */
static void describe(ts_backend *b, char *buf, size_t size, const char **notice, double *ms) {
    assert_true(ts_cpu_backend_kernels(b, k_types, N_TYPES, buf, size, notice, ms));
    char copy[512];
    snprintf(copy, sizeof copy, "%s", buf);
    int entries = 0;
    for (char *tok = strtok(copy, " ,/"); tok != NULL; tok = strtok(NULL, " ,/")) {
        ts_type t;
        if (ts_type_from_name(tok, &t) || strcmp(tok, "packed") == 0) {
            continue;
        }
        int l = -1;
        for (int i = TS_ISA_SCALAR; i <= TS_ISA_AVX512; i++) {
            l = strcmp(tok, ts_isa_name((ts_isa)i)) == 0 ? i : l;
        }
        if (l < 0) {
            fail_msg("'%s' in '%s' is not a level", tok, buf);
        }
        assert_true(ts_quant_isa_supported((ts_isa)l));
        entries++;
    }
    assert_int_equal(entries, 2 * N_TYPES);
}

static void tune(ts_backend *b) {
    ts_error err = {0};
    assert_int_equal(ts_cpu_backend_tune(b, k_types, N_TYPES, &err), TS_OK);
}

static void test_round_trip(void **state) {
    (void)state;
    remove_cache();
    ts_backend *b = make_cpu(-1, false);
    tune(b);
    char first[512], second[512], text[4096];
    const char *notice = NULL;
    double ms = 0;
    describe(b, first, sizeof first, &notice, &ms);
    assert_string_equal(notice, "");
    /* Measured, so positive; no upper bound: a loaded or sanitized machine takes longer, and
     * speed is a benchmark's business, not a test's. */
    assert_true(ms > 0);
    ts_backend_destroy(b);
    read_text(text, sizeof text);
    char head[384];
    cpu_cache_head(head, sizeof head);
    assert_memory_equal(text, head, strlen(head));
    assert_string_equal(text + strlen(text) - 4, "end\n");
    /* A second backend takes the same choice from the file without measuring. */
    b = make_cpu(-1, false);
    tune(b);
    describe(b, second, sizeof second, &notice, &ms);
    assert_string_equal(first, second);
    assert_string_equal(notice, "");
    assert_true(ms == 0);
    ts_backend_destroy(b);
    /* retune measures again the types asked for even though the file is good, and the file
     * keeps the other types' entries. */
    b = make_cpu(-1, true);
    ts_type q40 = TS_TYPE_Q4_0;
    ts_error err = {0};
    assert_int_equal(ts_cpu_backend_tune(b, &q40, 1, &err), TS_OK);
    describe(b, second, sizeof second, &notice, &ms);
    assert_true(ms > 0);
    ts_backend_destroy(b);
    read_text(text, sizeof text);
    assert_non_null(strstr(text, "\nQ4_K row "));
    assert_non_null(strstr(text, "\nQ4_0 rows "));
}

/* Writes text as the cache, makes a backend: the file must be ignored with a one-line notice,
 * the choice measured (within the CPU's levels) and the file rewritten so that the next
 * backend reads it without a notice. */
static void expect_ignored(const char *text, const char *what) {
    write_text(text);
    ts_backend *b = make_cpu(-1, false);
    tune(b);
    char desc[512];
    const char *notice = NULL;
    double ms = 0;
    describe(b, desc, sizeof desc, &notice, &ms);
    if (strstr(notice, "ignored") == NULL || strchr(notice, '\n') != NULL) {
        fail_msg("%s: notice '%s'", what, notice);
    }
    assert_true(ms > 0);
    ts_backend_destroy(b);
    b = make_cpu(-1, false);
    tune(b);
    describe(b, desc, sizeof desc, &notice, &ms);
    if (notice[0] != '\0' || ms != 0) {
        fail_msg("%s: the rewritten cache was not used: '%s'", what, notice);
    }
    ts_backend_destroy(b);
}

static void test_bad_files(void **state) {
    (void)state;
    remove_cache();
    ts_backend *b = make_cpu(-1, false);
    tune(b);
    ts_backend_destroy(b);
    char good[4096], bad[4200];
    read_text(good, sizeof good);
    size_t len = strlen(good);
    assert_true(len > 40);

    snprintf(bad, sizeof bad, "%.*s", (int)(len / 2), good);
    expect_ignored(bad, "cut mid-file");
    snprintf(bad, sizeof bad, "%.*s", (int)(len - 4), good);
    expect_ignored(bad, "cut before 'end'");
    expect_ignored("", "empty");

    const char *build = strchr(strchr(good, '\n') + 1, '\n') + 1;
    const char *entries = strchr(build, '\n') + 1;
    snprintf(bad, sizeof bad, "tessera-kernels %d\ncpu OtherVendor-1-2-3-avx512\n%s",
             CPU_TUNE_FORMAT, build);
    expect_ignored(bad, "another CPU");
    snprintf(bad, sizeof bad, "%.*sbuild 0123abcd\n%s", (int)(build - good), good, entries);
    expect_ignored(bad, "another build");
    snprintf(bad, sizeof bad, "tessera-kernels %d\n%s", CPU_TUNE_FORMAT + 1,
             strchr(good, '\n') + 1);
    expect_ignored(bad, "another format version");

    /* Hand edits: a level that does not exist, one this CPU lacks (when it lacks one), an
     * unknown type, a duplicate, text after end. */
    const char *edits[] = {"Q4_0 row avx1024\n", "Q4_0 row avx512\n", "Q9_9 row avx2\n",
                           "Q4_0 sideways avx2\n", "Q4_0 row\n"};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        if (i == 1 && ts_quant_cpu_isa() >= TS_ISA_AVX512) {
            continue; /* test_lacking_level covers it on this CPU */
        }
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(entries - good), good, edits[i], entries);
        expect_ignored(bad, edits[i]);
    }
    const char *q40 = strstr(good, "Q4_0 row ");
    assert_non_null(q40);
    snprintf(bad, sizeof bad, "%.*s%.*s%s", (int)(entries - good), good,
             (int)(strchr(q40, '\n') + 1 - q40), q40, entries);
    expect_ignored(bad, "duplicate entry");
    snprintf(bad, sizeof bad, "%sQ4_0 row scalar\n", good);
    expect_ignored(bad, "text after end");

    /* One level per type (batch invariance): two levels for a type, or a half entry. */
    char head[384];
    cpu_cache_head(head, sizeof head);
    snprintf(bad, sizeof bad, "%sQ4_0 row scalar\nQ4_0 rows avx2\nend\n", head);
    expect_ignored(bad, "two levels for one type");
    snprintf(bad, sizeof bad, "%sQ4_0 row scalar\nend\n", head);
    expect_ignored(bad, "one shape class only");
    /* Repacked weights: a level without a packed kernel, two layouts for one type, a word
     * other than "packed". */
    snprintf(bad, sizeof bad, "%sQ4_0 row scalar packed\nQ4_0 rows scalar packed\nend\n", head);
    expect_ignored(bad, "a packed kernel the level lacks");
    snprintf(bad, sizeof bad, "%sQ4_0 row %s packed\nQ4_0 rows %s\nend\n", head,
             ts_isa_name(ts_quant_cpu_isa()), ts_isa_name(ts_quant_cpu_isa()));
    expect_ignored(bad, "two layouts for one type");
    snprintf(bad, sizeof bad, "%sQ4_0 row scalar unpacked\nQ4_0 rows scalar unpacked\nend\n", head);
    expect_ignored(bad, "an unknown layout word");

    static const unsigned char garbage[] = {0x7f, 'E', 'L', 'F', 0, 1, 2, 0xff, '\n', 0};
    memcpy(bad, garbage, sizeof garbage);
    expect_ignored(bad, "garbage");
    expect_ignored("\xff\xfe garbage\n", "binary");
}

/* MXFP4 (the newest block type) goes through the same measurement and cache as the others:
 * its entries are written, read back without measuring, and a packed entry at a level without
 * its packed kernel (scalar) is refused like any other. */
static void test_mxfp4(void **state) {
    (void)state;
    remove_cache();
    const ts_type mx = TS_TYPE_MXFP4;
    ts_error err = {0};
    char desc[256], again[256], text[4096];
    const char *notice = NULL;
    double ms = 0;
    ts_backend *b = make_cpu(-1, false);
    assert_int_equal(ts_cpu_backend_tune(b, &mx, 1, &err), TS_OK);
    assert_true(ts_cpu_backend_kernels(b, &mx, 1, desc, sizeof desc, &notice, &ms));
    assert_string_equal(notice, "");
    assert_true(ms > 0);
    assert_true(strncmp(desc, "MXFP4 ", 6) == 0);
    ts_backend_destroy(b);
    read_text(text, sizeof text);
    const char *row = strstr(text, "\nMXFP4 row "), *rows = strstr(text, "\nMXFP4 rows ");
    assert_non_null(row);
    assert_non_null(rows);
    int l = -1;
    for (int i = TS_ISA_SCALAR; i <= TS_ISA_AVX512; i++) {
        const size_t len = strlen(ts_isa_name((ts_isa)i));
        l = strncmp(row + 11, ts_isa_name((ts_isa)i), len) == 0 && strchr(" \n", row[11 + len]) ? i
                                                                                                : l;
    }
    assert_true(l >= 0 && ts_quant_isa_supported((ts_isa)l));
    b = make_cpu(-1, false);
    assert_int_equal(ts_cpu_backend_tune(b, &mx, 1, &err), TS_OK);
    assert_true(ts_cpu_backend_kernels(b, &mx, 1, again, sizeof again, &notice, &ms));
    assert_string_equal(desc, again);
    assert_string_equal(notice, "");
    assert_true(ms == 0);
    ts_backend_destroy(b);
    char head[384], bad[768];
    cpu_cache_head(head, sizeof head);
    snprintf(bad, sizeof bad, "%sMXFP4 row scalar packed\nMXFP4 rows scalar packed\nend\n", head);
    write_text(bad);
    b = make_cpu(-1, false);
    assert_int_equal(ts_cpu_backend_tune(b, &mx, 1, &err), TS_OK);
    assert_true(ts_cpu_backend_kernels(b, &mx, 1, again, sizeof again, &notice, &ms));
    assert_non_null(strstr(notice, "ignored"));
    ts_backend_destroy(b);
}

/* A file naming AVX-512 read by a backend whose level is AVX2 (what a CPU without AVX-512
 * sees): ignored, and no entry ever exceeds the level. Then AVX-VNNI, which a CPU may skip. */
static void test_lacking_level(void **state) {
    (void)state;
    if (ts_quant_cpu_isa() < TS_ISA_AVX2) {
        skip();
    }
    char head[384], text[768];
    cpu_cache_head(head, sizeof head);
    snprintf(text, sizeof text, "%sQ4_0 row avx512\nQ4_0 rows avx2\nend\n", head);
    write_text(text);
    cpu_kernels k;
    cpu_kernels_init(&k, TS_ISA_AVX2, false, false, true);
    assert_non_null(strstr(k.notice, "does not run"));
    bool want[TS_TYPE_COUNT] = {false};
    want[TS_TYPE_Q4_0] = want[TS_TYPE_Q8_0] = true;
    ts_error err = {0};
    assert_int_equal(cpu_kernels_tune(&k, want, &err), TS_OK);
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        for (int s = 0; s < CPU_SHAPE_COUNT; s++) {
            assert_true(k.isa[t][s] <= TS_ISA_AVX2);
        }
    }
    assert_true(cpu_kernels_isa(&k, TS_TYPE_Q4_0, 1) <= TS_ISA_AVX2);

    /* AVX-VNNI sits below AVX-512 but not every AVX-512 CPU has it: a file naming it is read
     * where the CPU runs it and ignored where it skips it. */
    const ts_isa cpu = ts_quant_cpu_isa();
    if (cpu >= TS_ISA_AVXVNNI) {
        snprintf(text, sizeof text, "%sQ4_0 row avxvnni\nQ4_0 rows avxvnni\nend\n", head);
        write_text(text);
        cpu_kernels_init(&k, cpu, false, false, true);
        if (ts_quant_isa_supported(TS_ISA_AVXVNNI)) {
            assert_string_equal(k.notice, "");
            assert_int_equal(cpu_kernels_isa(&k, TS_TYPE_Q4_0, 1), TS_ISA_AVXVNNI);
            assert_int_equal(cpu_kernels_isa(&k, TS_TYPE_Q4_0, 64), TS_ISA_AVXVNNI);
        } else {
            assert_non_null(strstr(k.notice, "does not run"));
        }
    }
}

static void test_forced(void **state) {
    (void)state;
    remove_cache();
    setenv("TS_ISA", "scalar", 1);
    ts_backend *b = make_cpu(-1, false);
    tune(b);
    char desc[512], text[64];
    const char *notice = NULL;
    double ms = 1;
    describe(b, desc, sizeof desc, &notice, &ms);
    assert_string_equal(desc, "Q4_0 scalar/scalar, Q4_1 scalar/scalar, Q8_0 scalar/scalar, "
                              "Q4_K scalar/scalar");
    assert_true(ms == 0);
    ts_backend_destroy(b);
    unsetenv("TS_ISA");
    read_text(text, sizeof text);
    assert_string_equal(text, ""); /* forced choices are not measured, so not cached */
    b = make_cpu((int)ts_quant_cpu_isa(), false);
    tune(b);
    describe(b, desc, sizeof desc, &notice, &ms);
    /* A forced level reads repacked weights where it has a kernel for them. */
    const char *top = ts_isa_name(ts_quant_cpu_isa());
    char want[256];
    const char *pk[N_TYPES];
    for (int i = 0; i < N_TYPES; i++) {
        const ts_quant_ops *o = ts_quant_ops_get(k_types[i], ts_quant_cpu_isa());
        pk[i] = o != NULL && o->gemm_packed != NULL ? " packed" : "";
    }
    snprintf(want, sizeof want, "Q4_0 %s/%s%s, Q4_1 %s/%s%s, Q8_0 %s/%s%s, Q4_K %s/%s%s", top, top,
             pk[0], top, top, pk[1], top, top, pk[2], top, top, pk[3]);
    assert_string_equal(desc, want);
    ts_backend_destroy(b);
    /* Without repacking, the same levels read the rows where they lie. */
    ts_cpu_params p = {.n_threads = 2, .isa = (int)ts_quant_cpu_isa(), .no_repack = true};
    ts_error err = {0};
    assert_int_equal(ts_cpu_backend_create(&p, &b, &err), TS_OK);
    tune(b);
    describe(b, desc, sizeof desc, &notice, &ms);
    assert_null(strstr(desc, "packed"));
    ts_backend_destroy(b);
}

static void test_unwritable_cache(void **state) {
    (void)state;
    char file[128], sub[160];
    snprintf(file, sizeof file, "%s/plain-file", g_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(sub, sizeof sub, "%s/sub", file);
    setenv("TS_CACHE_DIR", sub, 1);
    ts_backend *b = make_cpu(-1, false);
    tune(b);
    char desc[512];
    const char *notice = NULL;
    double ms = 0;
    describe(b, desc, sizeof desc, &notice, &ms);
    assert_non_null(strstr(notice, "not cached"));
    ts_backend_destroy(b);
    setenv("TS_CACHE_DIR", g_dir, 1);
}

/* Four MUL_MATs of one activation tensor: Q4_0 and Q8_0 (both convert to Q8_0: the second
 * reuses), Q4_1 (Q8_1: converts), Q4_0 again (Q8_0 again: converts, the scratch holds Q8_1).
 * The levels differ per type (one level for both shape classes of a type, as the cache must
 * hold); the sum must match the reference. */
static void test_mixed_levels(void **state) {
    (void)state;
    const char *hi = ts_isa_name(ts_quant_cpu_isa());
    char head[384], text[768];
    cpu_cache_head(head, sizeof head);
    snprintf(text, sizeof text,
             "%sQ4_0 row scalar\nQ4_0 rows scalar\nQ4_1 row %s\nQ4_1 rows %s\nQ8_0 row scalar\n"
             "Q8_0 rows scalar\nend\n",
             head, hi, hi);
    write_text(text);
    ts_backend *ref = NULL, *cpu = make_cpu(-1, false);
    ts_error err = {0};
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    ts_type wt[4] = {TS_TYPE_Q4_0, TS_TYPE_Q8_0, TS_TYPE_Q4_1, TS_TYPE_Q4_0};
    int64_t ms[2] = {1, 7};
    for (int mi = 0; mi < 2; mi++) {
        harness h;
        h_init(&h, ref, 7 + (uint64_t)mi);
        int64_t xne[2] = {256, ms[mi]};
        ts_tensor *x = h_param(&h, "x", TS_TYPE_F32, 2, xne);
        h_fill(&h, x, 1.0f);
        ts_tensor *sum = NULL;
        for (int i = 0; i < 4; i++) {
            char name[16];
            snprintf(name, sizeof name, "w%d", i);
            int64_t wne[2] = {256, 40};
            ts_tensor *w = h_param(&h, name, wt[i], 2, wne);
            h_fill(&h, w, 1.0f);
            ts_tensor *y = ts_op_mul_mat(h.g, w, x);
            sum = sum == NULL ? y : ts_op_add(h.g, sum, y);
        }
        ts_graph_output(h.g, sum);
        float *want = h_run(&h, ref, sum, &err);
        assert_non_null(want);
        float *got = h_run(&h, cpu, sum, &err);
        if (got == NULL) {
            fail_msg("cpu: %s", err.msg);
        }
        double e = h_nrmse(got, want, ts_tensor_nelements(sum));
        if (!(e <= 1e-2)) {
            fail_msg("m=%lld: nrmse %.3g", (long long)ms[mi], e);
        }
        /* The schedule at the backend's level: only the Q8_0 MUL_MAT right after Q4_0's reuses. */
        int n = ts_graph_n_nodes(h.g), seen = 0;
        uint8_t *flags = calloc((size_t)n, 1);
        cpu_schedule(h.g, ts_quant_cpu_isa(), flags);
        for (int i = 0; i < n; i++) {
            if (ts_graph_node(h.g, i)->op == TS_OP_MUL_MAT) {
                assert_int_equal((flags[i] & CPU_SCHED_REUSE) != 0, seen == 1);
                seen++;
            }
        }
        assert_int_equal(seen, 4);
        free(flags);
        free(want);
        free(got);
        h_free(&h);
    }
    char desc[512];
    const char *notice = NULL;
    ts_type shown[3] = {TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_Q8_0};
    assert_true(ts_cpu_backend_kernels(cpu, shown, 3, desc, sizeof desc, &notice, NULL));
    char want_desc[256];
    snprintf(want_desc, sizeof want_desc, "Q4_0 scalar/scalar, Q4_1 %s/%s, Q8_0 scalar/scalar", hi,
             hi);
    assert_string_equal(desc, want_desc);
    assert_string_equal(notice, "");
    ts_backend_destroy(cpu);
    ts_backend_destroy(ref);
}

static void test_not_cpu(void **state) {
    (void)state;
    ts_backend *ref = NULL;
    ts_error err = {0};
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    char buf[16] = "x";
    assert_false(ts_cpu_backend_kernels(ref, NULL, 0, buf, sizeof buf, NULL, NULL));
    assert_string_equal(buf, "");
    assert_int_equal(ts_cpu_backend_tune(ref, k_types, N_TYPES, &err), TS_ERR_INVALID_ARG);
    ts_backend_destroy(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_lacking_level),    cmocka_unit_test(test_forced),
        cmocka_unit_test(test_unwritable_cache), cmocka_unit_test(test_mixed_levels),
        cmocka_unit_test(test_not_cpu),          cmocka_unit_test(test_mxfp4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
