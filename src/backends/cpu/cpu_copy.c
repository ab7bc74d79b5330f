/*
 * cpu_copy.c — CPU kernels that move data: GET_ROWS, CPY / CAST / CONT, CONCAT, ARGMAX, and
 * their descriptors. Conversions between types go through the quant layer's to_float /
 * from_float rows, so a type is supported where those exist at the ISA level.
 */
#include <string.h>

#include "backends/cpu/cpu_internal.h"

static char *row_at(const ts_tensor *t, int64_t r) {
    int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static bool get_rows_supports(const ts_tensor *n, ts_isa isa) {
    const ts_quant_ops *ops = ts_quant_ops_get(n->src[0]->type, isa);
    return ops != NULL && ops->to_float != NULL;
}

static void get_rows(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *idx = n->src[1];
    const ts_quant_ops *ops = ts_quant_ops_get(a->type, c->isa);
    int64_t ne0 = a->ne[0], lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t j0 = r % idx->ne[0], j1 = (r / idx->ne[0]) % idx->ne[1];
        int64_t j2 = r / (idx->ne[0] * idx->ne[1]);
        int32_t row;
        memcpy(&row, (const char *)idx->data + j0 * idx->nb[0] + j1 * idx->nb[1] + j2 * idx->nb[2],
               sizeof row);
        float *out = (float *)((char *)n->data + j0 * n->nb[1] + j1 * n->nb[2] + j2 * n->nb[3]);
        if (row >= a->ne[1]) {
            cpu_fail(c, TS_ERR_RANGE,
                     "index %d at [%lld, %lld, %lld] is past the %lld rows of '%s'", (int)row,
                     (long long)j0, (long long)j1, (long long)j2, (long long)a->ne[1], a->name);
            return;
        }
        if (row < 0) {
            memset(out, 0, (size_t)ne0 * sizeof *out);
            continue;
        }
        ops->to_float((const char *)a->data + row * a->nb[1], out, ne0);
    }
}

/* Reads row (a flat row index of t) into f32 dst; tmp may be used. */
static void load_row(const cpu_op_ctx *c, const ts_tensor *t, int64_t r, float *dst) {
    const char *src = row_at(t, r);
    if (ts_tensor_rows_contiguous(t)) {
        ts_quant_ops_get(t->type, c->isa)->to_float(src, dst, t->ne[0]);
        return;
    }
    /* Strided float rows: element by element. */
    const ts_quant_ops *ops = ts_quant_ops_get(t->type, c->isa);
    for (int64_t i = 0; i < t->ne[0]; i++) {
        ops->to_float(src + i * t->nb[0], &dst[i], 1);
    }
}

static void store_row(const cpu_op_ctx *c, const ts_tensor *t, int64_t r, const float *src) {
    char *dst = row_at(t, r);
    const ts_quant_ops *ops = ts_quant_ops_get(t->type, c->isa);
    if (ts_tensor_rows_contiguous(t)) {
        ops->from_float(src, dst, t->ne[0]);
        return;
    }
    for (int64_t i = 0; i < t->ne[0]; i++) {
        ops->from_float(&src[i], dst + i * t->nb[0], 1);
    }
}

/* Raw copy of equal-typed rows (any element strides). */
static void raw_row(const ts_tensor *dst, int64_t rd, const ts_tensor *src, int64_t rs) {
    char *d = row_at(dst, rd);
    const char *s = row_at(src, rs);
    size_t unit = ts_type_block_bytes(src->type);
    int64_t units = src->ne[0] / (int64_t)ts_type_block_size(src->type);
    if (src->nb[0] == unit && dst->nb[0] == unit) {
        memcpy(d, s, unit * (size_t)units);
        return;
    }
    for (int64_t i = 0; i < units; i++) {
        memcpy(d + i * dst->nb[0], s + i * src->nb[0], unit);
    }
}

/* One f32 row of the longer of source and destination (a converted row in flight). */
static void copy_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    const ts_tensor *a = n->src[0];
    *per_thread = (size_t)(a->ne[0] > n->ne[0] ? a->ne[0] : n->ne[0]) * sizeof(float);
}

/* CPY and CAST (CONT keeps the type, so any type is copied as bytes). */
static bool convert_supports(const ts_tensor *n, ts_isa isa) {
    const ts_tensor *a = n->src[0];
    return a->type == n->type ||
           (cpu_type_convertible(a->type, isa) && cpu_type_convertible(n->type, isa));
}

static void copy(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0];
    int64_t lo, hi;
    bool same = a->type == n->type;
    if (a->ne[0] == n->ne[0]) {
        /* Rows map one to one (same row length, same row count). */
        cpu_split(ts_tensor_nrows(a), c->ith, c->nth, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) {
            if (same) {
                raw_row(n, r, a, r);
            } else {
                load_row(c, a, r, c->local);
                store_row(c, n, r, c->local);
            }
        }
        return;
    }
    /* Different row lengths (float types only): element by element in row-major order,
     * split by source rows. */
    const ts_quant_ops *in = ts_quant_ops_get(a->type, c->isa);
    const ts_quant_ops *out = ts_quant_ops_get(n->type, c->isa);
    cpu_split(ts_tensor_nrows(a), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const char *src = row_at(a, r);
        for (int64_t i = 0; i < a->ne[0]; i++) {
            int64_t k = r * a->ne[0] + i;
            int64_t d0 = k % n->ne[0], dr = k / n->ne[0];
            char *dst = row_at(n, dr) + d0 * n->nb[0];
            if (same) {
                memcpy(dst, src + i * a->nb[0], ts_type_block_bytes(a->type));
            } else {
                float v;
                in->to_float(src + i * a->nb[0], &v, 1);
                out->from_float(&v, dst, 1);
            }
        }
    }
}

static void concat(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *b = n->src[1];
    int dim = n->ip[0];
    int64_t lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i[4] = {0, r % n->ne[1], (r / n->ne[1]) % n->ne[2], r / (n->ne[1] * n->ne[2])};
        float *out = (float *)row_at(n, r);
        if (dim == 0) {
            const char *ra =
                (const char *)a->data + i[1] * a->nb[1] + i[2] * a->nb[2] + i[3] * a->nb[3];
            const char *rb =
                (const char *)b->data + i[1] * b->nb[1] + i[2] * b->nb[2] + i[3] * b->nb[3];
            for (int64_t k = 0; k < a->ne[0]; k++) {
                memcpy(&out[k], ra + k * a->nb[0], 4);
            }
            for (int64_t k = 0; k < b->ne[0]; k++) {
                memcpy(&out[a->ne[0] + k], rb + k * b->nb[0], 4);
            }
            continue;
        }
        const ts_tensor *s = a;
        if (i[dim] >= a->ne[dim]) {
            i[dim] -= a->ne[dim];
            s = b;
        }
        const char *rs =
            (const char *)s->data + i[1] * s->nb[1] + i[2] * s->nb[2] + i[3] * s->nb[3];
        for (int64_t k = 0; k < n->ne[0]; k++) {
            memcpy(&out[k], rs + k * s->nb[0], 4);
        }
    }
}

static void argmax(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0];
    int64_t lo, hi;
    cpu_split(ts_tensor_nrows(a), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const char *ra = row_at(a, r);
        float best;
        memcpy(&best, ra, 4);
        int32_t bi = 0;
        for (int64_t i = 1; i < a->ne[0]; i++) {
            float v;
            memcpy(&v, ra + i * a->nb[0], 4);
            if (v > best) {
                best = v;
                bi = (int32_t)i;
            }
        }
        int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        memcpy((char *)n->data + i1 * n->nb[0] + i2 * n->nb[1] + i3 * n->nb[2], &bi, 4);
    }
}

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_GET_ROWS, .run = get_rows, .supports = get_rows_supports},
    {.op = TS_OP_CPY, .run = copy, .scratch = copy_scratch, .supports = convert_supports},
    {.op = TS_OP_CAST, .run = copy, .scratch = copy_scratch, .supports = convert_supports},
    {.op = TS_OP_CONT, .run = copy, .scratch = copy_scratch},
    {.op = TS_OP_CONCAT, .run = concat},
    {.op = TS_OP_ARGMAX, .run = argmax},
};
const cpu_op_table cpu_copy_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
