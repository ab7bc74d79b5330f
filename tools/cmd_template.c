/*
 * cmd_template.c — `tessera template`: renders a chat request with a chat template and prints
 * the prompt, exact bytes, as the server would hand it to the tokenizer (before the BOS strip).
 *
 *   tessera template --file T.jinja --request REQ.json
 *   tessera template -m MODEL.gguf --request REQ.json      (the model's own template)
 *
 * REQ.json is an object with "messages", optional "tools", "add_generation_prompt" (default
 * true), "bos_token", "eos_token" and any other template variables (e.g. "enable_thinking").
 * A template's raise_exception exits 1 with its message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "tessera.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tessera template (--file T.jinja | -m MODEL | --chat-template NAME)\n"
               "                        --request REQ.json [--now SECONDS] [--strip-special]\n\n"
               "Prints the prompt a chat template renders for a request, exact bytes.\n"
               "  --file T.jinja        the Jinja template (overrides the model's with -m)\n"
               "  -m MODEL              a GGUF file: its template, BOS/EOS texts and tokenizer\n"
               "                        (only the vocabulary is read)\n"
               "  --chat-template NAME  a built-in template (chatml, llama3, gemma, ...)\n"
               "  --request REQ.json    {\"messages\": [...], \"tools\": [...],\n"
               "                        \"add_generation_prompt\": true, ...} ('-': stdin)\n"
               "  --now SECONDS         the clock strftime_now reads (Unix time; default now)\n"
               "  --strip-special       drop the leading BOS / trailing EOS text the tokenizer\n"
               "                        adds itself (what the server tokenizes)\n");
}

int ts_cmd_template(int argc, char **argv) {
    const char *file = NULL, *model = NULL, *name = NULL, *request = NULL;
    ts_chat_options opt = {.keep_special = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(a, "--file") == 0 || strcmp(a, "-m") == 0 ||
                     strcmp(a, "--model") == 0 || strcmp(a, "--chat-template") == 0 ||
                     strcmp(a, "--request") == 0 || strcmp(a, "--now") == 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (takes && val == NULL) {
            fprintf(stderr, "error: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--file") == 0) {
            file = val;
        } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            model = val;
        } else if (strcmp(a, "--chat-template") == 0) {
            name = val;
        } else if (strcmp(a, "--request") == 0) {
            request = val;
        } else if (strcmp(a, "--now") == 0) {
            int64_t now = 0;
            if (!ts_cli_parse_i64(val, 1, INT64_MAX, &now)) {
                fprintf(stderr, "error: --now: '%s' is not a positive Unix time\n", val);
                return 2;
            }
            opt.now = now;
        } else if (strcmp(a, "--strip-special") == 0) {
            opt.keep_special = 0;
            continue;
        } else {
            fprintf(stderr, "error: unknown option: %s\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (request == NULL || (file == NULL && model == NULL && name == NULL)) {
        usage(stderr);
        return 2;
    }
    size_t req_len = 0, src_len = 0;
    char *req = strcmp(request, "-") == 0 ? ts_cli_read_stream(stdin, &req_len)
                                          : ts_cli_read_file(request, &req_len);
    if (req == NULL) {
        fprintf(stderr, "error: --request %s: %s\n", request, strerror(errno));
        return 1;
    }
    char *src = NULL;
    if (file != NULL && (src = ts_cli_read_file(file, &src_len)) == NULL) {
        fprintf(stderr, "error: --file %s: %s\n", file, strerror(errno));
        free(req);
        return 1;
    }
    /* The template travels on as a C string (ts_chat_options.source): a NUL byte would cut it
     * there without a word, so say where it is instead. */
    const char *nul = src != NULL ? memchr(src, 0, src_len) : NULL;
    if (nul != NULL) {
        fprintf(stderr, "error: --file %s: NUL byte at offset %zu (a template is text)\n", file,
                (size_t)(nul - src));
        free(src);
        free(req);
        return 1;
    }
    opt.source = src;
    opt.name = name;
    ts_llm *llm = NULL;
    ts_error err = {0};
    ts_status st = TS_OK;
    if (model != NULL) {
        ts_llm_params lp = ts_cli_llm_params();
        lp.vocab_only = 1;
        st = ts_llm_open(model, &lp, &llm, &err);
    }
    char *text = NULL;
    size_t len = 0;
    if (st == TS_OK) {
        st = ts_llm_chat_render(llm, &opt, req, req_len, &text, &len, &err);
    }
    if (st == TS_OK) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    } else {
        fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
    }
    ts_free(text);
    ts_llm_close(llm);
    free(src);
    free(req);
    return st == TS_OK ? 0 : 1;
}
