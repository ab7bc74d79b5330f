/*
 * test_loader.c — ts_model_open on tiny models of every architecture: hyperparameters and
 * tensors resolved as written, and every loader error (unknown architecture, missing tensor,
 * wrong shape, unsupported type, missing key) named with what and where.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/tiny_model.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* Writes spec to a temporary file and opens it; returns the status and keeps the message. */
static ts_status open_spec(const ts_tiny_spec *spec, ts_model **m, ts_error *err) {
    char path[512];
    assert_non_null(ts_tiny_temp_path(path, sizeof path, spec->arch));
    ts_error werr = {0};
    ts_status st = ts_tiny_write(spec, path, &werr);
    if (st != TS_OK) {
        fail_msg("writing %s: %s", spec->arch, werr.msg);
    }
    st = ts_model_open(path, m, err);
    /* The model maps the file; unlinking it now keeps the mapping valid. */
    unlink(path);
    return st;
}

static void expect_error(const ts_tiny_spec *spec, ts_status want, const char *const *parts) {
    ts_model *m = NULL;
    ts_error err = {0};
    ts_status st = open_spec(spec, &m, &err);
    assert_int_equal(st, want);
    assert_null(m);
    for (int i = 0; parts[i] != NULL; i++) {
        if (strstr(err.msg, parts[i]) == NULL) {
            fail_msg("message '%s' lacks '%s'", err.msg, parts[i]);
        }
    }
}

typedef struct count_ctx {
    int n;
    uint64_t elements;
} count_ctx;

static void count_param(const char *name, const ts_gguf_tensor *t, void *user) {
    count_ctx *c = user;
    assert_non_null(name);
    c->n++;
    c->elements += t->n_elements;
}

static void check_loaded(const ts_tiny_spec *s, const ts_model *m) {
    const ts_hparams *hp = &m->hp;
    int64_t head_dim = s->head_dim > 0 ? s->head_dim : s->n_embd / s->n_head;
    assert_string_equal(hp->arch->name, s->arch_name != NULL ? s->arch_name : s->arch);
    assert_int_equal(hp->n_vocab, s->n_vocab);
    assert_int_equal(hp->n_ctx_train, s->n_ctx_train);
    assert_int_equal(hp->n_embd, s->n_embd);
    assert_int_equal(hp->n_layer, s->n_layer);
    assert_int_equal(hp->n_ff, s->n_ff);
    assert_int_equal(hp->n_head, s->n_head);
    assert_int_equal(hp->n_head_kv, s->n_head_kv);
    assert_int_equal(hp->head_dim, head_dim);
    assert_int_equal(hp->n_rot, s->n_rot > 0 ? s->n_rot : head_dim);
    assert_float_equal(hp->norm_eps, s->norm_eps, 1e-12);
    bool granite = strcmp(s->arch, "granite") == 0 || strcmp(s->arch, "granitemoe") == 0;
    bool cohere2 = strcmp(s->arch, "cohere2") == 0;
    assert_float_equal(hp->attn_scale, granite ? 0.15 : 1.0 / sqrt((double)head_dim), 1e-6);
    assert_int_equal(m->n_unused, 0); /* every tensor a family's file holds is used */
    bool gemma = strcmp(s->arch, "gemma2") == 0 || strcmp(s->arch, "gemma3") == 0;
    assert_float_equal(hp->embd_scale, gemma ? sqrt((double)s->n_embd) : granite ? 1.5 : 1.0, 1e-5);
    assert_float_equal(hp->residual_scale, granite ? 0.5 : 1.0, 1e-6);
    assert_float_equal(hp->logit_mul, granite ? 0.25 : cohere2 ? 0.5 : 1.0, 1e-6);
    if (strcmp(s->arch, "gpt2") != 0) {
        assert_float_equal(hp->rope_base, s->rope_base, 1e-3);
    }
    assert_float_equal(hp->attn_softcap, s->attn_softcap, 1e-6);
    assert_float_equal(hp->final_softcap, s->final_softcap, 1e-6);
    bool oss = strcmp(s->arch, "gpt-oss") == 0;
    assert_int_equal(hp->n_swa, gemma || cohere2 || oss ? s->n_swa : 0);
    if (strcmp(s->arch, "gemma2") == 0 || oss) {
        /* Gemma 2 and gpt-oss alternate: even layers local, odd layers global. */
        assert_true(ts_hparams_layer_is_swa(hp, 0));
        assert_false(ts_hparams_layer_is_swa(hp, 1));
    } else if (strcmp(s->arch, "gemma3") == 0) {
        /* Gemma 3: five local layers, then one global. */
        for (int64_t il = 0; il < hp->n_layer; il++) {
            assert_int_equal(ts_hparams_layer_is_swa(hp, il), il % 6 != 5);
        }
        /* Beyond the model's layers nothing slides. */
        assert_false(ts_hparams_layer_is_swa(hp, hp->n_layer));
        assert_float_equal(hp->rope_base_swa, 10000.0, 1e-3);
    } else if (cohere2) {
        /* Cohere 2 (pattern 2 in the tiny file): a window layer, then a global one. */
        for (int64_t il = 0; il < hp->n_layer; il++) {
            assert_int_equal(ts_hparams_layer_is_swa(hp, il), il % s->swa_pattern == 0);
        }
    } else {
        assert_false(ts_hparams_layer_is_swa(hp, 0));
    }
    /* NoPE layers: GPT-2 has none with RoPE; SmolLM3 every 4th layer, Cohere 2 the global
     * layers go without. */
    for (int64_t il = 0; il < hp->n_layer; il++) {
        bool nope = strcmp(s->arch, "gpt2") == 0 ||
                    (strcmp(s->arch, "smollm3") == 0 && il % 4 == 3) || (cohere2 && il % 2 == 1);
        assert_int_equal(ts_hparams_layer_has_rope(hp, il), !nope);
    }
    bool phi3 = strcmp(s->arch, "phi3") == 0, olmo2 = strcmp(s->arch, "olmo2") == 0;
    assert_int_equal(m->tied_output, cohere2 || (s->tied_output && !phi3 && !olmo2));
    assert_int_equal(ts_model_tensor(m, TS_ROLE_OUTPUT, 0) == NULL, m->tied_output);

    /* Every tensor of the file was resolved, none twice, and the totals add up. */
    count_ctx c = {0, 0};
    ts_model_each_param(m, count_param, &c);
    assert_int_equal(c.n, (int)ts_gguf_tensor_count(m->gguf));
    assert_int_equal(c.elements, m->n_params);
    uint64_t elements = 0;
    size_t bytes = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(m->gguf); i++) {
        elements += ts_gguf_tensor_at(m->gguf, i)->n_elements;
        bytes += ts_gguf_tensor_at(m->gguf, i)->nbytes;
    }
    assert_int_equal(elements, m->n_params);
    assert_int_equal(bytes, m->weight_bytes);

    /* Roles map to the tensors of that name, weights keep their stored type. */
    bool moe = s->n_expert > 0;
    ts_role down_role = moe ? TS_ROLE_FFN_DOWN_EXPS : TS_ROLE_FFN_DOWN;
    const ts_gguf_tensor *down = ts_model_tensor(m, down_role, s->n_layer - 1);
    assert_non_null(down);
    char name[64];
    snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)(s->n_layer - 1),
             moe ? "ffn_down_exps" : "ffn_down");
    assert_string_equal(down->name, name);
    assert_int_equal(down->type, s->wtype);
    assert_null(ts_model_tensor(m, down_role, s->n_layer));
    assert_null(ts_model_tensor(m, down_role, -1));
    if (moe) {
        assert_int_equal(down->ne[2], s->n_expert);
        assert_int_equal(m->hp.n_expert, s->n_expert);
        assert_int_equal(m->hp.n_expert_used, s->n_expert_used);
        /* (The last layer: dots1's first layer is dense.) */
        assert_null(ts_model_tensor(m, TS_ROLE_FFN_DOWN, s->n_layer - 1));
        /* The router stays F32 (as llama.cpp's quantizer leaves it). */
        assert_int_equal(ts_model_tensor(m, TS_ROLE_FFN_GATE_INP, s->n_layer - 1)->type,
                         TS_TYPE_F32);
    }
    const ts_gguf_tensor *embd = ts_model_tensor(m, TS_ROLE_TOKEN_EMBD, 0);
    assert_non_null(embd);
    assert_int_equal(embd->ne[0], s->n_embd);
    assert_int_equal(embd->ne[1], s->n_vocab);
    bool qkv_bias = strcmp(s->arch, "qwen2") == 0 || strcmp(s->arch, "qwen2moe") == 0 ||
                    strcmp(s->arch, "glm4moe") == 0 || s->qkv_bias || oss;
    if (!phi3 && strcmp(s->arch, "gpt2") != 0) {
        assert_int_equal(ts_model_tensor(m, TS_ROLE_ATTN_Q_B, 0) != NULL, qkv_bias);
    }

    /* The vocabulary the writer put in is a valid tokenizer of the same size. */
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tokenizer_create(m->gguf, &tok, &err), TS_OK);
    assert_int_equal(ts_tokenizer_n_vocab(tok), (uint32_t)s->n_vocab);
    assert_true(ts_tokenizer_is_eog(tok, TS_TINY_EOS));
    ts_tokenizer_destroy(tok);
}

static void test_every_arch_and_type(void **state) {
    (void)state;
    const ts_type types[] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_Q8_0, TS_TYPE_Q4_0, TS_TYPE_Q4_1};
    for (int a = 0; ts_tiny_archs[a] != NULL; a++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            ts_tiny_spec s = ts_tiny_spec_default(ts_tiny_archs[a]);
            s.wtype = types[t];
            ts_model *m = NULL;
            ts_error err = {0};
            if (open_spec(&s, &m, &err) != TS_OK) {
                fail_msg("%s/%s: %s", s.arch, ts_type_name(s.wtype), err.msg);
            }
            check_loaded(&s, m);
            ts_model_close(m);
        }
    }
}

/* Optional tensors are probed: an untied llama, llama with Q/K/V biases, a tied gpt2. */
static void test_optional_tensors(void **state) {
    (void)state;
    const struct {
        const char *arch;
        bool tied, bias;
    } cases[] = {{"llama", false, true}, {"llama", true, false}, {"gpt2", true, false},
                 {"gemma2", false, false}, {"qwen3", true, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_tiny_spec s = ts_tiny_spec_default(cases[i].arch);
        s.tied_output = cases[i].tied;
        s.qkv_bias = cases[i].bias;
        ts_model *m = NULL;
        ts_error err = {0};
        if (open_spec(&s, &m, &err) != TS_OK) {
            fail_msg("%s: %s", s.arch, err.msg);
        }
        check_loaded(&s, m);
        ts_model_close(m);
    }
}

static void test_unknown_arch(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.arch_name = "mamba";
    const char *parts[] = {"mamba",  "llama",   "qwen2",   "qwen3",         "phi3",
                           "gemma2", "gemma3",  "gpt2",    "granite",       "smollm3",
                           "olmo2",  "exaone4", "cohere2", "ernie4_5",      "ts_tiny_llama", NULL};
    expect_error(&s, TS_ERR_UNSUPPORTED, parts);
}

static void test_missing_tensor(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.omit = "blk.1.ffn_down.weight";
    const char *p1[] = {"blk.1.ffn_down.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p1);

    /* Biases are optional for llama but required for qwen2. */
    s = ts_tiny_spec_default("qwen2");
    s.omit = "blk.0.attn_v.bias";
    const char *p2[] = {"blk.0.attn_v.bias", NULL};
    expect_error(&s, TS_ERR_FORMAT, p2);

    /* OLMo 2 has no tied output (Phi-3's may be tied: Phi-4-mini, test_family_keys). */
    s = ts_tiny_spec_default("olmo2");
    s.omit = "output.weight";
    const char *p3[] = {"output.weight", NULL};
    expect_error(&s, TS_ERR_FORMAT, p3);

    s = ts_tiny_spec_default("gpt2");
    s.omit = "position_embd.weight";
    const char *p4[] = {"position_embd.weight", NULL};
    expect_error(&s, TS_ERR_FORMAT, p4);

    s = ts_tiny_spec_default("gemma3");
    s.omit = "blk.1.attn_k_norm.weight";
    const char *p5[] = {"blk.1.attn_k_norm.weight", NULL};
    expect_error(&s, TS_ERR_FORMAT, p5);

    s = ts_tiny_spec_default("llama");
    s.omit = "token_embd.weight";
    const char *p6[] = {"token_embd.weight", NULL};
    expect_error(&s, TS_ERR_FORMAT, p6);

    /* OLMo 2 and EXAONE 4 need their post-norms; OLMo 2 has no tied output. */
    s = ts_tiny_spec_default("olmo2");
    s.omit = "blk.1.post_ffw_norm.weight";
    const char *p7[] = {"blk.1.post_ffw_norm.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p7);
    s = ts_tiny_spec_default("olmo2");
    s.omit = "output.weight";
    const char *p8[] = {"output.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p8);
    s = ts_tiny_spec_default("exaone4");
    s.omit = "blk.0.post_attention_norm.weight";
    const char *p9[] = {"blk.0.post_attention_norm.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p9);

    /* nomic-bert: its SwiGLU gate and fused QKV are required (no table of positions). */
    s = ts_tiny_spec_default("nomic-bert");
    s.omit = "blk.1.ffn_gate.weight";
    const char *p10[] = {"blk.1.ffn_gate.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p10);
    s = ts_tiny_spec_default("nomic-bert");
    s.omit = "blk.0.attn_qkv.weight";
    const char *p11[] = {"blk.0.attn_qkv.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p11);
}

static void test_wrong_shape(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.reshape = "blk.0.attn_k.weight"; /* [64, 32] written as [64, 33] */
    const char *p1[] = {"blk.0.attn_k.weight", "[64, 33", "expected [64, 32]",
                        "ne[1] should be 32 (llama.head_count_kv x key_length)", NULL};
    expect_error(&s, TS_ERR_FORMAT, p1);

    s = ts_tiny_spec_default("gemma3");
    s.reshape = "blk.0.attn_q_norm.weight"; /* [32] written as [33] */
    const char *p2[] = {"blk.0.attn_q_norm.weight", "[33, 1", "expected [32, 1]",
                        "(gemma3.key_length)", NULL};
    expect_error(&s, TS_ERR_FORMAT, p2);

    s = ts_tiny_spec_default("phi3");
    s.reshape = "blk.1.ffn_up.weight"; /* fused gate+up [64, 256] */
    const char *p3[] = {"blk.1.ffn_up.weight", "[64, 257", "expected [64, 256]", NULL};
    expect_error(&s, TS_ERR_FORMAT, p3);

    /* OLMo 2's Q/K norms span the projection (4 heads of 16, 2 KV heads); EXAONE 4's one
     * head. */
    s = ts_tiny_spec_default("olmo2");
    s.reshape = "blk.0.attn_k_norm.weight";
    const char *p5[] = {"blk.0.attn_k_norm.weight", "[33, 1", "expected [32, 1]", NULL};
    expect_error(&s, TS_ERR_FORMAT, p5);
    s = ts_tiny_spec_default("exaone4");
    s.reshape = "blk.1.attn_q_norm.weight";
    const char *p6[] = {"blk.1.attn_q_norm.weight", "[17, 1", "expected [16, 1]", NULL};
    expect_error(&s, TS_ERR_FORMAT, p6);

    /* The vocabulary is defined by token_embd; an output matrix must agree with it. */
    s = ts_tiny_spec_default("llama");
    s.reshape = "output.weight";
    const char *p4[] = {"output.weight", "[64, 321", "expected [64, 320]", NULL};
    expect_error(&s, TS_ERR_FORMAT, p4);
}

static void test_unsupported_type(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.retype = "blk.0.attn_norm.weight";
    s.retype_to = TS_TYPE_Q8_0;
    const char *p1[] = {"blk.0.attn_norm.weight", "Q8_0", "vector", NULL};
    expect_error(&s, TS_ERR_UNSUPPORTED, p1);

    s = ts_tiny_spec_default("qwen3");
    s.retype = "blk.1.ffn_gate.weight";
    s.retype_to = TS_TYPE_I32;
    const char *p2[] = {"blk.1.ffn_gate.weight", "I32", "matrix", NULL};
    expect_error(&s, TS_ERR_UNSUPPORTED, p2);
}

/* Mixture-of-experts files: a missing expert tensor, a missing expert count, an expert tensor
 * of the wrong shape, a llama that has neither a dense FFN nor experts. */
static void test_moe_errors(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("qwen3moe");
    s.omit = "blk.1.ffn_up_exps.weight";
    const char *p1[] = {"blk.1.ffn_up_exps.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p1);

    s = ts_tiny_spec_default("mixtral");
    s.omit = "blk.0.ffn_down_exps.weight";
    const char *p2[] = {"layer 0", "mixture of experts", "blk.0.ffn_down_exps.weight", NULL};
    expect_error(&s, TS_ERR_FORMAT, p2);

    s = ts_tiny_spec_default("qwen3moe");
    s.omit_key = "expert_count";
    const char *p3[] = {"holds experts", "qwen3moe.expert_count", NULL};
    expect_error(&s, TS_ERR_FORMAT, p3);

    s = ts_tiny_spec_default("qwen3moe");
    s.omit_key = "expert_used_count";
    const char *p4[] = {"qwen3moe.expert_used_count", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p4);

    s = ts_tiny_spec_default("qwen3moe");
    s.reshape = "blk.0.ffn_gate_exps.weight";
    const char *p5[] = {"blk.0.ffn_gate_exps.weight", "[64, 65, 6, 1]", "[64, 64, 6]",
                        "qwen3moe.expert_feed_forward_length", NULL};
    expect_error(&s, TS_ERR_FORMAT, p5);

    s = ts_tiny_spec_default("qwen2moe");
    s.omit = "blk.1.ffn_up_shexp.weight";
    const char *p6[] = {"blk.1.ffn_up_shexp.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p6);

    s = ts_tiny_spec_default("mixtral");
    s.n_expert_used = 7; /* more than the 6 experts */
    const char *p7[] = {"expert_used_count = 7", "1..6", NULL};
    expect_error(&s, TS_ERR_FORMAT, p7);

    s = ts_tiny_spec_default("mixtral");
    s.moe_gating = 3;
    const char *p10[] = {"llama.expert_gating_func 3", "not supported", NULL};
    expect_error(&s, TS_ERR_UNSUPPORTED, p10);

    /* dots1: the shared expert is expert_shared_count (2) expert widths; sigmoid gating with
     * renormalized, scaled weights; a selection bias in the expert layers only. */
    s = ts_tiny_spec_default("dots1");
    ts_model *m = NULL;
    ts_error err = {0};
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.n_ff_shexp, 64);
    assert_int_equal(m->hp.moe_gating, TS_MOE_SIGMOID);
    assert_true(m->hp.moe_norm_w);
    assert_float_equal(m->hp.moe_w_scale, 2.5, 1e-6);
    assert_null(ts_model_tensor(m, TS_ROLE_FFN_EXP_PROBS_B, 0));
    assert_non_null(ts_model_tensor(m, TS_ROLE_FFN_EXP_PROBS_B, 1));
    assert_non_null(ts_model_tensor(m, TS_ROLE_FFN_DOWN, 0));
    ts_model_close(m);
    s.n_ff_shexp = 65 * s.n_ff_exp;
    const char *p11[] = {"expert_shared_count = 65", "1..64", NULL};
    expect_error(&s, TS_ERR_FORMAT, p11);

    /* glm4moe: a trailing multi-token-prediction block is not a layer; its tensors (and only
     * those) are left unused. All blocks cannot be such blocks. */
    s = ts_tiny_spec_default("glm4moe");
    s.n_nextn = 1;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.n_layer, 3);
    assert_int_equal(m->hp.n_rot, 16);
    assert_true(m->n_unused >= 3);
    for (int64_t i = 0; i < m->n_unused; i++) {
        assert_true(strncmp(m->unused[i]->name, "blk.3.", 6) == 0);
    }
    ts_model_close(m);
    s.n_nextn = 4; /* with 3 layers: block_count 7, 4 of them MTP blocks is still fine */
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.n_layer, 3);
    ts_model_close(m);
    s = ts_tiny_spec_default("glm4moe");
    s.n_layer = 0; /* block_count 1, and that block an MTP one */
    s.n_nextn = 1;
    const char *p12[] = {"glm4moe.nextn_predict_layers = 1", "0..0", NULL};
    expect_error(&s, TS_ERR_FORMAT, p12);

    /* A llama layer with neither: the dense FFN's first missing tensor is named. */
    s = ts_tiny_spec_default("mixtral");
    s.omit = "blk.1.ffn_gate_inp.weight";
    const char *p8[] = {"blk.1.", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p8);
}

static void test_missing_key(void **state) {
    (void)state;
    const char *keys[] = {"block_count", "embedding_length", "feed_forward_length",
                          "attention.head_count", "context_length"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        ts_tiny_spec s = ts_tiny_spec_default("qwen2");
        s.omit_key = keys[i];
        char full[128];
        snprintf(full, sizeof full, "qwen2.%s", keys[i]);
        const char *parts[] = {full, "missing", NULL};
        expect_error(&s, TS_ERR_FORMAT, parts);
    }
    /* Optional keys take their defaults. */
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.omit_key = "attention.head_count_kv";
    ts_model *m = NULL;
    ts_error err = {0};
    assert_int_equal(open_spec(&s, &m, &err), TS_ERR_FORMAT); /* K/V shapes now disagree */
    assert_non_null(strstr(err.msg, "attn_k.weight"));
    s.n_head_kv = s.n_head;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.n_head_kv, m->hp.n_head);
    ts_model_close(m);
}

/* Keys the newer families depend on: Cohere 2's window says which layers go without RoPE;
 * a window pattern under a family without window layers is refused rather than run as full
 * attention; OLMo 3 and EXAONE 4 32B files (written as olmo2 / exaone4) get their window
 * layers, EXAONE 4 with RoPE on those only; a Granite multiplier that is absent is 1; dots1's
 * router is a sigmoid when the file does not say (its converter never does). Cohere 2's
 * default pattern is 4. */
static void test_family_keys(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("cohere2");
    s.omit_key = "attention.sliding_window";
    const char *p1[] = {"cohere2.attention.sliding_window", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p1);

    const char *no_swa[] = {"granite", "smollm3", "llama"};
    for (size_t i = 0; i < sizeof no_swa / sizeof no_swa[0]; i++) {
        s = ts_tiny_spec_default(no_swa[i]);
        s.swa_pattern = 4;
        char key[96];
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", no_swa[i]);
        const char *p2[] = {key, "sliding-window", no_swa[i], NULL};
        expect_error(&s, TS_ERR_UNSUPPORTED, p2);
    }

    ts_model *m = NULL;
    ts_error err = {0};
    const char *post_norm[] = {"olmo2", "exaone4"};
    for (size_t i = 0; i < 2; i++) {
        /* A pattern without a window: no layer slides, every layer rotates. */
        s = ts_tiny_spec_default(post_norm[i]);
        s.swa_pattern = 4;
        s.n_layer = 8;
        assert_int_equal(open_spec(&s, &m, &err), TS_OK);
        for (int64_t il = 0; il < 8; il++) {
            assert_false(ts_hparams_layer_is_swa(&m->hp, il));
            assert_true(ts_hparams_layer_has_rope(&m->hp, il));
        }
        ts_model_close(m);
        /* A window with period 2 (the key) or the default 4 (no key). */
        for (int pattern = 0; pattern <= 2; pattern += 2) {
            s.n_swa = 4;
            s.swa_pattern = pattern;
            int64_t n = pattern > 0 ? pattern : 4;
            if (open_spec(&s, &m, &err) != TS_OK) {
                fail_msg("%s: %s", post_norm[i], err.msg);
            }
            for (int64_t il = 0; il < 8; il++) {
                bool swa = il % n < n - 1;
                assert_int_equal(ts_hparams_layer_is_swa(&m->hp, il), swa);
                assert_int_equal(ts_hparams_layer_has_rope(&m->hp, il), i == 0 || swa);
            }
            ts_model_close(m);
        }
        /* A window but period 1: every layer global. EXAONE 4 then rotates none (transformers
         * rotates a layer only when the config has no window or the layer slides). */
        s.n_swa = 4;
        s.swa_pattern = 1;
        assert_int_equal(open_spec(&s, &m, &err), TS_OK);
        for (int64_t il = 0; il < 8; il++) {
            assert_false(ts_hparams_layer_is_swa(&m->hp, il));
            assert_int_equal(ts_hparams_layer_has_rope(&m->hp, il), i == 0);
        }
        ts_model_close(m);
    }

    /* Phi-4-mini (phi3) ties its output to the embedding: no output.weight. */
    s = ts_tiny_spec_default("phi3");
    s.omit = "output.weight";
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_true(m->tied_output);
    ts_model_close(m);

    /* Heads that do not divide the width, without a head size: an error naming both. */
    s = ts_tiny_spec_default("llama");
    s.n_head = 3;
    s.n_head_kv = 3;
    const char *p3[] = {"llama.embedding_length 64", "head_count 3", "key_length", NULL};
    expect_error(&s, TS_ERR_FORMAT, p3);

    s = ts_tiny_spec_default("dots1");
    s.moe_gating = 0;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.moe_gating, TS_MOE_SIGMOID);
    ts_model_close(m);
    s = ts_tiny_spec_default("qwen3moe");
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->hp.moe_gating, TS_MOE_SOFTMAX);
    ts_model_close(m);

    /* Without the key, Cohere 2's pattern is 4: three window layers with RoPE, then one
     * global layer without. */
    s = ts_tiny_spec_default("cohere2");
    s.swa_pattern = 0;
    s.n_layer = 8;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    for (int64_t il = 0; il < 8; il++) {
        assert_int_equal(ts_hparams_layer_is_swa(&m->hp, il), il % 4 != 3);
        assert_int_equal(ts_hparams_layer_has_rope(&m->hp, il), il % 4 != 3);
    }
    ts_model_close(m);

    /* Absent multipliers are 1 (the attention scale 1/sqrt(head_dim)). */
    s = ts_tiny_spec_default("granite");
    s.omit_key = "residual_scale";
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_float_equal(m->hp.residual_scale, 1.0, 0.0);
    assert_float_equal(m->hp.embd_scale, 1.5, 1e-6);
    ts_model_close(m);
    s.omit_key = "logit_scale";
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_float_equal(m->hp.logit_mul, 1.0, 0.0);
    ts_model_close(m);
}

/* RoPE factor tensors resolve to their roles (llama's rope_freqs, Phi-3's long and short
 * factors); bad ones are errors naming them; a tensor no pattern names is listed as unused. */
static void test_rope_factors_and_unused(void **state) {
    (void)state;
    ts_tiny_spec s = ts_tiny_spec_default("llama");
    s.extra[0] = "rope_freqs.weight";
    s.extra_ne0 = 8; /* n_rot 16 */
    ts_model *m = NULL;
    ts_error err = {0};
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    const ts_gguf_tensor *t = ts_model_tensor(m, TS_ROLE_ROPE_FREQS, 0);
    assert_non_null(t);
    assert_string_equal(t->name, "rope_freqs.weight");
    assert_int_equal(m->n_unused, 0);
    ts_model_close(m);

    /* The same tensor in an architecture that has no use for it, plus a stray one. */
    s = ts_tiny_spec_default("gemma2");
    s.extra[0] = "rope_freqs.weight";
    s.extra[1] = "blk.0.mystery.weight";
    s.extra_ne0 = 8;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_int_equal(m->n_unused, 2);
    assert_string_equal(m->unused[0]->name, "rope_freqs.weight");
    assert_string_equal(m->unused[1]->name, "blk.0.mystery.weight");
    ts_model_close(m);

    s = ts_tiny_spec_default("phi3");
    s.extra[0] = "rope_factors_long.weight";
    s.extra[1] = "rope_factors_short.weight";
    s.extra_ne0 = 8;
    assert_int_equal(open_spec(&s, &m, &err), TS_OK);
    assert_non_null(ts_model_tensor(m, TS_ROLE_ROPE_FACTORS_LONG, 0));
    assert_non_null(ts_model_tensor(m, TS_ROLE_ROPE_FACTORS_SHORT, 0));
    assert_int_equal(m->n_unused, 0);
    ts_model_close(m);

    s.extra[1] = NULL;
    const char *p1[] = {"rope_factors_long.weight", "rope_factors_short.weight", "missing", NULL};
    expect_error(&s, TS_ERR_FORMAT, p1);

    s = ts_tiny_spec_default("llama");
    s.extra[0] = "rope_freqs.weight";
    s.extra_ne0 = 7;
    const char *p2[] = {"rope_freqs.weight", "[7, 1", "expected [8, 1]", NULL};
    expect_error(&s, TS_ERR_FORMAT, p2);
    s.extra_ne0 = 8;
    s.extra_first = -1.0f;
    const char *p3[] = {"rope_freqs.weight", "entry 0", "positive", NULL};
    expect_error(&s, TS_ERR_FORMAT, p3);
    s.extra_first = 0.0f;
    s.retype = "rope_freqs.weight";
    s.retype_to = TS_TYPE_F16;
    const char *p4[] = {"rope_freqs.weight", "F16", "F32", NULL};
    expect_error(&s, TS_ERR_UNSUPPORTED, p4);
}

static void test_no_file(void **state) {
    (void)state;
    ts_model *m = NULL;
    ts_error err = {0};
    const char *path = "/nonexistent/dir/model.gguf";
    assert_int_equal(ts_model_open(path, &m, &err), TS_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(err.msg, path));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_arch_and_type),
        cmocka_unit_test(test_optional_tensors),
        cmocka_unit_test(test_unknown_arch),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_unsupported_type),
        cmocka_unit_test(test_missing_key),
        cmocka_unit_test(test_family_keys),
        cmocka_unit_test(test_no_file),
        cmocka_unit_test(test_rope_factors_and_unused),
        cmocka_unit_test(test_moe_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
