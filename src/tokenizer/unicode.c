/* unicode.c — UTF-8 coding and table lookups (see unicode.h). */
#include "tokenizer/unicode.h"

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

uint16_t ts_uni_flags(uint32_t cp) {
    if (cp > 0x10FFFF) {
        return TS_UNI_UNDEFINED;
    }
    /* Last range whose first code point is <= cp. */
    size_t lo = 0, hi = ts_uni_category_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts_uni_category_ranges[mid].first <= cp) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return ts_uni_category_ranges[lo].flags;
}

bool ts_uni_is_whitespace(uint32_t cp) {
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680) {
        return true;
    }
    return (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

uint32_t ts_uni_tolower(uint32_t cp) {
    size_t lo = 0, hi = ts_uni_lower_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts_uni_lower_pairs[mid].from < cp) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (lo < ts_uni_lower_count && ts_uni_lower_pairs[lo].from == cp)
               ? ts_uni_lower_pairs[lo].to
               : cp;
}

size_t ts_uni_decompose_base(uint32_t cp, uint32_t out[3]) {
    /* Hangul syllables decompose arithmetically (Unicode ch. 3.12). */
    if (cp >= 0xAC00 && cp <= 0xD7A3) {
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0) {
            return 2;
        }
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    size_t lo = 0, hi = ts_uni_nfd_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts_uni_nfd_ranges[mid].last < cp) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < ts_uni_nfd_count && ts_uni_nfd_ranges[lo].first <= cp) {
        out[0] = ts_uni_nfd_ranges[lo].base;
    } else {
        out[0] = cp;
    }
    return 1;
}
