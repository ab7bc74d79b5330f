/* common.c — the model options shared by the model-running subcommands, and opening a model
 * and its context through the public API. */
#include "common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ts_cli_opts_init(ts_cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->ctx = ts_context_params_default();
    o->ctx.overrides = o->overrides;
}

bool ts_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
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
#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (val == NULL) {                                                                         \
            fprintf(stderr, "error: %s needs a value\n", a);                                       \
            return -1;                                                                             \
        }                                                                                          \
        (*i)++;                                                                                    \
    } while (0)
    if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
        NEED_VALUE();
        o->model = val;
    } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 1024, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a thread count (1..1024)\n", a, val);
            return -1;
        }
        o->ctx.n_threads = (int)v;
    } else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 16, (int64_t)1 << 24, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a context length (16..16777216)\n", a, val);
            return -1;
        }
        o->ctx.n_ctx = v;
    } else if (strcmp(a, "--kv-mem") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_size(val, &v) || v == 0) {
            fprintf(stderr, "error: %s: '%s' is not a size (e.g. 512M, 2G)\n", a, val);
            return -1;
        }
        o->ctx.kv_bytes = v;
    } else if (strcmp(a, "--max-seqs") == 0 || strcmp(a, "-np") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 4096, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (1..4096)\n", a, val);
            return -1;
        }
        o->ctx.max_seqs = v;
    } else if (strcmp(a, "--max-batch-tokens") == 0 || strcmp(a, "-b") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 65536, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (1..65536)\n", a, val);
            return -1;
        }
        o->ctx.max_batch_tokens = v;
    } else if (strcmp(a, "--kv-type") == 0 || strcmp(a, "--cache-type") == 0) {
        NEED_VALUE();
        o->ctx.kv_type = val;
    } else if (strcmp(a, "--cache-type-k") == 0 || strcmp(a, "-ctk") == 0) {
        NEED_VALUE();
        o->ctx.kv_type_k = val;
    } else if (strcmp(a, "--cache-type-v") == 0 || strcmp(a, "-ctv") == 0) {
        NEED_VALUE();
        o->ctx.kv_type_v = val;
    } else if (strcmp(a, "--backend") == 0) {
        NEED_VALUE();
        o->ctx.backend = val;
    } else if (strcmp(a, "--device") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 0, 1024, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (0..1024)\n", a, val);
            return -1;
        }
        o->ctx.device = (int)v;
    } else if (strcmp(a, "--override") == 0) {
        NEED_VALUE();
        if (o->ctx.n_overrides == TS_CLI_MAX_OVERRIDES) {
            fprintf(stderr, "error: at most %d --override options\n", TS_CLI_MAX_OVERRIDES);
            return -1;
        }
        o->overrides[o->ctx.n_overrides++] = val;
    } else if (strcmp(a, "--spec-type") == 0) {
        NEED_VALUE();
        o->ctx.spec_type = val;
    } else if (strcmp(a, "--draft-max") == 0 || strcmp(a, "--draft") == 0 ||
               strcmp(a, "--draft-n") == 0 || strcmp(a, "--spec-draft-n-max") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 0, TS_ENGINE_MAX_DRAFT, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (0..%d)\n", a, val,
                    TS_ENGINE_MAX_DRAFT);
            return -1;
        }
        o->ctx.draft_max = (int)v;
    } else if (strcmp(a, "--draft-min") == 0 || strcmp(a, "--draft-n-min") == 0 ||
               strcmp(a, "--spec-draft-n-min") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 0, TS_ENGINE_MAX_DRAFT, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (0..%d)\n", a, val,
                    TS_ENGINE_MAX_DRAFT);
            return -1;
        }
        o->ctx.draft_min = (int)v;
    } else if (strcmp(a, "--spec-ngram-min") == 0 || strcmp(a, "--spec-ngram-max") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 16, &v)) {
            fprintf(stderr, "error: %s: '%s' is not an n-gram size (1..16)\n", a, val);
            return -1;
        }
        *(strcmp(a, "--spec-ngram-min") == 0 ? &o->ctx.spec_ngram_min : &o->ctx.spec_ngram_max) =
            (int)v;
    } else if (strcmp(a, "-md") == 0 || strcmp(a, "--model-draft") == 0 ||
               strcmp(a, "--draft-model") == 0 || strcmp(a, "--spec-draft-model") == 0) {
        NEED_VALUE();
        o->ctx.draft_model = val;
    } else if (strcmp(a, "--draft-p-min") == 0 || strcmp(a, "--spec-draft-p-min") == 0) {
        NEED_VALUE();
        char *end = NULL;
        double pm = strtod(val, &end);
        if (end == val || *end != '\0' || !(pm >= 0.0 && pm <= 1.0)) {
            fprintf(stderr, "error: %s: '%s' is not a probability (0..1)\n", a, val);
            return -1;
        }
        o->ctx.draft_p_min = (float)pm;
    } else if (strcmp(a, "--spec-accept") == 0) {
        NEED_VALUE();
        o->ctx.spec_accept = val;
    } else if (strcmp(a, "--spec-step-tokens") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 4096, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range (1..4096)\n", a, val);
            return -1;
        }
        o->ctx.spec_step_tokens = v;
    } else if (strcmp(a, "--no-prefix-cache") == 0) {
        o->ctx.no_prefix_cache = 1;
    } else if (strcmp(a, "--swa-full") == 0) {
        o->ctx.swa_full = 1;
    } else if (strcmp(a, "--chat-template") == 0) {
        NEED_VALUE();
        o->ctx.chat_template = val;
    } else if (strcmp(a, "--chat-template-file") == 0) {
        NEED_VALUE();
        o->chat_template_file = val;
    } else if (strcmp(a, "--dump") == 0) {
        NEED_VALUE();
        o->ctx.dump = val;
    } else if (strcmp(a, "--dump-values") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 0, 1 << 20, &v)) {
            fprintf(stderr, "error: %s: '%s' is out of range\n", a, val);
            return -1;
        }
        o->ctx.dump_values = v;
    } else if (strcmp(a, "--profile") == 0) {
        o->ctx.profile = 1;
    } else if (strcmp(a, "--retune") == 0) {
        o->ctx.retune = 1;
    } else if (strcmp(a, "--no-repack") == 0) {
        o->ctx.no_repack = 1;
    } else if (strcmp(a, "--compare") == 0) {
        NEED_VALUE();
        if (strcmp(val, "ref") != 0) {
            fprintf(stderr, "error: --compare: only 'ref' can be compared against\n");
            return -1;
        }
        o->ctx.compare = val;
    } else if (strcmp(a, "--tp") == 0) {
        NEED_VALUE();
        if (!ts_cli_parse_i64(val, 1, 64, &v)) {
            fprintf(stderr, "error: %s: '%s' is not a shard count (1..64)\n", a, val);
            return -1;
        }
        o->ctx.tp = (int)v;
    } else if (strcmp(a, "--tp-mpi") == 0) {
        o->ctx.tp_mpi = 1;
    } else if (strcmp(a, "--compare-tol") == 0) {
        NEED_VALUE();
        char *end = NULL;
        o->ctx.compare_tol = strtod(val, &end);
        if (*end != '\0' || !(o->ctx.compare_tol > 0)) {
            fprintf(stderr, "error: %s: '%s' is not a positive number\n", a, val);
            return -1;
        }
    } else {
        return 0;
    }
#undef NEED_VALUE
    return 1;
}

void ts_cli_format_kv(const ts_context_info *in, char *buf, size_t size) {
    const double mib = 1024.0 * 1024.0;
    if (in->kv_swa_tokens == 0) {
        snprintf(buf, size, "KV cache %.1f MiB (K %s, V %s): %lld tokens",
                 (double)in->kv_bytes / mib, in->kv_type_k, in->kv_type_v,
                 (long long)in->kv_tokens);
        return;
    }
    snprintf(buf, size,
             "KV cache %.1f MiB (K %s, V %s): %lld tokens of the full-attention layers (%.1f MiB), "
             "%lld of the sliding-window layers (%.1f MiB)",
             (double)in->kv_bytes / mib, in->kv_type_k, in->kv_type_v, (long long)in->kv_tokens,
             (double)(in->kv_bytes - in->kv_swa_bytes) / mib, (long long)in->kv_swa_tokens,
             (double)in->kv_swa_bytes / mib);
}

void ts_cli_print_common_help(FILE *f) {
    fprintf(f,
            "model options:\n"
            "  -m, --model FILE          GGUF model file (required)\n"
            "  -t, --threads N           CPU threads (default: physical cores)\n"
            "  -c, --ctx N               tokens per sequence (default: model's, at most 4096)\n"
            "      --kv-mem SIZE         KV cache memory, e.g. 256M (default: room for --ctx;\n"
            "                            with --tp: all shards' caches together)\n"
            "      --kv-type T           KV cache type of K and V: f16 (default), bf16, f32,\n"
            "                            q8_0, q5_0, q4_0 (q8_0: about half of f16's memory,\n"
            "                            q4_0 a quarter; these need head_dim a multiple of 32)\n"
            "  -ctk, --cache-type-k T    K cache type only (same types; default --kv-type)\n"
            "  -ctv, --cache-type-v T    V cache type only (e.g. -ctk q8_0 -ctv q4_0)\n"
            "      --max-seqs N          sequences decoded together (default 16)\n"
            "      --max-batch-tokens N  tokens per forward step (default 512)\n"
            "      --no-prefix-cache     do not reuse cached prompt prefixes\n"
            "      --spec-type T         speculative decoding: ngram (drafts looked up in the\n"
            "                            prompt and output so far), draft (a draft model) or\n"
            "                            none (default; ngram with --draft-max, draft with\n"
            "                            --model-draft). The output is the same, faster\n"
            "                            where the drafts are right (docs/speculative.md)\n"
            "  -md, --model-draft FILE   a smaller model of the same vocabulary drafts\n"
            "                            (greedily, on the same backend, its own KV cache)\n"
            "      --draft-p-min P       a model draft stops before a token the draft model\n"
            "                            gives less than P (default 0: off)\n"
            "      --draft-max N         tokens drafted per sequence and step (default 16)\n"
            "      --draft-min N         fewest drafted tokens worth verifying (default 3)\n"
            "      --spec-ngram-min N, --spec-ngram-max N\n"
            "                            n-gram sizes looked up, longest first (default 3..4)\n"
            "      --spec-step-tokens N  draft only while a step holds at most N tokens\n"
            "                            (default 32: a full batch gains nothing from drafts)\n"
            "      --spec-accept A       exact (default: outputs identical to plain decoding)\n"
            "                            or rejection (classic rejection sampling: the same\n"
            "                            distribution, more drafts accepted, other tokens)\n"
            "      --swa-full            sliding-window layers (Gemma 2/3) keep the whole\n"
            "                            context (default: a cache sized by their window)\n"
            "      --backend NAME        compute backend: cpu, ref (the scalar reference), cuda\n"
            "                            (an NVIDIA GPU; build with -DTS_CUDA=ON) or auto\n"
            "      --device N            cuda: the GPU to use (default 0)\n"
            "      --override F=NAME     choose an implementation of a functional family,\n"
            "                            e.g. attention=decomposed (repeatable)\n"
            "      --chat-template NAME  use a built-in chat template instead of the model's\n"
            "                            (C renderers: chatml, llama3, gemma, mistral-v7, ...)\n"
            "      --chat-template-file F  a Jinja chat template instead of the model's\n"
            "      --tp N                tensor parallelism: N shards in this process\n"
            "      --tp-mpi              one shard per MPI process (mpirun -np N tessera ...)\n"
            "      --retune              measure which CPU kernel is fastest per weight type\n"
            "                            again instead of using the cached choice (kept in\n"
            "                            $TS_CACHE_DIR, else ~/.cache/tessera; TS_ISA=avx2|\n"
            "                            avxvnni|avx512|scalar forces one instruction set)\n"
            "      --no-repack           keep weights where they lie in the model file instead\n"
            "                            of repacking them at load into the layout the fast\n"
            "                            CPU kernels read (same results; less load time and\n"
            "                            memory traffic, slower where repacking measured faster)\n"
            "debugging:\n"
            "      --dump FILE|-         print every graph node (name, op, shape, checksum)\n"
            "      --dump-values N       ... and its first N values\n"
            "      --profile             time per op type and per node, printed at the end\n"
            "      --compare ref         also run the reference backend; report the first node\n"
            "                            whose outputs differ (--compare-tol X, default 0.05)\n");
}

int ts_cli_open(const ts_cli_opts *o, ts_cli *cli) {
    memset(cli, 0, sizeof *cli);
    if (o->model == NULL) {
        fprintf(stderr, "error: no model given (-m FILE)\n");
        return 2;
    }
    ts_error err = {0};
    ts_context_params p = o->ctx;
    p.overrides = o->overrides;
    char *tmpl = NULL;
    if (o->chat_template_file != NULL) {
        size_t n = 0;
        tmpl = ts_cli_read_file(o->chat_template_file, &n);
        if (tmpl == NULL) {
            fprintf(stderr, "error: --chat-template-file %s: %s\n", o->chat_template_file,
                    strerror(errno));
            return 1;
        }
        /* The template travels on as a C string: a NUL byte would cut it silently. */
        const char *nul = memchr(tmpl, 0, n);
        if (nul != NULL) {
            fprintf(stderr, "error: --chat-template-file %s: NUL byte at offset %zu\n",
                    o->chat_template_file, (size_t)(nul - tmpl));
            free(tmpl);
            return 1;
        }
        p.chat_template_source = tmpl;
    }
    double t0 = ts_cli_now_ms();
    ts_llm_params lp = ts_cli_llm_params();
    ts_status st = ts_llm_open(o->model, &lp, &cli->llm, &err);
    cli->open_ms = ts_cli_now_ms() - t0;
    if (st == TS_OK) {
        ts_llm_get_info(cli->llm, &cli->model);
        st = ts_context_create(cli->llm, &p, &cli->ctx, &err);
    }
    free(tmpl); /* the context keeps its own copy */
    if (st == TS_OK && cli->ctx == NULL) {
        /* An MPI follower rank whose group has ended. */
        ts_cli_close(cli);
        exit(0);
    }
    if (st != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
        ts_cli_close(cli);
        return 1;
    }
    ts_context_get_info(cli->ctx, &cli->info);
    ts_cli_print_kernel_notice(&cli->info);
    if (cli->info.chat_template_notice != NULL && cli->info.chat_template_notice[0] != '\0') {
        fprintf(stderr, "warning: %s\n", cli->info.chat_template_notice);
    }
    return 0;
}

bool ts_cli_has_chat_template(const ts_cli *cli) {
    return cli->info.chat_template != NULL || cli->info.chat_template_source != NULL;
}

char *ts_cli_read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
        if (n == cap) {
            char *bigger = cap <= SIZE_MAX / 4 ? realloc(buf, cap * 2 + 1) : NULL;
            if (bigger == NULL) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf != NULL && ferror(f)) {
        free(buf);
        return NULL;
    }
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

char *ts_cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    char *buf = ts_cli_read_stream(f, len);
    int saved = errno;
    fclose(f);
    errno = saved;
    return buf;
}

double ts_cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double ts_cli_rss_mb(bool peak) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return 0.0;
    }
    const char *key = peak ? "VmHWM:" : "VmRSS:";
    char line[256];
    double kb = 0.0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0) {
            kb = strtod(line + strlen(key), NULL);
            break;
        }
    }
    fclose(f);
    return kb / 1024.0;
}

static void log_stderr(void *user, ts_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%s: %s\n", level == TS_LOG_WARN ? "warning" : "note", msg);
}

ts_llm_params ts_cli_llm_params(void) {
    return (ts_llm_params){.log = log_stderr};
}

void ts_cli_print_kernel_notice(const ts_context_info *info) {
    if (info->kernel_notice != NULL && info->kernel_notice[0] != '\0') {
        fprintf(stderr, "notice: %s\n", info->kernel_notice);
    }
}

void ts_cli_close(ts_cli *cli) {
    ts_context_destroy(cli->ctx);
    ts_llm_close(cli->llm);
    memset(cli, 0, sizeof *cli);
}

bool ts_cli_check_compare(ts_cli *cli) {
    ts_divergence d;
    if (cli->ctx == NULL || !ts_context_diverged(cli->ctx, &d)) {
        return false;
    }
    fprintf(stderr,
            "\ncompare: node %d '%s' (%s) differs from the reference: max abs error %.6g, max "
            "rel error %.6g (element %lld) after %d nodes agreed\n",
            d.node, d.name, d.op, d.max_abs, d.max_rel, (long long)d.index, d.node);
    return true;
}

ts_status ts_cli_tokenize(const ts_cli *cli, const char *text, int32_t **ids, size_t *n,
                          ts_error *err) {
    return ts_llm_tokenize(cli->llm, text, strlen(text), 1, 1, ids, n, err);
}
