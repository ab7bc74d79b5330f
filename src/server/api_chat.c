/*
 * api_chat.c — the chat fields of a request (tools, tool_choice, parallel_tool_calls,
 * chat_template_kwargs, messages with tool calls and tool results) and the JSON the chat
 * template renders (ts_api_request.chat_json).
 *
 * The template's variables are built from the body's own text, not re-printed from cJSON, so
 * values reach the template as the client wrote them (1.0 stays a float, a 64-bit integer
 * stays exact). Three things change on the way, as vLLM does: a "developer" turn becomes
 * "system", a content list of text parts becomes one string (parts joined by newlines), and a
 * tool call's "arguments" given as a JSON string becomes the object it encodes, since
 * templates print arguments with tojson.
 *
 * A template that never mentions "tools" (SmolLM2's, say) would drop the tools silently; they
 * are then described in a system turn, with the answer format the generic tool-call parser
 * reads, as llama.cpp's server does for such templates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "util/buf.h"

#define BAD(field, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", field, NULL, __VA_ARGS__)

#define MAX_TOOLS 128 /* OpenAI's limit on tools in one request */

/* ---- the body's text ------------------------------------------------------------------------ */

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
        i++;
    }
    return i;
}

/* End of the string literal opening at s[i] == '"'. */
static size_t string_end(const char *s, size_t n, size_t i) {
    for (i++; i < n && s[i] != '"'; i++) {
        i += s[i] == '\\';
    }
    return i < n ? i + 1 : n;
}

/* End of the JSON value starting at s[i]. The text is valid JSON (cJSON accepted it), so this
 * only has to count brackets outside strings; no recursion. */
static size_t value_end(const char *s, size_t n, size_t i) {
    if (i < n && s[i] == '"') {
        return string_end(s, n, i);
    }
    if (i < n && (s[i] == '{' || s[i] == '[')) {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = string_end(s, n, i);
                continue;
            }
            depth += c == '{' || c == '[';
            depth -= c == '}' || c == ']';
            i++;
            if (depth == 0) {
                return i;
            }
        }
        return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\n' && s[i] != '\r') {
        i++;
    }
    return i;
}

typedef struct span {
    size_t at, end; /* [at, end) of the body; end == 0: absent */
} span;

/* Walks the members of an object or the elements of an array: *cur starts at the opening
 * bracket's offset (from `open`) and moves past each item as it is returned. */
static size_t open_at(size_t bracket) {
    return bracket + 1;
}

/* The next member of an object (key and value spans); false after the last. */
static bool next_member(const char *s, size_t n, size_t *cur, span *key, span *val) {
    size_t i = skip_ws(s, n, *cur);
    i = skip_ws(s, n, i + (i < n && s[i] == ','));
    if (i >= n || s[i] != '"') {
        return false;
    }
    key->at = i;
    key->end = string_end(s, n, i);
    i = skip_ws(s, n, key->end);
    i = skip_ws(s, n, i + 1); /* ':' */
    val->at = i;
    val->end = value_end(s, n, i);
    *cur = val->end;
    return true;
}

/* The next element of an array; false after the last. */
static bool next_element(const char *s, size_t n, size_t *cur, span *val) {
    size_t i = skip_ws(s, n, *cur);
    i = skip_ws(s, n, i + (i < n && s[i] == ','));
    if (i >= n || s[i] == ']') {
        return false;
    }
    val->at = i;
    val->end = value_end(s, n, i);
    *cur = val->end;
    return true;
}

/* ---- building the JSON ---------------------------------------------------------------------- */

typedef ts_buf jbuf;

static void put(jbuf *b, const char *s, size_t n) {
    ts_buf_put(b, s, n);
}

static void puts_(jbuf *b, const char *s) {
    ts_buf_puts(b, s);
}

static void put_span(jbuf *b, const char *s, span v) {
    put(b, s + v.at, v.end - v.at);
}

/* A C string as a JSON string literal. */
static void put_str(jbuf *b, const char *s) {
    cJSON *str = cJSON_CreateString(s);
    char *q = str != NULL ? cJSON_PrintUnformatted(str) : NULL;
    cJSON_Delete(str);
    if (q == NULL) {
        b->oom = true;
        return;
    }
    puts_(b, q);
    cJSON_free(q);
}

/* A key span's text equals name (keys written with escapes never match: those members are
 * copied as they are, which is what a template would see anyway). */
static bool key_is(const char *s, span k, const char *name) {
    size_t len = strlen(name);
    return k.end - k.at == len + 2 && memcmp(s + k.at + 1, name, len) == 0;
}

/* The JSON value a string holds when the whole string is one (cJSON_Parse alone stops after the
 * first value and would take '{"a":1} junk' for an object); NULL otherwise. */
static cJSON *parse_whole(const cJSON *str) {
    if (!cJSON_IsString(str)) {
        return NULL;
    }
    return cJSON_ParseWithOpts(str->valuestring, NULL, true);
}

/* One tool call, with a string "arguments" holding a JSON object replaced by that object: the
 * string's own text (numbers keep their spelling, as Python's json would print them), copied
 * only when the whole string is that one object, so nothing after it reaches the variables. */
static void put_tool_call(jbuf *b, const char *s, size_t n, span call, const cJSON *node) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(node, "function");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    cJSON *parsed = parse_whole(args);
    bool rewrite = cJSON_IsObject(parsed);
    cJSON_Delete(parsed);
    if (!rewrite || s[call.at] != '{') {
        put_span(b, s, call);
        return;
    }
    puts_(b, "{");
    span k, v;
    size_t cur = open_at(call.at);
    for (int i = 0; next_member(s, n, &cur, &k, &v); i++) {
        put(b, i ? "," : "", i ? 1 : 0);
        put_span(b, s, k);
        puts_(b, ":");
        if (!key_is(s, k, "function") || s[v.at] != '{') {
            put_span(b, s, v);
            continue;
        }
        puts_(b, "{");
        span fk, fv;
        size_t fcur = open_at(v.at);
        for (int j = 0; next_member(s, n, &fcur, &fk, &fv); j++) {
            put(b, j ? "," : "", j ? 1 : 0);
            put_span(b, s, fk);
            puts_(b, ":");
            if (key_is(s, fk, "arguments")) {
                /* The decoded string is the object's JSON text, all of it (parse_whole). */
                puts_(b, args->valuestring);
            } else {
                put_span(b, s, fv);
            }
        }
        puts_(b, "}");
    }
    puts_(b, "}");
}

/* How one message is rewritten for a template that lacks a capability (see polyfills below). */
typedef struct msg_edit {
    const char *role;    /* NULL: the message's own (normalised) */
    const char *content; /* NULL: the message's own; else this text replaces or adds it */
    bool empty_null;     /* content null or absent becomes "" */
    bool drop_calls;     /* leave tool_calls out (they were written into content) */
    bool drop_name;      /* leave name out (a tool turn become a user turn) */
} msg_edit;

/* One message, normalised (role, content, tool call arguments; see the top of the file) and
 * edited as `ed` says. */
static void put_message(jbuf *b, const char *s, size_t n, span msg, const cJSON *node,
                        const ts_message *view, const msg_edit *ed) {
    /* Reasoning under any of its names is also given as "thinking" (gpt-oss templates read
     * it) and "reasoning_content", as transformers does. */
    span k, v, reasoning = {0};
    bool has_thinking = false, has_rc = false, has_content = false;
    size_t cur = open_at(msg.at);
    while (next_member(s, n, &cur, &k, &v)) {
        bool rc = key_is(s, k, "reasoning_content"), th = key_is(s, k, "thinking");
        has_thinking |= th;
        has_rc |= rc;
        has_content |= key_is(s, k, "content");
        if ((rc || th || key_is(s, k, "reasoning")) && s[v.at] != 'n' && reasoning.end == 0) {
            reasoning = v;
        }
    }
    puts_(b, "{");
    int i = 0;
    if (reasoning.end != 0 && !has_thinking) {
        puts_(b, "\"thinking\":");
        put_span(b, s, reasoning);
        i++;
    }
    cur = open_at(msg.at);
    while (next_member(s, n, &cur, &k, &v)) {
        if ((ed->drop_calls && key_is(s, k, "tool_calls")) ||
            (ed->drop_name && key_is(s, k, "name"))) {
            continue;
        }
        put(b, i ? "," : "", i ? 1 : 0);
        i++;
        put_span(b, s, k);
        puts_(b, ":");
        if (key_is(s, k, "role")) {
            put_str(b, ed->role != NULL ? ed->role : view->role);
        } else if (key_is(s, k, "content") && ed->content != NULL) {
            put_str(b, ed->content);
        } else if (key_is(s, k, "content") && s[v.at] == 'n') {
            puts_(b, ed->empty_null ? "\"\"" : "null");
        } else if (key_is(s, k, "content") && s[v.at] == '[') {
            put_str(b, view->content);
        } else if (key_is(s, k, "tool_calls") && s[v.at] == '[') {
            const cJSON *call = cJSON_GetObjectItemCaseSensitive(node, "tool_calls")->child;
            puts_(b, "[");
            span e;
            size_t ecur = open_at(v.at);
            for (int j = 0; call != NULL && next_element(s, n, &ecur, &e); j++, call = call->next) {
                put(b, j ? "," : "", j ? 1 : 0);
                put_tool_call(b, s, n, e, call);
            }
            puts_(b, "]");
        } else {
            put_span(b, s, v);
        }
    }
    if (!has_content && (ed->content != NULL || ed->empty_null)) {
        puts_(b, i ? ",\"content\":" : "\"content\":");
        put_str(b, ed->content != NULL ? ed->content : "");
        i++;
    }
    if (reasoning.end != 0 && !has_rc) {
        puts_(b, i ? ",\"reasoning_content\":" : "\"reasoning_content\":");
        put_span(b, s, reasoning);
    }
    puts_(b, "}");
}

/* ---- polyfills ------------------------------------------------------------------------------
 *
 * For a template that cannot render tool calls, tool results or system turns (SmolLM2's only
 * concatenates role and content), the request is rewritten the way llama.cpp's server does it
 * for such templates, in a form the model can read and the generic tool-call parser accepts:
 *
 *   assistant {content: null, tool_calls: [...]}
 *       -> assistant {content: '{"tool_calls":[{"name":N,"arguments":{...},"id":I}],
 *                                "content":C}'}          (content only when non-empty)
 *   tool {tool_call_id: I, content: R}
 *       -> user {content: '{"tool_response":{"tool":N,"content":R,"tool_call_id":I}}'}
 *          (N from the message's name, else from the call with that id)
 *   system {content: S}, then user {content: U}
 *       -> user {content: "S\nU"}                  (a system turn with no user turn after
 *                                                     it becomes a user turn of its own)
 *
 * and content null becomes "" where the template fails on null. */

/* The calls of an assistant message as the JSON text its content carries instead. */
static char *calls_as_content(const cJSON *msg) {
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(root, "tool_calls");
    const cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id");
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "name", cJSON_IsString(name) ? name->valuestring : "");
        cJSON *parsed = parse_whole(args);
        if (parsed != NULL) {
            cJSON_AddItemToObject(tc, "arguments", parsed);
        } else if (args != NULL) {
            cJSON_AddItemToObject(tc, "arguments", cJSON_Duplicate(args, true));
        } else {
            cJSON_AddObjectToObject(tc, "arguments");
        }
        if (cJSON_IsString(id)) {
            cJSON_AddStringToObject(tc, "id", id->valuestring);
        }
        cJSON_AddItemToArray(list, tc);
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (cJSON_IsString(content) && content->valuestring[0] != '\0') {
        cJSON_AddStringToObject(root, "content", content->valuestring);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* The name of the function a tool result answers: its own "name", else that of the call with
 * its tool_call_id in an earlier assistant turn; NULL when neither says. */
static const char *tool_name(const cJSON *msgs, const cJSON *msg) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(msg, "name");
    if (cJSON_IsString(name)) {
        return name->valuestring;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
    const char *found = NULL;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (m == msg) {
            break;
        }
        const cJSON *call;
        cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
            const cJSON *cid = cJSON_GetObjectItemCaseSensitive(call, "id");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            const cJSON *fname = cJSON_GetObjectItemCaseSensitive(fn, "name");
            if (cJSON_IsString(fname) &&
                (found == NULL || (cJSON_IsString(id) && cJSON_IsString(cid) &&
                                   strcmp(id->valuestring, cid->valuestring) == 0))) {
                found = fname->valuestring; /* the matching call, else the latest */
            }
        }
    }
    return found;
}

/* A tool result as the JSON text of the user turn that carries it instead. */
static char *response_as_content(const cJSON *msgs, const cJSON *msg, const char *content) {
    cJSON *root = cJSON_CreateObject();
    cJSON *resp = cJSON_AddObjectToObject(root, "tool_response");
    const char *name = tool_name(msgs, msg);
    if (name != NULL) {
        cJSON_AddStringToObject(resp, "tool", name);
    }
    cJSON_AddStringToObject(resp, "content", content);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
    if (cJSON_IsString(id)) {
        cJSON_AddStringToObject(resp, "tool_call_id", id->valuestring);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* The system turns waiting for the next user turn: their texts joined by newlines. A turn
 * counts even when its text is empty, so a lone system turn "" still becomes a user turn. */
typedef struct pending_sys {
    jbuf text;
    int turns;
} pending_sys;

/* Appends one system turn's text. */
static void pend(pending_sys *p, const char *text) {
    if (p->turns > 0) {
        ts_buf_puts(&p->text, "\n");
    }
    ts_buf_puts(&p->text, text);
    p->turns++;
}

/* The waiting system text as a user turn of its own. */
static void flush_pending(jbuf *b, pending_sys *p, int *written) {
    if (p->turns == 0) {
        return;
    }
    put(b, *written > 0 ? "," : "", *written > 0 ? 1 : 0);
    puts_(b, "{\"role\":\"user\",\"content\":");
    put_str(b, p->text.p != NULL ? p->text.p : "");
    puts_(b, "}");
    (*written)++;
    p->text.n = 0;
    if (p->text.p != NULL) {
        p->text.p[0] = '\0';
    }
    p->turns = 0;
}

static const char *const k_polyfill_names[] = {"tools", "tool_calls", "tool_responses",
                                               "system_role", "null_content"};

void ts_api_polyfill_names(unsigned bits, char *buf, size_t size) {
    size_t at = 0;
    if (size > 0) {
        buf[0] = '\0';
    }
    for (size_t i = 0; i < sizeof k_polyfill_names / sizeof *k_polyfill_names; i++) {
        if ((bits & (1u << i)) && at < size) {
            int w = snprintf(buf + at, size - at, "%s%s", at ? "," : "", k_polyfill_names[i]);
            at += w > 0 ? (size_t)w : 0;
        }
    }
}

/* ---- validation ----------------------------------------------------------------------------- */

static const cJSON *get(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v == NULL || cJSON_IsNull(v) ? NULL : v;
}

static ts_status check_tools(const cJSON *tools, ts_api_error *err) {
    if (!cJSON_IsArray(tools)) {
        return BAD("tools", "tools must be an array, got %s", ts_api_json_kind(tools));
    }
    int count = cJSON_GetArraySize(tools);
    if (count > MAX_TOOLS) {
        return BAD("tools", "tools holds %d functions; at most %d", count, MAX_TOOLS);
    }
    char name[48];
    for (int i = 0; i < count; i++) {
        const cJSON *t = cJSON_GetArrayItem(tools, i);
        snprintf(name, sizeof name, "tools[%d]", i);
        const cJSON *type = get(t, "type");
        const cJSON *fn = get(t, "function");
        if (!cJSON_IsObject(t)) {
            return BAD(name, "%s must be an object, got %s", name, ts_api_json_kind(t));
        }
        if (type != NULL && (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))) {
            return BAD(name, "%s.type must be \"function\"", name);
        }
        if (!cJSON_IsObject(fn)) {
            return BAD(name, "%s.function must be an object, got %s", name, ts_api_json_kind(fn));
        }
        const cJSON *fname = get(fn, "name");
        if (!cJSON_IsString(fname) || fname->valuestring[0] == '\0') {
            snprintf(name, sizeof name, "tools[%d].function.name", i);
            return BAD(name, "%s must be a non-empty string", name);
        }
        const cJSON *desc = get(fn, "description");
        if (desc != NULL && !cJSON_IsString(desc)) {
            snprintf(name, sizeof name, "tools[%d].function.description", i);
            return BAD(name, "%s must be a string, got %s", name, ts_api_json_kind(desc));
        }
        const cJSON *params = get(fn, "parameters");
        if (params != NULL && !cJSON_IsObject(params)) {
            snprintf(name, sizeof name, "tools[%d].function.parameters", i);
            return BAD(name, "%s must be a JSON Schema object, got %s", name,
                       ts_api_json_kind(params));
        }
    }
    return TS_OK;
}

static bool has_tool(const cJSON *tools, const char *fname) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *n = get(get(t, "function"), "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, fname) == 0) {
            return true;
        }
    }
    return false;
}

static ts_status parse_tool_choice(const cJSON *root, const cJSON *tools, ts_api_request *r,
                                   ts_api_error *err) {
    const cJSON *c = get(root, "tool_choice");
    int n_tools = tools != NULL ? cJSON_GetArraySize(tools) : 0;
    r->tool_choice = TS_API_TOOL_AUTO;
    if (c == NULL) {
        return TS_OK;
    }
    if (cJSON_IsString(c)) {
        const char *v = c->valuestring;
        if (strcmp(v, "none") == 0) {
            r->tool_choice = TS_API_TOOL_NONE;
        } else if (strcmp(v, "auto") == 0) {
            r->tool_choice = TS_API_TOOL_AUTO;
        } else if (strcmp(v, "required") == 0) {
            r->tool_choice = TS_API_TOOL_REQUIRED;
        } else {
            return BAD("tool_choice",
                       "tool_choice must be \"none\", \"auto\", \"required\" or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}, "
                       "got '%.64s'",
                       v);
        }
    } else if (cJSON_IsObject(c)) {
        const cJSON *name = get(get(c, "function"), "name");
        if (!cJSON_IsString(name)) {
            return BAD("tool_choice", "tool_choice.function.name must be a string");
        }
        if (tools == NULL || !has_tool(tools, name->valuestring)) {
            return BAD("tool_choice", "tool_choice names function '%.64s', which is not in tools",
                       name->valuestring);
        }
        r->tool_choice = TS_API_TOOL_NAMED;
        r->tool_choice_name = name->valuestring;
    } else {
        return BAD("tool_choice", "tool_choice must be a string or an object, got %s",
                   ts_api_json_kind(c));
    }
    if (r->tool_choice == TS_API_TOOL_REQUIRED && n_tools == 0) {
        return BAD("tool_choice", "tool_choice \"required\" needs tools");
    }
    return TS_OK;
}

/* The members of a message beyond role and content: tool calls, tool results, names. */
static ts_status check_message_extras(const cJSON *msg, int i, const char *role,
                                      ts_api_error *err) {
    char name[64];
    const cJSON *calls = get(msg, "tool_calls");
    if (calls != NULL) {
        snprintf(name, sizeof name, "messages[%d].tool_calls", i);
        if (strcmp(role, "assistant") != 0) {
            return BAD(name, "%s is only allowed in assistant messages", name);
        }
        if (!cJSON_IsArray(calls)) {
            return BAD(name, "%s must be an array, got %s", name, ts_api_json_kind(calls));
        }
        int k = 0;
        const cJSON *call;
        cJSON_ArrayForEach(call, calls) {
            snprintf(name, sizeof name, "messages[%d].tool_calls[%d]", i, k++);
            const cJSON *fn = get(call, "function");
            const cJSON *fname = get(fn, "name");
            const cJSON *args = get(fn, "arguments");
            const cJSON *id = get(call, "id");
            if (!cJSON_IsObject(call) || !cJSON_IsObject(fn)) {
                return BAD(name,
                           "%s must be {\"id\", \"type\": \"function\", \"function\": "
                           "{\"name\", \"arguments\"}}",
                           name);
            }
            if (!cJSON_IsString(fname)) {
                return BAD(name, "%s.function.name must be a string", name);
            }
            if (args != NULL && !cJSON_IsString(args) && !cJSON_IsObject(args)) {
                return BAD(name, "%s.function.arguments must be a string of JSON (or an object)",
                           name);
            }
            if (id != NULL && !cJSON_IsString(id)) {
                return BAD(name, "%s.id must be a string", name);
            }
        }
    }
    static const char *const k_strings[] = {"tool_call_id", "name", "reasoning_content"};
    for (size_t s = 0; s < sizeof k_strings / sizeof k_strings[0]; s++) {
        const cJSON *v = get(msg, k_strings[s]);
        if (v != NULL && !cJSON_IsString(v)) {
            snprintf(name, sizeof name, "messages[%d].%s", i, k_strings[s]);
            return BAD(name, "%s must be a string, got %s", name, ts_api_json_kind(v));
        }
    }
    return TS_OK;
}

/* The system text that describes the offered tools to a template that does not render them:
 * the tools' JSON and the answer that calls one, which the server's generic parser reads;
 * after `before` (the conversation's own system text) when not NULL. NULL when out of memory. */
static char *tools_system_text(const char *body, span tools, const char *before) {
    static const char head[] = "You can call the following tools (JSON descriptions):\n";
    static const char tail[] =
        "\n\nTo call a tool, answer with only a JSON object of the form {\"name\": \"<tool "
        "name>\", \"arguments\": {<the arguments>}} and nothing else. Otherwise answer "
        "normally.";
    size_t pre = before != NULL ? strlen(before) + 2 : 0;
    size_t n = pre + sizeof head + (tools.end - tools.at) + sizeof tail;
    char *text = malloc(n);
    if (text != NULL) {
        snprintf(text, n, "%s%s%s%.*s%s", before != NULL ? before : "",
                 before != NULL ? "\n\n" : "", head, (int)(tools.end - tools.at), body + tools.at,
                 tail);
    }
    return text;
}

/* Writes the messages of the template's variables, rewritten as the template's capabilities
 * ask (polyfills above); *bits gets the polyfills applied. */
static void put_messages(jbuf *b, const char *body, size_t len, span top_msgs, const cJSON *msgs,
                         const ts_api_request *r, const ts_chat_caps *caps, const char *tools_text,
                         bool merge, unsigned *bits) {
    bool probed = caps->probed;
    bool fold_system = probed && !caps->system_role;
    pending_sys pending = {0};
    int written = 0;
    if (tools_text != NULL) {
        *bits |= TS_API_POLYFILL_TOOLS;
        if (fold_system) {
            pend(&pending, tools_text);
            *bits |= TS_API_POLYFILL_SYSTEM_ROLE;
        } else {
            puts_(b, "{\"role\":\"system\",\"content\":");
            put_str(b, tools_text);
            puts_(b, "}");
            written++;
        }
    }
    span e;
    size_t cur = open_at(top_msgs.at);
    const cJSON *node = msgs->child;
    for (int m = 0; m < r->n_messages && node != NULL && next_element(body, len, &cur, &e);
         m++, node = node->next) {
        if (m == 0 && merge) {
            continue;
        }
        const char *role = r->messages[m].role;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(node, "tool_calls");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(node, "content");
        msg_edit ed = {0};
        char *owned = NULL;
        if (fold_system && strcmp(role, "system") == 0) {
            pend(&pending, r->messages[m].content);
            *bits |= TS_API_POLYFILL_SYSTEM_ROLE;
            continue;
        }
        if (probed && !caps->tool_calls && cJSON_GetArraySize(calls) > 0) {
            owned = calls_as_content(node);
            b->oom |= owned == NULL;
            ed.content = owned;
            ed.drop_calls = true;
            *bits |= TS_API_POLYFILL_TOOL_CALLS;
        } else if (probed && !caps->tool_responses && strcmp(role, "tool") == 0) {
            owned = response_as_content(msgs, node, r->messages[m].content);
            b->oom |= owned == NULL;
            ed.content = owned;
            ed.role = "user";
            ed.drop_name = true;
            *bits |= TS_API_POLYFILL_TOOL_RESPONSES;
        } else if (probed && caps->needs_content && (content == NULL || cJSON_IsNull(content))) {
            ed.empty_null = true;
            *bits |= TS_API_POLYFILL_NULL_CONTENT;
        }
        if (pending.turns > 0 && strcmp(role, "user") == 0 && ed.content == NULL) {
            /* The waiting system text opens this user turn. */
            pend(&pending, r->messages[m].content);
            b->oom |= pending.text.oom;
            owned = ts_buf_take(&pending.text);
            b->oom |= owned == NULL;
            ed.content = owned;
            pending.turns = 0;
        } else {
            flush_pending(b, &pending, &written);
        }
        put(b, written > 0 ? "," : "", written > 0 ? 1 : 0);
        put_message(b, body, len, e, node, &r->messages[m], &ed);
        written++;
        free(owned);
    }
    flush_pending(b, &pending, &written);
    b->oom |= pending.text.oom;
    ts_buf_free(&pending.text);
}

ts_status ts_api_parse_chat(const cJSON *root, const char *body, size_t len,
                            const ts_api_limits *lim, ts_api_request *r, ts_api_error *err) {
    const cJSON *msgs = get(root, "messages");
    const cJSON *tools = get(root, "tools");
    const cJSON *kwargs = get(root, "chat_template_kwargs");
    ts_status st;
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        st = check_message_extras(msg, i, r->messages[i].role, err);
        if (st != TS_OK) {
            return st;
        }
        i++;
    }
    if (tools != NULL && (st = check_tools(tools, err)) != TS_OK) {
        return st;
    }
    if ((st = parse_tool_choice(root, tools, r, err)) != TS_OK) {
        return st;
    }
    const cJSON *ptc = get(root, "parallel_tool_calls");
    if (ptc != NULL && !cJSON_IsBool(ptc)) {
        return BAD("parallel_tool_calls", "parallel_tool_calls must be a boolean, got %s",
                   ts_api_json_kind(ptc));
    }
    r->parallel_tool_calls = ptc == NULL || cJSON_IsTrue(ptc);
    if (kwargs != NULL && !cJSON_IsObject(kwargs)) {
        return BAD("chat_template_kwargs", "chat_template_kwargs must be an object, got %s",
                   ts_api_json_kind(kwargs));
    }
    const cJSON *agp = get(root, "add_generation_prompt");
    if (agp != NULL && !cJSON_IsBool(agp)) {
        return BAD("add_generation_prompt", "add_generation_prompt must be a boolean, got %s",
                   ts_api_json_kind(agp));
    }
    if (agp != NULL) {
        r->add_generation_prompt = cJSON_IsTrue(agp);
    }
    int n_tools = tools != NULL ? cJSON_GetArraySize(tools) : 0;
    r->has_tools = n_tools > 0 && r->tool_choice != TS_API_TOOL_NONE;

    /* The template's variables, from the body's text. */
    jbuf b = {0};
    span k, v, top_msgs = {0}, top_tools = {0}, top_kwargs = {0}, top_effort = {0};
    /* cJSON skips a leading UTF-8 byte order mark: so does this scan. */
    size_t bom = len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    size_t cur = open_at(skip_ws(body, len, bom));
    while (next_member(body, len, &cur, &k, &v)) { /* the first of repeated keys, as cJSON */
        top_msgs = key_is(body, k, "messages") && top_msgs.end == 0 ? v : top_msgs;
        top_tools = key_is(body, k, "tools") && top_tools.end == 0 ? v : top_tools;
        top_kwargs =
            key_is(body, k, "chat_template_kwargs") && top_kwargs.end == 0 ? v : top_kwargs;
        top_effort = key_is(body, k, "reasoning_effort") && top_effort.end == 0 ? v : top_effort;
    }
    if (top_msgs.end == 0) {
        return BAD("messages", "write the key \"messages\" without escapes");
    }
    /* Tools the template does not render are described in the system turn (merged into the
     * first one when the conversation opens with one). */
    bool tools_ok = lim->caps.probed ? lim->caps.tools : lim->tools_in_template;
    bool describe =
        n_tools > 0 && top_tools.end != 0 && !tools_ok && r->tool_choice != TS_API_TOOL_NONE;
    bool merge = describe && r->n_messages > 0 && strcmp(r->messages[0].role, "system") == 0;
    char *tools_text = NULL;
    if (describe) {
        tools_text = tools_system_text(body, top_tools, merge ? r->messages[0].content : NULL);
        b.oom |= tools_text == NULL;
    }
    puts_(&b, "{\"messages\":[");
    put_messages(&b, body, len, top_msgs, msgs, r, &lim->caps, tools_text, merge, &r->polyfills);
    free(tools_text);
    puts_(&b, "]");
    /* A template known not to render tools gets none (a built-in renderer would refuse them). */
    if (n_tools > 0 && top_tools.end != 0 && !describe && (!lim->caps.probed || lim->caps.tools)) {
        puts_(&b, ",\"tools\":");
        put_span(&b, body, top_tools);
    }
    if (top_effort.end != 0 && body[top_effort.at] == '"') {
        puts_(&b, ",\"reasoning_effort\":");
        put_span(&b, body, top_effort);
    }
    puts_(&b, r->add_generation_prompt ? ",\"add_generation_prompt\":true"
                                       : ",\"add_generation_prompt\":false");
    if (kwargs != NULL && top_kwargs.end != 0) {
        cur = open_at(top_kwargs.at);
        while (next_member(body, len, &cur, &k, &v)) {
            puts_(&b, ",");
            put_span(&b, body, k);
            puts_(&b, ":");
            put_span(&b, body, v);
        }
    }
    puts_(&b, "}");
    if (b.oom) {
        free(b.p);
        return ts_api_error_set(err, 500, "server_error", "messages", NULL, "out of memory");
    }
    r->chat_json = b.p;
    return TS_OK;
}
