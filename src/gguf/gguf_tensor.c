/*
 * gguf_tensor.c — validating tensor infos and looking tensors up.
 *
 * A tensor is accepted only when its type is known, every dimension is at least 1, the element
 * count and byte size fit (int64 and size_t), ne[0] is a whole number of blocks, its offset is
 * a multiple of the file's alignment, its bytes lie inside the file, and no other tensor's
 * bytes overlap them. After that, t->data is a zero-copy pointer that can be read for
 * t->nbytes bytes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

ts_status gguf_tensor_shape(const char *what, uint32_t type, uint32_t n_dims, const uint64_t *dims,
                            uint64_t *n_elements, size_t *nbytes, ts_error *err) {
    if (!ts_type_valid(type)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: unknown tensor type id %" PRIu32, what,
                            type);
    }
    if (n_dims < 1 || n_dims > TS_GGUF_MAX_DIMS) {
        return ts_error_set(err, TS_ERR_FORMAT, "%s: n_dims %" PRIu32 " is outside 1..%d", what,
                            n_dims, TS_GGUF_MAX_DIMS);
    }
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t v = dims[d];
        if (v == 0) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "%s: dimension %" PRIu32 " is 0 (every dimension must be at "
                                "least 1)",
                                what, d);
        }
        if (v > (uint64_t)INT64_MAX || n > (uint64_t)INT64_MAX / v) {
            return ts_error_set(err, TS_ERR_OVERFLOW,
                                "%s: element count overflows int64 at dimension %" PRIu32
                                " (%" PRIu64 ")",
                                what, d, v);
        }
        n *= v;
    }
    size_t bs = ts_type_block_size(type);
    if (dims[0] % bs != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "%s: ne[0] = %" PRIu64 " is not a multiple of the %s block size %zu",
                            what, dims[0], ts_type_name(type), bs);
    }
    size_t row;
    uint64_t rows = n / dims[0];
    if (!ts_type_row_bytes(type, dims[0], &row) || (rows != 0 && row > SIZE_MAX / rows)) {
        return ts_error_set(err, TS_ERR_OVERFLOW,
                            "%s: byte size of %" PRIu64 " %s elements overflows size_t", what, n,
                            ts_type_name(type));
    }
    *n_elements = n;
    *nbytes = row * (size_t)rows;
    return TS_OK;
}

ts_status gguf_tensor_init(const ts_gguf *g, const gguf_tensor_info *info, ts_gguf_tensor *t,
                           ts_error *err) {
    char nm[GGUF_SHOW_BUF]; /* the name as quoted in messages */
    gguf_show_name(nm, (const uint8_t *)info->name, strlen(info->name));
    char what[GGUF_SHOW_BUF + 64];
    snprintf(what, sizeof what, "gguf: tensor %" PRIu64 " '%s' at offset 0x%zx", info->index, nm,
             info->offset);
    uint64_t n;
    size_t nbytes;
    ts_status st = gguf_tensor_shape(what, info->type, info->n_dims, info->dims, &n, &nbytes, err);
    if (st != TS_OK) {
        return st;
    }
    uint64_t off = info->data_off;
    if (off % g->alignment != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "%s: data offset 0x%" PRIx64 " is not a multiple of the alignment %zu",
                            what, off, g->alignment);
    }
    size_t avail = g->size - g->data_offset; /* data_offset <= size is checked by the caller */
    if (off > avail || nbytes > avail - (size_t)off) {
        uint64_t file_off = off <= UINT64_MAX - g->data_offset ? off + g->data_offset : off;
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: tensor %" PRIu64 " '%s': data [offset 0x%" PRIx64
                            ", %zu bytes] runs past end of file (%zu bytes)",
                            info->index, nm, file_off, nbytes, g->size);
    }
    t->name = info->name;
    t->type = (ts_type)info->type;
    t->n_dims = info->n_dims;
    for (uint32_t d = 0; d < TS_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < info->n_dims ? (int64_t)info->dims[d] : 1;
    }
    t->n_elements = n;
    t->offset = off;
    t->nbytes = nbytes;
    t->data = g->base + g->data_offset + off;
    return TS_OK;
}

typedef struct span {
    uint64_t offset;
    uint64_t index;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->offset != y->offset) {
        return x->offset < y->offset ? -1 : 1;
    }
    return x->index < y->index ? -1 : (x->index > y->index);
}

ts_status gguf_check_overlaps(const ts_gguf *g, ts_error *err) {
    if (g->n_tensors < 2) {
        return TS_OK;
    }
    span *s = malloc((size_t)g->n_tensors * sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf: out of memory checking tensor overlaps");
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        s[i] = (span){g->tensors[i].offset, i};
    }
    qsort(s, (size_t)g->n_tensors, sizeof *s, cmp_span);
    ts_status st = TS_OK;
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        const ts_gguf_tensor *a = &g->tensors[s[i - 1].index];
        const ts_gguf_tensor *b = &g->tensors[s[i].index];
        /* Both ranges lie inside the file, so these sums cannot overflow. */
        if (a->offset + a->nbytes > b->offset) {
            char na[GGUF_SHOW_BUF], nb[GGUF_SHOW_BUF];
            gguf_show_name(na, (const uint8_t *)a->name, strlen(a->name));
            gguf_show_name(nb, (const uint8_t *)b->name, strlen(b->name));
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "gguf: tensor %" PRIu64 " '%s': data [offset 0x%zx, %zu bytes] "
                              "overlaps tensor %" PRIu64 " '%s' [offset 0x%zx, %zu bytes]",
                              s[i].index, nb, g->data_offset + (size_t)b->offset, b->nbytes,
                              s[i - 1].index, na, g->data_offset + (size_t)a->offset, a->nbytes);
            break;
        }
    }
    free(s);
    return st;
}

uint64_t ts_gguf_tensor_count(const ts_gguf *g) {
    return g->n_tensors;
}

const ts_gguf_tensor *ts_gguf_tensor_at(const ts_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

ts_status ts_gguf_find_tensor(const ts_gguf *g, const char *name, const ts_gguf_tensor **out) {
    uint64_t i;
    if (!gguf_names_find(&g->tensor_names, name, &i)) {
        return TS_ERR_NOT_FOUND;
    }
    *out = &g->tensors[i];
    return TS_OK;
}
