/*
 * test_tiny_hf.c — every architecture against Hugging Face transformers on a tiny
 * random-weight model.
 *
 * tests/data/reference/tiny/<arch>.bin holds the float32 weights of a transformers model with
 * its HF names and shapes; <arch>.logits.json holds the logits transformers computed for 12
 * fixed tokens, and for each tensor its GGUF name and the layout transform a converter must
 * apply (docs/reference.md). This test converts the weights to GGUF with our writer (applying
 * the transforms: llama's RoPE row permutation, Gemma's norm +1, GPT-2's Conv1D transpose),
 * loads the result with our model loader and compares the logits of every position, on the
 * reference and CPU backends with f32 weights and an f32 KV cache:
 *     |ours - hf| <= 1e-4 + 1e-4 |hf|      (seen: at most 7e-6)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/model.h"

#define N_TOK 12

/* Metadata of each tiny model, as llama.cpp's converter writes it (docs/reference.md). */
typedef struct tiny_meta {
    const char *arch;
    uint32_t ctx, ff, n_kv;  /* n_kv 0: key not written */
    float eps, theta;        /* theta 0: not written */
    uint32_t n_rot, key_len; /* 0: not written */
    uint32_t window, pattern;
    float attn_cap, final_cap;
} tiny_meta;

static const tiny_meta k_meta[] = {
    {"llama", 128, 64, 2, 1e-5f, 1e4f, 8, 0, 0, 0, 0, 0},
    {"qwen2", 128, 64, 2, 1e-6f, 1e6f, 0, 0, 0, 0, 0, 0},
    {"qwen3", 128, 64, 2, 1e-6f, 1e6f, 0, 16, 0, 0, 0, 0},
    {"phi3", 128, 64, 2, 1e-5f, 1e4f, 8, 0, 0, 0, 0, 0},
    {"gemma2", 128, 64, 2, 1e-6f, 1e4f, 0, 16, 4, 2, 2.0f, 5.0f},
    {"gemma3", 128, 64, 2, 1e-6f, 1e6f, 0, 16, 4, 2, 0, 0},
    {"gpt2", 64, 128, 0, 1e-5f, 0, 0, 0, 0, 0, 0, 0},
};

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
    uint32_t dims[2];
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
        assert_true(nd >= 1 && nd <= 2 && at + 4 * nd <= len);
        out[i].n_dims = nd;
        out[i].dims[1] = 1;
        memcpy(out[i].dims, buf + at, 4 * nd);
        at += 4 * nd;
        size_t count = (size_t)out[i].dims[0] * (nd == 2 ? out[i].dims[1] : 1);
        assert_true(at + count * 4 <= len);
        out[i].data = (const float *)(buf + at);
        at += count * 4;
    }
    assert_int_equal(at, len);
    return (int)n;
}

/* Applies a converter transform to a copy of the HF tensor (rows x cols, row-major). */
static float *transform(const hf_tensor *t, const char *how, const tiny_meta *m, int64_t n_embd,
                        int64_t n_head, int64_t *rows, int64_t *cols) {
    *rows = t->n_dims == 2 ? t->dims[0] : 1;
    *cols = t->n_dims == 2 ? t->dims[1] : t->dims[0];
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
        for (int64_t r = 0; r < *rows; r++) {
            for (int64_t c = 0; c < *cols; c++) {
                dst[c * *rows + r] = src[r * *cols + c];
            }
        }
        int64_t tmp = *rows;
        *rows = *cols;
        *cols = tmp;
    } else if (strncmp(how, "rope_permute", 12) == 0) {
        /* GGUF row h*d + 2i + j = HF row h*d + j*d/2 + i. */
        int64_t d = n_embd / n_head;
        int64_t heads = *rows / d;
        for (int64_t h = 0; h < heads; h++) {
            for (int64_t i = 0; i < d / 2; i++) {
                for (int64_t j = 0; j < 2; j++) {
                    memcpy(dst + (h * d + 2 * i + j) * *cols, src + (h * d + j * d / 2 + i) * *cols,
                           (size_t)*cols * sizeof(float));
                }
            }
        }
    } else {
        assert_string_equal(how, "");
    }
    (void)m;
    free(src);
    return dst;
}

static void check_arch(const tiny_meta *m) {
    char path[1024];
    size_t json_len = 0, bin_len = 0;
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.logits.json", TS_SOURCE_DIR,
             m->arch);
    char *json = slurp(path, &json_len);
    assert_non_null(json);
    snprintf(path, sizeof path, "%s/tests/data/reference/tiny/%s.bin", TS_SOURCE_DIR, m->arch);
    char *bin = slurp(path, &bin_len);
    assert_non_null(bin);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    hf_tensor hf[64];
    int n_hf = parse_bin(bin, bin_len, hf, 64);

    /* Shapes every tiny model shares (docs/reference.md). */
    const int64_t n_embd = 32, n_head = 4, n_layer = 2, n_vocab = 256;
    ts_error err = {0};
    ts_gguf_writer *w = NULL;
    assert_int_equal(ts_gguf_writer_create(&w, &err), TS_OK);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", m->arch, suffix), key)
    assert_int_equal(ts_gguf_writer_add_cstr(w, "general.architecture", m->arch, &err), TS_OK);
    ts_gguf_writer_add_u32(w, KEY("context_length"), m->ctx, &err);
    ts_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)n_embd, &err);
    ts_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)n_layer, &err);
    ts_gguf_writer_add_u32(w, KEY("feed_forward_length"), m->ff, &err);
    ts_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)n_head, &err);
    if (m->n_kv) {
        ts_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), m->n_kv, &err);
    }
    bool layer_norm = strcmp(m->arch, "gpt2") == 0;
    ts_gguf_writer_add_f32(w, KEY(layer_norm ? "attention.layer_norm_epsilon"
                                             : "attention.layer_norm_rms_epsilon"),
                           m->eps, &err);
    if (m->theta > 0) {
        ts_gguf_writer_add_f32(w, KEY("rope.freq_base"), m->theta, &err);
    }
    if (m->n_rot) {
        ts_gguf_writer_add_u32(w, KEY("rope.dimension_count"), m->n_rot, &err);
    }
    if (m->key_len) {
        ts_gguf_writer_add_u32(w, KEY("attention.key_length"), m->key_len, &err);
        ts_gguf_writer_add_u32(w, KEY("attention.value_length"), m->key_len, &err);
    }
    if (m->window) {
        ts_gguf_writer_add_u32(w, KEY("attention.sliding_window"), m->window, &err);
        ts_gguf_writer_add_u32(w, KEY("attention.sliding_window_pattern"), m->pattern, &err);
    }
    if (m->attn_cap > 0) {
        ts_gguf_writer_add_f32(w, KEY("attn_logit_softcapping"), m->attn_cap, &err);
        ts_gguf_writer_add_f32(w, KEY("final_logit_softcapping"), m->final_cap, &err);
    }
#undef KEY
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
        int64_t rows, cols;
        keep[i] = transform(t, how, m, n_embd, n_head, &rows, &cols);
        int64_t ne[2] = {cols, rows};
        uint32_t nd = t->n_dims;
        assert_int_equal(ts_gguf_writer_add_tensor(w, gguf_name, TS_TYPE_F32, nd, ne, keep[i],
                                                   &err),
                         TS_OK);
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
        fail_msg("%s: %s", m->arch, err.msg);
    }
    assert_int_equal(model->hp.n_vocab, n_vocab);

    const cJSON *tokens = cJSON_GetObjectItem(root, "tokens");
    const cJSON *logits = cJSON_GetObjectItem(root, "logits");
    int32_t tok[N_TOK], pos[N_TOK], seq[N_TOK] = {0}, slots[N_TOK], outs[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        tok[i] = cJSON_GetArrayItem(tokens, i)->valueint;
        pos[i] = slots[i] = outs[i] = i;
    }
    int32_t table[1] = {0}, len = N_TOK;
    float *out = malloc(N_TOK * n_vocab * sizeof(float));
    for (int be = 0; be < 2; be++) {
        ts_backend *b = NULL;
        if (be == 0) {
            assert_int_equal(ts_ref_backend_create(&b, &err), TS_OK);
        } else {
            ts_cpu_params cp = ts_cpu_params_default();
            assert_int_equal(ts_cpu_backend_create(&cp, &b, &err), TS_OK);
        }
        ts_forward_config fc = {.max_tokens = N_TOK,
                                .max_seqs = 1,
                                .max_outputs = N_TOK,
                                .n_blocks = 1,
                                .block_size = 16,
                                .max_blocks_per_seq = 1,
                                .kv_type = TS_TYPE_F32};
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
            fail_msg("%s: %s", m->arch, err.msg);
        }
        double worst = 0;
        for (int t = 0; t < N_TOK; t++) {
            const cJSON *row = cJSON_GetArrayItem(logits, t);
            for (int v = 0; v < n_vocab; v++) {
                double want = cJSON_GetArrayItem(row, v)->valuedouble;
                double d = fabs(out[t * n_vocab + v] - want);
                worst = d > worst ? d : worst;
                if (d > 1e-4 + 1e-4 * fabs(want)) {
                    fail_msg("%s on %s: position %d token %d: %.5f, transformers %.5f", m->arch,
                             be == 0 ? "ref" : "cpu", t, v, out[t * n_vocab + v], want);
                }
            }
        }
        printf("  %-6s on %s: %d positions x %lld logits, max |d| %.2e\n", m->arch,
               be == 0 ? "ref" : "cpu", N_TOK, (long long)n_vocab, worst);
        ts_forward_destroy(f);
        ts_backend_destroy(b);
    }
    free(out);
    ts_model_close(model);
    free(file);
    cJSON_Delete(root);
    free(json);
    free(bin);
}

static void test_all_archs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_meta / sizeof k_meta[0]; i++) {
        check_arch(&k_meta[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_archs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
