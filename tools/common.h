/*
 * common.h — what the model-running subcommands (run, chat, serve, bench) share: the common
 * options and the setup of model, tokenizer, backend (with optional hooks), functional
 * registry and engine.
 */
#ifndef TS_TOOLS_COMMON_H
#define TS_TOOLS_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "ir/backend.h"
#include "ir/registry.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tp_setup.h"

#define TS_CLI_MAX_OVERRIDES 16

typedef struct ts_cli_opts {
    const char *model;     /* -m */
    int n_threads;         /* -t (0: physical cores) */
    int64_t n_ctx;         /* --ctx (0: model default, at most 4096) */
    int64_t kv_mem;        /* --kv-mem bytes (0: enough for --ctx) */
    int64_t max_seqs;      /* --max-seqs */
    int64_t max_batch_tokens; /* --max-batch-tokens */
    const char *kv_type;   /* --kv-type f16|f32|q8_0 */
    const char *backend;   /* --backend cpu|ref */
    const char *overrides[TS_CLI_MAX_OVERRIDES]; /* --override family=name */
    int n_overrides;
    bool no_prefix_cache;  /* --no-prefix-cache */
    const char *chat_template; /* --chat-template NAME */
    const char *dump;      /* --dump FILE|- : every node's name, op, shape, checksum */
    int64_t dump_values;   /* --dump-values N : also the first N values */
    bool profile;          /* --profile : time per op type and node */
    const char *compare;   /* --compare ref : run the reference too, report divergence */
    double compare_tol;    /* --compare-tol X (default 0.05) */
    int tp;                /* --tp N: tensor-parallel shards in this process (0/1: off) */
    bool tp_mpi;           /* --tp-mpi: one shard per MPI process (under mpirun) */
} ts_cli_opts;

/* Everything a running model needs; torn down in reverse order by ts_cli_close. */
typedef struct ts_cli {
    ts_model *model;
    ts_tokenizer *tok;
    ts_backend *backend; /* what the engine runs on: the compute backend or its outermost hook */
    ts_backend *compute; /* the compute backend itself */
    ts_backend *oracle;  /* --compare: the reference backend */
    ts_backend *hook_compare, *hook_profile, *hook_dump;
    FILE *dump_file;
    ts_registry *reg;
    ts_engine *engine;
    ts_chat_template tmpl;
    bool has_tmpl;
    double load_ms;
    ts_cli_tp tp; /* --tp / --tp-mpi group */
} ts_cli;

void ts_cli_opts_init(ts_cli_opts *o);

/* Tries to consume option argv[*i] (and its value). Returns 1 when consumed, 0 when the
 * option is not a common one, -1 after printing an error (missing or bad value). */
int ts_cli_parse_common(ts_cli_opts *o, int argc, char **argv, int *i);

/* Help text for the common options. */
void ts_cli_print_common_help(FILE *f);

/* Loads and builds everything; prints errors to stderr. Returns 0 or a process exit code. */
int ts_cli_open(const ts_cli_opts *o, ts_cli *cli);
void ts_cli_close(ts_cli *cli);

/* After a step: prints the first divergence the compare hook found (once) and returns true
 * when there was one. */
bool ts_cli_check_compare(ts_cli *cli);
/* Prints the profile tables (when --profile) to stderr. */
void ts_cli_report(ts_cli *cli);

/* Tokenizes text with the model's special-token rules (BOS as the model wants it, special
 * tokens in the text parsed). *ids is malloc'd. */
ts_status ts_cli_tokenize(const ts_cli *cli, const char *text, int32_t **ids, size_t *n,
                          ts_error *err);

/* Parses "123", "4k", "2M", "1G" (bytes); false on junk. */
bool ts_cli_parse_size(const char *s, int64_t *out);

#endif /* TS_TOOLS_COMMON_H */
