/* hparams.c — the metadata key mapper: `<arch>.<suffix>` lookups with defaults. */
#include "model/hparams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

#define KEY_MAX 128

/* Reads integer `<arch>.<suffix>`. When absent: error if required, else *out = def. */
static ts_status get_int(const ts_gguf *g, const char *arch, const char *suffix, bool required,
                         int64_t def, int64_t *out, ts_error *err) {
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    ts_status st = ts_gguf_get_int(g, key, out, err);
    if (st == TS_ERR_NOT_FOUND) {
        if (required) {
            return ts_error_set(err, TS_ERR_FORMAT, "model: required metadata key '%s' is missing",
                                key);
        }
        *out = def;
        return TS_OK;
    }
    if (st != TS_OK) {
        return ts_error_prefix(err, "model: ");
    }
    return TS_OK;
}

static ts_status get_float(const ts_gguf *g, const char *arch, const char *suffix, double def,
                           float *out, ts_error *err) {
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v = def;
    ts_status st = ts_gguf_get_float(g, key, &v, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND) {
        return ts_error_prefix(err, "model: ");
    }
    if (!isfinite(v)) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: metadata key '%s' is not finite", key);
    }
    *out = (float)v;
    return TS_OK;
}

static ts_status check_positive(const char *what, int64_t v, int64_t max, ts_error *err) {
    if (v <= 0 || v > max) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: %s = %lld is out of range (expected 1..%lld)", what,
                            (long long)v, (long long)max);
    }
    return TS_OK;
}

/* The mixture-of-experts keys (all absent for a dense model). */
static ts_status load_moe(const ts_gguf *g, const char *arch, ts_hparams *hp, ts_error *err) {
    ts_status st;
    hp->moe_gating = TS_MOE_SOFTMAX;
    /* As llama.cpp's graphs: Mixtral ("llama") and Qwen3-MoE renormalize, Qwen2-MoE does not. */
    hp->moe_norm_w = strcmp(arch, "qwen2moe") != 0;
    hp->moe_w_scale = 1.0f;
    if ((st = get_int(g, arch, "expert_count", false, 0, &hp->n_expert, err))) {
        return st;
    }
    if (hp->n_expert == 0) {
        return TS_OK;
    }
    int64_t gating = TS_MOE_SOFTMAX;
    if ((st = check_positive("expert_count", hp->n_expert, 4096, err)) ||
        (st = get_int(g, arch, "expert_used_count", true, 0, &hp->n_expert_used, err)) ||
        (st = check_positive("expert_used_count", hp->n_expert_used, hp->n_expert, err)) ||
        (st =
             get_int(g, arch, "expert_feed_forward_length", false, hp->n_ff, &hp->n_ff_exp, err)) ||
        (st = check_positive("expert_feed_forward_length", hp->n_ff_exp, (int64_t)1 << 24, err)) ||
        (st = get_int(g, arch, "expert_shared_feed_forward_length", false, hp->n_ff_exp,
                      &hp->n_ff_shexp, err)) ||
        (st = check_positive("expert_shared_feed_forward_length", hp->n_ff_shexp, (int64_t)1 << 24,
                             err)) ||
        (st = get_int(g, arch, "expert_gating_func", false, TS_MOE_SOFTMAX, &gating, err)) ||
        (st = get_float(g, arch, "expert_weights_scale", 0.0, &hp->moe_w_scale, err))) {
        return st;
    }
    if (hp->moe_w_scale == 0.0f) {
        hp->moe_w_scale = 1.0f; /* 0 (the converters' "unset") means no scaling */
    }
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    ts_error absent;
    bool norm;
    if (ts_gguf_get_bool(g, key, &norm, &absent) == TS_OK) {
        hp->moe_norm_w = norm;
    }
    if (gating != TS_MOE_SOFTMAX && gating != TS_MOE_SIGMOID) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: %s.expert_gating_func %lld is not supported (1 softmax, "
                            "2 sigmoid)",
                            arch, (long long)gating);
    }
    hp->moe_gating = (ts_moe_gating)gating;
    if (hp->moe_gating == TS_MOE_SIGMOID && hp->moe_norm_w) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: sigmoid expert gating with normalized weights "
                            "(%s.expert_weights_norm) is not supported yet",
                            arch);
    }
    return TS_OK;
}

ts_status ts_hparams_load(const ts_gguf *g, ts_hparams *hp, ts_error *err) {
    memset(hp, 0, sizeof *hp);
    ts_gguf_str arch_name;
    ts_status st = ts_gguf_get_str(g, "general.architecture", &arch_name, err);
    if (st == TS_ERR_NOT_FOUND) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: metadata key 'general.architecture' is missing");
    }
    if (st != TS_OK) {
        return ts_error_prefix(err, "model: ");
    }
    char arch[64];
    if (arch_name.len >= sizeof arch || memchr(arch_name.ptr, '\0', arch_name.len) != NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: architecture name (%llu bytes) is not a supported one (%s)",
                            (unsigned long long)arch_name.len, ts_arch_supported_list());
    }
    memcpy(arch, arch_name.ptr, arch_name.len);
    arch[arch_name.len] = '\0';
    hp->arch = ts_arch_find(arch);
    if (hp->arch == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: unknown architecture '%s' (supported: %s)", arch,
                            ts_arch_supported_list());
    }

    const int64_t big = (int64_t)1 << 24;
    if ((st = get_int(g, arch, "context_length", true, 0, &hp->n_ctx_train, err)) ||
        (st = get_int(g, arch, "embedding_length", true, 0, &hp->n_embd, err)) ||
        (st = get_int(g, arch, "block_count", true, 0, &hp->n_layer, err)) ||
        (st = get_int(g, arch, "feed_forward_length", true, 0, &hp->n_ff, err)) ||
        (st = get_int(g, arch, "attention.head_count", true, 0, &hp->n_head, err))) {
        return st;
    }
    if ((st = check_positive("context_length", hp->n_ctx_train, (int64_t)1 << 40, err)) ||
        (st = check_positive("embedding_length", hp->n_embd, big, err)) ||
        (st = check_positive("block_count", hp->n_layer, 4096, err)) ||
        (st = check_positive("feed_forward_length", hp->n_ff, big, err)) ||
        (st = check_positive("attention.head_count", hp->n_head, 65536, err))) {
        return st;
    }
    if ((st = get_int(g, arch, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv,
                      err)) ||
        (st = check_positive("attention.head_count_kv", hp->n_head_kv, hp->n_head, err))) {
        return st;
    }
    if (hp->n_head % hp->n_head_kv != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: head_count %lld is not a multiple of head_count_kv %lld",
                            (long long)hp->n_head, (long long)hp->n_head_kv);
    }
    if ((st = get_int(g, arch, "attention.key_length", false, hp->n_embd / hp->n_head,
                      &hp->head_dim, err)) ||
        (st = check_positive("attention.key_length", hp->head_dim, 65536, err))) {
        return st;
    }
    int64_t value_length;
    if ((st = get_int(g, arch, "attention.value_length", false, hp->head_dim, &value_length,
                      err))) {
        return st;
    }
    if (value_length != hp->head_dim) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: attention.value_length %lld differs from key_length %lld",
                            (long long)value_length, (long long)hp->head_dim);
    }
    if ((st = get_int(g, arch, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, err)) ||
        (st = check_positive("rope.dimension_count", hp->n_rot, hp->head_dim, err))) {
        return st;
    }
    if (hp->n_rot % 2 != 0) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: rope.dimension_count %lld is odd",
                            (long long)hp->n_rot);
    }

    const char *eps_key = hp->arch->norm == TS_NORM_RMS ? "attention.layer_norm_rms_epsilon"
                                                         : "attention.layer_norm_epsilon";
    if ((st = get_float(g, arch, eps_key, 1e-5, &hp->norm_eps, err)) ||
        (st = get_float(g, arch, "rope.freq_base", 10000.0, &hp->rope_base, err)) ||
        (st = get_float(g, arch, "attn_logit_softcapping", 0.0, &hp->attn_softcap, err)) ||
        (st = get_float(g, arch, "final_logit_softcapping", 0.0, &hp->final_softcap, err))) {
        return st;
    }
    float swa_base = hp->arch->swa_rope_base > 0 ? hp->arch->swa_rope_base : hp->rope_base;
    if ((st = get_float(g, arch, "rope.freq_base_swa", swa_base, &hp->rope_base_swa, err))) {
        return st;
    }
    hp->rope_freq_scale = 1.0f;
    float factor = 0.0f;
    if ((st = get_float(g, arch, "rope.scaling.factor", 0.0, &factor, err))) {
        return st;
    }
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    ts_gguf_str scaling_type;
    bool linear = true;
    /* The key is optional: absent (or not a string) means linear scaling by the factor. */
    ts_error absent;
    if (ts_gguf_get_str(g, key, &scaling_type, &absent) == TS_OK) {
        linear = scaling_type.len == 6 && memcmp(scaling_type.ptr, "linear", 6) == 0;
        bool none = scaling_type.len == 4 && memcmp(scaling_type.ptr, "none", 4) == 0;
        if (!linear && !none) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "model: rope.scaling.type '%.*s' is not supported (linear, none)",
                                (int)(scaling_type.len > 32 ? 32 : scaling_type.len),
                                scaling_type.ptr);
        }
    }
    if (linear && factor > 0.0f) {
        hp->rope_freq_scale = 1.0f / factor;
    }
    if (hp->arch->swa_pattern > 0 &&
        ((st = get_int(g, arch, "attention.sliding_window", false, 0, &hp->n_swa, err)) ||
         (st = get_int(g, arch, "attention.sliding_window_pattern", false,
                       hp->arch->swa_pattern, &hp->swa_pattern, err)))) {
        return st;
    }
    if (hp->swa_pattern < 0 || hp->swa_pattern > 1024) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: attention.sliding_window_pattern %lld is out of range",
                            (long long)hp->swa_pattern);
    }
    if (hp->n_swa < 0) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: attention.sliding_window is negative");
    }
    if ((st = load_moe(g, arch, hp, err)) != TS_OK) {
        return st;
    }
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = hp->arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;

    const ts_gguf_tensor *embd;
    if (ts_gguf_find_tensor(g, "token_embd.weight", &embd) != TS_OK) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    }
    hp->n_vocab = embd->ne[1];
    return TS_OK;
}

bool ts_hparams_layer_is_swa(const ts_hparams *hp, int64_t il) {
    int64_t n = hp->swa_pattern;
    return n > 0 && hp->n_swa > 0 && il % n < n - 1;
}

int64_t ts_hparams_dim(const ts_hparams *hp, ts_dim dim) {
    switch (dim) {
    case TS_DIM_NONE: return 0;
    case TS_DIM_EMBD: return hp->n_embd;
    case TS_DIM_VOCAB: return hp->n_vocab;
    case TS_DIM_FF: return hp->n_ff;
    case TS_DIM_FF2: return 2 * hp->n_ff;
    case TS_DIM_Q: return hp->n_head * hp->head_dim;
    case TS_DIM_KV: return hp->n_head_kv * hp->head_dim;
    case TS_DIM_QKV: return (hp->n_head + 2 * hp->n_head_kv) * hp->head_dim;
    case TS_DIM_HEAD: return hp->head_dim;
    case TS_DIM_CTX_TRAIN: return hp->n_ctx_train;
    case TS_DIM_EXPERT:
        return hp->n_expert;
    case TS_DIM_FF_EXP:
        return hp->n_ff_exp;
    case TS_DIM_FF_SHEXP:
        return hp->n_ff_shexp;
    }
    return 0;
}
