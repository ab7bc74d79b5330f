/*
 * cmd_tokenize.c — `tessera tokenize -m MODEL [-p TEXT | -f FILE] [--ids] [--parse-special]
 * [--add-special]`: show how a model's tokenizer splits text.
 *
 * The text is taken exactly as given (from -p, a file, or stdin when neither is set; no
 * newline is stripped). By default no special tokens are added and control tokens written in
 * the text are plain text. Output: with --ids, the ids on one line separated by spaces;
 * otherwise one "id<TAB>piece" line per token, the piece escaped so that control bytes,
 * backslashes and bytes that are not complete UTF-8 characters are visible (\n, \t, \\, \xNN).
 * Only the model's tokenizer is read (the file is opened vocabulary-only), so this works on
 * vocabulary files without tensors as well as on whole models.
 * Exit status: 0 success, 1 the model or input could not be read or tokenized, 2 usage error.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "tessera.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tessera tokenize -m MODEL [-p TEXT | -f FILE] [--ids] [--parse-special]\n"
               "                        [--add-special]\n\n"
               "Tokenizes TEXT (or FILE, or stdin) exactly as given with the model's tokenizer.\n"
               "  -m MODEL          GGUF file whose tokenizer to use\n"
               "  -p TEXT           text to tokenize\n"
               "  -f FILE           read the text from FILE\n"
               "  --ids             print only the ids, space-separated on one line\n"
               "  --parse-special   recognise control tokens such as <|im_start|> in the text\n"
               "  --add-special     add bos/eos as the model asks\n");
}

/* Length of the valid UTF-8 character at p (n bytes available), 0 when invalid. */
static size_t utf8_char(const unsigned char *p, size_t n) {
    size_t len = p[0] < 0x80                    ? 1
                 : p[0] >= 0xC2 && p[0] <= 0xDF ? 2
                 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
                 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4
                                                : 0;
    if (len == 0 || len > n) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    /* Overlongs and surrogates in 3-byte form, values past U+10FFFF in 4-byte form. */
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0) ||
        (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)) {
        return 0;
    }
    return len;
}

static void print_escaped(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l = utf8_char(p + i, n - i);
        if (c == '\\') {
            fputs("\\\\", stdout);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c == '\r') {
            fputs("\\r", stdout);
        } else if (l == 0 || c < 0x20 || c == 0x7F) {
            printf("\\x%02X", c);
            l = 1;
        } else {
            fwrite(p + i, 1, l, stdout);
        }
        i += l ? l : 1;
    }
}

int ts_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, parse_special = false, add_special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-m") == 0 || strcmp(a, "-p") == 0 || strcmp(a, "-f") == 0) &&
            i + 1 >= argc) {
            fprintf(stderr, "tessera tokenize: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "-m") == 0) {
            model = argv[++i];
        } else if (strcmp(a, "-p") == 0) {
            prompt = argv[++i];
        } else if (strcmp(a, "-f") == 0) {
            file = argv[++i];
        } else if (strcmp(a, "--ids") == 0) {
            ids_only = true;
        } else if (strcmp(a, "--parse-special") == 0) {
            parse_special = true;
        } else if (strcmp(a, "--add-special") == 0) {
            add_special = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tessera tokenize: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (model == NULL || (prompt != NULL && file != NULL)) {
        fprintf(stderr, "tessera tokenize: %s\n\n",
                model == NULL ? "-m MODEL is required" : "give -p or -f, not both");
        usage(stderr);
        return 2;
    }

    char *text = NULL;
    size_t len = 0;
    if (prompt != NULL) {
        len = strlen(prompt);
    } else {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (f == NULL) {
            perror(file);
            return 1;
        }
        text = ts_cli_read_stream(f, &len);
        if (f != stdin) {
            fclose(f);
        }
        if (text == NULL) {
            fprintf(stderr, "tessera tokenize: cannot read %s\n", file ? file : "stdin");
            return 1;
        }
    }

    int rc = 1;
    ts_error err = {0};
    ts_llm *llm = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (ts_llm_open(model, &(ts_llm_params){.vocab_only = 1}, &llm, &err) != TS_OK) {
        fprintf(stderr, "tessera tokenize: %s\n", err.msg);
        goto done;
    }
    if (ts_llm_tokenize(llm, prompt ? prompt : text, len, add_special, parse_special, &ids, &n,
                        &err) != TS_OK) {
        const char *source = file != NULL ? file : prompt != NULL ? "-p TEXT" : "stdin";
        fprintf(stderr, "tessera tokenize: %s: %s\n", source, err.msg);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf(i ? " %d" : "%d", ids[i]);
            continue;
        }
        const char *piece;
        size_t plen;
        if (ts_llm_token_to_piece(llm, ids[i], 1, &piece, &plen, &err) != TS_OK) {
            fprintf(stderr, "tessera tokenize: %s\n", err.msg);
            goto done;
        }
        printf("%d\t", ids[i]);
        print_escaped(piece, plen);
        putchar('\n');
    }
    if (ids_only) {
        putchar('\n');
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    ts_free(ids);
    ts_llm_close(llm);
    free(text);
    return rc;
}
