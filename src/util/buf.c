/* buf.c — the growable byte string of buf.h. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for more bytes plus the NUL; false (and oom set) when that fails. */
static bool reserve(ts_buf *b, size_t more) {
    if (b->oom) {
        return false;
    }
    if (more > SIZE_MAX / 4 - b->n) {
        b->oom = true;
        return false;
    }
    size_t need = b->n + more + 1;
    if (need <= b->cap) {
        return true;
    }
    char *p;
    size_t cap = b->cap;
    if (b->grow != NULL) {
        p = b->grow(b->grow_ctx, b->p, b->n, need, &cap);
    } else {
        cap = b->cap ? b->cap : 256;
        while (cap < need) {
            cap *= 2;
        }
        p = realloc(b->p, cap);
    }
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void ts_buf_put(ts_buf *b, const char *s, size_t n) {
    if (!reserve(b, n)) {
        return;
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
    /* Longer text is formatted in place (no temporary that a grow function which does not
     * return could leak). */
    if (!reserve(b, (size_t)len)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

char *ts_buf_take(ts_buf *b) {
    char *p = b->oom ? NULL : b->p;
    if (b->oom && b->grow == NULL) {
        free(b->p);
    }
    *b = (ts_buf){.grow = b->grow, .grow_ctx = b->grow_ctx};
    return p;
}

void ts_buf_free(ts_buf *b) {
    if (b->grow == NULL) {
        free(b->p);
    }
    *b = (ts_buf){.grow = b->grow, .grow_ctx = b->grow_ctx};
}
