/*
 * stop.h — stopping long work that untrusted input can cause (a template render, a grammar or
 * schema compile) when its caller gives up or its time is over.
 *
 * The worker calls ts_stop_check() every so often (every few thousand steps: the check reads a
 * clock and may call a function); the caller fills a ts_stop:
 *
 *     ts_stop stop = {.cancel = client_gone, .user = conn, .deadline_ns = ts_now_ns() + 10e9};
 *     ...
 *     if ((st = ts_stop_check(&stop, "template", err)) != TS_OK) return st;
 *
 * A NULL ts_stop never stops. Thread-safe as far as the cancel function is (it is called on the
 * worker's thread; typically it reads an atomic flag).
 */
#ifndef TS_UTIL_STOP_H
#define TS_UTIL_STOP_H

#include <stdint.h>

#include "tessera.h"

typedef struct ts_stop {
    int (*cancel)(void *user); /* may be NULL; nonzero: the caller wants the work stopped */
    void *user;                /* passed to cancel */
    int64_t deadline_ns;       /* on ts_now_ns()'s clock; 0: none */
} ts_stop;

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
int64_t ts_now_ns(void);

/* TS_OK to go on; TS_ERR_ABORTED ("WHAT: cancelled") when cancel returned nonzero;
 * TS_ERR_LIMIT ("WHAT: time limit reached") past the deadline. stop may be NULL. */
ts_status ts_stop_check(const ts_stop *stop, const char *what, ts_error *err);

#endif /* TS_UTIL_STOP_H */
