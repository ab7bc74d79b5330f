/*
 * comm_nccl.c — the NCCL transport: one rank per GPU (CUDA builds).
 *
 * NCCL needs one unique id shared by all ranks before its communicator exists; rank 0 makes
 * it and the bootstrap communicator (local threads or MPI) broadcasts it. Buffers are device
 * pointers. Each collective is enqueued on the communicator's own stream and then waited for
 * by polling (cudaStreamQuery, plus ncclCommGetAsyncError for network failures) up to the
 * communicator's timeout; on a timeout or an asynchronous error the NCCL communicator is
 * aborted (ncclCommAbort), so no rank hangs, and every later call fails.
 *
 * Sums run in NCCL's own order and precision for f16/bf16 (comm.h: equal within rounding,
 * not bit-identical to the host transports).
 *
 * Without TS_HAVE_NCCL (a build without -DTS_CUDA=ON) ts_comm_nccl_create says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"
#include "util/error.h"

#ifdef TS_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

typedef struct nrank {
    ncclComm_t comm;
    cudaStream_t stream;
    ts_comm *self;
    int device;
    bool broken;
    char why[TS_ERROR_MSG_MAX / 2];
    int *flag; /* one device int for barriers */
} nrank;

static ts_status nccl_err(nrank *n, ncclResult_t rc, const char *what, ts_error *err) {
    n->broken = true;
    snprintf(n->why, sizeof n->why, "%s: %s", what, ncclGetErrorString(rc));
    return ts_error_set(err, TS_ERR_IO, "comm nccl rank %d/%d: %s: %s", n->self->rank,
                        n->self->size, what, ncclGetErrorString(rc));
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Waits for the stream with a deadline (wait_ms < 0: none), watching NCCL's async errors. */
static ts_status finish(nrank *n, ncclResult_t rc, int wait_ms, const char *what, ts_error *err) {
    if (rc != ncclSuccess) {
        return nccl_err(n, rc, what, err);
    }
    double t0 = now_ms();
    for (;;) {
        cudaError_t ce = cudaStreamQuery(n->stream);
        if (ce == cudaSuccess) {
            return TS_OK;
        }
        if (ce != cudaErrorNotReady) {
            n->broken = true;
            snprintf(n->why, sizeof n->why, "%s: %s", what, cudaGetErrorString(ce));
            return ts_error_set(err, TS_ERR_IO, "comm nccl rank %d: %s: %s", n->self->rank, what,
                                cudaGetErrorString(ce));
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(n->comm, &async);
        if (async != ncclSuccess || (wait_ms >= 0 && now_ms() - t0 > wait_ms)) {
            ncclCommAbort(n->comm);
            n->comm = NULL;
            n->broken = true;
            snprintf(n->why, sizeof n->why, "%s %s", what,
                     async != ncclSuccess ? ncclGetErrorString(async) : "timed out");
            return ts_error_set(err, TS_ERR_ABORTED, "comm nccl rank %d/%d: %s", n->self->rank,
                                n->self->size, n->why);
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static ts_status usable(nrank *n, const char *what, ts_error *err) {
    if (n->broken) {
        return ts_error_set(err, TS_ERR_ABORTED, "comm nccl rank %d/%d: %s: group broken: %s",
                            n->self->rank, n->self->size, what, n->why);
    }
    cudaSetDevice(n->device);
    return TS_OK;
}

static ncclDataType_t dtype(ts_type t) {
    return t == TS_TYPE_F16 ? ncclFloat16 : t == TS_TYPE_BF16 ? ncclBfloat16 : ncclFloat32;
}

static ts_status nccl_all_reduce(void *ctx, const void *send, void *recv, size_t count,
                                 ts_type type, ts_error *err) {
    nrank *n = ctx;
    ts_status st = usable(n, "all_reduce_sum", err);
    if (st != TS_OK) {
        return st;
    }
    ncclResult_t rc = ncclAllReduce(send, recv, count, dtype(type), ncclSum, n->comm, n->stream);
    return finish(n, rc, n->self->timeout_ms, "all_reduce_sum", err);
}

static ts_status nccl_all_gather(void *ctx, const void *send, void *recv, size_t bytes,
                                 ts_error *err) {
    nrank *n = ctx;
    ts_status st = usable(n, "all_gather", err);
    if (st != TS_OK) {
        return st;
    }
    ncclResult_t rc = ncclAllGather(send, recv, bytes, ncclUint8, n->comm, n->stream);
    return finish(n, rc, n->self->timeout_ms, "all_gather", err);
}

static ts_status nccl_reduce_scatter(void *ctx, const void *send, void *recv, size_t count,
                                     ts_type type, ts_error *err) {
    nrank *n = ctx;
    ts_status st = usable(n, "reduce_scatter_sum", err);
    if (st != TS_OK) {
        return st;
    }
    ncclResult_t rc =
        ncclReduceScatter(send, recv, count, dtype(type), ncclSum, n->comm, n->stream);
    return finish(n, rc, n->self->timeout_ms, "reduce_scatter_sum", err);
}

static ts_status nccl_broadcast(void *ctx, void *buf, size_t bytes, int root, int wait_ms,
                                ts_error *err) {
    nrank *n = ctx;
    ts_status st = usable(n, "broadcast", err);
    if (st != TS_OK) {
        return st;
    }
    ncclResult_t rc = ncclBroadcast(buf, buf, bytes, ncclUint8, root, n->comm, n->stream);
    return finish(n, rc, wait_ms < 0 ? -1 : n->self->timeout_ms, "broadcast", err);
}

static ts_status nccl_barrier(void *ctx, ts_error *err) {
    nrank *n = ctx;
    ts_status st = usable(n, "barrier", err);
    if (st != TS_OK) {
        return st;
    }
    ncclResult_t rc = ncclAllReduce(n->flag, n->flag, 1, ncclInt32, ncclSum, n->comm, n->stream);
    return finish(n, rc, n->self->timeout_ms, "barrier", err);
}

static void nccl_fail(void *ctx, const char *why) {
    nrank *n = ctx;
    if (!n->broken) {
        n->broken = true;
        snprintf(n->why, sizeof n->why, "rank %d failed: %s", n->self->rank, why);
    }
    if (n->comm != NULL) {
        ncclCommAbort(n->comm);
        n->comm = NULL;
    }
}

static void nccl_destroy(void *ctx) {
    nrank *n = ctx;
    cudaSetDevice(n->device);
    if (n->comm != NULL) {
        ncclCommDestroy(n->comm);
    }
    if (n->flag != NULL) {
        cudaFree(n->flag);
    }
    if (n->stream != NULL) {
        cudaStreamDestroy(n->stream);
    }
    free(n);
}

static const ts_comm_iface k_nccl_iface = {
    .name = "nccl",
    .all_reduce_sum = nccl_all_reduce,
    .all_gather = nccl_all_gather,
    .reduce_scatter_sum = nccl_reduce_scatter,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .fail = nccl_fail,
    .abort = nccl_fail,
    .destroy = nccl_destroy,
};

bool ts_comm_nccl_available(void) {
    return true;
}

ts_status ts_comm_nccl_create(ts_comm *bootstrap, int device, ts_comm **out, ts_error *err) {
    if (bootstrap == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "comm nccl: NULL argument");
    }
    *out = NULL;
    int n_dev = 0;
    cudaError_t ce = cudaGetDeviceCount(&n_dev);
    if (ce != cudaSuccess || device < 0 || device >= n_dev) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "comm nccl rank %d: CUDA device %d not available (%d devices%s%s)",
                            bootstrap->rank, device, n_dev, ce != cudaSuccess ? ": " : "",
                            ce != cudaSuccess ? cudaGetErrorString(ce) : "");
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (bootstrap->rank == 0) {
        ncclResult_t rc = ncclGetUniqueId(&id);
        if (rc != ncclSuccess) {
            ts_comm_fail(bootstrap, "ncclGetUniqueId failed");
            return ts_error_set(err, TS_ERR_IO, "comm nccl: ncclGetUniqueId: %s",
                                ncclGetErrorString(rc));
        }
    }
    ts_status st = ts_comm_broadcast(bootstrap, &id, sizeof id, 0, 0, err);
    if (st != TS_OK) {
        return ts_error_prefix(err, "comm nccl: exchanging the unique id: ");
    }
    ts_comm *c = calloc(1, sizeof *c);
    nrank *n = calloc(1, sizeof *n);
    if (c == NULL || n == NULL) {
        free(c);
        free(n);
        return ts_error_set(err, TS_ERR_NOMEM, "comm nccl: out of memory");
    }
    n->device = device;
    n->self = c;
    c->iface = &k_nccl_iface;
    c->ctx = n;
    c->rank = bootstrap->rank;
    c->size = bootstrap->size;
    ts_comm_set_timeout(c, bootstrap->timeout_ms);
    cudaSetDevice(device);
    ce = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) {
        ce = cudaMalloc((void **)&n->flag, sizeof(int));
    }
    if (ce != cudaSuccess) {
        ts_comm_destroy(c);
        return ts_error_set(err, TS_ERR_IO, "comm nccl: CUDA setup: %s", cudaGetErrorString(ce));
    }
    ncclResult_t rc = ncclCommInitRank(&n->comm, c->size, id, c->rank);
    if (rc != ncclSuccess) {
        n->comm = NULL;
        ts_comm_destroy(c);
        return ts_error_set(err, TS_ERR_IO, "comm nccl rank %d: ncclCommInitRank: %s", c->rank,
                            ncclGetErrorString(rc));
    }
    *out = c;
    return TS_OK;
}

#else /* !TS_HAVE_NCCL */

bool ts_comm_nccl_available(void) {
    return false;
}

ts_status ts_comm_nccl_create(ts_comm *bootstrap, int device, ts_comm **out, ts_error *err) {
    (void)bootstrap;
    (void)device;
    if (out != NULL) {
        *out = NULL;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "comm nccl: this tessera was built without CUDA/NCCL (configure with "
                        "-DTS_CUDA=ON on a machine with the CUDA toolkit and NCCL)");
}

#endif /* TS_HAVE_NCCL */
