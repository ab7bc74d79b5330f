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

#if defined(__GNUC__)
#define TS_BUF_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define TS_BUF_PRINTF(fmt_idx, arg_idx)
#endif

typedef struct ts_buf {
    char *p;  /* NUL-terminated once anything was appended; NULL before */
    size_t n; /* bytes, without the NUL */
    size_t cap;
    bool oom; /* an allocation failed; the contents are incomplete */
} ts_buf;

void ts_buf_put(ts_buf *b, const char *s, size_t n);
void ts_buf_puts(ts_buf *b, const char *s);
void ts_buf_putc(ts_buf *b, char c);
/* Appends printf-formatted text (any length). */
void ts_buf_printf(ts_buf *b, const char *fmt, ...) TS_BUF_PRINTF(2, 3);
/* Takes the contents (NULL when nothing was appended or an allocation failed; then freed) and
 * leaves b empty. The caller owns the result. */
char *ts_buf_take(ts_buf *b);
/* Frees the contents and leaves b empty (reusable). */
void ts_buf_free(ts_buf *b);

#endif /* TS_UTIL_BUF_H */
