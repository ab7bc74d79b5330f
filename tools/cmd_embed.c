/*
 * cmd_embed.c — `tessera embed -m MODEL (-p TEXT)... [-f FILE] [--pooling P] [--normalize |
 * --no-normalize] [--json]`: embedding vectors of texts.
 *
 * Inputs: each -p TEXT, then each non-empty line of FILE (without its line end), in that
 * order; with neither, the lines of stdin. Each is tokenized with the model's special tokens
 * (BERT: [CLS] text [SEP]; special-token text in the input stays plain text) and all are
 * embedded together through ts_context_embed, which packs them into steps.
 * Output: one line per vector, its floats separated by spaces (pooling none: one line per
 * token, inputs in order); or with --json an OpenAI-style embeddings list with usage. A summary
 * (inputs, tokens, time, inputs/s, tokens/s) goes to stderr.
 * Exit status: 0 success, 1 the model or an input could not be read or embedded, 2 usage.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "tessera.h"

#define MAX_PROMPTS 256

static void usage(FILE *f) {
    fprintf(f, "usage: tessera embed -m MODEL (-p TEXT)... [-f FILE] [--pooling P]\n"
               "                     [--normalize | --no-normalize] [--json] [options]\n\n"
               "Prints the embedding vector of each input text.\n"
               "  -p TEXT           an input (repeat for several)\n"
               "  -f FILE           one input per non-empty line of FILE (stdin when neither -p\n"
               "                    nor -f is given)\n"
               "  --pooling P       mean, cls, last, none (one vector per token) or model (the\n"
               "                    model's own, default)\n"
               "  --normalize       divide each vector by its L2 norm (default)\n"
               "  --no-normalize    print the vectors as pooled\n"
               "  --json            an OpenAI-style embeddings list with usage instead of lines\n"
               "                    of floats\n");
    ts_cli_print_common_help(f);
}

typedef struct inputs {
    char **text; /* owned copies */
    int32_t n, cap;
} inputs;

static bool add_input(inputs *in, const char *s, size_t len) {
    if (in->n == in->cap) {
        int32_t cap = in->cap ? in->cap * 2 : 16;
        char **t = realloc(in->text, (size_t)cap * sizeof *t);
        if (t == NULL) {
            return false;
        }
        in->text = t;
        in->cap = cap;
    }
    char *c = malloc(len + 1);
    if (c == NULL) {
        return false;
    }
    memcpy(c, s, len);
    c[len] = '\0';
    in->text[in->n++] = c;
    return true;
}

/* Each non-empty line of f (line ends "\n" or "\r\n" removed). */
static bool read_lines(FILE *f, inputs *in) {
    char *line = NULL;
    size_t cap = 0, len = 0;
    bool ok = true;
    int c;
    do {
        c = fgetc(f);
        if (c == '\n' || c == EOF) {
            if (len > 0 && line[len - 1] == '\r') {
                len--;
            }
            if (len > 0) {
                ok = add_input(in, line, len);
            }
            len = 0;
            continue;
        }
        if (len + 1 >= cap) {
            size_t ncap = cap ? cap * 2 : 256;
            char *l = realloc(line, ncap);
            if (l == NULL) {
                ok = false;
                break;
            }
            line = l;
            cap = ncap;
        }
        line[len++] = (char)c;
    } while (ok && c != EOF);
    free(line);
    return ok && !ferror(f);
}

static void print_vectors(const float *v, int64_t rows, int64_t n_embd) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < n_embd; k++) {
            printf(k ? " %.7g" : "%.7g", v[r * n_embd + k]);
        }
        putchar('\n');
    }
}

static void print_json(const char *model, const float *v, int64_t rows, int64_t n_embd,
                       int64_t n_tokens) {
    printf("{\"object\":\"list\",\"model\":\"");
    for (const char *p = model; *p; p++) {
        if (*p == '"' || *p == '\\') {
            putchar('\\');
        }
        if ((unsigned char)*p >= 0x20) {
            putchar(*p);
        }
    }
    printf("\",\"data\":[");
    for (int64_t r = 0; r < rows; r++) {
        printf("%s{\"object\":\"embedding\",\"index\":%lld,\"embedding\":[", r ? "," : "",
               (long long)r);
        for (int64_t k = 0; k < n_embd; k++) {
            printf(k ? ",%.7g" : "%.7g", v[r * n_embd + k]);
        }
        printf("]}");
    }
    printf("],\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}\n", (long long)n_tokens,
           (long long)n_tokens);
}

int ts_cmd_embed(int argc, char **argv) {
    ts_cli_opts o;
    ts_cli_opts_init(&o);
    const char *prompts[MAX_PROMPTS];
    int n_prompts = 0;
    const char *file = NULL;
    bool json = false;
    ts_embed_params ep = ts_embed_params_default();
    ts_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int common = ts_cli_parse_common(&o, argc, argv, &i);
        if (common < 0) {
            return 2;
        }
        if (common > 0) {
            continue;
        }
        bool has_value = i + 1 < argc;
        if ((strcmp(a, "-p") == 0 || strcmp(a, "-f") == 0 || strcmp(a, "--pooling") == 0) &&
            !has_value) {
            fprintf(stderr, "tessera embed: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "-p") == 0) {
            if (n_prompts == MAX_PROMPTS) {
                fprintf(stderr, "tessera embed: at most %d -p inputs (use -f FILE for more)\n",
                        MAX_PROMPTS);
                return 2;
            }
            prompts[n_prompts++] = argv[++i];
        } else if (strcmp(a, "-f") == 0) {
            file = argv[++i];
        } else if (strcmp(a, "--pooling") == 0) {
            if (ts_pooling_parse(argv[++i], &ep.pooling, &err) != TS_OK) {
                fprintf(stderr, "tessera embed: --pooling: %s\n", err.msg);
                return 2;
            }
        } else if (strcmp(a, "--normalize") == 0) {
            ep.normalize = 1;
        } else if (strcmp(a, "--no-normalize") == 0) {
            ep.normalize = 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tessera embed: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (o.model == NULL) {
        fprintf(stderr, "tessera embed: -m MODEL is required\n\n");
        usage(stderr);
        return 2;
    }

    inputs in = {0};
    bool ok = true;
    for (int k = 0; k < n_prompts && ok; k++) {
        ok = add_input(&in, prompts[k], strlen(prompts[k]));
    }
    if (ok && (file != NULL || n_prompts == 0)) {
        FILE *f = file != NULL ? fopen(file, "rb") : stdin;
        if (f == NULL) {
            perror(file);
            return 1;
        }
        ok = read_lines(f, &in);
        if (f != stdin) {
            fclose(f);
        }
    }
    int rc = 1;
    ts_cli cli = {0};
    int32_t **ids = NULL;
    int32_t *lens = NULL;
    float *out = NULL;
    if (!ok) {
        fprintf(stderr, "tessera embed: cannot read %s\n", file != NULL ? file : "stdin");
        goto done;
    }
    if (in.n == 0) {
        fprintf(stderr, "tessera embed: no input (give -p TEXT or non-empty lines in -f FILE)\n");
        rc = 2;
        goto done;
    }
    if ((rc = ts_cli_open(&o, &cli)) != 0) {
        goto done;
    }
    rc = 1;
    ids = calloc((size_t)in.n, sizeof *ids);
    lens = calloc((size_t)in.n, sizeof *lens);
    if (ids == NULL || lens == NULL) {
        fprintf(stderr, "tessera embed: out of memory\n");
        goto done;
    }
    int64_t n_tokens = 0;
    for (int32_t k = 0; k < in.n; k++) {
        size_t n = 0;
        if (ts_llm_tokenize(cli.llm, in.text[k], strlen(in.text[k]), 1, 0, &ids[k], &n, &err) !=
            TS_OK) {
            fprintf(stderr, "tessera embed: input %d: %s\n", k, err.msg);
            goto done;
        }
        lens[k] = (int32_t)n;
        n_tokens += (int64_t)n;
    }
    bool per_token = ep.pooling == TS_POOLING_NONE ||
                     (ep.pooling == TS_POOLING_MODEL && cli.model.pooling == TS_POOLING_NONE);
    int64_t rows = per_token ? n_tokens : in.n;
    out = malloc((size_t)rows * (size_t)cli.model.n_embd * sizeof *out);
    if (out == NULL) {
        fprintf(stderr, "tessera embed: out of memory for %lld vectors\n", (long long)rows);
        goto done;
    }
    double t0 = ts_cli_now_ms();
    if (ts_context_embed(cli.ctx, (const int32_t *const *)ids, lens, in.n, &ep, out, &err) !=
        TS_OK) {
        fprintf(stderr, "tessera embed: %s\n", err.msg);
        goto done;
    }
    double ms = ts_cli_now_ms() - t0;
    if (ts_cli_check_compare(&cli)) {
        goto done;
    }
    if (json) {
        print_json(cli.model.name, out, rows, cli.model.n_embd, n_tokens);
    } else {
        print_vectors(out, rows, cli.model.n_embd);
    }
    fprintf(stderr,
            "embed: %d inputs, %lld tokens, %lld x %lld floats (%s pooling%s) in %.1f ms: "
            "%.1f inputs/s, %.0f tokens/s\n",
            in.n, (long long)n_tokens, (long long)rows, (long long)cli.model.n_embd,
            ts_pooling_name(ep.pooling == TS_POOLING_MODEL ? (ts_pooling)cli.model.pooling
                                                           : ep.pooling),
            ep.normalize ? ", normalized" : "", ms, ms > 0 ? in.n * 1e3 / ms : 0.0,
            ms > 0 ? (double)n_tokens * 1e3 / ms : 0.0);
    if (o.ctx.profile && cli.info.kernels[0] != '\0') {
        fprintf(stderr, "kernels (one row / several): %s\n", cli.info.kernels);
    }
    ts_context_report(cli.ctx, stderr);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    for (int32_t k = 0; ids != NULL && k < in.n; k++) {
        ts_free(ids[k]);
    }
    free(ids);
    free(lens);
    free(out);
    for (int32_t k = 0; k < in.n; k++) {
        free(in.text[k]);
    }
    free(in.text);
    ts_cli_close(&cli);
    return rc;
}
