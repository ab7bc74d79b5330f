/*
 * avx512/float.c — AVX-512 kernels of F32, F16 and BF16: dequantization (F16C, BF16 by
 * shifts; F32 uses the scalar one), dot products and register-blocked gemm tiles. The BF16 dot uses
 * the AVX512_BF16 pair dot-product instruction, which treats bf16 denormals as zero; the tests'
 * tolerance covers that.
 */
#include <stdbool.h>
#include <string.h>

#include "quant/quant_internal.h"
#include "quant/simd_isa.h"

static inline __m512 load_f16x16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512 load_bf16x16(const uint16_t *p) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

void ts_q_to_float_f16_avx512(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, load_f16x16(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_f16_to_f32(h[i]);
    }
}

void ts_q_to_float_bf16_avx512(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(dst + i, load_bf16x16(h + i));
    }
    for (; i < n; i++) {
        dst[i] = ts_bf16_to_f32(h[i]);
    }
}

/*
 * Dot products and gemm: tiles of R weight rows x C activation rows with one accumulator each,
 * held in registers, so each weight vector loaded (and converted) serves C activation rows and
 * each activation vector R weight rows. Per (row, column) the operations are always the same:
 * F32 and F16 one FMA per 16 elements, BF16 one vdpbf16ps per 32, in order; then the same
 * reduction of the accumulator and a scalar tail. The dot product is the 1 x 1 tile, so gemm
 * equals vec_dot bit for bit and results do not depend on how tokens are batched. Decoding (one
 * activation row) runs 2 rows at a time. Rows or columns past the end of a tile repeat the
 * last one (their results are not stored).
 */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

enum { FT_MAX_R = 16, FT_MAX_C = 4 };

typedef struct float_type {
    size_t esize; /* bytes per weight element */
    size_t asize; /* bytes per activation element: F32 and F16 weights meet F32, BF16 BF16 */
    bool bf16;    /* one vdpbf16ps a step, on the raw elements; else one FMA */
    __m512 (*load16)(const void *p); /* the sixteen weight elements at p, as floats */
    float (*load1)(const void *p);   /* the weight element at p, as a float */
    float (*aload1)(const void *p);  /* the activation element at p, as a float */
} float_type;

ALWAYS_INLINE __m512 load16_f32(const void *p) {
    return _mm512_loadu_ps(p);
}

ALWAYS_INLINE __m512 load16_f16(const void *p) {
    return load_f16x16(p);
}

ALWAYS_INLINE float load1_f32(const void *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

ALWAYS_INLINE float load1_f16(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return ts_f16_to_f32(h);
}

ALWAYS_INLINE float load1_bf16(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return ts_bf16_to_f32(h);
}

static const float_type k_f32 = {.esize = sizeof(float),
                                 .asize = sizeof(float),
                                 .bf16 = false,
                                 .load16 = load16_f32,
                                 .load1 = load1_f32,
                                 .aload1 = load1_f32};
static const float_type k_f16 = {.esize = sizeof(uint16_t),
                                 .asize = sizeof(float),
                                 .bf16 = false,
                                 .load16 = load16_f16,
                                 .load1 = load1_f16,
                                 .aload1 = load1_f32};
static const float_type k_bf16 = {.esize = sizeof(uint16_t),
                                  .asize = sizeof(uint16_t),
                                  .bf16 = true,
                                  .load16 = NULL,
                                  .load1 = load1_bf16,
                                  .aload1 = load1_bf16};

/* out[r][c] = dot(w[r], a[c]) over k elements, r < R, c < C (constants after inlining). With
 * pf > 0 the weight bytes pf after each row's (the next tile's rows) are prefetched as it goes. */
ALWAYS_INLINE void float_tile(const float_type *t, int R, int C, int64_t k, const char *const *w,
                              const char *const *a, size_t pf, float out[FT_MAX_R][FT_MAX_C]) {
    __m512 acc[FT_MAX_R][FT_MAX_C];
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            acc[r][c] = _mm512_setzero_ps();
        }
    }
    const int64_t step = t->bf16 ? 32 : 16;
    int64_t i = 0;
    for (; i + step <= k; i += step) {
        for (int r = 0; r < R && pf > 0; r++) {
            _mm_prefetch(w[r] + (size_t)i * t->esize + pf, _MM_HINT_T0); /* never faults */
        }
        if (t->bf16) {
            __m512i wv[FT_MAX_R];
            for (int r = 0; r < R; r++) {
                wv[r] = _mm512_loadu_si512((const void *)(w[r] + (size_t)i * t->esize));
            }
            for (int c = 0; c < C; c++) {
                const __m512i av = _mm512_loadu_si512((const void *)(a[c] + (size_t)i * t->asize));
                for (int r = 0; r < R; r++) {
                    acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv[r], (__m512bh)av);
                }
            }
        } else {
            __m512 wv[FT_MAX_R];
            for (int r = 0; r < R; r++) {
                wv[r] = t->load16(w[r] + (size_t)i * t->esize);
            }
            for (int c = 0; c < C; c++) {
                const __m512 av = _mm512_loadu_ps(a[c] + (size_t)i * t->asize);
                for (int r = 0; r < R; r++) {
                    acc[r][c] = _mm512_fmadd_ps(wv[r], av, acc[r][c]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        for (int c = 0; c < C; c++) {
            float s = _mm512_reduce_add_ps(acc[r][c]);
            for (int64_t e = i; e < k; e++) {
                s += t->load1(w[r] + (size_t)e * t->esize) * t->aload1(a[c] + (size_t)e * t->asize);
            }
            out[r][c] = s;
        }
    }
}

/* Rows [0, nr) against columns [0, nc) in R x C tiles. */
ALWAYS_INLINE void float_gemm_tiles(const float_type *t, int R, int C, int64_t k, int64_t nr,
                                    int64_t nc, float *c, size_t ldc, const char *w, size_t ldw,
                                    const char *a, size_t lda) {
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
        const int rows = nr - r0 < R ? (int)(nr - r0) : R;
        const char *wr[FT_MAX_R];
        for (int r = 0; r < R; r++) {
            wr[r] = w + (size_t)(r0 + (r < rows ? r : rows - 1)) * ldw;
        }
        for (int64_t c0 = 0; c0 < nc; c0 += C) {
            const int cols = nc - c0 < C ? (int)(nc - c0) : C;
            const char *ac[FT_MAX_C];
            for (int j = 0; j < C; j++) {
                ac[j] = a + (size_t)(c0 + (j < cols ? j : cols - 1)) * lda;
            }
            float out[FT_MAX_R][FT_MAX_C];
            float_tile(t, R, C, k, wr, ac, C == 1 ? (size_t)R * ldw : 0, out);
            for (int j = 0; j < cols; j++) {
                float *cj = (float *)((char *)c + (size_t)(c0 + j) * ldc) + r0;
                for (int r = 0; r < rows; r++) {
                    cj[r] = out[r][j];
                }
            }
        }
    }
}

/* 4 x 4 tiles (sixteen accumulators); with one activation row (decoding, bound by memory)
 * 2 x 1: two weight streams per thread read at close to the full bandwidth, more did not. */
ALWAYS_INLINE void float_gemm(const float_type *t, int64_t k, int64_t nr, int64_t nc, float *c,
                              size_t ldc, const void *w, size_t ldw, const void *a, size_t lda) {
    if (nc == 1) {
        float_gemm_tiles(t, 2, 1, k, nr, nc, c, ldc, w, ldw, a, lda);
    } else {
        float_gemm_tiles(t, 4, 4, k, nr, nc, c, ldc, w, ldw, a, lda);
    }
}

ALWAYS_INLINE void float_dot(const float_type *t, int64_t n, float *result, const void *x,
                             const void *y) {
    const char *w[1] = {x}, *a[1] = {y};
    float out[FT_MAX_R][FT_MAX_C];
    float_tile(t, 1, 1, n, w, a, 0, out);
    *result = out[0][0];
}

void ts_q_dot_f32_avx512(int64_t n, float *result, const void *x, const void *y) {
    float_dot(&k_f32, n, result, x, y);
}

void ts_q_dot_f16_avx512(int64_t n, float *result, const void *x, const void *y) {
    float_dot(&k_f16, n, result, x, y);
}

void ts_q_dot_bf16_avx512(int64_t n, float *result, const void *x, const void *y) {
    float_dot(&k_bf16, n, result, x, y);
}

void ts_q_gemm_f32_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                          size_t ldw, const void *a, size_t lda) {
    float_gemm(&k_f32, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_f16_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                          size_t ldw, const void *a, size_t lda) {
    float_gemm(&k_f16, k, nr, nc, c, ldc, w, ldw, a, lda);
}

void ts_q_gemm_bf16_avx512(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,
                           size_t ldw, const void *a, size_t lda) {
    float_gemm(&k_bf16, k, nr, nc, c, ldc, w, ldw, a, lda);
}
