/* test_api_ollama.c — Ollama API bodies (api_ollama.c): what each field becomes in the neutral
 * request, the errors for what the server cannot honour, and Ollama's error body. No model and
 * no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/dialect.h"
#include "server/dialect_check.h"

static ts_status parse(ts_ollama_kind which, const char *body, ts_api_request *r, ts_api_error *e) {
    memset(e, 0, sizeof *e);
    return ts_api_parse_ollama(which, body, strlen(body), &k_lim, r, e);
}

static void expect_bad(ts_ollama_kind which, const char *body, int status, const char *needle) {
    ts_api_request r;
    ts_api_error e;
    ts_status st = parse(which, body, &r, &e);
    dialect_expect_refused(st, &r, &e, body, status, NULL, needle);
}

static void test_chat_fields(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"model\":\"llama3:latest\",\"messages\":[{\"role\":\"system\",\"content\":\"be "
        "brief\"},{\"role\":\"user\",\"content\":\"hi\"}],\"options\":{\"temperature\":0.5,"
        "\"top_p\":0.9,\"top_k\":7,\"min_p\":0.05,\"seed\":42,\"num_predict\":100000,"
        "\"repeat_penalty\":1.2,\"presence_penalty\":0.5,\"frequency_penalty\":0.25,\"stop\":["
        "\"END\"],\"num_ctx\":99999,\"num_gpu\":1},\"keep_alive\":\"5m\",\"think\":false}";
    assert_int_equal(parse(TS_OLLAMA_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.kind, TS_API_CHAT);
    assert_int_equal(r.n_messages, 2);
    assert_true(r.stream); /* Ollama streams unless told not to */
    /* num_predict is a cap: beyond the context it is cut to it. */
    assert_true(r.max_tokens_set);
    assert_int_equal(r.params.max_tokens, 512);
    assert_float_equal(r.params.sampling.temperature, 0.5, 1e-6);
    assert_float_equal(r.params.sampling.top_p, 0.9, 1e-6);
    assert_int_equal(r.params.sampling.top_k, 7);
    assert_float_equal(r.params.sampling.min_p, 0.05, 1e-6);
    assert_float_equal(r.params.sampling.repetition_penalty, 1.2, 1e-6);
    assert_float_equal(r.params.sampling.presence_penalty, 0.5, 1e-6);
    assert_float_equal(r.params.sampling.frequency_penalty, 0.25, 1e-6);
    assert_true(r.params.has_seed);
    assert_int_equal(r.params.seed, 42);
    assert_int_equal(r.params.n_stop, 1);
    assert_string_equal(r.stop[0], "END");
    assert_non_null(strstr(r.chat_json, "\"enable_thinking\":false"));
    ts_api_request_free(&r);

    /* stream false; format "json"; no num_predict: the rest of the context. */
    assert_int_equal(parse(TS_OLLAMA_CHAT,
                           "{\"model\":\"x\",\"stream\":false,\"format\":\"json\",\"messages\":[{"
                           "\"role\":\"user\",\"content\":\"hi\"}]}",
                           &r, &e),
                     TS_OK);
    assert_false(r.stream);
    assert_false(r.max_tokens_set);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_JSON_OBJECT);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_OLLAMA_CHAT,
                           "{\"format\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                           "\"integer\"}}},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                           &r, &e),
                     TS_OK);
    assert_non_null(r.grammar_text);
    assert_non_null(strstr(r.grammar_text, "integer"));
    ts_api_request_free(&r);
}

static void test_tool_round_trip(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},{\"role\":\"assistant\","
        "\"content\":\"\",\"thinking\":\"hmm\",\"tool_calls\":[{\"function\":{\"name\":\"get_"
        "weather\",\"arguments\":{\"city\":\"Paris\"}}},{\"function\":{\"name\":\"get_weather\","
        "\"arguments\":{\"city\":\"Rome\"}}}]},{\"role\":\"tool\",\"content\":\"21 C\","
        "\"tool_name\":\"get_weather\"},{\"role\":\"tool\",\"content\":\"25 C\"}]}";
    assert_int_equal(parse(TS_OLLAMA_CHAT, body, &r, &e), TS_OK);
    assert_true(r.has_tools);
    cJSON *vars = cJSON_Parse(r.chat_json);
    assert_non_null(vars);
    const cJSON *a = msg(vars, 1);
    assert_string_equal(str(a, "reasoning_content"), "hmm");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(a, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 2);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 1), "function");
    assert_string_equal(str(cJSON_GetArrayItem(calls, 1), "id"), "call_1_1");
    /* Arguments reach the template as an object or as text; either way they hold Rome. */
    char *args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
    assert_non_null(strstr(args, "Rome"));
    free(args);
    /* The results answer the calls in order. */
    assert_string_equal(str(msg(vars, 2), "tool_call_id"), "call_1_0");
    assert_string_equal(str(msg(vars, 3), "tool_call_id"), "call_1_1");
    cJSON_Delete(vars);
    ts_api_request_free(&r);
    /* A third result answers nothing. */
    expect_bad(TS_OLLAMA_CHAT,
               "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
               "\"f\",\"arguments\":{}}}]},{\"role\":\"tool\",\"content\":\"1\"},{\"role\":"
               "\"tool\",\"content\":\"2\"}]}",
               400, "all answered already");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"1\"}]}", 400,
               "tool result");
    expect_bad(TS_OLLAMA_CHAT,
               "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
               "\"f\",\"arguments\":\"{}\"}}]}]}",
               400, "arguments");
}

static void test_generate(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse(TS_OLLAMA_GENERATE,
                           "{\"prompt\":\"why?\",\"system\":\"be brief\",\"stream\":false}", &r,
                           &e),
                     TS_OK);
    assert_int_equal(r.kind, TS_API_CHAT);
    assert_int_equal(r.n_messages, 2);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[1].content, "why?");
    ts_api_request_free(&r);
    /* raw: the prompt itself; without num_predict, the context's room (not 16 tokens). */
    assert_int_equal(parse(TS_OLLAMA_GENERATE_RAW, "{\"prompt\":\"<s>why?\",\"raw\":true}", &r, &e),
                     TS_OK);
    assert_int_equal(r.kind, TS_API_COMPLETIONS);
    assert_int_equal(r.n_prompts, 1);
    assert_string_equal(r.prompts[0].text, "<s>why?");
    assert_int_equal(r.params.max_tokens, 512);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_OLLAMA_GENERATE_RAW,
                           "{\"prompt\":\"a\",\"raw\":true,\"options\":{\"num_predict\":-1}}", &r,
                           &e),
                     TS_OK);
    assert_int_equal(r.params.max_tokens, 512);
    ts_api_request_free(&r);
    expect_bad(TS_OLLAMA_GENERATE, "{\"prompt\":\"a\",\"template\":\"{{ .Prompt }}\"}", 400,
               "template is not supported");
    expect_bad(TS_OLLAMA_GENERATE, "{\"prompt\":\"a\",\"suffix\":\"b\"}", 400, "suffix");
    expect_bad(TS_OLLAMA_GENERATE, "{\"prompt\":\"a\",\"images\":[\"aGk=\"]}", 400, "images");
    expect_bad(TS_OLLAMA_GENERATE, "{\"prompt\":\"a\",\"context\":[1,2]}", 400, "context");
    expect_bad(TS_OLLAMA_GENERATE, "{\"prompt\":5}", 400, "prompt must be a string");
    /* Empty template and images are fine. */
    assert_int_equal(
        parse(TS_OLLAMA_GENERATE, "{\"prompt\":\"a\",\"template\":\"\",\"images\":[]}", &r, &e),
        TS_OK);
    ts_api_request_free(&r);
}

static void test_errors(void **state) {
    (void)state;
    expect_bad(TS_OLLAMA_CHAT, "{not json", 400, "not valid JSON");
    expect_bad(TS_OLLAMA_CHAT, "[1]", 400, "must be a JSON object");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":{}}", 400, "messages must be an array");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400,
               "role must be");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[1]}]}", 400,
               "content must be a string");
    expect_bad(TS_OLLAMA_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"aGk=\"]}]}", 400,
               "images are not supported");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"options\":{\"temperature\":\"hot\"}}", 400,
               "options.temperature must be a number");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"options\":{\"num_predict\":0}}", 400,
               "num_predict");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"options\":{\"stop\":[1]}}", 400, "options.stop");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"options\":[]}", 400, "options must be");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"format\":\"yaml\"}", 400, "format must be");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"think\":\"very\"}", 400, "think must be");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"stream\":\"yes\"}", 400, "stream must be");
    expect_bad(TS_OLLAMA_CHAT, "{\"messages\":[],\"tools\":{}}", 400, "tools must be");
    expect_bad(TS_OLLAMA_EMBED, "{\"input\":5}", 400, "input");
    expect_bad(TS_OLLAMA_EMBEDDINGS, "{\"prompt\":[\"a\"]}", 400, "prompt must be a string");
    /* Ollama's error body. */
    ts_api_error e;
    ts_api_error_set(&e, 400, "invalid_request_error", NULL, NULL, "bad \"thing\"");
    char *json = ts_api_ollama_error_json(&e);
    assert_string_equal(json, "{\"error\":\"bad \\\"thing\\\"\"}");
    free(json);
}

static void test_embed_and_peek(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse(TS_OLLAMA_EMBED, "{\"model\":\"m\",\"input\":[\"a\",\"b\"]}", &r, &e),
                     TS_OK);
    assert_int_equal(r.kind, TS_API_EMBEDDINGS);
    assert_int_equal(r.n_inputs, 2);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_OLLAMA_EMBEDDINGS, "{\"prompt\":\"a\"}", &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 1);
    ts_api_request_free(&r);
    bool raw = false, load = false;
    const char *b1 = "{\"model\":\"m\"}";
    ts_api_ollama_peek(TS_OLLAMA_GENERATE, b1, strlen(b1), &raw, &load);
    assert_true(load);
    assert_false(raw);
    const char *b2 = "{\"prompt\":\"x\",\"raw\":true}";
    ts_api_ollama_peek(TS_OLLAMA_GENERATE, b2, strlen(b2), &raw, &load);
    assert_false(load);
    assert_true(raw);
    const char *b3 = "{\"messages\":[]}";
    ts_api_ollama_peek(TS_OLLAMA_CHAT, b3, strlen(b3), &raw, &load);
    assert_true(load);
    const char *b4 = "{bad";
    ts_api_ollama_peek(TS_OLLAMA_CHAT, b4, strlen(b4), &raw, &load);
    assert_false(load);
    assert_false(raw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_fields),    cmocka_unit_test(test_tool_round_trip),
        cmocka_unit_test(test_generate),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_embed_and_peek),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
