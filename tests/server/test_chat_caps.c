/* test_chat_caps.c — a chat template's capabilities found by probing it (chat_caps.c), and the
 * request rewrites (polyfills, api_chat.c) that let a template without them render OpenAI
 * clients' tool loops. Templates are rendered with ts_llm_chat_render (no model needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/api.h"
#include "server/chat_caps.h"

/* SmolLM2's template: role and content concatenated, nothing else. */
static const char k_concat[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* A Hermes-style template that renders tools, calls and results itself. */
static const char k_tools[] =
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{%- elif m.tool_calls %}<|im_start|>assistant\n{% if m.content %}{{ m.content }}{% endif %}"
    "{% for c in m.tool_calls %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/* A template with no system turns (they vanish) that fails on content null. */
static const char k_nosys[] =
    "{% for m in messages %}{% if m.role != 'system' %}[{{ m.role }}] {{ m.content + '' }}\n"
    "{% endif %}{% endfor %}";

/* A template that loops for a very long time (10^10 iterations). */
static const char k_hostile[] =
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";

static ts_status render_with(void *user, const char *json, char **text) {
    ts_chat_options opt = {.source = user, .timeout_ms = 200, .max_memory = 16 << 20};
    ts_error err = {0};
    size_t len = 0;
    return ts_llm_chat_render(NULL, &opt, json, strlen(json), text, &len, &err);
}

static void test_probe(void **state) {
    (void)state;
    ts_chat_caps c;
    ts_chat_caps_probe(render_with, (void *)k_concat, &c);
    assert_true(c.probed);
    assert_true(c.system_role);
    assert_false(c.tools);
    assert_false(c.tool_calls);
    assert_false(c.tool_responses);
    assert_true(c.needs_content);

    ts_chat_caps_probe(render_with, (void *)k_tools, &c);
    assert_true(c.probed);
    assert_true(c.system_role);
    assert_true(c.tools);
    assert_true(c.tool_calls);
    assert_true(c.tool_responses);
    assert_false(c.needs_content);

    ts_chat_caps_probe(render_with, (void *)k_nosys, &c);
    assert_true(c.probed);
    assert_false(c.system_role);
    assert_true(c.needs_content);

    char line[256];
    ts_chat_caps_describe(&c, line, sizeof line);
    assert_non_null(strstr(line, "system role no"));
}

/* A template the probes cannot finish leaves everything assumed (needs the engine's limits). */
static void test_probe_hostile(void **state) {
    (void)state;
    ts_chat_caps c;
    ts_chat_caps_probe(render_with, (void *)k_hostile, &c);
    assert_false(c.probed);
}

/* An OpenAI client's tool loop: the call with content null, then the result. */
static const char k_loop[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_7\",\"type\":"
    "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": "
    "\\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_7\",\"content\":\"22 C, sunny\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]}";

static char *render_request(const char *tmpl, const ts_api_request *r) {
    ts_chat_options opt = {.source = tmpl};
    ts_error err = {0};
    char *text = NULL;
    size_t len = 0;
    ts_status st =
        ts_llm_chat_render(NULL, &opt, r->chat_json, strlen(r->chat_json), &text, &len, &err);
    if (st != TS_OK) {
        print_error("render: %s\n%s\n", err.msg, r->chat_json);
        fail();
    }
    return text;
}

static ts_api_limits limits_for(const char *tmpl) {
    ts_api_limits lim = {.n_vocab = 1000, .n_ctx = 512, .max_n = 4, .model_name = "tiny"};
    ts_chat_caps_probe(render_with, (void *)tmpl, &lim.caps);
    return lim;
}

static void test_polyfill_concat(void **state) {
    (void)state;
    ts_api_limits lim = limits_for(k_concat);
    ts_api_request r;
    ts_api_error e = {0};
    assert_int_equal(ts_api_parse(TS_API_CHAT, k_loop, strlen(k_loop), &lim, &r, &e), TS_OK);
    assert_int_equal(r.polyfills, TS_API_POLYFILL_TOOLS | TS_API_POLYFILL_TOOL_CALLS |
                                      TS_API_POLYFILL_TOOL_RESPONSES);
    char names[96];
    ts_api_polyfill_names(r.polyfills, names, sizeof names);
    assert_string_equal(names, "tools,tool_calls,tool_responses");
    char *text = render_request(k_concat, &r);
    /* The tools in the system turn, the call as JSON in the assistant's turn, the result as a
     * user turn naming the tool (from the call with that id). */
    assert_non_null(strstr(text, "<|im_start|>system\nBe brief.\n\nYou can call the following "
                                 "tools"));
    assert_non_null(strstr(text, "<|im_start|>assistant\n{\"tool_calls\":[{\"name\":"
                                 "\"get_weather\",\"arguments\":{\"city\":\"Paris\"},\"id\":"
                                 "\"call_7\"}]}<|im_end|>\n"));
    assert_non_null(strstr(text, "<|im_start|>user\n{\"tool_response\":{\"tool\":\"get_weather\","
                                 "\"content\":\"22 C, sunny\",\"tool_call_id\":\"call_7\"}}"
                                 "<|im_end|>\n<|im_start|>assistant\n"));
    ts_free(text);
    ts_api_request_free(&r);

    /* content null without tool calls: "" for a template that fails on null. */
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
                       "\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"b\"}]}";
    assert_int_equal(ts_api_parse(TS_API_CHAT, body, strlen(body), &lim, &r, &e), TS_OK);
    assert_int_equal(r.polyfills, TS_API_POLYFILL_NULL_CONTENT);
    text = render_request(k_concat, &r);
    assert_non_null(strstr(text, "<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\nb"));
    ts_free(text);
    ts_api_request_free(&r);
    /* ... and an assistant turn with no content at all. */
    body = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\"}]}";
    assert_int_equal(ts_api_parse(TS_API_CHAT, body, strlen(body), &lim, &r, &e), TS_OK);
    assert_int_equal(r.polyfills, TS_API_POLYFILL_NULL_CONTENT);
    ts_free(render_request(k_concat, &r));
    ts_api_request_free(&r);
}

/* A template that renders tools natively gets the request unchanged. */
static void test_native_unchanged(void **state) {
    (void)state;
    ts_api_limits lim = limits_for(k_tools);
    ts_api_request r;
    ts_api_error e = {0};
    assert_int_equal(ts_api_parse(TS_API_CHAT, k_loop, strlen(k_loop), &lim, &r, &e), TS_OK);
    assert_int_equal(r.polyfills, 0);
    assert_non_null(strstr(r.chat_json, "\"content\":null,\"tool_calls\":[{"));
    assert_non_null(strstr(r.chat_json, "{\"role\":\"tool\",\"tool_call_id\":\"call_7\""));
    char *text = render_request(k_tools, &r);
    assert_non_null(strstr(text, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"Paris\"}}\n</tool_call>"));
    assert_non_null(strstr(text, "<tool_response>\n22 C, sunny\n</tool_response>"));
    ts_free(text);
    ts_api_request_free(&r);
}

/* System text moves into the next user turn for a template that drops system turns. */
static void test_polyfill_system(void **state) {
    (void)state;
    ts_api_limits lim = limits_for(k_nosys);
    ts_api_request r;
    ts_api_error e = {0};
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"S1\"},{\"role\":"
                       "\"system\",\"content\":\"S2\"},{\"role\":\"user\",\"content\":\"U\"},"
                       "{\"role\":\"assistant\",\"content\":\"A\"},{\"role\":\"system\","
                       "\"content\":\"S3\"}]}";
    assert_int_equal(ts_api_parse(TS_API_CHAT, body, strlen(body), &lim, &r, &e), TS_OK);
    assert_int_equal(r.polyfills, TS_API_POLYFILL_SYSTEM_ROLE);
    char *text = render_request(k_nosys, &r);
    assert_string_equal(text, "[user] S1\nS2\nU\n[assistant] A\n[user] S3\n");
    ts_free(text);
    ts_api_request_free(&r);

    /* Empty system turns are turns too: a lone one is still a user turn, never no turn. */
    body = "{\"messages\":[{\"role\":\"system\",\"content\":\"\"}]}";
    assert_int_equal(ts_api_parse(TS_API_CHAT, body, strlen(body), &lim, &r, &e), TS_OK);
    text = render_request(k_nosys, &r);
    assert_string_equal(text, "[user] \n");
    ts_free(text);
    ts_api_request_free(&r);
    body = "{\"messages\":[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\","
           "\"content\":\"U\"}]}";
    assert_int_equal(ts_api_parse(TS_API_CHAT, body, strlen(body), &lim, &r, &e), TS_OK);
    text = render_request(k_nosys, &r);
    assert_string_equal(text, "[user] \nU\n");
    ts_free(text);
    ts_api_request_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe),           cmocka_unit_test(test_probe_hostile),
        cmocka_unit_test(test_polyfill_concat), cmocka_unit_test(test_native_unchanged),
        cmocka_unit_test(test_polyfill_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
