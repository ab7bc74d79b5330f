/*
 * cpu_tune.c — measuring which level's gemm is fastest for a weight type and shape class.
 *
 * For each (type, shape class) the candidates are the distinct gemm kernels of the levels
 * from scalar up to the backend's (a level that falls back to a lower level's kernel is the
 * same candidate, kept under the lower name), and each level's gemm on repacked weights
 * (ts_quant_ops.gemm_packed, timed on a packed copy of the same matrix). Each runs over a weight
 * matrix of up to 256 rows x 1024 elements that fits in L2 (so the comparison is of the kernels,
 * not of the memory), in calls of weight rows as MUL_MAT makes them (32 against 1 activation row,
 * 128 against 32). A first timed call of one block drops candidates more than three times slower
 * than the best (the scalar ones, which would otherwise dominate the cost); the rest alternate for
 * seven rounds of about 0.5 ms each, and the smallest time per pass decides, so a burst of
 * load from another process during one round does not. About 10-20 ms per type and class.
 *
 * The weights are real blocks (a few rows quantized by the type's own quantizer and repeated)
 * and the activations real converted rows, so no kernel meets NaN or subnormal scales it
 * would not meet in a model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_tune.h"

#define TUNE_K        1024                /* elements per row */
#define TUNE_BLK      CPU_MM_ROWS_SEVERAL /* the matrix is a whole number of these */
#define TUNE_NC       32                  /* activation rows of the several-rows class */
#define TUNE_W_BYTES  (256 * 1024)        /* weight matrix budget: fits in L2 */
#define TUNE_MAX_ROWS 256
#define TUNE_DISTINCT 8 /* distinct weight rows, repeated over the matrix */
#define TUNE_ROUNDS   7
#define TUNE_SLICE_NS 500000.0 /* time per candidate per round */
#define TUNE_DROP     3.0      /* a first call this many times slower than the best: out */

/* Working memory of one tune call, sized for the largest row type (F32). */
typedef struct tune_mem {
    char *w;  /* [TUNE_MAX_ROWS or fewer rows][ldw] */
    char *wp; /* the same rows packed (ts_quant_pack), for the packed candidates */
    char *a;  /* [TUNE_NC][lda] */
    float *c; /* [TUNE_NC][TUNE_MAX_ROWS] */
    float *f; /* [TUNE_K] */
} tune_mem;

typedef struct tune_case {
    int64_t rows, nc, blk; /* blk: weight rows per gemm call, as MUL_MAT makes them */
    size_t ldw, lda;
    const tune_mem *m;
} tune_case;

/* One candidate: a level's gemm, on the rows or on the packed rows. */
typedef struct tune_cand {
    ts_gemm_fn gemm;
    ts_isa level;
    bool packed;
} tune_cand;

#define TUNE_MAX_CAND (2 * (TS_ISA_AVX512 + 1))

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static size_t row_bytes(ts_type t, int64_t n) {
    size_t out = 0;
    return ts_type_row_bytes((uint32_t)t, (uint64_t)n, &out) ? out : 0;
}

/* A deterministic row of values in [-1, 1) with the spread of real weights. */
static void fill_row(float *f, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < TUNE_K; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        f[i] = (float)((s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
    }
}

/* One pass over the matrix (first_only: its first block only), as MUL_MAT calls gemm. */
static void run_pass(const tune_cand *cd, const tune_case *tc, bool first_only) {
    int64_t end = first_only ? tc->blk : tc->rows;
    const char *w = cd->packed ? tc->m->wp : tc->m->w;
    for (int64_t r0 = 0; r0 < end; r0 += tc->blk) {
        cd->gemm(TUNE_K, tc->blk, tc->nc, tc->m->c + r0, (size_t)TUNE_MAX_ROWS * sizeof(float),
                 w + (size_t)r0 * tc->ldw, tc->ldw, tc->m->a, tc->lda);
    }
}

static double time_passes(const tune_cand *cd, const tune_case *tc, bool first_only, int reps) {
    double t0 = now_ns();
    for (int i = 0; i < reps; i++) {
        run_pass(cd, tc, first_only);
    }
    return (now_ns() - t0) / reps;
}

/* Times every candidate for one shape class: best[i] is candidate i's best time per call, or
 * -1 for a candidate dropped for being far slower on its first call. */
static void measure(const tune_cand *cand, int n, const tune_case *tc, double *best) {
    double first[TUNE_MAX_CAND];
    double fastest_first = 0;
    for (int i = 0; i < n; i++) {
        run_pass(&cand[i], tc, true); /* warm the code and the data */
        first[i] = time_passes(&cand[i], tc, true, 1);
        fastest_first = i == 0 || first[i] < fastest_first ? first[i] : fastest_first;
        best[i] = -1;
    }
    for (int round = 0; round < TUNE_ROUNDS; round++) {
        for (int i = 0; i < n; i++) {
            if (first[i] > TUNE_DROP * fastest_first) {
                continue;
            }
            double per_pass = first[i] * (double)(tc->rows / tc->blk);
            int reps =
                per_pass > 0 && per_pass < TUNE_SLICE_NS ? (int)(TUNE_SLICE_NS / per_pass) : 1;
            double t = time_passes(&cand[i], tc, false, reps);
            best[i] = best[i] < 0 || t < best[i] ? t : best[i];
        }
    }
}

/* One level for both shape classes: the candidate whose times, each relative to the fastest
 * of its class, add up to the least. A type never runs two levels at once because the levels'
 * kernels agree only within rounding: a token's logits would depend on whether it was batched
 * (the batch-invariance contract, docs/quant.md). */
static int pick_level(const double best[CPU_SHAPE_COUNT][TUNE_MAX_CAND], int n) {
    double fastest[CPU_SHAPE_COUNT] = {0};
    for (int s = 0; s < CPU_SHAPE_COUNT; s++) {
        for (int i = 0; i < n; i++) {
            if (best[s][i] > 0 && (fastest[s] == 0 || best[s][i] < fastest[s])) {
                fastest[s] = best[s][i];
            }
        }
    }
    int pick = -1;
    double pick_score = 0;
    for (int i = 0; i < n; i++) {
        double score = 0;
        for (int s = 0; s < CPU_SHAPE_COUNT && score >= 0; s++) {
            score = best[s][i] > 0 && fastest[s] > 0 ? score + best[s][i] / fastest[s] : -1;
        }
        if (score >= 0 && (pick < 0 || score < pick_score)) {
            pick = i;
            pick_score = score;
        }
    }
    return pick >= 0 ? pick : n - 1;
}

/* Measures both shape classes of type t; false when t has no gemm here. */
static bool tune_type(cpu_kernels *k, ts_type t, const tune_mem *m) {
    const ts_quant_ops *top = ts_quant_ops_get(t, k->top);
    if (top == NULL || top->gemm == NULL) {
        return false;
    }
    const ts_quant_ops *act = ts_quant_ops_get(top->vec_dot_type, k->top);
    size_t ldw = row_bytes(t, TUNE_K), lda = row_bytes(top->vec_dot_type, TUNE_K);
    if (act == NULL || act->from_float == NULL || ldw == 0 || lda == 0 ||
        lda > (size_t)TUNE_K * sizeof(float)) {
        return false;
    }
    int64_t rows = (int64_t)(TUNE_W_BYTES / ldw) / TUNE_BLK * TUNE_BLK;
    rows = rows < TUNE_BLK ? TUNE_BLK : rows > TUNE_MAX_ROWS ? TUNE_MAX_ROWS : rows;
    /* The candidates: distinct gemm kernels, each under the lowest level that has it, and
     * their packed forms. */
    tune_cand cand[TUNE_MAX_CAND];
    int n = 0;
    for (int l = TS_ISA_SCALAR; l <= (int)k->top; l++) {
        const ts_quant_ops *o = ts_quant_ops_get(t, (ts_isa)l);
        bool seen = o == NULL || o->gemm == NULL || o->vec_dot_type != top->vec_dot_type;
        for (int i = 0; i < n && !seen; i++) {
            seen = cand[i].gemm == o->gemm;
        }
        if (!seen) {
            cand[n++] = (tune_cand){o->gemm, (ts_isa)l, false};
            if (o->gemm_packed != NULL && ts_quant_packable(t, TUNE_K, rows)) {
                cand[n++] = (tune_cand){o->gemm_packed, (ts_isa)l, true};
            }
        }
    }
    for (int64_t r = 0; r < TUNE_DISTINCT; r++) {
        fill_row(m->f, (uint64_t)r + 1);
        top->from_float(m->f, m->w + (size_t)r * ldw, TUNE_K);
    }
    for (int64_t r = TUNE_DISTINCT; r < rows; r++) {
        memcpy(m->w + (size_t)r * ldw, m->w + (size_t)(r % TUNE_DISTINCT) * ldw, ldw);
    }
    ts_quant_pack(t, m->wp, m->w, TUNE_K, rows); /* false (nothing to do) for unpacked types */
    for (int64_t j = 0; j < TUNE_NC; j++) {
        fill_row(m->f, (uint64_t)j + 100);
        act->from_float(m->f, m->a + (size_t)j * lda, TUNE_K);
    }
    double best[CPU_SHAPE_COUNT][TUNE_MAX_CAND];
    for (int s = 0; s < CPU_SHAPE_COUNT && n > 1; s++) {
        tune_case tc = {rows,
                        s == CPU_SHAPE_ROW ? 1 : TUNE_NC,
                        s == CPU_SHAPE_ROW ? CPU_MM_ROWS_ONE : CPU_MM_ROWS_SEVERAL,
                        ldw,
                        lda,
                        m};
        measure(cand, n, &tc, best[s]);
    }
    int pick = n > 1 ? pick_level(best, n) : 0;
    for (int s = 0; s < CPU_SHAPE_COUNT; s++) {
        k->isa[t][s] = (int8_t)cand[pick].level;
    }
    k->packed[t] = cand[pick].packed;
    return true;
}

ts_status cpu_kernels_tune(cpu_kernels *k, const bool want[TS_TYPE_COUNT], ts_error *err) {
    bool any = false;
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        any = any || (want[t] && cpu_kernels_needs(k, (ts_type)t));
    }
    if (!any) {
        return TS_OK;
    }
    double t0 = now_ns();
    tune_mem m = {
        .w = aligned_alloc(64, TUNE_W_BYTES + (size_t)TUNE_BLK * TUNE_K * sizeof(float)),
        .wp = aligned_alloc(64, TUNE_W_BYTES + (size_t)TUNE_BLK * TUNE_K * sizeof(float)),
        .a = aligned_alloc(64, (size_t)TUNE_NC * TUNE_K * sizeof(float)),
        .c = aligned_alloc(64, (size_t)TUNE_NC * TUNE_MAX_ROWS * sizeof(float)),
        .f = aligned_alloc(64, (size_t)TUNE_K * sizeof(float)),
    };
    ts_status st = TS_OK;
    if (m.w == NULL || m.wp == NULL || m.a == NULL || m.c == NULL || m.f == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cpu: kernel measurement: out of memory");
    }
    bool measured = false;
    for (int t = 0; st == TS_OK && t < TS_TYPE_COUNT; t++) {
        if (want[t] && cpu_kernels_needs(k, (ts_type)t)) {
            measured = tune_type(k, (ts_type)t, &m) || measured;
            k->stale[t] = false;
        }
    }
    free(m.w);
    free(m.wp);
    free(m.a);
    free(m.c);
    free(m.f);
    k->tune_ms += (now_ns() - t0) / 1e6;
    if (measured) {
        cpu_tune_save(k);
    }
    return st;
}

void cpu_kernels_init(cpu_kernels *k, ts_isa top, bool forced, bool retune, bool repack) {
    memset(k, 0, sizeof *k);
    k->top = top;
    k->repack = repack;
    k->forced = forced;
    memset(k->isa, forced ? (int)top : -1, sizeof k->isa);
    if (forced) {
        for (int t = 0; t < TS_TYPE_COUNT; t++) {
            const ts_quant_ops *o = ts_quant_ops_get((ts_type)t, top);
            k->packed[t] = o != NULL && o->gemm_packed != NULL;
        }
        return;
    }
    char dir[sizeof k->path - 160], id[128];
    if (!cpu_cache_dir(dir, sizeof dir)) {
        snprintf(k->notice, sizeof k->notice,
                 "kernel choices are not cached: no cache directory (set TS_CACHE_DIR, "
                 "XDG_CACHE_HOME or HOME)");
        return;
    }
    cpu_id(id, sizeof id);
    snprintf(k->path, sizeof k->path, "%s/kernels-%s.txt", dir, id);
    cpu_tune_load(k);
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        k->stale[t] = retune;
    }
}

void cpu_kernels_describe(const cpu_kernels *k, const bool *want, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        if ((want != NULL && !want[t]) || k->isa[t][0] < 0 || k->isa[t][1] < 0 ||
            ts_quant_ops_get((ts_type)t, k->top) == NULL) {
            continue;
        }
        int n = snprintf(buf + at, size - at, "%s%s %s/%s%s", at > 0 ? ", " : "",
                         ts_type_name((uint32_t)t), ts_isa_name((ts_isa)k->isa[t][0]),
                         ts_isa_name((ts_isa)k->isa[t][1]),
                         cpu_kernels_packed(k, (ts_type)t) ? " packed" : "");
        if (n < 0 || (size_t)n >= size - at) {
            buf[at] = '\0';
            return;
        }
        at += (size_t)n;
    }
}
