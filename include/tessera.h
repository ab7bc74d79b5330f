/*
 * tessera.h — the public C API of tessera, an LLM inference engine.
 *
 * Conventions (see docs/ and STYLE.md):
 *  - Every fallible function returns ts_status: TS_OK (0) on success, a negative code on
 *    failure. Results come back through out-parameters. ts_status_str() names each code.
 *  - Objects are opaque handles created and destroyed in symmetric pairs
 *    (ts_x_open / ts_x_close, ts_x_create / ts_x_destroy). The caller owns what it creates.
 *  - Detail about a failure goes into a caller-provided ts_error (what was wrong and where);
 *    functions accept NULL when the caller does not want the message.
 *  - The library never exits the process and never asserts on input.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_VERSION_MAJOR 0
#define TS_VERSION_MINOR 1
#define TS_VERSION_PATCH 0

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_INVALID_ARG = -1, /* a caller passed a bad argument (NULL, out of range) */
    TS_ERR_NOMEM = -2,       /* an allocation failed */
    TS_ERR_IO = -3,          /* open/read/write/mmap failed; the message has errno's text */
    TS_ERR_FORMAT = -4,      /* input data is malformed (file, JSON, vocabulary, template) */
    TS_ERR_UNSUPPORTED = -5, /* well-formed but not supported (type, architecture, version) */
    TS_ERR_NOT_FOUND = -6,   /* a key, tensor, token or name does not exist */
    TS_ERR_TYPE = -7,        /* a value exists but has a different type than asked for */
    TS_ERR_RANGE = -8,       /* a value is outside the allowed range (index, length, size) */
    TS_ERR_OVERFLOW = -9,    /* a size computation would overflow */
    TS_ERR_STATE = -10,      /* the object is not in a state that allows the call */
    TS_ERR_LIMIT = -11,      /* a configured limit was reached (context, queue, blocks) */
    TS_ERR_ABORTED = -12,    /* the operation was cancelled */
    TS_ERR_INTERNAL = -13,   /* a bug in tessera: please report it */
} ts_status;

/* Returns a static, human-readable name for a status ("TS_ERR_FORMAT: malformed input"). */
const char *ts_status_str(ts_status status);

/* Error detail. Fixed-size so that reporting an error never needs an allocation; messages
 * longer than the buffer are truncated with "...". */
#define TS_ERROR_MSG_MAX 512
typedef struct ts_error {
    ts_status status;
    char msg[TS_ERROR_MSG_MAX];
} ts_error;

/* Returns "major.minor.patch". */
const char *ts_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
