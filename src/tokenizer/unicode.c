/* unicode.c — UTF-8 coding and table lookups (see unicode.h). */
#include "tokenizer/unicode.h"

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
