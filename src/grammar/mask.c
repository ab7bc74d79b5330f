/*
 * mask.c — token masks: which tokens of the vocabulary may come next in a matcher's state
 * (ts_gmatch_mask). One forward scan of the vocabulary's byte trie (vocab.c) steps the matcher
 * per trie node; shortcuts allow whole subtrees (loops), string and class slices at once (runs).
 * docs/grammar.md ("Masks") describes them and why each only allows what the matcher accepts.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "grammar/match_internal.h"

/* The ASCII byte pairs that lead from state s back to s, when every non-ASCII character does
 * too (else 0). A trie subtree whose bytes all loop and are valid UTF-8 is allowed as a whole:
 * every path through it stays in s (or in s's canonical pending-UTF-8 states). */
static uint64_t loop_of(ts_gmatch *m, uint32_t s) {
    if (m->states[s].loop_known) {
        return m->states[s].loop;
    }
    uint64_t loop = 0;
    if (m->states[s].utf8 == 0 && tg_uniform(m, s) == UNI_ALL) {
        int32_t a = tg_step(m, s, 0xC3);
        if (a >= 0 && tg_step(m, (uint32_t)a, 0xA9) == (int32_t)s) { /* U+00E9 stands for all */
            for (uint32_t j = 0; j < 64; j++) {
                if (tg_step(m, s, (uint8_t)(2 * j)) == (int32_t)s &&
                    tg_step(m, s, (uint8_t)(2 * j + 1)) == (int32_t)s) {
                    loop |= 1ull << j;
                }
            }
        }
    }
    if (m->failed) {
        return 0;
    }
    m->states[s].loop = loop;
    m->states[s].loop_known = 1;
    return loop;
}

/* ---- string runs ---------------------------------------------------------------------------- */

#define RUN_STATES 4096u /* states one run_of search may visit */
#define RUN_WORK                                                                                   \
    65536u /* and stacks times groups it may step (an ambiguous pattern such as                    \
              .*(Red|Blue|...).* makes many large states) */

/* The characters a run is made of: the string characters (key 0, set = their ASCII part), or
 * the ASCII characters of class key - 1. */
typedef struct runset {
    uint64_t set[2];
    uint32_t key;
} runset;

static const runset STRING_RUNS = {{0xFFFFFFFB00000000ull, 0x7FFFFFFFEFFFFFFFull}, 0};
#define RUN_NONASCII 0u /* an atom's representative: any non-ASCII character (U+00E9) */

/* The characters of rs (the string characters, gstr_byte, or a class's ASCII set) that state
 * s takes, grouped by which of its classes take them: each group (atom) leads to one state,
 * whatever character of it comes. Writes the groups' representatives (RUN_NONASCII for the
 * non-ASCII characters) to rep and returns how many there are; 0 when some string character is
 * refused (or s is too varied to say), -1 when every one is. *mixed: some class takes some
 * non-ASCII characters and not others (the non-ASCII group then stands for what the classes taking
 * all of them do). */
static int string_atoms(ts_gmatch *m, uint32_t s, const runset *rs, uint8_t rep[97], bool *mixed) {
    const ts_grammar *g = m->g;
    const gstate *st = &m->states[s];
    uint32_t cls[64];
    int nc = 0;
    for (uint32_t k = 0; k < st->n; k++) {
        uint32_t id = m->sets[st->off + k];
        if (id == SENTINEL) {
            continue;
        }
        uint32_t c = GE_VAL(g->elems[m->nodes[id].pos]);
        int j = 0;
        while (j < nc && cls[j] != c) {
            j++;
        }
        if (j == nc) {
            if (nc == 64) {
                return 0;
            }
            cls[nc++] = c;
        }
    }
    uint64_t sig[97];
    int n = 0;
    bool some = false, all = true;
    for (int b = 0x20; b < 0x80; b++) {
        if (!(rs->set[b >> 6] >> (b & 63) & 1u)) {
            continue;
        }
        uint64_t x = 0;
        for (int j = 0; j < nc; j++) {
            if (g->classes[cls[j]].ascii[b >> 5] >> (b & 31) & 1u) {
                x |= 1ull << j;
            }
        }
        if (x == 0) {
            all = false;
            continue;
        }
        some = true;
        int a = 0;
        while (a < n && sig[a] != x) {
            a++;
        }
        if (a == n) {
            sig[n] = x;
            rep[n++] = (uint8_t)b;
        }
    }
    uint64_t x = 0;
    *mixed = false;
    if (rs->key != 0) { /* a class set: ASCII only */
        return n > 0 && all ? n : some ? 0 : -1;
    }
    for (int j = 0; j < nc; j++) {
        uint32_t u = g->classes[cls[j]].uni;
        if (u == GCLASS_MIXED) {
            *mixed = true;
            some = true;
        }
        if (u == GCLASS_ALL) {
            x |= 1ull << j;
        }
    }
    if (x == 0) {
        return some ? 0 : -1;
    }
    if (!all) {
        return 0;
    }
    rep[n++] = RUN_NONASCII;
    return n;
}

/* The state after one character of an atom from boundary state s, or REJECT. With classes
 * that treat non-ASCII characters differently (mixed), the non-ASCII atom follows only the
 * stacks that take them all: a state with fewer stacks, whose language is contained in the
 * real one's, so the runs found from it are still lower bounds (barring the matcher's stack
 * limit, past which the real state is refused). */
static int32_t atom_step(ts_gmatch *m, uint32_t s, uint8_t rep, bool mixed) {
    if (rep != RUN_NONASCII) {
        return tg_step(m, s, rep);
    }
    if (mixed) { /* through the stacks whose class takes every non-ASCII character */
        return tg_advance_cp(m, s, CP_ANY_NONASCII);
    }
    int32_t a = tg_step(m, s, 0xC3);
    return a < 0 ? REJECT : tg_step(m, (uint32_t)a, 0xA9);
}

static void run_set(ts_gmatch *m, uint32_t s, const runset *rs, uint32_t r, bool closed) {
    m->states[s].run[rs->key != 0] = (grun){.run = (uint16_t)(r < RUN_INF ? r : RUN_INF),
                                            .known = 1,
                                            .closed = closed && r < RUN_INF,
                                            .key = rs->key};
}

/* What state s knows of runs of rs; NULL when nothing. */
static const grun *run_known(const ts_gmatch *m, uint32_t s, const runset *rs) {
    const grun *r = &m->states[s].run[rs->key != 0];
    return r->known && r->key == rs->key ? r : NULL;
}

/* How many string characters state s takes for sure: every string of string characters at
 * most that long is a prefix the grammar allows from s (RUN_INF: any length, as inside an
 * unbounded string). It is the distance from s to the nearest state that refuses some string
 * character, over the atoms' transitions: a breadth-first search, cut after `need` levels,
 * RUN_STATES states or RUN_WORK work (the bound is then a lower one). States the search meets that
 * already know their run end their path there. Boundary states only (0 while a UTF-8 character is
 * pending). Besides s, the states it passed learn their runs when that is exact: all of them when s
 * has no bound, and each state of a single chain (a bounded string: every character leads to the
 * same next state) its distance to the end. Such a chain is closed when it ends in a state
 * that refuses every string character: then no longer string is allowed either. */
static uint32_t run_of(ts_gmatch *m, uint32_t s, const runset *rs, uint32_t need) {
    const grun *known = run_known(m, s, rs);
    if (known) {
        return known->run;
    }
    if (m->states[s].utf8 != 0) {
        run_set(m, s, rs, 0, false);
        return 0;
    }
    if (++m->run_gen == 0) {
        for (uint32_t k = 0; k < m->n_states; k++) {
            m->states[k].mark = 0;
        }
        m->run_gen = 1;
    }
    uint32_t n = 0, head = 0, level_end = 1, level = 0;
    uint32_t best = RUN_INF; /* the least path length found to a refusing or known state */
    bool chain = true, cut = false, closed = false;
    uint64_t work = 0;
    if (!tg_mgrow(m, (void **)&m->chain, &m->cap_chain, 1, sizeof *m->chain)) {
        return 0;
    }
    m->chain[n++] = s;
    m->states[s].mark = m->run_gen;
    while (head < n && level < best) {
        if (head == level_end) { /* the next level starts */
            level++;
            level_end = n;
            if (level >= best) {
                break;
            }
            if (level > need) {
                cut = true;
                best = level;
                break;
            }
        }
        uint32_t x = m->chain[head++];
        if (x != s && (known = run_known(m, x, rs)) != NULL) {
            if (known->run != RUN_INF && level + known->run < best) {
                best = level + known->run;
                closed = known->closed;
            }
            continue;
        }
        uint8_t rep[97];
        bool mixed;
        int na = string_atoms(m, x, rs, rep, &mixed);
        if (na <= 0) {
            best = level;
            closed = na < 0;
            break;
        }
        work += (uint64_t)na * m->states[x].n;
        if (work > RUN_WORK) { /* this level is not all looked at: as RUN_STATES */
            cut = true;
            best = level;
            break;
        }
        int32_t y0 = REJECT;
        if (mixed) { /* the non-ASCII step is a lower bound only: the chain proves no closure */
            chain = false;
        }
        for (int a = 0; a < na; a++) {
            int32_t y = atom_step(m, x, rep[a], mixed);
            if (m->failed) {
                return 0;
            }
            if (y < 0) { /* past the matcher's limits: treat as refused */
                best = level;
                chain = false;
                break;
            }
            if (a == 0) {
                y0 = y;
            } else if (y != y0) {
                chain = false;
            }
            gstate *ys = &m->states[y];
            if (ys->mark == m->run_gen) {
                continue;
            }
            if (n >= RUN_STATES) { /* the states of this level are not all looked at */
                cut = true;
                if (level < best) {
                    best = level;
                }
                break;
            }
            ys->mark = m->run_gen;
            if (!tg_mgrow(m, (void **)&m->chain, &m->cap_chain, (size_t)n + 1, sizeof *m->chain)) {
                return 0;
            }
            m->chain[n++] = (uint32_t)y;
        }
    }
    closed = closed && chain && !cut;
    run_set(m, s, rs, best, closed);
    if (best == RUN_INF && !cut) {
        for (uint32_t k = 1; k < n; k++) {
            run_set(m, m->chain[k], rs, RUN_INF, false);
        }
    } else if (chain && best != RUN_INF) {
        /* chain[k] is k steps along: best - k, recorded where it is not needlessly small */
        for (uint32_t k = 1; k < n && k < best; k++) {
            if (!run_known(m, m->chain[k], rs) && (!cut || 2 * k <= best)) {
                run_set(m, m->chain[k], rs, best - k, closed);
            }
        }
    }
    return best;
}

/* The run set of state s's widest class: its printable ASCII characters but the quote (a
 * pattern's identifier characters, hex digits, ...); false when s has none wide enough. */
static bool class_runset(const ts_gmatch *m, uint32_t s, runset *rs) {
    const ts_grammar *g = m->g;
    const gstate *st = &m->states[s];
    int best = 3; /* at least 4 characters */
    for (uint32_t k = 0; k < st->n; k++) {
        uint32_t id = m->sets[st->off + k];
        if (id == SENTINEL) {
            continue;
        }
        uint32_t c = GE_VAL(g->elems[m->nodes[id].pos]);
        const uint32_t *a = g->classes[c].ascii;
        uint64_t lo = ((uint64_t)a[1] << 32 | a[0]) & 0xFFFFFFFB00000000ull;
        uint64_t hi = ((uint64_t)a[3] << 32 | a[2]) & 0x7FFFFFFFFFFFFFFFull;
        int n = 0;
        for (uint64_t x = lo; x; x &= x - 1) {
            n++;
        }
        for (uint64_t x = hi; x; x &= x - 1) {
            n++;
        }
        if (n > best) {
            best = n;
            *rs = (runset){{lo, hi}, c + 1};
        }
    }
    return rs->key != 0;
}

/* ORs into allowed the longest slice (bits[k], the tokens at most len[k] long; the longest
 * token is max long) within run; returns its length (0: none). When the run is closed, the
 * tokens longer than that slice and at most run long come from the by-length list (tok[off[l]
 * .. off[l + 1]] are l long). *all: every token of the slices is now decided. */
static uint32_t allow_slices(uint32_t *allowed, size_t words, const uint32_t *bits,
                             const uint16_t *len, int n, uint32_t max, const int32_t *tok,
                             const uint32_t *off, uint32_t run, bool closed, bool *all) {
    uint32_t got = 0;
    int k = n;
    while (k > 0 && len[k - 1] > run) {
        k--;
    }
    if (k > 0) {
        const uint32_t *sb = bits + (size_t)(k - 1) * words;
        for (size_t w = 0; w < words; w++) {
            allowed[w] |= sb[w];
        }
        got = len[k - 1];
    }
    *all = got == max;
    if (!*all && closed) {
        uint32_t hi = run < max ? run : max;
        for (uint32_t q = off[got + 1]; q < off[hi + 1]; q++) {
            allowed[tok[q] >> 5] |= 1u << (tok[q] & 31);
        }
        *all = true;
    }
    return got;
}

/* Set bits of a mask (a portable population count). */
static int32_t mask_count(const uint32_t *bits, size_t words) {
    int32_t n = 0;
    for (size_t w = 0; w < words; w++) {
        uint32_t x = bits[w];
        x = x - ((x >> 1) & 0x55555555u);
        x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
        x = (x + (x >> 4)) & 0x0F0F0F0Fu;
        n += (int32_t)((x * 0x01010101u) >> 24);
    }
    return n;
}

static int32_t mask_walk(ts_gmatch *m, const ts_gvocab *v, uint32_t *allowed);

int32_t ts_gmatch_mask(ts_gmatch *m, const ts_gvocab *v, uint32_t *allowed) {
    if (!m || !v || !allowed) {
        return 0;
    }
    memset(allowed, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *allowed);
    if (m->failed) {
        return 0;
    }
    tg_maybe_compact(m);
    m->mask_left = TS_GRAMMAR_MAX_MASK_WORK;
    m->over = false;
    int32_t count = mask_walk(m, v, allowed);
    m->mask_left = UINT64_MAX;
    m->gave_up = m->over;
    if (m->over) { /* given up: nothing allowed, and the limit says why */
        m->over = false;
        m->limit = true;
        memset(allowed, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *allowed);
        return 0;
    }
    return count;
}

/* ts_gmatch_mask's work under its budget: the cached masks first, then the trie walk. */
static int32_t mask_walk(ts_gmatch *m, const ts_gvocab *v, uint32_t *allowed) {
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    if (m->mc_vocab != v || m->mc_words != words) { /* another vocabulary: start over */
        free(m->mc_bits);
        m->mc_bits = malloc(MASK_CACHE * words * sizeof *m->mc_bits);
        m->mc_words = m->mc_bits ? words : 0;
        m->mc_vocab = v;
        for (int k = 0; k < MASK_CACHE; k++) {
            m->mc_state[k] = -1;
        }
    }
    for (int k = 0; k < MASK_CACHE && m->mc_words; k++) {
        if (m->mc_state[k] == (int32_t)m->cur) {
            memcpy(allowed, m->mc_bits + (size_t)k * words, words * sizeof *allowed);
            m->mc_used[k] = ++m->mc_clock;
            return m->mc_count[k];
        }
    }
    if (!tg_mgrow(m, (void **)&m->dstate, &m->cap_dstate, (size_t)v->max_depth + 1,
                  sizeof *m->dstate)) {
        return 0;
    }
    size_t cap_dloop = m->cap_dloop;
    if ((size_t)v->max_depth + 1 > cap_dloop) {
        uint64_t *q = realloc(m->dloop, ((size_t)v->max_depth + 1) * sizeof *q);
        if (!q) {
            return m->failed = true, 0;
        }
        m->dloop = q;
        uint8_t *p = realloc(m->dpath, (size_t)v->max_depth + 1);
        if (!p) {
            return m->failed = true, 0;
        }
        m->dpath = p;
        m->cap_dloop = (size_t)v->max_depth + 1;
    }
    uint32_t *ds = m->dstate;
    uint64_t *dl = m->dloop;
    uint8_t *dp = m->dpath;
    ds[0] = m->cur;
    dl[0] = loop_of(m, m->cur);
    /* The longest string slice the current state takes whole. */
    uint32_t slice = 0;
    bool all_str = false; /* every string token is decided: skip them all */
    if (v->n_slices > 0 && m->states[m->cur].utf8 == 0) {
        uint32_t run = run_of(m, m->cur, &STRING_RUNS, v->max_depth);
        slice =
            allow_slices(allowed, words, v->slice_bits, v->slice_len, v->n_slices, v->str_max,
                         v->str_tok, v->str_off, run, m->states[m->cur].run[0].closed, &all_str);
    }
    /* No string run: a run of the widest class's ASCII characters (an identifier, hex digits,
     * digits), allowed from that set's class slice. Bit 1 of dp: the path is in that set. */
    runset ks = {{0, 0}, 0};
    uint32_t kslice = 0;
    bool all_k = false;
    if (slice == 0 && m->states[m->cur].utf8 == 0 && class_runset(m, m->cur, &ks)) {
        uint32_t run = run_of(m, m->cur, &ks, v->max_depth);
        const gkslice *sl = run > 0 ? ts_gvocab_kslice((ts_gvocab *)v, ks.set) : NULL;
        const grun *r = run_known(m, m->cur, &ks);
        if (sl) {
            kslice = allow_slices(allowed, words, sl->bits, sl->len, sl->n, sl->max, sl->tok,
                                  sl->off, run, r && r->closed, &all_k);
        }
    }
    dp[0] = kslice > 0 || all_k ? 3 : 1;
    const uint8_t *byte = v->byte, *flags = v->flags;
    const uint16_t *depth = v->depth, *height = v->height;
    const uint32_t *skip = v->skip, *tok_off = v->tok_off;
    uint32_t i = 1;
    while (i < v->n_nodes) {
        uint32_t d = depth[i];
        uint32_t ps = ds[d - 1];
        if ((flags[i] & VF_STRC) && m->states[ps].utf8 == 0) {
            /* Made of string characters below: in the slice already when the path to here is
             * too and no token is longer than the slice; allowed whole when the parent state
             * takes strings that long. */
            if ((dp[d - 1] & 1) && (all_str || d - 1 + height[i] <= slice)) {
                i = skip[i];
                continue;
            }
            if (height[i] <= run_of(m, ps, &STRING_RUNS, v->max_depth)) {
                for (uint32_t k = tok_off[i]; k < tok_off[skip[i]]; k++) {
                    int32_t t = v->tok[k];
                    allowed[t >> 5] |= 1u << (t & 31);
                }
                i = skip[i];
                continue;
            }
        }
        if ((dp[d - 1] & 2) && (flags[i] & VF_ASCII) &&
            (v->sig2[2 * (size_t)i] & ~ks.set[0]) == 0 &&
            (v->sig2[2 * (size_t)i + 1] & ~ks.set[1]) == 0 &&
            (all_k || d - 1 + height[i] <= kslice)) { /* in the class slice already */
            i = skip[i];
            continue;
        }
        uint64_t loop = dl[d - 1];
        if (loop && (v->sig[i] & ~loop) == 0 && (flags[i] & VF_CLEAN)) { /* the whole subtree */
            for (uint32_t k = tok_off[i]; k < tok_off[skip[i]]; k++) {
                int32_t t = v->tok[k];
                allowed[t >> 5] |= 1u << (t & 31);
            }
            i = skip[i];
            continue;
        }
        int32_t s = tg_step(m, ps, byte[i]);
        if (s < 0) {
            i = skip[i];
            continue;
        }
        ds[d] = (uint32_t)s;
        dl[d] = s == (int32_t)ps ? loop : loop_of(m, (uint32_t)s);
        dp[d] = (uint8_t)(((dp[d - 1] & 1) && (byte[i] >= 0x80 || gstr_byte(byte[i]))) |
                          ((dp[d - 1] & 2) && byte[i] < 0x80 &&
                                   (ks.set[byte[i] >> 6] >> (byte[i] & 63) & 1u)
                               ? 2
                               : 0));
        for (uint32_t k = tok_off[i]; k < tok_off[i + 1]; k++) {
            int32_t t = v->tok[k];
            allowed[t >> 5] |= 1u << (t & 31);
        }
        i++;
    }
    if (m->failed) { /* out of memory midway: allow nothing rather than a wrong set */
        memset(allowed, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *allowed);
        return 0;
    }
    if (tg_accepting(m, m->cur)) {
        for (int32_t k = 0; k < v->n_eog; k++) {
            int32_t t = v->eog[k];
            allowed[t >> 5] |= 1u << (t & 31);
        }
    }
    int32_t count = mask_count(allowed, words);
    if (m->mc_words && !m->over) { /* remember it in the least recently used slot */
        int lru = 0;
        for (int k = 1; k < MASK_CACHE; k++) {
            if (m->mc_used[k] < m->mc_used[lru]) {
                lru = k;
            }
        }
        memcpy(m->mc_bits + (size_t)lru * words, allowed, words * sizeof *allowed);
        m->mc_state[lru] = (int32_t)m->cur;
        m->mc_count[lru] = count;
        m->mc_used[lru] = ++m->mc_clock;
    }
    return count;
}
