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
 *
 * KL divergence, as llama-perplexity's --kl-divergence-base / --kl-divergence: a first run
 * with --kl-divergence-base FILE (e.g. on the F16 model, or with --override matmul=dequant for
 * the f32-activation path) writes every scored position's log-probabilities to FILE; a second
 * run with both options (the quantized model, another ISA level, another KV type) reads them
 * and reports, over the scored positions, KL(base || this), how often the two agree on the
 * most likely token, and the RMS difference of the probability given to the text's token. The
 * file is ours (not llama.cpp's): magic "TSKLD001", then u32 n_vocab, n_ctx, n_windows, the
 * n_windows * n_ctx tokens scored (i32), then per scored position n_vocab f32 log-probabilities
 * (all little-endian, as the host writes them). The second run refuses a file made from
 * another text, window length or vocabulary, naming what differs.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: tessera perplexity -m MODEL -f TEXT_FILE [--ctx 512] [--batch 512] "
        "[--chunks N] [options]\n\n"
        "Scores the text as llama.cpp's llama-perplexity does: windows of --ctx tokens, each\n"
        "starting with BOS when the model adds one, the second half of each scored. Prints\n"
        "the running PPL after each window and \"Final estimate: PPL = X +/- Y\".\n\n"
        "  -f, --file FILE           the text\n"
        "  -c, --ctx N               window length in tokens (default 512; at most the\n"
        "                            model's training context)\n"
        "  -b, --batch N             tokens per forward step (default: the window)\n"
        "      --chunks N            score at most N windows (default: all)\n"
        "      --kl-divergence-base FILE\n"
        "                            alone: write every scored position's log-probabilities\n"
        "                            to FILE (a base run: the F16 model, or --override\n"
        "                            matmul=dequant for f32 activations)\n"
        "      --kl-divergence       with --kl-divergence-base: read FILE and report\n"
        "                            KL(base || this run), how often the most likely token\n"
        "                            is the same, and the RMS change of the text token's\n"
        "                            probability (same text, --ctx and --chunks as the base)\n\n");
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

/* out[i] = log softmax(logits)[i], in double precision, stored as float. */
static void log_softmax(const float *logits, int64_t n_vocab, float *out) {
    float max = logits[0];
    for (int64_t i = 1; i < n_vocab; i++) {
        max = logits[i] > max ? logits[i] : max;
    }
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++) {
        sum += exp((double)logits[i] - max);
    }
    double lse = (double)max + log(sum);
    for (int64_t i = 0; i < n_vocab; i++) {
        out[i] = (float)((double)logits[i] - lse);
    }
}

#define KLD_MAGIC "TSKLD001"

/* The KL-divergence side of a run: writing the base file, or reading it and comparing. */
typedef struct kld_state {
    FILE *f;          /* the base file, NULL when neither option is given */
    bool compare;     /* --kl-divergence: read and compare; else write */
    float *base, *lp; /* [n_vocab]: a base row read; this run's log-probs */
    double *kld;      /* [count] per scored position, for the median and percentiles */
    int64_t count, cap;
    double kl_sum, kl_sum2, dp_sum2;
    int64_t same_top;
} kld_state;

static int64_t argmax_f(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++) {
        best = x[i] > x[best] ? i : best;
    }
    return best;
}

/* Writes this position's log-probs, or reads the base's and accumulates the comparison. */
static ts_status kld_position(kld_state *k, const float *logits, int64_t n_vocab, int32_t target,
                              ts_error *err) {
    log_softmax(logits, n_vocab, k->lp);
    if (!k->compare) {
        if (fwrite(k->lp, sizeof(float), (size_t)n_vocab, k->f) != (size_t)n_vocab) {
            snprintf(err->msg, sizeof err->msg, "--kl-divergence-base: write failed (disk full?)");
            return TS_ERR_IO;
        }
        return TS_OK;
    }
    if (fread(k->base, sizeof(float), (size_t)n_vocab, k->f) != (size_t)n_vocab) {
        snprintf(err->msg, sizeof err->msg,
                 "--kl-divergence-base: the file ends early (scored position %lld): it was not "
                 "written by a complete run on this text",
                 (long long)k->count);
        return TS_ERR_FORMAT;
    }
    double kl = 0;
    for (int64_t i = 0; i < n_vocab; i++) {
        double pb = exp((double)k->base[i]);
        kl += pb * ((double)k->base[i] - (double)k->lp[i]);
    }
    kl = kl > 0 ? kl : 0; /* rounding can leave a tiny negative sum for equal rows */
    if (k->count == k->cap) {
        int64_t cap = k->cap > 0 ? 2 * k->cap : 4096;
        double *grown = realloc(k->kld, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            snprintf(err->msg, sizeof err->msg, "out of memory");
            return TS_ERR_NOMEM;
        }
        k->kld = grown;
        k->cap = cap;
    }
    k->kld[k->count++] = kl;
    k->kl_sum += kl;
    k->kl_sum2 += kl * kl;
    k->same_top += argmax_f(k->base, n_vocab) == argmax_f(k->lp, n_vocab);
    double dp = exp((double)k->lp[target]) - exp((double)k->base[target]);
    k->dp_sum2 += dp * dp;
    return TS_OK;
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
                              int64_t n_vocab, int8_t *want, nll_sums *s, kld_state *k,
                              ts_error *err) {
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
                const float *logits = ts_context_logits(ctx, (int32_t)t);
                double nll = nll_of(logits, n_vocab, win[start + t + 1]);
                s->sum += nll;
                s->sum2 += nll * nll;
                s->count++;
                if (k->f != NULL) {
                    st = kld_position(k, logits, n_vocab, win[start + t + 1], err);
                }
            }
        }
    }
    return st;
}

typedef struct ppl_opts {
    ts_cli_opts co;
    const char *file;
    int64_t max_chunks;   /* 0: all */
    const char *kld_base; /* --kl-divergence-base */
    bool kld;             /* --kl-divergence */
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
        if (strcmp(a, "--kl-divergence") == 0) {
            o->kld = true;
            continue;
        }
        if (strcmp(a, "--kl-divergence-base") == 0) {
            if (v == NULL) {
                fprintf(stderr, "error: %s needs a file name\n", a);
                return 2;
            }
            o->kld_base = v;
            i++;
            continue;
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
    if (o->kld && o->kld_base == NULL) {
        fprintf(stderr, "error: --kl-divergence needs --kl-divergence-base FILE (the base run's "
                        "log-probabilities)\n");
        return 2;
    }
    return 0;
}

/* Opens the base file: writes its header, or reads and checks it against this run. */
static ts_status kld_open(kld_state *k, const ppl_opts *o, int64_t n_vocab, int64_t n_ctx,
                          int64_t n_windows, const int32_t *ids, ts_error *err) {
    k->compare = o->kld;
    k->f = fopen(o->kld_base, k->compare ? "rb" : "wb");
    if (k->f == NULL) {
        snprintf(err->msg, sizeof err->msg, "--kl-divergence-base %s: %s", o->kld_base,
                 strerror(errno));
        return TS_ERR_IO;
    }
    k->base = malloc((size_t)n_vocab * sizeof(float));
    k->lp = malloc((size_t)n_vocab * sizeof(float));
    if (k->base == NULL || k->lp == NULL) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return TS_ERR_NOMEM;
    }
    uint32_t dims[3] = {(uint32_t)n_vocab, (uint32_t)n_ctx, (uint32_t)n_windows};
    size_t n_tok = (size_t)(n_windows * n_ctx);
    if (!k->compare) {
        if (fwrite(KLD_MAGIC, 1, 8, k->f) != 8 || fwrite(dims, sizeof dims, 1, k->f) != 1 ||
            fwrite(ids, sizeof *ids, n_tok, k->f) != n_tok) {
            snprintf(err->msg, sizeof err->msg, "--kl-divergence-base %s: write failed",
                     o->kld_base);
            return TS_ERR_IO;
        }
        return TS_OK;
    }
    char magic[8];
    uint32_t got[3];
    if (fread(magic, 1, 8, k->f) != 8 || memcmp(magic, KLD_MAGIC, 8) != 0 ||
        fread(got, sizeof got, 1, k->f) != 1) {
        snprintf(err->msg, sizeof err->msg,
                 "--kl-divergence-base %s: not a file written by `tessera perplexity "
                 "--kl-divergence-base` (bad magic or header)",
                 o->kld_base);
        return TS_ERR_FORMAT;
    }
    static const char *const names[3] = {"vocabulary size", "--ctx", "windows scored"};
    for (int i = 0; i < 3; i++) {
        if (got[i] != dims[i]) {
            snprintf(err->msg, sizeof err->msg,
                     "--kl-divergence-base %s: the base run's %s is %u, this run's %u (use the "
                     "same model family, text, --ctx and --chunks)",
                     o->kld_base, names[i], got[i], dims[i]);
            return TS_ERR_INVALID_ARG;
        }
    }
    for (size_t i = 0; i < n_tok; i++) {
        int32_t t;
        if (fread(&t, sizeof t, 1, k->f) != 1 || t != ids[i]) {
            snprintf(err->msg, sizeof err->msg,
                     "--kl-divergence-base %s: token %zu of the text differs from the base "
                     "run's (another text or tokenizer)",
                     o->kld_base, i);
            return TS_ERR_INVALID_ARG;
        }
    }
    return TS_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The comparison's figures, on stdout. */
static void kld_report(kld_state *k) {
    double n = (double)k->count;
    double mean = k->kl_sum / n;
    double var = k->kl_sum2 / n - mean * mean;
    double se = k->count > 1 && var > 0 ? sqrt(var / (n - 1)) : 0;
    double same = (double)k->same_top / n;
    double same_se = k->count > 1 ? sqrt(same * (1 - same) / (n - 1)) : 0;
    qsort(k->kld, (size_t)k->count, sizeof *k->kld, cmp_double);
    int64_t i99 = (int64_t)(0.99 * (n - 1));
    printf("KL divergence: mean %.6f +/- %.6f, median %.6f, 99%% %.6f, max %.6f "
           "(%lld positions)\n",
           mean, se, k->kld[k->count / 2], k->kld[i99], k->kld[k->count - 1], (long long)k->count);
    printf("Same top token: %.3f%% +/- %.3f%%\n", 100 * same, 100 * same_se);
    printf("RMS change of the text token's probability: %.4f%%\n", 100 * sqrt(k->dp_sum2 / n));
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
    kld_state k = {0};
    if (st == TS_OK && o.kld_base != NULL) {
        int32_t *scored = malloc((size_t)(n_windows * n_ctx) * sizeof *scored);
        if (scored == NULL) {
            snprintf(err.msg, sizeof err.msg, "out of memory");
            st = TS_ERR_NOMEM;
        } else {
            memcpy(scored, ids, (size_t)(n_windows * n_ctx) * sizeof *scored);
            for (int64_t w = 0; mi.add_bos && w < n_windows; w++) {
                scored[w * n_ctx] = mi.bos;
            }
            st = kld_open(&k, &o, mi.n_vocab, n_ctx, n_windows, scored, &err);
            free(scored);
        }
    }
    nll_sums s = {0};
    double t0 = ts_cli_now_ms();
    for (int64_t w = 0; st == TS_OK && w < n_windows; w++) {
        memcpy(win, ids + w * n_ctx, (size_t)n_ctx * sizeof *win);
        if (mi.add_bos) {
            win[0] = mi.bos;
        }
        st = score_window(ctx, win, n_ctx, batch, mi.n_vocab, want, &s, &k, &err);
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
        if (k.compare && k.count > 0) {
            kld_report(&k);
        } else if (k.f != NULL && fflush(k.f) != 0) {
            snprintf(err.msg, sizeof err.msg, "--kl-divergence-base %s: write failed", o.kld_base);
            st = TS_ERR_IO;
        }
        fprintf(stderr,
                "perplexity: %lld tokens scored (%lld per window), mean NLL %.6f +/- %.6f; "
                "%.2f s, %.2f s per window\n",
                (long long)s.count, (long long)(n_ctx - first - 1), mean, se, secs,
                secs / (double)n_windows);
        ts_context_report(ctx, stderr);
    }
    if (k.f != NULL && fclose(k.f) != 0 && st == TS_OK) {
        snprintf(err.msg, sizeof err.msg, "--kl-divergence-base %s: write failed", o.kld_base);
        st = TS_ERR_IO;
    }
    if (st != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : ts_status_str(st));
        rc = 1;
    }
    free(k.base);
    free(k.lp);
    free(k.kld);
    free(want);
    free(win);
    ts_free(ids);
    free(text);
    ts_context_destroy(ctx);
    ts_llm_close(llm);
    return rc;
}
