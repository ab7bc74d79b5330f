/*
 * chat_config.c — how a chat request's answers are parsed (ts_server_chat_config): the
 * formats of the chat template in use, the request's tools and tool_choice, and whether the
 * rendered prompt left the answer inside a reasoning block.
 */
#include "server/server_internal.h"

/* Tokens of the prompt's end that are detokenized to see whether it opened the reasoning:
 * enough for "<think>\n" or "[THINK]" however the vocabulary splits them. */
#define PROMPT_TAIL_TOKENS 8

void ts_server_chat_config(ts_server *s, const ts_api_request *r, const int32_t *ids, int32_t n_ids,
                           ts_chat_out_config *cfg) {
    /* The formats of the context's chat profile (read once from its template). */
    ts_chat_profile profile;
    ts_context_chat_profile(s->ctx, &profile);
    *cfg = (ts_chat_out_config){
        .format = {profile.tool_format, profile.reasoning_format},
        .parse_tools = r->has_tools && r->tool_choice != TS_API_TOOL_NONE,
        .parallel_tool_calls = r->parallel_tool_calls,
        .tools = cJSON_GetObjectItemCaseSensitive(r->root, "tools"),
        .id_seed = s->id_salt ^ (atomic_fetch_add(&s->id_counter, 1) * 0xD1B54A32D192ED03ull),
    };
    if (cfg->format.reasoning != TS_CHAT_REASONING_NONE && ids != NULL && n_ids > 0) {
        int32_t n = n_ids < PROMPT_TAIL_TOKENS ? n_ids : PROMPT_TAIL_TOKENS;
        char *tail = NULL;
        size_t len = 0;
        ts_error e = {0};
        if (ts_llm_detokenize(s->llm, ids + n_ids - n, (size_t)n, 1, &tail, &len, &e) == TS_OK) {
            cfg->reasoning_open =
                ts_chat_out_prompt_opens_reasoning(cfg->format.reasoning, tail, len);
        }
        ts_free(tail);
    }
}
