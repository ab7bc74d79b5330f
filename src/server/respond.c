/* respond.c — pieces of response bodies: ids, token strings, logprobs, usage, JSON replies. */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ts_server_make_id(ts_server *s, const char *prefix, char *buf, size_t size) {
    uint64_t x = s->id_salt + atomic_fetch_add(&s->id_counter, 1) * 0x9E3779B97F4A7C15ull;
    /* splitmix64 finaliser: ids look random but never repeat within a server's life */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    snprintf(buf, size, "%s-%016llx%08llx", prefix, (unsigned long long)x,
             (unsigned long long)(atomic_load(&s->id_counter) & 0xffffffffu));
}

cJSON *ts_server_token_string(const ts_llm *llm, int32_t token, cJSON **bytes_out) {
    const char *piece = "";
    size_t len = 0;
    ts_error e = {0};
    /* Ids come from the context's own sampler, so a failure here would be a bug elsewhere;
     * the entry then shows an empty token rather than failing the whole response. */
    if (ts_llm_token_to_piece(llm, token, 1, &piece, &len, &e) != TS_OK) {
        piece = "", len = 0;
    }
    /* Pieces of byte-level vocabularies can hold part of a character; JSON strings cannot. */
    char *clean = malloc(len * 3 + 1);
    if (clean == NULL) {
        return NULL;
    }
    size_t at = 0, i = 0;
    while (i < len) {
        size_t ok = ts_api_utf8_check(piece + i, len - i);
        memcpy(clean + at, piece + i, ok);
        at += ok;
        i += ok;
        if (i < len) {
            memcpy(clean + at, "\xEF\xBF\xBD", 3);
            at += 3;
            i++;
        }
    }
    clean[at] = '\0';
    cJSON *str = cJSON_CreateString(clean);
    free(clean);
    if (bytes_out != NULL) {
        cJSON *bytes = cJSON_CreateArray();
        for (size_t k = 0; k < len && bytes != NULL; k++) {
            cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[k]));
        }
        *bytes_out = bytes;
    }
    return str;
}

static cJSON *chat_top_entry(const ts_llm *llm, int32_t token, double logprob) {
    cJSON *o = cJSON_CreateObject();
    cJSON *bytes = NULL;
    cJSON_AddItemToObject(o, "token", ts_server_token_string(llm, token, &bytes));
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON_AddItemToObject(o, "bytes", bytes);
    return o;
}

cJSON *ts_server_chat_logprob(const ts_llm *llm, const ts_sample_info *info) {
    cJSON *o = chat_top_entry(llm, info->token, info->logprob);
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int32_t i = 0; i < info->n_top && top != NULL; i++) {
        cJSON_AddItemToArray(top, chat_top_entry(llm, info->top[i].token, info->top[i].logprob));
    }
    return o;
}

cJSON *ts_server_cmpl_logprobs_new(void) {
    cJSON *lp = cJSON_CreateObject();
    cJSON_AddArrayToObject(lp, "tokens");
    cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON_AddArrayToObject(lp, "top_logprobs");
    cJSON_AddArrayToObject(lp, "text_offset");
    return lp;
}

void ts_server_cmpl_logprobs_add(cJSON *lp, const ts_llm *llm, const ts_sample_info *info,
                                 size_t text_offset) {
    if (lp == NULL) {
        return;
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"),
                         ts_server_token_string(llm, info->token, NULL));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "token_logprobs"),
                         cJSON_CreateNumber(info->logprob));
    cJSON *top = cJSON_CreateObject();
    for (int32_t i = 0; i < info->n_top && top != NULL; i++) {
        cJSON *name = ts_server_token_string(llm, info->top[i].token, NULL);
        if (name != NULL && cJSON_GetObjectItemCaseSensitive(top, name->valuestring) == NULL) {
            cJSON_AddNumberToObject(top, name->valuestring, info->top[i].logprob);
        }
        cJSON_Delete(name);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), top);
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"),
                         cJSON_CreateNumber((double)text_offset));
}

cJSON *ts_server_usage(uint64_t prompt, uint64_t completion, uint64_t cached) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + completion));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    if (d != NULL) {
        cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
    }
    return u;
}

ts_reply ts_reply_json(int status, char *text) {
    ts_reply r = {.status = status};
    if (text == NULL) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        r.status = 500;
        r.response =
            MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    } else {
        r.response = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (r.response == NULL) {
            free(text);
        }
    }
    if (r.response != NULL) {
        MHD_add_response_header(r.response, "Content-Type", "application/json");
    }
    return r;
}

ts_reply ts_reply_error(const ts_api_error *err) {
    return ts_reply_error_in(&ts_dialect_openai_chat, err);
}

ts_reply ts_reply_error_in(const ts_dialect *d, const ts_api_error *err) {
    ts_reply r = ts_reply_json(err->status, d->error_json(err));
    if (r.response != NULL && err->status == 503) {
        MHD_add_response_header(r.response, "Retry-After", "1");
    }
    if (r.response != NULL && err->status == 401) {
        MHD_add_response_header(r.response, "WWW-Authenticate", "Bearer");
    }
    return r;
}
