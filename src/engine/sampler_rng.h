/*
 * sampler_rng.h — the sampler's pseudo-random number generator.
 *
 * xoshiro256** (Blackman and Vigna, 2018) with its 256-bit state filled from a 64-bit seed by
 * splitmix64, the seeding the algorithm's authors recommend. Integer arithmetic only, so a
 * seed gives the same stream on every platform and compiler. The state lives in the caller's
 * object; there is no global generator. Not thread-safe per state, trivially safe across
 * states.
 */
#ifndef TS_ENGINE_SAMPLER_RNG_H
#define TS_ENGINE_SAMPLER_RNG_H

#include <stdint.h>

typedef struct ts_rng {
    uint64_t s[4];
} ts_rng;

/* Advances *state by the golden-ratio increment and returns the mixed value (splitmix64). */
uint64_t ts_splitmix64_next(uint64_t *state);

/* Seeds rng from seed: four consecutive splitmix64 outputs, never all zero. */
void ts_rng_seed(ts_rng *rng, uint64_t seed);

/* Next 64 uniformly distributed bits. */
uint64_t ts_rng_next(ts_rng *rng);

/* Uniform double in [0, 1) with 53 random bits. */
double ts_rng_uniform(ts_rng *rng);

/* The index-th uniform double in [0, 1) of the splitmix64 stream seeded by seed (53 bits of its
 * index-th output): a counter-based draw, a function of (seed, index) alone. The sampler draws
 * this way, so a token's random number depends on the request's seed and the token's place in
 * the output, not on how the steps that computed it were batched (speculative decoding relies
 * on it: a verified draft position draws what plain decoding would). */
double ts_rng_uniform_at(uint64_t seed, uint64_t index);

#endif /* TS_ENGINE_SAMPLER_RNG_H */
