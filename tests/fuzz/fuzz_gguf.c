/*
 * fuzz_gguf.c — libFuzzer entry for the GGUF reader (and the writer on what it accepts).
 *
 * Each input is parsed with ts_gguf_open_memory. When it is accepted, every metadata entry,
 * every array element (nested arrays included) and every tensor is visited through the public
 * accessors, the first and last byte of each tensor's data are read (so AddressSanitizer checks
 * the bounds the reader promised), lookups by name must find what iteration found, and the file
 * is re-emitted with the writer (copy_kv + zero-copy tensor data) and must parse again with the
 * same counts. Any broken invariant traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

/* Folds bytes into a sink the optimizer cannot drop. */
static volatile uint8_t g_sink;

static void touch(const void *p, size_t n) {
    if (n != 0) {
        const uint8_t *b = p;
        g_sink ^= b[0] ^ b[n - 1];
    }
}

static void walk_array(const ts_gguf_array *a) {
    for (uint64_t i = 0; i < a->n; i++) {
        ts_gguf_str s;
        ts_gguf_array in;
        int64_t iv;
        double fv;
        if (a->type == TS_GGUF_STRING) {
            CHECK(ts_gguf_array_str(a, i, &s, NULL) == TS_OK);
            touch(s.ptr, s.len);
        } else if (a->type == TS_GGUF_ARRAY) {
            CHECK(ts_gguf_array_arr(a, i, &in, NULL) == TS_OK);
            walk_array(&in);
        } else {
            CHECK(ts_gguf_array_float(a, i, &fv, NULL) == TS_OK);
            ts_status st = ts_gguf_array_int(a, i, &iv, NULL);
            CHECK(st == TS_OK || st == TS_ERR_TYPE || st == TS_ERR_RANGE);
        }
    }
    ts_error err;
    ts_gguf_str s;
    CHECK(ts_gguf_array_str(a, a->n, &s, &err) == TS_ERR_RANGE);
}

static void walk(const ts_gguf *g) {
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        const char *key = ts_gguf_kv_key(g, i);
        CHECK(key != NULL && key[0] != '\0');
        uint64_t found;
        CHECK(ts_gguf_find_key(g, key, &found) == TS_OK && found == i);
        ts_gguf_type t = ts_gguf_kv_type(g, i);
        ts_gguf_str s;
        ts_gguf_array a;
        const void *raw;
        int64_t iv;
        double fv;
        ts_error err;
        if (t == TS_GGUF_STRING) {
            CHECK(ts_gguf_kv_str(g, i, &s, NULL) == TS_OK);
            CHECK(ts_gguf_get_str(g, key, &s, NULL) == TS_OK);
            touch(s.ptr, s.len);
        } else if (t == TS_GGUF_ARRAY) {
            CHECK(ts_gguf_kv_array(g, i, &a, NULL) == TS_OK);
            walk_array(&a);
        } else {
            CHECK(ts_gguf_kv_scalar(g, i, &raw, NULL) == TS_OK);
            touch(raw, 1);
            ts_status st = ts_gguf_get_int(g, key, &iv, &err);
            CHECK(st == TS_OK || st == TS_ERR_TYPE || st == TS_ERR_RANGE);
            st = ts_gguf_get_float(g, key, &fv, &err);
            CHECK(st == TS_OK || st == TS_ERR_TYPE);
        }
    }
    size_t end = ts_gguf_file_size(g);
    const uint8_t *base = ts_gguf_base(g);
    for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        CHECK(t != NULL && t->nbytes > 0);
        CHECK((const uint8_t *)t->data >= base && t->nbytes <= end);
        CHECK((size_t)((const uint8_t *)t->data - base) <= end - t->nbytes);
        touch(t->data, t->nbytes);
        const ts_gguf_tensor *f;
        CHECK(ts_gguf_find_tensor(g, t->name, &f) == TS_OK && f == t);
    }
}

/* Whatever the reader accepts, the writer must re-emit as a file the reader accepts. */
static void rewrite(const ts_gguf *g) {
    ts_gguf_writer *w;
    ts_error err;
    CHECK(ts_gguf_writer_create(&w, &err) == TS_OK);
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        CHECK(ts_gguf_writer_copy_kv(w, g, i, &err) == TS_OK);
    }
    for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        CHECK(ts_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err) ==
              TS_OK);
    }
    void *buf;
    size_t size;
    ts_status st = ts_gguf_writer_write_mem(w, &buf, &size, &err);
    CHECK(st == TS_OK || st == TS_ERR_NOMEM);
    if (st == TS_OK) {
        ts_gguf *g2;
        CHECK(ts_gguf_open_memory(buf, size, &g2, &err) == TS_OK);
        CHECK(ts_gguf_kv_count(g2) == ts_gguf_kv_count(g));
        CHECK(ts_gguf_tensor_count(g2) == ts_gguf_tensor_count(g));
        CHECK(ts_gguf_alignment(g2) == ts_gguf_alignment(g));
        ts_gguf_close(g2);
        free(buf);
    }
    ts_gguf_writer_destroy(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_gguf *g = NULL;
    ts_error err;
    ts_status st = ts_gguf_open_memory(data, size, &g, &err);
    if (st != TS_OK) {
        CHECK(g == NULL && err.status == st && err.msg[0] != '\0');
        return 0;
    }
    walk(g);
    rewrite(g);
    ts_gguf_close(g);
    return 0;
}
