/*
 * test_util.c — the shared helpers of src/util: the growable buffer (also with its storage
 * from a grow function, as the template engine's arena gives it), UTF-8 coding and the JSON
 * string escaper, each against hand-written expectations (the escaper's ASCII form is what
 * Python's json.dumps writes by default).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/json_str.h"
#include "util/utf8.h"

static void test_buf(void **state) {
    (void)state;
    ts_buf b = {0};
    ts_buf_puts(&b, "ab");
    ts_buf_putc(&b, 'c');
    ts_buf_printf(&b, "-%d-", 42);
    assert_string_equal(b.p, "abc-42-");
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ts_buf_printf(&b, "%s", big); /* longer than the small stack buffer */
    assert_int_equal(b.n, 7 + 999);
    char *p = ts_buf_take(&b);
    assert_non_null(p);
    assert_null(b.p);
    assert_int_equal(strlen(p), 1006);
    free(p);
    ts_buf_free(&b);
}

/* A grow function: storage from a fixed pool, refusing past its size (as an arena with a
 * limit would). */
typedef struct pool {
    char mem[4096];
    size_t used;
    int calls;
} pool;

static void *pool_grow(void *ctx, void *old, size_t n, size_t need, size_t *cap) {
    pool *pl = ctx;
    pl->calls++;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) {
        c *= 2;
    }
    if (pl->used + c > sizeof pl->mem) {
        return NULL;
    }
    char *p = pl->mem + pl->used;
    pl->used += c;
    if (n) {
        memcpy(p, old, n);
    }
    *cap = c;
    return p;
}

static void test_buf_grow(void **state) {
    (void)state;
    pool pl = {.used = 0};
    ts_buf b = {.grow = pool_grow, .grow_ctx = &pl};
    ts_buf_puts(&b, "hello");
    ts_buf_printf(&b, " %d", 7);
    assert_string_equal(b.p, "hello 7");
    assert_true(b.p >= pl.mem && b.p < pl.mem + sizeof pl.mem);
    char big[600];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ts_buf_printf(&b, "%s", big); /* formatted in place, in the pool */
    assert_int_equal(b.n, 7 + 599);
    assert_false(b.oom);
    /* Past the pool the buffer reports oom and keeps what it had. */
    char huge[3000];
    memset(huge, 'z', sizeof huge);
    ts_buf_put(&b, huge, sizeof huge);
    assert_true(b.oom);
    /* free forgets the pool's storage without freeing it and keeps the grow function. */
    ts_buf_free(&b);
    assert_null(b.p);
    assert_ptr_equal(b.grow, pool_grow);
    assert_true(pl.calls >= 2);
}

static void test_utf8(void **state) {
    (void)state;
    uint32_t cp = 0;
    assert_int_equal(ts_utf8_decode("\xC3\xA9", 2, &cp), 2);
    assert_int_equal(cp, 0xE9);
    assert_int_equal(ts_utf8_decode("\xF0\x9F\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1F600);
    assert_int_equal(ts_utf8_decode("\xC0\x80", 2, &cp), 0);         /* overlong */
    assert_int_equal(ts_utf8_decode("\xED\xA0\x80", 3, &cp), 0);     /* surrogate */
    assert_int_equal(ts_utf8_decode("\xF4\x90\x80\x80", 4, &cp), 0); /* past U+10FFFF */
    assert_int_equal(ts_utf8_decode("\xE2\x82", 2, &cp), 0);         /* cut short */
    char out[4];
    assert_int_equal(ts_utf8_encode(0x20AC, out), 3);
    assert_memory_equal(out, "\xE2\x82\xAC", 3);
    assert_int_equal(ts_utf8_count("a\xC3\xA9\xFF", 4), 3);
    assert_true(ts_utf8_valid("a\xC3\xA9", 3));
    assert_false(ts_utf8_valid("a\xFF", 2));
}

static void check_json(const char *in, size_t n, unsigned flags, const char *want) {
    ts_buf b = {0};
    ts_json_put_str(&b, in, n, flags);
    assert_false(b.oom);
    assert_string_equal(b.p, want);
    ts_buf_free(&b);
}

static void test_json_str(void **state) {
    (void)state;
    check_json("", 0, 0, "\"\"");
    check_json("a\"b\\c\n\t\x01", 8, 0, "\"a\\\"b\\\\c\\n\\t\\u0001\"");
    check_json("caf\xC3\xA9", 5, 0, "\"caf\xC3\xA9\"");
    check_json("caf\xC3\xA9", 5, TS_JSON_ASCII, "\"caf\\u00e9\"");
    check_json("\xF0\x9F\x98\x80", 4, TS_JSON_ASCII, "\"\\ud83d\\ude00\"");
    check_json("\x7F", 1, TS_JSON_ASCII, "\"\\u007f\"");
    check_json("a\xFF", 2, TS_JSON_ASCII, "\"a\\ufffd\"");
    check_json("a\0b", 3, 0, "\"a\\u0000b\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_buf_grow),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_json_str),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
