/* test_api_anthropic.c — Anthropic Messages bodies (api_anthropic.c): what each block and field
 * becomes in the neutral chat request, the errors for what the dialect does not allow, and
 * Anthropic's error body. No model and no sockets. */
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

static ts_status parse(const char *body, bool count_only, ts_api_request *r, ts_api_error *e) {
    memset(e, 0, sizeof *e);
    return ts_api_parse_anthropic(body, strlen(body), &k_lim, count_only, r, e);
}

static void expect_bad(const char *body, int status, const char *needle) {
    ts_api_request r;
    ts_api_error e;
    ts_status st = parse(body, false, &r, &e);
    dialect_expect_refused(st, &r, &e, body, status, NULL, needle);
}

static void test_plain_and_fields(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"model\":\"tiny\",\"max_tokens\":100000,\"system\":[{\"type\":\"text\",\"text\":\"be "
        "brief\"},{\"type\":\"text\",\"text\":\"and kind\"}],\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]}],"
        "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,\"stop_sequences\":[\"END\",\"\\n\\n\"],"
        "\"metadata\":{\"user_id\":\"u1\"},\"stream\":true,\"anthropic_beta\":\"ignored\"}";
    assert_int_equal(parse(body, false, &r, &e), TS_OK);
    assert_int_equal(r.kind, TS_API_CHAT);
    assert_int_equal(r.n_messages, 2);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[0].content, "be brief\nand kind");
    assert_string_equal(r.messages[1].content, "one\ntwo");
    /* max_tokens beyond the context is cut to it (the server then cuts it to the room). */
    assert_true(r.max_tokens_set);
    assert_int_equal(r.params.max_tokens, 512);
    assert_float_equal(r.params.sampling.temperature, 0.5, 1e-6);
    assert_float_equal(r.params.sampling.top_p, 0.9, 1e-6);
    assert_int_equal(r.params.sampling.top_k, 7);
    assert_int_equal(r.params.n_stop, 2);
    assert_string_equal(r.stop[0], "END");
    assert_string_equal(r.stop[1], "\n\n");
    assert_string_equal(r.user, "u1");
    assert_true(r.stream);
    ts_api_request_free(&r);
    /* count_tokens needs no max_tokens. */
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", true, &r, &e),
                     TS_OK);
    assert_false(r.max_tokens_set);
    ts_api_request_free(&r);
}

static void test_tool_round_trip(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"max_tokens\":8,\"tools\":[{\"name\":\"get_weather\",\"description\":\"d\","
        "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\","
        "\"disable_parallel_tool_use\":true},\"messages\":["
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\","
        "\"signature\":\"s\"},{\"type\":\"text\",\"text\":\"Let me look.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":"
        "\"Paris\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"21 C\"}],\"is_error\":true},"
        "{\"type\":\"text\",\"text\":\"thanks\"}]}]}";
    assert_int_equal(parse(body, false, &r, &e), TS_OK);
    assert_true(r.has_tools);
    assert_int_equal(r.tool_choice, TS_API_TOOL_NAMED);
    assert_string_equal(r.tool_choice_name, "get_weather");
    assert_false(r.parallel_tool_calls);
    cJSON *vars = vars_of(&r);
    const cJSON *a = msg(vars, 1);
    assert_string_equal(str(a, "role"), "assistant");
    assert_string_equal(str(a, "content"), "Let me look.");
    assert_string_equal(str(a, "reasoning_content"), "hmm");
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(a, "tool_calls"), 0);
    assert_string_equal(str(call, "id"), "toolu_1");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    assert_string_equal(str(fn, "name"), "get_weather");
    /* Arguments reach the template as the object (api_chat.c decodes the JSON text). */
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    assert_string_equal(str(args, "city"), "Paris");
    const cJSON *t = msg(vars, 2);
    assert_string_equal(str(t, "role"), "tool");
    assert_string_equal(str(t, "tool_call_id"), "toolu_1");
    assert_string_equal(str(t, "name"), "get_weather");
    assert_string_equal(str(t, "content"), "Error: 21 C");
    assert_string_equal(str(msg(vars, 3), "role"), "user");
    assert_string_equal(str(msg(vars, 3), "content"), "thanks");
    assert_null(msg(vars, 4));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(vars, "tools");
    const cJSON *tf = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, 0), "function");
    assert_string_equal(str(tf, "name"), "get_weather");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(tf, "parameters"));
    cJSON_Delete(vars);
    ts_api_request_free(&r);
    /* tool_choice any: required; none: no tools parsed. */
    const char *any =
        "{\"max_tokens\":8,\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    assert_int_equal(parse(any, false, &r, &e), TS_OK);
    assert_int_equal(r.tool_choice, TS_API_TOOL_REQUIRED);
    assert_true(r.parallel_tool_calls);
    ts_api_request_free(&r);
    const char *none =
        "{\"max_tokens\":8,\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"none\"},\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    assert_int_equal(parse(none, false, &r, &e), TS_OK);
    assert_int_equal(r.tool_choice, TS_API_TOOL_NONE);
    ts_api_request_free(&r);
}

static void test_thinking_and_output(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body = "{\"max_tokens\":8,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
                       "1024},\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":"
                       "{\"type\":\"object\"}}},\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"x\"}]}";
    assert_int_equal(parse(body, false, &r, &e), TS_OK);
    assert_non_null(strstr(r.chat_json, "\"enable_thinking\":true"));
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_JSON_SCHEMA);
    ts_api_request_free(&r);
    body = "{\"max_tokens\":8,\"thinking\":{\"type\":\"disabled\"},\"messages\":[{\"role\":"
           "\"user\",\"content\":\"x\"}]}";
    assert_int_equal(parse(body, false, &r, &e), TS_OK);
    assert_non_null(strstr(r.chat_json, "\"enable_thinking\":false"));
    ts_api_request_free(&r);
}

static void test_bad_bodies(void **state) {
    (void)state;
#define USER "{\"role\":\"user\",\"content\":\"x\"}"
    expect_bad("{\"messages\":[" USER "]}", 400, "max_tokens: field required");
    expect_bad("{\"max_tokens\":0,\"messages\":[" USER "]}", 400, "max_tokens must be");
    expect_bad("{\"max_tokens\":\"9\",\"messages\":[" USER "]}", 400, "max_tokens must be");
    expect_bad("{\"max_tokens\":1e300,\"messages\":[" USER "]}", 400, "max_tokens must be");
    expect_bad("{\"max_tokens\":2.5,\"messages\":[" USER "]}", 400, "max_tokens must be");
    expect_bad("{\"max_tokens\":9}", 400, "messages: field required");
    expect_bad("{\"max_tokens\":9,\"messages\":[]}", 400, "1 to");
    expect_bad("{\"max_tokens\":9,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", 400,
               "top-level \"system\"");
    expect_bad("{\"max_tokens\":9,\"messages\":[{\"role\":\"user\"}]}", 400,
               "messages[0].content: field required");
    expect_bad("{\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"image\",\"source\":{}}]}]}",
               400, "messages[0].content[0] is an image block");
    expect_bad("{\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}}]}]}",
               400, "only assistant turns hold");
    expect_bad("{\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
               "\"tool_result\",\"tool_use_id\":\"nope\",\"content\":\"r\"}]}]}",
               400, "matches no tool_use");
    /* A result answers the assistant turn just before it only, and once. */
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":"
               "[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]}," USER
               ",{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
               "\"t1\"}]}]}",
               400, "matches no tool_use");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":"
               "[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\"},"
               "{\"type\":\"tool_result\",\"tool_use_id\":\"t1\"}]}]}",
               400, "a second time");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":"
               "[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":[]}]}]}",
               400, "input must be an object");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":"
               "[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\"}]}]}",
               400, "only user turns hold");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"system\":[{\"type\":\"image\"}]}", 400,
               "system[0] has type 'image'");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"tools\":[{\"type\":\"bash_20250124\","
               "\"name\":\"bash\"}]}",
               400, "server tools");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"tools\":[{\"name\":\"f\"}]}", 400,
               "input_schema must be");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"tool_choice\":{\"type\":\"any\"}}", 400,
               "needs tools");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"tool_choice\":\"auto\"}", 400,
               "tool_choice must be an object");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"stop_sequences\":\"x\"}", 400,
               "stop_sequences must be an array");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"metadata\":{\"user_id\":5}}", 400,
               "metadata.user_id");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"thinking\":{\"type\":\"on\"}}", 400,
               "thinking must be");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "],\"temperature\":\"hot\"}", 400,
               "temperature");
    expect_bad("{\"max_tokens\":9,\"messages\":[" USER "]} x", 400, "data after");
    expect_bad("[1]", 400, "JSON object");
    expect_bad("{\"max_tokens\":", 400, "not valid JSON");
#undef USER
}

static void test_error_json(void **state) {
    (void)state;
    static const struct {
        int status;
        const char *type;
    } k_cases[] = {{400, "invalid_request_error"},
                   {401, "authentication_error"},
                   {404, "not_found_error"},
                   {405, "invalid_request_error"},
                   {413, "request_too_large"},
                   {429, "rate_limit_error"},
                   {500, "api_error"},
                   {503, "overloaded_error"}};
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
        ts_api_error e;
        ts_api_error_set(&e, k_cases[i].status, "invalid_request_error", "p", NULL,
                         "what \"went\" wrong");
        char *s = ts_api_anthropic_error_json(&e);
        cJSON *v = cJSON_Parse(s);
        assert_non_null(v);
        assert_string_equal(str(v, "type"), "error");
        const cJSON *inner = cJSON_GetObjectItemCaseSensitive(v, "error");
        assert_string_equal(str(inner, "type"), k_cases[i].type);
        assert_string_equal(str(inner, "message"), "what \"went\" wrong");
        cJSON_Delete(v);
        free(s);
    }
    assert_string_equal(ts_anthropic_stop_reason(TS_FINISH_LENGTH, -1, false), "max_tokens");
    assert_string_equal(ts_anthropic_stop_reason(TS_FINISH_STOP, -1, false), "end_turn");
    assert_string_equal(ts_anthropic_stop_reason(TS_FINISH_STOP, 1, false), "stop_sequence");
    assert_string_equal(ts_anthropic_stop_reason(TS_FINISH_STOP, -1, true), "tool_use");
    assert_true(ts_dialect_of_path("/v1/messages/batches") == &ts_dialect_anthropic);
    assert_true(ts_dialect_of_path("/v1/messagesx") == &ts_dialect_openai_chat);
    assert_true(ts_dialect_of_path("/v1/chat") == &ts_dialect_openai_chat);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_fields),    cmocka_unit_test(test_tool_round_trip),
        cmocka_unit_test(test_thinking_and_output), cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_error_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
