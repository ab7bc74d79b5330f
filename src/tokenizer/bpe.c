/*
 * bpe.c — byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * Text is cut into words by the pre-tokenizer; each byte of a word is written as one code
 * point of the GPT-2 byte alphabet, so the word starts as one symbol per byte, each symbol
 * the token of that byte's character. Then, repeatedly, the adjacent pair with the lowest
 * merge rank (leftmost on ties) is replaced by its merged token until no pair merges.
 * A heap holds candidate pairs; entries made stale by earlier merges are skipped when popped.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef struct bpe_sym {
    int64_t prev, next; /* neighbours in the word, -1 at the ends */
    ts_token id;        /* current token; TS_TOKEN_NULL once merged away */
} bpe_sym;

static ts_status try_pair(const ts_tokenizer *t, const bpe_sym *sym, int64_t l, int64_t r,
                          tok_merge_queue *h, ts_error *err) {
    if (l < 0 || r < 0) {
        return TS_OK;
    }
    tok_merge p = {.left = l, .right = r, .lid = sym[l].id, .rid = sym[r].id};
    int32_t rank;
    if (!tok_mmap_find(t, p.lid, p.rid, &rank, &p.result)) {
        return TS_OK;
    }
    p.key = rank; /* lower rank merges first */
    return tok_merge_push(h, &p, err);
}

typedef struct bpe_work {
    bpe_sym *sym;
    size_t sym_cap;
    tok_merge_queue heap;
    tok_buf word; /* the word in the byte alphabet */
} bpe_work;

static ts_status encode_word(const ts_tokenizer *t, const unsigned char *w, size_t n, bpe_work *k,
                             tok_ids *out, ts_error *err) {
    ts_status st;
    if (t->ignore_merges) {
        k->word.n = 0;
        for (size_t i = 0; i < n; i++) {
            st = tok_buf_append(&k->word, t->byte_enc[w[i]], t->byte_enc_len[w[i]], err);
            if (st != TS_OK) {
                return st;
            }
        }
        ts_token whole = tok_vmap_find(t, k->word.v, k->word.n);
        if (whole != TS_TOKEN_NULL) {
            return tok_ids_push(out, whole, err);
        }
    }
    if (n > k->sym_cap) {
        bpe_sym *s = realloc(k->sym, n * sizeof *s);
        if (s == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for a %zu-byte word", n);
        }
        k->sym = s;
        k->sym_cap = n;
    }
    bpe_sym *sym = k->sym;
    for (size_t i = 0; i < n; i++) {
        sym[i].prev = (int64_t)i - 1;
        sym[i].next = i + 1 < n ? (int64_t)i + 1 : -1;
        sym[i].id = t->byte_token[w[i]];
    }
    k->heap.n = 0;
    for (size_t i = 1; i < n; i++) {
        if ((st = try_pair(t, sym, (int64_t)i - 1, (int64_t)i, &k->heap, err)) != TS_OK) {
            return st;
        }
    }
    while (k->heap.n > 0) {
        tok_merge p = tok_merge_pop(&k->heap);
        bpe_sym *l = &sym[p.left], *r = &sym[p.right];
        /* Skip pairs whose symbols changed since the pair was queued. */
        if (l->next != p.right || l->id != p.lid || r->id != p.rid) {
            continue;
        }
        l->id = p.result;
        l->next = r->next;
        if (r->next >= 0) {
            sym[r->next].prev = p.left;
        }
        r->id = TS_TOKEN_NULL;
        r->prev = r->next = -1;
        if ((st = try_pair(t, sym, l->prev, p.left, &k->heap, err)) != TS_OK ||
            (st = try_pair(t, sym, p.left, l->next, &k->heap, err)) != TS_OK) {
            return st;
        }
    }
    for (int64_t i = 0; i >= 0; i = sym[i].next) {
        ts_token id = sym[i].id;
        if (id == TS_TOKEN_NULL) {
            /* A byte whose character is not in the vocabulary: the reference tokenizers use
             * the unknown token when there is one and drop the byte otherwise. Many files
             * name <|endoftext|> as "unknown"; a control token must not appear in the middle
             * of text, so only a token of type unknown stands in. */
            id = t->sp.unk;
            if (id == TS_TOKEN_NULL || t->tokens[id].type != TS_TOKEN_TYPE_UNKNOWN) {
                continue;
            }
        }
        if ((st = tok_ids_push(out, id, err)) != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

ts_status tok_bpe_encode(const ts_tokenizer *t, const char *text, size_t len, tok_ids *out,
                         ts_error *err) {
    tok_spans words = {0};
    bpe_work k = {0};
    ts_status st = tok_pretok_split(t, text, len, &words, err);
    for (size_t i = 0; st == TS_OK && i < words.n; i++) {
        st = encode_word(t, (const unsigned char *)text + words.v[i].off, words.v[i].len, &k, out,
                         err);
    }
    free(words.v);
    free(k.sym);
    tok_merge_queue_free(&k.heap);
    free(k.word.v);
    return st;
}
