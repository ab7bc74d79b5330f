/*
 * test_roundtrip.c — what the GGUF writer writes, the reader reads back identically.
 *
 * One writer holds every value type (scalars, strings with arbitrary bytes, arrays of every
 * fixed type, string arrays, nested arrays several levels deep) and tensors of several types;
 * the result is read from memory and from a file, with alignment 32 and 64, and every value,
 * tensor shape, offset and data byte is compared with what went in. Also covers typed-getter
 * errors, copy_kv, the fill callback and writer argument checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        ts_error e_ = {0};                                                                         \
        ts_status s_ = (call);                                                                     \
        if (s_ != TS_OK) {                                                                         \
            fail_msg("%s -> %s: %s", #call, ts_status_str(s_), e_.msg);                            \
        }                                                                                          \
    } while (0)

/* Tensors: name, type, dims, and deterministic contents. */
typedef struct tspec {
    const char *name;
    ts_type type;
    uint32_t n_dims;
    int64_t ne[4];
} tspec;

static const tspec k_tensors[] = {
    {"token_embd.weight", TS_TYPE_Q4_0, 2, {64, 3}},
    {"blk.0.attn_norm.weight", TS_TYPE_F32, 1, {7}},
    {"blk.0.ffn_up.weight", TS_TYPE_Q4_K, 2, {256, 2}},
    {"blk.0.attn_q.weight", TS_TYPE_F16, 3, {5, 3, 2}},
    {"blk.0.attn_k.weight", TS_TYPE_Q8_0, 4, {32, 1, 2, 1}},
    {"output.weight", TS_TYPE_I8, 1, {1}},
};
#define N_TENSORS (sizeof k_tensors / sizeof k_tensors[0])

static size_t tensor_bytes(const tspec *t) {
    size_t row;
    assert_true(ts_type_row_bytes(t->type, (uint64_t)t->ne[0], &row));
    size_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++) {
        rows *= (size_t)t->ne[d];
    }
    return row * rows;
}

static void fill_pattern(uint8_t *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)((i * 131u + seed * 17u + (i >> 8)) & 0xff);
    }
}

/* A nested value: array of 3 arrays of uint32 with 0, 1 and 2 elements. */
static size_t encode_nested_u32(uint8_t *b) {
    size_t o = 0;
    uint32_t t = TS_GGUF_ARRAY, u = TS_GGUF_UINT32;
    uint64_t n = 3;
    memcpy(b + o, &t, 4), o += 4;
    memcpy(b + o, &n, 8), o += 8;
    for (uint64_t i = 0; i < 3; i++) {
        memcpy(b + o, &u, 4), o += 4;
        memcpy(b + o, &i, 8), o += 8;
        for (uint32_t k = 0; k < i; k++) {
            uint32_t v = 100 * (uint32_t)i + k;
            memcpy(b + o, &v, 4), o += 4;
        }
    }
    return o;
}

/* Three levels: [[["a","bc"]], [[]]] — array of arrays of arrays of strings. */
static size_t encode_nested_str(uint8_t *b) {
    size_t o = 0;
    uint32_t ta = TS_GGUF_ARRAY, ts = TS_GGUF_STRING;
    uint64_t one = 1, two = 2, zero = 0;
    memcpy(b + o, &ta, 4), o += 4;
    memcpy(b + o, &two, 8), o += 8;
    /* element 0: [["a","bc"]] */
    memcpy(b + o, &ta, 4), o += 4;
    memcpy(b + o, &one, 8), o += 8;
    memcpy(b + o, &ts, 4), o += 4;
    memcpy(b + o, &two, 8), o += 8;
    memcpy(b + o, &one, 8), o += 8;
    memcpy(b + o, "a", 1), o += 1;
    memcpy(b + o, &two, 8), o += 8;
    memcpy(b + o, "bc", 2), o += 2;
    /* element 1: [[]] with the innermost empty array of strings */
    memcpy(b + o, &ta, 4), o += 4;
    memcpy(b + o, &one, 8), o += 8;
    memcpy(b + o, &ts, 4), o += 4;
    memcpy(b + o, &zero, 8), o += 8;
    return o;
}

static const char k_binary[] = {'a', '\0', 'b', '\n', (char)0xff, (char)0xc3, 'z'};
static const char *const k_strs[] = {"", "hello", "\xe2\x96\x81the", "<|im_start|>", "x"};

static ts_gguf_writer *build(uint32_t alignment, bool use_fill) {
    ts_gguf_writer *w;
    OK(ts_gguf_writer_create(&w, &e_));
    OK(ts_gguf_writer_add_cstr(w, "general.architecture", "llama", &e_));
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = INT64_MIN + 5;
    double f64 = -1.0 / 3.0;
    OK(ts_gguf_writer_add_scalar(w, "t.u8", TS_GGUF_UINT8, &u8, &e_));
    OK(ts_gguf_writer_add_scalar(w, "t.i8", TS_GGUF_INT8, &i8, &e_));
    OK(ts_gguf_writer_add_scalar(w, "t.u16", TS_GGUF_UINT16, &u16, &e_));
    OK(ts_gguf_writer_add_scalar(w, "t.i16", TS_GGUF_INT16, &i16, &e_));
    OK(ts_gguf_writer_add_u32(w, "t.u32", 4000000000u, &e_));
    OK(ts_gguf_writer_add_i32(w, "t.i32", -2000000000, &e_));
    OK(ts_gguf_writer_add_f32(w, "t.f32", 1.5f, &e_));
    OK(ts_gguf_writer_add_bool(w, "t.bool", true, &e_));
    OK(ts_gguf_writer_add_u64(w, "t.u64", UINT64_MAX, &e_));
    OK(ts_gguf_writer_add_scalar(w, "t.i64", TS_GGUF_INT64, &i64, &e_));
    OK(ts_gguf_writer_add_scalar(w, "t.f64", TS_GGUF_FLOAT64, &f64, &e_));
    OK(ts_gguf_writer_add_str(w, "t.binary", k_binary, sizeof k_binary, &e_));
    OK(ts_gguf_writer_add_cstr(w, "t.empty", "", &e_));
    if (alignment != TS_GGUF_DEFAULT_ALIGNMENT) {
        OK(ts_gguf_writer_set_alignment(w, alignment, &e_));
    }
    const uint8_t au8[] = {1, 2, 255};
    const int16_t ai16[] = {-1, 2, -3, 4};
    const float af32[] = {0.5f, -2.25f};
    const uint8_t abool[] = {1, 0, 1};
    const uint64_t au64[] = {1, UINT64_MAX};
    const double af64[] = {3.25};
    OK(ts_gguf_writer_add_array(w, "a.u8", TS_GGUF_UINT8, au8, 3, &e_));
    OK(ts_gguf_writer_add_array(w, "a.i16", TS_GGUF_INT16, ai16, 4, &e_));
    OK(ts_gguf_writer_add_array(w, "a.f32", TS_GGUF_FLOAT32, af32, 2, &e_));
    OK(ts_gguf_writer_add_array(w, "a.bool", TS_GGUF_BOOL, abool, 3, &e_));
    OK(ts_gguf_writer_add_array(w, "a.u64", TS_GGUF_UINT64, au64, 2, &e_));
    OK(ts_gguf_writer_add_array(w, "a.f64", TS_GGUF_FLOAT64, af64, 1, &e_));
    OK(ts_gguf_writer_add_array(w, "a.empty", TS_GGUF_INT32, NULL, 0, &e_));
    OK(ts_gguf_writer_add_str_array(w, "a.str", k_strs, 5, &e_));
    uint8_t enc[256];
    size_t n = encode_nested_u32(enc);
    OK(ts_gguf_writer_add_encoded(w, "a.nested_u32", TS_GGUF_ARRAY, enc, n, &e_));
    n = encode_nested_str(enc);
    OK(ts_gguf_writer_add_encoded(w, "a.nested_str", TS_GGUF_ARRAY, enc, n, &e_));
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *t = &k_tensors[i];
        const void *data = NULL;
        if (!use_fill) {
            /* The writer borrows the data: keep the buffers alive in a static pool. */
            static uint8_t pool[N_TENSORS][4096];
            assert_true(tensor_bytes(t) <= sizeof pool[i]);
            fill_pattern(pool[i], tensor_bytes(t), i);
            data = pool[i];
        }
        OK(ts_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data, &e_));
    }
    return w;
}

static void check_str(const ts_gguf *g, const char *key, const char *want, size_t len) {
    ts_gguf_str s;
    OK(ts_gguf_get_str(g, key, &s, &e_));
    assert_int_equal(s.len, len);
    assert_memory_equal(s.ptr, want, len);
}

static void check_metadata(const ts_gguf *g, uint32_t alignment) {
    assert_int_equal(ts_gguf_version(g), 3);
    assert_int_equal(ts_gguf_alignment(g), alignment);
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    float f32;
    bool b;
    uint64_t u64;
    int64_t i64;
    double f64;
    OK(ts_gguf_get_u8(g, "t.u8", &u8, &e_));
    OK(ts_gguf_get_i8(g, "t.i8", &i8, &e_));
    OK(ts_gguf_get_u16(g, "t.u16", &u16, &e_));
    OK(ts_gguf_get_i16(g, "t.i16", &i16, &e_));
    OK(ts_gguf_get_u32(g, "t.u32", &u32, &e_));
    OK(ts_gguf_get_i32(g, "t.i32", &i32, &e_));
    OK(ts_gguf_get_f32(g, "t.f32", &f32, &e_));
    OK(ts_gguf_get_bool(g, "t.bool", &b, &e_));
    OK(ts_gguf_get_u64(g, "t.u64", &u64, &e_));
    OK(ts_gguf_get_i64(g, "t.i64", &i64, &e_));
    OK(ts_gguf_get_f64(g, "t.f64", &f64, &e_));
    assert_int_equal(u8, 200);
    assert_int_equal(i8, -100);
    assert_int_equal(u16, 60000);
    assert_int_equal(i16, -30000);
    assert_int_equal(u32, 4000000000u);
    assert_int_equal(i32, -2000000000);
    assert_true(f32 == 1.5f);
    assert_true(b);
    assert_true(u64 == UINT64_MAX);
    assert_true(i64 == INT64_MIN + 5);
    assert_true(f64 == -1.0 / 3.0);
    check_str(g, "general.architecture", "llama", 5);
    check_str(g, "t.binary", k_binary, sizeof k_binary);
    check_str(g, "t.empty", "", 0);

    /* Order is preserved: architecture first, then the scalars in the order added. */
    assert_string_equal(ts_gguf_kv_key(g, 0), "general.architecture");
    assert_string_equal(ts_gguf_kv_key(g, 1), "t.u8");
    assert_int_equal(ts_gguf_kv_type(g, 1), TS_GGUF_UINT8);
    assert_null(ts_gguf_kv_key(g, ts_gguf_kv_count(g)));
    assert_int_equal(ts_gguf_kv_type(g, ts_gguf_kv_count(g)), TS_GGUF_TYPE_COUNT);
    uint64_t idx;
    OK(ts_gguf_find_key(g, "t.f64", &idx));
    assert_string_equal(ts_gguf_kv_key(g, idx), "t.f64");
    assert_int_equal(ts_gguf_find_key(g, "nope", &idx), TS_ERR_NOT_FOUND);
    const void *raw;
    OK(ts_gguf_kv_scalar(g, idx, &raw, &e_));
    memcpy(&f64, raw, 8);
    assert_true(f64 == -1.0 / 3.0);

    /* Type mismatches and lenient getters. */
    ts_error err = {0};
    assert_int_equal(ts_gguf_get_f32(g, "t.u32", &f32, &err), TS_ERR_TYPE);
    assert_non_null(strstr(err.msg, "'t.u32' is uint32, not float32"));
    assert_int_equal(ts_gguf_get_u32(g, "missing.key", &u32, &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "missing.key"));
    assert_int_equal(ts_gguf_get_str(g, "a.str", &(ts_gguf_str){0}, &err), TS_ERR_TYPE);
    assert_int_equal(ts_gguf_kv_str(g, 1, &(ts_gguf_str){0}, &err), TS_ERR_TYPE);
    assert_int_equal(ts_gguf_kv_scalar(g, 0, &raw, &err), TS_ERR_TYPE);
    assert_int_equal(ts_gguf_kv_array(g, 9999, &(ts_gguf_array){0}, &err), TS_ERR_RANGE);
    OK(ts_gguf_get_int(g, "t.u8", &i64, &e_));
    assert_int_equal(i64, 200);
    OK(ts_gguf_get_int(g, "t.i16", &i64, &e_));
    assert_int_equal(i64, -30000);
    OK(ts_gguf_get_int(g, "t.u32", &i64, &e_));
    assert_int_equal(i64, 4000000000);
    assert_int_equal(ts_gguf_get_int(g, "t.u64", &i64, &err), TS_ERR_RANGE);
    assert_int_equal(ts_gguf_get_int(g, "t.f32", &i64, &err), TS_ERR_TYPE);
    assert_int_equal(ts_gguf_get_int(g, "t.bool", &i64, &err), TS_ERR_TYPE);
    OK(ts_gguf_get_float(g, "t.f32", &f64, &e_));
    assert_true(f64 == 1.5);
    OK(ts_gguf_get_float(g, "t.f64", &f64, &e_));
    assert_int_equal(ts_gguf_get_float(g, "t.u8", &f64, &err), TS_ERR_TYPE);
    assert_non_null(strstr(err.msg, "not float32 or float64"));
}

static void check_arrays(const ts_gguf *g) {
    ts_error err = {0};
    ts_gguf_array a;
    int64_t iv;
    double fv;
    OK(ts_gguf_get_array(g, "a.u8", &a, &e_));
    assert_int_equal(a.type, TS_GGUF_UINT8);
    assert_int_equal(a.n, 3);
    OK(ts_gguf_array_int(&a, 2, &iv, &e_));
    assert_int_equal(iv, 255);
    assert_int_equal(ts_gguf_array_int(&a, 3, &iv, &err), TS_ERR_RANGE);
    assert_int_equal(ts_gguf_array_str(&a, 0, &(ts_gguf_str){0}, &err), TS_ERR_TYPE);
    OK(ts_gguf_get_array(g, "a.i16", &a, &e_));
    OK(ts_gguf_array_int(&a, 2, &iv, &e_));
    assert_int_equal(iv, -3);
    OK(ts_gguf_array_float(&a, 3, &fv, &e_));
    assert_true(fv == 4.0);
    OK(ts_gguf_get_array(g, "a.f32", &a, &e_));
    OK(ts_gguf_array_float(&a, 1, &fv, &e_));
    assert_true(fv == -2.25);
    assert_int_equal(ts_gguf_array_int(&a, 1, &iv, &err), TS_ERR_TYPE);
    OK(ts_gguf_get_array(g, "a.bool", &a, &e_));
    OK(ts_gguf_array_int(&a, 1, &iv, &e_));
    assert_int_equal(iv, 0);
    OK(ts_gguf_get_array(g, "a.u64", &a, &e_));
    assert_int_equal(ts_gguf_array_int(&a, 1, &iv, &err), TS_ERR_RANGE);
    OK(ts_gguf_array_float(&a, 1, &fv, &e_));
    assert_true(fv == (double)UINT64_MAX);
    OK(ts_gguf_get_array(g, "a.f64", &a, &e_));
    OK(ts_gguf_array_float(&a, 0, &fv, &e_));
    assert_true(fv == 3.25);
    OK(ts_gguf_get_array(g, "a.empty", &a, &e_));
    assert_int_equal(a.type, TS_GGUF_INT32);
    assert_int_equal(a.n, 0);

    OK(ts_gguf_get_array(g, "a.str", &a, &e_));
    assert_int_equal(a.type, TS_GGUF_STRING);
    assert_int_equal(a.n, 5);
    for (uint64_t i = 0; i < 5; i++) {
        ts_gguf_str s;
        OK(ts_gguf_array_str(&a, i, &s, &e_));
        assert_int_equal(s.len, strlen(k_strs[i]));
        assert_memory_equal(s.ptr, k_strs[i], s.len);
    }
    assert_int_equal(ts_gguf_array_float(&a, 0, &fv, &err), TS_ERR_TYPE);
    assert_int_equal(ts_gguf_array_str(&a, 5, &(ts_gguf_str){0}, &err), TS_ERR_RANGE);

    OK(ts_gguf_get_array(g, "a.nested_u32", &a, &e_));
    assert_int_equal(a.type, TS_GGUF_ARRAY);
    assert_int_equal(a.n, 3);
    for (uint64_t i = 0; i < 3; i++) {
        ts_gguf_array in;
        OK(ts_gguf_array_arr(&a, i, &in, &e_));
        assert_int_equal(in.type, TS_GGUF_UINT32);
        assert_int_equal(in.n, i);
        for (uint64_t k = 0; k < i; k++) {
            OK(ts_gguf_array_int(&in, k, &iv, &e_));
            assert_int_equal(iv, (int64_t)(100 * i + k));
        }
    }
    assert_int_equal(ts_gguf_array_arr(&a, 3, &(ts_gguf_array){0}, &err), TS_ERR_RANGE);

    OK(ts_gguf_get_array(g, "a.nested_str", &a, &e_));
    assert_int_equal(a.n, 2);
    ts_gguf_array l1, l2;
    ts_gguf_str s;
    OK(ts_gguf_array_arr(&a, 0, &l1, &e_));
    assert_int_equal(l1.n, 1);
    OK(ts_gguf_array_arr(&l1, 0, &l2, &e_));
    assert_int_equal(l2.type, TS_GGUF_STRING);
    assert_int_equal(l2.n, 2);
    OK(ts_gguf_array_str(&l2, 1, &s, &e_));
    assert_int_equal(s.len, 2);
    assert_memory_equal(s.ptr, "bc", 2);
    OK(ts_gguf_array_arr(&a, 1, &l1, &e_));
    OK(ts_gguf_array_arr(&l1, 0, &l2, &e_));
    assert_int_equal(l2.type, TS_GGUF_STRING);
    assert_int_equal(l2.n, 0);
}

static void check_tensors(const ts_gguf *g, uint32_t alignment) {
    assert_int_equal(ts_gguf_tensor_count(g), N_TENSORS);
    assert_int_equal(ts_gguf_data_offset(g) % alignment, 0);
    const uint8_t *base = ts_gguf_base(g);
    uint8_t want[4096];
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *s = &k_tensors[i];
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        assert_non_null(t);
        assert_string_equal(t->name, s->name);
        assert_int_equal(t->type, s->type);
        assert_int_equal(t->n_dims, s->n_dims);
        uint64_t n = 1;
        for (uint32_t d = 0; d < 4; d++) {
            int64_t e = d < s->n_dims ? s->ne[d] : 1;
            assert_int_equal(t->ne[d], e);
            n *= (uint64_t)e;
        }
        assert_int_equal(t->n_elements, n);
        assert_int_equal(t->nbytes, tensor_bytes(s));
        assert_int_equal(t->offset % alignment, 0);
        assert_ptr_equal(t->data, base + ts_gguf_data_offset(g) + t->offset);
        fill_pattern(want, t->nbytes, i);
        assert_memory_equal(t->data, want, t->nbytes);
        const ts_gguf_tensor *f;
        OK(ts_gguf_find_tensor(g, s->name, &f));
        assert_ptr_equal(f, t);
    }
    assert_null(ts_gguf_tensor_at(g, N_TENSORS));
    const ts_gguf_tensor *f;
    assert_int_equal(ts_gguf_find_tensor(g, "missing", &f), TS_ERR_NOT_FOUND);
}

static void check_all(const ts_gguf *g, uint32_t alignment) {
    check_metadata(g, alignment);
    check_arrays(g);
    check_tensors(g, alignment);
}

static char *temp_dir(void) {
    const char *tmp = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/ts_gguf_XXXXXX", tmp != NULL ? tmp : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static void roundtrip(uint32_t alignment) {
    ts_gguf_writer *w = build(alignment, false);
    void *buf;
    size_t size;
    OK(ts_gguf_writer_write_mem(w, &buf, &size, &e_));
    assert_int_equal(size % alignment, 0);
    ts_gguf *g;
    OK(ts_gguf_open_memory(buf, size, &g, &e_));
    check_all(g, alignment);
    assert_int_equal(ts_gguf_file_size(g), size);

    /* The same writer through a file: identical bytes, identical parse. */
    char *dir = temp_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    OK(ts_gguf_writer_write(w, path, &e_));
    assert_int_equal(count_entries(dir), 1);
    ts_gguf *gf;
    OK(ts_gguf_open(path, &gf, &e_));
    check_all(gf, alignment);
    assert_int_equal(ts_gguf_file_size(gf), size);
    assert_memory_equal(ts_gguf_base(gf), buf, size);
    ts_gguf_close(gf);

    /* copy_kv of every entry plus the reader's zero-copy tensor data reproduces the file byte
     * for byte. */
    ts_gguf_writer *w2;
    OK(ts_gguf_writer_create(&w2, &e_));
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        OK(ts_gguf_writer_copy_kv(w2, g, i, &e_));
    }
    for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        OK(ts_gguf_writer_add_tensor(w2, t->name, t->type, t->n_dims, t->ne, t->data, &e_));
    }
    void *buf2;
    size_t size2;
    OK(ts_gguf_writer_write_mem(w2, &buf2, &size2, &e_));
    assert_int_equal(size2, size);
    assert_memory_equal(buf2, buf, size);
    free(buf2);
    ts_gguf_writer_destroy(w2);

    unlink(path);
    rmdir(dir);
    free(dir);
    ts_gguf_close(g);
    free(buf);
    ts_gguf_writer_destroy(w);
}

static void test_roundtrip_align32(void **state) {
    (void)state;
    roundtrip(32);
}

static void test_roundtrip_align64(void **state) {
    (void)state;
    roundtrip(64);
}

static ts_status fill_ok(void *ctx, uint64_t i, void *dst, size_t nbytes, ts_error *err) {
    (void)err;
    int *calls = ctx;
    assert_int_equal((uint64_t)*calls, i); /* called once per tensor, in file order */
    assert_int_equal(nbytes, tensor_bytes(&k_tensors[i]));
    (*calls)++;
    fill_pattern(dst, nbytes, i);
    return TS_OK;
}

static ts_status fill_fail(void *ctx, uint64_t i, void *dst, size_t nbytes, ts_error *err) {
    (void)ctx, (void)dst, (void)nbytes;
    if (i == 2 && err != NULL) {
        snprintf(err->msg, sizeof err->msg, "quantizer ran out of patience");
        err->status = TS_ERR_ABORTED;
    }
    if (i == 2) {
        return TS_ERR_ABORTED;
    }
    memset(dst, 0, nbytes);
    return TS_OK;
}

static void test_fill_callback(void **state) {
    (void)state;
    ts_gguf_writer *w = build(64, true);
    ts_error err = {0};
    void *buf;
    size_t size;
    assert_int_equal(ts_gguf_writer_write_mem(w, &buf, &size, &err), TS_ERR_STATE);
    assert_non_null(strstr(err.msg, "no fill callback"));
    int calls = 0;
    ts_gguf_writer_set_fill(w, fill_ok, &calls);
    OK(ts_gguf_writer_write_mem(w, &buf, &size, &e_));
    assert_int_equal(calls, N_TENSORS);
    ts_gguf *g;
    OK(ts_gguf_open_memory(buf, size, &g, &e_));
    check_all(g, 64);
    ts_gguf_close(g);

    char *dir = temp_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/filled.gguf", dir);
    calls = 0;
    OK(ts_gguf_writer_write(w, path, &e_));
    OK(ts_gguf_open(path, &g, &e_));
    assert_memory_equal(ts_gguf_base(g), buf, size);
    ts_gguf_close(g);
    unlink(path);
    free(buf);

    /* A failing callback leaves neither the target nor a temporary file behind. */
    ts_gguf_writer_set_fill(w, fill_fail, NULL);
    assert_int_equal(ts_gguf_writer_write(w, path, &err), TS_ERR_ABORTED);
    assert_non_null(strstr(err.msg, "tensor 2 'blk.0.ffn_up.weight': quantizer ran out"));
    assert_int_equal(count_entries(dir), 0);
    assert_int_equal(ts_gguf_writer_write_mem(w, &buf, &size, &err), TS_ERR_ABORTED);
    assert_null(buf);
    rmdir(dir);
    free(dir);
    ts_gguf_writer_destroy(w);
}

static void test_writer_rejects(void **state) {
    (void)state;
    ts_gguf_writer *w;
    ts_error err = {0};
    OK(ts_gguf_writer_create(&w, &e_));
    OK(ts_gguf_writer_add_u32(w, "k", 1, &e_));
    assert_int_equal(ts_gguf_writer_add_u32(w, "k", 2, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "duplicate key 'k'"));
    assert_int_equal(ts_gguf_writer_add_u32(w, "", 2, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_set_alignment(w, 48, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_set_alignment(w, 0, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_add_cstr(w, "general.alignment", "64", &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_add_scalar(w, "s", TS_GGUF_STRING, "x", &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_add_array(w, "s", TS_GGUF_STRING, NULL, 0, &err),
                     TS_ERR_INVALID_ARG);
    /* Setting the alignment twice keeps one general.alignment entry. */
    OK(ts_gguf_writer_set_alignment(w, 16, &e_));
    OK(ts_gguf_writer_set_alignment(w, 128, &e_));

    const int64_t bad_block[] = {33, 2};
    assert_int_equal(ts_gguf_writer_add_tensor(w, "t", TS_TYPE_Q4_0, 2, bad_block, NULL, &err),
                     TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "not a multiple of the Q4_0 block size 32"));
    const int64_t zero[] = {0};
    assert_int_equal(ts_gguf_writer_add_tensor(w, "t", TS_TYPE_F32, 1, zero, NULL, &err),
                     TS_ERR_INVALID_ARG);
    const int64_t one[] = {1, 1, 1, 1, 1};
    assert_int_equal(ts_gguf_writer_add_tensor(w, "t", TS_TYPE_F32, 5, one, NULL, &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(ts_gguf_writer_add_tensor(w, "t", (ts_type)4, 1, one, NULL, &err),
                     TS_ERR_UNSUPPORTED);
    assert_int_equal(ts_gguf_writer_add_tensor(w, "", TS_TYPE_F32, 1, one, NULL, &err),
                     TS_ERR_INVALID_ARG);
    const float v = 2.0f;
    OK(ts_gguf_writer_add_tensor(w, "t", TS_TYPE_F32, 1, one, &v, &e_));
    assert_int_equal(ts_gguf_writer_add_tensor(w, "t", TS_TYPE_F32, 1, one, &v, &err),
                     TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "duplicate tensor name"));

    /* Encoded values are validated by parsing. */
    uint8_t enc[64];
    size_t n = encode_nested_u32(enc);
    assert_int_equal(ts_gguf_writer_add_encoded(w, "e", TS_GGUF_ARRAY, enc, n - 1, &err),
                     TS_ERR_FORMAT);
    enc[n] = 0;
    assert_int_equal(ts_gguf_writer_add_encoded(w, "e", TS_GGUF_ARRAY, enc, n + 1, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "1 bytes follow"));
    uint8_t two = 2;
    assert_int_equal(ts_gguf_writer_add_encoded(w, "e", TS_GGUF_BOOL, &two, 1, &err),
                     TS_ERR_FORMAT);
    OK(ts_gguf_writer_add_encoded(w, "e", TS_GGUF_ARRAY, enc, n, &e_));

    void *buf;
    size_t size;
    OK(ts_gguf_writer_write_mem(w, &buf, &size, &e_));
    ts_gguf *g;
    OK(ts_gguf_open_memory(buf, size, &g, &e_));
    assert_int_equal(ts_gguf_alignment(g), 128);
    assert_int_equal(ts_gguf_kv_count(g), 3); /* k, general.alignment, e */
    const ts_gguf_tensor *t = ts_gguf_tensor_at(g, 0);
    assert_int_equal(t->offset, 0);
    assert_int_equal((ts_gguf_data_offset(g)) % 128, 0);
    float got;
    memcpy(&got, t->data, 4);
    assert_true(got == 2.0f);
    ts_gguf_close(g);
    free(buf);

    /* Writing to a directory that does not exist fails cleanly. */
    assert_int_equal(ts_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err), TS_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot create"));
    ts_gguf_writer_destroy(w);
}

/* An empty writer yields a valid file with no entries and no tensors. */
static void test_empty(void **state) {
    (void)state;
    ts_gguf_writer *w;
    OK(ts_gguf_writer_create(&w, &e_));
    void *buf;
    size_t size;
    OK(ts_gguf_writer_write_mem(w, &buf, &size, &e_));
    ts_gguf *g;
    OK(ts_gguf_open_memory(buf, size, &g, &e_));
    assert_int_equal(ts_gguf_kv_count(g), 0);
    assert_int_equal(ts_gguf_tensor_count(g), 0);
    assert_int_equal(ts_gguf_alignment(g), TS_GGUF_DEFAULT_ALIGNMENT);
    ts_gguf_close(g);
    free(buf);
    ts_gguf_writer_destroy(w);
    ts_gguf_close(NULL);
    ts_gguf_writer_destroy(NULL);
}

/* A file without tensors may declare any power-of-two alignment, up to 2^31 (the reader
 * accepts it: there is no data section to place). Writing it back pads nothing, so the
 * re-emitted file stays a few bytes long instead of 2 GiB (a libFuzzer finding), and it
 * reads back with the same alignment. */
static void test_huge_alignment_no_tensors(void **state) {
    (void)state;
    ts_gguf_writer *w;
    OK(ts_gguf_writer_create(&w, &e_));
    OK(ts_gguf_writer_set_alignment(w, 1u << 31, &e_));
    void *buf;
    size_t size;
    OK(ts_gguf_writer_write_mem(w, &buf, &size, &e_));
    assert_true(size < 4096);
    ts_gguf *g;
    OK(ts_gguf_open_memory(buf, size, &g, &e_));
    assert_int_equal(ts_gguf_tensor_count(g), 0);
    assert_int_equal(ts_gguf_alignment(g), (size_t)1 << 31);
    ts_gguf_close(g);
    free(buf);
    ts_gguf_writer_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_align32),
        cmocka_unit_test(test_roundtrip_align64),
        cmocka_unit_test(test_fill_callback),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_huge_alignment_no_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
