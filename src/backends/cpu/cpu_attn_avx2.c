/*
 * cpu_attn_avx2.c — tiled ATTENTION for the CPU backend (AVX2 + FMA), flash-attention style.
 *
 * A work item is (tile of up to ATT_QT consecutive tokens of one sequence, range of kv heads,
 * range of query heads of each GQA group). The item walks the union of its tokens' visible
 * key ranges in chunks of ATT_KC keys. Prefill items (one kv head) convert each chunk's K and
 * V rows to f32 once for every query row of the item (tokens x heads), which is what makes
 * prefill cheap. Decoding items read f16 rows in place; with many sequences one item covers
 * all kv heads of its token, so each key's rows of all heads are read as one contiguous run,
 * and the next chunk's rows are prefetched while this one computes (paged keys are scattered
 * over the cache; waiting on them dominated batched decoding). The query heads of a group
 * share each pass over a key row (ATT_GH at a time). Per query row an online softmax keeps
 * the running max and sum; a chunk whose max exceeds the running max rescales the
 * accumulator once. Scores are computed 4 keys at a time (one transposing reduction); exp
 * is cpu_exp256 (cpu_avx2.h), arguments below its range giving 0.
 *
 * Numerics: all in f32 like the reference; only the summation order and exp's last bits
 * differ (tests/backends/test_attention.c: 1e-5 normalized RMS error). A row's operations do
 * not depend on the item it is in, so prefill and decoding give the same bits.
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

static inline float exp_neg1(float x) {
    float in[8] = {x}, out[8];
    _mm256_storeu_ps(out, exp256_neg(_mm256_loadu_ps(in)));
    return out[0];
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void scale_row(float *a, int64_t hd, float f) {
    const __m256 fv = _mm256_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 8) {
        _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), fv));
    }
}

/* Online-softmax step of one query row over chunk keys [a, b] whose scaled scores are z[a..b]:
 * a new running max rescales the accumulator and the sum once; then z <- exp(z - max) and
 * the sum grows by sum(z). */
static void softmax_chunk(float *acc, float *mx, float *sum, float *z, int64_t a, int64_t b,
                          int64_t hd) {
    float cmax = z[a];
    for (int64_t i = a + 1; i <= b; i++) {
        cmax = z[i] > cmax ? z[i] : cmax;
    }
    if (cmax > *mx) {
        float f = *mx == -INFINITY ? 0.0f : exp_neg1(*mx - cmax);
        *sum *= f;
        scale_row(acc, hd, f);
        *mx = cmax;
    }
    const __m256 m = _mm256_set1_ps(*mx);
    __m256 s = _mm256_setzero_ps();
    int64_t i = a;
    for (; i + 8 <= b + 1; i += 8) {
        const __m256 e = exp256_neg(_mm256_sub_ps(_mm256_loadu_ps(z + i), m));
        _mm256_storeu_ps(z + i, e);
        s = _mm256_add_ps(s, e);
    }
    float tail = 0.0f;
    for (; i <= b; i++) {
        z[i] = exp_neg1(z[i] - *mx);
        tail += z[i];
    }
    *sum += hsum8(s) + tail;
}

/*
 * Score and value kernels over a chunk of keys for gh <= ATT_GH query rows of one token (the
 * heads of a GQA group), for two sources of K/V rows: rows converted to f32 in one contiguous
 * buffer (k_kv_f32: src + i * hd), and f16 rows read in place through a pointer per key
 * (k_kv_f16), which saves the conversion pass when few query rows share the chunk (decoding).
 * The kernels are written once over a constant table of the source (kv_src: where key i's
 * row is, how eight of its elements load as floats) and always inlined into the named
 * functions token_chunk_f32 and token_chunk_f16, where the table is a constant.
 * Each key row is loaded (and converted) once for all gh rows. Per row the float operations
 * and their order do not depend on gh or on the source, so neither changes a result: a key
 * in a group of 8 from the range start sums its 8 lanes as ((0+1)+(2+3))+((4+5)+(6+7)), a key
 * past the last such group as hsum8 does; values accumulate key by key per element.
 */
typedef struct kv_src {
    /* Row i of the chunk's rows at src (hd elements per row). */
    const void *(*row)(const void *src, int64_t i, int64_t hd);
    /* Elements d .. d + 7 of a row, as floats. */
    __m256 (*load)(const void *row, int64_t d);
} kv_src;

/* src: const float * to the chunk's first row, rows hd floats apart. */
ALWAYS_INLINE const void *row_f32(const void *src, int64_t i, int64_t hd) {
    return (const float *)src + i * hd;
}

ALWAYS_INLINE __m256 load_f32(const void *row, int64_t d) {
    return _mm256_loadu_ps((const float *)row + d);
}

/* src: const uint16_t *const *, the chunk's rows one pointer per key. */
ALWAYS_INLINE const void *row_f16(const void *src, int64_t i, int64_t hd) {
    (void)hd;
    return ((const uint16_t *const *)src)[i];
}

ALWAYS_INLINE __m256 load_f16(const void *row, int64_t d) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d)));
}

static const kv_src k_kv_f32 = {.row = row_f32, .load = load_f32};
static const kv_src k_kv_f16 = {.row = row_f16, .load = load_f16};

/* z[h][a + i] = dot(q[h], key a + i) * scale for 4 consecutive keys. hd % 8 == 0. */
ALWAYS_INLINE void scores4(const kv_src *t, int gh, const float *const *q, const void *k, int64_t a,
                           int64_t hd, float scale, float *const *z) {
    __m256 acc[ATT_GH][4];
    for (int h = 0; h < gh; h++) {
        for (int i = 0; i < 4; i++) {
            acc[h][i] = _mm256_setzero_ps();
        }
    }
    for (int64_t d = 0; d < hd; d += 8) {
        for (int i = 0; i < 4; i++) {
            const __m256 kv = t->load(t->row(k, a + i, hd), d);
            for (int h = 0; h < gh; h++) {
                acc[h][i] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + d), kv, acc[h][i]);
            }
        }
    }
    for (int h = 0; h < gh; h++) {
        const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(acc[h][0], acc[h][1]),
                                        _mm256_hadd_ps(acc[h][2], acc[h][3]));
        const __m128 r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        _mm_storeu_ps(z[h] + a, _mm_mul_ps(r, _mm_set1_ps(scale)));
    }
}

ALWAYS_INLINE float dot1(const kv_src *t, const float *q, const void *k, int64_t i, int64_t hd) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), t->load(t->row(k, i, hd), d), acc);
    }
    return hsum8(acc);
}

/* acc[h][d] += sum_i p[h][i] * v(a + i)[d] for i < nk, h < gh. */
ALWAYS_INLINE void accumulate(const kv_src *t, int gh, float *const *acc, const float *const *p,
                              const void *v, int64_t a, int64_t nk, int64_t hd) {
    int64_t d = 0;
    /* Four vectors of each row per pass (twelve chains for three rows: enough to keep the
     * FMA units busy through their latency), one value vector live at a time. */
    for (; d + 32 <= hd; d += 32) {
        __m256 s[ATT_GH][4];
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < 4; u++) {
                s[h][u] = _mm256_loadu_ps(acc[h] + d + 8 * u);
            }
        }
        for (int64_t i = 0; i < nk; i++) {
            __m256 w[ATT_GH];
            for (int h = 0; h < gh; h++) {
                w[h] = _mm256_broadcast_ss(p[h] + i);
            }
            for (int u = 0; u < 4; u++) {
                const __m256 vu = t->load(t->row(v, a + i, hd), d + 8 * u);
                for (int h = 0; h < gh; h++) {
                    s[h][u] = _mm256_fmadd_ps(w[h], vu, s[h][u]);
                }
            }
        }
        for (int h = 0; h < gh; h++) {
            for (int u = 0; u < 4; u++) {
                _mm256_storeu_ps(acc[h] + d + 8 * u, s[h][u]);
            }
        }
    }
    for (; d < hd; d += 8) {
        for (int h = 0; h < gh; h++) {
            __m256 s0 = _mm256_loadu_ps(acc[h] + d);
            for (int64_t i = 0; i < nk; i++) {
                s0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p[h] + i),
                                     t->load(t->row(v, a + i, hd), d), s0);
            }
            _mm256_storeu_ps(acc[h] + d, s0);
        }
    }
}

/* gh query rows of one token against keys [a, b] of the chunk (indices relative to it). */
ALWAYS_INLINE void rows_chunk(const kv_src *t, int gh, float *const *acc, float *mx, float *sum,
                              const float *const *q, const void *kc, const void *vc, int64_t a,
                              int64_t b, int64_t hd, float scale, float *const *z) {
    const int64_t n8 = a + (b - a + 1) / 8 * 8;
    for (int64_t i = a; i < n8; i += 4) {
        scores4(t, gh, q, kc, i, hd, scale, z);
    }
    for (int64_t i = n8; i <= b; i++) {
        for (int h = 0; h < gh; h++) {
            z[h][i] = dot1(t, q[h], kc, i, hd) * scale;
        }
    }
    const float *p[ATT_GH];
    for (int h = 0; h < gh; h++) {
        softmax_chunk(acc[h], &mx[h], &sum[h], z[h], a, b, hd);
        p[h] = z[h] + a;
    }
    accumulate(t, gh, acc, p, vc, a, b - a + 1, hd);
}

/* Rows [0, ng) of one token (consecutive in acc, q, mx, sum), ATT_GH at a time. */
ALWAYS_INLINE void token_chunk(const kv_src *t, int64_t ng, float *acc, float *mx, float *sum,
                               const float *q, const void *kc, const void *vc, int64_t a, int64_t b,
                               int64_t hd, float scale, float *z) {
    for (int64_t g0 = 0; g0 < ng; g0 += ATT_GH) {
        const int gh = ng - g0 < ATT_GH ? (int)(ng - g0) : ATT_GH;
        float *ar[ATT_GH], *zr[ATT_GH];
        const float *qr[ATT_GH];
        for (int h = 0; h < gh; h++) {
            ar[h] = acc + (g0 + h) * hd;
            qr[h] = q + (g0 + h) * hd;
            zr[h] = z + h * ATT_KC;
        }
        /* Constant gh per call so that the kernels' loops over rows unroll. */
        if (gh == 3) {
            rows_chunk(t, 3, ar, mx + g0, sum + g0, qr, kc, vc, a, b, hd, scale, zr);
        } else if (gh == 2) {
            rows_chunk(t, 2, ar, mx + g0, sum + g0, qr, kc, vc, a, b, hd, scale, zr);
        } else {
            rows_chunk(t, 1, ar, mx + g0, sum + g0, qr, kc, vc, a, b, hd, scale, zr);
        }
    }
}

/* K/V rows converted to f32: row i of the chunk at kc + i * hd (likewise vc). */
static void token_chunk_f32(int64_t ng, float *acc, float *mx, float *sum, const float *q,
                            const float *kc, const float *vc, int64_t a, int64_t b, int64_t hd,
                            float scale, float *z) {
    token_chunk(&k_kv_f32, ng, acc, mx, sum, q, kc, vc, a, b, hd, scale, z);
}

/* f16 K/V rows in place: row i of the chunk at kc[i] (likewise vc). */
static void token_chunk_f16(int64_t ng, float *acc, float *mx, float *sum, const float *q,
                            const uint16_t *const *kc, const uint16_t *const *vc, int64_t a,
                            int64_t b, int64_t hd, float scale, float *z) {
    token_chunk(&k_kv_f16, ng, acc, mx, sum, q, kc, vc, a, b, hd, scale, z);
}

/* Byte offset of key j's row of kv head 0 in the cache of sequence s. */
static inline size_t kv_offset(const ts_tensor *k, const ts_tensor *tab, int32_t s, int64_t j) {
    int64_t bs = k->ne[2];
    int64_t blk = cpu_attn_read_block(tab, j / bs, s, k->ne[3]);
    return (size_t)(j % bs) * k->nb[2] + (size_t)blk * k->nb[3];
}

void cpu_attn_item_avx2(const cpu_op_ctx *c, ts_tensor *n, const cpu_attn_item *it) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1];
    int64_t group = nh / nkv, ng = it->g1 - it->g0, nt = it->t1 - it->t0, nkh = it->kh1 - it->kh0;
    float scale = n->fp[0];
    float *kc = c->local, *vc = kc + ATT_KC * hd, *qb = vc + ATT_KC * hd;
    /* Few query rows per kv head (decoding): read f16 K/V in place instead of converting each
     * chunk. Items of several kv heads are decoding items only (cpu_attn.c). */
    const bool direct =
        k->type == TS_TYPE_F16 && v->type == TS_TYPE_F16 && nt * ng <= ATT_DIRECT_ROWS;
    const uint16_t *kp[ATT_KC], *vp[ATT_KC];
    size_t koff[ATT_KC];
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
    /* The row bytes of all the item's kv heads at one key (contiguous in the cache). */
    size_t row_bytes = 0;
    ts_type_row_bytes((uint32_t)k->type, (uint64_t)hd, &row_bytes);
    const size_t span = (size_t)(nkh - 1) * k->nb[1] + row_bytes;
    /* Chunks on the grid of multiples of ATT_KC, whatever keys the item's other rows see: a
     * row's chunks, and so its bits, then depend on its own key range only (with a sliding
     * window the items' first keys differ). */
    for (int64_t j0 = J0 - J0 % ATT_KC; j0 <= J1; j0 += ATT_KC) {
        int64_t nk = J1 - j0 + 1 < ATT_KC ? J1 - j0 + 1 : ATT_KC;
        for (int64_t i = 0; i < nk; i++) {
            koff[i] = kv_offset(k, tab, it->s, j0 + i) + (size_t)it->kh0 * k->nb[1];
        }
        if (direct) {
            /* The next chunk's rows are read from memory while this one computes: its keys sit
             * in blocks spread over the cache, and waiting on them dominated decoding. */
            const int64_t e = j0 + 2 * ATT_KC - 1 < J1 ? j0 + 2 * ATT_KC - 1 : J1;
            for (int64_t j = j0 + ATT_KC; j <= e; j++) {
                size_t off = kv_offset(k, tab, it->s, j) + (size_t)it->kh0 * k->nb[1];
                for (size_t l = 0; l < span; l += 64) {
                    _mm_prefetch((const char *)k->data + off + l, _MM_HINT_T0);
                    _mm_prefetch((const char *)v->data + off + l, _MM_HINT_T0);
                }
            }
        }
        for (int64_t khi = 0; khi < nkh; khi++) {
            for (int64_t i = 0; i < nk; i++) {
                size_t off = koff[i] + (size_t)khi * k->nb[1];
                if (direct) {
                    kp[i] = (const uint16_t *)((const char *)k->data + off);
                    vp[i] = (const uint16_t *)((const char *)v->data + off);
                } else {
                    kops->to_float((const char *)k->data + off, kc + i * hd, hd);
                    kops->to_float((const char *)v->data + off, vc + i * hd, hd);
                }
            }
            for (int64_t ti = 0; ti < nt; ti++) {
                int64_t a = (jlo[ti] > j0 ? jlo[ti] : j0) - j0;
                int64_t b = (jhi[ti] < j0 + nk - 1 ? jhi[ti] : j0 + nk - 1) - j0;
                if (a > b) {
                    continue;
                }
                int64_t r = (ti * nkh + khi) * ng;
                if (direct) {
                    token_chunk_f16(ng, acc + r * hd, mx + r, sum + r, qb + r * hd, kp, vp, a, b,
                                    hd, scale, z);
                } else {
                    token_chunk_f32(ng, acc + r * hd, mx + r, sum + r, qb + r * hd, kc, vc, a, b,
                                    hd, scale, z);
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
                float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
                for (int64_t d = 0; d < hd; d++) {
                    out[d] = acc[r * hd + d] * inv;
                }
            }
        }
    }
}
