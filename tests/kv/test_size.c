/* test_size.c — KV cache sizing: bytes per token, blocks from memory, context or window, dtype
 * names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"
#include "kv/kv.h"

/* The dtype values are GGUF type ids so the model layer can pass them through. */
_Static_assert((int)TS_KV_F32 == (int)TS_TYPE_F32, "f32 id");
_Static_assert((int)TS_KV_F16 == (int)TS_TYPE_F16, "f16 id");
_Static_assert((int)TS_KV_Q8_0 == (int)TS_TYPE_Q8_0, "q8_0 id");
_Static_assert((int)TS_KV_Q5_0 == (int)TS_TYPE_Q5_0, "q5_0 id");
_Static_assert((int)TS_KV_Q4_0 == (int)TS_TYPE_Q4_0, "q4_0 id");
_Static_assert((int)TS_KV_BF16 == (int)TS_TYPE_BF16, "bf16 id");

static void test_bytes_per_token(void **state) {
    (void)state;
    uint64_t b = 0;
    ts_error err = {0};
    /* SmolLM2-135M: 30 layers, 3 KV heads of 64: 30 * 2 * 3 * 64 = 11520 elements. */
    ts_kv_shape smol = {
        .n_layer = 30, .n_kv_head = 3, .head_dim = 64, .dtype_k = TS_KV_F16, .dtype_v = TS_KV_F16};
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u * 2);
    smol.dtype_k = smol.dtype_v = TS_KV_F32;
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u * 4);
    smol.dtype_k = smol.dtype_v = TS_KV_Q8_0;
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u / 32 * 34);
    smol.dtype_k = smol.dtype_v = TS_KV_BF16;
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u * 2);
    /* K and V apart: half the elements each. q8_0 K with q4_0 V: (34 + 18) per 2 x 32. */
    smol.dtype_k = TS_KV_Q8_0;
    smol.dtype_v = TS_KV_Q4_0;
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u / 2 / 32 * (34 + 18));
    smol.dtype_k = TS_KV_F16;
    smol.dtype_v = TS_KV_Q5_0;
    assert_int_equal(ts_kv_bytes_per_token(&smol, &b, &err), TS_OK);
    assert_int_equal(b, 11520u / 2 * 2 + 11520u / 2 / 32 * 22);

    /* Gemma 3 270M: 18 layers, 1 KV head of 256. */
    ts_kv_shape gemma = {
        .n_layer = 18, .n_kv_head = 1, .head_dim = 256, .dtype_k = TS_KV_F16, .dtype_v = TS_KV_F16};
    assert_int_equal(ts_kv_bytes_per_token(&gemma, &b, &err), TS_OK);
    assert_int_equal(b, 18u * 2 * 256 * 2);
}

static void test_bytes_per_token_errors(void **state) {
    (void)state;
    uint64_t b = 7;
    ts_error err = {0};
    ts_kv_shape s = {
        .n_layer = 2, .n_kv_head = 2, .head_dim = 48, .dtype_k = TS_KV_Q8_0, .dtype_v = TS_KV_F16};
    assert_int_equal(ts_kv_bytes_per_token(&s, &b, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "head_dim"));
    assert_non_null(strstr(err.msg, "K cache type q8_0"));
    assert_int_equal(b, 7);
    /* Only V quantized: still head_dim 48 is refused, naming V. */
    s.dtype_k = TS_KV_F16;
    s.dtype_v = TS_KV_Q4_0;
    assert_int_equal(ts_kv_bytes_per_token(&s, &b, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "V cache type q4_0"));
    s.dtype_v = (ts_kv_dtype)5;
    assert_int_equal(ts_kv_bytes_per_token(&s, &b, &err), TS_ERR_UNSUPPORTED);
    s = (ts_kv_shape){
        .n_layer = 0, .n_kv_head = 2, .head_dim = 64, .dtype_k = TS_KV_F16, .dtype_v = TS_KV_F16};
    assert_int_equal(ts_kv_bytes_per_token(&s, &b, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_bytes_per_token(NULL, &b, &err), TS_ERR_INVALID_ARG);
    s = (ts_kv_shape){.n_layer = UINT32_MAX,
                      .n_kv_head = UINT32_MAX,
                      .head_dim = UINT32_MAX,
                      .dtype_k = TS_KV_F32,
                      .dtype_v = TS_KV_F32};
    assert_int_equal(ts_kv_bytes_per_token(&s, &b, &err), TS_ERR_OVERFLOW);
}

static void test_blocks_for_memory(void **state) {
    (void)state;
    uint32_t n = 0;
    ts_error err = {0};
    /* 1000 bytes per token, 16 tokens per block = 16000 bytes per block. */
    assert_int_equal(ts_kv_blocks_for_memory(16000 * 10, 1000, 16, &n, &err), TS_OK);
    assert_int_equal(n, 10);
    assert_int_equal(ts_kv_blocks_for_memory(16000 * 10 + 15999, 1000, 16, &n, &err), TS_OK);
    assert_int_equal(n, 10);
    assert_int_equal(ts_kv_blocks_for_memory(15999, 1000, 16, &n, &err), TS_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "15999"));
    assert_int_equal(ts_kv_blocks_for_memory(1000, 0, 16, &n, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_blocks_for_memory(1000, 1, 0, &n, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_blocks_for_memory(UINT64_MAX, 1, 16, &n, &err), TS_ERR_RANGE);
    assert_int_equal(ts_kv_blocks_for_memory(1, UINT64_MAX, 16, &n, &err), TS_ERR_OVERFLOW);
    /* 512 MiB of SmolLM2 f16 cache: 23040 bytes/token -> 1456 blocks of 16. */
    assert_int_equal(ts_kv_blocks_for_memory(512ull << 20, 23040, 16, &n, &err), TS_OK);
    assert_int_equal(n, (512ull << 20) / (23040 * 16));
}

static void test_blocks_for_context(void **state) {
    (void)state;
    uint32_t n = 0;
    ts_error err = {0};
    assert_int_equal(ts_kv_blocks_for_context(2048, 16, &n, &err), TS_OK);
    assert_int_equal(n, 128);
    assert_int_equal(ts_kv_blocks_for_context(2049, 16, &n, &err), TS_OK);
    assert_int_equal(n, 129);
    assert_int_equal(ts_kv_blocks_for_context(1, 16, &n, &err), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ts_kv_blocks_for_context(0, 16, &n, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_blocks_for_context(UINT64_MAX, 16, &n, &err), TS_ERR_RANGE);
}

static void test_blocks_for_window(void **state) {
    (void)state;
    uint32_t n = 0;
    ts_error err = {0};
    /* Gemma 3 (window 512) in blocks of 16, 16 sequences, steps of 512 tokens:
     * 16 * (32 + 2) + 32 = 576 blocks, under the 2048 of a 32k context. */
    assert_int_equal(ts_kv_blocks_for_window(512, 16, 16, 512, 2048, &n, &err), TS_OK);
    assert_int_equal(n, 576);
    /* One sequence, window 4 in blocks of 3, steps of 7: (2 + 2) + 3. */
    assert_int_equal(ts_kv_blocks_for_window(4, 3, 1, 7, 100, &n, &err), TS_OK);
    assert_int_equal(n, 7);
    /* Never more than the full pool: a 4k context holds every window. */
    assert_int_equal(ts_kv_blocks_for_window(4096, 16, 16, 512, 256, &n, &err), TS_OK);
    assert_int_equal(n, 256);
    assert_int_equal(ts_kv_blocks_for_window(UINT64_MAX, 1, UINT32_MAX, UINT32_MAX, 9, &n, &err),
                     TS_OK);
    assert_int_equal(n, 9);
    assert_int_equal(ts_kv_blocks_for_window(0, 16, 1, 1, 9, &n, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_kv_blocks_for_window(8, 16, 1, 1, 0, &n, &err), TS_ERR_INVALID_ARG);
}

static void test_dtype_names(void **state) {
    (void)state;
    ts_kv_dtype d = TS_KV_F32;
    ts_error err = {0};
    assert_int_equal(ts_kv_dtype_from_name("Q8_0", &d, &err), TS_OK);
    assert_int_equal(d, TS_KV_Q8_0);
    assert_int_equal(ts_kv_dtype_from_name("f16", &d, &err), TS_OK);
    assert_int_equal(d, TS_KV_F16);
    assert_int_equal(ts_kv_dtype_from_name("q4_0", &d, &err), TS_OK);
    assert_int_equal(d, TS_KV_Q4_0);
    assert_int_equal(ts_kv_dtype_from_name("BF16", &d, &err), TS_OK);
    assert_int_equal(d, TS_KV_BF16);
    assert_int_equal(ts_kv_dtype_from_name("q4_1", &d, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "q4_1"));
    assert_string_equal(ts_kv_dtype_name(TS_KV_F32), "f32");
    assert_string_equal(ts_kv_dtype_name(TS_KV_Q5_0), "q5_0");
    assert_null(ts_kv_dtype_name((ts_kv_dtype)3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_per_token),   cmocka_unit_test(test_bytes_per_token_errors),
        cmocka_unit_test(test_blocks_for_memory), cmocka_unit_test(test_blocks_for_context),
        cmocka_unit_test(test_dtype_names),       cmocka_unit_test(test_blocks_for_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
