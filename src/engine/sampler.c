/*
 * sampler.c — sampler parameters, lifetime, token history, logit bias and penalties, and
 * log-probabilities. The truncation filters and the draw are in sampler_filters.c.
 *
 * Invariants: every array is sized at create; sampling never allocates. s->work holds the
 * processed logits of the current call only. A token is in s->listed exactly when its
 * counts[] entry has TS_SAMPLER_LISTED set, so the list never holds a token twice and never
 * grows past n_vocab; entries whose count fell to zero are dropped lazily while penalties
 * are applied.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler_internal.h"
#include "util/error.h"

ts_sampler_params ts_sampler_params_default(void) {
    ts_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.typical_p = 1.0f;
    p.repetition_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.penalty_last_n = 0;
    p.logit_bias = NULL;
    p.n_logit_bias = 0;
    p.n_logprobs = 0;
    p.logprobs_mode = TS_LOGPROBS_PROCESSED;
    p.temperature_last = false;
    return p;
}

ts_status ts_sampler_params_validate(const ts_sampler_params *p, int32_t n_vocab, ts_error *err) {
    if (p == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: params is NULL");
    }
    if (n_vocab <= 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: n_vocab = %d; the vocabulary must hold at least one token",
                            (int)n_vocab);
    }
    if (!isfinite(p->temperature) || p->temperature < 0.0f) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: temperature = %g is invalid; it must be finite and >= 0 "
                            "(0 means greedy)",
                            (double)p->temperature);
    }
    if (p->top_k < 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: top_k = %d is negative; use 0 to disable top-k",
                            (int)p->top_k);
    }
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: top_p = %g is outside (0, 1]; use 1 to disable top-p",
                            (double)p->top_p);
    }
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: min_p = %g is outside [0, 1]; use 0 to disable min-p",
                            (double)p->min_p);
    }
    if (!(p->typical_p > 0.0f && p->typical_p <= 1.0f)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: typical_p = %g is outside (0, 1]; use 1 to disable it",
                            (double)p->typical_p);
    }
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0.0f) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: repetition_penalty = %g is invalid; it must be finite and "
                            "> 0 (1 disables it)",
                            (double)p->repetition_penalty);
    }
    if (!(fabsf(p->presence_penalty) <= TS_SAMPLER_MAX_PENALTY)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: presence_penalty = %g is outside [-2, 2]",
                            (double)p->presence_penalty);
    }
    if (!(fabsf(p->frequency_penalty) <= TS_SAMPLER_MAX_PENALTY)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: frequency_penalty = %g is outside [-2, 2]",
                            (double)p->frequency_penalty);
    }
    if (p->penalty_last_n < -1 || p->penalty_last_n > TS_SAMPLER_MAX_WINDOW) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: penalty_last_n = %d is outside [-1, %d] (-1 or 0: whole "
                            "history)",
                            (int)p->penalty_last_n, TS_SAMPLER_MAX_WINDOW);
    }
    if (p->n_logprobs < 0 || p->n_logprobs > TS_SAMPLER_MAX_LOGPROBS) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: n_logprobs = %d is outside [0, %d]",
                            (int)p->n_logprobs, TS_SAMPLER_MAX_LOGPROBS);
    }
    if (p->logprobs_mode != TS_LOGPROBS_PROCESSED && p->logprobs_mode != TS_LOGPROBS_RAW) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: logprobs_mode = %d is unknown",
                            (int)p->logprobs_mode);
    }
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && p->logit_bias == NULL)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: logit_bias is %s with n_logit_bias = %d",
                            p->logit_bias == NULL ? "NULL" : "set", (int)p->n_logit_bias);
    }
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const ts_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab) {
            return ts_error_set(err, TS_ERR_RANGE,
                                "sampler: logit_bias[%d]: token %d is outside [0, %d)", (int)i,
                                (int)b->token, (int)n_vocab);
        }
        if (isnan(b->bias) || b->bias == INFINITY) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "sampler: logit_bias[%d]: token %d has bias %g; a bias must be "
                                "finite or -inf (a ban)",
                                (int)i, (int)b->token, (double)b->bias);
        }
    }
    return TS_OK;
}

static int bias_cmp(const void *a, const void *b) {
    const ts_logit_bias *x = a;
    const ts_logit_bias *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

/* Copies, sorts and merges the bias entries; rejects a bias that bans every token. */
static ts_status copy_bias(ts_sampler *s, const ts_sampler_params *p, ts_error *err) {
    if (p->n_logit_bias == 0) {
        return TS_OK;
    }
    s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
    if (s->bias == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "sampler: cannot allocate %d logit bias entries",
                            (int)p->n_logit_bias);
    }
    memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    qsort(s->bias, (size_t)p->n_logit_bias, sizeof *s->bias, bias_cmp);
    int32_t n = 0;
    int32_t n_banned = 0;
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        if (n > 0 && s->bias[n - 1].token == s->bias[i].token) {
            s->bias[n - 1].bias += s->bias[i].bias; /* -inf absorbs; +inf was rejected */
        } else {
            s->bias[n++] = s->bias[i];
        }
    }
    for (int32_t i = 0; i < n; i++) {
        n_banned += s->bias[i].bias == -INFINITY;
    }
    s->n_bias = n;
    if (n_banned == s->n_vocab) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: logit_bias bans all %d tokens; nothing could be sampled",
                            (int)s->n_vocab);
    }
    return TS_OK;
}

ts_status ts_sampler_create(const ts_sampler_params *params, int32_t n_vocab, uint64_t seed,
                            ts_sampler **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: out is NULL");
    }
    *out = NULL;
    ts_status st = ts_sampler_params_validate(params, n_vocab, err);
    if (st != TS_OK) {
        return st;
    }
    ts_sampler *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "sampler: cannot allocate the sampler");
    }
    s->params = *params;
    s->params.logit_bias = NULL;
    s->params.n_logit_bias = 0;
    s->n_vocab = n_vocab;
    s->seed = seed;
    s->n_draws = 0;
    s->penalties_on = params->repetition_penalty != 1.0f || params->presence_penalty != 0.0f ||
                      params->frequency_penalty != 0.0f;
    s->window = params->penalty_last_n > 0 ? params->penalty_last_n : 0;

    size_t nv = (size_t)n_vocab;
    s->work = malloc(nv * sizeof *s->work);
    s->cand = malloc(nv * sizeof *s->cand);
    bool ok = s->work != NULL && s->cand != NULL;
    if (ok && s->penalties_on) {
        s->counts = calloc(nv, sizeof *s->counts);
        s->listed = malloc(nv * sizeof *s->listed);
        ok = s->counts != NULL && s->listed != NULL;
        if (ok && s->window > 0) {
            s->ring = malloc((size_t)s->window * sizeof *s->ring);
            ok = s->ring != NULL;
        }
    }
    if (!ok) {
        int32_t window = s->window;
        ts_sampler_destroy(s);
        return ts_error_set(err, TS_ERR_NOMEM,
                            "sampler: cannot allocate scratch for n_vocab = %d (window %d)",
                            (int)n_vocab, (int)window);
    }
    st = copy_bias(s, params, err);
    if (st != TS_OK) {
        ts_sampler_destroy(s);
        return st;
    }
    *out = s;
    return TS_OK;
}

void ts_sampler_destroy(ts_sampler *s) {
    if (s == NULL) {
        return;
    }
    free(s->bias);
    free(s->counts);
    free(s->listed);
    free(s->ring);
    free(s->work);
    free(s->cand);
    free(s);
}

static void count_add(ts_sampler *s, int32_t token) {
    uint32_t c = s->counts[token];
    if ((c & TS_SAMPLER_COUNT_MASK) != TS_SAMPLER_COUNT_MASK) {
        c++; /* saturates after 2^31 - 1 occurrences, far beyond any context */
    }
    if ((c & TS_SAMPLER_LISTED) == 0) {
        c |= TS_SAMPLER_LISTED;
        s->listed[s->n_listed++] = token;
    }
    s->counts[token] = c;
}

ts_status ts_sampler_accept(ts_sampler *s, int32_t token, ts_error *err) {
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "sampler: accept on a NULL sampler");
    }
    if (token < 0 || token >= s->n_vocab) {
        return ts_error_set(err, TS_ERR_RANGE, "sampler: accepted token %d is outside [0, %d)",
                            (int)token, (int)s->n_vocab);
    }
    if (!s->penalties_on) {
        return TS_OK;
    }
    if (s->window > 0) {
        if (s->ring_fill == s->window) {
            int32_t old = s->ring[s->ring_head];
            s->counts[old]--; /* count >= 1: old entered the window and has not left it */
        } else {
            s->ring_fill++;
        }
        s->ring[s->ring_head] = token;
        s->ring_head = s->ring_head + 1 == s->window ? 0 : s->ring_head + 1;
    }
    count_add(s, token);
    return TS_OK;
}

void ts_sampler_reset(ts_sampler *s) {
    if (s == NULL) {
        return;
    }
    s->n_draws = 0;
    if (s->penalties_on) {
        for (int32_t i = 0; i < s->n_listed; i++) {
            s->counts[s->listed[i]] = 0;
        }
    }
    s->n_listed = 0;
    s->ring_head = 0;
    s->ring_fill = 0;
    memset(&s->stats, 0, sizeof s->stats);
}

ts_sampler_stats ts_sampler_last_stats(const ts_sampler *s) {
    ts_sampler_stats none = {0, 0};
    return s == NULL ? none : s->stats;
}

/* Finds the maximum (lowest id on ties) and counts the finite entries of s->work. */
static void scan_work(const ts_sampler *s, ts_prep *prep) {
    float best = -INFINITY;
    int32_t arg = -1;
    int32_t n_finite = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float x = s->work[i];
        n_finite += x != -INFINITY;
        if (x > best) {
            best = x;
            arg = i;
        }
    }
    prep->max_logit = best;
    prep->argmax = arg;
    prep->n_finite = n_finite;
}

/* Step 1 input: copies logits into work, rejects NaN and +inf, and scans for the maximum in
 * the same pass (valid as long as nothing modifies work afterwards). */
static ts_status copy_logits(ts_sampler *s, const float *logits, ts_prep *prep, ts_error *err) {
    int bad = 0;
    float best = -INFINITY;
    int32_t arg = -1;
    int32_t n_finite = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float x = logits[i];
        s->work[i] = x;
        bad |= !(x < INFINITY); /* NaN or +inf */
        n_finite += x != -INFINITY;
        if (x > best) {
            best = x;
            arg = i;
        }
    }
    prep->max_logit = best;
    prep->argmax = arg;
    prep->n_finite = n_finite;
    if (!bad) {
        return TS_OK;
    }
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (!(logits[i] < INFINITY)) {
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "sampler: logits[%d] = %s; logits must be finite or -inf "
                                "(masked)",
                                (int)i, isnan(logits[i]) ? "NaN" : "+inf");
        }
    }
    return ts_error_set(err, TS_ERR_INTERNAL, "sampler: bad logit vanished between scans");
}

static ts_status overflow_error(ts_error *err, const char *what, int32_t token, float before) {
    return ts_error_set(err, TS_ERR_RANGE,
                        "sampler: %s pushed the logit of token %d (%g) out of float range", what,
                        (int)token, (double)before);
}

/* Steps 1-2: logit bias, then penalties over the tokens in the window. */
static ts_status process_logits(ts_sampler *s, ts_error *err) {
    float *w = s->work;
    for (int32_t i = 0; i < s->n_bias; i++) {
        int32_t t = s->bias[i].token;
        float b = s->bias[i].bias;
        float v = w[t] + b;
        if (isinf(v) && isfinite(w[t]) && isfinite(b)) {
            return overflow_error(err, "logit_bias", t, w[t]);
        }
        w[t] = v;
    }
    if (!s->penalties_on) {
        return TS_OK;
    }
    const float rep = s->params.repetition_penalty;
    const float freq = s->params.frequency_penalty;
    const float pres = s->params.presence_penalty;
    int32_t kept = 0;
    for (int32_t i = 0; i < s->n_listed; i++) {
        int32_t t = s->listed[i];
        uint32_t c = s->counts[t] & TS_SAMPLER_COUNT_MASK;
        if (c == 0) {
            s->counts[t] = 0; /* left the window: drop it from the list */
            continue;
        }
        s->listed[kept++] = t;
        float l = w[t];
        if (l == -INFINITY) {
            continue; /* masked stays masked */
        }
        float v = l > 0.0f ? l / rep : l * rep;
        v -= (float)c * freq + pres;
        if (!isfinite(v)) {
            return overflow_error(err, "a penalty", t, l);
        }
        w[t] = v;
    }
    s->n_listed = kept;
    return TS_OK;
}

static ts_status prepare(ts_sampler *s, const float *logits, ts_prep *prep, ts_error *err) {
    ts_status st = copy_logits(s, logits, prep, err);
    if (st != TS_OK) {
        return st;
    }
    if (s->n_bias > 0 || s->n_listed > 0) {
        st = process_logits(s, err);
        if (st != TS_OK) {
            return st;
        }
        scan_work(s, prep); /* bias or penalties may have moved the maximum */
    }
    if (prep->argmax < 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: every one of the %d logits is -inf after logit bias; "
                            "nothing can be sampled",
                            (int)s->n_vocab);
    }
    memset(&s->stats, 0, sizeof s->stats);
    return TS_OK;
}

static bool is_greedy(const ts_sampler *s) {
    return s->params.temperature < TS_SAMPLER_GREEDY_TEMP;
}

/* Log-softmax facts of the chosen token and the top alternatives over src[n_vocab]. */
static void fill_info(ts_sampler *s, const float *src, int32_t token, ts_sample_info *info) {
    const int32_t n = s->n_vocab;
    float m = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        m = src[i] > m ? src[i] : m;
    }
    double sum = 0.0;
    int32_t above = 0;
    const float chosen = src[token];
    for (int32_t i = 0; i < n; i++) {
        sum += (double)expf(src[i] - m);
        above += src[i] > chosen;
    }
    const double lse = (double)m + log(sum);
    info->token = token;
    info->logprob = (float)((double)chosen - lse);
    info->rank = above + 1;
    ts_cand top[TS_SAMPLER_MAX_LOGPROBS];
    int32_t n_top = ts_cand_select_top(src, n, s->params.n_logprobs, top);
    s->stats.n_sorted += s->params.n_logprobs;
    info->n_top = n_top;
    for (int32_t i = 0; i < n_top; i++) {
        info->top[i].token = top[i].id;
        info->top[i].logprob = (float)((double)src[top[i].id] - lse);
    }
}

ts_status ts_sampler_sample(ts_sampler *s, const float *logits, int32_t *token,
                            ts_sample_info *info, ts_error *err) {
    return ts_sampler_sample_draft(s, logits, -1, token, info, err);
}

ts_status ts_sampler_sample_draft(ts_sampler *s, const float *logits, int32_t draft, int32_t *token,
                                  ts_sample_info *info, ts_error *err) {
    if (s == NULL || logits == NULL || token == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: sample needs a sampler, logits "
                            "and a token out-parameter (one is NULL)");
    }
    ts_prep prep;
    ts_status st = prepare(s, logits, &prep, err);
    if (st != TS_OK) {
        return st;
    }
    int32_t t;
    if (is_greedy(s)) {
        t = prep.argmax;
        s->stats.n_candidates = 1;
    } else {
        ts_cands cs;
        ts_sampler_filter(s, &prep, &cs);
        t = draft >= 0 && draft < s->n_vocab ? ts_sampler_draw_draft(s, &prep, &cs, draft)
                                             : ts_sampler_draw(s, &prep, &cs);
    }
    if (info != NULL) {
        const float *src = s->params.logprobs_mode == TS_LOGPROBS_RAW ? logits : s->work;
        fill_info(s, src, t, info);
    }
    *token = t;
    return TS_OK;
}

ts_status ts_sampler_distribution(ts_sampler *s, const float *logits, int32_t *ids, float *probs,
                                  int32_t cap, int32_t *n_out, ts_error *err) {
    if (s == NULL || logits == NULL || ids == NULL || probs == NULL || n_out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "sampler: distribution needs a sampler, logits, ids, probs and "
                            "n_out (one is NULL)");
    }
    *n_out = 0;
    ts_prep prep;
    ts_status st = prepare(s, logits, &prep, err);
    if (st != TS_OK) {
        return st;
    }
    if (is_greedy(s)) {
        if (cap < 1) {
            return ts_error_set(err, TS_ERR_LIMIT, "sampler: distribution cap %d < 1", (int)cap);
        }
        ids[0] = prep.argmax;
        probs[0] = 1.0f;
        *n_out = 1;
        s->stats.n_candidates = 1;
        return TS_OK;
    }
    ts_cands cs;
    ts_sampler_filter(s, &prep, &cs);
    return ts_sampler_materialize(s, &cs, ids, probs, cap, n_out, err);
}
