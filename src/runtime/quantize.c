/*
 * quantize.c — ts_quantize_file: requantizes an F32/F16/BF16 GGUF model into another file.
 *
 * The per-tensor rules are llama-quantize's, and the quantizers are the reference ones, so the
 * tensor data we write is byte-identical to llama-quantize's without an importance matrix; the
 * rules themselves are listed with ts_quantize_file in include/tessera.h. Every output type is
 * chosen, and every refusal reported, before the first byte is written; the data is then
 * produced one tensor at a time by the writer's fill callback, so memory stays at one f32 row
 * of the widest tensor besides the two files' mappings. Nothing here prints: notes and
 * progress go to the caller's callbacks.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tessera.h"
#include "util/error.h"

/* A type a user may ask for, with llama.cpp's general.file_type value for it. llama.cpp's only
 * MXFP4 file type is MXFP4_MOE (38: MoE experts MXFP4, everything else Q8_0); our MXFP4 target
 * makes every matrix the rules do not single out MXFP4, like the other 4-bit targets, and says
 * 38, the one MXFP4 file type llama.cpp knows. */
typedef struct target {
    const char *name;
    ts_type type;   /* default tensor type */
    int mix;        /* 1 for the _M mixes; 2 for MXFP4_MOE (experts MXFP4, the rest Q8_0);
                     * 3 for IQ4_XS (llama-quantize's IQ4_XS rules, see iq4xs_type) */
    uint32_t ftype; /* general.file_type */
} target;

static const target k_targets[] = {
    {"F32", TS_TYPE_F32, 0, 0},         {"F16", TS_TYPE_F16, 0, 1},
    {"BF16", TS_TYPE_BF16, 0, 32},      {"Q4_0", TS_TYPE_Q4_0, 0, 2},
    {"Q4_1", TS_TYPE_Q4_1, 0, 3},       {"Q5_0", TS_TYPE_Q5_0, 0, 8},
    {"Q5_1", TS_TYPE_Q5_1, 0, 9},       {"Q8_0", TS_TYPE_Q8_0, 0, 7},
    {"IQ4_NL", TS_TYPE_IQ4_NL, 0, 25},  {"Q2_K", TS_TYPE_Q2_K, 0, 10},
    {"Q3_K", TS_TYPE_Q3_K, 0, 12},      {"Q4_K", TS_TYPE_Q4_K, 0, 15},
    {"Q5_K", TS_TYPE_Q5_K, 0, 17},      {"Q6_K", TS_TYPE_Q6_K, 0, 18},
    {"Q4_K_M", TS_TYPE_Q4_K, 1, 15},    {"Q5_K_M", TS_TYPE_Q5_K, 1, 17},
    {"MXFP4", TS_TYPE_MXFP4, 0, 38},    {"IQ4_XS", TS_TYPE_IQ4_XS, 3, 30},
    {"MXFP4_MOE", TS_TYPE_Q8_0, 2, 38}, /* llama.cpp's MXFP4_MOE, as gpt-oss GGUFs come */
};
#define N_TARGETS (sizeof k_targets / sizeof k_targets[0])

/* What the fill callback needs while the writer asks for tensor data. */
typedef struct plan {
    const ts_gguf *in;
    const ts_type *out_type; /* [n tensors] */
    const ts_quantize_params *params;
    ts_isa isa;
    uint64_t done_bytes, total_bytes;
    int n_threads;
    float *rows; /* [n_threads][widest ne[0]] scratch: one f32 row per thread */
    int64_t widest;
} plan;

/* Rows [lo, hi) of one tensor, converted by one thread with its own f32 row. */
typedef struct convert_job {
    const ts_quant_ops *src, *dst;
    const char *in;
    char *out;
    size_t in_row, out_row;
    int64_t ne0;
    uint64_t lo, hi;
    float *row;
} convert_job;

static void *convert_rows(void *arg) {
    const convert_job *j = arg;
    for (uint64_t r = j->lo; r < j->hi; r++) {
        j->src->to_float(j->in + r * j->in_row, j->row, j->ne0);
        j->dst->from_float(j->row, j->out + r * j->out_row, j->ne0);
    }
    return NULL;
}

const char *ts_quantize_type_name(size_t i) {
    return i < N_TARGETS ? k_targets[i].name : NULL;
}

static const target *find_target(const char *name) {
    for (size_t i = 0; i < N_TARGETS; i++) {
        if (strcasecmp(k_targets[i].name, name) == 0) {
            return &k_targets[i];
        }
    }
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int is_float_type(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
}

/* llama.cpp's choice of the layers that get more bits in the _M mixes. */
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
    case TS_TYPE_IQ4_XS:
        return TS_TYPE_IQ4_NL;
    default:
        return t;
    }
}

/* What llama-quantize's IQ4_XS rules read from the model. */
typedef struct model_shape {
    int64_t n_gqa;    /* attention heads per K/V head (1 when unknown) */
    int64_t n_expert; /* experts (0 for a dense model) */
    int64_t n_layer;  /* blocks (the ffn_down count when the key is absent) */
} model_shape;

static int64_t arch_int(const ts_gguf *g, const char *arch, const char *key, int64_t fallback) {
    char full[160];
    int64_t v = 0;
    ts_error e = {0};
    snprintf(full, sizeof full, "%s.%s", arch, key);
    return ts_gguf_get_int(g, full, &v, &e) == TS_OK ? v : fallback;
}

static model_shape read_shape(const ts_gguf *g, int64_t n_ffn_down) {
    model_shape s = {1, 0, n_ffn_down};
    ts_gguf_str a = {0};
    ts_error e = {0};
    char arch[64];
    if (ts_gguf_get_str(g, "general.architecture", &a, &e) != TS_OK || a.len >= sizeof arch) {
        return s;
    }
    memcpy(arch, a.ptr, (size_t)a.len);
    arch[a.len] = '\0';
    const int64_t heads = arch_int(g, arch, "attention.head_count", 0);
    const int64_t kv = arch_int(g, arch, "attention.head_count_kv", heads);
    if (heads > 0 && kv > 0) {
        s.n_gqa = heads / kv;
    }
    s.n_expert = arch_int(g, arch, "expert_count", 0);
    s.n_layer = arch_int(g, arch, "block_count", n_ffn_down);
    return s;
}

/* llama-quantize's IQ4_XS type for a tensor other than the output (no importance matrix):
 * attn_v (or a fused attn_qkv) Q5_K when four or more heads share a K/V head (Q8_0 with eight
 * experts), ffn_down Q5_K in the first eighth of the layers, attn_k Q8_0 and attn_output Q5_K
 * with eight experts; everything else IQ4_XS. i_ffn_down counts the ffn_down tensors before
 * this one (the layer, unless the name says another). */
static ts_type iq4xs_type(const char *name, const model_shape *ms, int64_t i_ffn_down) {
    if (strstr(name, "attn_v.weight") != NULL || strstr(name, "attn_qkv.weight") != NULL) {
        if (ms->n_expert == 8) {
            return TS_TYPE_Q8_0;
        }
        return ms->n_gqa >= 4 ? TS_TYPE_Q5_K : TS_TYPE_IQ4_XS;
    }
    if (strstr(name, "attn_k.weight") != NULL) {
        return ms->n_expert == 8 ? TS_TYPE_Q8_0 : TS_TYPE_IQ4_XS;
    }
    if (strstr(name, "ffn_down") != NULL) {
        int layer = 0;
        int64_t i_layer = i_ffn_down;
        if (ms->n_expert > 1 && sscanf(name, "blk.%d.", &layer) == 1) {
            i_layer = layer;
        }
        return i_layer < ms->n_layer / 8 ? TS_TYPE_Q5_K : TS_TYPE_IQ4_XS;
    }
    if (strstr(name, "attn_output.weight") != NULL && ms->n_expert == 8) {
        return TS_TYPE_Q5_K;
    }
    return TS_TYPE_IQ4_XS;
}

/* Chooses every tensor's output type into out[n tensors]. */
static ts_status choose_types(const ts_gguf *g, const target *tg, const ts_quantize_params *qp,
                              ts_type *out, ts_error *err) {
    const uint64_t n = ts_gguf_tensor_count(g);
    int64_t n_attn_v = 0, n_ffn_down = 0, i_attn_v = 0, i_ffn_down = 0;
    const ts_gguf_tensor *probe = NULL;
    const int tied = ts_gguf_find_tensor(g, "output.weight", &probe) != TS_OK;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = ts_gguf_tensor_at(g, i)->name;
        n_attn_v += strstr(name, "attn_v.weight") != NULL;
        n_ffn_down += strstr(name, "ffn_down") != NULL && ends_with(name, "weight");
    }
    const model_shape shape = read_shape(g, n_ffn_down);
    for (uint64_t i = 0; i < n; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        const char *name = t->name;
        if (!is_float_type(t->type)) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "tensor '%s' has type %s; the input must be F32, F16 or BF16", name,
                                ts_type_name(t->type));
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
        if (!qp->pure && !is_float_type(ty)) {
            const int is_output = strcmp(name, "output.weight") == 0 ||
                                  (tied && strcmp(name, "token_embd.weight") == 0);
            if (is_output) {
                ty = ty == TS_TYPE_Q8_0 ? TS_TYPE_Q8_0 : TS_TYPE_Q6_K;
                if (t->ne[0] % 256 != 0) {
                    ty = TS_TYPE_Q8_0;
                }
            } else if (tg->mix == 3) {
                ty = iq4xs_type(name, &shape, i_ffn_down);
                i_ffn_down += strstr(name, "ffn_down") != NULL;
            } else if (strstr(name, "attn_v.weight") != NULL) {
                if (tg->mix == 1 && use_more_bits(i_attn_v, n_attn_v)) {
                    ty = TS_TYPE_Q6_K;
                }
                i_attn_v++;
            } else if (strstr(name, "ffn_down") != NULL) {
                if (tg->mix == 1 && use_more_bits(i_ffn_down, n_ffn_down)) {
                    ty = TS_TYPE_Q6_K;
                }
                i_ffn_down++;
            } else if (strstr(name, "attn_qkv.weight") != NULL && tg->mix == 1) {
                ty = tg->type == TS_TYPE_Q4_K ? TS_TYPE_Q5_K : TS_TYPE_Q6_K;
            }
            if (tg->mix == 2 && t->n_dims == 3 && strstr(name, "_exps.weight") != NULL) {
                ty = TS_TYPE_MXFP4; /* MXFP4_MOE: the experts */
            }
            if (t->ne[0] % (int64_t)ts_type_block_size(ty) != 0) {
                ts_type fb = k_fallback(ty);
                if (qp->note != NULL) {
                    char msg[TS_ERROR_MSG_MAX];
                    snprintf(msg, sizeof msg,
                             "tensor '%s': ne[0] = %" PRId64 " is not a multiple of %s's block "
                             "size %zu; using %s",
                             name, t->ne[0], ts_type_name(ty), ts_type_block_size(ty),
                             ts_type_name(fb));
                    qp->note(qp->user, msg);
                }
                ty = fb;
            }
        }
        const size_t bs = ts_type_block_size(ty);
        if (t->ne[0] % (int64_t)bs != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "tensor '%s': ne[0] = %" PRId64 " is not a multiple of the "
                                "block size %zu of %s",
                                name, t->ne[0], bs, ts_type_name(ty));
        }
        out[i] = ty;
    }
    return TS_OK;
}

/* Writer callback: converts tensor `index` into dst (exactly its output bytes). */
static ts_status fill_tensor(void *ctx, uint64_t index, void *dst, size_t nbytes, ts_error *err) {
    plan *p = ctx;
    const ts_gguf_tensor *t = ts_gguf_tensor_at(p->in, index);
    const ts_type to = p->out_type[index];
    const ts_quant_ops *src = ts_quant_ops_get(t->type, p->isa);
    const ts_quant_ops *dstops = ts_quant_ops_get(to, p->isa);
    if (src == NULL || dstops == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "no kernels for %s",
                            ts_type_name(src == NULL ? t->type : to));
    }
    const int64_t ne0 = t->ne[0];
    const uint64_t rows = t->n_elements / (uint64_t)ne0;
    size_t in_row = 0, out_row = 0;
    if (!ts_type_row_bytes(t->type, (uint64_t)ne0, &in_row) ||
        !ts_type_row_bytes(to, (uint64_t)ne0, &out_row) || out_row * rows != nbytes) {
        return ts_error_set(err, TS_ERR_INTERNAL,
                            "the writer asked for %zu bytes, %" PRIu64
                            " rows of %zu bytes expected",
                            nbytes, rows, out_row);
    }
    /* Every row is converted on its own, so the bytes do not depend on the thread count. Small
     * tensors (norms, biases) stay on this thread. */
    enum { MAX_THREADS = 256 };
    convert_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int nt = p->n_threads;
    if ((uint64_t)nt > rows) {
        nt = (int)rows;
    }
    if (t->n_elements < ((uint64_t)1 << 16)) {
        nt = 1;
    }
    bool joined[MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        jobs[i] = (convert_job){.src = src,
                                .dst = dstops,
                                .in = (const char *)t->data,
                                .out = dst,
                                .in_row = in_row,
                                .out_row = out_row,
                                .ne0 = ne0,
                                .lo = rows * (uint64_t)i / (uint64_t)nt,
                                .hi = rows * (uint64_t)(i + 1) / (uint64_t)nt,
                                .row = p->rows + (size_t)i * (size_t)p->widest};
        /* Job 0 is this thread's; a thread that cannot start has its job done here too. */
        joined[i] = i > 0 && pthread_create(&th[i], NULL, convert_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < nt; i++) {
        if (!joined[i]) {
            convert_rows(&jobs[i]);
        }
    }
    for (int i = 1; i < nt; i++) {
        if (joined[i]) {
            pthread_join(th[i], NULL);
        }
    }
    p->done_bytes += t->nbytes;
    if (p->params->progress != NULL) {
        p->params->progress(p->params->user, t->name, p->done_bytes, p->total_bytes);
    }
    return TS_OK;
}

/* Keys the output sets itself rather than copies. */
static int skip_key(const char *key) {
    return strcmp(key, "general.file_type") == 0 ||
           strcmp(key, "general.quantization_version") == 0 ||
           strcmp(key, "general.alignment") == 0;
}

/* Adds the input's metadata (with the target's file type) and tensor table to w. */
static ts_status describe_output(ts_gguf_writer *w, const ts_gguf *in, const target *tg,
                                 const ts_type *out_type, ts_error *err) {
    ts_status st = TS_OK;
    if (ts_gguf_alignment(in) != TS_GGUF_DEFAULT_ALIGNMENT) {
        st = ts_gguf_writer_set_alignment(w, (uint32_t)ts_gguf_alignment(in), err);
    }
    for (uint64_t i = 0; i < ts_gguf_kv_count(in) && st == TS_OK; i++) {
        if (!skip_key(ts_gguf_kv_key(in, i))) {
            st = ts_gguf_writer_copy_kv(w, in, i, err);
        }
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_add_u32(w, "general.quantization_version", 2, err);
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_add_u32(w, "general.file_type", tg->ftype, err);
    }
    for (uint64_t i = 0; i < ts_gguf_tensor_count(in) && st == TS_OK; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(in, i);
        st = ts_gguf_writer_add_tensor(w, t->name, out_type[i], t->n_dims, t->ne, NULL, err);
    }
    return st;
}

ts_status ts_quantize_file(const char *in_path, const char *out_path,
                           const ts_quantize_params *params, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (in_path == NULL || out_path == NULL || params == NULL || params->type == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "quantize: in_path, out_path, params and params->type are required");
    }
    const target *tg = find_target(params->type);
    if (tg == NULL) {
        char known[256];
        size_t o = 0;
        for (size_t i = 0; i < N_TARGETS && o < sizeof known; i++) {
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", i ? " " : "",
                                  k_targets[i].name);
        }
        return ts_error_set(err, TS_ERR_INVALID_ARG, "quantize: unknown type '%s' (known: %s)",
                            params->type, known);
    }

    /* The reader's messages about a malformed file do not name it; the writer's name theirs. */
    ts_gguf *in = NULL;
    ts_status st = ts_gguf_open(in_path, &in, err);
    if (st != TS_OK) {
        ts_error_prefix(err, "quantize: %s: ", in_path);
        return st;
    }
    /* Every failure from here on gets the "quantize: " prefix once, at the end. */
    const uint64_t n = ts_gguf_tensor_count(in);
    ts_type *out_type = calloc(n ? n : 1, sizeof *out_type);
    plan p = {.in = in, .out_type = out_type, .params = params, .isa = ts_quant_detect_isa()};
    int64_t widest = 1;
    for (uint64_t i = 0; i < n; i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(in, i);
        widest = t->ne[0] > widest ? t->ne[0] : widest;
        p.total_bytes += t->nbytes;
    }
    p.n_threads = params->n_threads > 0 ? params->n_threads : ts_default_threads();
    p.n_threads = p.n_threads > 256 ? 256 : p.n_threads;
    p.widest = widest;
    p.rows = malloc(sizeof(float) * (size_t)widest * (size_t)p.n_threads);
    ts_gguf_writer *w = NULL;
    if (out_type == NULL || p.rows == NULL) {
        st = ts_error_set(
            err, TS_ERR_NOMEM,
            "out of memory (types of %" PRIu64 " tensors, a row of %" PRId64 " floats)", n, widest);
    }
    if (st == TS_OK) {
        st = choose_types(in, tg, params, out_type, err);
    }
    if (st == TS_OK) {
        st = ts_gguf_writer_create(&w, err);
    }
    if (st == TS_OK) {
        st = describe_output(w, in, tg, out_type, err);
    }
    if (st == TS_OK) {
        ts_gguf_writer_set_fill(w, fill_tensor, &p);
        st = ts_gguf_writer_write(w, out_path, err);
    }
    if (st == TS_OK && params->n_by_type != NULL) {
        memset(params->n_by_type, 0, sizeof(uint64_t) * TS_TYPE_COUNT);
        for (uint64_t i = 0; i < n; i++) {
            params->n_by_type[out_type[i]]++;
        }
    }
    if (st != TS_OK) {
        ts_error_prefix(err, "quantize: ");
    }
    ts_gguf_writer_destroy(w);
    free(p.rows);
    free(out_type);
    ts_gguf_close(in);
    return st;
}
