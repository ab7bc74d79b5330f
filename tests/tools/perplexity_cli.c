/*
 * perplexity_cli.c — `tessera perplexity` follows llama-perplexity's procedure: on a tiny
 * random-weight model the figures it prints (the running "[i]PPL," values, the final estimate
 * and its error, the mean NLL) equal a perplexity computed here through the public API by that
 * procedure: windows of ctx tokens cut from the text tokenized once, each window's first token
 * replaced by BOS when the model adds BOS, the tokens at ctx/2 + 1 .. ctx - 1 scored. The same
 * computation with the BOS left out or with another half scored gives figures the tool's must
 * not match, so the test fails if either rule is broken. Also: --batch smaller than the window,
 * a model that adds no BOS, and the errors for a text shorter than a window and for a --ctx
 * longer than the model's context. Skips when TS_BIN is unset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tiny_model.h"
#include "tessera.h"
#include "tools/cli_util.h"

#define CTX 32 /* window length of these tests (the tiny model's context is 256) */

/* The file's contents, NUL-terminated (malloc'd). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A few hundred words of deterministic text (several windows of CTX tokens). */
static void write_text(const char *path, int n_words) {
    static const char *const words[] = {"the", "quick", "brown", "fox", "jumps", "over",  "lazy",
                                        "dog", "and",   "a",     "cat", "sat",   "on",    "mat",
                                        "42",  "hello", "world", "of",  "tiny",  "models"};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < n_words; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        fprintf(f, "%s%s", words[x % (sizeof words / sizeof words[0])], i % 12 == 11 ? ".\n" : " ");
    }
    fclose(f);
}

/* Which rules a reference computation follows. */
typedef struct rule {
    int bos_first; /* replace each window's first token by BOS: 1 when the model adds BOS,
                      2 even when it does not, 0 never */
    int lo, hi;    /* score the predictions made at positions lo .. hi (inclusive) */
} rule;

/* What the tool prints, or what the reference computes. */
typedef struct figures {
    int n;           /* windows */
    double run[256]; /* running PPL after each window */
    double ppl, err; /* final estimate */
    double mean, se; /* mean NLL and its standard error */
    long long count; /* tokens scored */
} figures;

/* The perplexity of the first n_windows windows of CTX tokens of the file's text, computed
 * here through the public API by rule r. */
static void reference(const char *model, const char *text_path, int n_windows, rule r,
                      figures *fg) {
    ts_error err = {0};
    ts_llm *llm = NULL;
    if (ts_llm_open(model, NULL, &llm, &err) != TS_OK) {
        fail_msg("%s", err.msg);
    }
    ts_llm_info mi;
    ts_llm_get_info(llm, &mi);
    char *text = slurp(text_path);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    assert_int_equal(ts_llm_tokenize(llm, text, strlen(text), 1, 0, &ids, &n_ids, &err), TS_OK);
    assert_true(n_ids >= (size_t)(n_windows * CTX));
    ts_context_params p = ts_context_params_default();
    p.n_threads = 2;
    p.n_ctx = CTX;
    p.kv_tokens = CTX;
    p.max_seqs = 1;
    p.max_batch_tokens = CTX;
    p.max_outputs = CTX;
    ts_context *ctx = NULL;
    if (ts_context_create(llm, &p, &ctx, &err) != TS_OK) {
        fail_msg("%s", err.msg);
    }
    memset(fg, 0, sizeof *fg);
    double sum = 0, sum2 = 0;
    for (int w = 0; w < n_windows; w++) {
        int32_t win[CTX];
        int8_t want[CTX];
        memcpy(win, ids + (size_t)w * CTX, sizeof win);
        if (r.bos_first == 2 || (r.bos_first == 1 && mi.add_bos)) {
            win[0] = mi.bos;
        }
        for (int t = 0; t < CTX; t++) {
            want[t] = t >= r.lo && t <= r.hi;
        }
        assert_int_equal(ts_context_seq_drop(ctx, 0, &err), TS_OK);
        ts_decode_batch b = {.n_tokens = CTX, .tokens = win, .logits = want};
        assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
        for (int t = r.lo; t <= r.hi; t++) {
            const float *l = ts_context_logits(ctx, t);
            assert_non_null(l);
            double max = l[0], z = 0;
            for (int v = 1; v < mi.n_vocab; v++) {
                max = l[v] > max ? l[v] : max;
            }
            for (int v = 0; v < mi.n_vocab; v++) {
                z += exp(l[v] - max);
            }
            double nll = -(l[win[t + 1]] - max - log(z));
            sum += nll;
            sum2 += nll * nll;
            fg->count++;
        }
        fg->run[fg->n++] = exp(sum / (double)fg->count);
    }
    fg->mean = sum / (double)fg->count;
    fg->se = sqrt((sum2 / (double)fg->count - fg->mean * fg->mean) / (double)(fg->count - 1));
    fg->ppl = exp(fg->mean);
    fg->err = fg->ppl * fg->se;
    ts_context_destroy(ctx);
    ts_free(ids);
    free(text);
    ts_llm_close(llm);
}

/* Reads the tool's figures from its stdout and stderr. */
static void parse_tool(const char *out, const char *err, figures *fg) {
    memset(fg, 0, sizeof *fg);
    const char *s = out;
    int i = 0, used = 0;
    double v = 0;
    while (sscanf(s, "[%d]%lf,%n", &i, &v, &used) == 2) {
        assert_int_equal(i, fg->n + 1);
        assert_true(fg->n < 256);
        fg->run[fg->n++] = v;
        s += used;
    }
    const char *fin = strstr(out, "\nFinal estimate: PPL = ");
    assert_non_null(fin);
    assert_int_equal(sscanf(fin, "\nFinal estimate: PPL = %lf +/- %lf", &fg->ppl, &fg->err), 2);
    const char *m = strstr(err, " tokens scored (");
    assert_non_null(m);
    while (m > err && m[-1] != ' ' && m[-1] != '\n') {
        m--;
    }
    assert_int_equal(sscanf(m, "%lld tokens scored", &fg->count), 1);
    m = strstr(err, "mean NLL ");
    assert_non_null(m);
    assert_int_equal(sscanf(m, "mean NLL %lf +/- %lf", &fg->mean, &fg->se), 2);
}

/* Relative difference. */
static double rel(double a, double b) {
    return fabs(a - b) / fabs(b);
}

/* The tool's figures are the reference's, to the digits it prints. */
static void expect_same(const figures *tool, const figures *ref) {
    assert_int_equal(tool->n, ref->n);
    assert_int_equal(tool->count, ref->count);
    for (int i = 0; i < ref->n; i++) {
        if (rel(tool->run[i], ref->run[i]) > 2e-6 + 1e-4 / ref->run[i]) {
            fail_msg("window %d: tool %.4f, reference %.6f", i + 1, tool->run[i], ref->run[i]);
        }
    }
    if (fabs(tool->mean - ref->mean) > 2e-6 || rel(tool->ppl, ref->ppl) > 1e-5 ||
        rel(tool->err, ref->err) > 1e-3 || rel(tool->se, ref->se) > 1e-3) {
        fail_msg("tool: PPL %.4f +/- %.5f, mean NLL %.6f +/- %.6f; reference: %.4f +/- %.5f, "
                 "%.6f +/- %.6f",
                 tool->ppl, tool->err, tool->mean, tool->se, ref->ppl, ref->err, ref->mean,
                 ref->se);
    }
}

/* A procedure the tool must not follow gives a mean NLL that the tool's is far from. */
static void expect_differs(const figures *tool, const figures *wrong, const char *what) {
    if (fabs(tool->mean - wrong->mean) < 1e-4) {
        fail_msg("the tool's mean NLL %.6f is that of %s (%.6f)", tool->mean, what, wrong->mean);
    }
}

typedef struct files {
    char model[400], text[512], out[512], err[512];
} files;

static void files_make_typed(files *f, const char *tag, bool add_bos, ts_type wtype) {
    assert_non_null(ts_tiny_temp_path(f->model, sizeof f->model, tag));
    ts_tiny_spec spec = ts_tiny_spec_default("llama");
    spec.no_add_bos = !add_bos;
    spec.wtype = wtype;
    ts_error e = {0};
    assert_int_equal(ts_tiny_write(&spec, f->model, &e), TS_OK);
    snprintf(f->text, sizeof f->text, "%s.txt", f->model);
    snprintf(f->out, sizeof f->out, "%s.out", f->model);
    snprintf(f->err, sizeof f->err, "%s.err", f->model);
    write_text(f->text, 300);
}

static void files_make(files *f, const char *tag, bool add_bos) {
    files_make_typed(f, tag, add_bos, ts_tiny_spec_default("llama").wtype);
}

static void files_remove(files *f) {
    unlink(f->text);
    unlink(f->out);
    unlink(f->err);
    unlink(f->model);
}

/* Runs the tool with extra arguments; returns its figures (exit status 0 expected). */
static void run_tool(const files *f, const char *args, figures *fg) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s --ctx %d -t 2 %s", cli_bin(), f->model,
             f->text, CTX, args);
    int rc = cli_run_to(cmd, f->out, f->err);
    char *o = slurp(f->out), *e = slurp(f->err);
    if (rc != 0) {
        fail_msg("'%s' exited %d: %s", cmd, rc, e);
    }
    parse_tool(o, e, fg);
    free(o);
    free(e);
}

static void test_follows_llama_perplexity(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    files f;
    files_make(&f, "ppl", true);
    const int first = CTX / 2;
    const rule right = {1, first, CTX - 2};

    figures tool, ref, wrong;
    run_tool(&f, "--chunks 3", &tool);
    char *e = slurp(f.err);
    assert_non_null(strstr(e, "each starting with BOS"));
    free(e);
    reference(f.model, f.text, 3, right, &ref);
    assert_int_equal(ref.count, 3 * (CTX - first - 1));
    expect_same(&tool, &ref);

    /* The rules the tool follows are the ones that matter for these figures. */
    reference(f.model, f.text, 3, (rule){0, first, CTX - 2}, &wrong);
    expect_differs(&tool, &wrong, "windows that do not start with BOS");
    assert_true(fabs(tool.run[0] - wrong.run[0]) < 1e-3); /* the first already does */
    reference(f.model, f.text, 3, (rule){1, 0, CTX - 2}, &wrong);
    expect_differs(&tool, &wrong, "every token scored");
    reference(f.model, f.text, 3, (rule){1, first - 1, CTX - 3}, &wrong);
    expect_differs(&tool, &wrong, "a half scored one token early");

    /* Steps of 8 tokens through the cache: the same figures. */
    figures stepped;
    run_tool(&f, "--chunks 3 --batch 8", &stepped);
    expect_same(&stepped, &ref);

    /* Without --chunks: every whole window of the text. */
    figures all;
    run_tool(&f, "", &all);
    assert_true(all.n > 3);
    assert_int_equal(all.count, (long long)all.n * (CTX - first - 1));
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(all.run[i] - tool.run[i]) < 1e-9);
    }
    files_remove(&f);
}

/* A model that adds no BOS (as SmolLM2): the windows are the text's tokens as they are. */
static void test_no_bos_model(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    files f;
    files_make(&f, "pplnobos", false);
    figures tool, ref;
    run_tool(&f, "--chunks 2", &tool);
    char *e = slurp(f.err);
    assert_non_null(strstr(e, "the model adds no BOS"));
    free(e);
    reference(f.model, f.text, 2, (rule){1, CTX / 2, CTX - 2}, &ref);
    expect_same(&tool, &ref);
    figures wrong;
    reference(f.model, f.text, 2, (rule){2, CTX / 2, CTX - 2}, &wrong);
    expect_differs(&tool, &wrong, "windows started with a BOS the model does not add");
    files_remove(&f);
}

static void test_errors(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    files f;
    files_make(&f, "pplerr", true);
    char cmd[2000];

    /* A text shorter than one window: the message says how many tokens it needs. */
    FILE *t = fopen(f.text, "wb");
    assert_non_null(t);
    fputs("the quick brown fox", t);
    fclose(t);
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s --ctx %d -t 2", cli_bin(), f.model, f.text,
             CTX);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    char *e = slurp(f.err);
    assert_non_null(strstr(e, "one window of --ctx 32 needs 32"));
    assert_non_null(strstr(e, f.text));
    free(e);

    /* A window longer than the model's context (256). */
    write_text(f.text, 300);
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s --ctx 512 -t 2", cli_bin(), f.model,
             f.text);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    e = slurp(f.err);
    assert_non_null(strstr(e, "--ctx 512 is longer than the model's context (256 tokens)"));
    free(e);

    /* A missing text file, and no file at all. */
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s.absent", cli_bin(), f.model, f.text);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s", cli_bin(), f.model);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 2);
    files_remove(&f);
}

/* log softmax of a row, in double. */
static void log_probs(const float *l, int n, double *out) {
    double max = l[0], z = 0;
    for (int v = 1; v < n; v++) {
        max = l[v] > max ? l[v] : max;
    }
    for (int v = 0; v < n; v++) {
        z += exp(l[v] - max);
    }
    for (int v = 0; v < n; v++) {
        out[v] = l[v] - max - log(z);
    }
}

static int argmax_d(const double *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) {
        b = x[i] > x[b] ? i : b;
    }
    return b;
}

/* Mean KL(dequant path || fast path) and the share of positions whose most likely tokens
 * agree, over the scored positions of the first n_windows windows, through the public API:
 * one context with the f32-activation override, one without. */
static void kld_reference(const char *model, const char *text_path, int n_windows, double *mean,
                          double *same) {
    ts_error err = {0};
    ts_llm *llm = NULL;
    if (ts_llm_open(model, NULL, &llm, &err) != TS_OK) {
        fail_msg("%s", err.msg);
    }
    ts_llm_info mi;
    ts_llm_get_info(llm, &mi);
    char *text = slurp(text_path);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    assert_int_equal(ts_llm_tokenize(llm, text, strlen(text), 1, 0, &ids, &n_ids, &err), TS_OK);
    ts_context *ctx[2] = {NULL, NULL};
    const char *const ov[] = {"matmul=dequant"};
    for (int c = 0; c < 2; c++) {
        ts_context_params p = ts_context_params_default();
        p.n_threads = 2;
        p.n_ctx = CTX;
        p.kv_tokens = CTX;
        p.max_seqs = 1;
        p.max_batch_tokens = CTX;
        p.max_outputs = CTX;
        if (c == 0) {
            p.overrides = ov;
            p.n_overrides = 1;
        }
        if (ts_context_create(llm, &p, &ctx[c], &err) != TS_OK) {
            fail_msg("%s", err.msg);
        }
    }
    double *lp[2] = {malloc((size_t)mi.n_vocab * CTX * sizeof(double)),
                     malloc((size_t)mi.n_vocab * CTX * sizeof(double))};
    assert_non_null(lp[0]);
    assert_non_null(lp[1]);
    double sum = 0;
    int n = 0, agree = 0;
    for (int w = 0; w < n_windows; w++) {
        int32_t win[CTX];
        int8_t want[CTX];
        memcpy(win, ids + (size_t)w * CTX, sizeof win);
        if (mi.add_bos) {
            win[0] = mi.bos;
        }
        for (int t = 0; t < CTX; t++) {
            want[t] = t >= CTX / 2 && t <= CTX - 2;
        }
        for (int c = 0; c < 2; c++) {
            assert_int_equal(ts_context_seq_drop(ctx[c], 0, &err), TS_OK);
            ts_decode_batch b = {.n_tokens = CTX, .tokens = win, .logits = want};
            assert_int_equal(ts_context_decode(ctx[c], &b, &err), TS_OK);
            for (int t = CTX / 2; t <= CTX - 2; t++) {
                log_probs(ts_context_logits(ctx[c], t), mi.n_vocab, lp[c] + (size_t)t * mi.n_vocab);
            }
        }
        for (int t = CTX / 2; t <= CTX - 2; t++) {
            const double *b = lp[0] + (size_t)t * mi.n_vocab, *q = lp[1] + (size_t)t * mi.n_vocab;
            double kl = 0;
            for (int v = 0; v < mi.n_vocab; v++) {
                kl += exp(b[v]) * (b[v] - q[v]);
            }
            sum += kl > 0 ? kl : 0;
            agree += argmax_d(b, mi.n_vocab) == argmax_d(q, mi.n_vocab);
            n++;
        }
    }
    *mean = sum / n;
    *same = (double)agree / n;
    free(lp[0]);
    free(lp[1]);
    ts_context_destroy(ctx[0]);
    ts_context_destroy(ctx[1]);
    ts_free(ids);
    free(text);
    ts_llm_close(llm);
}

/* The KL figures the tool printed. */
static void parse_kld(const files *f, double *mean, double *same) {
    char *o = slurp(f->out);
    const char *m = strstr(o, "KL divergence: mean ");
    const char *s = strstr(o, "Same top token: ");
    if (m == NULL || s == NULL) {
        fail_msg("no KL figures in: %s", o);
    }
    assert_int_equal(sscanf(m, "KL divergence: mean %lf", mean), 1);
    assert_int_equal(sscanf(s, "Same top token: %lf%%", same), 1);
    *same /= 100;
    free(o);
}

/* --kl-divergence-base writes the base run's log-probabilities; a second run with
 * --kl-divergence compares with them. Against itself: zero and full agreement; the fast path
 * against the f32-activation path: the figures computed here through the API. */
static void test_kl_divergence(void **state) {
    (void)state;
    if (cli_bin() == NULL) {
        skip();
    }
    files f;
    files_make_typed(&f, "pplkld", true, TS_TYPE_Q4_1); /* Q8_1 activations on the fast path */
    char base[600], args[1400];
    snprintf(base, sizeof base, "%s.kld", f.model);
    figures fg;
    double mean = -1, same = -1;

    snprintf(args, sizeof args, "--chunks 3 --kl-divergence-base %s", base);
    run_tool(&f, args, &fg);
    snprintf(args, sizeof args, "--chunks 3 --kl-divergence-base %s --kl-divergence", base);
    run_tool(&f, args, &fg);
    parse_kld(&f, &mean, &same);
    assert_true(mean == 0.0);
    assert_true(same == 1.0);

    snprintf(args, sizeof args, "--chunks 3 --kl-divergence-base %s --override matmul=dequant",
             base);
    run_tool(&f, args, &fg);
    snprintf(args, sizeof args, "--chunks 3 --kl-divergence-base %s --kl-divergence", base);
    run_tool(&f, args, &fg);
    parse_kld(&f, &mean, &same);
    double ref_mean = 0, ref_same = 0;
    kld_reference(f.model, f.text, 3, &ref_mean, &ref_same);
    assert_true(ref_mean > 0);
    if (fabs(mean - ref_mean) > 1e-6 + 1e-3 * ref_mean || fabs(same - ref_same) > 1e-4) {
        fail_msg("tool: KL %.8f, same top %.5f; reference: KL %.8f, same top %.5f", mean, same,
                 ref_mean, ref_same);
    }

    /* Another window length or number of windows than the base's: refused, naming it. */
    char cmd[2000];
    snprintf(cmd, sizeof cmd,
             "%s perplexity -m %s -f %s --ctx %d --chunks 2 --kl-divergence-base %s "
             "--kl-divergence",
             cli_bin(), f.model, f.text, CTX, base);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    char *e = slurp(f.err);
    assert_non_null(strstr(e, "windows scored is 3, this run's 2"));
    free(e);
    snprintf(cmd, sizeof cmd,
             "%s perplexity -m %s -f %s --ctx %d --chunks 3 --kl-divergence-base %s "
             "--kl-divergence",
             cli_bin(), f.model, f.text, CTX, f.text);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    e = slurp(f.err);
    assert_non_null(strstr(e, "not a file written by"));
    free(e);
    /* A base file cut short (a run that did not finish): refused, saying where it ends. */
    assert_int_equal(truncate(base, 8 + 12 + 3 * CTX * 4 + 100), 0);
    snprintf(cmd, sizeof cmd,
             "%s perplexity -m %s -f %s --ctx %d --chunks 3 --kl-divergence-base %s "
             "--kl-divergence",
             cli_bin(), f.model, f.text, CTX, base);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 1);
    e = slurp(f.err);
    assert_non_null(strstr(e, "the file ends early (scored position 0)"));
    free(e);
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s --kl-divergence", cli_bin(), f.model,
             f.text);
    assert_int_equal(cli_run_to(cmd, f.out, f.err), 2);
    unlink(base);
    files_remove(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_llama_perplexity),
        cmocka_unit_test(test_no_bos_model),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_kl_divergence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
