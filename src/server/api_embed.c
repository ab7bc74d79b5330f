/*
 * api_embed.c — the body of POST /v1/embeddings (OpenAI's embeddings API):
 *
 *   {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...],
 *    "model": "...", "encoding_format": "float" | "base64", "dimensions": N, "user": "..."}
 *
 * Every input must be non-empty (OpenAI refuses empty strings too); at most
 * TS_API_MAX_EMBED_INPUTS of them; token ids must lie in the vocabulary. dimensions, when
 * given, must equal the model's vector size: these models' vectors cannot be shortened
 * without changing what they mean.
 */
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

#define BAD(param, ...)                                                                            \
    ts_api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

static bool is_id(const cJSON *v, int32_t n_vocab) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < n_vocab &&
           v->valuedouble == (double)(int32_t)v->valuedouble;
}

/* Token ids of array a into *p (owned). */
static ts_status take_ids(const cJSON *a, const char *where, int32_t n_vocab, ts_api_prompt *p,
                          ts_api_error *err) {
    int n = cJSON_GetArraySize(a);
    if (n == 0) {
        return BAD("input", "%s is an empty array of token ids", where);
    }
    p->ids = malloc((size_t)n * sizeof *p->ids);
    if (p->ids == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    int k = 0;
    for (const cJSON *v = a->child; v != NULL; v = v->next, k++) {
        if (cJSON_IsNumber(v) && !is_id(v, n_vocab)) {
            return BAD("input", "%s[%d] must be a token id (an integer in [0, %d)), got %.17g",
                       where, k, n_vocab, v->valuedouble);
        }
        if (!is_id(v, n_vocab)) {
            return BAD("input", "%s[%d] must be a token id (an integer in [0, %d)), got %s", where,
                       k, n_vocab, ts_api_json_kind(v));
        }
        p->ids[k] = (int32_t)v->valuedouble;
    }
    p->n_ids = n;
    return TS_OK;
}

static ts_status parse_input(const cJSON *in, const ts_api_limits *lim, ts_api_request *r,
                             ts_api_error *err) {
    if (in == NULL) {
        return BAD("input", "input is required");
    }
    const char *shape = "input must be a string, an array of strings, an array of token ids or "
                        "an array of arrays of token ids, got %s";
    if (!cJSON_IsString(in) && !cJSON_IsArray(in)) {
        return BAD("input", shape, ts_api_json_kind(in));
    }
    int n = cJSON_IsString(in) ? 1 : cJSON_GetArraySize(in);
    if (n == 0) {
        return BAD("input", "input is an empty array (give at least one string or token list)");
    }
    bool ids = cJSON_IsArray(in) && cJSON_IsNumber(in->child);
    if (ids) {
        n = 1; /* one input given as token ids */
    }
    if (n > TS_API_MAX_EMBED_INPUTS) {
        return BAD("input", "input has %d entries; at most %d are allowed", n,
                   TS_API_MAX_EMBED_INPUTS);
    }
    r->inputs = calloc((size_t)n, sizeof *r->inputs);
    if (r->inputs == NULL) {
        return ts_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    r->n_inputs = n;
    if (cJSON_IsString(in)) {
        r->inputs[0].text = in->valuestring;
        return in->valuestring[0] != '\0' ? TS_OK : BAD("input", "input is an empty string");
    }
    if (ids) {
        return take_ids(in, "input", lim->n_vocab, &r->inputs[0], err);
    }
    int k = 0;
    char where[32];
    for (const cJSON *v = in->child; v != NULL; v = v->next, k++) {
        snprintf(where, sizeof where, "input[%d]", k);
        if (cJSON_IsString(v)) {
            if (v->valuestring[0] == '\0') {
                return BAD("input", "%s is an empty string", where);
            }
            r->inputs[k].text = v->valuestring;
        } else if (cJSON_IsArray(v)) {
            ts_status st = take_ids(v, where, lim->n_vocab, &r->inputs[k], err);
            if (st != TS_OK) {
                return st;
            }
        } else {
            return BAD("input", "%s must be a string or an array of token ids, got %s", where,
                       ts_api_json_kind(v));
        }
    }
    return TS_OK;
}

ts_status ts_api_parse_embeddings(const cJSON *root, const ts_api_limits *lim, ts_api_request *r,
                                  ts_api_error *err) {
    ts_status st = parse_input(cJSON_GetObjectItemCaseSensitive(root, "input"), lim, r, err);
    if (st != TS_OK) {
        return st;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (f != NULL && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f) ||
            (strcmp(f->valuestring, "float") != 0 && strcmp(f->valuestring, "base64") != 0)) {
            return BAD("encoding_format", "encoding_format must be \"float\" or \"base64\"");
        }
        r->base64 = strcmp(f->valuestring, "base64") == 0;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (d != NULL && !cJSON_IsNull(d)) {
        if (!cJSON_IsNumber(d) || d->valuedouble != (double)lim->n_embd) {
            return BAD("dimensions",
                       "dimensions must be %lld, this model's vector size (its vectors cannot be "
                       "shortened)",
                       (long long)lim->n_embd);
        }
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (u != NULL && !cJSON_IsNull(u) && !cJSON_IsString(u)) {
        return BAD("user", "user must be a string, got %s", ts_api_json_kind(u));
    }
    return TS_OK;
}
