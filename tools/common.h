/*
 * common.h — what the model-running subcommands (run, chat, serve, bench, perplexity) share:
 * one parser for the model options, and opening a model and its context through the public
 * API (include/tessera.h).
 */
#ifndef TS_TOOLS_COMMON_H
#define TS_TOOLS_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera.h"

#define TS_CLI_MAX_OVERRIDES 16

typedef struct ts_cli_opts {
    const char *model;                           /* -m */
    ts_context_params ctx;                       /* every other model option */
    const char *overrides[TS_CLI_MAX_OVERRIDES]; /* --override family=name; ctx points here */
    const char *chat_template_file;              /* --chat-template-file (read at open) */
} ts_cli_opts;

/* A model and its context; torn down by ts_cli_close. */
typedef struct ts_cli {
    ts_llm *llm;
    ts_context *ctx;
    ts_llm_info model;    /* what the model is */
    ts_context_info info; /* what the context was made with */
    double open_ms;       /* time ts_llm_open took (the context's own: info.load_ms) */
} ts_cli;

void ts_cli_opts_init(ts_cli_opts *o);

/* Tries to consume option argv[*i] (and its value). Returns 1 when consumed, 0 when the
 * option is not a common one, -1 after printing an error (missing or bad value). */
int ts_cli_parse_common(ts_cli_opts *o, int argc, char **argv, int *i);

/* Help text for the common options. */
void ts_cli_print_common_help(FILE *f);

/* ts_llm_open's parameters for the tools: warnings (unused tensors) go to stderr. */
ts_llm_params ts_cli_llm_params(void);

/* Opens the model and makes its context; prints errors to stderr. Returns 0 or a process exit
 * code. On an MPI follower rank (--tp-mpi, rank > 0) it serves until rank 0 is done and then
 * exits the process. */
int ts_cli_open(const ts_cli_opts *o, ts_cli *cli);
void ts_cli_close(ts_cli *cli);
/* Writes what the KV cache holds into buf, e.g. "KV cache 30.0 MiB f16: 32768 tokens of the
 * full-attention layers (12.0 MiB), 1056 of the sliding-window layers (18.0 MiB)". */
void ts_cli_format_kv(const ts_context_info *info, char *buf, size_t size);
/* Prints the context's kernel cache notice (a bad or unwritable cache file) to stderr, if any. */
void ts_cli_print_kernel_notice(const ts_context_info *info);

/* After a step: prints the first divergence the compare hook found (once) and returns true
 * when there was one. */
bool ts_cli_check_compare(ts_cli *cli);

/* Tokenizes text with the model's special-token rules (BOS as the model wants it, special
 * tokens in the text parsed). *ids is released with ts_free. */
ts_status ts_cli_tokenize(const ts_cli *cli, const char *text, int32_t **ids, size_t *n,
                          ts_error *err);

/* All of a stream / a file, NUL-terminated (*len excludes the NUL); NULL on a read error or
 * out of memory (errno says which for files). Released with free(). */
char *ts_cli_read_stream(FILE *f, size_t *len);
char *ts_cli_read_file(const char *path, size_t *len);

/* True when the context has a chat template (a built-in family or a Jinja template). */
bool ts_cli_has_chat_template(const ts_cli *cli);

/* Milliseconds on a monotonic clock. */
double ts_cli_now_ms(void);
/* This process's resident memory in MB: now, or (peak) its high-water mark; 0 where the
 * system does not say (/proc/self/status). */
double ts_cli_rss_mb(bool peak);

/* Parses "123", "4k", "2M", "1G" (bytes); false on junk. */
bool ts_cli_parse_size(const char *s, int64_t *out);
/* Parses a decimal integer in [lo, hi]; false on junk or out of range. */
bool ts_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

#endif /* TS_TOOLS_COMMON_H */
