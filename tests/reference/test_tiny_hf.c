/*
 * test_tiny_hf.c — every architecture against Hugging Face transformers on a tiny
 * random-weight model.
 *
 * tests/data/reference/tiny/<arch>.bin holds the float32 weights of a transformers model with
 * its HF names and shapes; <arch>.logits.json holds the logits transformers computed for 12
 * fixed tokens, the GGUF metadata a converter writes for the model, and for each tensor its
 * GGUF name and the layout transform a converter must apply (docs/reference.md). This test
 * converts the weights to GGUF with our writer (applying the transforms: llama's RoPE row
 * permutation, Gemma's norm +1, GPT-2's Conv1D transpose, the split of a fused 3-D expert
 * gate_up into GGUF's ffn_gate_exps and ffn_up_exps, nomic-bert's q/k/v fused into attn_qkv),
 * loads the result with our model
 * loader and compares the logits of every position, on the reference and CPU backends with f32
 * weights and an f32 KV cache. Every <arch>.logits.json in the directory is checked, and so is
 * every <arch>.conv.gguf (the same model written by llama.cpp's convert_hf_to_gguf.py, loaded as
 * it is) against the same logits:
 *     |ours - hf| <= 2e-5 + 2e-6 |hf|      (seen: at most 9.0e-6, qwen2_yarn; encoders' hidden
 *                                           states at most 9e-7)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/model.h"

#define N_TOK 12
#define TOL_ABS 2e-5
#define TOL_REL 2e-6

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

typedef struct hf_tensor {
    char name[128];
    uint32_t n_dims;
    uint32_t dims[3];  /* HF order: the last varies fastest */
    const float *data; /* unaligned view into the file bytes; copied before use */
} hf_tensor;

/* Parses the TSRTINY1 container, checking every length against the file size. */
static int parse_bin(const char *buf, size_t len, hf_tensor *out, int max) {
    assert_true(len >= 12 && memcmp(buf, "TSRTINY1", 8) == 0);
    uint32_t n;
    memcpy(&n, buf + 8, 4);
    assert_true((int)n <= max);
    size_t at = 12;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl, nd;
        assert_true(at + 4 <= len);
        memcpy(&nl, buf + at, 4);
        at += 4;
        assert_true(nl < sizeof out[i].name && at + nl + 4 <= len);
        memcpy(out[i].name, buf + at, nl);
        out[i].name[nl] = '\0';
        at += nl;
        memcpy(&nd, buf + at, 4);
        at += 4;
        assert_true(nd >= 1 && nd <= 3 && at + 4 * nd <= len);
        out[i].n_dims = nd;
        memcpy(out[i].dims, buf + at, 4 * nd);
        at += 4 * nd;
        size_t count = 1;
        for (uint32_t d = 0; d < nd; d++) {
            count *= out[i].dims[d];
        }
        assert_true(at + count * 4 <= len);
        out[i].data = (const float *)(buf + at);
        at += count * 4;
    }
    assert_int_equal(at, len);
    return (int)n;
}

/* Applies a converter transform to a copy of the HF tensor, seen as rows x cols (row-major;
 * a 3-D [n, r, c] tensor is n * r rows of c: the transforms act within each matrix). */
static float *transform(const hf_tensor *t, const char *how, int64_t head_dim, int64_t *rows,
                        int64_t *cols) {
    *cols = t->dims[t->n_dims - 1];
    *rows = 1;
    for (uint32_t d = 0; d + 1 < t->n_dims; d++) {
        *rows *= t->dims[d];
    }
    size_t n = (size_t)(*rows * *cols);
    float *src = malloc(n * sizeof(float));
    float *dst = malloc(n * sizeof(float));
    assert_non_null(src);
    assert_non_null(dst);
    memcpy(src, t->data, n * sizeof(float));
    memcpy(dst, src, n * sizeof(float));
    if (strcmp(how, "add_one") == 0) {
        for (size_t i = 0; i < n; i++) {
            dst[i] = src[i] + 1.0f;
        }
    } else if (strcmp(how, "transpose") == 0) {
        assert_int_equal(t->n_dims, 2);
        for (int64_t r = 0; r < *rows; r++) {
            for (int64_t c = 0; c < *cols; c++) {
                dst[c * *rows + r] = src[r * *cols + c];
            }
        }
        int64_t tmp = *rows;
        *rows = *cols;
        *cols = tmp;
    } else if (strcmp(how, "squeeze") == 0) {
        /* [1, n] -> [n]: the same values, one dimension (the caller writes a vector). */
    } else if (strcmp(how, "half0") == 0 || strcmp(how, "half1") == 0) {
        /* A fused 3-D expert gate_up [n_expert, 2 * n_ff, n_embd] (or a 2-D [2 * n_ff, n_embd]
         * one, Granite's shared expert, as one expert): each expert's first (half0, the gate)
         * or second (half1, up) n_ff rows. */
        assert_true(t->n_dims == 2 || t->n_dims == 3);
        bool stacked = t->n_dims == 3;
        int64_t n_exp = stacked ? t->dims[0] : 1, ff = t->dims[stacked ? 1 : 0] / 2;
        int64_t off = how[4] == '1' ? ff : 0;
        for (int64_t e = 0; e < n_exp; e++) {
            memcpy(dst + e * ff * *cols, src + (e * 2 * ff + off) * *cols,
                   (size_t)(ff * *cols) * sizeof(float));
        }
        *rows = n_exp * ff;
    } else if (strncmp(how, "deint_t", 7) == 0) {
        /* gpt-oss's gate_up_proj [n_expert, n_embd, 2 * n_ff] (x @ W), gate at even and up
         * at odd columns: each expert's half (deint_t0 gate, deint_t1 up) transposed to
         * [n_ff, n_embd]. */
        assert_int_equal(t->n_dims, 3);
        int64_t E = t->dims[0], H = t->dims[1], I = t->dims[2] / 2, off = how[7] == '1';
        for (int64_t e = 0; e < E; e++) {
            for (int64_t i = 0; i < I; i++) {
                for (int64_t h = 0; h < H; h++) {
                    dst[(e * I + i) * H + h] = src[(e * H + h) * 2 * I + 2 * i + off];
                }
            }
        }
        *rows = E * I;
        *cols = H;
    } else if (strncmp(how, "deint", 5) == 0) {
        /* gpt-oss's gate_up_proj_bias [n_expert, 2 * n_ff], interleaved as above. */
        assert_int_equal(t->n_dims, 2);
        int64_t E = t->dims[0], I = t->dims[1] / 2, off = how[5] == '1';
        for (int64_t e = 0; e < E; e++) {
            for (int64_t i = 0; i < I; i++) {
                dst[e * I + i] = src[e * 2 * I + 2 * i + off];
            }
        }
        *cols = I;
    } else if (strcmp(how, "transpose3") == 0) {
        /* gpt-oss's down_proj [n_expert, n_ff, n_embd] (x @ W): each expert transposed. */
        assert_int_equal(t->n_dims, 3);
        int64_t E = t->dims[0], I = t->dims[1], H = t->dims[2];
        for (int64_t e = 0; e < E; e++) {
            for (int64_t i = 0; i < I; i++) {
                for (int64_t h = 0; h < H; h++) {
                    dst[(e * H + h) * I + i] = src[(e * I + i) * H + h];
                }
            }
        }
        *rows = E * H;
        *cols = I;
    } else if (strncmp(how, "rope_permute", 12) == 0) {
        /* GGUF row h*d + 2i + j = HF row h*d + j*d/2 + i (a bias: one value per row). */
        int64_t d = head_dim;
        bool vec = t->n_dims == 1;
        int64_t n_rows = vec ? *cols : *rows, width = vec ? 1 : *cols;
        int64_t heads = n_rows / d;
        for (int64_t h = 0; h < heads; h++) {
            for (int64_t i = 0; i < d / 2; i++) {
                for (int64_t j = 0; j < 2; j++) {
                    memcpy(dst + (h * d + 2 * i + j) * width, src + (h * d + j * d / 2 + i) * width,
                           (size_t)width * sizeof(float));
                }
            }
        }
    } else {
        assert_string_equal(how, "");
    }
    free(src);
    return dst;
}

/* The HF tensor named like q (a "...q_proj.weight") with q_proj replaced by part. */
static const hf_tensor *sibling(const hf_tensor *q, const char *part, const hf_tensor *hf,
                                int n_hf) {
    char name[sizeof q->name];
    const char *at = strstr(q->name, "q_proj");
    assert_non_null(at);
    snprintf(name, sizeof name, "%.*s%s%s", (int)(at - q->name), q->name, part, at + 6);
    for (int k = 0; k < n_hf; k++) {
        if (strcmp(hf[k].name, name) == 0) {
            return &hf[k];
        }
    }
    fail_msg("fuse_qkv: no tensor '%s' beside '%s'", name, q->name);
    return NULL;
}

/* Concatenates the rows of q (an HF [rows, cols] q_proj weight) and its layer's k_proj and
 * v_proj into out (whose data is the returned buffer, the caller's to free). */
static float *fuse_qkv(const hf_tensor *q, const hf_tensor *hf, int n_hf, hf_tensor *out) {
    const hf_tensor *parts[3] = {q, sibling(q, "k_proj", hf, n_hf), sibling(q, "v_proj", hf, n_hf)};
    *out = *q;
    out->dims[0] = 0;
    for (int p = 0; p < 3; p++) {
        assert_int_equal(parts[p]->n_dims, 2);
        assert_int_equal(parts[p]->dims[1], q->dims[1]);
        out->dims[0] += parts[p]->dims[0];
    }
    float *cat = malloc((size_t)out->dims[0] * q->dims[1] * sizeof(float));
    assert_non_null(cat);
    size_t at = 0;
    for (int p = 0; p < 3; p++) {
        size_t n = (size_t)parts[p]->dims[0] * parts[p]->dims[1];
        memcpy(cat + at, parts[p]->data, n * sizeof(float));
        at += n;
    }
    out->data = cat;
    return cat;
}

/* Integer metadata value of key (0 when absent). */
static int64_t meta_int(const cJSON *meta, const char *key) {
    for (int i = 0; i < cJSON_GetArraySize(meta); i++) {
        const cJSON *e = cJSON_GetArrayItem(meta, i);
        if (strcmp(cJSON_GetObjectItem(e, "key")->valuestring, key) == 0) {
            return (int64_t)cJSON_GetObjectItem(e, "value")->valuedouble;
        }
    }
    return 0;
}

/* Writes the JSON's metadata entries ({"key", "type", "value"}; arrays as "u32[]" etc.). */
static void write_metadata(ts_gguf_writer *w, const cJSON *meta) {
    ts_error err = {0};
    for (int i = 0; i < cJSON_GetArraySize(meta); i++) {
        const cJSON *e = cJSON_GetArrayItem(meta, i);
        const char *key = cJSON_GetObjectItem(e, "key")->valuestring;
        const char *type = cJSON_GetObjectItem(e, "type")->valuestring;
        const cJSON *v = cJSON_GetObjectItem(e, "value");
        ts_status st;
        if (strcmp(type, "str") == 0) {
            st = ts_gguf_writer_add_cstr(w, key, v->valuestring, &err);
        } else if (strcmp(type, "bool") == 0) {
            st = ts_gguf_writer_add_bool(w, key, cJSON_IsTrue(v), &err);
        } else if (strcmp(type, "u32") == 0) {
            st = ts_gguf_writer_add_u32(w, key, (uint32_t)v->valuedouble, &err);
        } else if (strcmp(type, "i32") == 0) {
            st = ts_gguf_writer_add_i32(w, key, (int32_t)v->valuedouble, &err);
        } else if (strcmp(type, "f32") == 0) {
            st = ts_gguf_writer_add_f32(w, key, (float)v->valuedouble, &err);
        } else if (strcmp(type, "bool[]") == 0) {
            /* One byte per element (a per-layer sliding-window pattern). */
            int n = cJSON_GetArraySize(v);
            uint8_t *vals = calloc((size_t)n + 1, 1);
            assert_non_null(vals);
            for (int k = 0; k < n; k++) {
                vals[k] = cJSON_IsTrue(cJSON_GetArrayItem(v, k));
            }
            st = ts_gguf_writer_add_array(w, key, TS_GGUF_BOOL, vals, (uint64_t)n, &err);
            free(vals);
        } else {
            /* Arrays of 4-byte elements. */
            int n = cJSON_GetArraySize(v);
            uint32_t *vals = calloc((size_t)n + 1, sizeof *vals);
            assert_non_null(vals);
            ts_gguf_type et;
            for (int k = 0; k < n; k++) {
                double x = cJSON_GetArrayItem(v, k)->valuedouble;
                if (strcmp(type, "f32[]") == 0) {
                    float f = (float)x;
                    memcpy(&vals[k], &f, 4);
                } else if (strcmp(type, "i32[]") == 0) {
                    int32_t iv = (int32_t)x;
                    memcpy(&vals[k], &iv, 4);
                } else {
                    vals[k] = (uint32_t)x;
                }
            }
            if (strcmp(type, "f32[]") == 0) {
                et = TS_GGUF_FLOAT32;
            } else if (strcmp(type, "i32[]") == 0) {
                et = TS_GGUF_INT32;
            } else {
                assert_string_equal(type, "u32[]");
                et = TS_GGUF_UINT32;
            }
            st = ts_gguf_writer_add_array(w, key, et, vals, (uint64_t)n, &err);
            free(vals);
        }
        if (st != TS_OK) {
            fail_msg("metadata '%s': %s", key, err.msg);
        }
    }
}

/* The llama3 scaling of a config (rope_parameters with rope_type "llama3") as metadata keys:
 * the form a file may carry instead of rope_freqs.weight. False for other configs. */
static bool write_llama3_keys(ts_gguf_writer *w, const cJSON *cfg, const char *g_arch) {
    const cJSON *rope = cJSON_GetObjectItem(cfg, "rope_parameters");
    const cJSON *type = rope != NULL ? cJSON_GetObjectItem(rope, "rope_type") : NULL;
    if (type == NULL || !cJSON_IsString(type) || strcmp(type->valuestring, "llama3") != 0) {
        return false;
    }
    ts_error err = {0};
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", g_arch);
    assert_int_equal(ts_gguf_writer_add_cstr(w, key, "llama3", &err), TS_OK);
    const char *hf[] = {"factor", "low_freq_factor", "high_freq_factor"};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%s.rope.scaling.%s", g_arch, hf[i]);
        float v = (float)cJSON_GetObjectItem(rope, hf[i])->valuedouble;
        assert_int_equal(ts_gguf_writer_add_f32(w, key, v, &err), TS_OK);
    }
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", g_arch);
    uint32_t n_orig =
        (uint32_t)cJSON_GetObjectItem(rope, "original_max_position_embeddings")->valuedouble;
    assert_int_equal(ts_gguf_writer_add_u32(w, key, n_orig, &err), TS_OK);
    return true;
}

/* A tiny model's files: <arch><suffix> (JSON) and <arch>.bin, converted to GGUF with our writer
 * and loaded. With llama3_keys, llama3 scaling is written as metadata instead of the
 * converter's rope_freqs.weight; for other configs that gives no model (out.model NULL). The
 * caller frees what the struct holds (tiny_close). */
typedef struct tiny {
    cJSON *root;
    char *json, *bin;
    void *file;
    ts_model *model;
    int64_t n_vocab;
} tiny;

static tiny tiny_load(const char *arch, const char *suffix, bool llama3_keys) {
    tiny out = {0};
    char path[8192];
    size_t json_len = 0, bin_len = 0;
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s%s", TS_SOURCE_DIR, arch, suffix);
    char *json = slurp(path, &json_len);
    assert_non_null(json);
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.bin", TS_SOURCE_DIR, arch);
    char *bin = slurp(path, &bin_len);
    assert_non_null(bin);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    hf_tensor hf[64];
    int n_hf = parse_bin(bin, bin_len, hf, 64);

    const cJSON *meta = cJSON_GetObjectItem(root, "gguf_metadata");
    assert_non_null(meta);
    const char *g_arch = cJSON_GetObjectItem(root, "gguf_arch")->valuestring;
    char key[96];
    snprintf(key, sizeof key, "%s.embedding_length", g_arch);
    int64_t n_embd = meta_int(meta, key);
    snprintf(key, sizeof key, "%s.attention.head_count", g_arch);
    int64_t n_head = meta_int(meta, key);
    snprintf(key, sizeof key, "%s.attention.key_length", g_arch);
    int64_t head_dim = meta_int(meta, key) > 0 ? meta_int(meta, key) : n_embd / n_head;
    const cJSON *cfg = cJSON_GetObjectItem(root, "config");
    int64_t n_vocab = (int64_t)cJSON_GetObjectItem(cfg, "vocab_size")->valuedouble;
    ts_error err = {0};
    ts_gguf_writer *w = NULL;
    assert_int_equal(ts_gguf_writer_create(&w, &err), TS_OK);
    write_metadata(w, meta);
    if (llama3_keys && !write_llama3_keys(w, cfg, g_arch)) {
        ts_gguf_writer_destroy(w);
        cJSON_Delete(root);
        free(json);
        free(bin);
        return out;
    }
    /* Tensors in the JSON's order, transformed; data kept alive until the write. */
    const cJSON *list = cJSON_GetObjectItem(root, "tensors");
    int n_t = cJSON_GetArraySize(list);
    float **keep = calloc((size_t)n_t, sizeof *keep);
    for (int i = 0; i < n_t; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const char *hf_name = cJSON_GetObjectItem(e, "hf")->valuestring;
        const char *gguf_name = cJSON_GetObjectItem(e, "gguf")->valuestring;
        const char *how = cJSON_GetObjectItem(e, "transform")->valuestring;
        const hf_tensor *t = NULL;
        for (int k = 0; k < n_hf; k++) {
            if (strcmp(hf[k].name, hf_name) == 0) {
                t = &hf[k];
            }
        }
        assert_non_null(t);
        if (llama3_keys && strcmp(gguf_name, "rope_freqs.weight") == 0) {
            continue;
        }
        int64_t rows, cols;
        hf_tensor fused; /* its dims describe the tensor written (data freed after the copy) */
        if (strcmp(how, "fuse_qkv") == 0) {
            /* nomic-bert: GGUF's attn_qkv is the layer's q_proj rows, then k_proj, then v_proj
             * (the original checkpoint's Wqkv, which transformers splits). */
            float *cat = fuse_qkv(t, hf, n_hf, &fused);
            keep[i] = transform(&fused, "", head_dim, &rows, &cols);
            free(cat);
            t = &fused;
        } else {
            keep[i] = transform(t, how, head_dim, &rows, &cols);
        }
        /* GGUF extents are HF's reversed; a transpose swapped the two of a matrix. */
        int64_t ne[3] = {cols, rows, 1};
        if (t->n_dims == 3) {
            ne[1] = rows / t->dims[0]; /* a split (half0/half1) halved the rows */
            ne[2] = t->dims[0];
        }
        uint32_t nd = strcmp(how, "squeeze") == 0 ? 1 : t->n_dims;
        assert_int_equal(
            ts_gguf_writer_add_tensor(w, gguf_name, TS_TYPE_F32, nd, ne, keep[i], &err), TS_OK);
    }
    void *file = NULL;
    size_t file_len = 0;
    assert_int_equal(ts_gguf_writer_write_mem(w, &file, &file_len, &err), TS_OK);
    ts_gguf_writer_destroy(w);
    for (int i = 0; i < n_t; i++) {
        free(keep[i]);
    }
    free(keep);

    ts_gguf *g = NULL;
    assert_int_equal(ts_gguf_open_memory(file, file_len, &g, &err), TS_OK);
    ts_model *model = NULL;
    if (ts_model_from_gguf(g, &model, &err) != TS_OK) {
        fail_msg("%s: %s", arch, err.msg);
    }
    assert_int_equal(model->hp.n_vocab, n_vocab);

    out.root = root;
    out.json = json;
    out.bin = bin;
    out.file = file;
    out.model = model;
    out.n_vocab = n_vocab;
    return out;
}

static void tiny_close(tiny *t) {
    ts_model_close(t->model);
    free(t->file);
    cJSON_Delete(t->root);
    free(t->json);
    free(t->bin);
}

static ts_backend *make_backend(int be) {
    ts_error err = {0};
    ts_backend *b = NULL;
    if (be == 0) {
        assert_int_equal(ts_ref_backend_create(&b, &err), TS_OK);
    } else {
        ts_cpu_params cp = ts_cpu_params_default();
        assert_int_equal(ts_cpu_backend_create(&cp, &b, &err), TS_OK);
    }
    return b;
}

/* Runs the 12 tokens of root's "tokens" through model on both backends and compares every
 * logit with root's "logits" (transformers'); label names the file in messages. */
static void compare_logits(const char *label, const cJSON *root, ts_model *model,
                           int64_t n_vocab) {
    ts_error err = {0};
    const cJSON *tokens = cJSON_GetObjectItem(root, "tokens");
    const cJSON *logits = cJSON_GetObjectItem(root, "logits");
    int32_t tok[N_TOK], pos[N_TOK], seq[N_TOK] = {0}, slots[N_TOK], outs[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        tok[i] = cJSON_GetArrayItem(tokens, i)->valueint;
        pos[i] = slots[i] = outs[i] = i;
    }
    int32_t table[1] = {0}, len = N_TOK;
    float *out = malloc(N_TOK * n_vocab * sizeof(float));
    assert_non_null(out);
    for (int be = 0; be < 2; be++) {
        ts_backend *b = make_backend(be);
        ts_forward_config fc = {.max_tokens = N_TOK,
                                .max_seqs = 1,
                                .max_outputs = N_TOK,
                                .n_blocks = 1,
                                .block_size = 16,
                                .max_blocks_per_seq = 1,
                                .kv_type_k = TS_TYPE_F32, .kv_type_v = TS_TYPE_F32};
        ts_forward *f = NULL;
        assert_int_equal(ts_forward_create(model, b, &fc, NULL, &f, &err), TS_OK);
        ts_batch bt = {.n_tokens = N_TOK,
                       .tokens = tok,
                       .pos = pos,
                       .seq = seq,
                       .slots = slots,
                       .n_seqs = 1,
                       .block_table = table,
                       .seq_len = &len,
                       .n_outputs = N_TOK,
                       .outputs = outs};
        if (ts_forward_run(f, &bt, out, NULL, &err) != TS_OK) {
            fail_msg("%s: %s", label, err.msg);
        }
        double worst = 0;
        for (int t = 0; t < N_TOK; t++) {
            const cJSON *row = cJSON_GetArrayItem(logits, t);
            for (int v = 0; v < n_vocab; v++) {
                double want = cJSON_GetArrayItem(row, v)->valuedouble;
                double d = fabs(out[t * n_vocab + v] - want);
                worst = d > worst ? d : worst;
                if (d > TOL_ABS + TOL_REL * fabs(want)) {
                    fail_msg("%s on %s: position %d token %d: %.5f, transformers %.5f", label,
                             be == 0 ? "ref" : "cpu", t, v, out[t * n_vocab + v], want);
                }
            }
        }
        printf("  %-6s on %s: %d positions x %lld logits, max |d| %.2e\n", label,
               be == 0 ? "ref" : "cpu", N_TOK, (long long)n_vocab, worst);
        ts_forward_destroy(f);
        ts_backend_destroy(b);
    }
    free(out);
}

/* Checks one architecture's logits; with llama3_keys, llama3 scaling is given as metadata
 * instead of the converter's rope_freqs.weight (returns without checking for other configs). */
static void check_arch_form(const char *arch, bool llama3_keys) {
    tiny tm = tiny_load(arch, ".logits.json", llama3_keys);
    if (tm.model == NULL) {
        return;
    }
    char label[160];
    snprintf(label, sizeof label, "%.64s%s", arch, llama3_keys ? " (llama3 as metadata)" : "");
    compare_logits(label, tm.root, tm.model, tm.n_vocab);
    tiny_close(&tm);
}

/* Both inputs of an encoder's embd.json (root) in one step (two sequences of different
 * lengths, each attending within itself both ways); the final hidden state of every token
 * against transformers' (each input run alone). */
static void compare_hidden(const char *label, const cJSON *root, ts_model *model) {
    ts_error err = {0};
    assert_non_null(model->hp.enc);
    const cJSON *inputs = cJSON_GetObjectItem(root, "inputs");
    const cJSON *hidden = cJSON_GetObjectItem(root, "hidden");
    assert_int_equal(cJSON_GetArraySize(inputs), 2);
    int n_a = cJSON_GetArraySize(cJSON_GetArrayItem(inputs, 0));
    int n_b = cJSON_GetArraySize(cJSON_GetArrayItem(inputs, 1));
    int n = n_a + n_b;
    assert_true(n_a <= 16 && n_b <= 16);
    int32_t tok[32], pos[32], seq[32], slots[32], outs[32];
    for (int t = 0; t < n; t++) {
        int s = t < n_a ? 0 : 1, i = s == 0 ? t : t - n_a;
        tok[t] = cJSON_GetArrayItem(cJSON_GetArrayItem(inputs, s), i)->valueint;
        pos[t] = i;
        seq[t] = s;
        slots[t] = s * 16 + i; /* sequence s in block s */
        outs[t] = t;
    }
    int32_t table[2] = {0, 1}, len[2] = {n_a, n_b};
    int64_t n_embd = model->hp.n_embd;
    float *out = malloc((size_t)(n * n_embd) * sizeof(float));
    for (int be = 0; be < 2; be++) {
        ts_backend *b = make_backend(be);
        ts_forward_config fc = {.max_tokens = 32,
                                .max_seqs = 2,
                                .max_outputs = 32,
                                .n_blocks = 2,
                                .block_size = 16,
                                .max_blocks_per_seq = 1,
                                .kv_type_k = TS_TYPE_F32, .kv_type_v = TS_TYPE_F32};
        ts_forward *f = NULL;
        if (ts_forward_create(model, b, &fc, NULL, &f, &err) != TS_OK) {
            fail_msg("%s: %s", label, err.msg);
        }
        ts_batch bt = {.n_tokens = n,
                       .tokens = tok,
                       .pos = pos,
                       .seq = seq,
                       .slots = slots,
                       .n_seqs = 2,
                       .block_table = table,
                       .seq_len = len,
                       .n_outputs = n,
                       .outputs = outs};
        if (ts_forward_run(f, &bt, NULL, out, &err) != TS_OK) {
            fail_msg("%s: %s", label, err.msg);
        }
        double worst = 0;
        for (int t = 0; t < n; t++) {
            int s = t < n_a ? 0 : 1, i = s == 0 ? t : t - n_a;
            const cJSON *row = cJSON_GetArrayItem(cJSON_GetArrayItem(hidden, s), i);
            assert_int_equal(cJSON_GetArraySize(row), n_embd);
            for (int64_t e = 0; e < n_embd; e++) {
                double want = cJSON_GetArrayItem(row, (int)e)->valuedouble;
                double d = fabs(out[t * n_embd + e] - want);
                worst = d > worst ? d : worst;
                if (d > TOL_ABS + TOL_REL * fabs(want)) {
                    fail_msg("%s on %s: input %d position %d element %lld: %.5f, transformers "
                             "%.5f",
                             label, be == 0 ? "ref" : "cpu", s, i, (long long)e, out[t * n_embd + e],
                             want);
                }
            }
        }
        printf("  %-6s on %s: 2 inputs (%d + %d tokens) x %lld hidden, max |d| %.2e\n", label,
               be == 0 ? "ref" : "cpu", n_a, n_b, (long long)n_embd, worst);
        /* A step holding part of a sequence is refused: its tokens would miss later keys. */
        bt.n_tokens = n_a - 1;
        bt.n_seqs = 1;
        bt.n_outputs = 1;
        assert_int_equal(ts_forward_run(f, &bt, NULL, out, &err), TS_ERR_INVALID_ARG);
        ts_forward_destroy(f);
        ts_backend_destroy(b);
    }
    free(out);
}

/* A file written by llama.cpp's convert_hf_to_gguf.py from the same HF model
 * (<name>.conv.gguf, scripts/reference/gen_converted.py): loaded as it is, with the converter's
 * tensor names and metadata, against the logits transformers computed (<name>.logits.json). */
static void check_converted(const char *name) {
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.logits.json", TS_SOURCE_DIR,
             name);
    size_t json_len = 0;
    char *json = slurp(path, &json_len);
    bool encoder = json == NULL;
    if (encoder) {
        snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.embd.json", TS_SOURCE_DIR,
                 name);
        json = slurp(path, &json_len);
    }
    if (json == NULL) {
        fail_msg("%s.conv.gguf has neither a .logits.json nor an .embd.json", name);
    }
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.conv.gguf", TS_SOURCE_DIR, name);
    ts_model *model = NULL;
    ts_error err = {0};
    if (ts_model_open(path, &model, &err) != TS_OK) {
        fail_msg("%s: %s", name, err.msg);
    }
    if (model->n_unused != 0) {
        fail_msg("%s.conv.gguf: tensor '%s' is not used", name, model->unused[0]->name);
    }
    const cJSON *cfg = cJSON_GetObjectItem(root, "config");
    int64_t n_vocab = (int64_t)cJSON_GetObjectItem(cfg, "vocab_size")->valuedouble;
    assert_int_equal(model->hp.n_vocab, n_vocab);
    char label[160];
    snprintf(label, sizeof label, "%.64s (converter)", name);
    if (encoder) {
        compare_hidden(label, root, model);
    } else {
        compare_logits(label, root, model, n_vocab);
    }
    ts_model_close(model);
    cJSON_Delete(root);
    free(json);
}

static void check_arch(const char *arch) {
    check_arch_form(arch, false);
    check_arch_form(arch, true);
}

static void check_encoder(const char *arch) {
    tiny tm = tiny_load(arch, ".embd.json", false);
    compare_hidden(arch, tm.root, tm.model);
    tiny_close(&tm);
}

/* The names of the files <name><suffix> in the tiny directory, sorted; returns how many. */
static int list_tiny(const char *suffix, char names[64][64]) {
    char dir_path[1024];
    snprintf(dir_path, sizeof dir_path, "%s/tests/data/reference/tiny", TS_SOURCE_DIR);
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    int n = 0;
    const struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        size_t len = strlen(de->d_name), sl = strlen(suffix);
        if (len > sl && len - sl < 64 && strcmp(de->d_name + len - sl, suffix) == 0) {
            assert_true(n < 64);
            snprintf(names[n++], 64, "%.*s", (int)(len - sl), de->d_name);
        }
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    return n;
}

static void test_all_encoders(void **state) {
    (void)state;
    char names[64][64];
    int n = list_tiny(".embd.json", names);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        check_encoder(names[i]);
    }
}

static void test_all_archs(void **state) {
    (void)state;
    char names[64][64];
    int n = list_tiny(".logits.json", names);
    assert_true(n >= 17);
    for (int i = 0; i < n; i++) {
        check_arch(names[i]);
    }
}

static void test_all_converted(void **state) {
    (void)state;
    char names[64][64];
    int n = list_tiny(".conv.gguf", names);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        check_converted(names[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_archs),
                                       cmocka_unit_test(test_all_encoders),
                                       cmocka_unit_test(test_all_converted)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
