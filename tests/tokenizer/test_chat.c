/*
 * test_chat.c — chat template detection and rendering, one known string per family.
 *
 * The expected strings follow each family's published format. The ChatML and Phi-3 ones were
 * also produced by rendering the real templates stored in SmolLM2's and Phi-3's GGUF files with
 * jinja2 3.1 (messages as below, add_generation_prompt=True, bos_token=''), which gave the same
 * text; those real templates are detected from the files when present.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tokenizer.h"

#include "common/skip.h"

static const ts_chat_message k_conv[] = {
    {"system", "Be brief."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "How are you?"},
};

static const struct {
    const char *name;
    const char *want;
} k_expected[] = {
    {"chatml", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
               "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?"
               "<|im_end|>\n<|im_start|>assistant\n"},
    {"llama2", "[INST] Be brief.\nHi [/INST]Hello!</s>[INST] How are you? [/INST]"},
    {"llama2-sys",
     "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello!</s>[INST] How are you? [/INST]"},
    {"llama2-sys-bos",
     "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello!</s><s>[INST] How are you? [/INST]"},
    {"llama3", "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"mistral-v1", " [INST] Be brief.\n\nHi [/INST] Hello!</s> [INST] How are you? [/INST]"},
    {"mistral-v3", "[INST] Be brief.\n\nHi[/INST] Hello!</s>[INST] How are you?[/INST]"},
    {"mistral-v3-tekken", "[INST]Be brief.\n\nHi[/INST]Hello!</s>[INST]How are you?[/INST]"},
    {"mistral-v7", "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello!</s>"
                   "[INST] How are you?[/INST]"},
    {"gemma", "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
              "Hello!<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n"
              "<start_of_turn>model\n"},
    {"phi3", "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
             "<|user|>\nHow are you?<|end|>\n<|assistant|>\n"},
    {"zephyr", "<|system|>\nBe brief.<|endoftext|>\n<|user|>\nHi<|endoftext|>\n<|assistant|>\n"
               "Hello!<|endoftext|>\n<|user|>\nHow are you?<|endoftext|>\n<|assistant|>\n"},
    {"deepseek", "Be brief.### Instruction:\nHi\n### Response:\nHello!\n<|EOT|>\n"
                 "### Instruction:\nHow are you?\n### Response:\n"},
    {"deepseek2", "Be brief.\n\nUser: Hi\n\nAssistant: Hello!<｜end▁of▁sentence｜>User: How are "
                  "you?\n\nAssistant:"},
    {"deepseek3", "Be brief.\n\n<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>"
                  "How are you?<｜Assistant｜>"},
};

static void test_render_families(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_expected / sizeof k_expected[0]; i++) {
        ts_chat_template tp;
        ts_error err = {0};
        assert_int_equal(ts_chat_template_from_name(k_expected[i].name, &tp, &err), TS_OK);
        assert_string_equal(ts_chat_family_name(tp.family), k_expected[i].name);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(ts_chat_apply(&tp, k_conv, 4, true, &text, &len, &err), TS_OK);
        if (strcmp(text, k_expected[i].want) != 0) {
            printf("%s:\n got  '%s'\n want '%s'\n", k_expected[i].name, text, k_expected[i].want);
            fail();
        }
        assert_int_equal(len, strlen(text));
        free(text);
    }
}

static void test_generation_prompt_off(void **state) {
    (void)state;
    ts_chat_template tp;
    ts_error err = {0};
    assert_int_equal(ts_chat_template_from_name("gemma", &tp, &err), TS_OK);
    char *text = NULL;
    size_t len = 0;
    /* Gemma trims contents and folds the system prompt into the first user turn. */
    const ts_chat_message msgs[] = {{"system", "  Sys  "}, {"user", " Q "}};
    assert_int_equal(ts_chat_apply(&tp, msgs, 2, false, &text, &len, &err), TS_OK);
    assert_string_equal(text, "<start_of_turn>user\nSys\n\nQ<end_of_turn>\n");
    free(text);
    /* Roles a family cannot express are errors. */
    const ts_chat_message tool[] = {{"tool", "x"}};
    assert_int_equal(ts_chat_apply(&tp, tool, 1, true, &text, &len, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'tool'"));
    assert_int_equal(ts_chat_template_from_name("chatml", &tp, &err), TS_OK);
    assert_int_equal(ts_chat_apply(&tp, tool, 1, false, &text, &len, &err), TS_OK);
    assert_string_equal(text, "<|im_start|>tool\nx<|im_end|>\n");
    free(text);
    assert_int_equal(ts_chat_apply(&tp, NULL, 0, true, &text, &len, &err), TS_OK);
    assert_string_equal(text, "<|im_start|>assistant\n");
    free(text);
}

static void test_detect(void **state) {
    (void)state;
    static const struct {
        const char *tmpl;
        const char *family;
    } cases[] = {
        {"{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
         "'<|im_end|>\\n'}}{% endfor %}",
         "chatml"},
        {"{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + role + '\\n' }}{% endfor %}",
         "gemma"},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' %}",
         "llama3"},
        {"{% if messages[0]['role'] == 'system' %}{{ '<<SYS>>\\n' }}{% endif %}{{ '[INST] ' }}",
         "llama2-sys"},
        {"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
         "{% endfor %}",
         "llama2"},
        {"{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{{ \"[INST]\" + m['content'] }}",
         "mistral-v3-tekken"},
        {"[SYSTEM_PROMPT]{{ system }}[/SYSTEM_PROMPT][INST]", "mistral-v7"},
        {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
         "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + "
         "'\\n'}}{% endif %}{% endfor %}",
         "phi3"},
        {"{% for m in messages %}{{ '<|user|>\\n' + m['content'] + eos_token }}{% endfor %}"
         "<|endoftext|>",
         "zephyr"},
        {"### Instruction:\\n{{ content }}\\n### Response:\\n{{ c }}\\n<|EOT|>\\n", "deepseek"},
        {"{{'<｜User｜>' + c}}{{'<｜Assistant｜>' + c + '<｜end▁of▁sentence｜>'}}", "deepseek3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_chat_template tp;
        ts_error err = {0};
        assert_int_equal(ts_chat_template_detect(cases[i].tmpl, strlen(cases[i].tmpl), &tp, &err),
                         TS_OK);
        if (strcmp(ts_chat_family_name(tp.family), cases[i].family) != 0) {
            printf("case %zu: detected %s, want %s\n", i, ts_chat_family_name(tp.family),
                   cases[i].family);
            fail();
        }
    }
    ts_chat_template tp;
    ts_error err = {0};
    const char unknown[] = "{{ messages | tojson }}";
    assert_int_equal(ts_chat_template_detect(unknown, sizeof unknown - 1, &tp, &err),
                     TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tojson"));
    /* gpt-oss's harmony template: a clear message that it is not supported, not garbage. */
    const char harmony[] = "{{- '<|start|>' + message.role + '<|channel|>final<|message|>' + "
                           "message.content + '<|end|>' }}";
    assert_int_equal(ts_chat_template_detect(harmony, sizeof harmony - 1, &tp, &err),
                     TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "harmony"));
    assert_int_equal(ts_chat_template_from_name("vicuna-9000", &tp, &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "chatml"));
}

/* The SmolLM2 template inserts a default system prompt when the conversation has none. */
static void test_smollm_template(void **state) {
    (void)state;
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             home ? home : "");
    ts_gguf *g = NULL;
    ts_tokenizer *t = NULL;
    ts_error err = {0};
    if (ts_gguf_open(path, &g, &err) != TS_OK) {
        TS_SKIP("%s", err.msg);
        return;
    }
    assert_int_equal(ts_tokenizer_create(g, &t, &err), TS_OK);
    ts_chat_template tp;
    assert_int_equal(ts_tokenizer_chat_template(t, &tp, &err), TS_OK);
    assert_int_equal(tp.family, TS_CHAT_CHATML);
    char *text = NULL;
    size_t len = 0;
    /* Rendered by jinja2 from the template in the file. */
    assert_int_equal(ts_chat_apply(&tp, k_conv + 1, 3, true, &text, &len, &err), TS_OK);
    assert_string_equal(text, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                              "trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                              "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow "
                              "are you?<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    assert_int_equal(ts_chat_apply(&tp, k_conv, 2, false, &text, &len, &err), TS_OK);
    assert_string_equal(
        text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    free(text);
    ts_tokenizer_destroy(t);
    ts_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_families),
        cmocka_unit_test(test_generation_prompt_off),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_smollm_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
