/*
 * raw_builder.h — assembles GGUF bytes field by field, for tests that need files the writer
 * would refuse to produce (bad magic, hostile counts, overlapping tensors...).
 *
 * A rb grows as needed; every helper appends little-endian fields. Test-only: allocation
 * failures end the test through cmocka's assert.
 */
#ifndef TS_TESTS_GGUF_RAW_BUILDER_H
#define TS_TESTS_GGUF_RAW_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct rb {
    uint8_t *p;
    size_t n;
    size_t cap;
} rb;

static inline void rb_bytes(rb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 256;
        while (cap < b->n + n) {
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        assert_non_null(p);
        b->p = p;
        b->cap = cap;
    }
    if (n != 0) {
        memcpy(b->p + b->n, src, n);
    }
    b->n += n;
}

static inline void rb_u8(rb *b, uint8_t v) {
    rb_bytes(b, &v, 1);
}

static inline void rb_u32(rb *b, uint32_t v) {
    uint8_t t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    rb_bytes(b, t, 4);
}

static inline void rb_u64(rb *b, uint64_t v) {
    uint8_t t[8];
    for (int i = 0; i < 8; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    rb_bytes(b, t, 8);
}

/* A GGUF string: u64 length then the bytes. */
static inline void rb_str(rb *b, const char *s) {
    rb_u64(b, strlen(s));
    rb_bytes(b, s, strlen(s));
}

static inline void rb_header(rb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    rb_bytes(b, "GGUF", 4);
    rb_u32(b, version);
    rb_u64(b, n_tensors);
    rb_u64(b, n_kv);
}

static inline void rb_kv_u32(rb *b, const char *key, uint32_t v) {
    rb_str(b, key);
    rb_u32(b, 4); /* UINT32 */
    rb_u32(b, v);
}

static inline void rb_kv_str(rb *b, const char *key, const char *v) {
    rb_str(b, key);
    rb_u32(b, 8); /* STRING */
    rb_str(b, v);
}

/* A tensor info record with up to 4 dims. */
static inline void rb_tensor(rb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                             uint32_t type, uint64_t offset) {
    rb_str(b, name);
    rb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) {
        rb_u64(b, ne[d]);
    }
    rb_u32(b, type);
    rb_u64(b, offset);
}

/* Zero bytes up to a multiple of `align`. */
static inline void rb_pad(rb *b, size_t align) {
    while (b->n % align != 0) {
        rb_u8(b, 0);
    }
}

static inline void rb_zeros(rb *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rb_u8(b, 0);
    }
}

static inline void rb_free(rb *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

#endif /* TS_TESTS_GGUF_RAW_BUILDER_H */
