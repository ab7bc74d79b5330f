/* sampler_rng.c — xoshiro256** seeded by splitmix64 (see sampler_rng.h). */
#include "engine/sampler_rng.h"

static uint64_t rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t ts_splitmix64_next(uint64_t *state) {
    *state += 0x9e3779b97f4a7c15u;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void ts_rng_seed(ts_rng *rng, uint64_t seed) {
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++) {
        rng->s[i] = ts_splitmix64_next(&sm);
    }
    /* splitmix64's output function is a bijection of distinct counters, so four consecutive
     * outputs cannot all be zero; keep the invariant explicit all the same. */
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0) {
        rng->s[0] = 1;
    }
}

uint64_t ts_rng_next(ts_rng *rng) {
    uint64_t *s = rng->s;
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double ts_rng_uniform(ts_rng *rng) {
    return (double)(ts_rng_next(rng) >> 11) * 0x1.0p-53;
}

double ts_rng_uniform_at(uint64_t seed, uint64_t index) {
    uint64_t state = seed + index * 0x9e3779b97f4a7c15u; /* splitmix64's state before draw index */
    return (double)(ts_splitmix64_next(&state) >> 11) * 0x1.0p-53;
}
