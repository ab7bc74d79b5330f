/*
 * llm.c — models in the public API: opening a file (whole model or vocabulary only), what a
 * model is (ts_llm_info), text <-> tokens, and ts_free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "runtime/runtime.h"
#include "util/error.h"

/* llama.cpp's general.file_type values and the names users know them by. */
static const struct {
    uint32_t id;
    const char *name;
} k_file_types[] = {
    {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
    {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
    {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
    {18, "Q6_K"},   {25, "IQ4_NL"}, {30, "IQ4_XS"}, {32, "BF16"},   {38, "MXFP4"},
};

/* The file's general.file_type when we know its name, else the type holding most bytes. */
static void find_file_type(const ts_model *m, char *out, size_t size) {
    ts_error e = {0};
    uint32_t ft = 0;
    if (ts_gguf_get_u32(m->gguf, "general.file_type", &ft, &e) == TS_OK) {
        for (size_t i = 0; i < sizeof k_file_types / sizeof k_file_types[0]; i++) {
            if (k_file_types[i].id == ft) {
                snprintf(out, size, "%s", k_file_types[i].name);
                return;
            }
        }
    }
    uint64_t bytes[TS_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < ts_gguf_tensor_count(m->gguf); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(m->gguf, i);
        if ((uint32_t)t->type < TS_TYPE_COUNT) {
            bytes[t->type] += t->nbytes;
        }
    }
    uint32_t best = 0;
    for (uint32_t t = 1; t < TS_TYPE_COUNT; t++) {
        best = bytes[t] > bytes[best] ? t : best;
    }
    snprintf(out, size, "%s", ts_type_name(best));
}

static void find_name(const ts_gguf *g, const char *path, char *out, size_t size) {
    ts_error e = {0};
    ts_gguf_str s;
    if (ts_gguf_get_str(g, "general.name", &s, &e) == TS_OK && s.len > 0) {
        snprintf(out, size, "%.*s", (int)(s.len < size ? s.len : size - 1), s.ptr);
        return;
    }
    const char *base = strrchr(path, '/');
    snprintf(out, size, "%s", base != NULL ? base + 1 : path);
}

static void fill_info(ts_llm *llm) {
    ts_llm_info *in = &llm->info;
    memset(in, 0, sizeof *in);
    in->name = llm->name;
    in->file_type = llm->file_type;
    in->arch = "";
    in->unused_tensors = "";
    in->n_vocab = (int32_t)ts_tokenizer_n_vocab(llm->tok);
    const ts_tokenizer_special *sp = ts_tokenizer_get_special(llm->tok);
    in->bos = sp->bos; /* TS_TOKEN_NULL is -1 */
    in->eos = sp->eos;
    in->add_bos = sp->add_bos;
    in->add_eos = sp->add_eos;
    if (llm->model == NULL) {
        in->file_bytes = ts_gguf_file_size(llm->vocab_gguf);
        return;
    }
    const ts_hparams *hp = &llm->model->hp;
    in->arch = hp->arch->name;
    in->n_params = llm->model->n_params;
    in->weight_bytes = llm->model->weight_bytes;
    in->file_bytes = ts_gguf_file_size(llm->model->gguf);
    in->n_vocab = (int32_t)hp->n_vocab;
    in->n_ctx_train = hp->n_ctx_train;
    in->n_embd = hp->n_embd;
    in->n_layer = hp->n_layer;
    in->n_head = hp->n_head;
    in->n_head_kv = hp->n_head_kv;
    in->head_dim = hp->head_dim;
    in->n_ff = hp->n_ff;
    in->encoder = hp->enc != NULL;
    in->pooling = (int32_t)hp->pooling;
    in->n_unused_tensors = llm->model->n_unused;
    in->unused_tensors = llm->unused != NULL ? llm->unused : "";
    in->n_expert = hp->n_expert;
    in->n_expert_used = hp->n_expert_used;
    in->active_bytes = llm->model->active_bytes;
}

/* Lists the model's unused tensors in llm->unused ("a, b, c"; control bytes as '?') and warns
 * through the caller's log callback, naming at most the first 8. */
static ts_status report_unused(ts_llm *llm, const ts_llm_params *params, ts_error *err) {
    const ts_model *m = llm->model;
    if (m == NULL || m->n_unused == 0) {
        return TS_OK;
    }
    size_t len = 1;
    for (int64_t i = 0; i < m->n_unused; i++) {
        len += strlen(m->unused[i]->name) + 2;
    }
    llm->unused = malloc(len);
    if (llm->unused == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_open: out of memory");
    }
    size_t at = 0, shown_end = 0;
    for (int64_t i = 0; i < m->n_unused; i++) {
        const char *name = m->unused[i]->name;
        if (i > 0) {
            memcpy(llm->unused + at, ", ", 2);
            at += 2;
        }
        for (const char *c = name; *c != '\0'; c++) {
            unsigned char b = (unsigned char)*c;
            llm->unused[at++] = b < 0x20 || b == 0x7f ? '?' : (char)b;
        }
        if (i < 8) {
            shown_end = at;
        }
    }
    llm->unused[at] = '\0';
    if (params != NULL && params->log != NULL) {
        int64_t more = m->n_unused > 8 ? m->n_unused - 8 : 0;
        size_t msg_len = shown_end + 256;
        char *msg = malloc(msg_len);
        if (msg == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_open: out of memory");
        }
        snprintf(msg, msg_len,
                 "%lld tensor%s of the file %s not used by architecture '%s' (the output may be "
                 "wrong): %.*s%s",
                 (long long)m->n_unused, m->n_unused == 1 ? "" : "s",
                 m->n_unused == 1 ? "is" : "are", m->hp.arch->name, (int)shown_end, llm->unused,
                 more > 0 ? ", ..." : "");
        params->log(params->log_user, TS_LOG_WARN, msg);
        free(msg);
    }
    return TS_OK;
}

/* The file's chat template as a C string (it may hold no NUL: the engine takes lengths, but
 * the public API hands out a C string). */
static ts_status copy_chat_template(ts_llm *llm, ts_error *err) {
    const char *src = NULL;
    size_t len = 0;
    if (!ts_tokenizer_chat_template_source(llm->tok, &src, &len)) {
        return TS_OK;
    }
    if (memchr(src, '\0', len) != NULL) {
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.chat_template holds a NUL byte");
    }
    llm->chat_src = malloc(len + 1);
    if (llm->chat_src == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "chat template: out of memory (%zu bytes)", len);
    }
    memcpy(llm->chat_src, src, len);
    llm->chat_src[len] = '\0';
    return TS_OK;
}

static ts_status llm_open(const char *path, const ts_llm_params *params, ts_llm **out,
                          ts_error *err) {
    if (out != NULL) {
        *out = NULL; /* on every failure, including a NULL path */
    }
    if (path == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_open: path and out are required");
    }
    ts_llm *llm = calloc(1, sizeof *llm);
    if (llm == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_open: out of memory");
    }
    bool vocab_only = params != NULL && params->vocab_only;
    ts_status st = vocab_only ? ts_gguf_open(path, &llm->vocab_gguf, err)
                              : ts_model_open(path, &llm->model, err);
    const ts_gguf *g = vocab_only ? llm->vocab_gguf : (llm->model ? llm->model->gguf : NULL);
    if (st == TS_OK) {
        st = ts_tokenizer_create(g, &llm->tok, err);
    }
    if (st == TS_OK) {
        st = report_unused(llm, params, err);
    }
    if (st == TS_OK) {
        st = copy_chat_template(llm, err);
    }
    if (st != TS_OK && strstr(err->msg, path) == NULL) {
        ts_error_prefix(err, "%s: ", path); /* every error names the file */
    }
    if (st != TS_OK) {
        ts_llm_close(llm);
        return st;
    }
    find_name(g, path, llm->name, sizeof llm->name);
    if (llm->model != NULL) {
        find_file_type(llm->model, llm->file_type, sizeof llm->file_type);
    }
    fill_info(llm);
    *out = llm;
    return TS_OK;
}

ts_status ts_llm_open(const char *path, const ts_llm_params *params, ts_llm **out, ts_error *err) {
    ts_error local = {0};
    return llm_open(path, params, out, err != NULL ? err : &local);
}

void ts_llm_close(ts_llm *llm) {
    if (llm == NULL) {
        return;
    }
    ts_gvocab_free(atomic_load(&llm->gvocab));
    ts_tokenizer_destroy(llm->tok);
    ts_model_close(llm->model);
    ts_gguf_close(llm->vocab_gguf);
    free(llm->unused);
    free(llm->chat_src);
    free(llm);
}

void ts_llm_get_info(const ts_llm *llm, ts_llm_info *out) {
    *out = llm->info;
}

int32_t ts_llm_n_vocab(const ts_llm *llm) {
    return llm->info.n_vocab;
}

int64_t ts_llm_n_ctx_train(const ts_llm *llm) {
    return llm->info.n_ctx_train;
}

const char *ts_llm_arch(const ts_llm *llm) {
    return llm->info.arch;
}

ts_status ts_llm_tokenize(const ts_llm *llm, const char *text, size_t len, int add_special,
                          int parse_special, int32_t **ids, size_t *n_ids, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (llm == NULL || (text == NULL && len > 0) || ids == NULL || n_ids == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_tokenize: NULL argument");
    }
    return ts_tokenizer_tokenize(llm->tok, text != NULL ? text : "", len, add_special != 0,
                                 parse_special != 0, ids, n_ids, err);
}

ts_status ts_llm_detokenize(const ts_llm *llm, const int32_t *ids, size_t n_ids, int render_special,
                            char **text, size_t *len, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (llm == NULL || (ids == NULL && n_ids > 0) || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_detokenize: NULL argument");
    }
    size_t n = 0;
    ts_status st =
        ts_tokenizer_detokenize(llm->tok, ids, n_ids, render_special != 0, text, &n, err);
    if (st == TS_OK && len != NULL) {
        *len = n;
    }
    return st;
}

ts_status ts_llm_token_to_piece(const ts_llm *llm, int32_t token, int render_special,
                                const char **piece, size_t *len, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (llm == NULL || piece == NULL || len == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_token_to_piece: NULL argument");
    }
    return ts_tokenizer_token_to_piece(llm->tok, token, render_special != 0, piece, len, err);
}

void ts_free(void *p) {
    free(p);
}
