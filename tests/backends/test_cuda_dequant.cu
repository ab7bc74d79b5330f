/*
 * test_cuda_dequant.cu — the CUDA kernels' math compiled for the host, so that it is checked on
 * any machine of a TS_CUDA build, GPU or not, before a kernel ever runs:
 *
 *  - dequantization (cu_dequant_group in src/backends/cuda/cuda_common.cuh) against
 *    src/quant's scalar to_float, bit for bit, for every block type the CUDA backend reads
 *    (on the device the same source uses __fmul_rn-style intrinsics that round exactly as the
 *    host's plain operations);
 *  - ATTENTION's softmax schedule (cu_online_add, cu_merge_weight): keys in chunks of
 *    CU_ATTN_SPLIT, four warps per chunk taking keys in turn, warps merged, then chunks merged
 *    with the sink, as cuda_attn.cu does, against a direct softmax in double.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>

#include "quant/quant.h"
}

#include "backends/cuda/cuda_common.cuh"

typedef void (*group_fn)(const unsigned char *, int64_t, float *);

static group_fn group_for(int type) {
    switch (type) {
    case CU_Q4_0:
        return cu_dequant_group<CU_Q4_0>;
    case CU_Q4_1:
        return cu_dequant_group<CU_Q4_1>;
    case CU_Q5_0:
        return cu_dequant_group<CU_Q5_0>;
    case CU_Q5_1:
        return cu_dequant_group<CU_Q5_1>;
    case CU_Q8_0:
        return cu_dequant_group<CU_Q8_0>;
    case CU_IQ4_NL:
        return cu_dequant_group<CU_IQ4_NL>;
    case CU_MXFP4:
        return cu_dequant_group<CU_MXFP4>;
    case CU_Q2_K:
        return cu_dequant_group<CU_Q2_K>;
    case CU_Q3_K:
        return cu_dequant_group<CU_Q3_K>;
    case CU_Q4_K:
        return cu_dequant_group<CU_Q4_K>;
    case CU_Q5_K:
        return cu_dequant_group<CU_Q5_K>;
    case CU_Q6_K:
        return cu_dequant_group<CU_Q6_K>;
    default:
        return NULL;
    }
}

static void test_every_block_type(void **state) {
    (void)state;
    const int types[] = {CU_Q4_0,  CU_Q4_1, CU_Q5_0, CU_Q5_1, CU_Q8_0, CU_IQ4_NL,
                         CU_MXFP4, CU_Q2_K, CU_Q3_K, CU_Q4_K, CU_Q5_K, CU_Q6_K};
    const int64_t n = 1024;
    float *x = (float *)malloc(n * sizeof(float)), *want = (float *)malloc(n * sizeof(float));
    unsigned char *q = (unsigned char *)malloc(n * 4);
    uint64_t r = 88172645463325252ull;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ts_type t = (ts_type)types[ti];
        assert_int_equal(cu_block_elems(t), (int)ts_type_block_size(t));
        assert_int_equal(cu_block_bytes(t), (int)ts_type_block_bytes(t));
        const ts_quant_ops *ops = ts_quant_ops_get(t, TS_ISA_SCALAR);
        assert_non_null(ops);
        for (int trial = 0; trial < 4; trial++) {
            for (int64_t i = 0; i < n; i++) {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                /* Values over several scales, so that sub-block scales and mins differ. */
                x[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5) *
                       (float)(1 << (int)((i / 16) % 6)) * (trial + 1);
            }
            ops->from_float(x, q, n);
            ops->to_float(q, want, n);
            group_fn fn = group_for(t);
            for (int64_t g = 0; g < n / 32; g++) {
                float got[32];
                fn(q, g, got);
                if (memcmp(got, want + g * 32, sizeof got) != 0) {
                    for (int e = 0; e < 32; e++) {
                        if (memcmp(&got[e], &want[g * 32 + e], sizeof(float)) != 0) {
                            fail_msg("%s: element %lld: cuda %.9g, src/quant %.9g", ts_type_name(t),
                                     (long long)(g * 32 + e), got[e], want[g * 32 + e]);
                        }
                    }
                }
            }
        }
    }
    free(x);
    free(want);
    free(q);
}

/* One (token, head) of ATTENTION as cuda_attn.cu schedules it: logits z[0..len) of which keys
 * [lo, hi] are visible, values v[j * hd + d], an optional sink; out[hd]. */
static void attn_schedule(const float *z, const float *v, int hd, int64_t lo, int64_t hi,
                          const float *sink, float *out) {
    enum { WARPS = 4 };
    int64_t n_split = (hi + 1 + CU_ATTN_SPLIT - 1) / CU_ATTN_SPLIT;
    n_split = n_split > 0 ? n_split : 1;
    float *part = (float *)calloc((size_t)(n_split * (hd + 2)), sizeof(float));
    for (int64_t c = 0; c < n_split; c++) {
        int64_t c_lo = lo > c * CU_ATTN_SPLIT ? lo : c * CU_ATTN_SPLIT;
        int64_t c_hi = hi < (c + 1) * CU_ATTN_SPLIT - 1 ? hi : (c + 1) * CU_ATTN_SPLIT - 1;
        float wm[WARPS], wl[WARPS], wacc[WARPS][16];
        for (int w = 0; w < WARPS; w++) {
            wm[w] = -INFINITY;
            wl[w] = 0.0f;
            memset(wacc[w], 0, sizeof wacc[w]);
            for (int64_t j = c_lo + w; j <= c_hi; j += WARPS) {
                float corr, e;
                cu_online_add(&wm[w], &wl[w], z[j], &corr, &e);
                for (int d = 0; d < hd; d++) {
                    wacc[w][d] = wacc[w][d] * corr + e * v[j * hd + d];
                }
            }
        }
        float mx = -INFINITY, *pc = part + c * (hd + 2);
        for (int w = 0; w < WARPS; w++) {
            mx = fmaxf(mx, wm[w]);
        }
        pc[0] = mx;
        for (int w = 0; w < WARPS; w++) {
            pc[1] += wl[w] * cu_merge_weight(wm[w], mx);
            for (int d = 0; d < hd; d++) {
                pc[2 + d] += wacc[w][d] * cu_merge_weight(wm[w], mx);
            }
        }
    }
    float mx = sink != NULL ? *sink : -INFINITY, sum = 0.0f;
    for (int64_t c = 0; c < n_split; c++) {
        mx = fmaxf(mx, part[c * (hd + 2)]);
    }
    for (int64_t c = 0; c < n_split; c++) {
        sum += part[c * (hd + 2) + 1] * cu_merge_weight(part[c * (hd + 2)], mx);
    }
    if (sink != NULL && *sink != -INFINITY) {
        sum += expf(*sink - mx);
    }
    for (int d = 0; d < hd; d++) {
        float acc = 0.0f;
        for (int64_t c = 0; c < n_split; c++) {
            acc += part[c * (hd + 2) + 2 + d] * cu_merge_weight(part[c * (hd + 2)], mx);
        }
        out[d] = sum > 0.0f ? acc / sum : 0.0f;
    }
    free(part);
}

static void test_attention_schedule(void **state) {
    (void)state;
    enum { HD = 8, LEN = 1300 };
    float *z = (float *)malloc(LEN * sizeof(float)), *v = (float *)malloc(LEN * HD * sizeof(float));
    uint64_t r = 12345;
    for (int i = 0; i < LEN * HD; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
        if (i < LEN) {
            z[i] = 8.0f * v[i] + (i % 97 == 0 ? 6.0f : 0.0f);
        }
    }
    /* (lo, hi, sink): every key of three chunks; a window inside chunk 1; one key; none. */
    const struct {
        int64_t lo, hi;
        float sink;
        bool has_sink;
    } cases[] = {{0, LEN - 1, 0, false},  {0, LEN - 1, 3.0f, true}, {600, 900, 0, false},
                 {600, 900, 40.0f, true}, {511, 512, 0, false},     {7, 7, -2.0f, true},
                 {5, 4, 0, false},        {5, 4, 1.0f, true}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        float got[HD];
        attn_schedule(z, v, HD, cases[ci].lo, cases[ci].hi,
                      cases[ci].has_sink ? &cases[ci].sink : NULL, got);
        double mx = cases[ci].has_sink ? cases[ci].sink : -INFINITY, sum = 0.0, want[HD] = {0};
        for (int64_t j = cases[ci].lo; j <= cases[ci].hi; j++) {
            mx = z[j] > mx ? z[j] : mx;
        }
        for (int64_t j = cases[ci].lo; j <= cases[ci].hi; j++) {
            double e = exp((double)z[j] - mx);
            sum += e;
            for (int d = 0; d < HD; d++) {
                want[d] += e * v[j * HD + d];
            }
        }
        sum += cases[ci].has_sink ? exp(cases[ci].sink - mx) : 0.0;
        for (int d = 0; d < HD; d++) {
            double w = sum > 0 ? want[d] / sum : 0.0;
            if (!(fabs(got[d] - w) <= 1e-5 * (1.0 + fabs(w)))) {
                fail_msg("attention case %zu, dim %d: schedule %.9g, direct %.9g", ci, d, got[d],
                         w);
            }
        }
    }
    free(z);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_block_type),
                                       cmocka_unit_test(test_attention_schedule)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
