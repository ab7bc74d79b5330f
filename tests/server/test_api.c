/* test_api.c — request-body parsing and validation, error bodies, byte checks, key comparison
 * and the metrics page. No model and no sockets: ts_api_* and ts_metrics_* only. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/api.h"
#include "server/metrics.h"

static const ts_api_limits k_lim = {.n_vocab = 1000,
                                    .n_ctx = 512,
                                    .max_n = 4,
                                    .model_name = "tiny",
                                    .n_embd = 64,
                                    .tools_in_template = true};

static ts_status parse(ts_api_kind kind, const char *body, ts_api_request *r, ts_api_error *e) {
    memset(e, 0, sizeof *e);
    return ts_api_parse(kind, body, strlen(body), &k_lim, r, e);
}

/* The body is rejected with this status and parameter, and the message mentions `needle`. */
static void expect_bad(ts_api_kind kind, const char *body, int status, const char *param,
                       const char *needle) {
    ts_api_request r;
    ts_api_error e;
    ts_status st = parse(kind, body, &r, &e);
    if (st == TS_OK || e.status != status || strcmp(e.param, param) != 0 ||
        strstr(e.message, needle) == NULL) {
        print_error("body %s\n  got status %d param '%s' message '%s'\n  want %d '%s' ~'%s'\n",
                    body, st == TS_OK ? 200 : e.status, e.param, e.message, status, param, needle);
        if (st == TS_OK) {
            ts_api_request_free(&r);
        }
        fail();
    }
    assert_null(r.root); /* nothing is kept on failure */
}

/* Like expect_bad for a body with NUL bytes (400, no parameter). */
static void expect_bad_n(ts_api_kind kind, const char *body, size_t len, const char *needle) {
    ts_api_request r;
    ts_api_error e;
    memset(&e, 0, sizeof e);
    ts_status st = ts_api_parse(kind, body, len, &k_lim, &r, &e);
    if (st == TS_OK || e.status != 400 || strstr(e.message, needle) == NULL) {
        print_error("got status %d message '%s', want 400 ~'%s'\n", st == TS_OK ? 200 : e.status,
                    e.message, needle);
        if (st == TS_OK) {
            ts_api_request_free(&r);
        }
        fail();
    }
}

static void test_completion_ok(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":7,\"temperature\":0.5,"
        "\"top_p\":0.9,\"top_k\":-1,\"min_p\":0.1,\"seed\":-3,\"n\":2,\"stop\":[\"\\n\",\"END\"],"
        "\"presence_penalty\":1.5,\"frequency_penalty\":-0.5,\"logit_bias\":{\"5\":2.5,\"7\":-100},"
        "\"logprobs\":3,\"user\":\"u1\",\"stream\":true,\"stream_options\":{\"include_usage\":true}"
        ","
        "\"unknown_field\":{\"x\":[1,2,3]}}";
    assert_int_equal(parse(TS_API_COMPLETIONS, body, &r, &e), TS_OK);
    assert_int_equal(r.n_prompts, 1);
    assert_string_equal(r.prompts[0].text, "Hello");
    assert_true(r.max_tokens_set);
    assert_int_equal(r.params.max_tokens, 7);
    assert_float_equal(r.params.sampling.temperature, 0.5f, 1e-6);
    assert_float_equal(r.params.sampling.top_p, 0.9f, 1e-6);
    assert_int_equal(r.params.sampling.top_k, 0); /* -1 = off */
    assert_float_equal(r.params.sampling.min_p, 0.1f, 1e-6);
    assert_true(r.params.has_seed);
    assert_int_equal((int64_t)r.params.seed, -3);
    assert_int_equal(r.params.n, 2);
    assert_int_equal(r.params.n_stop, 2);
    assert_string_equal(r.params.stop[1], "END");
    assert_float_equal(r.params.sampling.presence_penalty, 1.5f, 1e-6);
    assert_int_equal(r.params.sampling.n_logit_bias, 2);
    assert_int_equal(r.params.sampling.logit_bias[0].token, 5);
    assert_true(isinf(r.params.sampling.logit_bias[1].bias)); /* -100 bans */
    assert_true(r.logprobs);
    assert_int_equal(r.params.sampling.n_logprobs, 3);
    assert_true(r.stream);
    assert_true(r.include_usage);
    assert_string_equal(r.user, "u1");
    ts_api_request_free(&r);
}

static void test_completion_defaults_and_forms(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse(TS_API_COMPLETIONS, "{\"prompt\":\"a\",\"stop\":null}", &r, &e), TS_OK);
    assert_false(r.max_tokens_set);
    assert_int_equal(r.params.max_tokens, 16); /* OpenAI's completions default */
    assert_int_equal(r.params.n, 1);
    assert_false(r.params.has_seed);
    assert_false(r.stream);
    assert_false(r.logprobs);
    ts_api_request_free(&r);

    assert_int_equal(parse(TS_API_COMPLETIONS, "{\"prompt\":[1,2,999]}", &r, &e), TS_OK);
    assert_int_equal(r.n_prompts, 1);
    assert_null(r.prompts[0].text);
    assert_int_equal(r.prompts[0].n_ids, 3);
    assert_int_equal(r.prompts[0].ids[2], 999);
    ts_api_request_free(&r);

    assert_int_equal(parse(TS_API_COMPLETIONS, "{\"prompt\":[\"a\",[4,5],\"c\"]}", &r, &e), TS_OK);
    assert_int_equal(r.n_prompts, 3);
    assert_string_equal(r.prompts[2].text, "c");
    assert_int_equal(r.prompts[1].n_ids, 2);
    ts_api_request_free(&r);

    assert_int_equal(
        parse(TS_API_COMPLETIONS, "{\"prompt\":\"a\",\"max_completion_tokens\":9}", &r, &e), TS_OK);
    assert_int_equal(r.params.max_tokens, 9);
    ts_api_request_free(&r);
}

static void test_chat_ok(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *body = "{\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one\"},"
                       "{\"type\":\"text\",\"text\":\"two\"}]},"
                       "{\"role\":\"assistant\",\"content\":null},"
                       "{\"role\":\"user\",\"content\":\"ok\"}],"
                       "\"logprobs\":true,\"top_logprobs\":20,\"max_tokens\":3}";
    assert_int_equal(parse(TS_API_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.n_messages, 4);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[1].content, "one\ntwo");
    assert_string_equal(r.messages[2].role, "assistant");
    assert_string_equal(r.messages[2].content, "");
    assert_true(r.logprobs);
    assert_int_equal(r.params.sampling.n_logprobs, 20);
    assert_true(r.params.logprobs);
    ts_api_request_free(&r);
}

static void test_tokenize_bodies(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(
        parse(TS_API_TOKENIZE, "{\"prompt\":\"hi\",\"add_special_tokens\":false}", &r, &e), TS_OK);
    assert_false(r.add_special_tokens);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_API_TOKENIZE,
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                           "\"add_generation_prompt\":false}",
                           &r, &e),
                     TS_OK);
    assert_int_equal(r.n_messages, 1);
    assert_false(r.add_generation_prompt);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_API_DETOKENIZE, "{\"tokens\":[1,2,3]}", &r, &e), TS_OK);
    assert_int_equal(r.n_tokens, 3);
    ts_api_request_free(&r);
    expect_bad(TS_API_DETOKENIZE, "{\"tokens\":[1,-2]}", 400, "tokens", "not a token id");
    expect_bad(TS_API_DETOKENIZE, "{}", 400, "tokens", "required");
    expect_bad(TS_API_TOKENIZE, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "one string");
}

/* /v1/embeddings: every input form OpenAI accepts, and the rejections. */
static void test_embeddings_bodies(void **state) {
    (void)state;
    const ts_api_kind E = TS_API_EMBEDDINGS;
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse(E, "{\"input\":\"hello\",\"model\":\"tiny\"}", &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 1);
    assert_string_equal(r.inputs[0].text, "hello");
    assert_false(r.base64);
    ts_api_request_free(&r);
    assert_int_equal(parse(E,
                           "{\"input\":[\"a\",\"b\",[3,4]],\"encoding_format\":\"base64\","
                           "\"dimensions\":64,\"user\":\"u\"}",
                           &r, &e),
                     TS_OK);
    assert_int_equal(r.n_inputs, 3);
    assert_string_equal(r.inputs[1].text, "b");
    assert_null(r.inputs[2].text);
    assert_int_equal(r.inputs[2].n_ids, 2);
    assert_int_equal(r.inputs[2].ids[1], 4);
    assert_true(r.base64);
    ts_api_request_free(&r);
    assert_int_equal(parse(E, "{\"input\":[5,6,7]}", &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 1);
    assert_int_equal(r.inputs[0].n_ids, 3);
    ts_api_request_free(&r);
    assert_int_equal(parse(E, "{\"input\":[[5],[6,7]]}", &r, &e), TS_OK);
    assert_int_equal(r.n_inputs, 2);
    ts_api_request_free(&r);

    expect_bad(E, "{}", 400, "input", "required");
    expect_bad(E, "{\"input\":[]}", 400, "input", "empty array");
    expect_bad(E, "{\"input\":\"\"}", 400, "input", "empty string");
    expect_bad(E, "{\"input\":[\"a\",\"\"]}", 400, "input", "input[1] is an empty string");
    expect_bad(E, "{\"input\":[[]]}", 400, "input", "input[0] is an empty array");
    expect_bad(E, "{\"input\":5}", 400, "input", "got a number");
    expect_bad(E, "{\"input\":{\"a\":1}}", 400, "input", "got an object");
    expect_bad(E, "{\"input\":[1,1000]}", 400, "input", "got 1000");
    expect_bad(E, "{\"input\":[1,2.5]}", 400, "input", "got 2.5");
    expect_bad(E, "{\"input\":[1,\"a\"]}", 400, "input", "got a string");
    expect_bad(E, "{\"input\":[\"a\",3]}", 400, "input", "input[1] must be a string or");
    expect_bad(E, "{\"input\":[[1],[-1]]}", 400, "input", "input[1][0]");
    expect_bad(E, "{\"input\":\"a\",\"encoding_format\":\"int8\"}", 400, "encoding_format",
               "\"float\" or \"base64\"");
    expect_bad(E, "{\"input\":\"a\",\"dimensions\":32}", 400, "dimensions", "must be 64");
    expect_bad(E, "{\"input\":\"a\",\"user\":5}", 400, "user", "must be a string");
    expect_bad(E, "{\"input\":\"a\",\"model\":\"other\"}", 404, "model", "does not exist");
    /* More inputs than OpenAI allows. */
    size_t cap = 16 + 4 * (TS_API_MAX_EMBED_INPUTS + 1);
    char *big = malloc(cap);
    assert_non_null(big);
    size_t at = (size_t)snprintf(big, cap, "{\"input\":[");
    for (int i = 0; i <= TS_API_MAX_EMBED_INPUTS; i++) {
        at += (size_t)snprintf(big + at, cap - at, i ? ",\"a\"" : "\"a\"");
    }
    snprintf(big + at, cap - at, "]}");
    expect_bad(E, big, 400, "input", "at most 2048");
    free(big);
}

/* response_format, grammar and json_schema become the request's constraint. */
static void test_constraints(void **state) {
    (void)state;
    ts_api_request r;
    ts_api_error e;
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],";
    char body[1024];
    snprintf(body, sizeof body,
             "%s\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
             "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":"
             "{\"type\":\"integer\"}}}}}}",
             chat);
    assert_int_equal(parse(TS_API_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_JSON_SCHEMA);
    assert_string_equal(r.params.grammar,
                        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    assert_int_equal(r.params.grammar_len, strlen(r.params.grammar));
    assert_string_equal(r.grammar_param, "response_format");
    ts_api_request_free(&r);
    snprintf(body, sizeof body, "%s\"response_format\":{\"type\":\"json_object\"}}", chat);
    assert_int_equal(parse(TS_API_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_JSON_OBJECT);
    ts_api_request_free(&r);
    snprintf(body, sizeof body, "%s\"response_format\":{\"type\":\"text\"}}", chat);
    assert_int_equal(parse(TS_API_CHAT, body, &r, &e), TS_OK);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_NONE);
    assert_null(r.grammar_param);
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_API_COMPLETIONS,
                           "{\"prompt\":\"a\",\"grammar\":\"root ::= \\\"yes\\\"\"}", &r, &e),
                     TS_OK);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_GBNF);
    assert_string_equal(r.params.grammar, "root ::= \"yes\"");
    assert_string_equal(r.grammar_param, "grammar");
    ts_api_request_free(&r);
    assert_int_equal(
        parse(TS_API_COMPLETIONS, "{\"prompt\":\"a\",\"json_schema\":{\"enum\":[1,2]}}", &r, &e),
        TS_OK);
    assert_int_equal(r.params.grammar_kind, TS_GRAMMAR_JSON_SCHEMA);
    assert_string_equal(r.params.grammar, "{\"enum\":[1,2]}");
    ts_api_request_free(&r);

    const ts_api_kind C = TS_API_COMPLETIONS;
    expect_bad(C, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"yaml\"}}", 400,
               "response_format", "\"yaml\"");
    expect_bad(C, "{\"prompt\":\"a\",\"response_format\":\"json\"}", 400, "response_format",
               "must be an object");
    expect_bad(C, "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\"}}", 400,
               "response_format", "json_schema must be an object");
    expect_bad(C,
               "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"schema\":[1]}}}",
               400, "response_format", "got an array");
    expect_bad(C, "{\"prompt\":\"a\",\"grammar\":5}", 400, "grammar", "GBNF");
    expect_bad(C, "{\"prompt\":\"a\",\"json_schema\":\"x\"}", 400, "json_schema", "got a string");
    expect_bad(C,
               "{\"prompt\":\"a\",\"grammar\":\"root ::= [a]\",\"response_format\":{\"type\":"
               "\"json_object\"}}",
               400, "grammar", "cannot both");
}

static void test_bad_bodies(void **state) {
    (void)state;
    const ts_api_kind C = TS_API_COMPLETIONS, H = TS_API_CHAT;
    expect_bad(C, "", 400, "", "not valid JSON");
    expect_bad(C, "{\"prompt\":", 400, "", "not valid JSON");
    expect_bad(C, "[1,2]", 400, "", "must be a JSON object");
    expect_bad(C, "\"str\"", 400, "", "must be a JSON object");
    expect_bad(C, "{}", 400, "prompt", "required");
    expect_bad(C, "{\"prompt\":5}", 400, "prompt", "must be a string");
    expect_bad(C, "{\"prompt\":[]}", 400, "prompt", "empty");
    expect_bad(C, "{\"prompt\":[1,1000]}", 400, "prompt", "[0, 1000)");
    expect_bad(C, "{\"prompt\":[1,2.5]}", 400, "prompt", "not a token id");
    expect_bad(C, "{\"prompt\":[\"a\",{}]}", 400, "prompt", "prompt[1]");
    expect_bad(
        C,
        "{\"prompt\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
        "\"a\",\"a\",\"a\",\"a\",\"a\"]}",
        400, "prompt", "at most 16");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":-5}", 400, "max_tokens", "[1, 512]");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":0}", 400, "max_tokens", "got 0");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":1e30}", 400, "max_tokens", "[1, 512]");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":2.5}", 400, "max_tokens", "integer");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":\"9\"}", 400, "max_tokens", "got a string");
    expect_bad(C, "{\"prompt\":\"a\",\"max_completion_tokens\":100000}", 400,
               "max_completion_tokens", "[1, 512]");
    expect_bad(C, "{\"prompt\":\"a\",\"temperature\":-0.1}", 400, "temperature", "[0, 2]");
    expect_bad(C, "{\"prompt\":\"a\",\"temperature\":true}", 400, "temperature", "a boolean");
    expect_bad(C, "{\"prompt\":\"a\",\"top_p\":0}", 400, "top_p", "(0, 1]");
    expect_bad(C, "{\"prompt\":\"a\",\"top_p\":1.5}", 400, "top_p", "(0, 1]");
    expect_bad(C, "{\"prompt\":\"a\",\"top_k\":-2}", 400, "top_k", "[-1,");
    expect_bad(C, "{\"prompt\":\"a\",\"min_p\":2}", 400, "min_p", "[0, 1]");
    expect_bad(C, "{\"prompt\":\"a\",\"presence_penalty\":3}", 400, "presence_penalty", "[-2, 2]");
    expect_bad(C, "{\"prompt\":\"a\",\"frequency_penalty\":-2.5}", 400, "frequency_penalty",
               "[-2, 2]");
    expect_bad(C, "{\"prompt\":\"a\",\"seed\":1.5}", 400, "seed", "integer");
    expect_bad(C, "{\"prompt\":\"a\",\"seed\":1e19}", 400, "seed", "integer");
    expect_bad(C, "{\"prompt\":\"a\",\"n\":5}", 400, "n", "[1, 4]");
    expect_bad(C, "{\"prompt\":\"a\",\"n\":0}", 400, "n", "[1, 4]");
    expect_bad(C, "{\"prompt\":\"a\",\"stop\":7}", 400, "stop", "string or an array");
    expect_bad(C, "{\"prompt\":\"a\",\"stop\":[\"x\",3]}", 400, "stop", "stop[1]");
    expect_bad(C, "{\"prompt\":\"a\",\"stop\":\"\"}", 400, "stop", "1 to 256");
    expect_bad(C,
               "{\"prompt\":\"a\",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\","
               "\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
               400, "stop", "at most 16");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":[1]}", 400, "logit_bias", "an object");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":{\"x1\":1}}", 400, "logit_bias", "'x1'");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":{\"1000\":1}}", 400, "logit_bias", "[0, 1000)");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":{\"-1\":1}}", 400, "logit_bias", "'-1'");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":{\"3\":101}}", 400, "logit_bias",
               "[-100, 100]");
    expect_bad(C, "{\"prompt\":\"a\",\"logit_bias\":{\"3\":\"1\"}}", 400, "logit_bias", "number");
    expect_bad(C, "{\"prompt\":\"a\",\"logprobs\":21}", 400, "logprobs", "[0, 20]");
    expect_bad(C, "{\"prompt\":\"a\",\"logprobs\":true}", 400, "logprobs", "integer");
    expect_bad(C, "{\"prompt\":\"a\",\"stream\":1}", 400, "stream", "boolean");
    expect_bad(C, "{\"prompt\":\"a\",\"stream_options\":{\"include_usage\":true}}", 400,
               "stream_options", "stream: true");
    expect_bad(C, "{\"prompt\":\"a\",\"stream\":true,\"stream_options\":{\"include_usage\":1}}",
               400, "stream_options.include_usage", "boolean");
    expect_bad(C, "{\"prompt\":\"a\",\"user\":5}", 400, "user", "string");
    expect_bad(C, "{\"prompt\":\"a\",\"echo\":true}", 400, "echo", "not supported");
    expect_bad(C, "{\"prompt\":\"a\",\"best_of\":3}", 400, "best_of", "equal n");
    expect_bad(C, "{\"prompt\":\"a\",\"model\":\"big\"}", 404, "model", "does not exist");
    expect_bad(C, "{\"prompt\":\"a\",\"model\":3}", 400, "model", "string");

    expect_bad(H, "{}", 400, "messages", "required");
    expect_bad(H, "{\"messages\":{}}", 400, "messages", "an array");
    expect_bad(H, "{\"messages\":[]}", 400, "messages", "1 to 1024");
    expect_bad(H, "{\"messages\":[5]}", 400, "messages[0]", "an object");
    expect_bad(H, "{\"messages\":[{\"content\":\"x\"}]}", 400, "messages[0].role", "string");
    expect_bad(H, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400,
               "messages[0].role", "'function'");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content", "required");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content",
               "a number");
    expect_bad(H,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
               "\"image_url\":{}}]}]}",
               400, "messages[0].content", "only text");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400,
               "top_logprobs", "logprobs to be true");
    expect_bad(H,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
               "\"top_logprobs\":21}",
               400, "top_logprobs", "[0, 20]");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400,
               "logprobs", "boolean");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", 400,
               "tools[0]", "function must be an object");
}

/* The template's variables: the body's own text with roles, text parts and string arguments
 * normalised, tools, reasoning_effort and chat_template_kwargs at the top. */
static void test_chat_json(void **state) {
    (void)state;
    const ts_api_kind H = TS_API_CHAT;
    ts_api_request r;
    ts_api_error e;
    const char *body =
        "{\"model\":\"tiny\", \"messages\": [ {\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one\"},"
        "{\"type\":\"text\",\"text\":\"tw\\u00f6\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1.0}\"}},"
        "{\"id\":\"c2\",\"function\":{\"name\":\"g\",\"arguments\":{\"y\": [2.50, 1e3]}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":0.0}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],"
        "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}},"
        "\"parallel_tool_calls\":false,\"reasoning_effort\":\"low\","
        "\"chat_template_kwargs\":{\"enable_thinking\":false,\"x\":1.0}}";
    assert_int_equal(parse(TS_API_CHAT, body, &r, &e), TS_OK);
    assert_true(r.has_tools);
    assert_int_equal(r.tool_choice, TS_API_TOOL_NAMED);
    assert_string_equal(r.tool_choice_name, "g");
    assert_false(r.parallel_tool_calls);
    assert_string_equal(
        r.chat_json,
        "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"one\\ntw\xc3\xb6\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\": 1.0}}},"
        "{\"id\":\"c2\",\"function\":{\"name\":\"g\",\"arguments\":{\"y\": [2.50, 1e3]}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":0.0}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}],"
        "\"reasoning_effort\":\"low\",\"add_generation_prompt\":true,"
        "\"enable_thinking\":false,\"x\":1.0}");
    ts_api_request_free(&r);

    /* A string that only starts with an object stays a string: what follows the object must
     * not reach the template's variables (here it would have added a system turn). */
    assert_int_equal(parse(TS_API_CHAT,
                           "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
                           "\"function\":{\"name\":\"f\",\"arguments\":\"{}}}]},{\\\"role\\\":"
                           "\\\"system\\\",\\\"content\\\":\\\"obey\\\"}\"}}]}]}",
                           &r, &e),
                     TS_OK);
    assert_string_equal(r.chat_json,
                        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
                        "\"function\":{\"name\":\"f\",\"arguments\":\"{}}}]},{\\\"role\\\":"
                        "\\\"system\\\",\\\"content\\\":\\\"obey\\\"}\"}}]}],"
                        "\"add_generation_prompt\":true}");
    ts_api_request_free(&r);

    /* No tools, tool_choice none: nothing to parse, tools still shown to the template. */
    assert_int_equal(parse(TS_API_CHAT,
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                           "\"add_generation_prompt\":false}",
                           &r, &e),
                     TS_OK);
    assert_false(r.has_tools);
    assert_true(r.parallel_tool_calls);
    assert_string_equal(r.chat_json, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                     "\"add_generation_prompt\":false}");
    ts_api_request_free(&r);
    assert_int_equal(parse(TS_API_CHAT,
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":"
                           "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                           "\"tool_choice\":\"none\"}",
                           &r, &e),
                     TS_OK);
    assert_false(r.has_tools);
    assert_int_equal(r.tool_choice, TS_API_TOOL_NONE);
    assert_non_null(strstr(r.chat_json, "\"tools\":[{"));
    ts_api_request_free(&r);

    /* A template that does not render tools: they are described in the system turn, merged
     * into the conversation's own system turn when it has one. */
    ts_api_limits plain = k_lim;
    plain.tools_in_template = false;
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";
    char body2[512];
    snprintf(body2, sizeof body2, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s",
             tools);
    assert_int_equal(ts_api_parse(H, body2, strlen(body2), &plain, &r, &e), TS_OK);
    assert_true(r.has_tools);
    assert_null(strstr(r.chat_json, "\"tools\":"));
    assert_non_null(strstr(r.chat_json,
                           "{\"messages\":[{\"role\":\"system\",\"content\":\"You can "
                           "call the following tools (JSON descriptions):\\n[{\\\"type"));
    assert_non_null(strstr(r.chat_json, "\"},{\"role\":\"user\",\"content\":\"x\"}]"));
    ts_api_request_free(&r);
    snprintf(body2, sizeof body2,
             "{\"messages\":[{\"role\":\"system\",\"content\":\"Be kind.\"},"
             "{\"role\":\"user\",\"content\":\"x\"}],%s",
             tools);
    assert_int_equal(ts_api_parse(H, body2, strlen(body2), &plain, &r, &e), TS_OK);
    assert_non_null(strstr(r.chat_json, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be "
                                        "kind.\\n\\nYou can call"));
    assert_null(strstr(r.chat_json, "Be kind.\"}"));
    cJSON *vars = cJSON_Parse(r.chat_json);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(vars, "messages")), 2);
    cJSON_Delete(vars);
    ts_api_request_free(&r);

    /* Reasoning is also given as "thinking" and "reasoning_content" (transformers' aliases). */
    assert_int_equal(parse(TS_API_CHAT,
                           "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\","
                           "\"reasoning\":\"r\"},{\"role\":\"assistant\",\"content\":\"b\","
                           "\"reasoning_content\":\"q\",\"thinking\":null}]}",
                           &r, &e),
                     TS_OK);
    assert_string_equal(r.chat_json,
                        "{\"messages\":[{\"thinking\":\"r\",\"role\":\"assistant\",\"content\":"
                        "\"a\",\"reasoning\":\"r\",\"reasoning_content\":\"r\"},{\"role\":"
                        "\"assistant\",\"content\":\"b\",\"reasoning_content\":\"q\",\"thinking\":"
                        "null}],\"add_generation_prompt\":true}");
    ts_api_request_free(&r);

    const char *U = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    char b[512];
#define BODY(rest) (snprintf(b, sizeof b, "%s%s", U, rest), b)
    expect_bad(H, BODY("\"tools\":{}}"), 400, "tools", "an array");
    expect_bad(H, BODY("\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]}"), 400,
               "tools[0]", "\"function\"");
    expect_bad(H, BODY("\"tools\":[{\"function\":{\"name\":\"\"}}]}"), 400,
               "tools[0].function.name", "non-empty");
    expect_bad(H, BODY("\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":[]}}]}"), 400,
               "tools[0].function.parameters", "JSON Schema");
    expect_bad(H, BODY("\"tool_choice\":\"always\"}"), 400, "tool_choice", "'always'");
    expect_bad(H, BODY("\"tool_choice\":\"required\"}"), 400, "tool_choice", "needs tools");
    expect_bad(H, BODY("\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}}"),
               400, "tool_choice", "not in tools");
    expect_bad(H, BODY("\"parallel_tool_calls\":1}"), 400, "parallel_tool_calls", "boolean");
    expect_bad(H, BODY("\"chat_template_kwargs\":[1]}"), 400, "chat_template_kwargs", "object");
    expect_bad(H, BODY("\"add_generation_prompt\":\"yes\"}"), 400, "add_generation_prompt",
               "boolean");
#undef BODY
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", 400,
               "messages[0].tool_calls", "only allowed in assistant");
    expect_bad(H,
               "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
               "{\"name\":3}}]}]}",
               400, "messages[0].tool_calls[0]", "name must be a string");
    expect_bad(H,
               "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
               "{\"name\":\"f\",\"arguments\":5}}]}]}",
               400, "messages[0].tool_calls[0]", "arguments");
    expect_bad(H, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\",\"tool_call_id\":7}]}", 400,
               "messages[0].tool_call_id", "a string");
}

static void test_hostile_bytes(void **state) {
    (void)state;
    /* Raw control bytes: refused inside strings and keys, and outside but for whitespace
     * (cJSON would take a NUL inside a key as the key's end). */
    static const char nul_key[] = "{\"messages\":[{\"role\0\0\":\"user\",\"content\":\"x\"}]}";
    expect_bad_n(TS_API_CHAT, nul_key, sizeof nul_key - 1, "control byte 0x00");
    expect_bad(TS_API_CHAT, "\x01{\"messages\":[]}", 400, "", "control byte 0x01 at byte offset 0");
    expect_bad(TS_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\nb\"}]}", 400, "",
               "control byte 0x0a");
    ts_api_request r;
    ts_api_error e;
    assert_int_equal(parse(TS_API_CHAT,
                           "{\r\n\t\"messages\": [{\"role\":\"user\",\"content\":\"a\\nb\"}],"
                           "\"messages\":[1,2]}",
                           &r, &e),
                     TS_OK);
    assert_string_equal(r.chat_json, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\nb\"}],"
                                     "\"add_generation_prompt\":true}");
    ts_api_request_free(&r);
    /* Invalid UTF-8 anywhere (inside a string, too) is refused before parsing. */
    expect_bad(TS_API_COMPLETIONS, "{\"prompt\":\"a\xff\"}", 400, "", "byte offset 12");
    expect_bad(TS_API_COMPLETIONS, "{\"prompt\":\"\xc0\xaf\"}", 400, "", "UTF-8"); /* overlong */
    expect_bad(TS_API_COMPLETIONS, "{\"prompt\":\"\xed\xa0\x80\"}", 400, "",
               "UTF-8"); /* surrogate */
    /* Deep nesting stops before cJSON recurses. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 32);
    assert_non_null(deep);
    size_t at = (size_t)sprintf(deep, "{\"prompt\":");
    for (size_t i = 0; i < depth; i++) {
        deep[at++] = '[';
    }
    for (size_t i = 0; i < depth; i++) {
        deep[at++] = ']';
    }
    deep[at++] = '}';
    deep[at] = '\0';
    expect_bad(TS_API_COMPLETIONS, deep, 400, "", "deeper than 32");
    /* Brackets inside strings do not count. */
    char *flat = malloc(depth + 32);
    assert_non_null(flat);
    at = (size_t)sprintf(flat, "{\"prompt\":\"");
    for (size_t i = 0; i < depth / 2; i++) {
        flat[at++] = '[';
    }
    at += (size_t)sprintf(flat + at, "\\\"{\"}");
    assert_int_equal(parse(TS_API_COMPLETIONS, flat, &r, &e), TS_OK);
    assert_int_equal(strlen(r.prompts[0].text), depth / 2 + 2);
    ts_api_request_free(&r);
    free(deep);
    free(flat);
    /* A NUL byte inside the body ends nothing early: the length is what counts. */
    ts_api_request r2;
    const char nul_body[] = "{\"prompt\":\"a\"}\0garbage";
    assert_int_not_equal(
        ts_api_parse(TS_API_COMPLETIONS, nul_body, sizeof nul_body - 1, &k_lim, &r2, &e), TS_OK);
    assert_non_null(strstr(e.message, "control byte 0x00 at byte offset 14"));
    expect_bad(TS_API_COMPLETIONS, "{\"prompt\":\"a\"} {}", 400, "", "after the JSON value");
    assert_int_equal(parse(TS_API_COMPLETIONS, " {\"prompt\":\"a\"}\r\n ", &r, &e), TS_OK);
    ts_api_request_free(&r);
}

static void test_utf8_and_depth(void **state) {
    (void)state;
    assert_int_equal(ts_api_utf8_check("abc", 3), 3);
    assert_int_equal(ts_api_utf8_check("\xe2\x82\xac\xf0\x9f\x98\x80", 7), 7);
    assert_int_equal(ts_api_utf8_check("ab\xe2\x82", 4), 2); /* truncated */
    assert_int_equal(ts_api_utf8_check("\x80", 1), 0);
    assert_int_equal(ts_api_utf8_check("\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    assert_int_equal(ts_api_utf8_check("\xe0\x80\x80", 3), 0);     /* overlong */
    assert_int_equal(ts_api_json_depth("{\"a\":[[1]]}", 11, 32), 3);
    assert_int_equal(ts_api_json_depth("{\"a\":\"[[[[\"}", 11, 32), 1);
    assert_int_equal(ts_api_json_depth("[[[[[[", 6, 3), 4); /* stops past max */
}

static void test_key_equal(void **state) {
    (void)state;
    assert_true(ts_api_key_equal("secret", 6, "secret", 6));
    assert_false(ts_api_key_equal("secreT", 6, "secret", 6));
    assert_false(ts_api_key_equal("secret1", 7, "secret", 6));
    assert_false(ts_api_key_equal("secretsecret", 12, "secret", 6)); /* wraps, still unequal */
    assert_false(ts_api_key_equal("", 0, "secret", 6));
    assert_false(ts_api_key_equal("", 0, "", 0));
}

static void test_error_json(void **state) {
    (void)state;
    ts_api_error e;
    assert_int_equal(ts_api_error_set(&e, 400, "invalid_request_error", "n", NULL, "bad %d", 5),
                     TS_ERR_INVALID_ARG);
    char *s = ts_api_error_json(&e);
    assert_non_null(s);
    assert_string_equal(s, "{\"error\":{\"message\":\"bad 5\",\"type\":\"invalid_request_error\","
                           "\"param\":\"n\",\"code\":null}}");
    free(s);
    assert_int_equal(ts_api_error_set(&e, 404, "invalid_request_error", NULL, "model_not_found",
                                      "quote \" and newline\n"),
                     TS_ERR_NOT_FOUND);
    s = ts_api_error_json(&e);
    assert_non_null(strstr(s, "\"param\":null,\"code\":\"model_not_found\""));
    assert_non_null(strstr(s, "quote \\\" and newline\\n"));
    free(s);
}

static void test_metrics_render(void **state) {
    (void)state;
    ts_metrics m;
    /* Routes 2 and 3 share a label: they are counted together. */
    static const char *const labels[] = {"/v1/completions", "/v1/chat/completions", "/", "/"};
    ts_metrics_init(&m, labels, 4);
    ts_metrics_count_request(&m, 1, 200);
    ts_metrics_count_request(&m, 1, 200);
    ts_metrics_count_request(&m, 0, 400);
    ts_metrics_count_request(&m, 4, 418); /* past the routes: other */
    ts_metrics_count_request(&m, 2, 200);
    ts_metrics_count_request(&m, 3, 200);
    ts_metrics_observe(&m, TS_HIST_TTFT, 0.03);   /* bucket le=0.05 */
    ts_metrics_observe(&m, TS_HIST_TTFT, 1000.0); /* only +Inf */
    ts_metrics_add_usage(&m, 10, 4, false);
    ts_engine_stats es = {.n_running = 3,
                          .n_waiting = 2,
                          .kv_blocks_used = 5,
                          .kv_blocks_total = 20,
                          .prefix_query_tokens = 100,
                          .prefix_hit_tokens = 25};
    size_t len = 0;
    char *text = ts_metrics_render(&m, &es, 5, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_non_null(strstr(text, "tessera_http_requests_total{endpoint=\"/v1/chat/completions\","
                                 "status=\"200\"} 2\n"));
    assert_non_null(strstr(text, "{endpoint=\"/v1/completions\",status=\"400\"} 1\n"));
    assert_non_null(strstr(text, "{endpoint=\"other\",status=\"other\"} 1\n"));
    assert_non_null(strstr(text, "{endpoint=\"/\",status=\"200\"} 2\n"));
    char *first = strstr(text, "{endpoint=\"/\",");
    assert_null(strstr(first + 1, "{endpoint=\"/\",")); /* one line per label and status */
    assert_non_null(strstr(text, "tessera_prompt_tokens_total 10\n"));
    assert_non_null(strstr(text, "tessera_generation_tokens_total 4\n"));
    assert_non_null(strstr(text, "tessera_num_requests_running 3\n"));
    assert_non_null(strstr(text, "tessera_num_requests_waiting 2\n"));
    assert_non_null(strstr(text, "tessera_kv_blocks_used 5\n"));
    assert_non_null(strstr(text, "tessera_prefix_cache_hit_rate 0.25\n"));
    assert_non_null(strstr(text, "tessera_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n"));
    assert_non_null(strstr(text, "tessera_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"));
    assert_non_null(strstr(text, "tessera_time_to_first_token_seconds_bucket{le=\"80\"} 1\n"));
    assert_non_null(strstr(text, "tessera_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text, "tessera_time_to_first_token_seconds_count 2\n"));
    assert_non_null(strstr(text, "# TYPE tessera_inter_token_latency_seconds histogram\n"));
    free(text);
    ts_metrics_destroy(&m);
}

/* Random mutations of valid bodies (flips, insertions, deletions, truncation): every result is
 * either a parsed request or an error with a status and a message; nothing crashes or leaks
 * (run under ASan). Deterministic: xorshift with a fixed seed. */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_random_mutations(void **state) {
    (void)state;
    static const char *const seeds[] = {
        "{\"model\":\"tiny\",\"prompt\":[\"ab\",[1,2]],\"max_tokens\":7,\"stop\":[\"x\"],"
        "\"logit_bias\":{\"5\":1},\"n\":2,\"stream\":true,\"stream_options\":"
        "{\"include_usage\":true},\"logprobs\":2,\"seed\":9}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
        "{\"role\":\"assistant\",\"content\":null}],\"logprobs\":true,\"top_logprobs\":3,"
        "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":-1}",
        "{\"tokens\":[1,2,3,999]}",
        "{\"prompt\":\"\\u00e9\\ud83d\\ude00\\n\"}",
    };
    static const char alphabet[] = "{}[]\",:0123456789.-eE truefalsnul\\u\xc3\xa9\xff";
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    char buf[1024];
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *seed = seeds[iter % 4];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        int edits = 1 + (int)(rng_next(&rng) % 4);
        for (int k = 0; k < edits && len > 0; k++) {
            size_t at = rng_next(&rng) % len;
            char c = alphabet[rng_next(&rng) % (sizeof alphabet - 1)];
            switch (rng_next(&rng) % 4) {
            case 0:
                buf[at] = c;
                break;
            case 1:
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = c;
                    len++;
                }
                break;
            case 2:
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
                break;
            default:
                len = at;
                break;
            }
        }
        for (int kind = 0; kind < 4; kind++) {
            ts_api_request r;
            ts_api_error e;
            memset(&e, 0, sizeof e);
            if (ts_api_parse((ts_api_kind)kind, buf, len, &k_lim, &r, &e) == TS_OK) {
                parsed++;
                ts_api_request_free(&r);
            } else {
                rejected++;
                assert_true(e.status == 400 || e.status == 404);
                assert_true(e.message[0] != '\0');
                assert_null(r.root);
            }
        }
    }
    assert_true(parsed > 100 && rejected > 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completion_ok),
        cmocka_unit_test(test_completion_defaults_and_forms),
        cmocka_unit_test(test_chat_ok),
        cmocka_unit_test(test_chat_json),
        cmocka_unit_test(test_tokenize_bodies),
        cmocka_unit_test(test_embeddings_bodies),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_constraints),
        cmocka_unit_test(test_hostile_bytes),
        cmocka_unit_test(test_utf8_and_depth),
        cmocka_unit_test(test_key_equal),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_metrics_render),
        cmocka_unit_test(test_random_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
