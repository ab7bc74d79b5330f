/*
 * backend.c — checked wrappers around the backend vtable, tensor reads/writes through
 * buffers, and the host-memory buffer implementation shared by host backends.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/backend.h"
#include "quant/quant.h"
#include "util/error.h"

const char *ts_backend_name(const ts_backend *b) {
    return b != NULL ? b->iface->name(b->ctx) : "(null)";
}

void ts_backend_destroy(ts_backend *b) {
    if (b == NULL) {
        return;
    }
    b->iface->destroy(b->ctx);
    free(b);
}

ts_status ts_backend_buffer_alloc(ts_backend *b, size_t size, ts_buffer **out, ts_error *err) {
    if (b == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: buffer_alloc: NULL argument");
    }
    return b->iface->buffer_alloc(b->ctx, size, out, err);
}

ts_status ts_backend_buffer_wrap(ts_backend *b, void *host, size_t size, ts_buffer **out,
                                 ts_error *err) {
    if (b == NULL || out == NULL || host == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: buffer_wrap: NULL argument");
    }
    if (b->iface->buffer_wrap == NULL) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "backend '%s': cannot use host memory directly", ts_backend_name(b));
    }
    return b->iface->buffer_wrap(b->ctx, host, size, out, err);
}

void ts_backend_buffer_free(ts_backend *b, ts_buffer *buf) {
    if (b != NULL && buf != NULL) {
        b->iface->buffer_free(b->ctx, buf);
    }
}

static ts_status check_range(const ts_buffer *buf, size_t offset, size_t size, const char *what,
                             ts_error *err) {
    if (offset > buf->size || size > buf->size - offset) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "backend: %s of %zu bytes at offset %zu exceeds the %zu-byte buffer",
                            what, size, offset, buf->size);
    }
    return TS_OK;
}

ts_status ts_backend_buffer_set(ts_backend *b, ts_buffer *buf, size_t offset, const void *src,
                                size_t size, ts_error *err) {
    if (b == NULL || buf == NULL || (src == NULL && size > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: buffer_set: NULL argument");
    }
    ts_status st = check_range(buf, offset, size, "write", err);
    return st != TS_OK ? st : b->iface->buffer_set(b->ctx, buf, offset, src, size, err);
}

ts_status ts_backend_buffer_get(ts_backend *b, ts_buffer *buf, size_t offset, void *dst,
                                size_t size, ts_error *err) {
    if (b == NULL || buf == NULL || (dst == NULL && size > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: buffer_get: NULL argument");
    }
    ts_status st = check_range(buf, offset, size, "read", err);
    return st != TS_OK ? st : b->iface->buffer_get(b->ctx, buf, offset, dst, size, err);
}

bool ts_backend_supports_op(ts_backend *b, const ts_tensor *node) {
    return b != NULL && node != NULL && b->iface->supports_op(b->ctx, node);
}

ts_status ts_backend_synchronize(ts_backend *b, ts_error *err) {
    if (b == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: synchronize: NULL backend");
    }
    return b->iface->synchronize != NULL ? b->iface->synchronize(b->ctx, err) : TS_OK;
}

ts_status ts_backend_graph_prepare(ts_backend *b, ts_graph *g, ts_error *err) {
    if (b == NULL || g == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: graph_prepare: NULL argument");
    }
    if (b->iface->graph_prepare == NULL) {
        return TS_OK;
    }
    ts_status st = ts_graph_resolve(g, err);
    return st == TS_OK ? b->iface->graph_prepare(b->ctx, g, err) : st;
}

/* Resolves t's storage (buffer, byte offset) through its view chain. */
static ts_status storage_of(ts_tensor *t, ts_buffer **buf, size_t *off, ts_error *err) {
    size_t o = 0;
    ts_tensor *x = t;
    while (x->view_src != NULL) {
        o += x->view_offs;
        x = x->view_src;
    }
    if (x->buffer == NULL) {
        return ts_error_set(err, TS_ERR_STATE,
                            "backend: tensor '%s' has no storage (unbound or graph not allocated)",
                            t->name);
    }
    *buf = x->buffer;
    *off = x->offset + o;
    return TS_OK;
}

static ts_status tensor_io(ts_backend *b, ts_tensor *t, size_t offset, void *data, size_t size,
                           bool write, ts_error *err) {
    if (b == NULL || t == NULL || (data == NULL && size > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: tensor %s: NULL argument",
                            write ? "set" : "get");
    }
    size_t span = ts_tensor_span(t);
    if (offset > span || size > span - offset) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "backend: tensor '%s': %zu bytes at offset %zu exceed its %zu bytes",
                            t->name, size, offset, span);
    }
    ts_buffer *buf = NULL;
    size_t base = 0;
    ts_status st = storage_of(t, &buf, &base, err);
    if (st != TS_OK) {
        return st;
    }
    return write ? ts_backend_buffer_set(b, buf, base + offset, data, size, err)
                 : ts_backend_buffer_get(b, buf, base + offset, data, size, err);
}

ts_status ts_backend_tensor_set(ts_backend *b, ts_tensor *t, size_t offset, const void *src,
                                size_t size, ts_error *err) {
    return tensor_io(b, t, offset, (void *)src, size, true, err);
}

ts_status ts_backend_tensor_get(ts_backend *b, ts_tensor *t, size_t offset, void *dst, size_t size,
                                ts_error *err) {
    return tensor_io(b, t, offset, dst, size, false, err);
}

/* Converts element counts and checks the caller's array length. */
static ts_status check_count(const ts_tensor *t, int64_t n, ts_error *err) {
    if (n != ts_tensor_nelements(t)) {
        return ts_error_set(err, TS_ERR_RANGE, "backend: tensor '%s' has %lld elements, not %lld",
                            t->name, (long long)ts_tensor_nelements(t), (long long)n);
    }
    return TS_OK;
}

ts_status ts_backend_tensor_get_f32(ts_backend *b, ts_tensor *t, float *dst, int64_t n,
                                    ts_error *err) {
    if (t == NULL || dst == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: get_f32: NULL argument");
    }
    ts_status st = check_count(t, n, err);
    if (st != TS_OK) {
        return st;
    }
    const ts_quant_ops *q = NULL;
    bool block = ts_type_block_size(t->type) > 1;
    if (block || (t->type != TS_TYPE_F32 && t->type != TS_TYPE_F16 && t->type != TS_TYPE_BF16 &&
                  t->type != TS_TYPE_I32)) {
        q = ts_quant_ops_get(t->type, TS_ISA_SCALAR);
        if (q == NULL || q->to_float == NULL || !ts_tensor_rows_contiguous(t)) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "backend: tensor '%s': cannot read %s",
                                t->name, ts_type_name(t->type));
        }
    }
    size_t span = ts_tensor_span(t);
    char *img = malloc(span ? span : 1);
    if (img == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "backend: get_f32: out of memory");
    }
    st = ts_backend_tensor_get(b, t, 0, img, span, err);
    int64_t k = 0;
    for (int64_t i3 = 0; st == TS_OK && i3 < t->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                const char *row = img + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (q != NULL) {
                    q->to_float(row, dst + k, t->ne[0]);
                    k += t->ne[0];
                    continue;
                }
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const char *p = row + i0 * t->nb[0];
                    uint16_t h;
                    switch (t->type) {
                    case TS_TYPE_F32:
                        memcpy(&dst[k], p, 4);
                        break;
                    case TS_TYPE_I32: {
                        int32_t v;
                        memcpy(&v, p, 4);
                        dst[k] = (float)v;
                        break;
                    }
                    case TS_TYPE_F16:
                        memcpy(&h, p, 2);
                        dst[k] = ts_f16_to_f32(h);
                        break;
                    default:
                        memcpy(&h, p, 2);
                        dst[k] = ts_bf16_to_f32(h);
                        break;
                    }
                    k++;
                }
            }
        }
    }
    free(img);
    return st;
}

ts_status ts_backend_tensor_set_f32(ts_backend *b, ts_tensor *t, const float *src, int64_t n,
                                    ts_error *err) {
    if (t == NULL || src == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "backend: set_f32: NULL argument");
    }
    ts_status st = check_count(t, n, err);
    if (st != TS_OK) {
        return st;
    }
    const ts_quant_ops *q = NULL;
    if (t->type != TS_TYPE_F32 && t->type != TS_TYPE_F16 && t->type != TS_TYPE_BF16 &&
        t->type != TS_TYPE_I32) {
        q = ts_quant_ops_get(t->type, TS_ISA_SCALAR);
        if (q == NULL || q->from_float == NULL || !ts_tensor_rows_contiguous(t)) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "backend: tensor '%s': cannot write %s",
                                t->name, ts_type_name(t->type));
        }
    }
    size_t span = ts_tensor_span(t);
    char *img = malloc(span ? span : 1);
    if (img == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "backend: set_f32: out of memory");
    }
    /* Read first so that bytes between strided elements keep their values. */
    st = ts_backend_tensor_get(b, t, 0, img, span, err);
    int64_t k = 0;
    for (int64_t i3 = 0; st == TS_OK && i3 < t->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                char *row = img + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (q != NULL) {
                    q->from_float(src + k, row, t->ne[0]);
                    k += t->ne[0];
                    continue;
                }
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    char *p = row + i0 * t->nb[0];
                    uint16_t h;
                    switch (t->type) {
                    case TS_TYPE_F32:
                        memcpy(p, &src[k], 4);
                        break;
                    case TS_TYPE_I32: {
                        int32_t v = (int32_t)lrintf(src[k]);
                        memcpy(p, &v, 4);
                        break;
                    }
                    case TS_TYPE_F16:
                        h = ts_f32_to_f16(src[k]);
                        memcpy(p, &h, 2);
                        break;
                    default:
                        h = ts_f32_to_bf16(src[k]);
                        memcpy(p, &h, 2);
                        break;
                    }
                    k++;
                }
            }
        }
    }
    if (st == TS_OK) {
        st = ts_backend_tensor_set(b, t, 0, img, span, err);
    }
    free(img);
    return st;
}

/* ---- host buffers ---- */

static ts_status host_new(void *mem, size_t size, bool owned, const char *name, ts_buffer **out,
                          ts_error *err) {
    ts_buffer *buf = calloc(1, sizeof *buf);
    if (buf == NULL) {
        if (owned) {
            free(mem);
        }
        return ts_error_set(err, TS_ERR_NOMEM, "%s: out of memory for a buffer", name);
    }
    buf->host = mem;
    buf->size = size;
    buf->owned = owned;
    buf->backend_name = name;
    *out = buf;
    return TS_OK;
}

ts_status ts_host_buffer_alloc(size_t size, const char *backend_name, ts_buffer **out,
                               ts_error *err) {
    size_t rounded = (size + 63) / 64 * 64;
    if (rounded < size) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "%s: buffer of %zu bytes", backend_name, size);
    }
    void *mem = aligned_alloc(64, rounded ? rounded : 64);
    if (mem == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "%s: cannot allocate %zu bytes", backend_name, size);
    }
    return host_new(mem, size, true, backend_name, out, err);
}

ts_status ts_host_buffer_wrap(void *host, size_t size, const char *backend_name, ts_buffer **out,
                              ts_error *err) {
    return host_new(host, size, false, backend_name, out, err);
}

void ts_host_buffer_free(ts_buffer *buf) {
    if (buf == NULL) {
        return;
    }
    if (buf->owned) {
        free(buf->host);
    }
    free(buf);
}

ts_status ts_host_buffer_set(ts_buffer *buf, size_t offset, const void *src, size_t size,
                             ts_error *err) {
    (void)err;
    if (size > 0) {
        memcpy((char *)buf->host + offset, src, size);
    }
    return TS_OK;
}

ts_status ts_host_buffer_get(ts_buffer *buf, size_t offset, void *dst, size_t size, ts_error *err) {
    (void)err;
    if (size > 0) {
        memcpy(dst, (char *)buf->host + offset, size);
    }
    return TS_OK;
}
