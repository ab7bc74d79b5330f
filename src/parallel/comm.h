/*
 * comm.h — the communicator: collectives among the ranks of a tensor-parallel group.
 *
 * A communicator connects `size` ranks (0..size-1). Every rank calls the same collectives in
 * the same order with the same counts and types; a collective returns on a rank once that
 * rank's output is complete. Three transports implement the interface:
 *
 *   local  N ranks that are thread groups of one process (one ts_comm per rank, made
 *          together by ts_comm_local_create). Buffers are host memory; a collective meets the
 *          other ranks at a shared barrier and reads their buffers directly.
 *   mpi    one rank per process (ts_comm_mpi_create, under mpirun). Host memory.
 *   nccl   one rank per GPU (ts_comm_nccl_create, CUDA builds). Device memory, bootstrapped
 *          through another communicator that carries NCCL's unique id.
 *
 * Semantics (count = elements per rank unless noted; f32, f16 and bf16 for the sums):
 *
 *   all_reduce_sum(send[count]) -> recv[count] = sum over ranks of send. The local and MPI
 *       transports add the ranks' values in rank order in f32 and round once to the type, so
 *       every rank gets bit-identical results and the two transports agree bit for bit.
 *       NCCL sums in its own order (results equal within rounding).
 *   all_gather(send[bytes]) -> recv[size * bytes]: rank k's bytes at offset k * bytes.
 *   reduce_scatter_sum(send[size * count]) -> recv[count] = sum over ranks of
 *       send[rank * count .. (rank + 1) * count) (same summation rule as all_reduce_sum).
 *   broadcast(buf[bytes], root): every rank's buf becomes root's. wait_ms < 0 waits without
 *       a deadline (a follower idling for its next command), otherwise the communicator's
 *       timeout applies.
 *   barrier().
 *
 * send may equal recv for all_reduce_sum (in place). Errors: a collective that does not
 * complete within the communicator's timeout (ts_comm_set_timeout; default 60 s), a rank that
 * calls a different collective or count, a rank that failed (ts_comm_fail) — each returns an
 * error naming the collective, the ranks and the reason, and after it the group is broken:
 * every later collective fails at once instead of waiting.
 *
 * Stats: each collective adds to the communicator's counters (calls per kind, payload bytes =
 * the bytes this rank contributes, wire bytes = what a bandwidth-optimal ring moves per rank:
 * 2 (n-1)/n x payload for an all-reduce, (n-1)/n x payload for a reduce-scatter and
 * (n-1) x payload for an all-gather).
 *
 * Thread safety: one thread at a time per ts_comm (the ranks of a local group are different
 * ts_comm objects and are meant to be used from different threads).
 */
#ifndef TS_PARALLEL_COMM_H
#define TS_PARALLEL_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/ggml_types.h"
#include "tessera.h"

typedef struct ts_comm ts_comm;

typedef enum ts_coll {
    TS_COLL_ALL_REDUCE = 0,
    TS_COLL_ALL_GATHER,
    TS_COLL_REDUCE_SCATTER,
    TS_COLL_BROADCAST,
    TS_COLL_BARRIER,
    TS_COLL_COUNT
} ts_coll;

typedef struct ts_comm_stats {
    uint64_t calls[TS_COLL_COUNT];
    uint64_t payload_bytes; /* bytes this rank contributed to reductions and gathers */
    uint64_t wire_bytes;    /* ring-algorithm bytes per rank for the same collectives */
} ts_comm_stats;

/* A transport's entries; every one is required. ctx is the transport's per-rank state. */
typedef struct ts_comm_iface {
    const char *name; /* "local", "mpi", "nccl" */
    ts_status (*all_reduce_sum)(void *ctx, const void *send, void *recv, size_t count, ts_type type,
                                ts_error *err);
    ts_status (*all_gather)(void *ctx, const void *send, void *recv, size_t bytes, ts_error *err);
    ts_status (*reduce_scatter_sum)(void *ctx, const void *send, void *recv, size_t count,
                                    ts_type type, ts_error *err);
    ts_status (*broadcast)(void *ctx, void *buf, size_t bytes, int root, int wait_ms,
                           ts_error *err);
    ts_status (*barrier)(void *ctx, ts_error *err);
    /* Marks the group broken with a reason (peers waiting in a collective return an error);
     * must not block. */
    void (*fail)(void *ctx, const char *why);
    /* Ends every rank's participation now: MPI_Abort for MPI (the job ends), fail otherwise. */
    void (*abort)(void *ctx, const char *why);
    void (*destroy)(void *ctx);
} ts_comm_iface;

struct ts_comm {
    const ts_comm_iface *iface; /* static table */
    void *ctx;                  /* owned by the transport */
    int rank, size;
    int timeout_ms; /* deadline of one collective (transports read it) */
    ts_comm_stats stats;
};

/* ---- transports ---- */

/* Makes the `size` ranks of one in-process group: out[0..size-1], to be used from different
 * threads (one per rank). Each must be destroyed; the shared state goes with the last. */
ts_status ts_comm_local_create(int size, ts_comm **out, ts_error *err);

/* Whether this build has the MPI transport. */
bool ts_comm_mpi_available(void);
/* Joins the MPI job this process was started in (initializes MPI once per process with
 * MPI_THREAD_SERIALIZED; finalized when the communicator is destroyed). Errors: built
 * without MPI, not started by mpirun (no MPI launcher environment), MPI failures. */
ts_status ts_comm_mpi_create(ts_comm **out, ts_error *err);
/* Ends the group at once — for a tool whose rank cannot go on, so that no other rank waits
 * for it: MPI_Abort for MPI (every process of the job exits), ts_comm_fail for the others
 * (then it returns). */
void ts_comm_abort(ts_comm *c, const char *why);

/* Whether this build has the NCCL transport (CUDA builds). */
bool ts_comm_nccl_available(void);
/* Makes a NCCL communicator over the ranks of `bootstrap` (which carries NCCL's unique id
 * from rank 0 to the others), on CUDA device `device`. Collectives take device pointers and
 * return after the work on the communicator's stream completed. */
ts_status ts_comm_nccl_create(ts_comm *bootstrap, int device, ts_comm **out, ts_error *err);

/* ---- collectives (checked wrappers; see the semantics above) ---- */

void ts_comm_destroy(ts_comm *c); /* NULL is a no-op */
const char *ts_comm_name(const ts_comm *c);
void ts_comm_set_timeout(ts_comm *c, int timeout_ms);

ts_status ts_comm_all_reduce_sum(ts_comm *c, const void *send, void *recv, size_t count,
                                 ts_type type, ts_error *err);
ts_status ts_comm_all_gather(ts_comm *c, const void *send, void *recv, size_t bytes, ts_error *err);
ts_status ts_comm_reduce_scatter_sum(ts_comm *c, const void *send, void *recv, size_t count,
                                     ts_type type, ts_error *err);
ts_status ts_comm_broadcast(ts_comm *c, void *buf, size_t bytes, int root, int wait_ms,
                            ts_error *err);
ts_status ts_comm_barrier(ts_comm *c, ts_error *err);
void ts_comm_fail(ts_comm *c, const char *why);

/* Whether the sum collectives accept this element type (F32, F16, BF16). */
bool ts_comm_sum_type_ok(ts_type type);
size_t ts_comm_type_size(ts_type type);

/* ---- helpers shared by the transports ---- */

/* dst[i] = round_to_type(sum over k < n of srcs[k][i]) for i in [lo, hi), added in k order in
 * f32. dst may alias srcs[k] (element i is read from every source before it is written). */
void ts_comm_sum_range(void *dst, const void *const *srcs, int n, size_t lo, size_t hi,
                       ts_type type);
/* [lo, hi) of count elements for rank r of n (the chunking every transport uses). */
static inline void ts_comm_chunk(size_t count, int r, int n, size_t *lo, size_t *hi) {
    *lo = count * (size_t)r / (size_t)n;
    *hi = count * (size_t)(r + 1) / (size_t)n;
}

#endif /* TS_PARALLEL_COMM_H */
