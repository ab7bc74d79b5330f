/*
 * draft_ngram.c — the n-gram drafter's index (see draft_ngram.h for the semantics).
 *
 * Invariants:
 *   - x->indexed is the largest end position e whose n-grams are in the tables: for every
 *     L in [n_min, n_max] and every e with L <= e <= indexed, the table of L holds a slot for
 *     the content tokens[e-L..e) whose end is the largest such e. Positions are added in
 *     increasing order, so storing the latest e is an overwrite.
 *   - A slot with end == 0 is empty (every stored end is >= L >= 1), so a zeroed table is an
 *     empty one and reset is a memset.
 *   - Two slots of one table never hold the same content (insertion compares the tokens of
 *     any slot whose hash is equal), so a lookup finds at most one slot for a content.
 */
#include "engine/draft_ngram.h"
#include "engine/draft_ngram_internal.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* A table starts at this many slots on its first insertion. */
#define NGRAM_TABLE_MIN 64

typedef struct ngram_slot {
    uint32_t hash; /* the n-gram's 32-bit hash (ngram_hashes) */
    int32_t end;   /* its latest end position e (the n-gram is tokens[e-L..e)); 0: empty */
} ngram_slot;

typedef struct ngram_table {
    ngram_slot *slots; /* [cap], owned; NULL until the first insertion */
    size_t cap;        /* a power of two, or 0 */
    size_t count;      /* occupied slots, <= cap / 2 */
} ngram_table;

struct ts_ngram {
    int32_t n_min;       /* shortest n-gram length looked up, >= 1 */
    int32_t n_max;       /* longest, n_min..TS_NGRAM_MAX_N */
    int32_t indexed;     /* the n-grams ending at e <= indexed are in the tables */
    uint32_t hash_mask;  /* the hash bits kept: all, except in tests that force collisions */
    ngram_table *tables; /* [n_max - n_min + 1], tables[L - n_min] for length L; owned */
};

/* The hashes of the n-grams tokens[e-L..e) for L = 1..len (len <= e): h[L] for each L,
 * h[0] unused, each reduced to the bits of mask. One pass backwards from e-1, so all lengths
 * cost O(len) together. */
static void ngram_hashes(const int32_t *tokens, int32_t e, int32_t len, uint32_t mask,
                         uint32_t *h) {
    uint64_t acc = 0x9e3779b97f4a7c15u;
    for (int32_t l = 1; l <= len; l++) {
        acc = (acc ^ (uint32_t)tokens[e - l]) * 0x100000001b3u + (uint64_t)l;
        uint64_t z = acc;
        z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 29)) * 0x94d049bb133111ebu;
        h[l] = (uint32_t)(z >> 32) & mask;
    }
}

/* Whether tokens[a-len..a) == tokens[b-len..b). */
static bool same_ngram(const int32_t *tokens, int32_t a, int32_t b, int32_t len) {
    return a == b || memcmp(tokens + a - len, tokens + b - len, (size_t)len * sizeof *tokens) == 0;
}

/* Doubles t (or gives it its first slots), re-placing every occupied slot. On failure t is
 * unchanged and false is returned. */
static bool table_grow(ngram_table *t, size_t cap) {
    ngram_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL) {
        return false;
    }
    size_t mask = cap - 1;
    for (size_t i = 0; i < t->cap; i++) {
        ngram_slot s = t->slots[i];
        if (s.end == 0) {
            continue;
        }
        size_t j = s.hash & mask;
        while (slots[j].end != 0) {
            j = (j + 1) & mask;
        }
        slots[j] = s;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

/* Records that the n-gram tokens[e-len..e), of hash h, ends at e: overwrites the end of the
 * slot holding that content or takes a new one. The caller has made room: after the
 * insertion count <= cap / 2. */
static void table_insert(ngram_table *t, const int32_t *tokens, int32_t len, int32_t e,
                         uint32_t h) {
    assert((t->count + 1) * 2 <= t->cap);
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        ngram_slot *s = &t->slots[i];
        if (s->end == 0) {
            s->hash = h;
            s->end = e;
            t->count++;
            return;
        }
        if (s->hash == h && same_ngram(tokens, s->end, e, len)) {
            s->end = e;
            return;
        }
    }
}

/* The latest end e <= indexed of the n-gram tokens[n-len..n), of hash h; 0 when absent. */
static int32_t table_find(const ngram_table *t, const int32_t *tokens, int32_t len, int32_t n,
                          uint32_t h) {
    if (t->cap == 0) {
        return 0;
    }
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const ngram_slot *s = &t->slots[i];
        if (s->end == 0) {
            return 0;
        }
        if (s->hash == h && same_ngram(tokens, s->end, n, len)) {
            return s->end;
        }
    }
}

ts_status ts_ngram_create(int32_t n_min, int32_t n_max, ts_ngram **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ngram drafter: out is NULL");
    }
    *out = NULL;
    if (n_min < 1 || n_max < n_min || n_max > TS_NGRAM_MAX_N) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "ngram drafter: n-gram lengths n_min %d .. n_max %d are out of range "
                            "(need 1 <= n_min <= n_max <= %d)",
                            (int)n_min, (int)n_max, TS_NGRAM_MAX_N);
    }
    ts_ngram *x = calloc(1, sizeof *x);
    ngram_table *tables = calloc((size_t)(n_max - n_min + 1), sizeof *tables);
    if (x == NULL || tables == NULL) {
        free(x);
        free(tables);
        return ts_error_set(err, TS_ERR_NOMEM,
                            "ngram drafter: cannot allocate the index for lengths %d..%d",
                            (int)n_min, (int)n_max);
    }
    x->n_min = n_min;
    x->n_max = n_max;
    x->indexed = 0;
    x->hash_mask = UINT32_MAX;
    x->tables = tables;
    *out = x;
    return TS_OK;
}

void ts_ngram_destroy(ts_ngram *x) {
    if (x == NULL) {
        return;
    }
    for (int32_t l = x->n_min; l <= x->n_max; l++) {
        free(x->tables[l - x->n_min].slots);
    }
    free(x->tables);
    free(x);
}

void ts_ngram_reset(ts_ngram *x) {
    if (x == NULL) {
        return;
    }
    for (int32_t l = x->n_min; l <= x->n_max; l++) {
        ngram_table *t = &x->tables[l - x->n_min];
        if (t->count > 0) {
            memset(t->slots, 0, t->cap * sizeof *t->slots);
            t->count = 0;
        }
    }
    x->indexed = 0;
}

/* The capacity t grows to when k more n-grams are coming: room for all of them even if every
 * one is new, so that a long prompt costs one growth instead of a doubling cascade. */
static size_t room(const ngram_table *t, size_t k) {
    size_t cap = t->cap == 0 ? NGRAM_TABLE_MIN : t->cap * 2;
    while (cap < (t->count + k) * 2) {
        cap *= 2;
    }
    return cap;
}

/* Positions indexed together: their slots are prefetched one length at a time before any is
 * written, so that the cache misses of a table larger than the cache overlap. */
#define NGRAM_BLOCK 16

/* Indexes the n-grams ending at x->indexed + 1 .. last, NGRAM_BLOCK positions at a time and,
 * within a block, one length after the other (each table still sees its positions in
 * increasing order). False when a table could not grow; x->indexed then stops before the
 * block that failed. Inserting that block again later is harmless: each table receives its
 * positions again in increasing order, so every slot ends with its latest end. */
static bool index_to(ts_ngram *x, const int32_t *tokens, int32_t last) {
    uint32_t h[NGRAM_BLOCK][TS_NGRAM_MAX_N + 1];
    while (x->indexed < last) {
        int32_t first = x->indexed + 1;
        int32_t nb = last - x->indexed < NGRAM_BLOCK ? last - x->indexed : NGRAM_BLOCK;
        for (int32_t b = 0; b < nb; b++) {
            int32_t e = first + b;
            ngram_hashes(tokens, e, e < x->n_max ? e : x->n_max, x->hash_mask, h[b]);
        }
        for (int32_t l = x->n_min; l <= x->n_max; l++) {
            ngram_table *t = &x->tables[l - x->n_min];
            /* Room for the whole block first, so that the prefetched slots stay in place. */
            if ((t->count + (size_t)nb) * 2 > t->cap &&
                !table_grow(t, room(t, (size_t)(last - x->indexed)))) {
                return false;
            }
            size_t mask = t->cap - 1;
            for (int32_t b = 0; b < nb; b++) {
                if (first + b >= l) {
                    __builtin_prefetch(&t->slots[h[b][l] & mask], 1);
                }
            }
            for (int32_t b = 0; b < nb; b++) {
                if (first + b >= l) {
                    table_insert(t, tokens, l, first + b, h[b][l]);
                }
            }
        }
        x->indexed += nb;
    }
    return true;
}

int32_t ts_ngram_propose(ts_ngram *x, const int32_t *tokens, int32_t n, int32_t *out, int32_t max) {
    if (x == NULL || n < 0 || (n > 0 && tokens == NULL)) {
        return 0;
    }
    /* The occurrences that may be proposed end at e <= n - 1. */
    int32_t last = n - 1;
    if (last < x->indexed) {
        ts_ngram_reset(x);
    }
    if (!index_to(x, tokens, last)) {
        return 0;
    }
    if (max <= 0 || out == NULL) {
        return 0;
    }
    /* An earlier occurrence of length L ends at e >= L with e <= n - 1, so L <= n - 1. */
    int32_t top = last < x->n_max ? last : x->n_max;
    if (top < x->n_min) {
        return 0;
    }
    uint32_t h[TS_NGRAM_MAX_N + 1];
    ngram_hashes(tokens, n, top, x->hash_mask, h);
    for (int32_t l = top; l >= x->n_min; l--) {
        int32_t e = table_find(&x->tables[l - x->n_min], tokens, l, n, h[l]);
        if (e > 0) {
            int32_t count = n - e < max ? n - e : max;
            memcpy(out, tokens + e, (size_t)count * sizeof *out);
            return count;
        }
    }
    return 0;
}

void ts_ngram_weaken_hash(ts_ngram *x, int32_t bits) {
    ts_ngram_reset(x);
    x->hash_mask = bits >= 32 ? UINT32_MAX : bits <= 0 ? 0u : (1u << bits) - 1u;
}
