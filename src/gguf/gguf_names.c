/*
 * gguf_names.c — name -> index hash tables for metadata keys and tensor names.
 *
 * Open addressing with linear probing over a power-of-two table kept at most half full, so
 * duplicate detection at open time and lookups by name are O(1) on average even for files
 * with millions of entries. The table borrows the names; their owner keeps them alive.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"

struct gguf_name_slot {
    const char *name; /* NULL when the slot is empty */
    uint64_t index;
    uint64_t hash;
};

/* FNV-1a, 64-bit. */
static uint64_t hash_name(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3u;
    }
    return h;
}

static void place(struct gguf_name_slot *slots, size_t cap, struct gguf_name_slot item) {
    size_t mask = cap - 1;
    size_t i = (size_t)item.hash & mask;
    while (slots[i].name != NULL) {
        i = (i + 1) & mask;
    }
    slots[i] = item;
}

static ts_status resize(gguf_names *t, size_t cap) {
    struct gguf_name_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL) {
        return TS_ERR_NOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].name != NULL) {
            place(slots, cap, t->slots[i]);
        }
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return TS_OK;
}

ts_status gguf_names_reserve(gguf_names *t, uint64_t expected) {
    size_t cap = t->cap != 0 ? t->cap : 8;
    if (expected > SIZE_MAX / 4 / sizeof(struct gguf_name_slot)) {
        return TS_ERR_NOMEM;
    }
    while (cap < 2 * (size_t)expected) {
        cap *= 2;
    }
    return cap == t->cap ? TS_OK : resize(t, cap);
}

ts_status gguf_names_insert(gguf_names *t, const char *name, uint64_t index, uint64_t *existing) {
    *existing = UINT64_MAX;
    ts_status st = gguf_names_reserve(t, (uint64_t)t->count + 1);
    if (st != TS_OK) {
        return st;
    }
    uint64_t h = hash_name(name);
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct gguf_name_slot *slot = &t->slots[i];
        if (slot->name == NULL) {
            slot->name = name;
            slot->index = index;
            slot->hash = h;
            t->count++;
            return TS_OK;
        }
        if (slot->hash == h && strcmp(slot->name, name) == 0) {
            *existing = slot->index;
            return TS_OK;
        }
    }
}

bool gguf_names_find(const gguf_names *t, const char *name, uint64_t *index) {
    if (t->cap == 0 || name == NULL) {
        return false;
    }
    uint64_t h = hash_name(name);
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask; t->slots[i].name != NULL; i = (i + 1) & mask) {
        if (t->slots[i].hash == h && strcmp(t->slots[i].name, name) == 0) {
            *index = t->slots[i].index;
            return true;
        }
    }
    return false;
}

void gguf_names_free(gguf_names *t) {
    free(t->slots);
    t->slots = NULL;
    t->cap = 0;
    t->count = 0;
}
