/*
 * test_vocab.c — real GGUF files parse and their key fields read correctly.
 *
 * Every .gguf file in TS_TESTDATA_DIR/vocab (vocabulary-only files written by llama.cpp's
 * tools) is opened both by mmap and from memory; the tokenizer model, architecture and token
 * arrays are checked for consistency, and every element of every array is read. When the SmolLM2
 * model is in the model cache its tensor table is checked too. Missing data is a printed skip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"

#include "common/skip.h"

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Reads every element of an array (recursively), so every index entry is exercised. */
static void walk_array(const ts_gguf_array *a) {
    ts_error err = {0};
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == TS_GGUF_STRING) {
            ts_gguf_str s;
            assert_int_equal(ts_gguf_array_str(a, i, &s, &err), TS_OK);
            assert_true(s.len < (1u << 20));
        } else if (a->type == TS_GGUF_ARRAY) {
            ts_gguf_array in;
            assert_int_equal(ts_gguf_array_arr(a, i, &in, &err), TS_OK);
            walk_array(&in);
        } else {
            double v;
            assert_int_equal(ts_gguf_array_float(a, i, &v, &err), TS_OK);
        }
    }
}

static uint64_t array_len(const ts_gguf *g, const char *key, ts_gguf_type want, bool *present) {
    ts_gguf_array a;
    ts_error err = {0};
    ts_status st = ts_gguf_get_array(g, key, &a, &err);
    *present = st == TS_OK;
    if (st == TS_ERR_NOT_FOUND) {
        return 0;
    }
    assert_int_equal(st, TS_OK);
    assert_int_equal(a.type, want);
    return a.n;
}

static void check_vocab(const ts_gguf *g, const char *path) {
    ts_error err = {0};
    ts_gguf_str model, arch;
    if (ts_gguf_get_str(g, "tokenizer.ggml.model", &model, &err) != TS_OK) {
        fail_msg("%s: %s", path, err.msg);
    }
    static const char *const known[] = {"llama", "gpt2", "bert", "t5", "rwkv", "ugm"};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        ok |= model.len == strlen(known[i]) && memcmp(model.ptr, known[i], model.len) == 0;
    }
    if (!ok) {
        fail_msg("%s: unexpected tokenizer.ggml.model '%.*s'", path, (int)model.len, model.ptr);
    }
    assert_int_equal(ts_gguf_get_str(g, "general.architecture", &arch, &err), TS_OK);
    assert_true(arch.len > 0);

    bool has_tokens, has_scores, has_types;
    uint64_t n_tokens = array_len(g, "tokenizer.ggml.tokens", TS_GGUF_STRING, &has_tokens);
    uint64_t n_scores = array_len(g, "tokenizer.ggml.scores", TS_GGUF_FLOAT32, &has_scores);
    uint64_t n_types = array_len(g, "tokenizer.ggml.token_type", TS_GGUF_INT32, &has_types);
    assert_true(has_tokens);
    assert_true(n_tokens > 100);
    if (has_scores) {
        assert_int_equal(n_scores, n_tokens);
    }
    if (has_types) {
        assert_int_equal(n_types, n_tokens);
    }
    /* The typed getter refuses the wrong type and the lenient one reads a number. */
    ts_gguf_array tokens;
    assert_int_equal(ts_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens, &err), TS_OK);
    ts_gguf_str s;
    assert_int_equal(ts_gguf_array_str(&tokens, n_tokens - 1, &s, &err), TS_OK);
    assert_int_equal(ts_gguf_get_str(g, "tokenizer.ggml.tokens", &s, &err), TS_ERR_TYPE);
    assert_non_null(strstr(err.msg, "is array, not string"));
    int64_t bos;
    ts_status st = ts_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos, &err);
    if (st == TS_OK) {
        assert_true(bos >= 0 && (uint64_t)bos < n_tokens);
    } else {
        assert_int_equal(st, TS_ERR_NOT_FOUND);
    }

    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        ts_gguf_array a;
        if (ts_gguf_kv_type(g, i) == TS_GGUF_ARRAY) {
            assert_int_equal(ts_gguf_kv_array(g, i, &a, &err), TS_OK);
            walk_array(&a);
        }
    }
}

static void test_vocab_files(void **state) {
    (void)state;
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/vocab/*.gguf", TS_TESTDATA_DIR);
    glob_t gl;
    if (glob(pattern, 0, NULL, &gl) != 0 || gl.gl_pathc == 0) {
        TS_SKIP("no vocabulary files match %s", pattern);
    }
    for (size_t f = 0; f < gl.gl_pathc; f++) {
        const char *path = gl.gl_pathv[f];
        ts_error err = {0};
        ts_gguf *g = NULL;
        if (ts_gguf_open(path, &g, &err) != TS_OK) {
            fail_msg("%s: %s", path, err.msg);
        }
        check_vocab(g, path);
        assert_true(ts_gguf_version(g) == 2 || ts_gguf_version(g) == 3);

        /* The same bytes from memory give the same entries. */
        size_t size;
        char *buf = read_all(path, &size);
        ts_gguf *m = NULL;
        assert_int_equal(ts_gguf_open_memory(buf, size, &m, &err), TS_OK);
        assert_int_equal(ts_gguf_kv_count(m), ts_gguf_kv_count(g));
        assert_int_equal(ts_gguf_tensor_count(m), ts_gguf_tensor_count(g));
        for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
            assert_string_equal(ts_gguf_kv_key(m, i), ts_gguf_kv_key(g, i));
        }
        check_vocab(m, path);
        printf("%s: v%u, %llu kv, %llu tensors\n", path, (unsigned)ts_gguf_version(g),
               (unsigned long long)ts_gguf_kv_count(g),
               (unsigned long long)ts_gguf_tensor_count(g));
        ts_gguf_close(m);
        free(buf);
        ts_gguf_close(g);
    }
    globfree(&gl);
}

static void test_model_if_cached(void **state) {
    (void)state;
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home != NULL ? home : "");
    if (access(path, R_OK) != 0) {
        TS_SKIP_NO_MODEL(path);
    }
    ts_error err = {0};
    ts_gguf *g = NULL;
    if (ts_gguf_open(path, &g, &err) != TS_OK) {
        fail_msg("%s: %s", path, err.msg);
    }
    check_vocab(g, path);
    ts_gguf_str arch;
    assert_int_equal(ts_gguf_get_str(g, "general.architecture", &arch, &err), TS_OK);
    assert_int_equal(arch.len, 5);
    assert_memory_equal(arch.ptr, "llama", 5);
    int64_t n_embd, n_layer;
    assert_int_equal(ts_gguf_get_int(g, "llama.embedding_length", &n_embd, &err), TS_OK);
    assert_int_equal(ts_gguf_get_int(g, "llama.block_count", &n_layer, &err), TS_OK);
    assert_int_equal(n_embd, 576);
    assert_int_equal(n_layer, 30);
    const ts_gguf_tensor *t;
    assert_int_equal(ts_gguf_find_tensor(g, "token_embd.weight", &t), TS_OK);
    assert_int_equal(t->ne[0], n_embd);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(ts_gguf_find_tensor(g, "blk.29.attn_q.weight", &t), TS_OK);
    assert_int_equal(t->ne[0], n_embd);
    /* Tensors tile the data section in order without gaps beyond alignment padding. */
    uint64_t prev_end = 0;
    size_t total = 0;
    for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
        t = ts_gguf_tensor_at(g, i);
        assert_true(t->offset >= prev_end);
        assert_true(t->offset - prev_end < ts_gguf_alignment(g));
        prev_end = t->offset + t->nbytes;
        total += t->nbytes;
    }
    assert_true(ts_gguf_data_offset(g) + prev_end <= ts_gguf_file_size(g));
    assert_true(total > ts_gguf_file_size(g) / 2);
    ts_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_files),
        cmocka_unit_test(test_model_if_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
