/*
 * gguf_write.c — building GGUF v3 files.
 *
 * Metadata values are stored encoded (the bytes that follow the value-type field in a file) as
 * they are added, so writing is a matter of laying out sizes and copying. Layout: header,
 * entries in the order added, tensor infos, zero padding to the alignment, then each tensor's
 * data at an aligned offset, each followed by zero padding to the alignment. Sizes are computed
 * first (with overflow checks) so write_mem allocates once and a file is written in one pass.
 * Files go to a temporary name in the same directory and are renamed into place only when
 * complete.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

ts_status ts_gguf_writer_create(ts_gguf_writer **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: NULL argument");
    }
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    (*out)->alignment = TS_GGUF_DEFAULT_ALIGNMENT;
    return TS_OK;
}

void ts_gguf_writer_destroy(ts_gguf_writer *w) {
    if (w == NULL) {
        return;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].bytes);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
    }
    free(w->kv);
    free(w->t);
    gguf_names_free(&w->kv_names);
    gguf_names_free(&w->t_names);
    free(w);
}

void ts_gguf_writer_set_fill(ts_gguf_writer *w, ts_gguf_fill_fn fn, void *ctx) {
    w->fill = fn;
    w->fill_ctx = ctx;
}

void *gguf_grow(void *items, size_t *cap, size_t n, size_t size) {
    if (n < *cap) {
        return items;
    }
    size_t nc = *cap != 0 ? *cap * 2 : 16;
    if (nc > SIZE_MAX / size) {
        return NULL;
    }
    void *p = realloc(items, nc * size);
    if (p != NULL) {
        *cap = nc;
    }
    return p;
}

static bool valid_alignment(uint32_t a) {
    return a != 0 && (a & (a - 1)) == 0;
}

/* Every entry goes through here: checks the key, keeps general.alignment and the writer's
 * alignment in step, rejects duplicates, and copies key and encoded bytes. */
static ts_status add_kv(ts_gguf_writer *w, const char *key, uint32_t type, const void *bytes,
                        size_t len, ts_error *err) {
    if (w == NULL || key == NULL || (bytes == NULL && len != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: NULL argument");
    }
    if (key[0] == '\0') {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: empty key");
    }
    uint64_t existing = UINT64_MAX;
    bool known = gguf_names_find(&w->kv_names, key, &existing);
    if (strcmp(key, "general.alignment") == 0) {
        if (type != TS_GGUF_UINT32 || !valid_alignment(gguf_rd32(bytes))) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "gguf writer: general.alignment must be a uint32 power of two");
        }
        w->alignment = gguf_rd32(bytes);
        if (known) {
            memcpy(w->kv[existing].bytes, bytes, 4);
            return TS_OK;
        }
    } else if (known) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: duplicate key '%s'", key);
    }
    wkv *grown = gguf_grow(w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv);
    if (grown == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    w->kv = grown;
    wkv e = {.key = strdup(key), .type = type, .bytes = malloc(len != 0 ? len : 1), .len = len};
    if (e.key == NULL || e.bytes == NULL ||
        gguf_names_insert(&w->kv_names, e.key, w->n_kv, &existing) != TS_OK) {
        free(e.key);
        free(e.bytes);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    if (len != 0) {
        memcpy(e.bytes, bytes, len);
    }
    w->kv[w->n_kv++] = e;
    return TS_OK;
}

ts_status ts_gguf_writer_set_alignment(ts_gguf_writer *w, uint32_t alignment, ts_error *err) {
    if (!valid_alignment(alignment)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "gguf writer: alignment %" PRIu32 " is not a nonzero power of two",
                            alignment);
    }
    uint8_t b[4];
    gguf_wr32(b, alignment);
    return add_kv(w, "general.alignment", TS_GGUF_UINT32, b, 4, err);
}

ts_status ts_gguf_writer_add_scalar(ts_gguf_writer *w, const char *key, ts_gguf_type type,
                                    const void *value, ts_error *err) {
    size_t sz = gguf_scalar_size(type);
    if (sz == 0 || value == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "gguf writer: key '%s': add_scalar needs a scalar type and a value, "
                            "got %s",
                            key != NULL ? key : "(null)", ts_gguf_type_name(type));
    }
    if (type == TS_GGUF_BOOL) {
        uint8_t b = *(const uint8_t *)value != 0;
        return add_kv(w, key, type, &b, 1, err);
    }
    return add_kv(w, key, type, value, sz, err);
}

ts_status ts_gguf_writer_add_u32(ts_gguf_writer *w, const char *key, uint32_t v, ts_error *err) {
    return ts_gguf_writer_add_scalar(w, key, TS_GGUF_UINT32, &v, err);
}

ts_status ts_gguf_writer_add_i32(ts_gguf_writer *w, const char *key, int32_t v, ts_error *err) {
    return ts_gguf_writer_add_scalar(w, key, TS_GGUF_INT32, &v, err);
}

ts_status ts_gguf_writer_add_u64(ts_gguf_writer *w, const char *key, uint64_t v, ts_error *err) {
    return ts_gguf_writer_add_scalar(w, key, TS_GGUF_UINT64, &v, err);
}

ts_status ts_gguf_writer_add_f32(ts_gguf_writer *w, const char *key, float v, ts_error *err) {
    return ts_gguf_writer_add_scalar(w, key, TS_GGUF_FLOAT32, &v, err);
}

ts_status ts_gguf_writer_add_bool(ts_gguf_writer *w, const char *key, bool v, ts_error *err) {
    uint8_t b = v;
    return ts_gguf_writer_add_scalar(w, key, TS_GGUF_BOOL, &b, err);
}

ts_status ts_gguf_writer_add_str(ts_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                 ts_error *err) {
    if (s == NULL && len != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: NULL string");
    }
    if (len > SIZE_MAX - 8) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "gguf writer: string too long");
    }
    uint8_t *b = malloc(8 + (size_t)len);
    if (b == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    gguf_wr64(b, len);
    if (len != 0) {
        memcpy(b + 8, s, (size_t)len);
    }
    ts_status st = add_kv(w, key, TS_GGUF_STRING, b, 8 + (size_t)len, err);
    free(b);
    return st;
}

ts_status ts_gguf_writer_add_cstr(ts_gguf_writer *w, const char *key, const char *s,
                                  ts_error *err) {
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: NULL string");
    }
    return ts_gguf_writer_add_str(w, key, s, strlen(s), err);
}

ts_status ts_gguf_writer_add_array(ts_gguf_writer *w, const char *key, ts_gguf_type elem_type,
                                   const void *data, uint64_t n, ts_error *err) {
    size_t sz = gguf_scalar_size(elem_type);
    if (sz == 0 || (data == NULL && n != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "gguf writer: key '%s': add_array needs fixed-size elements and data, "
                            "got %s",
                            key != NULL ? key : "(null)", ts_gguf_type_name(elem_type));
    }
    if (n > (SIZE_MAX - 12) / sz) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "gguf writer: array too large");
    }
    size_t len = 12 + (size_t)n * sz;
    uint8_t *b = malloc(len);
    if (b == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    gguf_wr32(b, elem_type);
    gguf_wr64(b + 4, n);
    if (n != 0) {
        memcpy(b + 12, data, (size_t)n * sz);
    }
    if (elem_type == TS_GGUF_BOOL) {
        for (size_t i = 0; i < n; i++) {
            b[12 + i] = b[12 + i] != 0;
        }
    }
    ts_status st = add_kv(w, key, TS_GGUF_ARRAY, b, len, err);
    free(b);
    return st;
}

ts_status ts_gguf_writer_add_str_array(ts_gguf_writer *w, const char *key, const char *const *strs,
                                       uint64_t n, ts_error *err) {
    if (strs == NULL && n != 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: NULL string array");
    }
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (strs[i] == NULL) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "gguf writer: key '%s': string %" PRIu64 " is NULL",
                                key != NULL ? key : "(null)", i);
        }
        size_t sl = strlen(strs[i]);
        if (sl > SIZE_MAX - 8 - len) {
            return ts_error_set(err, TS_ERR_OVERFLOW, "gguf writer: string array too large");
        }
        len += 8 + sl;
    }
    uint8_t *b = malloc(len);
    if (b == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    gguf_wr32(b, TS_GGUF_STRING);
    gguf_wr64(b + 4, n);
    size_t o = 12;
    for (uint64_t i = 0; i < n; i++) {
        size_t sl = strlen(strs[i]);
        gguf_wr64(b + o, sl);
        memcpy(b + o + 8, strs[i], sl);
        o += 8 + sl;
    }
    ts_status st = add_kv(w, key, TS_GGUF_ARRAY, b, len, err);
    free(b);
    return st;
}

ts_status ts_gguf_writer_copy_kv(ts_gguf_writer *w, const ts_gguf *src, uint64_t i, ts_error *err) {
    if (src == NULL || i >= src->n_kv) {
        return ts_error_set(err, TS_ERR_RANGE, "gguf writer: copy_kv: no entry %" PRIu64, i);
    }
    const gguf_kv *kv = &src->kv[i];
    return add_kv(w, kv->key, kv->type, kv->value, kv->value_len, err);
}

ts_status ts_gguf_writer_add_encoded(ts_gguf_writer *w, const char *key, ts_gguf_type type,
                                     const void *bytes, size_t len, ts_error *err) {
    if (bytes == NULL || (uint32_t)type >= TS_GGUF_TYPE_COUNT) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "gguf writer: add_encoded needs bytes and a valid value type");
    }
    char what[GGUF_SHOW_BUF + 32];
    snprintf(what, sizeof what, "encoded value for '%s'", key != NULL ? key : "(null)");
    gguf_scan s = {.base = bytes, .size = len, .err = err, .what = what};
    size_t pos = 0;
    ts_status st = gguf_scan_value(&s, &pos, type, NULL);
    if (st != TS_OK) {
        return st;
    }
    if (pos != len) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf writer: %s: %zu bytes follow the %zu-byte value", what, len - pos,
                            pos);
    }
    return add_kv(w, key, type, bytes, len, err);
}
