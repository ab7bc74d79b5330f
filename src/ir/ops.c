/*
 * ops.c — op builders: shape inference, dynamic-dim propagation and validation.
 *
 * Every builder computes the node's extents for the graph's maximum (ne_max) and the
 * dynamic tags of each dimension, then validates the node with ts_op_check(), which looks
 * only at current extents so it can be re-run by ts_graph_set_dim() whenever a dynamic
 * extent changes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "quant/quant.h"
#include "util/error.h"

/* Creates a node with extents ne_max[4] (dense strides) and tags dyn[4]. */
static ts_tensor *mk(ts_graph *g, ts_op op, ts_type type, int n_dims, const int64_t *ne_max,
                     const int8_t *dyn) {
    ts_tensor *t = ts_graph_new_tensor(g, op, type, n_dims, ne_max);
    if (t == NULL) {
        return NULL;
    }
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        t->dyn[d] = dyn ? dyn[d] : -1;
        t->ne[d] = t->dyn[d] >= 0 ? g->dim_value[t->dyn[d]] : t->ne_max[d];
    }
    return t;
}

/* Validates node and records a failure in the graph; returns node or NULL. */
static ts_tensor *finish(ts_graph *g, ts_tensor *node) {
    if (node == NULL) {
        return NULL;
    }
    ts_error e = {0};
    if (ts_op_check(node, &e) != TS_OK) {
        return ts_graph_fail(g, e.status, "%s", e.msg);
    }
    return node;
}

static bool any_null(const ts_graph *g, ts_tensor *a, ts_tensor *b, ts_tensor *c) {
    (void)g;
    return a == NULL || b == NULL || c == NULL;
}

static int max_dims(const ts_tensor *a, const ts_tensor *b) {
    int n = a->n_dims;
    if (b != NULL && b->n_dims > n) {
        n = b->n_dims;
    }
    return n;
}

/* Whether type has to_float (any type GET_ROWS / MUL_MAT can read). */
static bool readable_type(ts_type t) {
    if (t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16) {
        return true;
    }
    const ts_quant_ops *q = ts_quant_ops_get(t, TS_ISA_SCALAR);
    return q != NULL && q->to_float != NULL;
}

static bool float_type(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
}

/* Whether f32 can be converted to type (CPY / CAST destinations). */
static bool writable_type(ts_type t) {
    if (float_type(t)) {
        return true;
    }
    const ts_quant_ops *q = ts_quant_ops_get(t, TS_ISA_SCALAR);
    return q != NULL && q->from_float != NULL;
}

/* Element types a paged KV cache may hold (KV_STORE writes, ATTENTION reads). K and V may
 * differ; the block types quantize each [head_dim] row in blocks of 32. */
static bool kv_cache_type(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16 || t == TS_TYPE_Q8_0 ||
           t == TS_TYPE_Q5_0 || t == TS_TYPE_Q4_0;
}

#define CHECK(cond, st, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ts_error_set(err, st, __VA_ARGS__);                                                    \
            return ts_error_prefix(err, "%s '%s': ", ts_op_name(n->op), n->name);                 \
        }                                                                                          \
    } while (0)

#define NE(t)                                                                                      \
    (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]
#define SHAPE "[%lld, %lld, %lld, %lld]"

static ts_status check_f32(const ts_tensor *n, const ts_tensor *t, const char *what,
                           ts_error *err) {
    CHECK(t->type == TS_TYPE_F32, TS_ERR_TYPE, "%s '%s' must be F32, is %s", what, t->name,
          ts_type_name(t->type));
    return TS_OK;
}

static ts_status check_i32_vec(const ts_tensor *n, const ts_tensor *t, int64_t len,
                               const char *what, ts_error *err) {
    CHECK(t->type == TS_TYPE_I32, TS_ERR_TYPE, "%s '%s' must be I32, is %s", what, t->name,
          ts_type_name(t->type));
    CHECK(t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1, TS_ERR_RANGE,
          "%s '%s' must be 1-D, is " SHAPE, what, t->name, NE(t));
    CHECK(len < 0 || t->ne[0] == len, TS_ERR_RANGE, "%s '%s' has %lld entries, want %lld",
          what, t->name, (long long)t->ne[0], (long long)len);
    return TS_OK;
}

static ts_status check_same_shape(const ts_tensor *n, const ts_tensor *a, const ts_tensor *b,
                                  ts_error *err) {
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        CHECK(a->ne[d] == b->ne[d], TS_ERR_RANGE, "shapes differ: '%s' " SHAPE " vs '%s' " SHAPE,
              a->name, NE(a), b->name, NE(b));
    }
    return TS_OK;
}

static ts_status check_norm_vec(const ts_tensor *n, const ts_tensor *w, const char *what,
                                ts_error *err) {
    if (w == NULL) {
        return TS_OK;
    }
    ts_status st = check_f32(n, w, what, err);
    if (st != TS_OK) {
        return st;
    }
    CHECK(w->ne[0] == n->src[0]->ne[0] && ts_tensor_nelements(w) == w->ne[0], TS_ERR_RANGE,
          "%s '%s' " SHAPE " must be [%lld]", what, w->name, NE(w), (long long)n->src[0]->ne[0]);
    return TS_OK;
}

/* TOPK, GATHER, MUL_MAT_ID. */
static ts_status check_moe(const ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0], *b = n->src[1], *ids = n->src[2];
    ts_status st = check_f32(n, n->op == TS_OP_MUL_MAT_ID ? b : a, "input", err);
    if (st != TS_OK) {
        return st;
    }
    if (n->op == TS_OP_TOPK) {
        CHECK(n->ip[0] >= 1 && n->ip[0] <= a->ne[0], TS_ERR_RANGE,
              "k %d must be in 1..%lld (the row length of '%s')", n->ip[0], (long long)a->ne[0],
              a->name);
        return TS_OK;
    }
    if (n->op == TS_OP_GATHER) {
        CHECK(b->type == TS_TYPE_I32, TS_ERR_TYPE, "indices '%s' must be I32, are %s", b->name,
              ts_type_name(b->type));
        CHECK(a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3], TS_ERR_RANGE,
              "indices '%s' " SHAPE " and '%s' " SHAPE " differ in rows", b->name, NE(b), a->name,
              NE(a));
        return TS_OK;
    }
    CHECK(readable_type(a->type), TS_ERR_UNSUPPORTED, "weight type %s has no arithmetic",
          ts_type_name(a->type));
    CHECK(ts_tensor_rows_contiguous(a), TS_ERR_UNSUPPORTED,
          "weight '%s' rows are strided (use ts_op_cont)", a->name);
    CHECK(a->ne[3] == 1, TS_ERR_RANGE, "weight '%s' " SHAPE " must be [k, n, n_expert]", a->name,
          NE(a));
    CHECK(ids->type == TS_TYPE_I32 && ids->ne[2] == 1 && ids->ne[3] == 1, TS_ERR_TYPE,
          "expert ids '%s' must be I32 [n_used, n_tokens]", ids->name);
    CHECK(a->ne[0] == b->ne[0], TS_ERR_RANGE, "inner dims differ: '%s' " SHAPE " x '%s' " SHAPE,
          a->name, NE(a), b->name, NE(b));
    CHECK((b->ne[1] == 1 || b->ne[1] == ids->ne[0]) && b->ne[2] == ids->ne[1] && b->ne[3] == 1,
          TS_ERR_RANGE, "activation '%s' " SHAPE " must be [%lld, 1 or %lld, %lld]", b->name, NE(b),
          (long long)a->ne[0], (long long)ids->ne[0], (long long)ids->ne[1]);
    return TS_OK;
}

ts_status ts_op_check(const ts_tensor *n, ts_error *err) {
    const ts_tensor *a = n->src[0], *b = n->src[1];
    ts_status st = TS_OK;
    switch (n->op) {
    case TS_OP_NONE:
        return TS_OK;
    case TS_OP_GET_ROWS:
        CHECK(readable_type(a->type), TS_ERR_UNSUPPORTED, "cannot read rows of type %s",
              ts_type_name(a->type));
        CHECK(ts_tensor_rows_contiguous(a), TS_ERR_UNSUPPORTED, "rows of '%s' are strided",
              a->name);
        CHECK(a->ne[2] == 1 && a->ne[3] == 1, TS_ERR_RANGE, "table '%s' " SHAPE " must be 2-D",
              a->name, NE(a));
        CHECK(b->type == TS_TYPE_I32 && b->ne[3] == 1, TS_ERR_TYPE,
              "indices '%s' must be I32 with at most 3 dims", b->name);
        return TS_OK;
    case TS_OP_MUL_MAT:
        CHECK(readable_type(a->type), TS_ERR_UNSUPPORTED, "weight type %s has no arithmetic",
              ts_type_name(a->type));
        CHECK(ts_tensor_rows_contiguous(a), TS_ERR_UNSUPPORTED,
              "weight '%s' rows are strided (use ts_op_cont)", a->name);
        if ((st = check_f32(n, b, "activation", err)) != TS_OK) {
            return st;
        }
        CHECK(a->ne[0] == b->ne[0], TS_ERR_RANGE, "inner dims differ: '%s' " SHAPE
              " x '%s' " SHAPE, a->name, NE(a), b->name, NE(b));
        CHECK(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, TS_ERR_RANGE,
              "cannot broadcast '%s' " SHAPE " over '%s' " SHAPE, a->name, NE(a), b->name, NE(b));
        return TS_OK;
    case TS_OP_ADD:
    case TS_OP_MUL:
        if ((st = check_f32(n, a, "a", err)) != TS_OK || (st = check_f32(n, b, "b", err))) {
            return st;
        }
        for (int d = 0; d < TS_MAX_DIMS; d++) {
            CHECK(a->ne[d] % b->ne[d] == 0, TS_ERR_RANGE,
                  "'%s' " SHAPE " does not broadcast to '%s' " SHAPE, b->name, NE(b), a->name,
                  NE(a));
        }
        return TS_OK;
    case TS_OP_SCALE:
    case TS_OP_SILU:
    case TS_OP_GELU:
    case TS_OP_SIGMOID:
    case TS_OP_LOG:
        return check_f32(n, a, "input", err);
    case TS_OP_TOPK:
    case TS_OP_GATHER:
    case TS_OP_MUL_MAT_ID:
        return check_moe(n, err);
    case TS_OP_RMS_NORM:
    case TS_OP_NORM:
        if ((st = check_f32(n, a, "input", err)) != TS_OK ||
            (st = check_norm_vec(n, b, "weight", err)) != TS_OK ||
            (st = check_norm_vec(n, n->src[2], "bias", err)) != TS_OK) {
            return st;
        }
        CHECK(n->fp[0] >= 0.0f && isfinite(n->fp[0]), TS_ERR_RANGE, "eps %g invalid",
              (double)n->fp[0]);
        return TS_OK;
    case TS_OP_ROPE:
        if ((st = check_f32(n, a, "input", err)) != TS_OK ||
            (st = check_i32_vec(n, b, a->ne[2], "positions", err)) != TS_OK) {
            return st;
        }
        CHECK(a->ne[3] == 1, TS_ERR_RANGE, "input " SHAPE " must be [head_dim, heads, tokens]",
              NE(a));
        CHECK(n->ip[0] > 0 && n->ip[0] % 2 == 0 && n->ip[0] <= a->ne[0], TS_ERR_RANGE,
              "n_rot %d must be even and in 2..%lld", n->ip[0], (long long)a->ne[0]);
        CHECK(n->ip[1] == TS_ROPE_NORMAL || n->ip[1] == TS_ROPE_NEOX, TS_ERR_RANGE,
              "unknown mode %d", n->ip[1]);
        CHECK(n->fp[0] > 0.0f && n->fp[1] > 0.0f, TS_ERR_RANGE,
              "freq_base %g and freq_scale %g must be positive", (double)n->fp[0],
              (double)n->fp[1]);
        CHECK(n->fp[2] >= 0.0f && n->fp[2] <= 1.0f && n->fp[3] > 0.0f && isfinite(n->fp[3]) &&
                  isfinite(n->fp[4]) && isfinite(n->fp[5]),
              TS_ERR_RANGE,
              "ext_factor %g (0..1), attn_factor %g (> 0) or YaRN range [%g, %g] invalid",
              (double)n->fp[2], (double)n->fp[3], (double)n->fp[4], (double)n->fp[5]);
        if (n->src[2] != NULL) {
            const ts_tensor *ff = n->src[2];
            if ((st = check_f32(n, ff, "freq factors", err)) != TS_OK) {
                return st;
            }
            CHECK(ff->ne[0] == n->ip[0] / 2 && ff->ne[1] == 1 && ff->ne[2] == 1 && ff->ne[3] == 1 &&
                      ts_tensor_is_contiguous(ff),
                  TS_ERR_RANGE, "freq factors '%s' " SHAPE " must be a contiguous [%d]", ff->name,
                  NE(ff), n->ip[0] / 2);
        }
        return TS_OK;
    case TS_OP_SOFTMAX:
        if ((st = check_f32(n, a, "input", err)) != TS_OK) {
            return st;
        }
        if (b != NULL) {
            if ((st = check_f32(n, b, "mask", err)) != TS_OK) {
                return st;
            }
            CHECK(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] && b->ne[2] == 1 && b->ne[3] == 1,
                  TS_ERR_RANGE, "mask '%s' " SHAPE " must be [%lld, %lld]", b->name, NE(b),
                  (long long)a->ne[0], (long long)a->ne[1]);
        }
        CHECK(n->fp[1] >= 0.0f, TS_ERR_RANGE, "softcap %g < 0", (double)n->fp[1]);
        if (n->src[2] != NULL) {
            const ts_tensor *sk = n->src[2];
            if ((st = check_f32(n, sk, "sinks", err)) != TS_OK) {
                return st;
            }
            CHECK(sk->ne[0] == a->ne[2] && sk->ne[1] == 1 && sk->ne[2] == 1 && sk->ne[3] == 1 &&
                      ts_tensor_rows_contiguous(sk),
                  TS_ERR_RANGE, "sinks '%s' " SHAPE " must be a dense [%lld]", sk->name, NE(sk),
                  (long long)a->ne[2]);
        }
        return TS_OK;
    case TS_OP_SWIGLU_OAI:
        CHECK(n->fp[1] > 0.0f && isfinite(n->fp[0]) && isfinite(n->fp[1]), TS_ERR_RANGE,
              "alpha %g / limit %g: the limit must be positive and both finite", (double)n->fp[0],
              (double)n->fp[1]);
        /* fall through */
    case TS_OP_SWIGLU:
    case TS_OP_GEGLU:
        if ((st = check_f32(n, a, "gate", err)) != TS_OK ||
            (st = check_f32(n, b, "up", err)) != TS_OK) {
            return st;
        }
        return check_same_shape(n, a, b, err);
    case TS_OP_CPY:
        CHECK(ts_tensor_nelements(a) == ts_tensor_nelements(b), TS_ERR_RANGE,
              "'%s' " SHAPE " and destination '%s' " SHAPE " differ in element count", a->name,
              NE(a), b->name, NE(b));
        /* fallthrough */
    case TS_OP_CAST:
        CHECK(readable_type(a->type), TS_ERR_UNSUPPORTED, "source type %s not convertible",
              ts_type_name(a->type));
        CHECK(writable_type(n->type), TS_ERR_UNSUPPORTED, "cannot convert to %s",
              ts_type_name(n->type));
        if (ts_type_block_size(a->type) > 1) {
            CHECK(float_type(n->type) && a->ne[0] == n->ne[0] && ts_tensor_rows_contiguous(a),
                  TS_ERR_UNSUPPORTED,
                  "dequantizing %s needs a float destination with the source's row length",
                  ts_type_name(a->type));
        }
        if (ts_type_block_size(n->type) > 1) {
            CHECK(a->type == TS_TYPE_F32 && a->ne[0] == n->ne[0] && ts_tensor_rows_contiguous(n),
                  TS_ERR_UNSUPPORTED,
                  "quantizing to %s needs an F32 source with the destination's row length and "
                  "contiguous destination rows", ts_type_name(n->type));
        }
        return TS_OK;
    case TS_OP_CONT:
        CHECK(ts_type_block_size(a->type) == 1 || ts_tensor_rows_contiguous(a),
              TS_ERR_UNSUPPORTED, "quantized source '%s' with strided rows", a->name);
        return TS_OK;
    case TS_OP_VIEW:
    case TS_OP_RESHAPE:
    case TS_OP_PERMUTE:
    case TS_OP_TRANSPOSE:
        return TS_OK;
    case TS_OP_CONCAT:
        if ((st = check_f32(n, a, "a", err)) != TS_OK ||
            (st = check_f32(n, b, "b", err)) != TS_OK) {
            return st;
        }
        for (int d = 0; d < TS_MAX_DIMS; d++) {
            CHECK(d == n->ip[0] || a->ne[d] == b->ne[d], TS_ERR_RANGE,
                  "'%s' " SHAPE " and '%s' " SHAPE " differ outside dim %d", a->name, NE(a),
                  b->name, NE(b), n->ip[0]);
        }
        return TS_OK;
    case TS_OP_ARGMAX:
        return check_f32(n, a, "input", err);
    case TS_OP_KV_STORE:
        CHECK(kv_cache_type(a->type), TS_ERR_TYPE,
              "cache '%s' must be F32, F16, BF16, Q8_0, Q5_0 or Q4_0, is %s", a->name,
              ts_type_name(a->type));
        CHECK(ts_tensor_rows_contiguous(a), TS_ERR_UNSUPPORTED, "cache rows are strided");
        CHECK(a->ne[0] % ts_type_block_size(a->type) == 0, TS_ERR_RANGE,
              "cache '%s' head_dim %lld is not a multiple of %s's block of %lld", a->name,
              (long long)a->ne[0], ts_type_name(a->type), (long long)ts_type_block_size(a->type));
        if ((st = check_f32(n, b, "rows", err)) != TS_OK ||
            (st = check_i32_vec(n, n->src[2], b->ne[2], "slots", err)) != TS_OK) {
            return st;
        }
        CHECK(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] && b->ne[3] == 1, TS_ERR_RANGE,
              "rows '%s' " SHAPE " must be [%lld, %lld, n_tokens]", b->name, NE(b),
              (long long)a->ne[0], (long long)a->ne[1]);
        return TS_OK;
    case TS_OP_ATTENTION: {
        const ts_tensor *k = n->src[1], *v = n->src[2], *tab = n->src[3];
        if ((st = check_f32(n, a, "q", err)) != TS_OK) {
            return st;
        }
        CHECK(a->ne[3] == 1, TS_ERR_RANGE, "q " SHAPE " must be [head_dim, n_head, n_tokens]",
              NE(a));
        CHECK(kv_cache_type(k->type) && kv_cache_type(v->type), TS_ERR_TYPE,
              "caches must each be F32, F16, BF16, Q8_0, Q5_0 or Q4_0 (k %s, v %s)",
              ts_type_name(k->type), ts_type_name(v->type));
        CHECK(k->ne[0] % ts_type_block_size(k->type) == 0 &&
                  v->ne[0] % ts_type_block_size(v->type) == 0,
              TS_ERR_RANGE, "cache head_dim %lld is not a multiple of the blocks of k %s / v %s",
              (long long)k->ne[0], ts_type_name(k->type), ts_type_name(v->type));
        CHECK(ts_tensor_rows_contiguous(k) && ts_tensor_rows_contiguous(v), TS_ERR_UNSUPPORTED,
              "cache rows are strided");
        CHECK(k->ne[0] == a->ne[0] && v->ne[0] == a->ne[0], TS_ERR_RANGE,
              "head_dim: q %lld, k %lld, v %lld", (long long)a->ne[0], (long long)k->ne[0],
              (long long)v->ne[0]);
        for (int d = 1; d < TS_MAX_DIMS; d++) {
            CHECK(k->ne[d] == v->ne[d], TS_ERR_RANGE, "k " SHAPE " and v " SHAPE " differ",
                  NE(k), NE(v));
        }
        CHECK(a->ne[1] % k->ne[1] == 0, TS_ERR_RANGE,
              "n_head %lld is not a multiple of n_kv_head %lld", (long long)a->ne[1],
              (long long)k->ne[1]);
        CHECK(tab->type == TS_TYPE_I32 && tab->ne[2] == 1 && tab->ne[3] == 1, TS_ERR_TYPE,
              "block table must be I32 [max_blocks, n_seqs]");
        if ((st = check_i32_vec(n, n->src[4], a->ne[2], "sequence index", err)) != TS_OK ||
            (st = check_i32_vec(n, n->src[5], a->ne[2], "positions", err)) != TS_OK ||
            (st = check_i32_vec(n, n->src[6], tab->ne[1], "sequence lengths", err)) != TS_OK) {
            return st;
        }
        CHECK(n->ip[0] >= 0 && n->fp[1] >= 0.0f, TS_ERR_RANGE, "window %d / softcap %g < 0",
              n->ip[0], (double)n->fp[1]);
        if (n->src[7] != NULL) {
            const ts_tensor *sk = n->src[7];
            if ((st = check_f32(n, sk, "sinks", err)) != TS_OK) {
                return st;
            }
            CHECK(sk->ne[0] == a->ne[1] && sk->ne[1] == 1 && sk->ne[2] == 1 && sk->ne[3] == 1 &&
                      ts_tensor_rows_contiguous(sk),
                  TS_ERR_RANGE, "sinks '%s' " SHAPE " must be a dense [n_head = %lld]", sk->name,
                  NE(sk), (long long)a->ne[1]);
        }
        return TS_OK;
    }
    case TS_OP_ATTN_MASK:
        if ((st = check_i32_vec(n, a, -1, "sequence index", err)) != TS_OK ||
            (st = check_i32_vec(n, b, a->ne[0], "positions", err)) != TS_OK ||
            (st = check_i32_vec(n, n->src[2], -1, "sequence lengths", err)) != TS_OK) {
            return st;
        }
        CHECK(n->ip[0] >= 1 && n->ip[1] >= 0, TS_ERR_RANGE, "capacity %d / window %d invalid",
              n->ip[0], n->ip[1]);
        return TS_OK;
    case TS_OP_ALL_REDUCE_SUM:
    case TS_OP_ALL_GATHER:
    case TS_OP_REDUCE_SCATTER_SUM:
        return ts_op_check_collective(n, err);
    case TS_OP_COUNT:
        break;
    }
    return ts_error_set(err, TS_ERR_INTERNAL, "ir: unknown op %d", (int)n->op);
}

/* ---- compute ops ---- */

ts_tensor *ts_op_get_rows(ts_graph *g, ts_tensor *a, ts_tensor *idx) {
    if (any_null(g, a, idx, a)) {
        return NULL;
    }
    int64_t ne[4] = {a->ne_max[0], idx->ne_max[0], idx->ne_max[1], idx->ne_max[2]};
    int8_t dyn[4] = {a->dyn[0], idx->dyn[0], idx->dyn[1], idx->dyn[2]};
    ts_tensor *t = mk(g, TS_OP_GET_ROWS, TS_TYPE_F32, idx->n_dims + 1 > 4 ? 4 : idx->n_dims + 1,
                      ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->src[1] = idx;
    return finish(g, t);
}

ts_tensor *ts_op_mul_mat(ts_graph *g, ts_tensor *w, ts_tensor *x) {
    if (any_null(g, w, x, x)) {
        return NULL;
    }
    int64_t ne[4] = {w->ne_max[1], x->ne_max[1], x->ne_max[2], x->ne_max[3]};
    int8_t dyn[4] = {w->dyn[1], x->dyn[1], x->dyn[2], x->dyn[3]};
    ts_tensor *t = mk(g, TS_OP_MUL_MAT, TS_TYPE_F32, max_dims(w, x), ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = w;
    t->src[1] = x;
    return finish(g, t);
}

/* A node shaped like a with sources a, b, c. */
static ts_tensor *like(ts_graph *g, ts_op op, ts_tensor *a, ts_tensor *b, ts_tensor *c) {
    if (a == NULL) {
        return NULL;
    }
    ts_tensor *t = mk(g, op, TS_TYPE_F32, a->n_dims, a->ne_max, a->dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = c;
    return t;
}

ts_tensor *ts_op_add(ts_graph *g, ts_tensor *a, ts_tensor *b) {
    return b == NULL ? NULL : finish(g, like(g, TS_OP_ADD, a, b, NULL));
}

ts_tensor *ts_op_mul(ts_graph *g, ts_tensor *a, ts_tensor *b) {
    return b == NULL ? NULL : finish(g, like(g, TS_OP_MUL, a, b, NULL));
}

ts_tensor *ts_op_scale(ts_graph *g, ts_tensor *a, float s) {
    ts_tensor *t = like(g, TS_OP_SCALE, a, NULL, NULL);
    if (t != NULL) {
        t->fp[0] = s;
    }
    return finish(g, t);
}

ts_tensor *ts_op_rms_norm(ts_graph *g, ts_tensor *a, ts_tensor *w, float eps) {
    ts_tensor *t = like(g, TS_OP_RMS_NORM, a, w, NULL);
    if (t != NULL) {
        t->fp[0] = eps;
    }
    return finish(g, t);
}

ts_tensor *ts_op_norm(ts_graph *g, ts_tensor *a, ts_tensor *w, ts_tensor *b, float eps) {
    ts_tensor *t = like(g, TS_OP_NORM, a, w, b);
    if (t != NULL) {
        t->fp[0] = eps;
    }
    return finish(g, t);
}

ts_rope_params ts_rope_params_plain(int n_rot, ts_rope_mode mode, float freq_base) {
    return (ts_rope_params){
        .n_rot = n_rot,
        .mode = mode,
        .freq_base = freq_base,
        .freq_scale = 1.0f,
        .freq_factors = NULL,
        .ext_factor = 0.0f,
        .attn_factor = 1.0f,
        .corr_lo = 0.0f,
        .corr_hi = 0.0f,
    };
}

/* The pair index whose wavelength fits n_rotations times into n_ctx_orig positions. */
static double yarn_corr_dim(int n_rot, double base, double n_ctx_orig, double n_rotations) {
    return n_rot * log(n_ctx_orig / (n_rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void ts_rope_yarn_corr_dims(int n_rot, float freq_base, int64_t n_ctx_orig, float beta_fast,
                            float beta_slow, float out[2]) {
    double lo = floor(yarn_corr_dim(n_rot, freq_base, (double)n_ctx_orig, beta_fast));
    double hi = ceil(yarn_corr_dim(n_rot, freq_base, (double)n_ctx_orig, beta_slow));
    out[0] = (float)(lo > 0.0 ? lo : 0.0);
    out[1] = (float)(hi < n_rot - 1 ? hi : n_rot - 1);
}

ts_tensor *ts_op_rope_ext(ts_graph *g, ts_tensor *a, ts_tensor *pos, const ts_rope_params *p) {
    if (pos == NULL) {
        return NULL;
    }
    ts_tensor *t = like(g, TS_OP_ROPE, a, pos, p->freq_factors);
    if (t != NULL) {
        t->ip[0] = p->n_rot;
        t->ip[1] = (int32_t)p->mode;
        t->fp[0] = p->freq_base;
        t->fp[1] = p->freq_scale;
        t->fp[2] = p->ext_factor;
        t->fp[3] = p->attn_factor;
        t->fp[4] = p->corr_lo;
        t->fp[5] = p->corr_hi;
    }
    return finish(g, t);
}

ts_tensor *ts_op_rope(ts_graph *g, ts_tensor *a, ts_tensor *pos, int n_rot, ts_rope_mode mode,
                      float freq_base, float freq_scale) {
    ts_rope_params p = ts_rope_params_plain(n_rot, mode, freq_base);
    p.freq_scale = freq_scale;
    return ts_op_rope_ext(g, a, pos, &p);
}

ts_tensor *ts_op_softmax(ts_graph *g, ts_tensor *a, ts_tensor *mask, float scale,
                         float softcap) {
    ts_tensor *t = like(g, TS_OP_SOFTMAX, a, mask, NULL);
    if (t != NULL) {
        t->fp[0] = scale;
        t->fp[1] = softcap;
    }
    return finish(g, t);
}

ts_tensor *ts_op_softmax_ext(ts_graph *g, ts_tensor *a, ts_tensor *mask, ts_tensor *sinks,
                             float scale, float softcap) {
    ts_tensor *t = like(g, TS_OP_SOFTMAX, a, mask, sinks);
    if (t != NULL) {
        t->fp[0] = scale;
        t->fp[1] = softcap;
    }
    return finish(g, t);
}

ts_tensor *ts_op_silu(ts_graph *g, ts_tensor *a) {
    return finish(g, like(g, TS_OP_SILU, a, NULL, NULL));
}

ts_tensor *ts_op_gelu(ts_graph *g, ts_tensor *a, ts_gelu_approx approx) {
    ts_tensor *t = like(g, TS_OP_GELU, a, NULL, NULL);
    if (t != NULL) {
        t->ip[0] = (int32_t)approx;
    }
    return finish(g, t);
}

ts_tensor *ts_op_swiglu(ts_graph *g, ts_tensor *gate, ts_tensor *up) {
    return up == NULL ? NULL : finish(g, like(g, TS_OP_SWIGLU, gate, up, NULL));
}

ts_tensor *ts_op_swiglu_oai(ts_graph *g, ts_tensor *gate, ts_tensor *up, float alpha, float limit) {
    if (up == NULL) {
        return NULL;
    }
    ts_tensor *t = like(g, TS_OP_SWIGLU_OAI, gate, up, NULL);
    if (t != NULL) {
        t->fp[0] = alpha;
        t->fp[1] = limit;
    }
    return finish(g, t);
}

ts_tensor *ts_op_geglu(ts_graph *g, ts_tensor *gate, ts_tensor *up, ts_gelu_approx approx) {
    if (up == NULL) {
        return NULL;
    }
    ts_tensor *t = like(g, TS_OP_GEGLU, gate, up, NULL);
    if (t != NULL) {
        t->ip[0] = (int32_t)approx;
    }
    return finish(g, t);
}

/* A node that is a view of `of` (same layout) computed by op. */
static ts_tensor *alias(ts_graph *g, ts_op op, ts_tensor *of) {
    ts_tensor *t = mk(g, op, of->type, of->n_dims, of->ne_max, of->dyn);
    if (t == NULL) {
        return NULL;
    }
    memcpy(t->nb, of->nb, sizeof t->nb);
    t->view_src = of;
    t->view_offs = 0;
    return t;
}

ts_tensor *ts_op_cpy(ts_graph *g, ts_tensor *a, ts_tensor *dst) {
    if (any_null(g, a, dst, dst)) {
        return NULL;
    }
    ts_tensor *t = alias(g, TS_OP_CPY, dst);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->src[1] = dst;
    return finish(g, t);
}

ts_tensor *ts_op_cast(ts_graph *g, ts_tensor *a, ts_type type) {
    if (a == NULL) {
        return NULL;
    }
    ts_tensor *t = mk(g, TS_OP_CAST, type, a->n_dims, a->ne_max, a->dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->ip[0] = (int32_t)type;
    return finish(g, t);
}

ts_tensor *ts_op_cont(ts_graph *g, ts_tensor *a) {
    if (a == NULL) {
        return NULL;
    }
    ts_tensor *t = mk(g, TS_OP_CONT, a->type, a->n_dims, a->ne_max, a->dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    return finish(g, t);
}

ts_tensor *ts_op_concat(ts_graph *g, ts_tensor *a, ts_tensor *b, int dim) {
    if (any_null(g, a, b, b)) {
        return NULL;
    }
    if (dim < 0 || dim >= TS_MAX_DIMS) {
        return ts_graph_fail(g, TS_ERR_RANGE, "CONCAT: dim %d out of range", dim);
    }
    if (a->dyn[dim] >= 0 || b->dyn[dim] >= 0) {
        return ts_graph_fail(g, TS_ERR_UNSUPPORTED,
                             "CONCAT '%s' + '%s': dim %d is dynamic", a->name, b->name, dim);
    }
    int64_t ne[4];
    memcpy(ne, a->ne_max, sizeof ne);
    ne[dim] += b->ne_max[dim];
    int n_dims = max_dims(a, b) > dim + 1 ? max_dims(a, b) : dim + 1;
    ts_tensor *t = mk(g, TS_OP_CONCAT, TS_TYPE_F32, n_dims, ne, a->dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->src[1] = b;
    t->ip[0] = dim;
    return finish(g, t);
}

ts_tensor *ts_op_argmax(ts_graph *g, ts_tensor *a) {
    if (a == NULL) {
        return NULL;
    }
    int64_t ne[4] = {a->ne_max[1], a->ne_max[2], a->ne_max[3], 1};
    int8_t dyn[4] = {a->dyn[1], a->dyn[2], a->dyn[3], -1};
    ts_tensor *t = mk(g, TS_OP_ARGMAX, TS_TYPE_I32, a->n_dims > 1 ? a->n_dims - 1 : 1, ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    return finish(g, t);
}

ts_tensor *ts_op_kv_store(ts_graph *g, ts_tensor *cache, ts_tensor *rows, ts_tensor *slots) {
    if (any_null(g, cache, rows, slots)) {
        return NULL;
    }
    ts_tensor *t = alias(g, TS_OP_KV_STORE, cache);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = cache;
    t->src[1] = rows;
    t->src[2] = slots;
    return finish(g, t);
}

ts_tensor *ts_op_attention(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *table,
                           ts_tensor *seq, ts_tensor *pos, ts_tensor *len, float scale,
                           float softcap, int window) {
    return ts_op_attention_ext(g, q, k, v, table, seq, pos, len, NULL, scale, softcap, window);
}

ts_tensor *ts_op_attention_ext(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v,
                               ts_tensor *table, ts_tensor *seq, ts_tensor *pos, ts_tensor *len,
                               ts_tensor *sinks, float scale, float softcap, int window) {
    if (any_null(g, q, k, v) || any_null(g, table, seq, pos) || len == NULL) {
        return NULL;
    }
    ts_tensor *t = mk(g, TS_OP_ATTENTION, TS_TYPE_F32, 3, q->ne_max, q->dyn);
    if (t == NULL) {
        return NULL;
    }
    ts_tensor *srcs[TS_MAX_SRC] = {q, k, v, table, seq, pos, len, sinks};
    memcpy(t->src, srcs, sizeof srcs);
    t->fp[0] = scale;
    t->fp[1] = softcap;
    t->ip[0] = window;
    return finish(g, t);
}

ts_tensor *ts_op_attn_mask(ts_graph *g, ts_tensor *seq, ts_tensor *pos, ts_tensor *len,
                           int64_t cap, int window) {
    if (any_null(g, seq, pos, len)) {
        return NULL;
    }
    if (cap < 1 || cap > INT32_MAX) {
        return ts_graph_fail(g, TS_ERR_RANGE, "ATTN_MASK: capacity %lld out of range",
                             (long long)cap);
    }
    int64_t ne[4] = {cap * len->ne_max[0], seq->ne_max[0], 1, 1};
    int8_t dyn[4] = {-1, seq->dyn[0], -1, -1};
    ts_tensor *t = mk(g, TS_OP_ATTN_MASK, TS_TYPE_F32, 2, ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = seq;
    t->src[1] = pos;
    t->src[2] = len;
    t->ip[0] = (int32_t)cap;
    t->ip[1] = window;
    return finish(g, t);
}

/* ---- mixture of experts ---- */

ts_tensor *ts_op_sigmoid(ts_graph *g, ts_tensor *a) {
    return finish(g, like(g, TS_OP_SIGMOID, a, NULL, NULL));
}

ts_tensor *ts_op_log(ts_graph *g, ts_tensor *a) {
    return finish(g, like(g, TS_OP_LOG, a, NULL, NULL));
}

ts_tensor *ts_op_topk(ts_graph *g, ts_tensor *a, int k) {
    if (a == NULL) {
        return NULL;
    }
    if (a->dyn[0] >= 0) {
        return ts_graph_fail(g, TS_ERR_UNSUPPORTED, "TOPK of '%s': its rows are dynamic", a->name);
    }
    int64_t ne[4] = {k, a->ne_max[1], a->ne_max[2], a->ne_max[3]};
    int8_t dyn[4] = {-1, a->dyn[1], a->dyn[2], a->dyn[3]};
    ts_tensor *t = mk(g, TS_OP_TOPK, TS_TYPE_I32, a->n_dims, ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->ip[0] = k;
    return finish(g, t);
}

ts_tensor *ts_op_gather(ts_graph *g, ts_tensor *a, ts_tensor *idx) {
    if (any_null(g, a, idx, idx)) {
        return NULL;
    }
    ts_tensor *t = mk(g, TS_OP_GATHER, TS_TYPE_F32, max_dims(a, idx), idx->ne_max, idx->dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = a;
    t->src[1] = idx;
    return finish(g, t);
}

ts_tensor *ts_op_mul_mat_id(ts_graph *g, ts_tensor *w, ts_tensor *x, ts_tensor *ids) {
    if (any_null(g, w, x, ids)) {
        return NULL;
    }
    int64_t ne[4] = {w->ne_max[1], ids->ne_max[0], ids->ne_max[1], 1};
    int8_t dyn[4] = {w->dyn[1], ids->dyn[0], ids->dyn[1], -1};
    ts_tensor *t = mk(g, TS_OP_MUL_MAT_ID, TS_TYPE_F32, 3, ne, dyn);
    if (t == NULL) {
        return NULL;
    }
    t->src[0] = w;
    t->src[1] = x;
    t->src[2] = ids;
    return finish(g, t);
}
