/*
 * cpu_attn_avx2.c — tiled ATTENTION for the CPU backend (AVX2 + FMA), flash-attention style.
 *
 * A work item is (tile of up to ATT_QT consecutive tokens of one sequence, range of kv heads,
 * range of query heads of each GQA group). The item walks the union of its tokens' visible
 * key ranges in chunks of ATT_KC keys. Prefill items (one kv head) convert each chunk's K and
 * V rows to f32 once for every query row of the item (tokens x heads), which is what makes
 * prefill cheap. Decoding items read the cache's rows in place, whatever the K and V types
 * (f32, f16, bf16, or the q8_0 / q5_0 / q4_0 blocks, dequantized in registers); with many
 * sequences one item covers all kv heads of its token, so each key's rows of all heads are
 * read as one contiguous run, and each head's rows of the next chunk are prefetched while
 * that head computes (paged keys are scattered over the cache; waiting on them dominated
 * decoding). K and V may be of different types, each with its own row size and strides. The
 * query heads of a group share each pass over a key row (ATT_GH at a time: a 4-head group, as
 * Llama's 32 / 8, reads each key and value row once). A pass's scores lie key-major with the
 * rows side by side (8 / P keys of all rows per vector), so the scores of a step's keys come
 * from one transposing reduction and the online softmax (running max and sum per row; a chunk
 * whose max exceeds the running max rescales the accumulator once) runs on whole vectors;
 * exp is cpu_exp256 (cpu_avx2.h), arguments below its range giving 0.
 *
 * Numerics: all in f32 like the reference; only the summation order and exp's last bits
 * differ (tests/backends/test_attention.c: 1e-5 normalized RMS error). A row's operations,
 * and their order, do not depend on the item it is in or on how many rows share its pass, so
 * prefill and decoding give the same bits.
 *
 * cpu_attn.c deals the items (round-robin, so that causal prefill, where later tiles see more
 * keys, spreads evenly over threads) for this kernel and the AVX-512 one alike.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_avx2.h"
#include "backends/cpu/cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* exp(x) for 8 lanes, x <= 0 (callers pass differences to a running max); below the
 * smallest normal result it gives 0, as expf underflows there too. */
static inline __m256 exp256_neg(__m256 x) {
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(CPU_EXP_LO), _CMP_LT_OQ);
    return _mm256_andnot_ps(under, cpu_exp256(x));
}

static void scale_row(float *a, int64_t hd, float f) {
    const __m256 fv = _mm256_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 8) {
        _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), fv));
    }
}

/* A chunk's scores, zq: key a + i of the chunk's keys [a, b] and query row h < gh at
 * zq[i * P + h], P = ZP(gh) lanes a key (gh, or 4 for three rows): a vector holds 8 / P
 * consecutive keys of every row, so that the softmax runs on whole vectors and a key's scores
 * of all rows come from one reduction. */
#define ZP(gh) ((gh) == 3 ? 4 : (gh))

/* Lanes of a vector of zq that hold scores: row (lane % P) < gh, key slot (lane / P) < nkeys. */
ALWAYS_INLINE __m256 z_valid(int gh, int64_t nkeys) {
    const int P = ZP(gh);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i row = _mm256_and_si256(lane, _mm256_set1_epi32(P - 1));
    const __m256i slot = _mm256_srli_epi32(lane, P == 4 ? 2 : P == 2 ? 1 : 0);
    const __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(gh), row),
                                        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nkeys), slot));
    return _mm256_castsi256_ps(ok);
}

/* Every lane gets the max of the lanes of its row, over the key slots. */
ALWAYS_INLINE __m256 z_max(int gh, __m256 v) {
    const int P = ZP(gh);
    if (P == 1) {
        v = _mm256_max_ps(v, _mm256_permute_ps(v, 0xB1));
    }
    if (P <= 2) {
        v = _mm256_max_ps(v, _mm256_permute_ps(v, 0x4E));
    }
    return _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 1));
}

/* Lane h (h < gh) = row h's sum ((S0+S1)+(S2+S3))+((S4+S5)+(S6+S7)), S_l the row's weights
 * exp(z - max) of keys a + l, a + l + 8, ... added in key order, from the vectors' sums by
 * residue: s[r] sums the vectors v = r mod P, so it holds S_l for the P * (8 / P) = 8 key
 * residues l (keys of vector v sit at a + v * 8 / P + slot). The order is the same for every P,
 * so a row's sum does not depend on how many rows share its pass. */
ALWAYS_INLINE __m256 z_sum(int gh, const __m256 s[4]) {
    const int P = ZP(gh);
    if (P == 4) {
        /* s[r]: slot 0 holds S_2r, slot 1 S_2r+1. */
        __m256 t[4];
        for (int r = 0; r < 4; r++) {
            t[r] = _mm256_add_ps(s[r], _mm256_permute2f128_ps(s[r], s[r], 1));
        }
        return _mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3]));
    }
    if (P == 2) {
        /* s[r]: slot k holds S_4r+k. */
        __m256 t[2];
        for (int r = 0; r < 2; r++) {
            const __m256 u = _mm256_add_ps(s[r], _mm256_permute_ps(s[r], 0x4E));
            t[r] = _mm256_add_ps(u, _mm256_permute2f128_ps(u, u, 1));
        }
        return _mm256_add_ps(t[0], t[1]);
    }
    __m256 u = _mm256_add_ps(s[0], _mm256_permute_ps(s[0], 0xB1));
    u = _mm256_add_ps(u, _mm256_permute_ps(u, 0x4E));
    return _mm256_add_ps(u, _mm256_permute2f128_ps(u, u, 1));
}

/* Online-softmax step of rows h < gh (accumulators acc[h], running max mx[h] and sum sum[h])
 * over the chunk's keys [a, b], scores in zq: a row whose chunk max exceeds its running max
 * rescales its accumulator and sum once, by exp(old - new); then zq <- exp(zq - max), zero in
 * the lanes that hold no score, and each row's sum grows by its chunk's sum. */
ALWAYS_INLINE void softmax_chunk(int gh, float *const *acc, float *mx, float *sum, float *zq,
                                 int64_t a, int64_t b, int64_t hd) {
    const int P = ZP(gh), nk = 8 / P;
    const int64_t nv = (b - a + nk) / nk, last = b - a + 1 - (nv - 1) * nk;
    const __m256 full = z_valid(gh, nk), tail = z_valid(gh, last);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m = ninf;
    for (int64_t v = 0; v < nv; v++) {
        const __m256 z = _mm256_loadu_ps(zq + 8 * v);
        m = _mm256_max_ps(m, _mm256_blendv_ps(ninf, z, v == nv - 1 ? tail : full));
    }
    m = z_max(gh, m);
    float old[8] = {0}, cm[8], f[8];
    for (int l = 0; l < 8; l++) {
        old[l] = l % P < gh ? mx[l % P] : 0.0f;
    }
    const __m256 mo = _mm256_loadu_ps(old);
    const __m256 grow = _mm256_cmp_ps(m, mo, _CMP_GT_OQ);
    const __m256 mn = _mm256_blendv_ps(mo, m, grow);
    if (_mm256_movemask_ps(grow) != 0) {
        /* exp(-inf) is 0: the first keys of a row find nothing to rescale. */
        _mm256_storeu_ps(f, exp256_neg(_mm256_sub_ps(mo, m)));
        _mm256_storeu_ps(cm, m);
        const int g = _mm256_movemask_ps(grow);
        for (int h = 0; h < gh; h++) {
            if (g & (1 << h)) {
                sum[h] *= f[h];
                scale_row(acc[h], hd, f[h]);
                mx[h] = cm[h];
            }
        }
    }
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t v0 = 0; v0 < nv; v0 += P) {
        for (int r = 0; r < P && v0 + r < nv; r++) {
            const int64_t v = v0 + r;
            __m256 e = exp256_neg(_mm256_sub_ps(_mm256_loadu_ps(zq + 8 * v), mn));
            e = _mm256_and_ps(e, v == nv - 1 ? tail : full);
            _mm256_storeu_ps(zq + 8 * v, e);
            s[r] = _mm256_add_ps(s[r], e);
        }
    }
    float t[8];
    _mm256_storeu_ps(t, z_sum(gh, s));
    for (int h = 0; h < gh; h++) {
        sum[h] += t[h];
    }
}

/*
 * Score and value kernels over a chunk of keys for gh <= ATT_GH query rows of one token (the
 * heads of a GQA group), for several sources of K/V rows: rows converted to f32 in one
 * contiguous buffer (k_src_conv: src + i * hd), and cache rows read in place through a
 * pointer per key, one source per cache type (f32, f16, bf16, q8_0, q5_0, q4_0), which saves
 * the conversion pass when few query rows share the chunk (decoding). A quantized row is read
 * block by block: eight elements of a block are widened to f32 lanes and multiplied by the
 * block's scale in registers, so a K row's dot product with a query and a V row's weighted sum
 * read the cache's blocks and nothing else.
 * The kernels are written once over a constant table of the source (kv_src: where key i's row
 * is, how eight of its elements load as floats) and always inlined into the named functions
 * of KV_KERNELS, where the table is a constant. K and V pick their sources separately (their
 * types may differ): scores read K, the accumulation reads V.
 * Each key row is loaded (and converted) once for all gh rows. Per row the float operations
 * and their order do not depend on gh or on the source, so neither changes a result: every
 * score sums its 8 lanes as ((0+1)+(2+3))+((4+5)+(6+7)); values accumulate key by key per
 * element. A loaded element equals what the type's to_float gives (one product of the integer
 * and the scale), so converted and in-place rows give the same bits.
 */
typedef struct kv_src {
    /* Row i of the chunk's rows at src (hd elements per row). */
    const void *(*row)(const void *src, int64_t i, int64_t hd);
    /* Elements d0 + 8u .. d0 + 8u + 7 of a row, as floats: d0 is a multiple of `step` (for
     * the block types the block d0 / 32, of which u < 4 picks the quarter; for the others any
     * multiple of 8). */
    __m256 (*load)(const void *row, int64_t d0, int u);
    int step; /* 32 for the block types (a row's elements a block at a time), else 8 */
} kv_src;

/* src: const float * to the chunk's first row, rows hd floats apart. */
ALWAYS_INLINE const void *row_conv(const void *src, int64_t i, int64_t hd) {
    return (const float *)src + i * hd;
}

/* src: const void *const *, the chunk's cache rows one pointer per key. */
ALWAYS_INLINE const void *row_ptr(const void *src, int64_t i, int64_t hd) {
    (void)hd;
    return ((const void *const *)src)[i];
}

ALWAYS_INLINE __m256 load_f32(const void *row, int64_t d0, int u) {
    return _mm256_loadu_ps((const float *)row + d0 + 8 * u);
}

ALWAYS_INLINE __m256 load_f16(const void *row, int64_t d0, int u) {
    const uint16_t *p = (const uint16_t *)row + d0 + 8 * u;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* bf16 is the high half of an f32. */
ALWAYS_INLINE __m256 load_bf16(const void *row, int64_t d0, int u) {
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + d0 + 8 * u));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The 32-element blocks (gguf/ggml_types.h): an f16 scale d first, then
 *   q8_0 (34 bytes): int8 q[32];                               x = d * q
 *   q4_0 (18 bytes): u8 qs[16], element j < 16 in the low nibble of qs[j], j + 16 in its high
 *                    nibble;                                   x = d * (nibble - 8)
 *   q5_0 (22 bytes): u32 qh (little-endian; bit j is bit 4 of element j), then qs as q4_0;
 *                                                              x = d * (nibble | bit << 4 - 16)
 */
ALWAYS_INLINE __m256 block_scale(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_set1_ps(_cvtsh_ss(h));
}

ALWAYS_INLINE __m256 load_q8_0(const void *row, int64_t d0, int u) {
    const uint8_t *blk = (const uint8_t *)row + (d0 / 32) * 34;
    const __m128i q = _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * u));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), block_scale(blk));
}

/* Nibbles of elements 8u .. 8u + 7 of a block's qs, as 32-bit lanes. */
ALWAYS_INLINE __m256i nibbles8(const uint8_t *qs, int u) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * (u & 1))));
    const __m256i s = u >= 2 ? _mm256_srli_epi32(b, 4) : b;
    return _mm256_and_si256(s, _mm256_set1_epi32(0xF));
}

ALWAYS_INLINE __m256 load_q4_0(const void *row, int64_t d0, int u) {
    const uint8_t *blk = (const uint8_t *)row + (d0 / 32) * 18;
    const __m256i q = _mm256_sub_epi32(nibbles8(blk + 2, u), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), block_scale(blk));
}

ALWAYS_INLINE __m256 load_q5_0(const void *row, int64_t d0, int u) {
    const uint8_t *blk = (const uint8_t *)row + (d0 / 32) * 22;
    uint32_t qh;
    memcpy(&qh, blk + 2, sizeof qh);
    /* Lane l gets bit 8u + l of qh, moved to bit 4. */
    const __m256i bits = _mm256_srlv_epi32(_mm256_set1_epi32((int)(qh >> (8 * u))),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(1)), 4);
    const __m256i q =
        _mm256_sub_epi32(_mm256_or_si256(nibbles8(blk + 6, u), hi), _mm256_set1_epi32(16));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), block_scale(blk));
}

static const kv_src k_src_conv = {.row = row_conv, .load = load_f32, .step = 8};
static const kv_src k_src_f32 = {.row = row_ptr, .load = load_f32, .step = 8};
static const kv_src k_src_f16 = {.row = row_ptr, .load = load_f16, .step = 8};
static const kv_src k_src_bf16 = {.row = row_ptr, .load = load_bf16, .step = 8};
static const kv_src k_src_q8_0 = {.row = row_ptr, .load = load_q8_0, .step = 32};
static const kv_src k_src_q5_0 = {.row = row_ptr, .load = load_q5_0, .step = 32};
static const kv_src k_src_q4_0 = {.row = row_ptr, .load = load_q4_0, .step = 32};

/* Lane r = the sum of v[r]'s eight lanes, as ((0+1)+(2+3))+((4+5)+(6+7)). */
ALWAYS_INLINE __m256 reduce8(const __m256 v[8]) {
    const __m256 a01 = _mm256_hadd_ps(v[0], v[1]), a23 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 a45 = _mm256_hadd_ps(v[4], v[5]), a67 = _mm256_hadd_ps(v[6], v[7]);
    const __m256 b0 = _mm256_hadd_ps(a01, a23), b1 = _mm256_hadd_ps(a45, a67);
    return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20),
                         _mm256_permute2f128_ps(b0, b1, 0x31));
}

/* One kv head's rows at the next chunk's keys (decoding), prefetched a step at a time by the
 * scores kernel while it computes this chunk's: issued all at once before the chunk, they
 * stalled on the core's few outstanding misses. */
typedef struct kv_pf {
    const char *k[ATT_KC], *v[ATT_KC];
    size_t k_bytes, v_bytes; /* bytes of a row */
    int64_t n;               /* keys in the next chunk */
} kv_pf;

ALWAYS_INLINE void pf_row(const char *p, size_t n) {
    for (size_t l = 0; l < n; l += 64) {
        _mm_prefetch(p + l, _MM_HINT_T0);
    }
    _mm_prefetch(p + n - 1, _MM_HINT_T0);
}

/* zq[(i - a) * P + h] = dot(q[h], key i) * scale for keys [a, b] (layout above), 8 / P keys a
 * step: one accumulator per (key, row), each summing over d in ascending order, the query
 * vectors loaded once for the step's keys, and one reduction for all of them. A step that runs
 * past b reads key b's row again for the lanes no one reads. pf (or NULL): rows to prefetch,
 * those of the next chunk's keys with the step's indices. */
ALWAYS_INLINE void scores(const kv_src *t, int gh, const float *const *q, const void *k, int64_t a,
                          int64_t b, int64_t hd, float scale, float *zq, const kv_pf *pf) {
    const int P = ZP(gh), nk = 8 / P;
    const __m256 sv = _mm256_set1_ps(scale);
    for (int64_t i = a; i <= b; i += nk) {
        const void *row[8];
        __m256 acc[8];
        if (pf != NULL) {
            for (int kk = 0; kk < nk && i + kk < pf->n; kk++) {
                pf_row(pf->k[i + kk], pf->k_bytes);
                pf_row(pf->v[i + kk], pf->v_bytes);
            }
        }
        for (int kk = 0; kk < nk; kk++) {
            row[kk] = t->row(k, i + kk <= b ? i + kk : b, hd);
        }
        for (int l = 0; l < 8; l++) {
            acc[l] = _mm256_setzero_ps();
        }
        for (int64_t d0 = 0; d0 < hd; d0 += t->step) {
            for (int u = 0; u < t->step / 8; u++) {
                __m256 qv[ATT_GH];
                for (int h = 0; h < gh; h++) {
                    qv[h] = _mm256_loadu_ps(q[h] + d0 + 8 * u);
                }
                for (int kk = 0; kk < nk; kk++) {
                    const __m256 kv = t->load(row[kk], d0, u);
                    for (int h = 0; h < gh; h++) {
                        acc[kk * P + h] = _mm256_fmadd_ps(qv[h], kv, acc[kk * P + h]);
                    }
                }
            }
        }
        _mm256_storeu_ps(zq + (i - a) * P, _mm256_mul_ps(reduce8(acc), sv));
    }
}

/* acc[h][d] += sum_i p(i, h) * v(a + i)[d] for i < nk, h < gh, p(i, h) = zq[i * P + h]. */
ALWAYS_INLINE void accumulate(const kv_src *t, int gh, float *const *acc, const float *zq,
                              const void *v, int64_t a, int64_t nk, int64_t hd) {
    const int P = ZP(gh);
    int64_t d = 0;
    /* nu vectors of each row per pass (four; two for four rows: eight to twelve chains, enough
     * to keep the FMA units busy through their latency, within the registers), one value
     * vector live at a time. The load takes a pass's block (d0, a multiple of 32) and the
     * pass's quarters in it. */
    const int nu = gh > 3 ? 2 : 4;
    for (; d + 8 * nu <= hd; d += 8 * nu) {
        const int64_t d0 = d - d % 32;
        const int u0 = (int)(d % 32) / 8;
        __m256 s[ATT_GH][4];
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < nu; u++) {
                s[h][u] = _mm256_loadu_ps(acc[h] + d + 8 * u);
            }
        }
        for (int64_t i = 0; i < nk; i++) {
            __m256 w[ATT_GH];
            for (int h = 0; h < gh; h++) {
                w[h] = _mm256_broadcast_ss(zq + i * P + h);
            }
            for (int u = 0; u < nu; u++) {
                const __m256 vu = t->load(t->row(v, a + i, hd), d0, u0 + u);
                for (int h = 0; h < gh; h++) {
                    s[h][u] = _mm256_fmadd_ps(w[h], vu, s[h][u]);
                }
            }
        }
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < nu; u++) {
                _mm256_storeu_ps(acc[h] + d + 8 * u, s[h][u]);
            }
        }
    }
    /* The rest, 8 at a time: f32 / f16 / bf16 rows only (a block type's head_dim is a
     * multiple of 32). */
    for (; d < hd; d += 8) {
        for (int h = 0; h < gh; h++) {
            __m256 s0 = _mm256_loadu_ps(acc[h] + d);
            for (int64_t i = 0; i < nk; i++) {
                s0 = _mm256_fmadd_ps(_mm256_broadcast_ss(zq + i * P + h),
                                     t->load(t->row(v, a + i, hd), d, 0), s0);
            }
            _mm256_storeu_ps(acc[h] + d, s0);
        }
    }
}

/* The named kernels of one source: a constant gh per call so that the loops over rows
 * unroll. */
typedef void (*scores_fn)(int gh, const float *const *q, const void *kc, int64_t a, int64_t b,
                          int64_t hd, float scale, float *zq, const kv_pf *pf);
typedef void (*accum_fn)(int gh, float *const *acc, const float *zq, const void *vc, int64_t a,
                         int64_t nk, int64_t hd);

#define KV_KERNELS(NAME)                                                                           \
    static void scores_##NAME(int gh, const float *const *q, const void *kc, int64_t a, int64_t b, \
                              int64_t hd, float scale, float *zq, const kv_pf *pf) {               \
        if (gh == 4) {                                                                             \
            scores(&k_src_##NAME, 4, q, kc, a, b, hd, scale, zq, pf);                              \
        } else if (gh == 3) {                                                                      \
            scores(&k_src_##NAME, 3, q, kc, a, b, hd, scale, zq, pf);                              \
        } else if (gh == 2) {                                                                      \
            scores(&k_src_##NAME, 2, q, kc, a, b, hd, scale, zq, pf);                              \
        } else {                                                                                   \
            scores(&k_src_##NAME, 1, q, kc, a, b, hd, scale, zq, pf);                              \
        }                                                                                          \
    }                                                                                              \
    static void accum_##NAME(int gh, float *const *acc, const float *zq, const void *vc,           \
                             int64_t a, int64_t nk, int64_t hd) {                                  \
        if (gh == 4) {                                                                             \
            accumulate(&k_src_##NAME, 4, acc, zq, vc, a, nk, hd);                                  \
        } else if (gh == 3) {                                                                      \
            accumulate(&k_src_##NAME, 3, acc, zq, vc, a, nk, hd);                                  \
        } else if (gh == 2) {                                                                      \
            accumulate(&k_src_##NAME, 2, acc, zq, vc, a, nk, hd);                                  \
        } else {                                                                                   \
            accumulate(&k_src_##NAME, 1, acc, zq, vc, a, nk, hd);                                  \
        }                                                                                          \
    }

KV_KERNELS(conv)
KV_KERNELS(f32)
KV_KERNELS(f16)
KV_KERNELS(bf16)
KV_KERNELS(q8_0)
KV_KERNELS(q5_0)
KV_KERNELS(q4_0)

typedef struct kv_kernels {
    scores_fn scores;
    accum_fn accum;
} kv_kernels;

static const kv_kernels k_conv = {scores_conv, accum_conv};

/* The in-place kernels of a cache type; NULL for a type without them (never: the op checks
 * the cache types, and every type it allows has a source here). */
static const kv_kernels *direct_kernels(ts_type t) {
    static const kv_kernels f32 = {scores_f32, accum_f32}, f16 = {scores_f16, accum_f16},
                            bf16 = {scores_bf16, accum_bf16}, q8_0 = {scores_q8_0, accum_q8_0},
                            q5_0 = {scores_q5_0, accum_q5_0}, q4_0 = {scores_q4_0, accum_q4_0};
    switch (t) {
    case TS_TYPE_F32:
        return &f32;
    case TS_TYPE_F16:
        return &f16;
    case TS_TYPE_BF16:
        return &bf16;
    case TS_TYPE_Q8_0:
        return &q8_0;
    case TS_TYPE_Q5_0:
        return &q5_0;
    case TS_TYPE_Q4_0:
        return &q4_0;
    default:
        return NULL;
    }
}

/* The online-softmax step at a constant row count. */
static void softmax_rows(int gh, float *const *acc, float *mx, float *sum, float *zq, int64_t a,
                         int64_t b, int64_t hd) {
    if (gh == 4) {
        softmax_chunk(4, acc, mx, sum, zq, a, b, hd);
    } else if (gh == 3) {
        softmax_chunk(3, acc, mx, sum, zq, a, b, hd);
    } else if (gh == 2) {
        softmax_chunk(2, acc, mx, sum, zq, a, b, hd);
    } else {
        softmax_chunk(1, acc, mx, sum, zq, a, b, hd);
    }
}

/* Rows [0, ng) of one token (consecutive in acc, q, mx, sum), ATT_GH at a time, against keys
 * [a, b] of the chunk: K rows through kk, V rows through vk; zq holds ATT_GH * ATT_KC floats;
 * pf (or NULL): the next chunk's rows to prefetch meanwhile. */
static void token_chunk(const kv_kernels *kk, const kv_kernels *vk, int64_t ng, float *acc,
                        float *mx, float *sum, const float *q, const void *kc, const void *vc,
                        int64_t a, int64_t b, int64_t hd, float scale, float *zq, const kv_pf *pf) {
    for (int64_t g0 = 0; g0 < ng; g0 += ATT_GH) {
        const int gh = ng - g0 < ATT_GH ? (int)(ng - g0) : ATT_GH;
        float *ar[ATT_GH];
        const float *qr[ATT_GH];
        for (int h = 0; h < gh; h++) {
            ar[h] = acc + (g0 + h) * hd;
            qr[h] = q + (g0 + h) * hd;
        }
        kk->scores(gh, qr, kc, a, b, hd, scale, zq, g0 == 0 ? pf : NULL);
        softmax_rows(gh, ar, &mx[g0], &sum[g0], zq, a, b, hd);
        vk->accum(gh, ar, zq, vc, a, b - a + 1, hd);
    }
}

/* Byte offset of key j's row of kv head 0 in cache c (K or V) of sequence s. */
static inline size_t kv_offset(const ts_tensor *c, const ts_tensor *tab, int32_t s, int64_t j) {
    int64_t bs = c->ne[2];
    int64_t blk = cpu_attn_read_block(tab, j / bs, s, c->ne[3]);
    return (size_t)(j % bs) * c->nb[2] + (size_t)blk * c->nb[3];
}

void cpu_attn_item_avx2(const cpu_op_ctx *c, ts_tensor *n, const cpu_attn_item *it) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    const ts_quant_ops *vops = ts_quant_ops_get(v->type, c->isa);
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1];
    int64_t group = nh / nkv, ng = it->g1 - it->g0, nt = it->t1 - it->t0, nkh = it->kh1 - it->kh0;
    float scale = n->fp[0];
    float *kc = c->local, *vc = kc + ATT_KC * hd, *qb = vc + ATT_KC * hd;
    /* Few query rows per kv head (decoding): read K/V rows in place, whatever their types,
     * instead of converting each chunk. Items of several kv heads are decoding items only
     * (cpu_attn.c). */
    const bool direct = nt * ng <= ATT_DIRECT_ROWS;
    const kv_kernels *kk = direct ? direct_kernels(k->type) : &k_conv;
    const kv_kernels *vk = direct ? direct_kernels(v->type) : &k_conv;
    const void *kp[ATT_KC], *vp[ATT_KC];
    size_t koff[ATT_KC], voff[ATT_KC], nkoff[ATT_KC], nvoff[ATT_KC];
    /* Rows r = (ti * nkh + khi) * ng + g; nt * nkh <= ATT_QT. */
    float *acc = qb + ATT_QT * group * hd, *z = acc + ATT_QT * group * hd;
    float *mx = z + ATT_GH * ATT_KC, *sum = mx + ATT_QT * group;
    int64_t jlo[ATT_QT], jhi[ATT_QT], J0, J1;
    cpu_attn_item_rows(n, it, qb, jlo, jhi, &J0, &J1);
    /* Rows start from the attention sink when there is one (cpu_attn_item_sink). */
    for (int64_t r = 0; r < nt * nkh * ng; r++) {
        cpu_attn_item_sink(n, it, r, &mx[r], &sum[r]);
    }
    memset(acc, 0, (size_t)(nt * nkh * ng * hd) * sizeof *acc);
    /* The bytes of one kv head's row at one key. */
    size_t k_row = 0, v_row = 0;
    ts_type_row_bytes((uint32_t)k->type, (uint64_t)hd, &k_row);
    ts_type_row_bytes((uint32_t)v->type, (uint64_t)hd, &v_row);
    kv_pf pf = {.k_bytes = k_row, .v_bytes = v_row};
    /* Chunks on the grid of multiples of ATT_KC, whatever keys the item's other rows see: a
     * row's chunks, and so its bits, then depend on its own key range only (with a sliding
     * window the items' first keys differ). */
    for (int64_t j0 = J0 - J0 % ATT_KC; j0 <= J1; j0 += ATT_KC) {
        int64_t nk = J1 - j0 + 1 < ATT_KC ? J1 - j0 + 1 : ATT_KC;
        if (j0 == J0 - J0 % ATT_KC) {
            for (int64_t i = 0; i < nk; i++) {
                koff[i] = kv_offset(k, tab, it->s, j0 + i) + (size_t)it->kh0 * k->nb[1];
                voff[i] = kv_offset(v, tab, it->s, j0 + i) + (size_t)it->kh0 * v->nb[1];
            }
        } else {
            /* Found by the chunk before, for its prefetches (nk of them). */
            memcpy(koff, nkoff, (size_t)nk * sizeof *koff);
            memcpy(voff, nvoff, (size_t)nk * sizeof *voff);
        }
        /* The next chunk's keys (their offsets; each head's rows are prefetched while this
         * chunk's are converted or computed, kv_pf). */
        int64_t nn = 0;
        const int64_t e = j0 + 2 * ATT_KC - 1 < J1 ? j0 + 2 * ATT_KC - 1 : J1;
        for (int64_t j = j0 + ATT_KC; j <= e; j++, nn++) {
            nkoff[nn] = kv_offset(k, tab, it->s, j) + (size_t)it->kh0 * k->nb[1];
            nvoff[nn] = kv_offset(v, tab, it->s, j) + (size_t)it->kh0 * v->nb[1];
        }
        pf.n = nn;
        for (int64_t khi = 0; khi < nkh; khi++) {
            for (int64_t i = 0; i < nn; i++) {
                pf.k[i] = (const char *)k->data + nkoff[i] + (size_t)khi * k->nb[1];
                pf.v[i] = (const char *)v->data + nvoff[i] + (size_t)khi * v->nb[1];
            }
            for (int64_t i = 0; i < nk; i++) {
                const char *kr = (const char *)k->data + koff[i] + (size_t)khi * k->nb[1];
                const char *vr = (const char *)v->data + voff[i] + (size_t)khi * v->nb[1];
                if (direct) {
                    kp[i] = kr;
                    vp[i] = vr;
                } else {
                    /* Prefill converts the chunk right before computing with it: the next
                     * chunk's rows are fetched meanwhile, as decoding's are (kv_pf). */
                    if (i < nn) {
                        pf_row(pf.k[i], pf.k_bytes);
                        pf_row(pf.v[i], pf.v_bytes);
                    }
                    kops->to_float(kr, kc + i * hd, hd);
                    vops->to_float(vr, vc + i * hd, hd);
                }
            }
            const void *ks = direct ? (const void *)kp : (const void *)kc;
            const void *vs = direct ? (const void *)vp : (const void *)vc;
            for (int64_t ti = 0; ti < nt; ti++) {
                int64_t a = (jlo[ti] > j0 ? jlo[ti] : j0) - j0;
                int64_t b = (jhi[ti] < j0 + nk - 1 ? jhi[ti] : j0 + nk - 1) - j0;
                if (a > b) {
                    continue;
                }
                int64_t r = (ti * nkh + khi) * ng;
                token_chunk(kk, vk, ng, acc + r * hd, mx + r, sum + r, qb + r * hd, ks, vs, a, b,
                            hd, scale, z, direct && nn > 0 ? &pf : NULL);
            }
        }
    }
    for (int64_t ti = 0; ti < nt; ti++) {
        for (int64_t khi = 0; khi < nkh; khi++) {
            for (int64_t g = 0; g < ng; g++) {
                int64_t r = (ti * nkh + khi) * ng + g;
                float *out =
                    (float *)((char *)n->data + ((it->kh0 + khi) * group + it->g0 + g) * n->nb[1] +
                              (it->t0 + ti) * n->nb[2]);
                float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
                for (int64_t d = 0; d < hd; d++) {
                    out[d] = acc[r * hd + d] * inv;
                }
            }
        }
    }
}
