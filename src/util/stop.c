/* stop.c — cancellation and deadlines for long work (see stop.h). */
#include "util/stop.h"

#include <time.h>

#include "util/error.h"

int64_t ts_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

ts_status ts_stop_check(const ts_stop *stop, const char *what, ts_error *err) {
    if (stop == NULL) {
        return TS_OK;
    }
    if (stop->cancel != NULL && stop->cancel(stop->user)) {
        return ts_error_set(err, TS_ERR_ABORTED, "%s: cancelled", what);
    }
    if (stop->deadline_ns != 0 && ts_now_ns() >= stop->deadline_ns) {
        return ts_error_set(err, TS_ERR_LIMIT, "%s: time limit reached", what);
    }
    return TS_OK;
}
