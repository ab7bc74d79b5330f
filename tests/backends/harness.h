/*
 * harness.h — helpers for running one graph on several backends and comparing outputs.
 *
 * Parameters are bound to host buffers owned by the harness (so every backend reads the
 * same bytes) and filled with seeded random values; each backend allocates its own arena.
 */
#ifndef TS_TESTS_BACKENDS_HARNESS_H
#define TS_TESTS_BACKENDS_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/backend.h"
#include "ir/ir.h"
#include "ir/plan.h"

#define H_MAX_BUFS 64

typedef struct harness {
    ts_graph *g;
    ts_backend *host; /* used to write parameters (any host backend) */
    ts_buffer *bufs[H_MAX_BUFS];
    int n_bufs;
    uint64_t rng;
} harness;

static inline float h_rand(harness *h) {
    h->rng ^= h->rng << 13;
    h->rng ^= h->rng >> 7;
    h->rng ^= h->rng << 17;
    return (float)((h->rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* Starts a graph whose functionals use reg (NULL: built-in defaults). */
static inline void h_init_reg(harness *h, ts_backend *host, uint64_t seed, ts_registry *reg) {
    memset(h, 0, sizeof *h);
    h->host = host;
    h->rng = seed * 2654435761u + 88172645463325252ull;
    ts_error err = {0};
    if (ts_graph_create(&h->g, reg, &err) != TS_OK) {
        fprintf(stderr, "graph_create: %s\n", err.msg);
        abort();
    }
}

static inline void h_init(harness *h, ts_backend *host, uint64_t seed) {
    h_init_reg(h, host, seed, NULL);
}

static inline void h_free(harness *h) {
    ts_graph_destroy(h->g);
    for (int i = 0; i < h->n_bufs; i++) {
        ts_host_buffer_free(h->bufs[i]);
    }
    h->g = NULL;
    h->n_bufs = 0;
}

/* A parameter leaf bound to its own zeroed host buffer. */
static inline ts_tensor *h_param(harness *h, const char *name, ts_type type, int n_dims,
                                 const int64_t *ne) {
    ts_tensor *t = ts_graph_param(h->g, name, type, n_dims, ne);
    if (t == NULL || h->n_bufs == H_MAX_BUFS) {
        return NULL;
    }
    ts_error err = {0};
    size_t span = ts_tensor_span(t);
    ts_buffer *buf = NULL;
    if (ts_host_buffer_alloc(span, "test", &buf, &err) != TS_OK) {
        return NULL;
    }
    memset(buf->host, 0, span);
    h->bufs[h->n_bufs++] = buf;
    if (ts_tensor_bind(t, buf, 0, &err) != TS_OK) {
        fprintf(stderr, "bind: %s\n", err.msg);
        return NULL;
    }
    return t;
}

/* Fills t (a parameter) with uniform values in [-scale, scale]. */
static inline int h_fill(harness *h, ts_tensor *t, float scale) {
    int64_t n = ts_tensor_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = h_rand(h) * scale;
    }
    ts_error err = {0};
    ts_status st = ts_backend_tensor_set_f32(h->host, t, v, n, &err);
    free(v);
    if (st != TS_OK) {
        fprintf(stderr, "fill '%s': %s\n", t->name, err.msg);
    }
    return st == TS_OK;
}

static inline int h_set_i32(harness *h, ts_tensor *t, const int32_t *v, int64_t n) {
    ts_error err = {0};
    if ((size_t)n * 4 != ts_tensor_span(t) ||
        ts_backend_tensor_set(h->host, t, 0, v, (size_t)n * 4, &err) != TS_OK) {
        fprintf(stderr, "set_i32 '%s': %s\n", t->name, err.msg);
        return 0;
    }
    return 1;
}

/* Builds (once), allocates on b, runs and reads `out` as f32 into a new array. */
static inline float *h_run(harness *h, ts_backend *b, ts_tensor *out, ts_error *err) {
    if (ts_graph_plan(h->g) == NULL && ts_graph_build(h->g, err) != TS_OK) {
        return NULL;
    }
    if (ts_graph_alloc(h->g, b, err) != TS_OK || ts_graph_compute(h->g, b, NULL, err) != TS_OK) {
        return NULL;
    }
    int64_t n = ts_tensor_nelements(out);
    float *r = malloc((size_t)n * sizeof *r);
    if (ts_backend_tensor_get_f32(b, out, r, n, err) != TS_OK) {
        free(r);
        return NULL;
    }
    return r;
}

/* Normalized RMS error sqrt(sum (a-b)^2 / sum b^2) (absolute RMS when b is ~0); NaN/inf
 * mismatches count as infinite error. */
static inline double h_nrmse(const float *a, const float *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]) || (isinf(a[i]) && a[i] != b[i])) {
            return INFINITY;
        }
        if (isinf(b[i]) || isnan(b[i])) {
            continue;
        }
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 1e-20 * (double)n ? sqrt(num / den) : sqrt(num / (double)(n > 0 ? n : 1));
}

static inline double h_max_abs(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        m = d > m ? d : m;
    }
    return m;
}

#endif /* TS_TESTS_BACKENDS_HARNESS_H */
