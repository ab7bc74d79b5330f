/*
 * test_model_dequant.c — every tensor of the real models in ~/.cache/tessera/models
 * (SmolLM2-135M-Instruct.Q4_1.gguf, and gemma-3-270m-q4_k_m.gguf when present) dequantizes
 * to finite values at the best ISA level; every 17th row is also dequantized by the scalar
 * reference (bit-identical) and dotted with a quantized activation at both levels (within
 * the SIMD tolerance of test_kernels.c). Skips with a message when no model is there.
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

#include "gguf/gguf.h"
#include "quant/quant.h"

static int check_model(const char *name) {
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/tessera/models/%s", home ? home : "", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        printf("skip: %s not found\n", path);
        return 0;
    }
    fclose(f);
    ts_error err = {0};
    ts_gguf *g = NULL;
    if (ts_gguf_open(path, &g, &err) != TS_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        fail();
    }
    const ts_isa isa = ts_quant_detect_isa();
    uint64_t n_tensors = ts_gguf_tensor_count(g), values = 0;
    for (uint64_t t = 0; t < n_tensors; t++) {
        const ts_gguf_tensor *ti = ts_gguf_tensor_at(g, t);
        const ts_quant_ops *ops = ts_quant_ops_get(ti->type, isa);
        const ts_quant_ops *ref = ts_quant_ops_get(ti->type, TS_ISA_SCALAR);
        if (ops == NULL) {
            fprintf(stderr, "%s: tensor '%s' has type %s, which quant does not support\n", name,
                    ti->name, ts_type_name(ti->type));
            fail();
        }
        const int64_t ne0 = ti->ne[0];
        const int64_t rows = (int64_t)(ti->n_elements / (uint64_t)ne0);
        size_t rb = 0;
        assert_true(ts_type_row_bytes(ti->type, (uint64_t)ne0, &rb));
        float *a = malloc(sizeof(float) * (size_t)ne0), *b = malloc(sizeof(float) * (size_t)ne0);
        size_t ab = 0;
        assert_true(ts_type_row_bytes(ops->vec_dot_type, (uint64_t)ne0, &ab));
        uint8_t *act = malloc(ab);
        const ts_quant_ops *aops = ts_quant_ops_get(ops->vec_dot_type, isa);
        for (int64_t k = 0; k < ne0; k++) {
            a[k] = (float)sin(0.37 * (double)k);
        }
        aops->from_float(a, act, ne0);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)ti->data + (size_t)r * rb;
            ops->to_float(row, a, ne0);
            for (int64_t k = 0; k < ne0; k++) {
                if (!isfinite(a[k])) {
                    fprintf(stderr, "%s: tensor '%s' row %lld col %lld: %g\n", name, ti->name,
                            (long long)r, (long long)k, a[k]);
                    fail();
                }
            }
            if (r % 17 == 0) {
                ref->to_float(row, b, ne0);
                assert_memory_equal(a, b, sizeof(float) * (size_t)ne0);
                float d1, d2;
                ops->vec_dot(ne0, &d1, row, act);
                ref->vec_dot(ne0, &d2, row, act);
                double s = 0.0;
                for (int64_t k = 0; k < ne0; k++) {
                    s += fabs((double)a[k]);
                }
                /* activations are |sin| <= 1, so sum |w| bounds sum |w * a| */
                assert_true(fabs((double)d1 - d2) <= 2e-6 * s + 1e-30);
            }
        }
        values += ti->n_elements;
        free(a);
        free(b);
        free(act);
    }
    printf("%s: %llu tensors, %llu values finite at %s\n", name, (unsigned long long)n_tensors,
           (unsigned long long)values, ts_isa_name(isa));
    ts_gguf_close(g);
    return 1;
}

static void test_smollm2_q4_1(void **state) {
    (void)state;
    check_model("SmolLM2-135M-Instruct.Q4_1.gguf");
}

static void test_gemma3_q4_k_m(void **state) {
    (void)state;
    check_model("gemma-3-270m-q4_k_m.gguf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm2_q4_1),
        cmocka_unit_test(test_gemma3_q4_k_m),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
