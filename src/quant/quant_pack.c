/*
 * quant_pack.c — the interleaved ("packed") weight layout the rows-in-lanes kernels read.
 *
 * The rows-in-lanes kernels (avx512/q32.c, avx512/k.c, avx2/q32.c, avx2/k8.c, avx2/iq4xs.c) want,
 * for each 32-bit word of a block, sixteen rows' copies of that word side by side: one register
 * load then holds row r's word in lane r. From the file's layout (row after row) they build that
 * with a transpose per block and gathers for the scales, which dominates decoding, where each
 * weight block is used once. A packed matrix holds the same bytes already in that order, so the
 * kernels load instead.
 *
 * Layout. Rows are taken in groups of TS_PACK_ROWS (16). A group is its blocks in order, and
 * a packed block of the group is the sixteen rows' blocks i, field after field, each field
 * word-interleaved: a field of `size` bytes read as words of `ws` bytes (4, 2 for a lone f16
 * scale, 1 for a lone byte) becomes size / ws runs of sixteen words, run w holding word w of
 * rows 0..15. A field's runs take sixteen times its bytes, so a field starting at byte s of the
 * block starts at byte 16 s of the packed block, and
 *
 *     byte b of row r's block i  ->  16 * bs * i + 16 * (b - b % ws) + ws * r + b % ws
 *
 * within the group (bs: block bytes; b % ws taken relative to the field's start, which is
 * word-aligned for every field here but MXFP4's quants, at byte 1 after its exponent). A group
 * occupies exactly its sixteen rows' bytes, so row r0 (a multiple of 16) of a packed matrix is
 * where it is in the original: r0 * row bytes. The fields per type are the ones the kernels read as
 * words: Q4_0's f16 scale (2) and quants (4); Q4_1's scale and minimum together (4) and quants;
 * Q5_0's scale, fifth bits and quants; Q8_0's and IQ4_NL's scale and quants; Q4_K and Q5_K whole
 * (4: d and dmin together, scales, (Q5_K: high bits,) quants); Q6_K's quants, high bits and scales
 * (4) and its scale (2); IQ4_XS whole (4: d and the high scale bits together, the low scale
 * nibbles, the quants); MXFP4's exponent (1) and quants (4).
 *
 * The layout does not depend on the instruction set: eight-lane (AVX2) kernels read the first
 * or second half of each run. Only matrices whose row count is a multiple of 16 are packed.
 */
#include <string.h>

#include "quant/quant_internal.h"

typedef struct pack_field {
    uint16_t size; /* bytes; fields are contiguous and in block order from byte 0 */
    uint8_t ws;    /* word size: 1, 2 or 4 */
} pack_field;

typedef struct pack_type {
    uint16_t bs; /* block bytes */
    uint16_t qk; /* elements per block */
    uint8_t n;   /* fields */
    pack_field field[4];
} pack_type;

static const pack_type *pack_of(ts_type t) {
    static const pack_type q4_0 = {sizeof(ts_block_q4_0), TS_QK, 2, {{2, 2}, {16, 4}}};
    static const pack_type q4_1 = {sizeof(ts_block_q4_1), TS_QK, 2, {{4, 4}, {16, 4}}};
    static const pack_type q5_0 = {sizeof(ts_block_q5_0), TS_QK, 3, {{2, 2}, {4, 4}, {16, 4}}};
    static const pack_type q8_0 = {sizeof(ts_block_q8_0), TS_QK, 2, {{2, 2}, {32, 4}}};
    static const pack_type q4_k = {sizeof(ts_block_q4_k), TS_QK_K, 1, {{144, 4}}};
    static const pack_type q5_k = {sizeof(ts_block_q5_k), TS_QK_K, 1, {{176, 4}}};
    static const pack_type q6_k = {sizeof(ts_block_q6_k), TS_QK_K, 2, {{208, 4}, {2, 2}}};
    static const pack_type iq4_xs = {sizeof(ts_block_iq4_xs), TS_QK_K, 1, {{136, 4}}};
    static const pack_type mxfp4 = {sizeof(ts_block_mxfp4), TS_QK, 2, {{1, 1}, {16, 4}}};
    switch (t) {
    case TS_TYPE_Q4_0:
    case TS_TYPE_IQ4_NL:
        return &q4_0;
    case TS_TYPE_Q4_1:
        return &q4_1;
    case TS_TYPE_Q5_0:
        return &q5_0;
    case TS_TYPE_Q8_0:
        return &q8_0;
    case TS_TYPE_Q4_K:
        return &q4_k;
    case TS_TYPE_Q5_K:
        return &q5_k;
    case TS_TYPE_Q6_K:
        return &q6_k;
    case TS_TYPE_IQ4_XS:
        return &iq4_xs;
    case TS_TYPE_MXFP4:
        return &mxfp4;
    default:
        return NULL;
    }
}

bool ts_quant_packable(ts_type type, int64_t k, int64_t nr) {
    const pack_type *p = pack_of(type);
    return p != NULL && k > 0 && k % p->qk == 0 && nr > 0 && nr % TS_PACK_ROWS == 0;
}

/* Copies one field's words of sixteen rows between the layouts (ws bytes a word, a constant
 * after inlining, so each copy is one move): run w of the packed field <-> word w of each row. */
static inline __attribute__((always_inline)) void
move_field(char *run, char *row0, size_t ldw, size_t size, size_t ws, bool to_packed) {
    for (size_t w = 0; w < size; w += ws) {
        char *dst_run = run + TS_PACK_ROWS * w;
        for (int r = 0; r < TS_PACK_ROWS; r++) {
            char *rw = row0 + (size_t)r * ldw + w;
            if (to_packed) {
                memcpy(dst_run + ws * (size_t)r, rw, ws);
            } else {
                memcpy(rw, dst_run + ws * (size_t)r, ws);
            }
        }
    }
}

/* Moves one group's blocks between the two layouts: to_packed copies row-major rows (row r
 * at rows + r * ldw) into the group at grp, else back. */
static void move_group(const pack_type *p, int64_t nb, char *grp, char *rows, size_t ldw,
                       bool to_packed) {
    for (int64_t i = 0; i < nb; i++) {
        char *pb = grp + (size_t)i * TS_PACK_ROWS * p->bs;
        char *rb = rows + (size_t)i * p->bs;
        size_t at = 0;
        for (int f = 0; f < p->n; f++) {
            if (p->field[f].ws == 4) {
                move_field(pb + TS_PACK_ROWS * at, rb + at, ldw, p->field[f].size, 4, to_packed);
            } else if (p->field[f].ws == 2) {
                move_field(pb + TS_PACK_ROWS * at, rb + at, ldw, p->field[f].size, 2, to_packed);
            } else {
                move_field(pb + TS_PACK_ROWS * at, rb + at, ldw, p->field[f].size, 1, to_packed);
            }
            at += p->field[f].size;
        }
    }
}

static bool convert(ts_type type, void *packed, void *rows, int64_t k, int64_t nr, bool to_packed) {
    if (!ts_quant_packable(type, k, nr)) {
        return false;
    }
    const pack_type *p = pack_of(type);
    const int64_t nb = k / p->qk;
    const size_t ldw = (size_t)nb * p->bs;
    for (int64_t r0 = 0; r0 < nr; r0 += TS_PACK_ROWS) {
        move_group(p, nb, (char *)packed + (size_t)r0 * ldw, (char *)rows + (size_t)r0 * ldw, ldw,
                   to_packed);
    }
    return true;
}

bool ts_quant_pack(ts_type type, void *dst, const void *src, int64_t k, int64_t nr) {
    return convert(type, dst, (void *)src, k, nr, true);
}

bool ts_quant_unpack(ts_type type, void *dst, const void *src, int64_t k, int64_t nr) {
    return convert(type, (void *)src, dst, k, nr, false);
}
