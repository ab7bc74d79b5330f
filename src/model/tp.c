/*
 * tp.c — the tensor-parallel group (tp.h): the leader's runner (handshake, step and copy
 * commands, in-process follower threads), the follower loop, and the model hash. Every rank's
 * shard is a plain forward (forward.h); this file only makes the ranks step together.
 *
 * Wire format (host byte order: all ranks run the same build on one kind of machine):
 *   hello   tp_hello: magic, version, group size, the forward configuration, model hash.
 *   status  tp_status from every rank (all-gather) after each rank built its shard: its
 *           status, message and KV bytes.
 *   command tp_cmd; RUN is followed by one int32 payload: tokens, pos, seq, slots [n_tokens
 *           each], seq_len [n_seqs], block_table [n_seqs * max_blocks_per_seq],
 *           outputs [n_outputs], and with a sliding-window pool slots_swa [n_tokens],
 *           block_table_swa [n_seqs * max_blocks_per_seq]. COPY names the pool.
 *
 * Invariant: once a batch or a copy went out, every failure on any rank marks the
 * communicator broken, so no rank waits for one that gave up.
 */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp.h"
#include "util/error.h"

#define TP_MAGIC    0x70747374u /* "tstp" */
#define TP_VERSION  5
#define TP_END      0x646e6574u /* "tend": hello of a leader that makes no more forwards */
#define HASH_SAMPLE 256

typedef struct tp_hello {
    uint32_t magic, version;
    int32_t size, kv_type_k, kv_type_v;
    int64_t max_tokens, max_seqs, max_outputs, n_blocks, block_size, max_blocks_per_seq, n_ctx;
    int64_t n_blocks_swa;
    uint8_t hash[32];
} tp_hello;

enum { CMD_RUN = 1, CMD_COPY = 2, CMD_QUIT = 3 };

typedef struct tp_cmd {
    int32_t kind, src, dst, pool; /* pool: COPY's */
    int64_t n_tokens, n_seqs, n_outputs;
} tp_cmd;

typedef struct tp_status {
    int32_t status, pad;
    uint64_t kv_bytes;     /* KV storage of the rank's shard (0 when it failed) */
    uint64_t kv_swa_bytes; /* the part of it in sliding-window pools */
    char msg[TS_ERROR_MSG_MAX - 24];
} tp_status;

typedef struct follower {
    const ts_model *m;
    ts_backend *b;
    ts_registry *reg;
    ts_comm *comm;
    ts_status st;
    ts_error err;
} follower;

/* The leader's runner. */
typedef struct tp_runner {
    ts_runner base;   /* first: the runner is this struct */
    ts_forward *f;    /* owned: shard 0 */
    ts_comm *comm;    /* borrowed */
    int32_t *payload; /* [payload_cap] */
    size_t payload_cap;
    pthread_t *threads; /* [n_threads] in-process followers */
    follower *args;     /* [size - 1] */
    int n_threads;
} tp_runner;

/* ---- model hash ---- */

typedef struct hash_ctx {
    EVP_MD_CTX *md;
    const uint8_t *data; /* data section */
} hash_ctx;

static void hash_tensor(const char *name, const ts_gguf_tensor *t, void *user) {
    hash_ctx *h = user;
    (void)name;
    size_t n = t->nbytes < HASH_SAMPLE ? t->nbytes : HASH_SAMPLE;
    EVP_DigestUpdate(h->md, h->data + t->offset, n);
}

ts_status ts_tp_model_hash(const ts_model *m, uint8_t out[32], ts_error *err) {
    const uint8_t *base = ts_gguf_base(m->gguf);
    uint64_t size = (uint64_t)ts_gguf_file_size(m->gguf);
    size_t header = ts_gguf_data_offset(m->gguf);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int len = 0;
    int ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(md, &size, sizeof size) == 1 &&
             EVP_DigestUpdate(md, base, header) == 1;
    if (ok) {
        hash_ctx h = {md, base + header};
        ts_model_each_param(m, hash_tensor, &h);
        ok = EVP_DigestFinal_ex(md, out, &len) == 1 && len == 32;
    }
    EVP_MD_CTX_free(md);
    return ok ? TS_OK : ts_error_set(err, TS_ERR_INTERNAL, "tp: SHA-256 of the model failed");
}

static void hash_hex(const uint8_t h[32], char out[17]) {
    for (int i = 0; i < 8; i++) {
        snprintf(out + 2 * i, 3, "%02x", h[i]);
    }
}

/* ---- status exchange ---- */

/* Every rank contributes its status and its shard's KV bytes (kv[0] all, kv[1] the
 * sliding-window pools'); returns the first failure (this rank's own first), as "rank k:
 * message", or TS_OK when all succeeded, with kv_total[] the KV bytes of all ranks together. */
static ts_status exchange_status(ts_comm *comm, ts_status mine, const ts_error *my_err,
                                 const uint64_t my_kv[2], uint64_t kv_total[2], ts_error *err) {
    kv_total[0] = kv_total[1] = 0;
    tp_status s = {.status = mine, .kv_bytes = my_kv[0], .kv_swa_bytes = my_kv[1]};
    if (mine != TS_OK) {
        memcpy(s.msg, my_err->msg, sizeof s.msg - 1);
    }
    tp_status *all = calloc((size_t)comm->size, sizeof *all);
    if (all == NULL) {
        ts_comm_fail(comm, "out of memory");
        return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory");
    }
    ts_error e = {0};
    ts_status st = ts_comm_all_gather(comm, &s, all, sizeof s, &e);
    if (st != TS_OK) {
        *err = e;
    } else if (mine != TS_OK) {
        st = ts_error_set(err, mine, "tp: rank %d: %s", comm->rank, my_err->msg);
    } else {
        for (int k = 0; k < comm->size && st == TS_OK; k++) {
            if (all[k].status != TS_OK) {
                all[k].msg[sizeof all[k].msg - 1] = '\0';
                st = ts_error_set(err, (ts_status)all[k].status, "tp: rank %d: %s", k, all[k].msg);
            }
            kv_total[0] += all[k].kv_bytes;
            kv_total[1] += all[k].kv_swa_bytes;
        }
    }
    free(all);
    return st;
}

/* ---- batch payload ---- */

/* Length of a payload in int32s; swa: with the sliding-window pool's slots and tables. */
static size_t payload_len(const tp_cmd *c, int64_t max_blk, bool swa) {
    size_t base = (size_t)(4 * c->n_tokens + c->n_seqs + c->n_seqs * max_blk + c->n_outputs);
    return base + (swa ? (size_t)(c->n_tokens + c->n_seqs * max_blk) : 0);
}

/* Points a batch at the arrays of a payload. */
static ts_batch unpack(const tp_cmd *c, const int32_t *p, int64_t max_blk, bool swa) {
    int64_t T = c->n_tokens, S = c->n_seqs;
    const int32_t *extra = p + 4 * T + S + S * max_blk + c->n_outputs;
    ts_batch b = {
        .n_tokens = T,
        .tokens = p,
        .pos = p + T,
        .seq = p + 2 * T,
        .slots = p + 3 * T,
        .slots_swa = swa ? extra : NULL,
        .n_seqs = S,
        .seq_len = p + 4 * T,
        .block_table = p + 4 * T + S,
        .block_table_swa = swa ? extra + T : NULL,
        .n_outputs = c->n_outputs,
        .outputs = p + 4 * T + S + S * max_blk,
    };
    return b;
}

/* ---- follower ---- */

/* Executes the leader's commands until quit (TS_OK) or a failure, which marks the group
 * broken (the leader and the other followers may be waiting in a collective). */
static ts_status follow_loop(ts_forward *f, ts_comm *comm, int64_t max_blk, ts_error *err) {
    bool swa = ts_forward_get_config(f)->n_blocks_swa > 0;
    int32_t *payload = NULL;
    size_t cap = 0;
    ts_status st = TS_OK;
    for (;;) {
        tp_cmd c;
        st = ts_comm_broadcast(comm, &c, sizeof c, 0, -1, err);
        if (st != TS_OK || c.kind == CMD_QUIT) {
            break;
        }
        if (c.kind == CMD_COPY) {
            st = ts_forward_copy_block(f, c.pool, c.src, c.dst, err);
        } else if (c.kind != CMD_RUN || c.n_tokens < 1 || c.n_seqs < 1 || c.n_outputs < 1) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tp rank %d: bad command %d from the leader",
                              comm->rank, c.kind);
        } else {
            size_t n = payload_len(&c, max_blk, swa);
            if (n > cap) {
                int32_t *p = realloc(payload, n * sizeof *p);
                if (p == NULL) {
                    st = ts_error_set(err, TS_ERR_NOMEM, "tp rank %d: out of memory", comm->rank);
                } else {
                    payload = p;
                    cap = n;
                }
            }
            if (st == TS_OK) {
                st = ts_comm_broadcast(comm, payload, n * sizeof *payload, 0, 0, err);
            }
            if (st == TS_OK) {
                ts_batch b = unpack(&c, payload, max_blk, swa);
                st = ts_forward_run(f, &b, NULL, NULL, err);
            }
        }
        if (st != TS_OK) {
            ts_comm_fail(comm, err->msg);
            break;
        }
    }
    free(payload);
    return st;
}

ts_status ts_tp_end(ts_comm *comm, ts_error *err) {
    tp_hello h = {.magic = TP_END, .version = TP_VERSION, .size = comm->size};
    return ts_comm_broadcast(comm, &h, sizeof h, 0, 0, err);
}

ts_status ts_tp_follow(const ts_model *m, ts_backend *b, ts_registry *reg, ts_comm *comm,
                       bool *ended, ts_error *err) {
    if (ended != NULL) {
        *ended = false;
    }
    if (m == NULL || b == NULL || comm == NULL || comm->rank == 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp: follow needs a model, a backend and "
                            "a communicator of a rank > 0");
    }
    tp_hello h;
    ts_status st = ts_comm_broadcast(comm, &h, sizeof h, 0, -1, err);
    if (st != TS_OK) {
        return ts_error_prefix(err, "tp rank %d: waiting for the leader: ", comm->rank);
    }
    if (h.magic == TP_END) {
        if (ended != NULL) {
            *ended = true;
        }
        return TS_OK;
    }
    ts_error mine = {0};
    ts_status my_st = TS_OK;
    uint8_t hash[32];
    if (h.magic != TP_MAGIC || h.version != TP_VERSION || h.size != comm->size) {
        my_st = ts_error_set(&mine, TS_ERR_FORMAT,
                             "protocol mismatch with the leader (magic %08x version %u size %d, "
                             "want %08x %u %d)",
                             h.magic, h.version, h.size, TP_MAGIC, TP_VERSION, comm->size);
    } else if ((my_st = ts_tp_model_hash(m, hash, &mine)) == TS_OK &&
               memcmp(hash, h.hash, sizeof hash) != 0) {
        char a[17], c[17];
        hash_hex(hash, a);
        hash_hex(h.hash, c);
        my_st = ts_error_set(&mine, TS_ERR_STATE,
                             "model file differs from rank 0's (hash %s... vs %s...): every rank "
                             "must load the same file",
                             a, c);
    }
    ts_forward *f = NULL;
    uint64_t my_kv[2] = {0, 0}, kv_total[2];
    if (my_st == TS_OK) {
        ts_forward_config cfg = {
            .max_tokens = h.max_tokens,
            .max_seqs = h.max_seqs,
            .max_outputs = h.max_outputs,
            .n_blocks = h.n_blocks,
            .block_size = h.block_size,
            .max_blocks_per_seq = h.max_blocks_per_seq,
            .kv_type_k = (ts_type)h.kv_type_k,
            .kv_type_v = (ts_type)h.kv_type_v,
            .n_ctx = h.n_ctx,
            .n_blocks_swa = h.n_blocks_swa,
        };
        my_st = ts_forward_create_shard(m, b, &cfg, reg, comm, &f, &mine);
    }
    if (my_st == TS_OK) {
        my_kv[0] = ts_forward_kv_bytes(f);
        my_kv[1] = ts_forward_kv_swa_bytes(f);
    }
    st = exchange_status(comm, my_st, &mine, my_kv, kv_total, err);
    if (st == TS_OK) {
        st = follow_loop(f, comm, h.max_blocks_per_seq, err);
    }
    ts_forward_destroy(f);
    return st;
}

static void *follower_main(void *arg) {
    follower *a = arg;
    bool ended = false;
    a->st = ts_tp_follow(a->m, a->b, a->reg, a->comm, &ended, &a->err);
    return NULL;
}

/* ---- leader ---- */

static void join_followers(tp_runner *r) {
    for (int i = 0; i < r->n_threads; i++) {
        pthread_join(r->threads[i], NULL);
    }
    r->n_threads = 0;
}

static void runner_free(tp_runner *r) {
    join_followers(r);
    ts_forward_destroy(r->f);
    free(r->threads);
    free(r->args);
    free(r->payload);
    free(r);
}

static ts_status send_run(tp_runner *r, const ts_batch *bt, ts_error *err) {
    int64_t max_blk = r->base.cfg.max_blocks_per_seq;
    bool swa = r->base.cfg.n_blocks_swa > 0;
    tp_cmd c = {.kind = CMD_RUN,
                .n_tokens = bt->n_tokens,
                .n_seqs = bt->n_seqs,
                .n_outputs = bt->n_outputs};
    size_t n = payload_len(&c, max_blk, swa);
    if (n > r->payload_cap) {
        int32_t *p = realloc(r->payload, n * sizeof *p);
        if (p == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory for a batch");
        }
        r->payload = p;
        r->payload_cap = n;
    }
    size_t T = (size_t)bt->n_tokens, S = (size_t)bt->n_seqs;
    int32_t *p = r->payload;
    memcpy(p, bt->tokens, T * 4);
    memcpy(p + T, bt->pos, T * 4);
    memcpy(p + 2 * T, bt->seq, T * 4);
    memcpy(p + 3 * T, bt->slots, T * 4);
    memcpy(p + 4 * T, bt->seq_len, S * 4);
    memcpy(p + 4 * T + S, bt->block_table, S * (size_t)max_blk * 4);
    memcpy(p + 4 * T + S + S * (size_t)max_blk, bt->outputs, (size_t)bt->n_outputs * 4);
    if (swa) {
        int32_t *extra = p + 4 * T + S + S * (size_t)max_blk + (size_t)bt->n_outputs;
        memcpy(extra, bt->slots_swa, T * 4);
        memcpy(extra + T, bt->block_table_swa, S * (size_t)max_blk * 4);
    }
    ts_status st = ts_comm_broadcast(r->comm, &c, sizeof c, 0, 0, err);
    if (st == TS_OK) {
        st = ts_comm_broadcast(r->comm, p, n * sizeof *p, 0, 0, err);
    }
    return st;
}

static ts_status tp_run(ts_runner *base, const ts_batch *bt, float *logits, float *embd,
                        ts_error *err) {
    tp_runner *r = (tp_runner *)base;
    /* A bad batch is refused before the followers see it: the group stays usable. */
    ts_status st = ts_forward_check_batch(r->f, bt, err);
    if (st != TS_OK) {
        return st;
    }
    st = send_run(r, bt, err);
    if (st == TS_OK) {
        st = ts_forward_run(r->f, bt, logits, embd, err);
    }
    if (st != TS_OK) {
        ts_comm_fail(r->comm, err->msg);
    }
    return st;
}

static ts_status tp_copy_block(ts_runner *base, int pool, int32_t src, int32_t dst, ts_error *err) {
    tp_runner *r = (tp_runner *)base;
    bool swa = pool == TS_FORWARD_POOL_SWA;
    int64_t n = swa ? r->base.cfg.n_blocks_swa : r->base.cfg.n_blocks;
    if ((pool != TS_FORWARD_POOL_FULL && !swa) || src < 0 || dst < 0 || src >= n || dst >= n) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "tp: copy of block %d to %d in pool %d (of %lld blocks)", src, dst,
                            pool, (long long)n);
    }
    tp_cmd c = {.kind = CMD_COPY, .src = src, .dst = dst, .pool = pool};
    ts_status st = ts_comm_broadcast(r->comm, &c, sizeof c, 0, 0, err);
    if (st == TS_OK) {
        st = ts_forward_copy_block(r->f, pool, src, dst, err);
    }
    if (st != TS_OK) {
        ts_comm_fail(r->comm, err->msg);
    }
    return st;
}

static void tp_destroy(ts_runner *base) {
    tp_runner *r = (tp_runner *)base;
    tp_cmd c = {.kind = CMD_QUIT};
    ts_error e = {0};
    if (ts_comm_broadcast(r->comm, &c, sizeof c, 0, 0, &e) != TS_OK) {
        /* A broken group: make sure every follower stops waiting. */
        ts_comm_fail(r->comm, "leader stopped");
    }
    runner_free(r);
}

static const ts_runner_vtable k_tp_runner = {
    .run = tp_run,
    .copy_block = tp_copy_block,
    .destroy = tp_destroy,
};

/* Starts one thread per in-process follower. */
static ts_status start_followers(tp_runner *r, const ts_model *m, ts_registry *reg,
                                 const ts_tp_config *tp, ts_error *err) {
    r->threads = calloc((size_t)tp->size, sizeof *r->threads);
    r->args = calloc((size_t)tp->size, sizeof *r->args);
    if (r->threads == NULL || r->args == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory");
    }
    for (int k = 1; k < tp->size; k++) {
        follower *a = &r->args[k - 1];
        *a = (follower){.m = m, .b = tp->peers[k - 1], .reg = reg, .comm = tp->peer_comms[k - 1]};
        if (pthread_create(&r->threads[r->n_threads], NULL, follower_main, a) != 0) {
            return ts_error_set(err, TS_ERR_INTERNAL, "tp: cannot start follower thread %d", k);
        }
        r->n_threads++;
    }
    return TS_OK;
}

ts_status ts_tp_runner_create(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                              ts_registry *reg, const ts_tp_config *tp, ts_runner **out,
                              ts_error *err) {
    *out = NULL;
    if (tp->size == 1) {
        return ts_forward_runner_create(m, b, cfg, reg, out, err);
    }
    if (tp->size < 1 || tp->comm == NULL || tp->comm->rank != 0 || tp->comm->size != tp->size ||
        (tp->peers != NULL && tp->peer_comms == NULL)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp: the leader needs the communicator of rank 0 of %d ranks (and "
                            "one per in-process follower)",
                            tp->size);
    }
    ts_comm *comm = tp->comm;
    tp_runner *r = calloc(1, sizeof *r);
    if (r == NULL) {
        ts_comm_fail(comm, "leader out of memory");
        return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory");
    }
    r->comm = comm;
    ts_status st = tp->peers != NULL ? start_followers(r, m, reg, tp, err) : TS_OK;
    tp_hello h = {
        .magic = TP_MAGIC,
        .version = TP_VERSION,
        .size = tp->size,
        .kv_type_k = (int32_t)cfg->kv_type_k,
        .kv_type_v = (int32_t)cfg->kv_type_v,
        .max_tokens = cfg->max_tokens,
        .max_seqs = cfg->max_seqs,
        .max_outputs = cfg->max_outputs,
        .n_blocks = cfg->n_blocks,
        .block_size = cfg->block_size,
        .max_blocks_per_seq = cfg->max_blocks_per_seq,
        .n_ctx = cfg->n_ctx,
        .n_blocks_swa = cfg->n_blocks_swa,
    };
    if (st == TS_OK) {
        st = ts_tp_model_hash(m, h.hash, err);
    }
    if (st == TS_OK) {
        st = ts_comm_broadcast(comm, &h, sizeof h, 0, 0, err);
    }
    if (st != TS_OK) {
        ts_comm_fail(comm, err->msg);
        runner_free(r);
        return st;
    }
    ts_error mine = {0};
    ts_status my_st = ts_forward_create_shard(m, b, cfg, reg, comm, &r->f, &mine);
    uint64_t my_kv[2] = {0, 0}, kv_total[2];
    if (my_st == TS_OK) {
        my_kv[0] = ts_forward_kv_bytes(r->f);
        my_kv[1] = ts_forward_kv_swa_bytes(r->f);
    }
    st = exchange_status(comm, my_st, &mine, my_kv, kv_total, err);
    if (st != TS_OK) {
        ts_comm_fail(comm, err->msg);
        runner_free(r);
        return st;
    }
    r->base = (ts_runner){
        .vt = &k_tp_runner,
        .cfg = *cfg,
        /* Other processes' shards are theirs to count. */
        .kv_bytes = tp->peers != NULL ? (size_t)kv_total[0] : ts_forward_kv_bytes(r->f),
        .kv_swa_bytes = tp->peers != NULL ? (size_t)kv_total[1] : ts_forward_kv_swa_bytes(r->f),
        .n_shards = tp->size,
    };
    *out = &r->base;
    return TS_OK;
}
