/*
 * draft_ngram.h — the n-gram ("prompt lookup") drafter for speculative decoding.
 *
 * The drafter proposes the tokens that followed the most recent earlier occurrence of the
 * sequence's last few tokens. It needs no model: when the output repeats its input (code
 * rewritten with one change, quotes from a given document) the proposal is often accepted
 * whole. The engine verifies every proposed token against the target model, so a proposal
 * can only change the speed, never the output.
 *
 * Semantics of ts_ngram_propose(x, tokens, n, out, max), with L in [n_min, n_max]:
 *
 *   - An n-gram of length L "occurred earlier" when tokens[e-L..e) == tokens[n-L..n) for an
 *     end e with L <= e <= n-1. The suffix itself (e = n) never counts; an occurrence that
 *     overlaps the suffix does (in "a a a a" the 3-gram "a a a" ends at e = 3 = n-1).
 *   - The longest such L wins; among occurrences of that L, the most recent (largest e).
 *   - The proposal is tokens[e .. min(e+max, n)): what followed the occurrence, clipped to
 *     the tokens that exist, so it has between 1 and max tokens (fewer than max when e is
 *     close to n, e.g. "a a a a" proposes the single token "a" at e = n-1).
 *   - No occurrence for any L (or n <= n_min, or max <= 0): 0 tokens.
 *
 * Index: for each L one open-addressing hash table (linear probing, load <= 1/2) of the
 * distinct L-grams seen so far, each slot holding the n-gram's 32-bit hash and its latest end
 * position. Slots are keyed by content: a probe that meets an equal hash compares the tokens
 * of the stored occurrence with the new ones, so two different n-grams with the same hash get
 * two slots and a proposal is never wrong because of a collision.
 * Memory: 8-byte slots at a load of at most 1/2. A table that must grow for k new positions
 * grows once, to room for k new n-grams (a long prompt costs one growth, not a cascade of
 * doublings), so a table never exceeds 4 slots, 32 bytes, per indexed position; nothing else
 * is kept (the tokens are read from the caller's array). For a 32k-token prompt and lengths
 * 1..4 that is at most 4 MiB.
 *
 * Incremental use: the engine calls with the sequence's whole history, which only grows
 * between calls (the same n again is fine). Each call indexes the n-grams that end at the
 * positions added since the last call (those ending at e <= n-1) and then looks up the
 * suffix, so a call costs O(new tokens * n_max) hash arithmetic plus, per length, one probe
 * (and, when the n-gram is already present, one comparison of at most n_max tokens), plus
 * O(n_max^2 + max) for the lookup: never O(n). A call with n smaller than what is indexed
 * (should not happen) forgets everything and rebuilds from tokens[0..n).
 *
 * Thread safety: a ts_ngram belongs to one sequence and is not thread-safe; different
 * drafters share nothing.
 */
#ifndef TS_ENGINE_DRAFT_NGRAM_H
#define TS_ENGINE_DRAFT_NGRAM_H

#include <stdint.h>

#include "tessera.h"

/* The largest n-gram length a drafter may look up. */
#define TS_NGRAM_MAX_N 16

typedef struct ts_ngram ts_ngram;

/* An index for one sequence, looking up suffixes of n_min..n_max tokens
 * (1 <= n_min <= n_max <= TS_NGRAM_MAX_N). On success *out owns a new drafter (free it with
 * ts_ngram_destroy). TS_ERR_INVALID_ARG, with the numbers, when out is NULL or the lengths
 * are out of range; TS_ERR_NOMEM. err must not be NULL. */
ts_status ts_ngram_create(int32_t n_min, int32_t n_max, ts_ngram **out, ts_error *err);

/* Frees x and its tables; NULL is a no-op. */
void ts_ngram_destroy(ts_ngram *x);

/* Forgets everything indexed (the sequence starts over; after a preemption it is fed the same
 * tokens again). Keeps the tables' memory, so reindexing allocates nothing; costs one clear of
 * the tables, never more than indexing the forgotten tokens did. NULL is a no-op. */
void ts_ngram_reset(ts_ngram *x);

/* Proposes up to max tokens (written to out[0..count)) that continue tokens[0..n), as the
 * file comment describes, and returns the count (0: no match, max <= 0, or a NULL argument).
 * `tokens` (borrowed for the call) is the sequence's whole history, prompt and generated; it
 * only grows between calls, with the same prefix, and the call indexes only the new tokens.
 * If n is smaller than what was indexed, the index is rebuilt from scratch. Should growing a
 * table fail for lack of memory, the call proposes nothing and the next call resumes
 * indexing where this one stopped. */
int32_t ts_ngram_propose(ts_ngram *x, const int32_t *tokens, int32_t n, int32_t *out, int32_t max);

#endif /* TS_ENGINE_DRAFT_NGRAM_H */
