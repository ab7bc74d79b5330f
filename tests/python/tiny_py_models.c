/*
 * tiny_py_models.c — writes the tiny models the Python package's tests run on
 * (tests/python/run_tests.sh), so that the bindings are tested without a download:
 *
 *   tiny_py_models DIR
 *
 *   DIR/tiny-chat.gguf  the shared test writer's llama (tests/common/tiny_model.h): random
 *                       weights, a SentencePiece vocabulary of letters, bytes and punctuation,
 *                       a context of 2048 (tools spelled letter by letter take room), and a
 *                       ChatML template that renders the offered tools and names <tool_call>,
 *                       so that its chat profile is Hermes's (tool calls in <tool_call> tags,
 *                       tool_choice forcing by a GBNF grammar).
 *   DIR/tiny-bert.gguf  the writer's BERT encoder (mean pooling): embeddings only.
 *
 * Their answers are gibberish; the tests check what does not depend on the weights (shapes,
 * determinism, streams against whole answers, grammars, errors).
 */
#include <stdio.h>
#include <string.h>

#include "common/tiny_model.h"

static const char k_hermes[] =
    "{%- if tools %}{{ '<|im_start|>system\\nYou may call these tools:\\n' }}"
    "{%- for t in tools %}{{ t | tojson }}{{ '\\n' }}{%- endfor %}"
    "{{ 'Call one as <tool_call>{\"name\": N, \"arguments\": A}</tool_call>.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "(message['content'] or '') + '<|im_end|>' + '\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";

static int write(const ts_tiny_spec *spec, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ts_error err = {0};
    if (ts_tiny_write(spec, path, &err) != TS_OK) {
        fprintf(stderr, "tiny_py_models: %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tiny_py_models DIR\n");
        return argc == 2 ? 0 : 2;
    }
    ts_tiny_spec chat = ts_tiny_spec_default("llama");
    chat.seed = 20261128;
    chat.wtype = TS_TYPE_Q8_0;
    chat.n_vocab = 512;
    chat.n_ctx_train = 2048;
    chat.chat_template = k_hermes;
    ts_tiny_spec bert = ts_tiny_spec_default("bert");
    bert.seed = 20261129;
    bert.n_vocab = 512;
    if (write(&chat, argv[1], "tiny-chat.gguf") != 0 ||
        write(&bert, argv[1], "tiny-bert.gguf") != 0) {
        return 1;
    }
    return 0;
}
