/*
 * draft_ngram_internal.h — a test hook of the n-gram drafter (src/engine/draft_ngram.c).
 *
 * With a full 32-bit hash, two different n-grams of one length rarely share a hash, so tests
 * could not tell a drafter that compares tokens from one that trusts the hash. This hook
 * keeps only a few bits of every hash, making collisions the rule; proposals must not change.
 */
#ifndef TS_ENGINE_DRAFT_NGRAM_INTERNAL_H
#define TS_ENGINE_DRAFT_NGRAM_INTERNAL_H

#include <stdint.h>

#include "engine/draft_ngram.h"

/* Forgets everything indexed (as ts_ngram_reset) and from then on keeps only the low `bits`
 * bits of every n-gram hash (0: every n-gram of a length has the same hash; >= 32: all bits,
 * the default). x must not be NULL. Slower, never different: for tests only. */
void ts_ngram_weaken_hash(ts_ngram *x, int32_t bits);

#endif /* TS_ENGINE_DRAFT_NGRAM_INTERNAL_H */
