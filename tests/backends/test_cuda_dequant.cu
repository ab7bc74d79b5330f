/*
 * test_cuda_dequant.cu — the CUDA kernels' dequantization (cu_dequant_group in
 * src/backends/cuda/cuda_common.cuh) against src/quant's scalar to_float, bit for bit, for
 * every block type the CUDA backend reads. The function is compiled for the host here, so this
 * runs on any machine of a TS_CUDA build, GPU or not: the block layouts and the order of
 * roundings are checked before a kernel ever runs. (On the device the same source is compiled
 * with __fmul_rn-style intrinsics that round exactly as the host's plain operations.)
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_block_type)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
