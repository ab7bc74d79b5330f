/*
 * chat_profile.c — a context's chat profile (tessera.h): which renderer its chat template
 * uses, the model's tool-call and reasoning formats, and whether the template renders the
 * offered tools. Read once from the template's Jinja source when the context is created; the
 * server's answer parser, its tool grammars and its request rewrites all take it from here.
 * This file needs nothing but tessera.h (the fuzzers link it alone); a context's profile is
 * chosen in chat.c (rt_chat_profile).
 */
#include <stdbool.h>
#include <string.h>

#include "tessera.h"

static bool has(const char *src, const char *lit) {
    return strstr(src, lit) != NULL;
}

ts_chat_profile ts_chat_profile_detect(const char *src) {
    ts_chat_profile p = {.renderer = NULL,
                         .tool_format = TS_CHAT_TOOLS_GENERIC,
                         .reasoning_format = TS_CHAT_REASONING_NONE};
    if (src == NULL) {
        return p;
    }
    p.renderer = "jinja";
    p.renders_tools = has(src, "tools");
    /* Most specific markers first: several templates also mention <tool_call> or
     * <function= in their instructions. */
    if (has(src, "<|channel|>") && has(src, "<|message|>")) {
        /* gpt-oss: channels carry the reasoning, the answer and the calls alike. */
        p.tool_format = TS_CHAT_TOOLS_HARMONY;
        p.reasoning_format = TS_CHAT_REASONING_HARMONY;
        return p;
    }
    if (has(src, "<|tool_calls_section_begin|>")) {
        p.tool_format = TS_CHAT_TOOLS_KIMI;
    } else if (has(src, "<|START_ACTION|>")) {
        p.tool_format = TS_CHAT_TOOLS_COMMAND_R;
    } else if (has(src, "tool▁calls▁begin")) {
        p.tool_format = TS_CHAT_TOOLS_DEEPSEEK;
    } else if (has(src, "[TOOL_CALLS]")) {
        p.tool_format = TS_CHAT_TOOLS_MISTRAL;
    } else if (has(src, "<tool_call>")) {
        p.tool_format = TS_CHAT_TOOLS_HERMES;
    } else if (has(src, "<|tool_call|>") && !has(src, "<|/tool_call|>")) {
        p.tool_format = TS_CHAT_TOOLS_GRANITE;
    } else if (has(src, "<|tool_call|>") || has(src, "<|tool|>")) {
        p.tool_format = TS_CHAT_TOOLS_PHI4;
    } else if (has(src, "<function=")) {
        p.tool_format = TS_CHAT_TOOLS_FUNCTIONARY;
    } else if (has(src, "functools")) {
        p.tool_format = TS_CHAT_TOOLS_FIREFUNCTION;
    } else if (has(src, "<|python_tag|>") || has(src, "ipython")) {
        p.tool_format = TS_CHAT_TOOLS_LLAMA3;
    }
    if (has(src, "<|START_THINKING|>")) {
        p.reasoning_format = TS_CHAT_REASONING_COMMAND_R;
    } else if (has(src, "[THINK]")) {
        p.reasoning_format = TS_CHAT_REASONING_MISTRAL;
    } else if (has(src, "<think>") || has(src, "</think>")) {
        p.reasoning_format = TS_CHAT_REASONING_THINK;
    }
    return p;
}
