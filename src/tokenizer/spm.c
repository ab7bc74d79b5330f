/*
 * spm.c — SentencePiece BPE (tokenizer.ggml.model = "llama").
 *
 * Spaces are written as "▁" (U+2581); the text starts as one symbol per UTF-8 character (an
 * invalid byte is a symbol of its own). Repeatedly, the adjacent pair whose concatenation is
 * the vocabulary entry with the highest score (leftmost on ties) is merged. Each final symbol
 * is its token, or, when the vocabulary lacks it, its bytes as "<0xNN>" byte tokens (byte
 * fallback), or the unknown token when even those are missing.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

typedef struct spm_sym {
    int64_t prev, next;
    size_t start, len; /* bytes of the escaped text; len 0 once merged away */
} spm_sym;

static ts_status try_pair(const ts_tokenizer *t, const char *s, const spm_sym *sym, int64_t l,
                          int64_t r, tok_merge_queue *h, ts_error *err) {
    if (l < 0 || r < 0) {
        return TS_OK;
    }
    size_t len = sym[l].len + sym[r].len;
    ts_token id = tok_vmap_find(t, s + sym[l].start, len);
    if (id == TS_TOKEN_NULL) {
        return TS_OK;
    }
    /* Higher score merges first. */
    tok_merge p = {.key = -(double)t->tokens[id].score, .left = l, .right = r, .len = len};
    return tok_merge_push(h, &p, err);
}

static ts_status emit_symbol(const ts_tokenizer *t, const char *s, const spm_sym *y, tok_ids *out,
                             ts_error *err) {
    ts_token id = tok_vmap_find(t, s + y->start, y->len);
    if (id != TS_TOKEN_NULL) {
        return tok_ids_push(out, id, err);
    }
    for (size_t i = 0; i < y->len; i++) {
        unsigned char b = (unsigned char)s[y->start + i];
        ts_token bt = t->byte_token[b] != TS_TOKEN_NULL ? t->byte_token[b] : t->sp.unk;
        if (bt == TS_TOKEN_NULL) {
            return ts_error_set(err, TS_ERR_NOT_FOUND,
                                "tokenizer: byte 0x%02X at offset %zu has no token (no <0x%02X>, "
                                "no unknown token)",
                                b, y->start + i, b);
        }
        ts_status st = tok_ids_push(out, bt, err);
        if (st != TS_OK) {
            return st;
        }
        if (t->byte_token[b] == TS_TOKEN_NULL) {
            break; /* one unknown token stands for the whole symbol */
        }
    }
    return TS_OK;
}

ts_status tok_spm_encode(const ts_tokenizer *t, const char *text, size_t len, bool prefix_space,
                         tok_ids *out, ts_error *err) {
    tok_buf esc = {0};
    spm_sym *sym = NULL;
    tok_merge_queue heap = {0};
    ts_status st = prefix_space ? tok_buf_append(&esc, "\xE2\x96\x81", 3, err) : TS_OK;
    for (size_t i = 0; i < len && st == TS_OK; i++) {
        st = text[i] == ' ' ? tok_buf_append(&esc, "\xE2\x96\x81", 3, err)
                            : tok_buf_append(&esc, text + i, 1, err);
    }
    if (st != TS_OK || esc.n == 0) {
        goto done;
    }
    sym = malloc(esc.n * sizeof *sym);
    if (sym == NULL) {
        st = ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu symbols", esc.n);
        goto done;
    }
    size_t n_sym = 0;
    for (size_t off = 0; off < esc.n;) {
        uint32_t cp;
        size_t l = ts_utf8_decode(esc.v + off, esc.n - off, &cp);
        if (l == 0) {
            l = 1;
        }
        sym[n_sym].prev = (int64_t)n_sym - 1;
        sym[n_sym].next = off + l < esc.n ? (int64_t)n_sym + 1 : -1;
        sym[n_sym].start = off;
        sym[n_sym].len = l;
        n_sym++;
        off += l;
    }
    for (size_t i = 1; i < n_sym && st == TS_OK; i++) {
        st = try_pair(t, esc.v, sym, (int64_t)i - 1, (int64_t)i, &heap, err);
    }
    while (st == TS_OK && heap.n > 0) {
        tok_merge p = tok_merge_pop(&heap);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.len) {
            continue;
        }
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) {
            sym[r->next].prev = p.left;
        }
        st = try_pair(t, esc.v, sym, l->prev, p.left, &heap, err);
        if (st == TS_OK) {
            st = try_pair(t, esc.v, sym, p.left, l->next, &heap, err);
        }
    }
    for (int64_t i = 0; st == TS_OK && i >= 0; i = sym[i].next) {
        st = emit_symbol(t, esc.v, &sym[i], out, err);
    }
done:
    free(esc.v);
    free(sym);
    tok_merge_queue_free(&heap);
    return st;
}
