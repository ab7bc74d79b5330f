/*
 * backend.h — the backend interface: a struct of function pointers plus a context pointer.
 *
 * A backend owns buffers (host or device memory) and executes IR graphs. The IR defines this
 * vtable (DESIGN.md decision 1); the reference, CPU and CUDA backends and the hook wrappers
 * (hooks.h) implement it. Callers use the ts_backend_* wrappers below, which check arguments
 * and optional entries.
 *
 * Storage: a tensor's bytes are (buffer, byte offset). Leaves are bound by the caller
 * (ts_tensor_bind), activations and inputs live in the graph's arena (ts_graph_alloc). Views
 * resolve to their owner's buffer at the owner's offset plus the view offset, so reading or
 * writing a view at any offset works like reading its owner.
 *
 * Thread safety: a backend runs one graph at a time; buffer_set/get may not overlap a
 * compute on the same buffer. Different backends are independent.
 */
#ifndef TS_IR_BACKEND_H
#define TS_IR_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

typedef struct ts_backend ts_backend;

/* A block of backend memory. Allocated and freed by its backend; `host` is the host address
 * of byte 0 when the memory is host-visible (reference and CPU backends, mmapped weights)
 * and NULL for device memory. */
struct ts_buffer {
    void *host;   /* host-visible base, or NULL */
    size_t size;  /* bytes */
    void *priv;   /* backend-private handle (device pointer, ...) */
    bool owned;   /* false when the memory is the caller's (wrapped) and not freed here */
    /* Set by the creator after making the buffer (both default to false):
     * constant: its bytes never change while it exists (a model's weights), so a backend may
     *   keep copies derived from them (the CPU backend's repacked weights, cpu_pack.h);
     * file_mapped: its host memory is a read-only private mapping of a file, so whole pages may
     *   be handed back to the kernel (madvise) and are read again from the file when touched. */
    bool constant;
    bool file_mapped;
    const char *backend_name; /* name of the backend that made it (static string) */
};

/* Per-node callbacks a graph compute honours when given (hooks use them). `before` runs just
 * before node executes, `after` once its output is complete and visible through
 * ts_backend_tensor_get. Returning false stops the run with TS_ERR_ABORTED. Both may be NULL.
 * Views are not reported. The callbacks run on the calling thread. */
typedef struct ts_eval_cb {
    bool (*before)(ts_tensor *node, void *user);
    bool (*after)(ts_tensor *node, void *user);
    void *user;
} ts_eval_cb;

typedef struct ts_backend_iface {
    /* required: short static name ("ref", "cpu", "dump(cpu)"). */
    const char *(*name)(void *ctx);
    /* required: allocates `size` bytes (64-byte aligned); contents undefined. */
    ts_status (*buffer_alloc)(void *ctx, size_t size, ts_buffer **out, ts_error *err);
    /* optional: wraps caller memory (an mmapped file) without copying; the caller keeps it
     * alive and unmodified while the buffer exists. */
    ts_status (*buffer_wrap)(void *ctx, void *host, size_t size, ts_buffer **out,
                             ts_error *err);
    /* required: frees a buffer made by buffer_alloc or buffer_wrap (not the wrapped memory). */
    void (*buffer_free)(void *ctx, ts_buffer *buf);
    /* required: copies size bytes from host memory src into buf at offset (bounds checked by
     * the wrapper). */
    ts_status (*buffer_set)(void *ctx, ts_buffer *buf, size_t offset, const void *src,
                            size_t size, ts_error *err);
    /* required: copies size bytes from buf at offset into host memory dst. */
    ts_status (*buffer_get)(void *ctx, ts_buffer *buf, size_t offset, void *dst, size_t size,
                            ts_error *err);
    /* required: whether this backend can execute node (op, types, layout). */
    bool (*supports_op)(void *ctx, const ts_tensor *node);
    /* required: executes the graph's nodes in order (storage already resolved); cb may be
     * NULL. Returns when the outputs are complete unless the backend is asynchronous, in which
     * case synchronize waits. */
    ts_status (*graph_compute)(void *ctx, ts_graph *g, const ts_eval_cb *cb, ts_error *err);
    /* optional: waits for outstanding work; absent for synchronous backends. */
    ts_status (*synchronize)(void *ctx, ts_error *err);
    /* optional: called once the graph is built and its parameters bound, before its first
     * compute: the backend may prepare what its runs will read (the CPU backend repacks
     * weights), so that the first compute does not pay for it. */
    ts_status (*graph_prepare)(void *ctx, ts_graph *g, ts_error *err);
    /* required: frees the context (not buffers the caller still holds). */
    void (*destroy)(void *ctx);
} ts_backend_iface;

struct ts_backend {
    const ts_backend_iface *iface; /* static table */
    void *ctx;                     /* owned by the backend */
};

const char *ts_backend_name(const ts_backend *b);
/* Frees the backend (its context). NULL is a no-op. */
void ts_backend_destroy(ts_backend *b);
ts_status ts_backend_buffer_alloc(ts_backend *b, size_t size, ts_buffer **out, ts_error *err);
/* Wraps host memory; TS_ERR_UNSUPPORTED when the backend cannot use host memory directly. */
ts_status ts_backend_buffer_wrap(ts_backend *b, void *host, size_t size, ts_buffer **out,
                                 ts_error *err);
void ts_backend_buffer_free(ts_backend *b, ts_buffer *buf);
ts_status ts_backend_buffer_set(ts_backend *b, ts_buffer *buf, size_t offset, const void *src,
                                size_t size, ts_error *err);
ts_status ts_backend_buffer_get(ts_backend *b, ts_buffer *buf, size_t offset, void *dst,
                                size_t size, ts_error *err);
bool ts_backend_supports_op(ts_backend *b, const ts_tensor *node);
ts_status ts_backend_synchronize(ts_backend *b, ts_error *err);
/* Lets b prepare for running g (see graph_prepare; a no-op for backends without it). Call
 * after ts_graph_alloc with every parameter bound. */
ts_status ts_backend_graph_prepare(ts_backend *b, ts_graph *g, ts_error *err);

/* Writes / reads `size` bytes at byte `offset` within tensor t's span (views included: the
 * bytes are those of the owner at the view's offset). The tensor must have storage. */
ts_status ts_backend_tensor_set(ts_backend *b, ts_tensor *t, size_t offset, const void *src,
                                size_t size, ts_error *err);
ts_status ts_backend_tensor_get(ts_backend *b, ts_tensor *t, size_t offset, void *dst,
                                size_t size, ts_error *err);
/* Reads the current elements of t (any strides; f32, f16, bf16, i32 or a type with to_float)
 * into dense row-major f32 dst of n = ts_tensor_nelements(t) entries. */
ts_status ts_backend_tensor_get_f32(ts_backend *b, ts_tensor *t, float *dst, int64_t n,
                                    ts_error *err);
/* Writes dense row-major f32 src (n entries) into t, converting to t's type (f32, f16, bf16,
 * i32 (rounded), or a quantized type with from_float when rows are contiguous). */
ts_status ts_backend_tensor_set_f32(ts_backend *b, ts_tensor *t, const float *src, int64_t n,
                                    ts_error *err);

/* ---- graph execution ---- */

/* Allocates the graph's arena (planned peak bytes) on backend b and places every input and
 * activation in it. Frees a previous arena (through the backend that made it). Call after
 * ts_graph_build. The arena belongs to the graph but is freed through b, so b must outlive
 * it: destroy the graph, or call ts_graph_free_arena, before destroying b. */
ts_status ts_graph_alloc(ts_graph *g, ts_backend *b, ts_error *err);
/* Frees the arena now (inputs and activations lose their storage). NULL-safe. */
void ts_graph_free_arena(ts_graph *g);
/* Runs the graph on b (which must address the arena's and the parameters' memory): checks
 * that every parameter is bound and every node is supported, then computes. cb may be NULL. */
ts_status ts_graph_compute(ts_graph *g, ts_backend *b, const ts_eval_cb *cb, ts_error *err);
/* Refreshes each tensor's resolved storage (done by ts_graph_compute; exposed for hooks). */
ts_status ts_graph_resolve(ts_graph *g, ts_error *err);

/* ---- host memory buffers (shared by host backends) ---- */

ts_status ts_host_buffer_alloc(size_t size, const char *backend_name, ts_buffer **out,
                               ts_error *err);
ts_status ts_host_buffer_wrap(void *host, size_t size, const char *backend_name,
                              ts_buffer **out, ts_error *err);
void ts_host_buffer_free(ts_buffer *buf);
ts_status ts_host_buffer_set(ts_buffer *buf, size_t offset, const void *src, size_t size,
                             ts_error *err);
ts_status ts_host_buffer_get(ts_buffer *buf, size_t offset, void *dst, size_t size,
                             ts_error *err);

#endif /* TS_IR_BACKEND_H */
