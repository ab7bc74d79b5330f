/*
 * handlers.c — generation requests (validation, admission, the non-streaming answer) and
 * /tokenize, /detokenize.
 *
 * Order of checks for a generation request: body (400/404), chat template present (400),
 * prompt + max_tokens within the context (400 context_length_exceeded, with the counts),
 * admission (503 with Retry-After), then the context's own checks at submit (400 when the KV
 * cache could never hold the request). Only then is anything queued.
 */
#define _GNU_SOURCE /* strcasestr */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ts_api_limits ts_server_limits(const ts_server *s) {
    ts_api_limits lim = {
        .n_vocab = s->n_vocab,
        .n_ctx = s->n_ctx,
        .max_n = s->max_seqs < 16 ? (int32_t)s->max_seqs : 16,
        .model_name = s->model_name,
        .n_embd = s->n_embd,
    };
    ts_chat_profile profile;
    ts_context_chat_profile(s->ctx, &profile);
    lim.tools_in_template = profile.renders_tools;
    lim.caps = s->chat_caps;
    return lim;
}

ts_status ts_server_prompt_ids(ts_server *s, const ts_api_request *r, int32_t k, ts_req_cancel *rc,
                               const int32_t **ids, int32_t *n_ids, int32_t **owned,
                               ts_api_error *err) {
    *ids = NULL;
    *n_ids = 0;
    *owned = NULL;
    const char *text = NULL;
    char *rendered = NULL;
    size_t len = 0;
    bool reserved = false;
    ts_error e = {0};
    if (r->kind == TS_API_CHAT || (r->kind == TS_API_TOKENIZE && r->n_messages > 0)) {
        ts_status st = ts_server_render(s, r, rc, &rendered, &len, &reserved, err);
        if (st != TS_OK) {
            return st;
        }
        text = rendered;
    } else if (r->prompts[k].text != NULL) {
        text = r->prompts[k].text;
        len = strlen(text);
    } else {
        *ids = r->prompts[k].ids;
        *n_ids = r->prompts[k].n_ids;
        return TS_OK;
    }
    /* No token's text is longer than max_token_bytes, so a text far longer than n_ctx of
     * them cannot fit the context: refused before tokenizing what a template may have made
     * huge (with a margin of 4 for normalizers that shorten text, e.g. NFKC's ligatures). */
    if (r->kind != TS_API_TOKENIZE && len / 4 / s->max_token_bytes > (size_t)s->n_ctx) {
        ts_free(rendered);
        if (reserved) {
            ts_server_render_release(s);
        }
        const char *what = r->kind == TS_API_CHAT ? "messages" : "prompt";
        return ts_api_error_set(err, 400, "invalid_request_error", what, "context_length_exceeded",
                                "This model's maximum context length is %lld tokens. However, "
                                "your %s is %zu bytes long%s, more than that many tokens can "
                                "hold.",
                                (long long)s->n_ctx, what, len,
                                r->kind == TS_API_CHAT ? " once rendered" : "");
    }
    int32_t *out = NULL;
    size_t n = 0;
    ts_status st = ts_llm_tokenize(s->llm, text, len, r->add_special_tokens, 1, &out, &n, &e);
    ts_free(rendered);
    if (reserved) {
        ts_server_render_release(s);
    }
    if (st != TS_OK) {
        return ts_api_error_set(err, 400, "invalid_request_error",
                                r->kind == TS_API_CHAT ? "messages" : "prompt", NULL,
                                "cannot tokenize the prompt: %s", e.msg);
    }
    if (n > (size_t)INT32_MAX) {
        ts_free(out);
        return ts_api_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                                "the prompt is too long (%zu tokens)", n);
    }
    *ids = out;
    *n_ids = (int32_t)n;
    *owned = out;
    return TS_OK;
}

typedef struct choice_acc {
    char *text;
    size_t len, cap;
    ts_finish_reason finish;
    int32_t completion_tokens;
    cJSON *logprobs; /* chat: array (logprobs.content); completions: object */
} choice_acc;

static bool acc_append(choice_acc *c, const char *t, size_t n) {
    if (c->len + n + 1 > c->cap) {
        size_t cap = (c->len + n + 1) * 2;
        char *p = realloc(c->text, cap);
        if (p == NULL) {
            return false;
        }
        c->text = p;
        c->cap = cap;
    }
    memcpy(c->text + c->len, t, n);
    c->len += n;
    c->text[c->len] = '\0';
    return true;
}

/* Waits for the whole answer and has d write it. */
static ts_reply collect(ts_server *s, ts_job *j, const ts_dialect *d, const ts_api_request *r,
                        const ts_chat_out_config *chat_cfg, uint64_t prompt_tokens, int sock) {
    int32_t n_choices = j->n_subs * j->n_per;
    choice_acc *acc = calloc((size_t)n_choices, sizeof *acc);
    ts_answer_choice *ch = calloc((size_t)n_choices, sizeof *ch);
    ts_api_error e;
    if (acc == NULL || ch == NULL) {
        free(acc);
        free(ch);
        ts_job_release(j);
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return ts_reply_error_in(d, &e);
    }
    for (int32_t i = 0; i < n_choices; i++) {
        ch[i].stop_index = -1;
    }
    uint64_t cached_sub[TS_API_MAX_PROMPTS] = {0};
    char error[TS_ERROR_MSG_MAX] = "";
    bool oom = false, gone = false;
    for (;;) {
        bool done = false;
        ts_job_event *evs = ts_job_take(j, &done);
        for (ts_job_event *ev = evs; ev != NULL; ev = ev->next) {
            choice_acc *c = &acc[ev->choice];
            oom |= !acc_append(c, ev->text, ev->text_len);
            if (ev->has_logprobs && ev->token >= 0) {
                if (c->logprobs == NULL) {
                    c->logprobs = r->kind == TS_API_CHAT ? cJSON_CreateArray()
                                                         : ts_server_cmpl_logprobs_new();
                }
                if (r->kind == TS_API_CHAT) {
                    cJSON_AddItemToArray(c->logprobs,
                                         ts_server_chat_logprob(s->llm, &ev->logprobs));
                } else {
                    ts_server_cmpl_logprobs_add(c->logprobs, s->llm, &ev->logprobs,
                                                c->len - ev->text_len);
                }
            }
            if (ev->finish != TS_FINISH_NONE) {
                c->finish = ev->finish;
                c->completion_tokens = ev->completion_tokens;
                ch[ev->choice].stop_index = ev->stop_index;
                if (ev->finish == TS_FINISH_ERROR && error[0] == '\0') {
                    snprintf(error, sizeof error, "%s",
                             ev->message ? ev->message : "generation failed");
                }
            }
            cached_sub[ev->choice / j->n_per] = (uint64_t)ev->cached_tokens;
        }
        ts_job_events_free(evs);
        if (done) {
            break;
        }
        if (ts_job_wait(j, sock, 1000) < 0) {
            gone = true; /* the client left: abort, and tell MHD to drop the connection */
            break;
        }
    }
    bool shutdown = !gone && ts_job_was_shutdown(j);
    ts_job_release(j);
    uint64_t cached = 0;
    for (int32_t k = 0; k < TS_API_MAX_PROMPTS; k++) {
        cached += cached_sub[k];
    }
    cJSON *root = NULL;
    bool failed = true;
    if (gone) {
        e.status = 499;
    } else if (shutdown) {
        ts_api_error_set(&e, 503, "server_error", NULL, "server_shutdown",
                         "the server shut down before the request finished");
    } else if (strncmp(error, TS_GRAMMAR_LIMIT_PREFIX, strlen(TS_GRAMMAR_LIMIT_PREFIX)) == 0) {
        /* The request's grammar or schema, not the server: the client's to change. */
        ts_api_error_set(&e, 400, "invalid_request_error", r->grammar_param, NULL, "%s", error);
    } else if (error[0] != '\0') {
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "generation failed: %s", error);
    } else if (oom) {
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    } else {
        failed = false;
    }
    ts_answer a = {.r = r,
                   .n_choices = n_choices,
                   .choices = ch,
                   .prompt_tokens = prompt_tokens,
                   .cached_tokens = cached};
    for (int32_t i = 0; !failed && i < n_choices; i++) {
        choice_acc *c = &acc[i];
        ch[i].text = c->text != NULL ? c->text : "";
        ch[i].len = c->len;
        ch[i].finish = c->finish;
        ch[i].completion_tokens = c->completion_tokens;
        ch[i].logprobs = c->logprobs;
        c->logprobs = NULL; /* now the answer's */
        a.completion_tokens += (uint64_t)c->completion_tokens;
        if (chat_cfg != NULL && ts_chat_out_active(chat_cfg)) {
            /* The same parser a stream uses, fed the whole answer at once. */
            ts_chat_out_config cc = *chat_cfg;
            cc.id_seed += (uint64_t)i * TS_CHAT_OUT_CHOICE_SEED; /* ids differ per choice */
            ch[i].parsed = ts_chat_out_create(&cc);
            if (ch[i].parsed == NULL ||
                ts_chat_out_feed(ch[i].parsed, ch[i].text, c->len) != TS_OK ||
                ts_chat_out_finish(ch[i].parsed) != TS_OK) {
                oom = true;
            }
        }
    }
    if (!failed && !oom) {
        root = d->answer_json(s, &a);
    }
    if (!failed && root == NULL) {
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    }
    for (int32_t i = 0; i < n_choices; i++) {
        free(acc[i].text);
        cJSON_Delete(acc[i].logprobs);
        cJSON_Delete(ch[i].logprobs);
        ts_chat_out_destroy(ch[i].parsed);
    }
    free(acc);
    free(ch);
    if (gone) {
        return (ts_reply){.status = 499, .response = NULL};
    }
    if (root == NULL) {
        return ts_reply_error_in(d, &e);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return ts_reply_json(200, text);
}

cJSON *ts_openai_answer_json(ts_server *s, ts_answer *a) {
    const ts_api_request *r = a->r;
    bool chat = r->kind == TS_API_CHAT;
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        return NULL;
    }
    char id[64];
    ts_server_make_id(s, chat ? "chatcmpl" : "cmpl", id, sizeof id);
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)time(NULL));
    cJSON_AddStringToObject(root, "model", s->model_name);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    bool oom = choices == NULL;
    for (int32_t i = 0; i < a->n_choices && !oom; i++) {
        ts_answer_choice *c = &a->choices[i];
        cJSON *ch = cJSON_CreateObject();
        if (ch == NULL || !cJSON_AddItemToArray(choices, ch)) {
            cJSON_Delete(ch);
            oom = true;
            break;
        }
        cJSON_AddNumberToObject(ch, "index", i);
        const char *finish = ts_finish_reason_name(c->finish);
        if (chat && c->parsed != NULL) {
            cJSON *msg = ts_chat_out_message_json(c->parsed);
            if (ts_chat_out_tool_finish(c->parsed, c->finish)) {
                finish = "tool_calls";
            }
            oom |= msg == NULL;
            cJSON_AddItemToObject(ch, "message", msg);
        } else if (chat) {
            cJSON *msg = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            cJSON_AddStringToObject(msg, "content", c->text);
        }
        if (chat) {
            if (c->logprobs != NULL) {
                cJSON *lp = cJSON_AddObjectToObject(ch, "logprobs");
                cJSON_AddItemToObject(lp, "content", c->logprobs);
            } else {
                cJSON_AddNullToObject(ch, "logprobs");
            }
        } else {
            cJSON_AddStringToObject(ch, "text", c->text);
            if (c->logprobs != NULL) {
                cJSON_AddItemToObject(ch, "logprobs", c->logprobs);
            } else {
                cJSON_AddNullToObject(ch, "logprobs");
            }
        }
        c->logprobs = NULL; /* now owned by root */
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    }
    cJSON_AddItemToObject(
        root, "usage", ts_server_usage(a->prompt_tokens, a->completion_tokens, a->cached_tokens));
    if (oom) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Whether a submit error is the grammar compiler's: its messages name the grammar, the schema
 * or the compile (or start with "json" / "gbnf"), and only a constrained request compiles one;
 * a compile stopped by its time limit is TS_ERR_LIMIT like a context overflow, told apart by
 * that message. */
static bool grammar_error(const ts_api_request *r, ts_status st, const ts_error *err) {
    return r->grammar_param != NULL &&
           (st == TS_ERR_FORMAT || st == TS_ERR_UNSUPPORTED || st == TS_ERR_LIMIT ||
            st == TS_ERR_RANGE || st == TS_ERR_INVALID_ARG) &&
           (strncasecmp(err->msg, "json", 4) == 0 || strncasecmp(err->msg, "gbnf", 4) == 0 ||
            strcasestr(err->msg, "grammar") != NULL || strcasestr(err->msg, "schema") != NULL ||
            strcasestr(err->msg, "compile") != NULL);
}

/* A refusal from ts_context_submit. A compile stopped by the request's cancel is the server
 * shutting down (503) or the client gone (499: nothing is sent). */
static ts_reply submit_error(ts_server *s, const ts_dialect *d, const ts_api_request *r,
                             ts_req_cancel *rc, ts_status st, const ts_error *err) {
    ts_api_error e;
    if (st == TS_ERR_ABORTED && atomic_load(&s->stopping)) {
        ts_api_error_set(&e, 503, "server_error", NULL, "server_shutdown",
                         "the server is shutting down (%s)", err->msg);
    } else if (st == TS_ERR_ABORTED && ts_req_cancelled(rc)) {
        return (ts_reply){.status = 499, .response = NULL};
    } else if (st == TS_ERR_NOMEM || st == TS_ERR_INTERNAL) {
        ts_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", err->msg);
    } else if (grammar_error(r, st, err) && st == TS_ERR_LIMIT &&
               strstr(err->msg, "time limit") != NULL) {
        ts_api_error_set(&e, 400, "invalid_request_error", r->grammar_param, NULL,
                         "%s (the server allows %d ms per grammar compile: --grammar-timeout)",
                         err->msg, s->cfg.grammar_timeout_ms);
    } else if (grammar_error(r, st, err)) {
        ts_api_error_set(&e, 400, "invalid_request_error", r->grammar_param, NULL, "%s", err->msg);
    } else {
        /* TS_ERR_LIMIT: prompt + max_tokens beyond what the context or the KV cache holds. */
        ts_api_error_set(&e, 400, "invalid_request_error", st == TS_ERR_LIMIT ? "max_tokens" : NULL,
                         st == TS_ERR_LIMIT ? "context_length_exceeded" : NULL, "%s", err->msg);
    }
    return ts_reply_error_in(d, &e);
}

ts_reply ts_handle_generate(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                            int sock) {
    const ts_dialect *d = ep->dialect;
    ts_api_kind kind = ep->kind;
    ts_api_limits lim = ts_server_limits(s);
    ts_api_request r;
    ts_api_error e;
    if (d->parse(kind, body, len, &lim, &r, &e) != TS_OK) {
        return ts_reply_error_in(d, &e);
    }
    if (s->encoder) {
        ts_api_request_free(&r);
        ts_api_error_set(&e, 400, "invalid_request_error", "model", "model_not_supported",
                         "the model '%.200s' is an embedding model (an encoder): it gives vectors "
                         "through /v1/embeddings, not text",
                         s->model_name);
        return ts_reply_error_in(d, &e);
    }
    int32_t n_subs = kind == TS_API_CHAT ? 1 : r.n_prompts;
    ts_req_cancel rc; /* stops the render and the grammar compile (client gone, shutdown) */
    ts_req_cancel_init(&rc, s, sock);
    const int32_t *ids[TS_API_MAX_PROMPTS] = {0};
    int32_t *owned[TS_API_MAX_PROMPTS] = {0};
    int32_t n_ids[TS_API_MAX_PROMPTS] = {0};
    int32_t max_tokens[TS_API_MAX_PROMPTS] = {0};
    uint64_t prompt_tokens = 0;
    ts_status st = TS_OK;
    int64_t n_ctx = s->n_ctx;
    for (int32_t k = 0; k < n_subs && st == TS_OK; k++) {
        st = ts_server_prompt_ids(s, &r, k, &rc, &ids[k], &n_ids[k], &owned[k], &e);
        if (st != TS_OK) {
            break;
        }
        prompt_tokens += (uint64_t)n_ids[k];
        int64_t room = n_ctx - n_ids[k];
        const char *what = kind == TS_API_CHAT ? "messages" : "prompt";
        if (room < 1) {
            st = ts_api_error_set(&e, 400, "invalid_request_error", what, "context_length_exceeded",
                                  "This model's maximum context length is %lld tokens. However, "
                                  "your %s has %d tokens, which leaves no room for the "
                                  "completion.",
                                  (long long)n_ctx, what, n_ids[k]);
        } else if (r.max_tokens_set && r.params.max_tokens > room && d->clamp_max_tokens) {
            max_tokens[k] = (int32_t)room; /* a cap: what the context has room for */
        } else if (r.max_tokens_set && r.params.max_tokens > room) {
            st = ts_api_error_set(&e, 400, "invalid_request_error", "max_tokens",
                                  "context_length_exceeded",
                                  "This model's maximum context length is %lld tokens. However, "
                                  "you requested %lld tokens (%d in the %s, %d in the "
                                  "completion).",
                                  (long long)n_ctx, (long long)n_ids[k] + r.params.max_tokens,
                                  n_ids[k], what, r.params.max_tokens);
        } else if (r.max_tokens_set) {
            max_tokens[k] = r.params.max_tokens;
        } else {
            /* Completions default to 16 tokens (OpenAI), chat to the rest of the context. */
            max_tokens[k] =
                (int32_t)(kind == TS_API_CHAT || room < r.params.max_tokens ? room
                                                                            : r.params.max_tokens);
        }
    }
    /* Chat answers are parsed into content, reasoning and tool calls; the markers that
     * delimit them are special tokens in some vocabularies, so their text is kept. */
    ts_chat_out_config chat_cfg = {0};
    if (st == TS_OK && kind == TS_API_CHAT) {
        ts_server_chat_config(s, &r, ids[0], n_ids[0], &chat_cfg);
        if (chat_cfg.parse_tools || chat_cfg.format.reasoning == TS_CHAT_REASONING_MISTRAL ||
            chat_cfg.format.reasoning == TS_CHAT_REASONING_COMMAND_R ||
            chat_cfg.format.reasoning == TS_CHAT_REASONING_HARMONY) {
            r.params.render_special = true;
        }
        st = ts_server_tool_grammar(&r, &chat_cfg, &e);
    }
    const ts_chat_out_config *chat = kind == TS_API_CHAT ? &chat_cfg : NULL;
    ts_reply reply = {0};
    ts_job *j = NULL;
    if (st == TS_OK) {
        j = ts_job_create(s, n_subs, r.params.n);
        if (j == NULL) {
            st = ts_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    const char *why = NULL;
    if (st == TS_OK && !ts_server_admit(s, j, &why)) {
        st = ts_api_error_set(&e, 503, "server_error", NULL, "overloaded", "%s; retry later", why);
    }
    if (st != TS_OK) {
        ts_job_release(j);
        /* 499: the client left while its template rendered; nobody is there to answer. */
        reply = e.status == 499 ? (ts_reply){.status = 499, .response = NULL}
                                : ts_reply_error_in(d, &e);
    }
    for (int32_t k = 0; k < n_subs && st == TS_OK; k++) {
        ts_request_params p = r.params;
        p.max_tokens = max_tokens[k];
        ts_server_compile_stop(s, &rc, &p);
        ts_error err = {0};
        ts_status est = ts_job_add(j, k, ids[k], n_ids[k], &p, &err);
        if (est != TS_OK) {
            st = est;
            ts_job_release(j);
            reply = submit_error(s, d, &r, &rc, est, &err);
        }
    }
    if (st == TS_OK) {
        reply = r.stream ? ts_stream_start(s, j, d, &r, chat, prompt_tokens, sock)
                         : collect(s, j, d, &r, chat, prompt_tokens, sock);
    }
    if (r.polyfills != 0 && reply.response != NULL) {
        /* The template could not render parts of the conversation as given (api_chat.c). */
        char names[96];
        ts_api_polyfill_names(r.polyfills, names, sizeof names);
        MHD_add_response_header(reply.response, "X-Tessera-Template-Polyfill", names);
    }
    for (int32_t k = 0; k < n_subs; k++) {
        ts_free(owned[k]);
    }
    ts_api_request_free(&r);
    return reply;
}

ts_reply ts_handle_tokenize(ts_server *s, const ts_endpoint *ep, const char *body, size_t len,
                            int sock) {
    (void)sock;
    ts_api_kind kind = ep->kind;
    ts_api_limits lim = ts_server_limits(s);
    ts_api_request r;
    ts_api_error e;
    if (ts_api_parse(kind, body, len, &lim, &r, &e) != TS_OK) {
        return ts_reply_error(&e);
    }
    cJSON *root = cJSON_CreateObject();
    ts_status st = TS_OK;
    if (kind == TS_API_TOKENIZE) {
        const int32_t *ids = NULL;
        int32_t *owned = NULL, n = 0;
        ts_req_cancel rc;
        ts_req_cancel_init(&rc, s, -1);
        st = ts_server_prompt_ids(s, &r, 0, &rc, &ids, &n, &owned, &e);
        if (st == TS_OK) {
            cJSON_AddNumberToObject(root, "count", n);
            cJSON_AddNumberToObject(root, "max_model_len", (double)s->n_ctx);
            cJSON_AddItemToObject(root, "tokens", cJSON_CreateIntArray(ids, n));
        }
        ts_free(owned);
    } else {
        char *text = NULL;
        size_t tlen = 0;
        ts_error err = {0};
        if (ts_llm_detokenize(s->llm, r.tokens, (size_t)r.n_tokens, 0, &text, &tlen, &err) !=
            TS_OK) {
            st = ts_api_error_set(&e, 400, "invalid_request_error", "tokens", NULL,
                                  "cannot detokenize: %s", err.msg);
        } else {
            /* Ids may end inside a character; JSON needs whole ones. */
            for (size_t i = ts_api_utf8_check(text, tlen); i < tlen;
                 i += 1 + ts_api_utf8_check(text + i + 1, tlen - i - 1)) {
                text[i] = '?';
            }
            cJSON_AddStringToObject(root, "prompt", text);
        }
        ts_free(text);
    }
    ts_api_request_free(&r);
    if (st != TS_OK) {
        cJSON_Delete(root);
        return ts_reply_error(&e);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return ts_reply_json(200, out);
}
