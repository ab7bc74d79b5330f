/*
 * test_tp_cli.c — `tessera run` with --tp and --tp-mpi on a tiny model (written here) and on
 * the default model, SmolLM2-135M Q4_1, when it is cached:
 *
 *  - tiny model (4 heads, 2 KV heads, F32): greedy text with --tp 2, 3 (uneven: the first KV
 *    head replicated on two shards) and 4 equals --tp 1 (only the order of f32 additions
 *    differs); --tp 8 is an error naming the numbers; --kv-mem counts all shards' caches
 *    (replicated KV heads per copy); --tp-mpi outside mpirun is a clear error (or "built
 *    without MPI");
 *  - `tessera bench --tp 2` runs and reports the collectives' bytes per token (exactly what
 *    the model's shapes give); bench refuses --tp-mpi;
 *  - SmolLM2 (9 heads, 3 KV heads): --tp 2 (uneven: 6 + 3 heads) prints what one shard
 *    prints, and so does `mpirun -np 2 ... --tp-mpi` — the acceptance test. The CPU
 *    backend rounds activations to Q8_1, so a sharded run's logits differ from one device's
 *    by about 1% RMS and a greedy pick whose lead is below ~0.1 logit can flip; the prompt
 *    "1, 2, 3, 4," is used because every one of its 32 greedy picks leads by at least 1.9
 *    logits. On a prompt with near-ties MPI still equals in-process --tp 2 exactly (both sum
 *    in rank order), which is checked on a second prompt (under AddressSanitizer: 8 tokens of
 *    the first prompt only);
 *  - with MPI (built with -DTS_MPI=ON and mpirun found): `mpirun -np 2 --oversubscribe ...
 *    --tp-mpi` prints exactly what the in-process --tp 2 prints (both sum in rank order);
 *    ranks given different model files fail with the hash message; a rank that dies before
 *    joining ends the job with an error instead of a hang (bounded by `timeout`).
 *
 * Runs as root set OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) for mpirun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/tiny_model.h"

#include "common/skip.h"

/* Under AddressSanitizer SmolLM2 runs several times slower: fewer tokens there. */
#include "common/quick.h"

static char g_model[512], g_model2[512], g_err[512];

/* Wall-clock bounds, there only to turn a hang into a failure: far above the few seconds each
 * run takes on an idle machine, so that a loaded 2-core host (other tests, sanitizers) does
 * not trip them. A rank that dies must end the job well before the bound (checked: not 124). */
#define MPI_BOUND "600"

/* Environment for mpirun and the processes it starts: ranks yield the CPU while they wait in a
 * collective (two ranks busy-polling on a loaded 2-core host starved each other for minutes);
 * under AddressSanitizer, Open MPI's own
 * allocations that outlive MPI_Finalize are suppressed (lsan_mpi.supp, which says why); the
 * variables do nothing in other builds. */
#define MPI_ENV                                                                                    \
    "OMPI_MCA_mca_component_disable_dlclose=1 OMPI_MCA_mpi_yield_when_idle=1 "                     \
    "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0\" "                     \
    "LSAN_OPTIONS=\"${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=" TS_SOURCE_DIR                    \
    "/tests/parallel/lsan_mpi.supp\" "

/* Runs a shell command; stdout+stderr into out (NUL-terminated). Returns the exit status. */
static int sh(const char *cmd, char *out, size_t size) {
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        return -1;
    }
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static const char *bin(void) {
    const char *b = getenv("TS_BIN");
    return b != NULL ? b : "tessera";
}

/* `tessera run` of 12 greedy tokens after "hello world"; out gets stdout and stderr together
 * (for the error messages). */
static int run_tessera(const char *prefix, const char *model, const char *extra, char *out,
                       size_t size) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s %s run -m %s -p 'hello world' -n 12 --temp 0 --ignore-eos -t 1 %s 2>&1", prefix,
             bin(), model, extra);
    return sh(cmd, out, size);
}

/* `tessera run` on prompt for n greedy tokens keeping only the generated text: stdout without
 * trailing whitespace. Stderr (the statistics) goes to a file — mpirun forwards the two streams
 * separately, so merged they interleave at random — and replaces out when the run fails. */
static int run_text(const char *prefix, const char *model, const char *prompt, int n,
                    const char *extra, char *out, size_t size) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s run -m %s -p '%s' -n %d --temp 0 --ignore-eos -t 1 %s 2>%s",
             prefix, bin(), model, prompt, n, extra, g_err);
    int rc = sh(cmd, out, size);
    if (rc != 0) {
        FILE *f = fopen(g_err, "r");
        size_t got = f != NULL ? fread(out, 1, size - 1, f) : 0;
        out[got] = '\0';
        if (f != NULL) {
            fclose(f);
        }
    }
    size_t len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) {
        out[--len] = '\0';
    }
    return rc;
}

static int setup(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    ts_error err = {0};
    if (ts_tiny_temp_path(g_model, sizeof g_model, "tpcli") == NULL ||
        ts_tiny_write(&s, g_model, &err) != TS_OK) {
        return -1;
    }
    s.seed = 4321;
    if (ts_tiny_temp_path(g_model2, sizeof g_model2, "tpcli2") == NULL ||
        ts_tiny_write(&s, g_model2, &err) != TS_OK ||
        ts_tiny_temp_path(g_err, sizeof g_err, "tpcli_err") == NULL) {
        return -1;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(g_model);
    unlink(g_model2);
    unlink(g_err);
    return 0;
}

static void test_in_process(void **state) {
    (void)state;
    static char base[8192], got[8192];
    assert_int_equal(run_text("", g_model, "hello world", 12, "", base, sizeof base), 0);
    assert_true(strlen(base) > 0);
    const char *tps[] = {"--tp 2", "--tp 3", "--tp 4"};
    for (int i = 0; i < 3; i++) {
        int rc = run_text("", g_model, "hello world", 12, tps[i], got, sizeof got);
        if (rc != 0) {
            fail_msg("%s: exit %d: %s", tps[i], rc, got);
        }
        assert_string_equal(got, base);
    }
    assert_int_equal(run_tessera("", g_model, "--tp 8", got, sizeof got), 1);
    assert_non_null(strstr(got, "4 attention heads: shards would be zero-width"));
    /* --kv-mem counts every shard's cache: at tp 4 each of the 2 KV heads is held twice, so a
     * token takes 2 layers * K,V * 4 heads * 16 * 2 bytes = 512 instead of 256 and 7000
     * bytes no longer hold one block of 16 tokens. */
    assert_int_equal(run_tessera("", g_model, "--kv-mem 7000", got, sizeof got), 0);
    assert_int_equal(run_tessera("", g_model, "--kv-mem 7000 --tp 4", got, sizeof got), 1);
    assert_non_null(strstr(got, "holds 13 tokens (512 bytes each)"));
    int rc = run_tessera("", g_model, "--tp-mpi", got, sizeof got);
    assert_int_not_equal(rc, 0);
    assert_true(strstr(got, "not started by mpirun") != NULL ||
                strstr(got, "built without MPI") != NULL);
}

static void test_mpi(void **state) {
    (void)state;
#ifndef TS_TEST_MPIRUN
    TS_NOT_RUN("built without MPI or no mpirun");
#else
    static char inproc[8192], got[8192];
    char prefix[1024];
    snprintf(prefix, sizeof prefix, MPI_ENV "timeout " MPI_BOUND " %s -np 2 --oversubscribe",
             TS_TEST_MPIRUN);
    assert_int_equal(run_text("", g_model, "hello world", 12, "--tp 2", inproc, sizeof inproc), 0);
    int rc = run_text(prefix, g_model, "hello world", 12, "--tp-mpi", got, sizeof got);
    if (rc != 0) {
        fail_msg("mpirun: exit %d: %s", rc, got);
    }
    assert_string_equal(got, inproc);

    /* Different model files on the two ranks (MPMD): the hash check fails on both. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             MPI_ENV "timeout " MPI_BOUND
                     " %s --oversubscribe -np 1 %s run -m %s -p hi -n 4 --tp-mpi -t 1 : "
                     "-np 1 %s run -m %s -p hi -n 4 --tp-mpi -t 1 2>&1",
             TS_TEST_MPIRUN, bin(), g_model, bin(), g_model2);
    rc = sh(cmd, got, sizeof got);
    assert_true(rc != 0 && rc != 124);
    assert_non_null(strstr(got, "model file differs from rank 0's"));

    /* Rank 1 dies before it joins: the job ends with an error, no hang (timeout -> 124). */
    snprintf(cmd, sizeof cmd,
             MPI_ENV "timeout " MPI_BOUND
                     " %s --oversubscribe -np 1 %s run -m %s -p hi -n 4 --tp-mpi -t 1 : "
                     "-np 1 sh -c 'exit 3' 2>&1",
             TS_TEST_MPIRUN, bin(), g_model);
    rc = sh(cmd, got, sizeof got);
    printf("rank death: exit %d\n", rc);
    assert_true(rc != 0 && rc != 124);
#endif
}

/* tessera bench --tp: runs in-process shards and reports the collectives' payload per token
 * and rank. One generated token of the tiny llama (2 layers, n_embd 64, 320-token vocabulary)
 * all-reduces 2 * 2 * 64 floats (1024 bytes) and all-gathers 160 logits (640 bytes):
 * 1.625 KiB. */
static void test_bench(void **state) {
    (void)state;
    static char got[8192];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 4 -r 1 -t 2 --tp 2 -o csv 2>&1", bin(),
             g_model);
    int rc = sh(cmd, got, sizeof got);
    if (rc != 0) {
        fail_msg("bench --tp 2: exit %d: %s", rc, got);
    }
    assert_non_null(strstr(got, ",ts,ts_sd,gbs,tp,coll_kib\n"));
    const char *tg = strstr(got, ",tg4,");
    assert_non_null(tg);
    const char *eol = strchr(tg, '\n');
    assert_non_null(eol);
    assert_true(eol - tg > 10 && strncmp(eol - 8, ",2,1.625", 8) == 0);
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 0 -r 1 --tp 3 --tp-mpi 2>&1", bin(), g_model);
    assert_int_equal(sh(cmd, got, sizeof got), 2);
    assert_non_null(strstr(got, "bench runs its shards in one process"));
}

/* The default model: --tp 2 and MPI with 2 ranks against one shard. */
static void test_smollm2(void **state) {
    (void)state;
    const char *home = getenv("HOME");
    char model[512];
    snprintf(model, sizeof model, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    if (access(model, R_OK) != 0) {
        TS_NOT_RUN("model %s is absent (python3 scripts/fetch_model.py)", model);
        return;
    }
    static char base[8192], got[8192];
    const char *prompt = "1, 2, 3, 4,";
    int n = TS_QUICK ? 8 : 32;
    assert_int_equal(run_text("", model, prompt, n, "", base, sizeof base), 0);
    assert_non_null(strstr(base, "5, 6, 7")); /* the model counts on */
    int rc = run_text("", model, prompt, n, "--tp 2", got, sizeof got);
    if (rc != 0) {
        fail_msg("--tp 2: exit %d: %s", rc, got);
    }
    assert_string_equal(got, base);
#ifndef TS_TEST_MPIRUN
    TS_NOT_RUN("the MPI part: built without MPI or no mpirun");
#else
    char prefix[1024];
    snprintf(prefix, sizeof prefix, MPI_ENV "timeout " MPI_BOUND " %s -np 2 --oversubscribe",
             TS_TEST_MPIRUN);
    rc = run_text(prefix, model, prompt, n, "--tp-mpi", got, sizeof got);
    if (rc != 0) {
        fail_msg("mpirun --tp-mpi: exit %d: %s", rc, got);
    }
    assert_string_equal(got, base);
    if (TS_QUICK) {
        return; /* the sanitizers' run checks the paths above; one MPI run is enough */
    }
    /* A prompt with near-ties: MPI and in-process shards still print the same text. */
    static char inproc[8192];
    prompt = "The capital of France is";
    assert_int_equal(run_text("", model, prompt, n, "--tp 2", inproc, sizeof inproc), 0);
    rc = run_text(prefix, model, prompt, n, "--tp-mpi", got, sizeof got);
    if (rc != 0) {
        fail_msg("mpirun --tp-mpi: exit %d: %s", rc, got);
    }
    assert_string_equal(got, inproc);
#endif
}

int main(void) {
    if (access(bin(), X_OK) != 0) {
        TS_NOT_RUN("tessera binary '%s' not found (TS_BIN)", bin());
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_process),
        cmocka_unit_test(test_mpi),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_smollm2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
