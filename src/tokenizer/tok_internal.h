/*
 * tok_internal.h — the tokenizer's private layout, shared by the files of src/tokenizer/.
 *
 * Invariants once ts_tokenizer_create has returned:
 *  - tokens[i].text views the GGUF mapping; every non-empty token string is in the vocab map
 *    exactly once (duplicates are rejected at load).
 *  - merges (BPE only) map an ordered pair of token ids to (rank, merged id); all three ids
 *    are valid.
 *  - pieces[tokens[i].piece_off .. + piece_len) is token i decoded on its own.
 *  - special[] lists the tokens the special-token scan may find in text, by priority
 *    (longer first, then lower id).
 */
#ifndef TS_TOKENIZER_TOK_INTERNAL_H
#define TS_TOKENIZER_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

#define TOK_MAX_REGEX 8

/* Per-token flags beyond the type. */
enum {
    TOKF_EOG = 0x01,    /* ends generation */
    TOKF_LSTRIP = 0x02, /* when found in text, swallows whitespace on its left */
    TOKF_RSTRIP = 0x04, /* ... and on its right */
};

typedef struct tok_entry {
    const char *text; /* view into the GGUF file */
    uint32_t len;
    float score;        /* SentencePiece merge priority (0 when the file has no scores) */
    uint8_t type;       /* ts_token_type */
    uint8_t flags;      /* TOKF_* */
    uint32_t piece_off; /* decoded bytes in ts_tokenizer.pieces */
    uint32_t piece_len;
} tok_entry;

/* Open-addressing slot of the vocab map: hash of the token string and its id (-1 = empty). */
typedef struct tok_vslot {
    uint32_t hash;
    ts_token id;
} tok_vslot;

/* Slot of the merge map: key = left id << 32 | right id (UINT64_MAX = empty). */
typedef struct tok_mslot {
    uint64_t key;
    int32_t rank;
    ts_token result;
} tok_mslot;

struct ts_tokenizer {
    const ts_gguf *gguf;
    ts_tokenizer_kind kind;
    char *pre_name; /* malloc'd */
    uint32_t n_vocab;
    tok_entry *tokens;      /* [n_vocab] */
    uint32_t max_token_len; /* bytes */
    ts_tokenizer_special sp;
    bool ignore_merges; /* BPE: a word that is a whole token is not merged (llama3, tekken) */

    tok_vslot *vmap; /* [vmap_mask + 1] */
    size_t vmap_mask;
    tok_mslot *mmap; /* [mmap_mask + 1], BPE only */
    size_t mmap_mask;
    uint32_t n_merges;

    /* Pre-tokenizer: regexes applied one after another, each splitting the pieces the previous
     * one produced (matches and the text between them both become pieces). */
    pcre2_code *regex[TOK_MAX_REGEX];
    size_t n_regex;

    /* Byte-level BPE: byte b is written as the code point byte_cp[b] (UTF-8 in byte_enc). */
    char byte_enc[256][2];
    uint8_t byte_enc_len[256];
    /* Token for a lone byte: SentencePiece "<0xNN>" (or the one-byte token), byte-level BPE
     * the token of byte_enc[b]; TS_TOKEN_NULL when the vocabulary has none. */
    ts_token byte_token[256];

    /* Special-token scan (see tokenize.c). */
    ts_token *special; /* [n_special] by priority */
    size_t n_special;
    size_t n_user_defined;  /* how many of them are user-defined (scanned without parse_special) */
    uint32_t *special_lens; /* distinct lengths, descending */
    size_t n_special_lens;
    uint8_t special_first[256]; /* 1 when some special token starts with this byte */

    char *pieces; /* decoded token bytes, all tokens back to back */
    size_t pieces_len;

    ts_gguf_str chat_template; /* ptr NULL when absent */
};

/* ---- hashing (tok_hash.c) ---- */
uint32_t tok_hash_bytes(const char *s, size_t n);
ts_status tok_vmap_build(ts_tokenizer *t, ts_error *err);
ts_token tok_vmap_find(const ts_tokenizer *t, const char *s, size_t n);
ts_status tok_mmap_init(ts_tokenizer *t, size_t n_merges, ts_error *err);
/* Inserts (left,right) -> (rank,result) unless the pair is already present (first wins). */
void tok_mmap_insert(ts_tokenizer *t, ts_token left, ts_token right, int32_t rank, ts_token result);
/* Rank and merged id of a pair; false when the pair does not merge. */
bool tok_mmap_find(const ts_tokenizer *t, ts_token left, ts_token right, int32_t *rank,
                   ts_token *result);

/* ---- growable id buffer ---- */
typedef struct tok_ids {
    ts_token *v;
    size_t n, cap;
} tok_ids;
ts_status tok_ids_push(tok_ids *ids, ts_token id, ts_error *err);

/* ---- growable byte buffer ---- */
typedef struct tok_buf {
    char *v;
    size_t n, cap;
} tok_buf;
ts_status tok_buf_append(tok_buf *b, const char *s, size_t n, ts_error *err);

/* ---- pre-tokenizers (pretok.c) ---- */
/* Compiles the regexes of pre-tokenizer `name`; unknown names are TS_ERR_UNSUPPORTED. Sets
 * ignore_merges / add_bos defaults the way that tokenizer family expects. */
ts_status tok_pretok_init(ts_tokenizer *t, const char *name, ts_error *err);
void tok_pretok_free(ts_tokenizer *t);

/* A piece of text: [off, off + len) of the fragment being split. */
typedef struct tok_span {
    size_t off, len;
} tok_span;
typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
} tok_spans;
/* Splits text[0..len) with the pre-tokenizer's regexes into *out (cleared first). */
ts_status tok_pretok_split(const ts_tokenizer *t, const char *text, size_t len, tok_spans *out,
                           ts_error *err);

/* ---- the three models; each appends the ids of one raw text fragment ---- */
ts_status tok_bpe_encode(const ts_tokenizer *t, const char *text, size_t len, tok_ids *out,
                         ts_error *err);
/* prefix_space: put a space before the text (SentencePiece's add_space_prefix). */
ts_status tok_spm_encode(const ts_tokenizer *t, const char *text, size_t len, bool prefix_space,
                         tok_ids *out, ts_error *err);
ts_status tok_wpm_encode(const ts_tokenizer *t, const char *text, size_t len, tok_ids *out,
                         ts_error *err);

/* ---- vocabulary-derived tables (detok.c, tokenize.c) ---- */
ts_status tok_build_pieces(ts_tokenizer *t, ts_error *err);
ts_status tok_build_special(ts_tokenizer *t, ts_error *err);
void tok_byte_level_init(ts_tokenizer *t);

/* A candidate merge of adjacent symbols left and right, for the BPE and SentencePiece merge
 * loops. Pairs come out of a tok_merge_queue by ascending `key`, ties by leftmost position
 * (BPE: key = merge rank; SentencePiece: key = -score). Entries made stale by earlier merges
 * stay queued; the loops recognise them by the payload when they are popped. */
typedef struct tok_merge {
    double key;
    int64_t left, right;
    ts_token lid, rid, result; /* BPE: the pair's tokens and the merged token */
    size_t len;                /* SentencePiece: combined byte length when queued */
} tok_merge;

/* A binary min-heap of merges; zero-initialise, free with tok_merge_queue_free. */
typedef struct tok_merge_queue {
    tok_merge *v;
    size_t n, cap;
} tok_merge_queue;

ts_status tok_merge_push(tok_merge_queue *q, const tok_merge *m, ts_error *err);
/* Removes and returns the first merge; q must not be empty. */
tok_merge tok_merge_pop(tok_merge_queue *q);
void tok_merge_queue_free(tok_merge_queue *q);

#endif /* TS_TOKENIZER_TOK_INTERNAL_H */
