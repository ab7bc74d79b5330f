/*
 * chat_parser.c — the public face of the chat answer parser (ts_chat_parser in tessera.h) over
 * runtime/chat_out.h, for embedders: the same parser the server reads answers with.
 */
#include <stdlib.h>

#include "runtime/chat_out.h"
#include "util/error.h"

struct ts_chat_parser {
    ts_chat_out *p;
    cJSON *tools; /* the parsed tools_json, or NULL */
};

ts_status ts_chat_parser_create(const ts_chat_parser_params *params, ts_chat_parser **out,
                                ts_error *err) {
    *out = NULL;
    if (params == NULL || (int)params->tool_format < 0 ||
        params->tool_format >= TS_CHAT_TOOLS_COUNT || (int)params->reasoning_format < 0 ||
        params->reasoning_format >= TS_CHAT_REASONING_COUNT) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "chat parser: no params, or a format out of "
                            "range");
    }
    ts_chat_parser *cp = calloc(1, sizeof *cp);
    if (cp == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "chat parser: out of memory");
    }
    if (params->tools_json != NULL) {
        cp->tools = cJSON_Parse(params->tools_json);
        if (!cJSON_IsArray(cp->tools)) {
            ts_chat_parser_destroy(cp);
            return ts_error_set(err, TS_ERR_FORMAT,
                                "chat parser: tools_json is not a JSON array of tools");
        }
    }
    ts_chat_out_config cfg = {
        .format = {params->tool_format, params->reasoning_format},
        .parse_tools = cp->tools != NULL,
        .parallel_tool_calls = params->parallel_tool_calls,
        .reasoning_open = params->reasoning_open,
        .tools = cp->tools,
        .id_seed = params->id_seed,
    };
    cp->p = ts_chat_out_create(&cfg);
    if (cp->p == NULL) {
        ts_chat_parser_destroy(cp);
        return ts_error_set(err, TS_ERR_NOMEM, "chat parser: out of memory");
    }
    *out = cp;
    return TS_OK;
}

void ts_chat_parser_destroy(ts_chat_parser *p) {
    if (p == NULL) {
        return;
    }
    ts_chat_out_destroy(p->p);
    cJSON_Delete(p->tools);
    free(p);
}

ts_status ts_chat_parser_feed(ts_chat_parser *p, const char *text, size_t len, ts_error *err) {
    if (ts_chat_out_feed(p->p, text, len) != TS_OK) {
        return ts_error_set(err, TS_ERR_NOMEM, "chat parser: out of memory");
    }
    return TS_OK;
}

ts_status ts_chat_parser_finish(ts_chat_parser *p, ts_error *err) {
    if (ts_chat_out_finish(p->p) != TS_OK) {
        return ts_error_set(err, TS_ERR_NOMEM, "chat parser: out of memory");
    }
    return TS_OK;
}

size_t ts_chat_parser_events(ts_chat_parser *p, const ts_chat_event **events) {
    return ts_chat_out_events(p->p, events);
}

void ts_chat_parser_clear(ts_chat_parser *p) {
    ts_chat_out_clear(p->p);
}

const char *ts_chat_parser_content(const ts_chat_parser *p, size_t *len) {
    return ts_chat_out_content(p->p, len);
}

const char *ts_chat_parser_reasoning(const ts_chat_parser *p, size_t *len) {
    return ts_chat_out_reasoning(p->p, len);
}

size_t ts_chat_parser_tool_calls(const ts_chat_parser *p, const ts_chat_tool_call **calls) {
    return ts_chat_out_tool_calls(p->p, calls);
}

bool ts_chat_prompt_opens_reasoning(ts_chat_reasoning_format f, const char *prompt, size_t len) {
    return ts_chat_out_prompt_opens_reasoning(f, prompt, len);
}
