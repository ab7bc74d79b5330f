/* common.c — shared setup of the model-running subcommands. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "ir/hooks.h"
#include "model/shard.h"
#include "util/error.h"

void ts_cli_opts_init(ts_cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv_type = "f16";
    o->backend = "cpu";
    o->compare_tol = 0.05;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (s == NULL || *s == '\0') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

bool ts_cli_parse_size(const char *s, int64_t *out) {
    if (s == NULL || *s == '\0') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0) {
        return false;
    }
    double mul = 1;
    if (*end == 'k' || *end == 'K') {
        mul = 1024.0, end++;
    } else if (*end == 'm' || *end == 'M') {
        mul = 1024.0 * 1024, end++;
    } else if (*end == 'g' || *end == 'G') {
        mul = 1024.0 * 1024 * 1024, end++;
    }
    if (*end == 'i' || *end == 'B') {
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    }
    if (*end != '\0' || v * mul > 9.0e18) {
        return false;
    }
    *out = (int64_t)(v * mul);
    return true;
}

int ts_cli_parse_common(ts_cli_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    int64_t v = 0;
#define NEED_VALUE()                                                                              \
    do {                                                                                          \
        if (val == NULL) {                                                                        \
            fprintf(stderr, "error: %s needs a value\n", a);                                      \
            return -1;                                                                            \
        }                                                                                         \
        (*i)++;                                                                                   \
    } while (0)
    if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
        NEED_VALUE();
        o->model = val;
    } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 1, 1024, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a thread count (1..1024)\n", a, val);
            return -1;
        }
        o->n_threads = (int)v;
    } else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 16, (int64_t)1 << 24, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a context length (16..16777216)\n", a, val);
            return -1;
        }
        o->n_ctx = v;
    } else if (strcmp(a, "--kv-mem") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_size(val, &v) || v == 0) {
            fprintf(stderr, "error: %s: '%s' is not a size (e.g. 512M, 2G)\n", a, val);
            return -1;
        }
        o->kv_mem = v;
    } else if (strcmp(a, "--max-seqs") == 0 || strcmp(a, "-np") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 1, 4096, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (1..4096)\n", a, val);
            return -1;
        }
        o->max_seqs = v;
    } else if (strcmp(a, "--max-batch-tokens") == 0 || strcmp(a, "-b") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 1, 65536, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (1..65536)\n", a, val);
            return -1;
        }
        o->max_batch_tokens = v;
    } else if (strcmp(a, "--kv-type") == 0) {
        NEED_VALUE();
        o->kv_type = val;
    } else if (strcmp(a, "--backend") == 0) {
        NEED_VALUE();
        o->backend = val;
    } else if (strcmp(a, "--override") == 0) {
        NEED_VALUE();
        if (o->n_overrides == TS_CLI_MAX_OVERRIDES) {
            fprintf(stderr, "error: at most %d --override options\n", TS_CLI_MAX_OVERRIDES);
            return -1;
        }
        o->overrides[o->n_overrides++] = val;
    } else if (strcmp(a, "--no-prefix-cache") == 0) {
        o->no_prefix_cache = true;
    } else if (strcmp(a, "--chat-template") == 0) {
        NEED_VALUE();
        o->chat_template = val;
    } else if (strcmp(a, "--dump") == 0) {
        NEED_VALUE();
        o->dump = val;
    } else if (strcmp(a, "--dump-values") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 0, 1 << 20, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range\n", a, val);
            return -1;
        }
        o->dump_values = v;
    } else if (strcmp(a, "--profile") == 0) {
        o->profile = true;
    } else if (strcmp(a, "--compare") == 0) {
        NEED_VALUE();
        if (strcmp(val, "ref") != 0) {
            fprintf(stderr, "error: --compare: only 'ref' can be compared against\n");
            return -1;
        }
        o->compare = val;
    } else if (strcmp(a, "--tp") == 0) {
        NEED_VALUE();
        if (!parse_i64(val, 1, 64, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a shard count (1..64)\n", a, val);
            return -1;
        }
        o->tp = (int)v;
    } else if (strcmp(a, "--tp-mpi") == 0) {
        o->tp_mpi = true;
    } else if (strcmp(a, "--compare-tol") == 0) {
        NEED_VALUE();
        char *end = NULL;
        o->compare_tol = strtod(val, &end);
        if (*end != '\0' || !(o->compare_tol > 0)) {
            fprintf(stderr, "error: %s: '%s' is not a positive number\n", a, val);
            return -1;
        }
    } else {
        return 0;
    }
#undef NEED_VALUE
    return 1;
}

void ts_cli_print_common_help(FILE *f) {
    fprintf(f,
            "model options:\n"
            "  -m, --model FILE          GGUF model file (required)\n"
            "  -t, --threads N           CPU threads (default: physical cores)\n"
            "  -c, --ctx N               tokens per sequence (default: model's, at most 4096)\n"
            "      --kv-mem SIZE         KV cache memory, e.g. 256M (default: room for --ctx;\n"
            "                            with --tp: all shards' caches together)\n"
            "      --kv-type f16|f32|q8_0 KV cache element type (default f16; q8_0: about half\n"
            "                            of f16's memory, needs head_dim a multiple of 32)\n"
            "      --max-seqs N          sequences decoded together (default 16)\n"
            "      --max-batch-tokens N  tokens per forward step (default 512)\n"
            "      --no-prefix-cache     do not reuse cached prompt prefixes\n"
            "      --backend cpu|ref     compute backend (ref: the scalar reference)\n"
            "      --override F=NAME     choose an implementation of a functional family,\n"
            "                            e.g. attention=decomposed (repeatable)\n"
            "      --chat-template NAME  use a built-in chat template instead of the model's\n"
            "      --tp N                tensor parallelism: N shards in this process\n"
            "      --tp-mpi              one shard per MPI process (mpirun -np N tessera ...)\n"
            "debugging:\n"
            "      --dump FILE|-         print every graph node (name, op, shape, checksum)\n"
            "      --dump-values N       ... and its first N values\n"
            "      --profile             time per op type and per node, printed at the end\n"
            "      --compare ref         also run the reference backend; report the first node\n"
            "                            whose outputs differ (--compare-tol X, default 0.05)\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ts_status make_backend(const ts_cli_opts *o, ts_backend **out, ts_error *err) {
    if (strcmp(o->backend, "cpu") == 0) {
        ts_cpu_params p = ts_cpu_params_default();
        if (o->n_threads > 0) {
            p.n_threads = o->n_threads;
        }
        return ts_cpu_backend_create(&p, out, err);
    }
    if (strcmp(o->backend, "ref") == 0) {
        return ts_ref_backend_create(out, err);
    }
    return ts_error_set(err, TS_ERR_INVALID_ARG, "unknown backend '%s' (choose cpu or ref)",
                        o->backend);
}

static ts_status make_tp_backend(void *user, int n_threads, ts_backend **out, ts_error *err) {
    ts_cli_opts o = *(const ts_cli_opts *)user;
    o.n_threads = n_threads;
    return make_backend(&o, out, err);
}

/* Sets up --tp / --tp-mpi; on an MPI follower rank runs it to the end and exits. */
static int open_tp(const ts_cli_opts *o, ts_cli *cli, ts_engine_config *ec) {
    if (o->tp <= 1 && !o->tp_mpi) {
        return 0;
    }
    if (o->tp > 1 && o->tp_mpi) {
        fprintf(stderr, "error: --tp and --tp-mpi exclude each other (mpirun -np sets the "
                        "shard count)\n");
        return 2;
    }
    if (o->compare != NULL) {
        fprintf(stderr, "error: --compare runs one device; it cannot check a --tp run\n");
        return 2;
    }
    int threads = o->n_threads > 0 ? o->n_threads : ts_cpu_physical_cores();
    if (!o->tp_mpi) {
        threads = ts_cli_tp_threads(threads, o->tp);
    }
    bool follower = false;
    int rc = ts_cli_tp_open(&cli->tp, o->tp, o->tp_mpi, cli->model, cli->reg, make_tp_backend,
                            (void *)o, threads, &follower);
    if (follower) {
        ts_cli_close(cli);
        exit(rc);
    }
    if (rc == 0 && cli->tp.size > 1) {
        ec->tp = &cli->tp.cfg;
    }
    return rc;
}

/* Applies the model's own overrides (GGUF key tessera.overrides), then the command line's. */
static ts_status apply_overrides(const ts_cli_opts *o, ts_cli *cli, ts_error *err) {
    ts_gguf_str spec;
    if (ts_gguf_get_str(cli->model->gguf, "tessera.overrides", &spec, NULL) == TS_OK) {
        char buf[512];
        if (spec.len >= sizeof buf) {
            return ts_error_set(err, TS_ERR_FORMAT, "tessera.overrides is too long (%llu bytes)",
                                (unsigned long long)spec.len);
        }
        memcpy(buf, spec.ptr, spec.len);
        buf[spec.len] = '\0';
        ts_status st = ts_registry_apply(cli->reg, buf, "GGUF tessera.overrides", err);
        if (st != TS_OK) {
            return st;
        }
    }
    for (int i = 0; i < o->n_overrides; i++) {
        ts_status st = ts_registry_apply(cli->reg, o->overrides[i], "--override", err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

int ts_cli_open(const ts_cli_opts *o, ts_cli *cli) {
    memset(cli, 0, sizeof *cli);
    ts_error err = {0};
    if (o->model == NULL) {
        fprintf(stderr, "error: no model given (-m FILE)\n");
        return 2;
    }
    double t0 = now_ms();
    ts_status st = ts_model_open(o->model, &cli->model, &err);
    if (st == TS_OK) {
        st = ts_tokenizer_create(cli->model->gguf, &cli->tok, &err);
        if (st != TS_OK) {
            ts_error_prefix(&err, "%s: ", o->model);
        }
    }
    if (st == TS_OK) {
        ts_cli_opts bo = *o;
        if (o->tp > 1 && !o->tp_mpi) {
            bo.n_threads = ts_cli_tp_threads(o->n_threads > 0 ? o->n_threads
                                                              : ts_cpu_physical_cores(),
                                             o->tp);
        }
        st = make_backend(&bo, &cli->compute, &err);
        cli->backend = cli->compute;
    }
    if (st == TS_OK && o->compare != NULL) {
        st = ts_ref_backend_create(&cli->oracle, &err);
        if (st == TS_OK) {
            st = ts_hook_compare_create(cli->backend, cli->oracle, o->compare_tol,
                                        &cli->hook_compare, &err);
        }
        if (st == TS_OK) {
            cli->backend = cli->hook_compare;
        }
    }
    if (st == TS_OK && o->profile) {
        st = ts_hook_profile_create(cli->backend, &cli->hook_profile, &err);
        if (st == TS_OK) {
            cli->backend = cli->hook_profile;
        }
    }
    if (st == TS_OK && o->dump != NULL) {
        cli->dump_file = strcmp(o->dump, "-") == 0 ? stdout : fopen(o->dump, "w");
        if (cli->dump_file == NULL) {
            st = ts_error_set(&err, TS_ERR_IO, "--dump: cannot open '%s'", o->dump);
        }
        if (st == TS_OK) {
            st = ts_hook_dump_create(cli->backend, cli->dump_file, o->dump_values,
                                     &cli->hook_dump, &err);
        }
        if (st == TS_OK) {
            cli->backend = cli->hook_dump;
        }
    }
    if (st == TS_OK) {
        st = ts_registry_create(&cli->reg, &err);
    }
    if (st == TS_OK) {
        st = apply_overrides(o, cli, &err);
    }
    if (st == TS_OK) {
        if (o->chat_template != NULL) {
            st = ts_chat_template_from_name(o->chat_template, &cli->tmpl, &err);
            cli->has_tmpl = st == TS_OK;
        } else {
            cli->has_tmpl = ts_tokenizer_chat_template(cli->tok, &cli->tmpl, NULL) == TS_OK;
        }
    }
    ts_engine_config ec = {0};
    if (st == TS_OK) {
        ec = ts_engine_config_default(cli->model);
        if (o->n_ctx > 0) {
            ec.n_ctx = o->n_ctx;
        }
        if (o->max_seqs > 0) {
            ec.max_seqs = o->max_seqs;
        }
        if (o->max_batch_tokens > 0) {
            ec.max_batch_tokens = o->max_batch_tokens;
        }
        ec.prefix_cache = !o->no_prefix_cache;
        if (strcmp(o->kv_type, "f16") == 0) {
            ec.kv_type = TS_TYPE_F16;
        } else if (strcmp(o->kv_type, "f32") == 0) {
            ec.kv_type = TS_TYPE_F32;
        } else if (strcmp(o->kv_type, "q8_0") == 0) {
            ec.kv_type = TS_TYPE_Q8_0;
        } else {
            snprintf(err.msg, sizeof err.msg, "--kv-type '%s' is not supported (f16, f32, q8_0)",
                     o->kv_type);
            st = TS_ERR_INVALID_ARG;
        }
    }
    if (st == TS_OK) {
        int rc = open_tp(o, cli, &ec);
        if (rc != 0) {
            ts_cli_tp_abort(&cli->tp, "setup failed");
            ts_cli_close(cli);
            return rc;
        }
    }
    if (st == TS_OK && o->kv_mem > 0) {
        /* Under --tp the budget is for all shards' caches together: each shard holds its own
         * KV heads (shards may hold different numbers; a replicated head counts per copy). */
        const ts_hparams *hp = &cli->model->hp;
        int64_t heads = hp->n_head_kv, most = 0;
        if (cli->tp.size > 1) {
            st = ts_shard_kv_heads(cli->model, cli->tp.size, &heads, &most, &err);
        }
        /* One K and one V row of head_dim elements per head and layer: 4 or 2 bytes an
         * element for f32 / f16, 34 bytes per block of 32 for q8_0. */
        size_t row = 0;
        if (st == TS_OK && !ts_type_row_bytes(ec.kv_type, (uint64_t)hp->head_dim, &row)) {
            snprintf(err.msg, sizeof err.msg,
                     "--kv-type %s needs head_dim a multiple of %lld, but the model's head_dim "
                     "is %lld",
                     o->kv_type, (long long)ts_type_block_size(ec.kv_type),
                     (long long)hp->head_dim);
            st = TS_ERR_UNSUPPORTED;
        }
        int64_t per_token = hp->n_layer * 2 * heads * (int64_t)(row > 0 ? row : 1);
        ec.kv_tokens = o->kv_mem / per_token;
        if (st == TS_OK && ec.kv_tokens < ec.block_size) {
            snprintf(err.msg, sizeof err.msg,
                     "--kv-mem %lld bytes holds %lld tokens (%lld bytes each): less than one "
                     "block of %lld",
                     (long long)o->kv_mem, (long long)ec.kv_tokens, (long long)per_token,
                     (long long)ec.block_size);
            st = TS_ERR_LIMIT;
        }
    }
    if (st == TS_OK) {
        st = ts_engine_create(cli->model, cli->tok, cli->backend, cli->reg, &ec, &cli->engine,
                              &err);
    }
    cli->load_ms = now_ms() - t0;
    if (st != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
        ts_cli_tp_abort(&cli->tp, err.msg[0] ? err.msg : ts_status_str(st));
        ts_cli_close(cli);
        return 1;
    }
    return 0;
}

void ts_cli_close(ts_cli *cli) {
    ts_engine_destroy(cli->engine);
    ts_cli_tp_close(&cli->tp);
    ts_registry_destroy(cli->reg);
    ts_backend_destroy(cli->hook_dump);
    ts_backend_destroy(cli->hook_profile);
    ts_backend_destroy(cli->hook_compare);
    ts_backend_destroy(cli->oracle);
    ts_backend_destroy(cli->compute);
    if (cli->dump_file != NULL && cli->dump_file != stdout) {
        fclose(cli->dump_file);
    }
    ts_tokenizer_destroy(cli->tok);
    ts_model_close(cli->model);
    memset(cli, 0, sizeof *cli);
}

bool ts_cli_check_compare(ts_cli *cli) {
    if (cli->hook_compare == NULL) {
        return false;
    }
    const ts_compare_result *r = ts_hook_compare_result(cli->hook_compare);
    if (r == NULL || !r->diverged) {
        return false;
    }
    fprintf(stderr,
            "\ncompare: node %d '%s' (%s) differs from the reference: max abs error %.6g, max "
            "rel error %.6g (element %lld) after %d nodes agreed\n",
            r->node, r->name, ts_op_name(r->op), r->max_abs, r->max_rel, (long long)r->index,
            r->node);
    return true;
}

void ts_cli_report(ts_cli *cli) {
    if (cli->tp.size > 1 && cli->engine != NULL) {
        ts_engine_stats es;
        ts_engine_get_stats(cli->engine, &es);
        ts_cli_tp_report(&cli->tp, (double)(es.prompt_tokens + es.generated_tokens), "token");
    }
    if (cli->hook_profile != NULL) {
        ts_hook_profile_report(cli->hook_profile, stderr);
    }
    if (cli->hook_compare != NULL && !ts_cli_check_compare(cli)) {
        const ts_compare_result *r = ts_hook_compare_result(cli->hook_compare);
        fprintf(stderr, "compare: every node matched the reference (%d nodes in the last step)\n",
                r ? r->compared : 0);
    }
}

ts_status ts_cli_tokenize(const ts_cli *cli, const char *text, int32_t **ids, size_t *n,
                          ts_error *err) {
    return ts_tokenizer_tokenize(cli->tok, text, strlen(text), true, true, ids, n, err);
}
