/*
 * json_str.h — writing a JSON string literal: the one escaper every layer uses (the server's
 * responses, the chat template's tojson, the schema compiler's GBNF literals, the runtime's
 * request JSON).
 *
 * The literal is written with its quotes. '"', '\\' and the control characters are always
 * escaped (\b \f \n \r \t as short escapes, the others as \u00XX). With TS_JSON_ASCII every
 * code point past 0x7E is escaped too, as Python's json.dumps does by default (\u00XX..\uXXXX,
 * a surrogate pair past U+FFFF; DEL as \u007f); bytes that are not valid UTF-8 are then
 * written as \ufffd. Without it such bytes are copied as they are. Thread-safe: no shared state.
 */
#ifndef TS_UTIL_JSON_STR_H
#define TS_UTIL_JSON_STR_H

#include <stddef.h>

#include "util/buf.h"

enum {
    TS_JSON_ASCII = 1, /* escape every non-ASCII code point and DEL */
};

/* Appends the JSON string literal for s[0..n) to b (see the file comment for flags). */
void ts_json_put_str(ts_buf *b, const char *s, size_t n, unsigned flags);

#endif /* TS_UTIL_JSON_STR_H */
