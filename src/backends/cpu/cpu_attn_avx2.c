/*
 * cpu_attn_avx2.c — tiled ATTENTION for the CPU backend (AVX2 + FMA), flash-attention style.
 *
 * A work item is (tile of up to ATT_QT consecutive tokens of one sequence, kv head, range of
 * query heads of its GQA group). The item walks the union of its tokens' visible key ranges
 * in chunks of ATT_KC keys: each chunk's K and V rows are converted to f32 once and used by
 * every query row of the item (tokens x heads), which is what makes prefill cheap — the
 * per-token kernel in cpu_attn.c converted every key once per token. Per query row an online
 * softmax keeps the running max and sum; a chunk whose max exceeds the running max rescales
 * the accumulator once. Scores are computed 8 keys at a time (8 FMA chains, one transposing
 * reduction); exp is cpu_exp256 (cpu_avx2.h), arguments below its range giving 0.
 *
 * Numerics: all in f32 like the reference; only the summation order and exp's last bits
 * differ (tests/backends/test_attention.c: 1e-5 normalized RMS error).
 *
 * Items are dealt round-robin (item % nth) so that causal prefill, where later tiles see more
 * keys, spreads evenly over threads.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_avx2.h"
#include "backends/cpu/cpu_internal.h"

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

/*
 * Score and value kernels over a chunk of keys, generated twice: for K/V rows converted to f32
 * in one contiguous buffer (KV_F32: src + i * hd), and for f16 rows read in place through a
 * pointer per key (KV_F16), which saves the conversion pass when few query rows share the
 * chunk (decoding). Both do the same float operations in the same order (f16 -> f32 is
 * exact), so which one runs does not change a result.
 */
#define KV_ROW_F32(src, i)  ((src) + (i)*hd)
#define KV_LOAD_F32(row, d) _mm256_loadu_ps((row) + (d))
#define KV_ROW_F16(src, i)  ((src)[i])
#define KV_LOAD_F16(row, d) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((row) + (d))))

#define KV_KERNELS(SUF, SRC_T, ROW, LOAD)                                                          \
    /* z[i] = dot(q, key a + i) * scale for 8 consecutive keys. hd % 8 == 0. */                    \
    static inline void scores8_##SUF(const float *q, SRC_T k, int64_t a, int64_t hd, float scale,  \
                                     float *z) {                                                   \
        __m256 acc[8];                                                                             \
        for (int i = 0; i < 8; i++) {                                                              \
            acc[i] = _mm256_setzero_ps();                                                          \
        }                                                                                          \
        for (int64_t d = 0; d < hd; d += 8) {                                                      \
            const __m256 qv = _mm256_loadu_ps(q + d);                                              \
            for (int i = 0; i < 8; i++) {                                                          \
                acc[i] = _mm256_fmadd_ps(qv, LOAD(ROW(k, a + i), d), acc[i]);                      \
            }                                                                                      \
        }                                                                                          \
        const __m256 h01 = _mm256_hadd_ps(acc[0], acc[1]), h23 = _mm256_hadd_ps(acc[2], acc[3]);   \
        const __m256 h45 = _mm256_hadd_ps(acc[4], acc[5]), h67 = _mm256_hadd_ps(acc[6], acc[7]);   \
        const __m256 h0 = _mm256_hadd_ps(h01, h23), h1 = _mm256_hadd_ps(h45, h67);                 \
        const __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20),                       \
                                       _mm256_permute2f128_ps(h0, h1, 0x31));                      \
        _mm256_storeu_ps(z, _mm256_mul_ps(s, _mm256_set1_ps(scale)));                              \
    }                                                                                              \
                                                                                                   \
    static inline float dot1_##SUF(const float *q, SRC_T k, int64_t i, int64_t hd) {               \
        __m256 acc = _mm256_setzero_ps();                                                          \
        for (int64_t d = 0; d < hd; d += 8) {                                                      \
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), LOAD(ROW(k, i), d), acc);                \
        }                                                                                          \
        return hsum8(acc);                                                                         \
    }                                                                                              \
                                                                                                   \
    /* acc[d] += sum_i p[i] * v(a + i)[d] for i < nk. */                                           \
    static void accumulate_##SUF(float *acc, const float *p, SRC_T v, int64_t a, int64_t nk,       \
                                 int64_t hd) {                                                     \
        int64_t d = 0;                                                                             \
        for (; d + 32 <= hd; d += 32) {                                                            \
            __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);               \
            __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);         \
            for (int64_t i = 0; i < nk; i++) {                                                     \
                const __m256 w = _mm256_broadcast_ss(p + i);                                       \
                a0 = _mm256_fmadd_ps(w, LOAD(ROW(v, a + i), d), a0);                               \
                a1 = _mm256_fmadd_ps(w, LOAD(ROW(v, a + i), d + 8), a1);                           \
                a2 = _mm256_fmadd_ps(w, LOAD(ROW(v, a + i), d + 16), a2);                          \
                a3 = _mm256_fmadd_ps(w, LOAD(ROW(v, a + i), d + 24), a3);                          \
            }                                                                                      \
            _mm256_storeu_ps(acc + d, a0);                                                         \
            _mm256_storeu_ps(acc + d + 8, a1);                                                     \
            _mm256_storeu_ps(acc + d + 16, a2);                                                    \
            _mm256_storeu_ps(acc + d + 24, a3);                                                    \
        }                                                                                          \
        for (; d < hd; d += 8) {                                                                   \
            __m256 a0 = _mm256_loadu_ps(acc + d);                                                  \
            for (int64_t i = 0; i < nk; i++) {                                                     \
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + i), LOAD(ROW(v, a + i), d), a0);      \
            }                                                                                      \
            _mm256_storeu_ps(acc + d, a0);                                                         \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* One query row against keys [a, b] of the chunk (indices relative to the chunk). */          \
    static void row_chunk_##SUF(float *acc, float *mx, float *sum, const float *q, SRC_T kc,       \
                                SRC_T vc, int64_t a, int64_t b, int64_t hd, float scale,           \
                                float *z) {                                                        \
        int64_t i = a;                                                                             \
        for (; i + 8 <= b + 1; i += 8) {                                                           \
            scores8_##SUF(q, kc, i, hd, scale, z + i);                                             \
        }                                                                                          \
        for (; i <= b; i++) {                                                                      \
            z[i] = dot1_##SUF(q, kc, i, hd) * scale;                                               \
        }                                                                                          \
        float cmax = z[a];                                                                         \
        for (i = a + 1; i <= b; i++) {                                                             \
            cmax = z[i] > cmax ? z[i] : cmax;                                                      \
        }                                                                                          \
        if (cmax > *mx) {                                                                          \
            float f = *mx == -INFINITY ? 0.0f : exp_neg1(*mx - cmax);                              \
            *sum *= f;                                                                             \
            scale_row(acc, hd, f);                                                                 \
            *mx = cmax;                                                                            \
        }                                                                                          \
        const __m256 m = _mm256_set1_ps(*mx);                                                      \
        __m256 s = _mm256_setzero_ps();                                                            \
        for (i = a; i + 8 <= b + 1; i += 8) {                                                      \
            const __m256 e = exp256_neg(_mm256_sub_ps(_mm256_loadu_ps(z + i), m));                 \
            _mm256_storeu_ps(z + i, e);                                                            \
            s = _mm256_add_ps(s, e);                                                               \
        }                                                                                          \
        float tail = 0.0f;                                                                         \
        for (; i <= b; i++) {                                                                      \
            z[i] = exp_neg1(z[i] - *mx);                                                           \
            tail += z[i];                                                                          \
        }                                                                                          \
        *sum += hsum8(s) + tail;                                                                   \
        accumulate_##SUF(acc, z + a, vc, a, b - a + 1, hd);                                        \
    }

KV_KERNELS(f32, const float *, KV_ROW_F32, KV_LOAD_F32)
KV_KERNELS(f16, const uint16_t *const *, KV_ROW_F16, KV_LOAD_F16)

/* Query rows per item up to which f16 K/V are read in place (a GQA group of decoding). */
#define ATT_DIRECT_ROWS 8

typedef struct att_item {
    int64_t t0, t1; /* tokens [t0, t1), all of sequence s */
    int64_t kh, g0, g1;
    int32_t s;
} att_item;

static void run_item(const cpu_op_ctx *c, ts_tensor *n, const att_item *it) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *tab = n->src[3];
    const ts_tensor *pos = n->src[5];
    const ts_quant_ops *kops = ts_quant_ops_get(k->type, c->isa);
    int64_t hd = q->ne[0], nh = q->ne[1], nkv = k->ne[1], bs = k->ne[2];
    int64_t group = nh / nkv, ng = it->g1 - it->g0, nt = it->t1 - it->t0, nr = nt * ng;
    float scale = n->fp[0];
    int window = n->ip[0];
    float *kc = c->local, *vc = kc + ATT_KC * hd, *qb = vc + ATT_KC * hd;
    /* Few query rows (decoding): read f16 K/V in place instead of converting each chunk. */
    const bool direct = k->type == TS_TYPE_F16 && v->type == TS_TYPE_F16 && nr <= ATT_DIRECT_ROWS;
    const uint16_t *kp[ATT_KC], *vp[ATT_KC];
    float *acc = qb + ATT_QT * group * hd, *z = acc + ATT_QT * group * hd;
    float *mx = z + ATT_KC, *sum = mx + ATT_QT * group;
    int64_t jlo[ATT_QT], jhi[ATT_QT];
    int32_t len = cpu_attn_geti(n->src[6], it->s, 0);
    int64_t J0 = INT64_MAX, J1 = -1;
    for (int64_t ti = 0; ti < nt; ti++) {
        int64_t t = it->t0 + ti, p = cpu_attn_geti(pos, t, 0);
        jhi[ti] = p < (int64_t)len - 1 ? p : (int64_t)len - 1;
        jlo[ti] = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        if (jlo[ti] <= jhi[ti]) {
            J0 = jlo[ti] < J0 ? jlo[ti] : J0;
            J1 = jhi[ti] > J1 ? jhi[ti] : J1;
        }
        for (int64_t g = 0; g < ng; g++) {
            int64_t r = ti * ng + g;
            const char *qr =
                (const char *)q->data + (it->kh * group + it->g0 + g) * q->nb[1] + t * q->nb[2];
            for (int64_t d = 0; d < hd; d++) {
                memcpy(&qb[r * hd + d], qr + d * q->nb[0], sizeof(float));
            }
            mx[r] = -INFINITY;
            sum[r] = 0.0f;
        }
    }
    memset(acc, 0, (size_t)(nr * hd) * sizeof *acc);
    for (int64_t j0 = J0; j0 <= J1; j0 += ATT_KC) {
        int64_t nk = J1 - j0 + 1 < ATT_KC ? J1 - j0 + 1 : ATT_KC;
        for (int64_t i = 0; i < nk; i++) {
            int64_t j = j0 + i;
            int32_t blk = cpu_attn_geti(tab, j / bs, it->s);
            size_t off =
                (size_t)it->kh * k->nb[1] + (size_t)(j % bs) * k->nb[2] + (size_t)blk * k->nb[3];
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
            for (int64_t g = 0; g < ng; g++) {
                int64_t r = ti * ng + g;
                if (direct) {
                    row_chunk_f16(acc + r * hd, &mx[r], &sum[r], qb + r * hd, kp, vp, a, b, hd,
                                  scale, z);
                } else {
                    row_chunk_f32(acc + r * hd, &mx[r], &sum[r], qb + r * hd, kc, vc, a, b, hd,
                                  scale, z);
                }
            }
        }
    }
    for (int64_t ti = 0; ti < nt; ti++) {
        for (int64_t g = 0; g < ng; g++) {
            int64_t r = ti * ng + g;
            float *out = (float *)((char *)n->data + (it->kh * group + it->g0 + g) * n->nb[1] +
                                   (it->t0 + ti) * n->nb[2]);
            float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
            for (int64_t d = 0; d < hd; d++) {
                out[d] = acc[r * hd + d] * inv;
            }
        }
    }
}

/* Tiles: maximal runs of consecutive tokens of one sequence, cut every ATT_QT tokens. The
 * tile starting at t ends at the returned index. */
static int64_t tile_end(const ts_tensor *seq, int64_t t, int64_t n_tok) {
    int32_t s = cpu_attn_geti(seq, t, 0);
    int64_t e = t + 1;
    while (e < n_tok && e - t < ATT_QT && cpu_attn_geti(seq, e, 0) == s) {
        e++;
    }
    return e;
}

void cpu_attention_tiled(const cpu_op_ctx *c, ts_tensor *n) {
    const ts_tensor *q = n->src[0], *k = n->src[1], *tab = n->src[3], *seq = n->src[4];
    const ts_tensor *lens = n->src[6];
    int64_t n_tok = q->ne[2], nkv = k->ne[1], group = q->ne[1] / nkv, bs = k->ne[2];
    int64_t cap = tab->ne[0] * bs;
    int64_t n_tiles = 0;
    for (int64_t t = 0; t < n_tok; t = tile_end(seq, t, n_tok)) {
        n_tiles++;
    }
    /* Few tiles (decode): one item per query head so that all threads get work. */
    int64_t gsplit = n_tiles * nkv < 4 * c->nth ? group : 1;
    int64_t item = 0;
    for (int64_t t = 0; t < n_tok;) {
        int64_t e = tile_end(seq, t, n_tok);
        for (int64_t kh = 0; kh < nkv; kh++) {
            for (int64_t gs = 0; gs < gsplit; gs++, item++) {
                if (item % c->nth != c->ith) {
                    continue;
                }
                att_item it = {.t0 = t, .t1 = e, .kh = kh};
                it.g0 = gs * group / gsplit;
                it.g1 = (gs + 1) * group / gsplit;
                int32_t len = 0;
                for (int64_t tt = t; tt < e; tt++) {
                    if (!cpu_attn_token_seq(c, seq, lens, tt, cap, &it.s, &len)) {
                        return;
                    }
                }
                if (!cpu_attn_check_blocks(c, n, it.s, len)) {
                    return;
                }
                run_item(c, n, &it);
            }
        }
        t = e;
    }
}
