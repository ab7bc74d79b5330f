/*
 * cpu_pack.c — the CPU backend's store of repacked weights (cpu_pack.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/threadpool.h"
#include "util/error.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool cpu_pack_eligible(const ts_tensor *w) {
    const ts_buffer *b = w->res_buffer;
    if (b == NULL || !b->constant || w->data == NULL) {
        return false;
    }
    size_t rb = 0;
    if (!ts_type_row_bytes((uint32_t)w->type, (uint64_t)w->ne[0], &rb) || w->nb[1] != rb) {
        return false;
    }
    /* Dense over the higher dimensions too, so that the matrices are one run of rows. */
    if (w->nb[2] != (size_t)w->ne[1] * w->nb[1] || w->nb[3] != (size_t)w->ne[2] * w->nb[2]) {
        return false;
    }
    return ts_quant_packable(w->type, w->ne[0], w->ne[1]);
}

static size_t hash_of(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static bool same(const cpu_pack_entry *e, const ts_tensor *w, int64_t rows) {
    return e->src == w->data && e->type == w->type && e->k == w->ne[0] && e->rows == rows;
}

/* Inserts e (its src not present) into a table with room. */
static void put(cpu_pack_entry *slot, size_t cap, const cpu_pack_entry *e) {
    size_t i = hash_of(e->src, cap);
    while (slot[i].src != NULL) {
        i = (i + 1) & (cap - 1);
    }
    slot[i] = *e;
}

static bool grow(cpu_pack_store *s) {
    size_t cap = s->cap == 0 ? 64 : 2 * s->cap;
    cpu_pack_entry *slot = calloc(cap, sizeof *slot);
    if (slot == NULL) {
        return false;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slot[i].src != NULL) {
            put(slot, cap, &s->slot[i]);
        }
    }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
    return true;
}

/* One packing job, split over the pool's threads by groups of rows. */
typedef struct pack_job {
    ts_type type;
    void *dst;
    const void *src;
    int64_t k, groups;
    size_t group_bytes;
} pack_job;

static void pack_task(void *arg, int ith, int nth) {
    const pack_job *j = arg;
    const int64_t lo = j->groups * ith / nth, hi = j->groups * (ith + 1) / nth;
    if (hi > lo) {
        ts_quant_pack(j->type, (char *)j->dst + (size_t)lo * j->group_bytes,
                      (const char *)j->src + (size_t)lo * j->group_bytes, j->k,
                      (hi - lo) * TS_PACK_ROWS);
    }
}

/* Hands the whole pages of [p, p + n) of a file mapping back to the kernel. */
static void drop_pages(const void *p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) {
        return;
    }
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t hi = ((uintptr_t)p + n) / (uintptr_t)page * (uintptr_t)page;
    if (hi > lo) {
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: failure changes nothing */
    }
}

/* Memory for one packed copy. A copy of 2 MiB or more starts on a 2 MiB boundary and its whole
 * 2 MiB pages are asked for as huge pages (transparent huge pages, which a kernel set to
 * "madvise" gives only on request): decoding streams every copy once per token, and in 4 KiB
 * pages each 4 KiB read costs a TLB miss, a two-level walk under a hypervisor (8B Q8_0 decoding
 * on the 2-core Zen 3 VM: 2.08 -> 2.24 t/s, BENCHMARKS.md). The tail past the last whole page
 * stays in small pages, so no copy grows by more than its bytes. Advice only: where the kernel
 * has no huge pages nothing changes. */
static void *alloc_copy(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    const size_t size = (bytes + 63) / 64 * 64;
    if (bytes < huge) {
        return aligned_alloc(64, size);
    }
    void *p = NULL; /* posix_memalign: aligned_alloc wants a size that is a multiple of 2 MiB */
    if (posix_memalign(&p, huge, size) != 0) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
}

ts_status cpu_pack_get(cpu_pack_store *s, ts_threadpool *pool, const ts_tensor *w, const void **out,
                       ts_error *err) {
    *out = NULL;
    const int64_t rows = w->ne[1] * w->ne[2] * w->ne[3];
    if (s->cap > 0) {
        for (size_t i = hash_of(w->data, s->cap); s->slot[i].src != NULL;
             i = (i + 1) & (s->cap - 1)) {
            if (same(&s->slot[i], w, rows)) {
                *out = s->slot[i].data;
                return TS_OK;
            }
        }
    }
    if (2 * (s->n + 1) > s->cap && !grow(s)) {
        return ts_error_set(err, TS_ERR_NOMEM, "cpu: repacking '%s': out of memory", w->name);
    }
    const double t0 = now_ms();
    const size_t bytes = (size_t)rows * w->nb[1];
    void *data = alloc_copy(bytes);
    if (data == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "cpu: repacking '%s': %zu bytes", w->name, bytes);
    }
    pack_job job = {w->type, data, w->data, w->ne[0], rows / TS_PACK_ROWS, TS_PACK_ROWS * w->nb[1]};
    ts_threadpool_run(pool, pack_task, &job);
    if (w->res_buffer->file_mapped) {
        drop_pages(w->data, bytes);
    }
    cpu_pack_entry e = {w->data, w->res_buffer, w->type, w->ne[0], rows, data};
    put(s->slot, s->cap, &e);
    s->n++;
    s->bytes += bytes;
    s->ms += now_ms() - t0;
    *out = data;
    return TS_OK;
}

void cpu_pack_forget(cpu_pack_store *s, const ts_buffer *buf) {
    bool any = false;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slot[i].src != NULL && s->slot[i].buf == buf) {
            size_t rb = 0;
            ts_type_row_bytes((uint32_t)s->slot[i].type, (uint64_t)s->slot[i].k, &rb);
            s->bytes -= rb * (size_t)s->slot[i].rows;
            free(s->slot[i].data);
            s->slot[i].src = NULL;
            s->n--;
            any = true;
        }
    }
    if (!any) {
        return;
    }
    /* Linear probing cannot leave holes in a chain: put the survivors in a fresh table. Without
     * memory for one, drop every copy instead (they are made again when next needed). */
    cpu_pack_entry *old = s->slot;
    s->slot = calloc(s->cap, sizeof *s->slot);
    if (s->slot == NULL) {
        s->slot = old;
        cpu_pack_store_free(s);
        return;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (old[i].src != NULL) {
            put(s->slot, s->cap, &old[i]);
        }
    }
    free(old);
}

void cpu_pack_store_free(cpu_pack_store *s) {
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slot[i].src != NULL) {
            free(s->slot[i].data);
        }
    }
    free(s->slot);
    memset(s, 0, sizeof *s);
}
