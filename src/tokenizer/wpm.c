/*
 * wpm.c — WordPiece (tokenizer.ggml.model = "bert").
 *
 * Normalisation as BERT's uncased tokenizer does it: accents are stripped (the base of the
 * canonical decomposition is kept and nonspacing marks are dropped), text is lowercased,
 * control characters, NUL and U+FFFD disappear, whitespace separates words, and every
 * punctuation character, ASCII symbol and CJK ideograph is a word of its own. Invalid UTF-8
 * bytes are dropped like control characters. GGUF WordPiece vocabularies spell word-initial
 * pieces with a leading "▁" and continuation pieces bare (BERT's "##" removed), so each word
 * is matched greedily, longest piece first, as "▁" + word; a word with an unmatched position
 * becomes the unknown token.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

static bool is_cjk(uint32_t c) {
    /* The ranges BERT treats as Chinese characters (including its 0x2B920 quirk). */
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Matches one word (already "▁"-prefixed) against the vocabulary. */
static ts_status match_word(const ts_tokenizer *t, const char *w, size_t n, tok_ids *out,
                            ts_error *err) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
        ts_token id = TS_TOKEN_NULL;
        for (; j > i; j--) {
            id = tok_vmap_find(t, w + i, j - i);
            if (id != TS_TOKEN_NULL) {
                break;
            }
        }
        if (id == TS_TOKEN_NULL) {
            out->n = start; /* the whole word is unknown */
            break;
        }
        ts_status st = tok_ids_push(out, id, err);
        if (st != TS_OK) {
            return st;
        }
        i = j;
    }
    if (out->n == start) {
        if (t->sp.unk == TS_TOKEN_NULL) {
            return ts_error_set(err, TS_ERR_NOT_FOUND,
                                "tokenizer: word '%.*s' has no pieces and the vocabulary has no "
                                "unknown token",
                                (int)(n > 64 ? 64 : n), w);
        }
        return tok_ids_push(out, t->sp.unk, err);
    }
    return TS_OK;
}

ts_status tok_wpm_encode(const ts_tokenizer *t, const char *text, size_t len, tok_ids *out,
                         ts_error *err) {
    tok_buf word = {0};
    ts_status st = TS_OK;
    bool have_word = false; /* word holds "▁" plus at least one character */
    for (size_t off = 0; off < len && st == TS_OK;) {
        uint32_t cp;
        size_t l = ts_utf8_decode(text + off, len - off, &cp);
        off += l ? l : 1;
        if (l == 0) {
            continue; /* invalid byte */
        }
        if (ts_uni_is_whitespace(cp)) {
            if (have_word) {
                st = match_word(t, word.v, word.n, out, err);
                have_word = false;
            }
            continue;
        }
        uint32_t base[3];
        size_t nb = ts_uni_decompose_base(cp, base);
        for (size_t k = 0; k < nb && st == TS_OK; k++) {
            uint32_t c = base[k];
            uint16_t f = ts_uni_flags(c);
            if (c == 0 || c == 0xFFFD || (f & TS_UNI_CONTROL) || (f & TS_UNI_NONSPACING)) {
                continue;
            }
            char u8[4];
            size_t ul = ts_utf8_encode(ts_uni_tolower(c), u8);
            bool alone = (f & TS_UNI_PUNCT) || (c < 0x7F && (f & TS_UNI_SYMBOL)) || is_cjk(c);
            if (alone && have_word) {
                st = match_word(t, word.v, word.n, out, err);
                have_word = false;
            }
            if (st != TS_OK) {
                break;
            }
            if (!have_word) {
                word.n = 0;
                st = tok_buf_append(&word, "\xE2\x96\x81", 3, err);
                have_word = true;
            }
            if (st == TS_OK) {
                st = tok_buf_append(&word, u8, ul, err);
            }
            if (st == TS_OK && alone) {
                st = match_word(t, word.v, word.n, out, err);
                have_word = false;
            }
        }
    }
    if (st == TS_OK && have_word) {
        st = match_word(t, word.v, word.n, out, err);
    }
    free(word.v);
    return st;
}
