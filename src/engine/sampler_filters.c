/*
 * sampler_filters.c — temperature, the truncation filters (top-k, typical-p, top-p, min-p)
 * and the final draw, over the processed logits in s->work.
 *
 * The candidate set starts as "every token with a finite logit" without being written out.
 * The first filter that cuts turns it into an explicit list in s->cand, choosing only the
 * tokens that can survive, so no step sorts the whole vocabulary unless the kept set is
 * that large:
 *   top-k      a size-k heap over the vocabulary;
 *   top-p      one pass histograms the probability mass by z = (l - max) / T into buckets
 *              of width 1/8; only the tokens above the edge of the highest buckets that
 *              together reach top_p are collected (a logit threshold) and sorted;
 *   typical-p  the same with the distance |-log p - H| as the bucket key;
 *   min-p      a threshold on z, no sort.
 * A collected set is always complete up to its edge (all tokens with a logit above a
 * threshold for top-p; for typical-p, all tokens whose distance falls in the chosen buckets,
 * computed by the same expression in every pass), so it is a prefix of the full sort order.
 * If float rounding makes the exact cumulative sum over it fall short of the target, the next
 * bucket is added and the collection repeated, so the result equals a full sort.
 *
 * Probabilities inside a filter use the filter temperature (the sampling temperature, or 1
 * when temperature_last); weights are accumulated in double.
 */
#include <math.h>
#include <string.h>

#include "engine/sampler_internal.h"
#include "util/error.h"

#define N_BUCKETS        513 /* 512 buckets of width 1/8 over [0, 64), then one tail */
#define BUCKETS_PER_UNIT 8.0

static bool cand_less(ts_cand a, ts_cand b) {
    return a.key < b.key || (a.key == b.key && a.id < b.id);
}

static void cand_swap(ts_cand *a, ts_cand *b) {
    ts_cand t = *a;
    *a = *b;
    *b = t;
}

/* Max-heap on cand_less: the root is the largest (worst) element. */
static void sift_down(ts_cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1;
        if (l >= n) {
            return;
        }
        int32_t c = (l + 1 < n && cand_less(h[l], h[l + 1])) ? l + 1 : l;
        if (!cand_less(h[i], h[c])) {
            return;
        }
        cand_swap(&h[i], &h[c]);
        i = c;
    }
}

static void sift_up(ts_cand *h, int32_t i) {
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!cand_less(h[p], h[i])) {
            return;
        }
        cand_swap(&h[p], &h[i]);
        i = p;
    }
}

void ts_cand_sort(ts_cand *c, int32_t n) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) {
        sift_down(c, n, i);
    }
    for (int32_t end = n - 1; end > 0; end--) {
        cand_swap(&c[0], &c[end]);
        sift_down(c, end, 0);
    }
}

int32_t ts_cand_select_top(const float *v, int32_t n, int32_t k, ts_cand *out) {
    if (k <= 0) {
        return 0;
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (v[i] == -INFINITY) {
            continue;
        }
        ts_cand c = {-v[i], i};
        if (m < k) {
            out[m] = c;
            sift_up(out, m);
            m++;
        } else if (cand_less(c, out[0])) {
            out[0] = c;
            sift_down(out, k, 0);
        }
    }
    ts_cand_sort(out, m);
    return m;
}

static int bucket_of(double v) {
    double x = v * BUCKETS_PER_UNIT;
    if (!(x < N_BUCKETS - 1)) {
        return N_BUCKETS - 1; /* tail, including +inf */
    }
    return x <= 0.0 ? 0 : (int)x;
}

/* The one expression for a scaled logit, used by every pass so that they agree bit for bit. */
static float scaled(float l, float m, float temp) {
    return (l - m) / temp;
}

static float list_max(const ts_sampler *s, const ts_cands *cs) {
    if (cs->by_logit) {
        return s->work[s->cand[0].id];
    }
    float m = -INFINITY;
    for (int32_t i = 0; i < cs->n; i++) {
        float l = s->work[s->cand[i].id];
        m = l > m ? l : m;
    }
    return m;
}

static void sort_by_logit(ts_sampler *s, ts_cands *cs) {
    if (cs->by_logit) {
        return;
    }
    for (int32_t i = 0; i < cs->n; i++) {
        s->cand[i].key = -s->work[s->cand[i].id];
    }
    ts_cand_sort(s->cand, cs->n);
    s->stats.n_sorted += cs->n;
    cs->by_logit = true;
}

static void top_k(ts_sampler *s, const ts_prep *prep, ts_cands *cs) {
    int32_t k = s->params.top_k;
    if (k <= 0 || k >= prep->n_finite) {
        return;
    }
    cs->n = ts_cand_select_top(s->work, s->n_vocab, k, s->cand);
    cs->is_list = true;
    cs->by_logit = true;
    s->stats.n_sorted += k;
}

/* Distance of a token's surprisal from the entropy: |-(z - log Z) - H|. */
static double typical_distance(float z, double log_z, double entropy) {
    return fabs(log_z - (double)z - entropy);
}

/* Sorts the list (keys already hold distances) and keeps the shortest prefix whose mass
 * exceeds target. Returns false when the whole list does not exceed it. */
static bool typical_cut(ts_sampler *s, ts_cands *cs, float m, float temp, double target) {
    ts_cand_sort(s->cand, cs->n);
    s->stats.n_sorted += cs->n;
    cs->by_logit = false;
    double cum = 0.0;
    for (int32_t i = 0; i < cs->n; i++) {
        cum += (double)expf(scaled(s->work[s->cand[i].id], m, temp));
        if (cum > target) {
            cs->n = i + 1;
            return true;
        }
    }
    return false;
}

static void typical_p(ts_sampler *s, const ts_prep *prep, ts_cands *cs, float temp) {
    const double p = (double)s->params.typical_p;
    if (p >= 1.0) {
        return;
    }
    const float *w = s->work;
    float m = cs->is_list ? list_max(s, cs) : prep->max_logit;
    /* Entropy H = log Z - sum(e z) / Z with e = exp(z), over the current candidates. */
    double sum = 0.0;
    double sum_ez = 0.0;
    if (cs->is_list) {
        for (int32_t i = 0; i < cs->n; i++) {
            float z = scaled(w[s->cand[i].id], m, temp);
            double e = (double)expf(z);
            sum += e;
            sum_ez += e > 0.0 ? e * (double)z : 0.0;
        }
    } else {
        for (int32_t i = 0; i < s->n_vocab; i++) {
            if (w[i] == -INFINITY) {
                continue;
            }
            float z = scaled(w[i], m, temp);
            double e = (double)expf(z);
            sum += e;
            sum_ez += e > 0.0 ? e * (double)z : 0.0;
        }
    }
    const double log_z = log(sum);
    const double entropy = log_z - sum_ez / sum;
    const double target = p * sum;

    if (cs->is_list) {
        for (int32_t i = 0; i < cs->n; i++) {
            float z = scaled(w[s->cand[i].id], m, temp);
            s->cand[i].key = (float)typical_distance(z, log_z, entropy);
        }
        typical_cut(s, cs, m, temp, target); /* short of the target: keep them all */
    } else {
        double mass[N_BUCKETS] = {0};
        for (int32_t i = 0; i < s->n_vocab; i++) {
            if (w[i] == -INFINITY) {
                continue;
            }
            float z = scaled(w[i], m, temp);
            mass[bucket_of(typical_distance(z, log_z, entropy))] += (double)expf(z);
        }
        int edge = 0;
        double cum = mass[0];
        while (edge < N_BUCKETS - 1 && !(cum > target)) {
            cum += mass[++edge];
        }
        cs->is_list = true;
        for (;;) {
            cs->n = 0;
            for (int32_t i = 0; i < s->n_vocab; i++) {
                if (w[i] == -INFINITY) {
                    continue;
                }
                double d = typical_distance(scaled(w[i], m, temp), log_z, entropy);
                if (bucket_of(d) <= edge) {
                    s->cand[cs->n++] = (ts_cand){(float)d, i};
                }
            }
            if (typical_cut(s, cs, m, temp, target) || edge == N_BUCKETS - 1) {
                break;
            }
            edge++;
        }
    }
    /* Later steps want logit order. */
    cs->by_logit = false;
    sort_by_logit(s, cs);
}

/* Keeps the shortest prefix of the logit-sorted list whose mass reaches target. */
static bool top_p_cut(ts_sampler *s, ts_cands *cs, float m, float temp, double target) {
    double cum = 0.0;
    for (int32_t i = 0; i < cs->n; i++) {
        cum += (double)expf(scaled(s->work[s->cand[i].id], m, temp));
        if (cum >= target) {
            cs->n = i + 1;
            return true;
        }
    }
    return false;
}

static void top_p(ts_sampler *s, const ts_prep *prep, ts_cands *cs, float temp) {
    const double p = (double)s->params.top_p;
    if (p >= 1.0) {
        return;
    }
    const float *w = s->work;
    if (cs->is_list) {
        sort_by_logit(s, cs);
        float m = list_max(s, cs);
        double sum = 0.0;
        for (int32_t i = 0; i < cs->n; i++) {
            sum += (double)expf(scaled(w[s->cand[i].id], m, temp));
        }
        top_p_cut(s, cs, m, temp, p * sum); /* short of the target: keep them all */
        return;
    }
    const float m = prep->max_logit;
    double mass[N_BUCKETS] = {0};
    double sum = 0.0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (w[i] == -INFINITY) {
            continue;
        }
        float z = scaled(w[i], m, temp);
        double e = (double)expf(z);
        sum += e;
        mass[bucket_of(-(double)z)] += e;
    }
    const double target = p * sum;
    int edge = 0;
    double cum = mass[0];
    while (edge < N_BUCKETS - 1 && !(cum >= target)) {
        cum += mass[++edge];
    }
    cs->is_list = true;
    for (;;) {
        /* Any "all tokens with l >= thr" set is a prefix of the sorted order, so the cut
         * below is exact whatever rounding put into thr; too small a set only costs a retry
         * with the next bucket. */
        const float thr =
            edge == N_BUCKETS - 1 ? -INFINITY : m - (float)((edge + 1) / BUCKETS_PER_UNIT) * temp;
        cs->n = 0;
        for (int32_t i = 0; i < s->n_vocab; i++) {
            if (w[i] >= thr && w[i] != -INFINITY) {
                s->cand[cs->n++] = (ts_cand){-w[i], i};
            }
        }
        ts_cand_sort(s->cand, cs->n);
        s->stats.n_sorted += cs->n;
        cs->by_logit = true;
        if (top_p_cut(s, cs, m, temp, target) || edge == N_BUCKETS - 1) {
            return;
        }
        edge++;
    }
}

static void min_p(ts_sampler *s, const ts_prep *prep, ts_cands *cs, float temp) {
    const float mp = s->params.min_p;
    if (mp <= 0.0f) {
        return;
    }
    /* p / p_max = exp(z), so p >= min_p * p_max is z >= log(min_p). */
    const float log_mp = logf(mp);
    const float *w = s->work;
    if (cs->is_list) {
        float m = list_max(s, cs);
        int32_t kept = 0;
        for (int32_t i = 0; i < cs->n; i++) {
            if (scaled(w[s->cand[i].id], m, temp) >= log_mp) {
                s->cand[kept++] = s->cand[i]; /* stable: logit order survives */
            }
        }
        cs->n = kept;
        return;
    }
    const float m = prep->max_logit;
    cs->is_list = true;
    cs->by_logit = false;
    cs->n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (w[i] != -INFINITY && scaled(w[i], m, temp) >= log_mp) {
            s->cand[cs->n++] = (ts_cand){-w[i], i};
        }
    }
}

void ts_sampler_filter(ts_sampler *s, const ts_prep *prep, ts_cands *cs) {
    cs->is_list = false;
    cs->by_logit = false;
    cs->n = 0;
    const float temp = s->params.temperature_last ? 1.0f : s->params.temperature;
    top_k(s, prep, cs);
    typical_p(s, prep, cs, temp);
    top_p(s, prep, cs, temp);
    min_p(s, prep, cs, temp);
    s->stats.n_candidates = cs->is_list ? cs->n : prep->n_finite;
}

int32_t ts_sampler_draw(ts_sampler *s, const ts_prep *prep, const ts_cands *cs) {
    const float temp = s->params.temperature;
    const float *w = s->work;
    const double u = ts_rng_uniform_at(s->seed, s->n_draws++);
    if (cs->is_list) {
        /* Keys are no longer needed: hold the weights there. */
        float m = list_max(s, cs);
        double sum = 0.0;
        for (int32_t i = 0; i < cs->n; i++) {
            float e = expf(scaled(w[s->cand[i].id], m, temp));
            s->cand[i].key = e;
            sum += (double)e;
        }
        const double target = u * sum;
        double cum = 0.0;
        int32_t last = 0;
        for (int32_t i = 0; i < cs->n; i++) {
            if (s->cand[i].key > 0.0f) {
                cum += (double)s->cand[i].key;
                last = i;
                if (cum > target) {
                    return s->cand[i].id;
                }
            }
        }
        return s->cand[last].id; /* rounding left target at the very end */
    }
    /* No list: the whole vocabulary, weights stored in the cand scratch viewed as floats. */
    float *e = (float *)(void *)s->cand;
    const float m = prep->max_logit;
    double sum = 0.0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        e[i] = expf(scaled(w[i], m, temp)); /* exp(-inf) = 0 for masked tokens */
        sum += (double)e[i];
    }
    const double target = u * sum;
    double cum = 0.0;
    int32_t last = prep->argmax;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (e[i] > 0.0f) {
            cum += (double)e[i];
            last = i;
            if (cum > target) {
                return i;
            }
        }
    }
    return last;
}

int32_t ts_sampler_draw_draft(ts_sampler *s, const ts_prep *prep, const ts_cands *cs,
                              int32_t draft) {
    const float temp = s->params.temperature;
    const float *w = s->work;
    const uint64_t at = s->n_draws++;
    /* The weights of the survivors (as ts_sampler_draw computes them) and the draft's. */
    int32_t n = cs->is_list ? cs->n : s->n_vocab;
    float *e = (float *)(void *)s->cand; /* whole vocabulary: weights by id */
    const float m = cs->is_list ? list_max(s, cs) : prep->max_logit;
    double sum = 0.0, wd = 0.0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = cs->is_list ? s->cand[i].id : i;
        float x = expf(scaled(w[id], m, temp));
        if (cs->is_list) {
            s->cand[i].key = x;
        } else {
            e[i] = x;
        }
        sum += (double)x;
        wd += id == draft ? (double)x : 0.0;
    }
    /* Accept with probability p(draft) (the draft is deterministic: q is one-hot). */
    if (ts_rng_uniform_at(s->seed, at) * sum < wd || sum - wd <= 0.0) {
        return draft;
    }
    /* Rejected: the residual distribution, p without the draft, from a second stream. */
    const double target = ts_rng_uniform_at(s->seed ^ 0xd1b54a32d192ed03u, at) * (sum - wd);
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = cs->is_list ? s->cand[i].id : i;
        float x = cs->is_list ? s->cand[i].key : e[i];
        if (id == draft || x <= 0.0f) {
            continue;
        }
        cum += (double)x;
        last = id;
        if (cum > target) {
            return id;
        }
    }
    return last >= 0 ? last : draft;
}

ts_status ts_sampler_materialize(ts_sampler *s, ts_cands *cs, int32_t *ids, float *probs,
                                 int32_t cap, int32_t *n_out, ts_error *err) {
    if (!cs->is_list) {
        cs->n = 0;
        for (int32_t i = 0; i < s->n_vocab; i++) {
            if (s->work[i] != -INFINITY) {
                s->cand[cs->n++] = (ts_cand){-s->work[i], i};
            }
        }
        cs->is_list = true;
        cs->by_logit = false;
    }
    if (cs->n > cap) {
        *n_out = 0;
        s->stats.n_candidates = cs->n;
        return ts_error_set(err, TS_ERR_LIMIT,
                            "sampler: %d tokens survive the filters but the output holds %d",
                            (int)cs->n, (int)cap);
    }
    sort_by_logit(s, cs);
    const float temp = s->params.temperature;
    const float m = list_max(s, cs);
    double sum = 0.0;
    for (int32_t i = 0; i < cs->n; i++) {
        sum += (double)expf(scaled(s->work[s->cand[i].id], m, temp));
    }
    for (int32_t i = 0; i < cs->n; i++) {
        int32_t id = s->cand[i].id;
        ids[i] = id;
        probs[i] = (float)((double)expf(scaled(s->work[id], m, temp)) / sum);
    }
    *n_out = cs->n;
    s->stats.n_candidates = cs->n;
    return TS_OK;
}
