/*
 * cpu_internal.h — the CPU backend's op files: their descriptor tables, and the few
 * functions one CPU file lends another.
 *
 * Files depend on each other in one direction only:
 *   cpu_tune.c, cpu_tune_cache.c (which level's gemm MUL_MAT runs; see cpu_tune.h)
 *   <- cpu_exec.c (barrier, failure, work sharing; see cpu_exec.h)
 *     <- op files: cpu_ops.c (-> cpu_act_avx2.c), cpu_copy.c, cpu_matmul.c, cpu_moe.c, cpu_kv.c,
 *        cpu_attn.c (-> cpu_attn_avx2.c, cpu_attn_avx512.c -> cpu_kv.c), cpu_collective.c
 *     <- cpu_sched.c (-> cpu_matmul.c: which MUL_MATs convert their activations)
 *     <- cpu_backend.c (vtable, graph loop; reaches the op files through their tables only)
 * No op file calls into cpu_sched.c or cpu_backend.c.
 */
#ifndef TS_BACKENDS_CPU_CPU_INTERNAL_H
#define TS_BACKENDS_CPU_CPU_INTERNAL_H

#include "backends/cpu/cpu_exec.h"

/* One table per op file; every op with a CPU kernel is in exactly one of them. */
extern const cpu_op_table cpu_rowwise_ops;    /* cpu_ops.c: ADD MUL SCALE SILU GELU SWIGLU
                                                 GEGLU RMS_NORM NORM ROPE SOFTMAX */
extern const cpu_op_table cpu_copy_ops;       /* cpu_copy.c: GET_ROWS CPY CAST CONT CONCAT ARGMAX */
extern const cpu_op_table cpu_matmul_ops;     /* cpu_matmul.c: MUL_MAT */
extern const cpu_op_table cpu_kv_ops;         /* cpu_kv.c: KV_STORE ATTN_MASK */
extern const cpu_op_table cpu_attn_ops;       /* cpu_attn.c: ATTENTION */
extern const cpu_op_table cpu_collective_ops; /* cpu_collective.c: ALL_REDUCE_SUM ALL_GATHER
                                                 REDUCE_SCATTER_SUM */
extern const cpu_op_table cpu_moe_ops;        /* cpu_moe.c: MUL_MAT_ID TOPK GATHER */

/* Whether rows of type t convert to and from f32 at this ISA level. */
static inline bool cpu_type_convertible(ts_type t, ts_isa isa) {
    const ts_quant_ops *q = ts_quant_ops_get(t, isa);
    return q != NULL && q->to_float != NULL && q->from_float != NULL;
}

/* cpu_matmul.c: whether MUL_MAT converts activations x for weights of type ops into the
 * shared scratch (the scheduler orders the scratch with it). */
bool cpu_mul_mat_converts(const ts_quant_ops *ops, const ts_tensor *x);

/* cpu_act_avx2.c: out = act(g) * u (u may be NULL) over a contiguous row; act is SiLU or, with
 * gelu, tanh-GELU. */
void cpu_act_row_avx2(float *out, const float *g, const float *u, int64_t n, bool gelu);
/* cpu_act_avx512.c: the same, sixteen lanes at a time, with the same bits. */
void cpu_act_row_avx512(float *out, const float *g, const float *u, int64_t n, bool gelu);
/* out = gelu_erf(g) * u (u may be NULL), erf within 1.5e-7 (Abramowitz and Stegun 7.1.26);
 * both levels give the same bits. */
void cpu_gelu_erf_row_avx2(float *out, const float *g, const float *u, int64_t n);
void cpu_gelu_erf_row_avx512(float *out, const float *g, const float *u, int64_t n);
/* The norms' pieces: the sum of squares (in double), and out = x * inv * w (w may be NULL). */
double cpu_sumsq_row_avx2(const float *x, int64_t n);
void cpu_scale_row_avx2(float *out, const float *x, float inv, const float *w, int64_t n);
/* RoPE's rotation of a contiguous row's first 2 * half elements: adjacent pairs (cs2 / sn2: each
 * cos / sin twice, the sin negated at even positions), or NeoX halves (cs / sn once each). */
void cpu_rope_pairs_avx2(float *out, const float *x, const float *cs2, const float *sn2,
                         int64_t half);
void cpu_rope_halves_avx2(float *out, const float *x, const float *cs, const float *sn,
                          int64_t half);

/* cpu_kv.c: reading the int32 inputs of the paged-attention ops, and the checks both
 * ATTENTION kernels and ATTN_MASK make (each calls cpu_fail and returns false when invalid). */
int32_t cpu_attn_geti(const ts_tensor *t, int64_t i0, int64_t i1);
bool cpu_attn_token_seq(const cpu_op_ctx *c, const ts_tensor *seq, const ts_tensor *lens, int64_t t,
                        int64_t cap, int32_t *s_out, int32_t *len_out);
bool cpu_attn_check_blocks(const cpu_op_ctx *c, const ts_tensor *n, int32_t s, int32_t len,
                           int64_t t0, int64_t t1);
/* The block a tiled kernel reads for table entry b of sequence s: the entry, or block 0 for an
 * entry that is not a block of the cache (-1: released by a sliding window). Such an entry
 * holds no key any row of the item sees (cpu_attn_check_blocks), but a chunk on the ATT_KC
 * grid may start before the first visible key; its rows there are loaded and never used. */
static inline int64_t cpu_attn_read_block(const ts_tensor *tab, int64_t b, int32_t s,
                                          int64_t n_blk) {
    int32_t blk = cpu_attn_geti(tab, b, s);
    return blk >= 0 && blk < n_blk ? blk : 0;
}

/* cpu_attn_avx2.c: tiled ATTENTION; needs isa >= AVX2, head size % 8 == 0 and <= 1024, no
 * soft-cap (cpu_attn.c decides and deals the work items, cpu_attn_item below). Per-thread
 * scratch: cpu_attn_tiled_scratch floats. */
#define ATT_QT          16 /* tokens per tile */
#define ATT_KC          32 /* keys per chunk */
#define ATT_GH          4  /* query rows of one token served by one pass over a key chunk */
#define ATT_DIRECT_ROWS 8  /* query rows per item up to which K/V are read in place */
static inline size_t cpu_attn_tiled_scratch(int64_t hd, int64_t group) {
    return (size_t)(2 * ATT_KC * hd + 2 * ATT_QT * group * hd + ATT_GH * ATT_KC +
                    2 * ATT_QT * group);
}

/* A work item of the tiled ATTENTION kernels: tokens [t0, t1) of sequence s (consecutive, at
 * most ATT_QT of them), kv heads [kh0, kh1) (several only for decoding tokens, with
 * (t1 - t0) * (kh1 - kh0) <= ATT_QT) and query heads [g0, g1) of each kv head's group.
 * cpu_attn.c deals the items and has checked s and its blocks. */
typedef struct cpu_attn_item {
    int64_t t0, t1;
    int64_t kh0, kh1;
    int64_t g0, g1;
    int32_t s;
} cpu_attn_item;

/* cpu_attn_avx512.c: one item of tiled ATTENTION at AVX-512 (isa >= AVX512, head size % 16 ==
 * 0 and <= 1024, no soft-cap; cpu_attn.c decides). Per-thread scratch:
 * cpu_attn_avx512_scratch floats. */
#define ATT5_KC          64 /* keys per chunk (a multiple of 16) */
#define ATT5_GH          4  /* query rows of one token served by one pass over a key chunk */
#define ATT5_DIRECT_ROWS 8  /* query rows per item up to which f16 values are read in place */
void cpu_attn_item_avx512(const cpu_op_ctx *c, ts_tensor *n, const cpu_attn_item *it);
/* cpu_attn.c: what both tiled kernels start an item with: the query rows (row r = (ti * nkh +
 * khi) * ng + g of the item's tokens, kv heads and group heads) copied to qb [rows][hd], each
 * token's visible keys [jlo[ti], jhi[ti]] (empty when jlo > jhi), and their union [J0, J1]
 * (J0 = INT64_MAX, J1 = -1 when no token sees a key). */
void cpu_attn_item_rows(const ts_tensor *n, const cpu_attn_item *it, float *qb, int64_t *jlo,
                        int64_t *jhi, int64_t *J0, int64_t *J1);
/* cpu_attn.c: the online softmax's start for the item's row r: with attention sinks (src[7])
 * the head's sink logit as the max and 1 as the sum; else -inf and 0. */
void cpu_attn_item_sink(const ts_tensor *n, const cpu_attn_item *it, int64_t r, float *mx,
                        float *sum);
/* cpu_attn_avx2.c: one item of the AVX2 tiled ATTENTION. */
void cpu_attn_item_avx2(const cpu_op_ctx *c, ts_tensor *n, const cpu_attn_item *it);
static inline size_t cpu_attn_avx512_scratch(int64_t hd, int64_t group) {
    return (size_t)(3 * ATT5_KC * hd + 2 * ATT_QT * group * hd + ATT5_GH * ATT5_KC +
                    17 * ATT_QT * group);
}

/* cpu_sched.c: per-node schedule flags. */
enum {
    CPU_SCHED_BARRIER = 1, /* all threads meet after this node */
    CPU_SCHED_REUSE = 2,   /* MUL_MAT reusing the previous MUL_MAT's converted activations */
};
/* flags[i] for each node of g (resolved shapes, data set); flags has n_nodes entries. */
void cpu_schedule(ts_graph *g, ts_isa isa, uint8_t *flags);

#endif /* TS_BACKENDS_CPU_CPU_INTERNAL_H */
