/*
 * quant_bench.c — throughput of the quant kernels next to the machine's memory bandwidth.
 *
 *   quant_bench [--json] [--quick] [--types Q4_0,Q4_K,...]
 *
 * For every type and every ISA level this CPU runs (scalar, avx2, avxvnni, avx512):
 *   dequant GB/s  quantized bytes read per second by to_float (rows of 4096, 128 MiB matrix)
 *   dot GB/s      weight bytes per second through vec_dot against one activation row
 *   matvec GB/s   the same matrix times one activation row through gemm (blocks of 32 rows,
 *                 as the CPU backend calls it): the decoding path
 *   gemm GFLOP/s  2*k*rows*batch / time for gemm at batch 1, 4 and 16 (4096 x 1024 matrix)
 * The bandwidth line is a single-thread streaming read of a 512 MiB buffer (best of 3); the
 * kernels are single-threaded too, so dequant/dot GB/s compare to it directly. Each kernel
 * is validated against the scalar reference before it is timed; a mismatch aborts the run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double measure_bandwidth(size_t bytes) {
    uint64_t *buf = malloc(bytes);
    if (buf == NULL) {
        return 0.0;
    }
    const size_t n = bytes / sizeof(uint64_t);
    for (size_t i = 0; i < n; i++) {
        buf[i] = i * 0x9E3779B97F4A7C15ull;
    }
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        double t0 = now_s();
        for (size_t i = 0; i + 4 <= n; i += 4) {
            a0 += buf[i];
            a1 += buf[i + 1];
            a2 += buf[i + 2];
            a3 += buf[i + 3];
        }
        double dt = now_s() - t0;
        sink += a0 + a1 + a2 + a3;
        double gbs = (double)bytes / dt / 1e9;
        best = gbs > best ? gbs : best;
    }
    (void)sink;
    free(buf);
    return best;
}

typedef struct result {
    double deq_gbs, dot_gbs, mv_gbs, gemm_gflops[3];
} result;

static const int k_batches[3] = {1, 4, 16};

/* Runs body until at least min_s seconds passed; stores seconds per run in out. */
#define TIME_LOOP(out, min_s, body)                                                                \
    do {                                                                                           \
        int reps_ = 0;                                                                             \
        double t0_ = now_s(), dt_;                                                                 \
        do {                                                                                       \
            body;                                                                                  \
            reps_++;                                                                               \
            dt_ = now_s() - t0_;                                                                   \
        } while (dt_ < (min_s));                                                                   \
        (out) = dt_ / reps_;                                                                       \
    } while (0)

static int bench_type(ts_type type, ts_isa isa, double min_s, result *res) {
    const ts_quant_ops *ops = ts_quant_ops_get(type, isa);
    const ts_quant_ops *ref = ts_quant_ops_get(type, TS_ISA_SCALAR);
    const ts_quant_ops *aops = ts_quant_ops_get(ops->vec_dot_type, isa);
    const int64_t k = 4096;
    size_t wrow = 0, arow = 0;
    if (!ts_type_row_bytes(type, k, &wrow) || !ts_type_row_bytes(ops->vec_dot_type, k, &arow)) {
        return -1;
    }
    int64_t rows = (int64_t)(((size_t)128 << 20) / wrow); /* 4x this host's 32 MiB L3 */
    rows = rows < 1024 ? 1024 : rows;
    uint8_t *w = malloc(wrow * (size_t)rows);
    uint8_t *a = malloc(arow * 16);
    float *x = malloc(sizeof(float) * (size_t)k);
    float *c = malloc(sizeof(float) * 1024 * 16);
    float *mv = malloc(sizeof(float) * (size_t)rows);
    if (!w || !a || !x || !c || !mv) {
        return -1;
    }
    uint64_t s = 12345;
    for (int64_t i = 0; i < k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    for (int64_t r = 0; r < rows; r++) {
        x[r % k] += 0.01f;
        ref->from_float(x, w + (size_t)r * wrow, k);
    }
    for (int j = 0; j < 16; j++) {
        x[j] -= 0.3f;
        aops->from_float(x, a + (size_t)j * arow, k);
    }
    /* Validate before timing. */
    float got, want;
    ops->vec_dot(k, &got, w, a);
    ref->vec_dot(k, &want, w, a);
    if (!(fabsf(got - want) <= 1e-3f * (fabsf(want) + 1.0f))) {
        fprintf(stderr, "%s %s: vec_dot %g != scalar %g\n", ts_type_name(type), ts_isa_name(isa),
                got, want);
        return -1;
    }
    float *deq = malloc(sizeof(float) * (size_t)k);
    volatile float sink = 0.0f;
    double t;
    TIME_LOOP(
        t, min_s, for (int64_t r = 0; r < rows; r++) {
            ops->to_float(w + (size_t)r * wrow, deq, k);
            sink += deq[r % k];
        });
    res->deq_gbs = (double)wrow * (double)rows / t / 1e9;
    TIME_LOOP(
        t, min_s, for (int64_t r = 0; r < rows; r++) {
            float v;
            ops->vec_dot(k, &v, w + (size_t)r * wrow, a);
            sink += v;
        });
    res->dot_gbs = (double)wrow * (double)rows / t / 1e9;
    /* Matrix x vector over the whole matrix, in the row blocks the CPU backend uses. */
    TIME_LOOP(
        t, min_s, for (int64_t r0 = 0; r0 < rows; r0 += 32) {
            const int64_t nr = rows - r0 < 32 ? rows - r0 : 32;
            ops->gemm(k, nr, 1, mv + r0, sizeof(float), w + (size_t)r0 * wrow, wrow, a, arow);
        });
    sink += mv[rows - 1];
    res->mv_gbs = (double)wrow * (double)rows / t / 1e9;
    for (int b = 0; b < 3; b++) {
        const int nc = k_batches[b];
        TIME_LOOP(t, min_s, ops->gemm(k, 1024, nc, c, sizeof(float) * 1024, w, wrow, a, arow));
        res->gemm_gflops[b] = 2.0 * (double)k * 1024.0 * nc / t / 1e9;
    }
    (void)sink;
    free(deq);
    free(mv);
    free(w);
    free(a);
    free(x);
    free(c);
    return 0;
}

int main(int argc, char **argv) {
    int json = 0;
    double min_s = 0.15;
    const char *types =
        "F32,F16,BF16,Q4_0,Q4_1,Q5_0,Q5_1,Q8_0,IQ4_NL,MXFP4,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ4_XS";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            min_s = 0.03;
        } else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
            types = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--json] [--quick] [--types T1,T2,...]\n", argv[0]);
            return 2;
        }
    }
    const double bw = measure_bandwidth((size_t)512 << 20);
    const ts_isa top = ts_quant_cpu_isa();
    if (json) {
        printf("{\"memory_read_gbs\": %.2f, \"cpu_isa\": \"%s\", \"results\": [", bw,
               ts_isa_name(top));
    } else {
        printf("memory bandwidth (1 thread, streaming read): %.2f GB/s; cpu isa: %s\n\n", bw,
               ts_isa_name(top));
        printf("| type | isa | dequant GB/s | dot GB/s | dot %% of bw | matvec GB/s | matvec %% of "
               "bw | gemm b=1 GFLOP/s | b=4 | b=16 |\n|---|---|---|---|---|---|---|---|---|---|\n");
    }
    char list[512];
    snprintf(list, sizeof list, "%s", types);
    int first = 1, status = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        ts_type type;
        if (!ts_type_from_name(tok, &type) || ts_quant_ops_get(type, TS_ISA_SCALAR) == NULL) {
            fprintf(stderr, "unknown or unsupported type '%s'\n", tok);
            return 2;
        }
        for (int isa = TS_ISA_SCALAR; isa <= (int)top; isa++) {
            if (!ts_quant_isa_supported((ts_isa)isa)) {
                continue;
            }
            result r;
            if (bench_type(type, (ts_isa)isa, min_s, &r) != 0) {
                status = 1;
                continue;
            }
            if (json) {
                printf("%s{\"type\": \"%s\", \"isa\": \"%s\", \"dequant_gbs\": %.3f, "
                       "\"dot_gbs\": %.3f, \"matvec_gbs\": %.3f, \"gemm_gflops\": {\"1\": %.2f, "
                       "\"4\": %.2f, "
                       "\"16\": %.2f}}",
                       first ? "" : ", ", tok, ts_isa_name((ts_isa)isa), r.deq_gbs, r.dot_gbs,
                       r.mv_gbs, r.gemm_gflops[0], r.gemm_gflops[1], r.gemm_gflops[2]);
            } else {
                printf("| %s | %s | %.2f | %.2f | %.0f%% | %.2f | %.0f%% | %.1f | %.1f | %.1f |\n",
                       tok, ts_isa_name((ts_isa)isa), r.deq_gbs, r.dot_gbs, 100.0 * r.dot_gbs / bw,
                       r.mv_gbs, 100.0 * r.mv_gbs / bw, r.gemm_gflops[0], r.gemm_gflops[1],
                       r.gemm_gflops[2]);
            }
            fflush(stdout);
            first = 0;
        }
    }
    if (json) {
        printf("]}\n");
    }
    return status;
}
