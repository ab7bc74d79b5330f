/*
 * api_ollama.c — Ollama API bodies (POST /api/chat, /api/generate, /api/embed,
 * /api/embeddings) as the neutral request, and Ollama's error body {"error": "..."}.
 *
 * The body is checked in Ollama's terms (fields named as the client wrote them:
 * "messages[2].tool_calls[0]", "options.temperature") and rewritten into the OpenAI body every
 * dialect shares, which ts_api_parse then reads:
 *
 *   messages[].content / thinking        content / reasoning_content
 *   messages[].tool_calls                tool_calls (arguments, an object, as JSON text; ids
 *     [{function: {name, arguments}}]    made up: call_<turn>_<k>)
 *   role "tool" (tool_name)              a tool turn answering the k-th call of the assistant
 *                                        turn before it (by position, as Ollama has no ids)
 *   tools                                tools (Ollama's are OpenAI's function tools)
 *   format "json" / {schema}             response_format json_object / json_schema
 *   think true / false / "high"|...      chat_template_kwargs.enable_thinking (+ reasoning_effort)
 *   options.num_predict                  max_tokens (a cap, cut to the context; -1 and -2: none)
 *   options.repeat_penalty               repetition_penalty
 *   options.temperature, top_p, top_k,   the same names
 *     min_p, seed, presence_penalty,
 *     frequency_penalty, stop,
 *     speculative, speculative.n_max,
 *     speculative.n_min, speculative.p_min
 *   generate: system + prompt            a system turn and a user turn, through the template
 *   generate raw: prompt                 the prompt as it is (a completions request)
 *
 * model names are not checked: a server of one model answers whatever name a tool was set up
 * with (as llama-server does). options.num_ctx and the other load-time options (num_gpu,
 * num_thread, ...), keep_alive and unknown fields are accepted and ignored: the context is the
 * one `tessera serve` started with. What cannot be honoured is refused by name: images, a
 * template override, suffix (fill-in-the-middle), the deprecated context array.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/dialect.h"

#define BAD(field, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", field, NULL, __VA_ARGS__)
#define OOM() ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory")

/* The field, or NULL when absent or null. */
static const cJSON *get(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v == NULL || cJSON_IsNull(v) ? NULL : v;
}

/* images: refused unless absent or empty. */
static ts_status no_images(const cJSON *obj, const char *where, ts_api_error *err) {
    const cJSON *im = get(obj, "images");
    if (im != NULL && !(cJSON_IsArray(im) && cJSON_GetArraySize(im) == 0)) {
        return BAD(where, "%s: images are not supported (this server's model reads text only)",
                   where);
    }
    return TS_OK;
}

/* A non-empty string field we cannot honour is refused; "" and null are fine. */
static ts_status refuse_string(const cJSON *root, const char *name, const char *why,
                               ts_api_error *err) {
    const cJSON *v = get(root, name);
    if (v == NULL || (cJSON_IsString(v) && v->valuestring[0] == '\0')) {
        return TS_OK;
    }
    if (!cJSON_IsString(v)) {
        return BAD(name, "%s must be a string, got %s", name, ts_api_json_kind(v));
    }
    return BAD(name, "%s is not supported: %s", name, why);
}

static ts_status translate_options(const cJSON *root, const ts_api_limits *lim, bool raw,
                                   cJSON *out, ts_api_error *err) {
    const cJSON *o = get(root, "options");
    if (o != NULL && !cJSON_IsObject(o)) {
        return BAD("options", "options must be an object, got %s", ts_api_json_kind(o));
    }
    static const char *const k_num[][2] = {
        {"temperature", "temperature"},
        {"top_p", "top_p"},
        {"top_k", "top_k"},
        {"min_p", "min_p"},
        {"seed", "seed"},
        {"presence_penalty", "presence_penalty"},
        {"frequency_penalty", "frequency_penalty"},
        {"repeat_penalty", "repetition_penalty"},
        {"num_ctx", NULL}, /* the context is the server's (--ctx): ignored */
    };
    char field[64];
    for (size_t i = 0; i < sizeof k_num / sizeof *k_num; i++) {
        const cJSON *v = get(o, k_num[i][0]);
        if (v == NULL) {
            continue;
        }
        snprintf(field, sizeof field, "options.%s", k_num[i][0]);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
            return BAD(field, "%s must be a number, got %s", field, ts_api_json_kind(v));
        }
        if (k_num[i][1] != NULL &&
            cJSON_AddNumberToObject(out, k_num[i][1], v->valuedouble) == NULL) {
            return OOM();
        }
    }
    /* num_predict: a cap (the dialect clamps it to the context's room); -1 (no limit) and -2
     * (fill the context) leave it to the context, as does leaving it out. */
    const cJSON *np = get(o, "num_predict");
    double max_tokens = 0;
    if (np != NULL) {
        if (!cJSON_IsNumber(np) || floor(np->valuedouble) != np->valuedouble ||
            !(np->valuedouble >= -2 && np->valuedouble <= 9.0e15) || np->valuedouble == 0) {
            return BAD("options.num_predict",
                       "options.num_predict must be an integer >= 1, or -1 (no limit) or -2 (fill "
                       "the context), got %s",
                       cJSON_IsNumber(np) ? "another number" : ts_api_json_kind(np));
        }
        max_tokens = np->valuedouble;
    }
    if (max_tokens < 1 && raw) {
        max_tokens = (double)lim->n_ctx; /* completions default to 16 tokens otherwise */
    }
    if (max_tokens >= 1) {
        if (lim->n_ctx > 0 && max_tokens > (double)lim->n_ctx) {
            max_tokens = (double)lim->n_ctx;
        }
        if (cJSON_AddNumberToObject(out, "max_tokens", max_tokens) == NULL) {
            return OOM();
        }
    }
    /* llama-server's speculative decoding fields, given in options: carried as they are and
     * checked by ts_api_parse (errors name them without "options."). */
    static const char *const k_spec[] = {"speculative", "speculative.n_max", "speculative.n_min",
                                         "speculative.p_min"};
    for (size_t i = 0; i < sizeof k_spec / sizeof *k_spec; i++) {
        const cJSON *v = get(o, k_spec[i]);
        cJSON *c = v != NULL ? cJSON_Duplicate(v, true) : NULL;
        if (v != NULL && (c == NULL || !cJSON_AddItemToObject(out, k_spec[i], c))) {
            cJSON_Delete(c);
            return OOM();
        }
    }
    const cJSON *stop = get(o, "stop");
    if (stop != NULL) {
        bool ok = cJSON_IsString(stop) || cJSON_IsArray(stop);
        for (const cJSON *s = cJSON_IsArray(stop) ? stop->child : NULL; s != NULL; s = s->next) {
            ok = ok && cJSON_IsString(s);
        }
        if (!ok) {
            return BAD("options.stop", "options.stop must be an array of strings, got %s",
                       ts_api_json_kind(stop));
        }
        cJSON *c = cJSON_Duplicate(stop, true);
        if (c == NULL || !cJSON_AddItemToObject(out, "stop", c)) {
            cJSON_Delete(c);
            return OOM();
        }
    }
    return TS_OK;
}

/* format, think, stream: the fields /api/chat and /api/generate share. */
static ts_status translate_common(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *st = get(root, "stream");
    if (st != NULL && !cJSON_IsBool(st)) {
        return BAD("stream", "stream must be a boolean, got %s", ts_api_json_kind(st));
    }
    /* Ollama streams unless told not to. */
    if (cJSON_AddBoolToObject(out, "stream", st == NULL || cJSON_IsTrue(st)) == NULL) {
        return OOM();
    }
    const cJSON *f = get(root, "format");
    if (cJSON_IsString(f) && strcmp(f->valuestring, "json") == 0) {
        cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
        if (rf == NULL || cJSON_AddStringToObject(rf, "type", "json_object") == NULL) {
            return OOM();
        }
    } else if (cJSON_IsObject(f)) {
        cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
        cJSON *js = rf != NULL ? cJSON_AddObjectToObject(rf, "json_schema") : NULL;
        cJSON *copy = cJSON_Duplicate(f, true);
        if (js == NULL || copy == NULL ||
            cJSON_AddStringToObject(rf, "type", "json_schema") == NULL ||
            cJSON_AddStringToObject(js, "name", "output") == NULL ||
            !cJSON_AddItemToObject(js, "schema", copy)) {
            cJSON_Delete(js == NULL ? copy : NULL);
            return OOM();
        }
    } else if (f != NULL && !(cJSON_IsString(f) && f->valuestring[0] == '\0')) {
        return BAD("format", "format must be \"json\" or a JSON schema (an object), got %s",
                   cJSON_IsString(f) ? "another string" : ts_api_json_kind(f));
    }
    const cJSON *th = get(root, "think");
    if (th != NULL) {
        bool level = cJSON_IsString(th) && (strcmp(th->valuestring, "high") == 0 ||
                                            strcmp(th->valuestring, "medium") == 0 ||
                                            strcmp(th->valuestring, "low") == 0);
        if (!cJSON_IsBool(th) && !level) {
            return BAD("think",
                       "think must be true, false, \"high\", \"medium\" or \"low\", got %s",
                       cJSON_IsString(th) ? "another string" : ts_api_json_kind(th));
        }
        cJSON *kw = cJSON_AddObjectToObject(out, "chat_template_kwargs");
        if (kw == NULL ||
            cJSON_AddBoolToObject(kw, "enable_thinking", level || cJSON_IsTrue(th)) == NULL ||
            (level && cJSON_AddStringToObject(kw, "reasoning_effort", th->valuestring) == NULL)) {
            return OOM();
        }
    }
    const cJSON *ka = get(root, "keep_alive");
    if (ka != NULL && !cJSON_IsString(ka) && !cJSON_IsNumber(ka)) {
        return BAD("keep_alive", "keep_alive must be a duration (\"5m\") or a number, got %s",
                   ts_api_json_kind(ka));
    }
    return TS_OK;
}

/* An assistant turn's tool calls, OpenAI's shape, with made-up ids call_<turn>_<k>. */
static ts_status translate_calls(const cJSON *calls, int i, cJSON *msg, int *n_calls,
                                 ts_api_error *err) {
    char field[64];
    snprintf(field, sizeof field, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(calls)) {
        return BAD(field, "%s must be an array, got %s", field, ts_api_json_kind(calls));
    }
    cJSON *arr = cJSON_AddArrayToObject(msg, "tool_calls");
    if (arr == NULL) {
        return OOM();
    }
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = get(c, "function");
        const cJSON *name = get(fn, "name"), *args = get(fn, "arguments");
        if (!cJSON_IsString(name) || (args != NULL && !cJSON_IsObject(args))) {
            return BAD(field,
                       "%s[%d] must be {\"function\": {\"name\": string, \"arguments\": object}}",
                       field, k);
        }
        char id[32];
        snprintf(id, sizeof id, "call_%d_%d", i, k);
        char *text = args != NULL ? cJSON_PrintUnformatted(args) : strdup("{}");
        cJSON *tc = cJSON_CreateObject();
        cJSON *f = tc != NULL ? cJSON_AddObjectToObject(tc, "function") : NULL;
        bool ok = text != NULL && f != NULL && cJSON_AddItemToArray(arr, tc) &&
                  cJSON_AddStringToObject(tc, "id", id) != NULL &&
                  cJSON_AddStringToObject(tc, "type", "function") != NULL &&
                  cJSON_AddStringToObject(f, "name", name->valuestring) != NULL &&
                  cJSON_AddStringToObject(f, "arguments", text) != NULL;
        free(text);
        if (!ok) {
            if (f == NULL || cJSON_GetArraySize(arr) <= k) {
                cJSON_Delete(tc);
            }
            return OOM();
        }
        k++;
    }
    *n_calls = k;
    return TS_OK;
}

static ts_status translate_messages(const cJSON *root, cJSON *out, ts_api_error *err) {
    const cJSON *msgs = get(root, "messages");
    if (!cJSON_IsArray(msgs)) {
        return BAD("messages", "messages must be an array, got %s", ts_api_json_kind(msgs));
    }
    cJSON *arr = cJSON_AddArrayToObject(out, "messages");
    if (arr == NULL) {
        return OOM();
    }
    int i = 0, last_assistant = -1, n_calls = 0, answered = 0;
    char field[64];
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        snprintf(field, sizeof field, "messages[%d]", i);
        const cJSON *role = get(m, "role"), *content = get(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            return BAD(field, "%s must be an object with a string role", field);
        }
        const char *r = role->valuestring;
        if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0 &&
            strcmp(r, "tool") != 0) {
            return BAD(field,
                       "%s.role must be \"system\", \"user\", \"assistant\" or \"tool\", got "
                       "'%.32s'",
                       field, r);
        }
        if (content != NULL && !cJSON_IsString(content)) {
            return BAD(field, "%s.content must be a string, got %s", field,
                       ts_api_json_kind(content));
        }
        if (no_images(m, field, err) != TS_OK) {
            return TS_ERR_INVALID_ARG;
        }
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(arr, o) ||
            cJSON_AddStringToObject(o, "role", r) == NULL ||
            cJSON_AddStringToObject(o, "content", content != NULL ? content->valuestring : "") ==
                NULL) {
            if (o != NULL && cJSON_GetArraySize(arr) <= i) {
                cJSON_Delete(o);
            }
            return OOM();
        }
        const cJSON *thinking = get(m, "thinking");
        if (thinking != NULL && !cJSON_IsString(thinking)) {
            return BAD(field, "%s.thinking must be a string, got %s", field,
                       ts_api_json_kind(thinking));
        }
        if (strcmp(r, "assistant") == 0) {
            if (thinking != NULL && thinking->valuestring[0] != '\0' &&
                cJSON_AddStringToObject(o, "reasoning_content", thinking->valuestring) == NULL) {
                return OOM();
            }
            const cJSON *calls = get(m, "tool_calls");
            n_calls = 0;
            answered = 0;
            last_assistant = i;
            if (calls != NULL && translate_calls(calls, i, o, &n_calls, err) != TS_OK) {
                return TS_ERR_INVALID_ARG;
            }
        } else if (strcmp(r, "tool") == 0) {
            const cJSON *name = get(m, "tool_name");
            if (name == NULL) {
                name = get(m, "name");
            }
            if (name != NULL && !cJSON_IsString(name)) {
                return BAD(field, "%s.tool_name must be a string, got %s", field,
                           ts_api_json_kind(name));
            }
            if (answered >= n_calls) {
                return BAD(field,
                           "%s is a tool result, but the assistant turn before it made %d tool "
                           "call(s), all answered already",
                           field, n_calls);
            }
            char id[32];
            snprintf(id, sizeof id, "call_%d_%d", last_assistant, answered++);
            if (cJSON_AddStringToObject(o, "tool_call_id", id) == NULL ||
                (name != NULL && cJSON_AddStringToObject(o, "name", name->valuestring) == NULL)) {
                return OOM();
            }
        } else {
            n_calls = answered = 0; /* results must follow their calls */
        }
        i++;
    }
    const cJSON *tools = get(root, "tools");
    if (tools != NULL) {
        if (!cJSON_IsArray(tools)) {
            return BAD("tools", "tools must be an array, got %s", ts_api_json_kind(tools));
        }
        if (cJSON_GetArraySize(tools) > 0) {
            cJSON *c = cJSON_Duplicate(tools, true);
            if (c == NULL || !cJSON_AddItemToObject(out, "tools", c)) {
                cJSON_Delete(c);
                return OOM();
            }
        }
    }
    return TS_OK;
}

/* /api/generate: system + prompt as a conversation, or (raw) the prompt itself. */
static ts_status translate_generate(const cJSON *root, bool raw, cJSON *out, ts_api_error *err) {
    const cJSON *prompt = get(root, "prompt"), *system = get(root, "system");
    const cJSON *rw = get(root, "raw");
    if (rw != NULL && !cJSON_IsBool(rw)) {
        return BAD("raw", "raw must be a boolean, got %s", ts_api_json_kind(rw));
    }
    if (raw != cJSON_IsTrue(rw)) {
        return BAD("raw", "raw does not match the endpoint asked for");
    }
    if (prompt != NULL && !cJSON_IsString(prompt)) {
        return BAD("prompt", "prompt must be a string, got %s", ts_api_json_kind(prompt));
    }
    if (system != NULL && !cJSON_IsString(system)) {
        return BAD("system", "system must be a string, got %s", ts_api_json_kind(system));
    }
    if (refuse_string(root, "template",
                      "this server renders the model's own chat template; "
                      "send raw: true with the prompt already formatted instead",
                      err) != TS_OK ||
        refuse_string(root, "suffix",
                      "fill-in-the-middle is not served; send the prefix as a "
                      "raw prompt",
                      err) != TS_OK) {
        return TS_ERR_INVALID_ARG;
    }
    const cJSON *ctx = get(root, "context");
    if (ctx != NULL && !(cJSON_IsArray(ctx) && cJSON_GetArraySize(ctx) == 0)) {
        return BAD("context",
                   "context (the deprecated token context of an earlier answer) is not supported; "
                   "send the conversation to /api/chat instead");
    }
    if (no_images(root, "images", err) != TS_OK) {
        return TS_ERR_INVALID_ARG;
    }
    const char *text = prompt != NULL ? prompt->valuestring : "";
    if (raw) {
        return cJSON_AddStringToObject(out, "prompt", text) != NULL ? TS_OK : OOM();
    }
    cJSON *arr = cJSON_AddArrayToObject(out, "messages");
    cJSON *sys = system != NULL && system->valuestring[0] != '\0' ? cJSON_CreateObject() : NULL;
    if (sys != NULL) {
        if (!cJSON_AddItemToArray(arr, sys) ||
            cJSON_AddStringToObject(sys, "role", "system") == NULL ||
            cJSON_AddStringToObject(sys, "content", system->valuestring) == NULL) {
            return OOM();
        }
    }
    cJSON *user = cJSON_CreateObject();
    if (arr == NULL || user == NULL || !cJSON_AddItemToArray(arr, user) ||
        cJSON_AddStringToObject(user, "role", "user") == NULL ||
        cJSON_AddStringToObject(user, "content", text) == NULL) {
        return OOM();
    }
    return TS_OK;
}

ts_status ts_api_parse_ollama(ts_ollama_kind which, const char *body, size_t len,
                              const ts_api_limits *lim, ts_api_request *r, ts_api_error *err) {
    memset(r, 0, sizeof *r);
    cJSON *root = ts_api_parse_body(body, len, err);
    if (root == NULL) {
        return TS_ERR_INVALID_ARG;
    }
    cJSON *out = cJSON_CreateObject();
    ts_status st = out == NULL ? OOM() : TS_OK;
    ts_api_kind kind = TS_API_CHAT;
    if (st == TS_OK && (which == TS_OLLAMA_EMBED || which == TS_OLLAMA_EMBEDDINGS)) {
        /* /api/embed: input (a string or strings); /api/embeddings: prompt (one string). */
        const char *name = which == TS_OLLAMA_EMBED ? "input" : "prompt";
        const cJSON *in = get(root, name);
        if (in == NULL || (which == TS_OLLAMA_EMBEDDINGS && !cJSON_IsString(in))) {
            st = BAD(name, "%s must be %s, got %s", name,
                     which == TS_OLLAMA_EMBED ? "a string or an array of strings" : "a string",
                     ts_api_json_kind(in));
        } else {
            cJSON *c = cJSON_Duplicate(in, true);
            st = c != NULL && cJSON_AddItemToObject(out, "input", c) ? TS_OK : OOM();
            if (st != TS_OK) {
                cJSON_Delete(c);
            }
        }
        kind = TS_API_EMBEDDINGS;
    } else if (st == TS_OK) {
        bool raw = which == TS_OLLAMA_GENERATE_RAW;
        kind = raw ? TS_API_COMPLETIONS : TS_API_CHAT;
        st = translate_common(root, out, err);
        if (st == TS_OK) {
            st = translate_options(root, lim, raw, out, err);
        }
        if (st == TS_OK) {
            st = which == TS_OLLAMA_CHAT ? translate_messages(root, out, err)
                                         : translate_generate(root, raw, out, err);
        }
    }
    cJSON_Delete(root);
    char *text = st == TS_OK ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    if (st == TS_OK && text == NULL) {
        st = OOM();
    }
    if (st == TS_OK) {
        st = ts_api_parse(kind, text, strlen(text), lim, r, err);
    }
    free(text);
    return st;
}

char *ts_api_ollama_error_json(const ts_api_error *e) {
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (root != NULL && cJSON_AddStringToObject(root, "error", e->message) != NULL) {
        text = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    return text;
}

void ts_api_ollama_peek(ts_ollama_kind which, const char *body, size_t len, bool *raw, bool *load) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    *raw = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "raw"));
    /* Ollama's clients load a model by asking for nothing: no prompt, or no messages. */
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(root, which == TS_OLLAMA_CHAT ? "messages" : "prompt");
    *load = cJSON_IsObject(root) &&
            (v == NULL || cJSON_IsNull(v) || (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0) ||
             (cJSON_IsString(v) && v->valuestring[0] == '\0'));
    cJSON_Delete(root);
}
