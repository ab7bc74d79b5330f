/*
 * cpu_moe.c — CPU kernels of the mixture-of-experts ops: MUL_MAT_ID, TOPK, GATHER (semantics
 * in ir.h), and their descriptors.
 *
 * MUL_MAT_ID runs each routed expert's weights once per step, with the dense MUL_MAT's
 * kernels (the quant layer's gemm, repacked weights where the kernel choice reads them):
 *   (1) thread 0 groups the (slot, token) pairs by expert: a counting sort of ids into
 *       start[n_exp + 1] and map[n_used * n_tok] (the pairs of expert x are
 *       map[start[x] .. start[x + 1]), in token order), checking every id, and lists the
 *       experts that have tokens in act[];
 *   (2) after a barrier, the threads convert the activation row of each pair into the
 *       shared scratch as the weight type's vec_dot_type, in grouped order, so that the rows
 *       of one expert lie contiguous like a dense MUL_MAT's;
 *   (3) after a second barrier, (expert, block of weight rows) items are taken as threads get
 *       free; an item multiplies its rows of the expert's [k, n] matrix with all of the
 *       expert's rows by gemm into a per-thread tile and copies each column to its place
 *       out[:, slot, token]. Only experts with tokens make items (decoding one token with 8 of
 *       128 experts deals 8 experts' blocks, not 128).
 * Each output element is one gemm dot product of a weight row with an activation row, as in
 * MUL_MAT, so a token's result does not depend on which other tokens share its expert.
 *
 * The shared scratch is written in phases (1)-(2), so the scheduler (cpu_sched.c) treats a
 * MUL_MAT_ID like a converting MUL_MAT: it waits for earlier readers of the scratch and ends
 * any conversion a later MUL_MAT could have reused. A MUL_MAT_ID over the same activations and
 * ids as the previous one (an FFN's up after its gate) skips (1)-(2) and their barriers.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

#define COL_BLOCK 64 /* activation rows per gemm call */

static size_t row_bytes(ts_type t, int64_t n) {
    size_t out = 0;
    ts_type_row_bytes((uint32_t)t, (uint64_t)n, &out);
    return out;
}

static size_t align64(size_t n) {
    return (n + 63) / 64 * 64;
}

/* The shared scratch of a MUL_MAT_ID at its maximum extents. */
typedef struct moe_layout {
    size_t start_off, act_off, map_off, conv_off, total;
} moe_layout;

static moe_layout layout_of(const ts_tensor *n, size_t rb) {
    const ts_tensor *w = n->src[0], *ids = n->src[2];
    size_t slots = (size_t)(ids->ne_max[0] * ids->ne_max[1]);
    moe_layout l;
    l.start_off = 0;
    l.act_off = align64((size_t)(w->ne_max[2] + 1) * sizeof(int64_t));
    l.map_off = l.act_off + align64((size_t)(w->ne_max[2] + 1) * sizeof(int32_t));
    l.conv_off = l.map_off + align64(slots * sizeof(int32_t));
    l.total = l.conv_off + slots * rb;
    return l;
}

/* Phase (1), one thread: counting sort of the pairs by expert, and act[0] = the number of
 * experts with tokens, act[1..] = those experts. False (failure recorded) on a bad id. */
static bool route(const cpu_op_ctx *c, const ts_tensor *n, int64_t *start, int32_t *act,
                  int32_t *map) {
    const ts_tensor *w = n->src[0], *ids = n->src[2];
    int64_t n_exp = w->ne[2], n_used = ids->ne[0], n_tok = ids->ne[1];
    memset(start, 0, (size_t)(n_exp + 1) * sizeof *start);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t e = 0; e < n_used; e++) {
            int32_t x;
            memcpy(&x, (const char *)ids->data + e * ids->nb[0] + t * ids->nb[1], sizeof x);
            if (x < 0 || x >= n_exp) {
                cpu_fail(c, TS_ERR_RANGE,
                         "expert id %d at [%lld, %lld] is outside the %lld experts of '%s'", (int)x,
                         (long long)e, (long long)t, (long long)n_exp, w->name);
                return false;
            }
            start[x + 1]++;
        }
    }
    for (int64_t x = 0; x < n_exp; x++) {
        start[x + 1] += start[x];
    }
    /* Fill in token order, using start[x] as expert x's cursor, then shift the cursors back. */
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t e = 0; e < n_used; e++) {
            int32_t x;
            memcpy(&x, (const char *)ids->data + e * ids->nb[0] + t * ids->nb[1], sizeof x);
            map[start[x]++] = (int32_t)(t * n_used + e);
        }
    }
    for (int64_t x = n_exp; x > 0; x--) {
        start[x] = start[x - 1];
    }
    start[0] = 0;
    act[0] = 0;
    for (int64_t x = 0; x < n_exp; x++) {
        if (start[x + 1] > start[x]) {
            act[1 + act[0]++] = (int32_t)x;
        }
    }
    return true;
}

/* Phases (1) and (2) with their barriers. On a bad id every thread returns after the first
 * barrier with the failure recorded. */
static void group_and_convert(const cpu_op_ctx *c, const ts_tensor *n, size_t rb, int64_t *start,
                              int32_t *act, int32_t *map, char *conv) {
    const ts_tensor *w = n->src[0], *x = n->src[1], *ids = n->src[2];
    int64_t k = w->ne[0], n_used = ids->ne[0], n_slots = n_used * ids->ne[1];
    const ts_quant_ops *vops =
        ts_quant_ops_get(ts_quant_ops_get(w->type, c->isa)->vec_dot_type, c->isa);
    if (c->ith == 0) {
        route(c, n, start, act, map);
    }
    cpu_barrier(c);
    if (cpu_exec_failed_by(c->exec, c->node)) {
        return;
    }
    float *tmp = c->local;
    int64_t lo, hi;
    cpu_split(n_slots, c->ith, c->nth, &lo, &hi);
    for (int64_t gi = lo; gi < hi; gi++) {
        int64_t slot = map[gi], t = slot / n_used, e = x->ne[1] == 1 ? 0 : slot % n_used;
        const char *src = (const char *)x->data + e * x->nb[1] + t * x->nb[2];
        const float *row = (const float *)src;
        if (x->nb[0] != sizeof(float)) {
            for (int64_t i = 0; i < k; i++) {
                memcpy(&tmp[i], src + i * x->nb[0], sizeof(float));
            }
            row = tmp;
        }
        vops->from_float(row, conv + (size_t)gi * rb, k);
    }
    cpu_barrier(c);
}

static void mul_mat_id(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *w = n->src[0], *ids = n->src[2];
    int64_t k = w->ne[0], rows = w->ne[1];
    int64_t n_used = ids->ne[0], n_slots = n_used * ids->ne[1];
    ts_type vt = ts_quant_ops_get(w->type, c->isa)->vec_dot_type;
    size_t rb = row_bytes(vt, k);
    moe_layout l = layout_of(n, rb);
    int64_t *start = (int64_t *)((char *)c->shared + l.start_off);
    int32_t *act = (int32_t *)((char *)c->shared + l.act_off);
    int32_t *map = (int32_t *)((char *)c->shared + l.map_off);
    char *conv = (char *)c->shared + l.conv_off;
    /* The scheduler marks a MUL_MAT_ID whose activations and ids the previous one grouped and
     * converted (cpu_sched.c): the scratch already holds them. */
    if (!c->reuse_conversion) {
        group_and_convert(c, n, rb, start, act, map, conv);
        if (cpu_exec_failed_by(c->exec, c->node)) {
            return;
        }
    }
    /* (3) Weight-row blocks as in MUL_MAT: a block per call, small enough that every thread
     * gets several items over the experts that have tokens. */
    int64_t active = act[0];
    int64_t blk = n_slots > n_used ? CPU_MM_ROWS_SEVERAL : CPU_MM_ROWS_ONE;
    const int64_t min_blk = c->packed != NULL ? TS_PACK_ROWS : 4; /* packed: whole groups */
    while (blk > min_blk && ((rows + blk - 1) / blk) * active < 4 * c->nth) {
        blk /= 2;
    }
    const char *wdata = c->packed != NULL ? c->packed : w->data;
    float *tile = (float *)c->local + k;
    int64_t n_blk = (rows + blk - 1) / blk, n_items = n_blk * active, lo, hi;
    while (cpu_take(c, n_items, 1, &lo, &hi)) {
        int64_t ex = act[1 + lo / n_blk], i0 = (lo % n_blk) * blk;
        int64_t first = start[ex], cnt = start[ex + 1] - first;
        int64_t i1 = i0 + blk < rows ? i0 + blk : rows, nr = i1 - i0;
        const ts_quant_ops *ops =
            ts_quant_ops_get(w->type, cpu_kernels_isa(c->kernels, w->type, cnt));
        const ts_gemm_fn gemm = c->packed != NULL ? ops->gemm_packed : ops->gemm;
        const char *wrow = wdata + i0 * w->nb[1] + ex * w->nb[2];
        for (int64_t j0 = 0; j0 < cnt; j0 += COL_BLOCK) {
            int64_t nc = cnt - j0 < COL_BLOCK ? cnt - j0 : COL_BLOCK;
            gemm(k, nr, nc, tile, (size_t)blk * sizeof(float), wrow, w->nb[1],
                 conv + (size_t)(first + j0) * rb, rb);
            for (int64_t j = 0; j < nc; j++) {
                int64_t slot = map[first + j0 + j];
                char *dst = (char *)n->data + i0 * sizeof(float) + (slot % n_used) * n->nb[1] +
                            (slot / n_used) * n->nb[2];
                memcpy(dst, tile + j * blk, (size_t)nr * sizeof(float));
            }
        }
    }
}

static void mul_mat_id_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    const ts_tensor *w = n->src[0];
    const ts_quant_ops *ops = ts_quant_ops_get(w->type, isa);
    if (ops == NULL) {
        return;
    }
    *shared = layout_of(n, row_bytes(ops->vec_dot_type, w->ne_max[0])).total;
    *per_thread = (size_t)(w->ne_max[0] + CPU_MM_ROWS_SEVERAL * COL_BLOCK) * sizeof(float);
}

static bool mul_mat_id_supports(const ts_tensor *n, ts_isa isa) {
    const ts_quant_ops *ops = ts_quant_ops_get(n->src[0]->type, isa);
    if (ops == NULL || ops->vec_dot == NULL || ops->gemm == NULL) {
        return false;
    }
    const ts_quant_ops *vt = ts_quant_ops_get(ops->vec_dot_type, isa);
    return vt != NULL && vt->from_float != NULL;
}

/* TOPK's order (ir.h): larger first, NaN last, equal values (and NaNs) by index. */
static inline bool before(float v, int64_t i, float u, int64_t j) {
    if (isnan(v) || isnan(u)) {
        return isnan(v) == isnan(u) ? i < j : !isnan(v);
    }
    return v > u || (v == u && i < j);
}

static char *row_at(const ts_tensor *t, int64_t r) {
    int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Per row: the row in local floats, then k selection passes (k and rows are small: experts). */
static void topk(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0];
    int64_t ne0 = a->ne[0], k = n->ip[0], lo, hi;
    float *v = c->local;
    cpu_split(ts_tensor_nrows(a), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const char *ra = row_at(a, r);
        for (int64_t i = 0; i < ne0; i++) {
            memcpy(&v[i], ra + i * a->nb[0], sizeof(float));
        }
        char *out = row_at(n, r);
        int64_t prev = -1;
        for (int64_t j = 0; j < k; j++) {
            /* The first element after `prev` in the order: each pass finds the best of those
             * that come after the one taken before it. */
            int64_t best = -1;
            for (int64_t i = 0; i < ne0; i++) {
                bool after = prev < 0 || before(v[prev], prev, v[i], i);
                if (after && (best < 0 || before(v[i], i, v[best], best))) {
                    best = i;
                }
            }
            int32_t b = (int32_t)best;
            memcpy(out + j * n->nb[0], &b, sizeof b);
            prev = best;
        }
    }
}

static void topk_scratch(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread) {
    (void)isa;
    (void)shared;
    *per_thread = (size_t)n->src[0]->ne_max[0] * sizeof(float);
}

static void gather(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *a = n->src[0], *idx = n->src[1];
    int64_t lo, hi;
    cpu_split(ts_tensor_nrows(n), c->ith, c->nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const char *ra = row_at(a, r), *ri = row_at(idx, r);
        float *out = (float *)row_at(n, r);
        for (int64_t j = 0; j < n->ne[0]; j++) {
            int32_t i;
            memcpy(&i, ri + j * idx->nb[0], sizeof i);
            if (i < 0 || i >= a->ne[0]) {
                cpu_fail(c, TS_ERR_RANGE,
                         "index %d at [%lld] of row %lld is outside the %lld elements of a row "
                         "of '%s'",
                         (int)i, (long long)j, (long long)r, (long long)a->ne[0], a->name);
                return;
            }
            memcpy(&out[j], ra + i * a->nb[0], sizeof(float));
        }
    }
}

static const cpu_op_desc k_ops[] = {
    {.op = TS_OP_MUL_MAT_ID,
     .run = mul_mat_id,
     .scratch = mul_mat_id_scratch,
     .supports = mul_mat_id_supports},
    {.op = TS_OP_TOPK, .run = topk, .scratch = topk_scratch},
    {.op = TS_OP_GATHER, .run = gather},
};
const cpu_op_table cpu_moe_ops = {k_ops, (int)(sizeof k_ops / sizeof k_ops[0])};
