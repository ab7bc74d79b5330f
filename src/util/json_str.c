/* json_str.c — the JSON string escaper of json_str.h. */
#include "util/json_str.h"

#include <stdint.h>
#include <stdio.h>

#include "util/utf8.h"

static void put_u(ts_buf *b, uint32_t unit) {
    char esc[8];
    int len = snprintf(esc, sizeof esc, "\\u%04x", (unsigned)unit);
    ts_buf_put(b, esc, (size_t)len);
}

void ts_json_put_str(ts_buf *b, const char *s, size_t n, unsigned flags) {
    const int ascii = (flags & TS_JSON_ASCII) != 0;
    ts_buf_put(b, "\"", 1);
    size_t run = 0; /* start of the bytes not yet written */
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            break;
        }
        if (esc != NULL) {
            ts_buf_put(b, s + run, i - run);
            ts_buf_put(b, esc, 2);
            run = ++i;
            continue;
        }
        if (c < 0x20 || (ascii && c == 0x7F)) {
            ts_buf_put(b, s + run, i - run);
            put_u(b, c);
            run = ++i;
            continue;
        }
        if (c < 0x80 || !ascii) {
            i++;
            continue;
        }
        ts_buf_put(b, s + run, i - run);
        uint32_t cp;
        size_t len = ts_utf8_decode(s + i, n - i, &cp);
        if (len == 0) {
            put_u(b, 0xFFFD);
            len = 1;
        } else if (cp >= 0x10000) {
            cp -= 0x10000;
            put_u(b, 0xD800 + (cp >> 10));
            put_u(b, 0xDC00 + (cp & 0x3FF));
        } else {
            put_u(b, cp);
        }
        i += len;
        run = i;
    }
    ts_buf_put(b, s + run, n - run);
    ts_buf_put(b, "\"", 1);
}
