/*
 * functional.h — the functionals model code calls to build a forward pass on a ts_graph.
 *
 * Each functional belongs to a family of the functional registry (registry.h) and dispatches
 * to the family's active implementation in the graph's registry (the built-in default when
 * the graph has none). Implementations only emit IR ops, so every backend runs every
 * implementation. Built-in families and implementations (default first):
 *
 *   matmul     direct   MUL_MAT on the stored weight (quantized weights read in place)
 *              dequant  CAST the weight to F32 first, then MUL_MAT (slow; an oracle)
 *   norm       fused    RMS_NORM / NORM with the weight (and bias) applied in the op
 *              separate the plain norm op, then MUL by the weight (and ADD the bias)
 *   glu        fused    SWIGLU / GEGLU
 *              separate SILU / GELU on the gate, then MUL by up
 *   rope       op       ROPE
 *   attention  paged     ATTENTION over the paged KV cache
 *              decomposed GET_ROWS gathers K/V through the block table, MUL_MAT, SOFTMAX with an
 *                       ATTN_MASK mask, MUL_MAT (same semantics; see ir.h)
 *
 * All functionals return NULL on error with the graph's sticky error set (like the op
 * builders).
 */
#ifndef TS_IR_FUNCTIONAL_H
#define TS_IR_FUNCTIONAL_H

#include "ir/ir.h"
#include "ir/registry.h"

typedef enum ts_norm_kind {
    TS_NORM_RMS = 0,   /* RMSNorm; bias must be NULL */
    TS_NORM_LAYER = 1, /* LayerNorm */
} ts_norm_kind;

typedef enum ts_glu_act {
    TS_GLU_SILU = 0,
    TS_GLU_GELU_ERF = 1,
    TS_GLU_GELU_TANH = 2,
} ts_glu_act;

/* Paged attention arguments (shapes as ATTENTION in ir.h). */
typedef struct ts_attn_args {
    ts_tensor *q;     /* f32 [head_dim, n_head, n_tokens] */
    ts_tensor *k;     /* [head_dim, n_kv_head, block_size, n_blocks] f32|f16 (after KV_STORE) */
    ts_tensor *v;     /* same as k */
    ts_tensor *table; /* i32 [max_blocks_per_seq, n_seqs] */
    ts_tensor *seq;   /* i32 [n_tokens] sequence of each token */
    ts_tensor *pos;   /* i32 [n_tokens] position of each token */
    ts_tensor *len;   /* i32 [n_seqs] keys per sequence (including this step's tokens) */
    float scale;      /* usually 1/sqrt(head_dim) */
    float softcap;    /* 0 = none */
    int window;       /* sliding window in positions, 0 = none */
    ts_tensor *sinks; /* f32 [n_head] attention sinks (gpt-oss), or NULL */
} ts_attn_args;

/* Family signatures (for registering more implementations). */
typedef ts_tensor *(*ts_matmul_fn)(ts_graph *g, ts_tensor *w, ts_tensor *x);
typedef ts_tensor *(*ts_norm_fn)(ts_graph *g, ts_norm_kind kind, ts_tensor *x, ts_tensor *w,
                                 ts_tensor *b, float eps);
typedef ts_tensor *(*ts_glu_fn)(ts_graph *g, ts_glu_act act, ts_tensor *gate, ts_tensor *up);
typedef ts_tensor *(*ts_rope_fn)(ts_graph *g, ts_tensor *x, ts_tensor *pos,
                                 const ts_rope_params *p);
typedef ts_tensor *(*ts_attention_fn)(ts_graph *g, const ts_attn_args *a);

/* y = w x (+ b): x f32 [k, ...], w [k, n] any weight type, b f32 [n] or NULL -> [n, ...]. */
ts_tensor *ts_linear(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b);
/* RMSNorm(x) * w; w f32 [n] or NULL. */
ts_tensor *ts_rms_norm(ts_graph *g, ts_tensor *x, ts_tensor *w, float eps);
/* LayerNorm(x) * w + b; w, b f32 [n] or NULL. */
ts_tensor *ts_layer_norm(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, float eps);
/* act(gate) * up, same shapes. */
ts_tensor *ts_glu(ts_graph *g, ts_glu_act act, ts_tensor *gate, ts_tensor *up);
/* Rotary embedding of x [head_dim, n_head, n_tokens] at positions pos i32 [n_tokens]. */
ts_tensor *ts_rope(ts_graph *g, ts_tensor *x, ts_tensor *pos, int n_rot, ts_rope_mode mode,
                   float freq_base, float freq_scale);
/* The same with every ROPE parameter: frequency factors, YaRN, attention factor (ir.h). */
ts_tensor *ts_rope_ext(ts_graph *g, ts_tensor *x, ts_tensor *pos, const ts_rope_params *p);
/* Attention of q over the paged cache -> f32 [head_dim, n_head, n_tokens]. */
ts_tensor *ts_attention(ts_graph *g, const ts_attn_args *a);

#endif /* TS_IR_FUNCTIONAL_H */
