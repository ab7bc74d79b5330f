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

const char *ts_kv_dtype_name(ts_kv_dtype dtype) {
    switch (dtype) {
    case TS_KV_F32:
        return "f32";
    case TS_KV_F16:
        return "f16";
    case TS_KV_Q8_0:
        return "q8_0";
    }
    return NULL;
}

ts_status ts_kv_dtype_from_name(const char *name, ts_kv_dtype *out, ts_error *err) {
    if (name == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: dtype name: NULL argument");
    }
    static const ts_kv_dtype all[] = {TS_KV_F32, TS_KV_F16, TS_KV_Q8_0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcasecmp(name, ts_kv_dtype_name(all[i])) == 0) {
            *out = all[i];
            return TS_OK;
        }
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "kv: cache type '%s' is not supported (use f16, f32 or q8_0)", name);
}

/* a * b into *out; false on overflow. */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) {
        return false;
    }
    *out = a * b;
    return true;
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
    /* Elements of K plus V for one token in one layer (< 2^65: checked). */
    uint64_t elems;
    if (!mul_u64(2ull * shape->n_kv_head, shape->head_dim, &elems)) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "kv: bytes per token overflow 64 bits");
    }
    uint64_t per_layer;
    bool fits;
    switch (shape->dtype) {
    case TS_KV_F32:
        fits = mul_u64(elems, 4, &per_layer);
        break;
    case TS_KV_F16:
        fits = mul_u64(elems, 2, &per_layer);
        break;
    case TS_KV_Q8_0:
        /* Each head row is quantized on its own in blocks of 32: one f16 scale + 32 int8. */
        if (shape->head_dim % 32 != 0) {
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "kv: q8_0 cache needs head_dim to be a multiple of 32, "
                                "got %" PRIu32 " (use f16 or f32)",
                                shape->head_dim);
        }
        fits = mul_u64(elems / 32, 34, &per_layer);
        break;
    default:
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "kv: cache dtype id %d is not supported",
                            (int)shape->dtype);
    }
    if (!fits || !mul_u64(per_layer, shape->n_layer, out)) {
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
