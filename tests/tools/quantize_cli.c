/*
 * quantize_cli.c — `tessera quantize` as a user runs it, on tiny F32 models written by the
 * test model writer: --pure Q8_0 gives every matrix our reference Q8_0 bytes (the quantizer
 * itself is checked against llama.cpp's in tests/quant), 1-D tensors stay F32, the Q4_K_M mix
 * produces K-quant matrices in a file the model loader accepts, MXFP4 (with and without --pure)
 * writes our reference MXFP4 bytes in a file the loader accepts, IQ4_XS follows llama-quantize's
 * IQ4_XS rules with our reference bytes and generates, and bad inputs (rows that do
 * not fit the block size with --pure, an already quantized input, a missing file) fail with
 * a message. Skips when TS_BIN is unset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tiny_model.h"
#include "tools/cli_util.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

/* Runs a command, captures stderr+stdout into out; returns the exit status. */
static int run(const char *cmd, char *out, size_t size) {
    char full[2100];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_model(char *path, size_t size, int64_t n_embd, int64_t n_ff, ts_type wtype) {
    assert_non_null(ts_tiny_temp_path(path, size, "quant"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.n_embd = n_embd;
    spec.n_ff = n_ff;
    spec.wtype = wtype;
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, path, &err), TS_OK);
}

static void test_pure_q8_0(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    write_model(in, sizeof in, 64, 128, TS_TYPE_F32);
    snprintf(out, sizeof out, "%s.q8.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q8_0 --pure", cli_bin(), in, out);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    /* stderr is a pipe here: the summary, no progress-bar redraws. */
    assert_non_null(strstr(log, "quantize: wrote"));
    assert_null(strchr(log, '\r'));

    ts_gguf *a = NULL, *b = NULL;
    ts_error err = {0};
    assert_int_equal(ts_gguf_open(in, &a, &err), TS_OK);
    assert_int_equal(ts_gguf_open(out, &b, &err), TS_OK);
    assert_int_equal(ts_gguf_tensor_count(a), ts_gguf_tensor_count(b));
    const ts_quant_ops *q8 = ts_quant_ops_get(TS_TYPE_Q8_0, TS_ISA_SCALAR);
    for (uint64_t i = 0; i < ts_gguf_tensor_count(a); i++) {
        const ts_gguf_tensor *src = ts_gguf_tensor_at(a, i);
        const ts_gguf_tensor *dst = NULL;
        assert_int_equal(ts_gguf_find_tensor(b, src->name, &dst), TS_OK);
        if (src->n_dims == 1) {
            assert_int_equal(dst->type, TS_TYPE_F32);
            assert_memory_equal(src->data, dst->data, src->nbytes);
            continue;
        }
        assert_int_equal(dst->type, TS_TYPE_Q8_0);
        size_t row = 0;
        assert_true(ts_type_row_bytes(TS_TYPE_Q8_0, (uint64_t)src->ne[0], &row));
        char *want = malloc(row);
        for (int64_t r = 0; r < src->ne[1]; r++) {
            q8->from_float((const float *)src->data + r * src->ne[0], want, src->ne[0]);
            assert_memory_equal(want, (const char *)dst->data + r * row, row);
        }
        free(want);
    }
    /* Metadata is carried over. */
    ts_gguf_str arch;
    assert_int_equal(ts_gguf_get_str(b, "general.architecture", &arch, &err), TS_OK);
    assert_int_equal(arch.len, 5);
    ts_gguf_close(a);
    ts_gguf_close(b);
    unlink(in);
    unlink(out);
}

static void test_q4_k_m_mix(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    write_model(in, sizeof in, 256, 512, TS_TYPE_F16);
    snprintf(out, sizeof out, "%s.q4km.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K_M", cli_bin(), in, out);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    ts_model *m = NULL;
    ts_error err = {0};
    if (ts_model_open(out, &m, &err) != TS_OK) {
        fail_msg("quantized model does not load: %s", err.msg);
    }
    int k_quants = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(m->gguf); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(m->gguf, i);
        if (t->n_dims == 1) {
            assert_int_equal(t->type, TS_TYPE_F32);
        } else {
            bool k = t->type == TS_TYPE_Q4_K || t->type == TS_TYPE_Q5_K || t->type == TS_TYPE_Q6_K;
            assert_true(k || t->type == TS_TYPE_Q8_0);
            k_quants += k;
        }
    }
    assert_true(k_quants > 0);
    ts_model_close(m);
    unlink(in);
    unlink(out);
}

/* The rows of a tensor are converted by several threads: the file is the same byte for byte
 * whatever their number (the tensors here are large enough to be split). */
static void test_threads(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out1[512], out3[512], cmd[1800], log[8192];
    write_model(in, sizeof in, 256, 512, TS_TYPE_F16);
    snprintf(out1, sizeof out1, "%s.t1.gguf", in);
    snprintf(out3, sizeof out3, "%s.t3.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K_M -t 1", cli_bin(), in, out1);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K_M --threads 3", cli_bin(), in, out3);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", out1, out3);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K_M -t 0", cli_bin(), in, out3);
    assert_int_equal(run(cmd, log, sizeof log), 2);
    assert_non_null(strstr(log, "-t needs a thread count from 1 to 256"));
    unlink(in);
    unlink(out1);
    unlink(out3);
}

/* MXFP4: every matrix the rules do not single out is MXFP4 with our reference bytes (checked
 * against ggml's quantizer in tests/quant), the output matrix follows the 4-bit rule (Q8_0 here:
 * 256 does not divide its rows), and with --pure it is MXFP4 too; both files load. */
static void test_mxfp4(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    write_model(in, sizeof in, 64, 128, TS_TYPE_F16);
    snprintf(out, sizeof out, "%s.mxfp4.gguf", in);
    const ts_quant_ops *mx = ts_quant_ops_get(TS_TYPE_MXFP4, TS_ISA_SCALAR);
    const ts_quant_ops *f16 = ts_quant_ops_get(TS_TYPE_F16, TS_ISA_SCALAR);
    for (int pure = 0; pure <= 1; pure++) {
        snprintf(cmd, sizeof cmd, "%s quantize %s %s mxfp4%s", cli_bin(), in, out,
                 pure ? " --pure" : "");
        assert_int_equal(run(cmd, log, sizeof log), 0);
        ts_gguf *a = NULL;
        ts_model *m = NULL;
        ts_error err = {0};
        assert_int_equal(ts_gguf_open(in, &a, &err), TS_OK);
        if (ts_model_open(out, &m, &err) != TS_OK) {
            fail_msg("MXFP4 model does not load: %s", err.msg);
        }
        uint32_t ft = 0;
        assert_int_equal(ts_gguf_get_u32(m->gguf, "general.file_type", &ft, &err), TS_OK);
        assert_int_equal(ft, 38);
        int mxfp4 = 0;
        for (uint64_t i = 0; i < ts_gguf_tensor_count(a); i++) {
            const ts_gguf_tensor *src = ts_gguf_tensor_at(a, i);
            const ts_gguf_tensor *dst = NULL;
            assert_int_equal(ts_gguf_find_tensor(m->gguf, src->name, &dst), TS_OK);
            if (src->n_dims == 1) {
                assert_int_equal(dst->type, TS_TYPE_F32);
                continue;
            }
            const bool output = strcmp(src->name, "output.weight") == 0;
            if (output && !pure) {
                assert_int_equal(dst->type, TS_TYPE_Q8_0);
                continue;
            }
            assert_int_equal(dst->type, TS_TYPE_MXFP4);
            size_t row = 0;
            assert_true(ts_type_row_bytes(TS_TYPE_MXFP4, (uint64_t)src->ne[0], &row));
            float *x = malloc(sizeof(float) * (size_t)src->ne[0]);
            char *want = malloc(row);
            assert_non_null(x);
            assert_non_null(want);
            for (int64_t r = 0; r < src->ne[1]; r++) {
                f16->to_float((const uint16_t *)src->data + r * src->ne[0], x, src->ne[0]);
                mx->from_float(x, want, src->ne[0]);
                assert_memory_equal(want, (const char *)dst->data + (size_t)r * row, row);
            }
            free(x);
            free(want);
            mxfp4++;
        }
        assert_true(mxfp4 > 0);
        ts_model_close(m);
        ts_gguf_close(a);
        unlink(out);
    }
    unlink(in);
}

/* A mixture of experts: each expert's rows of the 3-D expert tensors are quantized like any
 * matrix rows (checked byte for byte with --pure Q8_0), the router stays F32 (as llama.cpp
 * leaves it), a Q4_K_M mix loads, and `tessera run` generates with it. */
static void test_moe(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    assert_non_null(ts_tiny_temp_path(in, sizeof in, "quantmoe"));
    ts_tiny_spec spec = ts_tiny_spec_default("qwen3moe");
    spec.n_embd = 256;
    spec.n_ff_exp = 256;
    spec.head_dim = 64;
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, in, &err), TS_OK);
    snprintf(out, sizeof out, "%s.q8.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q8_0 --pure", cli_bin(), in, out);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    ts_gguf *a = NULL, *b = NULL;
    assert_int_equal(ts_gguf_open(in, &a, &err), TS_OK);
    assert_int_equal(ts_gguf_open(out, &b, &err), TS_OK);
    const ts_quant_ops *q8 = ts_quant_ops_get(TS_TYPE_Q8_0, TS_ISA_SCALAR);
    int n3 = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(a); i++) {
        const ts_gguf_tensor *src = ts_gguf_tensor_at(a, i), *dst = NULL;
        assert_int_equal(ts_gguf_find_tensor(b, src->name, &dst), TS_OK);
        if (strstr(src->name, "ffn_gate_inp") != NULL) {
            assert_int_equal(dst->type, TS_TYPE_F32);
            continue;
        }
        if (src->n_dims != 3) {
            continue;
        }
        n3++;
        assert_int_equal(dst->type, TS_TYPE_Q8_0);
        assert_int_equal(dst->ne[2], spec.n_expert);
        size_t row = 0;
        assert_true(ts_type_row_bytes(TS_TYPE_Q8_0, (uint64_t)src->ne[0], &row));
        char *want = malloc(row);
        for (int64_t r = 0; r < src->ne[1] * src->ne[2]; r++) {
            q8->from_float((const float *)src->data + r * src->ne[0], want, src->ne[0]);
            assert_memory_equal(want, (const char *)dst->data + r * row, row);
        }
        free(want);
    }
    assert_int_equal(n3, 3 * spec.n_layer);
    ts_gguf_close(a);
    ts_gguf_close(b);
    unlink(out);

    snprintf(out, sizeof out, "%s.q4km.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K_M", cli_bin(), in, out);
    assert_int_equal(run(cmd, log, sizeof log), 0);
    ts_model *m = NULL;
    if (ts_model_open(out, &m, &err) != TS_OK) {
        fail_msg("quantized MoE model does not load: %s", err.msg);
    }
    ts_type t = ts_model_tensor(m, TS_ROLE_FFN_GATE_EXPS, 0)->type;
    assert_true(t == TS_TYPE_Q4_K || t == TS_TYPE_Q5_K || t == TS_TYPE_Q6_K);
    ts_model_close(m);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'hello there' -n 8 --temp 0", cli_bin(), out);
    if (run(cmd, log, sizeof log) != 0) {
        fail_msg("tessera run on the quantized MoE model: %s", log);
    }
    unlink(out);
    unlink(in);
}

/* MXFP4_MOE (llama.cpp's, as gpt-oss files are distributed): the experts MXFP4, the other
 * matrices Q8_0, router, biases and sinks F32; the tiny gpt-oss loads and generates. */
static void test_mxfp4_moe(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    assert_non_null(ts_tiny_temp_path(in, sizeof in, "quantoss"));
    ts_tiny_spec spec = ts_tiny_spec_default("gpt-oss");
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, in, &err), TS_OK);
    snprintf(out, sizeof out, "%s.mxfp4moe.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s MXFP4_MOE", cli_bin(), in, out);
    if (run(cmd, log, sizeof log) != 0) {
        fail_msg("quantize MXFP4_MOE: %s", log);
    }
    ts_gguf *b = NULL;
    assert_int_equal(ts_gguf_open(out, &b, &err), TS_OK);
    int n_exps = 0, n_q8 = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(b); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(b, i);
        if (strstr(t->name, "_exps.weight") != NULL) {
            assert_int_equal(t->type, TS_TYPE_MXFP4);
            n_exps++;
        } else if (t->n_dims >= 2 && strstr(t->name, ".weight") != NULL &&
                   strstr(t->name, "ffn_gate_inp") == NULL) {
            assert_int_equal(t->type, TS_TYPE_Q8_0);
            n_q8++;
        } else {
            assert_int_equal(t->type, TS_TYPE_F32);
        }
    }
    assert_int_equal(n_exps, 3 * spec.n_layer);
    assert_true(n_q8 >= 4 * spec.n_layer + 2);
    ts_gguf_close(b);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'hello there' -n 8 --temp 0", cli_bin(), out);
    if (run(cmd, log, sizeof log) != 0) {
        fail_msg("tessera run on the MXFP4_MOE gpt-oss: %s", log);
    }
    unlink(out);
    unlink(in);
}

/* IQ4_XS, by llama-quantize's IQ4_XS rules (no importance matrix), on a tiny llama of 8 layers:
 * output Q6_K, ffn_down of the first layer (8 / 8) Q5_K, attn_v Q5_K when 4 heads share a K/V
 * head and IQ4_XS when 2 do, everything else IQ4_XS with our reference bytes (checked against
 * llama-quantize's in tests/quant); with --pure every matrix is IQ4_XS. The file loads and
 * generates. */
static void iq4_xs_case(int64_t n_head_kv, int pure) {
    char in[400], out[512], cmd[1800], log[8192];
    assert_non_null(ts_tiny_temp_path(in, sizeof in, "quant"));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.n_embd = 256;
    spec.n_ff = 512;
    spec.n_layer = 8;
    spec.n_head = 8;
    spec.n_head_kv = n_head_kv;
    spec.wtype = TS_TYPE_F16;
    ts_error err = {0};
    assert_int_equal(ts_tiny_write(&spec, in, &err), TS_OK);
    snprintf(out, sizeof out, "%s.iq4xs.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s IQ4_XS%s", cli_bin(), in, out,
             pure ? " --pure" : "");
    if (run(cmd, log, sizeof log) != 0) {
        fail_msg("tessera quantize IQ4_XS: %s", log);
    }
    ts_gguf *a = NULL, *b = NULL;
    assert_int_equal(ts_gguf_open(in, &a, &err), TS_OK);
    assert_int_equal(ts_gguf_open(out, &b, &err), TS_OK);
    uint32_t ftype = 0;
    assert_int_equal(ts_gguf_get_u32(b, "general.file_type", &ftype, &err), TS_OK);
    assert_int_equal(ftype, 30);
    const ts_quant_ops *iq = ts_quant_ops_get(TS_TYPE_IQ4_XS, TS_ISA_SCALAR);
    const ts_quant_ops *f16 = ts_quant_ops_get(TS_TYPE_F16, TS_ISA_SCALAR);
    int n_iq4 = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(a); i++) {
        const ts_gguf_tensor *src = ts_gguf_tensor_at(a, i);
        const ts_gguf_tensor *dst = NULL;
        assert_int_equal(ts_gguf_find_tensor(b, src->name, &dst), TS_OK);
        if (src->n_dims == 1) {
            assert_int_equal(dst->type, TS_TYPE_F32);
            continue;
        }
        ts_type want = TS_TYPE_IQ4_XS;
        if (!pure && strcmp(src->name, "output.weight") == 0) {
            want = TS_TYPE_Q6_K;
        } else if (!pure && strcmp(src->name, "blk.0.ffn_down.weight") == 0) {
            want = TS_TYPE_Q5_K;
        } else if (!pure && strstr(src->name, "attn_v.weight") != NULL && n_head_kv == 2) {
            want = TS_TYPE_Q5_K;
        }
        if (dst->type != want) {
            fail_msg("%s: %s, want %s", src->name, ts_type_name(dst->type), ts_type_name(want));
        }
        if (want != TS_TYPE_IQ4_XS) {
            continue;
        }
        n_iq4++;
        size_t row = 0;
        assert_true(ts_type_row_bytes(TS_TYPE_IQ4_XS, (uint64_t)src->ne[0], &row));
        float *x = malloc(sizeof(float) * (size_t)src->ne[0]);
        char *q = malloc(row);
        assert_non_null(x);
        assert_non_null(q);
        for (int64_t r = 0; r < src->ne[1]; r++) {
            f16->to_float((const char *)src->data + r * src->ne[0] * 2, x, src->ne[0]);
            iq->from_float(x, q, src->ne[0]);
            assert_memory_equal(q, (const char *)dst->data + r * row, row);
        }
        free(x);
        free(q);
    }
    assert_true(n_iq4 > 0);
    ts_gguf_close(a);
    ts_gguf_close(b);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'hello there' -n 8 --temp 0", cli_bin(), out);
    if (run(cmd, log, sizeof log) != 0) {
        fail_msg("tessera run on the IQ4_XS model: %s", log);
    }
    unlink(in);
    unlink(out);
}

static void test_iq4_xs(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    iq4_xs_case(2, 0); /* 4 heads per K/V head */
    iq4_xs_case(4, 0); /* 2 */
    iq4_xs_case(2, 1);
}

static void test_errors(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    char in[400], out[512], cmd[1800], log[8192];
    /* Rows of 64 elements cannot hold Q4_K's 256-element blocks. */
    write_model(in, sizeof in, 64, 128, TS_TYPE_F32);
    snprintf(out, sizeof out, "%s.bad.gguf", in);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_K --pure", cli_bin(), in, out);
    assert_int_not_equal(run(cmd, log, sizeof log), 0);
    assert_non_null(strstr(log, "256"));
    assert_true(access(out, F_OK) != 0);
    unlink(in);
    /* Quantized input. */
    write_model(in, sizeof in, 64, 128, TS_TYPE_Q8_0);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s Q4_0", cli_bin(), in, out);
    assert_int_not_equal(run(cmd, log, sizeof log), 0);
    assert_non_null(strstr(log, "Q8_0"));
    unlink(in);
    snprintf(cmd, sizeof cmd, "%s quantize /nonexistent.gguf %s Q4_0", cli_bin(), out);
    assert_int_not_equal(run(cmd, log, sizeof log), 0);
    assert_non_null(strstr(log, "/nonexistent.gguf"));
    snprintf(cmd, sizeof cmd, "%s quantize %s %s NOT_A_TYPE", cli_bin(), in, out);
    assert_int_not_equal(run(cmd, log, sizeof log), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pure_q8_0), cmocka_unit_test(test_q4_k_m_mix),
        cmocka_unit_test(test_mxfp4),     cmocka_unit_test(test_moe),
        cmocka_unit_test(test_mxfp4_moe), cmocka_unit_test(test_iq4_xs),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
