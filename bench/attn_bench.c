/*
 * attn_bench.c — decoding ATTENTION of the CPU backend at long context, per K/V cache type.
 *
 * One decoding token of one sequence attends over `depth` cached keys through a block table,
 * as one layer of a model does per generated token. The shape is Llama 3.2 1B's (head_dim 64,
 * 32 query heads, 8 KV heads, 16 layers, blocks of 16 tokens); the cache holds random values
 * stored in each type. Each case is first validated against the reference backend (normalized
 * RMS error <= 1e-5: both read the same stored values), then timed: the cases are run in
 * rounds, every type once per round, so that a busy machine slows them alike; the figure is
 * the median over the rounds of each round's mean time per call. Printed per case: microseconds
 * per layer, milliseconds per token for all 16 layers (the attention's share of a decoding
 * step at that depth), and GB/s of K and V bytes read, from wall time; and the CPU time per
 * layer (all threads), which on a machine busy with other work is the steadier figure.
 *
 * usage: attn_bench [--depth 4096,16384,32768] [--types f16:f16,q8_0:q4_0,...] [--threads 2]
 *                   [--rounds 5] [--seconds 0.2] [--csv]
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

enum { HD = 64, NH = 32, NKV = 8, BS = 16, N_LAYER = 16, MAX_LIST = 16 };

typedef struct type_pair {
    ts_type k, v;
    const char *kn, *vn;
} type_pair;

typedef struct bench_case {
    ts_graph *g;
    ts_tensor *q, *k, *v, *tab, *seq, *pos, *len, *out;
    ts_buffer *bufs[7];
    int64_t depth;
    double bytes; /* K and V bytes one call reads */
} bench_case;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of all the process's threads: on a machine shared with other work, the time
 * the kernel itself took, where wall time also counts waiting for a core. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static bool type_of(const char *name, ts_type *out) {
    static const struct {
        const char *name;
        ts_type type;
    } k[] = {{"f32", TS_TYPE_F32},   {"f16", TS_TYPE_F16},   {"bf16", TS_TYPE_BF16},
             {"q8_0", TS_TYPE_Q8_0}, {"q5_0", TS_TYPE_Q5_0}, {"q4_0", TS_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (strcmp(name, k[i].name) == 0) {
            *out = k[i].type;
            return true;
        }
    }
    return false;
}

static void case_free(bench_case *c) {
    ts_graph_destroy(c->g);
    for (int i = 0; i < 7; i++) {
        ts_host_buffer_free(c->bufs[i]);
    }
    memset(c, 0, sizeof *c);
}

/* The graph and its inputs: the cache of depth keys in blocks taken in a scattered order (as
 * a pool shared by many sequences hands them out). */
static int case_make(bench_case *c, ts_backend *host, const type_pair *tp, int64_t depth,
                     ts_error *err) {
    memset(c, 0, sizeof *c);
    c->depth = depth;
    int64_t nblk = (depth + BS - 1) / BS;
    if (ts_graph_create(&c->g, NULL, err) != TS_OK) {
        return 0;
    }
    int64_t qn[3] = {HD, NH, 1}, cn[4] = {HD, NKV, BS, nblk}, tn[2] = {nblk, 1}, one[1] = {1};
    c->q = ts_graph_param(c->g, "q", TS_TYPE_F32, 3, qn);
    c->k = ts_graph_param(c->g, "k", tp->k, 4, cn);
    c->v = ts_graph_param(c->g, "v", tp->v, 4, cn);
    c->tab = ts_graph_param(c->g, "table", TS_TYPE_I32, 2, tn);
    c->seq = ts_graph_param(c->g, "seq", TS_TYPE_I32, 1, one);
    c->pos = ts_graph_param(c->g, "pos", TS_TYPE_I32, 1, one);
    c->len = ts_graph_param(c->g, "len", TS_TYPE_I32, 1, one);
    c->out = ts_graph_output(c->g, ts_op_attention(c->g, c->q, c->k, c->v, c->tab, c->seq, c->pos,
                                                   c->len, 0.125f, 0.0f, 0));
    if (ts_graph_build(c->g, err) != TS_OK) {
        return 0;
    }
    ts_tensor *ins[7] = {c->q, c->k, c->v, c->tab, c->seq, c->pos, c->len};
    for (int i = 0; i < 7; i++) {
        if (ts_host_buffer_alloc(ts_tensor_span(ins[i]), "bench", &c->bufs[i], err) != TS_OK ||
            ts_tensor_bind(ins[i], c->bufs[i], 0, err) != TS_OK) {
            return 0;
        }
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)depth;
    int64_t nc = HD * NKV * BS * nblk;
    float *vals = malloc((size_t)nc * sizeof *vals);
    int32_t *table = malloc((size_t)nblk * sizeof *table);
    if (vals == NULL || table == NULL) {
        free(vals);
        free(table);
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        int64_t n = i == 0 ? HD * NH : nc;
        for (int64_t j = 0; j < n; j++) {
            vals[j] = frand(&rng);
        }
        ok = ts_backend_tensor_set_f32(host, ins[i], vals, n, err) == TS_OK;
    }
    /* Block b of the sequence is pool block (b * 7919) % nblk when that is a permutation
     * (7919 is prime: whenever it does not divide nblk). */
    for (int64_t b = 0; b < nblk; b++) {
        table[b] = nblk % 7919 != 0 ? (int32_t)((b * 7919) % nblk) : (int32_t)b;
    }
    int32_t s = 0, p = (int32_t)depth - 1, l = (int32_t)depth;
    ok = ok &&
         ts_backend_tensor_set(host, c->tab, 0, table, (size_t)nblk * sizeof *table, err) == TS_OK;
    ok = ok && ts_backend_tensor_set(host, c->seq, 0, &s, sizeof s, err) == TS_OK;
    ok = ok && ts_backend_tensor_set(host, c->pos, 0, &p, sizeof p, err) == TS_OK;
    ok = ok && ts_backend_tensor_set(host, c->len, 0, &l, sizeof l, err) == TS_OK;
    free(vals);
    free(table);
    size_t rk = 0, rv = 0;
    ts_type_row_bytes((uint32_t)tp->k, HD, &rk);
    ts_type_row_bytes((uint32_t)tp->v, HD, &rv);
    c->bytes = (double)depth * NKV * (double)(rk + rv);
    return ok;
}

static float *run_read(bench_case *c, ts_backend *b, ts_error *err) {
    if (ts_graph_alloc(c->g, b, err) != TS_OK || ts_graph_compute(c->g, b, NULL, err) != TS_OK) {
        return NULL;
    }
    float *r = malloc(HD * NH * sizeof *r);
    if (r != NULL && ts_backend_tensor_get_f32(b, c->out, r, HD * NH, err) != TS_OK) {
        free(r);
        r = NULL;
    }
    ts_graph_free_arena(c->g);
    return r;
}

static double nrmse(const float *a, const float *b, int64_t n) {
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++) {
        se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        sr += (double)b[i] * b[i];
    }
    return sr > 0 ? sqrt(se / sr) : sqrt(se);
}

static int parse_list(const char *s, int64_t *out) {
    int n = 0;
    while (*s != '\0' && n < MAX_LIST) {
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || v > (1 << 22)) {
            return -1;
        }
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') {
            return -1;
        }
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    int64_t depths[MAX_LIST] = {4096, 16384, 32768}, threads = 2;
    int n_depth = 3, rounds = 5;
    double seconds = 0.2;
    bool csv = false;
    const char *types = "f16:f16,bf16:bf16,q8_0:q8_0,q5_0:q5_0,q4_0:q4_0,q8_0:q4_0";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--csv") == 0) {
            csv = true;
        } else if (strcmp(argv[i], "--depth") == 0 && v != NULL) {
            n_depth = parse_list(v, depths);
            i++;
        } else if (strcmp(argv[i], "--types") == 0 && v != NULL) {
            types = v;
            i++;
        } else if (strcmp(argv[i], "--threads") == 0 && v != NULL) {
            threads = strtoll(v, NULL, 10);
            i++;
        } else if (strcmp(argv[i], "--rounds") == 0 && v != NULL) {
            rounds = atoi(v);
            i++;
        } else if (strcmp(argv[i], "--seconds") == 0 && v != NULL) {
            seconds = atof(v);
            i++;
        } else {
            fprintf(stderr, "usage: attn_bench [--depth 4096,16384,32768] [--types f16:f16,...] "
                            "[--threads 2] [--rounds 5] [--seconds 0.2] [--csv]\n");
            return 2;
        }
    }
    if (n_depth < 1 || threads < 1 || threads > 256 || rounds < 1 || rounds > 64 ||
        !(seconds > 0)) {
        fprintf(stderr, "attn_bench: bad option value\n");
        return 2;
    }
    type_pair pairs[MAX_LIST];
    int n_pairs = 0;
    char list[512];
    snprintf(list, sizeof list, "%s", types);
    for (char *tok = strtok(list, ","); tok != NULL && n_pairs < MAX_LIST;
         tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':');
        type_pair *tp = &pairs[n_pairs];
        if (colon != NULL) {
            *colon = '\0';
        }
        tp->kn = strdup(tok);
        tp->vn = strdup(colon != NULL ? colon + 1 : tok);
        if (!type_of(tp->kn, &tp->k) || !type_of(tp->vn, &tp->v)) {
            fprintf(stderr, "attn_bench: unknown type in '%s:%s'\n", tp->kn, tp->vn);
            return 2;
        }
        n_pairs++;
    }
    ts_error err = {0};
    ts_backend *ref = NULL, *cpu = NULL;
    ts_cpu_params cp = {.n_threads = (int)threads, .isa = -1};
    if (ts_ref_backend_create(&ref, &err) != TS_OK ||
        ts_cpu_backend_create(&cp, &cpu, &err) != TS_OK) {
        fprintf(stderr, "attn_bench: %s\n", err.msg);
        return 1;
    }
    if (csv) {
        printf("depth,k,v,threads,us_per_layer,ms_per_token_16_layers,kv_gbs,cpu_us_per_layer,"
               "nrmse\n");
    } else {
        printf("attention of one decoding token, Llama 3.2 1B shape (head_dim %d, %d/%d heads), "
               "%lld threads, ISA %s; median of %d rounds\n\n",
               HD, NH, NKV, (long long)threads, ts_isa_name(ts_quant_detect_isa()), rounds);
        printf("| depth | K | V | us / layer | ms / token (%d layers) | KV GB/s | CPU us / layer | "
               "nrmse vs ref |\n|---:|---|---|---:|---:|---:|---:|---:|\n",
               N_LAYER);
    }
    int rc = 0;
    for (int di = 0; di < n_depth && rc == 0; di++) {
        bench_case cases[MAX_LIST];
        memset(cases, 0, sizeof cases);
        double err_v[MAX_LIST], times[MAX_LIST][64], cpu_times[MAX_LIST][64];
        for (int pi = 0; pi < n_pairs && rc == 0; pi++) {
            if (!case_make(&cases[pi], ref, &pairs[pi], depths[di], &err)) {
                fprintf(stderr, "attn_bench: %s\n", err.msg);
                rc = 1;
                break;
            }
            float *want = run_read(&cases[pi], ref, &err);
            float *got = want != NULL ? run_read(&cases[pi], cpu, &err) : NULL;
            if (got == NULL) {
                fprintf(stderr, "attn_bench: %s\n", err.msg);
                rc = 1;
            } else {
                err_v[pi] = nrmse(got, want, HD * NH);
                if (!(err_v[pi] <= 1e-5)) {
                    fprintf(stderr, "attn_bench: %s/%s at depth %lld: nrmse %.3g vs ref\n",
                            pairs[pi].kn, pairs[pi].vn, (long long)depths[di], err_v[pi]);
                    rc = 1;
                }
            }
            free(want);
            free(got);
        }
        for (int r = 0; r < rounds && rc == 0; r++) {
            for (int pi = 0; pi < n_pairs; pi++) {
                bench_case *c = &cases[pi];
                ts_graph_alloc(c->g, cpu, &err);
                ts_graph_compute(c->g, cpu, NULL, &err); /* warm */
                int64_t calls = 0;
                double t0 = now_s(), t = t0, c0 = cpu_s();
                while (t - t0 < seconds) {
                    ts_graph_compute(c->g, cpu, NULL, &err);
                    calls++;
                    t = now_s();
                }
                cpu_times[pi][r] = (cpu_s() - c0) / (double)calls;
                ts_graph_free_arena(c->g);
                times[pi][r] = (t - t0) / (double)calls;
            }
        }
        for (int pi = 0; pi < n_pairs && rc == 0; pi++) {
            double t = median(times[pi], rounds), ct = median(cpu_times[pi], rounds);
            double gbs = cases[pi].bytes / t / 1e9;
            if (csv) {
                printf("%lld,%s,%s,%lld,%.2f,%.3f,%.2f,%.2f,%.2g\n", (long long)depths[di],
                       pairs[pi].kn, pairs[pi].vn, (long long)threads, t * 1e6, t * 1e3 * N_LAYER,
                       gbs, ct * 1e6, err_v[pi]);
            } else {
                printf("| %lld | %s | %s | %.1f | %.2f | %.2f | %.1f | %.1e |\n",
                       (long long)depths[di], pairs[pi].kn, pairs[pi].vn, t * 1e6,
                       t * 1e3 * N_LAYER, gbs, ct * 1e6, err_v[pi]);
            }
            fflush(stdout);
        }
        for (int pi = 0; pi < n_pairs; pi++) {
            case_free(&cases[pi]);
        }
    }
    for (int pi = 0; pi < n_pairs; pi++) {
        free((char *)pairs[pi].kn);
        free((char *)pairs[pi].vn);
    }
    ts_backend_destroy(cpu);
    ts_backend_destroy(ref);
    return rc;
}
