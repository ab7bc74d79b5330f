/* buf.c — the growable byte string of buf.h. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ts_buf_put(ts_buf *b, const char *s, size_t n) {
    if (b->oom) {
        return;
    }
    if (n > SIZE_MAX / 4 - b->n) {
        b->oom = true;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n > 0) {
        memcpy(b->p + b->n, s, n);
    }
    b->n += n;
    b->p[b->n] = '\0';
}

void ts_buf_puts(ts_buf *b, const char *s) {
    ts_buf_put(b, s, strlen(s));
}

void ts_buf_putc(ts_buf *b, char c) {
    ts_buf_put(b, &c, 1);
}

void ts_buf_printf(ts_buf *b, const char *fmt, ...) {
    if (b->oom) {
        return;
    }
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (len < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)len < sizeof small) {
        ts_buf_put(b, small, (size_t)len);
        return;
    }
    char *big = malloc((size_t)len + 1);
    if (big == NULL) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)len + 1, fmt, ap);
    va_end(ap);
    ts_buf_put(b, big, (size_t)len);
    free(big);
}

char *ts_buf_take(ts_buf *b) {
    char *p = b->oom ? NULL : b->p;
    if (b->oom) {
        free(b->p);
    }
    *b = (ts_buf){0};
    return p;
}

void ts_buf_free(ts_buf *b) {
    free(b->p);
    *b = (ts_buf){0};
}
