/*
 * vocab.c — building a tokenizer from GGUF metadata, with every field validated.
 *
 * Order of work: model kind and its default special ids; tokens, scores and types (lengths
 * must agree, types in range); the token -> id map (duplicates rejected); byte tokens
 * ("<0xNN>", one per byte); merges (BPE: "left right", both halves and their concatenation
 * must be tokens); the pre-tokenizer; special ids from the file (in range); flags; then the
 * derived tables (end-of-generation marks, decoded pieces, the special-token scan list).
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define KEY(name) "tokenizer.ggml." name

/* Reads an optional key: TS_OK with *found set, or the getter's error for a wrong type. */
static ts_status opt_status(ts_status st, bool *found) {
    *found = st == TS_OK;
    return st == TS_ERR_NOT_FOUND ? TS_OK : st;
}

static ts_status read_model(ts_tokenizer *t, const ts_gguf *g, ts_error *err) {
    ts_gguf_str model;
    ts_status st = ts_gguf_get_str(g, KEY("model"), &model, err);
    if (st == TS_ERR_NOT_FOUND) {
        return ts_error_set(err, TS_ERR_NOT_FOUND,
                            "tokenizer: the file has no vocabulary (no " KEY("model") ")");
    }
    if (st != TS_OK) {
        return st;
    }
    ts_tokenizer_special *sp = &t->sp;
    *sp = (ts_tokenizer_special){TS_TOKEN_NULL, TS_TOKEN_NULL, TS_TOKEN_NULL, TS_TOKEN_NULL,
                                 TS_TOKEN_NULL, TS_TOKEN_NULL, TS_TOKEN_NULL, TS_TOKEN_NULL,
                                 false,         false,         false,         false};
    if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0) {
        t->kind = TS_TOKENIZER_SPM;
        sp->bos = 1, sp->eos = 2, sp->unk = 0;
        sp->add_bos = true;
        sp->add_space_prefix = true;
    } else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0) {
        t->kind = TS_TOKENIZER_BPE;
        sp->bos = 11, sp->eos = 11;
    } else if (model.len == 4 && memcmp(model.ptr, "bert", 4) == 0) {
        t->kind = TS_TOKENIZER_WPM;
        sp->bos = 101, sp->unk = 100, sp->sep = 102, sp->pad = 0, sp->mask = 103;
        sp->add_bos = true;
        sp->add_sep = true;
    } else {
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "tokenizer: unsupported " KEY("model") " '%.*s' (supported: llama, "
                                                                   "gpt2, bert)",
                            (int)(model.len > 64 ? 64 : model.len), model.ptr);
    }
    return TS_OK;
}

static ts_status read_tokens(ts_tokenizer *t, const ts_gguf *g, ts_error *err) {
    ts_gguf_array toks, scores, types;
    ts_status st = ts_gguf_get_array(g, KEY("tokens"), &toks, err);
    if (st != TS_OK) {
        return st == TS_ERR_NOT_FOUND
                   ? ts_error_set(err, st, "tokenizer: no token list (" KEY("tokens") ")")
                   : st;
    }
    if (toks.type != TS_GGUF_STRING || toks.n == 0 || toks.n >= INT32_MAX) {
        return ts_error_set(
            err, TS_ERR_FORMAT,
            "tokenizer: " KEY("tokens") " must be a non-empty array of fewer "
                                        "than 2^31 strings (got %llu elements of type %s)",
            (unsigned long long)toks.n, ts_gguf_type_name(toks.type));
    }
    bool have_scores, have_types;
    if ((st = opt_status(ts_gguf_get_array(g, KEY("scores"), &scores, err), &have_scores)) ||
        (st = opt_status(ts_gguf_get_array(g, KEY("token_type"), &types, err), &have_types))) {
        return st;
    }
    if (have_scores && scores.n != toks.n) {
        return ts_error_set(
            err, TS_ERR_FORMAT,
            "tokenizer: " KEY("scores") " has %llu entries but " KEY("tokens") " has %llu",
            (unsigned long long)scores.n, (unsigned long long)toks.n);
    }
    if (have_types && types.n != toks.n) {
        return ts_error_set(
            err, TS_ERR_FORMAT,
            "tokenizer: " KEY("token_type") " has %llu entries but " KEY("tokens") " has %llu",
            (unsigned long long)types.n, (unsigned long long)toks.n);
    }
    t->n_vocab = (uint32_t)toks.n;
    t->tokens = calloc(t->n_vocab, sizeof *t->tokens);
    if (t->tokens == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %u tokens", t->n_vocab);
    }
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tokens[i];
        ts_gguf_str s;
        if ((st = ts_gguf_array_str(&toks, i, &s, err)) != TS_OK) {
            return ts_error_prefix(err, "tokenizer: token %u: ", i);
        }
        if (s.len > UINT32_MAX / 2) {
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer: token %u is %llu bytes long", i,
                                (unsigned long long)s.len);
        }
        e->text = s.ptr;
        e->len = (uint32_t)s.len;
        if (e->len > t->max_token_len) {
            t->max_token_len = e->len;
        }
        e->type = TS_TOKEN_TYPE_NORMAL;
        if (have_scores) {
            double v;
            if ((st = ts_gguf_array_float(&scores, i, &v, err)) != TS_OK) {
                return ts_error_prefix(err, "tokenizer: score of token %u: ", i);
            }
            if (!isfinite(v)) {
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tokenizer: token %u '%.*s' has a non-finite score", i,
                                    (int)(e->len > 64 ? 64 : e->len), e->text);
            }
            e->score = (float)v;
        }
        if (have_types) {
            int64_t v;
            if ((st = ts_gguf_array_int(&types, i, &v, err)) != TS_OK) {
                return ts_error_prefix(err, "tokenizer: type of token %u: ", i);
            }
            if (v < TS_TOKEN_TYPE_UNDEFINED || v > TS_TOKEN_TYPE_BYTE) {
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tokenizer: token %u '%.*s' has type %lld (valid: 0..6)", i,
                                    (int)(e->len > 64 ? 64 : e->len), e->text, (long long)v);
            }
            e->type = (uint8_t)v;
        }
    }
    return TS_OK;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char)toupper((unsigned char)c);
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static ts_status read_byte_tokens(ts_tokenizer *t, ts_error *err) {
    for (int b = 0; b < 256; b++) {
        t->byte_token[b] = TS_TOKEN_NULL;
    }
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        const tok_entry *e = &t->tokens[i];
        if (e->type != TS_TOKEN_TYPE_BYTE) {
            continue;
        }
        int hi = e->len == 6 ? hex_val(e->text[3]) : -1;
        int lo = e->len == 6 ? hex_val(e->text[4]) : -1;
        if (e->len != 6 || memcmp(e->text, "<0x", 3) != 0 || e->text[5] != '>' || hi < 0 ||
            lo < 0) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tokenizer: token %u '%.*s' has type byte but is not of the form "
                                "<0xNN>",
                                i, (int)(e->len > 64 ? 64 : e->len), e->text);
        }
        int b = hi * 16 + lo;
        if (t->byte_token[b] != TS_TOKEN_NULL) {
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tokenizer: token %u '%.*s' repeats byte token %d", i, 6, e->text,
                                t->byte_token[b]);
        }
        t->byte_token[b] = (ts_token)i;
    }
    if (t->kind == TS_TOKENIZER_BPE) {
        tok_byte_level_init(t);
        for (int b = 0; b < 256; b++) {
            t->byte_token[b] = tok_vmap_find(t, t->byte_enc[b], t->byte_enc_len[b]);
        }
    } else if (t->kind == TS_TOKENIZER_SPM) {
        /* Vocabularies without "<0xNN>" tokens fall back to a one-byte token when present. */
        for (int b = 0; b < 256; b++) {
            if (t->byte_token[b] == TS_TOKEN_NULL) {
                char c = (char)b;
                t->byte_token[b] = tok_vmap_find(t, &c, 1);
            }
        }
    }
    return TS_OK;
}

static ts_status read_merges(ts_tokenizer *t, const ts_gguf *g, ts_error *err) {
    ts_gguf_array m;
    ts_status st = ts_gguf_get_array(g, KEY("merges"), &m, err);
    if (st != TS_OK) {
        return st == TS_ERR_NOT_FOUND
                   ? ts_error_set(err, st, "tokenizer: a gpt2 vocabulary needs " KEY("merges"))
                   : st;
    }
    if (m.type != TS_GGUF_STRING || m.n >= INT32_MAX) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "tokenizer: " KEY("merges") " must be an array of strings (got %llu "
                                                        "elements of type %s)",
                            (unsigned long long)m.n, ts_gguf_type_name(m.type));
    }
    if ((st = tok_mmap_init(t, (size_t)m.n, err)) != TS_OK) {
        return st;
    }
    t->n_merges = (uint32_t)m.n;
    tok_buf cat = {0};
    for (uint32_t i = 0; i < t->n_merges && st == TS_OK; i++) {
        ts_gguf_str s;
        if ((st = ts_gguf_array_str(&m, i, &s, err)) != TS_OK) {
            st = ts_error_prefix(err, "tokenizer: merge %u: ", i);
            break;
        }
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        int shown = (int)(s.len > 64 ? 64 : s.len);
        if (sp == NULL || sp + 1 == s.ptr + s.len) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "tokenizer: merge %u '%.*s' is not of the form 'left right'", i,
                              shown, s.ptr);
            break;
        }
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        ts_token l = tok_vmap_find(t, s.ptr, ll), r = tok_vmap_find(t, sp + 1, rl);
        cat.n = 0;
        if ((st = tok_buf_append(&cat, s.ptr, ll, err)) != TS_OK ||
            (st = tok_buf_append(&cat, sp + 1, rl, err)) != TS_OK) {
            break;
        }
        ts_token res = tok_vmap_find(t, cat.v, cat.n);
        if (l == TS_TOKEN_NULL || r == TS_TOKEN_NULL || res == TS_TOKEN_NULL) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tokenizer: merge %u '%.*s': %s is not a token",
                              i, shown, s.ptr,
                              l == TS_TOKEN_NULL   ? "the left part"
                              : r == TS_TOKEN_NULL ? "the right part"
                                                   : "the merged result");
            break;
        }
        tok_mmap_insert(t, l, r, (int32_t)i, res);
    }
    free(cat.v);
    return st;
}

static ts_status read_pre(ts_tokenizer *t, const ts_gguf *g, ts_error *err) {
    ts_gguf_str pre = {"default", 7};
    bool found;
    ts_status st = opt_status(ts_gguf_get_str(g, KEY("pre"), &pre, err), &found);
    if (st != TS_OK) {
        return st;
    }
    if (!found) {
        pre = (ts_gguf_str){"default", 7};
    }
    if (pre.len > 128 || memchr(pre.ptr, '\0', pre.len) != NULL) {
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer: " KEY("pre") " is not a valid name");
    }
    t->pre_name = malloc(pre.len + 1);
    if (t->pre_name == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory");
    }
    memcpy(t->pre_name, pre.ptr, pre.len);
    t->pre_name[pre.len] = '\0';
    /* Only byte-level BPE vocabularies have a pre-tokenizer; SentencePiece and WordPiece
     * files often store "default" or a family name, which does not change how they split. */
    return t->kind == TS_TOKENIZER_BPE ? tok_pretok_init(t, t->pre_name, err) : TS_OK;
}

static ts_status read_special_id(ts_tokenizer *t, const ts_gguf *g, const char *key, ts_token *id,
                                 ts_error *err) {
    int64_t v;
    bool found;
    ts_status st = opt_status(ts_gguf_get_int(g, key, &v, err), &found);
    if (st != TS_OK || !found) {
        return st;
    }
    if (v == -1) {
        *id = TS_TOKEN_NULL; /* some writers store -1 for "none" */
        return TS_OK;
    }
    if (v < 0 || v >= (int64_t)t->n_vocab) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "tokenizer: %s = %lld is outside the vocabulary (%u tokens)", key,
                            (long long)v, t->n_vocab);
    }
    *id = (ts_token)v;
    return TS_OK;
}

static ts_status read_flag(const ts_gguf *g, const char *key, bool *flag, ts_error *err) {
    bool v, found;
    ts_status st = opt_status(ts_gguf_get_bool(g, key, &v, err), &found);
    if (st == TS_OK && found) {
        *flag = v;
    }
    return st;
}

static ts_status read_specials(ts_tokenizer *t, const ts_gguf *g, ts_error *err) {
    ts_tokenizer_special *sp = &t->sp;
    /* Built-in defaults only stand when they name a token. */
    ts_token *all[] = {&sp->bos, &sp->eos, &sp->eot, &sp->eom,
                       &sp->unk, &sp->sep, &sp->pad, &sp->mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] >= (ts_token)t->n_vocab) {
            *all[i] = TS_TOKEN_NULL;
        }
    }
    ts_token cls = TS_TOKEN_NULL;
    bool have_bos = ts_gguf_find_key(g, KEY("bos_token_id"), &(uint64_t){0}) == TS_OK;
    ts_status st;
    if ((st = read_special_id(t, g, KEY("bos_token_id"), &sp->bos, err)) ||
        (st = read_special_id(t, g, KEY("eos_token_id"), &sp->eos, err)) ||
        (st = read_special_id(t, g, KEY("eot_token_id"), &sp->eot, err)) ||
        (st = read_special_id(t, g, KEY("eom_token_id"), &sp->eom, err)) ||
        (st = read_special_id(t, g, KEY("unknown_token_id"), &sp->unk, err)) ||
        (st = read_special_id(t, g, KEY("seperator_token_id"), &sp->sep, err)) ||
        (st = read_special_id(t, g, KEY("padding_token_id"), &sp->pad, err)) ||
        (st = read_special_id(t, g, KEY("mask_token_id"), &sp->mask, err)) ||
        (st = read_special_id(t, g, KEY("cls_token_id"), &cls, err))) {
        return st;
    }
    if (!have_bos && cls != TS_TOKEN_NULL) {
        sp->bos = cls; /* BERT files name [CLS] instead of a bos */
    }
    if ((st = read_flag(g, KEY("add_bos_token"), &sp->add_bos, err)) ||
        (st = read_flag(g, KEY("add_eos_token"), &sp->add_eos, err)) ||
        (st = read_flag(g, KEY("add_sep_token"), &sp->add_sep, err)) ||
        (st = read_flag(g, KEY("add_space_prefix"), &sp->add_space_prefix, err))) {
        return st;
    }
    struct {
        bool on;
        ts_token id;
        const char *what;
    } need[] = {{sp->add_bos, sp->bos, "add_bos_token is set but there is no bos token"},
                {sp->add_eos, sp->eos, "add_eos_token is set but there is no eos token"},
                {sp->add_sep, sp->sep, "add_sep_token is set but there is no separator token"}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (need[i].on && need[i].id == TS_TOKEN_NULL) {
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer: %s", need[i].what);
        }
    }
    return TS_OK;
}

static bool text_is(const tok_entry *e, const char *s) {
    size_t n = strlen(s);
    return e->len == n && memcmp(e->text, s, n) == 0;
}

/* End-of-generation marks: eos/eot/eom and the turn-ending tokens models spell by text. */
static void mark_eog(ts_tokenizer *t) {
    static const char *const k_eot_texts[] = {
        "<|eot_id|>",     "<|im_end|>", "<|end|>", "<end_of_turn>",
        "<|endoftext|>",  "<|eom_id|>", "<EOT>",   "<｜end▁of▁sentence｜>",
        "<|end_of_text|>"};
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tokens[i];
        for (size_t k = 0; k < sizeof k_eot_texts / sizeof k_eot_texts[0]; k++) {
            if (text_is(e, k_eot_texts[k])) {
                e->flags |= TOKF_EOG;
                if (t->sp.eot == TS_TOKEN_NULL && k != 5) {
                    t->sp.eot = (ts_token)i;
                }
                if (t->sp.eom == TS_TOKEN_NULL && k == 5) {
                    t->sp.eom = (ts_token)i;
                }
            }
        }
    }
    ts_token ends[] = {t->sp.eos, t->sp.eot, t->sp.eom};
    for (size_t i = 0; i < 3; i++) {
        if (ends[i] != TS_TOKEN_NULL) {
            t->tokens[ends[i]].flags |= TOKF_EOG;
        }
    }
}

/* Phi-3's added tokens swallow the whitespace after them (rstrip in its tokenizer.json); the
 * GGUF does not record this, so it is recognised by the model name as the reference does. */
static void phi3_strip_flags(ts_tokenizer *t, const ts_gguf *g) {
    ts_gguf_str name;
    /* Absent (or not a string) means the name says nothing about Phi-3. */
    ts_error ignored = {0};
    if (ts_gguf_get_str(g, "general.name", &name, &ignored) != TS_OK) {
        return;
    }
    char low[256];
    size_t n = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
    for (size_t i = 0; i < n; i++) {
        low[i] = (char)tolower((unsigned char)name.ptr[i]);
    }
    low[n] = '\0';
    if (strstr(low, "phi-3") == NULL && strstr(low, "phi3") == NULL) {
        return;
    }
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tokens[i];
        bool special = e->type == TS_TOKEN_TYPE_CONTROL || e->type == TS_TOKEN_TYPE_USER_DEFINED ||
                       e->type == TS_TOKEN_TYPE_UNKNOWN;
        if ((special || text_is(e, "</s>")) && !text_is(e, "<unk>") && !text_is(e, "<s>") &&
            !text_is(e, "<|endoftext|>")) {
            e->flags |= TOKF_RSTRIP;
        }
    }
}

ts_status ts_tokenizer_create(const ts_gguf *g, ts_tokenizer **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer: out is NULL");
    }
    *out = NULL;
    if (g == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer: gguf is NULL");
    }
    ts_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory");
    }
    t->gguf = g;
    ts_status st;
    if ((st = read_model(t, g, err)) || (st = read_tokens(t, g, err)) ||
        (st = tok_vmap_build(t, err)) || (st = read_byte_tokens(t, err)) ||
        (t->kind == TS_TOKENIZER_BPE && (st = read_merges(t, g, err))) ||
        (st = read_pre(t, g, err)) || (st = read_specials(t, g, err))) {
        ts_tokenizer_destroy(t);
        return st;
    }
    mark_eog(t);
    phi3_strip_flags(t, g);
    bool found;
    st = opt_status(ts_gguf_get_str(g, "tokenizer.chat_template", &t->chat_template, err), &found);
    if (st == TS_OK && !found) {
        t->chat_template.ptr = NULL;
        t->chat_template.len = 0;
    }
    if (st != TS_OK || (st = tok_build_pieces(t, err)) || (st = tok_build_special(t, err))) {
        ts_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return TS_OK;
}

void ts_tokenizer_destroy(ts_tokenizer *t) {
    if (t == NULL) {
        return;
    }
    tok_pretok_free(t);
    free(t->pre_name);
    free(t->tokens);
    free(t->vmap);
    free(t->mmap);
    free(t->special);
    free(t->special_lens);
    free(t->pieces);
    free(t);
}

ts_tokenizer_kind ts_tokenizer_get_kind(const ts_tokenizer *t) {
    return t->kind;
}

const char *ts_tokenizer_pre_name(const ts_tokenizer *t) {
    return t->pre_name;
}

uint32_t ts_tokenizer_n_vocab(const ts_tokenizer *t) {
    return t->n_vocab;
}

const ts_tokenizer_special *ts_tokenizer_get_special(const ts_tokenizer *t) {
    return &t->sp;
}

ts_token_type ts_tokenizer_token_type(const ts_tokenizer *t, ts_token id) {
    if (id < 0 || (uint32_t)id >= t->n_vocab) {
        return TS_TOKEN_TYPE_UNDEFINED;
    }
    return (ts_token_type)t->tokens[id].type;
}

bool ts_tokenizer_is_eog(const ts_tokenizer *t, ts_token id) {
    return id >= 0 && (uint32_t)id < t->n_vocab && (t->tokens[id].flags & TOKF_EOG) != 0;
}

ts_status ts_tokenizer_token_text(const ts_tokenizer *t, ts_token id, const char **text,
                                  size_t *len, ts_error *err) {
    if (id < 0 || (uint32_t)id >= t->n_vocab) {
        return ts_error_set(err, TS_ERR_RANGE, "tokenizer: token id %d is outside 0..%u", id,
                            t->n_vocab - 1);
    }
    *text = t->tokens[id].text;
    *len = t->tokens[id].len;
    return TS_OK;
}

ts_status ts_tokenizer_find(const ts_tokenizer *t, const char *text, size_t len, ts_token *id) {
    *id = tok_vmap_find(t, text, len);
    return *id == TS_TOKEN_NULL ? TS_ERR_NOT_FOUND : TS_OK;
}
