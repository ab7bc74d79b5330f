/* ggml_types.c — block layout table for GGUF tensor types. */
#include "gguf/ggml_types.h"

#include <stdint.h>
#include <strings.h>

typedef struct type_layout {
    const char *name; /* NULL for ids that are not (or no longer) types */
    uint32_t block_size;
    uint32_t block_bytes;
} type_layout;

/* Sizes follow the block structs of the GGUF format: for example Q4_0 is one f16 scale plus
 * 32 4-bit values (2 + 16 bytes), Q4_K is a 256-element super-block with two f16 scales,
 * 12 bytes of packed 6-bit sub-scales and 128 bytes of nibbles (144 bytes). */
static const type_layout k_layouts[TS_TYPE_COUNT] = {
    [TS_TYPE_F32] = {"F32", 1, 4},
    [TS_TYPE_F16] = {"F16", 1, 2},
    [TS_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [TS_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [TS_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [TS_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [TS_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [TS_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [TS_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [TS_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [TS_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [TS_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [TS_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [TS_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [TS_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [TS_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [TS_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [TS_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [TS_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [TS_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [TS_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [TS_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [TS_TYPE_I8] = {"I8", 1, 1},
    [TS_TYPE_I16] = {"I16", 1, 2},
    [TS_TYPE_I32] = {"I32", 1, 4},
    [TS_TYPE_I64] = {"I64", 1, 8},
    [TS_TYPE_F64] = {"F64", 1, 8},
    [TS_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [TS_TYPE_BF16] = {"BF16", 1, 2},
    [TS_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [TS_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [TS_TYPE_MXFP4] = {"MXFP4", 32, 17},
};

bool ts_type_valid(uint32_t id) {
    return id < TS_TYPE_COUNT && k_layouts[id].name != NULL;
}

const char *ts_type_name(uint32_t id) {
    return ts_type_valid(id) ? k_layouts[id].name : NULL;
}

bool ts_type_from_name(const char *name, ts_type *out) {
    if (name == NULL) {
        return false;
    }
    for (uint32_t id = 0; id < TS_TYPE_COUNT; id++) {
        if (k_layouts[id].name != NULL && strcasecmp(k_layouts[id].name, name) == 0) {
            *out = (ts_type)id;
            return true;
        }
    }
    return false;
}

size_t ts_type_block_size(uint32_t id) {
    return ts_type_valid(id) ? k_layouts[id].block_size : 0;
}

size_t ts_type_block_bytes(uint32_t id) {
    return ts_type_valid(id) ? k_layouts[id].block_bytes : 0;
}

bool ts_type_row_bytes(uint32_t id, uint64_t n, size_t *out) {
    if (!ts_type_valid(id)) {
        return false;
    }
    uint64_t bs = k_layouts[id].block_size;
    if (n % bs != 0) {
        return false;
    }
    uint64_t blocks = n / bs;
    uint64_t bytes = k_layouts[id].block_bytes;
    if (blocks != 0 && bytes > SIZE_MAX / blocks) {
        return false;
    }
    *out = (size_t)(blocks * bytes);
    return true;
}
