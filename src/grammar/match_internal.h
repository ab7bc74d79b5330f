/*
 * match_internal.h — the matcher's tables, shared by match.c (states, closure, steps) and
 * mask.c (token masks over the vocabulary trie). Not a public interface; see match.c for the
 * algorithm and docs/grammar.md for the design.
 */
#ifndef TS_GRAMMAR_MATCH_INTERNAL_H
#define TS_GRAMMAR_MATCH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/grammar_impl.h"

#define NODE_LIMIT  (1u << 21)
#define STATE_LIMIT (1u << 19)
#define TR_LIMIT    (1u << 21)
#define SENTINEL    0u /* node 0: the empty stack */
#define REJECT      (-1)
#define UNKNOWN     INT32_MIN  /* a dense row's entry not computed yet */
#define ROW_HOT     16         /* lookups from a state before it gets a dense row */
#define ROW_LIMIT   (1u << 14) /* dense rows per matcher (16 MiB) */
#define MASK_CACHE  8

typedef struct gnode {
    uint32_t pos;    /* element index of this entry */
    uint32_t parent; /* node below it; SENTINEL at the bottom */
    uint32_t next;   /* hash chain */
} gnode;

/* What run_of knows of a state (for one set of characters). */
typedef struct grun {
    uint16_t run;   /* RUN_INF: no bound */
    uint8_t known;  /* run is set (for the set `key` names) */
    uint8_t closed; /* and no longer string of those characters is allowed */
    uint32_t key;   /* 0: string characters; c + 1: the ASCII characters of class c */
} grun;

typedef struct gstate {
    uint32_t off, n; /* sets[off .. off + n]: sorted node ids */
    uint32_t utf8;   /* pending UTF-8: need | len << 2 | acc << 5; 0 = none */
    uint32_t hash;
    uint32_t next; /* hash chain */
    int32_t row;   /* this state's dense transition row in m->rows, or -1 */
    uint32_t hits; /* transitions looked up from this state (a row comes when it is hot) */
    uint8_t uni;   /* UNI_*: how the stacks' classes treat non-ASCII code points */
    uint8_t loop_known;
    grun run[2];   /* run_of's results: string characters, and the last class set asked */
    uint32_t mark; /* run_of's walk that visited this state */
    uint64_t loop; /* ASCII byte pairs (bit b >> 1) that lead back to this state; 0 unless
                      every non-ASCII character does too */
} gstate;

#define RUN_INF 0xFFFFu

/* gstate.uni: not computed yet; some class depends on the code point; every class treats all
 * non-ASCII code points alike (and at least one matches them, or none does). */
#define UNI_UNKNOWN 0
#define UNI_MIXED   1
#define UNI_ALL     2
#define UNI_NONE    3

struct ts_gmatch {
    const ts_grammar *g;
    gnode *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_head; /* [node_mask + 1] chain heads, UINT32_MAX = empty */
    uint32_t node_mask;
    uint32_t *stamp; /* [cap_stamp] the closure generation that queued the node */
    uint32_t cap_stamp, gen;
    gstate *states;
    uint32_t n_states, cap_states;
    uint32_t *sets;
    size_t n_sets, cap_sets;
    uint32_t *state_head;
    uint32_t state_mask;
    uint64_t *tr_key; /* (state << 8 | byte) + 1; 0 = empty */
    int32_t *tr_val;
    uint32_t tr_mask, n_tr;
    uint32_t cur;
    uint32_t *work, cap_work;
    uint32_t *out, n_out, cap_out;
    uint32_t *dstate, cap_dstate; /* mask: state at each trie depth */
    uint64_t *dloop;              /* mask: that state's loop set (loop_of) */
    uint8_t *dpath;               /* mask: the path to that depth is all string characters */
    size_t cap_dloop;
    int32_t *rows; /* [n_rows * 256] dense transitions of hot states */
    uint32_t n_rows, cap_rows;
    /* The last masks computed, by state (valid until the tables are rebuilt): a sequence that
     * comes back to a state (inside a string, between list items) copies its mask. */
    uint32_t *mc_bits;            /* [MASK_CACHE][mc_words] */
    size_t mc_words;              /* words per mask; 0: no cache yet */
    const ts_gvocab *mc_vocab;    /* the vocabulary the cached masks are for */
    int32_t mc_state[MASK_CACHE]; /* -1: empty slot */
    int32_t mc_count[MASK_CACHE];
    uint64_t mc_used[MASK_CACHE], mc_clock;
    uint32_t *chain, cap_chain; /* run_of's states */
    uint32_t run_gen;
    bool failed; /* an allocation failed: refuse everything */
    bool limit;  /* the last closure passed TS_GRAMMAR_MAX_CLOSURE or TS_GRAMMAR_MAX_STACKS */
    /* Closure work a token mask may still do (TS_GRAMMAR_MAX_MASK_WORK at its start);
     * UINT64_MAX outside a mask. */
    uint64_t mask_left;
    bool over;    /* the mask's work ran out: its steps are not cached and it is given up */
    bool gave_up; /* the last mask was given up so (ts_gmatch_mask_gave_up) */
};

/* tg_advance_cp's cp for "any non-ASCII character, through the classes that take them all". */
#define CP_ANY_NONASCII UINT32_MAX

/* ---- match.c ------------------------------------------------------------------------------ */

/* Grows *p (elements of sz bytes) to hold need; false (m->failed set) when out of memory. */
bool tg_mgrow(ts_gmatch *m, void **p, uint32_t *cap, size_t need, size_t sz);
/* The state after code point cp (or CP_ANY_NONASCII) completes in state s; REJECT when none. */
int32_t tg_advance_cp(ts_gmatch *m, uint32_t s, uint32_t cp);
/* How state s's classes treat non-ASCII code points (UNI_*), computed once per state. */
uint8_t tg_uniform(ts_gmatch *m, uint32_t s);
/* The state after byte b in state s, computed and cached; REJECT when refused. */
int32_t tg_step_slow(ts_gmatch *m, uint32_t s, uint8_t b);
/* Rebuilds the tables from the current state when they have grown past their limits. */
void tg_maybe_compact(ts_gmatch *m);
/* State s is a complete sentence (no pending UTF-8, the empty stack present). */
bool tg_accepting(const ts_gmatch *m, uint32_t s);

/* The state after byte b in state s, or REJECT. A hot state's transitions sit in a dense row
 * (one load); the others in the hash table. */
static inline int32_t tg_step(ts_gmatch *m, uint32_t s, uint8_t b) {
    int32_t row = m->states[s].row;
    if (row >= 0) {
        int32_t v = m->rows[(size_t)row * 256 + b];
        if (v != UNKNOWN) {
            return v;
        }
    }
    return tg_step_slow(m, s, b);
}

#endif /* TS_GRAMMAR_MATCH_INTERNAL_H */
