/*
 * sampler.h — choosing the next token from one logit vector.
 *
 * A ts_sampler belongs to one sequence. It holds the sampling parameters, the sequence's
 * token history (for penalties), a seeded random number generator and scratch memory sized
 * once at create, so sampling a token never allocates.
 *
 * Order of operations for one call to ts_sampler_sample (logits: float32 [n_vocab]):
 *
 *   1. logit bias      l[t] += bias[t] for every biased token (-inf bans the token).
 *   2. penalties       for every token t with count c > 0 in the penalty window (the last
 *                      penalty_last_n accepted tokens, or the whole history):
 *                        repetition (CTRL / llama.cpp / vLLM): l > 0 ? l / r : l * r
 *                        then presence and frequency (OpenAI): l -= c * freq + presence
 *      The result of 1 and 2 is the "processed" logit vector.
 *   3. greedy          when temperature < TS_SAMPLER_GREEDY_TEMP the token is the argmax of
 *                      the processed logits (lowest id among ties); steps 4-6 are skipped and
 *                      no random number is drawn.
 *   4. temperature     z = (l - max l) / temperature.
 *   5. filters, each on the survivors of the one before and each keeping at least one token:
 *                        top-k      the k tokens with the largest logits (0 = off)
 *                        typical-p  locally typical sampling (Meier et al. 2022): sort by
 *                                   |-log p - H| ascending, keep the shortest prefix whose
 *                                   mass exceeds typical_p (1 = off)
 *                        top-p      keep the shortest prefix, by probability descending, whose
 *                                   mass reaches top_p (1 = off)
 *                        min-p      keep tokens with p >= min_p * p_max (0 = off)
 *                      Probabilities inside each filter are renormalised over its input.
 *   6. sample          one uniform draw from the survivors' renormalised distribution.
 *
 * That is vLLM's order (temperature before the filters). llama.cpp's default chain applies
 * temperature after the filters instead; set temperature_last to get that order. Top-k is
 * unaffected either way; top-p, typical-p and min-p see different probabilities.
 * Ties are broken by token id (lower id first) everywhere, so results are reproducible.
 *
 * Log-probabilities (ts_sample_info) are log-softmax values over the full vocabulary of
 * either the processed logits (after step 2: bias and penalties, before temperature and
 * filters; TS_LOGPROBS_PROCESSED, the default) or the logits exactly as passed in
 * (TS_LOGPROBS_RAW, what vLLM reports by default). Neither includes temperature or
 * truncation, so a token the filters removed still has a finite logprob and the reported
 * numbers do not depend on top-k/top-p settings. Tokens at -inf (banned) are never listed.
 *
 * Input logits: NaN and +inf are rejected with TS_ERR_INVALID_ARG naming the token; -inf is
 * accepted and means "this token is masked" (grammar constraints use this). At least one
 * token must remain finite after bias. The logits are read only, never modified.
 *
 * Cost for n_vocab = 262144: one copy, one max pass and, unless greedy, one exp pass over the
 * vocabulary; no filter sorts the whole vocabulary unless its kept set is that large.
 * Top-k uses a size-k heap; top-p and typical-p without top-k first histogram the mass by
 * probability (or by distance from the entropy) into buckets and sort only the tokens in the
 * buckets that can hold the kept set; min-p is a threshold. The result is always the one a
 * full sort would give (tests/engine/test_sampler_ref.c checks this against a reference).
 *
 * Determinism: one sample draws exactly one number (none when greedy), and the i-th draw since
 * create (or reset) is the i-th output of splitmix64 from the seed (ts_rng_uniform_at): integer
 * arithmetic, the same on every platform, and a function of the seed and the draw's place
 * alone, so speculative decoding's verified positions draw what plain decoding draws.
 *
 * Thread safety: a ts_sampler is not thread-safe; use one per sequence from one thread at a
 * time. Different samplers share nothing.
 */
#ifndef TS_ENGINE_SAMPLER_H
#define TS_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* ts_sampler_params, ts_sample_info, ts_logit_bias and the TS_SAMPLER_* limits are public
 * (include/tessera.h). */

/* Counters of the last ts_sampler_sample / ts_sampler_distribution call. */
typedef struct ts_sampler_stats {
    int32_t n_candidates; /* tokens the final draw chose among (n_vocab minus masked when no
                             filter cut anything; 1 when greedy) */
    int32_t n_sorted;     /* elements passed to sorting or heap selection, summed */
} ts_sampler_stats;

typedef struct ts_sampler ts_sampler;

/* Checks every parameter against its range for a vocabulary of n_vocab tokens; on failure
 * returns TS_ERR_INVALID_ARG (or TS_ERR_RANGE for a bias token id) with a message naming the
 * parameter, its value and the allowed range. Allocates nothing. */
ts_status ts_sampler_params_validate(const ts_sampler_params *params, int32_t n_vocab,
                                     ts_error *err);

/* Creates a sampler for logit vectors of n_vocab (> 0) floats. params is copied (including
 * the logit bias array). Memory: 12 bytes * n_vocab of scratch, plus 8 bytes * n_vocab and a
 * 4 * penalty_last_n byte ring when any penalty is on. The caller owns *out. */
ts_status ts_sampler_create(const ts_sampler_params *params, int32_t n_vocab, uint64_t seed,
                            ts_sampler **out, ts_error *err);

/* Frees everything the sampler owns. NULL is a no-op. */
void ts_sampler_destroy(ts_sampler *s);

/* Appends a token to the history that penalties look at (prompt or generated; the caller
 * decides). TS_ERR_RANGE when token is outside [0, n_vocab). Never allocates. */
ts_status ts_sampler_accept(ts_sampler *s, int32_t token, ts_error *err);

/* Forgets the history and restores the RNG to its state right after create, so the same
 * calls replay the same tokens. */
void ts_sampler_reset(ts_sampler *s);

/* Chooses a token from logits (float32 [n_vocab], read only, not kept). Does not accept the
 * token: call ts_sampler_accept when it joins the sequence. info may be NULL, which skips the
 * logprob work. Errors: TS_ERR_INVALID_ARG for NULL arguments or NaN / +inf logits or when
 * every token is masked, TS_ERR_RANGE when bias or penalties push a logit to +/-inf. */
ts_status ts_sampler_sample(ts_sampler *s, const float *logits, int32_t *token,
                            ts_sample_info *info, ts_error *err);

/* ts_sampler_sample for a position where speculative decoding drafted `draft` (-1: none, the
 * same as ts_sampler_sample), with rejection-sampling acceptance (Leviathan et al. 2023, Chen
 * et al. 2023, for a deterministic draft): the draft is taken with its probability p(draft)
 * under the filtered distribution, otherwise a token is drawn from that distribution with the
 * draft removed. Each token's distribution is exactly ts_sampler_sample's, but the tokens are
 * not the ones plain decoding draws with the same seed (it accepts more drafts). Greedy is the
 * argmax either way. */
ts_status ts_sampler_sample_draft(ts_sampler *s, const float *logits, int32_t draft, int32_t *token,
                                  ts_sample_info *info, ts_error *err);

/* Runs steps 1-5 without drawing and reports the final distribution: the surviving tokens
 * (masked ones excluded) in ids[] and their sampling probabilities in probs[], by processed
 * logit descending (hence probability descending) then id, *n_out entries. Greedy reports its one
 * token with probability 1. TS_ERR_LIMIT when more than cap tokens survive (cap = n_vocab always
 * suffices). Meant for tests, debugging and "show the distribution" tools: it sorts the whole
 * survivor set. Does not use the RNG. */
ts_status ts_sampler_distribution(ts_sampler *s, const float *logits, int32_t *ids, float *probs,
                                  int32_t cap, int32_t *n_out, ts_error *err);

/* Counters of the last sample/distribution call; for tests and profiling. */
ts_sampler_stats ts_sampler_last_stats(const ts_sampler *s);

#endif /* TS_ENGINE_SAMPLER_H */
