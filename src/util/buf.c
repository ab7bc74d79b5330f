/* buf.c — the growable byte string of buf.h. */
#include "util/buf.h"

#include <stdint.h>
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
