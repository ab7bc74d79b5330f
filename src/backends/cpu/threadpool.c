/*
 * threadpool.c — persistent workers, generation-counter dispatch and a sense-reversing
 * barrier; waiting spins for a bounded number of iterations, then sleeps on a Linux futex.
 * A waiter registers in `sleepers` before sleeping and the releaser wakes only when that
 * count is non-zero; both use sequentially consistent atomics, so either the releaser sees
 * the sleeper or the sleeper's futex sees the new value and does not block.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/threadpool.h"
#include "util/error.h"

/* Spin iterations before sleeping (~50-100 us): long enough to catch a barrier between two
 * ops, short enough not to starve the thread being waited for on a busy machine (measured:
 * 20000+ made 2-thread runs 10x slower under load on a shared 2-core VM). */
#define SPIN_ITERS 2000

typedef struct worker {
    struct ts_threadpool *pool;
    int ith;
    pthread_t thread;
} worker;

struct ts_threadpool {
    int n;
    worker *workers;
    /* dispatch */
    atomic_uint gen;
    atomic_int sleepers_gen;
    ts_task_fn fn;
    void *arg;
    atomic_bool stop;
    /* barrier */
    atomic_int arrived;
    atomic_uint phase;
    atomic_int sleepers_phase;
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(atomic_uint *addr, unsigned val) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits until *addr != old: spin, then sleep. */
static void wait_change(atomic_uint *addr, unsigned old, atomic_int *sleepers) {
    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(addr, memory_order_acquire) != old) {
            return;
        }
        cpu_relax();
    }
    while (atomic_load(addr) == old) {
        atomic_fetch_add(sleepers, 1);
        futex_wait(addr, old);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void bump_and_wake(atomic_uint *addr, atomic_int *sleepers) {
    atomic_fetch_add(addr, 1);
    if (atomic_load(sleepers) > 0) {
        futex_wake_all(addr);
    }
}

void ts_threadpool_barrier(ts_threadpool *p) {
    if (p->n == 1) {
        return;
    }
    unsigned phase = atomic_load(&p->phase);
    if (atomic_fetch_add(&p->arrived, 1) == p->n - 1) {
        atomic_store(&p->arrived, 0);
        bump_and_wake(&p->phase, &p->sleepers_phase);
    } else {
        wait_change(&p->phase, phase, &p->sleepers_phase);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    ts_threadpool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        wait_change(&p->gen, seen, &p->sleepers_gen);
        seen = atomic_load(&p->gen);
        if (atomic_load(&p->stop)) {
            break;
        }
        p->fn(p->arg, w->ith, p->n);
        ts_threadpool_barrier(p);
    }
    return NULL;
}

ts_status ts_threadpool_create(int n_threads, ts_threadpool **out, ts_error *err) {
    if (out == NULL || n_threads < 1 || n_threads > 1024) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "threadpool: %d threads (want 1..1024)",
                            n_threads);
    }
    ts_threadpool *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "threadpool: out of memory");
    }
    p->n = n_threads;
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (p->workers == NULL) {
        free(p);
        return ts_error_set(err, TS_ERR_NOMEM, "threadpool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i;
        int rc = pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            p->n = i; /* join only the started ones */
            ts_threadpool_destroy(p);
            return ts_error_set(err, TS_ERR_LIMIT, "threadpool: cannot start thread %d of %d", i,
                                n_threads);
        }
    }
    *out = p;
    return TS_OK;
}

void ts_threadpool_destroy(ts_threadpool *p) {
    if (p == NULL) {
        return;
    }
    atomic_store(&p->stop, true);
    bump_and_wake(&p->gen, &p->sleepers_gen);
    for (int i = 1; i < p->n; i++) {
        pthread_join(p->workers[i].thread, NULL);
    }
    free(p->workers);
    free(p);
}

int ts_threadpool_size(const ts_threadpool *p) {
    return p->n;
}

void ts_threadpool_run(ts_threadpool *p, ts_task_fn fn, void *arg) {
    p->fn = fn;
    p->arg = arg;
    if (p->n > 1) {
        bump_and_wake(&p->gen, &p->sleepers_gen);
    }
    fn(arg, 0, p->n);
    ts_threadpool_barrier(p);
}
