/*
 * cmd_perplexity.c — `tessera perplexity`: how well the model predicts a text, by the procedure
 * of llama.cpp's llama-perplexity, so that the two tools' figures compare:
 *
 *  1. The whole text is tokenized once with the model's special tokens: BOS first when the
 *     model adds one (ts_llm_info.add_bos). An EOS the model appends is dropped (llama-perplexity
 *     refuses such models; the text is scored as text).
 *  2. The tokens are cut into n_tokens / ctx windows of ctx consecutive tokens; --chunks keeps the
 *     first N. The tail shorter than a window is not used.
 *  3. Each window is evaluated from an empty cache, its first token replaced by BOS when the
 *     model adds BOS: every window starts the way the text does (the first one already does).
 *  4. Only the second half is scored: with first = ctx / 2, the logits at positions
 *     first .. ctx - 2 predict the tokens at first + 1 .. ctx - 1 (ctx - first - 1 tokens per
 *     window), so every scored token has at least ctx / 2 tokens before it. A token's NLL is
 *     -log softmax(logits)[token], in double precision.
 *  5. After each window the running PPL = exp(mean NLL) is printed as "[i]PPL," on stdout; at the
 *     end "Final estimate: PPL = X +/- Y", where Y = X * sqrt(var / (count - 1)): the standard
 *     error of the mean NLL (var the variance of the NLLs about their mean) carried through exp.
 *
 * Windows are computed in steps of --batch tokens through the paged KV cache (one sequence).
 * llama-perplexity also refuses texts shorter than two windows; here one window is enough.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tessera perplexity -m MODEL -f TEXT_FILE [--ctx 512] [--batch 512] "
            "[--chunks N] [options]\n\n"
            "Scores the text as llama.cpp's llama-perplexity does: windows of --ctx tokens, each\n"
            "starting with BOS when the model adds one, the second half of each scored. Prints\n"
            "the running PPL after each window and \"Final estimate: PPL = X +/- Y\".\n\n"
            "  -f, --file FILE           the text\n"
            "  -c, --ctx N               window length in tokens (default 512; at most the\n"
            "                            model's training context)\n"
            "  -b, --batch N             tokens per forward step (default: the window)\n"
            "      --chunks N            score at most N windows (default: all)\n\n");
    ts_cli_print_common_help(f);
}

/* -log softmax(logits)[target], in double precision. */
static double nll_of(const float *logits, int64_t n_vocab, int32_t target) {
    float max = logits[0];
    for (int64_t i = 1; i < n_vocab; i++) {
        max = logits[i] > max ? logits[i] : max;
    }
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++) {
        sum += exp((double)logits[i] - max);
    }
    return -((double)logits[target] - max - log(sum));
}

/* The sums the estimate is made of. */
typedef struct nll_sums {
    double sum, sum2; /* of the NLLs and of their squares */
    int64_t count;    /* tokens scored */
} nll_sums;

/* Scores one window: win[0 .. n_ctx) are its tokens (the first already BOS where the model
 * wants it). Computes it in steps of `batch` tokens from an empty cache and adds the NLL of
 * the tokens at n_ctx/2 + 1 .. n_ctx - 1 to *s. want is scratch of `batch` flags. */
static ts_status score_window(ts_context *ctx, const int32_t *win, int64_t n_ctx, int64_t batch,
                              int64_t n_vocab, int8_t *want, nll_sums *s, ts_error *err) {
    int64_t first = n_ctx / 2;
    ts_status st = ts_context_seq_drop(ctx, 0, err);
    for (int64_t start = 0; st == TS_OK && start < n_ctx; start += batch) {
        int64_t n = n_ctx - start < batch ? n_ctx - start : batch;
        for (int64_t t = 0; t < n; t++) {
            int64_t p = start + t; /* the logits at position p predict the token at p + 1 */
            want[t] = p >= first && p + 1 < n_ctx;
        }
        ts_decode_batch bt = {.n_tokens = (int32_t)n, .tokens = win + start, .logits = want};
        st = ts_context_decode(ctx, &bt, err);
        for (int64_t t = 0; st == TS_OK && t < n; t++) {
            if (want[t]) {
                double nll =
                    nll_of(ts_context_logits(ctx, (int32_t)t), n_vocab, win[start + t + 1]);
                s->sum += nll;
                s->sum2 += nll * nll;
                s->count++;
            }
        }
    }
    return st;
}

typedef struct ppl_opts {
    ts_cli_opts co;
    const char *file;
    int64_t max_chunks; /* 0: all */
} ppl_opts;

/* Returns 0, or the exit status after printing why the arguments are wrong (-1: --help). */
static int parse_args(ppl_opts *o, int argc, char **argv) {
    *o = (ppl_opts){0};
    ts_cli_opts_init(&o->co);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        bool is_file = strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0;
        bool is_chunks = strcmp(a, "--chunks") == 0, is_batch = strcmp(a, "--batch") == 0;
        if (is_file || is_chunks || is_batch) {
            int64_t n = 0;
            if (v == NULL) {
                fprintf(stderr, "error: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (is_file) {
                o->file = v;
            } else if (!ts_cli_parse_i64(v, is_batch ? 1 : 0, 1 << 20, &n)) {
                fprintf(stderr, "error: %s: bad value '%s'\n", a, v);
                return 2;
            } else if (is_chunks) {
                o->max_chunks = n;
            } else {
                o->co.ctx.max_batch_tokens = n; /* the same as the common -b */
            }
            continue;
        }
        int r = ts_cli_parse_common(&o->co, argc, argv, &i);
        if (r < 0) {
            return 2;
        }
        if (r == 0) {
            fprintf(stderr, "error: unknown option: %s\n", a);
            return 2;
        }
    }
    if (o->co.model == NULL || o->file == NULL) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Tokenizes the text as llama-perplexity does (step 1 above). */
static ts_status tokenize_text(ts_llm *llm, const ts_llm_info *mi, const char *text, size_t len,
                               int32_t **ids, size_t *n_ids, ts_error *err) {
    ts_status st = ts_llm_tokenize(llm, text, len, 1, 0, ids, n_ids, err);
    if (st == TS_OK && mi->add_eos && *n_ids > 0 && (*ids)[*n_ids - 1] == mi->eos) {
        (*n_ids)--;
    }
    return st;
}

int ts_cmd_perplexity(int argc, char **argv) {
    ppl_opts o;
    int rc = parse_args(&o, argc, argv);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    size_t text_len = 0;
    char *text = ts_cli_read_file(o.file, &text_len);
    if (text == NULL) {
        perror(o.file);
        return 1;
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    ts_context *ctx = NULL;
    int32_t *ids = NULL, *win = NULL;
    size_t n_ids = 0;
    int8_t *want = NULL;
    ts_llm_info mi = {0};
    int64_t n_ctx = o.co.ctx.n_ctx > 0 ? o.co.ctx.n_ctx : 512;
    int64_t n_windows = 0;
    ts_llm_params lp = ts_cli_llm_params();
    ts_status st = ts_llm_open(o.co.model, &lp, &llm, &err);
    if (st == TS_OK) {
        ts_llm_get_info(llm, &mi);
        if (n_ctx > mi.n_ctx_train) {
            snprintf(err.msg, sizeof err.msg,
                     "--ctx %lld is longer than the model's context (%lld tokens)",
                     (long long)n_ctx, (long long)mi.n_ctx_train);
            st = TS_ERR_RANGE;
        }
    }
    if (st == TS_OK) {
        st = tokenize_text(llm, &mi, text, text_len, &ids, &n_ids, &err);
    }
    if (st == TS_OK) {
        n_windows = (int64_t)n_ids / n_ctx;
        if (o.max_chunks > 0 && n_windows > o.max_chunks) {
            n_windows = o.max_chunks;
        }
        if (n_windows == 0) {
            snprintf(err.msg, sizeof err.msg,
                     "%s tokenizes to %zu tokens%s; one window of --ctx %lld needs %lld (use a "
                     "longer text or a smaller --ctx)",
                     o.file, n_ids, mi.add_bos ? " with BOS" : "", (long long)n_ctx,
                     (long long)n_ctx);
            st = TS_ERR_RANGE;
        }
    }
    /* One sequence whose cache holds exactly one window; every token of a step may be scored. */
    int64_t batch = o.co.ctx.max_batch_tokens > 0 && o.co.ctx.max_batch_tokens < n_ctx
                        ? o.co.ctx.max_batch_tokens
                        : n_ctx;
    if (st == TS_OK) {
        ts_context_params p = o.co.ctx;
        p.n_ctx = n_ctx;
        p.kv_tokens = n_ctx;
        p.max_seqs = 1;
        p.max_batch_tokens = batch;
        p.max_outputs = batch;
        st = ts_context_create(llm, &p, &ctx, &err);
    }
    if (st == TS_OK && ctx == NULL) {
        /* An MPI follower rank (--tp-mpi) whose group has ended. */
        ts_free(ids);
        free(text);
        ts_llm_close(llm);
        return 0;
    }
    if (st == TS_OK) {
        ts_context_info ci;
        ts_context_get_info(ctx, &ci);
        ts_cli_print_kernel_notice(&ci);
        want = malloc((size_t)batch);
        win = malloc((size_t)n_ctx * sizeof *win);
        if (want == NULL || win == NULL) {
            snprintf(err.msg, sizeof err.msg, "out of memory");
            st = TS_ERR_NOMEM;
        }
    }
    int64_t first = n_ctx / 2;
    if (st == TS_OK) {
        fprintf(stderr, "perplexity: %s: %zu tokens = %lld windows of %lld (%s); scoring %lld\n",
                o.file, n_ids, (long long)((int64_t)n_ids / n_ctx), (long long)n_ctx,
                mi.add_bos ? "each starting with BOS" : "the model adds no BOS",
                (long long)n_windows);
        fprintf(stderr,
                "perplexity: scored per window: the %lld tokens at positions %lld..%lld (from 0), "
                "each with at least %lld tokens of context\n",
                (long long)(n_ctx - first - 1), (long long)first + 1, (long long)n_ctx - 1,
                (long long)first + 1);
    }
    nll_sums s = {0};
    double t0 = ts_cli_now_ms();
    for (int64_t w = 0; st == TS_OK && w < n_windows; w++) {
        memcpy(win, ids + w * n_ctx, (size_t)n_ctx * sizeof *win);
        if (mi.add_bos) {
            win[0] = mi.bos;
        }
        st = score_window(ctx, win, n_ctx, batch, mi.n_vocab, want, &s, &err);
        if (st == TS_OK) {
            printf("[%lld]%.4f,", (long long)w + 1, exp(s.sum / (double)s.count));
            fflush(stdout);
        }
    }
    double secs = (ts_cli_now_ms() - t0) / 1e3;
    if (n_windows > 0 && s.count > 0) {
        printf("\n");
    }
    if (st == TS_OK) {
        double mean = s.sum / (double)s.count;
        double var = s.sum2 / (double)s.count - mean * mean;
        double se = s.count > 1 && var > 0 ? sqrt(var / (double)(s.count - 1)) : 0;
        double ppl = exp(mean);
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * se);
        fprintf(stderr,
                "perplexity: %lld tokens scored (%lld per window), mean NLL %.6f +/- %.6f; "
                "%.2f s, %.2f s per window\n",
                (long long)s.count, (long long)(n_ctx - first - 1), mean, se, secs,
                secs / (double)n_windows);
        ts_context_report(ctx, stderr);
    } else {
        fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
        rc = 1;
    }
    free(want);
    free(win);
    ts_free(ids);
    free(text);
    ts_context_destroy(ctx);
    ts_llm_close(llm);
    return rc;
}
