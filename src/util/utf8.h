/*
 * utf8.h — UTF-8 coding shared by every layer (tokenizer, templates, grammars, server).
 *
 * One decoder for the project: it accepts exactly the well-formed sequences of the Unicode
 * standard (no overlong forms, no surrogates, nothing past U+10FFFF). Callers decide what an
 * invalid byte means for them (a replacement character, one byte taken as is, an error).
 * Thread-safe: pure functions.
 */
#ifndef TS_UTIL_UTF8_H
#define TS_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one UTF-8 sequence at s[0..n) (n >= 1). Returns its length (1..4) and stores the
 * code point; returns 0 when s[0] does not start a valid, complete sequence. */
size_t ts_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Number of bytes a sequence starting with lead byte c claims (1..4), or 0 when c cannot
 * start a sequence (a continuation byte or 0xF8..0xFF). Says nothing about validity. */
size_t ts_utf8_lead_len(unsigned char c);

/* Encodes cp (<= 0x10FFFF) into out[0..4); returns the length. */
size_t ts_utf8_encode(uint32_t cp, char out[4]);

/* Number of code points in s[0..n), each invalid byte counting as one. */
size_t ts_utf8_count(const char *s, size_t n);

/* True when s[0..n) is well-formed UTF-8 throughout. */
int ts_utf8_valid(const char *s, size_t n);

#endif /* TS_UTIL_UTF8_H */
