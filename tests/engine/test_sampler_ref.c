/*
 * test_sampler_ref.c — the sampler's filters against a straightforward reference.
 *
 * The reference below is the specification written the obvious way: apply bias and
 * penalties (counting the window directly from the history), sort every finite token by
 * logit, then run top-k, typical-p, top-p and min-p one after another on the sorted list with
 * softmax in double precision, and renormalise at the sampling temperature. The sampler's
 * ts_sampler_distribution must return the same tokens in the same order, with probabilities
 * within 1e-6 + 1e-4 * p. Random cases whose cut lands within rounding distance of a
 * threshold are skipped (counted, and required to be rare), since float and double may
 * legitimately decide those differently.
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

#include "engine/sampler.h"
#include "engine/sampler_internal.h"
#include "engine/sampler_rng.h"

/* Closeness to a threshold that counts as a tie. The sampler sums float expf values (relative
 * error about 6e-8 each) in double, so a cumulative ratio is good to about 1.2e-7. */
#define BORDER 3e-7

typedef struct rcand {
    int32_t id;
    float l;  /* processed logit */
    double d; /* typical distance */
} rcand;

static int by_logit(const void *a, const void *b) {
    const rcand *x = a, *y = b;
    if (x->l != y->l) {
        return x->l > y->l ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

static int by_distance(const void *a, const void *b) {
    const rcand *x = a, *y = b;
    if (x->d != y->d) {
        return x->d < y->d ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

/* Softmax weights of c[0..n) at temperature t, normalised, into p. */
static void ref_softmax(const rcand *c, int n, double t, double *p) {
    double m = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++) {
        m = fmax(m, (double)c[i].l);
    }
    for (int i = 0; i < n; i++) {
        p[i] = exp(((double)c[i].l - m) / t);
        sum += p[i];
    }
    for (int i = 0; i < n; i++) {
        p[i] /= sum;
    }
}

/* The reference distribution; returns the number of survivors, sets *border when a cut was
 * within rounding distance of its threshold. */
static int ref_distribution(const ts_sampler_params *prm, const float *logits, int32_t V,
                            const int32_t *hist, int n_hist, int32_t *ids, double *probs,
                            int *border) {
    float *l = malloc((size_t)V * sizeof *l);
    rcand *c = malloc((size_t)V * sizeof *c);
    double *p = malloc((size_t)V * sizeof *p);
    int *count = calloc((size_t)V, sizeof *count);
    assert_true(l && c && p && count);
    memcpy(l, logits, (size_t)V * sizeof *l);
    for (int i = 0; i < prm->n_logit_bias; i++) {
        l[prm->logit_bias[i].token] += prm->logit_bias[i].bias;
    }
    int first =
        prm->penalty_last_n > 0 && n_hist > prm->penalty_last_n ? n_hist - prm->penalty_last_n : 0;
    for (int i = first; i < n_hist; i++) {
        count[hist[i]]++;
    }
    for (int32_t t = 0; t < V; t++) {
        if (count[t] > 0 && l[t] != -INFINITY) {
            float v = l[t] > 0 ? l[t] / prm->repetition_penalty : l[t] * prm->repetition_penalty;
            l[t] = v - ((float)count[t] * prm->frequency_penalty + prm->presence_penalty);
        }
    }
    int n = 0;
    for (int32_t t = 0; t < V; t++) {
        if (l[t] != -INFINITY) {
            c[n++] = (rcand){t, l[t], 0.0};
        }
    }
    qsort(c, (size_t)n, sizeof *c, by_logit);
    *border = 0;
    if (prm->temperature < TS_SAMPLER_GREEDY_TEMP) {
        n = 1;
    } else {
        const double tf = prm->temperature_last ? 1.0 : prm->temperature;
        if (prm->top_k > 0 && prm->top_k < n) {
            n = prm->top_k;
        }
        if (prm->typical_p < 1.0f) {
            ref_softmax(c, n, tf, p);
            double h = 0.0;
            for (int i = 0; i < n; i++) {
                h -= p[i] > 0 ? p[i] * log(p[i]) : 0.0;
            }
            for (int i = 0; i < n; i++) {
                c[i].d = p[i] > 0 ? fabs(-log(p[i]) - h) : INFINITY;
            }
            /* p[] follows c[] through the sort: recompute after sorting instead. */
            qsort(c, (size_t)n, sizeof *c, by_distance);
            ref_softmax(c, n, tf, p);
            double cum = 0.0;
            int keep = n;
            for (int i = 0; i < n; i++) {
                cum += p[i];
                if (cum > prm->typical_p) {
                    keep = i + 1;
                    break;
                }
            }
            double before = cum - (keep <= n ? p[keep - 1] : 0.0);
            if (fabs(cum - prm->typical_p) < BORDER || fabs(before - prm->typical_p) < BORDER ||
                (keep < n && c[keep].l != c[keep - 1].l &&
                 fabs(c[keep].d - c[keep - 1].d) < 1e-6 * (1.0 + c[keep].d + fabs(c[keep].l)))) {
                *border = 1;
            }
            n = keep;
            qsort(c, (size_t)n, sizeof *c, by_logit);
        }
        if (prm->top_p < 1.0f) {
            ref_softmax(c, n, tf, p);
            double cum = 0.0;
            int keep = n;
            for (int i = 0; i < n; i++) {
                cum += p[i];
                if (cum >= prm->top_p) {
                    keep = i + 1;
                    break;
                }
            }
            double before = cum - p[keep - 1];
            if (fabs(cum - prm->top_p) < BORDER || fabs(before - prm->top_p) < BORDER) {
                *border = 1;
            }
            n = keep;
        }
        if (prm->min_p > 0.0f) {
            double lim = log((double)prm->min_p);
            int keep = 0;
            for (int i = 0; i < n; i++) {
                double z = ((double)c[i].l - (double)c[0].l) / tf;
                if (fabs(z - lim) < BORDER * (1.0 + fabs(lim))) {
                    *border = 1;
                }
                if (z >= lim) {
                    c[keep++] = c[i];
                }
            }
            n = keep;
        }
    }
    ref_softmax(c, n, prm->temperature < TS_SAMPLER_GREEDY_TEMP ? 1.0 : prm->temperature, p);
    for (int i = 0; i < n; i++) {
        ids[i] = c[i].id;
        probs[i] = prm->temperature < TS_SAMPLER_GREEDY_TEMP ? 1.0 : p[i];
    }
    free(l);
    free(c);
    free(p);
    free(count);
    return n;
}

/* ---- helpers ---------------------------------------------------------------------------- */

static float normal(ts_rng *rng) {
    double u1 = ts_rng_uniform(rng);
    double u2 = ts_rng_uniform(rng);
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
}

static int pick(ts_rng *rng, int n) {
    return (int)(ts_rng_next(rng) % (uint64_t)n);
}

static void gen_logits(ts_rng *rng, float *l, int32_t V, int kind) {
    for (int32_t i = 0; i < V; i++) {
        switch (kind) {
        case 0:
            l[i] = -5.0f + 10.0f * (float)ts_rng_uniform(rng);
            break;
        case 1:
            l[i] = 0.5f * normal(rng);
            break;
        case 2:
            l[i] = 2.0f * normal(rng);
            break;
        case 3:
            l[i] = 5.0f * normal(rng);
            break;
        default:
            l[i] = 0.5f * (float)pick(rng, 9);
            break; /* many exact ties */
        }
    }
    if (V > 4 && pick(rng, 3) == 0) {
        for (int i = 0; i < V / 10 + 1; i++) {
            l[pick(rng, V)] = -INFINITY;
        }
    }
    l[pick(rng, V)] = 1.0f; /* at least one finite token */
}

typedef struct cmp_result {
    int compared;
    int skipped;
} cmp_result;

/* Runs the sampler and the reference on one case; fails on disagreement. */
static void compare_case(const ts_sampler_params *prm, const float *l, int32_t V,
                         const int32_t *hist, int n_hist, const char *label, cmp_result *res) {
    int32_t *ids = malloc((size_t)V * sizeof *ids);
    int32_t *rids = malloc((size_t)V * sizeof *rids);
    float *probs = malloc((size_t)V * sizeof *probs);
    double *rprobs = malloc((size_t)V * sizeof *rprobs);
    assert_true(ids && rids && probs && rprobs);
    int border = 0;
    int rn = ref_distribution(prm, l, V, hist, n_hist, rids, rprobs, &border);
    ts_sampler *s = NULL;
    ts_error err = {0};
    if (ts_sampler_create(prm, V, 1, &s, &err) != TS_OK) {
        fail_msg("%s: create: %s", label, err.msg);
    }
    for (int i = 0; i < n_hist; i++) {
        assert_int_equal(ts_sampler_accept(s, hist[i], &err), TS_OK);
    }
    int32_t n = -1;
    if (ts_sampler_distribution(s, l, ids, probs, V, &n, &err) != TS_OK) {
        fail_msg("%s: distribution: %s", label, err.msg);
    }
    if (border) {
        if (getenv("TS_SAMPLER_DEBUG"))
            printf("skip %s\n", label);
        res->skipped++;
    } else {
        res->compared++;
        if (n != rn) {
            fail_msg("%s: %d survivors, reference %d", label, n, rn);
        }
        for (int i = 0; i < n; i++) {
            if (ids[i] != rids[i]) {
                fail_msg("%s: survivor %d is token %d, reference %d", label, i, ids[i], rids[i]);
            }
            if (fabs(probs[i] - rprobs[i]) > 1e-6 + 1e-4 * rprobs[i]) {
                fail_msg("%s: token %d p = %.9g, reference %.9g", label, ids[i], (double)probs[i],
                         rprobs[i]);
            }
        }
    }
    ts_sampler_destroy(s);
    free(ids);
    free(rids);
    free(probs);
    free(rprobs);
}

/* ---- tests ------------------------------------------------------------------------------ */

static int cand_cmp(const void *a, const void *b) {
    const ts_cand *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

static void test_sort_and_select(void **state) {
    (void)state;
    ts_rng rng;
    ts_rng_seed(&rng, 3);
    enum { N = 3000 };
    ts_cand *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    float *v = malloc(N * sizeof *v);
    assert_true(a && b && v);
    for (int rep = 0; rep < 40; rep++) {
        int n = rep < 5 ? rep : 1 + pick(&rng, N);
        for (int i = 0; i < n; i++) {
            /* Few distinct keys so ties (broken by id) are common. */
            float key = rep % 2 ? (float)pick(&rng, 7) : (float)ts_rng_uniform(&rng);
            a[i] = b[i] = (ts_cand){key, pick(&rng, 1 << 20)};
            v[i] = rep % 3 == 0 && pick(&rng, 5) == 0 ? -INFINITY : -key;
        }
        ts_cand_sort(a, n);
        qsort(b, (size_t)n, sizeof *b, cand_cmp);
        for (int i = 0; i < n; i++) {
            assert_true(a[i].key == b[i].key && a[i].id == b[i].id);
        }
        /* Top-k selection against sorting (id = index here). */
        int k = 1 + pick(&rng, 50);
        int m = ts_cand_select_top(v, n, k, a);
        int nb = 0;
        for (int i = 0; i < n; i++) {
            if (v[i] != -INFINITY) {
                b[nb++] = (ts_cand){-v[i], i};
            }
        }
        qsort(b, (size_t)nb, sizeof *b, cand_cmp);
        assert_int_equal(m, nb < k ? nb : k);
        for (int i = 0; i < m; i++) {
            assert_true(a[i].key == b[i].key && a[i].id == b[i].id);
        }
    }
    assert_int_equal(ts_cand_select_top(v, 10, 0, a), 0);
    free(a);
    free(b);
    free(v);
}

/* Hand-checked small cases: exact candidates and probabilities. */
static void test_small_exact(void **state) {
    (void)state;
    const float l[6] = {2.0f, 1.0f, 0.0f, -1.0f, 3.0f, 1.0f};
    ts_sampler_params p = ts_sampler_params_default();
    int32_t ids[6];
    float probs[6];
    int32_t n;
    ts_error err = {0};
    ts_sampler *s;
    /* top-p 0.7 at T=1: sorted by logit the tokens are 4, 0, 1, 5, 2, 3 with p = .586, .216,
     * .079, .079, .029, .011; .586 < .7 <= .802, so tokens 4 and 0 survive. */
    double e[6], z = 0;
    const int order[6] = {4, 0, 1, 5, 2, 3};
    for (int i = 0; i < 6; i++) {
        e[i] = exp((double)l[order[i]]);
        z += e[i];
    }
    double cum = 0;
    int want_n = 0;
    while (cum < 0.7 * z) {
        cum += e[want_n++];
    }
    assert_int_equal(want_n, 2);
    p.top_p = 0.7f;
    assert_int_equal(ts_sampler_create(&p, 6, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, l, ids, probs, 6, &n, &err), TS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 0);
    assert_true(fabs(probs[0] - e[0] / (e[0] + e[1])) < 1e-6);
    ts_sampler_destroy(s);

    /* min-p 0.3 keeps p >= 0.3 p_max: z >= log 0.3 = -1.204 -> tokens 4 (0) and 0 (-1). */
    p = ts_sampler_params_default();
    p.min_p = 0.3f;
    assert_int_equal(ts_sampler_create(&p, 6, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, l, ids, probs, 6, &n, &err), TS_OK);
    assert_int_equal(n, 2);
    ts_sampler_destroy(s);
    /* ... at T = 2 (before the filter, vLLM order) z halves: -1 -> -0.5 and -2 -> -1 pass. */
    p.temperature = 2.0f;
    assert_int_equal(ts_sampler_create(&p, 6, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, l, ids, probs, 6, &n, &err), TS_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[2], 1);
    assert_int_equal(ids[3], 5);
    double w[4] = {exp(0.0), exp(-0.5), exp(-1.0), exp(-1.0)}, wz = w[0] + w[1] + w[2] + w[3];
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(probs[i] - w[i] / wz) < 1e-6);
    }
    ts_sampler_destroy(s);
    /* ... with temperature_last (llama.cpp order) the filter sees T = 1 again: 2 survive,
     * sampled at T = 2. */
    p.temperature_last = true;
    assert_int_equal(ts_sampler_create(&p, 6, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, l, ids, probs, 6, &n, &err), TS_OK);
    assert_int_equal(n, 2);
    assert_true(fabs(probs[0] - 1.0 / (1.0 + exp(-0.5))) < 1e-6);
    ts_sampler_destroy(s);

    /* typical-p on {ln 4, ln 2, ln 1, ln 1} -> p = .5 .25 .125 .125, H = 1.2130 nats;
     * surprisals .693 1.386 2.079 2.079 -> distances .520 .173 .866 .866: order 1, 0, 2, 3.
     * typical_p 0.3: .25 < .3, .75 > .3 -> tokens 1 and 0 survive, p = 2/3 and 1/3. */
    const float lt[4] = {logf(4.0f), logf(2.0f), 0.0f, 0.0f};
    p = ts_sampler_params_default();
    p.typical_p = 0.3f;
    assert_int_equal(ts_sampler_create(&p, 4, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, lt, ids, probs, 4, &n, &err), TS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_true(fabs(probs[0] - 2.0 / 3.0) < 1e-6);
    ts_sampler_destroy(s);
    /* typical_p 0.2: the most typical token alone (.25 > .2) — not the most likely one. */
    p.typical_p = 0.2f;
    assert_int_equal(ts_sampler_create(&p, 4, 1, &s, &err), TS_OK);
    assert_int_equal(ts_sampler_distribution(s, lt, ids, probs, 4, &n, &err), TS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    ts_sampler_destroy(s);
}

static void random_params(ts_rng *rng, ts_sampler_params *p, int32_t V, ts_logit_bias *bias) {
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
    static const float tps[] = {1.0f, 1.0f, 0.5f, 0.9f, 0.99f};
    static const float mps[] = {0.0f, 0.0f, 0.02f, 0.1f, 0.5f};
    static const float typs[] = {1.0f, 1.0f, 1.0f, 0.3f, 0.9f};
    *p = ts_sampler_params_default();
    p->temperature = temps[pick(rng, 5)];
    const int32_t ks[] = {0, 0, 1, 5, 40, V + 3};
    p->top_k = ks[pick(rng, 6)];
    p->top_p = tps[pick(rng, 5)];
    p->min_p = mps[pick(rng, 5)];
    p->typical_p = typs[pick(rng, 5)];
    p->temperature_last = pick(rng, 2);
    if (pick(rng, 2)) {
        p->repetition_penalty = 1.3f;
        p->frequency_penalty = 0.4f;
        p->presence_penalty = -0.3f;
        p->penalty_last_n = pick(rng, 3) == 0 ? 0 : 1 + pick(rng, 20);
    }
    p->n_logit_bias = pick(rng, 4);
    for (int i = 0; i < p->n_logit_bias; i++) {
        bias[i].token = pick(rng, V);
        bias[i].bias = i == 2 ? -INFINITY : -3.0f + 6.0f * (float)ts_rng_uniform(rng);
    }
    p->logit_bias = bias;
}

static void test_random_vs_reference(void **state) {
    (void)state;
    ts_rng rng;
    ts_rng_seed(&rng, 20260101);
    const int32_t sizes[] = {1, 2, 3, 7, 50, 300, 2000};
    float *l = malloc(2000 * sizeof *l);
    int32_t hist[64];
    ts_logit_bias bias[4];
    cmp_result res = {0, 0};
    for (int trial = 0; trial < 1500; trial++) {
        int32_t V = sizes[pick(&rng, 7)];
        gen_logits(&rng, l, V, pick(&rng, 5));
        ts_sampler_params p;
        random_params(&rng, &p, V, bias);
        int n_hist = pick(&rng, 64);
        for (int i = 0; i < n_hist; i++) {
            hist[i] = pick(&rng, V);
        }
        /* A bias may mask the only finite token; the reference has nothing to compare then. */
        int finite = 0;
        for (int32_t t = 0; t < V && !finite; t++) {
            int banned = 0;
            for (int b = 0; b < p.n_logit_bias; b++) {
                banned |= bias[b].token == t && bias[b].bias == -INFINITY;
            }
            finite = l[t] != -INFINITY && !banned;
        }
        if (!finite) {
            continue;
        }
        char label[160];
        snprintf(label, sizeof label,
                 "trial %d V=%d T=%g k=%d p=%g minp=%g typ=%g last=%d pen=%d bias=%d", trial,
                 (int)V, (double)p.temperature, (int)p.top_k, (double)p.top_p, (double)p.min_p,
                 (double)p.typical_p, (int)p.temperature_last, (int)p.penalty_last_n,
                 (int)p.n_logit_bias);
        compare_case(&p, l, V, hist, n_hist, label, &res);
    }
    printf("compared %d cases, skipped %d near-threshold cases\n", res.compared, res.skipped);
    assert_true(res.skipped * 50 < res.compared);
    free(l);
}

/* Full-vocabulary paths (histogram + partial collection) at Gemma's size. */
static void test_large_vs_reference(void **state) {
    (void)state;
    enum { V = 262144 };
    float *l = malloc(V * sizeof *l);
    assert_non_null(l);
    ts_rng rng;
    ts_rng_seed(&rng, 8);
    cmp_result res = {0, 0};
    const struct {
        int kind;
        float temp, top_p, min_p, typ;
        int32_t top_k;
    } cases[] = {
        {2, 1.0f, 0.9f, 0.0f, 1.0f, 0},   {3, 0.7f, 0.95f, 0.0f, 1.0f, 0},
        {3, 1.0f, 1.0f, 0.05f, 1.0f, 0},  {3, 1.0f, 1.0f, 0.0f, 0.9f, 0},
        {3, 0.8f, 0.9f, 0.02f, 0.95f, 0}, {2, 1.0f, 0.8f, 0.0f, 0.5f, 100},
        {4, 1.0f, 0.5f, 0.0f, 1.0f, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gen_logits(&rng, l, V, cases[c].kind);
        ts_sampler_params p = ts_sampler_params_default();
        p.temperature = cases[c].temp;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        p.typical_p = cases[c].typ;
        p.top_k = cases[c].top_k;
        char label[64];
        snprintf(label, sizeof label, "large case %zu", c);
        compare_case(&p, l, V, NULL, 0, label, &res);
    }
    printf("large: compared %d, skipped %d\n", res.compared, res.skipped);
    assert_true(res.compared >= 6);
    free(l);
}

/* The draw follows the filtered distribution: chi-square against the reference for a chain
 * of all four filters (df = survivors - 1, limit at p = 0.001 from a table). */
static void test_draw_matches_reference(void **state) {
    (void)state;
    enum { V = 30, TOTAL = 20000 };
    float l[V];
    ts_rng rng;
    ts_rng_seed(&rng, 4);
    for (int i = 0; i < V; i++) {
        l[i] = 1.2f * normal(&rng);
    }
    ts_sampler_params p = ts_sampler_params_default();
    p.temperature = 0.9f;
    p.top_k = 20;
    p.typical_p = 0.95f;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
    int32_t rids[V];
    double rprobs[V];
    int border = 0;
    int rn = ref_distribution(&p, l, V, NULL, 0, rids, rprobs, &border);
    assert_false(border);
    /* chi-square 0.999 quantiles for df = 1..15 */
    static const double limit[] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                   26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
    assert_true(rn >= 3 && rn - 1 < 16);
    ts_sampler *s;
    ts_error err = {0};
    assert_int_equal(ts_sampler_create(&p, V, 31337, &s, &err), TS_OK);
    int counts[V] = {0};
    for (int i = 0; i < TOTAL; i++) {
        int32_t t;
        assert_int_equal(ts_sampler_sample(s, l, &t, NULL, &err), TS_OK);
        counts[t]++;
    }
    double chi = 0.0;
    int seen = 0;
    for (int i = 0; i < rn; i++) {
        double e = rprobs[i] * TOTAL;
        chi += (counts[rids[i]] - e) * (counts[rids[i]] - e) / e;
        seen += counts[rids[i]];
    }
    assert_int_equal(seen, TOTAL); /* nothing outside the survivors was drawn */
    printf("chain of filters: %d survivors, chi-square %.2f (limit %.2f)\n", rn, chi,
           limit[rn - 1]);
    assert_true(chi < limit[rn - 1]);
    ts_sampler_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_and_select),        cmocka_unit_test(test_small_exact),
        cmocka_unit_test(test_random_vs_reference),    cmocka_unit_test(test_large_vs_reference),
        cmocka_unit_test(test_draw_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
