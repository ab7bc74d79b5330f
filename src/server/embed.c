/*
 * embed.c — POST /v1/embeddings.
 *
 * The HTTP thread parses the body (api_embed.c), tokenizes text inputs (the model's special
 * tokens: BERT's [CLS] ... [SEP]; special-token text stays plain text), checks each input's
 * length, then hands the token lists to the engine thread as a job and waits. The engine thread
 * runs queued jobs between steps through ts_context_embed (the model's pooling, L2-normalised:
 * what OpenAI's embeddings are), so the vectors of a decoder model are computed beside its
 * running requests. A job that finds the KV cache full while requests hold it waits for the
 * next step; one that can never fit fails with 400.
 *
 * Answer: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
 * [floats] or base64 of little-endian float32}], "model", "usage": {"prompt_tokens",
 * "total_tokens"}}.
 */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void finish(ts_server *s, ts_embed_job *j, ts_status st, const char *msg) {
    j->status = st;
    snprintf(j->message, sizeof j->message, "%s", msg);
    pthread_mutex_lock(&s->mu);
    j->done = true;
    pthread_cond_broadcast(&s->embed_cv);
    pthread_mutex_unlock(&s->mu);
}

void ts_server_run_embed_jobs(ts_server *s, bool stop) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        ts_embed_job *j = s->embed_head;
        if (j != NULL) {
            s->embed_head = j->next;
            if (s->embed_head == NULL) {
                s->embed_tail = NULL;
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (j == NULL) {
            return;
        }
        if (stop) {
            finish(s, j, TS_ERR_ABORTED, "the server is shutting down");
            continue;
        }
        ts_error err = {0};
        ts_embed_params p = ts_embed_params_default();
        ts_status st = ts_context_embed(s->ctx, j->inputs, j->lens, j->n, &p, j->out, &err);
        if (st == TS_ERR_LIMIT && ts_context_has_work(s->ctx)) {
            /* Running requests hold the blocks: put it back in front, retry after a step. */
            pthread_mutex_lock(&s->mu);
            j->next = s->embed_head;
            s->embed_head = j;
            if (s->embed_tail == NULL) {
                s->embed_tail = j;
            }
            pthread_mutex_unlock(&s->mu);
            return;
        }
        finish(s, j, st, err.msg);
    }
}

/* Queues j for the engine thread and waits until it is done. */
static ts_status run_job(ts_server *s, ts_embed_job *j) {
    pthread_mutex_lock(&s->mu);
    if (s->draining) {
        pthread_mutex_unlock(&s->mu);
        return TS_ERR_ABORTED;
    }
    j->next = NULL;
    if (s->embed_tail != NULL) {
        s->embed_tail->next = j;
    } else {
        s->embed_head = j;
    }
    s->embed_tail = j;
    pthread_mutex_unlock(&s->mu);
    ts_context_wake(s->ctx);
    pthread_mutex_lock(&s->mu);
    while (!j->done) {
        pthread_cond_wait(&s->embed_cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return j->status;
}

static char *base64_floats(const float *v, int64_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t bytes = (size_t)n * 4;
    unsigned char *raw = malloc(bytes);
    char *out = malloc((bytes + 2) / 3 * 4 + 1);
    if (raw == NULL || out == NULL) {
        free(raw);
        free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) { /* little-endian float32, as numpy's '<f4' */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int b = 0; b < 4; b++) {
            raw[i * 4 + b] = (unsigned char)(u >> (8 * b));
        }
    }
    size_t o = 0;
    for (size_t i = 0; i < bytes; i += 3) {
        uint32_t w = (uint32_t)raw[i] << 16;
        w |= i + 1 < bytes ? (uint32_t)raw[i + 1] << 8 : 0;
        w |= i + 2 < bytes ? raw[i + 2] : 0;
        out[o++] = tab[(w >> 18) & 63];
        out[o++] = tab[(w >> 12) & 63];
        out[o++] = i + 1 < bytes ? tab[(w >> 6) & 63] : '=';
        out[o++] = i + 2 < bytes ? tab[w & 63] : '=';
    }
    out[o] = '\0';
    free(raw);
    return out;
}

static ts_reply answer(ts_server *s, const ts_api_request *r, const float *out, uint64_t n_tokens) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    bool ok = data != NULL;
    for (int32_t i = 0; ok && i < r->n_inputs; i++) {
        const float *v = out + (size_t)i * (size_t)s->n_embd;
        cJSON *e = cJSON_CreateObject();
        ok = e != NULL && cJSON_AddItemToArray(data, e);
        if (ok) {
            cJSON_AddStringToObject(e, "object", "embedding");
            cJSON_AddNumberToObject(e, "index", i);
        }
        if (ok && r->base64) {
            char *b = base64_floats(v, s->n_embd);
            ok = b != NULL && cJSON_AddStringToObject(e, "embedding", b) != NULL;
            free(b);
        } else if (ok) {
            cJSON *a = cJSON_AddArrayToObject(e, "embedding");
            for (int64_t k = 0; ok && k < s->n_embd; k++) {
                cJSON *x = cJSON_CreateNumber((double)v[k]);
                ok = a != NULL && x != NULL && cJSON_AddItemToArray(a, x);
            }
        }
    }
    cJSON_AddStringToObject(root, "model", s->model_name);
    cJSON *usage = cJSON_AddObjectToObject(root, "usage");
    if (usage != NULL) {
        cJSON_AddNumberToObject(usage, "prompt_tokens", (double)n_tokens);
        cJSON_AddNumberToObject(usage, "total_tokens", (double)n_tokens);
    }
    char *text = ok && usage != NULL ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) {
        ts_api_error e;
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return ts_reply_error(&e);
    }
    return ts_reply_json(200, text);
}

ts_reply ts_handle_embeddings(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                              int sock) {
    (void)ep;
    (void)sock;
    ts_api_limits lim = ts_server_limits(s);
    ts_api_request r;
    ts_api_error e;
    if (ts_api_parse(TS_API_EMBEDDINGS, body, len, &lim, &r, &e) != TS_OK) {
        return ts_reply_error(&e);
    }
    int32_t n = r.n_inputs;
    const int32_t **ids = calloc((size_t)n, sizeof *ids);
    int32_t **owned = calloc((size_t)n, sizeof *owned);
    int32_t *lens = calloc((size_t)n, sizeof *lens);
    float *out = malloc((size_t)n * (size_t)s->n_embd * sizeof *out);
    ts_status st = ids && owned && lens && out
                       ? TS_OK
                       : ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    uint64_t n_tokens = 0;
    for (int32_t i = 0; st == TS_OK && i < n; i++) {
        if (r.inputs[i].text != NULL) {
            size_t got = 0;
            ts_error err = {0};
            if (ts_llm_tokenize(s->llm, r.inputs[i].text, strlen(r.inputs[i].text), 1, 0, &owned[i],
                                &got, &err) != TS_OK) {
                st = ts_api_error_set(&e, 400, "invalid_request_error", "input", NULL,
                                      "cannot tokenize input[%d]: %s", i, err.msg);
                break;
            }
            ids[i] = owned[i];
            lens[i] = got > (size_t)INT32_MAX ? INT32_MAX : (int32_t)got;
        } else {
            ids[i] = r.inputs[i].ids;
            lens[i] = r.inputs[i].n_ids;
        }
        if (lens[i] > s->embed_max_tokens) {
            st = ts_api_error_set(&e, 400, "invalid_request_error", "input",
                                  "context_length_exceeded",
                                  "input[%d] has %d tokens; this model embeds at most %lld tokens "
                                  "per input",
                                  i, lens[i], (long long)s->embed_max_tokens);
        }
        n_tokens += (uint64_t)lens[i];
    }
    if (st == TS_OK) {
        ts_embed_job j = {.inputs = ids, .lens = lens, .n = n, .out = out};
        st = run_job(s, &j);
        if (st == TS_ERR_ABORTED) {
            ts_api_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
        } else if (st == TS_ERR_LIMIT || st == TS_ERR_RANGE || st == TS_ERR_INVALID_ARG) {
            ts_api_error_set(&e, 400, "invalid_request_error", "input", NULL, "%s", j.message);
        } else if (st != TS_OK) {
            ts_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", j.message);
        }
    }
    ts_reply reply = st == TS_OK ? answer(s, &r, out, n_tokens) : ts_reply_error(&e);
    for (int32_t i = 0; owned != NULL && i < n; i++) {
        ts_free(owned[i]);
    }
    free(owned);
    free(ids);
    free(lens);
    free(out);
    ts_api_request_free(&r);
    return reply;
}
