/*
 * gguf_internal.h — what the GGUF reader's and writer's source files share; not an API.
 *
 * The reader parses in two passes over the same code (gguf_scan_*): the first pass validates
 * the structure and counts how many array descriptors and element pointers the metadata needs,
 * then one block is allocated, and the second pass fills it. Structural errors can only come
 * from the first pass, so the second never fails on structure.
 *
 * Array descriptors (gguf_arr) make element access O(1): an array of strings keeps a pointer
 * to each element's length field; an array of arrays keeps one child descriptor per element,
 * stored contiguously. Both are bounded by the file size (a string element costs >= 8 file
 * bytes, an array element >= 12), so a hostile file cannot make them large.
 */
#ifndef TS_GGUF_GGUF_INTERNAL_H
#define TS_GGUF_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF layer hands out little-endian array data as-is; big-endian hosts are unsupported"
#endif

#define GGUF_MAGIC_LEN        4
#define GGUF_HEADER_BYTES     24 /* magic, version u32, n_tensors u64, n_kv u64 */
#define GGUF_MAX_NESTING      8  /* arrays of arrays deeper than this are rejected */
#define GGUF_MIN_KV_BYTES     13 /* key length u64 + value type u32 + one value byte */
#define GGUF_MIN_TENSOR_BYTES 32 /* name length u64 + n_dims u32 + one dim + type + offset */
#define GGUF_NAME_SHOW        64 /* bytes of a key or name quoted in an error message */
#define GGUF_SHOW_BUF         (4 * GGUF_NAME_SHOW + 8)

/* Descriptor of one array value (top-level or nested). */
typedef struct gguf_arr {
    uint32_t type;               /* element type */
    uint64_t n;                  /* element count */
    const uint8_t *data;         /* first element's bytes */
    const uint8_t *const *elems; /* STRING elements: n pointers to each length field */
    const struct gguf_arr *kids; /* ARRAY elements: n child descriptors */
} gguf_arr;

/* One metadata entry. */
typedef struct gguf_kv {
    const char *key;      /* NUL-terminated copy in the reader's arena */
    size_t offset;        /* file offset of the entry (its key length field) */
    uint32_t type;        /* value type */
    const uint8_t *value; /* the value's encoded bytes in the file */
    size_t value_len;     /* their count */
    const gguf_arr *arr;  /* descriptor when type is ARRAY, else NULL */
} gguf_kv;

/* Name -> index hash table (open addressing; names are borrowed). */
typedef struct gguf_names {
    struct gguf_name_slot *slots;
    size_t cap; /* a power of two, or 0 before the first reserve */
    size_t count;
} gguf_names;

struct ts_gguf {
    const uint8_t *base; /* first byte of the file */
    size_t size;         /* bytes in the file */
    bool mapped;         /* base came from mmap and is unmapped on close */
    uint32_t version;
    size_t alignment;
    size_t data_offset; /* file offset of the data section */
    uint64_t n_kv;
    gguf_kv *kv; /* [n_kv] in file order */
    uint64_t n_tensors;
    ts_gguf_tensor *tensors; /* [n_tensors] in file order */
    void *block;             /* the one allocation holding kv, tensors, names, descriptors */
    gguf_names kv_names;
    gguf_names tensor_names;
};

/* ---- writer state (gguf_write.c, gguf_emit.c) -------------------------------------------- */

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *bytes; /* encoded value */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    ts_type type;
    uint32_t n_dims;
    uint64_t ne[TS_GGUF_MAX_DIMS];
    size_t nbytes;
    const void *data; /* borrowed; NULL when the fill callback provides it */
    uint64_t offset;  /* relative to the data section; assigned when writing */
} wtensor;

struct ts_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    gguf_names kv_names;
    gguf_names t_names;
    uint32_t alignment;
    ts_gguf_fill_fn fill;
    void *fill_ctx;
};

/* Grows a dynamic array of *cap items so that item n fits; returns the (possibly moved) array,
 * or NULL when out of memory (the old array is then still valid). */
void *gguf_grow(void *items, size_t *cap, size_t n, size_t size);

/* ---- little-endian coding ----------------------------------------------------------------- */

static inline uint32_t gguf_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t gguf_rd64(const uint8_t *p) {
    return (uint64_t)gguf_rd32(p) | (uint64_t)gguf_rd32(p + 4) << 32;
}

static inline void gguf_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline void gguf_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* ---- value scanning (gguf_value.c) -------------------------------------------------------- */

typedef struct gguf_scan {
    const uint8_t *base; /* buffer being parsed; offsets in messages are relative to it */
    size_t size;
    ts_error *err;
    const char *what;      /* the item being parsed, for messages ("kv 3 'general.name'") */
    gguf_arr *arrs;        /* descriptor storage in the filling pass; NULL while counting */
    const uint8_t **elems; /* element pointer storage in the filling pass; NULL while counting */
    size_t n_arrs;         /* descriptors used so far */
    size_t n_elems;        /* element pointers used so far */
} gguf_scan;

/* Bytes of one scalar of `type`, or 0 for STRING, ARRAY and invalid types. */
size_t gguf_scalar_size(uint32_t type);

/* Reads a string's length at *pos and checks that its bytes are present. On success *str
 * points at the first byte, *len is the length, and *pos is past the string. `field` names
 * the string in messages ("key", "tensor name", "string element"), followed by `index` unless
 * that is UINT64_MAX. */
ts_status gguf_scan_string(gguf_scan *s, size_t *pos, const char *field, uint64_t index,
                           const uint8_t **str, uint64_t *len);

/* Validates (and in the filling pass, describes) one value of `type` at *pos, advancing *pos
 * past it. For an ARRAY value the descriptor goes to *arr (a slot taken from s->arrs) in the
 * filling pass; pass NULL for arr when the caller does not need it. */
ts_status gguf_scan_value(gguf_scan *s, size_t *pos, uint32_t type, gguf_arr **arr);

/* Writes a printable rendering of at most GGUF_NAME_SHOW bytes of a name, with "..." when
 * longer, for quoting in messages. buf must hold GGUF_SHOW_BUF bytes. */
void gguf_show_name(char *buf, const uint8_t *p, uint64_t len);

/* ---- name tables (gguf_names.c) ----------------------------------------------------------- */

/* Prepares room for `expected` names; TS_ERR_NOMEM on failure. */
ts_status gguf_names_reserve(gguf_names *t, uint64_t expected);
/* Inserts name -> index. When the name is already present nothing changes and *existing is its
 * index; otherwise *existing is UINT64_MAX. Grows the table as needed (TS_ERR_NOMEM). */
ts_status gguf_names_insert(gguf_names *t, const char *name, uint64_t index, uint64_t *existing);
bool gguf_names_find(const gguf_names *t, const char *name, uint64_t *index);
void gguf_names_free(gguf_names *t);

/* ---- tensor validation (gguf_tensor.c) ---------------------------------------------------- */

/* Raw fields of one tensor-info record as read from the file. */
typedef struct gguf_tensor_info {
    uint64_t index;   /* position in file order */
    size_t offset;    /* file offset of the record (its name length field) */
    const char *name; /* NUL-terminated, in the reader's arena */
    uint32_t n_dims;  /* already checked to be 1..TS_GGUF_MAX_DIMS */
    uint64_t dims[TS_GGUF_MAX_DIMS];
    uint32_t type;     /* unchecked type id */
    uint64_t data_off; /* unchecked offset relative to the data section */
} gguf_tensor_info;

/* Checks one tensor (type, shape, size, alignment, bounds within the file) and fills *t,
 * data pointer included. g's base, size, alignment and data_offset must be set. */
ts_status gguf_tensor_init(const ts_gguf *g, const gguf_tensor_info *info, ts_gguf_tensor *t,
                           ts_error *err);

/* Checks that no two tensors' data ranges overlap. */
ts_status gguf_check_overlaps(const ts_gguf *g, ts_error *err);

/* Checks a tensor's type and shape the way the reader will and computes its byte size; used by
 * the writer so that it never produces a file the reader rejects. `what` prefixes messages. */
ts_status gguf_tensor_shape(const char *what, uint32_t type, uint32_t n_dims, const uint64_t *dims,
                            uint64_t *n_elements, size_t *nbytes, ts_error *err);

#endif /* TS_GGUF_GGUF_INTERNAL_H */
