/*
 * tool_grammar.c — tool_choice "required" and a named tool_choice as a constraint: the answer
 * must be a call, in the format of the chat template, of one of the allowed tools with
 * arguments that fit that tool's parameters schema.
 *
 *   generic  the whole answer is {"name": N, "arguments": A}: one JSON Schema, an anyOf of one
 *            object per allowed tool (name a const, arguments its parameters schema)
 *   llama3   the same with "parameters" in place of "arguments"
 *   hermes   <tool_call>CALL</tool_call>, up to TS_TOOL_MAX_CALLS of them when
 *            parallel_tool_calls: the call's schema compiled to GBNF (ts_json_schema_to_gbnf),
 *            its root renamed and wrapped
 *
 * Nothing here repeats without bound (the calls, the newlines between them), and a tool whose
 * parameters declare properties takes those only (additionalProperties false unless the schema
 * says otherwise), so an answer under the constraint must end instead of running to
 * max_tokens; inside a call, the schema compiler bounds whitespace and digits.
 *
 * Other formats get no constraint (their markers are special tokens or code; the answer is
 * parsed as before). Neither does an answer that starts inside a reasoning block, which the
 * grammar would forbid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* The most calls one constrained answer holds (parallel_tool_calls). */
#define TS_TOOL_MAX_CALLS 8

/* Points the local "$ref"s of a tool's parameters ("#", "#/$defs/x") at where the parameters
 * now sit in the calls' schema (at), as they referred to the parameters' own root; values
 * (const, enum, default, examples) are left alone. False when out of memory. */
static bool move_refs(cJSON *schema, const char *at) {
    cJSON *m;
    cJSON_ArrayForEach(m, schema) {
        const char *k = m->string;
        if (k != NULL && (strcmp(k, "const") == 0 || strcmp(k, "enum") == 0 ||
                          strcmp(k, "default") == 0 || strcmp(k, "examples") == 0)) {
            continue;
        }
        if (k != NULL && strcmp(k, "$ref") == 0 && cJSON_IsString(m) && m->valuestring[0] == '#') {
            size_t n = strlen(at) + strlen(m->valuestring) + 1;
            char *ref = malloc(n);
            if (ref == NULL) {
                return false;
            }
            snprintf(ref, n, "%s%s", at, m->valuestring + 1);
            bool ok = cJSON_SetValuestring(m, ref) != NULL;
            free(ref);
            if (!ok) {
                return false;
            }
        } else if ((cJSON_IsObject(m) || cJSON_IsArray(m)) && !move_refs(m, at)) {
            return false;
        }
    }
    return true;
}

/* {"anyOf":[{"type":"object","properties":{"name":{"const":N},KEY:PARAMS},"required":[...],
 * "additionalProperties":false}, ...]} for the allowed tools; NULL when out of memory. */
static char *calls_schema(const cJSON *tools, const char *only, const char *key) {
    cJSON *any = cJSON_CreateArray();
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(name) || (only != NULL && strcmp(only, name->valuestring) != 0)) {
            continue;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(o, "properties");
        cJSON *n = cJSON_AddObjectToObject(props, "name");
        cJSON_AddStringToObject(n, "const", name->valuestring);
        cJSON *p = params != NULL && !cJSON_IsNull(params) ? cJSON_Duplicate(params, true)
                                                           : cJSON_CreateObject();
        if (cJSON_IsObject(p) && cJSON_GetArraySize(p) == 0) {
            cJSON_AddStringToObject(p, "type", "object"); /* no parameters: any object */
        } else if (cJSON_IsObject(p) && cJSON_GetObjectItemCaseSensitive(p, "properties") &&
                   !cJSON_GetObjectItemCaseSensitive(p, "additionalProperties")) {
            /* The declared arguments only (as OpenAI's strict mode): otherwise a small model
             * may invent keys until max_tokens, and the call never ends. */
            cJSON_AddFalseToObject(p, "additionalProperties");
        }
        char at[64];
        snprintf(at, sizeof at, "#/anyOf/%d/properties/%s", cJSON_GetArraySize(any), key);
        if (!move_refs(p, at)) {
            cJSON_Delete(p);
            cJSON_Delete(o);
            cJSON_Delete(any);
            return NULL;
        }
        cJSON_AddItemToObject(props, key, p);
        const char *req[2] = {"name", key};
        cJSON_AddItemToObject(o, "required", cJSON_CreateStringArray(req, 2));
        cJSON_AddFalseToObject(o, "additionalProperties");
        cJSON_AddItemToArray(any, o);
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "anyOf", any);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

ts_status ts_server_tool_grammar(ts_api_request *r, const ts_chat_out_config *cfg,
                                 ts_api_error *e) {
    if (r->kind != TS_API_CHAT || !r->has_tools ||
        (r->tool_choice != TS_API_TOOL_REQUIRED && r->tool_choice != TS_API_TOOL_NAMED) ||
        cfg->reasoning_open) {
        return TS_OK;
    }
    ts_chat_tool_format f = cfg->format.tools;
    if (f != TS_CHAT_TOOLS_GENERIC && f != TS_CHAT_TOOLS_HERMES && f != TS_CHAT_TOOLS_LLAMA3) {
        return TS_OK;
    }
    if (r->grammar_param != NULL) {
        return ts_api_error_set(e, 400, "invalid_request_error", r->grammar_param, NULL,
                                "%s cannot be combined with tool_choice \"%s\": the tool call "
                                "constrains the whole answer",
                                r->grammar_param,
                                r->tool_choice == TS_API_TOOL_NAMED ? "function" : "required");
    }
    const char *only = r->tool_choice == TS_API_TOOL_NAMED ? r->tool_choice_name : NULL;
    char *schema =
        calls_schema(cfg->tools, only, f == TS_CHAT_TOOLS_LLAMA3 ? "parameters" : "arguments");
    if (schema == NULL) {
        return ts_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    char *text = schema;
    ts_grammar_kind kind = TS_GRAMMAR_JSON_SCHEMA;
    if (f == TS_CHAT_TOOLS_HERMES) {
        char *g = NULL;
        ts_error err = {0};
        ts_status st = ts_json_schema_to_gbnf(schema, 0, &g, &err);
        free(schema);
        if (st != TS_OK) {
            return ts_api_error_set(e, 400, "invalid_request_error", "tools", NULL,
                                    "the tools' parameters cannot constrain the call: %s", err.msg);
        }
        /* The schema's root becomes tc-call (only its definition names it: see tessera.h). */
        const char *call = "root ::= ";
        if (strncmp(g, call, strlen(call)) != 0) {
            ts_free(g);
            return ts_api_error_set(e, 500, "server_error", NULL, NULL,
                                    "the schema grammar does not start with its root rule");
        }
        /* Bounded, so that the answer must end: at most TS_TOOL_MAX_CALLS calls, each
         * closed by its tag, with at most two newlines around and between them; once the
         * last one closes only the end of the answer is left. */
        char head[96];
        if (r->parallel_tool_calls) {
            snprintf(head, sizeof head, "root ::= tc-one ( [\\n]{0,2} tc-one ){0,%d}\n",
                     TS_TOOL_MAX_CALLS - 1);
        } else {
            snprintf(head, sizeof head, "root ::= tc-one\n");
        }
        const char *one = "tc-one ::= \"<tool_call>\" [\\n]? tc-call [\\n]? \"</tool_call>\"\n";
        size_t n = strlen(head) + strlen(one) + strlen(g) + 16;
        text = malloc(n);
        if (text == NULL) {
            ts_free(g);
            return ts_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        }
        snprintf(text, n, "%s%stc-call ::= %s", head, one, g + strlen(call));
        ts_free(g);
        kind = TS_GRAMMAR_GBNF;
    }
    r->grammar_text = text;
    r->grammar_param = "tools";
    r->params.grammar_kind = kind;
    r->params.grammar = text;
    r->params.grammar_len = strlen(text);
    return TS_OK;
}
