/*
 * make_model_corpus.c — writes the seed corpora of the model and vocabulary fuzzers: one small
 * valid model of every supported family (tests/common/tiny_model.c with n_embd 8, one or two
 * layers, F32) into DIR/model, and vocabularies of each tokenizer kind (the same files: their
 * tokenizer.ggml.* metadata; SentencePiece, BPE, WordPiece) into DIR/vocab.
 *
 * usage: fuzz_model_corpus DIR. The outputs are committed in tests/fuzz/corpus/{model,vocab}/
 * (named without .gguf, which .gitignore reserves for model files); rerun this after changes
 * to the families' tensors or keys.
 */
#include <stdio.h>
#include <string.h>

#include "common/tiny_model.h"

static int write_one(const char *dir, const char *sub, const char *name, ts_tiny_spec *s) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    ts_error err = {0};
    if (ts_tiny_write(s, path, &err) != TS_OK) {
        fprintf(stderr, "fuzz_model_corpus: %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

/* The family's default spec, shrunk: what makes a seed small is the embedding width. */
static ts_tiny_spec small(const char *arch) {
    ts_tiny_spec s = ts_tiny_spec_default(arch);
    s.n_embd = 8;
    s.n_ff = 8;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.n_ctx_train = 16;
    if (s.head_dim > 0) {
        s.head_dim = 4;
    }
    if (s.n_rot > 0) {
        s.n_rot = 2;
    }
    if (s.n_expert > 0) {
        s.n_expert = 3;
        s.n_ff_exp = 4;
        s.n_ff_shexp = s.n_ff_shexp > 0 ? 4 : 0;
    }
    if (s.n_swa > 0) {
        s.n_swa = 2;
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_model_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;
    for (int i = 0; ts_tiny_archs[i] != NULL && rc == 0; i++) {
        ts_tiny_spec s = small(ts_tiny_archs[i]);
        rc = write_one(dir, "model", ts_tiny_archs[i], &s);
    }
    for (int i = 0; ts_tiny_encoders[i] != NULL && rc == 0; i++) {
        ts_tiny_spec s = small(ts_tiny_encoders[i]);
        rc = write_one(dir, "model", ts_tiny_encoders[i], &s);
    }
    /* Hostile variants, each refused with a message: heads that do not divide the width, more
     * experts per token than experts, a wrong shape, a missing tensor, a missing key. Plus
     * window layers of the families that gained them (EXAONE 4, OLMo 3). */
    ts_tiny_spec h = small("llama");
    h.n_head = 3;
    h.n_head_kv = 3;
    rc = rc || write_one(dir, "model", "bad-heads", &h);
    h = small("qwen3moe");
    h.n_expert_used = 7;
    rc = rc || write_one(dir, "model", "bad-experts-used", &h);
    h = small("llama");
    h.reshape = "blk.0.attn_k.weight";
    rc = rc || write_one(dir, "model", "bad-shape", &h);
    h = small("gemma3");
    h.omit = "blk.1.attn_k_norm.weight";
    rc = rc || write_one(dir, "model", "missing-tensor", &h);
    h = small("cohere2");
    h.omit_key = "attention.sliding_window";
    rc = rc || write_one(dir, "model", "missing-key", &h);
    h = small("dots1");
    h.moe_gating = 0;
    rc = rc || write_one(dir, "model", "dots1-no-gating", &h);
    h = small("exaone4");
    h.n_layer = 4;
    h.n_swa = 2;
    h.swa_pattern = 4;
    rc = rc || write_one(dir, "model", "exaone4-swa", &h);
    h = small("olmo2");
    h.n_layer = 4;
    h.n_swa = 2;
    rc = rc || write_one(dir, "model", "olmo3-swa", &h);

    /* Vocabularies: one file per tokenizer kind (llama: SentencePiece, qwen2: BPE, bert:
     * WordPiece), with one layer to keep the tensors small. */
    static const char *const vocab[] = {"llama", "qwen2", "bert"};
    for (size_t i = 0; i < sizeof vocab / sizeof vocab[0] && rc == 0; i++) {
        ts_tiny_spec s = small(vocab[i]);
        s.n_layer = 1;
        rc = write_one(dir, "vocab", vocab[i], &s);
    }
    return rc;
}
