/*
 * vocab.c — the vocabulary as grammars see it: each token's bytes, and a byte trie of all
 * tokens laid out in preorder (grammar_impl.h describes the arrays). The mask walks the trie
 * front to back, skipping a whole subtree when its prefix is rejected, so tokens that share a
 * prefix share the work of matching it.
 *
 * Built by sorting the tokens' bytes: in sorted order a token's trie path shares with the
 * previous token's exactly their longest common prefix, so the preorder nodes are appended
 * token by token and each node's subtree end is known when the path leaves it.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "util/error.h"

typedef struct piece {
    const char *p;
    uint32_t len;
    int32_t id;
} piece;

static int cmp_piece(const void *a, const void *b) {
    const piece *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) {
        return c;
    }
    if (x->len != y->len) {
        return x->len < y->len ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

/* UTF-8 decoding states for the subtree summaries: at a character boundary, or inside a
 * character needing 1-3 more bytes (the second byte after E0 ED F0 F4 has a narrower range). */
enum { U_B, U_C1, U_C2, U_C3, U_E0, U_ED, U_F0, U_F4, U_N, U_BAD = U_N };

static int utf8_next(int d, uint8_t b) {
    bool cont = b >= 0x80 && b <= 0xBF;
    switch (d) {
    case U_B:
        if (b < 0x80) {
            return U_B;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            return U_C1;
        }
        if (b == 0xE0) {
            return U_E0;
        }
        if (b == 0xED) {
            return U_ED;
        }
        if (b >= 0xE1 && b <= 0xEF) {
            return U_C2;
        }
        if (b == 0xF0) {
            return U_F0;
        }
        if (b == 0xF4) {
            return U_F4;
        }
        if (b >= 0xF1 && b <= 0xF3) {
            return U_C3;
        }
        return U_BAD;
    case U_C1:
        return cont ? U_B : U_BAD;
    case U_C2:
        return cont ? U_C1 : U_BAD;
    case U_C3:
        return cont ? U_C2 : U_BAD;
    case U_E0:
        return b >= 0xA0 && b <= 0xBF ? U_C1 : U_BAD;
    case U_ED:
        return b >= 0x80 && b <= 0x9F ? U_C1 : U_BAD;
    case U_F0:
        return b >= 0x90 && b <= 0xBF ? U_C2 : U_BAD;
    default:
        return b >= 0x80 && b <= 0x8F ? U_C2 : U_BAD; /* U_F4 */
    }
}

/* sig, flags and height for every node, children before parents (reverse preorder).
 * valid[i] bit d: every path from node i is valid UTF-8 so far when decoding starts in state d;
 * strc[i]: every byte below node i (itself included) is a string character. */
static bool subtree_summaries(ts_gvocab *v) {
    uint32_t n = v->n_nodes;
    v->sig = calloc(n, sizeof *v->sig);
    v->sig2 = calloc(2 * (size_t)n, sizeof *v->sig2);
    v->flags = calloc(n, 1);
    v->height = calloc(n, sizeof *v->height);
    uint32_t *parent = malloc((size_t)n * sizeof *parent);
    uint32_t *path = malloc(((size_t)v->max_depth + 1) * sizeof *path);
    uint8_t *child_and = malloc(n), *strc = malloc(n), *ascii = malloc(n);
    if (!v->sig || !v->sig2 || !v->flags || !v->height || !parent || !path || !child_and || !strc ||
        !ascii) {
        free(parent);
        free(path);
        free(child_and);
        free(strc);
        free(ascii);
        return false;
    }
    path[0] = 0;
    parent[0] = 0;
    for (uint32_t i = 1; i < n; i++) {
        parent[i] = path[v->depth[i] - 1];
        path[v->depth[i]] = i;
    }
    memset(child_and, 0xff, n);
    memset(strc, 1, n);
    memset(ascii, 1, n);
    for (uint32_t i = n - 1; i >= 1; i--) {
        uint8_t b = v->byte[i], valid = 0;
        for (int d = 0; d < U_N; d++) {
            int t = utf8_next(d, b);
            if (t != U_BAD && (child_and[i] >> t & 1)) {
                valid |= (uint8_t)(1u << d);
            }
        }
        strc[i] &= (uint8_t)(b >= 0x80 || gstr_byte(b));
        v->flags[i] = (uint8_t)((valid & 1 ? VF_CLEAN : 0) | (valid & 1 && strc[i] ? VF_STRC : 0));
        if (b < 0x80) {
            v->sig[i] |= 1ull << (b >> 1);
            v->sig2[2 * (size_t)i + (b >> 6)] |= 1ull << (b & 63);
        } else {
            ascii[i] = 0;
        }
        if (ascii[i]) {
            v->flags[i] |= VF_ASCII;
        }
        v->height[i]++; /* the node itself, over its highest child */
        uint32_t p = parent[i];
        child_and[p] &= valid;
        strc[p] &= strc[i];
        ascii[p] &= ascii[i];
        v->sig[p] |= v->sig[i];
        v->sig2[2 * (size_t)p] |= v->sig2[2 * (size_t)i];
        v->sig2[2 * (size_t)p + 1] |= v->sig2[2 * (size_t)i + 1];
        if (v->height[i] > v->height[p]) {
            v->height[p] = v->height[i];
        }
    }
    free(parent);
    free(path);
    free(child_and);
    free(strc);
    free(ascii);
    return true;
}

/* Token t is made of string characters and is valid UTF-8 so far. */
static bool string_token(const ts_gvocab *v, int32_t t) {
    int d = U_B;
    for (uint64_t k = v->off[t]; k < v->off[t + 1]; k++) {
        uint8_t b = (uint8_t)v->bytes[k];
        if (b < 0x80 && !gstr_byte(b)) {
            return false;
        }
        d = utf8_next(d, b);
        if (d == U_BAD) {
            return false;
        }
    }
    return true;
}

/* Token t's length in characters, a trailing incomplete one counted (its lead bytes). */
static uint32_t token_chars(const ts_gvocab *v, int32_t t) {
    uint32_t n = 0;
    for (uint64_t k = v->off[t]; k < v->off[t + 1]; k++) {
        n += ((uint8_t)v->bytes[k] & 0xC0) != 0x80;
    }
    return n;
}

/* The string slices and the string tokens by length (grammar_impl.h). */
static bool build_slices(ts_gvocab *v) {
    static const uint16_t lens[TS_GVOCAB_SLICES - 1] = {1,  2,  3,  4,  5,  6,  8, 10,
                                                        12, 16, 20, 24, 32, 48, 64};
    uint32_t *chars = malloc((size_t)v->n_vocab * sizeof *chars);
    if (!chars) {
        return false;
    }
    uint32_t longest = 0, n_str = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        chars[t] = 0;
        if (v->is_eog[t] || v->off[t + 1] == v->off[t] || !string_token(v, t)) {
            continue;
        }
        chars[t] = token_chars(v, t);
        n_str++;
        if (chars[t] > longest) {
            longest = chars[t];
        }
    }
    v->str_max = longest;
    v->str_off = calloc((size_t)longest + 2, sizeof *v->str_off);
    v->str_tok = malloc((n_str ? n_str : 1) * sizeof *v->str_tok);
    uint32_t *fill = malloc(((size_t)longest + 1) * sizeof *fill);
    int n = 0;
    for (int k = 0; k < TS_GVOCAB_SLICES - 1 && lens[k] < longest; k++) {
        v->slice_len[n++] = lens[k];
    }
    if (longest > 0) {
        v->slice_len[n++] = (uint16_t)longest;
    }
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    v->slice_bits = calloc(n ? (size_t)n * words : 1, sizeof *v->slice_bits);
    if (!v->str_off || !v->str_tok || !fill || !v->slice_bits) {
        free(chars);
        free(fill);
        return false;
    }
    v->n_slices = n;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        if (chars[t]) {
            v->str_off[chars[t] + 1]++;
        }
    }
    for (uint32_t l = 0; l <= longest; l++) {
        v->str_off[l + 1] += v->str_off[l];
    }
    memcpy(fill, v->str_off, ((size_t)longest + 1) * sizeof *fill);
    for (int32_t t = 0; t < v->n_vocab; t++) {
        if (!chars[t]) {
            continue;
        }
        v->str_tok[fill[chars[t]]++] = t;
        for (int k = 0; k < n; k++) {
            if (chars[t] <= v->slice_len[k]) {
                v->slice_bits[(size_t)k * words + (t >> 5)] |= 1u << (t & 31);
            }
        }
    }
    free(chars);
    free(fill);
    return true;
}

/* Token t's bytes all lie in the ASCII set set[]. */
static bool in_set(const ts_gvocab *v, int32_t t, const uint64_t set[2]) {
    for (uint64_t k = v->off[t]; k < v->off[t + 1]; k++) {
        uint8_t b = (uint8_t)v->bytes[k];
        if (b >= 0x80 || !(set[b >> 6] >> (b & 63) & 1u)) {
            return false;
        }
    }
    return true;
}

static gkslice *kslice_make(const ts_gvocab *v, const uint64_t set[2]) {
    static const uint16_t lens[3] = {4, 8, 16};
    gkslice *ks = calloc(1, sizeof *ks);
    if (!ks) {
        return NULL;
    }
    ks->set[0] = set[0];
    ks->set[1] = set[1];
    uint32_t n = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        uint64_t len = v->off[t + 1] - v->off[t];
        if (v->is_eog[t] || len == 0 || !in_set(v, t, set)) {
            continue;
        }
        n++;
        if (len > ks->max) {
            ks->max = (uint32_t)len;
        }
    }
    for (int k = 0; k < 3 && lens[k] < ks->max; k++) {
        ks->len[ks->n++] = lens[k];
    }
    if (ks->max > 0) {
        ks->len[ks->n++] = (uint16_t)ks->max;
    }
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    ks->bits = calloc(ks->n ? (size_t)ks->n * words : 1, sizeof *ks->bits);
    ks->tok = malloc((n ? n : 1) * sizeof *ks->tok);
    ks->off = calloc((size_t)ks->max + 2, sizeof *ks->off);
    uint32_t *fill = malloc(((size_t)ks->max + 1) * sizeof *fill);
    if (!ks->bits || !ks->tok || !ks->off || !fill) {
        free(ks->bits);
        free(ks->tok);
        free(ks->off);
        free(ks);
        free(fill);
        return NULL;
    }
    for (int32_t t = 0; t < v->n_vocab; t++) {
        uint64_t len = v->off[t + 1] - v->off[t];
        if (!v->is_eog[t] && len > 0 && in_set(v, t, set)) {
            ks->off[len + 1]++;
        }
    }
    for (uint32_t l = 0; l <= ks->max; l++) {
        ks->off[l + 1] += ks->off[l];
    }
    memcpy(fill, ks->off, ((size_t)ks->max + 1) * sizeof *fill);
    for (int32_t t = 0; t < v->n_vocab; t++) {
        uint64_t len = v->off[t + 1] - v->off[t];
        if (v->is_eog[t] || len == 0 || !in_set(v, t, set)) {
            continue;
        }
        ks->tok[fill[len]++] = t;
        for (int k = 0; k < ks->n; k++) {
            if (len <= ks->len[k]) {
                ks->bits[(size_t)k * words + (t >> 5)] |= 1u << (t & 31);
            }
        }
    }
    free(fill);
    return ks;
}

const gkslice *ts_gvocab_kslice(ts_gvocab *v, const uint64_t set[2]) {
    const gkslice *found = NULL;
    pthread_mutex_lock(&v->klock);
    for (int k = 0; k < v->n_kslices && !found; k++) {
        if (v->kslices[k]->set[0] == set[0] && v->kslices[k]->set[1] == set[1]) {
            found = v->kslices[k];
        }
    }
    if (!found && v->n_kslices < TS_GVOCAB_KSLICES) {
        gkslice *ks = kslice_make(v, set);
        if (ks) {
            v->kslices[v->n_kslices++] = ks;
        }
        found = ks;
    }
    pthread_mutex_unlock(&v->klock);
    return found;
}

void ts_gvocab_free(ts_gvocab *v) {
    if (!v) {
        return;
    }
    free(v->bytes);
    free(v->off);
    free(v->is_eog);
    free(v->eog);
    free(v->byte);
    free(v->depth);
    free(v->skip);
    free(v->tok_off);
    free(v->tok);
    free(v->sig);
    free(v->flags);
    free(v->height);
    free(v->slice_bits);
    free(v->str_tok);
    free(v->str_off);
    free(v->sig2);
    for (int k = 0; k < v->n_kslices; k++) {
        free(v->kslices[k]->bits);
        free(v->kslices[k]->tok);
        free(v->kslices[k]->off);
        free(v->kslices[k]);
    }
    if (v->klock_made) {
        pthread_mutex_destroy(&v->klock);
    }
    free(v);
}

int32_t ts_gvocab_size(const ts_gvocab *v) {
    return v ? v->n_vocab : 0;
}

ts_status ts_gvocab_create(const char *const *pieces, const size_t *lens, int32_t n_vocab,
                           const int32_t *eog, int32_t n_eog, ts_gvocab **out, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    if (!out) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gvocab: out is NULL");
    }
    *out = NULL;
    if (n_vocab <= 0 || !pieces || !lens) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gvocab: empty vocabulary");
    }
    if (n_eog < 0 || (n_eog > 0 && !eog)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gvocab: bad eog list");
    }
    uint64_t total = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (lens[t] && !pieces[t]) {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "gvocab: token %d has no bytes", t);
        }
        if (lens[t] > UINT16_MAX) {
            return ts_error_set(err, TS_ERR_LIMIT, "gvocab: token %d is %zu bytes long (limit %u)",
                                t, lens[t], (unsigned)UINT16_MAX);
        }
        total += lens[t];
    }
    if (total >= UINT32_MAX / 2) {
        return ts_error_set(err, TS_ERR_LIMIT, "gvocab: %llu bytes of tokens",
                            (unsigned long long)total);
    }
    for (int32_t k = 0; k < n_eog; k++) {
        if (eog[k] < 0 || eog[k] >= n_vocab) {
            return ts_error_set(err, TS_ERR_RANGE, "gvocab: eog token %d outside [0, %d)", eog[k],
                                n_vocab);
        }
    }

    ts_gvocab *v = calloc(1, sizeof *v);
    piece *ps = NULL;
    uint32_t *path = NULL, *tok_node = NULL;
    if (!v) {
        goto nomem;
    }
    if (pthread_mutex_init(&v->klock, NULL) != 0) {
        goto nomem;
    }
    v->klock_made = true;
    v->n_vocab = n_vocab;
    v->bytes = malloc(total ? total : 1);
    v->off = malloc(((size_t)n_vocab + 1) * sizeof *v->off);
    v->is_eog = calloc((size_t)n_vocab, 1);
    v->eog = malloc((n_eog ? (size_t)n_eog : 1) * sizeof *v->eog);
    if (!v->bytes || !v->off || !v->is_eog || !v->eog) {
        goto nomem;
    }
    v->off[0] = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (lens[t]) {
            memcpy(v->bytes + v->off[t], pieces[t], lens[t]);
        }
        v->off[t + 1] = v->off[t] + lens[t];
    }
    for (int32_t k = 0; k < n_eog; k++) {
        if (!v->is_eog[eog[k]]) {
            v->eog[v->n_eog++] = eog[k];
        }
        v->is_eog[eog[k]] = 1;
    }

    /* Sorted pieces of the tokens that go in the trie. */
    uint32_t n = 0;
    ps = malloc((size_t)n_vocab * sizeof *ps);
    if (!ps) {
        goto nomem;
    }
    for (int32_t t = 0; t < n_vocab; t++) {
        if (lens[t] && !v->is_eog[t]) {
            ps[n++] = (piece){.p = v->bytes + v->off[t], .len = (uint32_t)lens[t], .id = t};
        }
    }
    qsort(ps, n, sizeof *ps, cmp_piece);

    size_t cap = (size_t)total + 1;
    v->byte = malloc(cap);
    v->depth = malloc(cap * sizeof *v->depth);
    v->skip = malloc(cap * sizeof *v->skip);
    path = malloc(((size_t)UINT16_MAX + 1) * sizeof *path);
    tok_node = malloc((n ? n : 1) * sizeof *tok_node);
    if (!v->byte || !v->depth || !v->skip || !path || !tok_node) {
        goto nomem;
    }
    uint32_t nn = 1, plen = 0;
    v->byte[0] = 0;
    v->depth[0] = 0;
    path[0] = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t lcp = 0;
        if (k > 0) {
            uint32_t m = ps[k - 1].len < ps[k].len ? ps[k - 1].len : ps[k].len;
            while (lcp < m && ps[k - 1].p[lcp] == ps[k].p[lcp]) {
                lcp++;
            }
        }
        for (uint32_t l = lcp + 1; l <= plen; l++) { /* the path leaves these nodes */
            v->skip[path[l]] = nn;
        }
        for (uint32_t l = lcp + 1; l <= ps[k].len; l++) {
            v->byte[nn] = (uint8_t)ps[k].p[l - 1];
            v->depth[nn] = (uint16_t)l;
            path[l] = nn++;
        }
        plen = ps[k].len;
        if (plen > v->max_depth) {
            v->max_depth = plen;
        }
        tok_node[k] = path[plen];
    }
    for (uint32_t l = 0; l <= plen; l++) {
        v->skip[path[l]] = nn;
    }
    v->n_nodes = nn;
    if (!subtree_summaries(v) || !build_slices(v)) {
        goto nomem;
    }

    /* Tokens by node (counting sort; sorted pieces already come in node order). */
    v->tok_off = calloc((size_t)nn + 1, sizeof *v->tok_off);
    v->tok = malloc((n ? n : 1) * sizeof *v->tok);
    if (!v->tok_off || !v->tok) {
        goto nomem;
    }
    for (uint32_t k = 0; k < n; k++) {
        v->tok_off[tok_node[k] + 1]++;
    }
    for (uint32_t i = 0; i < nn; i++) {
        v->tok_off[i + 1] += v->tok_off[i];
    }
    for (uint32_t k = 0; k < n; k++) {
        v->tok[k] = ps[k].id;
    }
    free(ps);
    free(path);
    free(tok_node);
    *out = v;
    return TS_OK;
nomem:
    free(ps);
    free(path);
    free(tok_node);
    ts_gvocab_free(v);
    return ts_error_set(err, TS_ERR_NOMEM, "gvocab: out of memory");
}
