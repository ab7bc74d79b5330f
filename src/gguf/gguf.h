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
 * The reader (ts_gguf, its value and tensor types, the type table of ggml_types.h) is public and
 * declared in include/tessera.h, with its ownership rules: a ts_gguf owns its mapping (or
 * borrows the caller's buffer for ts_gguf_open_memory) and every pointer it hands out; those
 * pointers stay valid until ts_gguf_close. A ts_gguf is immutable after open and safe to read
 * from several threads. This header adds what only the library uses: the writer and access
 * to the raw mapping.
 */
#ifndef TS_GGUF_GGUF_H
#define TS_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

#define TS_GGUF_DEFAULT_ALIGNMENT 32

/* First byte of the file (the mapping, or the caller's buffer). The model loader wraps the
 * whole mapping as one backend buffer, so weights are views into it. */
const void *ts_gguf_base(const ts_gguf *g);
/* Whether the bytes are a read-only private mapping of the file (ts_gguf_open), not memory
 * handed in by the caller. */
bool ts_gguf_mapped(const ts_gguf *g);

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
