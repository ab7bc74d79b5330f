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

/* Where a buffer's storage comes from. NULL (the zero default): malloc / realloc, and the
 * buffer owns its storage. Otherwise grow is called whenever need bytes (contents plus the
 * NUL) no longer fit: given the current capacity in *cap, it returns a block of *cap >= need
 * bytes holding the n bytes of old (copied or grown in place), or NULL for an allocation failure
 * (then oom is set). Such a buffer does not own its storage: ts_buf_take returns it and ts_buf_free
 * forgets it without freeing (the owner of grow_ctx frees it, e.g. an arena). grow may also not
 * return at all (a longjmp to its owner's error handler), so ts_buf keeps no other allocation
 * across it. */
typedef void *(*ts_buf_grow_fn)(void *grow_ctx, void *old, size_t n, size_t need, size_t *cap);

typedef struct ts_buf {
    char *p;  /* NUL-terminated once anything was appended; NULL before */
    size_t n; /* bytes, without the NUL */
    size_t cap;
    bool oom;            /* an allocation failed; the contents are incomplete */
    ts_buf_grow_fn grow; /* NULL: malloc'd storage (see ts_buf_grow_fn) */
    void *grow_ctx;
} ts_buf;

void ts_buf_put(ts_buf *b, const char *s, size_t n);
void ts_buf_puts(ts_buf *b, const char *s);
void ts_buf_putc(ts_buf *b, char c);
/* Appends printf-formatted text (any length). */
void ts_buf_printf(ts_buf *b, const char *fmt, ...) TS_BUF_PRINTF(2, 3);
/* Takes the contents (NULL when nothing was appended or an allocation failed; then freed) and
 * leaves b empty (a grow function stays). The caller owns the result (with a grow function:
 * the grow function's owner does). */
char *ts_buf_take(ts_buf *b);
/* Frees the contents and leaves b empty (reusable; a grow function stays). */
void ts_buf_free(ts_buf *b);

#endif /* TS_UTIL_BUF_H */
