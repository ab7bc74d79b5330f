/*
 * chat_caps.c — what a chat template can render, found by rendering small test conversations
 * with it once when the server starts (the way llama.cpp's minja probes a template), so that
 * api_chat.c can rewrite what a template cannot render instead of failing the request.
 *
 * Each probe puts a needle (a string no template writes by itself) where a capability would
 * show it and looks for the needle in the output: a system turn's text, a tool's name, the
 * argument of an assistant's tool call, a tool turn's result. A render that fails counts as
 * "cannot". Content null is tested against content "": a template that renders the second but
 * not the first needs null turned into "".
 *
 * The probes run under the caller's render function, which bounds them (a template given on
 * the command line may be hostile). When the plain user turn itself does not render, or a
 * probe is stopped by a limit, nothing is known and nothing is rewritten (caps.probed false).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat_caps.h"

#define USER_NEEDLE   "<User Needle>"
#define SYSTEM_NEEDLE "<System Needle>"
#define ARG_NEEDLE    "argument_needle"
#define RESULT_NEEDLE "Some response!"

static const char k_user[] = "{\"role\":\"user\",\"content\":\"" USER_NEEDLE "\"}";

/* One assistant turn calling `name` with an argument object. */
#define CALL(content, name)                                                                        \
    "{\"role\":\"assistant\",\"content\":" content ",\"tool_calls\":[{\"id\":\"call_1___\","       \
    "\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":{\"" ARG_NEEDLE       \
    "\":\"print('Hello, World!')\"}}}]}"

typedef enum probe_result { NO, YES, STOPPED } probe_result;

/* Renders `json`; YES when the output holds needle (and, when given, needle2). */
static probe_result probe(ts_chat_render_fn fn, void *user, const char *json, const char *needle,
                          const char *needle2) {
    char *text = NULL;
    ts_status st = fn(user, json, &text);
    if (st == TS_ERR_LIMIT || st == TS_ERR_NOMEM) {
        ts_free(text);
        return STOPPED;
    }
    bool found = st == TS_OK && text != NULL && strstr(text, needle) != NULL &&
                 (needle2 == NULL || strstr(text, needle2) != NULL);
    ts_free(text);
    return found ? YES : NO;
}

void ts_chat_caps_probe(ts_chat_render_fn fn, void *user, ts_chat_caps *out) {
    memset(out, 0, sizeof *out);
    ts_chat_caps c = {0};
    static const char *const k_probes[] = {
        /* 0: the plain turn */
        "{\"messages\":[{\"role\":\"user\",\"content\":\"" USER_NEEDLE
        "\"}],\"add_generation_prompt\":false}",
        /* 1: a system turn */
        "{\"messages\":[{\"role\":\"system\",\"content\":\"" SYSTEM_NEEDLE "\"},"
        "{\"role\":\"user\",\"content\":\"" USER_NEEDLE "\"}],\"add_generation_prompt\":false}",
        /* 2: tools */
        "{\"messages\":[{\"role\":\"user\",\"content\":\"" USER_NEEDLE "\"}],\"tools\":["
        "{\"type\":\"function\",\"function\":{\"name\":\"some_tool\",\"description\":\"Some "
        "tool.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"arg\":{\"type\":"
        "\"string\",\"description\":\"Some argument.\"}},\"required\":[\"arg\"]}}}],"
        "\"add_generation_prompt\":false}",
        /* 3, 4: assistant turns with content "" and null (two of each, as some templates
         * treat the last assistant turn apart) */
        "{\"messages\":[{\"role\":\"user\",\"content\":\"" USER_NEEDLE "\"},"
        "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"" USER_NEEDLE
        "\"},{\"role\":\"assistant\",\"content\":\"\"}],\"add_generation_prompt\":false}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"" USER_NEEDLE "\"},"
        "{\"role\":\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"" USER_NEEDLE
        "\"},{\"role\":\"assistant\",\"content\":null}],\"add_generation_prompt\":false}",
    };
    probe_result base = probe(fn, user, k_probes[0], USER_NEEDLE, NULL);
    if (base != YES) {
        return; /* nothing renders (or a limit stopped it): nothing can be told */
    }
    probe_result sys = probe(fn, user, k_probes[1], SYSTEM_NEEDLE, NULL);
    probe_result tools = probe(fn, user, k_probes[2], "some_tool", NULL);
    probe_result empty = probe(fn, user, k_probes[3], USER_NEEDLE, NULL);
    probe_result null = probe(fn, user, k_probes[4], USER_NEEDLE, NULL);
    c.system_role = sys == YES;
    c.tools = tools == YES;
    c.needs_content = empty == YES && null != YES;
    /* The call probes write content as the template wants it. */
    char calls[1024], resp[1536];
    if (c.needs_content) {
        snprintf(calls, sizeof calls,
                 "{\"messages\":[%s," CALL("\"\"", "ipython") "],\"add_generation_prompt\":false}",
                 k_user);
        snprintf(resp, sizeof resp,
                 "{\"messages\":[%s," CALL(
                     "\"\"", "test_tool1") ",{\"role\":\"tool\",\"name\":"
                                           "\"test_tool1\",\"content\":\"" RESULT_NEEDLE
                                           "\",\"tool_call_id\":"
                                           "\"call_1___\"}],\"add_generation_prompt\":false}",
                 k_user);
    } else {
        snprintf(calls, sizeof calls,
                 "{\"messages\":[%s," CALL("null", "ipython") "],\"add_generation_prompt\":false}",
                 k_user);
        snprintf(resp, sizeof resp,
                 "{\"messages\":[%s," CALL(
                     "null", "test_tool1") ",{\"role\":\"tool\",\"name\":"
                                           "\"test_tool1\",\"content\":\"" RESULT_NEEDLE
                                           "\",\"tool_call_id\":"
                                           "\"call_1___\"}],\"add_generation_prompt\":false}",
                 k_user);
    }
    probe_result call = probe(fn, user, calls, ARG_NEEDLE, NULL);
    c.tool_calls = call == YES;
    probe_result result = NO;
    if (c.tool_calls) {
        result = probe(fn, user, resp, RESULT_NEEDLE, NULL);
    }
    c.tool_responses = result == YES;
    if (sys == STOPPED || tools == STOPPED || empty == STOPPED || null == STOPPED ||
        call == STOPPED || result == STOPPED) {
        return; /* a limit cut a probe short: what it would have found is unknown */
    }
    c.probed = true;
    *out = c;
}

void ts_chat_caps_describe(const ts_chat_caps *c, char *buf, size_t size) {
    if (!c->probed) {
        snprintf(buf, size,
                 "not probed (the template's test renders failed or hit a limit); "
                 "requests are rendered as given");
        return;
    }
    snprintf(buf, size, "system role %s, tools %s, tool calls %s, tool results %s%s",
             c->system_role ? "yes" : "no", c->tools ? "yes" : "no", c->tool_calls ? "yes" : "no",
             c->tool_responses ? "yes" : "no", c->needs_content ? ", content null fails" : "");
}
