/*
 * tiny_server_model.c — writes the tiny model the server's Python tests run on when the real
 * model is not there (run_py_tests.sh), so that the HTTP checks (disconnects, body sizes, CORS,
 * connection floods, concurrency, shutdown) never depend on a download.
 *
 *   tiny_server_model OUT.gguf
 *
 * The model is the shared test writer's llama (tests/common/tiny_model.h): random weights, a
 * SentencePiece vocabulary of letters, bytes, punctuation and a few words, and a ChatML chat
 * template so that /v1/chat/completions works. Its context is long (4096) so that tests can
 * ask for long streams, and its weights are Q8_0 so that the server runs the same quantized
 * kernels as with a real file. Its answers are gibberish: tests that judge what a model says
 * skip on it.
 */
#include <stdio.h>
#include <string.h>

#include "common/tiny_model.h"

static const char k_chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

int main(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tiny_server_model OUT.gguf\n");
        return argc == 2 ? 0 : 2;
    }
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.seed = 20261128;
    spec.wtype = TS_TYPE_Q8_0;
    spec.n_vocab = 512;
    spec.n_ctx_train = 4096;
    spec.chat_template = k_chatml;
    ts_error err = {0};
    if (ts_tiny_write(&spec, argv[1], &err) != TS_OK) {
        fprintf(stderr, "tiny_server_model: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    return 0;
}
