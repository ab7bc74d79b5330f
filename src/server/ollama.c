/*
 * ollama.c — the Ollama rows of the dialect table (dialect.h) and Ollama's other endpoints:
 * POST /api/chat and /api/generate (answers and NDJSON streams), /api/embed and
 * /api/embeddings, GET /api/tags, /api/ps, /api/version, POST /api/show, and the model
 * management endpoints (/api/pull, push, create, copy, delete), which answer a clear error:
 * this server serves the one model it started with. Bodies are read in api_ollama.c.
 *
 * An answer is {"model", "created_at", "message": {"role": "assistant", "content", "thinking",
 * "tool_calls": [{"function": {"name", "arguments": {...}}}]}} (chat) or {"model",
 * "created_at", "response", "thinking"} (generate), with "done": true, done_reason ("stop",
 * "length") and the counts and durations (nanoseconds: total from the request's arrival, prompt
 * evaluation until the first token, evaluation after it; load_duration is 0, the model being
 * loaded at start). A stream (application/x-ndjson, one JSON object a line) sends each piece as
 * the same object with "done": false, then the last object with done true and the figures; a
 * failure mid-stream is a last line {"error": "..."}. 15 s of silence send an empty piece.
 */
#include "server/stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ts_status parse_chat(ts_api_kind kind, const char *body, size_t len,
                            const ts_api_limits *lim, ts_api_request *r, ts_api_error *e) {
    (void)kind;
    return ts_api_parse_ollama(TS_OLLAMA_CHAT, body, len, lim, r, e);
}

static ts_status parse_generate(ts_api_kind kind, const char *body, size_t len,
                                const ts_api_limits *lim, ts_api_request *r, ts_api_error *e) {
    return ts_api_parse_ollama(kind == TS_API_COMPLETIONS ? TS_OLLAMA_GENERATE_RAW
                                                          : TS_OLLAMA_GENERATE,
                               body, len, lim, r, e);
}

static cJSON *chat_answer_json(ts_server *s, ts_answer *a);
static cJSON *generate_answer_json(ts_server *s, ts_answer *a);

const ts_dialect ts_dialect_ollama_chat = {
    .name = "ollama",
    .parse = parse_chat,
    .answer_json = chat_answer_json,
    .stream_open = ts_ollama_stream_open,
    .stream_event = ts_ollama_stream_event,
    .stream_end = ts_ollama_stream_end,
    .stream_error = ts_ollama_stream_error,
    .keepalive = "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":false}\n",
    .error_json = ts_api_ollama_error_json,
    .clamp_max_tokens = true,
    .id_prefix = "ollama",
    .stream_content_type = "application/x-ndjson",
};

const ts_dialect ts_dialect_ollama_generate = {
    .name = "ollama",
    .parse = parse_generate,
    .answer_json = generate_answer_json,
    .stream_open = ts_ollama_stream_open,
    .stream_event = ts_ollama_stream_event,
    .stream_end = ts_ollama_stream_end,
    .stream_error = ts_ollama_stream_error,
    .keepalive = "{\"response\":\"\",\"done\":false}\n",
    .error_json = ts_api_ollama_error_json,
    .clamp_max_tokens = true,
    .id_prefix = "ollama",
    .stream_content_type = "application/x-ndjson",
};

/* "2026-11-28T12:58:36.123456789Z" */
static void created_at(char *buf, size_t size) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%09ldZ", day, (long)ts.tv_nsec);
}

static bool is_chat(const ts_dialect *d) {
    return d == &ts_dialect_ollama_chat;
}

/* The object every line and answer starts with. */
static cJSON *base(ts_server *s) {
    cJSON *o = cJSON_CreateObject();
    char when[48];
    created_at(when, sizeof when);
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON_AddStringToObject(o, "created_at", when);
    return o;
}

/* A JSON string from len bytes (not NUL-terminated). */
static cJSON *string_n(const char *s, size_t len) {
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    cJSON *v = cJSON_CreateString(copy);
    free(copy);
    return v;
}

/* {"function": {"name", "arguments": {...}}}: arguments are compact JSON of an object. */
static cJSON *tool_call(const char *name, const char *arguments) {
    cJSON *c = cJSON_CreateObject();
    cJSON *f = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON *args = arguments != NULL ? cJSON_Parse(arguments) : NULL;
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(args);
        args = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(f, "arguments", args);
    return c;
}

/* Adds content (and thinking) to o in the row's shape: message{} for chat, response for
 * generate. Returns the message object (chat) or o. */
static cJSON *add_text(cJSON *o, bool chat, cJSON *content, cJSON *thinking) {
    cJSON *m = o;
    if (chat) {
        m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
    }
    cJSON_AddItemToObject(m, chat ? "content" : "response",
                          content != NULL ? content : cJSON_CreateString(""));
    if (thinking != NULL) {
        cJSON_AddItemToObject(m, "thinking", thinking);
    }
    return m;
}

/* Whole nanoseconds (Ollama's clients read integers). */
static double ns(double seconds) {
    return seconds > 0 ? floor(seconds * 1e9) : 0;
}

static void add_done(cJSON *o, ts_finish_reason finish, uint64_t prompt, uint64_t completion,
                     double t_arrival, double t_first) {
    double now = ts_server_now();
    if (t_first == 0) {
        t_first = now;
    }
    cJSON_AddBoolToObject(o, "done", true);
    cJSON_AddStringToObject(o, "done_reason", finish == TS_FINISH_LENGTH ? "length" : "stop");
    cJSON_AddNumberToObject(o, "total_duration", ns(now - t_arrival));
    cJSON_AddNumberToObject(o, "load_duration", 0);
    cJSON_AddNumberToObject(o, "prompt_eval_count", (double)prompt);
    cJSON_AddNumberToObject(o, "prompt_eval_duration", ns(t_first - t_arrival));
    cJSON_AddNumberToObject(o, "eval_count", (double)completion);
    cJSON_AddNumberToObject(o, "eval_duration", ns(now - t_first));
}

static cJSON *answer_json(ts_server *s, ts_answer *a, bool chat) {
    ts_answer_choice *c = &a->choices[0];
    cJSON *root = base(s);
    if (root == NULL) {
        return NULL;
    }
    cJSON *content = NULL, *thinking = NULL;
    const ts_chat_tool_call *calls = NULL;
    size_t n_calls = 0;
    if (c->parsed != NULL) {
        size_t n = 0;
        const char *reasoning = ts_chat_out_reasoning(c->parsed, &n);
        thinking = n > 0 ? cJSON_CreateString(reasoning) : NULL;
        const char *text = ts_chat_out_content(c->parsed, &n);
        content = cJSON_CreateString(n > 0 ? text : "");
        n_calls = ts_chat_out_tool_calls(c->parsed, &calls);
    } else {
        content = cJSON_CreateString(c->text);
    }
    cJSON *m = add_text(root, chat, content, thinking);
    if (chat && n_calls > 0) {
        cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
        for (size_t i = 0; i < n_calls; i++) {
            cJSON_AddItemToArray(arr, tool_call(calls[i].name, calls[i].arguments));
        }
    }
    add_done(root, c->finish, a->prompt_tokens, a->completion_tokens, a->t_arrival, a->t_first);
    if (cJSON_GetObjectItemCaseSensitive(root, "eval_duration") == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static cJSON *chat_answer_json(ts_server *s, ts_answer *a) {
    return answer_json(s, a, true);
}

static cJSON *generate_answer_json(ts_server *s, ts_answer *a) {
    return answer_json(s, a, false);
}

/* ---- streams ------------------------------------------------------------------------------ */

static void line(ts_stream *st, cJSON *o) {
    char *text = o != NULL ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text == NULL || !ts_stream_put_raw(st, text, strlen(text)) ||
        !ts_stream_put_raw(st, "\n", 1)) {
        free(text);
        ts_ollama_stream_error(st, 500, NULL, "out of memory");
        return;
    }
    free(text);
}

static void piece_line(ts_stream *st, ts_chat_event_kind kind, const char *text, size_t len) {
    if (len == 0) {
        return;
    }
    cJSON *o = base(st->s);
    bool thinking = kind == TS_CHAT_EVENT_REASONING;
    add_text(o, is_chat(st->d), thinking ? NULL : string_n(text, len),
             thinking ? string_n(text, len) : NULL);
    cJSON_AddBoolToObject(o, "done", false);
    line(st, o);
}

void ts_ollama_stream_open(ts_stream *st) {
    (void)st; /* Ollama's streams start with the first piece */
}

static void ollama_piece(ts_stream *st, const ts_chat_event *piece) {
    if (piece->kind != TS_CHAT_EVENT_TOOL_CALL) {
        piece_line(st, piece->kind, piece->text, piece->len);
        return;
    }
    cJSON *o = base(st->s);
    cJSON *m = add_text(o, true, NULL, NULL);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "tool_calls"),
                         tool_call(piece->name, piece->arguments));
    cJSON_AddBoolToObject(o, "done", false);
    line(st, o);
}

void ts_ollama_stream_event(ts_stream *st, const ts_job_event *ev) {
    if (ev->choice != 0) {
        return; /* one answer per request */
    }
    if (st->t_first == 0 && ev->token >= 0) {
        st->t_first = ts_server_now();
    }
    if (!ts_stream_chat_pieces(st, ev, ollama_piece)) {
        ts_ollama_stream_error(st, 500, NULL, "out of memory");
        return;
    }
    if (ev->finish != TS_FINISH_NONE) {
        st->finish = ev->finish;
    }
}

void ts_ollama_stream_end(ts_stream *st) {
    if (!st->error_sent) {
        uint64_t prompt = 0, cached = 0;
        ts_stream_usage(st, &prompt, &cached);
        cJSON *o = base(st->s);
        add_text(o, is_chat(st->d), NULL, NULL);
        double t_arrival = st->j != NULL ? st->j->t_arrival : ts_server_now();
        add_done(o, st->finish, prompt, st->completion, t_arrival, st->t_first);
        line(st, o);
    }
    st->finished = true;
}

void ts_ollama_stream_error(ts_stream *st, int status, const char *code, const char *message) {
    (void)status, (void)code;
    if (st->error_sent) {
        return;
    }
    st->error_sent = true; /* before writing: a failed write must not come back here */
    ts_api_error e;
    ts_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", message);
    char *text = ts_api_ollama_error_json(&e);
    if (text != NULL) {
        ts_stream_put_raw(st, text, strlen(text));
        ts_stream_put_raw(st, "\n", 1);
        free(text);
    }
}

/* ---- handlers ----------------------------------------------------------------------------- */

static ts_reply reply_object(cJSON *o) {
    char *text = o != NULL ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text == NULL) {
        ts_api_error e;
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return ts_reply_error_in(&ts_dialect_ollama_chat, &e);
    }
    return ts_reply_json(200, text);
}

ts_reply ts_handle_ollama_generate(ts_server *s, const ts_endpoint *ep, const char *body,
                                   size_t len, int sock) {
    bool chat = ep->dialect == &ts_dialect_ollama_chat;
    bool raw = false, load = false;
    ts_api_ollama_peek(chat ? TS_OLLAMA_CHAT : TS_OLLAMA_GENERATE, body, len, &raw, &load);
    if (load) {
        /* Nothing asked: Ollama's clients load a model so. Ours is loaded. */
        cJSON *o = base(s);
        add_text(o, chat, NULL, NULL);
        cJSON_AddBoolToObject(o, "done", true);
        cJSON_AddStringToObject(o, "done_reason", "load");
        return reply_object(o);
    }
    if (!chat && raw) {
        ts_endpoint raw_ep = *ep;
        raw_ep.kind = TS_API_COMPLETIONS;
        return ts_handle_generate(s, &raw_ep, body, len, sock);
    }
    return ts_handle_generate(s, ep, body, len, sock);
}

ts_reply ts_handle_ollama_embed(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                int sock) {
    (void)sock;
    bool legacy = strcmp(ep->path, "/api/embeddings") == 0;
    ts_api_limits lim = ts_server_limits(s);
    ts_api_request r;
    ts_api_error e;
    if (ts_api_parse_ollama(legacy ? TS_OLLAMA_EMBEDDINGS : TS_OLLAMA_EMBED, body, len, &lim, &r,
                            &e) != TS_OK) {
        return ts_reply_error_in(ep->dialect, &e);
    }
    double t0 = ts_server_now();
    float *out = NULL;
    uint64_t n_tokens = 0;
    if (ts_server_embed(s, &r, &out, &n_tokens, &e) != TS_OK) {
        ts_api_request_free(&r);
        return ts_reply_error_in(ep->dialect, &e);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON *vecs = legacy ? o : cJSON_AddArrayToObject(o, "embeddings");
    for (int32_t i = 0; i < r.n_inputs; i++) {
        const float *v = out + (size_t)i * (size_t)s->n_embd;
        cJSON *a = cJSON_CreateArray();
        for (int64_t k = 0; a != NULL && k < s->n_embd; k++) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[k]));
        }
        if (legacy) {
            cJSON_AddItemToObject(o, "embedding", a);
        } else {
            cJSON_AddItemToArray(vecs, a);
        }
    }
    if (!legacy) {
        cJSON_AddNumberToObject(o, "total_duration", ns(ts_server_now() - t0));
        cJSON_AddNumberToObject(o, "load_duration", 0);
        cJSON_AddNumberToObject(o, "prompt_eval_count", (double)n_tokens);
    }
    free(out);
    ts_api_request_free(&r);
    return reply_object(o);
}

/* A cheap identifier of the model file (FNV-1a of its name, size and parameters), as hex:
 * Ollama's digest is the blob's sha256, which would mean reading gigabytes per request. */
static void digest(const ts_server *s, const ts_llm_info *info, char *buf, size_t size) {
    uint64_t h = 1469598103934665603ULL;
    char key[512];
    snprintf(key, sizeof key, "%s|%llu|%llu|%s", s->model_name,
             (unsigned long long)info->file_bytes, (unsigned long long)info->n_params,
             info->file_type);
    for (const char *p = key; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    }
    snprintf(buf, size, "%016llx", (unsigned long long)h);
}

static cJSON *details(const ts_llm_info *info) {
    cJSON *d = cJSON_CreateObject();
    char params[32];
    double n = (double)info->n_params;
    if (n >= 1e9) {
        snprintf(params, sizeof params, "%.1fB", n / 1e9);
    } else {
        snprintf(params, sizeof params, "%.0fM", n / 1e6);
    }
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "gguf");
    cJSON_AddStringToObject(d, "family", info->arch);
    cJSON *fams = cJSON_AddArrayToObject(d, "families");
    cJSON_AddItemToArray(fams, cJSON_CreateString(info->arch));
    cJSON_AddStringToObject(d, "parameter_size", params);
    cJSON_AddStringToObject(d, "quantization_level", info->file_type);
    return d;
}

static cJSON *model_entry(ts_server *s, const ts_llm_info *info, bool ps) {
    cJSON *m = cJSON_CreateObject();
    char when[48], dig[32];
    time_t t = (time_t)s->created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    digest(s, info, dig, sizeof dig);
    cJSON_AddStringToObject(m, "name", s->model_name);
    cJSON_AddStringToObject(m, "model", s->model_name);
    if (!ps) {
        cJSON_AddStringToObject(m, "modified_at", when);
    }
    cJSON_AddNumberToObject(m, "size", (double)info->file_bytes);
    cJSON_AddStringToObject(m, "digest", dig);
    cJSON_AddItemToObject(m, "details", details(info));
    if (ps) {
        /* Loaded for as long as the server runs. */
        cJSON_AddStringToObject(m, "expires_at", "9999-12-31T23:59:59Z");
        cJSON_AddNumberToObject(m, "size_vram", 0);
        cJSON_AddNumberToObject(m, "context_length", (double)s->n_ctx);
    }
    return m;
}

static cJSON *show(ts_server *s, const ts_llm_info *info) {
    cJSON *o = cJSON_CreateObject();
    char text[256];
    snprintf(text, sizeof text, "# served by tessera %s\nFROM %s\n", ts_version(), s->model_name);
    cJSON_AddStringToObject(o, "modelfile", text);
    snprintf(text, sizeof text, "num_ctx %lld", (long long)s->n_ctx);
    cJSON_AddStringToObject(o, "parameters", text);
    const char *tmpl = ts_llm_chat_template(s->llm);
    cJSON_AddStringToObject(o, "template", tmpl != NULL ? tmpl : "");
    cJSON_AddItemToObject(o, "details", details(info));
    cJSON *mi = cJSON_AddObjectToObject(o, "model_info");
    cJSON_AddStringToObject(mi, "general.architecture", info->arch);
    cJSON_AddStringToObject(mi, "general.name", info->name);
    cJSON_AddNumberToObject(mi, "general.parameter_count", (double)info->n_params);
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", info->arch);
    cJSON_AddNumberToObject(mi, key, (double)info->n_ctx_train);
    snprintf(key, sizeof key, "%s.embedding_length", info->arch);
    cJSON_AddNumberToObject(mi, key, (double)info->n_embd);
    snprintf(key, sizeof key, "%s.block_count", info->arch);
    cJSON_AddNumberToObject(mi, key, (double)info->n_layer);
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    if (s->encoder) {
        cJSON_AddItemToArray(caps, cJSON_CreateString("embedding"));
    } else {
        cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
        ts_chat_profile profile;
        ts_context_chat_profile(s->ctx, &profile);
        if (tmpl != NULL) {
            cJSON_AddItemToArray(caps, cJSON_CreateString("tools"));
        }
        if (profile.reasoning_format != TS_CHAT_REASONING_NONE) {
            cJSON_AddItemToArray(caps, cJSON_CreateString("thinking"));
        }
    }
    char when[48];
    time_t t = (time_t)s->created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, "modified_at", when);
    return o;
}

ts_reply ts_handle_ollama_info(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                               int sock) {
    (void)sock;
    ts_llm_info info;
    ts_llm_get_info(s->llm, &info);
    if (strcmp(ep->path, "/api/version") == 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "version", ts_version());
        return reply_object(o);
    }
    if (strcmp(ep->path, "/api/show") == 0) {
        cJSON *root = cJSON_ParseWithLength(body, len);
        bool ok = cJSON_IsObject(root);
        cJSON_Delete(root);
        if (!ok) {
            ts_api_error e;
            ts_api_error_set(&e, 400, "invalid_request_error", NULL, NULL,
                             "the body must be a JSON object {\"model\": name}");
            return ts_reply_error_in(ep->dialect, &e);
        }
        return reply_object(show(s, &info));
    }
    bool ps = strcmp(ep->path, "/api/ps") == 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "models"), model_entry(s, &info, ps));
    return reply_object(o);
}

ts_reply ts_handle_ollama_refuse(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                                 int sock) {
    (void)body, (void)len, (void)sock;
    ts_api_error e;
    ts_api_error_set(&e, 501, "invalid_request_error", NULL, NULL,
                     "%s is not supported: tessera serves the one model it was started with "
                     "('%.200s'); to serve another, start `tessera serve` with its GGUF file",
                     ep->path, s->model_name);
    return ts_reply_error_in(ep->dialect, &e);
}
