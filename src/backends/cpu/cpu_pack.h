/*
 * cpu_pack.h — weights repacked at load for the rows-in-lanes kernels, owned by the CPU backend.
 *
 * When the kernel choice for a weight type (cpu_tune.h) is its packed gemm, each MUL_MAT weight
 * of that type gets a copy in the packed layout (quant.h: ts_quant_pack) the first time the
 * backend prepares or runs a graph that uses it, and MUL_MAT reads the copy. Only weights whose
 * buffer says its bytes never change (ts_buffer.constant: a model's mapping) are packed, since a
 * copy of changing bytes would go stale; the copy is dropped with that buffer. The original stays
 * where it is for every other reader (GET_ROWS of tied embeddings, a TS_ISA-forced lower level);
 * when it lies in a file mapping (ts_buffer.file_mapped) its pages are handed back to the kernel
 * after packing (they are re-read from the file if something touches them), so resident memory
 * stays about the model's size instead of doubling.
 *
 * Copies are keyed by the weight's address, type, row length and row count (a tensor-parallel
 * shard's slice of a weight is its own copy). Not thread-safe: one backend's graph thread.
 */
#ifndef TS_BACKENDS_CPU_CPU_PACK_H
#define TS_BACKENDS_CPU_CPU_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/threadpool.h"
#include "ir/backend.h"
#include "quant/quant.h"

typedef struct cpu_pack_entry {
    const void *src; /* the original rows; NULL: free slot */
    const ts_buffer *buf;
    ts_type type;
    int64_t k, rows;
    void *data; /* the packed copy (64-byte aligned, owned) */
} cpu_pack_entry;

typedef struct cpu_pack_store {
    cpu_pack_entry *slot; /* open addressing by src, linear probing; cap a power of two */
    size_t cap, n;
    size_t bytes; /* packed bytes held */
    double ms;    /* time spent packing */
} cpu_pack_store;

/* Whether weight w is packed: a constant buffer, dense rows, a type with a layout and a row
 * count that packs (whole groups of TS_PACK_ROWS per matrix). */
bool cpu_pack_eligible(const ts_tensor *w);

/* The packed copy of weight w (cpu_pack_eligible), made now by the pool's threads if it is new.
 * TS_ERR_NOMEM when the copy cannot be allocated (nothing is kept; the caller may run the
 * unpacked kernel). */
ts_status cpu_pack_get(cpu_pack_store *s, ts_threadpool *pool, const ts_tensor *w, const void **out,
                       ts_error *err);

/* Drops the copies of weights in buf (a buffer being freed). */
void cpu_pack_forget(cpu_pack_store *s, const ts_buffer *buf);

void cpu_pack_store_free(cpu_pack_store *s);

#endif /* TS_BACKENDS_CPU_CPU_PACK_H */
