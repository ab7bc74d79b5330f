/*
 * test_hostile.c — malformed and hostile GGUF files are rejected with the right message.
 *
 * Each bad variant is assembled byte by byte (raw_builder.h) and handed to
 * ts_gguf_open_memory in a buffer of exactly its size, so AddressSanitizer sees any read past
 * the end. Each case checks the status and a substring of the message that names the problem.
 * Also: every prefix of a valid file is rejected (and every prefix that still holds all tensor
 * data is accepted), every single-byte corruption is survived, and file-level errors.
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

#include "gguf/gguf.h"
#include "gguf/raw_builder.h"

enum { T_U8 = 0, T_U32 = 4, T_BOOL = 7, T_STR = 8, T_ARR = 9, T_U64 = 10 };

static ts_status open_exact(const uint8_t *p, size_t n, ts_gguf **g, ts_error *err) {
    uint8_t *copy = malloc(n != 0 ? n : 1);
    assert_non_null(copy);
    if (n != 0) {
        memcpy(copy, p, n);
    }
    ts_status st = ts_gguf_open_memory(copy, n, g, err);
    if (st == TS_OK) {
        ts_gguf_close(*g);
        *g = NULL;
    }
    free(copy);
    return st;
}

/* Opens b and expects status `want` with `substr` in the message; frees b. */
#define EXPECT(b, want, substr) expect_fail(b, want, substr, __LINE__)
static void expect_fail(rb *b, ts_status want, const char *substr, int line) {
    ts_error err = {0};
    ts_gguf *g = (ts_gguf *)(uintptr_t)1;
    ts_status st = open_exact(b->p, b->n, &g, &err);
    if (st != want || strstr(err.msg, substr) == NULL) {
        fail_msg("line %d: got %s \"%s\", want %s with \"%s\"", line, ts_status_str(st), err.msg,
                 ts_status_str(want), substr);
    }
    assert_null(g);
    rb_free(b);
}

static void expect_ok(rb *b, int line) {
    ts_error err = {0};
    ts_gguf *g;
    ts_status st = open_exact(b->p, b->n, &g, &err);
    if (st != TS_OK) {
        fail_msg("line %d: %s", line, err.msg);
    }
    rb_free(b);
}

static void test_header(void **state) {
    (void)state;
    rb b = {0};
    rb_bytes(&b, "", 0);
    EXPECT(&b, TS_ERR_FORMAT, "too short to hold the 4-byte magic");
    rb_bytes(&b, "GGUX", 4);
    rb_u32(&b, 3);
    EXPECT(&b, TS_ERR_FORMAT, "bad magic 47 47 55 58");
    rb_bytes(&b, "GGUF", 4);
    EXPECT(&b, TS_ERR_FORMAT, "too short to hold the version");
    rb_header(&b, 0, 0, 0);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "version 0 at offset 0x4 is not supported");
    rb_header(&b, 1, 0, 0);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "version 1 at offset 0x4 is not supported");
    rb_header(&b, 4, 0, 0);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "version 4 at offset 0x4 is not supported");
    rb_header(&b, 0x03000000u, 0, 0);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "looks big-endian");
    rb_bytes(&b, "GGUF", 4);
    rb_u32(&b, 3);
    rb_u64(&b, 0);
    EXPECT(&b, TS_ERR_FORMAT, "too short to hold the 24-byte header");
    rb_header(&b, 3, UINT64_C(1) << 60, 0);
    rb_zeros(&b, 100);
    EXPECT(&b, TS_ERR_FORMAT, "claims 1152921504606846976 tensors but only 100 bytes");
    rb_header(&b, 3, 0, UINT64_C(1) << 60);
    rb_zeros(&b, 100);
    EXPECT(&b, TS_ERR_FORMAT, "claims 1152921504606846976 metadata entries but only 100 bytes");
    rb_header(&b, 3, UINT64_MAX, UINT64_MAX);
    EXPECT(&b, TS_ERR_FORMAT, "metadata entries");
    /* Each count alone fits, together they do not. */
    rb_header(&b, 3, 2, 3);
    rb_zeros(&b, 3 * 13 + 32);
    EXPECT(&b, TS_ERR_FORMAT, "claims 2 tensors");
    /* Version 2 and an empty file are fine. */
    rb_header(&b, 2, 0, 0);
    expect_ok(&b, __LINE__);
}

static void test_strings_and_counts(void **state) {
    (void)state;
    rb b = {0};
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, UINT64_C(1) << 62);
    rb_zeros(&b, 16);
    EXPECT(&b, TS_ERR_FORMAT, "kv 0: key at offset 0x18 claims 4611686018427387904 bytes");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 14); /* 13 bytes follow */
    rb_bytes(&b, "general.name1", 13);
    EXPECT(&b, TS_ERR_FORMAT, "claims 14 bytes but only 13 remain");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_STR);
    rb_u64(&b, UINT64_C(1) << 63);
    EXPECT(&b, TS_ERR_FORMAT, "kv 0 'k': string value at offset 0x25 claims");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_U32);
    rb_u64(&b, UINT64_C(1) << 61);
    rb_zeros(&b, 8);
    EXPECT(&b, TS_ERR_FORMAT, "claims 2305843009213693952 elements of uint32");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_STR);
    rb_u64(&b, UINT64_C(1) << 40);
    rb_zeros(&b, 64);
    EXPECT(&b, TS_ERR_FORMAT, "elements of string (at least 8 bytes each)");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_ARR);
    rb_u64(&b, 1000);
    rb_zeros(&b, 64);
    EXPECT(&b, TS_ERR_FORMAT, "elements of array (at least 12 bytes each)");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "tokens");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_STR);
    rb_u64(&b, 2);
    rb_str(&b, "ok");
    rb_u64(&b, UINT64_MAX);
    EXPECT(&b, TS_ERR_FORMAT, "kv 0 'tokens': string element 1 at offset 0x40 claims");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_U32);
    rb_u64(&b, 3);
    rb_u32(&b, 1);
    rb_u32(&b, 2);
    EXPECT(&b, TS_ERR_FORMAT, "elements of uint32 (at least 4 bytes each) but only 8 bytes");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_U32);
    EXPECT(&b, TS_ERR_FORMAT, "array header at offset 0x25 runs past end of file");
}

static void test_types_and_keys(void **state) {
    (void)state;
    rb b = {0};
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, 13);
    rb_zeros(&b, 8);
    EXPECT(&b, TS_ERR_FORMAT, "kv 0 'k': unknown value type 13 at offset 0x21");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, UINT32_MAX);
    rb_zeros(&b, 8);
    EXPECT(&b, TS_ERR_FORMAT, "unknown value type 4294967295");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, 99);
    rb_u64(&b, 0);
    EXPECT(&b, TS_ERR_FORMAT, "unknown element type 99");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_BOOL);
    rb_u8(&b, 2);
    EXPECT(&b, TS_ERR_FORMAT, "bool at offset 0x25 holds 0x02, not 0 or 1");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_ARR);
    rb_u32(&b, T_BOOL);
    rb_u64(&b, 3);
    rb_u8(&b, 1);
    rb_u8(&b, 0);
    rb_u8(&b, 0x80);
    EXPECT(&b, TS_ERR_FORMAT, "holds 0x80, not 0 or 1");
    rb_header(&b, 3, 0, 3);
    rb_kv_u32(&b, "a", 1);
    rb_kv_u32(&b, "b", 1);
    rb_kv_str(&b, "a", "x");
    EXPECT(&b, TS_ERR_FORMAT, "kv 2 'a' at offset 0x3a: duplicate key (first defined by kv 0)");
    rb_header(&b, 3, 0, 1);
    rb_kv_u32(&b, "", 1);
    EXPECT(&b, TS_ERR_FORMAT, "kv 0 at offset 0x18: empty key");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 3);
    rb_bytes(&b, "a\0b", 3);
    rb_u32(&b, T_U8);
    rb_u8(&b, 0);
    EXPECT(&b, TS_ERR_FORMAT, "key 'a\\x00b' contains a NUL byte");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "tokenizer.ggml");
    EXPECT(&b, TS_ERR_FORMAT,
           "kv 0 'tokenizer.ggml': value type at offset 0x2e runs past end of file");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k");
    rb_u32(&b, T_U64);
    rb_u32(&b, 0);
    EXPECT(&b, TS_ERR_FORMAT, "uint64 value at offset 0x25 runs past end of file");
}

/* k levels of arrays, each holding one array, the innermost an empty uint8 array. */
static void nested(rb *b, int k) {
    rb_header(b, 3, 0, 1);
    rb_str(b, "deep");
    rb_u32(b, T_ARR);
    for (int level = 1; level < k; level++) {
        rb_u32(b, T_ARR);
        rb_u64(b, 1);
    }
    rb_u32(b, T_U8);
    rb_u64(b, 0);
}

static void test_nesting(void **state) {
    (void)state;
    rb b = {0};
    nested(&b, 8);
    expect_ok(&b, __LINE__);
    nested(&b, 9);
    EXPECT(&b, TS_ERR_FORMAT, "nests arrays deeper than 8 levels");
    nested(&b, 100000);
    EXPECT(&b, TS_ERR_FORMAT, "nests arrays deeper than 8 levels");
}

static void test_alignment_key(void **state) {
    (void)state;
    rb b = {0};
    rb_header(&b, 3, 0, 1);
    rb_kv_u32(&b, "general.alignment", 0);
    EXPECT(&b, TS_ERR_FORMAT, "'general.alignment' at offset 0x18: alignment is 0");
    rb_header(&b, 3, 0, 1);
    rb_kv_u32(&b, "general.alignment", 48);
    EXPECT(&b, TS_ERR_FORMAT, "alignment 48 is not a power of two");
    rb_header(&b, 3, 0, 1);
    rb_kv_str(&b, "general.alignment", "32");
    EXPECT(&b, TS_ERR_FORMAT, "'general.alignment' at offset 0x18: must be uint32, found string");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "general.alignment");
    rb_u32(&b, T_U64);
    rb_u64(&b, 32);
    EXPECT(&b, TS_ERR_FORMAT, "must be uint32, found uint64");
}

/* A file with one kv (the alignment) and the given tensors, data padded as a writer would,
 * followed by `data` zero bytes. */
static void tensor_file(rb *b, uint32_t align, int n, const char *const *names,
                        const uint32_t *n_dims, const uint64_t (*ne)[5], const uint32_t *types,
                        const uint64_t *offs, size_t data) {
    rb_header(b, 3, (uint64_t)n, 1);
    rb_kv_u32(b, "general.alignment", align);
    for (int i = 0; i < n; i++) {
        rb_tensor(b, names[i], n_dims[i], ne[i], types[i], offs[i]);
    }
    rb_pad(b, align);
    rb_zeros(b, data);
}

/* One tensor of the given shape, type and offset, with `data` bytes of data. */
static void one_tensor(rb *b, uint32_t n_dims, uint64_t d0, uint64_t d1, uint32_t type,
                       uint64_t off, size_t data) {
    const char *names[] = {"blk.0.attn_q.weight"};
    const uint64_t ne[1][5] = {{d0, d1, 1, 1, 1}};
    tensor_file(b, 32, 1, names, &n_dims, ne, &type, &off, data);
}

static void test_tensor_shapes(void **state) {
    (void)state;
    rb b = {0};
    one_tensor(&b, 2, 32, 2, 0, 0, 256);
    expect_ok(&b, __LINE__);
    one_tensor(&b, 5, 32, 2, 0, 0, 256);
    EXPECT(&b, TS_ERR_FORMAT, "tensor 0 'blk.0.attn_q.weight': n_dims 5 at offset");
    one_tensor(&b, 0, 32, 2, 0, 0, 256);
    EXPECT(&b, TS_ERR_FORMAT, "n_dims 0 at offset 0x54 is outside 1..4");
    one_tensor(&b, 2, 32, 0, 0, 0, 256);
    EXPECT(&b, TS_ERR_FORMAT, "dimension 1 is 0");
    one_tensor(&b, 2, UINT64_C(1) << 32, UINT64_C(1) << 32, 0, 0, 256);
    EXPECT(&b, TS_ERR_OVERFLOW, "element count overflows int64 at dimension 1");
    one_tensor(&b, 1, UINT64_C(1) << 63, 1, 0, 0, 256);
    EXPECT(&b, TS_ERR_OVERFLOW, "element count overflows int64 at dimension 0");
    /* 2^62 float64 elements fit int64 but need 2^65 bytes. */
    one_tensor(&b, 2, UINT64_C(1) << 31, UINT64_C(1) << 31, 28, 0, 256);
    EXPECT(&b, TS_ERR_OVERFLOW, "byte size of 4611686018427387904 F64 elements overflows size_t");
    one_tensor(&b, 2, 33, 2, 2, 0, 256);
    EXPECT(&b, TS_ERR_FORMAT, "ne[0] = 33 is not a multiple of the Q4_0 block size 32");
    one_tensor(&b, 1, 128, 1, 12, 0, 256);
    EXPECT(&b, TS_ERR_FORMAT, "ne[0] = 128 is not a multiple of the Q4_K block size 256");
    one_tensor(&b, 1, 32, 1, 4, 0, 256);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "unknown tensor type id 4");
    one_tensor(&b, 1, 32, 1, 1000, 0, 256);
    EXPECT(&b, TS_ERR_UNSUPPORTED, "unknown tensor type id 1000");
}

static void test_tensor_placement(void **state) {
    (void)state;
    rb b = {0};
    /* 64 floats = 256 bytes, only 128 present. */
    one_tensor(&b, 1, 64, 1, 0, 0, 128);
    EXPECT(&b, TS_ERR_FORMAT,
           "tensor 0 'blk.0.attn_q.weight': data [offset 0x80, 256 bytes] runs past end of file "
           "(256 bytes)");
    one_tensor(&b, 1, 8, 1, 0, UINT64_C(1) << 63, 64);
    EXPECT(&b, TS_ERR_FORMAT, "runs past end of file");
    one_tensor(&b, 1, 8, 1, 0, UINT64_MAX - 31, 64);
    EXPECT(&b, TS_ERR_FORMAT, "runs past end of file");
    one_tensor(&b, 1, 8, 1, 0, 4, 64);
    EXPECT(&b, TS_ERR_FORMAT, "data offset 0x4 is not a multiple of the alignment 32");
    /* Tensor infos end, but no padding or data follows. */
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "t", 1, (const uint64_t[]){8}, 0, 0);
    EXPECT(&b, TS_ERR_FORMAT, "data section starts at offset 0x40");
    rb_header(&b, 3, 1, 0);
    rb_str(&b, "blk.0.attn_output.weight.blk.0");
    EXPECT(&b, TS_ERR_FORMAT,
           "tensor 0 'blk.0.attn_output.weight.blk.0': n_dims at offset 0x3e "
           "runs past end of file");
    rb_header(&b, 3, 1, 0);
    rb_str(&b, "t");
    rb_u32(&b, 2);
    rb_u64(&b, 8);
    rb_zeros(&b, 19);
    EXPECT(&b, TS_ERR_FORMAT, "dims, type and offset at 0x25 (28 bytes) run past end of file");

    const char *names[] = {"a", "b", "c"};
    const uint32_t nd[] = {1, 1, 1};
    const uint64_t ne[3][5] = {{16}, {16}, {16}};
    const uint32_t types[] = {0, 0, 0};
    const uint64_t ok_offs[] = {0, 64, 128};
    tensor_file(&b, 32, 3, names, nd, ne, types, ok_offs, 192);
    expect_ok(&b, __LINE__);
    const uint64_t overlap[] = {128, 0, 32};
    tensor_file(&b, 32, 3, names, nd, ne, types, overlap, 192);
    EXPECT(&b, TS_ERR_FORMAT,
           "tensor 2 'c': data [offset 0xc0, 64 bytes] overlaps tensor 1 'b' [offset 0xa0, 64 "
           "bytes]");
    const uint64_t same[] = {0, 64, 0};
    tensor_file(&b, 32, 3, names, nd, ne, types, same, 192);
    EXPECT(&b, TS_ERR_FORMAT, "tensor 2 'c': data [offset 0xa0, 64 bytes] overlaps tensor 0 'a'");
    const uint64_t mis64[] = {0, 64, 96};
    tensor_file(&b, 64, 3, names, nd, ne, types, mis64, 256);
    EXPECT(&b, TS_ERR_FORMAT,
           "tensor 2 'c' at offset 0x7b: data offset 0x60 is not a multiple "
           "of the alignment 64");

    const char *dup[] = {"w", "x", "w"};
    tensor_file(&b, 32, 3, dup, nd, ne, types, ok_offs, 192);
    EXPECT(&b, TS_ERR_FORMAT,
           "tensor 2 'w' at offset 0x7b: duplicate tensor name (first used by "
           "tensor 0)");
    const char *empty[] = {"a", ""};
    tensor_file(&b, 32, 2, empty, nd, ne, types, ok_offs, 192);
    EXPECT(&b, TS_ERR_FORMAT, "tensor 1 at offset 0x5a: empty tensor name");
    rb_header(&b, 3, 1, 0);
    rb_u64(&b, 2);
    rb_bytes(&b, "\0x", 2);
    rb_u32(&b, 1);
    rb_u64(&b, 8);
    rb_u32(&b, 0);
    rb_u64(&b, 0);
    rb_pad(&b, 32);
    rb_zeros(&b, 32);
    EXPECT(&b, TS_ERR_FORMAT, "tensor name '\\x00x' contains a NUL byte");
}

/* A valid file from the writer, with several value kinds and three tensors. */
static void writer_file(void **buf, size_t *size, size_t *min_valid) {
    ts_gguf_writer *w;
    ts_error err = {0};
    assert_int_equal(ts_gguf_writer_create(&w, &err), TS_OK);
    static const char *const toks[] = {"<s>", "", "hello"};
    static const float f[24] = {1, 2, 3};
    const int64_t ne_a[] = {8}, ne_b[] = {32, 2}, ne_c[] = {4, 2};
    static const uint8_t q[2 * 18];
    rb enc = {0};
    rb_u32(&enc, T_ARR);
    rb_u64(&enc, 2);
    rb_u32(&enc, T_STR);
    rb_u64(&enc, 1);
    rb_str(&enc, "ab");
    rb_u32(&enc, T_U32);
    rb_u64(&enc, 1);
    rb_u32(&enc, 7);
    assert_int_equal(ts_gguf_writer_set_alignment(w, 32, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_cstr(w, "general.architecture", "llama", &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 3, &err),
                     TS_OK);
    assert_int_equal(ts_gguf_writer_add_bool(w, "b", true, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_encoded(w, "nested", TS_GGUF_ARRAY, enc.p, enc.n, &err),
                     TS_OK);
    assert_int_equal(ts_gguf_writer_add_tensor(w, "a", TS_TYPE_F32, 1, ne_a, f, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_tensor(w, "b", TS_TYPE_Q4_0, 2, ne_b, q, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_add_tensor(w, "c", TS_TYPE_F16, 2, ne_c, f, &err), TS_OK);
    assert_int_equal(ts_gguf_writer_write_mem(w, buf, size, &err), TS_OK);
    ts_gguf *g;
    assert_int_equal(ts_gguf_open_memory(*buf, *size, &g, &err), TS_OK);
    const ts_gguf_tensor *last = ts_gguf_tensor_at(g, 2);
    *min_valid = ts_gguf_data_offset(g) + (size_t)last->offset + last->nbytes;
    ts_gguf_close(g);
    ts_gguf_writer_destroy(w);
    rb_free(&enc);
}

static void test_every_prefix(void **state) {
    (void)state;
    void *buf;
    size_t size, min_valid;
    writer_file(&buf, &size, &min_valid);
    assert_true(min_valid < size); /* the writer pads after the last tensor */
    for (size_t n = 0; n <= size; n++) {
        ts_error err = {0};
        ts_gguf *g = NULL;
        ts_status st = open_exact(buf, n, &g, &err);
        if (n < min_valid) {
            if (st == TS_OK || err.msg[0] == '\0') {
                fail_msg("prefix of %zu bytes was accepted (%s)", n, err.msg);
            }
        } else if (st != TS_OK) {
            fail_msg("prefix of %zu bytes (all data present) rejected: %s", n, err.msg);
        }
    }
    free(buf);
}

/* Flipping any byte to a few values never crashes or leaks (ASan/UBSan), whatever the
 * verdict; a file that still opens has consistent tensors. */
static void test_every_byte_corrupted(void **state) {
    (void)state;
    void *buf;
    size_t size, min_valid;
    writer_file(&buf, &size, &min_valid);
    uint8_t *copy = malloc(size);
    assert_non_null(copy);
    static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < size; i++) {
        for (size_t v = 0; v < sizeof values; v++) {
            memcpy(copy, buf, size);
            copy[i] = values[v];
            ts_error err = {0};
            ts_gguf *g = NULL;
            if (ts_gguf_open_memory(copy, size, &g, &err) != TS_OK) {
                assert_true(err.msg[0] != '\0');
                continue;
            }
            for (uint64_t t = 0; t < ts_gguf_tensor_count(g); t++) {
                const ts_gguf_tensor *x = ts_gguf_tensor_at(g, t);
                assert_true(ts_gguf_data_offset(g) + x->offset + x->nbytes <= size);
            }
            ts_gguf_close(g);
        }
    }
    free(copy);
    free(buf);
}

static void test_files(void **state) {
    (void)state;
    ts_error err = {0};
    ts_gguf *g;
    assert_int_equal(ts_gguf_open("/nonexistent/x.gguf", &g, &err), TS_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot open '/nonexistent/x.gguf'"));
    assert_null(g);
    assert_int_equal(ts_gguf_open("/", &g, &err), TS_ERR_IO);
    assert_non_null(strstr(err.msg, "not a regular file"));
    char path[] = "/tmp/ts_gguf_empty_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ts_gguf_open(path, &g, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "is empty"));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("GGUF\x01\0\0\0", 1, 8, f);
    fclose(f);
    assert_int_equal(ts_gguf_open(path, &g, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "version 1"));
    unlink(path);
    assert_int_equal(ts_gguf_open_memory(NULL, 5, &g, &err), TS_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_strings_and_counts),
        cmocka_unit_test(test_types_and_keys),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_alignment_key),
        cmocka_unit_test(test_tensor_shapes),
        cmocka_unit_test(test_tensor_placement),
        cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_every_byte_corrupted),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
