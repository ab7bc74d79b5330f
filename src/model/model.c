/* model.c — resolving an architecture's tensor patterns against a GGUF file. */
#include "model/model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/quant.h"
#include "util/error.h"

#define NAME_MAX_LEN 96

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Expands "{L}" in pattern with layer il. */
static void expand_name(const char *pattern, int64_t il, char *out, size_t size) {
    const char *at = strstr(pattern, "{L}");
    if (at == NULL) {
        snprintf(out, size, "%s", pattern);
        return;
    }
    snprintf(out, size, "%.*s%lld%s", (int)(at - pattern), pattern, (long long)il, at + 3);
}

static bool is_per_layer(const ts_tensor_pattern *p) {
    return p->role >= TS_ROLE_FIRST_LAYER;
}

/* Vectors (norm weights, biases) are used by element-wise ops and must be float; matrices
 * need a type the quant layer computes with. */
static ts_status check_type(const ts_gguf_tensor *t, bool matrix, ts_error *err) {
    if (!matrix) {
        if (t->type == TS_TYPE_F32 || t->type == TS_TYPE_F16 || t->type == TS_TYPE_BF16) {
            return TS_OK;
        }
    } else if (ts_quant_ops_get(t->type, TS_ISA_SCALAR) != NULL) {
        return TS_OK;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "model: tensor '%s' has type %s, which is not supported for a %s",
                        t->name, ts_type_name(t->type) ? ts_type_name(t->type) : "?",
                        matrix ? "matrix" : "vector");
}

/* Where a symbolic dimension comes from, for error messages (the metadata key or the tensor
 * that sets it). */
static const char *dim_source(ts_dim d) {
    switch (d) {
    case TS_DIM_NONE: return "1";
    case TS_DIM_EMBD: return "embedding_length";
    case TS_DIM_VOCAB: return "token_embd rows";
    case TS_DIM_FF: return "feed_forward_length";
    case TS_DIM_FF2: return "2 x feed_forward_length";
    case TS_DIM_Q: return "head_count x key_length";
    case TS_DIM_KV: return "head_count_kv x key_length";
    case TS_DIM_QKV: return "(head_count + 2 head_count_kv) x key_length";
    case TS_DIM_HEAD: return "key_length";
    case TS_DIM_CTX_TRAIN: return "context_length";
    case TS_DIM_TOKEN_TYPES: return "token_types rows";
    case TS_DIM_ROT_HALF: return "rope.dimension_count / 2";
    case TS_DIM_EXPERT: return "expert_count";
    case TS_DIM_FF_EXP: return "expert_feed_forward_length";
    case TS_DIM_FF_SHEXP: return "expert_shared_feed_forward_length";
    case TS_DIM_N_HEAD: return "head_count";
    }
    return "?";
}

static ts_status check_shape(const ts_hparams *hp, const ts_tensor_pattern *p,
                             const ts_gguf_tensor *t, ts_error *err) {
    int64_t want[3];
    for (int i = 0; i < 3; i++) {
        want[i] = p->shape[i] == TS_DIM_NONE ? 1 : ts_hparams_dim(hp, p->shape[i]);
    }
    if (t->ne[0] == want[0] && t->ne[1] == want[1] && t->ne[2] == want[2] && t->ne[3] == 1) {
        return TS_OK;
    }
    /* Name the first extent that differs and the metadata that sets it. */
    int bad = t->ne[0] != want[0] ? 0 : t->ne[1] != want[1] ? 1 : t->ne[2] != want[2] ? 2 : 3;
    char why[160];
    if (bad < 3) {
        snprintf(why, sizeof why, "ne[%d] should be %lld (%s.%s)", bad, (long long)want[bad],
                 hp->arch->name, dim_source(p->shape[bad]));
    } else {
        snprintf(why, sizeof why, "ne[3] should be 1");
    }
    if (p->shape[2] != TS_DIM_NONE) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected "
                            "[%lld, %lld, %lld]: %s",
                            t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], (long long)want[0], (long long)want[1],
                            (long long)want[2], why);
    }
    return ts_error_set(err, TS_ERR_FORMAT,
                        "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected "
                        "[%lld, %lld]: %s",
                        t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], (long long)want[0], (long long)want[1], why);
}

static ts_status resolve(ts_model *m, const ts_tensor_pattern *p, int64_t il, ts_error *err) {
    char name[NAME_MAX_LEN], alt[NAME_MAX_LEN] = "";
    expand_name(p->name, il, name, sizeof name);
    if (p->alt != NULL) {
        expand_name(p->alt, il, alt, sizeof alt);
    }
    const ts_gguf_tensor *t = NULL;
    if (ts_gguf_find_tensor(m->gguf, name, &t) != TS_OK &&
        (alt[0] == '\0' || ts_gguf_find_tensor(m->gguf, alt, &t) != TS_OK)) {
        if (p->required && alt[0] != '\0') {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "model: required tensor '%s' (or '%s') is missing", name, alt);
        }
        if (p->required) {
            return ts_error_set(err, TS_ERR_FORMAT, "model: required tensor '%s' is missing",
                                name);
        }
        return TS_OK;
    }
    if ((p->shape[1] == TS_DIM_EXPERT || p->shape[2] == TS_DIM_EXPERT) && m->hp.n_expert == 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: tensor '%s' holds experts, but %s.expert_count is missing or 0",
                            name, m->hp.arch->name);
    }
    ts_status st = check_shape(&m->hp, p, t, err);
    if (st == TS_OK) {
        st = check_type(t, p->shape[1] != TS_DIM_NONE, err);
    }
    if (st != TS_OK) {
        return st;
    }
    if (is_per_layer(p)) {
        m->layers[il * TS_ROLE_COUNT + p->role] = t;
    } else {
        m->global[p->role] = t;
    }
    m->n_params += t->n_elements;
    m->weight_bytes += t->nbytes;
    m->active_bytes += p->shape[2] == TS_DIM_EXPERT
                           ? t->nbytes / (size_t)m->hp.n_expert * (size_t)m->hp.n_expert_used
                           : t->nbytes;
    return TS_OK;
}

/* A mixture-of-experts layer needs its router and all three stacked expert matrices; a
 * shared expert is all three of its matrices or none. */
static ts_status check_moe_layer(const ts_model *m, int64_t il, ts_error *err) {
    const ts_gguf_tensor *const *l = &m->layers[il * TS_ROLE_COUNT];
    static const ts_role need[] = {TS_ROLE_FFN_GATE_INP, TS_ROLE_FFN_GATE_EXPS, TS_ROLE_FFN_UP_EXPS,
                                   TS_ROLE_FFN_DOWN_EXPS};
    static const char *const names[] = {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
                                        "ffn_down_exps"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (l[need[i]] == NULL) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "model: layer %lld is a mixture of experts but tensor "
                                "'blk.%lld.%s.weight' is missing",
                                (long long)il, (long long)il, names[i]);
        }
    }
    if (m->hp.n_expert == 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: layer %lld holds experts, but %s.expert_count is missing or 0",
                            (long long)il, m->hp.arch->name);
    }
    int shexp = (l[TS_ROLE_FFN_GATE_SHEXP] != NULL) + (l[TS_ROLE_FFN_UP_SHEXP] != NULL) +
                (l[TS_ROLE_FFN_DOWN_SHEXP] != NULL);
    if (shexp != 0 && shexp != 3) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: layer %lld has only %d of the shared expert's 3 matrices "
                            "(ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp)",
                            (long long)il, shexp);
    }
    return TS_OK;
}

/* A layer must have one complete way to compute attention and the feed-forward block. */
static ts_status check_layer_features(const ts_model *m, int64_t il, ts_error *err) {
    const ts_gguf_tensor *const *l = &m->layers[il * TS_ROLE_COUNT];
    bool fused_qkv = l[TS_ROLE_ATTN_QKV] != NULL;
    bool split_qkv = l[TS_ROLE_ATTN_Q] && l[TS_ROLE_ATTN_K] && l[TS_ROLE_ATTN_V];
    if (!fused_qkv && !split_qkv) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: layer %lld has neither attn_qkv nor attn_q/k/v weights",
                            (long long)il);
    }
    if (l[TS_ROLE_FFN_GATE_INP] != NULL || l[TS_ROLE_FFN_GATE_EXPS] != NULL) {
        return check_moe_layer(m, il, err);
    }
    /* A dense FFN: every FFN matrix pattern of the architecture (optional only where a layer
     * may hold experts instead). */
    const ts_arch_desc *a = m->hp.arch;
    for (size_t i = 0; i < a->n_tensors; i++) {
        ts_role r = a->tensors[i].role;
        bool dense = r == TS_ROLE_FFN_GATE || r == TS_ROLE_FFN_UP || r == TS_ROLE_FFN_GATE_UP ||
                     r == TS_ROLE_FFN_DOWN;
        if (dense && l[r] == NULL) {
            char name[NAME_MAX_LEN];
            expand_name(a->tensors[i].name, il, name, sizeof name);
            return ts_error_set(err, TS_ERR_FORMAT,
                                "model: required tensor '%s' is missing (layer %lld has no "
                                "mixture-of-experts router either)",
                                name, (long long)il);
        }
    }
    bool gated = l[TS_ROLE_FFN_GATE] && l[TS_ROLE_FFN_UP];
    bool fused = l[TS_ROLE_FFN_GATE_UP] != NULL;
    bool plain =
        (m->hp.arch->ffn == TS_FFN_GELU || m->hp.arch->ffn == TS_FFN_GELU_ERF) && l[TS_ROLE_FFN_UP];
    if (!gated && !fused && !plain) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: layer %lld is missing its feed-forward weights",
                            (long long)il);
    }
    return TS_OK;
}

/* RoPE factor tensors feed ROPE, which reads f32 (as llama.cpp's converter writes them); their
 * values divide angles, so each must be finite and positive. */
static ts_status check_rope_factors(const ts_model *m, ts_error *err) {
    static const ts_role roles[] = {TS_ROLE_ROPE_FREQS, TS_ROLE_ROPE_FACTORS_LONG,
                                    TS_ROLE_ROPE_FACTORS_SHORT};
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++) {
        const ts_gguf_tensor *t = m->global[roles[r]];
        if (t == NULL) {
            continue;
        }
        if (t->type != TS_TYPE_F32) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "model: RoPE factors '%s' have type %s; they must be F32", t->name,
                                ts_type_name(t->type) ? ts_type_name(t->type) : "?");
        }
        const float *v = (const float *)((const char *)ts_gguf_base(m->gguf) +
                                         ts_gguf_data_offset(m->gguf) + t->offset);
        for (int64_t i = 0; i < t->ne[0]; i++) {
            float x;
            memcpy(&x, v + i, sizeof x); /* the file's alignment may be below 4 */
            if (!(x > 0.0f) || !isfinite(x)) {
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "model: RoPE factors '%s' entry %lld is %g; each must be "
                                    "finite and positive",
                                    t->name, (long long)i, (double)x);
            }
        }
    }
    bool has_long = m->global[TS_ROLE_ROPE_FACTORS_LONG] != NULL;
    bool has_short = m->global[TS_ROLE_ROPE_FACTORS_SHORT] != NULL;
    if (has_long != has_short) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: '%s' is present but '%s' is missing (LongRoPE needs both)",
                            has_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                            has_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    }
    if (m->hp.rope_scaling == TS_ROPE_SCALING_LONGROPE && !has_long) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: rope.scaling.type is longrope but the file has no "
                            "rope_factors_long.weight / rope_factors_short.weight");
    }
    return TS_OK;
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* Lists the file's tensors that no pattern of the architecture resolved (m->unused), so that a
 * tensor the forward pass would silently ignore is reported. */
static ts_status find_unused(ts_model *m, ts_error *err) {
    size_t n_layer_slots = (size_t)m->hp.n_layer * TS_ROLE_COUNT;
    size_t cap = TS_ROLE_COUNT + n_layer_slots, n = 0;
    const ts_gguf_tensor **used = malloc(cap * sizeof *used);
    uint64_t n_file = ts_gguf_tensor_count(m->gguf);
    m->unused = malloc((size_t)(n_file > 0 ? n_file : 1) * sizeof *m->unused);
    if (used == NULL || m->unused == NULL) {
        free(used);
        return ts_error_set(err, TS_ERR_NOMEM, "model: out of memory");
    }
    for (size_t i = 0; i < TS_ROLE_COUNT; i++) {
        if (m->global[i] != NULL) {
            used[n++] = m->global[i];
        }
    }
    for (size_t i = 0; i < n_layer_slots; i++) {
        if (m->layers[i] != NULL) {
            used[n++] = m->layers[i];
        }
    }
    qsort(used, n, sizeof *used, cmp_ptr);
    for (uint64_t i = 0; i < n_file; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(m->gguf, i);
        if (bsearch(&t, used, n, sizeof *used, cmp_ptr) == NULL) {
            m->unused[m->n_unused++] = t;
        }
    }
    free(used);
    return TS_OK;
}

ts_status ts_model_from_gguf(ts_gguf *g, ts_model **out, ts_error *err) {
    double t0 = now_ms();
    *out = NULL;
    ts_model *m = calloc(1, sizeof *m);
    if (m == NULL) {
        ts_gguf_close(g);
        return ts_error_set(err, TS_ERR_NOMEM, "model: out of memory");
    }
    m->gguf = g;
    ts_status st = ts_hparams_load(g, &m->hp, err);
    if (st != TS_OK) {
        ts_model_close(m);
        return st;
    }
    m->layers = calloc((size_t)m->hp.n_layer * TS_ROLE_COUNT, sizeof *m->layers);
    if (m->layers == NULL) {
        ts_model_close(m);
        return ts_error_set(err, TS_ERR_NOMEM, "model: out of memory");
    }
    const ts_arch_desc *a = m->hp.arch;
    for (size_t i = 0; i < a->n_tensors && st == TS_OK; i++) {
        const ts_tensor_pattern *p = &a->tensors[i];
        if (!is_per_layer(p)) {
            st = resolve(m, p, 0, err);
            continue;
        }
        for (int64_t il = 0; il < m->hp.n_layer && st == TS_OK; il++) {
            st = resolve(m, p, il, err);
        }
    }
    for (int64_t il = 0; il < m->hp.n_layer && st == TS_OK; il++) {
        st = check_layer_features(m, il, err);
    }
    if (st == TS_OK) {
        st = check_rope_factors(m, err);
    }
    if (st == TS_OK) {
        st = find_unused(m, err);
    }
    if (st != TS_OK) {
        ts_model_close(m);
        return st;
    }
    m->tied_output = m->global[TS_ROLE_OUTPUT] == NULL;
    m->load_ms = now_ms() - t0;
    *out = m;
    return TS_OK;
}

ts_status ts_model_open(const char *path, ts_model **out, ts_error *err) {
    double t0 = now_ms();
    *out = NULL;
    ts_gguf *g = NULL;
    ts_status st = ts_gguf_open(path, &g, err);
    if (st == TS_OK) {
        st = ts_model_from_gguf(g, out, err);
    }
    if (st != TS_OK) {
        return ts_error_prefix(err, "%s: ", path);
    }
    (*out)->load_ms = now_ms() - t0;
    return TS_OK;
}

void ts_model_close(ts_model *m) {
    if (m == NULL) {
        return;
    }
    ts_gguf_close(m->gguf);
    ts_hparams_free(&m->hp);
    free(m->layers);
    free(m->unused);
    free(m);
}

const ts_gguf_tensor *ts_model_tensor(const ts_model *m, ts_role role, int64_t layer) {
    if (role < TS_ROLE_FIRST_LAYER) {
        return m->global[role];
    }
    if (layer < 0 || layer >= m->hp.n_layer || role >= TS_ROLE_COUNT) {
        return NULL;
    }
    return m->layers[layer * TS_ROLE_COUNT + role];
}

void ts_model_each_param(const ts_model *m,
                         void (*fn)(const char *name, const ts_gguf_tensor *t, void *user),
                         void *user) {
    const ts_arch_desc *a = m->hp.arch;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const ts_tensor_pattern *p = &a->tensors[i];
        int64_t n = is_per_layer(p) ? m->hp.n_layer : 1;
        for (int64_t il = 0; il < n; il++) {
            const ts_gguf_tensor *t = ts_model_tensor(m, p->role, il);
            if (t != NULL) {
                fn(t->name, t, user);
            }
        }
    }
}
