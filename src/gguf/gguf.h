/*
 * gguf.h — reading and writing GGUF files.
 *
 * Format (little-endian throughout; versions 2 and 3 share this layout):
 *
 *   magic "GGUF" (4 bytes) | version u32 | n_tensors u64 | n_kv u64
 *   n_kv × { key: string | value_type u32 | value }
 *   n_tensors × { name: string | n_dims u32 | ne[n_dims] u64 | type u32 | offset u64 }
 *   padding to `general.alignment` (u32 key, default 32, a power of two)
 *   tensor data: each tensor at data_start + offset, offset a multiple of the alignment
 *
 *   string = len u64 | len bytes (no terminator)
 *   value  = scalar | string | array, array = elem_type u32 | count u64 | count elements
 *            (arrays may nest: an element type of ARRAY holds arrays)
 *
 * The reader treats the file as untrusted. Every count, length, dimension, offset, product and
 * alignment is checked against the bytes present and against overflow before anything is
 * allocated or read, so a hostile file costs at most memory proportional to its own size and
 * is always answered with a status plus a message naming the item and its byte offset.
 *
 * Ownership: a ts_gguf owns its mapping (or borrows the caller's buffer for
 * ts_gguf_open_memory) and every pointer it hands out; those pointers stay valid until
 * ts_gguf_close. A ts_gguf is immutable after open and safe to read from several threads.
 */
#ifndef TS_GGUF_GGUF_H
#define TS_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"
#include "tessera.h"

#define TS_GGUF_MAX_DIMS 4
#define TS_GGUF_DEFAULT_ALIGNMENT 32

typedef enum ts_gguf_type {
    TS_GGUF_UINT8 = 0,
    TS_GGUF_INT8 = 1,
    TS_GGUF_UINT16 = 2,
    TS_GGUF_INT16 = 3,
    TS_GGUF_UINT32 = 4,
    TS_GGUF_INT32 = 5,
    TS_GGUF_FLOAT32 = 6,
    TS_GGUF_BOOL = 7,
    TS_GGUF_STRING = 8,
    TS_GGUF_ARRAY = 9,
    TS_GGUF_UINT64 = 10,
    TS_GGUF_INT64 = 11,
    TS_GGUF_FLOAT64 = 12,
    TS_GGUF_TYPE_COUNT = 13,
} ts_gguf_type;

/* Name of a value type ("uint32", "string", ...), or "invalid". */
const char *ts_gguf_type_name(uint32_t type);

/* A string inside the file: not NUL-terminated, may hold any bytes. */
typedef struct ts_gguf_str {
    const char *ptr; /* points into the file's bytes; owned by the ts_gguf */
    uint64_t len;
} ts_gguf_str;

/* An array value. For fixed-size element types, `data` holds `n` packed little-endian
 * elements (possibly unaligned: read them with the ts_gguf_array_* accessors or memcpy).
 * For STRING and ARRAY elements use ts_gguf_array_str / ts_gguf_array_arr. */
typedef struct ts_gguf_array {
    ts_gguf_type type; /* element type */
    uint64_t n;        /* element count */
    const void *data;  /* first element's bytes in the file; owned by the ts_gguf */
    const void *index; /* reader-private lookup for variable-size elements; do not touch */
} ts_gguf_array;

/* One tensor's description, in file order. */
typedef struct ts_gguf_tensor {
    const char *name;             /* NUL-terminated copy, owned by the ts_gguf */
    ts_type type;                 /* element type (validated) */
    uint32_t n_dims;              /* 1..TS_GGUF_MAX_DIMS */
    int64_t ne[TS_GGUF_MAX_DIMS]; /* [ne0 (fastest), ne1, ne2, ne3]; unused dims are 1 */
    uint64_t n_elements;          /* product of ne */
    uint64_t offset;              /* byte offset relative to the data section */
    size_t nbytes;                /* bytes the tensor's data occupies */
    const void *data;             /* zero-copy pointer into the mapping */
} ts_gguf_tensor;

typedef struct ts_gguf ts_gguf;

/* Maps and parses a file. On failure *out is NULL and err says what and where. */
ts_status ts_gguf_open(const char *path, ts_gguf **out, ts_error *err);

/* Parses a buffer the caller owns; the buffer must outlive the returned ts_gguf. */
ts_status ts_gguf_open_memory(const void *data, size_t size, ts_gguf **out, ts_error *err);

/* Releases everything; NULL is allowed. */
void ts_gguf_close(ts_gguf *g);

uint32_t ts_gguf_version(const ts_gguf *g);
size_t ts_gguf_alignment(const ts_gguf *g);
size_t ts_gguf_file_size(const ts_gguf *g);
size_t ts_gguf_data_offset(const ts_gguf *g); /* byte offset of the data section in the file */
const void *ts_gguf_base(const ts_gguf *g);   /* first byte of the file */

/* ---- metadata ---------------------------------------------------------------------------- */

uint64_t ts_gguf_kv_count(const ts_gguf *g);
/* Key of entry i (NUL-terminated copy owned by g), or NULL when i is out of range. */
const char *ts_gguf_kv_key(const ts_gguf *g, uint64_t i);
/* Value type of entry i, or TS_GGUF_TYPE_COUNT when i is out of range. */
ts_gguf_type ts_gguf_kv_type(const ts_gguf *g, uint64_t i);
/* Index of `key`; TS_ERR_NOT_FOUND when absent. */
ts_status ts_gguf_find_key(const ts_gguf *g, const char *key, uint64_t *index);

/* Typed getters by key. Each returns TS_ERR_NOT_FOUND when the key is absent and TS_ERR_TYPE
 * (message: key, expected and actual type) when the stored type differs. Never aborts. */
ts_status ts_gguf_get_u8(const ts_gguf *g, const char *key, uint8_t *out, ts_error *err);
ts_status ts_gguf_get_i8(const ts_gguf *g, const char *key, int8_t *out, ts_error *err);
ts_status ts_gguf_get_u16(const ts_gguf *g, const char *key, uint16_t *out, ts_error *err);
ts_status ts_gguf_get_i16(const ts_gguf *g, const char *key, int16_t *out, ts_error *err);
ts_status ts_gguf_get_u32(const ts_gguf *g, const char *key, uint32_t *out, ts_error *err);
ts_status ts_gguf_get_i32(const ts_gguf *g, const char *key, int32_t *out, ts_error *err);
ts_status ts_gguf_get_u64(const ts_gguf *g, const char *key, uint64_t *out, ts_error *err);
ts_status ts_gguf_get_i64(const ts_gguf *g, const char *key, int64_t *out, ts_error *err);
ts_status ts_gguf_get_f32(const ts_gguf *g, const char *key, float *out, ts_error *err);
ts_status ts_gguf_get_f64(const ts_gguf *g, const char *key, double *out, ts_error *err);
ts_status ts_gguf_get_bool(const ts_gguf *g, const char *key, bool *out, ts_error *err);
ts_status ts_gguf_get_str(const ts_gguf *g, const char *key, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_get_array(const ts_gguf *g, const char *key, ts_gguf_array *out,
                            ts_error *err);

/* Lenient getters for model hyperparameters, whose integer width varies between writers:
 * any integer type whose value fits is accepted (TS_ERR_RANGE when it does not); the float
 * getter accepts float32 and float64. */
ts_status ts_gguf_get_int(const ts_gguf *g, const char *key, int64_t *out, ts_error *err);
ts_status ts_gguf_get_float(const ts_gguf *g, const char *key, double *out, ts_error *err);

/* Same getters by entry index (for iteration). */
ts_status ts_gguf_kv_str(const ts_gguf *g, uint64_t i, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_kv_array(const ts_gguf *g, uint64_t i, ts_gguf_array *out, ts_error *err);
/* Raw bytes of a scalar value of entry i (1..8 bytes, little-endian); TS_ERR_TYPE for strings
 * and arrays. */
ts_status ts_gguf_kv_scalar(const ts_gguf *g, uint64_t i, const void **bytes, ts_error *err);

/* Array element access; TS_ERR_RANGE for i >= n, TS_ERR_TYPE for the wrong element type. */
ts_status ts_gguf_array_str(const ts_gguf_array *a, uint64_t i, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_array_arr(const ts_gguf_array *a, uint64_t i, ts_gguf_array *out,
                            ts_error *err);
/* Element i of a numeric or bool array converted to int64/double (TS_ERR_TYPE for strings,
 * arrays, and for float elements in the int accessor). */
ts_status ts_gguf_array_int(const ts_gguf_array *a, uint64_t i, int64_t *out, ts_error *err);
ts_status ts_gguf_array_float(const ts_gguf_array *a, uint64_t i, double *out, ts_error *err);

/* ---- tensors ----------------------------------------------------------------------------- */

uint64_t ts_gguf_tensor_count(const ts_gguf *g);
/* Tensor i in file order, or NULL when out of range. */
const ts_gguf_tensor *ts_gguf_tensor_at(const ts_gguf *g, uint64_t i);
/* Tensor by name; TS_ERR_NOT_FOUND when absent. */
ts_status ts_gguf_find_tensor(const ts_gguf *g, const char *name, const ts_gguf_tensor **out);

/* ---- writer ------------------------------------------------------------------------------ */

/*
 * Builds a GGUF v3 file. Keys and tensors are written in the order they were added. Scalar
 * and string values are copied when added; tensor data passed to add_tensor is borrowed
 * and must stay valid until ts_gguf_writer_write* returns. Not thread-safe.
 */
typedef struct ts_gguf_writer ts_gguf_writer;

ts_status ts_gguf_writer_create(ts_gguf_writer **out, ts_error *err);
void ts_gguf_writer_destroy(ts_gguf_writer *w);

/* Sets the alignment of tensor data (a power of two) and writes `general.alignment`. */
ts_status ts_gguf_writer_set_alignment(ts_gguf_writer *w, uint32_t alignment, ts_error *err);

/* Scalars: `value` points to one element of the given scalar type (not STRING or ARRAY). */
ts_status ts_gguf_writer_add_scalar(ts_gguf_writer *w, const char *key, ts_gguf_type type,
                                    const void *value, ts_error *err);
ts_status ts_gguf_writer_add_u32(ts_gguf_writer *w, const char *key, uint32_t v, ts_error *err);
ts_status ts_gguf_writer_add_i32(ts_gguf_writer *w, const char *key, int32_t v, ts_error *err);
ts_status ts_gguf_writer_add_u64(ts_gguf_writer *w, const char *key, uint64_t v, ts_error *err);
ts_status ts_gguf_writer_add_f32(ts_gguf_writer *w, const char *key, float v, ts_error *err);
ts_status ts_gguf_writer_add_bool(ts_gguf_writer *w, const char *key, bool v, ts_error *err);
/* A string of `len` bytes (any bytes); ts_gguf_writer_add_cstr for NUL-terminated text. */
ts_status ts_gguf_writer_add_str(ts_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                 ts_error *err);
ts_status ts_gguf_writer_add_cstr(ts_gguf_writer *w, const char *key, const char *s,
                                  ts_error *err);
/* An array of n fixed-size elements (packed, host order = little-endian on supported hosts). */
ts_status ts_gguf_writer_add_array(ts_gguf_writer *w, const char *key, ts_gguf_type elem_type,
                                   const void *data, uint64_t n, ts_error *err);
/* An array of n NUL-terminated strings. */
ts_status ts_gguf_writer_add_str_array(ts_gguf_writer *w, const char *key,
                                       const char *const *strs, uint64_t n, ts_error *err);
/* Copies entry i of a reader verbatim (any type, nested arrays included). */
ts_status ts_gguf_writer_copy_kv(ts_gguf_writer *w, const ts_gguf *src, uint64_t i,
                                 ts_error *err);
/* Appends an already-encoded value (the bytes that follow the value-type field in a file) for
 * a key: the way to write nested arrays. The bytes are validated by parsing them. */
ts_status ts_gguf_writer_add_encoded(ts_gguf_writer *w, const char *key, ts_gguf_type type,
                                     const void *bytes, size_t len, ts_error *err);

/* Adds a tensor; data may be NULL when a fill callback is set (see below). ne has n_dims
 * entries, ne[0] fastest, and ne[0] must be a multiple of the type's block size. */
ts_status ts_gguf_writer_add_tensor(ts_gguf_writer *w, const char *name, ts_type type,
                                    uint32_t n_dims, const int64_t *ne, const void *data,
                                    ts_error *err);

/* Produces data for tensors added with data == NULL, one at a time in file order, so a tool
 * can quantize a model while writing it without holding every result in memory. `dst` has
 * exactly `nbytes` bytes. */
typedef ts_status (*ts_gguf_fill_fn)(void *ctx, uint64_t tensor_index, void *dst, size_t nbytes,
                                     ts_error *err);
void ts_gguf_writer_set_fill(ts_gguf_writer *w, ts_gguf_fill_fn fn, void *ctx);

/* Writes the file (to a temporary name, then renamed, so a failure leaves no partial file). */
ts_status ts_gguf_writer_write(ts_gguf_writer *w, const char *path, ts_error *err);
/* Writes into a malloc'd buffer the caller frees. */
ts_status ts_gguf_writer_write_mem(ts_gguf_writer *w, void **out, size_t *size, ts_error *err);

#endif /* TS_GGUF_GGUF_H */
