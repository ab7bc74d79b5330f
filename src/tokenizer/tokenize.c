/*
 * tokenize.c — from text to ids: special tokens first, then the model on the text between.
 *
 * Special-token scan: user-defined tokens (always) and control/unknown tokens (only with
 * parse_special) are found in the raw text before the model sees it. Longer tokens win over
 * shorter ones everywhere in the text (then lower ids); within one token, occurrences are
 * taken left to right without overlapping. Concretely: every occurrence of every candidate is
 * listed, sorted by (priority, position), and accepted when none of its bytes is already
 * taken. A token flagged lstrip/rstrip also takes the ASCII whitespace next to it. The text
 * left over between accepted tokens is then tokenized by the model, run by run.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static bool scannable(uint8_t type) {
    return type == TS_TOKEN_TYPE_CONTROL || type == TS_TOKEN_TYPE_UNKNOWN ||
           type == TS_TOKEN_TYPE_USER_DEFINED;
}

/* Priority order: longer first, then lower id. */
static int cmp_priority(const tok_entry *tokens, ts_token a, ts_token b) {
    if (tokens[a].len != tokens[b].len) {
        return tokens[a].len > tokens[b].len ? -1 : 1;
    }
    return a < b ? -1 : (a > b);
}

/* qsort has no context argument; a small merge sort keeps the comparison's context (the
 * token table) explicit instead of in a global. */
typedef struct occ {
    size_t pos;
    ts_token id;
} occ;

static int cmp_occ(const tok_entry *tokens, const occ *a, const occ *b) {
    int c = cmp_priority(tokens, a->id, b->id);
    if (c != 0) {
        return c;
    }
    return a->pos < b->pos ? -1 : (a->pos > b->pos);
}

static void merge_sort_occ(const tok_entry *tokens, occ *v, occ *tmp, size_t n) {
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    merge_sort_occ(tokens, v, tmp, h);
    merge_sort_occ(tokens, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        tmp[k++] = cmp_occ(tokens, &v[j], &v[i]) < 0 ? v[j++] : v[i++];
    }
    while (i < h) {
        tmp[k++] = v[i++];
    }
    while (j < n) {
        tmp[k++] = v[j++];
    }
    memcpy(v, tmp, n * sizeof *v);
}

static void merge_sort_ids(const tok_entry *tokens, ts_token *v, ts_token *tmp, size_t n) {
    if (n < 2) {
        return;
    }
    size_t h = n / 2;
    merge_sort_ids(tokens, v, tmp, h);
    merge_sort_ids(tokens, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        tmp[k++] = cmp_priority(tokens, v[j], v[i]) < 0 ? v[j++] : v[i++];
    }
    while (i < h) {
        tmp[k++] = v[i++];
    }
    while (j < n) {
        tmp[k++] = v[j++];
    }
    memcpy(v, tmp, n * sizeof *v);
}

ts_status tok_build_special(ts_tokenizer *t, ts_error *err) {
    size_t n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        n += scannable(t->tokens[i].type) && t->tokens[i].len > 0;
    }
    t->n_special = n;
    if (n == 0) {
        return TS_OK;
    }
    t->special = malloc(n * sizeof *t->special);
    ts_token *tmp = malloc(n * sizeof *tmp);
    t->special_lens = malloc(n * sizeof *t->special_lens);
    if (t->special == NULL || tmp == NULL || t->special_lens == NULL) {
        free(tmp);
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu special tokens", n);
    }
    n = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        const tok_entry *e = &t->tokens[i];
        if (scannable(e->type) && e->len > 0) {
            t->special[n++] = (ts_token)i;
            t->special_first[(unsigned char)e->text[0]] = 1;
            t->n_user_defined += e->type == TS_TOKEN_TYPE_USER_DEFINED;
        }
    }
    merge_sort_ids(t->tokens, t->special, tmp, n);
    free(tmp);
    for (size_t i = 0; i < n; i++) {
        uint32_t len = t->tokens[t->special[i]].len;
        if (t->n_special_lens == 0 || t->special_lens[t->n_special_lens - 1] != len) {
            t->special_lens[t->n_special_lens++] = len;
        }
    }
    return TS_OK;
}

typedef struct occ_list {
    occ *v;
    size_t n, cap;
} occ_list;

static ts_status occ_push(occ_list *l, size_t pos, ts_token id, ts_error *err) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        occ *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for special tokens");
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].pos = pos;
    l->v[l->n].id = id;
    l->n++;
    return TS_OK;
}

/* Lists every occurrence of an eligible special token in text. */
static ts_status find_specials(const ts_tokenizer *t, const char *text, size_t len,
                               bool parse_special, occ_list *out, ts_error *err) {
    for (size_t pos = 0; pos < len; pos++) {
        if (!t->special_first[(unsigned char)text[pos]]) {
            continue;
        }
        for (size_t k = 0; k < t->n_special_lens; k++) {
            size_t l = t->special_lens[k];
            if (l > len - pos) {
                continue;
            }
            ts_token id = tok_vmap_find(t, text + pos, l);
            if (id == TS_TOKEN_NULL) {
                continue;
            }
            uint8_t type = t->tokens[id].type;
            if (type == TS_TOKEN_TYPE_USER_DEFINED ||
                (parse_special &&
                 (type == TS_TOKEN_TYPE_CONTROL || type == TS_TOKEN_TYPE_UNKNOWN))) {
                ts_status st = occ_push(out, pos, id, err);
                if (st != TS_OK) {
                    return st;
                }
            }
        }
    }
    return TS_OK;
}

enum { FREE = 0, TAKEN = 1, STRIPPED = 2 };

/* Accepts occurrences by priority; marks taken bytes in `used` and returns the accepted ones
 * sorted by position in *out. */
static ts_status select_specials(const ts_tokenizer *t, const char *text, size_t len,
                                 occ_list *occs, unsigned char *used, occ_list *out,
                                 ts_error *err) {
    occ *tmp = malloc(occs->n * sizeof *tmp);
    if (tmp == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for special tokens");
    }
    merge_sort_occ(t->tokens, occs->v, tmp, occs->n);
    free(tmp);
    for (size_t i = 0; i < occs->n; i++) {
        const occ *o = &occs->v[i];
        const tok_entry *e = &t->tokens[o->id];
        bool free_span = true;
        for (size_t b = 0; b < e->len && free_span; b++) {
            free_span = used[o->pos + b] == FREE;
        }
        if (!free_span) {
            continue;
        }
        memset(used + o->pos, TAKEN, e->len);
        if (e->flags & TOKF_LSTRIP) {
            for (size_t b = o->pos;
                 b > 0 && used[b - 1] == FREE && isspace((unsigned char)text[b - 1]); b--) {
                used[b - 1] = STRIPPED;
            }
        }
        if (e->flags & TOKF_RSTRIP) {
            for (size_t b = o->pos + e->len;
                 b < len && used[b] == FREE && isspace((unsigned char)text[b]); b++) {
                used[b] = STRIPPED;
            }
        }
        ts_status st = occ_push(out, o->pos, o->id, err);
        if (st != TS_OK) {
            return st;
        }
    }
    /* Accepted occurrences never overlap, so sorting by position alone is a total order. */
    for (size_t i = 1; i < out->n; i++) {
        occ x = out->v[i];
        size_t j = i;
        while (j > 0 && out->v[j - 1].pos > x.pos) {
            out->v[j] = out->v[j - 1];
            j--;
        }
        out->v[j] = x;
    }
    return TS_OK;
}

static ts_status encode_run(const ts_tokenizer *t, const char *text, size_t len, bool after_special,
                            tok_ids *out, ts_error *err) {
    switch (t->kind) {
    case TS_TOKENIZER_SPM:
        return tok_spm_encode(t, text, len, t->sp.add_space_prefix && after_special, out, err);
    case TS_TOKENIZER_BPE:
        return tok_bpe_encode(t, text, len, out, err);
    case TS_TOKENIZER_WPM:
        return tok_wpm_encode(t, text, len, out, err);
    }
    return ts_error_set(err, TS_ERR_INTERNAL, "tokenizer: unknown kind %d", (int)t->kind);
}

/* Tokenizes text whose special tokens have been located: runs of FREE bytes go to the model,
 * accepted occurrences become their ids, STRIPPED bytes vanish. */
static ts_status encode_all(const ts_tokenizer *t, const char *text, size_t len,
                            const unsigned char *used, const occ_list *acc, tok_ids *out,
                            ts_error *err) {
    bool after_special = true; /* the start of the text counts as a boundary */
    size_t next_occ = 0;
    ts_status st = TS_OK;
    for (size_t pos = 0; pos < len && st == TS_OK;) {
        if (used == NULL || used[pos] == FREE) {
            size_t end = pos;
            while (end < len && (used == NULL || used[end] == FREE)) {
                end++;
            }
            st = encode_run(t, text + pos, end - pos, after_special, out, err);
            after_special = false;
            pos = end;
        } else if (used[pos] == TAKEN && next_occ < acc->n && acc->v[next_occ].pos == pos) {
            ts_token id = acc->v[next_occ++].id;
            st = tok_ids_push(out, id, err);
            after_special = true;
            pos += t->tokens[id].len;
        } else {
            pos++; /* stripped whitespace */
        }
    }
    return st;
}

ts_status ts_tokenizer_tokenize(const ts_tokenizer *t, const char *text, size_t len,
                                bool add_special, bool parse_special, ts_token **ids, size_t *n_ids,
                                ts_error *err) {
    if (t == NULL || ids == NULL || n_ids == NULL || (text == NULL && len > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer: NULL argument to tokenize");
    }
    *ids = NULL;
    *n_ids = 0;
    tok_ids out = {0};
    occ_list occs = {0}, acc = {0};
    unsigned char *used = NULL;
    ts_status st = TS_OK;
    if (add_special && t->sp.add_bos) {
        st = tok_ids_push(&out, t->sp.bos, err);
    }
    bool scan = parse_special ? t->n_special > 0 : t->n_user_defined > 0;
    if (st == TS_OK && scan && len > 0) {
        st = find_specials(t, text, len, parse_special, &occs, err);
        if (st == TS_OK && occs.n > 0) {
            used = calloc(len, 1);
            st = used ? select_specials(t, text, len, &occs, used, &acc, err)
                      : ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu bytes", len);
        }
    }
    if (st == TS_OK) {
        st = encode_all(t, text, len, used, &acc, &out, err);
    }
    if (st == TS_OK && add_special && t->sp.add_eos) {
        st = tok_ids_push(&out, t->sp.eos, err);
    }
    if (st == TS_OK && add_special && t->sp.add_sep) {
        st = tok_ids_push(&out, t->sp.sep, err);
    }
    free(used);
    free(occs.v);
    free(acc.v);
    if (st != TS_OK) {
        free(out.v);
        return st;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *ids = out.v;
    *n_ids = out.n;
    return TS_OK;
}
