/*
 * test_llamacpp_ref.c — external reference: our quantizers against llama.cpp's.
 *
 * tests/quant/data/llamacpp_reference.txt lists, per type, the SHA-256 of the tensor bytes
 * llama-quantize wrote for a fixed input matrix (see tests/quant/data/README.md for how).
 * This test regenerates the same matrix (qgen.h), quantizes it with our from_float at
 * every ISA level, hashes and compares. One wrong bit anywhere fails it.
 *
 * The same program produces the input and reads the output of that procedure:
 *   quant_test_llamacpp_ref --write-input in.gguf       write the F32 model-like GGUF
 *   quant_test_llamacpp_ref --hash-tensor f.gguf NAME   print type and SHA-256 of a tensor
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quant/qgen.h"
#include "quant/sha256.h"
#include "quant/quant.h"

#define REF_TENSOR "blk.0.ffn_down.weight"

/* ---- minimal GGUF v3 writing (one F32 tensor, a few scalar KVs) ---- */

static void put_u32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fwrite(b, 1, 4, f);
}

static void put_u64(FILE *f, uint64_t v) {
    put_u32(f, (uint32_t)v);
    put_u32(f, (uint32_t)(v >> 32));
}

static void put_str(FILE *f, const char *s) {
    put_u64(f, strlen(s));
    fwrite(s, 1, strlen(s), f);
}

static void kv_u32(FILE *f, const char *key, uint32_t v) {
    put_str(f, key);
    put_u32(f, 4); /* UINT32 */
    put_u32(f, v);
}

static int write_input(const char *path) {
    float *x = malloc(sizeof(float) * QGEN_REF_ROWS * QGEN_REF_COLS);
    FILE *f = fopen(path, "wb");
    if (x == NULL || f == NULL) {
        fprintf(stderr, "cannot write %s\n", path);
        free(x);
        if (f) {
            fclose(f);
        }
        return 1;
    }
    qgen_reference_matrix(x);
    fwrite("GGUF", 1, 4, f);
    put_u32(f, 3);
    put_u64(f, 1); /* tensors */
    put_u64(f, 8); /* kvs */
    put_str(f, "general.architecture");
    put_u32(f, 8); /* STRING */
    put_str(f, "llama");
    put_str(f, "general.name");
    put_u32(f, 8);
    put_str(f, "tessera-quant-reference");
    kv_u32(f, "llama.context_length", 128);
    kv_u32(f, "llama.embedding_length", QGEN_REF_ROWS);
    kv_u32(f, "llama.block_count", 1);
    kv_u32(f, "llama.feed_forward_length", QGEN_REF_COLS);
    kv_u32(f, "llama.attention.head_count", 1);
    put_str(f, "llama.attention.layer_norm_rms_epsilon");
    put_u32(f, 6); /* FLOAT32 */
    float eps = 1e-5f;
    fwrite(&eps, 4, 1, f);
    put_str(f, REF_TENSOR);
    put_u32(f, 2);
    put_u64(f, QGEN_REF_COLS);
    put_u64(f, QGEN_REF_ROWS);
    put_u32(f, 0); /* F32 */
    put_u64(f, 0);
    long pos = ftell(f);
    while (pos % 32 != 0) {
        fputc(0, f);
        pos++;
    }
    fwrite(x, sizeof(float), (size_t)QGEN_REF_ROWS * QGEN_REF_COLS, f);
    int bad = ferror(f);
    fclose(f);
    free(x);
    return bad ? 1 : 0;
}

/* ---- minimal GGUF reading: find one tensor's bytes ---- */

typedef struct rd {
    const uint8_t *p;
    size_t n, pos;
    int bad;
} rd;

static uint64_t rd_bytes(rd *r, size_t k) {
    uint64_t v = 0;
    if (r->pos + k > r->n) {
        r->bad = 1;
        return 0;
    }
    for (size_t i = 0; i < k; i++) {
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    }
    r->pos += k;
    return v;
}

static void rd_skip(rd *r, uint64_t k) {
    if (k > r->n - r->pos) {
        r->bad = 1;
        return;
    }
    r->pos += (size_t)k;
}

static void rd_skip_value(rd *r, uint32_t type) {
    static const int sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
        rd_skip(r, rd_bytes(r, 8));
    } else if (type == 9) {
        uint32_t et = (uint32_t)rd_bytes(r, 4);
        uint64_t count = rd_bytes(r, 8);
        for (uint64_t i = 0; i < count && !r->bad; i++) {
            rd_skip_value(r, et);
        }
    } else if (type < 13) {
        rd_skip(r, (uint64_t)sizes[type]);
    } else {
        r->bad = 1;
    }
}

static int hash_tensor(const char *path, const char *name) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n);
    if (buf == NULL || fread(buf, 1, n, f) != n) {
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    rd r = {buf, n, 0, 0};
    if (rd_bytes(&r, 4) != 0x46554747u || rd_bytes(&r, 4) != 3) {
        fprintf(stderr, "%s: not a GGUF v3 file\n", path);
        free(buf);
        return 1;
    }
    uint64_t n_tensors = rd_bytes(&r, 8), n_kv = rd_bytes(&r, 8);
    uint64_t align = 32;
    for (uint64_t i = 0; i < n_kv && !r.bad; i++) {
        uint64_t klen = rd_bytes(&r, 8);
        int is_align =
            klen == 17 && r.pos + 17 <= n && memcmp(buf + r.pos, "general.alignment", 17) == 0;
        rd_skip(&r, klen);
        uint32_t type = (uint32_t)rd_bytes(&r, 4);
        if (is_align && type == 4) {
            align = rd_bytes(&r, 4);
        } else {
            rd_skip_value(&r, type);
        }
    }
    int found = 0;
    uint32_t ttype = 0;
    uint64_t ne0 = 0, nrows = 1, off = 0;
    for (uint64_t i = 0; i < n_tensors && !r.bad; i++) {
        uint64_t nlen = rd_bytes(&r, 8);
        int match =
            nlen == strlen(name) && r.pos + nlen <= n && memcmp(buf + r.pos, name, nlen) == 0;
        rd_skip(&r, nlen);
        uint32_t nd = (uint32_t)rd_bytes(&r, 4);
        uint64_t e0 = 0, rows = 1;
        for (uint32_t d = 0; d < nd && d < 4; d++) {
            uint64_t e = rd_bytes(&r, 8);
            if (d == 0) {
                e0 = e;
            } else {
                rows *= e;
            }
        }
        uint32_t t = (uint32_t)rd_bytes(&r, 4);
        uint64_t o = rd_bytes(&r, 8);
        if (match) {
            found = 1;
            ttype = t;
            ne0 = e0;
            nrows = rows;
            off = o;
        }
    }
    size_t data = (r.pos + (size_t)align - 1) / (size_t)align * (size_t)align;
    size_t row_bytes = 0;
    if (r.bad || !found || !ts_type_row_bytes(ttype, ne0, &row_bytes) ||
        data + off + row_bytes * nrows > n) {
        fprintf(stderr, "%s: tensor %s not found or truncated\n", path, name);
        free(buf);
        return 1;
    }
    char hex[65];
    sha256_hex(buf + data + off, row_bytes * nrows, hex);
    printf("%s %s\n", ts_type_name(ttype), hex);
    free(buf);
    return 0;
}

/* ---- the test ---- */

static void test_matches_llamacpp(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/quant/data/llamacpp_reference.txt", TS_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    const size_t n = (size_t)QGEN_REF_ROWS * QGEN_REF_COLS;
    float *x = malloc(sizeof(float) * n);
    uint8_t *q = malloc(sizeof(float) * n);
    assert_non_null(x);
    assert_non_null(q);
    qgen_reference_matrix(x);

    char line[256];
    int checked = 0, failed = 0, types = 0;
    bool seen_iq4_xs = false;
    while (fgets(line, sizeof line, f) != NULL) {
        char tname[32], want[80];
        if (line[0] == '#' || sscanf(line, "%31s %79s", tname, want) != 2) {
            continue;
        }
        ts_type type;
        assert_true(ts_type_from_name(tname, &type));
        types++;
        seen_iq4_xs = seen_iq4_xs || type == TS_TYPE_IQ4_XS;
        size_t row_bytes = 0;
        assert_true(ts_type_row_bytes(type, QGEN_REF_COLS, &row_bytes));
        for (int isa = TS_ISA_SCALAR; isa <= (int)ts_quant_cpu_isa(); isa++) {
            const ts_quant_ops *ops = ts_quant_ops_get(type, (ts_isa)isa);
            assert_non_null(ops);
            for (int row = 0; row < QGEN_REF_ROWS; row++) {
                ops->from_float(x + (size_t)row * QGEN_REF_COLS, q + row * row_bytes,
                                QGEN_REF_COLS);
            }
            char got[65];
            sha256_hex(q, row_bytes * QGEN_REF_ROWS, got);
            if (strcmp(got, want) != 0) {
                fprintf(stderr, "%s at %s: sha256 %s, llama.cpp %s\n", tname,
                        ts_isa_name((ts_isa)isa), got, want);
                failed++;
            }
            checked++;
        }
    }
    fclose(f);
    free(x);
    free(q);
    printf("checked %d (type, isa) pairs against llama.cpp\n", checked);
    /* The 16 lines of the file: F32, F16, BF16, six 32-element types, IQ4_XS, five K-quants, MXFP4.
     */
    assert_true(types >= 16);
    assert_true(seen_iq4_xs);
    assert_int_equal(failed, 0);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-input") == 0) {
        return write_input(argv[2]);
    }
    if (argc == 4 && strcmp(argv[1], "--hash-tensor") == 0) {
        return hash_tensor(argv[2], argv[3]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_llamacpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
