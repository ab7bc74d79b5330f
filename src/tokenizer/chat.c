/*
 * chat.c — chat templates: recognising a model's Jinja template by its markers and rendering
 * conversations with built-in C renderers, one per family.
 *
 * The renderers write what each family's template writes, except the leading bos token,
 * which the tokenizer adds (add_special). System messages are handled as each family does:
 * in their own block where the format has one, folded into the first user turn where it has
 * none (Gemma, Llama 2 without <<SYS>>).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static const char *const k_family_names[TS_CHAT_FAMILY_COUNT] = {
    [TS_CHAT_CHATML] = "chatml",
    [TS_CHAT_LLAMA2] = "llama2",
    [TS_CHAT_LLAMA2_SYS] = "llama2-sys",
    [TS_CHAT_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [TS_CHAT_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [TS_CHAT_LLAMA3] = "llama3",
    [TS_CHAT_MISTRAL_V1] = "mistral-v1",
    [TS_CHAT_MISTRAL_V3] = "mistral-v3",
    [TS_CHAT_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [TS_CHAT_MISTRAL_V7] = "mistral-v7",
    [TS_CHAT_GEMMA] = "gemma",
    [TS_CHAT_PHI3] = "phi3",
    [TS_CHAT_ZEPHYR] = "zephyr",
    [TS_CHAT_DEEPSEEK] = "deepseek",
    [TS_CHAT_DEEPSEEK2] = "deepseek2",
    [TS_CHAT_DEEPSEEK3] = "deepseek3",
};

const char *ts_chat_family_name(ts_chat_family family) {
    return (unsigned)family < TS_CHAT_FAMILY_COUNT ? k_family_names[family] : "unknown";
}

ts_status ts_chat_template_from_name(const char *name, ts_chat_template *out, ts_error *err) {
    if (name == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat: NULL argument");
    }
    for (int f = 0; f < TS_CHAT_FAMILY_COUNT; f++) {
        if (strcmp(name, k_family_names[f]) == 0) {
            *out = (ts_chat_template){(ts_chat_family)f, NULL, 0};
            return TS_OK;
        }
    }
    char list[400];
    size_t n = 0;
    for (int f = 0; f < TS_CHAT_FAMILY_COUNT && n < sizeof list; f++) {
        int w = snprintf(list + n, sizeof list - n, "%s%s", f ? ", " : "", k_family_names[f]);
        n += w > 0 ? (size_t)w : 0;
    }
    return ts_error_set(err, TS_ERR_NOT_FOUND, "chat: unknown template name '%s' (known: %s)", name,
                        list);
}

static bool contains(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (m == 0 || m > n) {
        return m == 0;
    }
    for (size_t i = 0; i + m <= n; i++) {
        if (s[i] == needle[0] && memcmp(s + i, needle, m) == 0) {
            return true;
        }
    }
    return false;
}

static const char *find(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; m <= n && i + m <= n; i++) {
        if (memcmp(s + i, needle, m) == 0) {
            return s + i;
        }
    }
    return NULL;
}

/* A ChatML template that writes a fixed system turn when the conversation has none
 * ("<|im_start|>system\nYou are ...<|im_end|>" inside a string literal) has a default prompt.
 * The newline may be stored as a real newline or as a Jinja escape. */
static void chatml_default_system(const char *s, size_t n, ts_chat_template *out) {
    static const char *const opens[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (size_t k = 0; k < 2; k++) {
        const char *p = find(s, n, opens[k]);
        while (p != NULL) {
            const char *start = p + strlen(opens[k]);
            const char *end = find(start, n - (size_t)(start - s), "<|im_end|>");
            if (end == NULL) {
                break;
            }
            /* Only a literal: no Jinja expression, quote or escape inside. */
            bool literal = end > start;
            for (const char *c = start; c < end && literal; c++) {
                literal = *c != '{' && *c != '\'' && *c != '"' && *c != '+' && *c != '\\';
            }
            if (literal) {
                out->default_system = start;
                out->default_system_len = (size_t)(end - start);
                return;
            }
            p = find(end, n - (size_t)(end - s), opens[k]);
        }
    }
}

ts_status ts_chat_template_detect(const char *tmpl, size_t n, ts_chat_template *out,
                                  ts_error *err) {
    if (tmpl == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat: NULL argument");
    }
    *out = (ts_chat_template){TS_CHAT_FAMILY_COUNT, NULL, 0};
    ts_chat_family f = TS_CHAT_FAMILY_COUNT;
#define HAS(x) contains(tmpl, n, x)
    if (HAS("<|im_start|>")) {
        f = TS_CHAT_CHATML;
        chatml_default_system(tmpl, n, out);
    } else if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) {
            f = TS_CHAT_MISTRAL_V7;
        } else if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            f = HAS(" [INST]")      ? TS_CHAT_MISTRAL_V1
                : HAS("\"[INST]\"") ? TS_CHAT_MISTRAL_V3_TEKKEN
                                    : TS_CHAT_MISTRAL_V3;
        } else if (HAS("content.strip()")) {
            f = TS_CHAT_LLAMA2_SYS_STRIP;
        } else if (HAS("bos_token + '[INST]")) {
            f = TS_CHAT_LLAMA2_SYS_BOS;
        } else if (HAS("<<SYS>>")) {
            f = TS_CHAT_LLAMA2_SYS;
        } else {
            f = TS_CHAT_LLAMA2;
        }
    } else if (HAS("<|assistant|>") && HAS("<|end|>")) {
        f = TS_CHAT_PHI3;
    } else if (HAS("<|user|>") && HAS("<|endoftext|>")) {
        f = TS_CHAT_ZEPHYR;
    } else if (HAS("<start_of_turn>")) {
        f = TS_CHAT_GEMMA;
    } else if (HAS("### Instruction:") && HAS("<|EOT|>")) {
        f = TS_CHAT_DEEPSEEK;
    } else if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
        f = TS_CHAT_LLAMA3;
    } else if (HAS("'Assistant: ' + message['content'] + eos_token")) {
        f = TS_CHAT_DEEPSEEK2;
    } else if (HAS("<｜Assistant｜>") && HAS("<｜User｜>")) {
        f = TS_CHAT_DEEPSEEK3;
    }
    if (f == TS_CHAT_FAMILY_COUNT && HAS("<|channel|>") && HAS("<|message|>")) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "chat: this is OpenAI's harmony chat template (gpt-oss), which the "
                            "built-in renderers do not render yet; write the prompt in the "
                            "harmony format yourself or choose a built-in template by name");
    }
#undef HAS
    if (f == TS_CHAT_FAMILY_COUNT) {
        char head[61];
        size_t m = n < sizeof head - 1 ? n : sizeof head - 1;
        for (size_t i = 0; i < m; i++) {
            head[i] = isprint((unsigned char)tmpl[i]) ? tmpl[i] : ' ';
        }
        head[m] = '\0';
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "chat: unrecognised chat template (%zu bytes, starting \"%s\"); choose "
                            "a built-in one by name",
                            n, head);
    }
    out->family = f;
    return TS_OK;
}

bool ts_tokenizer_chat_template_source(const ts_tokenizer *t, const char **src, size_t *len) {
    *src = t->chat_template.ptr;
    *len = (size_t)t->chat_template.len;
    return t->chat_template.ptr != NULL;
}

ts_status ts_tokenizer_chat_template(const ts_tokenizer *t, ts_chat_template *out, ts_error *err) {
    if (t->chat_template.ptr == NULL) {
        return ts_error_set(err, TS_ERR_NOT_FOUND,
                            "chat: the model has no tokenizer.chat_template");
    }
    return ts_chat_template_detect(t->chat_template.ptr, (size_t)t->chat_template.len, out, err);
}

/* ---- rendering ----------------------------------------------------------------------------- */

typedef struct out_ctx {
    tok_buf b;
    ts_error *err;
    ts_status st;
} out_ctx;

static void put_n(out_ctx *o, const char *s, size_t n) {
    if (o->st == TS_OK) {
        o->st = tok_buf_append(&o->b, s, n, o->err);
    }
}

static void put(out_ctx *o, const char *s) {
    put_n(o, s, strlen(s));
}

/* Writes s without leading and trailing ASCII whitespace. */
static void put_trim(out_ctx *o, const char *s) {
    size_t a = 0, z = strlen(s);
    while (a < z && isspace((unsigned char)s[a])) {
        a++;
    }
    while (z > a && isspace((unsigned char)s[z - 1])) {
        z--;
    }
    put_n(o, s + a, z - a);
}

typedef enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_OTHER } role;

static role role_of(const char *r) {
    return strcmp(r, "system") == 0      ? ROLE_SYSTEM
           : strcmp(r, "user") == 0      ? ROLE_USER
           : strcmp(r, "assistant") == 0 ? ROLE_ASSISTANT
                                         : ROLE_OTHER;
}

static void render_mistral(out_ctx *o, ts_chat_family f, const ts_chat_message *m, size_t n) {
    if (f == TS_CHAT_MISTRAL_V7) {
        for (size_t i = 0; i < n; i++) {
            role r = role_of(m[i].role);
            put(o, r == ROLE_SYSTEM ? "[SYSTEM_PROMPT] " : r == ROLE_USER ? "[INST] " : " ");
            put(o, m[i].content);
            put(o, r == ROLE_SYSTEM ? "[/SYSTEM_PROMPT]" : r == ROLE_USER ? "[/INST]" : "</s>");
        }
        return;
    }
    const char *lead = f == TS_CHAT_MISTRAL_V1 ? " " : "";
    const char *trail = f == TS_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    bool in_turn = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_turn) {
            put(o, lead);
            put(o, "[INST]");
            put(o, trail);
            in_turn = true;
        }
        role r = role_of(m[i].role);
        if (r == ROLE_SYSTEM) {
            put(o, m[i].content);
            put(o, "\n\n");
        } else if (r == ROLE_USER) {
            put(o, m[i].content);
            put(o, lead);
            put(o, "[/INST]");
        } else {
            put(o, trail);
            if (f == TS_CHAT_MISTRAL_V3) {
                put_trim(o, m[i].content);
            } else {
                put(o, m[i].content);
            }
            put(o, "</s>");
            in_turn = false;
        }
    }
}

static void render_llama2(out_ctx *o, ts_chat_family f, const ts_chat_message *m, size_t n) {
    bool sys_block = f != TS_CHAT_LLAMA2;
    bool in_turn = true;
    put(o, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        role r = role_of(m[i].role);
        if (!in_turn) {
            put(o, f == TS_CHAT_LLAMA2_SYS_BOS ? "<s>[INST] " : "[INST] ");
            in_turn = true;
        }
        if (r == ROLE_SYSTEM && sys_block) {
            put(o, "<<SYS>>\n");
        }
        if (f == TS_CHAT_LLAMA2_SYS_STRIP) {
            put_trim(o, m[i].content);
        } else {
            put(o, m[i].content);
        }
        if (r == ROLE_SYSTEM) {
            put(o, sys_block ? "\n<</SYS>>\n\n" : "\n");
        } else if (r == ROLE_USER) {
            put(o, " [/INST]");
        } else {
            put(o, "</s>");
            in_turn = false;
        }
    }
}

static void render_gemma(out_ctx *o, const ts_chat_message *m, size_t n, bool gen) {
    const char *system = NULL;
    for (size_t i = 0; i < n; i++) {
        role r = role_of(m[i].role);
        if (r == ROLE_SYSTEM) {
            system = m[i].content; /* Gemma has no system turn: it opens the next user turn */
            continue;
        }
        put(o, "<start_of_turn>");
        put(o, r == ROLE_ASSISTANT ? "model" : m[i].role);
        put(o, "\n");
        if (system != NULL && r != ROLE_ASSISTANT) {
            put_trim(o, system);
            put(o, "\n\n");
            system = NULL;
        }
        put_trim(o, m[i].content);
        put(o, "<end_of_turn>\n");
    }
    if (gen) {
        put(o, "<start_of_turn>model\n");
    }
}

static void render_simple(out_ctx *o, const ts_chat_template *tp, const ts_chat_message *m,
                          size_t n, bool gen) {
    switch (tp->family) {
    case TS_CHAT_CHATML:
        if (tp->default_system != NULL && (n == 0 || role_of(m[0].role) != ROLE_SYSTEM)) {
            put(o, "<|im_start|>system\n");
            put_n(o, tp->default_system, tp->default_system_len);
            put(o, "<|im_end|>\n");
        }
        for (size_t i = 0; i < n; i++) {
            put(o, "<|im_start|>");
            put(o, m[i].role);
            put(o, "\n");
            put(o, m[i].content);
            put(o, "<|im_end|>\n");
        }
        if (gen) {
            put(o, "<|im_start|>assistant\n");
        }
        break;
    case TS_CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|start_header_id|>");
            put(o, m[i].role);
            put(o, "<|end_header_id|>\n\n");
            put_trim(o, m[i].content);
            put(o, "<|eot_id|>");
        }
        if (gen) {
            put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        }
        break;
    case TS_CHAT_PHI3:
    case TS_CHAT_ZEPHYR:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|");
            put(o, m[i].role);
            put(o, "|>\n");
            put(o, m[i].content);
            put(o, tp->family == TS_CHAT_PHI3 ? "<|end|>\n" : "<|endoftext|>\n");
        }
        if (gen) {
            put(o, "<|assistant|>\n");
        }
        break;
    case TS_CHAT_DEEPSEEK:
        for (size_t i = 0; i < n; i++) {
            role r = role_of(m[i].role);
            put(o, r == ROLE_USER        ? "### Instruction:\n"
                   : r == ROLE_ASSISTANT ? "### Response:\n"
                                         : "");
            put(o, m[i].content);
            put(o, r == ROLE_USER ? "\n" : r == ROLE_ASSISTANT ? "\n<|EOT|>\n" : "");
        }
        if (gen) {
            put(o, "### Response:\n");
        }
        break;
    case TS_CHAT_DEEPSEEK2:
    case TS_CHAT_DEEPSEEK3: {
        bool v3 = tp->family == TS_CHAT_DEEPSEEK3;
        for (size_t i = 0; i < n; i++) {
            role r = role_of(m[i].role);
            put(o, r == ROLE_USER        ? (v3 ? "<｜User｜>" : "User: ")
                   : r == ROLE_ASSISTANT ? (v3 ? "<｜Assistant｜>" : "Assistant: ")
                                         : "");
            put(o, m[i].content);
            put(o, r == ROLE_SYSTEM ? "\n\n"
                   : r == ROLE_USER ? (v3 ? "" : "\n\n")
                                    : "<｜end▁of▁sentence｜>");
        }
        if (gen) {
            put(o, v3 ? "<｜Assistant｜>" : "Assistant:");
        }
        break;
    }
    default:
        break;
    }
}

ts_status ts_chat_apply(const ts_chat_template *tmpl, const ts_chat_message *msgs, size_t n_msgs,
                        bool add_generation_prompt, char **text, size_t *len, ts_error *err) {
    if (tmpl == NULL || text == NULL || len == NULL || (msgs == NULL && n_msgs > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat: NULL argument");
    }
    *text = NULL;
    *len = 0;
    ts_chat_family f = tmpl->family;
    if ((unsigned)f >= TS_CHAT_FAMILY_COUNT) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "chat: invalid template family %d", (int)f);
    }
    /* Families that print the role name accept any role; the others know only three. */
    bool any_role =
        f == TS_CHAT_CHATML || f == TS_CHAT_LLAMA3 || f == TS_CHAT_PHI3 || f == TS_CHAT_ZEPHYR;
    for (size_t i = 0; i < n_msgs; i++) {
        if (msgs[i].role == NULL || msgs[i].content == NULL) {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "chat: message %zu has a NULL field", i);
        }
        bool bad = any_role ? (msgs[i].role[0] == '\0' || strpbrk(msgs[i].role, "\n<>|") != NULL)
                            : role_of(msgs[i].role) == ROLE_OTHER;
        if (bad) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "chat: message %zu has role '%.40s', which the %s template cannot "
                                "express",
                                i, msgs[i].role, k_family_names[f]);
        }
    }
    out_ctx o = {.err = err, .st = TS_OK};
    put(&o, "");
    switch (f) {
    case TS_CHAT_MISTRAL_V1:
    case TS_CHAT_MISTRAL_V3:
    case TS_CHAT_MISTRAL_V3_TEKKEN:
    case TS_CHAT_MISTRAL_V7:
        render_mistral(&o, f, msgs, n_msgs);
        break;
    case TS_CHAT_LLAMA2:
    case TS_CHAT_LLAMA2_SYS:
    case TS_CHAT_LLAMA2_SYS_BOS:
    case TS_CHAT_LLAMA2_SYS_STRIP:
        render_llama2(&o, f, msgs, n_msgs);
        break;
    case TS_CHAT_GEMMA:
        render_gemma(&o, msgs, n_msgs, add_generation_prompt);
        break;
    default:
        render_simple(&o, tmpl, msgs, n_msgs, add_generation_prompt);
        break;
    }
    if (o.st != TS_OK) {
        free(o.b.v);
        return o.st;
    }
    *text = o.b.v;
    *len = o.b.n;
    return TS_OK;
}
