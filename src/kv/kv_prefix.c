/*
 * kv_prefix.c — the prefix cache's hash chain and its table.
 *
 * Chain: root = SHA-256("tessera-kv-prefix-v1" || salt_len as u64 LE || salt);
 *        hash(block i) = SHA-256(hash(block i-1) or root || block_size token ids, int32 LE).
 * Writing the salt's length keeps (salt, tokens) pairs unambiguous, and the fixed-width
 * encoding of token ids keeps one block's bytes from reading as another's. SHA-256 is used
 * because prompts come from untrusted clients: with a predictable hash one client could craft
 * a prompt whose blocks collide with another client's and read its cached K/V.
 *
 * Table (one per pool): open addressing with linear probing over block ids, capacity a power
 * of two at least twice the pool's n_blocks (load <= 1/2), keyed by the first 8 bytes of the hash
 * (uniform already) and compared on all 32. Deletion shifts later entries back instead of leaving
 * tombstones, so probe lengths stay short however long the cache runs.
 */
#include <string.h>

#include <openssl/evp.h>

#include "kv/kv_internal.h"
#include "util/error.h"

static const char k_root_tag[] = "tessera-kv-prefix-v1";

ts_status kv_md_open(ts_kv *kv, ts_error *err) {
    kv->md = EVP_MD_fetch(NULL, "SHA256", NULL);
    kv->md_ctx = EVP_MD_CTX_new();
    if (kv->md == NULL || kv->md_ctx == NULL) {
        kv_md_close(kv);
        return ts_error_set(err, TS_ERR_INTERNAL,
                            "kv: OpenSSL could not provide SHA-256 for the prefix cache");
    }
    return TS_OK;
}

void kv_md_close(ts_kv *kv) {
    EVP_MD_CTX_free(kv->md_ctx);
    EVP_MD_free(kv->md);
    kv->md_ctx = NULL;
    kv->md = NULL;
}

static ts_status digest_fail(ts_error *err, const char *what) {
    return ts_error_set(err, TS_ERR_INTERNAL, "kv: SHA-256 of %s failed in OpenSSL", what);
}

ts_status kv_hash_root(const ts_kv *kv, const void *salt, size_t salt_len,
                       uint8_t out[KV_HASH_BYTES], ts_error *err) {
    uint8_t len_le[8];
    uint64_t n = salt_len;
    for (int i = 0; i < 8; i++) {
        len_le[i] = (uint8_t)(n >> (8 * i));
    }
    unsigned int out_len = 0;
    if (!EVP_DigestInit_ex(kv->md_ctx, kv->md, NULL) ||
        !EVP_DigestUpdate(kv->md_ctx, k_root_tag, sizeof k_root_tag - 1) ||
        !EVP_DigestUpdate(kv->md_ctx, len_le, sizeof len_le) ||
        (salt_len != 0 && !EVP_DigestUpdate(kv->md_ctx, salt, salt_len)) ||
        !EVP_DigestFinal_ex(kv->md_ctx, out, &out_len) || out_len != KV_HASH_BYTES) {
        return digest_fail(err, "a sequence salt");
    }
    return TS_OK;
}

ts_status kv_hash_block(const ts_kv *kv, const uint8_t parent[KV_HASH_BYTES], const int32_t *tokens,
                        uint8_t out[KV_HASH_BYTES], ts_error *err) {
    if (!EVP_DigestInit_ex(kv->md_ctx, kv->md, NULL) ||
        !EVP_DigestUpdate(kv->md_ctx, parent, KV_HASH_BYTES)) {
        return digest_fail(err, "a block");
    }
    /* Token ids as little-endian int32, encoded through a small buffer. */
    uint8_t buf[256];
    uint32_t i = 0;
    while (i < kv->block_size) {
        size_t used = 0;
        for (; i < kv->block_size && used + 4 <= sizeof buf; i++) {
            uint32_t t = (uint32_t)tokens[i];
            buf[used++] = (uint8_t)t;
            buf[used++] = (uint8_t)(t >> 8);
            buf[used++] = (uint8_t)(t >> 16);
            buf[used++] = (uint8_t)(t >> 24);
        }
        if (!EVP_DigestUpdate(kv->md_ctx, buf, used)) {
            return digest_fail(err, "a block");
        }
    }
    unsigned int out_len = 0;
    if (!EVP_DigestFinal_ex(kv->md_ctx, out, &out_len) || out_len != KV_HASH_BYTES) {
        return digest_fail(err, "a block");
    }
    return TS_OK;
}

static uint32_t home(const kv_pool *p, const uint8_t hash[KV_HASH_BYTES]) {
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) {
        h |= (uint64_t)hash[i] << (8 * i);
    }
    return (uint32_t)(h & p->htab_mask);
}

int32_t kv_htab_find(const kv_pool *p, const uint8_t hash[KV_HASH_BYTES]) {
    if (p->htab == NULL) {
        return KV_NONE;
    }
    for (uint32_t i = home(p, hash);; i = (i + 1) & p->htab_mask) {
        int32_t b = p->htab[i];
        if (b == KV_NONE) {
            return KV_NONE;
        }
        if (memcmp(p->blocks[b].hash, hash, KV_HASH_BYTES) == 0) {
            return b;
        }
    }
}

void kv_htab_insert(kv_pool *p, int32_t b) {
    uint32_t i = home(p, p->blocks[b].hash);
    while (p->htab[i] != KV_NONE) {
        i = (i + 1) & p->htab_mask;
    }
    p->htab[i] = b;
}

void kv_htab_remove(kv_pool *p, int32_t b) {
    uint32_t i = home(p, p->blocks[b].hash);
    while (p->htab[i] != b) {
        i = (i + 1) & p->htab_mask;
    }
    /* Backward-shift deletion: move each later entry of the probe run into the hole when
     * its home position lies cyclically at or before the hole. */
    uint32_t j = i;
    for (;;) {
        p->htab[i] = KV_NONE;
        for (;;) {
            j = (j + 1) & p->htab_mask;
            if (p->htab[j] == KV_NONE) {
                return;
            }
            uint32_t k = home(p, p->blocks[p->htab[j]].hash);
            /* Entry at j may move to i unless its home k lies cyclically in (i, j]. */
            bool k_in = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!k_in) {
                break;
            }
        }
        p->htab[i] = p->htab[j];
        i = j;
    }
}
