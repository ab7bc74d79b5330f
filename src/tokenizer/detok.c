/*
 * detok.c — from ids back to text: per-token pieces, whole-sequence detokenization, and the
 * streaming detokenizer.
 *
 * Pieces are decoded once at load into one buffer: SentencePiece/WordPiece "▁" becomes a
 * space, "<0xNN>" becomes its byte, byte-level BPE code points become their bytes, user-
 * defined tokens stay verbatim, control and unknown tokens keep their text (shown only on
 * request), unused tokens are empty.
 *
 * Leading-space rule (SentencePiece with add_space_prefix, and WordPiece): tokenizing puts a
 * space before each run of text that starts the input or follows a special token, so the
 * first piece after such a boundary loses one leading space again.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

void tok_byte_level_init(ts_tokenizer *t) {
    /* GPT-2's alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes are
     * numbered from U+0100 in byte order. */
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = printable ? (uint32_t)b : next++;
        char u8[4];
        size_t n = ts_utf8_encode(cp, u8);
        memcpy(t->byte_enc[b], u8, n);
        t->byte_enc_len[b] = (uint8_t)n;
    }
}

/* Writes token e's piece at dst; returns its length (never more than e->len). */
static size_t decode_piece(const ts_tokenizer *t, const tok_entry *e, const int16_t *cp_to_byte,
                           char *dst) {
    switch (e->type) {
    case TS_TOKEN_TYPE_UNUSED:
        return 0;
    case TS_TOKEN_TYPE_CONTROL:
    case TS_TOKEN_TYPE_UNKNOWN:
    case TS_TOKEN_TYPE_USER_DEFINED:
        memcpy(dst, e->text, e->len);
        return e->len;
    case TS_TOKEN_TYPE_BYTE: {
        /* Validated at load as "<0xNN>". */
        char hex[3] = {e->text[3], e->text[4], 0};
        dst[0] = (char)strtol(hex, NULL, 16);
        return 1;
    }
    default:
        break;
    }
    size_t n = 0;
    if (t->kind != TS_TOKENIZER_BPE) {
        for (size_t i = 0; i < e->len;) {
            if (e->len - i >= 3 && memcmp(e->text + i, "\xE2\x96\x81", 3) == 0) {
                dst[n++] = ' ';
                i += 3;
            } else {
                dst[n++] = e->text[i++];
            }
        }
        return n;
    }
    for (size_t i = 0; i < e->len;) {
        uint32_t cp;
        size_t l = ts_utf8_decode(e->text + i, e->len - i, &cp);
        if (l > 0 && cp < 0x144 && cp_to_byte[cp] >= 0) {
            dst[n++] = (char)cp_to_byte[cp];
        } else {
            /* Not in the byte alphabet: keep the character's own bytes. */
            l = l ? l : 1;
            memcpy(dst + n, e->text + i, l);
            n += l;
        }
        i += l;
    }
    return n;
}

ts_status tok_build_pieces(ts_tokenizer *t, ts_error *err) {
    int16_t cp_to_byte[0x144];
    for (size_t i = 0; i < 0x144; i++) {
        cp_to_byte[i] = -1;
    }
    if (t->kind == TS_TOKENIZER_BPE) {
        for (int b = 0; b < 256; b++) {
            uint32_t cp;
            ts_utf8_decode(t->byte_enc[b], t->byte_enc_len[b], &cp);
            cp_to_byte[cp] = (int16_t)b;
        }
    }
    size_t total = 1;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        total += t->tokens[i].len;
    }
    if (total > UINT32_MAX) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "tokenizer: token strings total %zu bytes (max 4 GiB)", total);
    }
    t->pieces = malloc(total);
    if (t->pieces == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu bytes of pieces",
                            total);
    }
    size_t off = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tokens[i];
        e->piece_off = (uint32_t)off;
        e->piece_len = (uint32_t)decode_piece(t, e, cp_to_byte, t->pieces + off);
        off += e->piece_len;
    }
    t->pieces_len = off;
    return TS_OK;
}

static bool is_special_type(uint8_t type) {
    return type == TS_TOKEN_TYPE_CONTROL || type == TS_TOKEN_TYPE_UNKNOWN ||
           type == TS_TOKEN_TYPE_USER_DEFINED;
}

static bool strips_leading_space(const ts_tokenizer *t) {
    return (t->kind == TS_TOKENIZER_SPM && t->sp.add_space_prefix) || t->kind == TS_TOKENIZER_WPM;
}

/* The bytes token `id` contributes after `at_boundary` (start of text or after a special
 * token); updates the boundary state. */
static void piece_in_context(const ts_tokenizer *t, ts_token id, bool render_special,
                             bool *at_boundary, const char **p, size_t *n) {
    const tok_entry *e = &t->tokens[id];
    *p = t->pieces + e->piece_off;
    *n = e->piece_len;
    if (is_special_type(e->type)) {
        if (!render_special && e->type != TS_TOKEN_TYPE_USER_DEFINED) {
            *n = 0;
        }
        *at_boundary = true;
        return;
    }
    if (*at_boundary && strips_leading_space(t) && *n > 0 && (*p)[0] == ' ') {
        (*p)++;
        (*n)--;
    }
    *at_boundary = false;
}

ts_status ts_tokenizer_token_to_piece(const ts_tokenizer *t, ts_token id, bool special,
                                      const char **piece, size_t *len, ts_error *err) {
    if (id < 0 || (uint32_t)id >= t->n_vocab) {
        return ts_error_set(err, TS_ERR_RANGE, "tokenizer: token id %d is outside 0..%u", id,
                            t->n_vocab - 1);
    }
    const tok_entry *e = &t->tokens[id];
    *piece = t->pieces + e->piece_off;
    *len = e->piece_len;
    if (!special && (e->type == TS_TOKEN_TYPE_CONTROL || e->type == TS_TOKEN_TYPE_UNKNOWN)) {
        *len = 0;
    }
    return TS_OK;
}

ts_status ts_tokenizer_detokenize(const ts_tokenizer *t, const ts_token *ids, size_t n_ids,
                                  bool render_special, char **text, size_t *len, ts_error *err) {
    if (t == NULL || text == NULL || len == NULL || (ids == NULL && n_ids > 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer: NULL argument to detokenize");
    }
    *text = NULL;
    *len = 0;
    tok_buf out = {0};
    ts_status st = tok_buf_append(&out, "", 0, err);
    bool boundary = true;
    for (size_t i = 0; i < n_ids && st == TS_OK; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab) {
            st = ts_error_set(err, TS_ERR_RANGE,
                              "tokenizer: id %d at position %zu is outside the vocabulary (%u "
                              "tokens)",
                              ids[i], i, t->n_vocab);
            break;
        }
        const char *p;
        size_t n;
        piece_in_context(t, ids[i], render_special, &boundary, &p, &n);
        st = tok_buf_append(&out, p, n, err);
    }
    if (st != TS_OK) {
        free(out.v);
        return st;
    }
    *text = out.v;
    *len = out.n;
    return TS_OK;
}

/* ---- streaming ------------------------------------------------------------------------- */

struct ts_detok_stream {
    const ts_tokenizer *t;
    bool render_special;
    bool boundary;
    unsigned char pending[4]; /* bytes of a character not yet complete */
    size_t n_pending;
    tok_buf out;
};

static const char k_replacement[] = "\xEF\xBF\xBD";

ts_status ts_detok_stream_create(const ts_tokenizer *t, bool render_special, ts_detok_stream **out,
                                 ts_error *err) {
    if (t == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer: NULL argument to stream create");
    }
    ts_detok_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for a stream");
    }
    s->t = t;
    s->render_special = render_special;
    s->boundary = true;
    *out = s;
    return TS_OK;
}

void ts_detok_stream_destroy(ts_detok_stream *s) {
    if (s != NULL) {
        free(s->out.v);
        free(s);
    }
}

/* Appends the complete characters of pending + bytes to s->out, keeping an unfinished final
 * character in pending; bytes that cannot start or continue a character become U+FFFD. */
static ts_status feed_bytes(ts_detok_stream *s, const char *bytes, size_t n, ts_error *err) {
    ts_status st = TS_OK;
    for (size_t i = 0; i < n && st == TS_OK; i++) {
        s->pending[s->n_pending++] = (unsigned char)bytes[i];
        for (;;) {
            size_t need = ts_utf8_lead_len(s->pending[0]);
            bool bad = need == 0;
            for (size_t k = 1; k < s->n_pending && !bad; k++) {
                bad = (s->pending[k] & 0xC0) != 0x80;
            }
            uint32_t cp;
            if (!bad && s->n_pending < need) {
                break; /* wait for more bytes */
            }
            if (!bad && ts_utf8_decode((const char *)s->pending, s->n_pending, &cp) == need) {
                st = tok_buf_append(&s->out, (const char *)s->pending, need, err);
                s->n_pending = 0;
                break;
            }
            /* The first pending byte cannot begin a character: replace it and rescan the rest. */
            st = tok_buf_append(&s->out, k_replacement, 3, err);
            memmove(s->pending, s->pending + 1, s->n_pending - 1);
            s->n_pending--;
            if (st != TS_OK || s->n_pending == 0) {
                break;
            }
        }
    }
    return st;
}

ts_status ts_detok_stream_push(ts_detok_stream *s, ts_token id, const char **text, size_t *len,
                               ts_error *err) {
    const ts_tokenizer *t = s->t;
    s->out.n = 0;
    *text = "";
    *len = 0;
    if (id < 0 || (uint32_t)id >= t->n_vocab) {
        return ts_error_set(err, TS_ERR_RANGE, "tokenizer: token id %d is outside 0..%u", id,
                            t->n_vocab - 1);
    }
    const char *p;
    size_t n;
    piece_in_context(t, id, s->render_special, &s->boundary, &p, &n);
    ts_status st = tok_buf_append(&s->out, "", 0, err);
    if (st == TS_OK) {
        st = feed_bytes(s, p, n, err);
    }
    if (st != TS_OK) {
        return st;
    }
    *text = s->out.v;
    *len = s->out.n;
    return TS_OK;
}

ts_status ts_detok_stream_flush(ts_detok_stream *s, const char **text, size_t *len, ts_error *err) {
    s->out.n = 0;
    ts_status st = tok_buf_append(&s->out, "", 0, err);
    if (st == TS_OK && s->n_pending > 0) {
        st = tok_buf_append(&s->out, k_replacement, 3, err);
    }
    s->n_pending = 0;
    s->boundary = true;
    if (st != TS_OK) {
        *text = "";
        *len = 0;
        return st;
    }
    *text = s->out.v;
    *len = s->out.n;
    return TS_OK;
}
