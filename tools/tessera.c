/*
 * tessera.c — the `tessera` binary: one executable, one subcommand per job.
 *
 * Each subcommand lives in tools/cmd_<name>.c and is listed in k_commands below. Commands
 * parse their own arguments, print to stdout/stderr, and return a process exit status
 * (0 success, 1 runtime failure, 2 usage error). Engine logic stays in src/.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "tessera.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    const char *summary;
} command;

static const command k_commands[] = {
    {"run", ts_cmd_run, "generate text from a prompt (or a file of prompts, batched)"},
    {"chat", ts_cmd_chat, "chat interactively using the model's chat template"},
    {"serve", ts_cmd_serve, "OpenAI-compatible HTTP server with a web chat page"},
    {"bench", ts_cmd_bench, "measure prompt and generation speed (llama-bench style)"},
    {"perplexity", ts_cmd_perplexity, "perplexity of a model over a text file"},
    {"inspect", ts_cmd_inspect, "show a GGUF file's metadata and tensors"},
    {"quantize", ts_cmd_quantize, "requantize an F32/F16/BF16 model to another type"},
    {"tokenize", ts_cmd_tokenize, "show how a model's tokenizer splits text"},
    {"embed", ts_cmd_embed, "embedding vectors of texts (BERT-family encoders, decoders)"},
    {"template", ts_cmd_template, "render a chat request with a chat template (exact bytes)"},
    {"grammar", ts_cmd_grammar, "measure grammar masks over a vocabulary (MaskBench files)"},
};

static void usage(FILE *f) {
    fprintf(f, "tessera %s — LLM inference engine\n\nusage: tessera <command> [options]\n\n"
               "commands:\n",
            ts_version());
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].summary);
    }
    fprintf(f, "\nRun 'tessera <command> --help' for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("tessera %s\n", ts_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        if (strcmp(name, k_commands[i].name) == 0) {
            return k_commands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "tessera: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
