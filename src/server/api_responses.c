/*
 * api_responses.c — OpenAI Responses bodies (POST /v1/responses) as the neutral chat request.
 *
 * The body is checked in the Responses API's own terms (fields are named as the client wrote
 * them: "input[2].content[0]") and rewritten into the chat request every dialect shares, which
 * ts_api_parse then reads as it reads OpenAI's chat bodies:
 *
 *   instructions                            a system turn first
 *   input "text"                            one user turn
 *   input items: message (role user,        turns (developer is a system turn); content a
 *     assistant, system, developer)         string or input_text / output_text parts, joined
 *   function_call {call_id, name,           an assistant turn's tool_calls (consecutive calls
 *     arguments}                            join one turn)
 *   function_call_output {call_id, output}  a tool turn; its call_id must name an earlier call
 *   reasoning items                         dropped (the template sees the answers only)
 *   tools [{type: function, name, ...}]     function tools; other tool types are refused
 *   tool_choice auto / none / required /    the same, or the named function
 *     {type: function, name}
 *   text.format json_schema / json_object   response_format
 *   max_output_tokens                       max_tokens
 *   reasoning.effort                        chat_template_kwargs.enable_thinking (false for
 *                                           "none", true for any other effort)
 *
 * temperature, top_p, parallel_tool_calls, user, stream and llama-server's speculative fields
 * ("speculative", "speculative.n_max", ...) keep their names. The chat body
 * also carries "x_tessera_responses": what the answer echoes and stores (the input items,
 * store, instructions, tools, ...), read back by responses.c. previous_response_id is resolved
 * by the server before this parse (it splices the stored items into input); one still present
 * here names no stored response, which is OpenAI's 400.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/dialect.h"

#define BAD(field, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", field, NULL, __VA_ARGS__)
#define OOM() ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory")

/* function_call items one request may hold (each function_call_output must name one). */
#define MAX_CALLS 1024

/* A member, NULL when absent or null. */
static const cJSON *get(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsNull(v) ? NULL : v;
}

static bool copy_as(cJSON *out, const cJSON *in, const char *from, const char *to) {
    const cJSON *v = get(in, from);
    if (v == NULL) {
        return true;
    }
    cJSON *c = cJSON_Duplicate(v, true);
    return c != NULL && cJSON_AddItemToObject(out, to, c);
}

/* The text of a message's content: a string, or parts of type input_text / output_text /
 * text joined by newlines (refusal parts give their refusal). *text is malloc'd. */
static ts_status content_text(const cJSON *content, const char *where, char **text,
                              ts_api_error *err) {
    *text = NULL;
    if (cJSON_IsString(content)) {
        *text = strdup(content->valuestring);
        return *text != NULL ? TS_OK : OOM();
    }
    if (!cJSON_IsArray(content)) {
        return BAD(where, "%s must be a string or an array of content parts, got %s", where,
                   ts_api_json_kind(content));
    }
    size_t len = 0, cap = 64;
    char *buf = malloc(cap);
    if (buf == NULL) {
        return OOM();
    }
    buf[0] = '\0';
    int i = 0;
    const cJSON *part = NULL;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = get(part, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
        const char *field = "text";
        if (t != NULL && strcmp(t, "refusal") == 0) {
            field = "refusal";
        }
        const cJSON *v = cJSON_IsObject(part) ? get(part, field) : NULL;
        if (!cJSON_IsObject(part) || t == NULL ||
            (strcmp(t, "input_text") != 0 && strcmp(t, "output_text") != 0 &&
             strcmp(t, "text") != 0 && strcmp(t, "refusal") != 0)) {
            free(buf);
            return BAD(where,
                       "%s[%d] must be a content part of type input_text or output_text, got %s "
                       "(this server reads text only: images, files and audio are not supported)",
                       where, i, t != NULL ? t : ts_api_json_kind(part));
        }
        if (!cJSON_IsString(v)) {
            free(buf);
            return BAD(where, "%s[%d].%s must be a string, got %s", where, i, field,
                       ts_api_json_kind(v));
        }
        size_t n = strlen(v->valuestring);
        if (len + n + 2 > cap) {
            cap = (len + n + 2) * 2;
            char *b = realloc(buf, cap);
            if (b == NULL) {
                free(buf);
                return OOM();
            }
            buf = b;
        }
        if (i > 0) {
            buf[len++] = '\n';
        }
        memcpy(buf + len, v->valuestring, n);
        len += n;
        buf[len] = '\0';
        i++;
    }
    *text = buf;
    return TS_OK;
}

static cJSON *turn(cJSON *msgs, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    if (m == NULL || !cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return NULL;
    }
    if (cJSON_AddStringToObject(m, "role", role) == NULL) {
        return NULL;
    }
    if (content != NULL && cJSON_AddStringToObject(m, "content", content) == NULL) {
        return NULL;
    }
    return m;
}

typedef struct calls {
    const char *ids[MAX_CALLS]; /* views into the body */
    int n;
} calls;

static bool call_known(const calls *c, const char *id) {
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->ids[i], id) == 0) {
            return true;
        }
    }
    return false;
}

static ts_status message_item(const cJSON *item, const char *where, cJSON *msgs,
                              ts_api_error *err) {
    const cJSON *role = get(item, "role");
    char field[64];
    snprintf(field, sizeof field, "%s.role", where);
    if (!cJSON_IsString(role)) {
        return BAD(field, "%s must be a string, got %s", field, ts_api_json_kind(role));
    }
    const char *r = role->valuestring;
    if (strcmp(r, "developer") == 0) {
        r = "system";
    } else if (strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0 && strcmp(r, "system") != 0) {
        return BAD(field, "%s must be one of user, assistant, system, developer; got '%.64s'",
                   field, r);
    }
    snprintf(field, sizeof field, "%s.content", where);
    char *text = NULL;
    ts_status st = content_text(get(item, "content"), field, &text, err);
    if (st != TS_OK) {
        return st;
    }
    st = turn(msgs, r, text) != NULL ? TS_OK : OOM();
    free(text);
    return st;
}

static ts_status call_item(const cJSON *item, const char *where, cJSON *msgs, calls *known,
                           ts_api_error *err) {
    const char *names[3] = {"call_id", "name", "arguments"};
    const cJSON *v[3];
    char field[80];
    for (int k = 0; k < 3; k++) {
        v[k] = get(item, names[k]);
        if (!cJSON_IsString(v[k])) {
            snprintf(field, sizeof field, "%s.%s", where, names[k]);
            return BAD(field, "%s must be a string, got %s", field, ts_api_json_kind(v[k]));
        }
    }
    if (known->n == MAX_CALLS) {
        return BAD(where, "input holds more than %d function_call items", MAX_CALLS);
    }
    known->ids[known->n++] = v[0]->valuestring;
    /* Consecutive calls join the assistant turn just before them. */
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *lrole = last != NULL ? get(last, "role") : NULL;
    cJSON *tcs = last != NULL ? cJSON_GetObjectItemCaseSensitive(last, "tool_calls") : NULL;
    if (!(cJSON_IsString(lrole) && strcmp(lrole->valuestring, "assistant") == 0)) {
        last = turn(msgs, "assistant", "");
        tcs = NULL;
    }
    if (last == NULL) {
        return OOM();
    }
    if (tcs == NULL) {
        tcs = cJSON_AddArrayToObject(last, "tool_calls");
    }
    cJSON *tc = cJSON_CreateObject();
    if (tcs == NULL || tc == NULL || !cJSON_AddItemToArray(tcs, tc)) {
        cJSON_Delete(tc);
        return OOM();
    }
    cJSON *fn = cJSON_AddObjectToObject(tc, "function");
    if (cJSON_AddStringToObject(tc, "id", v[0]->valuestring) == NULL ||
        cJSON_AddStringToObject(tc, "type", "function") == NULL || fn == NULL ||
        cJSON_AddStringToObject(fn, "name", v[1]->valuestring) == NULL ||
        cJSON_AddStringToObject(fn, "arguments", v[2]->valuestring) == NULL) {
        return OOM();
    }
    return TS_OK;
}

static ts_status output_item(const cJSON *item, const char *where, cJSON *msgs, const calls *known,
                             ts_api_error *err) {
    const cJSON *id = get(item, "call_id");
    char field[80];
    snprintf(field, sizeof field, "%s.call_id", where);
    if (!cJSON_IsString(id)) {
        return BAD(field, "%s must be a string, got %s", field, ts_api_json_kind(id));
    }
    if (!call_known(known, id->valuestring)) {
        return BAD(field, "No tool call found for function call output with call_id %.64s.",
                   id->valuestring);
    }
    snprintf(field, sizeof field, "%s.output", where);
    char *text = NULL;
    ts_status st = content_text(get(item, "output"), field, &text, err);
    if (st != TS_OK) {
        return st;
    }
    cJSON *m = turn(msgs, "tool", text);
    free(text);
    if (m == NULL || cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) == NULL) {
        return OOM();
    }
    return TS_OK;
}

/* input (a string or items) into msgs and, normalized to items, into items. */
static ts_status translate_input(const cJSON *root, cJSON *msgs, cJSON *items, ts_api_error *err) {
    const cJSON *input = get(root, "input");
    if (cJSON_IsString(input)) {
        cJSON *it = cJSON_CreateObject();
        cJSON *parts = cJSON_CreateArray();
        cJSON *part = cJSON_CreateObject();
        bool ok = it != NULL && parts != NULL && part != NULL && cJSON_AddItemToArray(items, it) &&
                  cJSON_AddItemToArray(parts, part);
        if (!ok) {
            cJSON_Delete(it);
            cJSON_Delete(parts);
            cJSON_Delete(part);
            return OOM();
        }
        ok = cJSON_AddStringToObject(it, "type", "message") != NULL &&
             cJSON_AddStringToObject(it, "role", "user") != NULL &&
             cJSON_AddItemToObject(it, "content", parts) &&
             cJSON_AddStringToObject(part, "type", "input_text") != NULL &&
             cJSON_AddStringToObject(part, "text", input->valuestring) != NULL;
        if (!ok) {
            return OOM();
        }
        return turn(msgs, "user", input->valuestring) != NULL ? TS_OK : OOM();
    }
    if (!cJSON_IsArray(input)) {
        return BAD("input", "input must be a string or an array of input items, got %s",
                   ts_api_json_kind(input));
    }
    if (cJSON_GetArraySize(input) > TS_API_MAX_MESSAGES) {
        return BAD("input", "input holds %d items; at most %d are allowed",
                   cJSON_GetArraySize(input), TS_API_MAX_MESSAGES);
    }
    calls *known = calloc(1, sizeof *known);
    if (known == NULL) {
        return OOM();
    }
    ts_status st = TS_OK;
    int i = 0;
    const cJSON *item = NULL;
    cJSON_ArrayForEach(item, input) {
        char where[32];
        snprintf(where, sizeof where, "input[%d]", i++);
        if (!cJSON_IsObject(item)) {
            st = BAD(where, "%s must be an object, got %s", where, ts_api_json_kind(item));
            break;
        }
        const cJSON *type = get(item, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
        if (type != NULL && t == NULL) {
            st = BAD(where, "%s.type must be a string, got %s", where, ts_api_json_kind(type));
        } else if (t == NULL || strcmp(t, "message") == 0) {
            st = message_item(item, where, msgs, err);
        } else if (strcmp(t, "function_call") == 0) {
            st = call_item(item, where, msgs, known, err);
        } else if (strcmp(t, "function_call_output") == 0) {
            st = output_item(item, where, msgs, known, err);
        } else if (strcmp(t, "reasoning") != 0) {
            st = BAD(where,
                     "%s has type '%.64s'; this server reads message, function_call, "
                     "function_call_output and reasoning items",
                     where, t);
        }
        if (st != TS_OK) {
            break;
        }
        cJSON *c = cJSON_Duplicate(item, true);
        if (c == NULL || !cJSON_AddItemToArray(items, c)) {
            cJSON_Delete(c);
            st = OOM();
            break;
        }
    }
    free(known);
    return st;
}

static ts_status translate_tools(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *tools = get(root, "tools");
    if (tools != NULL) {
        if (!cJSON_IsArray(tools)) {
            return BAD("tools", "tools must be an array, got %s", ts_api_json_kind(tools));
        }
        cJSON *ct = cJSON_AddArrayToObject(out, "tools");
        if (ct == NULL) {
            return OOM();
        }
        int i = 0;
        const cJSON *tool = NULL;
        cJSON_ArrayForEach(tool, tools) {
            char where[32];
            snprintf(where, sizeof where, "tools[%d]", i++);
            const cJSON *type = cJSON_IsObject(tool) ? get(tool, "type") : NULL;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0) {
                return BAD(where,
                           "%s must be a function tool ({\"type\": \"function\", \"name\", "
                           "\"parameters\"}); got %s (built-in tools are not supported)",
                           where,
                           cJSON_IsString(type) ? type->valuestring : ts_api_json_kind(tool));
            }
            const cJSON *name = get(tool, "name");
            if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
                return BAD(where, "%s.name must be a non-empty string, got %s", where,
                           ts_api_json_kind(name));
            }
            cJSON *t = cJSON_CreateObject();
            cJSON *fn = cJSON_CreateObject();
            if (t == NULL || fn == NULL || !cJSON_AddItemToArray(ct, t)) {
                cJSON_Delete(t);
                cJSON_Delete(fn);
                return OOM();
            }
            if (!cJSON_AddItemToObject(t, "function", fn) ||
                cJSON_AddStringToObject(t, "type", "function") == NULL ||
                !copy_as(fn, tool, "name", "name") ||
                !copy_as(fn, tool, "description", "description") ||
                !copy_as(fn, tool, "parameters", "parameters") ||
                !copy_as(fn, tool, "strict", "strict")) {
                return OOM();
            }
        }
    }
    const cJSON *choice = get(root, "tool_choice");
    if (cJSON_IsObject(choice)) {
        const cJSON *type = get(choice, "type");
        const cJSON *name = get(choice, "name");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
            !cJSON_IsString(name)) {
            return BAD("tool_choice",
                       "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": "
                       "\"function\", \"name\": N}");
        }
        cJSON *c = cJSON_AddObjectToObject(out, "tool_choice");
        cJSON *fn = c != NULL ? cJSON_AddObjectToObject(c, "function") : NULL;
        if (fn == NULL || cJSON_AddStringToObject(c, "type", "function") == NULL ||
            cJSON_AddStringToObject(fn, "name", name->valuestring) == NULL) {
            return OOM();
        }
    } else if (choice != NULL) {
        if (!cJSON_IsString(choice) ||
            (strcmp(choice->valuestring, "auto") != 0 && strcmp(choice->valuestring, "none") != 0 &&
             strcmp(choice->valuestring, "required") != 0)) {
            return BAD("tool_choice",
                       "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": "
                       "\"function\", \"name\": N}");
        }
        if (!copy_as(out, root, "tool_choice", "tool_choice")) {
            return OOM();
        }
    }
    return copy_as(out, root, "parallel_tool_calls", "parallel_tool_calls") ? TS_OK : OOM();
}

/* text.format as response_format. */
static ts_status translate_format(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *text = get(root, "text");
    if (text == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsObject(text)) {
        return BAD("text", "text must be an object, got %s", ts_api_json_kind(text));
    }
    const cJSON *format = get(text, "format");
    if (format == NULL) {
        return TS_OK;
    }
    const cJSON *type = cJSON_IsObject(format) ? get(format, "type") : NULL;
    if (!cJSON_IsString(type)) {
        return BAD("text.format", "text.format must be an object with a type, got %s",
                   ts_api_json_kind(format));
    }
    const char *t = type->valuestring;
    if (strcmp(t, "text") == 0) {
        return TS_OK;
    }
    cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
    if (rf == NULL) {
        return OOM();
    }
    if (strcmp(t, "json_object") == 0) {
        return cJSON_AddStringToObject(rf, "type", "json_object") != NULL ? TS_OK : OOM();
    }
    if (strcmp(t, "json_schema") != 0) {
        return BAD("text.format.type",
                   "text.format.type must be text, json_object or json_schema; got '%.64s'", t);
    }
    if (!cJSON_IsObject(get(format, "schema"))) {
        return BAD("text.format.schema", "text.format.schema must be an object, got %s",
                   ts_api_json_kind(get(format, "schema")));
    }
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (js == NULL || cJSON_AddStringToObject(rf, "type", "json_schema") == NULL ||
        !copy_as(js, format, "name", "name") || !copy_as(js, format, "schema", "schema") ||
        !copy_as(js, format, "strict", "strict")) {
        return OOM();
    }
    if (get(js, "name") == NULL && cJSON_AddStringToObject(js, "name", "output") == NULL) {
        return OOM();
    }
    return TS_OK;
}

/* reasoning.effort as the template's enable_thinking: "none" turns it off, any other effort
 * on; no reasoning leaves the template's default. */
static ts_status translate_reasoning(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *reasoning = get(root, "reasoning");
    if (reasoning == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsObject(reasoning)) {
        return BAD("reasoning", "reasoning must be an object, got %s", ts_api_json_kind(reasoning));
    }
    const cJSON *effort = get(reasoning, "effort");
    if (effort == NULL) {
        return TS_OK;
    }
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    bool known = false;
    for (size_t k = 0; cJSON_IsString(effort) && k < sizeof efforts / sizeof *efforts; k++) {
        known |= strcmp(effort->valuestring, efforts[k]) == 0;
    }
    if (!known) {
        return BAD("reasoning.effort",
                   "reasoning.effort must be one of none, minimal, low, medium, high, xhigh");
    }
    cJSON *kw = cJSON_AddObjectToObject(out, "chat_template_kwargs");
    if (kw == NULL || cJSON_AddBoolToObject(kw, "enable_thinking",
                                            strcmp(effort->valuestring, "none") != 0) == NULL) {
        return OOM();
    }
    return TS_OK;
}

/* What the answer echoes and the store keeps. */
static ts_status state(const cJSON *root, cJSON *items, cJSON *out, ts_api_error *err) {
    cJSON *x = cJSON_CreateObject();
    if (x == NULL || !cJSON_AddItemToObject(out, "x_tessera_responses", x)) {
        cJSON_Delete(x);
        cJSON_Delete(items);
        return OOM();
    }
    if (!cJSON_AddItemToObject(x, "input", items)) {
        cJSON_Delete(items);
        return OOM();
    }
    const cJSON *store = get(root, "store");
    if (store != NULL && !cJSON_IsBool(store)) {
        return BAD("store", "store must be a boolean, got %s", ts_api_json_kind(store));
    }
    const char *keep[] = {"instructions",
                          "tools",
                          "tool_choice",
                          "temperature",
                          "top_p",
                          "text",
                          "metadata",
                          "max_output_tokens",
                          "parallel_tool_calls",
                          "user",
                          "store",
                          "x_previous_response_id",
                          "reasoning"};
    for (size_t k = 0; k < sizeof keep / sizeof *keep; k++) {
        if (!copy_as(x, root, keep[k], keep[k])) {
            return OOM();
        }
    }
    return TS_OK;
}

static ts_status translate(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *prev = get(root, "previous_response_id");
    if (prev != NULL) {
        if (!cJSON_IsString(prev)) {
            return BAD("previous_response_id", "previous_response_id must be a string, got %s",
                       ts_api_json_kind(prev));
        }
        return BAD("previous_response_id", "Previous response with id '%.64s' not found.",
                   prev->valuestring);
    }
    const cJSON *instr = get(root, "instructions");
    if (instr != NULL && !cJSON_IsString(instr)) {
        return BAD("instructions", "instructions must be a string, got %s",
                   ts_api_json_kind(instr));
    }
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages");
    cJSON *items = cJSON_CreateArray();
    if (msgs == NULL || items == NULL) {
        cJSON_Delete(items);
        return OOM();
    }
    if (instr != NULL && turn(msgs, "system", instr->valuestring) == NULL) {
        cJSON_Delete(items);
        return OOM();
    }
    ts_status st = translate_input(root, msgs, items, err);
    if (st != TS_OK) {
        cJSON_Delete(items);
        return st;
    }
    st = state(root, items, out, err);
    if (st == TS_OK) {
        st = translate_tools(root, out, err);
    }
    if (st == TS_OK) {
        st = translate_format(root, out, err);
    }
    if (st == TS_OK) {
        st = translate_reasoning(root, out, err);
    }
    const cJSON *mot = get(root, "max_output_tokens");
    if (st == TS_OK && mot != NULL &&
        (!cJSON_IsNumber(mot) || !isfinite(mot->valuedouble) || mot->valuedouble < 1 ||
         mot->valuedouble > 1e9 || mot->valuedouble != floor(mot->valuedouble))) {
        st = BAD("max_output_tokens", "max_output_tokens must be a positive integer, got %s",
                 cJSON_IsNumber(mot) ? "another number" : ts_api_json_kind(mot));
    }
    /* speculative*: llama-server's per-request speculative decoding fields (api_parse.c). */
    const char *same[] = {"model",
                          "temperature",
                          "top_p",
                          "stream",
                          "user",
                          "speculative",
                          "speculative.n_max",
                          "speculative.n_min",
                          "speculative.p_min"};
    for (size_t k = 0; st == TS_OK && k < sizeof same / sizeof *same; k++) {
        if (!copy_as(out, root, same[k], same[k])) {
            st = OOM();
        }
    }
    if (st == TS_OK && !copy_as(out, root, "max_output_tokens", "max_tokens")) {
        st = OOM();
    }
    return st;
}

ts_status ts_api_parse_responses(const char *body, size_t len, const ts_api_limits *lim,
                                 ts_api_request *r, ts_api_error *err) {
    memset(r, 0, sizeof *r);
    /* The checks ts_api_parse makes of any body, on the body as the client sent it. */
    cJSON *root = ts_api_parse_body(body, len, err);
    if (root == NULL) {
        return TS_ERR_INVALID_ARG;
    }
    cJSON *out = cJSON_CreateObject();
    ts_status st = TS_OK;
    if (out == NULL) {
        st = OOM();
    }
    if (st == TS_OK) {
        st = translate(root, out, err);
    }
    cJSON_Delete(root);
    char *text = st == TS_OK ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    if (st == TS_OK && text == NULL) {
        st = OOM();
    }
    if (st == TS_OK) {
        st = ts_api_parse(TS_API_CHAT, text, strlen(text), lim, r, err);
        /* The chat parser names chat fields; name the Responses ones instead. */
        if (st != TS_OK && strcmp(err->param, "max_tokens") == 0) {
            snprintf(err->param, sizeof err->param, "max_output_tokens");
        } else if (st != TS_OK && strncmp(err->param, "response_format", 15) == 0) {
            snprintf(err->param, sizeof err->param, "text.format");
        }
    }
    free(text);
    return st;
}
