/* hparams.c — the metadata key mapper: `<arch>.<suffix>` lookups with defaults. */
#include "model/hparams.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A multiplier key: absent (or 0, which llama.cpp treats as "not set") leaves *out as it is;
 * anything else must be a positive number. */
static ts_status get_scale(const ts_gguf *g, const char *arch, const char *suffix, float *out,
                           ts_error *err) {
    float v = 0.0f;
    ts_status st = get_float(g, arch, suffix, 0.0, &v, err);
    if (st != TS_OK) {
        return st;
    }
    if (v < 0.0f) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: metadata key '%s.%s' is %g (must be > 0)",
                            arch, suffix, (double)v);
    }
    if (v > 0.0f) {
        *out = v;
    }
    return TS_OK;
}

/* The multipliers some families add: Granite's muP scales, Cohere's and Granite's logit scale
 * (which the two apply in opposite directions). */
static ts_status load_family_scales(const ts_gguf *g, const char *arch, ts_hparams *hp,
                                    ts_error *err) {
    hp->residual_scale = 1.0f;
    hp->logit_mul = 1.0f;
    ts_status st;
    if (hp->arch->mup_scales &&
        ((st = get_scale(g, arch, "embedding_scale", &hp->embd_scale, err)) ||
         (st = get_scale(g, arch, "residual_scale", &hp->residual_scale, err)) ||
         (st = get_scale(g, arch, "attention.scale", &hp->attn_scale, err)))) {
        return st;
    }
    float logit = 1.0f;
    if (hp->arch->logit_scale != TS_LOGIT_SCALE_NONE &&
        (st = get_scale(g, arch, "logit_scale", &logit, err))) {
        return st;
    }
    hp->logit_mul = hp->arch->logit_scale == TS_LOGIT_SCALE_DIV ? 1.0f / logit : logit;
    return TS_OK;
}

/* Which layers slide and which rotate must be knowable: Cohere 2's global layers are the ones
 * without RoPE, so its window is required; a family without sliding-window layers here must not
 * carry a window pattern, or its window layers would silently attend to everything. */
static ts_status check_layer_kinds(const ts_gguf *g, const char *arch, const ts_hparams *hp,
                                   ts_error *err) {
    char key[KEY_MAX];
    if (hp->arch->rope_swa_only && hp->n_swa == 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: required metadata key '%s.attention.sliding_window' is missing "
                            "(its global layers are the ones without RoPE)",
                            arch);
    }
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    uint64_t index;
    if (hp->arch->swa_pattern == 0 && ts_gguf_find_key(g, key, &index) == TS_OK) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: metadata key '%s' marks sliding-window layers, which tessera "
                            "does not support for architecture '%s'",
                            key, arch);
    }
    return TS_OK;
}

/* <arch>.attention.sliding_window and sliding_window_pattern: the pattern is a period (an
 * integer: layer il slides when il % n < n - 1) or one bool per layer (true: sliding), as
 * llama.cpp's converter writes it from the config's layer_types. Fills hp->swa_layers when
 * some layer slides. A family without sliding-window layers (swa_pattern 0) reads neither. */
static ts_status load_swa(const ts_gguf *g, const char *arch, int64_t n_layer_file,
                          ts_hparams *hp, ts_error *err) {
    if (hp->arch->swa_pattern == 0) {
        return TS_OK;
    }
    ts_status st = get_int(g, arch, "attention.sliding_window", false, 0, &hp->n_swa, err);
    if (st != TS_OK) {
        return st;
    }
    if (hp->n_swa < 0 || hp->n_swa > ((int64_t)1 << 40)) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: %s.attention.sliding_window = %lld is out of range", arch,
                            (long long)hp->n_swa);
    }
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    uint64_t index;
    ts_gguf_array a = {0};
    bool is_array = ts_gguf_find_key(g, key, &index) == TS_OK &&
                    ts_gguf_kv_type(g, index) == TS_GGUF_ARRAY;
    hp->swa_pattern = hp->arch->swa_pattern;
    if (is_array) {
        hp->swa_pattern = 0;
        if ((st = ts_gguf_kv_array(g, index, &a, err)) != TS_OK) {
            return ts_error_prefix(err, "model: ");
        }
        /* One entry per layer of the file (block_count, which may include GLM-style
         * prediction layers after the ones a forward pass runs). */
        if (a.n != (uint64_t)hp->n_layer && a.n != (uint64_t)n_layer_file) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "model: metadata key '%s' has %llu entries, expected one per "
                                "layer (%lld)",
                                key, (unsigned long long)a.n, (long long)hp->n_layer);
        }
    } else if ((st = get_int(g, arch, "attention.sliding_window_pattern", false,
                             hp->arch->swa_pattern, &hp->swa_pattern, err)) != TS_OK) {
        return st;
    } else if (hp->swa_pattern < 0 || hp->swa_pattern > 1024) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: metadata key '%s' = %lld is out of range (0..1024)", key,
                            (long long)hp->swa_pattern);
    }
    if (hp->n_swa == 0) {
        return TS_OK;
    }
    hp->swa_layers = calloc((size_t)hp->n_layer, sizeof *hp->swa_layers);
    if (hp->swa_layers == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "model: out of memory");
    }
    bool any = false;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        int64_t v;
        if (!is_array) {
            int64_t n = hp->swa_pattern;
            v = n > 0 && il % n < n - 1;
        } else if (ts_gguf_array_int(&a, (uint64_t)il, &v, err) != TS_OK) {
            return ts_error_prefix(err, "model: metadata key '%s' entry %lld: ", key,
                                   (long long)il);
        }
        hp->swa_layers[il] = v != 0;
        any = any || v != 0;
    }
    if (!any) {
        free(hp->swa_layers);
        hp->swa_layers = NULL;
    }
    return TS_OK;
}

static bool str_is(ts_gguf_str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* transformers' get_mscale: YaRN's attention factor for a scaling factor. */
static double yarn_mscale(double factor, double mscale) {
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* llama3's per-pair divisors (Llama 3.1): pairs whose wavelength is shorter than
 * n_orig / high keep their frequency, longer than n_orig / low are divided by factor, and
 * between the two the inverse frequency is interpolated by n_orig / wavelength. Computed in
 * float32, as llama.cpp's converter computes rope_freqs.weight. */
static ts_status llama3_factors(ts_hparams *hp, float factor, float low, float high,
                                ts_error *err) {
    if (!(factor >= 1.0f) || !(low > 0.0f) || !(high > low)) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: llama3 RoPE scaling needs factor >= 1 and 0 < "
                            "low_freq_factor < high_freq_factor (got %g, %g, %g)",
                            (double)factor, (double)low, (double)high);
    }
    int64_t half = hp->n_rot / 2;
    hp->rope_llama3_factors = malloc((size_t)half * sizeof(float));
    if (hp->rope_llama3_factors == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "model: out of memory");
    }
    float n_orig = (float)hp->rope_n_ctx_orig;
    float low_wavelen = n_orig / low, high_wavelen = n_orig / high;
    for (int64_t i = 0; i < half; i++) {
        float freq = 1.0f / powf(hp->rope_base, (float)(2 * i) / (float)hp->n_rot);
        float wavelen = 2.0f * (float)M_PI / freq;
        float f;
        if (wavelen < high_wavelen) {
            f = 1.0f;
        } else if (wavelen > low_wavelen) {
            f = factor;
        } else {
            float smooth = (n_orig / wavelen - low) / (high - low);
            f = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
        hp->rope_llama3_factors[i] = f;
    }
    return TS_OK;
}

/* Encoder traits, attention causality and pooling. An encoder must be bidirectional: this
 * graph has no causal variant of the post-norm encoder. */
static ts_status load_encoder(const ts_gguf *g, const char *arch, ts_hparams *hp, ts_error *err) {
    hp->enc = ts_arch_encoder(arch);
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.attention.causal", arch);
    bool causal = hp->enc == NULL;
    ts_status st = ts_gguf_get_bool(g, key, &causal, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND) {
        return ts_error_prefix(err, "model: ");
    }
    if (causal != (hp->enc == NULL)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: %s = %s is not supported for architecture '%s' (%s)", key,
                            causal ? "true" : "false", arch,
                            hp->enc != NULL ? "an encoder attends both ways"
                                            : "a decoder attends causally");
    }
    hp->causal = causal;
    int64_t pooling = 0;
    int64_t def = hp->enc != NULL ? (int64_t)hp->enc->pooling : (int64_t)TS_POOL_LAST;
    if ((st = get_int(g, arch, "pooling_type", false, def, &pooling, err))) {
        return st;
    }
    if (pooling < TS_POOL_NONE || pooling > TS_POOL_LAST) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "model: %s.pooling_type %lld is not supported (0 none, 1 mean, 2 cls, "
                            "3 last; 4 rank is a reranker)",
                            arch, (long long)pooling);
    }
    hp->pooling = (ts_pool_kind)pooling;
    const ts_gguf_tensor *types;
    if (ts_gguf_find_tensor(g, "token_types.weight", &types) == TS_OK) {
        hp->n_token_types = types->ne[1];
        if (hp->n_token_types < 1) {
            return ts_error_set(err, TS_ERR_FORMAT, "model: tensor 'token_types.weight' is empty");
        }
    }
    return TS_OK;
}

/* <arch>.rope.scaling.*: the type (llama.cpp's names none, linear, yarn, longrope, and llama3
 * for files that give Llama 3.1's scaling as metadata instead of rope_freqs.weight), the
 * factor and the YaRN / Phi-3 parameters, with llama.cpp's defaults. */
static ts_status load_rope_scaling(const ts_gguf *g, const char *arch, ts_hparams *hp,
                                   ts_error *err) {
    hp->rope_freq_scale = 1.0f;
    hp->rope_scaling = TS_ROPE_SCALING_LINEAR;
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    ts_gguf_str type;
    bool none = false;
    /* The key is optional: absent (or not a string) means linear scaling by the factor. */
    ts_error absent;
    if (ts_gguf_get_str(g, key, &type, &absent) == TS_OK) {
        if (str_is(type, "none")) {
            none = true;
        } else if (str_is(type, "yarn")) {
            hp->rope_scaling = TS_ROPE_SCALING_YARN;
        } else if (str_is(type, "longrope")) {
            hp->rope_scaling = TS_ROPE_SCALING_LONGROPE;
        } else if (str_is(type, "llama3")) {
            hp->rope_scaling = TS_ROPE_SCALING_LLAMA3;
        } else if (!str_is(type, "linear")) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "model: rope.scaling.type '%.*s' is not supported (none, linear, "
                                "yarn, longrope, llama3)",
                                (int)(type.len > 32 ? 32 : type.len), type.ptr);
        }
    }
    float factor = 0.0f, attn = 1.0f, log_mul = 0.0f, yarn_attn = -1.0f, ext = -1.0f;
    int64_t n_orig_def = hp->rope_scaling == TS_ROPE_SCALING_LLAMA3 ? 8192 : hp->n_ctx_train;
    ts_status st;
    if ((st = get_float(g, arch, "rope.scaling.factor", 0.0, &factor, err)) ||
        (st = get_int(g, arch, "rope.scaling.original_context_length", false, n_orig_def,
                      &hp->rope_n_ctx_orig, err)) ||
        (st = check_positive("rope.scaling.original_context_length", hp->rope_n_ctx_orig,
                             (int64_t)1 << 40, err)) ||
        (st = get_float(g, arch, "rope.scaling.attn_factor", -1.0, &attn, err)) ||
        (st = get_float(g, arch, "rope.scaling.yarn_ext_factor", -1.0, &ext, err)) ||
        (st = get_float(g, arch, "rope.scaling.yarn_attn_factor", -1.0, &yarn_attn, err)) ||
        (st = get_float(g, arch, "rope.scaling.yarn_beta_fast", 32.0, &hp->rope_beta_fast, err)) ||
        (st = get_float(g, arch, "rope.scaling.yarn_beta_slow", 1.0, &hp->rope_beta_slow, err)) ||
        (st = get_float(g, arch, "rope.scaling.yarn_log_multiplier", 0.0, &log_mul, err))) {
        return st;
    }
    if (factor < 0.0f || (factor > 0.0f && factor < 1e-3f) || attn == 0.0f || attn < -1.0f) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: rope.scaling.factor %g or rope.scaling.attn_factor %g is out "
                            "of range",
                            (double)factor, (double)attn);
    }
    /* transformers: a YaRN config without a factor scales by the context extension. */
    double context_ratio = (double)hp->n_ctx_train / (double)hp->rope_n_ctx_orig;
    if (hp->rope_scaling == TS_ROPE_SCALING_YARN && factor == 0.0f) {
        factor = (float)context_ratio;
    }
    if (!none && factor > 0.0f && hp->rope_scaling != TS_ROPE_SCALING_LLAMA3 &&
        hp->rope_scaling != TS_ROPE_SCALING_LONGROPE) {
        hp->rope_freq_scale = 1.0f / factor;
    }
    const ts_gguf_tensor *long_factors = NULL;
    ts_gguf_find_tensor(g, "rope_factors_long.weight", &long_factors);
    if (attn > 0.0f) {
        hp->rope_attn_factor = attn;
    } else if (long_factors != NULL || hp->rope_scaling == TS_ROPE_SCALING_LONGROPE) {
        /* Phi-3's converter writes attn_factor; without it, transformers' longrope default
         * from the context extension s: sqrt(1 + ln(s) / ln(n_ctx_orig)). */
        double s = factor > 0.0f ? factor : context_ratio;
        hp->rope_attn_factor =
            s > 1.0 ? (float)sqrt(1.0 + log(s) / log((double)hp->rope_n_ctx_orig)) : 1.0f;
    } else {
        hp->rope_attn_factor = 1.0f;
    }
    hp->rope_ext_factor = 0.0f;
    if (hp->rope_scaling == TS_ROPE_SCALING_YARN) {
        hp->rope_ext_factor = ext >= 0.0f ? ext : 1.0f;
        if (hp->rope_ext_factor > 1.0f || !(hp->rope_beta_fast > 0.0f) ||
            !(hp->rope_beta_slow > 0.0f)) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "model: YaRN parameters out of range (ext_factor %g in 0..1, "
                                "beta_fast %g and beta_slow %g > 0)",
                                (double)hp->rope_ext_factor, (double)hp->rope_beta_fast,
                                (double)hp->rope_beta_slow);
        }
        /* transformers: attention_factor when given (the converter's yarn_attn_factor), else
         * get_mscale(factor) (mscale / mscale_all_dim form when yarn_log_multiplier is set, with
         * mscale 1 as llama.cpp assumes). */
        double f = factor > 0.0f ? factor : 1.0;
        double m = yarn_attn > 0.0f  ? yarn_attn
                   : log_mul != 0.0f ? yarn_mscale(f, 1.0) / yarn_mscale(f, log_mul)
                                     : yarn_mscale(f, 1.0);
        hp->rope_attn_factor *= (float)m;
    }
    if (hp->rope_scaling == TS_ROPE_SCALING_LLAMA3) {
        float low = 1.0f, high = 4.0f;
        if ((st = get_float(g, arch, "rope.scaling.low_freq_factor", 1.0, &low, err)) ||
            (st = get_float(g, arch, "rope.scaling.high_freq_factor", 4.0, &high, err)) ||
            (st = llama3_factors(hp, factor > 0.0f ? factor : 8.0f, low, high, err))) {
            return st;
        }
    }
    return TS_OK;
}

void ts_hparams_free(ts_hparams *hp) {
    free(hp->rope_llama3_factors);
    hp->rope_llama3_factors = NULL;
    free(hp->swa_layers);
    hp->swa_layers = NULL;
}

/* The mixture-of-experts keys (all absent for a dense model). */
static ts_status load_moe(const ts_gguf *g, const char *arch, ts_hparams *hp, ts_error *err) {
    ts_status st;
    hp->moe_gating = hp->arch->moe_sigmoid ? TS_MOE_SIGMOID : TS_MOE_SOFTMAX;
    /* As llama.cpp's graphs: Mixtral ("llama"), Qwen3-MoE and Granite MoE renormalize,
     * Qwen2-MoE and OLMoE do not (the moe_raw_w trait). */
    hp->moe_norm_w = !hp->arch->moe_raw_w;
    hp->moe_w_scale = 1.0f;
    if ((st = get_int(g, arch, "expert_count", false, 0, &hp->n_expert, err))) {
        return st;
    }
    if (hp->n_expert == 0) {
        return TS_OK;
    }
    int64_t gating = 0;
    /* dots.llm1 and DeepSeek files give their shared expert as a count of expert widths. */
    int64_t n_shared = 1;
    if ((st = check_positive("expert_count", hp->n_expert, 4096, err)) ||
        (st = get_int(g, arch, "expert_used_count", true, 0, &hp->n_expert_used, err)) ||
        (st = check_positive("expert_used_count", hp->n_expert_used, hp->n_expert, err)) ||
        (st =
             get_int(g, arch, "expert_feed_forward_length", false, hp->n_ff, &hp->n_ff_exp, err)) ||
        (st = check_positive("expert_feed_forward_length", hp->n_ff_exp, (int64_t)1 << 24, err)) ||
        (st = get_int(g, arch, "expert_shared_count", false, 1, &n_shared, err)) ||
        (st = n_shared == 0 ? TS_OK : check_positive("expert_shared_count", n_shared, 64, err)) ||
        (st = get_int(g, arch, "expert_shared_feed_forward_length", false,
                      (n_shared > 0 ? n_shared : 1) * hp->n_ff_exp, &hp->n_ff_shexp, err)) ||
        (st = check_positive("expert_shared_feed_forward_length", hp->n_ff_shexp, (int64_t)1 << 24,
                             err)) ||
        (st = get_int(g, arch, "expert_gating_func", false,
                      hp->arch->moe_sigmoid ? TS_MOE_SIGMOID : TS_MOE_SOFTMAX, &gating, err)) ||
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
    /* GLM-4.5 files append their multi-token-prediction layers as the last blocks; a forward
     * pass runs only the layers before them (their tensors are left unused). */
    int64_t n_nextn = 0;
    if ((st = get_int(g, arch, "nextn_predict_layers", false, 0, &n_nextn, err))) {
        return st;
    }
    if (n_nextn < 0 || n_nextn >= hp->n_layer) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: %s.nextn_predict_layers = %lld is out of range (expected "
                            "0..%lld: fewer than block_count %lld)",
                            arch, (long long)n_nextn, (long long)(hp->n_layer - 1),
                            (long long)hp->n_layer);
    }
    hp->n_layer -= n_nextn;
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
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%s.attention.key_length", arch);
    uint64_t index;
    if (ts_gguf_find_key(g, key, &index) != TS_OK && hp->n_embd % hp->n_head != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "model: %s.embedding_length %lld is not a multiple of "
                            "attention.head_count %lld, and '%s' (the head size) is missing",
                            arch, (long long)hp->n_embd, (long long)hp->n_head, key);
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
    if ((st = load_rope_scaling(g, arch, hp, err)) != TS_OK) {
        return st;
    }
    if ((st = load_swa(g, arch, hp->n_layer + n_nextn, hp, err)) != TS_OK) {
        return st;
    }
    if ((st = load_moe(g, arch, hp, err)) != TS_OK) {
        return st;
    }
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = hp->arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if ((st = load_family_scales(g, arch, hp, err)) || (st = check_layer_kinds(g, arch, hp, err))) {
        return st;
    }

    const ts_gguf_tensor *embd;
    if (ts_gguf_find_tensor(g, "token_embd.weight", &embd) != TS_OK) {
        return ts_error_set(err, TS_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    }
    hp->n_vocab = embd->ne[1];
    return load_encoder(g, arch, hp, err);
}

bool ts_hparams_layer_is_swa(const ts_hparams *hp, int64_t il) {
    return hp->swa_layers != NULL && il >= 0 && il < hp->n_layer && hp->swa_layers[il];
}

bool ts_hparams_layer_has_rope(const ts_hparams *hp, int64_t il) {
    const ts_arch_desc *a = hp->arch;
    if (a->pos == TS_POS_LEARNED || (a->nope_step > 0 && (il + 1) % a->nope_step == 0)) {
        return false;
    }
    if (a->rope_swa_only || (a->rope_swa_only_if_swa && hp->n_swa > 0)) {
        return ts_hparams_layer_is_swa(hp, il);
    }
    return true;
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
    case TS_DIM_TOKEN_TYPES: return hp->n_token_types;
    case TS_DIM_ROT_HALF:
        return hp->n_rot / 2;
    case TS_DIM_EXPERT:
        return hp->n_expert;
    case TS_DIM_FF_EXP:
        return hp->n_ff_exp;
    case TS_DIM_FF_SHEXP:
        return hp->n_ff_shexp;
    case TS_DIM_N_HEAD:
        return hp->n_head;
    }
    return 0;
}
