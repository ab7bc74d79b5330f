/*
 * gemm_bench.c — prefill gemm throughput of one weight type, as the CPU backend calls it.
 *
 *   [TS_ISA=avx2] gemm_bench TYPE [--k 2048] [--rows 2048] [--cols 64] [--reps 10]
 *
 * One thread multiplies a rows x k matrix of TYPE (random values through the scalar quantizer)
 * by `cols` activation rows in the type's vec_dot type, in calls of 128 weight rows (the CPU
 * backend's CPU_MM_ROWS_SEVERAL) against all columns, once on the rows as they lie and, where
 * the level has one, once on the packed layout (ts_quant_pack). Printed: GFLOP/s (2 k rows cols
 * per second) of the fastest of --reps runs, at the best ISA level of this CPU or the one TS_ISA
 * lowers it to: on a shared machine the fastest run is the least
 * disturbed one. To compare two builds, run both several times, interleaved, and compare the
 * best figures; a single run says little on a noisy host. Before timing, the gemm's first
 * column is checked against the scalar vec_dot (relative 1e-3).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/quant.h"

enum { CALL_ROWS = 128 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void random_row(float *x, int64_t k, uint64_t *s) {
    for (int64_t i = 0; i < k; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(*s >> 11) * 0x1p-53 - 0.5);
    }
}

static double run(ts_gemm_fn gemm, int64_t k, int64_t nr, int64_t nc, float *c, const uint8_t *w,
                  size_t wrow, const uint8_t *a, size_t arow, int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        for (int64_t r0 = 0; r0 < nr; r0 += CALL_ROWS) {
            const int64_t n = nr - r0 < CALL_ROWS ? nr - r0 : CALL_ROWS;
            gemm(k, n, nc, c + r0, sizeof(float) * (size_t)nr, w + (size_t)r0 * wrow, wrow, a,
                 arow);
        }
        const double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return 2.0 * (double)k * (double)nr * (double)nc / best / 1e9;
}

static int usage(const char *argv0) {
    fprintf(stderr,
            "usage: [TS_ISA=LEVEL] %s TYPE [--k 2048] [--rows 2048] [--cols 64] [--reps 10]\n",
            argv0);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        return usage(argv[0]);
    }
    int64_t k = 2048, nr = 2048, nc = 64;
    int reps = 10;
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) {
            return usage(argv[0]);
        }
        if (strcmp(argv[i], "--k") == 0) {
            k = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--rows") == 0) {
            nr = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--cols") == 0) {
            nc = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = atoi(argv[++i]);
        } else {
            return usage(argv[0]);
        }
    }
    ts_type type = TS_TYPE_COUNT;
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        const char *name = ts_type_name((ts_type)t);
        if (name != NULL && strcmp(name, argv[1]) == 0) {
            type = (ts_type)t;
        }
    }
    const ts_isa isa = ts_quant_detect_isa();
    const ts_quant_ops *ops = type == TS_TYPE_COUNT ? NULL : ts_quant_ops_get(type, isa);
    if (ops == NULL || ops->gemm == NULL || k <= 0 || nr <= 0 || nc <= 0 || reps <= 0) {
        fprintf(stderr, "gemm_bench: no gemm for type '%s', or a size is not positive\n", argv[1]);
        return 2;
    }
    const ts_quant_ops *ref = ts_quant_ops_get(type, TS_ISA_SCALAR);
    const ts_quant_ops *aops = ts_quant_ops_get(ops->vec_dot_type, isa);
    size_t wrow = 0, arow = 0;
    if (!ts_type_row_bytes(type, k, &wrow) || !ts_type_row_bytes(ops->vec_dot_type, k, &arow)) {
        fprintf(stderr, "gemm_bench: k = %lld is not a whole number of %s blocks\n", (long long)k,
                argv[1]);
        return 2;
    }
    uint8_t *w = malloc(wrow * (size_t)nr), *wp = malloc(wrow * (size_t)nr);
    uint8_t *a = malloc(arow * (size_t)nc);
    float *x = malloc(sizeof(float) * (size_t)k), *c = malloc(sizeof(float) * (size_t)(nr * nc));
    if (!w || !wp || !a || !x || !c) {
        fprintf(stderr, "gemm_bench: out of memory\n");
        return 1;
    }
    uint64_t s = 1;
    for (int64_t r = 0; r < nr; r++) {
        random_row(x, k, &s);
        ref->from_float(x, w + (size_t)r * wrow, k);
    }
    for (int64_t j = 0; j < nc; j++) {
        random_row(x, k, &s);
        aops->from_float(x, a + (size_t)j * arow, k);
    }
    ops->gemm(k, nr < CALL_ROWS ? nr : CALL_ROWS, 1, c, sizeof(float) * (size_t)nr, w, wrow, a,
              arow);
    float want = 0.0f;
    ref->vec_dot(k, &want, w, a);
    if (!(fabsf(c[0] - want) <= 1e-3f * (fabsf(want) + 1.0f))) {
        fprintf(stderr, "gemm_bench: %s gemm %g != scalar vec_dot %g\n", argv[1], c[0], want);
        return 1;
    }
    printf("%s %s, one thread, k %lld x rows %lld x cols %lld, calls of %d rows, best of %d:\n",
           argv[1], ts_isa_name(isa), (long long)k, (long long)nr, (long long)nc, CALL_ROWS, reps);
    printf("  rows:   %.1f GFLOP/s\n", run(ops->gemm, k, nr, nc, c, w, wrow, a, arow, reps));
    if (ops->gemm_packed != NULL && ts_quant_pack(type, wp, w, k, nr)) {
        printf("  packed: %.1f GFLOP/s\n",
               run(ops->gemm_packed, k, nr, nc, c, wp, wrow, a, arow, reps));
    }
    free(w);
    free(wp);
    free(a);
    free(x);
    free(c);
    return 0;
}
