/*
 * threadpool.h — a persistent pool of worker threads with a spin-then-futex barrier.
 *
 * One pool belongs to one CPU backend (created with it, passed explicitly; there is no
 * global pool). ts_threadpool_run() executes a task on all n threads — the caller is thread
 * 0 — and returns when every thread has finished it. Inside a task, threads synchronise
 * with ts_threadpool_barrier(): waiters spin briefly (cheap when the other threads arrive
 * within microseconds, the common case between ops) and then sleep on a futex so that idle
 * or oversubscribed machines are not burnt.
 *
 * Thread safety: one ts_threadpool_run at a time (the backend runs one graph at a time).
 */
#ifndef TS_BACKENDS_CPU_THREADPOOL_H
#define TS_BACKENDS_CPU_THREADPOOL_H

#include "tessera.h"

typedef struct ts_threadpool ts_threadpool;
typedef void (*ts_task_fn)(void *arg, int ith, int nth);

/* Starts n_threads - 1 workers (n_threads >= 1). */
ts_status ts_threadpool_create(int n_threads, ts_threadpool **out, ts_error *err);
/* Stops and joins the workers. NULL is a no-op. */
void ts_threadpool_destroy(ts_threadpool *p);
int ts_threadpool_size(const ts_threadpool *p);
/* Runs fn(arg, ith, n) on every thread and waits for all of them. */
void ts_threadpool_run(ts_threadpool *p, ts_task_fn fn, void *arg);
/* Blocks until all n threads of the current run have called it. */
void ts_threadpool_barrier(ts_threadpool *p);

#endif /* TS_BACKENDS_CPU_THREADPOOL_H */
