/*
 * avx2/k8.h — the rows-in-lanes machinery shared by the AVX2 K-quant kernels (avx2/k8.c: Q4_K,
 * Q5_K, Q6_K) and the IQ4_XS ones (avx2/iq4xs.c): eight weight rows in the eight 32-bit lanes,
 * their words loaded from a packed matrix (quant_pack.c) or transposed from the rows, and the
 * drivers k8_gemm_cols / k8_gemm / k8_gemv written once over a per-type table of inline
 * functions (k8_type). avx2/k8.c's header describes the design; each including file instantiates
 * the drivers for its own types by inlining, so no call through a table remains.
 *
 * Only static inline functions and types here: each kernel file (and its AVX-VNNI rebuild in
 * avxvnni/) gets its own copy, compiled with that file's flags.
 */
#ifndef TS_QUANT_AVX2_K8_H
#define TS_QUANT_AVX2_K8_H

#include <string.h>

#include "quant/simd_avx2.h"

#define K8_INLINE   static inline __attribute__((always_inline))
#define K8_NOINLINE static __attribute__((noinline))

enum {
    K8_KB = 4,     /* super-blocks unpacked per pass (4 * 2.9 KiB of buffer) */
    K8_COLS = 64,  /* activation rows sharing one pass (MUL_MAT calls with at most 64) */
    K8_GROUPS = 4, /* groups of eight weight rows per call piece (a multiple of 16 rows) */
};

/* One super-block of eight weight rows, unpacked; lane r belongs to row r throughout. */
typedef struct k8blk {
    __m256i q[64];  /* group g: the unsigned levels of elements 4g..4g+3 */
    __m256i sc[16]; /* (scale, scale) as int16 pair: Q4_K sub-blocks 0..7, Q6_K 0..15 */
    __m256i m[8];   /* Q4_K: (min 2t, min 2t+1), t < 4; Q6_K: m[0..3] the scale bytes */
    __m256 d, dmin; /* f16 scales as floats (Q6_K: d only) */
} k8blk;

/* What the integer sums and the fold need of one activation super-block. */
typedef struct k8ys {
    float d;
    int32_t x[8]; /* int16 pairs: Q4_K x[t] = (bsum 2t, bsum 2t+1), t < 4, with bsum s =
                     bsums[2s] + bsums[2s+1]; Q6_K x[t] = (bsums[2t], bsums[2t+1]) */
} k8ys;

/* Where eight rows' super-blocks come from: the rows (row r at w[r]) or half `half` (rows
 * 8 half .. 8 half + 7) of a sixteen-row group of a packed matrix at pk. */
typedef struct k8src {
    const char *w[8];
    const uint8_t *pk;
    int half;
} k8src;

/* A type's pieces; the drivers below are instantiated per table by inlining. */
typedef struct k8_type {
    size_t wbs; /* bytes per weight super-block */
    /* Super-block i of the eight rows of s into *b. */
    void (*unpack)(const k8src *s, bool packed, int64_t i, k8blk *b);
    /* One unpacked super-block against n <= 4 activation rows (quants y[j], terms e[j]),
     * folded into acc[j]; n is a constant after inlining (k8_tile). */
    void (*tile)(const k8blk *b, const int8_t *const *y, const k8ys *const *e, __m256 *acc, int n);
    /* Super-block i of the eight rows of s against one activation row, unpacked in registers,
     * folded into acc. */
    __m256 (*col1)(const k8src *s, bool packed, int64_t i, const int8_t *y, const k8ys *e,
                   __m256 acc);
} k8_type;

/* ---- shared pieces ---- */

/* The four activation bytes at p, broadcast to every lane. */
K8_INLINE __m256i y4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Lane r of g[k] = the word at byte b + 4k (k < 4) of row r's super-block i (wbs bytes a
 * block). Packed, the run of that word starts at byte 16 b of the packed block and this half's
 * eight words are its bytes 32 half .. 32 half + 31. */
K8_INLINE void k8_quad(const k8src *s, bool packed, size_t wbs, int64_t i, size_t b, __m256i g[4]) {
    if (packed) {
        const uint8_t *p = s->pk + (size_t)i * 16 * wbs + 16 * b + 32 * (size_t)s->half;
        for (int k = 0; k < 4; k++) {
            g[k] = _mm256_loadu_si256((const __m256i *)(p + 64 * k));
        }
        return;
    }
    const uint8_t *p[8];
    for (int r = 0; r < 8; r++) {
        p[r] = (const uint8_t *)s->w[r] + (size_t)i * wbs + b;
    }
    transpose8x4_epi32(p, g);
}

/* The low (high) 16 bits of each lane as f16 -> float, lanes in order. */
K8_INLINE __m256 f16_lanes(__m256i v, bool high) {
    const __m256i h =
        high ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
    /* packus per 128-bit half: [h0..h3 h0..h3 | h4..h7 h4..h7]; take quadwords 0 and 2. */
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
}

/* Byte shuffle that makes each lane's int16 pair from its bytes a and b: (byte a, byte b)
 * zero-extended (sign = false) or in the high bytes, for an arithmetic shift (sign = true). */
K8_INLINE __m256i pair_index(int a, int b, bool sign) {
    const int32_t lane =
        sign ? (int32_t)(0x0080u | ((uint32_t)a << 8) | 0x00800000u | ((uint32_t)b << 24))
             : (int32_t)((uint32_t)a | 0x8000u | ((uint32_t)b << 16) | 0x80000000u);
    const int32_t step = sign ? 0x04000400 : 0x00040004; /* lane l of a half: bytes 4l.. */
    return _mm256_add_epi32(
        _mm256_set1_epi32(lane),
        _mm256_setr_epi32(0, step, 2 * step, 3 * step, 0, step, 2 * step, 3 * step));
}

/* Unsigned (u8) or signed (i8) bytes a, b of each lane as its int16 pair. */
K8_INLINE __m256i pair_u8(__m256i v, int a, int b) {
    return _mm256_shuffle_epi8(v, pair_index(a, b, false));
}

K8_INLINE __m256i pair_i8(__m256i v, int a, int b) {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(v, pair_index(a, b, true)), 8);
}

/* Lanes 0..rows-1 to c[0..rows-1]. */
K8_INLINE void store8(__m256 acc, float *c, int rows) {
    if (rows == 8) {
        _mm256_storeu_ps(c, acc);
        return;
    }
    float v[8];
    _mm256_storeu_ps(v, acc);
    memcpy(c, v, (size_t)rows * sizeof(float));
}

/* ---- drivers ---- */

typedef struct k8_call {
    const k8_type *t;
    void (*yprep)(const ts_block_q8_k *y, k8ys *e);
    bool packed;
} k8_call;

/* Rows base .. base + 7 of the call's (w, ldw), rows past nr repeating the last one (their
 * results are not stored). Packed, base is a multiple of 8 and w starts a group. */
K8_INLINE void k8_src_init(k8src *s, bool packed, const char *w, size_t ldw, int64_t base,
                           int64_t nr) {
    if (packed) {
        s->pk = (const uint8_t *)w + (size_t)(base / 16) * 16 * ldw;
        s->half = (int)(base / 8) % 2;
        return;
    }
    const int rows = nr - base < 8 ? (int)(nr - base) : 8;
    for (int r = 0; r < 8; r++) {
        s->w[r] = w + (size_t)(base + (r < rows ? r : rows - 1)) * ldw;
    }
}

/* A tile of n activation rows (n a constant: k8_tile) over the pass's kb unpacked super-blocks,
 * column j's accumulator at m[j]: loaded into locals before the pass and stored after it, so
 * that a super-block's fold does not reload what the one before has just stored. */
K8_INLINE void k8_tile_pass(const k8_type *t, const k8blk *buf, const char *const *yb,
                            const k8ys (*ys)[K8_COLS], int64_t j0, __m256 *m, int64_t kb,
                            prefetch_rows *pf, int n) {
    const size_t ab = sizeof(ts_block_q8_k);
    __m256 acc[4];
    for (int j = 0; j < n; j++) {
        acc[j] = m[j];
    }
    for (int64_t i = 0; i < kb; i++) {
        const int8_t *yq[4];
        const k8ys *e[4];
        for (int j = 0; j < n; j++) {
            yq[j] = (const int8_t *)(yb[j] + (size_t)i * ab);
            e[j] = &ys[i][j0 + j];
        }
        prefetch_rows_step(pf);
        t->tile(&buf[i], yq, e, acc, n);
    }
    for (int j = 0; j < n; j++) {
        m[j] = acc[j];
    }
}

/* The type's tile pass with exactly n (1..4) columns, n a constant in each branch, so that a
 * tile of fewer than four activation rows computes only those (a decoding step of two or three
 * sequences, the last tile of a batch): with four always, two sequences cost what four do. */
K8_INLINE void k8_tile(const k8_type *t, const k8blk *buf, const char *const *yb,
                       const k8ys (*ys)[K8_COLS], int64_t j0, __m256 *m, int64_t kb,
                       prefetch_rows *pf, int n) {
    switch (n) {
    case 4:
        k8_tile_pass(t, buf, yb, ys, j0, m, kb, pf, 4);
        break;
    case 3:
        k8_tile_pass(t, buf, yb, ys, j0, m, kb, pf, 3);
        break;
    case 2:
        k8_tile_pass(t, buf, yb, ys, j0, m, kb, pf, 2);
        break;
    default:
        k8_tile_pass(t, buf, yb, ys, j0, m, kb, pf, 1);
        break;
    }
}

/* Several activation rows (nc <= K8_COLS) against up to K8_GROUPS groups of eight weight rows. */
K8_INLINE void k8_gemm_cols(const void *callp, int64_t nb, const char *w, size_t ldw, int64_t nr,
                            const char *a, size_t lda, int64_t nc, float *c, size_t ldc) {
    const k8_call *call = callp;
    const k8_type *t = call->t;
    const bool packed = call->packed;
    k8blk buf[K8_KB];
    k8ys ys[K8_KB][K8_COLS];
    __m256 accs[K8_GROUPS][K8_COLS];
    const int groups = (int)((nr + 7) / 8);
    for (int rg = 0; rg < groups; rg++) {
        for (int64_t j = 0; j < nc; j++) {
            accs[rg][j] = _mm256_setzero_ps();
        }
    }
    const size_t ab = sizeof(ts_block_q8_k);
    for (int64_t i0 = 0; i0 < nb; i0 += K8_KB) {
        const int64_t kb = nb - i0 < K8_KB ? nb - i0 : K8_KB;
        for (int64_t j = 0; j < nc; j++) {
            const ts_block_q8_k *y = (const ts_block_q8_k *)(a + (size_t)j * lda) + i0;
            for (int64_t i = 0; i < kb; i++) {
                call->yprep(&y[i], &ys[i][j]);
            }
        }
        for (int rg = 0; rg < groups; rg++) {
            k8src src;
            k8_src_init(&src, packed, w, ldw, 8 * (int64_t)rg, nr);
            for (int64_t i = 0; i < kb; i++) {
                t->unpack(&src, packed, i0 + i, &buf[i]);
            }
            /* While these rows compute, prefetch the next eight rows' part of the pass (past
             * this call's rows: the rows the thread most likely takes next). */
            prefetch_rows pf;
            if (packed) {
                prefetch_rows_begin(&pf,
                                    w + (size_t)((8 * (rg + 1) + 15) / 16) * 16 * ldw +
                                        (size_t)i0 * 16 * t->wbs,
                                    0, (size_t)kb * 16 * t->wbs, 1, ((nc + 3) / 4) * kb);
            } else {
                prefetch_rows_begin(&pf, w + (size_t)(8 * (rg + 1)) * ldw + (size_t)i0 * t->wbs,
                                    ldw, (size_t)kb * t->wbs, 8, ((nc + 3) / 4) * kb);
            }
            for (int64_t j0 = 0; j0 < nc; j0 += 4) {
                const int cols = nc - j0 < 4 ? (int)(nc - j0) : 4;
                const char *yb[4];
                for (int j = 0; j < cols; j++) {
                    yb[j] =
                        a + (size_t)(j0 + j) * lda + (size_t)i0 * ab + offsetof(ts_block_q8_k, qs);
                }
                k8_tile(t, buf, yb, (const k8ys(*)[K8_COLS])ys, j0, &accs[rg][j0], kb, &pf, cols);
            }
        }
    }
    for (int rg = 0; rg < groups; rg++) {
        const int rows = nr - 8 * rg < 8 ? (int)(nr - 8 * rg) : 8;
        for (int64_t j = 0; j < nc; j++) {
            store8(accs[rg][j], (float *)((char *)c + (size_t)j * ldc) + 8 * rg, rows);
        }
    }
}

/* Several activation rows: calls of up to 8 * K8_GROUPS weight rows and K8_COLS columns (a
 * multiple of 16, so that packed pieces start on a group). */
K8_INLINE void k8_gemm(const k8_call *call, int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                       const void *w, size_t ldw, const void *a, size_t lda) {
    ts_q_gemm_pieces(k8_gemm_cols, call, k / TS_QK_K, 8 * K8_GROUPS, K8_COLS, nr, nc, c, ldc, w,
                     ldw, a, lda);
}

/* One activation row, eight weight rows at a time, the next eight rows prefetched meanwhile
 * (packed: the same half of the next group). */
K8_INLINE void k8_gemv(const k8_call *call, int64_t k, int64_t nr, float *c, const void *w,
                       size_t ldw, const void *a) {
    const k8_type *t = call->t;
    const bool packed = call->packed;
    const int64_t nb = k / TS_QK_K;
    const ts_block_q8_k *y = a;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int rows = nr - r0 < 8 ? (int)(nr - r0) : 8;
        k8src src;
        k8_src_init(&src, packed, w, ldw, r0, nr);
        /* Prefetching past the matrix is harmless: prefetches never fault. */
        const char *next = (const char *)w + (size_t)(r0 + 8) * ldw;
        if (packed) {
            next = (const char *)src.pk + 16 * ldw + (size_t)src.half * 8 * ldw;
        }
        prefetch_rows pf;
        prefetch_rows_begin(&pf, next, 8 * ldw, 8 * ldw, 1, nb);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            prefetch_rows_step(&pf);
            k8ys e;
            call->yprep(&y[i], &e);
            acc = t->col1(&src, packed, i, y[i].qs, &e, acc);
        }
        store8(acc, c + r0, rows);
    }
}

#endif /* TS_QUANT_AVX2_K8_H */
