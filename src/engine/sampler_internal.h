/*
 * sampler_internal.h — the ts_sampler object and the pieces shared by sampler.c (parameters,
 * history, penalties, logprobs) and sampler_filters.c (truncation filters and the draw).
 * Not part of the engine's interface.
 */
#ifndef TS_ENGINE_SAMPLER_INTERNAL_H
#define TS_ENGINE_SAMPLER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/sampler.h"
#include "engine/sampler_rng.h"

/* A candidate token with a sort key. Candidates order by key ascending, then id ascending;
 * sorting by logit uses key = -logit (negation is exact). */
typedef struct ts_cand {
    float key;
    int32_t id;
} ts_cand;

/* Bit 31 of a history count marks "token is in s->listed"; the low 31 bits are the count. */
#define TS_SAMPLER_LISTED     0x80000000u
#define TS_SAMPLER_COUNT_MASK 0x7fffffffu

struct ts_sampler {
    ts_sampler_params params; /* params.logit_bias is NULL: the merged copy is bias[] */
    int32_t n_vocab;
    uint64_t seed;
    uint64_t n_draws; /* draws since create/reset: the next one is splitmix64(seed)'s n_draws-th */

    ts_logit_bias *bias; /* [n_bias], sorted by token, one entry per token (duplicates summed) */
    int32_t n_bias;

    /* Penalty history, allocated only when a penalty is on. */
    bool penalties_on;
    uint32_t *counts; /* [n_vocab] occurrences inside the window | TS_SAMPLER_LISTED */
    int32_t *listed;  /* [n_vocab] tokens whose LISTED bit is set; some may have count 0 */
    int32_t n_listed;
    int32_t *ring; /* [window] the last accepted tokens when window > 0, else NULL */
    int32_t window;
    int32_t ring_head; /* slot the next token goes to */
    int32_t ring_fill;

    /* Scratch, sized at create. cand doubles as a float[n_vocab] of exp weights while the
     * final draw runs over the whole vocabulary (no explicit candidate list exists then). */
    float *work;   /* [n_vocab] processed logits (bias + penalties) */
    ts_cand *cand; /* [n_vocab] candidate list */
    ts_sampler_stats stats;
};

/* Facts about the processed logits that every later step needs. */
typedef struct ts_prep {
    float max_logit; /* finite */
    int32_t argmax;  /* lowest id holding max_logit */
    int32_t n_finite;
} ts_prep;

/* The candidate set after filtering: either every token with a finite processed logit
 * (is_list false) or s->cand[0..n). */
typedef struct ts_cands {
    bool is_list;
    bool by_logit; /* list sorted by logit descending, then id */
    int32_t n;
} ts_cands;

/* Heap sort by (key, id) ascending; in place, no allocation. */
void ts_cand_sort(ts_cand *c, int32_t n);

/* The k best tokens of v[0..n) (largest value first, lower id first among ties; -inf
 * skipped) into out[0..k), sorted best first, key = -value. Returns how many were found. */
int32_t ts_cand_select_top(const float *v, int32_t n, int32_t k, ts_cand *out);

/* Steps 4-5: temperature and filters over s->work. */
void ts_sampler_filter(ts_sampler *s, const ts_prep *prep, ts_cands *cs);

/* Step 6: draws one token from the filtered set with one RNG number. */
int32_t ts_sampler_draw(ts_sampler *s, const ts_prep *prep, const ts_cands *cs);

/* Step 6 for a drafted token (speculative decoding's rejection sampling): accepts draft with
 * its probability under the filtered distribution, else draws from that distribution without
 * it (a second number of the same place); one place of the draw sequence either way. */
int32_t ts_sampler_draw_draft(ts_sampler *s, const ts_prep *prep, const ts_cands *cs,
                              int32_t draft);

/* Turns cs into an explicit list sorted by logit and writes the sampling probabilities. */
ts_status ts_sampler_materialize(ts_sampler *s, ts_cands *cs, int32_t *ids, float *probs,
                                 int32_t cap, int32_t *n_out, ts_error *err);

#endif /* TS_ENGINE_SAMPLER_INTERNAL_H */
