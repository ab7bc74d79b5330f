/* fuzz_chat_out.c — libFuzzer harness for the chat answer parser (src/runtime/chat_out.c).
 *
 * Input: byte 0 picks the tool-call format, byte 1 the reasoning format and flags (tools
 * parsed, parallel calls, reasoning opened by the prompt, tools offered), byte 2 seeds the
 * chunk sizes; the rest is the model's answer. The answer is parsed whole and in chunks; both
 * must give the same content, reasoning and calls, the events must add up to them, every
 * call's arguments must be a JSON object and the JSON shapes must build. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat_out.h"

static const char k_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"tz\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}}}}}]";

typedef struct acc {
    char *content, *reasoning, *calls;
    size_t nc, nr, nk;
} acc;

static void add(char **b, size_t *n, const char *s, size_t len) {
    char *p = realloc(*b, *n + len + 1);
    if (p == NULL) {
        abort();
    }
    memcpy(p + *n, s, len);
    *n += len;
    p[*n] = '\0';
    *b = p;
}

static void drain(ts_chat_out *p, acc *a) {
    const ts_chat_event *ev = NULL;
    size_t n = ts_chat_out_events(p, &ev);
    for (size_t i = 0; i < n; i++) {
        cJSON *d[2];
        int k = ts_chat_out_event_deltas(&ev[i], d);
        if (k == 0) {
            abort();
        }
        cJSON_Delete(d[0]);
        cJSON_Delete(d[1]);
        if (ev[i].kind == TS_CHAT_EVENT_CONTENT) {
            add(&a->content, &a->nc, ev[i].text, ev[i].len);
        } else if (ev[i].kind == TS_CHAT_EVENT_REASONING) {
            add(&a->reasoning, &a->nr, ev[i].text, ev[i].len);
        } else {
            add(&a->calls, &a->nk, ev[i].name, strlen(ev[i].name));
            add(&a->calls, &a->nk, ev[i].arguments, strlen(ev[i].arguments) + 1);
            cJSON *args = cJSON_Parse(ev[i].arguments);
            if (!cJSON_IsObject(args) || ev[i].id == NULL || ev[i].id[0] == '\0') {
                abort();
            }
            cJSON_Delete(args);
        }
    }
    ts_chat_out_clear(p);
}

/* Parses text in chunks (seed 0: whole) and checks the events against the getters. */
static ts_chat_out *parse(const ts_chat_out_config *cfg, const char *text, size_t len,
                          uint32_t seed, acc *a) {
    ts_chat_out *p = ts_chat_out_create(cfg);
    if (p == NULL) {
        abort();
    }
    size_t at = 0;
    while (at < len) {
        size_t n = seed == 0 ? len - at : 1 + (seed = seed * 1103515245u + 12345u) % 7;
        n = n < len - at ? n : len - at;
        if (ts_chat_out_feed(p, text + at, n) != TS_OK) {
            abort();
        }
        drain(p, a);
        at += n;
    }
    if (ts_chat_out_finish(p) != TS_OK) {
        abort();
    }
    drain(p, a);
    size_t nc = 0, nr = 0;
    const char *c = ts_chat_out_content(p, &nc);
    const char *r = ts_chat_out_reasoning(p, &nr);
    if (nc != a->nc || (nc > 0 && memcmp(c, a->content, nc) != 0) || nr != a->nr ||
        (nr > 0 && memcmp(r, a->reasoning, nr) != 0)) {
        abort();
    }
    cJSON *m = ts_chat_out_message_json(p);
    if (m == NULL) {
        abort();
    }
    cJSON_Delete(m);
    return p;
}

static bool same(const char *x, size_t nx, const char *y, size_t ny) {
    return nx == ny && (nx == 0 || memcmp(x, y, nx) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) {
        return 0;
    }
    static cJSON *tools;
    if (tools == NULL) {
        tools = cJSON_Parse(k_tools);
    }
    ts_chat_out_config cfg = {
        .format = {(ts_chat_tool_format)(data[0] % TS_CHAT_TOOLS_COUNT),
                   (ts_chat_reasoning_format)(data[1] % TS_CHAT_REASONING_COUNT)},
        .parse_tools = (data[1] & 0x10) == 0,
        .parallel_tool_calls = (data[1] & 0x20) == 0,
        .reasoning_open = (data[1] & 0x40) != 0,
        .tools = (data[1] & 0x80) == 0 ? tools : NULL,
        .id_seed = data[2],
    };
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    acc whole = {0}, pieces = {0};
    ts_chat_out *a = parse(&cfg, text, len, 0, &whole);
    ts_chat_out *b = parse(&cfg, text, len, 1u + data[2], &pieces);
    if (!same(whole.content, whole.nc, pieces.content, pieces.nc) ||
        !same(whole.reasoning, whole.nr, pieces.reasoning, pieces.nr) ||
        !same(whole.calls, whole.nk, pieces.calls, pieces.nk)) {
        abort();
    }
    const ts_chat_tool_call *calls = NULL;
    if (ts_chat_out_tool_finish(a, TS_FINISH_STOP) != (ts_chat_out_tool_calls(a, &calls) > 0)) {
        abort();
    }
    ts_chat_out_destroy(a);
    ts_chat_out_destroy(b);
    free(whole.content), free(whole.reasoning), free(whole.calls);
    free(pieces.content), free(pieces.reasoning), free(pieces.calls);
    return 0;
}
