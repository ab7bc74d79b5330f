/*
 * test_avxvnni.c — the AVX-VNNI level gives the AVX2 level's bits.
 *
 * The AVX-VNNI kernels (src/quant/avxvnni/) are the AVX2 ones compiled again with each integer
 * dot step one vpdpbusd / vpdpwssd (quant/simd_avx2.h); the integer sums are exact at both
 * levels and the float operations the same, so every gemm output and every vec_dot must be
 * bit-identical, for any block contents. Checked over shapes that cross every cut of the
 * kernels (one and several activation rows, eight-row groups, sixteen-row pairs, 32-row calls,
 * 64-block passes, 64-column chunks, partial tiles, strides wider than a row) and over rows
 * from the quantizers, raw random blocks (every byte value, -128 included: both levels' sums
 * are exact for them too) and constant extreme blocks (largest levels against -128 or 127
 * everywhere, where AVX2's int16 partial sums come closest to saturating).
 *
 * Natively when this CPU runs the level: every type's AVX-VNNI table against its AVX2 table,
 * including that the functions without a dot step are the AVX2 ones and that the level has
 * packed kernels where AVX2 has them. On any AVX2 CPU, with SIMDe (libsimde-dev): the same kernel
 * files compiled without -mavxvnni, the two instructions emulated (avxvnni_emu.h, exports renamed
 * *_emu by avxvnni_emu_rename.h), against the native AVX2 kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if TS_HAVE_AVXVNNI_EMU
#include "quant/avxvnni_emu_rename.h"
#endif
#include "quant/qgen.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

#include "common/skip.h"

/* Weight and activation rows of one case: the qgen kinds through the scalar quantizer, raw
 * random blocks, and constant blocks of an extreme weight byte against an extreme activation
 * byte (0x77: MXFP4's code 7 in both nibbles, its largest level, 24, in the AVX2 kernels). */
enum { KIND_RAW = QGEN_KIND_COUNT, KIND_FILL, KIND_COUNT };
static const uint8_t k_fill_w[] = {0xFF, 0x80, 0xFF, 0x80, 0x77};
static const uint8_t k_fill_a[] = {0x80, 0x80, 0x7F, 0x7F, 0x80};
#define N_FILL ((int)sizeof k_fill_w)

/* Shapes: k in blocks of 32 elements (K-quants: 256 * (1 + blocks / 8)), weight rows, columns. */
static const struct {
    int blocks, nr, nc;
} k_shapes[] = {
    {1, 1, 1},   {1, 8, 4},    {2, 9, 5},    {3, 1, 1},  {3, 7, 3},     {5, 16, 4},   {11, 17, 9},
    {11, 32, 1}, {11, 33, 2},  {7, 40, 6},   {4, 2, 33}, {64, 8, 8},    {65, 24, 5},  {66, 1, 1},
    {66, 3, 70}, {20, 64, 64}, {20, 64, 65}, {9, 31, 7}, {136, 52, 70}, {130, 48, 1},
};
#define N_SHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

/* What is compared: one level's dot and gemm (gemm NULL: the dot only). */
typedef struct kernels {
    ts_vec_dot_fn dot;
    ts_gemm_fn gemm;
} kernels;

static size_t row_bytes(ts_type t, int64_t n) {
    size_t b = 0;
    assert_true(ts_type_row_bytes(t, (uint64_t)n, &b));
    return b;
}

static void put_u16(uint8_t *p, size_t off, uint16_t v) {
    memcpy(p + off, &v, sizeof v);
}

/* Random f16 scale of either sign, magnitude in about [2^-8, 2^2): sums stay finite. */
static uint16_t rand_half(qgen_rng *r) {
    const uint64_t v = qgen_next(r);
    return (uint16_t)((v & 0x83FFu) | ((7 + (v >> 16) % 10) << 10));
}

/* Sets the float fields of each block of a row whose other bytes are already written (the
 * scales f16 1.0 when `one`, else random), leaving quants, Q8_1's s and Q8_K's bsums as they
 * are: the kernels of both levels read them alike whatever they hold. */
static void set_scales(ts_type type, uint8_t *row, int64_t n, qgen_rng *r, bool one) {
    const size_t bb = ts_type_block_bytes(type);
    const int64_t nb = n / (int64_t)ts_type_block_size(type);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = row + (size_t)i * bb;
        const uint16_t h0 = one ? 0x3C00 : rand_half(r), h1 = one ? 0x3C00 : rand_half(r);
        switch (type) {
        case TS_TYPE_Q4_0:
        case TS_TYPE_Q5_0:
        case TS_TYPE_Q8_0:
        case TS_TYPE_IQ4_NL:
            put_u16(b, offsetof(ts_block_q4_0, d), h0);
            break;
        case TS_TYPE_Q4_1:
            put_u16(b, offsetof(ts_block_q4_1, d), h0);
            put_u16(b, offsetof(ts_block_q4_1, m), h1);
            break;
        case TS_TYPE_Q8_1:
            put_u16(b, offsetof(ts_block_q8_1, d), h0);
            put_u16(b, offsetof(ts_block_q8_1, s), h1);
            break;
        case TS_TYPE_Q4_K:
            put_u16(b, offsetof(ts_block_q4_k, d), h0);
            put_u16(b, offsetof(ts_block_q4_k, dmin), h1);
            break;
        case TS_TYPE_Q5_K:
            put_u16(b, offsetof(ts_block_q5_k, d), h0);
            put_u16(b, offsetof(ts_block_q5_k, dmin), h1);
            break;
        case TS_TYPE_Q6_K:
            put_u16(b, offsetof(ts_block_q6_k, d), h0);
            break;
        case TS_TYPE_IQ4_XS:
            put_u16(b, offsetof(ts_block_iq4_xs, d), h0);
            break;
        case TS_TYPE_MXFP4:
            /* 2^(e - 128): 1 when `one`, else 2^-8 .. 2^1 like the f16 scales */
            b[offsetof(ts_block_mxfp4, e)] = (uint8_t)(one ? 128 : 120 + qgen_next(r) % 10);
            break;
        case TS_TYPE_Q8_K: {
            const float d = one ? 1.0f : (float)(qgen_uniform(r) * 2.0 - 1.0) * 0x1p-6f;
            memcpy(b + offsetof(ts_block_q8_k, d), &d, sizeof d);
            break;
        }
        default:
            fail_msg("set_scales: no layout for %s", ts_type_name(type));
        }
    }
}

/* One row of n elements of `type` (weights: the type; activations: its vec_dot_type). */
static void make_row(ts_type type, int kind, int fill, qgen_rng *r, int64_t n, uint8_t *dst) {
    const size_t rb = row_bytes(type, n);
    if (kind == KIND_RAW || kind == KIND_FILL) {
        for (size_t i = 0; i < rb; i++) {
            dst[i] = kind == KIND_RAW ? (uint8_t)qgen_next(r) : (uint8_t)fill;
        }
        set_scales(type, dst, n, r, kind == KIND_FILL);
        return;
    }
    /* qgen rows are generated in multiples of 256 and cut to n. */
    const int64_t n256 = (n + 255) / 256 * 256;
    float *x = malloc(sizeof(float) * (size_t)n256);
    assert_non_null(x);
    qgen_row(r, kind, 1.5f, x, (int)n256);
    ts_quant_ops_get(type, TS_ISA_SCALAR)->from_float(x, dst, n);
    free(x);
}

/* Rows of one case, row j at data + j * ld; ld is one block more than a row. */
typedef struct rows {
    uint8_t *data;
    size_t ld;
} rows;

static rows make_rows(ts_type type, int kind, int fill, qgen_rng *r, int64_t n, int count) {
    rows m = {NULL, row_bytes(type, n) + ts_type_block_bytes(type)};
    m.data = malloc(m.ld * (size_t)count);
    assert_non_null(m.data);
    for (int j = 0; j < count; j++) {
        make_row(type, kind, fill, r, n, m.data + (size_t)j * m.ld);
    }
    return m;
}

/* gemm and vec_dot of `got` against `want` on every shape and row kind; fails on the first
 * differing bit. Returns the number of cases run. */
static int compare(ts_type type, const char *what, kernels got, kernels want) {
    const ts_type at = ts_quant_ops_get(type, TS_ISA_SCALAR)->vec_dot_type;
    const int64_t bs = (int64_t)ts_type_block_size(type);
    int cases = 0;
    for (int s = 0; s < N_SHAPES; s++) {
        const int nr = k_shapes[s].nr, nc = k_shapes[s].nc;
        const int64_t n = bs == 256 ? 256 * (1 + k_shapes[s].blocks / 8) : 32 * k_shapes[s].blocks;
        /* Every kind on the small shapes, three on the large ones. */
        const bool large = n * nr * nc > 2000000;
        for (int kind = 0; kind < KIND_COUNT + N_FILL - 1; kind++) {
            const int k = kind < KIND_FILL ? kind : KIND_FILL, f = kind - KIND_FILL;
            if (large && k != QGEN_NORMAL && k != KIND_RAW && !(k == KIND_FILL && f == 0)) {
                continue;
            }
            qgen_rng r = {0x5EED0000u + 977u * (uint64_t)s + 31u * (uint64_t)kind + type};
            rows w = make_rows(type, k, k == KIND_FILL ? k_fill_w[f] : 0, &r, n, nr);
            rows a = make_rows(at, k, k == KIND_FILL ? k_fill_a[f] : 0, &r, n, nc);
            const size_t ldc = sizeof(float) * (size_t)(nr + 3);
            const size_t nf = (size_t)(nr + 3) * (size_t)nc;
            float *c1 = malloc(sizeof(float) * nf), *c2 = malloc(sizeof(float) * nf);
            assert_non_null(c1);
            assert_non_null(c2);
            for (size_t i = 0; i < nf; i++) {
                c1[i] = c2[i] = -12345.0f;
            }
            if (got.gemm != NULL) {
                got.gemm(n, nr, nc, c1, ldc, w.data, w.ld, a.data, a.ld);
                want.gemm(n, nr, nc, c2, ldc, w.data, w.ld, a.data, a.ld);
                for (int j = 0; j < nc; j++) {
                    for (int i = 0; i < nr + 3; i++) {
                        const size_t e = (size_t)j * (size_t)(nr + 3) + (size_t)i;
                        if (memcmp(&c1[e], &c2[e], sizeof(float)) != 0) {
                            fail_msg("%s %s gemm k=%lld %dx%d kind %d: c[%d][%d] %.9g != %.9g",
                                     what, ts_type_name(type), (long long)n, nr, nc, kind, j, i,
                                     (double)c1[e], (double)c2[e]);
                        }
                    }
                }
            }
            for (int j = 0; j < nc && j < 5; j++) {
                for (int i = 0; i < nr && i < 9; i++) {
                    float d1, d2;
                    got.dot(n, &d1, w.data + (size_t)i * w.ld, a.data + (size_t)j * a.ld);
                    want.dot(n, &d2, w.data + (size_t)i * w.ld, a.data + (size_t)j * a.ld);
                    if (memcmp(&d1, &d2, sizeof d1) != 0) {
                        fail_msg("%s %s vec_dot k=%lld kind %d: row %d col %d %.9g != %.9g", what,
                                 ts_type_name(type), (long long)n, kind, i, j, (double)d1,
                                 (double)d2);
                    }
                }
            }
            free(c1);
            free(c2);
            free(w.data);
            free(a.data);
            cases++;
        }
    }
    return cases;
}

/* Every type's AVX-VNNI table against its AVX2 table, on this CPU. */
static void test_native(void **state) {
    (void)state;
    if (!ts_quant_isa_supported(TS_ISA_AVXVNNI)) {
        TS_SKIP("native AVX-VNNI: this CPU has no AVX-VNNI");
    }
    int cases = 0, rebuilt = 0;
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        const ts_quant_ops *v = ts_quant_ops_get((ts_type)t, TS_ISA_AVXVNNI);
        const ts_quant_ops *a2 = ts_quant_ops_get((ts_type)t, TS_ISA_AVX2);
        if (v == NULL) {
            assert_null(a2);
            continue;
        }
        assert_int_equal(v->isa, TS_ISA_AVXVNNI);
        assert_int_equal(a2->isa, TS_ISA_AVX2);
        assert_int_equal(v->vec_dot_type, a2->vec_dot_type);
        /* No dot step, nothing rebuilt: the AVX2 functions themselves. */
        assert_ptr_equal(v->to_float, a2->to_float);
        assert_ptr_equal(v->from_float, a2->from_float);
        /* Packed kernels where AVX2 has them (their bits against the row gemm: test_pack.c). */
        assert_int_equal(v->gemm_packed != NULL, a2->gemm_packed != NULL);
        const bool is_float = t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
        if (is_float || v->vec_dot == a2->vec_dot) {
            assert_true(v->vec_dot == a2->vec_dot && v->gemm == a2->gemm);
            continue;
        }
        rebuilt++;
        cases += compare((ts_type)t, "native", (kernels){v->vec_dot, v->gemm},
                         (kernels){a2->vec_dot, a2->gemm});
    }
    assert_int_equal(rebuilt, 10); /* Q4_0 Q4_1 Q5_0 Q8_0 IQ4_NL MXFP4 Q4_K Q5_K Q6_K IQ4_XS */
    printf("native: %d types, %d cases bit-identical to avx2\n", rebuilt, cases);
}

#if TS_HAVE_AVXVNNI_EMU
/* Everything avxvnni/ exports, emulated (IQ4_NL's gemm is the dispatch table's loop over the
 * dot). */
static const struct {
    ts_type type;
    kernels emu;
} k_emu[] = {
    {TS_TYPE_Q4_0, {ts_q_dot_q4_0_avxvnni_emu, ts_q_gemm_q4_0_avxvnni_emu}},
    {TS_TYPE_Q4_1, {ts_q_dot_q4_1_avxvnni_emu, ts_q_gemm_q4_1_avxvnni_emu}},
    {TS_TYPE_Q5_0, {ts_q_dot_q5_0_avxvnni_emu, ts_q_gemm_q5_0_avxvnni_emu}},
    {TS_TYPE_Q8_0, {ts_q_dot_q8_0_avxvnni_emu, ts_q_gemm_q8_0_avxvnni_emu}},
    {TS_TYPE_IQ4_NL, {ts_q_dot_iq4_nl_avxvnni_emu, NULL}},
    {TS_TYPE_MXFP4, {ts_q_dot_mxfp4_avxvnni_emu, ts_q_gemm_mxfp4_avxvnni_emu}},
    {TS_TYPE_Q4_K, {ts_q_dot_q4_k_avxvnni_emu, ts_q_gemm_q4_k_avxvnni_emu}},
    {TS_TYPE_Q5_K, {ts_q_dot_q5_k_avxvnni_emu, ts_q_gemm_q5_k_avxvnni_emu}},
    {TS_TYPE_Q6_K, {ts_q_dot_q6_k_avxvnni_emu, ts_q_gemm_q6_k_avxvnni_emu}},
    {TS_TYPE_IQ4_XS, {ts_q_dot_iq4_xs_avxvnni_emu, ts_q_gemm_iq4_xs_avxvnni_emu}},
};
#endif

/* The emulated AVX-VNNI kernels against the native AVX2 ones, on any AVX2 CPU. */
static void test_emulated(void **state) {
    (void)state;
#if TS_HAVE_AVXVNNI_EMU
    if (ts_quant_cpu_isa() < TS_ISA_AVX2) {
        TS_NOT_RUN("emulated AVX-VNNI: this CPU has no AVX2");
        skip();
    }
    int cases = 0;
    for (size_t i = 0; i < sizeof k_emu / sizeof k_emu[0]; i++) {
        const ts_quant_ops *a2 = ts_quant_ops_get(k_emu[i].type, TS_ISA_AVX2);
        assert_non_null(a2);
        cases += compare(k_emu[i].type, "emulated", k_emu[i].emu, (kernels){a2->vec_dot, a2->gemm});
    }
    printf("emulated: %d cases bit-identical to avx2\n", cases);
#else
    TS_NOT_RUN("emulated AVX-VNNI: built without SIMDe (libsimde-dev)");
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native),
        cmocka_unit_test(test_emulated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
