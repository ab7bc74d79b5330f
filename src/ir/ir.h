/*
 * ir.h — tessera's tensor IR: tensor descriptors, the op set and its exact semantics, and
 * the graph builder.
 *
 * A tensor has a type, up to four extents ne[0..3] (ne[0] varies fastest) and byte strides
 * nb[0..3]. For block-quantized types nb[0] is the block size in bytes and a row (ne[0]
 * elements) must be a whole number of blocks. A tensor either owns storage (a leaf bound to a
 * buffer, or an activation placed in the graph arena by the planner) or is a view of another
 * tensor (view_src + view_offs bytes, own ne/nb).
 *
 * Every tensor belongs to one ts_graph, which allocates and frees it. Builders return NULL on
 * failure and record the first error in the graph ("sticky" error, reported by
 * ts_graph_build), so a forward pass reads as straight-line code; a builder handed a NULL
 * source returns NULL without touching the recorded error.
 *
 * Dynamic extents: a graph may declare up to TS_MAX_DYN_DIMS symbols ("n_tokens", ...), each
 * with a maximum. Input dimensions are tagged with a symbol; builders propagate the tags, and
 * ts_graph_set_dim() changes the extent of every tagged dimension for the next runs. Strides
 * and arena offsets are computed once for the maximum, so a run with fewer tokens touches a
 * prefix of each dimension and nothing is rebuilt or reallocated.
 *
 * Op semantics (out = the node; all float math is f32 unless noted, "rows" = dims 1..3):
 *
 *  GET_ROWS(a [n, R], idx i32 [i0, i1, i2]) -> f32 [n, i0, i1, i2]
 *      out[:, j0, j1, j2] = to_f32(a[:, idx[j0, j1, j2]]). a may be any type with to_float
 *      (rows must be contiguous). idx < 0 gives a row of zeros (padding); idx >= R is a
 *      compute-time error.
 *  MUL_MAT(w [k, n, w2, w3], x f32 [k, m, b2, b3]) -> f32 [n, m, b2, b3]
 *      out[i, j, c2, c3] = sum_k w[k, i, c2 / (b2 / w2), c3 / (b3 / w3)] * x[k, j, c2, c3].
 *      w2 must divide b2 and w3 divide b3 (broadcasting; this is how GQA heads share K/V).
 *      w rows must be contiguous (nb[0] = element/block size); x may be any strided view.
 *  ADD(a, b), MUL(a, b) f32 -> f32 shaped like a: out = a + b / a * b where b is repeated
 *      along every dim d with b.ne[d] dividing a.ne[d] (b.ne[d] == 1 is row broadcasting).
 *  SCALE(a) -> a * s                                      fp[0] = s
 *  RMS_NORM(a [n, ...], w [n]?) -> a / sqrt(mean(a^2) + eps) (* w)   fp[0] = eps
 *  NORM(a [n, ...], w [n]?, b [n]?) -> (a - mean) / sqrt(var + eps) (* w) (+ b); var is the
 *      biased variance over dim 0.                       fp[0] = eps
 *  ROPE(a [head_dim, n_head, n_tok, 1], pos i32 [n_tok], ff f32 [n_rot/2]?) -> f32, same
 *      shape. For dims d < n_rot rotated in pairs, the rest copied. Pair i (0 <= i < n_rot/2)
 *      is (2i, 2i+1) in NORMAL mode and (i, i + n_rot/2) in NEOX mode. Its angle: the
 *      extrapolated theta_e = pos * freq_base^(-2i / n_rot) / ff[i] (ff[i] = 1 without the
 *      freq-factors source: llama3's rope_freqs, Phi-3's long/short factors), the
 *      interpolated theta_i = freq_scale * theta_e, and, with the YaRN ramp
 *      r = ext_factor * (1 - clamp((i - corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1)),
 *      theta = theta_i * (1 - r) + theta_e * r (ext_factor 0: theta = theta_i). (x0, x1)
 *      becomes (m (x0 cos - x1 sin), m (x0 sin + x1 cos)) with m = attn_factor.
 *      ip[0] = n_rot (even, <= head_dim), ip[1] = mode, fp[0] = freq_base, fp[1] =
 *      freq_scale (1 / the linear or YaRN factor; 1 = none), fp[2] = ext_factor (0..1),
 *      fp[3] = attn_factor (> 0; 1 = none), fp[4] = corr_lo, fp[5] = corr_hi (pair indices;
 *      ts_rope_yarn_corr_dims). ff must be contiguous (the model loader checks that a file's
 *      factors are finite and positive).
 *  SOFTMAX(a [n, r, r2, ...], mask f32 [n, r]?, sinks f32 [r2]?) -> softmax over dim 0 of
 *      z = (cap > 0 ? cap * tanh(a * scale / cap) : a * scale) + mask[:, r] (mask broadcast
 *      over dims 2, 3). A row whose z are all -inf gives zeros.  fp[0] = scale, fp[1] = cap.
 *      With sinks (attention sinks, gpt-oss), the row at dim-2 index i2 has one more logit,
 *      sinks[i2] (taken as is: not scaled, capped nor masked), which joins the denominator
 *      and is dropped from the output: out_i = exp(z_i) / (sum_j exp(z_j) + exp(sinks[i2])).
 *      A row whose z are all -inf then gives zeros too.
 *  SILU(a) -> a * sigmoid(a);  GELU(a) -> erf form 0.5a(1+erf(a/sqrt2)) (ip[0] = 0) or tanh
 *      form 0.5a(1+tanh(sqrt(2/pi)(a + 0.044715a^3))) (ip[0] = 1).
 *  SWIGLU(g, u) -> silu(g) * u;  GEGLU(g, u) -> gelu(g) * u (ip[0] as GELU). Same shapes.
 *  SWIGLU_OAI(g, u) -> (clamp(u, -limit, limit) + 1) * x * sigmoid(alpha * x) with
 *      x = min(g, limit) (gpt-oss's clamped SwiGLU). Same shapes.  fp[0] = alpha (gpt-oss:
 *      1.702), fp[1] = limit (> 0; gpt-oss: 7).
 *  CPY(a, dst) -> writes a's elements (row-major order) into dst, converting the type:
 *      f32/f16/bf16 -> f32/f16/bf16; f32 -> a quantized type through from_float (dst rows
 *      contiguous, same row length); a quantized type -> f32/f16/bf16 through to_float (same
 *      row length). Same element count. The node is a view of dst.
 *  CAST(a) -> contiguous copy of a as type ip[0] (conversions as CPY).
 *  CONT(a) -> contiguous copy of a, same type.
 *  VIEW / RESHAPE / PERMUTE / TRANSPOSE -> views, no computation. RESHAPE needs a contiguous
 *      a. PERMUTE(axes): dim i of a becomes dim axes[i] of the view. TRANSPOSE swaps 0 and 1.
 *  CONCAT(a, b, dim) f32 -> a followed by b along dim; other extents equal.  ip[0] = dim.
 *  ARGMAX(a f32 [n, r1, r2, r3]) -> i32 [r1, r2, r3]: index of the first maximum of each row.
 *  KV_STORE(cache [hd, n_kv, bs, n_blk] f32|f16|q8_0, rows f32 [hd, n_kv, n_tok], slot i32 [n_tok])
 *      -> for each token t with slot[t] >= 0: cache[:, :, slot % bs, slot / bs] = rows[:, :, t]
 *      (converted; a q8_0 cache quantizes each [hd] row, hd % 32 == 0). slot < 0 skips the
 *      token; slot >= bs * n_blk is an error. The node is a view of cache, so an ATTENTION
 *      reading it runs after the store.
 *  ATTENTION(q f32 [hd, n_head, n_tok], k, v [hd, n_kv, bs, n_blk] f32|f16|q8_0,
 *            table i32 [max_blk, n_seq], seq i32 [n_tok], pos i32 [n_tok],
 *            len i32 [n_seq], sinks f32 [n_head]?) -> f32 [hd, n_head, n_tok]
 *      For token t: s = seq[t], p = pos[t]; key j (0 <= j < len[s]) lives in block
 *      table[j / bs, s] at offset j % bs and has position j. It is visible iff j <= p and
 *      (window == 0 or p - j < window). Head h reads kv head h / (n_head / n_kv). Scores
 *      z_j = q.k_j * scale, soft-capped as SOFTMAX; out = sum_j softmax(z)_j v_j over visible
 *      keys (zeros when none).  fp[0] = scale, fp[1] = cap, ip[0] = window.
 *      With sinks (src[7], gpt-oss's attention sinks) head h's softmax has one more logit,
 *      sinks[h], as is (not scaled nor capped), that takes probability mass but carries no
 *      value: out = sum_j exp(z_j) v_j / (sum_j exp(z_j) + exp(sinks[h])).
 *      pos is only the visibility horizon (RoPE takes its own positions), so a bidirectional
 *      encoder passes len[s] - 1 for every token of sequence s: every key is visible.
 *      A table entry whose keys are visible to no token of its sequence in this batch is never
 *      read and may be -1 (a block released after it left the sliding window); an entry that
 *      holds a visible key must be a block of the cache, else a compute-time error.
 *  ATTN_MASK(seq i32 [n_tok], pos i32 [n_tok], len i32 [n_seq]) -> f32 [cap * n_seq, n_tok]
 *      out[s * cap + j, t] = 0 when key j of sequence s is visible to token t (rule above,
 *      and s == seq[t], j < len[s]), else -inf. ip[0] = cap (keys per sequence), ip[1] =
 *      window. Used by the decomposed attention.
 *  SIGMOID(a) -> 1 / (1 + exp(-a)).
 *  LOG(a) -> ln(a) elementwise (0 gives -inf, a negative NaN). Renormalizes sigmoid expert
 *      weights: SOFTMAX(LOG(p)) = p / sum(p) along each row.
 *  TOPK(a f32 [n, r1, r2, r3], k) -> i32 [k, r1, r2, r3]: out[j, r] is the index of the
 *      j-th largest element of row r (j = 0 the largest). Order: larger value first; equal
 *      values lower index first; NaN sorts below every number (NaNs among themselves by
 *      index). 1 <= k <= n.  ip[0] = k.
 *  GATHER(a f32 [n, r1, r2, r3], idx i32 [k, r1, r2, r3]) -> f32 [k, r1, r2, r3]:
 *      out[j, r] = a[idx[j, r], r] (an element of the same row of a; torch.gather along dim
 *      0). idx outside [0, n) is a compute-time error.
 *  MUL_MAT_ID(w [k, n, n_exp], x f32 [k, xu, n_tok], ids i32 [n_used, n_tok])
 *      -> f32 [n, n_used, n_tok]: out[:, e, t] = w[:, :, ids[e, t]] · x[:, xu == 1 ? 0 : e, t],
 *      i.e. out[i, e, t] = sum_k w[k, i, ids[e, t]] * x[k, e or 0, t]. xu is 1 (every slot
 *      reads the token's one row) or n_used (slot e reads its own row, as after a first
 *      MUL_MAT_ID). ids outside [0, n_exp) is a compute-time error. w rows must be contiguous
 *      and w.ne[3] == 1; x may be any strided view. This is a mixture of experts' FFN matmul:
 *      an implementation may group the tokens routed to each expert and run that expert's
 *      [k, n] matrix once over them; each output element is still one dot product.
 *
 * Collective ops (tensor parallelism). The graph is one rank's part of a computation spread
 * over the ranks of group ip[1]; every rank's graph holds the same collectives in the same
 * order. At compute time the backend resolves the group to the communicator attached with
 * ts_graph_set_comm (parallel/comm.h; the transport — threads, MPI, NCCL — is not an IR
 * concern) and calls it; a missing communicator or one whose size is not ip[2] is a compute
 * error. ip[0] = axis (gather/scatter), ip[1] = group, ip[2] = ranks (n).
 *  ALL_REDUCE_SUM(a f32|f16|bf16) -> same type and shape: out = sum over the ranks of each
 *      rank's a, added in rank order in f32 and rounded once (NCCL: its own order).
 *  ALL_GATHER(a f32|f16|bf16|i32, axis) -> a's type, ne[axis] * n:
 *      out[..., k * a.ne[axis] + i, ...] = a of rank k [..., i, ...].
 *  REDUCE_SCATTER_SUM(a f32|f16|bf16, axis) -> a's type, ne[axis] / n (n must divide it):
 *      out[..., i, ...] of rank r = sum over ranks k of a_k[..., r * out.ne[axis] + i, ...].
 *  a must be contiguous (at its maximum extents); the axis of a gather or scatter must not
 *  be dynamic. With n = 1 each is a copy.
 *
 * Nothing here is thread-safe: one thread builds and runs a graph at a time.
 */
#ifndef TS_IR_IR_H
#define TS_IR_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"
#include "tessera.h"

#define TS_MAX_DIMS 4
#define TS_MAX_SRC 8
#define TS_MAX_PARAMS 8
#define TS_MAX_DYN_DIMS 4
#define TS_NAME_MAX 64

typedef enum ts_op {
    TS_OP_NONE = 0, /* leaf: input or parameter */
    TS_OP_GET_ROWS,
    TS_OP_MUL_MAT,
    TS_OP_ADD,
    TS_OP_MUL,
    TS_OP_SCALE,
    TS_OP_RMS_NORM,
    TS_OP_NORM,
    TS_OP_ROPE,
    TS_OP_SOFTMAX,
    TS_OP_SILU,
    TS_OP_GELU,
    TS_OP_SWIGLU,
    TS_OP_GEGLU,
    TS_OP_CPY,
    TS_OP_CAST,
    TS_OP_CONT,
    TS_OP_VIEW,
    TS_OP_RESHAPE,
    TS_OP_PERMUTE,
    TS_OP_TRANSPOSE,
    TS_OP_CONCAT,
    TS_OP_ARGMAX,
    TS_OP_KV_STORE,
    TS_OP_ATTENTION,
    TS_OP_ATTN_MASK,
    TS_OP_ALL_REDUCE_SUM, /* collectives: see "Collective ops" above */
    TS_OP_ALL_GATHER,
    TS_OP_REDUCE_SCATTER_SUM,
    TS_OP_SIGMOID, /* mixture of experts: routing and gates (see the op list) */
    TS_OP_TOPK,
    TS_OP_GATHER,
    TS_OP_MUL_MAT_ID,
    TS_OP_SWIGLU_OAI, /* gpt-oss's clamped SwiGLU */
    TS_OP_LOG, /* mixture of experts: sigmoid weights renormalized as SOFTMAX(LOG(p)) */
    TS_OP_COUNT,
} ts_op;

typedef enum ts_rope_mode {
    TS_ROPE_NORMAL = 0, /* rotate adjacent pairs (2i, 2i+1): LLaMA GGUF layout */
    TS_ROPE_NEOX = 1,   /* rotate halves (i, i + n_rot/2): GPT-NeoX, Qwen, Gemma */
} ts_rope_mode;

typedef enum ts_gelu_approx {
    TS_GELU_ERF = 0,
    TS_GELU_TANH = 1,
} ts_gelu_approx;

/* Tensor flags. */
enum {
    TS_TENSOR_INPUT = 1u << 0,  /* set by the caller before each run; arena-backed */
    TS_TENSOR_PARAM = 1u << 1,  /* weight or cache: bound to caller storage with ts_tensor_bind */
    TS_TENSOR_OUTPUT = 1u << 2, /* kept alive to the end of the run and readable after it */
};

typedef struct ts_buffer ts_buffer;
typedef struct ts_graph ts_graph;
typedef struct ts_comm ts_comm; /* parallel/comm.h */

#define TS_MAX_GROUPS 4 /* communicator groups a graph can name */

typedef struct ts_tensor ts_tensor;
struct ts_tensor {
    ts_type type;
    int32_t n_dims;             /* 1..4; informational (trailing extents are 1) */
    int64_t ne[TS_MAX_DIMS];     /* extents for the current run */
    int64_t ne_max[TS_MAX_DIMS]; /* extents the graph was built for */
    size_t nb[TS_MAX_DIMS];      /* byte strides, laid out for ne_max */
    int8_t dyn[TS_MAX_DIMS];     /* dynamic symbol of each dim, -1 when static */
    ts_op op;
    ts_tensor *src[TS_MAX_SRC];
    int32_t ip[TS_MAX_PARAMS]; /* integer op parameters (see the op list) */
    float fp[TS_MAX_PARAMS];   /* float op parameters */
    ts_tensor *view_src;       /* storage owner chain: NULL when the tensor owns storage */
    size_t view_offs;          /* byte offset into view_src */
    uint32_t flags;
    int32_t id; /* index in the graph's tensor list */
    /* Storage of an owning tensor: a leaf's bound buffer, or the arena for activations. */
    ts_buffer *buffer;
    size_t offset;
    /* Resolved storage (view chains followed), refreshed by the graph before each run. */
    ts_buffer *res_buffer;
    size_t res_offset;
    void *data; /* host address when res_buffer is host-visible, else NULL */
    char name[TS_NAME_MAX];
};

/* ---- tensor helpers ---- */

const char *ts_op_name(ts_op op);
/* True for VIEW, RESHAPE, PERMUTE, TRANSPOSE: nodes that compute nothing. */
bool ts_op_is_view(ts_op op);
int64_t ts_tensor_nelements(const ts_tensor *t);
int64_t ts_tensor_nrows(const ts_tensor *t); /* ne[1] * ne[2] * ne[3] */
/* Bytes of a contiguous tensor with t's type and ne_max (the planner's size). */
size_t ts_tensor_nbytes_max(const ts_tensor *t);
/* One past the last byte the strided layout touches at ne_max (0 for an empty tensor). */
size_t ts_tensor_span(const ts_tensor *t);
/* True when the layout is dense row-major: nb[0] = element size, nb[i] = nb[i-1]*ne_max[i-1]. */
bool ts_tensor_is_contiguous(const ts_tensor *t);
/* True when each row (dim 0) is dense: nb[0] is the element (block) size. */
bool ts_tensor_rows_contiguous(const ts_tensor *t);
/* Formats "[a, b, c]" of the current extents into buf. */
const char *ts_tensor_shape_str(const ts_tensor *t, char *buf, size_t size);
void ts_tensor_set_name(ts_tensor *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Element size in bytes of non-block types, the block size in bytes for block types. */
size_t ts_type_unit_bytes(ts_type type);

/* Host address of element (i1, i2, i3)'s row start; requires t->data. */
static inline void *ts_tensor_row(const ts_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* ---- graph ---- */

typedef struct ts_registry ts_registry;

/* Creates an empty graph. reg (borrowed, may be NULL for defaults) selects functional
 * implementations while building; it must outlive the building calls only. */
ts_status ts_graph_create(ts_graph **out, ts_registry *reg, ts_error *err);
/* Frees the graph, its tensors and its arena (if allocated). NULL is a no-op. */
void ts_graph_destroy(ts_graph *g);

ts_registry *ts_graph_registry(const ts_graph *g);

/* Declares dynamic symbol `name` with maximum extent `max` (current value = max). Returns the
 * symbol id (0..TS_MAX_DYN_DIMS-1) or -1 with the graph's error set. */
int ts_graph_dim(ts_graph *g, const char *name, int64_t max);
/* Sets the extent of dynamic symbol `sym` for the next runs (1 <= value <= max). */
ts_status ts_graph_set_dim(ts_graph *g, int sym, int64_t value, ts_error *err);
int64_t ts_graph_dim_value(const ts_graph *g, int sym);

/* Leaves. ne has n_dims entries (1..4). Inputs live in the arena and are written by the
 * caller before each run (ts_backend_tensor_set); parameters are bound to caller buffers. */
ts_tensor *ts_graph_input(ts_graph *g, const char *name, ts_type type, int n_dims,
                          const int64_t *ne);
ts_tensor *ts_graph_param(ts_graph *g, const char *name, ts_type type, int n_dims,
                          const int64_t *ne);
/* Tags dimension `dim` of leaf t as dynamic symbol `sym`; t->ne[dim] must equal the symbol's
 * max. Returns t, or NULL with the graph's error set. */
ts_tensor *ts_tensor_dynamic(ts_graph *g, ts_tensor *t, int dim, int sym);
/* Marks t as a graph output (kept alive, readable after the run). Returns t. */
ts_tensor *ts_graph_output(ts_graph *g, ts_tensor *t);
/* Binds parameter t to `buf` at byte `offset` (buf borrowed; must outlive the runs). Checks
 * that the tensor's span fits the buffer. */
ts_status ts_tensor_bind(ts_tensor *t, ts_buffer *buf, size_t offset, ts_error *err);

/* The first recorded build error, or TS_OK. */
ts_status ts_graph_status(const ts_graph *g, ts_error *err);

/* Orders the nodes reachable from the outputs topologically and plans the arena. Reports
 * the sticky build error if any builder failed. Call once after building. */
ts_status ts_graph_build(ts_graph *g, ts_error *err);

/* After build: compute nodes in execution order (views excluded). */
int ts_graph_n_nodes(const ts_graph *g);
ts_tensor *ts_graph_node(const ts_graph *g, int i);
int ts_graph_n_tensors(const ts_graph *g);
ts_tensor *ts_graph_tensor(const ts_graph *g, int i);
/* Finds a tensor by name (first match) or NULL. */
ts_tensor *ts_graph_find(const ts_graph *g, const char *name);

/* Everything ROPE computes with (see the op list); ts_rope_params_plain() gives unscaled
 * RoPE. freq_factors is borrowed (a tensor of the same graph) and may be NULL. */
typedef struct ts_rope_params {
    int n_rot;
    ts_rope_mode mode;
    float freq_base;
    float freq_scale;        /* 1 / scaling factor (linear or YaRN); 1 = none */
    ts_tensor *freq_factors; /* f32 [n_rot/2]: divisors of each pair's angle, or NULL */
    float ext_factor;        /* YaRN: weight of the extrapolated angle at the ramp's low end */
    float attn_factor;       /* multiplies cos and sin; 1 = none */
    float corr_lo, corr_hi;  /* YaRN ramp: pair indices where the mix starts and ends */
} ts_rope_params;

/* Plain RoPE: no scaling, no factors, no YaRN. */
ts_rope_params ts_rope_params_plain(int n_rot, ts_rope_mode mode, float freq_base);

/* YaRN's correction range: the pair indices (as floats) below which pairs keep their
 * extrapolated angle (they rotate more than beta_fast times over the original context
 * n_ctx_orig) and above which they are fully interpolated (fewer than beta_slow rotations):
 * floor and ceil of n_rot * ln(n_ctx_orig / (2 pi beta)) / (2 ln freq_base), clamped to
 * [0, n_rot - 1]. */
void ts_rope_yarn_corr_dims(int n_rot, float freq_base, int64_t n_ctx_orig, float beta_fast,
                            float beta_slow, float out[2]);

/* ---- op builders (raw ops; see semantics above) ---- */

ts_tensor *ts_op_get_rows(ts_graph *g, ts_tensor *a, ts_tensor *idx);
ts_tensor *ts_op_mul_mat(ts_graph *g, ts_tensor *w, ts_tensor *x);
ts_tensor *ts_op_add(ts_graph *g, ts_tensor *a, ts_tensor *b);
ts_tensor *ts_op_mul(ts_graph *g, ts_tensor *a, ts_tensor *b);
ts_tensor *ts_op_scale(ts_graph *g, ts_tensor *a, float s);
ts_tensor *ts_op_rms_norm(ts_graph *g, ts_tensor *a, ts_tensor *w /* may be NULL */, float eps);
ts_tensor *ts_op_norm(ts_graph *g, ts_tensor *a, ts_tensor *w, ts_tensor *b, float eps);
ts_tensor *ts_op_rope(ts_graph *g, ts_tensor *a, ts_tensor *pos, int n_rot, ts_rope_mode mode,
                      float freq_base, float freq_scale);
/* ROPE with every parameter (p borrowed for the call). */
ts_tensor *ts_op_rope_ext(ts_graph *g, ts_tensor *a, ts_tensor *pos, const ts_rope_params *p);
ts_tensor *ts_op_softmax(ts_graph *g, ts_tensor *a, ts_tensor *mask /* may be NULL */,
                         float scale, float softcap);
/* SOFTMAX with sinks f32 [a.ne[2]] (NULL: as ts_op_softmax). */
ts_tensor *ts_op_softmax_ext(ts_graph *g, ts_tensor *a, ts_tensor *mask, ts_tensor *sinks,
                             float scale, float softcap);
ts_tensor *ts_op_silu(ts_graph *g, ts_tensor *a);
ts_tensor *ts_op_gelu(ts_graph *g, ts_tensor *a, ts_gelu_approx approx);
ts_tensor *ts_op_swiglu(ts_graph *g, ts_tensor *gate, ts_tensor *up);
ts_tensor *ts_op_geglu(ts_graph *g, ts_tensor *gate, ts_tensor *up, ts_gelu_approx approx);
ts_tensor *ts_op_swiglu_oai(ts_graph *g, ts_tensor *gate, ts_tensor *up, float alpha,
                            float limit);
ts_tensor *ts_op_cpy(ts_graph *g, ts_tensor *a, ts_tensor *dst);
ts_tensor *ts_op_cast(ts_graph *g, ts_tensor *a, ts_type type);
ts_tensor *ts_op_cont(ts_graph *g, ts_tensor *a);
/* View of a with n_dims extents ne and strides nb (nb may be NULL: dense for a's type) at
 * byte offset; must lie within a's span. */
ts_tensor *ts_op_view(ts_graph *g, ts_tensor *a, int n_dims, const int64_t *ne, const size_t *nb,
                      size_t offset);
ts_tensor *ts_op_reshape(ts_graph *g, ts_tensor *a, int n_dims, const int64_t *ne);
ts_tensor *ts_op_permute(ts_graph *g, ts_tensor *a, int ax0, int ax1, int ax2, int ax3);
ts_tensor *ts_op_transpose(ts_graph *g, ts_tensor *a);
ts_tensor *ts_op_concat(ts_graph *g, ts_tensor *a, ts_tensor *b, int dim);
ts_tensor *ts_op_argmax(ts_graph *g, ts_tensor *a);
ts_tensor *ts_op_kv_store(ts_graph *g, ts_tensor *cache, ts_tensor *rows, ts_tensor *slots);
ts_tensor *ts_op_attention(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v,
                           ts_tensor *table, ts_tensor *seq, ts_tensor *pos, ts_tensor *len,
                           float scale, float softcap, int window);
/* ATTENTION with attention sinks: sinks f32 [n_head] (NULL: as ts_op_attention). */
ts_tensor *ts_op_attention_ext(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v,
                               ts_tensor *table, ts_tensor *seq, ts_tensor *pos, ts_tensor *len,
                               ts_tensor *sinks, float scale, float softcap, int window);
ts_tensor *ts_op_attn_mask(ts_graph *g, ts_tensor *seq, ts_tensor *pos, ts_tensor *len,
                           int64_t cap, int window);
ts_tensor *ts_op_sigmoid(ts_graph *g, ts_tensor *a);
ts_tensor *ts_op_log(ts_graph *g, ts_tensor *a);
ts_tensor *ts_op_topk(ts_graph *g, ts_tensor *a, int k);
ts_tensor *ts_op_gather(ts_graph *g, ts_tensor *a, ts_tensor *idx);
ts_tensor *ts_op_mul_mat_id(ts_graph *g, ts_tensor *w, ts_tensor *x, ts_tensor *ids);

/* ---- collectives (see "Collective ops"; n_ranks = the group's size) ---- */

ts_tensor *ts_op_all_reduce_sum(ts_graph *g, ts_tensor *a, int group, int n_ranks);
ts_tensor *ts_op_all_gather(ts_graph *g, ts_tensor *a, int axis, int group, int n_ranks);
ts_tensor *ts_op_reduce_scatter_sum(ts_graph *g, ts_tensor *a, int axis, int group,
                                    int n_ranks);
bool ts_op_is_collective(ts_op op);
/* Attaches communicator c (borrowed; must outlive the graph's runs) to group 0..TS_MAX_GROUPS-1
 * of g. May be called before or after building. */
ts_status ts_graph_set_comm(ts_graph *g, int group, ts_comm *c, ts_error *err);
/* The communicator of a group, or NULL when none is attached. */
ts_comm *ts_graph_comm(const ts_graph *g, int group);

#endif /* TS_IR_IR_H */
