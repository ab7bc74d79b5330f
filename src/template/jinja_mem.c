/*
 * jinja_mem.c — what a render spends, in one place: the arena (memory limit, work budget,
 * stop checks, the unwinding on failure), util/buf.h buffers backed by it, hashed dicts, and
 * substring search. Everything whose cost grows with its data charges it here or through
 * jj_work, so a hostile template is stopped by a limit that names itself.
 *
 * Dicts keep insertion order in parallel key / value arrays and, past JJ_DICT_LINEAR items,
 * an open-addressing index of item numbers; hashes agree with jj_equal (equal numbers hash
 * alike whatever their type), so lookups stay Python's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"
#include "util/stop.h"

/* ---- arena -------------------------------------------------------------------------- */

struct jj_chunk {
    jj_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_MIN (64 * 1024)

void jj_arena_init(jj_arena *a, size_t limit, jmp_buf *fail_jmp, ts_error *err) {
    *a = (jj_arena){.limit = limit,
                    .limit_name = "max_memory",
                    .fail_jmp = fail_jmp,
                    .err = err,
                    .next_stop_check = JJ_STOP_EVERY};
}

void jj_arena_free(jj_arena *a) {
    for (jj_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a->scratch);
    a->scratch = NULL;
    a->scratch_size = 0;
    a->head = NULL;
    a->used_total = 0;
}

/* The one place an error unwinds: err already holds the status and message (set with
 * ts_error_set), and the entry point that owns the arena returns that status. */
void jj_arena_fail(jj_arena *a) {
    longjmp(*a->fail_jmp, 1);
}

void jj_arena_check_stop(jj_arena *a) {
    if (!a->stop) {
        return;
    }
    ts_error e = {0};
    ts_status st = ts_stop_check(a->stop, "template", &e);
    if (st == TS_OK) {
        return;
    }
    /* ts_stop_check says "template: time limit reached"; keep the engine's "template:LINE:"
     * form so every refusal names where the render was. */
    const char *msg = e.msg;
    if (strncmp(msg, "template: ", 10) == 0) {
        msg += 10;
    }
    ts_error_set(a->err, st, "template:%d: %s", a->line ? *a->line : 0, msg);
    jj_arena_fail(a);
}

void jj_arena_work(jj_arena *a, uint64_t n) {
    a->work += n;
    if (a->max_work && a->work > a->max_work) {
        ts_error_set(a->err, TS_ERR_LIMIT,
                     "template:%d: work limit of %" PRIu64
                     " units reached (max_work: bytes and items compared, searched, copied)",
                     a->line ? *a->line : 0, a->max_work);
        jj_arena_fail(a);
    }
    if (a->work >= a->next_stop_check) {
        a->next_stop_check = a->work + JJ_STOP_EVERY;
        jj_arena_check_stop(a);
    }
}

void *jj_alloc(jj_arena *a, size_t size) {
    if (size > SIZE_MAX - 64) {
        size = SIZE_MAX - 64; /* fails the limit check below */
    }
    size = (size + 15) & ~(size_t)15;
    jj_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = size > CHUNK_MIN / 4 ? size : CHUNK_MIN;
        if (a->limit && (want > a->limit || a->used_total + want + sizeof(jj_chunk) > a->limit)) {
            if (a->line) {
                ts_error_set(a->err, TS_ERR_LIMIT,
                             "template:%d: memory limit of %zu bytes reached (%s)", *a->line,
                             a->limit, a->limit_name);
            } else {
                ts_error_set(a->err, TS_ERR_LIMIT,
                             "template: compiled template larger than %zu bytes (%s): the "
                             "template has too many tags or literals",
                             a->limit, a->limit_name);
            }
            jj_arena_fail(a);
        }
        c = malloc(sizeof(jj_chunk) + want);
        if (!c) {
            ts_error_set(a->err, TS_ERR_NOMEM, "template: out of memory (%zu bytes)", want);
            jj_arena_fail(a);
        }
        c->size = want;
        c->used = 0;
        a->used_total += want + sizeof(jj_chunk);
        /* A large block gets its own chunk behind the current one, which stays open. */
        if (want != CHUNK_MIN && a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    if (a->max_work) {
        jj_arena_work(a, size);
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *jj_strdup(jj_arena *a, const char *s, size_t n) {
    char *p = jj_alloc(a, n + 1);
    if (n) {
        memcpy(p, s, n);
    }
    p[n] = 0;
    return p;
}

/* The grow function of a ts_buf in the arena: a string may not outgrow max_string, and
 * growth copies into a new block (the old one stays in the arena until the render ends). */
static void *arena_grow(void *ctx, void *old, size_t n, size_t need, size_t *cap) {
    jj_arena *a = ctx;
    if (a->max_string && need - 1 > a->max_string) {
        ts_error_set(a->err, TS_ERR_LIMIT,
                     "template:%d: a string would exceed the output limit of %zu bytes "
                     "(max_output)",
                     a->line ? *a->line : 0, a->max_string);
        jj_arena_fail(a);
    }
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        c *= 2;
    }
    char *p = jj_alloc(a, c);
    if (n) {
        memcpy(p, old, n);
    }
    *cap = c;
    return p;
}

void jj_buf_init(ts_buf *b, jj_arena *a) {
    *b = (ts_buf){.grow = arena_grow, .grow_ctx = a};
}

/* ---- dicts ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    }
    return mix64(h ^ n);
}

/* Hash consistent with jj_equal: 1, 1.0 and true hash alike (equal numbers are one key, as
 * in Python); a tuple hashes its items (depth bounded by JJ_MAX_VALUE_DEPTH); values that
 * compare by identity hash their pointer. Charges the bytes and items it reads. */
static uint64_t hash_value(jj_ctx *c, jj_value v) {
    switch (v.type) {
    case JJ_BOOL:
    case JJ_INT:
        return mix64((uint64_t)v.i);
    case JJ_FLOAT:
        if (v.f >= -9223372036854775808.0 && v.f < 9223372036854775808.0 &&
            v.f == (double)(int64_t)v.f) {
            return mix64((uint64_t)(int64_t)v.f);
        }
        {
            uint64_t bits;
            memcpy(&bits, &v.f, sizeof(bits));
            return mix64(bits ^ UINT64_C(0x9e3779b97f4a7c15));
        }
    case JJ_STR:
        if (c) {
            jj_work(c, v.s.n);
        }
        return hash_bytes(v.s.p, v.s.n);
    case JJ_LIST: {
        if (v.flags & JJ_F_GEN) {
            return mix64((uint64_t)(uintptr_t)v.l);
        }
        uint64_t h = mix64(v.l->n + 7);
        if (c) {
            jj_work(c, v.l->n);
        }
        for (size_t i = 0; i < v.l->n; i++) {
            h = mix64(h ^ hash_value(c, v.l->v[i]));
        }
        return h;
    }
    case JJ_DICT:
        return mix64(v.d->n + 11); /* equality ignores order; the size is what is stable */
    case JJ_NS:
        return mix64((uint64_t)(uintptr_t)v.d);
    case JJ_FUNC:
        return mix64((uint64_t)(uintptr_t)v.fn);
    case JJ_LOOP:
        return mix64((uint64_t)(uintptr_t)v.loop);
    default:
        return mix64(v.type);
    }
}

static void index_insert(jj_dict *d, uint64_t h, size_t item) {
    size_t mask = d->index_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        if (!d->index[i]) {
            d->index[i] = (uint32_t)(item + 1);
            return;
        }
    }
}

/* Builds the index for index_cap slots over every item (keys hashed again). */
static void index_rebuild(jj_ctx *c, jj_dict *d, size_t index_cap) {
    d->index = jj_alloc(c->arena, index_cap * sizeof(uint32_t));
    d->index_cap = index_cap;
    for (size_t k = 0; k < d->n; k++) {
        index_insert(d, hash_value(c, d->keys[k]), k);
    }
}

jj_value *jj_dict_find(jj_ctx *c, const jj_dict *d, jj_value key) {
    if (!d->index) {
        for (size_t i = 0; i < d->n; i++) {
            if (jj_equal(c, d->keys[i], key)) {
                return &d->vals[i];
            }
        }
        return NULL;
    }
    size_t mask = d->index_cap - 1;
    for (size_t i = (size_t)hash_value(c, key) & mask; d->index[i]; i = (i + 1) & mask) {
        size_t k = d->index[i] - 1;
        if (jj_equal(c, d->keys[k], key)) {
            return &d->vals[k];
        }
    }
    return NULL;
}

jj_value *jj_dict_get(const jj_dict *d, const char *key, size_t n) {
    if (!d->index) {
        for (size_t i = 0; i < d->n; i++) {
            const jj_value *k = &d->keys[i];
            if (k->type == JJ_STR && k->s.n == n && memcmp(k->s.p, key, n) == 0) {
                return &d->vals[i];
            }
        }
        return NULL;
    }
    size_t mask = d->index_cap - 1;
    for (size_t i = (size_t)hash_bytes(key, n) & mask; d->index[i]; i = (i + 1) & mask) {
        const jj_value *k = &d->keys[d->index[i] - 1];
        if (k->type == JJ_STR && k->s.n == n && memcmp(k->s.p, key, n) == 0) {
            return &d->vals[d->index[i] - 1];
        }
    }
    return NULL;
}

void jj_dict_set(jj_ctx *c, jj_dict *d, jj_value k, jj_value v) {
    jj_note_depth(c, &d->depth, v);
    jj_work(c, 1);
    jj_value *old = jj_dict_find(c, d, k);
    if (old) {
        *old = v;
        return;
    }
    if (d->n >= UINT32_MAX - 1) {
        jj_fail(c, TS_ERR_LIMIT, "a dict cannot hold more than %" PRIu32 " items", UINT32_MAX - 1);
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jj_value *nk = jj_alloc(c->arena, cap * sizeof(jj_value));
        jj_value *nv = jj_alloc(c->arena, cap * sizeof(jj_value));
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof(jj_value));
            memcpy(nv, d->vals, d->n * sizeof(jj_value));
        }
        d->keys = nk;
        d->vals = nv;
        d->cap = cap;
    }
    d->keys[d->n] = k;
    d->vals[d->n] = v;
    d->n++;
    if (d->index && d->n * 2 <= d->index_cap) {
        index_insert(d, hash_value(c, k), d->n - 1);
    } else if (d->n > JJ_DICT_LINEAR) {
        size_t cap = d->index_cap ? d->index_cap : 32;
        while (cap < d->n * 2) {
            cap *= 2;
        }
        index_rebuild(c, d, cap);
    }
}

/* ---- searching ---------------------------------------------------------------------- */

/* Candidates are found with memchr / a byte scan on the needle's first byte and checked with
 * memcmp; each check is charged the needle's length, so a search whose worst case is
 * quadratic (a needle of "aaa…b" in "aaaa…") stops at the work limit instead of running for
 * minutes. */
const char *jj_search(jj_ctx *c, const char *h, size_t hn, const char *nd, size_t nn,
                      bool from_right) {
    if (nn == 0) {
        return from_right ? h + hn : h;
    }
    if (nn > hn) {
        return NULL;
    }
    size_t last = hn - nn; /* the last position a match can start at */
    jj_work(c, nn);
    if (!from_right) {
        const char *p = h, *stop = h + last;
        while (p <= stop) {
            const char *q = memchr(p, nd[0], (size_t)(stop - p) + 1);
            if (!q) {
                jj_work(c, (size_t)(stop - p) + 1);
                return NULL;
            }
            jj_work(c, (size_t)(q - p) + nn);
            if (memcmp(q, nd, nn) == 0) {
                return q;
            }
            p = q + 1;
        }
        return NULL;
    }
    /* Backwards there is no memchr in C11: skip eight bytes at a time while none of them is
     * the needle's first byte (the usual has-zero-byte test on x ^ pattern). */
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    const uint64_t pattern = ones * (unsigned char)nd[0];
    size_t i = last + 1; /* positions [0, i) are left to try */
    jj_work(c, i);
    while (i > 0) {
        if (i >= 8) {
            uint64_t x;
            memcpy(&x, h + i - 8, 8);
            x ^= pattern;
            if (((x - ones) & ~x & highs) == 0) {
                i -= 8;
                continue;
            }
        }
        i--;
        if (h[i] == nd[0]) {
            jj_work(c, nn);
            if (memcmp(h + i, nd, nn) == 0) {
                return h + i;
            }
        }
    }
    return NULL;
}
