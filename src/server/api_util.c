/* api_util.c — error replies and the byte-level checks made before a body is parsed. */
#include "server/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_api_error_set(ts_api_error *err, int status, const char *type, const char *param,
                           const char *code, const char *fmt, ...) {
    err->status = status;
    snprintf(err->type, sizeof err->type, "%s", type ? type : "invalid_request_error");
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    snprintf(err->code, sizeof err->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status == 404 ? TS_ERR_NOT_FOUND : TS_ERR_INVALID_ARG;
}

char *ts_api_error_json(const ts_api_error *err) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    if (e == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddStringToObject(e, "message", err->message);
    cJSON_AddStringToObject(e, "type", err->type);
    if (err->param[0] != '\0') {
        cJSON_AddStringToObject(e, "param", err->param);
    } else {
        cJSON_AddNullToObject(e, "param");
    }
    if (err->code[0] != '\0') {
        cJSON_AddStringToObject(e, "code", err->code);
    } else {
        cJSON_AddNullToObject(e, "code");
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

size_t ts_api_utf8_check(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4, cp = c & 0x07;
        } else {
            return i; /* continuation byte, overlong 2-byte lead, or beyond U+10FFFF */
        }
        if (i + n > len) {
            return i;
        }
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return i;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return i;
        }
        i += n;
    }
    return len;
}

int ts_api_json_depth(const char *s, size_t len, int max) {
    int depth = 0, deepest = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') {
                i++; /* skip the escaped character (a quote or backslash included) */
            } else if (c == '"') {
                in_str = false;
            }
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) {
                deepest = depth;
                if (deepest > max) {
                    return deepest;
                }
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return deepest;
}

size_t ts_api_json_control_check(const char *s, size_t len) {
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 && (in_str || (c != ' ' && c != '\t' && c != '\n' && c != '\r'))) {
            return i;
        }
        if (in_str && c == '\\') {
            i++;
            if (i < len && (unsigned char)s[i] < 0x20) {
                return i;
            }
        } else if (c == '"') {
            in_str = !in_str;
        }
    }
    return len;
}

bool ts_api_key_equal(const char *given, size_t given_len, const char *expected,
                      size_t expected_len) {
    if (expected_len == 0) {
        return false;
    }
    /* Walk the presented key whatever the expected one holds: the time depends on
     * given_len only, and a length mismatch is folded into the same accumulator. */
    unsigned diff = given_len != expected_len;
    for (size_t i = 0; i < given_len; i++) {
        diff |= (unsigned char)given[i] ^ (unsigned char)expected[i % expected_len];
    }
    return diff == 0;
}

const char *ts_api_json_kind(const cJSON *v) {
    if (v == NULL || cJSON_IsNull(v)) {
        return "null";
    }
    if (cJSON_IsString(v)) {
        return "a string";
    }
    if (cJSON_IsNumber(v)) {
        return "a number";
    }
    if (cJSON_IsBool(v)) {
        return "a boolean";
    }
    if (cJSON_IsArray(v)) {
        return "an array";
    }
    return "an object";
}

#define BODY_BAD(...) ts_api_error_set(err, 400, "invalid_request_error", NULL, NULL, __VA_ARGS__)

cJSON *ts_api_parse_body(const char *body, size_t len, ts_api_error *err) {
    size_t bad = ts_api_utf8_check(body, len);
    if (bad < len) {
        BODY_BAD("the body is not valid UTF-8 (byte offset %zu)", bad);
        return NULL;
    }
    bad = ts_api_json_control_check(body, len);
    if (bad < len) {
        BODY_BAD("the body is not valid JSON: control byte 0x%02x at byte offset %zu (escape it "
                 "inside strings)",
                 (unsigned)(unsigned char)body[bad], bad);
        return NULL;
    }
    if (ts_api_json_depth(body, len, TS_API_MAX_DEPTH) > TS_API_MAX_DEPTH) {
        BODY_BAD("the body nests arrays/objects deeper than %d levels", TS_API_MAX_DEPTH);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (root == NULL) {
        size_t at = end != NULL && end >= body ? (size_t)(end - body) : 0;
        /* cJSON stops at the escape, or just past its "\\u": name a lone surrogate. */
        size_t u = len;
        if (at >= 2 && at - 2 < len && body[at - 2] == '\\' && body[at - 1] == 'u') {
            u = at - 2;
        } else if (at + 6 <= len && body[at] == '\\' && body[at + 1] == 'u') {
            u = at;
        }
        if (u + 6 <= len && (body[u + 2] == 'd' || body[u + 2] == 'D') &&
            strchr("89abcdefABCDEF", body[u + 3]) != NULL && body[u + 3] != '\0') {
            BODY_BAD("the body is not valid JSON: a lone UTF-16 surrogate \\u%.4s near byte %zu "
                     "(a high surrogate \\uD800-\\uDBFF must be followed by a low one "
                     "\\uDC00-\\uDFFF)",
                     body + u + 2, u);
            return NULL;
        }
        BODY_BAD("the body is not valid JSON (error near byte %zu of %zu)", at, len);
        return NULL;
    }
    size_t used = (size_t)(end - body);
    while (used < len &&
           (body[used] == ' ' || body[used] == '\t' || body[used] == '\n' || body[used] == '\r')) {
        used++;
    }
    if (used < len) {
        BODY_BAD("the body has data after the JSON value (byte %zu of %zu)", used, len);
    } else if (!cJSON_IsObject(root)) {
        BODY_BAD("the body must be a JSON object, got %s", ts_api_json_kind(root));
    } else {
        return root;
    }
    cJSON_Delete(root);
    return NULL;
}
