/*
 * grammar_impl.h — the compiled form of a grammar, shared by the GBNF reader (gbnf.c,
 * gcheck.c), the matcher (match.c) and the mask computer (mask.c). Not a public interface.
 *
 * A grammar is a set of rules; a rule is a list of alternatives; an alternative is a sequence
 * of elements ending in an END element. All alternatives of all rules live in one array of
 * 32-bit elements (elems), so a parser position is one index into it:
 *
 *     elems:      [CLASS 3][REF 1][END] [CLASS 0][END] ...      type in the top 2 bits
 *     alt_start:  index in elems of each alternative's first element
 *     rule_alt:   rule r's alternatives are alt_start[rule_alt[r] .. rule_alt[r + 1]]
 *
 * Terminals are character classes over Unicode code points (a string literal is one class per
 * character): sorted, merged, disjoint ranges plus a negation flag, with a 128-bit bitmap that
 * answers ASCII (the negation already applied). Surrogates (U+D800..U+DFFF) never match: they
 * cannot occur in valid UTF-8.
 *
 * Invariants a compiled grammar satisfies (gcheck.c proves them before the grammar is used):
 * every referenced rule is defined; every rule can derive a finite string (productive); no
 * rule reaches itself through a left-recursive path that needs a stack push (a left-edge
 * cycle that is not made only of tail calls), so the matcher's closure always terminates.
 */
#ifndef TS_GRAMMAR_IMPL_H
#define TS_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

/* Element encoding. */
#define GE_END        0u
#define GE_CLASS      1u
#define GE_REF        2u
#define GE_ALT        3u /* only inside the reader: separates alternatives of a rule body */
#define GE_TYPE(e)    ((e) >> 30)
#define GE_VAL(e)     ((e)&0x3fffffffu)
#define GE_MAKE(t, v) (((uint32_t)(t) << 30) | (uint32_t)(v))

/* Limits on untrusted grammars (all reported as TS_ERR_LIMIT with the line:col). */
#define TS_GRAMMAR_MAX_TEXT   (8u << 20) /* bytes of GBNF text */
#define TS_GRAMMAR_MAX_ELEMS  (4u << 20) /* elements after expanding repetitions */
#define TS_GRAMMAR_MAX_RULES  (1u << 20) /* rules incl. those made for groups/repetitions */
#define TS_GRAMMAR_MAX_REPEAT 10000u     /* m and n of {m,n} */
#define TS_GRAMMAR_MAX_NEST   256u       /* nesting depth of parentheses */
#define TS_GRAMMAR_MAX_STACKS 4096u      /* live parser stacks in one matcher state */
/* The matcher's work bounds, so that no grammar makes a step or a mask slow: a closure may
 * visit TS_GRAMMAR_MAX_CLOSURE stack nodes and rule alternatives (nested nullable repetitions such
 * as sp++++, or a rule of many alternatives referenced from many places, explode it), and one
 * token mask may do TS_GRAMMAR_MAX_MASK_WORK of that work in all (about a quarter of a second),
 * past which the mask is given up and the output stopped with the limit's message. The fuzz
 * harness builds with smaller values (tests/fuzz/CMakeLists.txt) to reach the limits often. */
#ifndef TS_GRAMMAR_MAX_CLOSURE
#define TS_GRAMMAR_MAX_CLOSURE 262144u
#endif
#ifndef TS_GRAMMAR_MAX_MASK_WORK
#define TS_GRAMMAR_MAX_MASK_WORK (1ull << 25)
#endif

typedef struct gclass {
    uint32_t ascii[4]; /* bit c set: code point c < 128 matches (negation applied) */
    uint32_t off;      /* ranges[2 * off ..] holds n (lo, hi) pairs, sorted and disjoint */
    uint32_t n;
    uint32_t neg; /* 1: the class matches code points outside the ranges */
    /* How the class treats non-ASCII code points: GCLASS_NONE / GCLASS_ALL match none / all of
     * them alike, GCLASS_MIXED depends on the code point. */
    uint32_t uni;
} gclass;

#define GCLASS_NONE  0u
#define GCLASS_ALL   1u
#define GCLASS_MIXED 2u

struct ts_grammar {
    uint32_t *elems; /* [n_elems] */
    uint32_t n_elems;
    uint32_t *alt_start; /* [n_alts] */
    uint32_t n_alts;
    uint32_t *rule_alt; /* [n_rules + 1] */
    uint32_t n_rules;
    gclass *classes; /* [n_classes] */
    uint32_t n_classes;
    uint32_t *ranges; /* [2 * n_ranges] */
    uint32_t n_ranges;
    uint32_t root; /* the start rule */
};

/* A code point matches class c (cp <= 0x10FFFF). */
static inline bool gclass_match(const gclass *c, const uint32_t *ranges, uint32_t cp) {
    if (cp < 128) {
        return (c->ascii[cp >> 5] >> (cp & 31)) & 1u;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) {
        return false;
    }
    const uint32_t *r = ranges + 2 * (size_t)c->off;
    uint32_t lo = 0, hi = c->n;
    while (lo < hi) { /* first range whose hi >= cp */
        uint32_t mid = (lo + hi) / 2;
        if (r[2 * mid + 1] < cp) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    bool in = lo < c->n && r[2 * lo] <= cp;
    return in != (c->neg != 0);
}

/* Some code point in [lo, hi] (no surrogates, lo >= 128) matches class c. */
bool tg_gclass_intersects(const gclass *c, const uint32_t *ranges, uint32_t lo, uint32_t hi);

/* The reader's checks and the final layout: gcheck.c. body[r] holds rule r's elements with
 * GE_ALT between alternatives (no END); name_of(r) names a rule for errors. */
typedef struct gbuild_rule {
    uint32_t *body;
    uint32_t n, cap;
    uint32_t origin; /* the user rule this one was made for (itself for user rules) */
    char *name;      /* user rules only; NULL for synthesized ones */
    bool defined;
    uint32_t def_line, def_col, ref_line, ref_col; /* where defined / first referenced */
} gbuild_rule;

#define TS_GVOCAB_SLICES  16
#define TS_GVOCAB_KSLICES 64

/* The vocabulary (vocab.c): every token's bytes, and a byte trie of the tokens in preorder so
 * the mask is one forward scan. Node 0 is the root (the empty prefix). Node i > 0 adds byte[i]
 * to its parent's prefix, sits at depth[i] (its prefix length), and its subtree ends just
 * before node skip[i]; the tokens whose bytes are exactly node i's prefix are
 * tok[tok_off[i] .. tok_off[i + 1]]. Tokens with no bytes (special / control) and eog tokens
 * are not in the trie. */
struct ts_gvocab {
    int32_t n_vocab;
    char *bytes;     /* all pieces, concatenated */
    uint64_t *off;   /* [n_vocab + 1] piece i is bytes[off[i] .. off[i + 1]] */
    uint8_t *is_eog; /* [n_vocab] */
    int32_t *eog;    /* [n_eog] */
    int32_t n_eog;
    uint32_t n_nodes;
    uint8_t *byte;     /* [n_nodes] */
    uint16_t *depth;   /* [n_nodes] */
    uint32_t *skip;    /* [n_nodes] */
    uint32_t *tok_off; /* [n_nodes + 1] */
    int32_t *tok;      /* tokens in trie order */
    uint32_t max_depth;
    /* For accepting whole subtrees at once (match.c): the ASCII bytes anywhere in node i's
     * subtree, byte b as bit b >> 1; VF_* flags; and the subtree's height (the longest token
     * below node i is depth[i] - 1 + height[i] bytes long). */
    uint64_t *sig;    /* [n_nodes] */
    uint64_t *sig2;   /* [2 * n_nodes] the same bytes exactly: bit b of word b >> 6 */
    uint8_t *flags;   /* [n_nodes] */
    uint16_t *height; /* [n_nodes] */
    /* String slices: slice k is the set of tokens made only of string characters (see
     * gstr_byte) that are valid UTF-8 so far and at most slice_len[k] characters long (a
     * trailing incomplete character counted), as a bitmap over the vocabulary. A state that
     * takes every string of string characters up to L long allows slice L with a few word ORs
     * instead of visiting its tokens one by one. */
    uint32_t *slice_bits; /* [n_slices][(n_vocab + 31) / 32] */
    uint16_t slice_len[TS_GVOCAB_SLICES];
    int n_slices;
    /* The same tokens by length in characters: str_tok[str_off[l] .. str_off[l + 1]]. */
    int32_t *str_tok;
    uint32_t *str_off; /* [str_max + 2] */
    uint32_t str_max;  /* the longest (0: none) */
    /* Slices of other ASCII sets (class slices), made when a mask first needs them and kept
     * (read by every thread masking over this vocabulary; made under the lock). */
    pthread_mutex_t klock;
    struct gkslice *kslices[TS_GVOCAB_KSLICES];
    int n_kslices;
    bool klock_made;
};

/* A class slice: the tokens whose bytes all lie in the ASCII set set[], as bitmaps of those
 * at most len[k] bytes long, and listed by length (tok[off[l] .. off[l + 1]] are l long). */
typedef struct gkslice {
    uint64_t set[2];
    uint32_t max; /* the longest such token */
    int n;
    uint16_t len[4];
    uint32_t *bits; /* [n][(n_vocab + 31) / 32] */
    int32_t *tok;
    uint32_t *off; /* [max + 2] */
} gkslice;

/* The class slice of set[] (made now if new); NULL when out of memory or the cache is full. */
const gkslice *ts_gvocab_kslice(ts_gvocab *v, const uint64_t set[2]);

/* vocab flags: every path from node i down is valid UTF-8 so far when it starts at a character
 * boundary; and, besides, made only of string characters. */
#define VF_CLEAN 1u
#define VF_STRC  2u
#define VF_ASCII 4u /* every byte below node i is ASCII */

/* String characters: what a JSON string takes unescaped, [^"\\\x00-\x1F], less DEL (which
 * JSON allows but llama.cpp's json.gbnf leaves out, so that both kinds of grammar qualify).
 * Every non-ASCII byte counts as one (UTF-8 validity is checked apart). */
static inline bool gstr_byte(uint8_t b) {
    return b >= 0x20 && b != '"' && b != '\\' && b != 0x7F;
}

/* Builds g's start state (match.c): TS_ERR_LIMIT naming the matcher's bounds when it passes
 * them (root names the start rule in the message), TS_ERR_NOMEM when out of memory. */
ts_status tg_gmatch_check_start(const ts_grammar *g, const char *root, ts_error *err);

ts_status ts_grammar_check_and_build(gbuild_rule *rules, uint32_t n_rules, uint32_t root,
                                     gclass *classes, uint32_t n_classes, uint32_t *ranges,
                                     uint32_t n_ranges, ts_grammar **out, ts_error *err);

#endif /* TS_GRAMMAR_IMPL_H */
