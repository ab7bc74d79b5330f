/*
 * test_avx512_emu.c — the AVX-512 kernels (src/quant/avx512/) against the scalar
 * reference, on any x86-64 CPU: tests/quant/CMakeLists.txt compiles those files a second
 * time, unchanged, against SIMDe's portable intrinsics (avx512_emu.h), with every exported
 * function renamed to *_emu (avx512_emu_rename.h, included here so quant_internal.h declares
 * the _emu names). What runs is the kernels' own logic — lane layouts, nibble and high-bit
 * unpacking, scale vectors, tails, tile remainders — with each instruction emulated.
 *
 * Every function the avx512/ files export is covered (k_emu below); for Q4_0, Q4_1 and Q5_0
 * the gemm is compared with the native AVX2 dot product, whose float operations it shares.
 *
 * Tolerances (those of test_kernels.c's SIMD-vs-scalar test):
 *   - to_float: bit-identical to the scalar to_float (the same single roundings in order),
 *     on quantizer output of every qgen kind, on raw random blocks (every nibble, high bit
 *     and 6-bit scale pattern; f16 scales random, below 2^8), and for F16 / BF16 on every
 *     bit pattern (F16 without NaNs: F16C quiets a signalling NaN while the scalar
 *     conversion keeps its bits; weights never hold NaNs).
 *   - vec_dot vs the scalar vec_dot: |a - b| <= 2e-6 * S + 1e-30, S = sum |x_i y_i| over
 *     the dequantized operands (integer block sums are exact; only the f32 accumulation
 *     order differs; the scalar float types sum in double). Q4_1, Q4_K, Q5_K and Q6_K
 *     kernels (scalar and SIMD alike) sum x = level part + offset part (the min, or Q6_K's
 *     -32 bias) as two separately rounded terms, which cancel on sparse and constant rows;
 *     for them S = sum (|x_i| + 2 |o_i|) |y_i|, o_i the offset part, which bounds the
 *     magnitude of both terms (test_kernels.c's normal rows never cancel, so plain S
 *     suffices there).
 *   - gemm: every output bit-identical to the emulated vec_dot of its (row, column) pair
 *     (the batch-invariance rule of test_gemm_invariance.c, which only checks the ISA levels
 *     the CPU running it has), hence within the vec_dot tolerance of the scalar dot;
 *     padding between output columns untouched.
 *
 * Emulation differs from hardware in two known ways, neither of which matters here: SIMDe's
 * vdpbf16ps keeps bf16 denormals (the instruction flushes them; no row here holds one) and
 * adds each pair's two products in its own order (a rounding difference, inside the
 * tolerance). Without -mfma the emulated build cannot show FMA contraction differences;
 * the project compiles with -std=c11, where GCC does not contract.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quant/avx512_emu_rename.h"
#include "quant/qgen.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

/* The emulated kernels of one type; NULL where the AVX-512 table uses a lower level. */
typedef struct emu_type {
    ts_type type;
    ts_to_float_fn to_float;
    ts_vec_dot_fn vec_dot;
    ts_gemm_fn gemm;
    ts_gemm_fn gemm_packed; /* the gemm on packed weights (ts_quant_pack); NULL: none */
} emu_type;

static const emu_type k_emu[] = {
    {TS_TYPE_F32, NULL, ts_q_dot_f32_avx512_emu, ts_q_gemm_f32_avx512_emu, NULL},
    {TS_TYPE_F16, ts_q_to_float_f16_avx512_emu, ts_q_dot_f16_avx512_emu, ts_q_gemm_f16_avx512_emu,
     NULL},
    {TS_TYPE_BF16, ts_q_to_float_bf16_avx512_emu, ts_q_dot_bf16_avx512_emu,
     ts_q_gemm_bf16_avx512_emu, NULL},
    /* The AVX-512 gemm of Q4_0, Q4_1 and Q5_0 matches the AVX2 dot (native here). */
    {TS_TYPE_Q4_0, ts_q_to_float_q4_0_avx512_emu, ts_q_dot_q4_0_avx2, ts_q_gemm_q4_0_avx512_emu,
     ts_q_gemm_q4_0_packed_avx512_emu},
    {TS_TYPE_Q4_1, ts_q_to_float_q4_1_avx512_emu, ts_q_dot_q4_1_avx2, ts_q_gemm_q4_1_avx512_emu,
     ts_q_gemm_q4_1_packed_avx512_emu},
    {TS_TYPE_Q5_0, NULL, ts_q_dot_q5_0_avx2, ts_q_gemm_q5_0_avx512_emu,
     ts_q_gemm_q5_0_packed_avx512_emu},
    {TS_TYPE_IQ4_NL, NULL, ts_q_dot_iq4_nl_avx512_emu, ts_q_gemm_iq4_nl_avx512_emu,
     ts_q_gemm_iq4_nl_packed_avx512_emu},
    {TS_TYPE_MXFP4, NULL, ts_q_dot_mxfp4_avx512_emu, ts_q_gemm_mxfp4_avx512_emu,
     ts_q_gemm_mxfp4_packed_avx512_emu},
    {TS_TYPE_Q8_0, ts_q_to_float_q8_0_avx512_emu, ts_q_dot_q8_0_avx512_emu,
     ts_q_gemm_q8_0_avx512_emu, ts_q_gemm_q8_0_packed_avx512_emu},
    {TS_TYPE_Q4_K, ts_q_to_float_q4_k_avx512_emu, ts_q_dot_q4_k_avx512_emu,
     ts_q_gemm_q4_k_avx512_emu, ts_q_gemm_q4_k_packed_avx512_emu},
    {TS_TYPE_Q5_K, ts_q_to_float_q5_k_avx512_emu, ts_q_dot_q5_k_avx512_emu, NULL, NULL},
    {TS_TYPE_Q6_K, ts_q_to_float_q6_k_avx512_emu, ts_q_dot_q6_k_avx512_emu,
     ts_q_gemm_q6_k_avx512_emu, ts_q_gemm_q6_k_packed_avx512_emu},
    {TS_TYPE_IQ4_XS, NULL, ts_q_dot_iq4_xs_avx512_emu, ts_q_gemm_iq4_xs_avx512_emu, NULL},
};
#define N_EMU (sizeof k_emu / sizeof k_emu[0])

/* Row kinds: the qgen kinds through the scalar quantizer, then raw random blocks. */
enum { KIND_RAW = QGEN_KIND_COUNT, KIND_COUNT };

/* Bytes before the first row and between rows: keeps the 2- or 4-byte alignment the block
 * structs need while breaking every SIMD alignment. The last row ends exactly at the end
 * of its allocation, so under ASan a kernel reading past a row fails. */
enum { ROW_OFF = 4, ROW_PAD = 4 };

static size_t row_bytes(ts_type t, int64_t n) {
    size_t b = 0;
    assert_true(ts_type_row_bytes(t, (uint64_t)n, &b));
    return b;
}

static const ts_quant_ops *scalar_ops(ts_type t) {
    const ts_quant_ops *ops = ts_quant_ops_get(t, TS_ISA_SCALAR);
    assert_non_null(ops);
    return ops;
}

/* Random f16 scale of either sign with a random mantissa and a biased exponent in 0..22:
 * zero and subnormals up to values below 2^8 (products with the levels and scales stay
 * finite). */
static uint16_t rand_half(qgen_rng *r) {
    const uint64_t v = qgen_next(r);
    return (uint16_t)((v & 0x83FFu) | (((v >> 16) % 23) << 10));
}

/* Random int8 in -127..127: the quantizers never write -128, and the sign trick of the
 * 32-element dots relies on that. */
static int8_t rand_q8(qgen_rng *r) {
    return (int8_t)((int)(qgen_next(r) % 255) - 127);
}

static void put_u16(uint8_t *p, size_t off, uint16_t v) {
    memcpy(p + off, &v, sizeof v);
}

_Static_assert(offsetof(ts_block_q4_k, d) == offsetof(ts_block_q4_1, d) &&
                   offsetof(ts_block_q5_k, d) == offsetof(ts_block_q4_1, d) &&
                   offsetof(ts_block_q4_k, dmin) == offsetof(ts_block_q4_1, m) &&
                   offsetof(ts_block_q5_k, dmin) == offsetof(ts_block_q4_1, m),
               "raw_row writes the Q4_1, Q4_K and Q5_K scales at the same offsets");

/* Random blocks of `type` with consistent derived fields (Q8_1 s, Q8_K bsums). */
static void raw_row(ts_type type, qgen_rng *r, int64_t n, uint8_t *dst) {
    const size_t bb = ts_type_block_bytes(type);
    const int64_t nb = n / (int64_t)ts_type_block_size(type);
    for (size_t i = 0; i < bb * (size_t)nb; i++) {
        dst[i] = (uint8_t)qgen_next(r);
    }
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = dst + (size_t)i * bb;
        switch (type) {
        case TS_TYPE_Q4_0:
        case TS_TYPE_Q5_0:
        case TS_TYPE_IQ4_NL:
            put_u16(b, offsetof(ts_block_q4_0, d), rand_half(r));
            break;
        case TS_TYPE_Q4_1:
        case TS_TYPE_Q4_K:
        case TS_TYPE_Q5_K:
            /* d, then the min scale, at the same offsets in all three layouts */
            put_u16(b, offsetof(ts_block_q4_1, d), rand_half(r));
            put_u16(b, offsetof(ts_block_q4_1, m), rand_half(r));
            break;
        case TS_TYPE_Q6_K:
            put_u16(b, offsetof(ts_block_q6_k, d), rand_half(r));
            break;
        case TS_TYPE_IQ4_XS:
            /* d; the scale bytes stay random (every 6-bit pattern, -32..31) */
            put_u16(b, offsetof(ts_block_iq4_xs, d), rand_half(r));
            break;
        case TS_TYPE_MXFP4: {
            /* Exponents whose products stay finite: mostly 2^-28 .. 2^22 scales, and one block
             * in eight subnormal (e = 0 .. 3: the scale conversion's special lanes). */
            const uint64_t v = qgen_next(r);
            b[offsetof(ts_block_mxfp4, e)] =
                (uint8_t)(v % 8 == 0 ? (v >> 3) % 4 : 100 + (v >> 3) % 50);
            break;
        }
        case TS_TYPE_Q8_0:
        case TS_TYPE_Q8_1: {
            const size_t qs =
                type == TS_TYPE_Q8_0 ? offsetof(ts_block_q8_0, qs) : offsetof(ts_block_q8_1, qs);
            /* activation scale as a quantizer writes it: small enough that s stays finite */
            const uint16_t d = ts_f32_to_f16((float)(qgen_uniform(r) * 2.0 - 1.0) * 0x1p-4f);
            int32_t sum = 0;
            for (int k = 0; k < TS_QK; k++) {
                const int8_t q = rand_q8(r);
                memcpy(b + qs + k, &q, 1);
                sum += q;
            }
            put_u16(b, offsetof(ts_block_q8_0, d), d);
            if (type == TS_TYPE_Q8_1) {
                put_u16(b, offsetof(ts_block_q8_1, s),
                        ts_f32_to_f16(ts_f16_to_f32(d) * (float)sum));
            }
            break;
        }
        case TS_TYPE_Q8_K: {
            ts_block_q8_k blk;
            blk.d = (float)(qgen_uniform(r) * 2.0 - 1.0) * 0x1p-7f;
            for (int g = 0; g < TS_QK_K / 16; g++) {
                int s = 0;
                for (int k = 0; k < 16; k++) {
                    blk.qs[16 * g + k] = rand_q8(r);
                    s += blk.qs[16 * g + k];
                }
                blk.bsums[g] = (int16_t)s;
            }
            memcpy(b, &blk, sizeof blk);
            break;
        }
        default:
            fail_msg("raw_row: no raw generator for %s", ts_type_name(type));
        }
    }
}

/* One row of `type` of the given kind. Float types have no raw kind of their own (random
 * bits would overflow the dot); they get wide normal data instead. */
static void make_row(ts_type type, int kind, qgen_rng *r, int64_t n, uint8_t *dst) {
    const bool is_float = type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16;
    if (kind == KIND_RAW && !is_float) {
        raw_row(type, r, n, dst);
        return;
    }
    /* qgen rows are generated in multiples of 256 and cut to n. */
    const int64_t n256 = (n + 255) / 256 * 256;
    float *x = malloc(sizeof(float) * (size_t)n256);
    assert_non_null(x);
    qgen_row(r, kind == KIND_RAW ? QGEN_NORMAL : kind, kind == KIND_RAW ? 40.0f : 1.5f, x,
             (int)n256);
    scalar_ops(type)->from_float(x, dst, n);
    free(x);
}

/* Types whose dot kernels add the offset part of x separately: the quant bytes of each
 * block (contiguous in these layouts), which set to zero leave x = the offset part alone. */
static const struct {
    ts_type type;
    size_t first, len; /* quant bytes within a block */
} k_split[] = {
    {TS_TYPE_Q4_1, offsetof(ts_block_q4_1, qs), TS_QK / 2},
    {TS_TYPE_Q4_K, offsetof(ts_block_q4_k, qs), TS_QK_K / 2},
    {TS_TYPE_Q5_K, offsetof(ts_block_q5_k, qh), TS_QK_K / 8 + TS_QK_K / 2}, /* qh, then qs */
    {TS_TYPE_Q6_K, offsetof(ts_block_q6_k, ql), TS_QK_K / 2 + TS_QK_K / 4}, /* ql, then qh */
};

/* `count` rows of n elements, row i of kind kinds[i % nkinds], at a misaligned base. */
typedef struct rows {
    uint8_t *base; /* owned allocation */
    uint8_t *data; /* first row (base + ROW_OFF) */
    size_t ld;     /* bytes from one row to the next */
    float *deq;    /* [count, n] scalar dequantization */
    float *offs;   /* [count, n] offset part of each element (k_split types; else 0) */
} rows;

/* The offset part of one row: its blocks with the quant bytes zeroed, dequantized. */
static void offset_part(ts_type type, const uint8_t *row, int64_t n, float *out) {
    size_t first = 0, len = 0;
    for (size_t s = 0; s < sizeof k_split / sizeof k_split[0]; s++) {
        if (k_split[s].type == type) {
            first = k_split[s].first;
            len = k_split[s].len;
        }
    }
    if (len == 0) {
        memset(out, 0, sizeof(float) * (size_t)n);
        return;
    }
    const size_t bb = ts_type_block_bytes(type), rb = row_bytes(type, n);
    uint8_t *tmp = malloc(rb);
    assert_non_null(tmp);
    memcpy(tmp, row, rb);
    for (size_t b = 0; b < rb / bb; b++) {
        assert_true(first + len <= bb);
        memset(tmp + b * bb + first, 0, len);
    }
    scalar_ops(type)->to_float(tmp, out, n);
    free(tmp);
}

static void make_rows(ts_type type, int64_t n, int count, const int *kinds, int nkinds,
                      uint64_t seed, rows *out) {
    out->ld = row_bytes(type, n) + ROW_PAD;
    out->base = malloc(ROW_OFF + out->ld * (size_t)count - ROW_PAD);
    out->deq = malloc(sizeof(float) * (size_t)(n * count + 1));
    out->offs = malloc(sizeof(float) * (size_t)(n * count + 1));
    assert_non_null(out->base);
    assert_non_null(out->deq);
    assert_non_null(out->offs);
    out->data = out->base + ROW_OFF;
    qgen_rng r = {seed};
    for (int i = 0; i < count; i++) {
        uint8_t *row = out->data + (size_t)i * out->ld;
        make_row(type, kinds[i % nkinds], &r, n, row);
        scalar_ops(type)->to_float(row, out->deq + (size_t)i * (size_t)n, n);
        offset_part(type, row, n, out->offs + (size_t)i * (size_t)n);
    }
}

static void free_rows(rows *r) {
    free(r->base);
    free(r->deq);
    free(r->offs);
}

/* ---- to_float ---- */

/* Emulated vs scalar dequantization of `n` elements at row into an unaligned destination;
 * the float after the row must stay untouched. The row is copied to the end of its own
 * allocation (2-byte aligned) so that ASan sees any read past it. */
static void check_to_float(const emu_type *e, const void *row, int64_t n) {
    const size_t rb = row_bytes(e->type, n);
    uint8_t *copy = malloc(rb + 2);
    float *a = malloc(sizeof(float) * (size_t)(n + 2));
    float *b = malloc(sizeof(float) * (size_t)(n + 2));
    assert_non_null(copy);
    assert_non_null(a);
    assert_non_null(b);
    memcpy(copy + 2, row, rb);
    const void *src = copy + 2;
    a[n + 1] = b[n + 1] = -7.0f;
    scalar_ops(e->type)->to_float(src, a + 1, n);
    e->to_float(src, b + 1, n);
    if (memcmp(a + 1, b + 1, sizeof(float) * (size_t)n) != 0) {
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&a[i + 1], &b[i + 1], sizeof(float)) != 0) {
                fail_msg("to_float %s n=%lld: element %lld is %.9g, scalar %.9g",
                         ts_type_name(e->type), (long long)n, (long long)i, (double)b[i + 1],
                         (double)a[i + 1]);
            }
        }
    }
    assert_true(b[n + 1] == -7.0f);
    free(copy);
    free(a);
    free(b);
}

static void test_to_float_float_types(void **state) {
    (void)state;
    /* Every bit pattern (F16: every non-NaN one), then odd lengths at odd offsets. */
    uint16_t *all = malloc(sizeof(uint16_t) * 65536 + 8);
    assert_non_null(all);
    for (size_t t = 0; t < N_EMU; t++) {
        const emu_type *e = &k_emu[t];
        if (e->to_float == NULL || (e->type != TS_TYPE_F16 && e->type != TS_TYPE_BF16)) {
            continue;
        }
        int64_t n = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            const bool nan = e->type == TS_TYPE_F16 && (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
            if (!nan) {
                all[1 + n++] = (uint16_t)h;
            }
        }
        check_to_float(e, all + 1, n);
        static const int64_t lens[] = {0, 1, 7, 15, 16, 17, 31, 33, 357};
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            check_to_float(e, all + 1 + 1000 * i + 3, lens[i]);
        }
    }
    free(all);
}

static void test_to_float_block_types(void **state) {
    (void)state;
    int kinds[KIND_COUNT];
    for (int k = 0; k < KIND_COUNT; k++) {
        kinds[k] = k;
    }
    int checked = 0;
    for (size_t t = 0; t < N_EMU; t++) {
        const emu_type *e = &k_emu[t];
        const int64_t bs = (int64_t)ts_type_block_size(e->type);
        if (e->to_float == NULL || bs == 1) {
            continue;
        }
        /* One block, then an odd count (11 blocks of 32, 3 super-blocks). */
        const int64_t lens[2] = {bs, bs == TS_QK_K ? 3 * bs : 11 * bs};
        for (int l = 0; l < 2; l++) {
            rows rw;
            make_rows(e->type, lens[l], 2 * KIND_COUNT, kinds, KIND_COUNT, 11 + t, &rw);
            for (int i = 0; i < 2 * KIND_COUNT; i++) {
                check_to_float(e, rw.data + (size_t)i * rw.ld, lens[l]);
                checked++;
            }
            free_rows(&rw);
        }
    }
    printf("to_float: %d block rows bit-identical\n", checked);
}

/* ---- vec_dot and gemm ---- */

/* S of the tolerance for weight row i of w against activation row j of a (see the top). */
static double magnitude(const rows *w, int i, const rows *a, int j, int64_t n) {
    const float *x = w->deq + (size_t)i * (size_t)n, *o = w->offs + (size_t)i * (size_t)n;
    const float *y = a->deq + (size_t)j * (size_t)n;
    double s = 0.0;
    for (int64_t k = 0; k < n; k++) {
        s += (fabs((double)x[k]) + 2.0 * fabs((double)o[k])) * fabs((double)y[k]);
    }
    return s;
}

static void check_close(const char *what, ts_type t, int64_t n, int row, int col, float got,
                        float want, double s) {
    const double tol = 2e-6 * s + 1e-30;
    if (!(fabs((double)got - (double)want) <= tol)) {
        fail_msg("%s %s n=%lld row %d col %d: %.9g, scalar %.9g (tolerance %.3g)", what,
                 ts_type_name(t), (long long)n, row, col, (double)got, (double)want, tol);
    }
}

/* Row lengths: one block, an odd block count and a longer row; for the float types, counts
 * that leave every kind of tail after the 16- and 32-wide loops. */
static int lengths(ts_type t, int64_t out[4]) {
    const int64_t bs = (int64_t)ts_type_block_size(t);
    if (bs == 1) {
        out[0] = 1;
        out[1] = 17;
        out[2] = 64;
        out[3] = 357;
        return 4;
    }
    out[0] = bs;
    out[1] = bs == TS_QK_K ? 3 * bs : 11 * bs;
    out[2] = bs == TS_QK_K ? 5 * bs : 32 * bs;
    return 3;
}

/* Activation rows of the gemm test. */
static const int k_act_kinds[] = {QGEN_NORMAL, QGEN_GRID, KIND_RAW, QGEN_OUTLIER, QGEN_ZEROS};

/* Every weight kind against every activation kind, two seeds. */
static void test_vec_dot(void **state) {
    (void)state;
    int kinds[KIND_COUNT];
    for (int k = 0; k < KIND_COUNT; k++) {
        kinds[k] = k;
    }
    const int nact = KIND_COUNT;
    for (size_t t = 0; t < N_EMU; t++) {
        const emu_type *e = &k_emu[t];
        const ts_quant_ops *ref = scalar_ops(e->type);
        int64_t lens[4];
        const int nl = lengths(e->type, lens);
        for (int l = 0; l < 2 * nl; l++) {
            const int64_t n = lens[l % nl];
            rows w, a;
            make_rows(e->type, n, KIND_COUNT, kinds, KIND_COUNT, 100 + t + 1000 * (l / nl), &w);
            make_rows(ref->vec_dot_type, n, nact, kinds, nact, 200 + t + 1000 * (l / nl), &a);
            double worst = 0.0;
            for (int j = 0; j < nact; j++) {
                for (int i = 0; i < KIND_COUNT; i++) {
                    const uint8_t *x = w.data + (size_t)i * w.ld, *y = a.data + (size_t)j * a.ld;
                    float want, got;
                    ref->vec_dot(n, &want, x, y);
                    e->vec_dot(n, &got, x, y);
                    const double s = magnitude(&w, i, &a, j, n);
                    check_close("vec_dot", e->type, n, i, j, got, want, s);
                    if (s > 0.0) {
                        worst = fmax(worst, fabs((double)got - (double)want) / s);
                    }
                }
            }
            printf("vec_dot %-5s n=%-4lld worst |emu - scalar| / S = %.2g\n", ts_type_name(e->type),
                   (long long)n, worst);
            free_rows(&w);
            free_rows(&a);
        }
    }
}

enum { GEMM_ROWS = 7, GEMM_COLS = 9, PAD_C = 3 };

static void test_gemm(void **state) {
    (void)state;
    static const int wkinds[] = {QGEN_NORMAL,    QGEN_OUTLIER, KIND_RAW,  QGEN_HUGE,
                                 QGEN_CONST_NEG, QGEN_ZEROS,   QGEN_TINY, QGEN_GRID};
    for (size_t t = 0; t < N_EMU; t++) {
        const emu_type *e = &k_emu[t];
        if (e->gemm == NULL) {
            continue;
        }
        const ts_quant_ops *ref = scalar_ops(e->type);
        int64_t lens[4];
        const int nl = lengths(e->type, lens);
        for (int l = 0; l < nl; l++) {
            const int64_t n = lens[l];
            rows w, a;
            make_rows(e->type, n, GEMM_ROWS, wkinds, (int)(sizeof wkinds / sizeof wkinds[0]),
                      300 + t, &w);
            make_rows(ref->vec_dot_type, n, GEMM_COLS, k_act_kinds,
                      (int)(sizeof k_act_kinds / sizeof k_act_kinds[0]), 400 + t, &a);
            float dot[GEMM_COLS][GEMM_ROWS], want[GEMM_COLS][GEMM_ROWS];
            for (int j = 0; j < GEMM_COLS; j++) {
                for (int i = 0; i < GEMM_ROWS; i++) {
                    const uint8_t *x = w.data + (size_t)i * w.ld, *y = a.data + (size_t)j * a.ld;
                    e->vec_dot(n, &dot[j][i], x, y);
                    ref->vec_dot(n, &want[j][i], x, y);
                }
            }
            /* Every (nr, nc) with nc across the 4-column tiles' remainders, starting at a
             * row and column offset so tiles land on other pairs. */
            const size_t ldc = sizeof(float) * (GEMM_ROWS + PAD_C);
            float c[GEMM_COLS * (GEMM_ROWS + PAD_C)];
            for (int nr = 1; nr <= GEMM_ROWS; nr++) {
                for (int nc = 1; nc <= GEMM_COLS; nc++) {
                    const int r0 = (nr + nc) % (GEMM_ROWS - nr + 1);
                    const int j0 = (nr * nc) % (GEMM_COLS - nc + 1);
                    memset(c, 0xFF, sizeof c);
                    e->gemm(n, nr, nc, c, ldc, w.data + (size_t)r0 * w.ld, w.ld,
                            a.data + (size_t)j0 * a.ld, a.ld);
                    for (int j = 0; j < nc; j++) {
                        const float *col = c + (size_t)j * (GEMM_ROWS + PAD_C);
                        for (int i = 0; i < nr; i++) {
                            const int row = r0 + i, acol = j0 + j;
                            if (memcmp(&col[i], &dot[acol][row], sizeof(float)) != 0) {
                                fail_msg("gemm %s n=%lld (nr=%d, nc=%d) row %d col %d: %.9g, "
                                         "vec_dot %.9g (bits differ)",
                                         ts_type_name(e->type), (long long)n, nr, nc, row, acol,
                                         (double)col[i], (double)dot[acol][row]);
                            }
                            const double s = magnitude(&w, row, &a, acol, n);
                            check_close("gemm", e->type, n, row, acol, col[i], want[acol][row], s);
                        }
                        for (int i = nr; i < GEMM_ROWS + PAD_C; i++) {
                            uint32_t bits;
                            memcpy(&bits, &col[i], sizeof bits);
                            if (bits != 0xFFFFFFFFu) {
                                fail_msg("gemm %s (nr=%d, nc=%d) wrote past row %d in column %d",
                                         ts_type_name(e->type), nr, nc, nr - 1, j);
                            }
                        }
                    }
                }
            }
            free_rows(&w);
            free_rows(&a);
        }
    }
}

enum { PACK_ROWS = 48 };

/* The gemm on packed weights gives the gemm's bits on the same rows, for whole groups of
 * sixteen rows starting at any group, every column count across the tiles' remainders. */
static void test_gemm_packed(void **state) {
    (void)state;
    static const int wkinds[] = {QGEN_NORMAL, QGEN_OUTLIER, KIND_RAW,  QGEN_HUGE,   QGEN_CONST_NEG,
                                 QGEN_ZEROS,  QGEN_TINY,    QGEN_GRID, QGEN_NORMAL, KIND_RAW};
    for (size_t t = 0; t < N_EMU; t++) {
        const emu_type *e = &k_emu[t];
        if (e->gemm_packed == NULL) {
            continue;
        }
        const ts_quant_ops *ref = scalar_ops(e->type);
        int64_t lens[4];
        const int nl = lengths(e->type, lens);
        for (int l = 0; l < nl; l++) {
            const int64_t n = lens[l];
            rows w, a;
            make_rows(e->type, n, PACK_ROWS, wkinds, (int)(sizeof wkinds / sizeof wkinds[0]),
                      500 + t, &w);
            make_rows(ref->vec_dot_type, n, GEMM_COLS, k_act_kinds,
                      (int)(sizeof k_act_kinds / sizeof k_act_kinds[0]), 600 + t, &a);
            const size_t rb = row_bytes(e->type, n);
            uint8_t *dense = malloc(rb * PACK_ROWS), *packed = malloc(rb * PACK_ROWS);
            assert_non_null(dense);
            assert_non_null(packed);
            for (int r = 0; r < PACK_ROWS; r++) {
                memcpy(dense + (size_t)r * rb, w.data + (size_t)r * w.ld, rb);
            }
            assert_true(ts_quant_pack(e->type, packed, dense, n, PACK_ROWS));
            float want[GEMM_COLS * PACK_ROWS], got[GEMM_COLS * PACK_ROWS];
            const size_t ldc = sizeof(float) * PACK_ROWS;
            for (int r0 = 0; r0 < PACK_ROWS; r0 += 16) {
                for (int nr = 16; r0 + nr <= PACK_ROWS; nr += 16) {
                    for (int nc = 1; nc <= GEMM_COLS; nc++) {
                        memset(want, 0, sizeof want);
                        memset(got, 0, sizeof got);
                        e->gemm(n, nr, nc, want, ldc, dense + (size_t)r0 * rb, rb, a.data, a.ld);
                        e->gemm_packed(n, nr, nc, got, ldc, packed + (size_t)r0 * rb, rb, a.data,
                                       a.ld);
                        if (memcmp(want, got, sizeof want) != 0) {
                            fail_msg("packed gemm %s n=%lld rows %d..%d nc=%d: bits differ",
                                     ts_type_name(e->type), (long long)n, r0, r0 + nr - 1, nc);
                        }
                    }
                }
            }
            free(dense);
            free(packed);
            free_rows(&w);
            free_rows(&a);
        }
    }
}

int main(void) {
    if (ts_quant_cpu_isa() < TS_ISA_AVX2) {
        /* Some types' reference dot here is the native AVX2 one. */
        printf("test_avx512_emu: skipped, this CPU has no AVX2\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_float_float_types),
        cmocka_unit_test(test_to_float_block_types),
        cmocka_unit_test(test_vec_dot),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
