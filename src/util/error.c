/* error.c — status names and error-message formatting. */
#include "util/error.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ts_status_str(ts_status status) {
    switch (status) {
    case TS_OK: return "TS_OK: success";
    case TS_ERR_INVALID_ARG: return "TS_ERR_INVALID_ARG: invalid argument";
    case TS_ERR_NOMEM: return "TS_ERR_NOMEM: out of memory";
    case TS_ERR_IO: return "TS_ERR_IO: input/output error";
    case TS_ERR_FORMAT: return "TS_ERR_FORMAT: malformed input";
    case TS_ERR_UNSUPPORTED: return "TS_ERR_UNSUPPORTED: not supported";
    case TS_ERR_NOT_FOUND: return "TS_ERR_NOT_FOUND: not found";
    case TS_ERR_TYPE: return "TS_ERR_TYPE: type mismatch";
    case TS_ERR_RANGE: return "TS_ERR_RANGE: value out of range";
    case TS_ERR_OVERFLOW: return "TS_ERR_OVERFLOW: size overflow";
    case TS_ERR_STATE: return "TS_ERR_STATE: invalid state";
    case TS_ERR_LIMIT: return "TS_ERR_LIMIT: limit reached";
    case TS_ERR_ABORTED: return "TS_ERR_ABORTED: aborted";
    case TS_ERR_INTERNAL: return "TS_ERR_INTERNAL: internal error";
    }
    return "unknown status";
}

const char *ts_version(void) {
    return "0.1.0";
}

/* Marks a truncated message with a trailing "..." so a reader knows text is missing. */
static void mark_truncated(char *msg, int written) {
    if (written >= TS_ERROR_MSG_MAX) {
        memcpy(msg + TS_ERROR_MSG_MAX - 4, "...", 4);
    }
}

ts_status ts_error_set(ts_error *err, ts_status status, const char *fmt, ...) {
    assert(err != NULL);
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0) {
        err->msg[0] = '\0';
    }
    mark_truncated(err->msg, n);
    return status;
}

ts_status ts_error_prefix(ts_error *err, const char *fmt, ...) {
    assert(err != NULL);
    char prefix[TS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return err->status;
    }
    char joined[TS_ERROR_MSG_MAX];
    int m = snprintf(joined, sizeof joined, "%s%s", prefix, err->msg);
    mark_truncated(joined, m);
    memcpy(err->msg, joined, sizeof joined);
    return err->status;
}

void ts_error_clear(ts_error *err) {
    assert(err != NULL);
    err->status = TS_OK;
    err->msg[0] = '\0';
}
