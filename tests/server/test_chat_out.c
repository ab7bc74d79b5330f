/* test_chat_out.c — the chat answer parser (src/runtime/chat_out.c): recorded model outputs of
 * every supported family, parsed whole, byte by byte, at every cut point and in random chunks
 * (the events concatenated must equal the whole answer's result), format detection, and the
 * OpenAI JSON shapes built from the result. No model and no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/chat_out.h"

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct text {
    char *p;
    size_t len;
} text;

static void text_add(text *t, const char *s, size_t n) {
    t->p = realloc(t->p, t->len + n + 1);
    assert_non_null(t->p);
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void text_addz(text *t, const char *s) {
    text_add(t, s, strlen(s));
}

/* What one run of the parser gave: from the events (streamed) and from the getters (whole). */
typedef struct outcome {
    text content, reasoning, calls; /* from the getters; calls as "name args|..." */
    text ev_content, ev_reasoning, ev_calls;
} outcome;

static void outcome_free(outcome *o) {
    free(o->content.p), free(o->reasoning.p), free(o->calls.p);
    free(o->ev_content.p), free(o->ev_reasoning.p), free(o->ev_calls.p);
    memset(o, 0, sizeof *o);
}

static void drain(ts_chat_out *p, outcome *o) {
    const ts_chat_event *ev = NULL;
    size_t n = ts_chat_out_events(p, &ev);
    for (size_t i = 0; i < n; i++) {
        switch (ev[i].kind) {
        case TS_CHAT_EVENT_CONTENT:
            assert_true(ev[i].len > 0);
            text_add(&o->ev_content, ev[i].text, ev[i].len);
            break;
        case TS_CHAT_EVENT_REASONING:
            assert_true(ev[i].len > 0);
            text_add(&o->ev_reasoning, ev[i].text, ev[i].len);
            break;
        case TS_CHAT_EVENT_TOOL_CALL:
            text_addz(&o->ev_calls, ev[i].name);
            text_addz(&o->ev_calls, " ");
            text_addz(&o->ev_calls, ev[i].arguments);
            text_addz(&o->ev_calls, "|");
            break;
        }
    }
    ts_chat_out_clear(p);
}

static uint64_t rng(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t x = *s;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Feeds s cut at the offsets in cuts[0..n_cuts) (ascending). */
static void run(const ts_chat_out_config *cfg, const char *s, const size_t *cuts, size_t n_cuts,
                outcome *o) {
    memset(o, 0, sizeof *o);
    text_addz(&o->content, ""), text_addz(&o->reasoning, ""), text_addz(&o->calls, "");
    text_addz(&o->ev_content, ""), text_addz(&o->ev_reasoning, ""), text_addz(&o->ev_calls, "");
    ts_chat_out *p = ts_chat_out_create(cfg);
    assert_non_null(p);
    size_t len = strlen(s), at = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        assert_int_equal(ts_chat_out_feed(p, s + at, end - at), TS_OK);
        drain(p, o);
        at = end;
    }
    assert_int_equal(ts_chat_out_finish(p), TS_OK);
    drain(p, o);
    text_addz(&o->content, ts_chat_out_content(p, NULL));
    text_addz(&o->reasoning, ts_chat_out_reasoning(p, NULL));
    const ts_chat_tool_call *calls = NULL;
    size_t n = ts_chat_out_tool_calls(p, &calls);
    for (size_t i = 0; i < n; i++) {
        text_addz(&o->calls, calls[i].name);
        text_addz(&o->calls, " ");
        text_addz(&o->calls, calls[i].arguments);
        text_addz(&o->calls, "|");
        assert_non_null(calls[i].id);
    }
    ts_chat_out_destroy(p);
    /* What a stream sent adds up to the whole answer. */
    assert_string_equal(o->ev_content.p, o->content.p);
    assert_string_equal(o->ev_reasoning.p, o->reasoning.p);
    assert_string_equal(o->ev_calls.p, o->calls.p);
}

static void same(const outcome *a, const outcome *b, const char *how, const char *input) {
    if (strcmp(a->content.p, b->content.p) != 0 || strcmp(a->reasoning.p, b->reasoning.p) != 0 ||
        strcmp(a->calls.p, b->calls.p) != 0) {
        print_error("input %s\n%s differs: content '%s' vs '%s', reasoning '%s' vs '%s', calls "
                    "'%s' vs '%s'\n",
                    input, how, a->content.p, b->content.p, a->reasoning.p, b->reasoning.p,
                    a->calls.p, b->calls.p);
        fail();
    }
}

/* Parses `s` whole and in pieces; the result must be the expected one every time. calls is
 * "name args|name args|" with compact args. */
static void check(const ts_chat_out_config *cfg, const char *s, const char *content,
                  const char *reasoning, const char *calls) {
    outcome whole;
    run(cfg, s, NULL, 0, &whole);
    if (strcmp(whole.content.p, content) != 0 || strcmp(whole.reasoning.p, reasoning) != 0 ||
        strcmp(whole.calls.p, calls) != 0) {
        print_error("input %s\n got content '%s' reasoning '%s' calls '%s'\nwant content '%s' "
                    "reasoning '%s' calls '%s'\n",
                    s, whole.content.p, whole.reasoning.p, whole.calls.p, content, reasoning,
                    calls);
        fail();
    }
    size_t len = strlen(s);
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    assert_non_null(cuts);
    /* byte by byte */
    for (size_t i = 0; i < len; i++) {
        cuts[i] = i + 1;
    }
    outcome o;
    run(cfg, s, cuts, len > 0 ? len - 1 : 0, &o);
    same(&whole, &o, "byte by byte", s);
    outcome_free(&o);
    /* every single cut */
    for (size_t c = 1; c < len; c++) {
        run(cfg, s, &c, 1, &o);
        same(&whole, &o, "one cut", s);
        outcome_free(&o);
    }
    /* random chunk sizes */
    uint64_t seed = len;
    for (int round = 0; round < 20; round++) {
        size_t n = 0, at = 0;
        for (;;) {
            at += 1 + rng(&seed) % 13;
            if (at >= len) {
                break;
            }
            cuts[n++] = at;
        }
        run(cfg, s, cuts, n, &o);
        same(&whole, &o, "random chunks", s);
        outcome_free(&o);
    }
    free(cuts);
    outcome_free(&whole);
}

static const char k_tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"days\":{\"type\":"
    "\"integer\"},\"zip\":{\"type\":\"string\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}}}}}]";

static cJSON *g_tools;

static ts_chat_out_config cfg_for(ts_chat_tool_format t, ts_chat_reasoning_format r) {
    return (ts_chat_out_config){.format = {t, r},
                                .parse_tools = true,
                                .parallel_tool_calls = true,
                                .tools = g_tools,
                                .id_seed = 42};
}

#define W_PARIS "get_weather {\"location\":\"Paris\"}|"

/* ---- formats ------------------------------------------------------------------------------ */

static void test_hermes(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_NONE);
    /* Qwen2.5 as it answers */
    check(&c,
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
          "</tool_call>",
          "", "", W_PARIS);
    /* parallel calls, text before */
    check(&c,
          "Let me check both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
          "{\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
          "\"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>",
          "Let me check both.", "", W_PARIS "get_time {\"tz\":\"Europe/Paris\"}|");
    /* compact, CRLF, arguments as a JSON string, unicode */
    check(&c, "<tool_call>{\"name\":\"get_weather\",\"arguments\":{}}</tool_call>", "", "",
          "get_weather {}|");
    check(&c,
          "<tool_call>\r\n  {\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\": "
          "\\\"Z\xc3\xbcrich\\\"}\"}  \r\n</tool_call>\r\n",
          "", "", "get_weather {\"location\":\"Z\xc3\xbcrich\"}|");
    /* nested arguments, a brace inside a string */
    check(&c,
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"a}b{\", "
          "\"opts\": {\"x\": [1, 2.5, true, null]}}}\n</tool_call>",
          "", "", "get_weather {\"location\":\"a}b{\",\"opts\":{\"x\":[1,2.5,true,null]}}|");
    /* the answer stopped before </tool_call> */
    check(&c, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n", "", "",
          "get_time {\"tz\":\"UTC\"}|");
    /* malformed: missing brace, truncated, no name, arguments not an object */
    check(&c,
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}\n"
          "</tool_call>",
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}\n"
          "</tool_call>",
          "", "");
    check(&c, "<tool_call>\n{\"name\": \"get_wea", "<tool_call>\n{\"name\": \"get_wea", "", "");
    check(&c, "<tool_call>{\"arguments\": {}}</tool_call>",
          "<tool_call>{\"arguments\": {}}</tool_call>", "", "");
    check(&c, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call> ok",
          "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call> ok", "", "");
    /* the opening tag left out (SmolLM2 few-shot does this): a strict answer-is-JSON call,
     * and the orphan closing tag is dropped */
    check(&c, "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
          "", "", W_PARIS);
    check(&c, "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_",
          "</tool_", "", W_PARIS);
    check(&c, "{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
          "{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", "", "");
    check(&c, "{\"a\": 1}", "{\"a\": 1}", "", "");
    /* things that look like a marker but are not */
    check(&c, "Use the <tool> tag, or <tool_cal, and a < b.",
          "Use the <tool> tag, or <tool_cal, and a < b.", "", "");
    check(&c, "Ends with <tool_c", "Ends with <tool_c", "", "");
    check(&c, "  Hello,\n world!\n", "  Hello,\n world!\n", "", "");
    /* a good call after a bad one; text after a call */
    check(&c,
          "<tool_call>oops</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": "
          "{}}</tool_call>\nDone.",
          "<tool_call>oops</tool_call>Done.", "", "get_time {}|");
}

static void test_hermes_xml_and_glm(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_THINK);
    /* Qwen3-Coder / Qwen3.5: parameter types from the tool's schema */
    check(&c,
          "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
          "<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n"
          "</tool_call>",
          "", "", "get_weather {\"location\":\"Paris\",\"days\":3,\"zip\":\"75001\"}|");
    /* multi-line string value, an unknown parameter holding JSON */
    check(&c,
          "I'll look.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nNew\nYork\n"
          "</parameter>\n<parameter=extra>\n{\"a\": [1]}\n</parameter>\n</function>\n</tool_call>",
          "I'll look.", "", "get_weather {\"location\":\"New\\nYork\",\"extra\":{\"a\":[1]}}|");
    check(&c,
          "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</function>\n</"
          "tool_call>",
          "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</function>\n"
          "</tool_call>",
          "", "");
    /* GLM 4.5 / 4.6 */
    check(&c,
          "<think>Need weather.</think>\n<tool_call>get_weather\n<arg_key>location</arg_key>\n"
          "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
          "</tool_call>",
          "", "Need weather.", "get_weather {\"location\":\"Paris\",\"days\":2}|");
    check(&c, "<tool_call>get_time</tool_call>", "", "", "get_time {}|");
    check(&c, "<tool_call>hello</tool_call>", "<tool_call>hello</tool_call>", "", "");
}

static void test_reasoning(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_THINK);
    /* Qwen3 thinking, then a call */
    check(&c,
          "<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n"
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
          "</tool_call>",
          "", "The user wants the weather in Paris. I should call get_weather.", W_PARIS);
    /* Qwen3 with thinking off: an empty block */
    check(&c, "<think>\n\n</think>\n\nParis is sunny.", "Paris is sunny.", "", "");
    /* unterminated: all reasoning */
    check(&c, "<think>\nStill thinking about", "", "Still thinking about", "");
    /* <think> later in the text is content */
    check(&c, "Hi <think>x</think>", "Hi <think>x</think>", "", "");
    check(&c, "<thinking>no</thinking>", "<thinking>no</thinking>", "", "");
    /* DeepSeek R1: the prompt opened the block */
    ts_chat_out_config r1 = cfg_for(TS_CHAT_TOOLS_DEEPSEEK, TS_CHAT_REASONING_THINK);
    r1.reasoning_open = true;
    check(&r1, "Okay, 2 + 2 is 4.\n</think>\n\nThe answer is **4**.", "The answer is **4**.",
          "Okay, 2 + 2 is 4.", "");
    check(&r1, "Hmm, let me", "", "Hmm, let me", "");
    /* tool_choice none: reasoning still parsed, calls are content */
    ts_chat_out_config none = c;
    none.parse_tools = false;
    check(&none,
          "<think>x</think>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
          "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", "x", "");
    /* Magistral / Ministral 3 */
    ts_chat_out_config m = cfg_for(TS_CHAT_TOOLS_MISTRAL, TS_CHAT_REASONING_MISTRAL);
    check(&m, "[THINK]2+2=4, simple.[/THINK]The answer is 4.", "The answer is 4.", "2+2=4, simple.",
          "");
    check(&m, "[THINK]Call it.[/THINK][TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}", "", "Call it.",
          "get_time {\"tz\":\"UTC\"}|");
    assert_true(ts_chat_out_prompt_opens_reasoning(
        TS_CHAT_REASONING_THINK, "<｜Assistant｜><think>\n", strlen("<｜Assistant｜><think>\n")));
    const char *off = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert_false(ts_chat_out_prompt_opens_reasoning(TS_CHAT_REASONING_THINK, off, strlen(off)));
    assert_false(ts_chat_out_prompt_opens_reasoning(TS_CHAT_REASONING_NONE, "<think>", 7));
}

static void test_llama3(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_LLAMA3, TS_CHAT_REASONING_NONE);
    check(&c, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}", "", "",
          W_PARIS);
    /* Llama 3.2 sometimes adds "type"; several calls separated by ';' */
    check(&c,
          "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"location\": "
          "\"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}",
          "", "", W_PARIS "get_time {\"tz\":\"CET\"}|");
    check(&c,
          "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
          "", "", W_PARIS);
    /* builtin tools */
    check(&c, "<|python_tag|>brave_search.call(query=\"weather in Paris\", n=3, safe=True)", "", "",
          "brave_search {\"query\":\"weather in Paris\",\"n\":3,\"safe\":true}|");
    check(&c, "<|python_tag|>print(2 + 2)", "", "", "python {\"code\":\"print(2 + 2)\"}|");
    /* JSON that is not a call is the answer */
    check(&c, "{\"name\": \"Bob\", \"age\": 3}", "{\"name\": \"Bob\", \"age\": 3}", "", "");
    check(&c, "{\"name\": \"get_weather\"}", "{\"name\": \"get_weather\"}", "", "");
    check(&c, "  {\"broken\": ", "  {\"broken\": ", "", "");
    check(&c, "Sure: {\"name\": \"get_time\", \"parameters\": {}}",
          "Sure: {\"name\": \"get_time\", \"parameters\": {}}", "", "");
    check(&c, "The weather is nice.", "The weather is nice.", "", "");
    /* parallel_tool_calls false: the first call only */
    ts_chat_out_config one = c;
    one.parallel_tool_calls = false;
    check(&one,
          "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}\n{\"name\": "
          "\"get_time\", \"parameters\": {}}",
          "", "", W_PARIS);
}

static void test_mistral(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_MISTRAL, TS_CHAT_REASONING_NONE);
    check(&c,
          "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, "
          "\"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {}}]",
          "", "", W_PARIS "get_time {}|");
    check(&c, "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\"}", "", "", W_PARIS);
    check(&c, "[TOOL_CALLS]get_weather[CALL_ID]x9Y8z7W6v[ARGS]{\"location\": \"Paris\"}", "", "",
          W_PARIS);
    check(&c,
          "Checking.[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\"}[TOOL_CALLS]get_time["
          "ARGS]{}",
          "Checking.", "", W_PARIS "get_time {}|");
    check(&c, "[TOOL_CALLS]get weather[ARGS]{}", "[TOOL_CALLS]get weather[ARGS]{}", "", "");
    check(&c, "[TOOL_CALLS]get_weather[ARGS]{\"location\": ",
          "[TOOL_CALLS]get_weather[ARGS]{\"location\": ", "", "");
    check(&c, "[TOOL] [TOOL_C", "[TOOL] [TOOL_C", "", "");
    /* ids: the model's when it gave 9 alphanumerics, else 9 of ours */
    ts_chat_out *p = ts_chat_out_create(&c);
    const char *s = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"a1B2c3D4e\"},"
                    " {\"name\": \"g\", \"arguments\": {}, \"id\": \"call_1\"}]";
    assert_int_equal(ts_chat_out_feed(p, s, strlen(s)), TS_OK);
    assert_int_equal(ts_chat_out_finish(p), TS_OK);
    const ts_chat_tool_call *calls = NULL;
    assert_int_equal(ts_chat_out_tool_calls(p, &calls), 2);
    assert_string_equal(calls[0].id, "a1B2c3D4e");
    assert_int_equal(strlen(calls[1].id), 9);
    ts_chat_out_destroy(p);
}

static void test_other_families(void **state) {
    (void)state;
    ts_chat_out_config d = cfg_for(TS_CHAT_TOOLS_DEEPSEEK, TS_CHAT_REASONING_THINK);
    d.reasoning_open = true;
    /* R1 (distill templates) */
    check(&d,
          "The user asks for the weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
          "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁"
          "end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁"
          "call▁end｜><｜tool▁calls▁end｜>",
          "", "The user asks for the weather.", W_PARIS "get_time {}|");
    /* V3.1 */
    ts_chat_out_config v3 = cfg_for(TS_CHAT_TOOLS_DEEPSEEK, TS_CHAT_REASONING_THINK);
    check(&v3,
          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": "
          "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
          "", "", W_PARIS);
    check(&v3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather{}<｜tool▁calls▁end｜>",
          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather{}<｜tool▁calls▁end｜>", "", "");
    /* Functionary v3.1 */
    ts_chat_out_config f = cfg_for(TS_CHAT_TOOLS_FUNCTIONARY, TS_CHAT_REASONING_NONE);
    check(&f,
          "<function=get_weather>{\"location\": \"Paris\"}</function><function=get_time>{}"
          "</function>",
          "", "", W_PARIS "get_time {}|");
    check(&f, "<|python_tag|>import math\nprint(math.pi)", "", "",
          "python {\"code\":\"import math\\nprint(math.pi)\"}|");
    /* Command R7B */
    ts_chat_out_config r = cfg_for(TS_CHAT_TOOLS_COMMAND_R, TS_CHAT_REASONING_COMMAND_R);
    check(&r,
          "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_ACTION|>[\n    "
          "{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
          "{\"location\": \"Paris\"}}\n]<|END_ACTION|>",
          "", "I will look up the weather.", W_PARIS);
    check(&r,
          "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>It is sunny in Paris."
          "<|END_RESPONSE|>",
          "It is sunny in Paris.", "Easy.", "");
    /* Granite 3.x */
    ts_chat_out_config g = cfg_for(TS_CHAT_TOOLS_GRANITE, TS_CHAT_REASONING_THINK);
    check(&g,
          "<|tool_call|>[{\"arguments\": {\"location\": \"Paris\"}, \"name\": \"get_weather\"}]",
          "", "", W_PARIS);
    check(&g, "<think>Hmm.</think><response>Hello!</response>", "Hello!", "Hmm.", "");
    check(&g, "<|tool_call|>not json", "<|tool_call|>not json", "", "");
    /* Phi-4-mini */
    ts_chat_out_config ph = cfg_for(TS_CHAT_TOOLS_PHI4, TS_CHAT_REASONING_NONE);
    check(&ph,
          "<|tool_call|>[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
          "\"arguments\": {\"location\": \"Paris\"}}}]<|/tool_call|>",
          "", "", W_PARIS);
    check(&ph, "functools[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}]",
          "", "", W_PARIS);
    /* Firefunction v2 */
    ts_chat_out_config ff = cfg_for(TS_CHAT_TOOLS_FIREFUNCTION, TS_CHAT_REASONING_NONE);
    check(&ff,
          " functools[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, "
          "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]",
          "", "", W_PARIS "get_time {\"tz\":\"UTC\"}|");
    /* Kimi K2: the model's ids are kept */
    ts_chat_out_config k = cfg_for(TS_CHAT_TOOLS_KIMI, TS_CHAT_REASONING_THINK);
    const char *kimi = "<think>ok</think><|tool_calls_section_begin|><|tool_call_begin|>functions."
                       "get_weather:0<|tool_call_argument_begin|>{\"location\": \"Paris\"}<|tool_"
                       "call_end|><|tool_calls_section_end|>";
    check(&k, kimi, "", "ok", W_PARIS);
    ts_chat_out *p = ts_chat_out_create(&k);
    assert_int_equal(ts_chat_out_feed(p, kimi, strlen(kimi)), TS_OK);
    assert_int_equal(ts_chat_out_finish(p), TS_OK);
    const ts_chat_tool_call *calls = NULL;
    assert_int_equal(ts_chat_out_tool_calls(p, &calls), 1);
    assert_string_equal(calls[0].id, "functions.get_weather:0");
    ts_chat_out_destroy(p);
    /* gpt-oss (harmony) */
    ts_chat_out_config h = cfg_for(TS_CHAT_TOOLS_HARMONY, TS_CHAT_REASONING_HARMONY);
    check(&h,
          "<|channel|>analysis<|message|>User asks the weather. Call get_weather.<|end|>"
          "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
          "<|message|>{\"location\":\"Paris\"}<|call|>",
          "", "User asks the weather. Call get_weather.", W_PARIS);
    check(&h,
          "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant to=functions.get_time"
          "<|channel|>commentary json<|message|>{}",
          "", "Simple.", "get_time {}|");
    check(&h,
          "<|channel|>analysis<|message|>2+2=4<|end|><|start|>assistant<|channel|>final"
          "<|message|>The answer is 4.",
          "The answer is 4.", "2+2=4", "");
    check(&h, "<|channel|>final<|message|>Hi <|e", "Hi <|e", "", "");
    check(&h, "<|channel|>commentary to=functions.get_time<|message|>{oops}<|call|>", "{oops}", "",
          "");
    check(&h, "Plain answer, no channels.", "Plain answer, no channels.", "", "");
    ts_chat_out_config hn = h;
    hn.parse_tools = false;
    check(&hn,
          "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.get_time<|message|>{}<|call|>",
          "{}", "x", "");
    /* generic */
    ts_chat_out_config ge = cfg_for(TS_CHAT_TOOLS_GENERIC, TS_CHAT_REASONING_NONE);
    check(&ge,
          "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}}",
          "", "", W_PARIS);
    check(&ge,
          "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"location\": "
          "\"Paris\"}}]}",
          "", "", W_PARIS);
    check(&ge, "[{\"name\": \"get_time\", \"arguments\": {}}]", "", "", "get_time {}|");
    check(&ge, "[1, 2, 3]", "[1, 2, 3]", "", "");
    /* a call in a Markdown fence */
    check(&ge, "```json\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n```", "", "",
          "get_time {\"tz\":\"UTC\"}|");
    check(&ge, "```\n[{\"name\": \"get_time\", \"arguments\": {}}]\n```\n", "", "", "get_time {}|");
    check(&ge, "```json\n{\"a\": 1}\n```", "```json\n{\"a\": 1}\n```", "", "");
    check(&ge, "```python\nprint(1)\n```", "```python\nprint(1)\n```", "", "");
    check(&ge, "``x", "``x", "", "");
    check(&ge, "```json{\"name\": \"get_time\", \"arguments\": {}}```",
          "```json{\"name\": \"get_time\", \"arguments\": {}}```", "", "");
    check(&ge, "{\"name\": \"unknown_fn\", \"arguments\": {}}",
          "{\"name\": \"unknown_fn\", \"arguments\": {}}", "", "");
    /* without tools offered, nothing is a call */
    ge.tools = NULL;
    check(&ge, "{\"name\": \"get_time\", \"arguments\": {}}",
          "{\"name\": \"get_time\", \"arguments\": {}}", "", "");
}

/* ---- detection ---------------------------------------------------------------------------- */

static void test_detect(void **state) {
    (void)state;
    static const struct {
        const char *src;
        ts_chat_tool_format tools;
        ts_chat_reasoning_format reasoning;
    } cases[] = {
        {"{{- '<tool_call>\\n' }}{%- if '</think>' in content %}", TS_CHAT_TOOLS_HERMES,
         TS_CHAT_REASONING_THINK},
        {"Environment: ipython {{ '<|python_tag|>' }}", TS_CHAT_TOOLS_LLAMA3,
         TS_CHAT_REASONING_NONE},
        {"{{- '<|start_header_id|>ipython<|end_header_id|>' }}", TS_CHAT_TOOLS_LLAMA3,
         TS_CHAT_REASONING_NONE},
        {"[TOOL_CALLS][ ... [THINK]", TS_CHAT_TOOLS_MISTRAL, TS_CHAT_REASONING_MISTRAL},
        {"<｜tool▁calls▁begin｜> <think>", TS_CHAT_TOOLS_DEEPSEEK, TS_CHAT_REASONING_THINK},
        {"<function={{name}}> <|python_tag|>", TS_CHAT_TOOLS_FUNCTIONARY, TS_CHAT_REASONING_NONE},
        {"<tool_call>\\n<function=example>", TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_NONE},
        {"<|START_ACTION|> <|START_THINKING|>", TS_CHAT_TOOLS_COMMAND_R,
         TS_CHAT_REASONING_COMMAND_R},
        {"respond only with <|tool_call|> <think>", TS_CHAT_TOOLS_GRANITE, TS_CHAT_REASONING_THINK},
        {"<|tool|>{{ tools }}<|/tool|>", TS_CHAT_TOOLS_PHI4, TS_CHAT_REASONING_NONE},
        {"' functools[' + ", TS_CHAT_TOOLS_FIREFUNCTION, TS_CHAT_REASONING_NONE},
        {"<|tool_calls_section_begin|>", TS_CHAT_TOOLS_KIMI, TS_CHAT_REASONING_NONE},
        {"<|start|>assistant<|channel|>final<|message|>", TS_CHAT_TOOLS_HARMONY,
         TS_CHAT_REASONING_HARMONY},
        {"{% if tools %}{{ tools | tojson }}{% endif %}", TS_CHAT_TOOLS_GENERIC,
         TS_CHAT_REASONING_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_chat_out_format f = ts_chat_out_detect(cases[i].src);
        if (f.tools != cases[i].tools || f.reasoning != cases[i].reasoning) {
            print_error("%s: got %s/%s\n", cases[i].src, ts_chat_tool_format_name(f.tools),
                        ts_chat_reasoning_format_name(f.reasoning));
            fail();
        }
    }
    ts_chat_out_format f = ts_chat_out_detect(NULL);
    assert_int_equal(f.tools, TS_CHAT_TOOLS_GENERIC);
    assert_int_equal(f.reasoning, TS_CHAT_REASONING_NONE);
    ts_chat_out_config off = {.format = f};
    assert_false(ts_chat_out_active(&off));
}

/* ---- JSON shapes -------------------------------------------------------------------------- */

static void test_json_shapes(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_THINK);
    ts_chat_out *p = ts_chat_out_create(&c);
    const char *s = "<think>Hmm.</think><tool_call>{\"name\": \"get_time\", \"arguments\": "
                    "{\"tz\": \"UTC\"}}</tool_call>";
    assert_int_equal(ts_chat_out_feed(p, s, strlen(s)), TS_OK);
    /* stream deltas, in order */
    const char *want[] = {
        "{\"reasoning_content\":\"Hmm.\"}",
        NULL, /* the call's first delta: its id is random */
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"tz\\\":\\\"UTC\\\"}\"}}]"
        "}",
    };
    const ts_chat_event *ev = NULL;
    size_t n = ts_chat_out_events(p, &ev);
    assert_int_equal(n, 2);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *d[2];
        int m = ts_chat_out_event_deltas(&ev[i], d);
        assert_true(m >= 1);
        for (int j = 0; j < m; j++, k++) {
            char *t = cJSON_PrintUnformatted(d[j]);
            if (want[k] != NULL) {
                assert_string_equal(t, want[k]);
            } else {
                const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(d[j], "tool_calls"), 0);
                assert_int_equal(cJSON_GetObjectItem(tc, "index")->valueint, 0);
                assert_string_equal(cJSON_GetObjectItem(tc, "type")->valuestring, "function");
                const char *id = cJSON_GetObjectItem(tc, "id")->valuestring;
                assert_int_equal(strlen(id), 5 + 24);
                assert_memory_equal(id, "call_", 5);
                const cJSON *fn = cJSON_GetObjectItem(tc, "function");
                assert_string_equal(cJSON_GetObjectItem(fn, "name")->valuestring, "get_time");
                assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring, "");
            }
            free(t);
            cJSON_Delete(d[j]);
        }
    }
    assert_int_equal(k, 3);
    ts_chat_out_clear(p);
    assert_int_equal(ts_chat_out_finish(p), TS_OK);
    assert_true(ts_chat_out_tool_finish(p, TS_FINISH_STOP));
    assert_false(ts_chat_out_tool_finish(p, TS_FINISH_LENGTH));
    cJSON *m = ts_chat_out_message_json(p);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "content")));
    assert_string_equal(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "Hmm.");
    const cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tool_calls"), 0);
    assert_non_null(cJSON_GetObjectItem(tc, "id"));
    assert_null(cJSON_GetObjectItem(tc, "index"));
    assert_string_equal(cJSON_GetObjectItem(tc, "type")->valuestring, "function");
    const cJSON *fn = cJSON_GetObjectItem(tc, "function");
    assert_string_equal(cJSON_GetObjectItem(fn, "arguments")->valuestring, "{\"tz\":\"UTC\"}");
    cJSON_Delete(m);
    ts_chat_out_destroy(p);

    /* No calls: content is a string, no reasoning_content or tool_calls keys */
    p = ts_chat_out_create(&c);
    assert_int_equal(ts_chat_out_finish(p), TS_OK);
    m = ts_chat_out_message_json(p);
    char *t = cJSON_PrintUnformatted(m);
    assert_string_equal(t, "{\"role\":\"assistant\",\"content\":\"\"}");
    assert_false(ts_chat_out_tool_finish(p, TS_FINISH_STOP));
    free(t);
    cJSON_Delete(m);
    ts_chat_out_destroy(p);
}

/* Ids differ between calls and between seeds. */
static void test_ids(void **state) {
    (void)state;
    ts_chat_out_config c = cfg_for(TS_CHAT_TOOLS_HERMES, TS_CHAT_REASONING_NONE);
    const char *s = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                    "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
    char ids[3][64];
    for (int run_i = 0; run_i < 2; run_i++) {
        c.id_seed = 1000 + (uint64_t)run_i;
        ts_chat_out *p = ts_chat_out_create(&c);
        assert_int_equal(ts_chat_out_feed(p, s, strlen(s)), TS_OK);
        assert_int_equal(ts_chat_out_finish(p), TS_OK);
        const ts_chat_tool_call *calls = NULL;
        assert_int_equal(ts_chat_out_tool_calls(p, &calls), 2);
        if (run_i == 0) {
            snprintf(ids[0], sizeof ids[0], "%s", calls[0].id);
            snprintf(ids[1], sizeof ids[1], "%s", calls[1].id);
        } else {
            snprintf(ids[2], sizeof ids[2], "%s", calls[0].id);
        }
        for (const char *q = calls[0].id + 5; *q; q++) {
            assert_true((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                        (*q >= '0' && *q <= '9'));
        }
        ts_chat_out_destroy(p);
    }
    assert_string_not_equal(ids[0], ids[1]);
    assert_string_not_equal(ids[0], ids[2]);
}

/* Random bytes and splices of real outputs: never a crash, and the stream still adds up. */
static void test_random_inputs(void **state) {
    (void)state;
    static const char *const pieces[] = {
        "<tool_call>",
        "</tool_call>",
        "{\"name\": \"get_time\", \"arguments\": {}}",
        "<think>",
        "</think>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "get_time",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\\",
        "<|python_tag|>",
        ".call(",
        "<function=",
        "</function>",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>",
        "<|START_ACTION|>",
        "<|tool_call|>",
        "functools",
        " ",
        "\n",
        "x",
        "\xc3\xa9",
        "<parameter=",
        "</parameter>",
        "<arg_key>",
        "<arg_value>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|channel|>",
        "<|message|>",
        "<|end|>",
        "<|call|>",
        "<|start|>",
        "analysis",
        "final",
        " to=functions.get_time",
        "```json\n",
        "```",
        ";",
    };
    uint64_t seed = 7;
    char buf[512];
    for (int iter = 0; iter < 1500; iter++) {
        size_t len = 0;
        int n = 1 + (int)(rng(&seed) % 12);
        for (int i = 0; i < n; i++) {
            const char *pc = pieces[rng(&seed) % (sizeof pieces / sizeof pieces[0])];
            size_t pl = strlen(pc);
            if (len + pl < sizeof buf) {
                memcpy(buf + len, pc, pl);
                len += pl;
            }
        }
        buf[len] = '\0';
        ts_chat_out_config c = cfg_for((ts_chat_tool_format)(iter % TS_CHAT_TOOLS_COUNT),
                                       (ts_chat_reasoning_format)(iter % TS_CHAT_REASONING_COUNT));
        c.reasoning_open = iter % 7 == 0;
        outcome whole, pieces_o;
        run(&c, buf, NULL, 0, &whole);
        size_t cuts[64], nc = 0, at = 0;
        for (;;) {
            at += 1 + rng(&seed) % 9;
            if (at >= len || nc == 64) {
                break;
            }
            cuts[nc++] = at;
        }
        run(&c, buf, cuts, nc, &pieces_o);
        same(&whole, &pieces_o, "random", buf);
        outcome_free(&whole);
        outcome_free(&pieces_o);
    }
}

int main(void) {
    g_tools = cJSON_Parse(k_tools_json);
    if (g_tools == NULL) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes),    cmocka_unit_test(test_hermes_xml_and_glm),
        cmocka_unit_test(test_reasoning), cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),   cmocka_unit_test(test_other_families),
        cmocka_unit_test(test_detect),    cmocka_unit_test(test_json_shapes),
        cmocka_unit_test(test_ids),       cmocka_unit_test(test_random_inputs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cJSON_Delete(g_tools);
    return rc;
}
