/*
 * cpu_internal.h — the CPU backend's per-op execution context and kernel entry points.
 *
 * A kernel is called on every thread with the same node; it does its share of the work
 * (by ith of nth) and may synchronise internally with cpu_barrier(). Scratch memory is
 * sized before the run (cpu_scratch_need) and never allocated inside a kernel.
 */
#ifndef TS_BACKENDS_CPU_CPU_INTERNAL_H
#define TS_BACKENDS_CPU_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/threadpool.h"
#include "ir/ir.h"
#include "quant/quant.h"

typedef struct cpu_run cpu_run; /* one graph execution (shared by all threads) */

typedef struct cpu_op_ctx {
    int ith, nth;
    ts_isa isa;
    void *shared; /* scratch shared by all threads of a node */
    size_t shared_size;
    void *local; /* this thread's scratch */
    size_t local_size;
    cpu_run *run;
    bool reuse_conversion; /* MUL_MAT: the shared scratch already holds src[1] converted */
    atomic_int *work;      /* this node's work counter, 0 when the node starts (cpu_take) */
} cpu_op_ctx;

/* Dynamic sharing of n items among the node's threads: claims the next chunk of up to `chunk`
 * items as [*lo, *hi); false when none are left. Threads that run ahead (another program on
 * the core slows its neighbour) take more, so a node ends when its work does. */
static inline bool cpu_take(const cpu_op_ctx *c, int64_t n, int64_t chunk, int64_t *lo,
                            int64_t *hi) {
    int64_t at = atomic_fetch_add_explicit(c->work, (int)chunk, memory_order_relaxed);
    if (at >= n) {
        return false;
    }
    *lo = at;
    *hi = at + chunk < n ? at + chunk : n;
    return true;
}

/* Per-node schedule flags (cpu_sched.c). */
enum {
    CPU_SCHED_BARRIER = 1, /* all threads meet after this node */
    CPU_SCHED_REUSE = 2,   /* MUL_MAT reusing the previous MUL_MAT's converted activations */
};
/* flags[i] for each node of g (resolved shapes, data set); flags has n_nodes entries. */
void cpu_schedule(ts_graph *g, ts_isa isa, uint8_t *flags);
/* Whether MUL_MAT converts activations x for weights of type ops into the shared scratch. */
bool cpu_mul_mat_converts(const ts_quant_ops *ops, const ts_tensor *x);

/* Scratch a node needs: bytes shared by all threads, and bytes per thread. */
void cpu_scratch_need(const ts_tensor *n, ts_isa isa, size_t *shared, size_t *per_thread);

void cpu_barrier(const cpu_op_ctx *c);
/* Records the first kernel failure of the run (later ones are dropped). */
void cpu_fail(const cpu_op_ctx *c, ts_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* [lo, hi) of n items for thread ith of nth. */
static inline void cpu_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

bool cpu_supports(const ts_tensor *n, ts_isa isa);

void cpu_mul_mat(const cpu_op_ctx *c, ts_tensor *n);
void cpu_get_rows(const cpu_op_ctx *c, ts_tensor *n);
void cpu_binary(const cpu_op_ctx *c, ts_tensor *n);
void cpu_unary(const cpu_op_ctx *c, ts_tensor *n);
void cpu_glu(const cpu_op_ctx *c, ts_tensor *n);
/* cpu_act_avx2.c: out = act(g) * u (u may be NULL) over a contiguous row; act is SiLU or, with
 * gelu, tanh-GELU. */
void cpu_act_row_avx2(float *out, const float *g, const float *u, int64_t n, bool gelu);
void cpu_norm(const cpu_op_ctx *c, ts_tensor *n);
void cpu_rope(const cpu_op_ctx *c, ts_tensor *n);
void cpu_softmax(const cpu_op_ctx *c, ts_tensor *n);
void cpu_copy(const cpu_op_ctx *c, ts_tensor *n);
void cpu_concat(const cpu_op_ctx *c, ts_tensor *n);
void cpu_argmax(const cpu_op_ctx *c, ts_tensor *n);
void cpu_kv_store(const cpu_op_ctx *c, ts_tensor *n);
void cpu_attention(const cpu_op_ctx *c, ts_tensor *n);
void cpu_attn_mask(const cpu_op_ctx *c, ts_tensor *n);

/* Tiled ATTENTION (cpu_attn_avx2.c): needs isa >= AVX2, head size % 8 == 0, no soft-cap.
 * Per-thread scratch: cpu_attn_tiled_scratch floats. */
#define ATT_QT 16 /* tokens per tile */
#define ATT_KC 32 /* keys per chunk */
#define ATT_GH 3  /* query rows of one token served by one pass over a key chunk */
void cpu_attention_tiled(const cpu_op_ctx *c, ts_tensor *n);
static inline size_t cpu_attn_tiled_scratch(int64_t hd, int64_t group) {
    return (size_t)(2 * ATT_KC * hd + 2 * ATT_QT * group * hd + ATT_GH * ATT_KC +
                    2 * ATT_QT * group);
}
/* Helpers shared by the two ATTENTION kernels (cpu_attn.c). */
int32_t cpu_attn_geti(const ts_tensor *t, int64_t i0, int64_t i1);
bool cpu_attn_token_seq(const cpu_op_ctx *c, const ts_tensor *seq, const ts_tensor *lens, int64_t t,
                        int64_t cap, int32_t *s_out, int32_t *len_out);
bool cpu_attn_check_blocks(const cpu_op_ctx *c, const ts_tensor *n, int32_t s, int32_t len);
bool cpu_attn_use_tiled(const ts_tensor *n, ts_isa isa);

#endif /* TS_BACKENDS_CPU_CPU_INTERNAL_H */
