/* test_api_chat.c — chat requests through the public API: ts_llm_chat_render with a Jinja
 * source, the model's own template, a built-in family; the BOS the tokenizer adds is dropped;
 * ts_llm_chat_prompt / ts_context_chat_prompt go the same way; errors keep their kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api_util.h"

/* A small template in the style of real ones: bos, a loop over the turns, tools, a
 * generation prompt, and a refusal. */
static const char k_tmpl[] =
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'function' %}{{ raise_exception('no function role') }}{% endif %}"
    "<|{{ m.role }}|>{{ m.content if m.content is string else '' }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}[{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}]{% endfor %}{% endif %}<|end|>\n"
    "{% endfor %}{% if tools %}tools: {{ tools | map(attribute='function.name') | join(',') }}\n"
    "{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

static char *render(const ts_llm *llm, const ts_chat_options *opt, const char *json,
                    ts_status want) {
    char *text = NULL;
    size_t len = 0;
    ts_error err = {0};
    ts_status st = ts_llm_chat_render(llm, opt, json, strlen(json), &text, &len, &err);
    if (st != want) {
        fail_msg("render %s: got %s (%s), want %s", json, ts_status_str(st), err.msg,
                 ts_status_str(want));
    }
    if (st == TS_OK) {
        assert_int_equal(strlen(text), len);
    }
    return text;
}

static void test_render_source(void **state) {
    (void)state;
    ts_chat_options opt = {.source = k_tmpl, .keep_special = 1};
    char *t = render(NULL, &opt,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":"
                     "{\"name\":\"f\",\"arguments\":{\"x\":1.0,\"s\":\"\\u00e9\"}}}]}],"
                     "\"tools\":[{\"function\":{\"name\":\"f\"}},{\"function\":{\"name\":\"g\"}}],"
                     "\"bos_token\":\"<s>\"}",
                     TS_OK);
    assert_string_equal(t,
                        "<s><|user|>hi<|end|>\n<|assistant|>[f {\"x\": 1.0, \"s\": \"\xc3\xa9\"}]"
                        "<|end|>\ntools: f,g\n<|assistant|>");
    ts_free(t);
    /* add_generation_prompt false; bos_token "" without a model. */
    t = render(NULL, &opt,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
               "\"add_generation_prompt\":false}",
               TS_OK);
    assert_string_equal(t, "<|user|>a<|end|>\n");
    ts_free(t);
    /* A built-in family by name needs no model (tessera template --chat-template NAME). */
    ts_chat_options named = {.name = "gemma"};
    t = render(NULL, &named, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", TS_OK);
    assert_string_equal(t, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
    ts_free(t);
    /* tools and documents are none when absent, as transformers passes them. */
    ts_chat_options none_opt = {.source = "{{ tools is none }} {{ documents is none }} "
                                          "{{ tools is defined }}"};
    t = render(NULL, &none_opt, "{\"messages\":[]}", TS_OK);
    assert_string_equal(t, "True True True");
    ts_free(t);
    /* The template's own refusal, with its message. */
    char *none = NULL;
    size_t len = 0;
    ts_error err = {0};
    const char *bad = "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}";
    assert_int_equal(ts_llm_chat_render(NULL, &opt, bad, strlen(bad), &none, &len, &err),
                     TS_ERR_ABORTED);
    assert_string_equal(err.msg, "template raised: no function role");
    assert_null(none);
    /* Malformed requests and templates. */
    render(NULL, &opt, "[1]", TS_ERR_FORMAT);
    render(NULL, &opt, "{\"messages\":", TS_ERR_FORMAT);
    /* Valid-looking objects cJSON refuses (a lone surrogate, nesting past its limit) are
     * named as JSON errors, not "not a JSON object". */
    const char *surrogate = "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}";
    assert_int_equal(
        ts_llm_chat_render(NULL, &opt, surrogate, strlen(surrogate), &none, &len, &err),
        TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not valid JSON (error near byte"));
    assert_non_null(strstr(err.msg, "surrogate"));
    char deep[2200];
    int n = snprintf(deep, sizeof deep, "{\"messages\":[],\"x\":");
    for (int i = 0; i < 1050; i++) {
        deep[n++] = '[';
    }
    for (int i = 0; i < 1050; i++) {
        deep[n++] = ']';
    }
    deep[n++] = '}';
    deep[n] = 0;
    assert_int_equal(ts_llm_chat_render(NULL, &opt, deep, (size_t)n, &none, &len, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "nesting deeper than"));
    assert_null(none);
    ts_chat_options broken = {.source = "{% if x %}never closed"};
    render(NULL, &broken, "{\"messages\":[]}", TS_ERR_FORMAT);
    /* Neither a model nor a source. */
    render(NULL, NULL, "{\"messages\":[]}", TS_ERR_INVALID_ARG);
}

static void test_model_template(void **state) {
    (void)state;
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.chat_template = k_tmpl;
    api_model m;
    api_model_open(&m, &spec, "api_chat");
    const char *src = ts_llm_chat_template(m.llm);
    assert_non_null(src);
    assert_string_equal(src, k_tmpl);

    /* The model's bos ("<s>", added by the tokenizer) is dropped unless keep_special. */
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    char *t = render(m.llm, NULL, req, TS_OK);
    assert_string_equal(t, "<|user|>hi<|end|>\n<|assistant|>");
    ts_free(t);
    ts_chat_options keep = {.keep_special = 1};
    t = render(m.llm, &keep, req, TS_OK);
    assert_string_equal(t, "<s><|user|>hi<|end|>\n<|assistant|>");
    ts_free(t);

    /* ts_llm_chat_prompt: the same through role/content pairs; by name: a built-in family. */
    ts_message msgs[] = {{"user", "hi"}};
    size_t len = 0;
    ts_error err = {0};
    assert_int_equal(ts_llm_chat_prompt(m.llm, NULL, msgs, 1, 1, &t, &len, &err), TS_OK);
    assert_string_equal(t, "<|user|>hi<|end|>\n<|assistant|>");
    ts_free(t);
    assert_int_equal(ts_llm_chat_prompt(m.llm, "chatml", msgs, 1, 1, &t, &len, &err), TS_OK);
    assert_string_equal(t, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    ts_free(t);

    /* Built-in families render role and text only: tools and tool turns are refused. */
    ts_chat_options fam = {.name = "chatml"};
    render(m.llm, &fam,
           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":"
           "{\"name\":\"f\"}}]}",
           TS_ERR_UNSUPPORTED);
    render(m.llm, &fam, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
           TS_ERR_UNSUPPORTED);
    t = render(m.llm, &fam,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
               "{\"type\":\"text\",\"text\":\"b\"}]}],\"add_generation_prompt\":false}",
               TS_OK);
    assert_string_equal(t, "<|im_start|>user\nab<|im_end|>\n");
    ts_free(t);

    /* A context renders with the model's template, or params.chat_template_source. */
    ts_context_params p = api_params();
    ts_context *ctx = NULL;
    assert_int_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    assert_null(info.chat_template);
    assert_string_equal(info.chat_template_source, k_tmpl);
    assert_string_equal(info.chat_template_notice, "");
    ts_chat_profile prof;
    ts_context_chat_profile(ctx, &prof);
    assert_string_equal(prof.renderer, "jinja");
    assert_int_equal(prof.tool_format, TS_CHAT_TOOLS_GENERIC);
    assert_int_equal(prof.reasoning_format, TS_CHAT_REASONING_NONE);
    assert_true(prof.renders_tools); /* it reads `tools` */
    assert_int_equal(ts_context_chat_render(ctx, req, strlen(req), &t, &len, &err), TS_OK);
    assert_string_equal(t, "<|user|>hi<|end|>\n<|assistant|>");
    ts_free(t);
    assert_int_equal(ts_context_chat_prompt(ctx, msgs, 1, 0, &t, &len, &err), TS_OK);
    assert_string_equal(t, "<|user|>hi<|end|>\n");
    ts_free(t);
    ts_context_destroy(ctx);

    /* The profile is the given template's: Hermes-style calls, <think> reasoning, tools. */
    p.chat_template_source = "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages "
                             "%}<tool_call>{{ m.content }}</tool_call><think>{% endfor %}";
    assert_int_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    ts_context_chat_profile(ctx, &prof);
    assert_string_equal(prof.renderer, "jinja");
    assert_int_equal(prof.tool_format, TS_CHAT_TOOLS_HERMES);
    assert_int_equal(prof.reasoning_format, TS_CHAT_REASONING_THINK);
    assert_true(prof.renders_tools);
    ts_context_destroy(ctx);

    p.chat_template_source = "[{{ messages | length }}]";
    assert_int_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    assert_int_equal(ts_context_chat_render(ctx, req, strlen(req), &t, &len, &err), TS_OK);
    assert_string_equal(t, "[1]");
    ts_free(t);
    ts_context_destroy(ctx);

    /* A given template that does not compile fails the context; the model's own one does
     * not (completions still work) and says why at render time. */
    p.chat_template_source = "{% for %}";
    assert_int_not_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    assert_non_null(strstr(err.msg, "chat template"));
    api_model_close(&m);

    spec.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}{% frobnicate %}";
    api_model_open(&m, &spec, "api_chat_bad");
    p.chat_template_source = NULL;
    assert_int_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    ts_context_get_info(ctx, &info);
    assert_null(info.chat_template_source);
    assert_non_null(strstr(info.chat_template_notice, "frobnicate"));
    assert_int_equal(ts_context_chat_render(ctx, req, strlen(req), &t, &len, &err),
                     TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "frobnicate"));
    ts_context_destroy(ctx);
    api_model_close(&m);
}

/* A model without a template: NOT_FOUND, naming the way out. */
static void test_no_template(void **state) {
    (void)state;
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    api_model m;
    api_model_open(&m, &spec, "api_chat_none");
    assert_null(ts_llm_chat_template(m.llm));
    char *t = render(m.llm, NULL, "{\"messages\":[]}", TS_ERR_NOT_FOUND);
    assert_null(t);
    ts_error err = {0};
    size_t len = 0;
    assert_int_equal(ts_llm_chat_render(m.llm, NULL, "{\"messages\":[]}", 15, &t, &len, &err),
                     TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "--chat-template"));
    api_model_close(&m);
}

/* A Gemma 3 file without a template renders with the built-in gemma family (from its
 * architecture), and the context says so; limits and cancel reach the render. */
static void test_family_fallback(void **state) {
    (void)state;
    ts_tiny_spec spec = ts_tiny_spec_default("gemma3");
    api_model m;
    api_model_open(&m, &spec, "api_chat_gemma");
    assert_null(ts_llm_chat_template(m.llm));
    char *t = render(m.llm, NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", TS_OK);
    assert_string_equal(t, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
    ts_free(t);
    ts_context_params p = api_params();
    ts_context *ctx = NULL;
    ts_error err = {0};
    assert_int_equal(ts_context_create(m.llm, &p, &ctx, &err), TS_OK);
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    assert_string_equal(info.chat_template, "gemma");
    assert_null(info.chat_template_source);
    ts_chat_profile prof;
    ts_context_chat_profile(ctx, &prof);
    assert_string_equal(prof.renderer, "gemma"); /* a family: no tools, no markers */
    assert_int_equal(prof.tool_format, TS_CHAT_TOOLS_GENERIC);
    assert_false(prof.renders_tools);
    assert_non_null(strstr(info.chat_template_notice, "no chat template"));
    assert_non_null(strstr(info.chat_template_notice, "'gemma'"));
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    size_t len = 0;
    ts_chat_options opt = {.timeout_ms = 1000, .max_memory = 1 << 20};
    assert_int_equal(ts_context_chat_render_opt(ctx, &opt, req, strlen(req), &t, &len, &err),
                     TS_OK);
    assert_string_equal(t, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
    ts_free(t);
    opt.name = "chatml";
    assert_int_equal(ts_context_chat_render_opt(ctx, &opt, req, strlen(req), &t, &len, &err),
                     TS_ERR_INVALID_ARG);
    ts_context_destroy(ctx);
    api_model_close(&m);
}

/* An embedder reads answers with the profile's formats: reasoning, content and tool calls,
 * the same fed whole or byte by byte. */
static void test_chat_parser(void **state) {
    (void)state;
    ts_chat_profile prof = ts_chat_profile_detect("{% for m in messages %}<tool_call>{{ m.content "
                                                  "}}</tool_call>{% endfor %}<think>");
    assert_int_equal(prof.tool_format, TS_CHAT_TOOLS_HERMES);
    const char *answer = "<think>why</think>Sure. <tool_call>{\"name\": \"f\", \"arguments\": "
                         "{\"a\": 1}}</tool_call>";
    ts_chat_parser_params pp = {.tool_format = prof.tool_format,
                                .reasoning_format = prof.reasoning_format,
                                .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":"
                                              "\"f\",\"parameters\":{\"type\":\"object\"}}}]",
                                .parallel_tool_calls = true,
                                .id_seed = 7};
    for (int whole = 0; whole < 2; whole++) {
        ts_chat_parser *cp = NULL;
        ts_error err = {0};
        assert_int_equal(ts_chat_parser_create(&pp, &cp, &err), TS_OK);
        size_t n = strlen(answer), events = 0;
        for (size_t i = 0; i < n; i += whole ? n : 1) {
            assert_int_equal(ts_chat_parser_feed(cp, answer + i, whole ? n : 1, &err), TS_OK);
            const ts_chat_event *ev = NULL;
            events += ts_chat_parser_events(cp, &ev);
            ts_chat_parser_clear(cp);
        }
        assert_int_equal(ts_chat_parser_finish(cp, &err), TS_OK);
        const ts_chat_event *ev = NULL;
        events += ts_chat_parser_events(cp, &ev);
        assert_true(events >= 3); /* reasoning, content, the call */
        size_t len = 0;
        assert_string_equal(ts_chat_parser_reasoning(cp, &len), "why");
        assert_string_equal(ts_chat_parser_content(cp, &len), "Sure.");
        const ts_chat_tool_call *calls = NULL;
        assert_int_equal(ts_chat_parser_tool_calls(cp, &calls), 1);
        assert_string_equal(calls[0].name, "f");
        assert_string_equal(calls[0].arguments, "{\"a\":1}");
        assert_true(strncmp(calls[0].id, "call_", 5) == 0);
        ts_chat_parser_destroy(cp);
    }
    /* Without tools the call stays content. */
    pp.tools_json = NULL;
    ts_chat_parser *cp = NULL;
    ts_error err = {0};
    assert_int_equal(ts_chat_parser_create(&pp, &cp, &err), TS_OK);
    assert_int_equal(ts_chat_parser_feed(cp, answer, strlen(answer), &err), TS_OK);
    assert_int_equal(ts_chat_parser_finish(cp, &err), TS_OK);
    const ts_chat_tool_call *calls = NULL;
    assert_int_equal(ts_chat_parser_tool_calls(cp, &calls), 0);
    size_t len = 0;
    assert_non_null(strstr(ts_chat_parser_content(cp, &len), "<tool_call>"));
    ts_chat_parser_destroy(cp);
    pp.tools_json = "{\"not\": \"an array\"}";
    assert_int_equal(ts_chat_parser_create(&pp, &cp, &err), TS_ERR_FORMAT);
    assert_null(cp);
    assert_non_null(strstr(err.msg, "tools_json"));
    assert_true(ts_chat_prompt_opens_reasoning(TS_CHAT_REASONING_THINK, "x<think>\n", 9));
    assert_false(ts_chat_prompt_opens_reasoning(TS_CHAT_REASONING_THINK, "x", 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_family_fallback), cmocka_unit_test(test_render_source),
        cmocka_unit_test(test_model_template),  cmocka_unit_test(test_no_template),
        cmocka_unit_test(test_chat_parser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
