/*
 * kv_size.c — how big a KV cache is: bytes per token, and blocks from a memory budget or a
 * context length. Pure arithmetic on sizes; every product is checked for overflow.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>

#include "kv/kv.h"
#include "util/error.h"

/* A pool addresses token slots as int32 (block_id * block_size + offset). */
#define KV_MAX_SLOTS ((uint64_t)INT32_MAX + 1)

/* Each dtype: its name and the bytes of a block of `elems` elements. */
static const struct {
    ts_kv_dtype dtype;
    const char *name;
    uint32_t elems, bytes;
} k_dtypes[] = {
    {TS_KV_F16, "f16", 1, 2},     {TS_KV_F32, "f32", 1, 4},     {TS_KV_BF16, "bf16", 1, 2},
    {TS_KV_Q8_0, "q8_0", 32, 34}, {TS_KV_Q5_0, "q5_0", 32, 22}, {TS_KV_Q4_0, "q4_0", 32, 18},
};
#define N_DTYPES (sizeof k_dtypes / sizeof k_dtypes[0])

const char *ts_kv_dtype_name(ts_kv_dtype dtype) {
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (k_dtypes[i].dtype == dtype) {
            return k_dtypes[i].name;
        }
    }
    return NULL;
}

ts_status ts_kv_dtype_from_name(const char *name, ts_kv_dtype *out, ts_error *err) {
    if (name == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: dtype name: NULL argument");
    }
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcasecmp(name, k_dtypes[i].name) == 0) {
            *out = k_dtypes[i].dtype;
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "kv: cache type '%s' is not supported (use f16, bf16, f32, q8_0, q5_0 or "
                        "q4_0)",
                        name);
}

/* a * b into *out; false on overflow. */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) {
        return false;
    }
    *out = a * b;
    return true;
}

/* Bytes of one [head_dim] row of dtype (head_dim < 2^32: no overflow). */
static ts_status row_bytes(ts_kv_dtype dtype, uint32_t head_dim, const char *which, uint64_t *out,
                           ts_error *err) {
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (k_dtypes[i].dtype != dtype) {
            continue;
        }
        if (head_dim % k_dtypes[i].elems != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "kv: %s cache type %s needs head_dim to be a multiple of %" PRIu32
                                ", got %" PRIu32 " (use f16, bf16 or f32)",
                                which, k_dtypes[i].name, k_dtypes[i].elems, head_dim);
        }
        *out = (uint64_t)head_dim / k_dtypes[i].elems * k_dtypes[i].bytes;
        return TS_OK;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED, "kv: %s cache dtype id %d is not supported", which,
                        (int)dtype);
}

ts_status ts_kv_bytes_per_token(const ts_kv_shape *shape, uint64_t *out, ts_error *err) {
    if (shape == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: bytes per token: NULL argument");
    }
    if (shape->n_layer == 0 || shape->n_kv_head == 0 || shape->head_dim == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: shape n_layer=%" PRIu32 " n_kv_head=%" PRIu32 " head_dim=%" PRIu32
                            ": every dimension must be > 0",
                            shape->n_layer, shape->n_kv_head, shape->head_dim);
    }
    uint64_t k_row = 0, v_row = 0, per_layer = 0;
    ts_status st = row_bytes(shape->dtype_k, shape->head_dim, "K", &k_row, err);
    if (st == TS_OK) {
        st = row_bytes(shape->dtype_v, shape->head_dim, "V", &v_row, err);
    }
    if (st != TS_OK) {
        return st;
    }
    /* Each row is < 2^35 bytes, so their sum cannot overflow. */
    if (!mul_u64(k_row + v_row, shape->n_kv_head, &per_layer) ||
        !mul_u64(per_layer, shape->n_layer, out)) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "kv: bytes per token overflow 64 bits");
    }
    return TS_OK;
}

ts_status ts_kv_blocks_for_memory(uint64_t budget_bytes, uint64_t bytes_per_token,
                                  uint32_t block_size, uint32_t *n_blocks, ts_error *err) {
    if (n_blocks == NULL || bytes_per_token == 0 || block_size == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: blocks for memory: need n_blocks, bytes_per_token > 0 "
                            "and block_size > 0");
    }
    uint64_t block_bytes;
    if (!mul_u64(bytes_per_token, block_size, &block_bytes)) {
        return ts_error_set(err, TS_ERR_OVERFLOW,
                            "kv: block of %" PRIu32 " tokens x %" PRIu64 " bytes overflows 64 bits",
                            block_size, bytes_per_token);
    }
    uint64_t n = budget_bytes / block_bytes;
    if (n == 0) {
        return ts_error_set(err, TS_ERR_LIMIT,
                            "kv: memory budget of %" PRIu64 " bytes holds no block of %" PRIu32
                            " tokens (%" PRIu64 " bytes each)",
                            budget_bytes, block_size, block_bytes);
    }
    if (n * block_size > KV_MAX_SLOTS) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: memory budget of %" PRIu64 " bytes gives %" PRIu64
                            " blocks of %" PRIu32 " tokens, more than the 2^31 token slots "
                            "a pool addresses",
                            budget_bytes, n, block_size);
    }
    *n_blocks = (uint32_t)n;
    return TS_OK;
}

ts_status ts_kv_blocks_for_context(uint64_t n_ctx, uint32_t block_size, uint32_t *n_blocks,
                                   ts_error *err) {
    if (n_blocks == NULL || n_ctx == 0 || block_size == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: blocks for context: need n_blocks, n_ctx > 0 and "
                            "block_size > 0 (got n_ctx=%" PRIu64 ", block_size=%" PRIu32 ")",
                            n_ctx, block_size);
    }
    uint64_t n = n_ctx / block_size + (n_ctx % block_size != 0);
    if (n_ctx > KV_MAX_SLOTS || n * block_size > KV_MAX_SLOTS) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "kv: context of %" PRIu64 " tokens needs more than the 2^31 token "
                            "slots a pool addresses",
                            n_ctx);
    }
    *n_blocks = (uint32_t)n;
    return TS_OK;
}

ts_status ts_kv_blocks_for_window(uint64_t window, uint32_t block_size, uint32_t max_seqs,
                                  uint32_t max_step_tokens, uint32_t n_blocks_full,
                                  uint32_t *n_blocks, ts_error *err) {
    if (n_blocks == NULL || window == 0 || block_size == 0 || max_seqs == 0 || n_blocks_full == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: blocks for window: need n_blocks, window, block_size, "
                            "max_seqs and n_blocks_full > 0 (got window=%" PRIu64
                            ", block_size=%" PRIu32 ", max_seqs=%" PRIu32 ", n_blocks_full=%" PRIu32
                            ")",
                            window, block_size, max_seqs, n_blocks_full);
    }
    /* Each sequence holds the blocks of its last window - 1 positions (at most
     * ceil(window / block_size) + 1 of them, the partial last block included) and those of its
     * tokens in the step (one more where they cross into a new block); the step's tokens add
     * ceil(max_step_tokens / block_size) over all sequences. */
    uint64_t per_seq = window / block_size + (window % block_size != 0) + 2;
    uint64_t step = max_step_tokens / block_size + (max_step_tokens % block_size != 0);
    if (per_seq >= n_blocks_full) {
        *n_blocks = n_blocks_full;
        return TS_OK;
    }
    /* per_seq and max_seqs are below 2^32, step below 2^32: no overflow in 64 bits. */
    uint64_t n = per_seq * max_seqs + step;
    *n_blocks = n < n_blocks_full ? (uint32_t)n : n_blocks_full;
    return TS_OK;
}
