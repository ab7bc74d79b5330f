/*
 * cmd_perplexity.c — `tessera perplexity`: how well the model predicts a text.
 *
 * The text is tokenized (with BOS when the model wants one) and cut into non-overlapping
 * windows of --ctx tokens. Each window is evaluated from an empty cache, and the negative
 * log-likelihood of the tokens in its second half is accumulated (the first half gives every
 * scored token at least ctx/2 tokens of context), as llama.cpp's perplexity tool does.
 * PPL = exp(mean NLL); the error is the standard error of the mean NLL propagated through
 * exp. Windows are computed in chunks of --batch tokens through the paged KV cache.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tessera perplexity -m MODEL -f TEXT_FILE [--ctx 512] [--batch 512] "
               "[--chunks N] [options]\n\n"
               "  -f, --file FILE           the text\n"
               "  -c, --ctx N               window length in tokens (default 512)\n"
               "  -b, --batch N             tokens per forward step (default: the window)\n"
               "      --chunks N            score at most N windows (default: all)\n\n");
    ts_cli_print_common_help(f);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n == cap) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) {
            break;
        }
        n += got;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* log-softmax of logits at `target`, in double precision. */
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

static void progress(int done, int total, double ppl) {
    int width = 30;
    int fill = total ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%*s] %d/%d windows, PPL so far %.4f", fill,
            "##############################", width - fill, "", done, total, ppl);
    if (done == total) {
        fprintf(stderr, "\n");
    }
    fflush(stderr);
}

/* Scores one window: computes it in steps of `batch` tokens from an empty cache and adds the
 * NLL of every token of its second half to *sum, *sum2, *count. */
static ts_status score_window(ts_context *ctx, const int32_t *win, int64_t n_ctx, int64_t batch,
                              int64_t n_vocab, int8_t *want, double *sum, double *sum2,
                              int64_t *count, ts_error *err) {
    ts_status st = ts_context_seq_drop(ctx, 0, err);
    for (int64_t start = 0; st == TS_OK && start < n_ctx; start += batch) {
        int64_t n = n_ctx - start < batch ? n_ctx - start : batch;
        for (int64_t t = 0; t < n; t++) {
            int64_t p = start + t; /* logits at p predict token p + 1 */
            want[t] = p >= n_ctx / 2 && p + 1 < n_ctx;
        }
        ts_decode_batch bt = {.n_tokens = (int32_t)n, .tokens = win + start, .logits = want};
        st = ts_context_decode(ctx, &bt, err);
        for (int64_t t = 0; st == TS_OK && t < n; t++) {
            if (want[t]) {
                double nll =
                    nll_of(ts_context_logits(ctx, (int32_t)t), n_vocab, win[start + t + 1]);
                *sum += nll;
                *sum2 += nll * nll;
                (*count)++;
            }
        }
    }
    return st;
}

int ts_cmd_perplexity(int argc, char **argv) {
    ts_cli_opts co;
    ts_cli_opts_init(&co);
    const char *file = NULL;
    int64_t max_chunks = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
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
                file = v;
            } else if (!ts_cli_parse_i64(v, is_batch ? 1 : 0, 1 << 20, &n)) {
                fprintf(stderr, "error: %s: bad value '%s'\n", a, v);
                return 2;
            } else if (is_chunks) {
                max_chunks = n;
            } else {
                co.ctx.max_batch_tokens = n; /* the same as the common -b */
            }
            continue;
        }
        int r = ts_cli_parse_common(&co, argc, argv, &i);
        if (r < 0) {
            return 2;
        }
        if (r == 0) {
            fprintf(stderr, "error: unknown option: %s\n", a);
            return 2;
        }
    }
    if (co.model == NULL || file == NULL) {
        usage(stderr);
        return 2;
    }
    size_t text_len = 0;
    char *text = read_file(file, &text_len);
    if (text == NULL) {
        perror(file);
        return 1;
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    ts_context *ctx = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int8_t *want = NULL;
    ts_llm_info mi = {0};
    ts_llm_params lp = ts_cli_llm_params();
    ts_status st = ts_llm_open(co.model, &lp, &llm, &err);
    if (st == TS_OK) {
        ts_llm_get_info(llm, &mi);
        st = ts_llm_tokenize(llm, text, text_len, 1, 0, &ids, &n_ids, &err);
    }
    /* One sequence whose window is the context; every token of a step may be scored. */
    int64_t n_ctx = co.ctx.n_ctx > 0 ? co.ctx.n_ctx : 512;
    if (st == TS_OK && n_ctx > mi.n_ctx_train) {
        n_ctx = mi.n_ctx_train;
    }
    int64_t batch = co.ctx.max_batch_tokens > 0 && co.ctx.max_batch_tokens < n_ctx
                        ? co.ctx.max_batch_tokens
                        : n_ctx;
    int64_t n_windows = (int64_t)n_ids / n_ctx;
    if (max_chunks > 0 && n_windows > max_chunks) {
        n_windows = max_chunks;
    }
    if (st == TS_OK && n_windows == 0) {
        snprintf(err.msg, sizeof err.msg, "%s has %zu tokens: fewer than one window of --ctx %lld",
                 file, n_ids, (long long)n_ctx);
        st = TS_ERR_RANGE;
    }
    if (st == TS_OK) {
        ts_context_params p = co.ctx;
        p.n_ctx = n_ctx;
        p.kv_tokens = n_ctx;
        p.max_seqs = 1;
        p.max_batch_tokens = batch;
        p.max_outputs = batch;
        st = ts_context_create(llm, &p, &ctx, &err);
    }
    want = malloc((size_t)batch);
    if (st == TS_OK && want == NULL) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        st = TS_ERR_NOMEM;
    }
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    if (st == TS_OK) {
        fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld (scoring the second half)\n",
                n_ids, (long long)n_windows, (long long)n_ctx);
    }
    for (int64_t w = 0; st == TS_OK && w < n_windows; w++) {
        st = score_window(ctx, ids + w * n_ctx, n_ctx, batch, mi.n_vocab, want, &sum, &sum2, &count,
                          &err);
        if (st == TS_OK) {
            progress((int)(w + 1), (int)n_windows, exp(sum / (double)count));
        }
    }
    int rc = 0;
    if (st == TS_OK) {
        double mean = sum / (double)count;
        double var = sum2 / (double)count - mean * mean;
        double se = count > 1 ? sqrt(var / (double)(count - 1)) : 0;
        double ppl = exp(mean);
        printf("PPL = %.4f +/- %.4f (%lld tokens scored, mean NLL %.5f)\n", ppl, ppl * se,
               (long long)count, mean);
        ts_context_report(ctx, stderr);
    } else {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    free(want);
    ts_free(ids);
    free(text);
    ts_context_destroy(ctx);
    ts_llm_close(llm);
    return rc;
}
