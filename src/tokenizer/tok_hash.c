/*
 * tok_hash.c — open-addressing hash tables for token string -> id and merge pair -> rank,
 * plus the small growable buffers the tokenizers share.
 *
 * Both tables use linear probing over a power-of-two slot array kept at most half full, so a
 * lookup touches a couple of slots on average. The vocab map stores only (hash, id): the key
 * bytes live in the GGUF file and are compared through tokens[id].
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static uint64_t load_u64(const char *s) {
    uint64_t v;
    memcpy(&v, s, 8);
    return v;
}

static uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

uint32_t tok_hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = mix64(h ^ load_u64(s + i));
    }
    uint64_t tail = 0;
    for (size_t k = 0; i < n; i++, k++) {
        tail |= (uint64_t)(unsigned char)s[i] << (8 * k);
    }
    return (uint32_t)mix64(h ^ tail ^ 0x2545F4914F6CDD1DULL);
}

/* Smallest power of two >= 2 * n (at least 16). */
static size_t table_size(size_t n) {
    size_t size = 16;
    while (size < 2 * n) {
        size <<= 1;
    }
    return size;
}

ts_status tok_vmap_build(ts_tokenizer *t, ts_error *err) {
    size_t size = table_size(t->n_vocab);
    t->vmap = malloc(size * sizeof *t->vmap);
    if (t->vmap == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for a %zu-slot vocab map",
                            size);
    }
    t->vmap_mask = size - 1;
    for (size_t i = 0; i < size; i++) {
        t->vmap[i].hash = 0;
        t->vmap[i].id = TS_TOKEN_NULL;
    }
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->tokens[id];
        if (e->len == 0) {
            continue; /* an empty token can never be found in text */
        }
        uint32_t h = tok_hash_bytes(e->text, e->len);
        size_t at = h & t->vmap_mask;
        for (;;) {
            tok_vslot *s = &t->vmap[at];
            if (s->id == TS_TOKEN_NULL) {
                s->hash = h;
                s->id = (ts_token)id;
                break;
            }
            const tok_entry *o = &t->tokens[s->id];
            if (s->hash == h && o->len == e->len && memcmp(o->text, e->text, e->len) == 0) {
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tokenizer: token %u '%.*s' duplicates token %d", id,
                                    (int)(e->len > 64 ? 64 : e->len), e->text, s->id);
            }
            at = (at + 1) & t->vmap_mask;
        }
    }
    return TS_OK;
}

ts_token tok_vmap_find(const ts_tokenizer *t, const char *s, size_t n) {
    if (n == 0 || n > t->max_token_len) {
        return TS_TOKEN_NULL;
    }
    uint32_t h = tok_hash_bytes(s, n);
    size_t at = h & t->vmap_mask;
    for (;;) {
        const tok_vslot *slot = &t->vmap[at];
        if (slot->id == TS_TOKEN_NULL) {
            return TS_TOKEN_NULL;
        }
        const tok_entry *e = &t->tokens[slot->id];
        if (slot->hash == h && e->len == n && memcmp(e->text, s, n) == 0) {
            return slot->id;
        }
        at = (at + 1) & t->vmap_mask;
    }
}

ts_status tok_mmap_init(ts_tokenizer *t, size_t n_merges, ts_error *err) {
    size_t size = table_size(n_merges);
    t->mmap = malloc(size * sizeof *t->mmap);
    if (t->mmap == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for a %zu-slot merge map",
                            size);
    }
    t->mmap_mask = size - 1;
    for (size_t i = 0; i < size; i++) {
        t->mmap[i].key = UINT64_MAX;
    }
    return TS_OK;
}

static size_t pair_slot(uint64_t key, size_t mask) {
    return (size_t)mix64(key) & mask;
}

void tok_mmap_insert(ts_tokenizer *t, ts_token left, ts_token right, int32_t rank,
                     ts_token result) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t at = pair_slot(key, t->mmap_mask);
    while (t->mmap[at].key != UINT64_MAX) {
        if (t->mmap[at].key == key) {
            return;
        }
        at = (at + 1) & t->mmap_mask;
    }
    t->mmap[at].key = key;
    t->mmap[at].rank = rank;
    t->mmap[at].result = result;
}

bool tok_mmap_find(const ts_tokenizer *t, ts_token left, ts_token right, int32_t *rank,
                   ts_token *result) {
    if (t->mmap == NULL || left < 0 || right < 0) {
        return false;
    }
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t at = pair_slot(key, t->mmap_mask);
    while (t->mmap[at].key != UINT64_MAX) {
        if (t->mmap[at].key == key) {
            *rank = t->mmap[at].rank;
            *result = t->mmap[at].result;
            return true;
        }
        at = (at + 1) & t->mmap_mask;
    }
    return false;
}

ts_status tok_ids_push(tok_ids *ids, ts_token id, ts_error *err) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *ids->v) {
            return ts_error_set(err, TS_ERR_OVERFLOW, "tokenizer: too many tokens");
        }
        ts_token *v = realloc(ids->v, cap * sizeof *v);
        if (v == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu token ids", cap);
        }
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return TS_OK;
}

ts_status tok_buf_append(tok_buf *b, const char *s, size_t n, ts_error *err) {
    if (n > SIZE_MAX - b->n - 1) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "tokenizer: text too long");
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : cap * 2;
        }
        char *v = realloc(b->v, cap);
        if (v == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for %zu bytes of text",
                                cap);
        }
        b->v = v;
        b->cap = cap;
    }
    if (n > 0) {
        memcpy(b->v + b->n, s, n);
    }
    b->n += n;
    b->v[b->n] = '\0';
    return TS_OK;
}
