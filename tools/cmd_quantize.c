/*
 * cmd_quantize.c — `tessera quantize IN.gguf OUT.gguf TYPE [--pure]`: requantize a model.
 *
 * IN holds F32, F16 or BF16 weights. TYPE is a tensor type (F32 F16 BF16 Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 IQ4_NL Q2_K Q3_K Q4_K Q5_K Q6_K) or a mix (Q4_K_M, Q5_K_M). Rules, as
 * llama.cpp users know them:
 *   - 1-D tensors (norms, biases) are written as F32; tensors whose name does not end in
 *     "weight", "*_norm.weight" and "ffn_gate_inp.weight" keep their type.
 *   - output.weight (or token_embd.weight when the embeddings are tied) becomes Q6_K for
 *     any K-quant or 4/5-bit type (Q8_0 stays Q8_0, float types stay float).
 *   - Q4_K_M / Q5_K_M: attn_v and ffn_down become Q6_K in the first and last eighth of the
 *     layers and in every third layer between; fused attn_qkv becomes Q5_K / Q6_K.
 *   - A row length that the chosen K-quant's 256-element block does not divide falls back
 *     to Q5_0 (Q4_K), Q5_1 (Q5_K), Q8_0 (Q6_K) or IQ4_NL (Q2_K, Q3_K).
 * --pure gives every quantizable matrix exactly TYPE, with no output/attn_v/ffn_down rules
 * and no fallback: a row that the block size does not divide is an error naming the tensor.
 * Quantization uses the reference quantizers (byte-identical to llama-quantize without an
 * importance matrix). Progress goes to stderr. Exit: 0 ok, 1 failure, 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "util/error.h"

/* llama.cpp's general.file_type values for the types we write. */
typedef struct target {
    const char *name;
    ts_type type;   /* default tensor type */
    int mix;        /* 1 for the _M mixes */
    uint32_t ftype; /* general.file_type */
} target;

static const target k_targets[] = {
    {"F32", TS_TYPE_F32, 0, 0},        {"F16", TS_TYPE_F16, 0, 1},
    {"BF16", TS_TYPE_BF16, 0, 32},     {"Q4_0", TS_TYPE_Q4_0, 0, 2},
    {"Q4_1", TS_TYPE_Q4_1, 0, 3},      {"Q5_0", TS_TYPE_Q5_0, 0, 8},
    {"Q5_1", TS_TYPE_Q5_1, 0, 9},      {"Q8_0", TS_TYPE_Q8_0, 0, 7},
    {"IQ4_NL", TS_TYPE_IQ4_NL, 0, 25}, {"Q2_K", TS_TYPE_Q2_K, 0, 10},
    {"Q3_K", TS_TYPE_Q3_K, 0, 12},     {"Q4_K", TS_TYPE_Q4_K, 0, 15},
    {"Q5_K", TS_TYPE_Q5_K, 0, 17},     {"Q6_K", TS_TYPE_Q6_K, 0, 18},
    {"Q4_K_M", TS_TYPE_Q4_K, 1, 15},   {"Q5_K_M", TS_TYPE_Q5_K, 1, 17},
};

typedef struct plan {
    const ts_gguf *in;
    ts_type *out_type; /* per tensor */
    uint64_t n;
    uint64_t done_bytes, total_bytes;
    float *row; /* scratch: one f32 row of the widest tensor */
} plan;

static void usage(FILE *f) {
    fprintf(f, "usage: tessera quantize IN.gguf OUT.gguf TYPE [--pure]\n\n"
               "Requantizes an F32/F16/BF16 model. TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0\n"
               "IQ4_NL Q2_K Q3_K Q4_K Q5_K Q6_K, or the mixes Q4_K_M Q5_K_M.\n"
               "  --pure  use TYPE for every quantizable matrix (no per-tensor rules)\n");
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int is_float_type(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
}

static int use_more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's fallback when 256 does not divide the row. */
static ts_type k_fallback(ts_type t) {
    switch (t) {
    case TS_TYPE_Q4_K:
        return TS_TYPE_Q5_0;
    case TS_TYPE_Q5_K:
        return TS_TYPE_Q5_1;
    case TS_TYPE_Q6_K:
        return TS_TYPE_Q8_0;
    case TS_TYPE_Q2_K:
    case TS_TYPE_Q3_K:
        return TS_TYPE_IQ4_NL;
    default:
        return t;
    }
}

/* Chooses every tensor's output type; returns 0, or 1 after printing what is wrong. */
static int choose_types(const ts_gguf *g, const target *tg, int pure, ts_type *out) {
    const uint64_t n = ts_gguf_tensor_count(g);
    int64_t n_attn_v = 0, n_ffn_down = 0, i_attn_v = 0, i_ffn_down = 0;
    const ts_gguf_tensor *probe = NULL;
    const int tied = ts_gguf_find_tensor(g, "output.weight", &probe) != TS_OK;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = ts_gguf_tensor_at(g, i)->name;
        n_attn_v += strstr(name, "attn_v.weight") != NULL;
        n_ffn_down += strstr(name, "ffn_down") != NULL && ends_with(name, "weight");
    }
    for (uint64_t i = 0; i < n; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        const char *name = t->name;
        if (!is_float_type(t->type)) {
            fprintf(stderr,
                    "quantize: tensor '%s' has type %s; the input must be F32, F16 or "
                    "BF16\n",
                    name, ts_type_name(t->type));
            return 1;
        }
        if (t->n_dims < 2) {
            out[i] = TS_TYPE_F32;
            continue;
        }
        int quantizable = ends_with(name, "weight") && strstr(name, "_norm.weight") == NULL &&
                          strstr(name, "ffn_gate_inp.weight") == NULL;
        if (!quantizable) {
            out[i] = t->type;
            continue;
        }
        ts_type ty = tg->type;
        const int quantized = !is_float_type(ty);
        if (!pure && quantized) {
            const int is_output = strcmp(name, "output.weight") == 0 ||
                                  (tied && strcmp(name, "token_embd.weight") == 0);
            if (is_output) {
                ty = ty == TS_TYPE_Q8_0 ? TS_TYPE_Q8_0 : TS_TYPE_Q6_K;
                if (t->ne[0] % 256 != 0) {
                    ty = TS_TYPE_Q8_0;
                }
            } else if (strstr(name, "attn_v.weight") != NULL) {
                if (tg->mix && use_more_bits(i_attn_v, n_attn_v)) {
                    ty = TS_TYPE_Q6_K;
                }
                i_attn_v++;
            } else if (strstr(name, "ffn_down") != NULL) {
                if (tg->mix && use_more_bits(i_ffn_down, n_ffn_down)) {
                    ty = TS_TYPE_Q6_K;
                }
                i_ffn_down++;
            } else if (strstr(name, "attn_qkv.weight") != NULL && tg->mix) {
                ty = tg->type == TS_TYPE_Q4_K ? TS_TYPE_Q5_K : TS_TYPE_Q6_K;
            }
            if (t->ne[0] % (int64_t)ts_type_block_size(ty) != 0) {
                ts_type fb = k_fallback(ty);
                fprintf(stderr,
                        "quantize: tensor '%s': ne[0] = %" PRId64 " is not a multiple "
                        "of %s's block size %zu; using %s\n",
                        name, t->ne[0], ts_type_name(ty), ts_type_block_size(ty), ts_type_name(fb));
                ty = fb;
            }
        }
        const size_t bs = ts_type_block_size(ty);
        if (t->ne[0] % (int64_t)bs != 0) {
            fprintf(stderr,
                    "quantize: tensor '%s': ne[0] = %" PRId64 " is not a multiple of "
                    "the block size %zu of %s\n",
                    name, t->ne[0], bs, ts_type_name(ty));
            return 1;
        }
        out[i] = ty;
    }
    return 0;
}

static void progress(const plan *p, const char *name) {
    const int width = 30;
    double frac = p->total_bytes ? (double)p->done_bytes / (double)p->total_bytes : 1.0;
    int fill = (int)(frac * width + 0.5);
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-40.40s", fill, "##############################",
            width - fill, "", (int)(frac * 100.0 + 0.5), name);
    fflush(stderr);
}

/* Writer callback: converts tensor `index` into dst (exactly its output bytes). */
static ts_status fill_tensor(void *ctx, uint64_t index, void *dst, size_t nbytes, ts_error *err) {
    plan *p = ctx;
    const ts_gguf_tensor *t = ts_gguf_tensor_at(p->in, index);
    const ts_isa isa = ts_quant_detect_isa();
    const ts_quant_ops *src = ts_quant_ops_get(t->type, isa);
    const ts_quant_ops *dstops = ts_quant_ops_get(p->out_type[index], isa);
    if (src == NULL || dstops == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "quantize: tensor '%s': no kernels for %s",
                            t->name, ts_type_name(src == NULL ? t->type : p->out_type[index]));
    }
    const int64_t ne0 = t->ne[0];
    const uint64_t rows = t->n_elements / (uint64_t)ne0;
    size_t in_row = 0, out_row = 0;
    if (!ts_type_row_bytes(t->type, (uint64_t)ne0, &in_row) ||
        !ts_type_row_bytes(p->out_type[index], (uint64_t)ne0, &out_row) ||
        out_row * rows != nbytes) {
        return ts_error_set(err, TS_ERR_INTERNAL, "quantize: tensor '%s': size mismatch", t->name);
    }
    for (uint64_t r = 0; r < rows; r++) {
        src->to_float((const char *)t->data + r * in_row, p->row, ne0);
        dstops->from_float(p->row, (char *)dst + r * out_row, ne0);
    }
    p->done_bytes += t->nbytes;
    progress(p, t->name);
    return TS_OK;
}

static int skip_key(const char *key) {
    return strcmp(key, "general.file_type") == 0 ||
           strcmp(key, "general.quantization_version") == 0 ||
           strcmp(key, "general.alignment") == 0;
}

int ts_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0, pure = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pure") == 0) {
            pure = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || npos == 3) {
            fprintf(stderr, "quantize: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos != 3) {
        usage(stderr);
        return 2;
    }
    const target *tg = NULL;
    for (size_t i = 0; i < sizeof k_targets / sizeof k_targets[0]; i++) {
        if (strcasecmp(k_targets[i].name, pos[2]) == 0) {
            tg = &k_targets[i];
        }
    }
    if (tg == NULL) {
        fprintf(stderr, "quantize: unknown type '%s'\n", pos[2]);
        usage(stderr);
        return 2;
    }

    ts_error err = {0};
    ts_gguf *in = NULL;
    if (ts_gguf_open(pos[0], &in, &err) != TS_OK) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        return 1;
    }
    const uint64_t n = ts_gguf_tensor_count(in);
    plan p = {.in = in, .n = n};
    p.out_type = calloc(n ? n : 1, sizeof *p.out_type);
    int64_t widest = 1;
    for (uint64_t i = 0; i < n; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(in, i);
        widest = t->ne[0] > widest ? t->ne[0] : widest;
        p.total_bytes += t->nbytes;
    }
    p.row = malloc(sizeof(float) * (size_t)widest);
    ts_gguf_writer *w = NULL;
    int rc = 1;
    if (p.out_type == NULL || p.row == NULL) {
        fprintf(stderr, "quantize: out of memory\n");
        goto done;
    }
    if (choose_types(in, tg, pure, p.out_type) != 0) {
        goto done;
    }
    if (ts_gguf_writer_create(&w, &err) != TS_OK) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        goto done;
    }
    ts_status st = TS_OK;
    if (ts_gguf_alignment(in) != 32) {
        st = ts_gguf_writer_set_alignment(w, (uint32_t)ts_gguf_alignment(in), &err);
    }
    for (uint64_t i = 0; i < ts_gguf_kv_count(in) && st == TS_OK; i++) {
        if (!skip_key(ts_gguf_kv_key(in, i))) {
            st = ts_gguf_writer_copy_kv(w, in, i, &err);
        }
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_add_u32(w, "general.quantization_version", 2, &err);
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_add_u32(w, "general.file_type", tg->ftype, &err);
    }
    for (uint64_t i = 0; i < n && st == TS_OK; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(in, i);
        st = ts_gguf_writer_add_tensor(w, t->name, p.out_type[i], t->n_dims, t->ne, NULL, &err);
    }
    if (st == TS_OK) {
        ts_gguf_writer_set_fill(w, fill_tensor, &p);
        st = ts_gguf_writer_write(w, pos[1], &err);
        fprintf(stderr, "\n");
    }
    if (st != TS_OK) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        goto done;
    }
    uint64_t counts[TS_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < n; i++) {
        counts[p.out_type[i]]++;
    }
    fprintf(stderr, "quantize: wrote %s (%s%s):", pos[1], tg->name, pure ? ", pure" : "");
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        if (counts[t]) {
            fprintf(stderr, " %" PRIu64 " x %s", counts[t], ts_type_name((uint32_t)t));
        }
    }
    fprintf(stderr, "\n");
    rc = 0;
done:
    ts_gguf_writer_destroy(w);
    free(p.row);
    free(p.out_type);
    ts_gguf_close(in);
    return rc;
}
