/*
 * test_reference.c — tessera against Hugging Face transformers on the real models.
 *
 * tests/data/reference/<model>.json was produced by transformers from the same GGUF files
 * (weights dequantized to f32, f32 activations; see docs/reference.md). For each prompt we
 * check:
 *  - our tokenizer produces the reference's prompt ids;
 *  - the last-position logits (the top 20 ids and the 64 probe ids) agree within a stated
 *    tolerance:
 *      reference backend  |d| <= 0.06 + 0.004 |l|   (same math; differences come from the
 *                                                      f16 KV cache and summation order)
 *      CPU backend        |d| <= 1.20 + 0.03 |l|    (activations are quantized to 8 bits
 *                                                      per matmul, as llama.cpp does; the
 *                                                      largest seen is 1.07 on Gemma 3's
 *                                                      chat prompt. Which value is seen
 *                                                      depends on the noise realization:
 *                                                      a change of float summation order
 *                                                      in one kernel (outputs equal within
 *                                                      1e-5) flips later 8-bit roundings
 *                                                      and moved that logit's error from
 *                                                      0.64 to 1.07; perplexity stays
 *                                                      equal within noise)
 *  - the mean and standard deviation of the last position's logits over the whole
 *    vocabulary agree within their own tolerances (k_*_tol: mean_abs, std_abs; a per-logit
 *    error mostly averages out in the mean, so these are tighter than the per-logit one);
 *  - greedy generation agrees with the reference's greedy tokens for the recorded steps,
 *    except that after a step whose recorded top-1/top-2 margin is below the backend's
 *    logit tolerance the two may legitimately part ways (then the check stops there). The
 *    reference backend must agree for at least 32 tokens on every prompt that has no such
 *    near-tie before token 32.
 * Skips (with a message) when the model files are absent. Under sanitizers only the first
 * prompt is checked, on the CPU backend, to keep the run short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include "common/quick.h"

#define MAX_TOK 256

/* Tolerances of the logit mean and std (see the file comment), a small multiple of the largest
 * differences seen over both models' prompts: reference backend mean 0.0033 (SmolLM2 capital),
 * std 1e-5; CPU backend mean 0.70 (Gemma 3 chat: its 8-bit activations shift every logit
 * alike, which is also most of that prompt's per-logit error of 1.0), std 0.048 (Gemma 3
 * paragraph). The probe logits, checked with the per-logit tolerance, were seen within 0.0081
 * (ref) and 1.14 (cpu, Gemma 3 chat). */
#define MEAN_TOL_REF 0.01
#define STD_TOL_REF 0.001
#define MEAN_TOL_CPU 1.0
#define STD_TOL_CPU 0.1

typedef struct tol {
    const char *backend;
    double abs, rel;   /* per logit: |d| <= abs + rel |l| */
    double mean_abs;   /* |mean - reference mean| over the vocabulary */
    double std_abs;    /* |std - reference std| (ddof 0) */
} tol;

static const tol k_ref_tol = {"ref", 0.06, 0.004, MEAN_TOL_REF, STD_TOL_REF};
static const tol k_cpu_tol = {"cpu", 1.20, 0.03, MEAN_TOL_CPU, STD_TOL_CPU};

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* A single-sequence forward context: prefill, then one token at a time. */
typedef struct runner {
    ts_forward *fwd;
    int64_t n_vocab;
    int32_t pos[MAX_TOK], seq[MAX_TOK], slots[MAX_TOK], table[MAX_TOK / 16 + 1];
    float *logits;
} runner;

static void runner_init(runner *r, const ts_model *m, ts_backend *b) {
    memset(r, 0, sizeof *r);
    r->n_vocab = m->hp.n_vocab;
    ts_forward_config fc = {
        .max_tokens = MAX_TOK,
        .max_seqs = 1,
        .max_outputs = 1,
        .n_blocks = MAX_TOK / 16 + 1,
        .block_size = 16,
        .max_blocks_per_seq = MAX_TOK / 16 + 1,
        .kv_type_k = TS_TYPE_F16, .kv_type_v = TS_TYPE_F16,
    };
    ts_error err = {0};
    ts_status st = ts_forward_create(m, b, &fc, NULL, &r->fwd, &err);
    if (st != TS_OK) {
        fail_msg("forward: %s", err.msg);
    }
    for (int i = 0; i < MAX_TOK / 16 + 1; i++) {
        r->table[i] = i;
    }
    r->logits = malloc((size_t)r->n_vocab * sizeof(float));
    assert_non_null(r->logits);
}

static void runner_free(runner *r) {
    ts_forward_destroy(r->fwd);
    free(r->logits);
}

/* Feeds tokens[0..n) starting at position start; leaves the last position's logits. */
static void run(runner *r, const int32_t *tokens, int n, int start) {
    assert_true(start + n <= MAX_TOK);
    for (int t = 0; t < n; t++) {
        r->pos[t] = start + t;
        r->seq[t] = 0;
        r->slots[t] = start + t;
    }
    int32_t len = start + n, out = n - 1;
    ts_batch b = {
        .n_tokens = n,
        .tokens = tokens,
        .pos = r->pos,
        .seq = r->seq,
        .slots = r->slots,
        .n_seqs = 1,
        .block_table = r->table,
        .seq_len = &len,
        .n_outputs = 1,
        .outputs = &out,
    };
    ts_error err = {0};
    if (ts_forward_run(r->fwd, &b, r->logits, NULL, &err) != TS_OK) {
        fail_msg("forward run: %s", err.msg);
    }
}

static int32_t argmax(const float *l, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = (int32_t)i;
        }
    }
    return best;
}

static void check_prompt(const ts_model *m, const ts_tokenizer *tok, ts_backend *b, const tol *t,
                         const cJSON *root, const cJSON *p, const char *model_name) {
    const char *name = cJSON_GetObjectItem(p, "name")->valuestring;
    const char *text = cJSON_GetObjectItem(p, "text")->valuestring;
    const cJSON *ids = cJSON_GetObjectItem(p, "ids");
    int n = cJSON_GetArraySize(ids);
    assert_true(n > 0 && n < MAX_TOK - 64);
    int32_t prompt[MAX_TOK];
    for (int i = 0; i < n; i++) {
        prompt[i] = cJSON_GetArrayItem(ids, i)->valueint;
    }

    /* Tokenizer: the same ids (special tokens in the text parsed, BOS as the model says). */
    int32_t *ours = NULL;
    size_t n_ours = 0;
    ts_error err = {0};
    assert_int_equal(ts_tokenizer_tokenize(tok, text, strlen(text), true, true, &ours, &n_ours,
                                           &err),
                     TS_OK);
    if ((int)n_ours != n || memcmp(ours, prompt, (size_t)n * 4) != 0) {
        fail_msg("%s/%s: tokenizer gives %zu ids, reference %d", model_name, name, n_ours, n);
    }
    free(ours);

    runner r;
    runner_init(&r, m, b);
    run(&r, prompt, n, 0);

    /* Last-position logits. */
    const cJSON *last = cJSON_GetObjectItem(p, "last");
    const cJSON *top = cJSON_GetObjectItem(last, "top");
    double worst = 0;
    for (int i = 0; i < cJSON_GetArraySize(top); i++) {
        const cJSON *pair = cJSON_GetArrayItem(top, i);
        int id = cJSON_GetArrayItem(pair, 0)->valueint;
        double want = cJSON_GetArrayItem(pair, 1)->valuedouble;
        double d = fabs(r.logits[id] - want);
        worst = d > worst ? d : worst;
        if (d > t->abs + t->rel * fabs(want)) {
            fail_msg("%s/%s on %s: logit of token %d is %.4f, reference %.4f", model_name, name,
                     t->backend, id, r.logits[id], want);
        }
    }

    /* The probe ids (fixed, spread over the vocabulary) at the last position. */
    const cJSON *probe_ids = cJSON_GetObjectItem(root, "probe_ids");
    const cJSON *probe = cJSON_GetObjectItem(last, "probe");
    assert_int_equal(cJSON_GetArraySize(probe_ids), cJSON_GetArraySize(probe));
    assert_true(cJSON_GetArraySize(probe) > 0);
    double worst_probe = 0;
    for (int i = 0; i < cJSON_GetArraySize(probe); i++) {
        int id = cJSON_GetArrayItem(probe_ids, i)->valueint;
        assert_true(id >= 0 && id < r.n_vocab);
        double want = cJSON_GetArrayItem(probe, i)->valuedouble;
        double d = fabs(r.logits[id] - want);
        worst_probe = d > worst_probe ? d : worst_probe;
        if (d > t->abs + t->rel * fabs(want)) {
            fail_msg("%s/%s on %s: logit of probe token %d is %.4f, reference %.4f", model_name,
                     name, t->backend, id, r.logits[id], want);
        }
    }

    /* Mean and standard deviation (ddof 0) over the whole vocabulary, in double. */
    double sum = 0, sq = 0;
    for (int64_t v = 0; v < r.n_vocab; v++) {
        sum += r.logits[v];
    }
    double mean = sum / (double)r.n_vocab;
    for (int64_t v = 0; v < r.n_vocab; v++) {
        sq += (r.logits[v] - mean) * (r.logits[v] - mean);
    }
    double std = sqrt(sq / (double)r.n_vocab);
    double want_mean = cJSON_GetObjectItem(last, "mean")->valuedouble;
    double want_std = cJSON_GetObjectItem(last, "std")->valuedouble;
    double d_mean = fabs(mean - want_mean), d_std = fabs(std - want_std);
    if (d_mean > t->mean_abs) {
        fail_msg("%s/%s on %s: logit mean %.5f, reference %.5f (|d| %.5f > %.5f)", model_name,
                 name, t->backend, mean, want_mean, d_mean, t->mean_abs);
    }
    if (d_std > t->std_abs) {
        fail_msg("%s/%s on %s: logit std %.5f, reference %.5f (|d| %.5f > %.5f)", model_name,
                 name, t->backend, std, want_std, d_std, t->std_abs);
    }

    /* Greedy continuation. */
    const cJSON *greedy = cJSON_GetObjectItem(p, "greedy");
    const cJSON *margin = cJSON_GetObjectItem(p, "greedy_margin");
    int n_greedy = cJSON_GetArraySize(greedy);
    int limit = TS_QUICK ? 8 : strcmp(t->backend, "ref") == 0 ? 32 : n_greedy;
    if (n_greedy > limit) {
        n_greedy = limit;
    }
    int agreed = 0;
    bool tie_stop = false;
    int32_t tokens[MAX_TOK];
    memcpy(tokens, prompt, (size_t)n * 4);
    for (int s = 0; s < n_greedy && n + s < MAX_TOK; s++) {
        int32_t want = cJSON_GetArrayItem(greedy, s)->valueint;
        int32_t got = argmax(r.logits, r.n_vocab);
        double mg = cJSON_GetArrayItem(margin, s)->valuedouble;
        if (got != want) {
            double allowed = 2 * (t->abs + t->rel * fabs(r.logits[want]));
            if (mg < allowed) {
                tie_stop = true;
                break;
            }
            fail_msg("%s/%s on %s: greedy step %d gives %d, reference %d (margin %.3f, agreed "
                     "%d)",
                     model_name, name, t->backend, s, got, want, mg, agreed);
        }
        agreed++;
        tokens[n + s] = want;
        run(&r, &tokens[n + s], 1, n + s);
    }
    if (strcmp(t->backend, "ref") == 0 && !tie_stop && !TS_QUICK) {
        assert_true(agreed >= 32 || agreed == n_greedy);
    }
    printf("  %s/%s on %s: %d prompt tokens, logits max |d| %.4f (top) %.4f (probe), mean "
           "|d| %.5f, std |d| %.5f, greedy agreed for %d tokens%s\n",
           model_name, name, t->backend, n, worst, worst_probe, d_mean, d_std, agreed,
           tie_stop ? " (then a near-tie in the reference)" : "");
    runner_free(&r);
}

static void check_model(const char *json_name, const char *model_file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/reference/%s", TS_SOURCE_DIR, json_name);
    char *json = slurp(path);
    assert_non_null(json);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    const char *home = getenv("HOME");
    snprintf(path, sizeof path, "%s/.cache/tessera/models/%s", home ? home : "", model_file);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        printf("  skipped %s: %s is absent (python3 scripts/fetch_model.py)\n", json_name, path);
        cJSON_Delete(root);
        free(json);
        skip();
    }
    fclose(f);
    ts_model *m = NULL;
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    assert_int_equal(ts_model_open(path, &m, &err), TS_OK);
    assert_int_equal(ts_tokenizer_create(m->gguf, &tok, &err), TS_OK);
    ts_backend *cpu = NULL, *ref = NULL;
    ts_cpu_params cp = ts_cpu_params_default();
    assert_int_equal(ts_cpu_backend_create(&cp, &cpu, &err), TS_OK);
    assert_int_equal(ts_ref_backend_create(&ref, &err), TS_OK);
    const cJSON *prompts = cJSON_GetObjectItem(root, "prompts");
    int n_prompts = TS_QUICK ? 1 : cJSON_GetArraySize(prompts);
    for (int i = 0; i < n_prompts; i++) {
        const cJSON *p = cJSON_GetArrayItem(prompts, i);
        check_prompt(m, tok, cpu, &k_cpu_tol, root, p, model_file);
        if (!TS_QUICK && i == 0) {
            check_prompt(m, tok, ref, &k_ref_tol, root, p, model_file);
        }
    }
    ts_backend_destroy(cpu);
    ts_backend_destroy(ref);
    ts_tokenizer_destroy(tok);
    ts_model_close(m);
    cJSON_Delete(root);
    free(json);
}

static void test_smollm2(void **state) {
    (void)state;
    check_model("smollm2.json", "SmolLM2-135M-Instruct.Q4_1.gguf");
}

static void test_gemma3(void **state) {
    (void)state;
    check_model("gemma3.json", "gemma-3-270m-q4_k_m.gguf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_gemma3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
