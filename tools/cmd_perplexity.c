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

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "commands.h"
#include "ir/registry.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tessera perplexity -m MODEL -f TEXT_FILE [--ctx 512] [--batch 512] "
               "[-t THREADS] [--chunks N] [--backend cpu|ref] [--override F=NAME]\n");
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

int ts_cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *backend = "cpu";
    const char *overrides[8];
    int n_overrides = 0;
    int64_t ctx = 512, batch = 512, max_chunks = 0;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (v == NULL) {
            fprintf(stderr, "error: unknown option or missing value: %s\n", a);
            return 2;
        }
        i++;
        char *end = NULL;
        long long n = 0;
        if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            model = v;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
            file = v;
        } else if (strcmp(a, "--backend") == 0) {
            backend = v;
        } else if (strcmp(a, "--override") == 0 && n_overrides < 8) {
            overrides[n_overrides++] = v;
        } else if ((n = strtoll(v, &end, 10)), *end != '\0' || n < 0 || n > (1 << 20)) {
            fprintf(stderr, "error: %s: bad value '%s'\n", a, v);
            return 2;
        } else if (strcmp(a, "--ctx") == 0 || strcmp(a, "-c") == 0) {
            ctx = n;
        } else if (strcmp(a, "--batch") == 0 || strcmp(a, "-b") == 0) {
            batch = n;
        } else if (strcmp(a, "--chunks") == 0) {
            max_chunks = n;
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            threads = (int)n;
        } else {
            fprintf(stderr, "error: unknown option: %s\n", a);
            return 2;
        }
    }
    if (model == NULL || file == NULL || ctx < 16 || batch < 1) {
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
    ts_model *m = NULL;
    ts_tokenizer *tok = NULL;
    ts_backend *b = NULL;
    ts_registry *reg = NULL;
    ts_forward *fwd = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_status st = ts_model_open(model, &m, &err);
    if (st == TS_OK) {
        st = ts_tokenizer_create(m->gguf, &tok, &err);
    }
    if (st == TS_OK) {
        st = ts_tokenizer_tokenize(tok, text, text_len, true, false, &ids, &n_ids, &err);
    }
    if (st == TS_OK && ctx > m->hp.n_ctx_train) {
        ctx = m->hp.n_ctx_train;
    }
    int64_t n_windows = (int64_t)n_ids / ctx;
    if (max_chunks > 0 && n_windows > max_chunks) {
        n_windows = max_chunks;
    }
    if (st == TS_OK && n_windows == 0) {
        snprintf(err.msg, sizeof err.msg,
                 "%s has %zu tokens: fewer than one window of --ctx %lld", file, n_ids,
                 (long long)ctx);
        st = TS_ERR_RANGE;
    }
    if (batch > ctx) {
        batch = ctx;
    }
    if (st == TS_OK) {
        if (strcmp(backend, "ref") == 0) {
            st = ts_ref_backend_create(&b, &err);
        } else {
            ts_cpu_params p = ts_cpu_params_default();
            if (threads > 0) {
                p.n_threads = threads;
            }
            st = ts_cpu_backend_create(&p, &b, &err);
        }
    }
    if (st == TS_OK) {
        st = ts_registry_create(&reg, &err);
    }
    for (int k = 0; st == TS_OK && k < n_overrides; k++) {
        st = ts_registry_apply(reg, overrides[k], "--override", &err);
    }
    int64_t bs = 16, blk = (ctx + bs - 1) / bs;
    ts_forward_config fc = {
        .max_tokens = batch,
        .max_seqs = 1,
        .max_outputs = batch,
        .n_blocks = blk,
        .block_size = bs,
        .max_blocks_per_seq = blk,
        .kv_type = TS_TYPE_F16,
    };
    if (st == TS_OK) {
        st = ts_forward_create(m, b, &fc, reg, &fwd, &err);
    }
    int32_t *pos = malloc((size_t)batch * 4), *seq = calloc((size_t)batch, 4);
    int32_t *slots = malloc((size_t)batch * 4), *outs = malloc((size_t)batch * 4);
    int32_t *table = malloc((size_t)blk * 4);
    float *logits = m ? malloc((size_t)batch * (size_t)m->hp.n_vocab * sizeof(float)) : NULL;
    if (st == TS_OK && (!pos || !seq || !slots || !outs || !table || !logits)) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        st = TS_ERR_NOMEM;
    }
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    for (int64_t j = 0; j < blk && table; j++) {
        table[j] = (int32_t)j;
    }
    if (st == TS_OK) {
        fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld (scoring the second half)\n",
                n_ids, (long long)n_windows, (long long)ctx);
    }
    for (int64_t w = 0; st == TS_OK && w < n_windows; w++) {
        const int32_t *win = ids + w * ctx;
        for (int64_t start = 0; st == TS_OK && start < ctx; start += batch) {
            int64_t n = ctx - start < batch ? ctx - start : batch;
            int32_t len = (int32_t)(start + n);
            for (int64_t t = 0; t < n; t++) {
                pos[t] = (int32_t)(start + t);
                slots[t] = (int32_t)(start + t);
                outs[t] = (int32_t)t;
            }
            ts_batch bt = {
                .n_tokens = n,
                .tokens = win + start,
                .pos = pos,
                .seq = seq,
                .slots = slots,
                .n_seqs = 1,
                .block_table = table,
                .seq_len = &len,
                .n_outputs = n,
                .outputs = outs,
            };
            st = ts_forward_run(fwd, &bt, logits, NULL, &err);
            for (int64_t t = 0; st == TS_OK && t < n; t++) {
                int64_t p = start + t; /* logits at p predict token p + 1 */
                if (p < ctx / 2 || p + 1 >= ctx) {
                    continue;
                }
                double nll = nll_of(logits + t * m->hp.n_vocab, m->hp.n_vocab, win[p + 1]);
                sum += nll;
                sum2 += nll * nll;
                count++;
            }
        }
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
    } else {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    free(pos);
    free(seq);
    free(slots);
    free(outs);
    free(table);
    free(logits);
    free(ids);
    free(text);
    ts_forward_destroy(fwd);
    ts_registry_destroy(reg);
    ts_backend_destroy(b);
    ts_tokenizer_destroy(tok);
    ts_model_close(m);
    return rc;
}
