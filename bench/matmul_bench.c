/*
 * matmul_bench.c — MUL_MAT throughput of the CPU backend per weight type.
 *
 * For each weight type and shape (SmolLM2-135M's FFN: K=576 -> N=1536 and K=1536 -> N=576)
 * and each thread count, the kernel is first validated against the reference backend
 * (normalized RMS error within the tolerance of tests/backends/test_ops.c), then timed:
 *   batch 1  (decode): GB/s of weight bytes streamed — the memory-bandwidth-bound case;
 *   batch 32 (prefill): GFLOP/s (2*K*N*batch per call) — the compute-bound case.
 * Output is a markdown table (or CSV with --csv). K-quants need K % 256 == 0, so they are
 * skipped for K = 576 (llama.cpp quantizes such tensors with a fallback type as well).
 *
 * usage: matmul_bench [--threads 1,2] [--batch 32] [--seconds 0.3] [--csv]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "ir/backend.h"
#include "ir/plan.h"
#include "quant/quant.h"

typedef struct bench_case {
    ts_graph *g;
    ts_tensor *w, *x, *y;
    ts_buffer *wbuf, *xbuf;
} bench_case;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void case_free(bench_case *c) {
    ts_graph_destroy(c->g);
    ts_host_buffer_free(c->wbuf);
    ts_host_buffer_free(c->xbuf);
    memset(c, 0, sizeof *c);
}

static int case_make(bench_case *c, ts_backend *host, ts_type type, int64_t k, int64_t n, int64_t m,
                     ts_error *err) {
    memset(c, 0, sizeof *c);
    if (ts_graph_create(&c->g, NULL, err) != TS_OK) {
        return 0;
    }
    int64_t wn[2] = {k, n}, xn[2] = {k, m};
    c->w = ts_graph_param(c->g, "w", type, 2, wn);
    c->x = ts_graph_param(c->g, "x", TS_TYPE_F32, 2, xn);
    c->y = ts_graph_output(c->g, ts_op_mul_mat(c->g, c->w, c->x));
    if (ts_graph_build(c->g, err) != TS_OK ||
        ts_host_buffer_alloc(ts_tensor_span(c->w), "bench", &c->wbuf, err) != TS_OK ||
        ts_host_buffer_alloc(ts_tensor_span(c->x), "bench", &c->xbuf, err) != TS_OK ||
        ts_tensor_bind(c->w, c->wbuf, 0, err) != TS_OK ||
        ts_tensor_bind(c->x, c->xbuf, 0, err) != TS_OK) {
        return 0;
    }
    uint64_t seed = (uint64_t)type * 977 + (uint64_t)k;
    int64_t nw = k * n, nx = k * m;
    float *v = malloc((size_t)(nw > nx ? nw : nx) * sizeof *v);
    for (int64_t i = 0; i < nw; i++) {
        v[i] = frand(&seed);
    }
    int ok = ts_backend_tensor_set_f32(host, c->w, v, nw, err) == TS_OK;
    for (int64_t i = 0; i < nx; i++) {
        v[i] = frand(&seed);
    }
    ok = ok && ts_backend_tensor_set_f32(host, c->x, v, nx, err) == TS_OK;
    free(v);
    return ok;
}

static float *run_read(bench_case *c, ts_backend *b, ts_error *err) {
    if (ts_graph_alloc(c->g, b, err) != TS_OK || ts_graph_compute(c->g, b, NULL, err) != TS_OK) {
        return NULL;
    }
    int64_t n = ts_tensor_nelements(c->y);
    float *r = malloc((size_t)n * sizeof *r);
    if (ts_backend_tensor_get_f32(b, c->y, r, n, err) != TS_OK) {
        free(r);
        return NULL;
    }
    return r;
}

static double nrmse(const float *a, const float *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1.0));
}

static double tolerance(ts_type type) {
    const ts_quant_ops *ops = ts_quant_ops_get(type, TS_ISA_SCALAR);
    switch (ops->vec_dot_type) {
    case TS_TYPE_F32:
        return 1e-5;
    case TS_TYPE_F16:
        return 2e-3;
    case TS_TYPE_BF16:
        return 1e-2;
    default:
        return 1e-2;
    }
}

int main(int argc, char **argv) {
    int threads[8] = {1, 2}, n_threads = 2, batch = 32, csv = 0;
    double seconds = 0.3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            n_threads = 0;
            for (char *tok = strtok(argv[++i], ","); tok && n_threads < 8;
                 tok = strtok(NULL, ",")) {
                threads[n_threads++] = atoi(tok);
            }
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            batch = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
        } else {
            fprintf(stderr, "usage: %s [--threads 1,2] [--batch 32] [--seconds 0.3] [--csv]\n",
                    argv[0]);
            return 2;
        }
    }
    if (batch < 16 || n_threads == 0) {
        fprintf(stderr, "matmul_bench: --batch must be >= 16 and --threads non-empty\n");
        return 2;
    }
    ts_error err = {0};
    ts_backend *ref = NULL;
    if (ts_ref_backend_create(&ref, &err) != TS_OK) {
        fprintf(stderr, "matmul_bench: %s\n", err.msg);
        return 1;
    }
    const ts_type types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_Q4_0, TS_TYPE_Q4_1,
                             TS_TYPE_Q8_0, TS_TYPE_Q4_K, TS_TYPE_Q6_K};
    const int64_t shapes[2][2] = {{576, 1536}, {1536, 576}};
    printf(csv ? "type,K,N,batch,threads,isa,ms_per_call,gflops,weight_gbs,nrmse\n"
               : "| type | K | N | batch | threads | isa | ms/call | GFLOP/s | weight GB/s | "
                 "nrmse vs ref |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
    int failures = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int si = 0; si < 2; si++) {
            int64_t k = shapes[si][0], n = shapes[si][1];
            if (k % (int64_t)ts_type_block_size(types[ti]) != 0) {
                continue;
            }
            for (int bi = 0; bi < 2; bi++) {
                int64_t m = bi == 0 ? 1 : batch;
                bench_case c;
                if (!case_make(&c, ref, types[ti], k, n, m, &err)) {
                    fprintf(stderr, "matmul_bench: %s: %s\n", ts_type_name(types[ti]), err.msg);
                    return 1;
                }
                float *want = run_read(&c, ref, &err);
                for (int th = 0; th < n_threads; th++) {
                    ts_cpu_params p = {.n_threads = threads[th], .isa = -1};
                    ts_backend *cpu = NULL;
                    if (want == NULL || ts_cpu_backend_create(&p, &cpu, &err) != TS_OK) {
                        fprintf(stderr, "matmul_bench: %s\n", err.msg);
                        return 1;
                    }
                    float *got = run_read(&c, cpu, &err);
                    double e = got ? nrmse(got, want, n * m) : INFINITY;
                    free(got);
                    if (!(e <= tolerance(types[ti]))) {
                        fprintf(stderr, "matmul_bench: %s K=%lld N=%lld: invalid (nrmse %.3g)\n",
                                ts_type_name(types[ti]), (long long)k, (long long)n, e);
                        failures++;
                        ts_graph_free_arena(c.g);
                        ts_backend_destroy(cpu);
                        continue;
                    }
                    int iters = 0;
                    double t0 = now_s(), t1 = t0;
                    while (t1 - t0 < seconds || iters < 3) {
                        ts_graph_compute(c.g, cpu, NULL, &err);
                        iters++;
                        t1 = now_s();
                    }
                    double per = (t1 - t0) / iters;
                    size_t wbytes = ts_tensor_span(c.w);
                    double gflops = 2.0 * (double)k * (double)n * (double)m / per * 1e-9;
                    double gbs = (double)wbytes / per * 1e-9;
                    const char *isa = ts_isa_name(ts_quant_detect_isa());
                    printf(csv ? "%s,%lld,%lld,%lld,%d,%s,%.4f,%.2f,%.2f,%.2g\n"
                               : "| %s | %lld | %lld | %lld | %d | %s | %.4f | %.2f | %.2f | "
                                 "%.2g |\n",
                           ts_type_name(types[ti]), (long long)k, (long long)n, (long long)m,
                           threads[th], isa, per * 1e3, gflops, gbs, e);
                    fflush(stdout);
                    ts_graph_free_arena(c.g);
                    ts_backend_destroy(cpu);
                }
                free(want);
                case_free(&c); /* its arena was last allocated on ref, still alive */
            }
        }
    }
    ts_backend_destroy(ref);
    return failures ? 1 : 0;
}
