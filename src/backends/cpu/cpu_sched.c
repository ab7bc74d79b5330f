/*
 * cpu_sched.c — which nodes of a graph need a barrier after them, and which MUL_MATs can
 * reuse the activation rows the previous one converted.
 *
 * Threads split every node differently, so a node that reads what another node wrote must
 * not start before every thread has finished the writer: a barrier. Most consecutive nodes
 * of a transformer are dependent, but not all: the Q, K and V projections read the same
 * normalised rows and write separate tensors, as do the FFN gate and up projections and
 * the two RoPEs. The schedule keeps a barrier only where needed: before node i when i reads
 * bytes written since the last barrier (RAW), or writes bytes read or written since then
 * (WAR/WAW, which arena reuse and in-place ops create). Byte ranges are [data, data + span)
 * at the build-time maximum extents, so they only over-approximate.
 *
 * A MUL_MAT converts its activation rows into the shared scratch and meets the other
 * threads at an internal barrier. A MUL_MAT whose activation tensor is the same as that of
 * the previous converting MUL_MAT (same bytes, shape, strides and conversion type, not
 * written in between) reuses that conversion: no conversion and no internal barrier. The
 * conversion runs at the backend's level whichever gemm level each MUL_MAT chose (cpu_tune.h),
 * so equal conversion types mean equal bytes. The shared scratch is modelled as one more byte
 * range (written by converting MUL_MATs, read by all of them), so the rules above also order
 * the scratch. A MUL_MAT_ID groups and converts its activations into the scratch too, so it
 * counts as a converting MUL_MAT whose conversion no later MUL_MAT reuses; a MUL_MAT_ID with
 * the same activations, expert ids, conversion type and expert count as the previous one reuses
 * its grouping and conversion (no internal barriers).
 */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

typedef struct range {
    uintptr_t lo, hi;
} range;

static range tensor_range(const ts_tensor *t) {
    uintptr_t lo = (uintptr_t)t->data;
    return (range){lo, lo + ts_tensor_span(t)};
}

static bool overlap(range a, range b) {
    return a.lo < b.hi && b.lo < a.hi && a.lo < a.hi && b.lo < b.hi;
}

static bool any_overlap(range r, const range *set, int n) {
    for (int i = 0; i < n; i++) {
        if (overlap(r, set[i])) {
            return true;
        }
    }
    return false;
}

static bool same_view(const ts_tensor *a, const ts_tensor *b) {
    return a->data == b->data && a->type == b->type && memcmp(a->ne, b->ne, sizeof a->ne) == 0 &&
           memcmp(a->nb, b->nb, sizeof a->nb) == 0;
}

/* Ranges read and written since the last barrier; a phase longer than the cap ends with a
 * barrier (always safe). */
#define PHASE_MAX 64

void cpu_schedule(ts_graph *g, ts_isa isa, uint8_t *flags) {
    const range scratch = {1, 2}; /* a range no tensor can overlap */
    range rd[PHASE_MAX * (TS_MAX_SRC + 1)], wr[PHASE_MAX + 1];
    int n_rd = 0, n_wr = 0, n_phase = 0;
    const ts_tensor *conv_src = NULL; /* activations in the scratch, NULL when none */
    ts_type conv_type = TS_TYPE_F32;
    /* A MUL_MAT_ID's grouping and conversion in the scratch: its activations and expert ids
     * (NULL when none), conversion type and expert count (which fix the scratch layout). */
    const ts_tensor *moe_x = NULL, *moe_ids = NULL;
    ts_type moe_type = TS_TYPE_F32;
    int64_t moe_n_exp = 0;
    int n_nodes = ts_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) {
        ts_tensor *n = ts_graph_node(g, i);
        flags[i] = 0;
        bool converts = false, reuses = false;
        if (n->op == TS_OP_MUL_MAT_ID) {
            /* Groups and converts into the scratch before its internal barriers (cpu_moe.c),
             * like a converting MUL_MAT; the next MUL_MAT_ID over the same activations and ids
             * (an FFN's up after its gate) reuses that. */
            const ts_quant_ops *ops = ts_quant_ops_get(n->src[0]->type, isa);
            ts_type vt = ops != NULL ? ops->vec_dot_type : TS_TYPE_COUNT;
            reuses = moe_x != NULL && moe_type == vt && moe_n_exp == n->src[0]->ne[2] &&
                     same_view(moe_x, n->src[1]) && same_view(moe_ids, n->src[2]);
            converts = !reuses;
            if (converts) {
                moe_x = n->src[1];
                moe_ids = n->src[2];
                moe_type = vt;
                moe_n_exp = n->src[0]->ne[2];
            }
            conv_src = NULL;
        } else if (n->op == TS_OP_MUL_MAT) {
            const ts_quant_ops *ops = ts_quant_ops_get(n->src[0]->type, isa);
            const ts_tensor *x = n->src[1];
            if (ops != NULL && cpu_mul_mat_converts(ops, x)) {
                reuses =
                    conv_src != NULL && conv_type == ops->vec_dot_type && same_view(conv_src, x);
                converts = !reuses;
                if (converts) {
                    conv_src = x;
                    conv_type = ops->vec_dot_type;
                    moe_x = NULL;
                }
            }
        }
        /* Does node i conflict with the current phase? */
        range out = tensor_range(n);
        bool conflict =
            n_phase >= PHASE_MAX || any_overlap(out, rd, n_rd) || any_overlap(out, wr, n_wr);
        for (int k = 0; k < TS_MAX_SRC && !conflict; k++) {
            if (n->src[k] != NULL) {
                conflict = any_overlap(tensor_range(n->src[k]), wr, n_wr);
            }
        }
        if ((converts || reuses) && any_overlap(scratch, wr, n_wr)) {
            conflict = true;
        }
        if (converts && any_overlap(scratch, rd, n_rd)) {
            conflict = true;
        }
        if (conflict && i > 0) {
            flags[i - 1] |= CPU_SCHED_BARRIER;
            n_rd = n_wr = n_phase = 0;
        }
        if (reuses) {
            flags[i] |= CPU_SCHED_REUSE;
        }
        /* A converting MUL_MAT's internal barrier ends the phase of its conversion: only its
         * reads of the scratch and its output remain outstanding afterwards. */
        if (converts) {
            n_rd = n_wr = n_phase = 0;
        }
        n_phase++;
        wr[n_wr++] = out;
        for (int k = 0; k < TS_MAX_SRC; k++) {
            if (n->src[k] != NULL) {
                rd[n_rd++] = tensor_range(n->src[k]);
            }
        }
        if (converts || reuses) {
            rd[n_rd++] = scratch;
        }
        /* Any node that writes the converted activations invalidates the conversion. */
        if (conv_src != NULL && overlap(out, tensor_range(conv_src))) {
            conv_src = NULL;
        }
        if (moe_x != NULL &&
            (overlap(out, tensor_range(moe_x)) || overlap(out, tensor_range(moe_ids)))) {
            moe_x = NULL;
        }
    }
    if (n_nodes > 0) {
        flags[n_nodes - 1] |= CPU_SCHED_BARRIER;
    }
}
