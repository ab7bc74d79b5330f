/*
 * test_pack_store.c — the CPU backend's store of repacked weights (cpu_pack.h): a copy holds the
 * packed layout of the weight's bytes (unpacking it gives them back), is made once per weight,
 * and a copy of 2 MiB or more starts on a 2 MiB boundary so that its pages can be huge pages
 * (decoding streams each copy once per token). Whether the kernel then gave huge pages depends
 * on its transparent-huge-page setting and free memory, so it is printed, not asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cpu/cpu_pack.h"
#include "backends/cpu/threadpool.h"
#include "quant/quant_internal.h"

enum { HUGE_PAGE = 2 << 20 };

/* A Q8_0 weight of `rows` rows of k elements in a constant (model-like) buffer, bytes from a
 * fixed generator (any bytes are a valid Q8_0 block for packing). */
typedef struct weight {
    ts_buffer buf;
    ts_tensor t;
} weight;

static void make_weight(weight *w, int64_t k, int64_t rows) {
    const size_t row_bytes = (size_t)(k / TS_QK) * sizeof(ts_block_q8_0);
    const size_t bytes = row_bytes * (size_t)rows;
    memset(w, 0, sizeof *w);
    w->buf.host = malloc(bytes);
    assert_non_null(w->buf.host);
    w->buf.size = bytes;
    w->buf.owned = true;
    w->buf.constant = true;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ((unsigned char *)w->buf.host)[i] = (unsigned char)(s >> 56);
    }
    w->t.type = TS_TYPE_Q8_0;
    w->t.n_dims = 2;
    w->t.ne[0] = k;
    w->t.ne[1] = rows;
    w->t.ne[2] = w->t.ne[3] = 1;
    w->t.nb[0] = sizeof(ts_block_q8_0);
    w->t.nb[1] = row_bytes;
    w->t.nb[2] = w->t.nb[3] = bytes;
    w->t.res_buffer = &w->buf;
    w->t.data = w->buf.host;
    snprintf(w->t.name, sizeof w->t.name, "w");
}

/* The kernel's AnonHugePages for the mapping holding p, in KiB (-1: not readable). */
static long huge_kib_at(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) {
        return -1;
    }
    char line[512];
    bool in = false;
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo = 0, hi = 0;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

static void check_copy(int64_t k, int64_t rows, bool big) {
    ts_error err = {0};
    ts_threadpool *pool = NULL;
    assert_int_equal(ts_threadpool_create(2, &pool, &err), TS_OK);
    weight w;
    make_weight(&w, k, rows);
    assert_true(cpu_pack_eligible(&w.t));

    cpu_pack_store store = {0};
    const void *copy = NULL;
    assert_int_equal(cpu_pack_get(&store, pool, &w.t, &copy, &err), TS_OK);
    assert_non_null(copy);
    assert_int_equal(store.bytes, w.buf.size);
    if (big) {
        assert_int_equal((uintptr_t)copy % HUGE_PAGE, 0);
        printf("# packed copy of %zu bytes: AnonHugePages %ld KiB (the kernel's choice)\n",
               w.buf.size, huge_kib_at(copy));
    } else {
        assert_int_equal((uintptr_t)copy % 64, 0);
    }

    /* The copy is the packed layout of the weight's bytes. */
    void *back = malloc(w.buf.size);
    assert_non_null(back);
    assert_true(ts_quant_unpack(TS_TYPE_Q8_0, back, copy, k, rows));
    assert_memory_equal(back, w.buf.host, w.buf.size);
    free(back);

    /* Asked again: the same copy, nothing new packed. */
    const void *again = NULL;
    assert_int_equal(cpu_pack_get(&store, pool, &w.t, &again, &err), TS_OK);
    assert_ptr_equal(again, copy);
    assert_int_equal(store.bytes, w.buf.size);

    cpu_pack_store_free(&store);
    free(w.buf.host);
    ts_threadpool_destroy(pool);
}

/* 4096 x 640 Q8_0: 2.72 MB, one whole 2 MiB page and a tail. */
static void test_big_copy(void **state) {
    (void)state;
    check_copy(4096, 640, true);
}

/* 256 x 32 Q8_0: 8.7 KB, an ordinary allocation. */
static void test_small_copy(void **state) {
    (void)state;
    check_copy(256, 32, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_copy),
        cmocka_unit_test(test_small_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
