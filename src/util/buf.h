/*
 * buf.h — a growable byte string for building text (JSON, prompts) piece by piece.
 *
 * Appending never fails loudly: when an allocation fails the buffer remembers it (oom) and
 * ignores further pieces, so a builder appends freely and checks once at the end:
 *
 *     ts_buf b = {0};
 *     ts_buf_puts(&b, "{\"a\":");
 *     ts_buf_put(&b, value, n);
 *     if (b.oom) { free(b.p); return NOMEM; }
 *     return b.p;   // NUL-terminated, owned by the caller
 */
#ifndef TS_UTIL_BUF_H
#define TS_UTIL_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ts_buf {
    char *p;  /* NUL-terminated once anything was appended; NULL before */
    size_t n; /* bytes, without the NUL */
    size_t cap;
    bool oom; /* an allocation failed; the contents are incomplete */
} ts_buf;

void ts_buf_put(ts_buf *b, const char *s, size_t n);
void ts_buf_puts(ts_buf *b, const char *s);

#endif /* TS_UTIL_BUF_H */
