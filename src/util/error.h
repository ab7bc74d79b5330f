/*
 * error.h — recording what went wrong and where.
 *
 * ts_error_set() formats a message into a caller-owned ts_error and returns the status it was
 * given, so failure paths read as one line:
 *
 *     return ts_error_set(err, TS_ERR_FORMAT, "gguf: kv %" PRIu64 " at offset 0x%zx: ...", ...);
 *
 * ts_error_prefix() prepends context to an existing message when an error travels up a
 * layer ("model 'x.gguf': " + "gguf: tensor 3 ..."). Thread-safe: no shared state.
 *
 * Inside src/ an error buffer is never NULL: the public functions of include/tessera.h accept
 * NULL and substitute a local ts_error, and every internal function takes a buffer and passes
 * it on (a local ts_error where the message is not wanted). The functions here therefore
 * require a non-NULL err (asserted), and the status a caller gets never depends on whether it
 * asked for the message.
 */
#ifndef TS_UTIL_ERROR_H
#define TS_UTIL_ERROR_H

#include "tessera.h"

#if defined(__GNUC__)
#define TS_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define TS_PRINTF(fmt_idx, arg_idx)
#endif

/* Sets err->status and err->msg (err not NULL); returns status. */
ts_status ts_error_set(ts_error *err, ts_status status, const char *fmt, ...) TS_PRINTF(3, 4);

/* Prepends formatted context to err->msg (err not NULL); returns err->status. */
ts_status ts_error_prefix(ts_error *err, const char *fmt, ...) TS_PRINTF(2, 3);

/* Clears err (not NULL) to TS_OK with an empty message. */
void ts_error_clear(ts_error *err);

#endif /* TS_UTIL_ERROR_H */
