/*
 * chat.c — chat requests in the public API: choosing a template (a built-in family, a Jinja
 * text given by the caller, or the model's own) and rendering a request with it.
 *
 * A request is a JSON object as OpenAI's chat API shapes it (messages, tools, ...). For a
 * Jinja template it becomes the template's variables as it is, with bos_token, eos_token and
 * add_generation_prompt added when absent; the built-in families read only each message's role
 * and text. The model's template is compiled once per context (rt_chat_open) and rendered per
 * request; the sandboxed engine itself lives in src/template/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/runtime.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/json_str.h"
#include "util/stop.h"

char *rt_chat_messages_json(const ts_message *msgs, size_t n_msgs, int add_generation_prompt) {
    ts_buf b = {0};
    ts_buf_puts(&b, "{\"messages\":[");
    for (size_t i = 0; i < n_msgs; i++) {
        const char *role = msgs[i].role != NULL ? msgs[i].role : "";
        const char *content = msgs[i].content != NULL ? msgs[i].content : "";
        ts_buf_puts(&b, i ? ",{\"role\":" : "{\"role\":");
        ts_json_put_str(&b, role, strlen(role), 0);
        ts_buf_puts(&b, ",\"content\":");
        ts_json_put_str(&b, content, strlen(content), 0);
        ts_buf_puts(&b, "}");
    }
    ts_buf_puts(&b, add_generation_prompt ? "],\"add_generation_prompt\":true}"
                                          : "],\"add_generation_prompt\":false}");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- choosing the template ------------------------------------------------------------------ */

static bool has_token(const ts_tokenizer *tok, const char *text) {
    ts_token id;
    return ts_tokenizer_find(tok, text, strlen(text), &id) == TS_OK;
}

/* The built-in family a model without a template most likely was trained on, from its
 * architecture and the turn markers its vocabulary holds as tokens (as llama.cpp falls back to
 * chatml, but by evidence). *why says which evidence. False when nothing matches: guessing a
 * format the model has never seen would give plausible-looking but wrong prompts. */
static bool family_from_vocab(const ts_llm *llm, ts_chat_family *out, const char **why) {
    const ts_tokenizer *tok = llm != NULL ? llm->tok : NULL;
    if (tok == NULL) {
        return false;
    }
    const char *arch = ts_llm_arch(llm);
    bool gemma_tokens = has_token(tok, "<start_of_turn>") && has_token(tok, "<end_of_turn>");
    if (gemma_tokens || (arch != NULL && strncmp(arch, "gemma", 5) == 0)) {
        *out = TS_CHAT_GEMMA;
        *why =
            gemma_tokens ? "its <start_of_turn>/<end_of_turn> tokens" : "its architecture (gemma)";
        return true;
    }
    if (has_token(tok, "<|start_header_id|>") && has_token(tok, "<|end_header_id|>") &&
        has_token(tok, "<|eot_id|>")) {
        *out = TS_CHAT_LLAMA3;
        *why = "its <|start_header_id|>/<|eot_id|> tokens";
        return true;
    }
    if (has_token(tok, "<|im_start|>") && has_token(tok, "<|im_end|>")) {
        *out = TS_CHAT_CHATML;
        *why = "its <|im_start|>/<|im_end|> tokens";
        return true;
    }
    if (has_token(tok, "<|user|>") && has_token(tok, "<|assistant|>") &&
        has_token(tok, "<|end|>")) {
        *out = TS_CHAT_PHI3;
        *why = "its <|user|>/<|assistant|>/<|end|> tokens";
        return true;
    }
    if (has_token(tok, "<｜User｜>") && has_token(tok, "<｜Assistant｜>")) {
        *out = TS_CHAT_DEEPSEEK3;
        *why = "its <｜User｜>/<｜Assistant｜> tokens";
        return true;
    }
    if (has_token(tok, "[INST]") && has_token(tok, "[/INST]")) {
        bool v7 = has_token(tok, "[SYSTEM_PROMPT]") && has_token(tok, "[/SYSTEM_PROMPT]");
        /* Tekken vocabularies are BPE ones; v3 with SentencePiece writes "[INST] " with a space. */
        *out = v7                                               ? TS_CHAT_MISTRAL_V7
               : ts_tokenizer_get_kind(tok) == TS_TOKENIZER_BPE ? TS_CHAT_MISTRAL_V3_TEKKEN
                                                                : TS_CHAT_MISTRAL_V3;
        *why = v7 ? "its [SYSTEM_PROMPT]/[INST] tokens" : "its [INST]/[/INST] tokens";
        return true;
    }
    return false;
}

ts_status rt_chat_open(rt_chat *c, const ts_llm *llm, const char *name, const char *source,
                       ts_error *err) {
    memset(c, 0, sizeof *c);
    if (name != NULL) {
        ts_status st = ts_chat_template_from_name(name, &c->family, err);
        c->has_family = st == TS_OK;
        return st;
    }
    bool own = source == NULL;
    size_t len = 0;
    if (own) {
        source = llm != NULL ? llm->chat_src : NULL;
        const char *why = NULL;
        if (source == NULL && family_from_vocab(llm, &c->family.family, &why)) {
            /* No template in the file: the family the model's turn markers name renders. */
            c->has_family = true;
            snprintf(c->notice, sizeof c->notice,
                     "the model has no chat template; using the built-in '%s' template (from "
                     "%s); give --chat-template NAME or --chat-template-file F to choose another",
                     ts_chat_family_name(c->family.family), why);
            return TS_OK;
        }
        if (source == NULL) {
            return TS_OK; /* none: rendering says so */
        }
    }
    len = strlen(source);
    c->source = malloc(len + 1);
    if (c->source == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "chat template: out of memory (%zu bytes)", len);
    }
    memcpy(c->source, source, len + 1);
    ts_status st = ts_tpl_compile(c->source, len, &c->tpl, err);
    if (st == TS_OK) {
        return TS_OK;
    }
    if (!own) {
        ts_error_prefix(err, "chat template: ");
        rt_chat_close(c);
        return st;
    }
    /* The model's own template does not compile here: a model is still usable for
     * completions, so the context keeps the reason and renders with the built-in family its
     * markers name when there is one. */
    snprintf(c->broken, sizeof c->broken, "the model's chat template: %s", err->msg);
    ts_error none = {0};
    c->has_family = ts_chat_template_detect(c->source, len, &c->family, &none) == TS_OK;
    if (c->has_family) {
        snprintf(c->notice, sizeof c->notice,
                 "%s; using the built-in '%s' template its markers name", c->broken,
                 ts_chat_family_name(c->family.family));
    } else {
        snprintf(c->notice, sizeof c->notice, "%s; chat requests will fail", c->broken);
    }
    ts_error_clear(err);
    return TS_OK;
}

void rt_chat_close(rt_chat *c) {
    ts_tpl_free(c->tpl);
    free(c->source);
    memset(c, 0, sizeof *c);
}

ts_chat_profile rt_chat_profile(const rt_chat *c, const ts_llm *llm) {
    if (c->tpl != NULL) {
        return ts_chat_profile_detect(c->source);
    }
    ts_chat_profile p;
    if (c->has_family) {
        /* A built-in family renders roles and text only: no tools, and no markers to read. */
        p = ts_chat_profile_detect(NULL);
        p.renderer = ts_chat_family_name(c->family.family);
        return p;
    }
    /* No template renders (none in the file, or it failed to compile with no family to fall
     * back on): the model's own text still tells how it writes its answers. */
    p = ts_chat_profile_detect(llm != NULL ? llm->chat_src : NULL);
    p.renderer = NULL;
    p.renders_tools = false;
    return p;
}

void ts_context_chat_profile(const ts_context *ctx, ts_chat_profile *out) {
    *out = ctx->chat_profile;
}

/* ---- rendering ------------------------------------------------------------------------------ */

/* The request as a cJSON object; NULL with a message naming what is wrong (the byte where
 * parsing stopped, and the reasons that are not plain syntax errors) otherwise. */
static cJSON *parse_request(const char *json, size_t len, ts_error *err) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (root == NULL) {
        size_t at = end != NULL && end >= json ? (size_t)(end - json) : 0;
        ts_error_set(err, TS_ERR_FORMAT,
                     "chat request: not valid JSON (error near byte %zu of %zu; nesting deeper "
                     "than %d, a lone UTF-16 surrogate escape and NaN are refused too)",
                     at, len, CJSON_NESTING_LIMIT);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        ts_error_set(err, TS_ERR_FORMAT, "chat request: not a JSON object");
        return NULL;
    }
    return root;
}

/* The built-in family's rendering of the request's messages (role and text only). */
static ts_status render_family(const rt_chat *c, const char *json, size_t len, char **text,
                               size_t *out_len, ts_error *err) {
    cJSON *root = parse_request(json, len, err);
    if (root == NULL) {
        return err->status;
    }
    const char *fam = ts_chat_family_name(c->family.family);
    ts_status st = TS_OK;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    int n = cJSON_GetArraySize(msgs);
    ts_message *m = calloc((size_t)(n > 0 ? n : 1), sizeof *m);
    char **joined = calloc((size_t)(n > 0 ? n : 1), sizeof *joined);
    if (m == NULL || joined == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "chat request: out of memory");
    } else if (!cJSON_IsArray(msgs)) {
        st = ts_error_set(err, TS_ERR_FORMAT, "chat request: messages must be an array");
    } else if (tools != NULL && !cJSON_IsNull(tools) && cJSON_GetArraySize(tools) > 0) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                          "the built-in '%s' template does not render tools (use the model's "
                          "Jinja template or --chat-template-file)",
                          fam);
    }
    for (int i = 0; st == TS_OK && i < n; i++) {
        const cJSON *msg = cJSON_GetArrayItem(msgs, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (!cJSON_IsString(role)) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "chat request: messages[%d].role must be a string", i);
            break;
        }
        if (strcmp(role->valuestring, "system") != 0 && strcmp(role->valuestring, "user") != 0 &&
            strcmp(role->valuestring, "assistant") != 0) {
            /* A tool turn is real but beyond these renderers; any other role is a mistake. */
            bool tool = strcmp(role->valuestring, "tool") == 0;
            st = ts_error_set(err, tool ? TS_ERR_UNSUPPORTED : TS_ERR_INVALID_ARG,
                              "the built-in '%s' template renders system, user and assistant "
                              "turns only; messages[%d] has role '%s'",
                              fam, i, role->valuestring);
            break;
        }
        if (cJSON_GetObjectItemCaseSensitive(msg, "tool_calls") != NULL &&
            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) > 0) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "the built-in '%s' template does not render tool calls "
                              "(messages[%d])",
                              fam, i);
            break;
        }
        m[i].role = role->valuestring;
        if (cJSON_IsString(content)) {
            m[i].content = content->valuestring;
        } else if (content == NULL || cJSON_IsNull(content)) {
            m[i].content = "";
        } else if (cJSON_IsArray(content)) {
            ts_buf b = {0};
            ts_buf_puts(&b, "");
            const cJSON *part;
            cJSON_ArrayForEach(part, content) {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (cJSON_IsString(t)) {
                    ts_buf_puts(&b, t->valuestring);
                }
            }
            if (b.oom) {
                free(b.p);
                st = ts_error_set(err, TS_ERR_NOMEM, "chat request: out of memory");
                break;
            }
            joined[i] = b.p;
            m[i].content = b.p;
        } else {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "chat request: messages[%d].content must be a string or a list of "
                              "text parts",
                              i);
        }
    }
    if (st == TS_OK) {
        bool gen = agp == NULL || cJSON_IsTrue(agp);
        st = ts_chat_apply(&c->family, m, (size_t)n, gen, text, out_len, err);
    }
    for (int i = 0; joined != NULL && i < n; i++) {
        free(joined[i]);
    }
    free(joined);
    free(m);
    cJSON_Delete(root);
    return st;
}

/* The text of a special token, or "" when the vocabulary has none. */
static const char *special_text(const ts_tokenizer *tok, ts_token id, size_t *len) {
    const char *t = NULL;
    ts_error none = {0};
    if (tok == NULL || id < 0 || ts_tokenizer_token_text(tok, id, &t, len, &none) != TS_OK) {
        *len = 0;
        return "";
    }
    return t;
}

/* The request with bos_token, eos_token, add_generation_prompt, tools and documents added where
 * absent, as transformers' apply_chat_template passes them. The given text is kept as it is
 * (its numbers stay as written, e.g. 1.0 vs 1). */
static char *template_vars(const ts_llm *llm, const char *json, size_t len, ts_error *err) {
    cJSON *root = parse_request(json, len, err);
    if (root == NULL) {
        return NULL;
    }
    const ts_tokenizer *tok = llm != NULL ? llm->tok : NULL;
    const ts_tokenizer_special *sp = tok != NULL ? ts_tokenizer_get_special(tok) : NULL;
    ts_buf b = {0};
    ts_buf_puts(&b, "{");
    size_t n;
    if (cJSON_GetObjectItemCaseSensitive(root, "bos_token") == NULL) {
        const char *t = special_text(tok, sp != NULL ? sp->bos : -1, &n);
        ts_buf_puts(&b, "\"bos_token\":");
        ts_json_put_str(&b, t, n, 0);
        ts_buf_puts(&b, ",");
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "eos_token") == NULL) {
        const char *t = special_text(tok, sp != NULL ? sp->eos : -1, &n);
        ts_buf_puts(&b, "\"eos_token\":");
        ts_json_put_str(&b, t, n, 0);
        ts_buf_puts(&b, ",");
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt") == NULL) {
        ts_buf_puts(&b, "\"add_generation_prompt\":true,");
    }
    /* transformers always passes these two, None when absent: templates test "tools is not
     * none", which an undefined tools would pass. */
    if (cJSON_GetObjectItemCaseSensitive(root, "tools") == NULL) {
        ts_buf_puts(&b, "\"tools\":null,");
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "documents") == NULL) {
        ts_buf_puts(&b, "\"documents\":null,");
    }
    bool empty = root->child == NULL;
    cJSON_Delete(root);
    const char *open = memchr(json, '{', len);
    size_t rest = (size_t)(json + len - (open + 1));
    if (empty) {
        if (b.n > 1) {
            b.n--; /* the last comma */
        }
        ts_buf_puts(&b, "}");
    } else {
        ts_buf_put(&b, open + 1, rest);
    }
    if (b.oom) {
        free(b.p);
        ts_error_set(err, TS_ERR_NOMEM, "chat request: out of memory");
        return NULL;
    }
    return b.p;
}

/* Drops a leading BOS / trailing EOS text that tokenizing with add_special adds again. */
static void strip_added_specials(const ts_llm *llm, char *text, size_t *len) {
    const ts_tokenizer_special *sp = ts_tokenizer_get_special(llm->tok);
    size_t n;
    if (sp->add_bos) {
        const char *bos = special_text(llm->tok, sp->bos, &n);
        if (n > 0 && *len >= n && memcmp(text, bos, n) == 0) {
            memmove(text, text + n, *len - n + 1);
            *len -= n;
        }
    }
    if (sp->add_eos) {
        const char *eos = special_text(llm->tok, sp->eos, &n);
        if (n > 0 && *len >= n && memcmp(text + *len - n, eos, n) == 0) {
            *len -= n;
            text[*len] = '\0';
        }
    }
}

ts_status rt_chat_apply(const rt_chat *c, const ts_llm *llm, const ts_chat_options *opt,
                        const char *json, size_t len, char **text, size_t *out_len, ts_error *err) {
    size_t n = 0;
    ts_status st;
    if (c->tpl == NULL && !c->has_family) {
        if (c->broken[0] != '\0') {
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s", c->broken);
        }
        return ts_error_set(err, TS_ERR_NOT_FOUND,
                            "the model has no chat template (give one with --chat-template-file "
                            "or name a built-in one with --chat-template)");
    }
    if (c->tpl == NULL) {
        st = render_family(c, json, len, text, &n, err);
    } else {
        char *vars = template_vars(llm, json, len, err);
        if (vars == NULL) {
            return err->status;
        }
        ts_tpl_options to = {0};
        ts_stop stop = {0};
        if (opt != NULL) {
            to.now = opt->now;
            to.max_work = opt->max_work;
            to.max_memory = opt->max_memory;
            stop.cancel = opt->cancel;
            stop.user = opt->cancel_user;
            if (opt->timeout_ms > 0) {
                stop.deadline_ns = ts_now_ns() + opt->timeout_ms * 1000000;
            }
            to.stop = &stop;
        }
        st = ts_tpl_render(c->tpl, vars, strlen(vars), &to, text, &n, err);
        free(vars);
        if (st == TS_OK && llm != NULL && (opt == NULL || !opt->keep_special)) {
            strip_added_specials(llm, *text, &n);
        }
    }
    if (st == TS_OK && out_len != NULL) {
        *out_len = n;
    }
    return st;
}

/* ---- the public functions ------------------------------------------------------------------- */

const char *ts_llm_chat_template(const ts_llm *llm) {
    return llm != NULL ? llm->chat_src : NULL;
}

ts_status ts_llm_chat_render(const ts_llm *llm, const ts_chat_options *opt,
                             const char *request_json, size_t request_len, char **text, size_t *len,
                             ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if ((llm == NULL && (opt == NULL || (opt->source == NULL && opt->name == NULL))) ||
        request_json == NULL || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_chat_render: NULL argument");
    }
    rt_chat c;
    ts_status st = rt_chat_open(&c, llm, opt != NULL ? opt->name : NULL,
                                opt != NULL ? opt->source : NULL, err);
    if (st == TS_OK) {
        st = rt_chat_apply(&c, llm, opt, request_json, request_len, text, len, err);
    }
    rt_chat_close(&c);
    return st;
}

ts_status ts_llm_chat_prompt(const ts_llm *llm, const char *name, const ts_message *msgs,
                             size_t n_msgs, int add_generation_prompt, char **text, size_t *len,
                             ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (llm == NULL || (msgs == NULL && n_msgs > 0) || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_llm_chat_prompt: NULL argument");
    }
    char *json = rt_chat_messages_json(msgs, n_msgs, add_generation_prompt);
    if (json == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_llm_chat_prompt: out of memory");
    }
    ts_chat_options opt = {.name = name};
    ts_status st = ts_llm_chat_render(llm, &opt, json, strlen(json), text, len, err);
    free(json);
    return st;
}

ts_status ts_context_chat_render(const ts_context *ctx, const char *request_json,
                                 size_t request_len, char **text, size_t *len, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || request_json == NULL || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_chat_render: NULL argument");
    }
    return rt_chat_apply(&ctx->chat, ctx->llm, NULL, request_json, request_len, text, len, err);
}

ts_status ts_context_chat_render_opt(const ts_context *ctx, const ts_chat_options *opt,
                                     const char *request_json, size_t request_len, char **text,
                                     size_t *len, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || request_json == NULL || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_chat_render_opt: NULL argument");
    }
    if (opt != NULL && (opt->name != NULL || opt->source != NULL)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ts_context_chat_render_opt: the context's template is fixed at "
                            "create (opt->name and opt->source must be NULL)");
    }
    return rt_chat_apply(&ctx->chat, ctx->llm, opt, request_json, request_len, text, len, err);
}

ts_status ts_context_chat_prompt(const ts_context *ctx, const ts_message *msgs, size_t n_msgs,
                                 int add_generation_prompt, char **text, size_t *len,
                                 ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (ctx == NULL || (msgs == NULL && n_msgs > 0) || text == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ts_context_chat_prompt: NULL argument");
    }
    char *json = rt_chat_messages_json(msgs, n_msgs, add_generation_prompt);
    if (json == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ts_context_chat_prompt: out of memory");
    }
    ts_status st = ts_context_chat_render(ctx, json, strlen(json), text, len, err);
    free(json);
    return st;
}
