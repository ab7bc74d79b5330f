/*
 * cpu_matmul.c — threaded MUL_MAT for the CPU backend, with its scratch and support rules.
 *
 * MUL_MAT runs in two phases. (1) The activation rows are converted once into the shared
 * scratch as the weight type's vec_dot_type (Q8_0 for Q4_0, Q8_K for the k-quants, F16 for
 * F16, ...), threads splitting the rows; F32 weights with dense activation rows skip this.
 * (2) After a barrier, the weight rows are cut into blocks and the (batch, block) items are
 * split across threads; each block is multiplied with all activation rows by the quant
 * layer's gemm (which reuses each loaded weight block across activation rows and, for a
 * single activation row, runs several weight rows as independent chains).
 *
 * The gemm runs at the level chosen for the weight type and the number of activation rows
 * (cpu_tune.h); the conversion always runs at the backend's level. Every level's table of a
 * type has the same vec_dot_type and every level's activation quantizer gives the same bytes,
 * so the converted rows (and the scheduler's reuse of them, cpu_sched.c) do not depend on the
 * choice.
 */
#include <string.h>

#include "backends/cpu/cpu_internal.h"

#define COL_BLOCK 64 /* activation rows per gemm call */

static size_t row_bytes(ts_type t, int64_t n) {
    size_t out = 0;
    ts_type_row_bytes((uint32_t)t, (uint64_t)n, &out);
    return out;
}

bool cpu_mul_mat_converts(const ts_quant_ops *ops, const ts_tensor *x) {
    return !(ops->vec_dot_type == TS_TYPE_F32 && ts_tensor_rows_contiguous(x));
}

/* Phase 1: activation rows -> vec_dot_type rows in shared scratch. */
static void convert_activations(const cpu_op_ctx *c, const ts_tensor *x, ts_type vt, size_t rb) {
    const ts_quant_ops *vops = ts_quant_ops_get(vt, c->isa);
    int64_t k = x->ne[0], m = x->ne[1], b2 = x->ne[2];
    int64_t lo, hi;
    cpu_split(m * b2 * x->ne[3], c->ith, c->nth, &lo, &hi);
    float *tmp = c->local;
    for (int64_t r = lo; r < hi; r++) {
        int64_t j = r % m, c2 = (r / m) % b2, c3 = r / (m * b2);
        const char *src = (const char *)x->data + j * x->nb[1] + c2 * x->nb[2] + c3 * x->nb[3];
        const float *row = (const float *)src;
        if (x->nb[0] != sizeof(float)) {
            for (int64_t i = 0; i < k; i++) {
                memcpy(&tmp[i], src + i * x->nb[0], sizeof(float));
            }
            row = tmp;
        }
        vops->from_float(row, (char *)c->shared + (size_t)r * rb, k);
    }
}

/* Items [lo, hi) of a MUL_MAT: (batch, block of blk weight rows) pairs. */
static void mul_mat_items(const cpu_op_ctx *c, ts_tensor *n, const ts_quant_ops *ops, bool convert,
                          size_t rb, int64_t blk, int64_t n_blk, int64_t lo, int64_t hi) {
    const ts_tensor *w = n->src[0], *x = n->src[1];
    /* Repacked weights have the original's strides (quant.h), read by the packed gemm. */
    const char *wdata = c->packed != NULL ? c->packed : w->data;
    const ts_gemm_fn gemm = c->packed != NULL ? ops->gemm_packed : ops->gemm;
    int64_t rows = w->ne[1], m = x->ne[1], b2 = x->ne[2];
    int64_t r2 = b2 / w->ne[2], r3 = x->ne[3] / w->ne[3], k = w->ne[0];
    for (int64_t item = lo; item < hi; item++) {
        int64_t bi = item / n_blk, i0 = (item % n_blk) * blk;
        int64_t i1 = i0 + blk < rows ? i0 + blk : rows;
        int64_t c2 = bi % b2, c3 = bi / b2;
        const char *wrow = wdata + i0 * w->nb[1] + (c2 / r2) * w->nb[2] + (c3 / r3) * w->nb[3];
        const char *act;
        size_t lda;
        if (convert) {
            act = (const char *)c->shared + (size_t)((c3 * b2 + c2) * m) * rb;
            lda = rb;
        } else {
            act = (const char *)x->data + c2 * x->nb[2] + c3 * x->nb[3];
            lda = x->nb[1];
        }
        char *out = (char *)n->data + i0 * sizeof(float) + c2 * n->nb[2] + c3 * n->nb[3];
        for (int64_t j0 = 0; j0 < m; j0 += COL_BLOCK) {
            int64_t nc = m - j0 < COL_BLOCK ? m - j0 : COL_BLOCK;
            gemm(k, i1 - i0, nc, (float *)(out + j0 * n->nb[1]), n->nb[1], wrow, w->nb[1],
                 act + j0 * lda, lda);
        }
    }
}

static void mul_mat(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *w = n->src[0], *x = n->src[1];
    int64_t k = w->ne[0], rows = w->ne[1], m = x->ne[1], b2 = x->ne[2], b3 = x->ne[3];
    const ts_quant_ops *ops = ts_quant_ops_get(w->type, cpu_kernels_isa(c->kernels, w->type, m));
    bool convert = cpu_mul_mat_converts(ops, x);
    size_t rb = row_bytes(ops->vec_dot_type, k);
    if (convert && !c->reuse_conversion) {
        convert_activations(c, x, ops->vec_dot_type, rb);
        cpu_barrier(c);
    }
    /* Weight-row blocks: large enough to amortise the call, small enough that every
     * thread gets several. With several activation rows a call prepares them once for all
     * its weight rows (quant/avx512/q32.c), so those calls take up to 128. */
    int64_t blk = m > 1 ? CPU_MM_ROWS_SEVERAL : CPU_MM_ROWS_ONE;
    const int64_t min_blk = c->packed != NULL ? TS_PACK_ROWS : 4; /* packed: whole groups */
    while (blk > min_blk && ((rows + blk - 1) / blk) * b2 * b3 < 4 * c->nth) {
        blk /= 2;
    }
    int64_t n_blk = (rows + blk - 1) / blk, n_items = n_blk * b2 * b3;
    /* One activation row (decoding): a fixed contiguous share per thread, so that the gemv's
     * prefetch of the rows after its own is right. Several: chunks taken as threads get free
     * (about eight per thread), so one slowed thread does not hold the others at the barrier. */
    int64_t lo, hi;
    if (m == 1) {
        cpu_split(n_items, c->ith, c->nth, &lo, &hi);
        mul_mat_items(c, n, ops, convert, rb, blk, n_blk, lo, hi);
        return;
    }
    int64_t chunk = n_items / (8 * c->nth) > 1 ? n_items / (8 * c->nth) : 1;
    while (cpu_take(c, n_items, chunk, &lo, &hi)) {
        mul_mat_items(c, n, ops, convert, rb, blk, n_blk, lo, hi);
    }
}

/* Shared: the converted activation rows at their maximum count; per thread: one f32 row for
 * gathering strided activations. */
static void mul_mat_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    const ts_tensor *w = n->src[0], *x = n->src[1];
    const ts_quant_ops *ops = ts_quant_ops_get(w->type, isa);
    if (ops != NULL && cpu_mul_mat_converts(ops, x)) {
        *shared = row_bytes(ops->vec_dot_type, w->ne[0]) *
                  (size_t)(x->ne_max[1] * x->ne_max[2] * x->ne_max[3]);
    }
    *per_thread = (size_t)w->ne[0] * sizeof(float);
}

static bool mul_mat_supports(const ts_tensor *n, ts_isa isa) {
    const ts_quant_ops *ops = ts_quant_ops_get(n->src[0]->type, isa);
    if (ops == NULL || ops->vec_dot == NULL || ops->gemm == NULL) {
        return false;
    }
    const ts_quant_ops *vt = ts_quant_ops_get(ops->vec_dot_type, isa);
    return vt != NULL && vt->from_float != NULL;
}

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_MUL_MAT, .run = mul_mat, .scratch = mul_mat_scratch, .supports = mul_mat_supports},
};
const cpu_op_table cpu_matmul_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
