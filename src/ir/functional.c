/*
 * functional.c — built-in functional implementations and registry dispatch (functional.h).
 */
#include <stdio.h>

#include "ir/functional.h"
#include "ir/graph_impl.h"
#include "util/error.h"

/* ---- matmul ---- */

static ts_tensor *matmul_direct(ts_graph *g, ts_tensor *w, ts_tensor *x) {
    return ts_op_mul_mat(g, w, x);
}

static ts_tensor *matmul_dequant(ts_graph *g, ts_tensor *w, ts_tensor *x) {
    return ts_op_mul_mat(g, ts_op_cast(g, w, TS_TYPE_F32), x);
}

/* ---- norm ---- */

static ts_tensor *norm_fused(ts_graph *g, ts_norm_kind kind, ts_tensor *x, ts_tensor *w,
                             ts_tensor *b, float eps) {
    return kind == TS_NORM_RMS ? ts_op_rms_norm(g, x, w, eps) : ts_op_norm(g, x, w, b, eps);
}

static ts_tensor *norm_separate(ts_graph *g, ts_norm_kind kind, ts_tensor *x, ts_tensor *w,
                                ts_tensor *b, float eps) {
    ts_tensor *y = kind == TS_NORM_RMS ? ts_op_rms_norm(g, x, NULL, eps)
                                       : ts_op_norm(g, x, NULL, NULL, eps);
    if (w != NULL) {
        y = ts_op_mul(g, y, w);
    }
    if (b != NULL) {
        y = ts_op_add(g, y, b);
    }
    return y;
}

/* ---- glu ---- */

static ts_tensor *glu_fused(ts_graph *g, ts_glu_act act, ts_tensor *gate, ts_tensor *up) {
    if (act == TS_GLU_SILU) {
        return ts_op_swiglu(g, gate, up);
    }
    return ts_op_geglu(g, gate, up, act == TS_GLU_GELU_TANH ? TS_GELU_TANH : TS_GELU_ERF);
}

static ts_tensor *glu_separate(ts_graph *g, ts_glu_act act, ts_tensor *gate, ts_tensor *up) {
    ts_tensor *a = act == TS_GLU_SILU
                       ? ts_op_silu(g, gate)
                       : ts_op_gelu(g, gate, act == TS_GLU_GELU_TANH ? TS_GELU_TANH : TS_GELU_ERF);
    return ts_op_mul(g, a, up);
}

/* ---- rope ---- */

static ts_tensor *rope_op(ts_graph *g, ts_tensor *x, ts_tensor *pos, const ts_rope_params *p) {
    return ts_op_rope_ext(g, x, pos, p);
}

/* ---- attention ---- */

static ts_tensor *attention_paged(ts_graph *g, const ts_attn_args *a) {
    return ts_op_attention_ext(g, a->q, a->k, a->v, a->table, a->seq, a->pos, a->len, a->sinks,
                               a->scale, a->softcap, a->window);
}

/* Gathers a cache [hd, n_kv, bs, n_blk] through table [max_blk, n_seq] into
 * f32 [hd, n_kv, max_blk * bs * n_seq]: key j of sequence s at index s * cap + j. */
static ts_tensor *gather_cache(ts_graph *g, ts_tensor *cache, ts_tensor *table) {
    int64_t hd = cache->ne[0], nkv = cache->ne[1], bs = cache->ne[2], nblk = cache->ne[3];
    int64_t flat[2] = {hd * nkv * bs, nblk};
    ts_tensor *rows = ts_op_get_rows(g, ts_op_reshape(g, cache, 2, flat), table);
    int64_t cap = table->ne[0] * bs;
    int64_t ne[3] = {hd, nkv, cap * table->ne[1]};
    return ts_op_reshape(g, rows, 3, ne);
}

static ts_tensor *attention_decomposed(ts_graph *g, const ts_attn_args *a) {
    if (a->q == NULL || a->k == NULL || a->v == NULL || a->table == NULL) {
        return NULL;
    }
    int64_t cap = a->table->ne[0] * a->k->ne[2];
    /* K: [hd, keys, n_kv] so MUL_MAT broadcasts kv heads over query heads (GQA wiring). */
    ts_tensor *k = ts_op_permute(g, gather_cache(g, a->k, a->table), 0, 2, 1, 3);
    ts_tensor *q = ts_op_permute(g, a->q, 0, 2, 1, 3);       /* [hd, n_tok, n_head] */
    ts_tensor *kq = ts_op_mul_mat(g, k, q);                  /* [keys, n_tok, n_head] */
    ts_tensor *mask = ts_op_attn_mask(g, a->seq, a->pos, a->len, cap, a->window);
    /* Attention sinks: kq's dim 2 is the query head, as SOFTMAX indexes them. */
    ts_tensor *p = ts_op_softmax_ext(g, kq, mask, a->sinks, a->scale, a->softcap);
    /* V transposed: [keys, hd, n_kv]. */
    ts_tensor *v = ts_op_cont(g, ts_op_permute(g, gather_cache(g, a->v, a->table), 1, 2, 0, 3));
    ts_tensor *o = ts_op_mul_mat(g, v, p);                   /* [hd, n_tok, n_head] */
    return ts_op_cont(g, ts_op_permute(g, o, 0, 2, 1, 3));   /* [hd, n_head, n_tok] */
}

ts_status ts_functional_register_builtins(ts_registry *r, ts_error *err);

ts_status ts_functional_register_builtins(ts_registry *r, ts_error *err) {
    struct {
        const char *fam, *name;
        ts_impl_fn fn;
    } k_builtins[] = {
        {"matmul", "direct", (ts_impl_fn)matmul_direct},
        {"matmul", "dequant", (ts_impl_fn)matmul_dequant},
        {"norm", "fused", (ts_impl_fn)norm_fused},
        {"norm", "separate", (ts_impl_fn)norm_separate},
        {"glu", "fused", (ts_impl_fn)glu_fused},
        {"glu", "separate", (ts_impl_fn)glu_separate},
        {"rope", "op", (ts_impl_fn)rope_op},
        {"attention", "paged", (ts_impl_fn)attention_paged},
        {"attention", "decomposed", (ts_impl_fn)attention_decomposed},
    };
    for (size_t i = 0; i < sizeof k_builtins / sizeof k_builtins[0]; i++) {
        ts_status st = ts_registry_add(r, k_builtins[i].fam, k_builtins[i].name, k_builtins[i].fn,
                                       err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

/* The active implementation of fam in g's registry, or `fallback` when g has no registry. */
static ts_impl_fn pick(ts_graph *g, const char *fam, ts_impl_fn fallback) {
    if (g->reg == NULL) {
        return fallback;
    }
    ts_impl_fn fn = ts_registry_get(g->reg, fam, NULL);
    if (fn == NULL) {
        ts_graph_fail(g, TS_ERR_NOT_FOUND, "functional: registry has no '%s' family", fam);
    }
    return fn;
}

ts_tensor *ts_linear(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    ts_matmul_fn fn = (ts_matmul_fn)pick(g, "matmul", (ts_impl_fn)matmul_direct);
    if (fn == NULL) {
        return NULL;
    }
    ts_tensor *y = fn(g, w, x);
    return b != NULL ? ts_op_add(g, y, b) : y;
}

static ts_tensor *norm(ts_graph *g, ts_norm_kind kind, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                       float eps) {
    ts_norm_fn fn = (ts_norm_fn)pick(g, "norm", (ts_impl_fn)norm_fused);
    return fn != NULL ? fn(g, kind, x, w, b, eps) : NULL;
}

ts_tensor *ts_rms_norm(ts_graph *g, ts_tensor *x, ts_tensor *w, float eps) {
    return norm(g, TS_NORM_RMS, x, w, NULL, eps);
}

ts_tensor *ts_layer_norm(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, float eps) {
    return norm(g, TS_NORM_LAYER, x, w, b, eps);
}

ts_tensor *ts_glu(ts_graph *g, ts_glu_act act, ts_tensor *gate, ts_tensor *up) {
    ts_glu_fn fn = (ts_glu_fn)pick(g, "glu", (ts_impl_fn)glu_fused);
    return fn != NULL ? fn(g, act, gate, up) : NULL;
}

ts_tensor *ts_rope_ext(ts_graph *g, ts_tensor *x, ts_tensor *pos, const ts_rope_params *p) {
    ts_rope_fn fn = (ts_rope_fn)pick(g, "rope", (ts_impl_fn)rope_op);
    return fn != NULL ? fn(g, x, pos, p) : NULL;
}

ts_tensor *ts_rope(ts_graph *g, ts_tensor *x, ts_tensor *pos, int n_rot, ts_rope_mode mode,
                   float freq_base, float freq_scale) {
    ts_rope_params p = ts_rope_params_plain(n_rot, mode, freq_base);
    p.freq_scale = freq_scale;
    return ts_rope_ext(g, x, pos, &p);
}

ts_tensor *ts_attention(ts_graph *g, const ts_attn_args *a) {
    if (a == NULL) {
        return ts_graph_fail(g, TS_ERR_INVALID_ARG, "attention: NULL arguments");
    }
    ts_attention_fn fn = (ts_attention_fn)pick(g, "attention", (ts_impl_fn)attention_paged);
    return fn != NULL ? fn(g, a) : NULL;
}
