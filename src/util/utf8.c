/* utf8.c — UTF-8 coding (see utf8.h). */
#include "util/utf8.h"

size_t ts_utf8_lead_len(unsigned char c) {
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xC0) {
        return 0;
    }
    if (c < 0xE0) {
        return 2;
    }
    if (c < 0xF0) {
        return 3;
    }
    if (c < 0xF8) {
        return 4;
    }
    return 0;
}

size_t ts_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    size_t len = ts_utf8_lead_len(u[0]);
    if (len == 0 || len > n) {
        return 0;
    }
    if (len == 1) {
        *cp = u[0];
        return 1;
    }
    uint32_t c = u[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (u[i] & 0x3Fu);
    }
    /* Reject overlong forms, surrogates and values past the Unicode range. */
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_for_len[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return 0;
    }
    *cp = c;
    return len;
}

size_t ts_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ts_utf8_count(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        uint32_t cp;
        size_t len = ts_utf8_decode(s + i, n - i, &cp);
        i += len ? len : 1;
    }
    return count;
}

int ts_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = ts_utf8_decode(s + i, n - i, &cp);
        if (len == 0) {
            return 0;
        }
        i += len;
    }
    return 1;
}
