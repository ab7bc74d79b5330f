/*
 * ref_internal.h — element access helpers and kernel entry points of the reference backend.
 */
#ifndef TS_BACKENDS_REF_REF_INTERNAL_H
#define TS_BACKENDS_REF_REF_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "ir/ir.h"
#include "quant/quant.h"

/* Address of element (i0, i1, i2, i3) of a non-block tensor. */
static inline void *ref_at(const ts_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Reads a float element (F32, F16, BF16). */
static inline float ref_getf(const ts_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                             int64_t i3) {
    const void *p = ref_at(t, i0, i1, i2, i3);
    uint16_t h;
    float f;
    switch (t->type) {
    case TS_TYPE_F16:
        memcpy(&h, p, 2);
        return ts_f16_to_f32(h);
    case TS_TYPE_BF16:
        memcpy(&h, p, 2);
        return ts_bf16_to_f32(h);
    default:
        memcpy(&f, p, 4);
        return f;
    }
}

/* Writes a float element (F32, F16, BF16). */
static inline void ref_setf(const ts_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                            float v) {
    void *p = ref_at(t, i0, i1, i2, i3);
    uint16_t h;
    switch (t->type) {
    case TS_TYPE_F16:
        h = ts_f32_to_f16(v);
        memcpy(p, &h, 2);
        break;
    case TS_TYPE_BF16:
        h = ts_f32_to_bf16(v);
        memcpy(p, &h, 2);
        break;
    default:
        memcpy(p, &v, 4);
        break;
    }
}

static inline int32_t ref_geti(const ts_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
    int32_t v;
    memcpy(&v, ref_at(t, i0, i1, i2, 0), 4);
    return v;
}

/* Reads row (i1, i2, i3) of any readable type into dst[ne0] floats. */
void ref_read_row(const ts_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *dst);

/* Kernels: compute node from its sources; errors name the node. */
ts_status ref_get_rows(ts_tensor *n, ts_error *err);
ts_status ref_mul_mat(ts_tensor *n, ts_error *err);
ts_status ref_binary(ts_tensor *n, ts_error *err); /* ADD, MUL */
ts_status ref_unary(ts_tensor *n, ts_error *err);  /* SCALE, SILU, GELU, SIGMOID */
ts_status ref_glu(ts_tensor *n, ts_error *err);    /* SWIGLU, GEGLU */
ts_status ref_norm(ts_tensor *n, ts_error *err);   /* RMS_NORM, NORM */
ts_status ref_rope(ts_tensor *n, ts_error *err);
ts_status ref_softmax(ts_tensor *n, ts_error *err);
ts_status ref_copy(ts_tensor *n, ts_error *err);   /* CPY, CAST, CONT */
ts_status ref_concat(ts_tensor *n, ts_error *err);
ts_status ref_argmax(ts_tensor *n, ts_error *err);
ts_status ref_kv_store(ts_tensor *n, ts_error *err);
ts_status ref_attention(ts_tensor *n, ts_error *err);
ts_status ref_attn_mask(ts_tensor *n, ts_error *err);
ts_status ref_topk(ts_tensor *n, ts_error *err);       /* ref_moe.c */
ts_status ref_gather(ts_tensor *n, ts_error *err);     /* ref_moe.c */
ts_status ref_mul_mat_id(ts_tensor *n, ts_error *err); /* ref_moe.c */
/* ALL_REDUCE_SUM, ALL_GATHER, REDUCE_SCATTER_SUM through g's communicator. */
ts_status ref_collective(ts_graph *g, ts_tensor *n, ts_error *err);

#endif /* TS_BACKENDS_REF_REF_INTERNAL_H */
