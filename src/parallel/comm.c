/*
 * comm.c — checked wrappers around the communicator vtable, statistics, and the summation
 * helper every host transport uses (rank-order f32 accumulation, one rounding).
 */
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "quant/quant.h"
#include "util/error.h"

#define DEFAULT_TIMEOUT_MS 60000

void ts_comm_destroy(ts_comm *c) {
    if (c == NULL) {
        return;
    }
    c->iface->destroy(c->ctx);
    free(c);
}

const char *ts_comm_name(const ts_comm *c) {
    return c != NULL ? c->iface->name : "(null)";
}

void ts_comm_set_timeout(ts_comm *c, int timeout_ms) {
    if (c != NULL) {
        c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    }
}

bool ts_comm_sum_type_ok(ts_type type) {
    return type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16;
}

size_t ts_comm_type_size(ts_type type) {
    return type == TS_TYPE_F32 ? 4 : 2;
}

static ts_status check(ts_comm *c, const void *a, const void *b, size_t n, const char *what,
                       ts_error *err) {
    if (c == NULL || (n > 0 && (a == NULL || b == NULL))) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "comm: %s: NULL argument", what);
    }
    return TS_OK;
}

static ts_status check_type(ts_comm *c, ts_type type, const char *what, ts_error *err) {
    if (!ts_comm_sum_type_ok(type)) {
        const char *name = ts_type_name((uint32_t)type);
        return ts_error_set(err, TS_ERR_TYPE,
                            "comm %s rank %d: %s of %s: only F32, F16 and BF16 can be summed",
                            c->iface->name, c->rank, what, name ? name : "?");
    }
    return TS_OK;
}

/* Adds a reduction or gather to the stats; n = ranks. */
static void account(ts_comm *c, ts_coll kind, uint64_t payload) {
    uint64_t n = (uint64_t)c->size;
    c->stats.calls[kind]++;
    c->stats.payload_bytes += payload;
    switch (kind) {
    case TS_COLL_ALL_REDUCE:
        c->stats.wire_bytes += 2 * (n - 1) * payload / n;
        break;
    case TS_COLL_REDUCE_SCATTER:
        c->stats.wire_bytes += (n - 1) * payload / n;
        break;
    case TS_COLL_ALL_GATHER:
        c->stats.wire_bytes += (n - 1) * payload;
        break;
    default:
        break;
    }
}

ts_status ts_comm_all_reduce_sum(ts_comm *c, const void *send, void *recv, size_t count,
                                 ts_type type, ts_error *err) {
    ts_status st = check(c, send, recv, count, "all_reduce_sum", err);
    if (st == TS_OK) {
        st = check_type(c, type, "all_reduce_sum", err);
    }
    if (st != TS_OK) {
        return st;
    }
    account(c, TS_COLL_ALL_REDUCE, (uint64_t)(count * ts_comm_type_size(type)));
    if (c->size == 1) {
        if (recv != send) {
            memmove(recv, send, count * ts_comm_type_size(type));
        }
        return TS_OK;
    }
    return c->iface->all_reduce_sum(c->ctx, send, recv, count, type, err);
}

ts_status ts_comm_all_gather(ts_comm *c, const void *send, void *recv, size_t bytes,
                             ts_error *err) {
    ts_status st = check(c, send, recv, bytes, "all_gather", err);
    if (st != TS_OK) {
        return st;
    }
    account(c, TS_COLL_ALL_GATHER, (uint64_t)bytes);
    if (c->size == 1) {
        if (recv != send) {
            memmove(recv, send, bytes);
        }
        return TS_OK;
    }
    return c->iface->all_gather(c->ctx, send, recv, bytes, err);
}

ts_status ts_comm_reduce_scatter_sum(ts_comm *c, const void *send, void *recv, size_t count,
                                     ts_type type, ts_error *err) {
    ts_status st = check(c, send, recv, count, "reduce_scatter_sum", err);
    if (st == TS_OK) {
        st = check_type(c, type, "reduce_scatter_sum", err);
    }
    if (st != TS_OK) {
        return st;
    }
    if (send == recv && c->size > 1) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "comm: reduce_scatter_sum cannot run in place");
    }
    account(c, TS_COLL_REDUCE_SCATTER,
            (uint64_t)(count * (size_t)c->size * ts_comm_type_size(type)));
    if (c->size == 1) {
        if (recv != send) {
            memmove(recv, send, count * ts_comm_type_size(type));
        }
        return TS_OK;
    }
    return c->iface->reduce_scatter_sum(c->ctx, send, recv, count, type, err);
}

ts_status ts_comm_broadcast(ts_comm *c, void *buf, size_t bytes, int root, int wait_ms,
                            ts_error *err) {
    ts_status st = check(c, buf, buf, bytes, "broadcast", err);
    if (st != TS_OK) {
        return st;
    }
    if (root < 0 || root >= c->size) {
        return ts_error_set(err, TS_ERR_RANGE, "comm: broadcast from rank %d of %d", root, c->size);
    }
    c->stats.calls[TS_COLL_BROADCAST]++;
    if (c->size == 1) {
        return TS_OK;
    }
    return c->iface->broadcast(c->ctx, buf, bytes, root, wait_ms, err);
}

ts_status ts_comm_barrier(ts_comm *c, ts_error *err) {
    if (c == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "comm: barrier: NULL communicator");
    }
    c->stats.calls[TS_COLL_BARRIER]++;
    return c->size == 1 ? TS_OK : c->iface->barrier(c->ctx, err);
}

void ts_comm_fail(ts_comm *c, const char *why) {
    if (c != NULL) {
        c->iface->fail(c->ctx, why != NULL ? why : "failed");
    }
}

void ts_comm_abort(ts_comm *c, const char *why) {
    if (c == NULL) {
        return;
    }
    c->iface->abort(c->ctx, why != NULL ? why : "aborted");
}

static float load(const void *p, size_t i, ts_type type) {
    uint16_t h;
    switch (type) {
    case TS_TYPE_F16:
        memcpy(&h, (const char *)p + 2 * i, 2);
        return ts_f16_to_f32(h);
    case TS_TYPE_BF16:
        memcpy(&h, (const char *)p + 2 * i, 2);
        return ts_bf16_to_f32(h);
    default: {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    }
}

static void store(void *p, size_t i, float v, ts_type type) {
    uint16_t h;
    switch (type) {
    case TS_TYPE_F16:
        h = ts_f32_to_f16(v);
        memcpy((char *)p + 2 * i, &h, 2);
        break;
    case TS_TYPE_BF16:
        h = ts_f32_to_bf16(v);
        memcpy((char *)p + 2 * i, &h, 2);
        break;
    default:
        memcpy((char *)p + 4 * i, &v, 4);
        break;
    }
}

void ts_comm_sum_range(void *dst, const void *const *srcs, int n, size_t lo, size_t hi,
                       ts_type type) {
    if (type == TS_TYPE_F32) {
        float *d = dst;
        for (size_t i = lo; i < hi; i++) {
            float s = ((const float *)srcs[0])[i];
            for (int k = 1; k < n; k++) {
                s += ((const float *)srcs[k])[i];
            }
            d[i] = s;
        }
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        float s = load(srcs[0], i, type);
        for (int k = 1; k < n; k++) {
            s += load(srcs[k], i, type);
        }
        store(dst, i, s, type);
    }
}
