/*
 * quant_internal.h — block layouts and shared helpers of the quant layer (not a public API).
 *
 * The structs below are the on-disk GGUF block layouts, byte for byte: every field is a
 * byte array or a little-endian 16/32-bit value at the offset ggml uses, and the static
 * asserts pin each size to the value in gguf/ggml_types.c (tests check the two agree).
 * "d" fields are IEEE half (f16) bit patterns unless stated otherwise.
 *
 * Kernel naming: <op>_<type>_<isa>, e.g. ts_q_dot_q4_0_scalar. Scalar kernels are the
 * reference; SIMD kernels must agree with them (bit-exact where the math is integer or a
 * fixed sequence of single roundings, within a stated tolerance where only the summation
 * order differs).
 */
#ifndef TS_QUANT_QUANT_INTERNAL_H
#define TS_QUANT_QUANT_INTERNAL_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

#define TS_QK   32  /* elements per block of the 32-element types (Q4_0 .. Q8_1, IQ4_NL, MXFP4) */
#define TS_QK_K 256 /* elements per super-block of the K-quants */

typedef struct ts_block_q4_0 {
    uint16_t d;            /* scale: x = d * (q - 8) */
    uint8_t qs[TS_QK / 2]; /* element j in the low nibble of qs[j], j+16 in the high one */
} ts_block_q4_0;

typedef struct ts_block_q4_1 {
    uint16_t d; /* scale */
    uint16_t m; /* offset: x = d * q + m */
    uint8_t qs[TS_QK / 2];
} ts_block_q4_1;

typedef struct ts_block_q5_0 {
    uint16_t d;    /* x = d * (q - 16), q = nibble | bit << 4 */
    uint8_t qh[4]; /* bit 4 of element j is bit j of this little-endian u32 */
    uint8_t qs[TS_QK / 2];
} ts_block_q5_0;

typedef struct ts_block_q5_1 {
    uint16_t d;
    uint16_t m; /* x = d * q + m */
    uint8_t qh[4];
    uint8_t qs[TS_QK / 2];
} ts_block_q5_1;

typedef struct ts_block_q8_0 {
    uint16_t d; /* x = d * q */
    int8_t qs[TS_QK];
} ts_block_q8_0;

typedef struct ts_block_q8_1 {
    uint16_t d; /* x = d * q */
    uint16_t s; /* d * sum(qs), rounded to f16 */
    int8_t qs[TS_QK];
} ts_block_q8_1;

typedef struct ts_block_iq4_nl {
    uint16_t d; /* x = d * k_iq4nl_values[q] */
    uint8_t qs[TS_QK / 2];
} ts_block_iq4_nl;

/* MXFP4 (OCP microscaling FP4): 32 E2M1 values sharing one power-of-two scale. The values are
 * kept doubled so that they are integers: x = ts_mxfp4_values[q] * 2^(e - 128), which is the
 * E2M1 value (q & 7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign) times 2^(e - 127). */
typedef struct ts_block_mxfp4 {
    uint8_t e;             /* E8M0 shared exponent (no sign, no mantissa); 255 is NaN in the spec */
    uint8_t qs[TS_QK / 2]; /* element j in the low nibble of qs[j], j+16 in the high one */
} ts_block_mxfp4;

/* Q2_K: 16 sub-blocks of 16; x = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3. */
typedef struct ts_block_q2_k {
    uint8_t scales[TS_QK_K / 16];
    uint8_t qs[TS_QK_K / 4]; /* 2-bit quants: qs[32*h + l] holds elements 128h + l + 32s at 2s */
    uint16_t d;
    uint16_t dmin;
} ts_block_q2_k;

/* Q3_K: 16 sub-blocks of 16; 6-bit signed scales (biased by 32); q in -4..3. */
typedef struct ts_block_q3_k {
    uint8_t hmask[TS_QK_K / 8]; /* bit s of hmask[l] set when element 32s + l has q >= 0 */
    uint8_t qs[TS_QK_K / 4];    /* low 2 bits, packed as in Q2_K */
    uint8_t scales[12];         /* low nibbles in 0..7, high 2-bit pairs in 8..11 */
    uint16_t d;
} ts_block_q3_k;

/* Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins; x = d * sc * q - dmin * m. */
typedef struct ts_block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[TS_QK_K / 2]; /* qs[32c + l]: element 64c + l low nibble, 64c + 32 + l high */
} ts_block_q4_k;

/* Q5_K: Q4_K plus one high bit per element. */
typedef struct ts_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[TS_QK_K / 8]; /* bit s of qh[l]: high bit of element 32s + l */
    uint8_t qs[TS_QK_K / 2];
} ts_block_q5_k;

/* Q6_K: 16 sub-blocks of 16 with int8 scales; x = d * sc * (q - 32), q in 0..63. */
typedef struct ts_block_q6_k {
    uint8_t ql[TS_QK_K / 2];
    uint8_t qh[TS_QK_K / 4];
    int8_t scales[TS_QK_K / 16];
    uint16_t d;
} ts_block_q6_k;

/* IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (biased by 32) and IQ4_NL's levels;
 * x = d * (ls - 32) * ts_iq4nl_values[q]. */
typedef struct ts_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;       /* bits 2j, 2j+1: high 2 bits of sub-block j's ls */
    uint8_t scales_l[4];     /* low nibble of ls: sub-block 2i in scales_l[i] low, 2i+1 high */
    uint8_t qs[TS_QK_K / 2]; /* qs[16j + l]: element 32j + l low nibble, 32j + 16 + l high */
} ts_block_iq4_xs;

/* Q8_K: activation partner of the K-quants; d is an f32 here, not an f16. */
typedef struct ts_block_q8_k {
    float d;
    int8_t qs[TS_QK_K];
    int16_t bsums[TS_QK_K / 16]; /* sum of each group of 16 quants */
} ts_block_q8_k;

_Static_assert(sizeof(ts_block_q4_0) == 18, "Q4_0 block size");
_Static_assert(sizeof(ts_block_q4_1) == 20, "Q4_1 block size");
_Static_assert(sizeof(ts_block_q5_0) == 22, "Q5_0 block size");
_Static_assert(sizeof(ts_block_q5_1) == 24, "Q5_1 block size");
_Static_assert(sizeof(ts_block_q8_0) == 34, "Q8_0 block size");
_Static_assert(sizeof(ts_block_q8_1) == 36, "Q8_1 block size");
_Static_assert(sizeof(ts_block_iq4_nl) == 18, "IQ4_NL block size");
_Static_assert(sizeof(ts_block_mxfp4) == 17, "MXFP4 block size");
_Static_assert(sizeof(ts_block_q2_k) == 84, "Q2_K block size");
_Static_assert(sizeof(ts_block_q3_k) == 110, "Q3_K block size");
_Static_assert(sizeof(ts_block_q4_k) == 144, "Q4_K block size");
_Static_assert(sizeof(ts_block_q5_k) == 176, "Q5_K block size");
_Static_assert(sizeof(ts_block_q6_k) == 210, "Q6_K block size");
_Static_assert(sizeof(ts_block_q8_k) == 292, "Q8_K block size");
_Static_assert(sizeof(ts_block_iq4_xs) == 136, "IQ4_XS block size");

/* The 16 non-uniform levels of IQ4_NL. */
extern const int8_t ts_iq4nl_values[16];

/* Index of the IQ4_NL level nearest to v (the lower one on exact ties). */
int ts_iq4nl_nearest(float v);
/* The scale llama-quantize fits (without an importance matrix) to 32 values x for IQ4_NL's
 * levels: weights x^2, 15 candidates; 0 for an all-zero block. IQ4_XS fits its sub-blocks
 * with it too. */
float ts_iq4nl_fit_scale(const float *x);

/* Signed 6-bit scale (-32..31) of sub-block j of an IQ4_XS block. */
static inline int ts_iq4xs_scale(const ts_block_iq4_xs *b, int j) {
    const int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    const int hi = (b->scales_h >> (2 * j)) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The 16 E2M1 codes of MXFP4, doubled: 0 1 2 3 4 6 8 12, then the same negated (code 8 is
 * -0, stored as 0). */
extern const int8_t ts_mxfp4_values[16];

/* Half the E8M0 scale, 2^(e - 128), the factor of the doubled values: exact for every e
 * (subnormal for e < 2; e = 255, NaN in the spec, gives 2^127 as in ggml, which does not
 * treat it specially either). */
static inline float ts_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 puts the integer in the
 * low mantissa bits. The quantizers use this (not roundf) where ggml's reference does, so
 * ties round the same way. */
static inline int ts_round_even(float v) {
    float t = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* f16 -> f32, inline for the kernels' inner loops (ts_f16_to_f32 is this, out of line). */
static inline float ts_fp16_load(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13); /* infinity or NaN, payload kept */
    } else if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        memcpy(&bits, &v, sizeof bits);
        bits |= sign;
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* 6-bit scale j (0..7) and min of a Q4_K / Q5_K scale array. */
static inline void ts_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The 16 signed 6-bit scales of a Q3_K block, unbiased (-32..31). */
static inline void ts_q3k_scales(const uint8_t *packed, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
        int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* ---- kernels, one declaration list per instruction-set level ---- */

#define TS_Q_DECLARE_TYPE(T, ISA)                                                                  \
    void ts_q_to_float_##T##_##ISA(const void *src, float *dst, int64_t n);                        \
    void ts_q_from_float_##T##_##ISA(const float *src, void *dst, int64_t n);                      \
    void ts_q_dot_##T##_##ISA(int64_t n, float *result, const void *x, const void *y)

#define TS_Q_DECLARE_GEMM(T, ISA)                                                                  \
    void ts_q_gemm_##T##_##ISA(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,            \
                               const void *w, size_t ldw, const void *a, size_t lda)

/* gemm for kernels whose tile is one weight row against up to four activation rows: a type's
 * tile and its block size, and the driver over them. The driver is always inlined into a
 * named gemm per type (ts_q_gemm_q4_k_avx2 calls it with a constant table), so the call
 * through the table is a direct call there. Full and single-column tiles get their own calls
 * so the compiler specialises them (decoding runs the single one). */
typedef struct ts_q_row_tile {
    int64_t kdiv; /* elements per weight block: a tile gets n = k / kdiv */
    /* out[j] = dot(weight row w, activation row a[j]) for j < nc <= 4, over n blocks. */
    void (*tile)(int64_t n, const void *w, const void *const *a, int nc, float *out);
} ts_q_row_tile;

static inline __attribute__((always_inline)) void
ts_q_row_tile_gemm(const ts_q_row_tile *t, int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                   const void *w, size_t ldw, const void *a, size_t lda) {
    const int64_t n = k / t->kdiv;
    for (int64_t r = 0; r < nr; r++) {
        const void *wr = (const char *)w + (size_t)r * ldw;
        for (int64_t j0 = 0; j0 < nc; j0 += 4) {
            const void *ap[4];
            float out[4];
            const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
            for (int j = 0; j < cols; j++) {
                ap[j] = (const char *)a + (size_t)(j0 + j) * lda;
            }
            if (cols == 4) {
                t->tile(n, wr, ap, 4, out);
            } else if (cols == 1) {
                t->tile(n, wr, ap, 1, out);
            } else {
                t->tile(n, wr, ap, cols, out);
            }
            for (int j = 0; j < cols; j++) {
                *((float *)((char *)c + (size_t)(j0 + j) * ldc) + r) = out[j];
            }
        }
    }
}

/* How the several-activation-rows gemm drivers (avx2/q32.c, avx512/q32.c, avx512/k.c) cut a
 * call: `cols` runs at most max_rows weight rows against at most max_cols activation rows
 * (its type's table `type`, nb blocks per row); this walks the call in such pieces. Always
 * inlined with constant arguments, so `cols` is inlined too. */
typedef void (*ts_q_cols_fn)(const void *type, int64_t nb, const char *w, size_t ldw, int64_t nr,
                             const char *a, size_t lda, int64_t nc, float *c, size_t ldc);

static inline __attribute__((always_inline)) void
ts_q_gemm_pieces(ts_q_cols_fn cols, const void *type, int64_t nb, int64_t max_rows,
                 int64_t max_cols, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                 size_t ldw, const void *a, size_t lda) {
    for (int64_t r0 = 0; r0 < nr; r0 += max_rows) {
        const int64_t n_r = nr - r0 < max_rows ? nr - r0 : max_rows;
        for (int64_t j0 = 0; j0 < nc; j0 += max_cols) {
            const int64_t n = nc - j0 < max_cols ? nc - j0 : max_cols;
            cols(type, nb, (const char *)w + (size_t)r0 * ldw, ldw, n_r,
                 (const char *)a + (size_t)j0 * lda, lda, n,
                 (float *)((char *)c + (size_t)j0 * ldc) + r0, ldc);
        }
    }
}

#define TS_Q_DECLARE_ALL(ISA)                                                                      \
    TS_Q_DECLARE_TYPE(f32, ISA);                                                                   \
    TS_Q_DECLARE_TYPE(f16, ISA);                                                                   \
    TS_Q_DECLARE_TYPE(bf16, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q4_0, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q4_1, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q5_0, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q5_1, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q8_0, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q8_1, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(iq4_nl, ISA);                                                                \
    TS_Q_DECLARE_TYPE(mxfp4, ISA);                                                                 \
    TS_Q_DECLARE_TYPE(q2_k, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q3_k, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q4_k, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q5_k, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(q6_k, ISA);                                                                  \
    TS_Q_DECLARE_TYPE(iq4_xs, ISA);                                                                \
    TS_Q_DECLARE_TYPE(q8_k, ISA)

TS_Q_DECLARE_ALL(scalar);

/* Scalar gemm for any type: one vec_dot per output element (the reference). */
void ts_q_gemm_generic(const ts_quant_ops *ops, int64_t k, int64_t nr, int64_t nc, float *c,
                       size_t ldc, const void *w, size_t ldw, const void *a, size_t lda);

/* SIMD kernels; each file lists what it provides. */
void ts_q_to_float_f16_avx2(const void *src, float *dst, int64_t n);
void ts_q_from_float_f16_avx2(const float *src, void *dst, int64_t n);
void ts_q_dot_f16_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_bf16_avx2(const void *src, float *dst, int64_t n);
void ts_q_from_float_bf16_avx2(const float *src, void *dst, int64_t n);
void ts_q_dot_bf16_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_f32_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_q4_0_avx2(const void *src, float *dst, int64_t n);
void ts_q_to_float_q4_1_avx2(const void *src, float *dst, int64_t n);
void ts_q_to_float_q5_0_avx2(const void *src, float *dst, int64_t n);
void ts_q_dot_q5_0_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_q8_0_avx2(const void *src, float *dst, int64_t n);
void ts_q_from_float_q8_0_avx2(const float *src, void *dst, int64_t n);
void ts_q_from_float_q8_1_avx2(const float *src, void *dst, int64_t n);
void ts_q_dot_q4_0_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q4_1_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q8_0_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_iq4_nl_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_mxfp4_avx2(const void *src, float *dst, int64_t n);
void ts_q_dot_mxfp4_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_from_float_q8_k_avx2(const float *src, void *dst, int64_t n);
void ts_q_to_float_q4_k_avx2(const void *src, float *dst, int64_t n);
void ts_q_to_float_q5_k_avx2(const void *src, float *dst, int64_t n);
void ts_q_to_float_q6_k_avx2(const void *src, float *dst, int64_t n);
void ts_q_dot_q4_k_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q5_k_avx2(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q6_k_avx2(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(f32, avx2);
TS_Q_DECLARE_GEMM(f16, avx2);
TS_Q_DECLARE_GEMM(bf16, avx2);
TS_Q_DECLARE_GEMM(q4_0, avx2);
TS_Q_DECLARE_GEMM(q4_1, avx2);
TS_Q_DECLARE_GEMM(q5_0, avx2);
TS_Q_DECLARE_GEMM(q4_0_packed, avx2);
TS_Q_DECLARE_GEMM(q4_1_packed, avx2);
TS_Q_DECLARE_GEMM(q5_0_packed, avx2);
TS_Q_DECLARE_GEMM(q8_0, avx2);
TS_Q_DECLARE_GEMM(q8_0_packed, avx2);
TS_Q_DECLARE_GEMM(mxfp4, avx2);
TS_Q_DECLARE_GEMM(mxfp4_packed, avx2);
TS_Q_DECLARE_GEMM(q4_k, avx2);
TS_Q_DECLARE_GEMM(q4_k_packed, avx2);
TS_Q_DECLARE_GEMM(q5_k, avx2);
TS_Q_DECLARE_GEMM(q5_k_packed, avx2);
TS_Q_DECLARE_GEMM(q6_k, avx2);
TS_Q_DECLARE_GEMM(q6_k_packed, avx2);
/* One activation row (avx2/k1.c), the bits of the gemm's: c[r] for weight rows r < nr. */
void ts_q_gemv_q5_k_avx2(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a);
void ts_q_gemv_q6_k_avx2(int64_t k, int64_t nr, float *c, const void *w, size_t ldw, const void *a);
void ts_q_to_float_iq4_xs_avx2(const void *src, float *dst, int64_t n);
void ts_q_dot_iq4_xs_avx2(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(iq4_xs, avx2);
TS_Q_DECLARE_GEMM(iq4_xs_packed, avx2);

/* avxvnni/: the AVX2 kernels whose integer dot steps AVX-VNNI shortens, built again. */
void ts_q_dot_q4_0_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q4_1_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q5_0_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q8_0_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_iq4_nl_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_mxfp4_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q4_k_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q5_k_avxvnni(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q6_k_avxvnni(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(q4_0, avxvnni);
TS_Q_DECLARE_GEMM(q4_1, avxvnni);
TS_Q_DECLARE_GEMM(q5_0, avxvnni);
TS_Q_DECLARE_GEMM(q4_0_packed, avxvnni);
TS_Q_DECLARE_GEMM(q4_1_packed, avxvnni);
TS_Q_DECLARE_GEMM(q5_0_packed, avxvnni);
TS_Q_DECLARE_GEMM(q8_0, avxvnni);
TS_Q_DECLARE_GEMM(q8_0_packed, avxvnni);
TS_Q_DECLARE_GEMM(mxfp4, avxvnni);
TS_Q_DECLARE_GEMM(mxfp4_packed, avxvnni);
TS_Q_DECLARE_GEMM(q4_k, avxvnni);
TS_Q_DECLARE_GEMM(q4_k_packed, avxvnni);
TS_Q_DECLARE_GEMM(q5_k, avxvnni);
TS_Q_DECLARE_GEMM(q5_k_packed, avxvnni);
TS_Q_DECLARE_GEMM(q6_k, avxvnni);
TS_Q_DECLARE_GEMM(q6_k_packed, avxvnni);
void ts_q_dot_iq4_xs_avxvnni(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(iq4_xs, avxvnni);
TS_Q_DECLARE_GEMM(iq4_xs_packed, avxvnni);

void ts_q_to_float_f16_avx512(const void *src, float *dst, int64_t n);
void ts_q_dot_f16_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_bf16_avx512(const void *src, float *dst, int64_t n);
void ts_q_dot_bf16_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_f32_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_q4_0_avx512(const void *src, float *dst, int64_t n);
void ts_q_to_float_q4_1_avx512(const void *src, float *dst, int64_t n);
void ts_q_to_float_q8_0_avx512(const void *src, float *dst, int64_t n);
void ts_q_dot_q8_0_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_iq4_nl_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_mxfp4_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_to_float_q4_k_avx512(const void *src, float *dst, int64_t n);
void ts_q_to_float_q5_k_avx512(const void *src, float *dst, int64_t n);
void ts_q_to_float_q6_k_avx512(const void *src, float *dst, int64_t n);
void ts_q_dot_q4_k_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q5_k_avx512(int64_t n, float *result, const void *x, const void *y);
void ts_q_dot_q6_k_avx512(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(q4_0, avx512);
TS_Q_DECLARE_GEMM(q4_0_packed, avx512);
TS_Q_DECLARE_GEMM(q4_1, avx512);
TS_Q_DECLARE_GEMM(q4_1_packed, avx512);
TS_Q_DECLARE_GEMM(q5_0, avx512);
TS_Q_DECLARE_GEMM(q5_0_packed, avx512);
TS_Q_DECLARE_GEMM(iq4_nl, avx512);
TS_Q_DECLARE_GEMM(iq4_nl_packed, avx512);
TS_Q_DECLARE_GEMM(mxfp4, avx512);
TS_Q_DECLARE_GEMM(mxfp4_packed, avx512);
TS_Q_DECLARE_GEMM(q8_0, avx512);
TS_Q_DECLARE_GEMM(q8_0_packed, avx512);
TS_Q_DECLARE_GEMM(q4_k, avx512);
TS_Q_DECLARE_GEMM(q4_k_packed, avx512);
TS_Q_DECLARE_GEMM(q6_k, avx512);
TS_Q_DECLARE_GEMM(q6_k_packed, avx512);
void ts_q_dot_iq4_xs_avx512(int64_t n, float *result, const void *x, const void *y);
TS_Q_DECLARE_GEMM(iq4_xs, avx512);
TS_Q_DECLARE_GEMM(f32, avx512);
TS_Q_DECLARE_GEMM(f16, avx512);
TS_Q_DECLARE_GEMM(bf16, avx512);

#endif /* TS_QUANT_QUANT_INTERNAL_H */
