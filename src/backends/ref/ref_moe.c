/*
 * ref_moe.c — reference kernels of the mixture-of-experts ops: TOPK, GATHER and MUL_MAT_ID
 * (semantics in ir.h). Plain loops in the op's own terms: MUL_MAT_ID computes each output
 * element as one dot product of the routed expert's weight row with the token's activation
 * row, in double, like the reference MUL_MAT.
 */
#include <math.h>
#include <stdlib.h>

#include "backends/ref/ref_internal.h"
#include "util/error.h"

/* Whether element (v, i) comes before (u, j) in TOPK's order: larger first, NaN last, equal
 * values (and NaNs) by index. */
static bool before(float v, int64_t i, float u, int64_t j) {
    if (isnan(v) || isnan(u)) {
        return isnan(v) == isnan(u) ? i < j : !isnan(v);
    }
    return v > u || (v == u && i < j);
}

ts_status ref_topk(ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0];
    int64_t ne0 = a->ne[0], k = n->ip[0];
    bool *taken = malloc((size_t)ne0 * sizeof *taken);
    if (taken == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ref: TOPK '%s': out of memory", n->name);
    }
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i = 0; i < ne0; i++) {
                    taken[i] = false;
                }
                /* Selection: k passes, each taking the first remaining element in order. */
                for (int64_t j = 0; j < k; j++) {
                    int64_t best = -1;
                    for (int64_t i = 0; i < ne0; i++) {
                        if (!taken[i] &&
                            (best < 0 || before(ref_getf(a, i, i1, i2, i3), i,
                                                ref_getf(a, best, i1, i2, i3), best))) {
                            best = i;
                        }
                    }
                    taken[best] = true;
                    int32_t v = (int32_t)best;
                    memcpy(ref_at(n, j, i1, i2, i3), &v, 4);
                }
            }
        }
    }
    free(taken);
    return TS_OK;
}

ts_status ref_gather(ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0], *idx = n->src[1];
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++) {
                for (int64_t j = 0; j < n->ne[0]; j++) {
                    int32_t i;
                    memcpy(&i, ref_at(idx, j, i1, i2, i3), 4);
                    if (i < 0 || i >= a->ne[0]) {
                        return ts_error_set(err, TS_ERR_RANGE,
                                            "GATHER '%s': index %d at [%lld, %lld, %lld, %lld] is "
                                            "outside the %lld elements of a row of '%s'",
                                            n->name, (int)i, (long long)j, (long long)i1,
                                            (long long)i2, (long long)i3, (long long)a->ne[0],
                                            a->name);
                    }
                    ref_setf(n, j, i1, i2, i3, ref_getf(a, i, i1, i2, i3));
                }
            }
        }
    }
    return TS_OK;
}

ts_status ref_mul_mat_id(ts_tensor *n, ts_error *err) {
    const ts_tensor *w = n->src[0], *x = n->src[1], *ids = n->src[2];
    int64_t k = w->ne[0];
    float *wrow = malloc((size_t)k * sizeof *wrow);
    if (wrow == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ref: MUL_MAT_ID '%s': out of memory", n->name);
    }
    for (int64_t t = 0; t < n->ne[2]; t++) {
        for (int64_t e = 0; e < n->ne[1]; e++) {
            int32_t ex = ref_geti(ids, e, t, 0);
            if (ex < 0 || ex >= w->ne[2]) {
                free(wrow);
                return ts_error_set(err, TS_ERR_RANGE,
                                    "MUL_MAT_ID '%s': expert id %d at [%lld, %lld] is outside "
                                    "the %lld experts of '%s'",
                                    n->name, (int)ex, (long long)e, (long long)t,
                                    (long long)w->ne[2], w->name);
            }
            int64_t xe = x->ne[1] == 1 ? 0 : e;
            for (int64_t i = 0; i < n->ne[0]; i++) {
                ref_read_row(w, i, ex, 0, wrow);
                double acc = 0.0;
                for (int64_t kk = 0; kk < k; kk++) {
                    acc += (double)wrow[kk] * (double)ref_getf(x, kk, xe, t, 0);
                }
                ref_setf(n, i, e, t, 0, (float)acc);
            }
        }
    }
    free(wrow);
    return TS_OK;
}
