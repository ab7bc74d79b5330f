/*
 * gguf_emit.c — the writer's tensors and its output: layout, file and memory sinks.
 *
 * Layout is computed before a byte is written: header and info sizes, the padded start of the
 * data section, and each tensor's aligned offset, all with overflow checks. Output then goes
 * to one sink, either a buffer of exactly the computed size or a temporary file that is
 * flushed, synced and renamed over the target only when everything was written.
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

ts_status ts_gguf_writer_add_tensor(ts_gguf_writer *w, const char *name, ts_type type,
                                    uint32_t n_dims, const int64_t *ne, const void *data,
                                    ts_error *err) {
    if (w == NULL || name == NULL || (ne == NULL && n_dims != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: add_tensor: NULL argument");
    }
    if (name[0] == '\0') {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: empty tensor name");
    }
    char what[GGUF_SHOW_BUF + 32];
    char shown[GGUF_SHOW_BUF];
    gguf_show_name(shown, (const uint8_t *)name, strlen(name));
    snprintf(what, sizeof what, "gguf writer: tensor '%s'", shown);
    uint64_t dims[TS_GGUF_MAX_DIMS] = {0};
    for (uint32_t d = 0; d < n_dims && d < TS_GGUF_MAX_DIMS; d++) {
        if (ne[d] < 1) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "%s: dimension %" PRIu32 " is %" PRId64 ", must be at least 1",
                                what, d, ne[d]);
        }
        dims[d] = (uint64_t)ne[d];
    }
    uint64_t n;
    size_t nbytes;
    ts_status st = gguf_tensor_shape(what, (uint32_t)type, n_dims, dims, &n, &nbytes, err);
    if (st == TS_ERR_FORMAT) {
        /* A bad shape handed to the writer is the caller's argument, not a malformed file. */
        err->status = TS_ERR_INVALID_ARG;
        return TS_ERR_INVALID_ARG;
    }
    if (st != TS_OK) {
        return st;
    }
    uint64_t first;
    if (gguf_names_find(&w->t_names, name, &first)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "%s: duplicate tensor name", what);
    }
    wtensor *grown = gguf_grow(w->t, &w->cap_t, w->n_t, sizeof *w->t);
    if (grown == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    w->t = grown;
    wtensor t = {
        .name = strdup(name), .type = type, .n_dims = n_dims, .nbytes = nbytes, .data = data};
    memcpy(t.ne, dims, sizeof dims);
    if (t.name == NULL || gguf_names_insert(&w->t_names, t.name, w->n_t, &first) != TS_OK) {
        free(t.name);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    w->t[w->n_t++] = t;
    return TS_OK;
}

/* ---- layout ------------------------------------------------------------------------------ */

typedef struct layout {
    size_t info_end;   /* bytes of header, metadata and tensor infos */
    size_t data_start; /* info_end padded to the alignment */
    size_t total;      /* file size */
    size_t max_fill;   /* largest tensor the fill callback must produce (scratch for files) */
} layout;

static bool add_sz(size_t *acc, size_t v) {
    if (v > SIZE_MAX - *acc) {
        return false;
    }
    *acc += v;
    return true;
}

static bool align_up(size_t *v, size_t a) {
    return add_sz(v, (a - *v % a) % a);
}

static ts_status compute_layout(ts_gguf_writer *w, layout *l, ts_error *err) {
    *l = (layout){.info_end = GGUF_HEADER_BYTES};
    bool ok = true;
    for (size_t i = 0; i < w->n_kv && ok; i++) {
        ok = add_sz(&l->info_end, 8 + 4) && add_sz(&l->info_end, strlen(w->kv[i].key)) &&
             add_sz(&l->info_end, w->kv[i].len);
    }
    for (size_t i = 0; i < w->n_t && ok; i++) {
        const wtensor *t = &w->t[i];
        ok = add_sz(&l->info_end, 8 + 4 + 8 * (size_t)t->n_dims + 4 + 8) &&
             add_sz(&l->info_end, strlen(t->name));
    }
    l->data_start = l->info_end;
    /* Without tensors there is no data section to align (a file may declare any power-of-two
     * alignment up to 2^31; padding an empty section to it would write gigabytes of zeros). */
    ok = ok && (w->n_t == 0 || align_up(&l->data_start, w->alignment));
    size_t off = 0;
    for (size_t i = 0; i < w->n_t && ok; i++) {
        wtensor *t = &w->t[i];
        if (t->data == NULL && w->fill == NULL) {
            return ts_error_set(err, TS_ERR_STATE,
                                "gguf writer: tensor %zu '%s' has no data and no fill callback "
                                "is set",
                                i, t->name);
        }
        if (t->data == NULL && t->nbytes > l->max_fill) {
            l->max_fill = t->nbytes;
        }
        t->offset = off;
        ok = add_sz(&off, t->nbytes) && align_up(&off, w->alignment);
    }
    l->total = l->data_start;
    if (!ok || !add_sz(&l->total, off)) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "gguf writer: file size overflows size_t");
    }
    return TS_OK;
}

/* ---- sinks ------------------------------------------------------------------------------- */

typedef struct sink {
    uint8_t *buf;     /* memory sink, or NULL */
    FILE *f;          /* file sink, or NULL */
    uint8_t *scratch; /* file sink: room for the largest filled tensor */
    size_t pos;
    const char *path; /* for messages */
    ts_error *err;
} sink;

static ts_status put(sink *s, const void *p, size_t n) {
    if (n == 0) {
        return TS_OK;
    }
    if (s->buf != NULL) {
        memcpy(s->buf + s->pos, p, n);
    } else if (fwrite(p, 1, n, s->f) != n) {
        return ts_error_set(s->err, TS_ERR_IO, "gguf writer: writing '%s' failed: %s", s->path,
                            strerror(errno));
    }
    s->pos += n;
    return TS_OK;
}

static ts_status put_u32(sink *s, uint32_t v) {
    uint8_t b[4];
    gguf_wr32(b, v);
    return put(s, b, 4);
}

static ts_status put_u64(sink *s, uint64_t v) {
    uint8_t b[8];
    gguf_wr64(b, v);
    return put(s, b, 8);
}

static ts_status put_str(sink *s, const char *str) {
    size_t n = strlen(str);
    ts_status st = put_u64(s, n);
    return st != TS_OK ? st : put(s, str, n);
}

static ts_status pad_to(sink *s, size_t target) {
    static const uint8_t zeros[64];
    ts_status st = TS_OK;
    while (s->pos < target && st == TS_OK) {
        size_t n = target - s->pos < sizeof zeros ? target - s->pos : sizeof zeros;
        st = put(s, zeros, n);
    }
    return st;
}

static ts_status put_tensor_data(ts_gguf_writer *w, sink *s, size_t i) {
    const wtensor *t = &w->t[i];
    if (t->data != NULL) {
        return put(s, t->data, t->nbytes);
    }
    uint8_t *dst = s->buf != NULL ? s->buf + s->pos : s->scratch;
    ts_status st = w->fill(w->fill_ctx, i, dst, t->nbytes, s->err);
    if (st != TS_OK) {
        if (s->err->status != st) {
            ts_error_set(s->err, st, "the fill callback failed without a message");
        }
        ts_error_prefix(s->err, "gguf writer: tensor %zu '%s': ", i, t->name);
        return st;
    }
    if (s->buf != NULL) {
        s->pos += t->nbytes;
        return TS_OK;
    }
    return put(s, dst, t->nbytes);
}

static ts_status emit(ts_gguf_writer *w, const layout *l, sink *s) {
    ts_status st = put(s, "GGUF", 4);
    st = st == TS_OK ? put_u32(s, 3) : st;
    st = st == TS_OK ? put_u64(s, w->n_t) : st;
    st = st == TS_OK ? put_u64(s, w->n_kv) : st;
    for (size_t i = 0; i < w->n_kv && st == TS_OK; i++) {
        st = put_str(s, w->kv[i].key);
        st = st == TS_OK ? put_u32(s, w->kv[i].type) : st;
        st = st == TS_OK ? put(s, w->kv[i].bytes, w->kv[i].len) : st;
    }
    for (size_t i = 0; i < w->n_t && st == TS_OK; i++) {
        const wtensor *t = &w->t[i];
        st = put_str(s, t->name);
        st = st == TS_OK ? put_u32(s, t->n_dims) : st;
        for (uint32_t d = 0; d < t->n_dims && st == TS_OK; d++) {
            st = put_u64(s, t->ne[d]);
        }
        st = st == TS_OK ? put_u32(s, (uint32_t)t->type) : st;
        st = st == TS_OK ? put_u64(s, t->offset) : st;
    }
    st = st == TS_OK ? pad_to(s, l->data_start) : st;
    for (size_t i = 0; i < w->n_t && st == TS_OK; i++) {
        st = pad_to(s, l->data_start + (size_t)w->t[i].offset);
        st = st == TS_OK ? put_tensor_data(w, s, i) : st;
    }
    st = st == TS_OK ? pad_to(s, l->total) : st;
    return st;
}

ts_status ts_gguf_writer_write_mem(ts_gguf_writer *w, void **out, size_t *size, ts_error *err) {
    if (w == NULL || out == NULL || size == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: write_mem: NULL argument");
    }
    *out = NULL;
    *size = 0;
    layout l;
    ts_status st = compute_layout(w, &l, err);
    if (st != TS_OK) {
        return st;
    }
    uint8_t *buf = malloc(l.total);
    if (buf == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory (%zu bytes)", l.total);
    }
    sink s = {.buf = buf, .path = "(memory)", .err = err};
    st = emit(w, &l, &s);
    if (st != TS_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *size = l.total;
    return TS_OK;
}

ts_status ts_gguf_writer_write(ts_gguf_writer *w, const char *path, ts_error *err) {
    if (w == NULL || path == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf writer: write: NULL argument");
    }
    layout l;
    ts_status st = compute_layout(w, &l, err);
    if (st != TS_OK) {
        return st;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".tmp.XXXXXX");
    uint8_t *scratch = malloc(l.max_fill != 0 ? l.max_fill : 1);
    if (tmp == NULL || scratch == NULL) {
        free(tmp);
        free(scratch);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f == NULL) {
        st = ts_error_set(err, TS_ERR_IO, "gguf writer: cannot create '%s': %s", tmp,
                          strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        free(scratch);
        return st;
    }
    sink s = {.f = f, .scratch = scratch, .path = tmp, .err = err};
    st = emit(w, &l, &s);
    if (st == TS_OK && (fflush(f) != 0 || fchmod(fd, 0644) != 0 || fsync(fd) != 0)) {
        st = ts_error_set(err, TS_ERR_IO, "gguf writer: writing '%s' failed: %s", tmp,
                          strerror(errno));
    }
    if (fclose(f) != 0 && st == TS_OK) {
        st = ts_error_set(err, TS_ERR_IO, "gguf writer: closing '%s' failed: %s", tmp,
                          strerror(errno));
    }
    if (st == TS_OK && rename(tmp, path) != 0) {
        st = ts_error_set(err, TS_ERR_IO, "gguf writer: cannot rename '%s' to '%s': %s", tmp, path,
                          strerror(errno));
    }
    if (st != TS_OK) {
        unlink(tmp);
    }
    free(tmp);
    free(scratch);
    return st;
}
