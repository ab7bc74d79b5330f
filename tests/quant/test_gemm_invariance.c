/*
 * test_gemm_invariance.c — batch invariance of the gemm kernels.
 *
 * For every type with kernels and every ISA level this CPU runs, gemm over nr weight rows x
 * nc activation rows (nr, nc in 1..9, strides wider than a dense row) must give, for each
 * (row, column), exactly the bits vec_dot gives for that pair. Then a result cannot depend
 * on how the backend batches tokens or cuts rows into tiles (chunked prefill equals one-shot
 * prefill bit for bit; a 1-ulp difference flips later 8-bit activation roundings).
 * A second case runs one long shape (k = 4352, 52 rows, 70 columns) so that kernels which
 * cut k into passes, the columns into chunks and the rows into groups (quant/avx2/q32.c: 64
 * blocks, 64 columns, 32 rows as pairs of eight-row groups, here also a lone and a partial
 * group) are checked across those cuts too, and so is the packed gemm (quant_pack.c) on the
 * case's first 48 rows where the level has one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/ggml_types.h"
#include "quant/quant.h"
#include "qgen.h"

enum { K = 512, MAX_N = 9, PAD_BLOCKS = 3, PAD_C = 3 };
enum { KL = 4352, NRL = 52, NCL = 70 }; /* the long case */

/* The levels this CPU runs, into out[TS_ISA_AVX512 + 1]. */
static int isa_levels(ts_isa *out) {
    int n = 0;
    for (int i = TS_ISA_SCALAR; i <= (int)ts_quant_cpu_isa(); i++) {
        if (ts_quant_isa_supported((ts_isa)i)) {
            out[n++] = (ts_isa)i;
        }
    }
    return n;
}

/* Quantized rows with a stride of PAD_BLOCKS blocks more than a dense row. */
static char *make_rows_k(const ts_quant_ops *ops, ts_type type, qgen_rng *rng, int rows, int k,
                         size_t *stride) {
    size_t rb = 0;
    assert_true(ts_type_row_bytes(type, (uint64_t)k, &rb));
    *stride = rb + PAD_BLOCKS * ts_type_block_bytes(type);
    char *buf = calloc((size_t)rows, *stride);
    float *x = malloc((size_t)k * sizeof *x);
    assert_non_null(buf);
    assert_non_null(x);
    for (int r = 0; r < rows; r++) {
        /* Mostly normal rows, with constant, zero and outlier rows among them. */
        const int kinds[] = {QGEN_NORMAL, QGEN_NORMAL, QGEN_CONST_NEG, QGEN_NORMAL, QGEN_OUTLIER,
                             QGEN_ZEROS,  QGEN_NORMAL, QGEN_GRID,      QGEN_HUGE};
        qgen_row(rng, kinds[r % 9], 1.0f, x, k);
        ops->from_float(x, buf + (size_t)r * *stride, k);
    }
    free(x);
    return buf;
}

/* gemm of NRL rows x NCL columns over KL against vec_dot, dense output; differing elements. */
static int check_long(ts_type type, ts_isa isa) {
    const ts_quant_ops *ops = ts_quant_ops_get(type, isa);
    if (ops == NULL || ops->gemm == NULL || ops->vec_dot == NULL) {
        return 0;
    }
    const ts_quant_ops *aops = ts_quant_ops_get(ops->vec_dot_type, isa);
    assert_non_null(aops);
    qgen_rng rng = {0x10E6ull * 31u + (uint64_t)type};
    size_t ldw = 0, lda = 0;
    char *w = make_rows_k(ops, type, &rng, NRL, KL, &ldw);
    char *a = make_rows_k(aops, ops->vec_dot_type, &rng, NCL, KL, &lda);
    float *c = malloc(sizeof(float) * NRL * NCL);
    assert_non_null(c);
    ops->gemm(KL, NRL, NCL, c, NRL * sizeof(float), w, ldw, a, lda);
    int bad = 0;
    for (int j = 0; j < NCL; j++) {
        for (int r = 0; r < NRL; r++) {
            float want;
            ops->vec_dot(KL, &want, w + (size_t)r * ldw, a + (size_t)j * lda);
            if (memcmp(&c[j * NRL + r], &want, sizeof want) != 0) {
                if (bad < 5) {
                    printf("%s %s: long gemm row %d col %d = %.9g, vec_dot = %.9g\n",
                           ts_type_name(type), ts_isa_name(isa), r, j, (double)c[j * NRL + r],
                           (double)want);
                }
                bad++;
            }
        }
    }
    /* The packed gemm (a whole number of sixteen-row groups, dense rows) gives the same bits:
     * its pieces, passes and column chunks must not change a (row, column) result either. */
    const int64_t nrp = NRL / TS_PACK_ROWS * TS_PACK_ROWS;
    size_t rb = 0;
    assert_true(ts_type_row_bytes(type, (uint64_t)KL, &rb));
    if (ops->gemm_packed != NULL && ts_quant_packable(type, KL, nrp)) {
        char *dense = malloc(rb * (size_t)nrp), *pk = malloc(rb * (size_t)nrp);
        assert_non_null(dense);
        assert_non_null(pk);
        for (int64_t r = 0; r < nrp; r++) {
            memcpy(dense + (size_t)r * rb, w + (size_t)r * ldw, rb);
        }
        assert_true(ts_quant_pack(type, pk, dense, KL, nrp));
        ops->gemm_packed(KL, nrp, NCL, c, NRL * sizeof(float), pk, rb, a, lda);
        for (int j = 0; j < NCL; j++) {
            for (int r = 0; r < nrp; r++) {
                float want;
                ops->vec_dot(KL, &want, w + (size_t)r * ldw, a + (size_t)j * lda);
                if (memcmp(&c[j * NRL + r], &want, sizeof want) != 0) {
                    if (bad < 5) {
                        printf("%s %s: long packed gemm row %d col %d = %.9g, vec_dot = %.9g\n",
                               ts_type_name(type), ts_isa_name(isa), r, j, (double)c[j * NRL + r],
                               (double)want);
                    }
                    bad++;
                }
            }
        }
        free(dense);
        free(pk);
    }
    free(c);
    free(w);
    free(a);
    return bad;
}

/* gemm of every nr x nc in 1..MAX_N over k elements against vec_dot; differing elements. */
static int check_type(ts_type type, ts_isa isa, int k) {
    const ts_quant_ops *ops = ts_quant_ops_get(type, isa);
    if (ops == NULL || ops->gemm == NULL || ops->vec_dot == NULL) {
        return 0;
    }
    const ts_quant_ops *aops = ts_quant_ops_get(ops->vec_dot_type, isa);
    assert_non_null(aops);
    qgen_rng rng = {0x5EEDull * 977u + (uint64_t)type};
    size_t ldw = 0, lda = 0;
    char *w = make_rows_k(ops, type, &rng, MAX_N, k, &ldw);
    char *a = make_rows_k(aops, ops->vec_dot_type, &rng, MAX_N, k, &lda);
    float ref[MAX_N][MAX_N]; /* [column j][row r] */
    for (int j = 0; j < MAX_N; j++) {
        for (int r = 0; r < MAX_N; r++) {
            ops->vec_dot(k, &ref[j][r], w + (size_t)r * ldw, a + (size_t)j * lda);
        }
    }
    int bad = 0;
    const size_t ldc = (MAX_N + PAD_C) * sizeof(float);
    float c[MAX_N * (MAX_N + PAD_C)];
    for (int nr = 1; nr <= MAX_N; nr++) {
        for (int nc = 1; nc <= MAX_N; nc++) {
            /* Start at row/column offsets too, so tiles land on other (row, col) pairs. */
            const int r0 = (nr + nc) % (MAX_N - nr + 1), j0 = (nr * nc) % (MAX_N - nc + 1);
            memset(c, 0xFF, sizeof(c));
            ops->gemm(k, nr, nc, c, ldc, w + (size_t)r0 * ldw, ldw, a + (size_t)j0 * lda, lda);
            for (int j = 0; j < nc; j++) {
                for (int r = 0; r < nr; r++) {
                    const float got = c[(size_t)j * (MAX_N + PAD_C) + (size_t)r];
                    const float want = ref[j0 + j][r0 + r];
                    if (memcmp(&got, &want, sizeof(float)) != 0) {
                        if (bad < 5) {
                            printf("%s %s: gemm(k=%d, nr=%d, nc=%d) row %d col %d = %.9g, "
                                   "vec_dot = %.9g (bits differ)\n",
                                   ts_type_name(type), ts_isa_name(isa), k, nr, nc, r0 + r, j0 + j,
                                   (double)got, (double)want);
                        }
                        bad++;
                    }
                }
            }
            /* Padding between columns stays untouched. */
            for (int j = 0; j < nc; j++) {
                for (int r = nr; r < MAX_N + PAD_C; r++) {
                    uint32_t bits;
                    memcpy(&bits, &c[(size_t)j * (MAX_N + PAD_C) + (size_t)r], sizeof(bits));
                    if (bits != 0xFFFFFFFFu) {
                        printf("%s %s: gemm(nr=%d, nc=%d) wrote past row %d in column %d\n",
                               ts_type_name(type), ts_isa_name(isa), nr, nc, nr - 1, j);
                        bad++;
                    }
                }
            }
        }
    }
    free(w);
    free(a);
    return bad;
}

static void test_gemm_equals_vec_dot(void **state) {
    (void)state;
    ts_isa levels[TS_ISA_AVX512 + 1];
    const int nl = isa_levels(levels);
    int bad = 0, checked = 0;
    for (int li = 0; li < nl; li++) {
        for (uint32_t t = 0; t < TS_TYPE_COUNT; t++) {
            if (!ts_type_valid(t) || ts_type_block_size(t) == 0 || K % ts_type_block_size(t)) {
                continue;
            }
            const ts_quant_ops *ops = ts_quant_ops_get((ts_type)t, levels[li]);
            if (ops == NULL) {
                continue;
            }
            int b = check_type((ts_type)t, levels[li], K) + check_long((ts_type)t, levels[li]);
            if (ts_type_block_size(t) == 1) {
                /* Element types take any length: a k past the last whole vector runs the
                 * kernels' scalar tails. */
                b += check_type((ts_type)t, levels[li], K + 13);
            }
            if (b != 0) {
                printf("%s %s: %d elements differ\n", ts_type_name(t), ts_isa_name(levels[li]), b);
            }
            bad += b;
            checked++;
        }
    }
    printf("checked %d (type, isa) pairs\n", checked);
    assert_true(checked >= 16);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_equals_vec_dot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
