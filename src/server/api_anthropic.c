/*
 * api_anthropic.c — Anthropic Messages bodies (POST /v1/messages, /v1/messages/count_tokens)
 * as the neutral chat request, and Anthropic's error body.
 *
 * The body is checked in Anthropic's own terms (fields and blocks are named as the client
 * wrote them: "messages[2].content[1]") and rewritten into the chat request every dialect
 * shares, which ts_api_parse then reads as it reads OpenAI's:
 *
 *   system (string or text blocks)        a system turn first
 *   user text blocks                      a user turn (blocks joined by newlines)
 *   user tool_result blocks               tool turns (before the user's text), naming the call
 *                                         and its tool; is_error prefixes the text "Error: "
 *   assistant text / tool_use / thinking  content / tool_calls (input as arguments) /
 *                                         reasoning_content; redacted_thinking is dropped
 *   tools [{name, description,            function tools
 *          input_schema}]
 *   tool_choice auto / any / tool / none  "auto" / "required" / the named function / "none";
 *                                         disable_parallel_tool_use: parallel_tool_calls false
 *   stop_sequences, metadata.user_id      stop, user
 *   thinking {type: enabled|adaptive|     chat_template_kwargs.enable_thinking
 *            between_tools|disabled}
 *   output_config.format json_schema      response_format json_schema (the text follows it)
 *   max_tokens (required)                 max_tokens, cut to the context (a cap, not a demand)
 *
 * temperature, top_p, top_k, stream and llama-server's speculative fields ("speculative",
 * "speculative.n_max", ...) keep their names. A tool_result must answer a tool_use
 * of the assistant turn just before it, as Anthropic requires. Blocks this server cannot use
 * (image, document, server tools) are refused by name rather than dropped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/dialect.h"

#define BAD(field, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", field, NULL, __VA_ARGS__)

/* Tool uses one assistant turn may hold (each must be answered by id in the next turn). */
#define MAX_CALLS 128

/* The field, or NULL when absent or null. */
static const cJSON *get(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v == NULL || cJSON_IsNull(v) ? NULL : v;
}

/* Adds a copy of v (when present) to out under name. */
static bool copy_field(cJSON *out, const cJSON *in, const char *name) {
    const cJSON *v = get(in, name);
    if (v == NULL) {
        return true;
    }
    cJSON *c = cJSON_Duplicate(v, true);
    return c != NULL && cJSON_AddItemToObject(out, name, c);
}

/* A growing string (joined text blocks). */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool oom;
} strbuf;

static void text_add(strbuf *t, const char *s, size_t n) {
    if (t->oom) {
        return;
    }
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->s, cap);
        if (p == NULL) {
            t->oom = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* Appends the text of a block list (string or [{"type": "text", "text"}]) to t, a newline
 * between blocks. what: the field's name for errors; images and documents are refused. */
static ts_status text_blocks(const cJSON *v, const char *what, strbuf *t, ts_api_error *err) {
    if (v == NULL) {
        return TS_OK;
    }
    if (cJSON_IsString(v)) {
        text_add(t, v->valuestring, strlen(v->valuestring));
        return TS_OK;
    }
    if (!cJSON_IsArray(v)) {
        return BAD(what, "%s must be a string or an array of text blocks, got %s", what,
                   ts_api_json_kind(v));
    }
    int k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        const cJSON *type = get(b, "type");
        const cJSON *tx = get(b, "text");
        if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
            return BAD(what, "%s[%d] must be a block object with a \"type\"", what, k);
        }
        if (strcmp(type->valuestring, "text") != 0) {
            return BAD(what,
                       "%s[%d] has type '%.64s'; only text blocks are allowed here (this server "
                       "serves a text-only model)",
                       what, k, type->valuestring);
        }
        if (!cJSON_IsString(tx)) {
            return BAD(what, "%s[%d].text must be a string, got %s", what, k, ts_api_json_kind(tx));
        }
        if (k > 0) {
            text_add(t, "\n", 1);
        }
        text_add(t, tx->valuestring, strlen(tx->valuestring));
        k++;
    }
    return TS_OK;
}

/* Adds {"role": role, "content": t} to msgs (t may be empty). */
static bool add_turn(cJSON *msgs, const char *role, const strbuf *t) {
    cJSON *m = cJSON_CreateObject();
    if (m == NULL || !cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return false;
    }
    return cJSON_AddStringToObject(m, "role", role) != NULL &&
           cJSON_AddStringToObject(m, "content", t->s != NULL ? t->s : "") != NULL;
}

/* The tool uses of the last assistant turn, which the next user turn's results must name. */
typedef struct calls {
    const char *id[MAX_CALLS];
    const char *name[MAX_CALLS];
    bool answered[MAX_CALLS];
    int n;
} calls;

/* A user turn: tool results first (as tool turns), then its text. */
static ts_status user_turn(const cJSON *content, int i, const calls *prev, cJSON *msgs,
                           ts_api_error *err) {
    char what[64];
    snprintf(what, sizeof what, "messages[%d].content", i);
    strbuf t = {0};
    ts_status st = TS_OK;
    if (cJSON_IsString(content)) {
        text_add(&t, content->valuestring, strlen(content->valuestring));
    } else if (!cJSON_IsArray(content)) {
        return BAD(what, "%s must be a string or an array of content blocks, got %s", what,
                   ts_api_json_kind(content));
    }
    bool answered[MAX_CALLS] = {0};
    int k = -1, n_results = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, (cJSON_IsArray(content) ? content : NULL)) {
        k++;
        char name[80];
        snprintf(name, sizeof name, "%s[%d]", what, k);
        const cJSON *type = get(b, "type");
        if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
            st = BAD(name, "%s must be a content block object with a \"type\", got %s", name,
                     ts_api_json_kind(b));
            break;
        }
        const char *ty = type->valuestring;
        if (strcmp(ty, "text") == 0) {
            const cJSON *tx = get(b, "text");
            if (!cJSON_IsString(tx)) {
                st = BAD(name, "%s.text must be a string, got %s", name, ts_api_json_kind(tx));
                break;
            }
            if (t.len > 0) {
                text_add(&t, "\n", 1);
            }
            text_add(&t, tx->valuestring, strlen(tx->valuestring));
        } else if (strcmp(ty, "tool_result") == 0) {
            const cJSON *id = get(b, "tool_use_id");
            if (!cJSON_IsString(id)) {
                st = BAD(name, "%s.tool_use_id must be a string, got %s", name,
                         ts_api_json_kind(id));
                break;
            }
            int at = -1;
            for (int c = 0; c < prev->n && at < 0; c++) {
                at = strcmp(prev->id[c], id->valuestring) == 0 ? c : -1;
            }
            if (at < 0) {
                st = BAD(name,
                         "%s is a tool_result for tool_use_id '%.64s', which matches no tool_use "
                         "block of the assistant turn just before it",
                         name, id->valuestring);
                break;
            }
            if (answered[at]) {
                st = BAD(name, "%s answers tool_use_id '%.64s' a second time", name,
                         id->valuestring);
                break;
            }
            answered[at] = true;
            n_results++;
            const cJSON *is_error = get(b, "is_error");
            if (is_error != NULL && !cJSON_IsBool(is_error)) {
                st = BAD(name, "%s.is_error must be a boolean, got %s", name,
                         ts_api_json_kind(is_error));
                break;
            }
            char cname[96];
            snprintf(cname, sizeof cname, "%s.content", name);
            strbuf r = {0};
            if (cJSON_IsTrue(is_error)) {
                text_add(&r, "Error: ", 7);
            }
            st = text_blocks(get(b, "content"), cname, &r, err);
            cJSON *m = st == TS_OK ? cJSON_CreateObject() : NULL;
            bool ok = m != NULL && !r.oom && cJSON_AddItemToArray(msgs, m) &&
                      cJSON_AddStringToObject(m, "role", "tool") != NULL &&
                      cJSON_AddStringToObject(m, "tool_call_id", id->valuestring) != NULL &&
                      cJSON_AddStringToObject(m, "name", prev->name[at]) != NULL &&
                      cJSON_AddStringToObject(m, "content", r.s != NULL ? r.s : "") != NULL;
            free(r.s);
            if (st != TS_OK) {
                break;
            }
            if (!ok) {
                st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
                break;
            }
        } else if (strcmp(ty, "tool_use") == 0 || strcmp(ty, "thinking") == 0 ||
                   strcmp(ty, "redacted_thinking") == 0) {
            st = BAD(name, "%s is a %s block, which only assistant turns hold", name, ty);
            break;
        } else if (strcmp(ty, "image") == 0 || strcmp(ty, "document") == 0) {
            st = BAD(name,
                     "%s is an %s block; this server serves a text-only model (text, "
                     "tool_result)",
                     name, ty);
            break;
        } else {
            st = BAD(name,
                     "%s has type '%.64s', which is not a user content block this server reads "
                     "(text, tool_result)",
                     name, ty);
            break;
        }
    }
    /* A user turn of nothing but tool results adds no empty user turn after them. */
    bool only_results = n_results > 0 && t.len == 0;
    if (st == TS_OK && !only_results && !add_turn(msgs, "user", &t)) {
        st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (st == TS_OK && t.oom) {
        st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    free(t.s);
    return st;
}

/* An assistant turn: text, tool calls (recorded in *out for the next turn) and thinking. */
static ts_status assistant_turn(const cJSON *content, int i, cJSON *msgs, calls *out,
                                ts_api_error *err) {
    char what[64];
    snprintf(what, sizeof what, "messages[%d].content", i);
    out->n = 0;
    strbuf t = {0}, think = {0};
    cJSON *list = cJSON_CreateArray();
    ts_status st = list == NULL
                       ? ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory")
                       : TS_OK;
    if (st == TS_OK && cJSON_IsString(content)) {
        text_add(&t, content->valuestring, strlen(content->valuestring));
    } else if (st == TS_OK && !cJSON_IsArray(content)) {
        st = BAD(what, "%s must be a string or an array of content blocks, got %s", what,
                 ts_api_json_kind(content));
    }
    int k = -1;
    const cJSON *b;
    cJSON_ArrayForEach(b, (st == TS_OK && cJSON_IsArray(content) ? content : NULL)) {
        k++;
        char name[80];
        snprintf(name, sizeof name, "%s[%d]", what, k);
        const cJSON *type = get(b, "type");
        if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
            st = BAD(name, "%s must be a content block object with a \"type\", got %s", name,
                     ts_api_json_kind(b));
            break;
        }
        const char *ty = type->valuestring;
        if (strcmp(ty, "text") == 0) {
            const cJSON *tx = get(b, "text");
            if (!cJSON_IsString(tx)) {
                st = BAD(name, "%s.text must be a string, got %s", name, ts_api_json_kind(tx));
                break;
            }
            text_add(&t, tx->valuestring, strlen(tx->valuestring));
        } else if (strcmp(ty, "thinking") == 0) {
            const cJSON *tx = get(b, "thinking");
            if (!cJSON_IsString(tx)) {
                st = BAD(name, "%s.thinking must be a string, got %s", name, ts_api_json_kind(tx));
                break;
            }
            text_add(&think, tx->valuestring, strlen(tx->valuestring));
        } else if (strcmp(ty, "redacted_thinking") == 0) {
            continue; /* encrypted by another server: nothing a template can show */
        } else if (strcmp(ty, "tool_use") == 0) {
            const cJSON *id = get(b, "id"), *nm = get(b, "name"), *input = get(b, "input");
            if (!cJSON_IsString(id) || id->valuestring[0] == '\0') {
                st = BAD(name, "%s.id must be a non-empty string, got %s", name,
                         ts_api_json_kind(id));
                break;
            }
            if (!cJSON_IsString(nm) || nm->valuestring[0] == '\0') {
                st = BAD(name, "%s.name must be a non-empty string, got %s", name,
                         ts_api_json_kind(nm));
                break;
            }
            if (!cJSON_IsObject(input)) {
                st = BAD(name, "%s.input must be an object, got %s", name, ts_api_json_kind(input));
                break;
            }
            if (out->n == MAX_CALLS) {
                st = BAD(name, "%s: a turn holds at most %d tool_use blocks", name, MAX_CALLS);
                break;
            }
            for (int c = 0; c < out->n; c++) {
                if (strcmp(out->id[c], id->valuestring) == 0) {
                    st = BAD(name, "%s repeats tool_use id '%.64s'", name, id->valuestring);
                }
            }
            if (st != TS_OK) {
                break;
            }
            out->id[out->n] = id->valuestring;
            out->name[out->n] = nm->valuestring;
            out->n++;
            cJSON *call = cJSON_CreateObject();
            bool ok = call != NULL && cJSON_AddItemToArray(list, call);
            if (!ok) {
                cJSON_Delete(call); /* not in the list */
            }
            char *args = ok ? cJSON_PrintUnformatted(input) : NULL;
            cJSON *fn = NULL;
            ok = ok && args != NULL &&
                 cJSON_AddStringToObject(call, "id", id->valuestring) != NULL &&
                 cJSON_AddStringToObject(call, "type", "function") != NULL &&
                 (fn = cJSON_AddObjectToObject(call, "function")) != NULL &&
                 cJSON_AddStringToObject(fn, "name", nm->valuestring) != NULL &&
                 cJSON_AddStringToObject(fn, "arguments", args) != NULL;
            free(args);
            if (!ok) {
                st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
                break;
            }
        } else if (strcmp(ty, "tool_result") == 0) {
            st = BAD(name, "%s is a tool_result block, which only user turns hold", name);
            break;
        } else {
            st = BAD(name,
                     "%s has type '%.64s', which is not an assistant content block this "
                     "server reads (text, tool_use, thinking)",
                     name, ty);
            break;
        }
    }
    cJSON *m = st == TS_OK ? cJSON_CreateObject() : NULL;
    if (st == TS_OK) {
        bool ok =
            m != NULL && !t.oom && !think.oom && cJSON_AddItemToArray(msgs, m) &&
            cJSON_AddStringToObject(m, "role", "assistant") != NULL &&
            cJSON_AddStringToObject(m, "content", t.s != NULL ? t.s : "") != NULL &&
            (think.len == 0 || cJSON_AddStringToObject(m, "reasoning_content", think.s) != NULL);
        if (ok && out->n > 0) {
            ok = cJSON_AddItemToObject(m, "tool_calls", list);
            list = NULL;
        }
        if (!ok) {
            st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    cJSON_Delete(list);
    free(t.s);
    free(think.s);
    return st;
}

static ts_status translate_messages(const cJSON *root, cJSON *out, ts_api_error *err) {
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages");
    if (msgs == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    const cJSON *sys = get(root, "system");
    if (sys != NULL) {
        strbuf t = {0};
        ts_status st = text_blocks(sys, "system", &t, err);
        if (st == TS_OK && (t.oom || !add_turn(msgs, "system", &t))) {
            st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
        free(t.s);
        if (st != TS_OK) {
            return st;
        }
    }
    const cJSON *m = get(root, "messages");
    if (m == NULL) {
        return BAD("messages", "messages: field required");
    }
    if (!cJSON_IsArray(m)) {
        return BAD("messages", "messages must be an array, got %s", ts_api_json_kind(m));
    }
    int count = cJSON_GetArraySize(m);
    if (count == 0 || count > TS_API_MAX_MESSAGES) {
        return BAD("messages", "messages must hold 1 to %d messages, got %d", TS_API_MAX_MESSAGES,
                   count);
    }
    calls *prev = calloc(1, sizeof *prev);
    if (prev == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    ts_status st = TS_OK;
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, m) {
        char name[48];
        snprintf(name, sizeof name, "messages[%d]", i);
        const cJSON *role = get(msg, "role");
        const cJSON *content = get(msg, "content");
        if (!cJSON_IsObject(msg)) {
            st = BAD(name, "%s must be an object, got %s", name, ts_api_json_kind(msg));
        } else if (!cJSON_IsString(role)) {
            st = BAD(name, "%s.role must be a string, got %s", name, ts_api_json_kind(role));
        } else if (content == NULL) {
            st = BAD(name, "%s.content: field required", name);
        } else if (strcmp(role->valuestring, "user") == 0) {
            st = user_turn(content, i, prev, msgs, err);
            prev->n = 0; /* results answer the turn just before only */
        } else if (strcmp(role->valuestring, "assistant") == 0) {
            st = assistant_turn(content, i, msgs, prev, err);
        } else {
            st = BAD(name,
                     "%s.role '%.64s' is not 'user' or 'assistant' (system text goes in the "
                     "top-level \"system\" field)",
                     name, role->valuestring);
        }
        if (st != TS_OK) {
            break;
        }
        i++;
    }
    free(prev);
    return st;
}

static ts_status translate_tools(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *tools = get(root, "tools");
    if (tools != NULL && !cJSON_IsArray(tools)) {
        return BAD("tools", "tools must be an array, got %s", ts_api_json_kind(tools));
    }
    int n_tools = tools != NULL ? cJSON_GetArraySize(tools) : 0;
    if (n_tools > 0) {
        cJSON *list = cJSON_AddArrayToObject(out, "tools");
        int k = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            char name[48];
            snprintf(name, sizeof name, "tools[%d]", k++);
            if (!cJSON_IsObject(t)) {
                return BAD(name, "%s must be an object, got %s", name, ts_api_json_kind(t));
            }
            const cJSON *type = get(t, "type");
            if (type != NULL && (!cJSON_IsString(type) || strcmp(type->valuestring, "custom"))) {
                return BAD(name,
                           "%s has type '%.64s': server tools (web search, code execution, "
                           "...) are not run by this server; give custom tools (name, "
                           "description, input_schema)",
                           name, cJSON_IsString(type) ? type->valuestring : ts_api_json_kind(type));
            }
            const cJSON *nm = get(t, "name"), *desc = get(t, "description");
            const cJSON *schema = get(t, "input_schema");
            if (!cJSON_IsString(nm) || nm->valuestring[0] == '\0') {
                return BAD(name, "%s.name must be a non-empty string, got %s", name,
                           ts_api_json_kind(nm));
            }
            if (desc != NULL && !cJSON_IsString(desc)) {
                return BAD(name, "%s.description must be a string, got %s", name,
                           ts_api_json_kind(desc));
            }
            if (!cJSON_IsObject(schema)) {
                return BAD(name, "%s.input_schema must be a JSON Schema object, got %s", name,
                           ts_api_json_kind(schema));
            }
            cJSON *f = cJSON_CreateObject();
            cJSON *fn = f != NULL ? cJSON_AddObjectToObject(f, "function") : NULL;
            cJSON *params = cJSON_Duplicate(schema, true);
            bool ok = fn != NULL && params != NULL && cJSON_AddItemToArray(list, f) &&
                      cJSON_AddStringToObject(f, "type", "function") != NULL &&
                      cJSON_AddStringToObject(fn, "name", nm->valuestring) != NULL &&
                      (desc == NULL ||
                       cJSON_AddStringToObject(fn, "description", desc->valuestring) != NULL) &&
                      cJSON_AddItemToObject(fn, "parameters", params);
            if (!ok) {
                return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
            }
        }
    }
    const cJSON *c = get(root, "tool_choice");
    if (c == NULL) {
        return TS_OK;
    }
    const cJSON *type = get(c, "type");
    if (!cJSON_IsObject(c) || !cJSON_IsString(type)) {
        return BAD("tool_choice",
                   "tool_choice must be an object {\"type\": \"auto\" | \"any\" | \"tool\" | "
                   "\"none\"}, got %s",
                   ts_api_json_kind(c));
    }
    const char *ty = type->valuestring;
    const cJSON *dp = get(c, "disable_parallel_tool_use");
    if (dp != NULL && !cJSON_IsBool(dp)) {
        return BAD("tool_choice", "tool_choice.disable_parallel_tool_use must be a boolean, got %s",
                   ts_api_json_kind(dp));
    }
    if (cJSON_IsTrue(dp) && cJSON_AddFalseToObject(out, "parallel_tool_calls") == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    bool ok = true;
    if (strcmp(ty, "auto") == 0 || strcmp(ty, "none") == 0) {
        ok = cJSON_AddStringToObject(out, "tool_choice", ty) != NULL;
    } else if (strcmp(ty, "any") == 0) {
        if (n_tools == 0) {
            return BAD("tool_choice", "tool_choice {\"type\": \"any\"} needs tools");
        }
        ok = cJSON_AddStringToObject(out, "tool_choice", "required") != NULL;
    } else if (strcmp(ty, "tool") == 0) {
        const cJSON *nm = get(c, "name");
        if (!cJSON_IsString(nm)) {
            return BAD("tool_choice", "tool_choice.name must be a string, got %s",
                       ts_api_json_kind(nm));
        }
        bool found = false;
        const cJSON *t;
        cJSON_ArrayForEach(t, (n_tools > 0 ? tools : NULL)) {
            const cJSON *tn = get(t, "name");
            found |= cJSON_IsString(tn) && strcmp(tn->valuestring, nm->valuestring) == 0;
        }
        if (!found) {
            return BAD("tool_choice", "tool_choice names tool '%.64s', which is not in tools",
                       nm->valuestring);
        }
        cJSON *o = cJSON_AddObjectToObject(out, "tool_choice");
        cJSON *fn = o != NULL ? cJSON_AddObjectToObject(o, "function") : NULL;
        ok = fn != NULL && cJSON_AddStringToObject(o, "type", "function") != NULL &&
             cJSON_AddStringToObject(fn, "name", nm->valuestring) != NULL;
    } else {
        return BAD("tool_choice",
                   "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\", got "
                   "'%.64s'",
                   ty);
    }
    return ok ? TS_OK : ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
}

/* max_tokens, stop_sequences, metadata, thinking and the fields that keep their names. */
static ts_status translate_generation(const cJSON *root, const ts_api_limits *lim, bool count_only,
                                      cJSON *out, ts_api_error *err) {
    const cJSON *mt = get(root, "max_tokens");
    if (mt == NULL && !count_only) {
        return BAD("max_tokens", "max_tokens: field required");
    }
    if (mt != NULL) {
        /* Range first: converting a double beyond int64_t is undefined. */
        if (!cJSON_IsNumber(mt) || !(mt->valuedouble >= 1 && mt->valuedouble <= 9.0e15) ||
            floor(mt->valuedouble) != mt->valuedouble) {
            return BAD("max_tokens", "max_tokens must be an integer >= 1, got %s",
                       cJSON_IsNumber(mt) ? "a smaller or fractional number"
                                          : ts_api_json_kind(mt));
        }
        /* A cap: more than the context holds is cut to it (and later to the prompt's room). */
        double v = mt->valuedouble;
        if (lim->n_ctx > 0 && v > (double)lim->n_ctx) {
            v = (double)lim->n_ctx;
        }
        if (!count_only && cJSON_AddNumberToObject(out, "max_tokens", v) == NULL) {
            return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    const cJSON *stops = get(root, "stop_sequences");
    if (stops != NULL) {
        if (!cJSON_IsArray(stops)) {
            return BAD("stop_sequences", "stop_sequences must be an array of strings, got %s",
                       ts_api_json_kind(stops));
        }
        int n = cJSON_GetArraySize(stops);
        if (n > TS_ENGINE_MAX_STOP) {
            return BAD("stop_sequences", "stop_sequences holds %d strings; at most %d", n,
                       TS_ENGINE_MAX_STOP);
        }
        int k = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, stops) {
            size_t len = cJSON_IsString(s) ? strlen(s->valuestring) : 0;
            if (!cJSON_IsString(s) || len == 0 || len > TS_API_MAX_STOP_LEN) {
                return BAD("stop_sequences",
                           "stop_sequences[%d] must be a string of 1 to %d bytes, got %s", k,
                           TS_API_MAX_STOP_LEN,
                           cJSON_IsString(s) ? "another length" : ts_api_json_kind(s));
            }
            k++;
        }
        if (n > 0) {
            cJSON *c = cJSON_Duplicate(stops, true);
            if (c == NULL || !cJSON_AddItemToObject(out, "stop", c)) {
                cJSON_Delete(c);
                return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
            }
        }
    }
    const cJSON *meta = get(root, "metadata");
    if (meta != NULL && !cJSON_IsObject(meta)) {
        return BAD("metadata", "metadata must be an object, got %s", ts_api_json_kind(meta));
    }
    const cJSON *user = get(meta, "user_id");
    if (user != NULL && !cJSON_IsString(user)) {
        return BAD("metadata", "metadata.user_id must be a string, got %s", ts_api_json_kind(user));
    }
    if (user != NULL && cJSON_AddStringToObject(out, "user", user->valuestring) == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    const cJSON *th = get(root, "thinking");
    if (th != NULL) {
        const cJSON *type = get(th, "type");
        if (!cJSON_IsObject(th) || !cJSON_IsString(type) ||
            (strcmp(type->valuestring, "enabled") != 0 &&
             strcmp(type->valuestring, "disabled") != 0 &&
             strcmp(type->valuestring, "adaptive") != 0 &&
             strcmp(type->valuestring, "between_tools") != 0)) {
            return BAD("thinking",
                       "thinking must be {\"type\": \"enabled\", \"budget_tokens\": N}, "
                       "{\"type\": \"adaptive\"}, {\"type\": \"between_tools\"} or "
                       "{\"type\": \"disabled\"}");
        }
        cJSON *kw = cJSON_AddObjectToObject(out, "chat_template_kwargs");
        if (kw == NULL ||
            cJSON_AddBoolToObject(kw, "enable_thinking",
                                  strcmp(type->valuestring, "disabled") != 0) == NULL) {
            return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    /* output_config.format {"type": "json_schema", "schema"}: the answer's text follows the
     * schema (response_format json_schema); effort has no counterpart here. */
    const cJSON *oc = get(root, "output_config");
    const cJSON *fmt = get(oc, "format");
    if (oc != NULL && !cJSON_IsObject(oc)) {
        return BAD("output_config", "output_config must be an object, got %s",
                   ts_api_json_kind(oc));
    }
    if (fmt != NULL) {
        const cJSON *type = get(fmt, "type"), *schema = get(fmt, "schema");
        if (!cJSON_IsObject(fmt) || !cJSON_IsString(type) ||
            strcmp(type->valuestring, "json_schema") != 0 || !cJSON_IsObject(schema)) {
            return BAD("output_config",
                       "output_config.format must be {\"type\": \"json_schema\", \"schema\": "
                       "{...}}");
        }
        cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
        cJSON *js = rf != NULL ? cJSON_AddObjectToObject(rf, "json_schema") : NULL;
        cJSON *copy = cJSON_Duplicate(schema, true);
        if (js == NULL || copy == NULL ||
            cJSON_AddStringToObject(rf, "type", "json_schema") == NULL ||
            cJSON_AddStringToObject(js, "name", "output") == NULL ||
            !cJSON_AddItemToObject(js, "schema", copy)) {
            cJSON_Delete(js == NULL ? copy : NULL);
            return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    /* `model` is not carried: any name is served (answers carry ours). Anthropic's clients and
     * coding agents send their own model names (claude-...), and a server has one model. */
    /* speculative*: llama-server's per-request speculative decoding fields (api_parse.c). */
    static const char *const k_same[] = {"temperature",
                                         "top_p",
                                         "top_k",
                                         "speculative",
                                         "speculative.n_max",
                                         "speculative.n_min",
                                         "speculative.p_min"};
    for (size_t i = 0; i < sizeof k_same / sizeof *k_same; i++) {
        if (!copy_field(out, root, k_same[i])) {
            return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    if (!count_only && !copy_field(out, root, "stream")) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    return TS_OK;
}

ts_status ts_api_parse_anthropic(const char *body, size_t len, const ts_api_limits *lim,
                                 bool count_only, ts_api_request *r, ts_api_error *err) {
    memset(r, 0, sizeof *r);
    /* The checks ts_api_parse makes of any body, on the body as the client sent it. */
    cJSON *root = ts_api_parse_body(body, len, err);
    if (root == NULL) {
        return TS_ERR_INVALID_ARG;
    }
    cJSON *out = cJSON_CreateObject();
    ts_status st = TS_OK;
    if (out == NULL) {
        st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (st == TS_OK) {
        st = translate_generation(root, lim, count_only, out, err);
    }
    if (st == TS_OK) {
        st = translate_messages(root, out, err);
    }
    if (st == TS_OK) {
        st = translate_tools(root, out, err);
    }
    cJSON_Delete(root);
    char *text = st == TS_OK ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    if (st == TS_OK && text == NULL) {
        st = ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (st == TS_OK) {
        st = ts_api_parse(TS_API_CHAT, text, strlen(text), lim, r, err);
    }
    free(text);
    return st;
}

char *ts_api_anthropic_error_json(const ts_api_error *e) {
    const char *type = "invalid_request_error";
    switch (e->status) {
    case 401:
        type = "authentication_error";
        break;
    case 403:
        type = "permission_error";
        break;
    case 404:
        type = "not_found_error";
        break;
    case 413:
        type = "request_too_large";
        break;
    case 429:
        type = "rate_limit_error";
        break;
    case 503:
    case 529:
        type = "overloaded_error";
        break;
    default:
        type = e->status >= 500 ? "api_error" : "invalid_request_error";
        break;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *inner = NULL;
    char *text = NULL;
    if (root != NULL && cJSON_AddStringToObject(root, "type", "error") != NULL &&
        (inner = cJSON_AddObjectToObject(root, "error")) != NULL &&
        cJSON_AddStringToObject(inner, "type", type) != NULL &&
        cJSON_AddStringToObject(inner, "message", e->message) != NULL) {
        text = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    return text;
}

const char *ts_anthropic_stop_reason(ts_finish_reason finish, int32_t stop_index, bool tool_calls) {
    if (finish == TS_FINISH_LENGTH) {
        return "max_tokens";
    }
    if (tool_calls) {
        return "tool_use";
    }
    return stop_index >= 0 ? "stop_sequence" : "end_turn";
}
