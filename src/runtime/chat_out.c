/*
 * chat_out.c — format detection and the incremental parser of chat answers (chat_out.h).
 *
 * The parser is a small state machine over a buffer of text not yet classified (`pending`):
 *
 *   CONTENT    text is content until a marker opens a tool-call section (or, at the start of
 *              the answer, a reasoning block or a JSON call). Whatever could still become a
 *              marker (a proper prefix of one at the end of pending) and trailing whitespace
 *              stay in pending; the rest is emitted.
 *   REASONING  text is reasoning until the closing tag; a possible partial closing tag and
 *              trailing whitespace stay in pending.
 *   SECTION    text is a tool-call section's body; it ends at the closing marker, at the end
 *              of its JSON value, or at the end of the answer, depending on the format. Then
 *              the body is parsed (chat_out_calls.c): calls are emitted, or the section's raw
 *              text becomes content.
 *
 * gpt-oss (harmony) answers are a sequence of messages instead and have their own two steps:
 * a header up to <|message|> says where the body goes (reasoning, content, a call), the body
 * runs to <|end|>, <|call|>, <|return|> or the next <|start|>.
 *
 * Each step consumes a prefix of pending and decides only on what it has seen, never on
 * where a piece of input ended, so any chunking of the same text gives the same events.
 */
#include "runtime/chat_out.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/chat_out_internal.h"
#include "util/buf.h"

/* ---- formats ----------------------------------------------------------------------------- */

typedef enum scan_kind {
    SCAN_MARKED, /* until `close` */
    SCAN_JSON,   /* one JSON object or list (whitespace before it) */
    SCAN_NAMED,  /* Mistral: a JSON list, or NAME[ARGS]{...} */
    SCAN_TO_END, /* until the end of the answer */
} scan_kind;

typedef struct section {
    const char *open; /* "" for the answer-is-JSON section */
    const char *close;
    scan_kind scan;
    chat_body body;
} section;

#define MAX_SECTIONS 2
#define MAX_STRIPS   2

typedef struct tool_format {
    const char *name;
    section sections[MAX_SECTIONS];
    const char *strip[MAX_STRIPS]; /* content wrappers removed from the content */
    const char *json_start;        /* characters that open an answer-is-JSON call, or NULL */
    const char *orphan_close;      /* dropped right after an answer-is-JSON call, or NULL */
    int id_len;                    /* alphanumerics after "call_" (Mistral: 9, no prefix) */
} tool_format;

static const tool_format k_tools[TS_CHAT_TOOLS_COUNT] = {
    [TS_CHAT_TOOLS_GENERIC] = {.name = "generic", .json_start = "{[", .id_len = 24},
    /* Small models often leave out the opening <tool_call> and write the JSON and the
     * closing tag: such an answer is taken as a call too (strictly, as for llama3). */
    [TS_CHAT_TOOLS_HERMES] = {.name = "hermes",
                              .sections = {{"<tool_call>", "</tool_call>", SCAN_MARKED,
                                            BODY_HERMES}},
                              .json_start = "{",
                              .orphan_close = "</tool_call>",
                              .id_len = 24},
    [TS_CHAT_TOOLS_LLAMA3] = {.name = "llama3",
                              .sections = {{"<|python_tag|>", NULL, SCAN_TO_END, BODY_PYTHON_TAG}},
                              .json_start = "{",
                              .id_len = 24},
    [TS_CHAT_TOOLS_MISTRAL] = {.name = "mistral",
                               .sections = {{"[TOOL_CALLS]", NULL, SCAN_NAMED, BODY_MISTRAL}},
                               .id_len = 9},
    [TS_CHAT_TOOLS_DEEPSEEK] = {.name = "deepseek",
                                .sections = {{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                                              SCAN_MARKED, BODY_DEEPSEEK}},
                                .id_len = 24},
    [TS_CHAT_TOOLS_FUNCTIONARY] =
        {.name = "functionary",
         .sections = {{"<function=", "</function>", SCAN_MARKED, BODY_FUNCTION},
                      {"<|python_tag|>", NULL, SCAN_TO_END, BODY_PYTHON_CODE}},
         .id_len = 24},
    [TS_CHAT_TOOLS_COMMAND_R] = {.name = "command-r",
                                 .sections = {{"<|START_ACTION|>", "<|END_ACTION|>", SCAN_MARKED,
                                               BODY_JSON_CALLS}},
                                 .strip = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"},
                                 .id_len = 24},
    [TS_CHAT_TOOLS_GRANITE] = {.name = "granite",
                               .sections = {{"<|tool_call|>", NULL, SCAN_JSON, BODY_JSON_CALLS}},
                               .strip = {"<response>", "</response>"},
                               .id_len = 24},
    [TS_CHAT_TOOLS_PHI4] = {.name = "phi4",
                            .sections = {{"<|tool_call|>", "<|/tool_call|>", SCAN_MARKED,
                                          BODY_JSON_CALLS},
                                         {"functools", NULL, SCAN_JSON, BODY_JSON_CALLS}},
                            .id_len = 24},
    [TS_CHAT_TOOLS_FIREFUNCTION] = {.name = "firefunction",
                                    .sections = {{"functools", NULL, SCAN_JSON, BODY_JSON_CALLS}},
                                    .id_len = 24},
    [TS_CHAT_TOOLS_HARMONY] = {.name = "harmony", .id_len = 24},
    [TS_CHAT_TOOLS_KIMI] = {.name = "kimi",
                            .sections = {{"<|tool_calls_section_begin|>",
                                          "<|tool_calls_section_end|>", SCAN_MARKED, BODY_KIMI}},
                            .id_len = 24},
};

static const section k_json_start = {"", NULL, SCAN_JSON, BODY_JSON_START};

static const struct {
    const char *name, *open, *close;
} k_reasoning[TS_CHAT_REASONING_COUNT] = {
    [TS_CHAT_REASONING_NONE] = {"none", NULL, NULL},
    [TS_CHAT_REASONING_THINK] = {"think", "<think>", "</think>"},
    [TS_CHAT_REASONING_MISTRAL] = {"mistral", "[THINK]", "[/THINK]"},
    [TS_CHAT_REASONING_COMMAND_R] = {"command-r", "<|START_THINKING|>", "<|END_THINKING|>"},
    [TS_CHAT_REASONING_HARMONY] = {"harmony", "<|channel|>analysis<|message|>", "<|end|>"},
};

const char *ts_chat_tool_format_name(ts_chat_tool_format f) {
    return (int)f >= 0 && f < TS_CHAT_TOOLS_COUNT ? k_tools[f].name : "?";
}

const char *ts_chat_reasoning_format_name(ts_chat_reasoning_format f) {
    return (int)f >= 0 && f < TS_CHAT_REASONING_COUNT ? k_reasoning[f].name : "?";
}

ts_chat_out_format ts_chat_out_detect(const char *src) {
    ts_chat_profile p = ts_chat_profile_detect(src);
    return (ts_chat_out_format){p.tool_format, p.reasoning_format};
}

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool ts_chat_out_prompt_opens_reasoning(ts_chat_reasoning_format f, const char *prompt,
                                        size_t len) {
    if ((int)f <= (int)TS_CHAT_REASONING_NONE || f >= TS_CHAT_REASONING_COUNT || prompt == NULL) {
        return false;
    }
    while (len > 0 && is_ws(prompt[len - 1])) {
        len--;
    }
    size_t n = strlen(k_reasoning[f].open);
    return len >= n && memcmp(prompt + len - n, k_reasoning[f].open, n) == 0;
}

bool ts_chat_out_active(const ts_chat_out_config *cfg) {
    return cfg->parse_tools || cfg->format.reasoning != TS_CHAT_REASONING_NONE;
}

/* ---- the parser ------------------------------------------------------------------------ */

/* The parser's texts are util's ts_buf; appending reports an allocation failure. */
static bool sbuf_add(ts_buf *b, const char *s, size_t n) {
    ts_buf_put(b, s, n);
    return !b->oom;
}

/* Drops the first n bytes. */
static void sbuf_consume(ts_buf *b, size_t n) {
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
    b->p[b->n] = '\0';
}

typedef enum mode { MODE_CONTENT, MODE_REASONING, MODE_SECTION } mode;

typedef struct event_rec {
    ts_chat_event_kind kind;
    size_t off, len; /* content / reasoning: bytes of the accumulated text */
    int32_t call;
} event_rec;

struct ts_chat_out {
    const tool_format *fmt; /* NULL: tool calls are not parsed */
    const char *think_open, *think_close;
    bool parallel;
    cJSON *tools;
    uint64_t id_state;

    ts_buf pending;
    mode mode;
    const section *sec; /* MODE_SECTION: the section being read */
    /* Section scanning, over pending[0..scan): */
    size_t scan;
    int depth;
    bool json_started, in_str, esc, named_json;

    bool at_start;           /* only whitespace since the answer began or the last call */
    bool reasoning_ok;       /* a reasoning block may still open (nothing emitted yet) */
    bool lstrip;             /* drop whitespace before the next content */
    bool after_section;      /* the last thing emitted was a tool call */
    bool after_json;         /* ... from an answer-is-JSON section */
    bool fence, after_fence; /* that section opened with a ```json fence */
    bool lstrip_reasoning;
    bool finished;
    /* Harmony (gpt-oss): the answer is a sequence of messages. */
    bool harmony;
    bool h_plain;   /* the answer turned out not to use channels: all content */
    bool h_in_body; /* inside a message's body (else reading its header) */
    int h_kind;     /* the body's destination (H_*) */
    char h_name[257];
    bool oom;

    ts_buf content, reasoning;
    chat_calls calls;
    event_rec *ev;
    size_t n_ev, cap_ev;
    ts_chat_event *view; /* [n_ev] built by ts_chat_out_events */
};

ts_chat_out *ts_chat_out_create(const ts_chat_out_config *cfg) {
    ts_chat_out *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return NULL;
    }
    if (cfg->parse_tools && (int)cfg->format.tools >= 0 &&
        cfg->format.tools < TS_CHAT_TOOLS_COUNT) {
        p->fmt = &k_tools[cfg->format.tools];
    }
    if (cfg->format.reasoning > TS_CHAT_REASONING_NONE &&
        cfg->format.reasoning < TS_CHAT_REASONING_COUNT) {
        p->think_open = k_reasoning[cfg->format.reasoning].open;
        p->think_close = k_reasoning[cfg->format.reasoning].close;
    }
    p->parallel = cfg->parallel_tool_calls;
    p->id_state = cfg->id_seed;
    if (cfg->tools != NULL) {
        p->tools = cJSON_Duplicate(cfg->tools, 1);
        if (p->tools == NULL) {
            free(p);
            return NULL;
        }
    }
    p->at_start = true;
    p->harmony = cfg->format.reasoning == TS_CHAT_REASONING_HARMONY;
    p->reasoning_ok = p->think_open != NULL && !p->harmony;
    if (p->think_open != NULL && cfg->reasoning_open && !p->harmony) {
        p->mode = MODE_REASONING;
        p->reasoning_ok = false;
        p->lstrip_reasoning = true;
    }
    /* Empty strings from the start, so the getters never return NULL. */
    if (!sbuf_add(&p->pending, "", 0) || !sbuf_add(&p->content, "", 0) ||
        !sbuf_add(&p->reasoning, "", 0)) {
        ts_chat_out_destroy(p);
        return NULL;
    }
    return p;
}

void ts_chat_out_destroy(ts_chat_out *p) {
    if (p == NULL) {
        return;
    }
    cJSON_Delete(p->tools);
    free(p->pending.p);
    free(p->content.p);
    free(p->reasoning.p);
    rt_chat_calls_truncate(&p->calls, 0);
    free(p->calls.v);
    free(p->ev);
    free(p->view);
    free(p);
}

static bool add_event(ts_chat_out *p, event_rec e) {
    if (p->n_ev > 0 && e.kind != TS_CHAT_EVENT_TOOL_CALL) {
        event_rec *last = &p->ev[p->n_ev - 1];
        if (last->kind == e.kind && last->off + last->len == e.off) {
            last->len += e.len;
            return true;
        }
    }
    if (p->n_ev == p->cap_ev) {
        size_t cap = p->cap_ev ? p->cap_ev * 2 : 8;
        event_rec *v = realloc(p->ev, cap * sizeof *v);
        if (v == NULL) {
            return false;
        }
        p->ev = v;
        p->cap_ev = cap;
    }
    p->ev[p->n_ev++] = e;
    return true;
}

static void emit_text(ts_chat_out *p, ts_chat_event_kind kind, const char *s, size_t n) {
    bool *strip = kind == TS_CHAT_EVENT_CONTENT ? &p->lstrip : &p->lstrip_reasoning;
    if (*strip) {
        while (n > 0 && is_ws(*s)) {
            s++, n--;
        }
    }
    if (n == 0) {
        return;
    }
    *strip = false;
    ts_buf *acc = kind == TS_CHAT_EVENT_CONTENT ? &p->content : &p->reasoning;
    size_t off = acc->n;
    if (!sbuf_add(acc, s, n) ||
        !add_event(p, (event_rec){.kind = kind, .off = off, .len = n, .call = -1})) {
        p->oom = true;
        return;
    }
    if (kind == TS_CHAT_EVENT_CONTENT) {
        p->reasoning_ok = false;
        p->at_start = false;
        p->after_section = false;
        p->after_json = false;
    }
}

static void make_id(ts_chat_out *p, char *buf, int n_chars, bool prefix) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    int at = 0;
    if (prefix) {
        memcpy(buf, "call_", 5);
        at = 5;
    }
    uint64_t x = 0;
    for (int i = 0; i < n_chars; i++) {
        if (i % 10 == 0) {
            /* splitmix64: ids look random, and a request's seed makes them unique */
            p->id_state += 0x9E3779B97F4A7C15ull;
            x = p->id_state;
            x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
            x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
            x ^= x >> 31;
        }
        buf[at++] = alnum[x % 62];
        x /= 62;
    }
    buf[at] = '\0';
}

/* Emits the calls found (only the first of the answer without parallel calls). */
static void emit_calls(ts_chat_out *p, chat_calls *found) {
    for (size_t i = 0; i < found->n; i++) {
        ts_chat_tool_call c = found->v[i];
        found->v[i] = (ts_chat_tool_call){0};
        if (!p->parallel && p->calls.n > 0) {
            free(c.id), free(c.name), free(c.arguments);
            continue;
        }
        if (c.id == NULL) {
            char buf[40];
            bool mistral = p->fmt->id_len == 9;
            make_id(p, buf, p->fmt->id_len, !mistral);
            c.id = malloc(strlen(buf) + 1);
            if (c.id != NULL) {
                strcpy(c.id, buf);
            }
        }
        if (c.id != NULL && p->calls.n == p->calls.cap) {
            size_t cap = p->calls.cap ? p->calls.cap * 2 : 4;
            ts_chat_tool_call *v = realloc(p->calls.v, cap * sizeof *v);
            if (v != NULL) {
                p->calls.v = v;
                p->calls.cap = cap;
            }
        }
        if (c.id == NULL || p->calls.n == p->calls.cap) {
            free(c.id), free(c.name), free(c.arguments);
            p->oom = true;
            continue;
        }
        p->calls.v[p->calls.n++] = c;
        if (!add_event(p, (event_rec){.kind = TS_CHAT_EVENT_TOOL_CALL,
                                      .call = (int32_t)(p->calls.n - 1)})) {
            p->oom = true;
        }
    }
    found->n = 0;
}

/* Longest proper prefix of lit that s[0..len) ends with. */
static size_t partial_suffix(const char *s, size_t len, const char *lit) {
    size_t n = strlen(lit);
    for (size_t k = n - 1 < len ? n - 1 : len; k > 0; k--) {
        if (memcmp(s + len - k, lit, k) == 0) {
            return k;
        }
    }
    return 0;
}

static size_t find_lit(const char *s, size_t len, size_t from, const char *lit) {
    size_t n = strlen(lit);
    for (size_t i = from; i + n <= len; i++) {
        if (s[i] == lit[0] && memcmp(s + i, lit, n) == 0) {
            return i;
        }
    }
    return len;
}

static void start_section(ts_chat_out *p, const section *sec) {
    p->mode = MODE_SECTION;
    p->sec = sec;
    p->scan = 0;
    p->depth = 0;
    p->json_started = p->in_str = p->esc = p->named_json = p->fence = false;
}

/* The section's text goes back to the content: its opening marker, and, when whole is set,
 * the body consumed so far and the closing marker. */
static void section_failed(ts_chat_out *p, size_t body_len, bool with_close) {
    const section *sec = p->sec;
    p->mode = MODE_CONTENT;
    p->sec = NULL;
    p->at_start = false;
    emit_text(p, TS_CHAT_EVENT_CONTENT, sec->open, strlen(sec->open));
    if (body_len > 0 || with_close) {
        emit_text(p, TS_CHAT_EVENT_CONTENT, p->pending.p, body_len);
        if (with_close && sec->close != NULL) {
            emit_text(p, TS_CHAT_EVENT_CONTENT, sec->close, strlen(sec->close));
        }
    }
}

/* Parses pending[0..body_len) as the section's body; consume bytes of pending are used. */
static void section_done(ts_chat_out *p, size_t body_len, size_t consume, bool closed) {
    chat_calls found = {0};
    bool strict = p->sec == &k_json_start;
    if (rt_chat_calls_parse(p->sec->body, p->pending.p, body_len, p->tools, strict, &found)) {
        emit_calls(p, &found);
        p->after_json = strict;
        p->after_fence = p->fence;
        p->mode = MODE_CONTENT;
        p->sec = NULL;
        p->at_start = true;
        p->lstrip = true;
        p->after_section = true;
        p->reasoning_ok = false;
    } else {
        section_failed(p, body_len, closed);
        /* What followed the body (the closing marker) was emitted with it. */
    }
    rt_chat_calls_truncate(&found, 0);
    free(found.v);
    sbuf_consume(&p->pending, consume);
}

/* Advances the JSON scanner over pending[scan..len). Returns the end of the value (one past
 * its last byte) or 0 while it is open; -1 when the text cannot be a JSON object or list. */
static long scan_json(ts_chat_out *p, size_t from) {
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    if (p->scan < from) {
        p->scan = from;
    }
    for (; p->scan < len; p->scan++) {
        char c = s[p->scan];
        if (!p->json_started) {
            if (is_ws(c)) {
                continue;
            }
            if (c != '{' && c != '[') {
                return -1;
            }
            p->json_started = true;
        }
        if (p->in_str) {
            if (p->esc) {
                p->esc = false;
            } else if (c == '\\') {
                p->esc = true;
            } else if (c == '"') {
                p->in_str = false;
            }
        } else if (c == '"') {
            p->in_str = true;
        } else if (c == '{' || c == '[') {
            p->depth++;
        } else if (c == '}' || c == ']') {
            if (--p->depth == 0) {
                p->scan++;
                return (long)p->scan;
            }
        }
    }
    return 0;
}

/* Mistral: a JSON list right away, or NAME([CALL_ID]ID)[ARGS] and then a JSON object. */
static long scan_named(ts_chat_out *p) {
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    if (p->named_json) {
        return scan_json(p, p->scan);
    }
    size_t i = 0;
    while (i < len && is_ws(s[i])) {
        i++;
    }
    if (i == len) {
        return 0;
    }
    /* A function name never starts with a bracket: "[" or "{" opens Nemo's JSON list. */
    if (s[i] == '[' || s[i] == '{') {
        p->named_json = true;
        return scan_json(p, i);
    }
    size_t at = find_lit(s, len, i, "[ARGS]");
    for (size_t k = i; k < (at < len ? at : len); k++) {
        char c = s[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == ':' || c == '[' || c == ']';
        if (!ok || k - i > 512) {
            return -1;
        }
    }
    if (at == len) {
        return 0;
    }
    p->named_json = true;
    return scan_json(p, at + 6);
}

static void step_section(ts_chat_out *p, bool final, bool *progress) {
    const section *sec = p->sec;
    long end = 0;
    switch (sec->scan) {
    case SCAN_MARKED: {
        size_t cl = strlen(sec->close);
        size_t from = p->scan >= cl ? p->scan - cl + 1 : 0;
        size_t at = find_lit(p->pending.p, p->pending.n, from, sec->close);
        if (at < p->pending.n) {
            section_done(p, at, at + cl, true);
            *progress = true;
            return;
        }
        p->scan = p->pending.n;
        break;
    }
    case SCAN_JSON:
        end = scan_json(p, 0);
        break;
    case SCAN_NAMED:
        end = scan_named(p);
        break;
    case SCAN_TO_END:
        break;
    }
    if (end < 0) {
        /* Not a call after all: the marker is content, its text is read again as content. */
        section_failed(p, 0, false);
        *progress = true;
        return;
    }
    if (end > 0) {
        section_done(p, (size_t)end, (size_t)end, true);
        *progress = true;
        return;
    }
    if (final) {
        /* The answer ended inside the section: parse what is there. */
        section_done(p, p->pending.n, p->pending.n, false);
        *progress = true;
    }
}

static void step_reasoning(ts_chat_out *p, bool final, bool *progress) {
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    size_t at = find_lit(s, len, 0, p->think_close);
    if (at < len) {
        size_t body = at;
        while (body > 0 && is_ws(s[body - 1])) {
            body--;
        }
        emit_text(p, TS_CHAT_EVENT_REASONING, s, body);
        sbuf_consume(&p->pending, at + strlen(p->think_close));
        p->mode = MODE_CONTENT;
        p->at_start = true;
        p->lstrip = true;
        *progress = true;
        return;
    }
    size_t keep = final ? 0 : partial_suffix(s, len, p->think_close);
    size_t upto = len - keep;
    while (upto > 0 && is_ws(s[upto - 1])) {
        upto--; /* trailing whitespace: dropped if the block ends here */
    }
    emit_text(p, TS_CHAT_EVENT_REASONING, s, upto);
    sbuf_consume(&p->pending, final ? len : upto);
}

/* The earliest section opening or content wrapper in pending at or after from. */
static size_t find_marker(const ts_chat_out *p, size_t from, const section **sec,
                          const char **strip) {
    size_t best = p->pending.n;
    *sec = NULL;
    *strip = NULL;
    if (p->fmt == NULL) {
        return best;
    }
    for (int i = 0; i < MAX_SECTIONS && p->fmt->sections[i].open != NULL; i++) {
        size_t at = find_lit(p->pending.p, best, from, p->fmt->sections[i].open);
        if (at < best) {
            best = at, *sec = &p->fmt->sections[i], *strip = NULL;
        }
    }
    for (int i = 0; i < MAX_STRIPS && p->fmt->strip[i] != NULL; i++) {
        size_t at = find_lit(p->pending.p, best, from, p->fmt->strip[i]);
        if (at < best) {
            best = at, *sec = NULL, *strip = p->fmt->strip[i];
        }
    }
    return best;
}

static size_t marker_partial(const ts_chat_out *p) {
    size_t keep = 0;
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    if (p->fmt == NULL) {
        return 0;
    }
    for (int i = 0; i < MAX_SECTIONS && p->fmt->sections[i].open != NULL; i++) {
        size_t k = partial_suffix(s, len, p->fmt->sections[i].open);
        keep = k > keep ? k : keep;
    }
    for (int i = 0; i < MAX_STRIPS && p->fmt->strip[i] != NULL; i++) {
        size_t k = partial_suffix(s, len, p->fmt->strip[i]);
        keep = k > keep ? k : keep;
    }
    return keep;
}

static void step_content(ts_chat_out *p, bool final, bool *progress) {
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    if (p->at_start) {
        size_t i = 0;
        bool semi = p->after_section && p->fmt != NULL && p->fmt->json_start != NULL;
        while (i < len && (is_ws(s[i]) || (semi && s[i] == ';'))) {
            i++;
        }
        if (i == len && !final) {
            return; /* only whitespace so far: wait */
        }
        const char *orphan = p->after_json ? (p->after_fence ? "```" : p->fmt->orphan_close) : NULL;
        if (i < len && orphan != NULL) {
            size_t n = strlen(orphan);
            size_t have = len - i < n ? len - i : n;
            if (memcmp(s + i, orphan, have) == 0) {
                if (have < n && !final) {
                    return; /* could be the closing tag */
                }
                if (have == n) {
                    sbuf_consume(&p->pending, i + n);
                    p->after_json = false;
                    *progress = true;
                    return;
                }
            }
        }
        if (i < len && p->reasoning_ok) {
            size_t n = strlen(p->think_open);
            size_t have = len - i < n ? len - i : n;
            if (memcmp(s + i, p->think_open, have) == 0) {
                if (have < n && !final) {
                    return; /* could be the opening tag */
                }
                if (have == n) {
                    sbuf_consume(&p->pending, i + n);
                    p->mode = MODE_REASONING;
                    p->reasoning_ok = false;
                    p->lstrip_reasoning = true;
                    *progress = true;
                    return;
                }
            }
        }
        if (i < len && p->fmt != NULL && p->fmt->json_start != NULL && s[i] == '`') {
            /* A call in a Markdown fence: ```json, a line break, then the JSON. */
            size_t j = i, rest = len - i;
            if (memcmp(s + i, "```", rest < 3 ? rest : 3) == 0 && rest < 3 && !final) {
                return;
            }
            if (rest >= 3 && memcmp(s + i, "```", 3) == 0) {
                j = i + 3;
                size_t r = len - j;
                if (r >= 4 && memcmp(s + j, "json", 4) == 0) {
                    j += 4;
                } else if (r < 4 && memcmp(s + j, "json", r) == 0 && !final) {
                    return;
                }
                size_t k = j;
                while (k < len && is_ws(s[k])) {
                    k++;
                }
                if (k == len && !final) {
                    return;
                }
                if (k < len && k > j && strchr(p->fmt->json_start, s[k]) != NULL) {
                    size_t drop = p->after_section ? i : 0;
                    sbuf_consume(&p->pending, drop);
                    start_section(p, &k_json_start);
                    p->scan = k - drop;
                    p->fence = true;
                    *progress = true;
                    return;
                }
            }
        }
        if (i < len && p->fmt != NULL && p->fmt->json_start != NULL &&
            strchr(p->fmt->json_start, s[i]) != NULL) {
            /* Leading whitespace stays in the body, so a non-call is returned as written;
             * a ';' between calls does not. */
            sbuf_consume(&p->pending, p->after_section ? i : 0);
            start_section(p, &k_json_start);
            *progress = true;
            return;
        }
        if (i < len || final) {
            p->at_start = false;
            if (p->after_section) {
                sbuf_consume(&p->pending, i); /* a ';' between calls is not content */
                s = p->pending.p;
                len = p->pending.n;
            }
        }
    }
    const section *sec = NULL;
    const char *strip = NULL;
    size_t at = find_marker(p, 0, &sec, &strip);
    if (at < len) {
        if (sec != NULL) {
            size_t body = at;
            while (body > 0 && is_ws(s[body - 1])) {
                body--;
            }
            emit_text(p, TS_CHAT_EVENT_CONTENT, s, body);
            sbuf_consume(&p->pending, at + strlen(sec->open));
            start_section(p, sec);
        } else {
            emit_text(p, TS_CHAT_EVENT_CONTENT, s, at);
            sbuf_consume(&p->pending, at + strlen(strip));
        }
        *progress = true;
        return;
    }
    if (final) {
        /* After a call, lstrip is set: whitespace alone is dropped, text is kept. */
        emit_text(p, TS_CHAT_EVENT_CONTENT, s, len);
        sbuf_consume(&p->pending, len);
        return;
    }
    size_t upto = len - marker_partial(p);
    while (upto > 0 && is_ws(s[upto - 1])) {
        upto--;
    }
    emit_text(p, TS_CHAT_EVENT_CONTENT, s, upto);
    sbuf_consume(&p->pending, upto);
}

/* ---- harmony ------------------------------------------------------------------------------ */

enum { H_CONTENT, H_REASONING, H_TOOL };

#define H_MAX_HEADER 512

static const char *const k_h_ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

/* The word after `key` in a header (up to whitespace or "<|"), or NULL. */
static const char *h_word(const char *h, size_t len, const char *key, size_t *n) {
    size_t at = find_lit(h, len, 0, key);
    if (at == len) {
        return NULL;
    }
    const char *w = h + at + strlen(key);
    size_t k = 0;
    while (w + k < h + len && !is_ws(w[k]) && w[k] != '<') {
        k++;
    }
    *n = k;
    return w;
}

static void h_header(ts_chat_out *p, const char *h, size_t len) {
    size_t n_ch = 0, n_to = 0;
    const char *ch = h_word(h, len, "<|channel|>", &n_ch);
    const char *to = h_word(h, len, "to=", &n_to);
    if (to != NULL && n_to > 10 && memcmp(to, "functions.", 10) == 0) {
        to += 10, n_to -= 10;
    }
    p->h_kind = H_CONTENT;
    if (to != NULL && n_to > 0 && !(n_to == 9 && memcmp(to, "assistant", 9) == 0) &&
        n_to < sizeof p->h_name && p->fmt != NULL) {
        p->h_kind = H_TOOL;
        memcpy(p->h_name, to, n_to);
        p->h_name[n_to] = '\0';
    } else if (ch != NULL && n_ch == 8 && memcmp(ch, "analysis", 8) == 0) {
        p->h_kind = H_REASONING;
    }
}

static void step_harmony(ts_chat_out *p, bool final, bool *progress) {
    const char *s = p->pending.p;
    size_t len = p->pending.n;
    if (p->h_plain) {
        emit_text(p, TS_CHAT_EVENT_CONTENT, s, len);
        sbuf_consume(&p->pending, len);
        return;
    }
    if (!p->h_in_body) {
        /* A header starts with a special token or "to=" and ends with <|message|> within
         * H_MAX_HEADER bytes; an answer that does not is plain text, all content. Both
         * tests look only at what the first bytes are, so any chunking decides alike. */
        size_t i = 0;
        while (i < len && is_ws(s[i])) {
            i++;
        }
        size_t rest = len - i;
        bool header = rest == 0 || (rest >= 2 ? memcmp(s + i, "<|", 2) == 0 : s[i] == '<') ||
                      memcmp(s + i, "to=", rest < 3 ? rest : 3) == 0;
        size_t lim = len < H_MAX_HEADER ? len : H_MAX_HEADER;
        size_t at = header ? find_lit(s, lim, 0, "<|message|>") : lim;
        if (at < lim) {
            h_header(p, s, at);
            sbuf_consume(&p->pending, at + 11);
            p->h_in_body = true;
            *progress = true;
        } else if (!header || len >= H_MAX_HEADER) {
            p->h_plain = true;
            *progress = true;
        } else if (final) {
            sbuf_consume(&p->pending, len); /* a header with no message: nothing to say */
        }
        return;
    }
    size_t end = len, end_len = 0;
    for (size_t k = 0; k < sizeof k_h_ends / sizeof k_h_ends[0]; k++) {
        size_t at = find_lit(s, end, 0, k_h_ends[k]);
        if (at < end) {
            end = at;
            /* <|start|> opens the next message's header: it stays. */
            end_len = k == 3 ? 0 : strlen(k_h_ends[k]);
        }
    }
    if (p->h_kind == H_TOOL) {
        if (end == len && !final) {
            return;
        }
        chat_calls found = {0};
        if (rt_chat_calls_add(&found, p->h_name, strlen(p->h_name), s, end)) {
            emit_calls(p, &found);
        } else {
            emit_text(p, TS_CHAT_EVENT_CONTENT, s, end);
        }
        rt_chat_calls_truncate(&found, 0);
        free(found.v);
    } else {
        ts_chat_event_kind kind =
            p->h_kind == H_REASONING ? TS_CHAT_EVENT_REASONING : TS_CHAT_EVENT_CONTENT;
        if (end == len && !final) {
            size_t keep = 0;
            for (size_t k = 0; k < sizeof k_h_ends / sizeof k_h_ends[0]; k++) {
                size_t m = partial_suffix(s, len, k_h_ends[k]);
                keep = m > keep ? m : keep;
            }
            emit_text(p, kind, s, len - keep);
            sbuf_consume(&p->pending, len - keep);
            return;
        }
        emit_text(p, kind, s, end);
    }
    sbuf_consume(&p->pending, end + end_len);
    p->h_in_body = false;
    *progress = true;
}

static void run(ts_chat_out *p, bool final) {
    bool progress = true;
    while (progress && !p->oom && p->harmony) {
        progress = false;
        step_harmony(p, final, &progress);
    }
    while (progress && !p->oom && !p->harmony) {
        progress = false;
        switch (p->mode) {
        case MODE_CONTENT:
            step_content(p, final, &progress);
            break;
        case MODE_REASONING:
            step_reasoning(p, final, &progress);
            break;
        case MODE_SECTION:
            step_section(p, final, &progress);
            break;
        }
    }
}

ts_status ts_chat_out_feed(ts_chat_out *p, const char *text, size_t len) {
    if (p->oom) {
        return TS_ERR_NOMEM;
    }
    if (p->finished || len == 0) {
        return TS_OK;
    }
    if (!sbuf_add(&p->pending, text, len)) {
        p->oom = true;
        return TS_ERR_NOMEM;
    }
    run(p, false);
    return p->oom ? TS_ERR_NOMEM : TS_OK;
}

ts_status ts_chat_out_finish(ts_chat_out *p) {
    if (p->oom) {
        return TS_ERR_NOMEM;
    }
    if (!p->finished) {
        p->finished = true;
        run(p, true);
    }
    return p->oom ? TS_ERR_NOMEM : TS_OK;
}

size_t ts_chat_out_events(ts_chat_out *p, const ts_chat_event **events) {
    *events = NULL;
    if (p->n_ev == 0) {
        return 0;
    }
    ts_chat_event *v = realloc(p->view, p->n_ev * sizeof *v);
    if (v == NULL) {
        p->oom = true;
        return 0;
    }
    p->view = v;
    for (size_t i = 0; i < p->n_ev; i++) {
        const event_rec *e = &p->ev[i];
        ts_chat_event out = {.kind = e->kind, .index = -1};
        if (e->kind == TS_CHAT_EVENT_TOOL_CALL) {
            const ts_chat_tool_call *c = &p->calls.v[e->call];
            out.index = e->call;
            out.id = c->id;
            out.name = c->name;
            out.arguments = c->arguments;
        } else {
            const ts_buf *acc = e->kind == TS_CHAT_EVENT_CONTENT ? &p->content : &p->reasoning;
            out.text = acc->p + e->off;
            out.len = e->len;
        }
        v[i] = out;
    }
    *events = v;
    return p->n_ev;
}

void ts_chat_out_clear(ts_chat_out *p) {
    p->n_ev = 0;
}

const char *ts_chat_out_content(const ts_chat_out *p, size_t *len) {
    if (len != NULL) {
        *len = p->content.n;
    }
    return p->content.p;
}

const char *ts_chat_out_reasoning(const ts_chat_out *p, size_t *len) {
    if (len != NULL) {
        *len = p->reasoning.n;
    }
    return p->reasoning.p;
}

size_t ts_chat_out_tool_calls(const ts_chat_out *p, const ts_chat_tool_call **calls) {
    *calls = p->calls.v;
    return p->calls.n;
}
