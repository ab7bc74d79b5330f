/*
 * api_util.h — what the tests of include/tessera.h share: a tiny random-weight model written to
 * a temporary file and opened, contexts with small test defaults, greedy argmax, and the check
 * behind the error rule (every entry point that takes a ts_error accepts NULL).
 *
 * Like the tests themselves this sees only the public API and the tiny model writer; include
 * it after <cmocka.h>. Every function is static inline so that each test program uses what it
 * needs.
 */
#ifndef TS_TESTS_API_UTIL_H
#define TS_TESTS_API_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tiny_model.h"
#include "tessera.h"

/* A tiny model on disk and opened. */
typedef struct api_model {
    char path[512];
    ts_tiny_spec spec;
    ts_llm *llm;
} api_model;

/* Writes spec to a fresh temporary file and opens it (whole model). */
static inline void api_model_open(api_model *m, const ts_tiny_spec *spec, const char *tag) {
    memset(m, 0, sizeof *m);
    m->spec = *spec;
    assert_non_null(ts_tiny_temp_path(m->path, sizeof m->path, tag));
    ts_error err = {0};
    if (ts_tiny_write(spec, m->path, &err) != TS_OK ||
        ts_llm_open(m->path, NULL, &m->llm, &err) != TS_OK) {
        fail_msg("tiny model %s: %s", m->path, err.msg);
    }
}

static inline void api_model_close(api_model *m) {
    ts_llm_close(m->llm);
    m->llm = NULL;
    if (m->path[0] != '\0') {
        unlink(m->path);
        m->path[0] = '\0';
    }
}

/* cmocka group setup / teardown: the default tiny llama as the group's state. */
static inline int api_group_setup(void **state) {
    api_model *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return -1;
    }
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    api_model_open(m, &spec, "api");
    *state = m;
    return 0;
}

static inline int api_group_teardown(void **state) {
    api_model *m = *state;
    if (m != NULL) {
        api_model_close(m);
        free(m);
    }
    return 0;
}

/* The parameters the tests start from: the defaults with two threads (results do not depend
 * on the thread count, and the machines running tests are small). */
static inline ts_context_params api_params(void) {
    ts_context_params p = ts_context_params_default();
    p.n_threads = 2;
    return p;
}

/* Makes a context that must succeed. */
static inline ts_context *api_context(ts_llm *llm, const ts_context_params *p) {
    ts_context *ctx = NULL;
    ts_error err = {0};
    if (ts_context_create(llm, p, &ctx, &err) != TS_OK) {
        fail_msg("ts_context_create: %s", err.msg);
    }
    assert_non_null(ctx);
    return ctx;
}

/* Index of the largest value (the first of equal ones). */
static inline int32_t api_argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        best = v[i] > v[best] ? i : best;
    }
    return best;
}

/* Largest |a - b| over n values. */
static inline double api_max_abs_diff(const float *a, const float *b, int64_t n) {
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* Largest |b| over n values. */
static inline double api_max_abs(const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return m;
}

/* Decodes tokens [0, n) of one sequence as one batch, logits for the last token only. */
static inline ts_status api_decode_seq(ts_context *ctx, const int32_t *tokens, int32_t n,
                                       int32_t seq, ts_error *err) {
    int32_t seqs[512];
    assert_true(n > 0 && n <= 512);
    for (int32_t i = 0; i < n; i++) {
        seqs[i] = seq;
    }
    ts_decode_batch b = {.n_tokens = n, .tokens = tokens, .seq = seqs};
    return ts_context_decode(ctx, &b, err);
}

/* The error rule, checked for one call: both runs (error buffer NULL, then a buffer) return
 * `want`, and the buffer holds `want` and a message containing `needle`. */
static inline void api_check_err(const char *call, int line, ts_status want, const char *needle,
                                 ts_status with_null, ts_status with_buf, const ts_error *buf) {
    if (with_null != want || with_buf != want || buf->status != want || buf->msg[0] == '\0' ||
        strstr(buf->msg, needle) == NULL) {
        fail_msg("line %d: %s\n  want %s and a message with '%s'\n  got %s (err NULL), %s "
                 "(buffer; status field %s): '%s'",
                 line, call, ts_status_str(want), needle, ts_status_str(with_null),
                 ts_status_str(with_buf), ts_status_str(buf->status), buf->msg);
    }
}

/* Runs `call` twice: first with the identifier E bound to NULL, then to an error buffer, and
 * checks both with api_check_err. The call must name its error argument E. */
#define API_CHECK_ERR(want, needle, call)                                                          \
    do {                                                                                           \
        ts_error *E = NULL;                                                                        \
        ts_status api_null_ = (call);                                                              \
        ts_error api_buf_;                                                                         \
        memset(&api_buf_, 0, sizeof api_buf_);                                                     \
        E = &api_buf_;                                                                             \
        ts_status api_with_ = (call);                                                              \
        api_check_err(#call, __LINE__, (want), (needle), api_null_, api_with_, &api_buf_);         \
    } while (0)

#endif /* TS_TESTS_API_UTIL_H */
