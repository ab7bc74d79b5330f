/*
 * comm_local.c — the in-process transport: the ranks are threads of one process.
 *
 * The ranks of a group share one state object: a generation-counting barrier (mutex +
 * condition variable on CLOCK_MONOTONIC, so every wait can have a deadline), a "broken" flag
 * with the reason, and one posting slot per rank. A collective posts its buffers in its
 * slot, meets the others, checks that every rank posted the same collective, then each rank
 * does its share of the work reading the other ranks' buffers directly:
 *
 *   all-reduce      rank r sums chunk r over all ranks' send buffers (rank order, f32) into
 *                   its recv; meet; copies the other chunks from their owners' recv; meet.
 *   reduce-scatter  rank r sums its chunk of every send buffer into its recv; meet.
 *   all-gather      rank r copies every rank's send into its recv; meet.
 *   broadcast       non-roots copy the root's buffer; meet.
 *
 * The last meeting of a collective guarantees no rank reuses (overwrites) a buffer another
 * rank still reads. Invariant: a slot is written only by its rank, and only between the last
 * meeting of one collective and the first of the next.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"
#include "util/error.h"

typedef struct slot {
    ts_coll kind;
    const void *send;
    void *recv;
    size_t n; /* elements (sums) or bytes */
    ts_type type;
    int root;
} slot;

typedef struct group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size, refs;
    int arrived;
    uint64_t gen;
    uint64_t *seen; /* [size]: generation + 1 at which each rank last arrived */
    bool broken;
    char why[TS_ERROR_MSG_MAX / 2];
    slot *slots; /* [size] */
} group;

typedef struct lrank {
    group *g;
    ts_comm *self;
    int rank;
} lrank;

static const char *const k_coll_names[TS_COLL_COUNT] = {
    "all_reduce_sum", "all_gather", "reduce_scatter_sum", "broadcast", "barrier",
};

static void deadline_after(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits until every rank arrived (wait_ms < 0: no deadline). On a deadline the group breaks
 * with the list of ranks that did not come. */
static ts_status meet(lrank *r, int wait_ms, ts_coll kind, ts_error *err) {
    group *g = r->g;
    pthread_mutex_lock(&g->mu);
    if (!g->broken) {
        uint64_t gen = g->gen;
        g->seen[r->rank] = gen + 1;
        if (++g->arrived == g->size) {
            g->arrived = 0;
            g->gen++;
            pthread_cond_broadcast(&g->cv);
            pthread_mutex_unlock(&g->mu);
            return TS_OK;
        }
        struct timespec dl;
        if (wait_ms >= 0) {
            deadline_after(&dl, wait_ms);
        }
        while (g->gen == gen && !g->broken) {
            if (wait_ms < 0) {
                pthread_cond_wait(&g->cv, &g->mu);
            } else if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT) {
                break;
            }
        }
        if (g->gen != gen) {
            pthread_mutex_unlock(&g->mu);
            return TS_OK;
        }
        if (!g->broken) {
            char missing[128] = "";
            size_t at = 0;
            for (int k = 0; k < g->size && at < sizeof missing - 8; k++) {
                if (g->seen[k] != gen + 1) {
                    at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%d",
                                           at ? ", " : "", k);
                }
            }
            g->broken = true;
            snprintf(g->why, sizeof g->why, "timed out after %d ms in %s waiting for rank(s) %s",
                     wait_ms, k_coll_names[kind], missing);
            pthread_cond_broadcast(&g->cv);
        }
    }
    char why[sizeof g->why];
    memcpy(why, g->why, sizeof why);
    pthread_mutex_unlock(&g->mu);
    return ts_error_set(err, TS_ERR_ABORTED, "comm local rank %d/%d: %s: group broken: %s", r->rank,
                        g->size, k_coll_names[kind], why);
}

static void fail_locked(group *g, const char *fmt, int rank, const char *why) {
    if (!g->broken) {
        g->broken = true;
        snprintf(g->why, sizeof g->why, fmt, rank, why);
        pthread_cond_broadcast(&g->cv);
    }
}

/* Posts this rank's collective and meets the others; checks that they all posted the same. */
static ts_status post(lrank *r, slot s, int wait_ms, ts_error *err) {
    group *g = r->g;
    g->slots[r->rank] = s;
    ts_status st = meet(r, wait_ms, s.kind, err);
    if (st != TS_OK) {
        return st;
    }
    for (int k = 0; k < g->size; k++) {
        const slot *o = &g->slots[k];
        if (o->kind != s.kind || o->n != s.n || o->type != s.type || o->root != s.root) {
            char why[160];
            snprintf(why, sizeof why, "rank %d called %s(n=%zu) while rank %d called %s(n=%zu)",
                     r->rank, k_coll_names[s.kind], s.n, k, k_coll_names[o->kind], o->n);
            pthread_mutex_lock(&g->mu);
            fail_locked(g, "rank %d: mismatched collectives: %s", r->rank, why);
            pthread_mutex_unlock(&g->mu);
            return ts_error_set(err, TS_ERR_STATE, "comm local rank %d: mismatched collectives: %s",
                                r->rank, why);
        }
    }
    return TS_OK;
}

static int timeout(const lrank *r) {
    return r->self->timeout_ms;
}

static ts_status local_all_reduce(void *ctx, const void *send, void *recv, size_t count,
                                  ts_type type, ts_error *err) {
    lrank *r = ctx;
    group *g = r->g;
    slot s = {.kind = TS_COLL_ALL_REDUCE, .send = send, .recv = recv, .n = count, .type = type};
    ts_status st = post(r, s, timeout(r), err);
    if (st != TS_OK) {
        return st;
    }
    const void *srcs[64];
    const void **src = g->size <= 64 ? srcs : malloc((size_t)g->size * sizeof *src);
    if (src == NULL) {
        ts_comm_fail(r->self, "out of memory");
        return ts_error_set(err, TS_ERR_NOMEM, "comm local: out of memory");
    }
    for (int k = 0; k < g->size; k++) {
        src[k] = g->slots[k].send;
    }
    size_t lo, hi, es = ts_comm_type_size(type);
    ts_comm_chunk(count, r->rank, g->size, &lo, &hi);
    ts_comm_sum_range(recv, src, g->size, lo, hi, type);
    if (src != srcs) {
        free(src);
    }
    if ((st = meet(r, timeout(r), s.kind, err)) != TS_OK) {
        return st;
    }
    for (int k = 0; k < g->size; k++) {
        if (k != r->rank) {
            ts_comm_chunk(count, k, g->size, &lo, &hi);
            memcpy((char *)recv + lo * es, (const char *)g->slots[k].recv + lo * es,
                   (hi - lo) * es);
        }
    }
    return meet(r, timeout(r), s.kind, err);
}

static ts_status local_reduce_scatter(void *ctx, const void *send, void *recv, size_t count,
                                      ts_type type, ts_error *err) {
    lrank *r = ctx;
    group *g = r->g;
    slot s = {.kind = TS_COLL_REDUCE_SCATTER, .send = send, .recv = recv, .n = count, .type = type};
    ts_status st = post(r, s, timeout(r), err);
    if (st != TS_OK) {
        return st;
    }
    size_t es = ts_comm_type_size(type);
    size_t off = (size_t)r->rank * count * es;
    const void *srcs[64];
    const void **src = g->size <= 64 ? srcs : malloc((size_t)g->size * sizeof *src);
    if (src == NULL) {
        ts_comm_fail(r->self, "out of memory");
        return ts_error_set(err, TS_ERR_NOMEM, "comm local: out of memory");
    }
    for (int k = 0; k < g->size; k++) {
        src[k] = (const char *)g->slots[k].send + off;
    }
    ts_comm_sum_range(recv, src, g->size, 0, count, type);
    if (src != srcs) {
        free(src);
    }
    return meet(r, timeout(r), s.kind, err);
}

static ts_status local_all_gather(void *ctx, const void *send, void *recv, size_t bytes,
                                  ts_error *err) {
    lrank *r = ctx;
    group *g = r->g;
    slot s = {.kind = TS_COLL_ALL_GATHER, .send = send, .recv = recv, .n = bytes};
    ts_status st = post(r, s, timeout(r), err);
    if (st != TS_OK) {
        return st;
    }
    for (int k = 0; k < g->size; k++) {
        char *dst = (char *)recv + (size_t)k * bytes;
        if (dst != g->slots[k].send) {
            memcpy(dst, g->slots[k].send, bytes);
        }
    }
    return meet(r, timeout(r), s.kind, err);
}

static ts_status local_broadcast(void *ctx, void *buf, size_t bytes, int root, int wait_ms,
                                 ts_error *err) {
    lrank *r = ctx;
    group *g = r->g;
    slot s = {.kind = TS_COLL_BROADCAST, .send = buf, .recv = buf, .n = bytes, .root = root};
    ts_status st = post(r, s, wait_ms < 0 ? -1 : timeout(r), err);
    if (st != TS_OK) {
        return st;
    }
    if (r->rank != root) {
        memcpy(buf, g->slots[root].send, bytes);
    }
    return meet(r, timeout(r), s.kind, err);
}

static ts_status local_barrier(void *ctx, ts_error *err) {
    lrank *r = ctx;
    slot s = {.kind = TS_COLL_BARRIER};
    return post(r, s, timeout(r), err);
}

static void local_fail(void *ctx, const char *why) {
    lrank *r = ctx;
    pthread_mutex_lock(&r->g->mu);
    fail_locked(r->g, "rank %d failed: %s", r->rank, why);
    pthread_mutex_unlock(&r->g->mu);
}

static void group_free(group *g) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->seen);
    free(g->slots);
    free(g);
}

static void local_destroy(void *ctx) {
    lrank *r = ctx;
    group *g = r->g;
    pthread_mutex_lock(&g->mu);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) {
        group_free(g);
    }
    free(r);
}

static const ts_comm_iface k_local_iface = {
    .name = "local",
    .all_reduce_sum = local_all_reduce,
    .all_gather = local_all_gather,
    .reduce_scatter_sum = local_reduce_scatter,
    .broadcast = local_broadcast,
    .barrier = local_barrier,
    .fail = local_fail,
    .abort = local_fail,
    .destroy = local_destroy,
};

ts_status ts_comm_local_create(int size, ts_comm **out, ts_error *err) {
    if (out == NULL || size < 1 || size > 1024) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "comm local: a group of %d ranks (want 1..1024)", size);
    }
    group *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "comm local: out of memory");
    }
    g->size = size;
    g->seen = calloc((size_t)size, sizeof *g->seen);
    g->slots = calloc((size_t)size, sizeof *g->slots);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    if (g->seen == NULL || g->slots == NULL || rc != 0) {
        group_free(g);
        return ts_error_set(err, TS_ERR_NOMEM, "comm local: out of memory");
    }
    for (int k = 0; k < size; k++) {
        out[k] = NULL;
    }
    for (int k = 0; k < size; k++) {
        ts_comm *c = calloc(1, sizeof *c);
        lrank *r = calloc(1, sizeof *r);
        if (c == NULL || r == NULL) {
            free(c);
            free(r);
            for (int j = 0; j < k; j++) {
                ts_comm_destroy(out[j]);
                out[j] = NULL;
            }
            if (k == 0) {
                group_free(g);
            }
            return ts_error_set(err, TS_ERR_NOMEM, "comm local: out of memory");
        }
        r->g = g;
        r->self = c;
        r->rank = k;
        g->refs++;
        c->iface = &k_local_iface;
        c->ctx = r;
        c->rank = k;
        c->size = size;
        ts_comm_set_timeout(c, 0);
        out[k] = c;
    }
    return TS_OK;
}
