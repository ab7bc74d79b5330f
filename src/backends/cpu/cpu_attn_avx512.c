/*
 * cpu_attn_avx512.c — tiled ATTENTION for the CPU backend at AVX-512, flash-attention style.
 * cpu_attn.c deals the work items (cpu_attn_item: a tile of up to ATT_QT tokens of one
 * sequence, a range of kv heads, a range of query heads of each GQA group) as for the AVX2
 * kernel (cpu_attn_avx2.c), and this file runs one item.
 *
 * An item walks the union of its tokens' visible key ranges in chunks of ATT5_KC keys. Per
 * query row an online softmax keeps a running max and sum; the query heads of a group share
 * each pass over a chunk (ATT5_GH at a time). Scores are computed 16 keys to a vector, so the
 * softmax works on whole vectors (cpu_exp512; keys outside a row's range masked to -inf), and
 * the running max only moves when a score exceeds it by SM_SLACK, which spares most chunks a
 * horizontal max; the sum is kept in 16 lanes and added up at the end. Values accumulate 16
 * elements to a vector, four vectors per pass, one pass per key for all rows of the group.
 *
 * Prefill items (many rows per key) transpose each chunk's keys to f32 once (kt) and convert
 * f16 values once; decoding items (at most ATT5_DIRECT_ROWS rows) compute scores from the key
 * rows in place (f16 or f32) and prefetch the next chunk's rows, whose blocks are spread over
 * the cache. The two ways give the same bits (the score's definition is before scores_rows).
 *
 * Numerics: all in f32 like the reference; only the summation order and exp's last bits
 * differ (tests/backends/test_attention.c: 1e-5 normalized RMS error against the reference).
 * A row's operations depend only on its own key range: chunks lie on the grid of multiples of
 * ATT5_KC whatever the item's other rows see, a key's score does not depend on how it was
 * computed, and values accumulate key by key per element. So prefill and decoding, any group
 * split and any thread count give the same bits for a row.
 *
 * Preconditions (cpu_attn.c checks them): AVX-512, head size a multiple of 16 and at most
 * 1024, no soft-cap; K and V caches of one type with the same strides (as for AVX2).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_avx512.h"
#include "backends/cpu/cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Keeps x in a register: without it GCC folds the load of a vector that several FMAs use into
 * each of them, and the kernels below become bound by loads instead of FMAs. */
#define IN_REG(x) __asm__("" : "+v"(x))

/* Floats per vector: keys per vector of scores, elements per vector of a row. */
#define LANES 16

/* exp(x) for 16 lanes, x <= SM_SLACK (differences to a running max); below the smallest normal
 * result it gives 0, as expf underflows there too (also for x = -inf or NaN). */
static inline __m512 exp512_ftz(__m512 x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(CPU_EXP_LO), _CMP_GE_OQ);
    return _mm512_maskz_mov_ps(ok, cpu_exp512(x));
}

static inline float exp1_ftz(float x) {
    return _mm512_cvtss_f32(exp512_ftz(_mm512_set1_ps(x)));
}

static void scale_row(float *a, int64_t hd, float f) {
    const __m512 fv = _mm512_set1_ps(f);
    for (int64_t d = 0; d < hd; d += LANES) {
        _mm512_storeu_ps(a + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), fv));
    }
}

/* Lanes of key vector v (keys 16 v .. 16 v + 15 of the chunk) that lie in [a, b]. */
static inline __mmask16 lanes_in(int64_t v, int64_t a, int64_t b) {
    int64_t lo = a - LANES * v > 0 ? a - LANES * v : 0,
            hi = b - LANES * v < LANES - 1 ? b - LANES * v : LANES - 1;
    return (__mmask16)((0xFFFFu << lo) & (0xFFFFu >> (LANES - 1 - hi)));
}

/* How far a score may exceed the running max before the max is moved: exp(z - max) stays
 * below e^8 (about 3000), far from overflow even summed over any number of keys, and the max
 * moves rarely, so most chunks need no horizontal max. */
#define SM_SLACK 8.0f

/* The running max of a row moves to max(zv[0 .. nv - 1]) (all lanes; lanes outside the row's
 * keys are -inf); the accumulator and the sum's lanes are rescaled by exp(old - new), 0 the
 * first time (max -inf). Out of line: rare after a row's first chunk. */
static void move_max(float *acc, float *mx, float *sumv, const __m512 *zv, int64_t nv, int64_t hd) {
    __m512 vmax = zv[0];
    for (int64_t v = 1; v < nv; v++) {
        vmax = _mm512_max_ps(vmax, zv[v]);
    }
    const float cmax = _mm512_reduce_max_ps(vmax);
    const float f = *mx == -INFINITY ? 0.0f : exp1_ftz(*mx - cmax);
    _mm512_storeu_ps(sumv, _mm512_mul_ps(_mm512_loadu_ps(sumv), _mm512_set1_ps(f)));
    scale_row(acc, hd, f);
    *mx = cmax;
}

/* Online-softmax step of gh query rows over chunk keys [a, b], row h's scaled scores at
 * z[h][a .. b]. When a score exceeds the row's running max by more than SM_SLACK (always on
 * its first chunk, max -inf), the max moves (move_max). Then z[h] <- exp(z[h] - max) over the
 * vectors covering [a, b] (0 outside it), and the row's 16 sum lanes (sum + 16 h) grow by
 * them. */
ALWAYS_INLINE void softmax_rows(int gh, float *const *acc, float *mx, float *sum, float *const *z,
                                int64_t a, int64_t b, int64_t hd) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const int64_t v0 = a / LANES, nv = b / LANES - v0 + 1;
    __mmask16 lanes[ATT5_KC / LANES];
    for (int64_t v = 0; v < nv; v++) {
        lanes[v] = lanes_in(v0 + v, a, b);
    }
    for (int h = 0; h < gh; h++) {
        __m512 zv[ATT5_KC / LANES];
        const __m512 lim = _mm512_set1_ps(mx[h] + SM_SLACK);
        __mmask16 over = 0;
        for (int64_t v = 0; v < nv; v++) {
            zv[v] = _mm512_mask_loadu_ps(ninf, lanes[v], z[h] + LANES * (v0 + v));
            over |= _mm512_cmp_ps_mask(zv[v], lim, _CMP_GT_OQ);
        }
        if (over != 0) {
            move_max(acc[h], &mx[h], sum + LANES * h, zv, nv, hd);
        }
        const __m512 m = _mm512_set1_ps(mx[h]);
        __m512 s = _mm512_loadu_ps(sum + LANES * h);
        for (int64_t v = 0; v < nv; v++) {
            const __m512 e = exp512_ftz(_mm512_sub_ps(zv[v], m));
            _mm512_storeu_ps(z[h] + LANES * (v0 + v), e);
            s = _mm512_add_ps(s, e);
        }
        _mm512_storeu_ps(sum + LANES * h, s);
    }
}

/*
 * Kernels over one chunk for gh <= ATT5_GH query rows of one token (the heads of a GQA group).
 *
 * The score of key k for query q is defined as: for each lane l < 16, the leaf
 * P_l = FMA chain over m = 0, 1, .. of q[16 m + l] * k[16 m + l]; then the leaves are added
 * in the balanced tree of adjacent pairs, ((P0 + P1) + (P2 + P3)) + .. + (P14 + P15) (four
 * levels); then the sum is multiplied by the scale. It is computed in two ways with the same
 * float operations:
 *  - from key rows (scores_rows): one vector per key accumulates the 16 leaves over the head
 *    dimension, and a transposing reduction adds 16 keys' vectors pairwise into one vector of
 *    16 scores (30 shuffles and 15 adds). No conversion pass: decoding, few rows per key.
 *  - from keys transposed once per chunk (scores_kt: kt [head dim][ATT5_KC], a vector holds
 *    one element of 16 keys): each leaf is a vector of 16 keys' chains and the tree is 15
 *    vector adds. Prefill, where many rows share the chunk and the transposition is paid once.
 * So prefill and decoding give the same bits.
 *
 * Key and value rows come one pointer per key, f32 (converted into the item's buffers, or an
 * f32 cache in place) or f16 read in place. The kernels are written once over constant tables
 * of the row source (kv_src: how 16 elements of a row load as floats; NULL keys: transposed)
 * and always inlined into named functions where the tables are constants; gh is a constant at
 * each call so that the loops over rows unroll into registers. Per row the float operations
 * and their order do not depend on gh or on the source, so neither changes a result.
 */
typedef struct kv_src {
    /* Elements d .. d + 15 of a row, as floats. */
    __m512 (*load)(const void *row, int64_t d);
} kv_src;

ALWAYS_INLINE __m512 load_f32(const void *row, int64_t d) {
    return _mm512_loadu_ps((const float *)row + d);
}

ALWAYS_INLINE __m512 load_f16(const void *row, int64_t d) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)));
}

static const kv_src k_src_f32 = {.load = load_f32};
static const kv_src k_src_f16 = {.load = load_f16};

/* r[i][j] <- r[j][i]: unpacks pair rows, 64-bit shuffles make 4 x 4 blocks within each
 * 128-bit lane, and two rounds of 128-bit lane shuffles gather the blocks. */
ALWAYS_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[4 g + j], 128-bit lane L: element 4 L + j of rows 4 g .. 4 g + 3. */
    __m512 u[16];
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        /* Lanes 0, 1 (w0) and 2, 3 (w1) of u[j] and u[4 + j]; likewise of u[8 + j], u[12 + j]. */
        const __m512 w0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
        const __m512 w1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
        const __m512 w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
        const __m512 w3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
        r[j] = _mm512_shuffle_f32x4(w0, w2, 0x88);
        r[4 + j] = _mm512_shuffle_f32x4(w0, w2, 0xDD);
        r[8 + j] = _mm512_shuffle_f32x4(w1, w3, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(w1, w3, 0xDD);
    }
}

/* kt[d][i] = element d of key row i for i < nk, rounded up to a multiple of 16 (rows[i] valid
 * there). kt rows are ATT5_KC floats apart. */
ALWAYS_INLINE void transpose_keys(const kv_src *t, float *kt, const void *const *rows, int64_t nk,
                                  int64_t hd) {
    for (int64_t g = 0; g < nk; g += LANES) {
        for (int64_t d = 0; d < hd; d += LANES) {
            __m512 r[LANES];
            for (int i = 0; i < LANES; i++) {
                r[i] = t->load(rows[g + i], d);
            }
            transpose16(r);
            for (int i = 0; i < LANES; i++) {
                _mm512_storeu_ps(kt + (d + i) * ATT5_KC + g, r[i]);
            }
        }
    }
}

static void transpose_keys_f32(float *kt, const void *const *rows, int64_t nk, int64_t hd) {
    transpose_keys(&k_src_f32, kt, rows, nk, hd);
}

static void transpose_keys_f16(float *kt, const void *const *rows, int64_t nk, int64_t hd) {
    transpose_keys(&k_src_f16, kt, rows, nk, hd);
}

/* One level of the transposing reduction within 128-bit lanes: with a, b holding per lane
 * (x0, x1, x2, x3) and (y0, y1, y2, y3), gives (x0 + x1, x2 + x3, y0 + y1, y2 + y3). */
static inline __m512 pair_in_lane(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* The same across 128-bit lanes: (A0, A1, A2, A3), (B0, B1, B2, B3) give
 * (A0 + A1, A2 + A3, B0 + B1, B2 + B3). */
static inline __m512 pair_lanes(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}

/* e[h] = the first two tree levels of the scores of keys rows[0 .. 3] for row h, within
 * 128-bit lanes: lane L holds the four keys' sums of leaves 4 L .. 4 L + 3. */
ALWAYS_INLINE void quad_rows(const kv_src *t, int gh, const float *const *q,
                             const void *const *rows, int64_t hd, __m512 *e) {
    __m512 acc[ATT5_GH][4];
    for (int h = 0; h < gh; h++) {
        for (int i = 0; i < 4; i++) {
            acc[h][i] = _mm512_setzero_ps();
        }
    }
    for (int64_t d = 0; d < hd; d += LANES) {
        for (int i = 0; i < 4; i++) {
            __m512 kv = t->load(rows[i], d);
            IN_REG(kv);
            for (int h = 0; h < gh; h++) {
                acc[h][i] = _mm512_fmadd_ps(_mm512_loadu_ps(q[h] + d), kv, acc[h][i]);
            }
        }
    }
    for (int h = 0; h < gh; h++) {
        e[h] = pair_in_lane(pair_in_lane(acc[h][0], acc[h][1]), pair_in_lane(acc[h][2], acc[h][3]));
    }
}

/* z[h][16 v + i] = score of key 16 v + i (i < 16) from key rows kr[16 v + i]: four keys at a
 * time the first two tree levels, then the last two across 128-bit lanes. hd % 16 == 0. */
ALWAYS_INLINE void scores_rows(const kv_src *t, int gh, const float *const *q,
                               const void *const *kr, int64_t v, int64_t hd, float scale,
                               float *const *z) {
    __m512 ea[ATT5_GH], eb[ATT5_GH], f[ATT5_GH];
    quad_rows(t, gh, q, kr + LANES * v, hd, ea);
    quad_rows(t, gh, q, kr + LANES * v + 4, hd, eb);
    for (int h = 0; h < gh; h++) {
        f[h] = pair_lanes(ea[h], eb[h]);
    }
    quad_rows(t, gh, q, kr + LANES * v + 8, hd, ea);
    quad_rows(t, gh, q, kr + LANES * v + 12, hd, eb);
    for (int h = 0; h < gh; h++) {
        const __m512 s = pair_lanes(f[h], pair_lanes(ea[h], eb[h]));
        _mm512_storeu_ps(z[h] + LANES * v, _mm512_mul_ps(s, _mm512_set1_ps(scale)));
    }
}

/* x[h][u] = P_2j + P_2j+1 for row h and the 16 keys of vector u < nv of kt (transposed keys,
 * vector u's keys at kt[d * ATT5_KC + 16 u]): the two leaves' chains in flight together. */
ALWAYS_INLINE void leaf_pair(int gh, int nv, const float *const *q, const float *kt, int j,
                             int64_t hd, __m512 x[][2]) {
    __m512 p0[ATT5_GH][2], p1[ATT5_GH][2];
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            p0[h][u] = _mm512_setzero_ps();
            p1[h][u] = _mm512_setzero_ps();
        }
    }
    for (int64_t d = 2 * j; d < hd; d += LANES) {
        __m512 k0[2], k1[2];
        for (int u = 0; u < nv; u++) {
            k0[u] = _mm512_loadu_ps(kt + d * ATT5_KC + LANES * u);
            k1[u] = _mm512_loadu_ps(kt + (d + 1) * ATT5_KC + LANES * u);
            IN_REG(k0[u]);
            IN_REG(k1[u]);
        }
        for (int h = 0; h < gh; h++) {
            const __m512 q0 = _mm512_set1_ps(q[h][d]), q1 = _mm512_set1_ps(q[h][d + 1]);
            for (int u = 0; u < nv; u++) {
                p0[h][u] = _mm512_fmadd_ps(q0, k0[u], p0[h][u]);
                p1[h][u] = _mm512_fmadd_ps(q1, k1[u], p1[h][u]);
            }
        }
    }
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            x[h][u] = _mm512_add_ps(p0[h][u], p1[h][u]);
        }
    }
}

/* The scores of key vectors v .. v + nv - 1 (nv <= 2) from the transposed keys kt: the leaves
 * two at a time, each tree level added as soon as both its halves are known. */
ALWAYS_INLINE void scores_kt(int gh, int nv, const float *const *q, const float *kt, int64_t v,
                             int64_t hd, float scale, float *const *z) {
    const float *kv = kt + LANES * v;
    __m512 a[ATT5_GH][2], b[ATT5_GH][2], c[ATT5_GH][2], x[ATT5_GH][2];
    /* c = leaves 0 .. 7. */
    leaf_pair(gh, nv, q, kv, 0, hd, a);
    leaf_pair(gh, nv, q, kv, 1, hd, x);
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            b[h][u] = _mm512_add_ps(a[h][u], x[h][u]);
        }
    }
    leaf_pair(gh, nv, q, kv, 2, hd, a);
    leaf_pair(gh, nv, q, kv, 3, hd, x);
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            c[h][u] = _mm512_add_ps(b[h][u], _mm512_add_ps(a[h][u], x[h][u]));
        }
    }
    /* b = leaves 8 .. 15. */
    leaf_pair(gh, nv, q, kv, 4, hd, a);
    leaf_pair(gh, nv, q, kv, 5, hd, x);
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            b[h][u] = _mm512_add_ps(a[h][u], x[h][u]);
        }
    }
    leaf_pair(gh, nv, q, kv, 6, hd, a);
    leaf_pair(gh, nv, q, kv, 7, hd, x);
    for (int h = 0; h < gh; h++) {
        for (int u = 0; u < nv; u++) {
            b[h][u] = _mm512_add_ps(b[h][u], _mm512_add_ps(a[h][u], x[h][u]));
            _mm512_storeu_ps(z[h] + LANES * (v + u),
                             _mm512_mul_ps(_mm512_add_ps(c[h][u], b[h][u]), _mm512_set1_ps(scale)));
        }
    }
}

/* acc[h][d] += sum_i p[h][i] * v(a + i)[d] for i < nk, h < gh; value row j at vr[j]. */
ALWAYS_INLINE void accumulate(const kv_src *t, int gh, float *const *acc, const float *const *p,
                              const void *const *vr, int64_t a, int64_t nk, int64_t hd) {
    int64_t d = 0;
    /* Four vectors of each row per pass (twelve or sixteen chains: enough to keep the FMA
     * units busy through their latency), one value vector live at a time. */
    for (; d + 4 * LANES <= hd; d += 4 * LANES) {
        __m512 s[ATT5_GH][4];
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < 4; u++) {
                s[h][u] = _mm512_loadu_ps(acc[h] + d + LANES * u);
            }
        }
        for (int64_t i = 0; i < nk; i++) {
            const void *row = vr[a + i];
            __m512 w[ATT5_GH];
            for (int h = 0; h < gh; h++) {
                w[h] = _mm512_set1_ps(p[h][i]);
            }
            for (int u = 0; u < 4; u++) {
                __m512 vu = t->load(row, d + LANES * u);
                IN_REG(vu);
                for (int h = 0; h < gh; h++) {
                    s[h][u] = _mm512_fmadd_ps(w[h], vu, s[h][u]);
                }
            }
        }
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < 4; u++) {
                _mm512_storeu_ps(acc[h] + d + LANES * u, s[h][u]);
            }
        }
    }
    for (; d < hd; d += LANES) {
        __m512 s[ATT5_GH];
        for (int h = 0; h < gh; h++) {
            s[h] = _mm512_loadu_ps(acc[h] + d);
        }
        for (int64_t i = 0; i < nk; i++) {
            __m512 vu = t->load(vr[a + i], d);
            IN_REG(vu);
            for (int h = 0; h < gh; h++) {
                s[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h][i]), vu, s[h]);
            }
        }
        for (int h = 0; h < gh; h++) {
            _mm512_storeu_ps(acc[h] + d, s[h]);
        }
    }
}

/* gh query rows of one token against keys [a, b] of the chunk (indices relative to it); keys
 * from rows kr through ks, or transposed in kt when ks is NULL. */
ALWAYS_INLINE void rows_chunk(const kv_src *ks, const kv_src *vs, int gh, float *const *acc,
                              float *mx, float *sum, const float *const *q, const float *kt,
                              const void *const *kr, const void *const *vr, int64_t a, int64_t b,
                              int64_t hd, float scale, float *const *z) {
    for (int64_t v = a / LANES; v <= b / LANES;) {
        if (ks != NULL) {
            scores_rows(ks, gh, q, kr, v, hd, scale, z);
            v += 1;
        } else if (v < b / LANES) {
            scores_kt(gh, 2, q, kt, v, hd, scale, z);
            v += 2;
        } else {
            scores_kt(gh, 1, q, kt, v, hd, scale, z);
            v += 1;
        }
    }
    softmax_rows(gh, acc, mx, sum, z, a, b, hd);
    const float *p[ATT5_GH];
    for (int h = 0; h < gh; h++) {
        p[h] = z[h] + a;
    }
    accumulate(vs, gh, acc, p, vr, a, b - a + 1, hd);
}

/* The rows of one token's chunk step: [0, ng) consecutive in acc, q, mx and sum (16 floats a
 * row); keys [a, b] of the chunk. */
typedef struct token_step {
    int64_t ng;
    float *acc, *mx, *sum;
    const float *q;
    int64_t a, b;
} token_step;

/* The chunk's keys and values: kt (transposed keys) or kr (key rows), vr (value rows). */
typedef struct chunk_kv {
    const float *kt;
    const void *const *kr;
    const void *const *vr;
    int64_t hd;
    float scale;
    float *z; /* [ATT5_GH][ATT5_KC] scores */
} chunk_kv;

/* One token's rows, ATT5_GH at a time. */
ALWAYS_INLINE void token_chunk(const kv_src *ks, const kv_src *vs, const token_step *st,
                               const chunk_kv *ck) {
    const int64_t hd = ck->hd;
    for (int64_t g0 = 0; g0 < st->ng; g0 += ATT5_GH) {
        const int gh = st->ng - g0 < ATT5_GH ? (int)(st->ng - g0) : ATT5_GH;
        float *ar[ATT5_GH], *zr[ATT5_GH];
        const float *qr[ATT5_GH];
        for (int h = 0; h < gh; h++) {
            ar[h] = st->acc + (g0 + h) * hd;
            qr[h] = st->q + (g0 + h) * hd;
            zr[h] = ck->z + h * ATT5_KC;
        }
        float *mx = st->mx + g0, *sum = st->sum + g0 * LANES;
        /* Constant gh per call so that the kernels' loops over rows unroll. */
        switch (gh) {
        case 4:
            rows_chunk(ks, vs, 4, ar, mx, sum, qr, ck->kt, ck->kr, ck->vr, st->a, st->b, hd,
                       ck->scale, zr);
            break;
        case 3:
            rows_chunk(ks, vs, 3, ar, mx, sum, qr, ck->kt, ck->kr, ck->vr, st->a, st->b, hd,
                       ck->scale, zr);
            break;
        case 2:
            rows_chunk(ks, vs, 2, ar, mx, sum, qr, ck->kt, ck->kr, ck->vr, st->a, st->b, hd,
                       ck->scale, zr);
            break;
        default:
            rows_chunk(ks, vs, 1, ar, mx, sum, qr, ck->kt, ck->kr, ck->vr, st->a, st->b, hd,
                       ck->scale, zr);
            break;
        }
    }
}

/* Keys transposed, values f32 (prefill). */
static void token_chunk_kt(const token_step *st, const chunk_kv *ck) {
    token_chunk(NULL, &k_src_f32, st, ck);
}

/* Key and value rows f32 (decoding with an f32 cache, or rows converted to f32). */
static void token_chunk_f32(const token_step *st, const chunk_kv *ck) {
    token_chunk(&k_src_f32, &k_src_f32, st, ck);
}

/* Key and value rows f16 in place (decoding with an f16 cache). */
static void token_chunk_f16(const token_step *st, const chunk_kv *ck) {
    token_chunk(&k_src_f16, &k_src_f16, st, ck);
}

/* off[i] = byte offset of key j + i's row of kv head 0 in the cache of sequence s, plus base,
 * for i < n (keys j .. j + n - 1 below the sequence's length: the blocks of the visible ones
 * were checked, released ones read block 0). */
static void kv_offsets(const ts_tensor *k, const ts_tensor *tab, int32_t s, int64_t j, int64_t n,
                       size_t base, size_t *off) {
    const int64_t bs = k->ne[2];
    int64_t blk = j / bs, r = j % bs;
    size_t row0 = base + (size_t)cpu_attn_read_block(tab, blk, s, k->ne[3]) * k->nb[3];
    for (int64_t i = 0; i < n; i++) {
        off[i] = row0 + (size_t)r * k->nb[2];
        if (++r == bs && i + 1 < n) {
            r = 0;
            row0 = base + (size_t)cpu_attn_read_block(tab, ++blk, s, k->ne[3]) * k->nb[3];
        }
    }
}

void cpu_attn_item_avx512(const cpu_op_ctx *c, ts_tensor *n, const cpu_attn_item *it) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1];
    int64_t group = nh / nkv, ng = it->g1 - it->g0, nt = it->t1 - it->t0, nkh = it->kh1 - it->kh0;
    float scale = n->fp[0];
    /* Scratch (cpu_attn_avx512_scratch): kt [hd][ATT5_KC] transposed keys; kr, vc
     * [ATT5_KC][hd] keys and values converted to f32; qb, acc [rows][hd]; z [ATT5_GH][ATT5_KC];
     * sum [rows][16] (lanes of the softmax sum), mx [rows]. Rows r = (ti * nkh + khi) * ng + g;
     * nt * nkh <= ATT_QT. */
    float *kt = c->local, *kr = kt + hd * ATT5_KC, *vc = kr + ATT5_KC * hd;
    float *qb = vc + ATT5_KC * hd, *acc = qb + ATT_QT * group * hd, *z = acc + ATT_QT * group * hd;
    float *sum = z + ATT5_GH * ATT5_KC, *mx = sum + ATT_QT * group * LANES;
    /* Few query rows per kv head (decoding): scores from the key rows and f16 rows read in
     * place; otherwise keys transposed and values converted once per chunk for all rows (f32
     * values are always read in place). */
    const bool direct = nt * ng <= ATT5_DIRECT_ROWS;
    const bool k_f16 = k->type == TS_TYPE_F16, v_f16 = direct && v->type == TS_TYPE_F16;
    const bool k_conv = !k_f16 && k->type != TS_TYPE_F32, v_conv = !v_f16 && v->type != TS_TYPE_F32;
    const void *krow[ATT5_KC], *vrow[ATT5_KC];
    size_t offs[2][ATT5_KC]; /* this chunk's and the next one's key offsets */
    int64_t jlo[ATT_QT], jhi[ATT_QT], J0, J1;
    cpu_attn_item_rows(n, it, qb, jlo, jhi, &J0, &J1);
    /* Rows start from the attention sink when there is one (cpu_attn_item_sink): its weight
     * is in the sum's lane 0. */
    for (int64_t r = 0; r < nt * nkh * ng; r++) {
        float s0;
        cpu_attn_item_sink(n, it, r, &mx[r], &s0);
        _mm512_storeu_ps(sum + r * LANES, _mm512_setzero_ps());
        sum[r * LANES] = s0;
    }
    memset(acc, 0, (size_t)(nt * nkh * ng * hd) * sizeof *acc);
    /* The row bytes of all the item's kv heads at one key (contiguous in the cache). */
    size_t row_bytes = 0;
    ts_type_row_bytes((uint32_t)k->type, (uint64_t)hd, &row_bytes);
    const size_t span = (size_t)(nkh - 1) * k->nb[1] + row_bytes;
    /* Chunks on the grid of multiples of ATT5_KC, so that a row meets the same chunks in any
     * item (its result does not depend on the other rows' key ranges). With a window the
     * first chunk may start before J0; its keys there are converted but seen by no row. */
    const int64_t first = J1 >= 0 ? J0 - J0 % ATT5_KC : 0;
    const size_t base = (size_t)it->kh0 * k->nb[1];
    if (first <= J1) {
        kv_offsets(k, tab, it->s, first, J1 - first + 1 < ATT5_KC ? J1 - first + 1 : ATT5_KC, base,
                   offs[0]);
    }
    for (int64_t j0 = first, cur = 0; j0 <= J1; j0 += ATT5_KC, cur ^= 1) {
        const int64_t nk = J1 - j0 + 1 < ATT5_KC ? J1 - j0 + 1 : ATT5_KC;
        const size_t *koff = offs[cur];
        if (j0 + ATT5_KC <= J1) {
            const int64_t j1 = j0 + ATT5_KC, nk1 = J1 - j1 + 1 < ATT5_KC ? J1 - j1 + 1 : ATT5_KC;
            kv_offsets(k, tab, it->s, j1, nk1, base, offs[cur ^ 1]);
            /* Decoding: the next chunk's rows are read from memory while this one computes: its
             * keys sit in blocks spread over the cache, and waiting on them dominated. */
            for (int64_t i = 0; i < nk1 && direct; i++) {
                for (size_t l = 0; l < span; l += 64) {
                    _mm_prefetch((const char *)k->data + offs[cur ^ 1][i] + l, _MM_HINT_T0);
                    _mm_prefetch((const char *)v->data + offs[cur ^ 1][i] + l, _MM_HINT_T0);
                }
            }
        }
        /* Key indices from nk up to the next multiple of 16 repeat the last key (computed in
         * whole vectors of 16 keys, masked out of every softmax). */
        const int64_t nk16 = (nk + LANES - 1) / LANES * LANES;
        const chunk_kv ck = {.kt = kt, .kr = krow, .vr = vrow, .hd = hd, .scale = scale, .z = z};
        for (int64_t khi = 0; khi < nkh; khi++) {
            for (int64_t i = 0; i < nk16; i++) {
                size_t off = koff[i < nk ? i : nk - 1] + (size_t)khi * k->nb[1];
                krow[i] = (const char *)k->data + off;
                vrow[i] = (const char *)v->data + off;
            }
            for (int64_t i = 0; i < nk16 && k_conv; i++) {
                if (i < nk) {
                    kops->to_float(krow[i], kr + i * hd, hd);
                }
                krow[i] = kr + (i < nk ? i : nk - 1) * hd;
            }
            for (int64_t i = 0; i < nk16 && v_conv; i++) {
                if (i < nk) {
                    kops->to_float(vrow[i], vc + i * hd, hd);
                }
                vrow[i] = vc + (i < nk ? i : nk - 1) * hd;
            }
            if (!direct) {
                if (k_f16) {
                    transpose_keys_f16(kt, krow, nk, hd);
                } else {
                    transpose_keys_f32(kt, krow, nk, hd);
                }
            }
            for (int64_t ti = 0; ti < nt; ti++) {
                int64_t a = (jlo[ti] > j0 ? jlo[ti] : j0) - j0;
                int64_t b = (jhi[ti] < j0 + nk - 1 ? jhi[ti] : j0 + nk - 1) - j0;
                if (a > b) {
                    continue;
                }
                int64_t r = (ti * nkh + khi) * ng;
                const token_step st = {.ng = ng,
                                       .acc = acc + r * hd,
                                       .mx = mx + r,
                                       .sum = sum + r * LANES,
                                       .q = qb + r * hd,
                                       .a = a,
                                       .b = b};
                if (!direct) {
                    token_chunk_kt(&st, &ck);
                } else if (k_f16) {
                    token_chunk_f16(&st, &ck);
                } else {
                    token_chunk_f32(&st, &ck);
                }
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
                float total = _mm512_reduce_add_ps(_mm512_loadu_ps(sum + r * LANES));
                float inv = total > 0.0f ? 1.0f / total : 0.0f;
                for (int64_t d = 0; d < hd; d++) {
                    out[d] = acc[r * hd + d] * inv;
                }
            }
        }
    }
}
