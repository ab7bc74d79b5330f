/*
 * cuda_harness.h — running a harness graph (harness.h) on the CUDA backend.
 *
 * The harness binds every parameter to a host buffer, which the reference reads directly.
 * For a CUDA run each parameter's bytes are copied to a device buffer and the parameter is
 * bound there for the run, then bound back to its host buffer, so both backends read the same
 * bytes. A test program without a CUDA device reports itself not run (tests/common/skip.h).
 */
#ifndef TS_TESTS_BACKENDS_CUDA_HARNESS_H
#define TS_TESTS_BACKENDS_CUDA_HARNESS_H

#include "backends/cuda/cuda.h"
#include "backends/harness.h"

typedef struct cuda_mirror {
    ts_tensor *t;
    ts_buffer *host;
    size_t offset;
    ts_buffer *dev;
} cuda_mirror;

/* Runs h's graph on cu with every parameter mirrored to device memory; reads `out` as f32
 * into a new array (NULL with err set on failure). */
static inline float *h_run_cuda(harness *h, ts_backend *cu, ts_tensor *out, ts_error *err) {
    cuda_mirror m[H_MAX_BUFS];
    int n = 0;
    float *r = NULL;
    ts_status st = TS_OK;
    for (int i = 0; i < ts_graph_n_tensors(h->g) && st == TS_OK; i++) {
        ts_tensor *t = ts_graph_tensor(h->g, i);
        if (!(t->flags & TS_TENSOR_PARAM) || t->buffer == NULL || n == H_MAX_BUFS) {
            continue;
        }
        m[n] = (cuda_mirror){t, t->buffer, t->offset, NULL};
        st = ts_backend_buffer_alloc(cu, t->buffer->size, &m[n].dev, err);
        if (st == TS_OK) {
            n++;
            st = ts_backend_buffer_set(cu, m[n - 1].dev, 0, t->buffer->host, t->buffer->size, err);
        }
        if (st == TS_OK) {
            st = ts_tensor_bind(t, m[n - 1].dev, m[n - 1].offset, err);
        }
    }
    if (st == TS_OK) {
        r = h_run(h, cu, out, err);
    }
    for (int i = 0; i < n; i++) {
        ts_error ignored = {0};
        ts_tensor_bind(m[i].t, m[i].host, m[i].offset, &ignored);
        ts_backend_buffer_free(cu, m[i].dev);
    }
    return r;
}

#endif /* TS_TESTS_BACKENDS_CUDA_HARNESS_H */
