/*
 * test_pack.c — the packed weight layout (quant_pack.c) and the gemms that read it.
 *
 * - Layout: every byte of a packed matrix is where the layout rule puts it (computed here
 *   independently from the rule, byte by byte, with the type's field list), and unpacking
 *   gives the original rows back.
 * - Which matrices pack: types with a layout and row counts that are multiples of 16; others
 *   are refused and nothing is written.
 * - Kernels: at every ISA level this CPU runs whose table has gemm_packed, the gemm on the
 *   packed matrix gives exactly the bits of the level's gemm on the rows, for one and several
 *   activation rows, at several starting groups and lengths (a long k, so that kernels which
 *   cut k into passes are checked across the cuts). The SIMDe build (test_avx512_emu.c) checks
 *   the AVX-512 ones on hosts without AVX-512.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"
#include "quant/quant.h"
#include "qgen.h"

enum { NR = 48, NC = 70 };

/* The fields of each packed type, as (bytes, word size) in block order: the rule under test. */
typedef struct field {
    int size, ws;
} field;

typedef struct layout {
    ts_type type;
    int n;
    field f[4];
} layout;

static const layout k_layouts[] = {
    {TS_TYPE_Q4_0, 2, {{2, 2}, {16, 4}}},
    {TS_TYPE_Q4_1, 2, {{4, 4}, {16, 4}}},
    {TS_TYPE_Q5_0, 3, {{2, 2}, {4, 4}, {16, 4}}},
    {TS_TYPE_Q8_0, 2, {{2, 2}, {32, 4}}},
    {TS_TYPE_IQ4_NL, 2, {{2, 2}, {16, 4}}},
    {TS_TYPE_Q4_K, 1, {{144, 4}}},
    {TS_TYPE_Q5_K, 1, {{176, 4}}},
    {TS_TYPE_Q6_K, 4, {{128, 4}, {64, 4}, {16, 4}, {2, 2}}},
    {TS_TYPE_IQ4_XS, 1, {{136, 4}}},
    {TS_TYPE_MXFP4, 2, {{1, 1}, {16, 4}}},
};
#define N_LAYOUTS (sizeof k_layouts / sizeof k_layouts[0])

static size_t row_bytes(ts_type t, int64_t k) {
    size_t rb = 0;
    assert_true(ts_type_row_bytes(t, (uint64_t)k, &rb));
    return rb;
}

/* nr rows of k random bytes (every bit pattern: the layout must not care what they mean). */
static uint8_t *random_rows(ts_type t, int64_t k, int nr, uint64_t seed) {
    size_t n = row_bytes(t, k) * (size_t)nr;
    uint8_t *p = malloc(n);
    assert_non_null(p);
    qgen_rng rng = {seed};
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)qgen_next(&rng);
    }
    return p;
}

/* Where byte b of row r's block i goes in the packed matrix, from the field list. */
static size_t packed_at(const layout *l, size_t bs, size_t rb, int r, size_t i, size_t b) {
    size_t start = 0;
    int f = 0;
    while (b >= start + (size_t)l->f[f].size) {
        start += (size_t)l->f[f].size;
        f++;
    }
    const size_t ws = (size_t)l->f[f].ws, in = b - start;
    const size_t group = (size_t)(r / 16) * 16 * rb;
    return group + 16 * bs * i + 16 * (start + in - in % ws) + ws * (size_t)(r % 16) + in % ws;
}

static void test_layout(void **state) {
    (void)state;
    for (size_t t = 0; t < N_LAYOUTS; t++) {
        const layout *l = &k_layouts[t];
        const size_t bs = ts_type_block_bytes(l->type);
        int total = 0;
        for (int f = 0; f < l->n; f++) {
            total += l->f[f].size;
        }
        assert_int_equal(total, (int)bs);
        const int64_t k = 4 * (int64_t)ts_type_block_size(l->type);
        const size_t rb = row_bytes(l->type, k);
        uint8_t *rows = random_rows(l->type, k, NR, 11 + t);
        uint8_t *packed = malloc(rb * NR), *back = malloc(rb * NR);
        assert_non_null(packed);
        assert_non_null(back);
        assert_true(ts_quant_pack(l->type, packed, rows, k, NR));
        for (int r = 0; r < NR; r++) {
            for (size_t i = 0; i < (size_t)(k / (int64_t)ts_type_block_size(l->type)); i++) {
                for (size_t b = 0; b < bs; b++) {
                    const size_t at = packed_at(l, bs, rb, r, i, b);
                    if (packed[at] != rows[(size_t)r * rb + i * bs + b]) {
                        fail_msg("%s: row %d block %zu byte %zu is not at packed byte %zu",
                                 ts_type_name(l->type), r, i, b, at);
                    }
                }
            }
        }
        memset(back, 0, rb * NR);
        assert_true(ts_quant_unpack(l->type, back, packed, k, NR));
        assert_memory_equal(back, rows, rb * NR);
        free(rows);
        free(packed);
        free(back);
    }
}

static void test_refused(void **state) {
    (void)state;
    uint8_t src[4096] = {0}, dst[4096];
    memset(dst, 0xAB, sizeof dst);
    assert_false(ts_quant_packable(TS_TYPE_Q4_0, 32, 8));  /* not a whole group */
    assert_false(ts_quant_packable(TS_TYPE_Q4_0, 32, 17)); /* nor 17 rows */
    assert_false(ts_quant_packable(TS_TYPE_Q4_0, 48, 16)); /* k not whole blocks */
    assert_false(ts_quant_packable(TS_TYPE_Q4_K, 32, 16)); /* k below a super-block */
    assert_false(ts_quant_packable(TS_TYPE_F16, 32, 16));  /* no layout for the type */
    assert_false(ts_quant_packable(TS_TYPE_Q5_1, 32, 16));
    assert_false(ts_quant_packable(TS_TYPE_Q4_0, 0, 16));
    assert_true(ts_quant_packable(TS_TYPE_Q4_0, 32, 16));
    assert_false(ts_quant_pack(TS_TYPE_Q4_0, dst, src, 32, 8));
    assert_false(ts_quant_pack(TS_TYPE_F32, dst, src, 32, 16));
    for (size_t i = 0; i < sizeof dst; i++) {
        assert_int_equal(dst[i], 0xAB);
    }
}

/* Quantized rows (the type's own quantizer on varied rows, so scales are real). */
static uint8_t *quant_rows(const ts_quant_ops *ops, ts_type t, int64_t k, int nr, uint64_t seed) {
    const size_t rb = row_bytes(t, k);
    uint8_t *p = malloc(rb * (size_t)nr);
    float *x = malloc((size_t)k * sizeof *x);
    assert_non_null(p);
    assert_non_null(x);
    qgen_rng rng = {seed};
    const int kinds[] = {QGEN_NORMAL, QGEN_OUTLIER, QGEN_CONST_NEG, QGEN_NORMAL,
                         QGEN_ZEROS,  QGEN_HUGE,    QGEN_GRID,      QGEN_TINY};
    for (int r = 0; r < nr; r++) {
        qgen_row(&rng, kinds[r % 8], 1.0f, x, k);
        ops->from_float(x, p + (size_t)r * rb, k);
    }
    free(x);
    return p;
}

static void test_kernels(void **state) {
    (void)state;
    int checked = 0;
    for (int isa = TS_ISA_SCALAR; isa <= (int)ts_quant_cpu_isa(); isa++) {
        for (size_t t = 0; t < N_LAYOUTS; t++) {
            const ts_type type = k_layouts[t].type;
            const ts_quant_ops *ops = ts_quant_ops_get(type, (ts_isa)isa);
            if (ops == NULL || ops->gemm_packed == NULL || ops->isa != (ts_isa)isa) {
                continue;
            }
            const ts_quant_ops *ref = ts_quant_ops_get(type, TS_ISA_SCALAR);
            const ts_quant_ops *act = ts_quant_ops_get(ops->vec_dot_type, TS_ISA_SCALAR);
            const int64_t ks[] = {256, 4352};
            for (int ki = 0; ki < 2; ki++) {
                const int64_t k = ks[ki];
                const size_t rb = row_bytes(type, k), ab = row_bytes(ops->vec_dot_type, k);
                uint8_t *w = quant_rows(ref, type, k, NR, 100 + t);
                uint8_t *a = quant_rows(act, ops->vec_dot_type, k, NC, 200 + t);
                uint8_t *pk = malloc(rb * NR);
                float *want = malloc(sizeof(float) * NR * NC),
                      *got = malloc(sizeof(float) * NR * NC);
                assert_non_null(pk);
                assert_non_null(want);
                assert_non_null(got);
                assert_true(ts_quant_pack(type, pk, w, k, NR));
                const size_t ldc = sizeof(float) * NR;
                const int ncs[] = {1, 2, 3, 4, 5, 17, 32, 64, NC};
                for (int r0 = 0; r0 < NR; r0 += 16) {
                    for (int nr = 16; r0 + nr <= NR; nr += 16) {
                        for (int ci = 0; ci < (int)(sizeof ncs / sizeof ncs[0]); ci++) {
                            const int nc = ncs[ci];
                            memset(want, 0, sizeof(float) * NR * NC);
                            memset(got, 0, sizeof(float) * NR * NC);
                            ops->gemm(k, nr, nc, want, ldc, w + (size_t)r0 * rb, rb, a, ab);
                            ops->gemm_packed(k, nr, nc, got, ldc, pk + (size_t)r0 * rb, rb, a, ab);
                            if (memcmp(want, got, sizeof(float) * NR * NC) != 0) {
                                fail_msg("%s %s k=%lld rows %d..%d nc=%d: packed gemm differs",
                                         ts_isa_name((ts_isa)isa), ts_type_name(type), (long long)k,
                                         r0, r0 + nr - 1, nc);
                            }
                            checked++;
                        }
                    }
                }
                free(w);
                free(a);
                free(pk);
                free(want);
                free(got);
            }
        }
    }
    printf("packed gemm: %d shapes checked bit for bit on this CPU (best level %s)\n", checked,
           ts_isa_name(ts_quant_cpu_isa()));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
