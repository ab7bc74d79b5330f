/*
 * chat_out_calls.c — the text of one tool-call section into calls (see chat_out_internal.h).
 *
 * Every parser here is all or nothing: it either understands the whole section and appends
 * its calls, or appends none and the section goes back to the content. Arguments always come
 * out as compact JSON text of an object: JSON the model wrote is parsed and printed again
 * (cJSON, unformatted), a JSON string holding an object is unwrapped, key=value forms are
 * turned into an object. Values of the XML-like forms (<parameter=K>V, <arg_value>V) are
 * strings when the tool's schema says so, otherwise JSON when they parse as JSON, otherwise
 * strings.
 */
#include "runtime/chat_out_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- small text helpers ------------------------------------------------------------------ */

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void trim(const char **s, size_t *len) {
    while (*len > 0 && is_ws(**s)) {
        (*s)++, (*len)--;
    }
    while (*len > 0 && is_ws((*s)[*len - 1])) {
        (*len)--;
    }
}

static bool starts(const char *s, size_t len, const char *lit) {
    size_t n = strlen(lit);
    return len >= n && memcmp(s, lit, n) == 0;
}

/* Offset of lit in s[0..len), or len when absent. */
static size_t find(const char *s, size_t len, const char *lit) {
    size_t n = strlen(lit);
    if (n == 0 || n > len) {
        return len;
    }
    for (size_t i = 0; i + n <= len; i++) {
        if (s[i] == lit[0] && memcmp(s + i, lit, n) == 0) {
            return i;
        }
    }
    return len;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Function names: what OpenAI allows (a-z, A-Z, 0-9, _ and -) plus '.' and ':' some models
 * put in, 1..256 bytes. */
static bool valid_name(const char *s, size_t len) {
    if (len == 0 || len > 256) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_' && c != '-' && c != '.' && c != ':') {
            return false;
        }
    }
    return true;
}

/* One JSON value at the start of s[0..len) (leading whitespace allowed); *used gets the bytes
 * consumed. NULL when it does not parse. */
static cJSON *json_prefix(const char *s, size_t len, size_t *used) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    if (v == NULL) {
        return NULL;
    }
    *used = (size_t)(end - s);
    return v;
}

/* s[0..len) is exactly one JSON value, whitespace around it aside. */
static cJSON *json_whole(const char *s, size_t len) {
    size_t used = 0;
    cJSON *v = json_prefix(s, len, &used);
    if (v == NULL) {
        return NULL;
    }
    for (size_t i = used; i < len; i++) {
        if (!is_ws(s[i])) {
            cJSON_Delete(v);
            return NULL;
        }
    }
    return v;
}

/* ---- calls ------------------------------------------------------------------------------- */

void rt_chat_calls_truncate(chat_calls *out, size_t from) {
    for (size_t i = from; i < out->n; i++) {
        free(out->v[i].id);
        free(out->v[i].name);
        free(out->v[i].arguments);
    }
    if (from < out->n) {
        out->n = from;
    }
}

/* Takes ownership of name, arguments and id (any may be NULL after a failed allocation, which
 * fails the push). */
static bool push(chat_calls *out, char *name, char *arguments, char *id) {
    if (name == NULL || arguments == NULL || (out->n == out->cap && out->cap >= 1u << 16)) {
        free(name), free(arguments), free(id);
        return false;
    }
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 4;
        ts_chat_tool_call *v = realloc(out->v, cap * sizeof *v);
        if (v == NULL) {
            free(name), free(arguments), free(id);
            return false;
        }
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = (ts_chat_tool_call){.id = id, .name = name, .arguments = arguments};
    return true;
}

/* The tool called `name` in the request's tools, or NULL. */
static const cJSON *find_tool(const cJSON *tools, const char *name, size_t len) {
    const cJSON *t = NULL;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f != NULL ? f : t, "name");
        if (cJSON_IsString(n) && strlen(n->valuestring) == len &&
            memcmp(n->valuestring, name, len) == 0) {
            return f != NULL ? f : t;
        }
    }
    return NULL;
}

/* The JSON-schema "type" of parameter `param` of tool `fn`, or NULL when unknown. */
static const char *param_type(const cJSON *tools, const char *fn, const char *param) {
    const cJSON *f = find_tool(tools, fn, strlen(fn));
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(f, "parameters"), "properties");
    const cJSON *type =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, param), "type");
    return cJSON_IsString(type) ? type->valuestring : NULL;
}

/* Compact JSON text of a call's arguments: an object, a JSON string holding one, or nothing
 * (an empty object). NULL for anything else. */
static char *args_text(const cJSON *a) {
    if (a == NULL || cJSON_IsNull(a)) {
        return dup_n("{}", 2);
    }
    if (cJSON_IsObject(a)) {
        return cJSON_PrintUnformatted(a);
    }
    if (cJSON_IsString(a)) {
        cJSON *inner = json_whole(a->valuestring, strlen(a->valuestring));
        char *text = cJSON_IsObject(inner) ? cJSON_PrintUnformatted(inner) : NULL;
        cJSON_Delete(inner);
        return text;
    }
    return NULL;
}

/* A call written as a JSON object: {"name", "arguments"|"parameters"}, {"tool_name",
 * "parameters"} (Command R) or OpenAI's own {"type": "function", "function": {...}}. */
static bool call_from_json(const cJSON *o, const cJSON *tools, bool strict, chat_calls *out) {
    if (!cJSON_IsObject(o)) {
        return false;
    }
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(o, "function");
    const cJSON *src = cJSON_IsObject(fn) ? fn : o;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(src, "name");
    if (name == NULL) {
        name = cJSON_GetObjectItemCaseSensitive(src, "tool_name");
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(src, "arguments");
    if (args == NULL) {
        args = cJSON_GetObjectItemCaseSensitive(src, "parameters");
    }
    if (!cJSON_IsString(name) || !valid_name(name->valuestring, strlen(name->valuestring))) {
        return false;
    }
    if (strict &&
        (args == NULL || find_tool(tools, name->valuestring, strlen(name->valuestring)) == NULL)) {
        return false;
    }
    /* Mistral's own ids (9 alphanumerics) go back into its template with the results. */
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    char *id_text = NULL;
    if (cJSON_IsString(id) && strlen(id->valuestring) == 9) {
        bool alnum = true;
        for (const char *c = id->valuestring; *c; c++) {
            alnum &= isalnum((unsigned char)*c) != 0;
        }
        id_text = alnum ? dup_n(id->valuestring, 9) : NULL;
    }
    char *a = args_text(args);
    if (a == NULL) {
        free(id_text);
        return false;
    }
    return push(out, dup_n(name->valuestring, strlen(name->valuestring)), a, id_text);
}

/* A JSON value holding calls: one call, a list of calls, {"tool_call": call} or
 * {"tool_calls": [calls]}. */
static bool calls_from_json(const cJSON *v, const cJSON *tools, bool strict, chat_calls *out) {
    if (cJSON_IsObject(v)) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, "tool_calls");
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(v, "tool_call");
        if (cJSON_IsArray(list) && cJSON_GetObjectItemCaseSensitive(v, "name") == NULL) {
            v = list;
        } else if (cJSON_IsObject(one) && cJSON_GetObjectItemCaseSensitive(v, "name") == NULL) {
            return call_from_json(one, tools, strict, out);
        } else {
            return call_from_json(v, tools, strict, out);
        }
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
        return false;
    }
    const cJSON *e = NULL;
    cJSON_ArrayForEach(e, v) {
        if (!call_from_json(e, tools, strict, out)) {
            return false;
        }
    }
    return true;
}

/* JSON values one after another, separated by whitespace, ',' or ';'. */
static bool json_sequence(const char *s, size_t len, const cJSON *tools, bool strict,
                          chat_calls *out) {
    size_t i = 0;
    int n = 0;
    for (;;) {
        while (i < len && (is_ws(s[i]) || (n > 0 && (s[i] == ',' || s[i] == ';')))) {
            i++;
        }
        if (i == len) {
            return n > 0;
        }
        size_t used = 0;
        cJSON *v = json_prefix(s + i, len - i, &used);
        bool ok = v != NULL && calls_from_json(v, tools, strict, out);
        cJSON_Delete(v);
        if (!ok) {
            return false;
        }
        i += used;
        n++;
    }
}

/* ---- key/value forms ------------------------------------------------------------------- */

/* Adds key = raw text value to args, typed by the tool's schema (see the file comment). */
static bool add_typed(cJSON *args, const cJSON *tools, const char *fn, const char *key,
                      size_t key_len, const char *val, size_t val_len) {
    char *k = dup_n(key, key_len);
    char *v = dup_n(val, val_len);
    if (k == NULL || v == NULL || key_len == 0 || cJSON_GetObjectItemCaseSensitive(args, k)) {
        free(k), free(v);
        return false;
    }
    const char *type = param_type(tools, fn, k);
    cJSON *item = NULL;
    if (type == NULL || strcmp(type, "string") != 0) {
        item = json_whole(v, val_len);
    }
    if (item == NULL) {
        item = cJSON_CreateString(v);
    }
    bool ok = item != NULL && cJSON_AddItemToObject(args, k, item);
    if (!ok) {
        cJSON_Delete(item);
    }
    free(k), free(v);
    return ok;
}

static bool push_args(chat_calls *out, const char *name, size_t name_len, cJSON *args) {
    char *text = args != NULL ? cJSON_PrintUnformatted(args) : NULL;
    cJSON_Delete(args);
    return push(out, dup_n(name, name_len), text, NULL);
}

/* <function=N>\n<parameter=K>\nV\n</parameter>\n...</function> (Qwen3-Coder and kin). */
static bool xml_function(const char *s, size_t len, const cJSON *tools, chat_calls *out) {
    if (!starts(s, len, "<function=")) {
        return false;
    }
    s += 10, len -= 10;
    size_t gt = find(s, len, ">");
    const char *name = s;
    size_t name_len = gt;
    trim(&name, &name_len);
    if (gt == len || !valid_name(name, name_len)) {
        return false;
    }
    char *fn = dup_n(name, name_len);
    cJSON *args = cJSON_CreateObject();
    bool ok = fn != NULL && args != NULL;
    s += gt + 1, len -= gt + 1;
    while (ok) {
        trim(&s, &len);
        if (len == 0 || starts(s, len, "</function>")) {
            /* A missing </function> at the very end is tolerated (the answer stopped). */
            ok = len == 0 || len == 11;
            break;
        }
        if (!starts(s, len, "<parameter=")) {
            ok = false;
            break;
        }
        s += 11, len -= 11;
        size_t kgt = find(s, len, ">");
        size_t close = find(s, len, "</parameter>");
        if (kgt == len || close == len || close < kgt) {
            ok = false;
            break;
        }
        const char *key = s;
        size_t key_len = kgt;
        trim(&key, &key_len);
        const char *val = s + kgt + 1;
        size_t val_len = close - kgt - 1;
        /* The template writes "\n" + value + "\n"; the value itself keeps its whitespace. */
        if (val_len > 0 && val[0] == '\n') {
            val++, val_len--;
        }
        if (val_len > 0 && val[val_len - 1] == '\n') {
            val_len--;
        }
        ok = add_typed(args, tools, fn, key, key_len, val, val_len);
        s += close + 12, len -= close + 12;
    }
    if (ok) {
        ok = push_args(out, name, name_len, args);
    } else {
        cJSON_Delete(args);
    }
    free(fn);
    return ok;
}

/* N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>... (GLM 4.5 and later). */
static bool glm_call(const char *s, size_t len, const cJSON *tools, chat_calls *out) {
    size_t first = find(s, len, "<arg_key>");
    size_t nl = find(s, len, "\n");
    size_t end = first < nl ? first : nl;
    const char *name = s;
    size_t name_len = end;
    trim(&name, &name_len);
    if (!valid_name(name, name_len)) {
        return false;
    }
    /* A bare word is a call only when it names an offered tool (a no-argument call). */
    const char *rest = s + end;
    size_t rest_len = len - end;
    trim(&rest, &rest_len);
    if (rest_len == 0 && find_tool(tools, name, name_len) == NULL) {
        return false;
    }
    char *fn = dup_n(name, name_len);
    cJSON *args = cJSON_CreateObject();
    bool ok = fn != NULL && args != NULL;
    s += end, len -= end;
    while (ok) {
        trim(&s, &len);
        if (len == 0) {
            break;
        }
        size_t kend = find(s, len, "</arg_key>");
        if (!starts(s, len, "<arg_key>") || kend == len) {
            ok = false;
            break;
        }
        const char *key = s + 9;
        size_t key_len = kend - 9;
        trim(&key, &key_len);
        s += kend + 10, len -= kend + 10;
        trim(&s, &len);
        size_t vend = find(s, len, "</arg_value>");
        if (!starts(s, len, "<arg_value>") || vend == len) {
            ok = false;
            break;
        }
        ok = add_typed(args, tools, fn, key, key_len, s + 11, vend - 11);
        s += vend + 12, len -= vend + 12;
    }
    if (ok) {
        ok = push_args(out, name, name_len, args);
    } else {
        cJSON_Delete(args);
    }
    free(fn);
    return ok;
}

/* A Python literal at s[*i]: a quoted string, a number, True, False or None. */
static cJSON *py_literal(const char *s, size_t len, size_t *i) {
    if (*i >= len) {
        return NULL;
    }
    char q = s[*i];
    if (q == '"' || q == '\'') {
        char *buf = malloc(len - *i + 1);
        size_t n = 0, j = *i + 1;
        for (; buf != NULL && j < len && s[j] != q; j++) {
            char c = s[j];
            if (c == '\\' && j + 1 < len) {
                char e = s[++j];
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            }
            buf[n++] = c;
        }
        cJSON *v = NULL;
        if (buf != NULL && j < len) {
            buf[n] = '\0';
            v = cJSON_CreateString(buf);
            *i = j + 1;
        }
        free(buf);
        return v;
    }
    static const struct {
        const char *word;
        int kind;
    } words[] = {{"True", 1}, {"False", 0}, {"None", 2}};
    for (size_t w = 0; w < 3; w++) {
        if (starts(s + *i, len - *i, words[w].word)) {
            *i += strlen(words[w].word);
            return words[w].kind == 2 ? cJSON_CreateNull() : cJSON_CreateBool(words[w].kind);
        }
    }
    size_t j = *i;
    while (j < len && (isdigit((unsigned char)s[j]) || strchr("+-.eE", s[j]) != NULL)) {
        j++;
    }
    cJSON *v = j > *i ? json_whole(s + *i, j - *i) : NULL;
    if (v != NULL && !cJSON_IsNumber(v)) {
        cJSON_Delete(v);
        v = NULL;
    }
    if (v != NULL) {
        *i = j;
    }
    return v;
}

/* N.call(k="v", n=3) — Llama 3.1's builtin tools after <|python_tag|>. */
static bool builtin_call(const char *s, size_t len, chat_calls *out) {
    size_t dot = find(s, len, ".call(");
    if (dot == len || !valid_name(s, dot) || s[len - 1] != ')') {
        return false;
    }
    cJSON *args = cJSON_CreateObject();
    size_t i = dot + 6, end = len - 1;
    bool ok = args != NULL;
    while (ok) {
        while (i < end && is_ws(s[i])) {
            i++;
        }
        if (i == end) {
            break;
        }
        size_t k = i;
        while (i < end && (isalnum((unsigned char)s[i]) || s[i] == '_')) {
            i++;
        }
        size_t key_end = i;
        while (i < end && is_ws(s[i])) {
            i++;
        }
        if (key_end == k || i == end || s[i] != '=') {
            ok = false;
            break;
        }
        i++;
        while (i < end && is_ws(s[i])) {
            i++;
        }
        cJSON *v = py_literal(s, end, &i);
        char *key = dup_n(s + k, key_end - k);
        ok = v != NULL && key != NULL && !cJSON_GetObjectItemCaseSensitive(args, key) &&
             cJSON_AddItemToObject(args, key, v);
        if (!ok) {
            cJSON_Delete(v);
        }
        free(key);
        while (i < end && is_ws(s[i])) {
            i++;
        }
        if (ok && i < end && s[i] != ',') {
            ok = false;
        }
        i += i < end;
    }
    if (!ok) {
        cJSON_Delete(args);
        return false;
    }
    return push_args(out, s, dot, args);
}

/* Code for the "python" tool (functionary's and Llama's code interpreter). */
static bool python_code(const char *s, size_t len, chat_calls *out) {
    if (len == 0) {
        return false;
    }
    cJSON *args = cJSON_CreateObject();
    char *code = dup_n(s, len);
    bool ok = args != NULL && code != NULL && cJSON_AddStringToObject(args, "code", code);
    free(code);
    if (!ok) {
        cJSON_Delete(args);
        return false;
    }
    return push_args(out, "python", 6, args);
}

/* ---- section bodies ---------------------------------------------------------------------- */

static bool mistral(const char *s, size_t len, const cJSON *tools, chat_calls *out) {
    if (len > 0 && (s[0] == '[' || s[0] == '{')) {
        return json_sequence(s, len, tools, false, out);
    }
    size_t at = find(s, len, "[ARGS]");
    if (at == len) {
        return false;
    }
    size_t name_len = find(s, at, "[CALL_ID]");
    char *id = NULL;
    if (name_len < at) {
        const char *cid = s + name_len + 9;
        size_t cid_len = at - name_len - 9;
        trim(&cid, &cid_len);
        if (!valid_name(cid, cid_len)) {
            return false;
        }
        id = dup_n(cid, cid_len);
    }
    const char *name = s;
    trim(&name, &name_len);
    cJSON *args = json_whole(s + at + 6, len - at - 6);
    if (!valid_name(name, name_len) || !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        free(id);
        return false;
    }
    char *text = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    return push(out, dup_n(name, name_len), text, id);
}

#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_CALL_END   "<｜tool▁call▁end｜>"
#define DS_SEP        "<｜tool▁sep｜>"

static bool deepseek(const char *s, size_t len, chat_calls *out) {
    int n = 0;
    for (;;) {
        trim(&s, &len);
        if (len == 0) {
            return n > 0;
        }
        if (!starts(s, len, DS_CALL_BEGIN)) {
            return false;
        }
        s += strlen(DS_CALL_BEGIN), len -= strlen(DS_CALL_BEGIN);
        size_t end = find(s, len, DS_CALL_END); /* absent: the answer stopped after the call */
        size_t sep = find(s, end, DS_SEP);
        if (sep == end) {
            return false;
        }
        const char *left = s;
        size_t left_len = sep;
        trim(&left, &left_len);
        const char *right = s + sep + strlen(DS_SEP);
        size_t right_len = end - sep - strlen(DS_SEP);
        const char *name = left;
        size_t name_len = left_len;
        if (left_len == 8 && memcmp(left, "function", 8) == 0) {
            /* R1: function<sep>NAME\n```json\n{...}\n``` */
            size_t nl = find(right, right_len, "\n");
            name = right;
            name_len = nl;
            trim(&name, &name_len);
            right += nl, right_len -= nl;
            trim(&right, &right_len);
            if (starts(right, right_len, "```")) {
                size_t line = find(right, right_len, "\n");
                right += line, right_len -= line;
                trim(&right, &right_len);
                if (right_len >= 3 && memcmp(right + right_len - 3, "```", 3) == 0) {
                    right_len -= 3;
                }
            }
        }
        cJSON *args = json_whole(right, right_len);
        if (!valid_name(name, name_len) || !cJSON_IsObject(args)) {
            cJSON_Delete(args);
            return false;
        }
        if (!push_args(out, name, name_len, args)) {
            return false;
        }
        n++;
        size_t skip = end == len ? len : end + strlen(DS_CALL_END);
        s += skip, len -= skip;
    }
}

#define KIMI_BEGIN "<|tool_call_begin|>"
#define KIMI_ARGS  "<|tool_call_argument_begin|>"
#define KIMI_END   "<|tool_call_end|>"

static bool kimi(const char *s, size_t len, chat_calls *out) {
    int n = 0;
    for (;;) {
        trim(&s, &len);
        if (len == 0) {
            return n > 0;
        }
        if (!starts(s, len, KIMI_BEGIN)) {
            return false;
        }
        s += strlen(KIMI_BEGIN), len -= strlen(KIMI_BEGIN);
        size_t end = find(s, len, KIMI_END);
        size_t a = find(s, end, KIMI_ARGS);
        if (a == end) {
            return false;
        }
        /* The id is "functions.NAME:INDEX"; it goes back to the template as written. */
        const char *id = s;
        size_t id_len = a;
        trim(&id, &id_len);
        const char *name = id;
        size_t name_len = id_len;
        if (starts(name, name_len, "functions.")) {
            name += 10, name_len -= 10;
        }
        size_t colon = name_len;
        while (colon > 0 && name[colon - 1] != ':') {
            colon--;
        }
        if (colon > 0) {
            name_len = colon - 1;
        }
        cJSON *args = json_whole(s + a + strlen(KIMI_ARGS), end - a - strlen(KIMI_ARGS));
        if (!valid_name(name, name_len) || !valid_name(id, id_len) || !cJSON_IsObject(args)) {
            cJSON_Delete(args);
            return false;
        }
        char *text = cJSON_PrintUnformatted(args);
        cJSON_Delete(args);
        if (!push(out, dup_n(name, name_len), text, dup_n(id, id_len))) {
            return false;
        }
        n++;
        size_t skip = end == len ? len : end + strlen(KIMI_END);
        s += skip, len -= skip;
    }
}

bool rt_chat_calls_add(chat_calls *out, const char *name, size_t name_len, const char *args,
                        size_t len) {
    cJSON *a = json_whole(args, len);
    if (!valid_name(name, name_len) || !cJSON_IsObject(a)) {
        cJSON_Delete(a);
        return false;
    }
    return push_args(out, name, name_len, a);
}

bool rt_chat_calls_parse(chat_body kind, const char *body, size_t len, const cJSON *tools,
                          bool strict, chat_calls *out) {
    size_t before = out->n;
    const char *s = body;
    trim(&s, &len);
    bool ok = false;
    switch (kind) {
    case BODY_HERMES:
        if (starts(s, len, "<function=")) {
            ok = xml_function(s, len, tools, out);
        } else if (len > 0 && s[0] == '{') {
            ok = json_sequence(s, len, tools, false, out);
        } else {
            ok = glm_call(s, len, tools, out);
        }
        break;
    case BODY_JSON_START:
        if (starts(s, len, "```")) { /* a fence's opening line (its closing one follows) */
            size_t f = starts(s, len, "```json") ? 7 : 3;
            s += f, len -= f;
        }
        ok = json_sequence(s, len, tools, strict, out);
        break;
    case BODY_PYTHON_TAG:
        if (len > 0 && (s[0] == '{' || s[0] == '[')) {
            ok = json_sequence(s, len, tools, false, out);
        } else if (find(s, len, ".call(") < len && builtin_call(s, len, out)) {
            ok = true;
        } else {
            ok = python_code(s, len, out);
        }
        break;
    case BODY_PYTHON_CODE:
        ok = python_code(s, len, out);
        break;
    case BODY_MISTRAL:
        ok = mistral(s, len, tools, out);
        break;
    case BODY_DEEPSEEK:
        ok = deepseek(s, len, out);
        break;
    case BODY_FUNCTION: {
        size_t gt = find(s, len, ">");
        const char *name = s;
        size_t name_len = gt;
        trim(&name, &name_len);
        cJSON *args = gt < len ? json_whole(s + gt + 1, len - gt - 1) : NULL;
        if (valid_name(name, name_len) && cJSON_IsObject(args)) {
            ok = push_args(out, name, name_len, args);
        } else {
            cJSON_Delete(args);
        }
        break;
    }
    case BODY_JSON_CALLS:
        ok = json_sequence(s, len, tools, false, out);
        break;
    case BODY_KIMI:
        ok = kimi(s, len, out);
        break;
    }
    if (!ok || out->n == before) {
        rt_chat_calls_truncate(out, before);
        return false;
    }
    return true;
}
