/*
 * gguf_value.c — validating GGUF metadata values: scalars, strings and (nested) arrays.
 *
 * Every length and count is compared with the bytes that remain after it before anything
 * depends on it: a count of n elements of a type whose smallest encoding is m bytes is only
 * accepted when n <= remaining / m, so the work and the descriptor memory that follow are
 * bounded by the buffer size. Nesting is limited to GGUF_MAX_NESTING levels so the recursion
 * depth is a small constant whatever the input.
 */
#include <inttypes.h>
#include <stdio.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

static const char *const k_type_names[TS_GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

static const uint8_t k_scalar_sizes[TS_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *ts_gguf_type_name(uint32_t type) {
    return type < TS_GGUF_TYPE_COUNT ? k_type_names[type] : "invalid";
}

size_t gguf_scalar_size(uint32_t type) {
    return type < TS_GGUF_TYPE_COUNT ? k_scalar_sizes[type] : 0;
}

void gguf_show_name(char *buf, const uint8_t *p, uint64_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    uint64_t shown = len < GGUF_NAME_SHOW ? len : GGUF_NAME_SHOW;
    for (uint64_t i = 0; i < shown; i++) {
        uint8_t c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    if (shown < len) {
        buf[o++] = '.';
        buf[o++] = '.';
        buf[o++] = '.';
    }
    buf[o] = '\0';
}

/* Formats "field" or "field index" for a message; only called on error paths. */
static const char *label(char *buf, size_t size, const char *field, uint64_t index) {
    if (index == UINT64_MAX) {
        snprintf(buf, size, "%s", field);
    } else {
        snprintf(buf, size, "%s %" PRIu64, field, index);
    }
    return buf;
}

ts_status gguf_scan_string(gguf_scan *s, size_t *pos, const char *field, uint64_t index,
                           const uint8_t **str, uint64_t *len) {
    char lb[64];
    size_t at = *pos;
    if (s->size - at < 8) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: %s length at offset 0x%zx runs past end of file (%zu bytes)",
                            s->what, label(lb, sizeof lb, field, index), at, s->size);
    }
    uint64_t n = gguf_rd64(s->base + at);
    size_t rem = s->size - at - 8;
    if (n > rem) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: %s at offset 0x%zx claims %" PRIu64
                            " bytes but only %zu remain in the file",
                            s->what, label(lb, sizeof lb, field, index), at, n, rem);
    }
    *str = s->base + at + 8;
    *len = n;
    *pos = at + 8 + (size_t)n;
    return TS_OK;
}

static ts_status scan_array(gguf_scan *s, size_t *pos, int depth, gguf_arr *self);

static ts_status scan_scalar(gguf_scan *s, size_t *pos, uint32_t type, uint64_t count) {
    size_t at = *pos;
    size_t sz = gguf_scalar_size(type);
    /* Callers bound count by remaining / sz, so this product cannot overflow. */
    size_t bytes = (size_t)count * sz;
    if (s->size - at < bytes) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: %s value at offset 0x%zx runs past end of file (%zu bytes)",
                            s->what, ts_gguf_type_name(type), at, s->size);
    }
    if (type == TS_GGUF_BOOL) {
        for (uint64_t i = 0; i < count; i++) {
            uint8_t b = s->base[at + i];
            if (b > 1) {
                return ts_error_set(s->err, TS_ERR_FORMAT,
                                    "gguf: %s: bool at offset 0x%zx holds 0x%02x, not 0 or 1",
                                    s->what, at + (size_t)i, b);
            }
        }
    }
    *pos = at + bytes;
    return TS_OK;
}

/* Smallest encoding of one element of `type`: its size for scalars, a length field for
 * strings, an element type and a count for arrays. */
static size_t min_elem_bytes(uint32_t type) {
    if (type == TS_GGUF_STRING) {
        return 8;
    }
    if (type == TS_GGUF_ARRAY) {
        return 12;
    }
    return gguf_scalar_size(type);
}

static ts_status scan_array(gguf_scan *s, size_t *pos, int depth, gguf_arr *self) {
    size_t at = *pos;
    if (s->size - at < 12) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: array header at offset 0x%zx runs past end of file "
                            "(%zu bytes)",
                            s->what, at, s->size);
    }
    uint32_t et = gguf_rd32(s->base + at);
    uint64_t n = gguf_rd64(s->base + at + 4);
    size_t p = at + 12;
    if (et >= TS_GGUF_TYPE_COUNT) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: array at offset 0x%zx has unknown element type %" PRIu32,
                            s->what, at, et);
    }
    if (et == TS_GGUF_ARRAY && depth >= GGUF_MAX_NESTING) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: array at offset 0x%zx nests arrays deeper than %d levels",
                            s->what, at, GGUF_MAX_NESTING);
    }
    size_t rem = s->size - p;
    size_t min = min_elem_bytes(et);
    if (n > rem / min) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: array at offset 0x%zx claims %" PRIu64
                            " elements of %s (at least %zu bytes each) but only %zu bytes remain",
                            s->what, at, n, ts_gguf_type_name(et), min, rem);
    }
    const uint8_t **elems = NULL;
    gguf_arr *kids = NULL;
    ts_status st = TS_OK;
    if (et == TS_GGUF_STRING) {
        if (s->elems != NULL) {
            elems = s->elems + s->n_elems;
        }
        s->n_elems += (size_t)n;
        for (uint64_t i = 0; i < n && st == TS_OK; i++) {
            const uint8_t *str;
            uint64_t len;
            if (elems != NULL) {
                elems[i] = s->base + p;
            }
            st = gguf_scan_string(s, &p, "string element", i, &str, &len);
        }
    } else if (et == TS_GGUF_ARRAY) {
        if (s->arrs != NULL) {
            kids = s->arrs + s->n_arrs;
        }
        s->n_arrs += (size_t)n;
        for (uint64_t i = 0; i < n && st == TS_OK; i++) {
            st = scan_array(s, &p, depth + 1, kids != NULL ? &kids[i] : NULL);
        }
    } else {
        st = scan_scalar(s, &p, et, n);
    }
    if (st != TS_OK) {
        return st;
    }
    if (self != NULL) {
        self->type = et;
        self->n = n;
        self->data = s->base + at + 12;
        self->elems = elems;
        self->kids = kids;
    }
    *pos = p;
    return TS_OK;
}

ts_status gguf_scan_value(gguf_scan *s, size_t *pos, uint32_t type, gguf_arr **arr) {
    if (type == TS_GGUF_STRING) {
        const uint8_t *str;
        uint64_t len;
        return gguf_scan_string(s, pos, "string value", UINT64_MAX, &str, &len);
    }
    if (type == TS_GGUF_ARRAY) {
        gguf_arr *self = NULL;
        if (s->arrs != NULL) {
            self = s->arrs + s->n_arrs;
        }
        s->n_arrs++;
        if (arr != NULL) {
            *arr = self;
        }
        return scan_array(s, pos, 1, self);
    }
    if (type >= TS_GGUF_TYPE_COUNT) {
        return ts_error_set(s->err, TS_ERR_FORMAT,
                            "gguf: %s: unknown value type %" PRIu32 " at offset 0x%zx", s->what,
                            type, *pos);
    }
    return scan_scalar(s, pos, type, 1);
}
