/*
 * fuzz_template.c — libFuzzer entry for the Jinja engine (src/template/): the input is a
 * chat template (untrusted text from a GGUF or a --chat-template-file), compiled and, when
 * it compiles, rendered against a small fixed conversation under tight limits.
 *
 * Invariants: compile returns TS_OK with a template, or an error whose message starts
 * "template:"; render returns TS_OK with NUL-terminated output no longer than max_output, or
 * an error with a message (never a crash, leak or hang: steps, depth, output, work and memory
 * are capped, so a hostile input such as a big string searched in a loop stops in well under a
 * second instead of running into libFuzzer's timeout).
 * A broken invariant traps.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static const char VARS[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hi {{ x }} caf\\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>t</think>Hello\",\"tool_calls\":[{\"id\":"
    "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1,"
    "\"b\":[1.5,null,true]}}}]},"
    "{\"role\":\"tool\",\"content\":\"42\"},{\"role\":\"user\",\"content\":\"ok\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\","
    "\"enable_thinking\":false,\"n\":3,\"f\":2.5}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_tpl *t = NULL;
    ts_error err = {0};
    ts_status st = ts_tpl_compile((const char *)data, size, &t, &err);
    if (st != TS_OK) {
        CHECK(t == NULL);
        CHECK(strncmp(err.msg, "template:", 9) == 0);
        return 0;
    }
    CHECK(t != NULL);
    ts_tpl_options o = {.max_output = 1 << 16,
                        .max_steps = 200000,
                        .max_depth = 32,
                        .now = 1700000000,
                        .max_work = 20000000,
                        .max_memory = (size_t)32 << 20};
    char *out = NULL;
    size_t n = 0;
    st = ts_tpl_render(t, VARS, sizeof(VARS) - 1, &o, &out, &n, &err);
    if (st == TS_OK) {
        CHECK(out != NULL && out[n] == 0 && n <= o.max_output);
        free(out);
    } else {
        CHECK(out == NULL && err.msg[0] != 0);
    }
    ts_tpl_free(t);
    return 0;
}
