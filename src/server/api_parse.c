/*
 * api_parse.c — request bodies of /v1/completions, /v1/chat/completions, /tokenize and
 * /detokenize, checked field by field.
 *
 * A JSON null counts as "not given" (clients send `"stop": null`). Numbers that must be
 * integers must be integral and in range; numbers out of their range name the range.
 */
#include "server/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(field, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", field, NULL, __VA_ARGS__)

/* The field, or NULL when absent or null. */
static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v == NULL || cJSON_IsNull(v) ? NULL : v;
}

static bool is_integer(const cJSON *v, double lo, double hi) {
    /* 2^63 itself does not fit an int64_t although (double)INT64_MAX rounds to it. */
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
           floor(v->valuedouble) == v->valuedouble && v->valuedouble >= lo &&
           v->valuedouble <= hi && v->valuedouble < 9223372036854775808.0;
}

static ts_status get_int(const cJSON *obj, const char *name, int64_t lo, int64_t hi, int64_t *out,
                         bool *set, ts_api_error *err) {
    const cJSON *v = field(obj, name);
    if (set != NULL) {
        *set = v != NULL;
    }
    if (v == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsNumber(v)) {
        return BAD(name, "%s must be an integer, got %s", name, ts_api_json_kind(v));
    }
    if (!is_integer(v, (double)lo, (double)hi)) {
        return BAD(name, "%s must be an integer in [%lld, %lld], got %.17g", name, (long long)lo,
                   (long long)hi, v->valuedouble);
    }
    *out = (int64_t)v->valuedouble;
    return TS_OK;
}

static ts_status get_float(const cJSON *obj, const char *name, double lo, double hi, bool lo_open,
                           float *out, ts_api_error *err) {
    const cJSON *v = field(obj, name);
    if (v == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsNumber(v)) {
        return BAD(name, "%s must be a number, got %s", name, ts_api_json_kind(v));
    }
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) {
        return BAD(name, "%s must be in %c%g, %g], got %.17g", name, lo_open ? '(' : '[', lo, hi,
                   d);
    }
    *out = (float)d;
    return TS_OK;
}

static ts_status get_bool(const cJSON *obj, const char *name, bool *out, ts_api_error *err) {
    const cJSON *v = field(obj, name);
    if (v == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsBool(v)) {
        return BAD(name, "%s must be a boolean, got %s", name, ts_api_json_kind(v));
    }
    *out = cJSON_IsTrue(v);
    return TS_OK;
}

static ts_status get_string(const cJSON *obj, const char *name, const char **out,
                            ts_api_error *err) {
    const cJSON *v = field(obj, name);
    if (v == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsString(v)) {
        return BAD(name, "%s must be a string, got %s", name, ts_api_json_kind(v));
    }
    *out = v->valuestring;
    return TS_OK;
}

/* An array of token ids, each in [0, n_vocab). *ids is malloc'd. */
static ts_status get_ids(const cJSON *arr, const char *name, int32_t n_vocab, int32_t **ids,
                         int32_t *n, ts_api_error *err) {
    int count = cJSON_GetArraySize(arr);
    *ids = NULL;
    *n = 0;
    if (count == 0) {
        return BAD(name, "%s is an empty array of token ids", name);
    }
    int32_t *out = malloc((size_t)count * sizeof *out);
    if (out == NULL) {
        return ts_api_error_set(err, 500, "server_error", name, NULL, "out of memory");
    }
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) {
        if (!is_integer(v, 0, (double)n_vocab - 1)) {
            free(out);
            if (!cJSON_IsNumber(v)) {
                return BAD(name, "%s[%d] must be a token id (integer), got %s", name, i,
                           ts_api_json_kind(v));
            }
            return BAD(name, "%s[%d] = %.17g is not a token id in [0, %d)", name, i, v->valuedouble,
                       n_vocab);
        }
        out[i++] = (int32_t)v->valuedouble;
    }
    *ids = out;
    *n = i;
    return TS_OK;
}

static ts_status parse_model(const cJSON *root, const ts_api_limits *lim, ts_api_error *err) {
    const char *model = NULL;
    ts_status st = get_string(root, "model", &model, err);
    if (st == TS_OK && model != NULL && lim->model_name != NULL &&
        strcmp(model, lim->model_name) != 0) {
        return ts_api_error_set(err, 404, "invalid_request_error", "model", "model_not_found",
                                "The model '%.200s' does not exist; this server serves '%.200s'",
                                model, lim->model_name);
    }
    return st;
}

static ts_status parse_prompt(const cJSON *root, const ts_api_limits *lim, ts_api_request *r,
                              ts_api_error *err) {
    const cJSON *p = field(root, "prompt");
    if (p == NULL) {
        return BAD("prompt", "prompt is required");
    }
    if (cJSON_IsString(p)) {
        r->prompts[0].text = p->valuestring;
        r->n_prompts = 1;
        return TS_OK;
    }
    if (!cJSON_IsArray(p)) {
        return BAD("prompt",
                   "prompt must be a string, an array of strings, an array of token "
                   "ids or an array of token-id arrays, got %s",
                   ts_api_json_kind(p));
    }
    int count = cJSON_GetArraySize(p);
    if (count == 0) {
        return BAD("prompt", "prompt is an empty array");
    }
    if (cJSON_IsNumber(p->child)) {
        r->n_prompts = 1;
        return get_ids(p, "prompt", lim->n_vocab, &r->prompts[0].ids, &r->prompts[0].n_ids, err);
    }
    if (count > TS_API_MAX_PROMPTS) {
        return BAD("prompt", "prompt holds %d prompts; at most %d per request", count,
                   TS_API_MAX_PROMPTS);
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, p) {
        ts_api_prompt *dst = &r->prompts[r->n_prompts];
        if (cJSON_IsString(v)) {
            dst->text = v->valuestring;
        } else if (cJSON_IsArray(v)) {
            char name[32];
            snprintf(name, sizeof name, "prompt[%d]", r->n_prompts);
            ts_status st = get_ids(v, name, lim->n_vocab, &dst->ids, &dst->n_ids, err);
            if (st != TS_OK) {
                return st;
            }
        } else {
            return BAD("prompt", "prompt[%d] must be a string or an array of token ids, got %s",
                       r->n_prompts, ts_api_json_kind(v));
        }
        r->n_prompts++;
    }
    return TS_OK;
}

/* A message's content: a string, null (empty), or an array of {"type":"text","text":...}. */
static ts_status message_content(const cJSON *c, int i, ts_api_request *r, ts_api_error *err) {
    char name[48];
    snprintf(name, sizeof name, "messages[%d].content", i);
    if (c == NULL) {
        r->messages[i].content = "";
        return TS_OK;
    }
    if (cJSON_IsString(c)) {
        r->messages[i].content = c->valuestring;
        return TS_OK;
    }
    if (!cJSON_IsArray(c)) {
        return BAD(name, "%s must be a string or an array of text parts, got %s", name,
                   ts_api_json_kind(c));
    }
    size_t total = 1;
    int k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type)) {
            return BAD(name, "%s[%d] must be an object with a \"type\"", name, k);
        }
        if (strcmp(type->valuestring, "text") != 0) {
            return BAD(name, "%s[%d] has type '%.64s'; only text parts are supported", name, k,
                       type->valuestring);
        }
        if (!cJSON_IsString(text)) {
            return BAD(name, "%s[%d].text must be a string, got %s", name, k,
                       ts_api_json_kind(text));
        }
        total += strlen(text->valuestring) + 1;
        k++;
    }
    char *joined = malloc(total);
    if (joined == NULL) {
        return ts_api_error_set(err, 500, "server_error", name, NULL, "out of memory");
    }
    size_t at = 0;
    k = 0;
    cJSON_ArrayForEach(part, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        if (k++ > 0) {
            joined[at++] = '\n'; /* parts are joined line by line, as vLLM does */
        }
        size_t n = strlen(t);
        memcpy(joined + at, t, n);
        at += n;
    }
    joined[at] = '\0';
    r->owned_texts[i] = joined;
    r->messages[i].content = joined;
    return TS_OK;
}

static ts_status parse_messages(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    const cJSON *m = field(root, "messages");
    if (m == NULL) {
        return BAD("messages", "messages is required");
    }
    if (!cJSON_IsArray(m)) {
        return BAD("messages", "messages must be an array, got %s", ts_api_json_kind(m));
    }
    int count = cJSON_GetArraySize(m);
    if (count == 0 || count > TS_API_MAX_MESSAGES) {
        return BAD("messages", "messages must hold 1 to %d messages, got %d", TS_API_MAX_MESSAGES,
                   count);
    }
    r->messages = calloc((size_t)count, sizeof *r->messages);
    r->owned_texts = calloc((size_t)count, sizeof *r->owned_texts);
    if (r->messages == NULL || r->owned_texts == NULL) {
        return ts_api_error_set(err, 500, "server_error", "messages", NULL, "out of memory");
    }
    const cJSON *msg;
    cJSON_ArrayForEach(msg, m) {
        int i = r->n_messages;
        char name[48];
        snprintf(name, sizeof name, "messages[%d]", i);
        if (!cJSON_IsObject(msg)) {
            return BAD(name, "%s must be an object, got %s", name, ts_api_json_kind(msg));
        }
        snprintf(name, sizeof name, "messages[%d].role", i);
        const cJSON *role = field(msg, "role");
        if (!cJSON_IsString(role)) {
            return BAD(name, "%s must be a string, got %s", name, ts_api_json_kind(role));
        }
        const char *rs = role->valuestring;
        if (strcmp(rs, "system") == 0 || strcmp(rs, "developer") == 0) {
            r->messages[i].role = "system";
        } else if (strcmp(rs, "user") == 0) {
            r->messages[i].role = "user";
        } else if (strcmp(rs, "assistant") == 0) {
            r->messages[i].role = "assistant";
        } else if (strcmp(rs, "tool") == 0) {
            r->messages[i].role = "tool";
        } else {
            return BAD(name,
                       "%s '%.64s' is not supported (system, developer, user, assistant, tool)",
                       name, rs);
        }
        r->n_messages++;
        const cJSON *content = field(msg, "content");
        if (content == NULL && strcmp(rs, "assistant") != 0) {
            snprintf(name, sizeof name, "messages[%d].content", i);
            return BAD(name, "%s is required for role '%s'", name, rs);
        }
        ts_status st = message_content(content, i, r, err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

static ts_status parse_stop(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    const cJSON *s = field(root, "stop");
    if (s == NULL) {
        return TS_OK;
    }
    int count = 0;
    const cJSON *one = s;
    if (cJSON_IsArray(s)) {
        count = cJSON_GetArraySize(s);
        if (count > TS_ENGINE_MAX_STOP) {
            return BAD("stop", "stop holds %d strings; at most %d", count, TS_ENGINE_MAX_STOP);
        }
        one = s->child;
    } else if (cJSON_IsString(s)) {
        count = 1;
    } else {
        return BAD("stop", "stop must be a string or an array of strings, got %s",
                   ts_api_json_kind(s));
    }
    for (int i = 0; i < count; i++, one = one->next) {
        if (!cJSON_IsString(one)) {
            return BAD("stop", "stop[%d] must be a string, got %s", i, ts_api_json_kind(one));
        }
        size_t n = strlen(one->valuestring);
        if (n == 0 || n > TS_API_MAX_STOP_LEN) {
            return BAD("stop", "stop[%d] has %zu bytes; a stop string has 1 to %d", i, n,
                       TS_API_MAX_STOP_LEN);
        }
        r->stop[i] = one->valuestring;
    }
    r->params.stop = r->stop;
    r->params.n_stop = count;
    return TS_OK;
}

static ts_status parse_logit_bias(const cJSON *root, const ts_api_limits *lim, ts_api_request *r,
                                  ts_api_error *err) {
    const cJSON *b = field(root, "logit_bias");
    if (b == NULL) {
        return TS_OK;
    }
    if (!cJSON_IsObject(b)) {
        return BAD("logit_bias", "logit_bias must be an object of token id -> bias, got %s",
                   ts_api_json_kind(b));
    }
    int count = cJSON_GetArraySize(b);
    if (count > TS_API_MAX_LOGIT_BIAS) {
        return BAD("logit_bias", "logit_bias has %d entries; at most %d", count,
                   TS_API_MAX_LOGIT_BIAS);
    }
    if (count == 0) {
        return TS_OK;
    }
    r->bias = calloc((size_t)count, sizeof *r->bias);
    if (r->bias == NULL) {
        return ts_api_error_set(err, 500, "server_error", "logit_bias", NULL, "out of memory");
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, b) {
        const char *key = e->string;
        char *end = NULL;
        long id = strtol(key, &end, 10);
        if (key[0] < '0' || key[0] > '9' || *end != '\0' || id < 0 || id >= lim->n_vocab) {
            return BAD("logit_bias", "logit_bias key '%.32s' is not a token id in [0, %d)", key,
                       lim->n_vocab);
        }
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < -100 ||
            e->valuedouble > 100) {
            return BAD("logit_bias", "logit_bias['%s'] must be a number in [-100, 100]", key);
        }
        /* OpenAI: -100 effectively bans the token; make it exact. */
        r->bias[i].token = (int32_t)id;
        r->bias[i].bias = e->valuedouble <= -100 ? -INFINITY : (float)e->valuedouble;
        i++;
    }
    r->params.sampling.logit_bias = r->bias;
    r->params.sampling.n_logit_bias = i;
    return TS_OK;
}

static ts_status parse_logprobs(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    int64_t top = 0;
    bool set = false;
    ts_status st;
    if (r->kind == TS_API_CHAT) {
        st = get_bool(root, "logprobs", &r->logprobs, err);
        if (st == TS_OK) {
            st = get_int(root, "top_logprobs", 0, TS_API_MAX_TOP_LOGPROBS, &top, &set, err);
        }
        if (st == TS_OK && set && top > 0 && !r->logprobs) {
            st = BAD("top_logprobs", "top_logprobs needs logprobs to be true");
        }
    } else {
        st = get_int(root, "logprobs", 0, TS_API_MAX_TOP_LOGPROBS, &top, &set, err);
        r->logprobs = set;
    }
    r->top_logprobs = (int32_t)top;
    r->params.logprobs = r->logprobs;
    r->params.sampling.n_logprobs = r->logprobs ? (int32_t)top : 0;
    return st;
}

/* Fields that change what is generated but that this server does not implement. */
static ts_status reject_unsupported(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    const cJSON *v = field(root, "echo");
    if (v != NULL && !cJSON_IsFalse(v)) {
        return BAD("echo", "echo is not supported");
    }
    v = field(root, "suffix");
    if (v != NULL) {
        return BAD("suffix", "suffix is not supported");
    }
    v = field(root, "best_of");
    if (v != NULL && !(is_integer(v, 1, 1e9) && (int32_t)v->valuedouble == r->params.n)) {
        return BAD("best_of", "best_of must equal n (best-of selection is not supported)");
    }
    return TS_OK;
}

/* One integer of the speculative fields, v given: in [0, TS_ENGINE_MAX_DRAFT]; `false` also
 * where allow_false (n_max: off), read as 0. */
static ts_status spec_int(const cJSON *v, const char *param, bool allow_false, int32_t *out,
                          ts_api_error *err) {
    if (allow_false && cJSON_IsFalse(v)) {
        *out = 0;
        return TS_OK;
    }
    const char *alt = allow_false ? " or false (no speculation)" : "";
    if (!cJSON_IsNumber(v)) {
        return BAD(param, "%s must be an integer in [0, %d]%s, got %s", param, TS_ENGINE_MAX_DRAFT,
                   alt, ts_api_json_kind(v));
    }
    if (!is_integer(v, 0, TS_ENGINE_MAX_DRAFT)) {
        return BAD(param, "%s must be an integer in [0, %d]%s, got %.17g", param,
                   TS_ENGINE_MAX_DRAFT, alt, v->valuedouble);
    }
    *out = (int32_t)v->valuedouble;
    return TS_OK;
}

/* Speculative decoding for this request, in llama-server's names: the flat fields
 * "speculative.n_max", "speculative.n_min" and "speculative.p_min", or the object
 * "speculative": {"n_max", "n_min", "p_min"}; "speculative": false is off and true the
 * server's setting. n_max 0 (or false) is off (params.draft_max -1), N > 0 drafts at most N
 * tokens a step (never more than the server's --draft-max). n_min is checked (0..n_max) and
 * kept, but the engine has no per-request minimum: the server's --draft-min applies. p_min (a
 * draft model's confidence threshold) is checked and ignored: n-gram drafts have no
 * probabilities. The output is the same with or without speculation; only the speed changes. */
static ts_status parse_speculative(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    static const char *const keys[3] = {"n_max", "n_min", "p_min"};
    static const char *const flat[3] = {"speculative.n_max", "speculative.n_min",
                                        "speculative.p_min"};
    const cJSON *obj = field(root, "speculative");
    const cJSON *v[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        v[k] = field(root, flat[k]);
        if (v[k] != NULL && obj != NULL) {
            return BAD("speculative",
                       "give either \"speculative\" (an object) or the flat \"%s\", not both",
                       flat[k]);
        }
    }
    if (obj != NULL && cJSON_IsBool(obj)) {
        r->params.draft_max = cJSON_IsFalse(obj) ? -1 : 0;
        return TS_OK;
    }
    if (obj != NULL && !cJSON_IsObject(obj)) {
        return BAD("speculative",
                   "speculative must be an object {\"n_max\": N, \"n_min\": M} or a boolean, "
                   "got %s",
                   ts_api_json_kind(obj));
    }
    for (int k = 0; obj != NULL && k < 3; k++) {
        v[k] = field(obj, keys[k]);
    }
    int32_t n_max = -1, n_min = -1;
    ts_status st = TS_OK;
    if (v[0] != NULL) {
        st = spec_int(v[0], flat[0], true, &n_max, err);
    }
    if (st == TS_OK && v[1] != NULL) {
        st = spec_int(v[1], flat[1], false, &n_min, err);
    }
    if (st == TS_OK && v[2] != NULL &&
        (!cJSON_IsNumber(v[2]) || !isfinite(v[2]->valuedouble) || v[2]->valuedouble < 0 ||
         v[2]->valuedouble > 1)) {
        st = cJSON_IsNumber(v[2]) ? BAD(flat[2], "%s must be a number in [0, 1], got %.17g",
                                        flat[2], v[2]->valuedouble)
                                  : BAD(flat[2], "%s must be a number in [0, 1], got %s", flat[2],
                                        ts_api_json_kind(v[2]));
    }
    if (st == TS_OK && n_max > 0 && n_min > n_max) {
        st = BAD(flat[1], "%s = %d is more than %s = %d", flat[1], (int)n_min, flat[0], (int)n_max);
    }
    if (st == TS_OK && n_max >= 0) {
        r->params.draft_max = n_max == 0 ? -1 : n_max;
    }
    if (st == TS_OK && n_min >= 0) {
        r->spec_n_min = n_min;
    }
    return st;
}

/* Keeps a schema (serialized compactly) or grammar text as the request's constraint. */
static ts_status set_constraint(ts_api_request *r, const char *param, ts_grammar_kind kind,
                                const cJSON *schema, const char *text, ts_api_error *err) {
    if (r->grammar_param != NULL) {
        return BAD(param, "%s and %s cannot both be given: each constrains the whole output",
                   r->grammar_param, param);
    }
    char *copy = schema != NULL ? cJSON_PrintUnformatted(schema) : strdup(text);
    if (copy == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    size_t len = strlen(copy);
    if (len > TS_API_MAX_GRAMMAR) {
        free(copy);
        return BAD(param, "the %s is %zu bytes; at most %d are accepted",
                   kind == TS_GRAMMAR_GBNF ? "grammar" : "schema", len, TS_API_MAX_GRAMMAR);
    }
    r->grammar_text = copy;
    r->grammar_param = param;
    r->params.grammar_kind = kind;
    r->params.grammar = copy;
    r->params.grammar_len = len;
    return TS_OK;
}

/* response_format (OpenAI), and grammar / json_schema (llama-server): what the output must
 * be. The schema or grammar is compiled when the request is submitted; what the compiler
 * refuses becomes a 400 naming this field (ts_handle_generate). */
static ts_status parse_constraint(const cJSON *root, ts_api_request *r, ts_api_error *err) {
    const cJSON *v = field(root, "response_format");
    ts_status st = TS_OK;
    if (v != NULL) {
        const cJSON *t = cJSON_IsObject(v) ? field(v, "type") : NULL;
        if (!cJSON_IsString(t)) {
            return BAD("response_format",
                       "response_format must be an object with a \"type\": \"text\", "
                       "\"json_object\" or \"json_schema\"");
        }
        if (strcmp(t->valuestring, "json_object") == 0) {
            /* llama-server also takes a schema here. */
            const cJSON *sc = field(v, "schema");
            st = sc != NULL
                     ? set_constraint(r, "response_format", TS_GRAMMAR_JSON_SCHEMA, sc, NULL, err)
                     : set_constraint(r, "response_format", TS_GRAMMAR_JSON_OBJECT, NULL, "", err);
        } else if (strcmp(t->valuestring, "json_schema") == 0) {
            const cJSON *js = field(v, "json_schema");
            if (!cJSON_IsObject(js)) {
                return BAD("response_format", "response_format.json_schema must be an object "
                                              "with the schema in \"schema\"");
            }
            const cJSON *name = field(js, "name");
            if (name != NULL && !cJSON_IsString(name)) {
                return BAD("response_format", "response_format.json_schema.name must be a "
                                              "string");
            }
            const cJSON *strict = field(js, "strict");
            if (strict != NULL && !cJSON_IsBool(strict)) {
                return BAD("response_format", "response_format.json_schema.strict must be a "
                                              "boolean");
            }
            const cJSON *sc = field(js, "schema");
            if (sc != NULL && !cJSON_IsObject(sc) && !cJSON_IsBool(sc)) {
                return BAD("response_format",
                           "response_format.json_schema.schema must be a JSON Schema (an "
                           "object), got %s",
                           ts_api_json_kind(sc));
            }
            /* No schema: any JSON object, as OpenAI's json_object mode. */
            st = sc != NULL
                     ? set_constraint(r, "response_format", TS_GRAMMAR_JSON_SCHEMA, sc, NULL, err)
                     : set_constraint(r, "response_format", TS_GRAMMAR_JSON_OBJECT, NULL, "", err);
        } else if (strcmp(t->valuestring, "text") != 0) {
            return BAD("response_format",
                       "response_format.type must be \"text\", \"json_object\" or "
                       "\"json_schema\", got \"%.64s\"",
                       t->valuestring);
        }
    }
    v = field(root, "grammar");
    if (st == TS_OK && v != NULL) {
        if (!cJSON_IsString(v)) {
            return BAD("grammar", "grammar must be a string of GBNF rules, got %s",
                       ts_api_json_kind(v));
        }
        st = set_constraint(r, "grammar", TS_GRAMMAR_GBNF, NULL, v->valuestring, err);
    }
    v = field(root, "json_schema");
    if (st == TS_OK && v != NULL) {
        if (!cJSON_IsObject(v) && !cJSON_IsBool(v)) {
            return BAD("json_schema", "json_schema must be a JSON Schema (an object), got %s",
                       ts_api_json_kind(v));
        }
        st = set_constraint(r, "json_schema", TS_GRAMMAR_JSON_SCHEMA, v, NULL, err);
    }
    return st;
}

static ts_status parse_generation(const cJSON *root, const ts_api_limits *lim, ts_api_request *r,
                                  ts_api_error *err) {
    ts_request_params *p = &r->params;
    ts_sampler_params *s = &p->sampling;
    int64_t v = 0;
    bool set = false, set2 = false;
    ts_status st = get_int(root, "max_tokens", 1, lim->n_ctx, &v, &set, err);
    if (st == TS_OK && set) {
        p->max_tokens = (int32_t)v;
    }
    if (st == TS_OK) {
        st = get_int(root, "max_completion_tokens", 1, lim->n_ctx, &v, &set2, err);
        if (set2) {
            p->max_tokens = (int32_t)v;
        }
    }
    r->max_tokens_set = set || set2;
    if (st == TS_OK) {
        st = get_float(root, "temperature", 0, 2, false, &s->temperature, err);
    }
    if (st == TS_OK) {
        st = get_float(root, "top_p", 0, 1, true, &s->top_p, err);
    }
    if (st == TS_OK) {
        st = get_int(root, "top_k", -1, INT32_MAX, &v, &set, err);
        if (set) {
            s->top_k = v < 0 ? 0 : (int32_t)v; /* -1 means off, as in vLLM */
        }
    }
    if (st == TS_OK) {
        st = get_float(root, "min_p", 0, 1, false, &s->min_p, err);
    }
    if (st == TS_OK) {
        st = get_float(root, "presence_penalty", -2, 2, false, &s->presence_penalty, err);
    }
    if (st == TS_OK) {
        st = get_float(root, "frequency_penalty", -2, 2, false, &s->frequency_penalty, err);
    }
    if (st == TS_OK) {
        st = get_float(root, "repetition_penalty", 0, 10, true, &s->repetition_penalty, err);
    }
    if (st == TS_OK) {
        /* Integers up to 2^63 are accepted; doubles past 2^53 lose low bits, as in every
         * JSON client. */
        st = get_int(root, "seed", INT64_MIN, INT64_MAX, &v, &p->has_seed, err);
        p->seed = (uint64_t)v;
    }
    if (st == TS_OK) {
        st = get_int(root, "n", 1, lim->max_n, &v, &set, err);
        if (set) {
            p->n = (int32_t)v;
        }
    }
    if (st == TS_OK) {
        st = get_bool(root, "ignore_eos", &p->ignore_eos, err);
    }
    if (st == TS_OK) {
        st = get_bool(root, "stream", &r->stream, err);
    }
    const cJSON *so = field(root, "stream_options");
    if (st == TS_OK && so != NULL) {
        if (!cJSON_IsObject(so)) {
            st = BAD("stream_options", "stream_options must be an object, got %s",
                     ts_api_json_kind(so));
        } else if (!r->stream) {
            st = BAD("stream_options", "stream_options is only allowed with stream: true");
        } else {
            st = get_bool(so, "include_usage", &r->include_usage, err);
            if (st != TS_OK) {
                snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            }
        }
    }
    if (st == TS_OK) {
        st = get_string(root, "user", &r->user, err);
    }
    if (st == TS_OK) {
        st = parse_stop(root, r, err);
    }
    if (st == TS_OK) {
        st = parse_logit_bias(root, lim, r, err);
    }
    if (st == TS_OK) {
        st = parse_logprobs(root, r, err);
    }
    if (st == TS_OK) {
        st = reject_unsupported(root, r, err);
    }
    if (st == TS_OK) {
        st = parse_speculative(root, r, err);
    }
    if (st == TS_OK) {
        st = parse_constraint(root, r, err);
    }
    return st;
}

static ts_status parse_body(ts_api_kind kind, const char *body, size_t len, const cJSON *root,
                            const ts_api_limits *lim, ts_api_request *r, ts_api_error *err) {
    ts_status st = parse_model(root, lim, err);
    if (st != TS_OK) {
        return st;
    }
    switch (kind) {
    case TS_API_COMPLETIONS:
        r->params.max_tokens = 16; /* OpenAI's default for completions */
        st = parse_prompt(root, lim, r, err);
        return st == TS_OK ? parse_generation(root, lim, r, err) : st;
    case TS_API_CHAT:
        st = parse_messages(root, r, err);
        st = st == TS_OK ? ts_api_parse_chat(root, body, len, lim, r, err) : st;
        return st == TS_OK ? parse_generation(root, lim, r, err) : st;
    case TS_API_TOKENIZE:
        if (field(root, "messages") != NULL) {
            st = parse_messages(root, r, err);
            if (st == TS_OK) {
                st = ts_api_parse_chat(root, body, len, lim, r, err);
            }
        } else {
            st = parse_prompt(root, lim, r, err);
            if (st == TS_OK && (r->n_prompts != 1 || r->prompts[0].text == NULL)) {
                st = BAD("prompt", "prompt must be one string for /tokenize");
            }
        }
        return st == TS_OK ? get_bool(root, "add_special_tokens", &r->add_special_tokens, err) : st;
    case TS_API_EMBEDDINGS:
        return ts_api_parse_embeddings(root, lim, r, err);
    case TS_API_DETOKENIZE: {
        const cJSON *t = field(root, "tokens");
        if (t == NULL) {
            return BAD("tokens", "tokens is required");
        }
        if (!cJSON_IsArray(t)) {
            return BAD("tokens", "tokens must be an array of token ids, got %s",
                       ts_api_json_kind(t));
        }
        if (cJSON_GetArraySize(t) == 0) {
            return TS_OK;
        }
        return get_ids(t, "tokens", lim->n_vocab, &r->tokens, &r->n_tokens, err);
    }
    }
    return BAD(NULL, "unknown request kind");
}

ts_status ts_api_parse(ts_api_kind kind, const char *body, size_t len, const ts_api_limits *limits,
                       ts_api_request *out, ts_api_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->params = ts_request_params_default();
    out->add_generation_prompt = true;
    out->add_special_tokens = true;
    out->spec_n_min = -1;
    cJSON *root = ts_api_parse_body(body, len, err);
    if (root == NULL) {
        return TS_ERR_INVALID_ARG;
    }
    out->root = root;
    ts_status st = parse_body(kind, body, len, root, limits, out, err);
    if (st != TS_OK) {
        ts_api_request_free(out);
    }
    return st;
}

void ts_api_request_free(ts_api_request *r) {
    if (r == NULL) {
        return;
    }
    for (int32_t i = 0; i < TS_API_MAX_PROMPTS; i++) {
        free(r->prompts[i].ids);
    }
    if (r->owned_texts != NULL) {
        for (int32_t i = 0; i < r->n_messages; i++) {
            free(r->owned_texts[i]);
        }
    }
    for (int32_t i = 0; r->inputs != NULL && i < r->n_inputs; i++) {
        free(r->inputs[i].ids);
    }
    free(r->inputs);
    free(r->owned_texts);
    free(r->messages);
    free(r->chat_json);
    free(r->tokens);
    free(r->bias);
    free(r->grammar_text);
    cJSON_Delete(r->root);
    memset(r, 0, sizeof *r);
}
