/* test_api_responses.c — OpenAI Responses bodies (api_responses.c): what each item and field
 * becomes in the neutral chat request, what the answer echoes and stores, and the errors for
 * what the dialect does not allow. No model and no sockets. */
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

static ts_status parse(const char *body, ts_api_request *r, ts_api_error *e) {
    memset(e, 0, sizeof *e);
    return ts_api_parse_responses(body, strlen(body), &k_lim, r, e);
}

static void expect_bad(const char *body, const char *param, const char *needle) {
    ts_api_request r;
    ts_api_error e;
    ts_status st = parse(body, &r, &e);
    dialect_expect_refused(st, &r, &e, body, 400, param, needle);
}

static const cJSON *state(const ts_api_request *r) {
    return cJSON_GetObjectItemCaseSensitive(r->root, "x_tessera_responses");
}

static void test_string_input_and_fields(void **unused) {
    (void)unused;
    ts_api_request r;
    ts_api_error e;
    const char *body = "{\"model\":\"tiny\",\"input\":\"hello\",\"instructions\":\"be brief\","
                       "\"max_output_tokens\":20,\"temperature\":0.5,\"top_p\":0.9,"
                       "\"stream\":true,\"store\":false,\"metadata\":{\"k\":\"v\"}}";
    assert_int_equal(parse(body, &r, &e), TS_OK);
    assert_int_equal(r.kind, TS_API_CHAT);
    assert_int_equal(r.n_messages, 2);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[0].content, "be brief");
    assert_string_equal(r.messages[1].role, "user");
    assert_string_equal(r.messages[1].content, "hello");
    assert_true(r.max_tokens_set);
    assert_int_equal(r.params.max_tokens, 20);
    assert_float_equal(r.params.sampling.temperature, 0.5, 1e-6);
    assert_float_equal(r.params.sampling.top_p, 0.9, 1e-6);
    assert_true(r.stream);
    /* The string became one stored user message item; the echoed fields are kept. */
    const cJSON *x = state(&r);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(x, "input");
    assert_int_equal(cJSON_GetArraySize(items), 1);
    const cJSON *it = cJSON_GetArrayItem(items, 0);
    assert_string_equal(str(it, "type"), "message");
    assert_string_equal(str(it, "role"), "user");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(x, "store")));
    assert_string_equal(str(x, "instructions"), "be brief");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(x, "metadata"));
    ts_api_request_free(&r);
}

static void test_items_round_trip(void **unused) {
    (void)unused;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"input\":[{\"role\":\"developer\",\"content\":\"sys\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
        "\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":"
        "\"{\\\"x\\\":1}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":\"two\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":[{\"type\":"
        "\"input_text\",\"text\":\"one\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"done\"}]}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}},"
        "{\"type\":\"function\",\"name\":\"g\",\"description\":\"G\",\"strict\":true}],"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"g\"}}";
    assert_int_equal(parse(body, &r, &e), TS_OK);
    cJSON *vars = vars_of(&r);
    assert_string_equal(str(msg(vars, 0), "role"), "system");
    assert_string_equal(str(msg(vars, 1), "content"), "a\nb");
    /* The two calls join one assistant turn; the outputs are tool turns naming them. */
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg(vars, 2), "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 2);
    assert_string_equal(str(cJSON_GetArrayItem(calls, 1), "id"), "c2");
    assert_string_equal(str(msg(vars, 3), "role"), "tool");
    assert_string_equal(str(msg(vars, 3), "tool_call_id"), "c2");
    assert_string_equal(str(msg(vars, 3), "content"), "two");
    assert_string_equal(str(msg(vars, 4), "content"), "one");
    assert_string_equal(str(msg(vars, 5), "role"), "assistant");
    assert_string_equal(str(msg(vars, 5), "content"), "done");
    assert_null(msg(vars, 6));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(vars, "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 2);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, 1), "function");
    assert_string_equal(str(fn, "name"), "g");
    assert_string_equal(str(fn, "description"), "G");
    assert_int_equal(r.tool_choice, TS_API_TOOL_NAMED);
    assert_string_equal(r.tool_choice_name, "g");
    /* Every item is kept for the store, the reasoning item too. */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(state(&r), "input")), 8);
    cJSON_Delete(vars);
    ts_api_request_free(&r);
}

static void test_text_format(void **unused) {
    (void)unused;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\","
                           "\"name\":\"n\",\"schema\":{\"type\":\"object\",\"properties\":{"
                           "\"a\":{\"type\":\"integer\"}}},\"strict\":true}}}",
                           &r, &e),
                     TS_OK);
    assert_non_null(r.grammar_text);
    assert_non_null(r.grammar_param);
    ts_api_request_free(&r);
    assert_int_equal(
        parse("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}", &r, &e), TS_OK);
    assert_non_null(r.grammar_text);
    ts_api_request_free(&r);
    assert_int_equal(parse("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}", &r, &e),
                     TS_OK);
    assert_null(r.grammar_text);
    ts_api_request_free(&r);
}

static void test_errors(void **unused) {
    (void)unused;
    expect_bad("{}", "input", "input must be a string or an array");
    expect_bad("{\"input\":[5]}", "input[0]", "must be an object");
    expect_bad("{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input[0].role",
               "got 'robot'");
    expect_bad("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}",
               "input[0].content", "input_image");
    expect_bad("{\"input\":[{\"role\":\"user\",\"content\":7}]}", "input[0].content",
               "a string or an array");
    expect_bad("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}]}",
               "input[0].arguments", "must be a string");
    expect_bad("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"zz\",\"output\":"
               "\"x\"}]}",
               "input[0].call_id", "No tool call found for function call output with call_id zz");
    expect_bad("{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "input[0]",
               "item_reference");
    expect_bad("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]", "web_search");
    expect_bad("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0]",
               "name must be a non-empty string");
    expect_bad("{\"input\":\"x\",\"tool_choice\":\"any\"}", "tool_choice", "tool_choice must");
    expect_bad("{\"input\":\"x\",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice",
               "tool_choice must");
    expect_bad("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"yaml\"}}}", "text.format.type",
               "'yaml'");
    expect_bad("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}",
               "text.format.schema", "must be an object");
    expect_bad("{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens",
               "positive integer");
    expect_bad("{\"input\":\"x\",\"max_output_tokens\":1e300}", "max_output_tokens",
               "positive integer");
    expect_bad("{\"input\":\"x\",\"store\":1}", "store", "boolean");
    expect_bad("{\"input\":\"x\",\"reasoning\":{\"effort\":\"max\"}}", "reasoning.effort",
               "must be one of");
    expect_bad("{\"input\":\"x\",\"reasoning\":true}", "reasoning", "must be an object");
    expect_bad("{\"input\":\"x\",\"instructions\":[]}", "instructions", "must be a string");
    expect_bad("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id",
               "Previous response with id 'resp_1' not found.");
    expect_bad("{\"input\":\"x\"} x", "", "data after the JSON value");
    expect_bad("[1]", "", "must be a JSON object");
    /* The chat parser's checks, named in Responses' terms. */
    expect_bad("{\"input\":\"x\",\"max_output_tokens\":100000}", "max_output_tokens", "");
}

static void test_error_body(void **unused) {
    (void)unused;
    ts_api_request r;
    ts_api_error e;
    assert_int_not_equal(parse("{\"input\":7}", &r, &e), TS_OK);
    char *json = ts_api_error_json(&e);
    cJSON *root = cJSON_Parse(json);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    assert_string_equal(str(err, "type"), "invalid_request_error");
    assert_string_equal(str(err, "param"), "input");
    cJSON_Delete(root);
    free(json);
    /* Another model is OpenAI's 404. */
    assert_int_not_equal(parse("{\"input\":\"x\",\"model\":\"other\"}", &r, &e), TS_OK);
    assert_int_equal(e.status, 404);
    assert_string_equal(e.param, "model");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_input_and_fields),
        cmocka_unit_test(test_items_round_trip),
        cmocka_unit_test(test_text_format),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
