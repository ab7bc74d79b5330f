/*
 * tp.c — the tensor-parallel group protocol (tp.h): handshake, step and copy commands from
 * the leader, the follower loop, in-process follower threads, and the model hash.
 *
 * Wire format (host byte order: all ranks run the same build on one kind of machine):
 *   hello   tp_hello: magic, version, group size, the forward configuration, model hash.
 *   status  tp_status from every rank (all-gather) after each rank built its shard.
 *   command tp_cmd; RUN is followed by one int32 payload: tokens, pos, seq, slots [n_tokens
 *           each], seq_len [n_seqs], block_table [n_seqs * max_blocks_per_seq],
 *           outputs [n_outputs].
 */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp_internal.h"
#include "util/error.h"

#define TP_MAGIC    0x70747374u /* "tstp" */
#define TP_VERSION  1
#define TP_END      0x646e6574u /* "tend": hello of a leader that makes no more forwards */
#define HASH_SAMPLE 256

typedef struct tp_hello {
    uint32_t magic, version;
    int32_t size, kv_type;
    int64_t max_tokens, max_seqs, max_outputs, n_blocks, block_size, max_blocks_per_seq;
    uint8_t hash[32];
} tp_hello;

enum { CMD_RUN = 1, CMD_COPY = 2, CMD_QUIT = 3 };

typedef struct tp_cmd {
    int32_t kind, src, dst, pad;
    int64_t n_tokens, n_seqs, n_outputs;
} tp_cmd;

typedef struct tp_status {
    int32_t status;
    char msg[TS_ERROR_MSG_MAX - 4];
} tp_status;

typedef struct follower {
    const ts_model *m;
    ts_backend *b;
    ts_registry *reg;
    ts_comm *comm;
    ts_status st;
    ts_error err;
} follower;

struct ts_tp_lead {
    ts_comm *comm; /* borrowed */
    int64_t max_blk;
    int32_t *payload; /* [payload_cap] */
    size_t payload_cap;
    pthread_t *threads; /* [n_threads] in-process followers */
    follower *args;
    int n_threads;
};

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

/* Every rank contributes its status; returns the first failure (this rank's own first), as
 * "rank k: message", or TS_OK when all succeeded. */
static ts_status exchange_status(ts_comm *comm, ts_status mine, const ts_error *my_err,
                                 ts_error *err) {
    tp_status s = {.status = mine};
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
        }
    }
    free(all);
    return st;
}

/* ---- batch payload ---- */

static size_t payload_len(const tp_cmd *c, int64_t max_blk) {
    return (size_t)(4 * c->n_tokens + c->n_seqs + c->n_seqs * max_blk + c->n_outputs);
}

/* Points a batch at the arrays of a payload. */
static ts_batch unpack(const tp_cmd *c, const int32_t *p, int64_t max_blk) {
    int64_t T = c->n_tokens, S = c->n_seqs;
    ts_batch b = {
        .n_tokens = T,
        .tokens = p,
        .pos = p + T,
        .seq = p + 2 * T,
        .slots = p + 3 * T,
        .n_seqs = S,
        .seq_len = p + 4 * T,
        .block_table = p + 4 * T + S,
        .n_outputs = c->n_outputs,
        .outputs = p + 4 * T + S + S * max_blk,
    };
    return b;
}

/* ---- follower ---- */

static ts_status follow_loop(ts_forward *f, ts_comm *comm, int64_t max_blk, ts_error *err) {
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
            if ((st = ts_forward_copy_block_rank(f, c.src, c.dst, err)) != TS_OK) {
                ts_comm_fail(comm, err->msg);
                break;
            }
            continue;
        }
        if (c.kind != CMD_RUN || c.n_tokens < 1 || c.n_seqs < 1 || c.n_outputs < 1) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tp rank %d: bad command %d from the leader",
                              comm->rank, c.kind);
            ts_comm_fail(comm, err->msg);
            break;
        }
        size_t n = payload_len(&c, max_blk);
        if (n > cap) {
            int32_t *p = realloc(payload, n * sizeof *p);
            if (p == NULL) {
                st = ts_error_set(err, TS_ERR_NOMEM, "tp rank %d: out of memory", comm->rank);
                ts_comm_fail(comm, err->msg);
                break;
            }
            payload = p;
            cap = n;
        }
        if ((st = ts_comm_broadcast(comm, payload, n * sizeof *payload, 0, 0, err)) != TS_OK) {
            break;
        }
        ts_batch b = unpack(&c, payload, max_blk);
        if ((st = ts_forward_run_rank(f, &b, NULL, NULL, err)) != TS_OK) {
            break; /* run_rank marked the group broken */
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
    if (my_st == TS_OK) {
        ts_forward_config cfg = {
            .max_tokens = h.max_tokens,
            .max_seqs = h.max_seqs,
            .max_outputs = h.max_outputs,
            .n_blocks = h.n_blocks,
            .block_size = h.block_size,
            .max_blocks_per_seq = h.max_blocks_per_seq,
            .kv_type = (ts_type)h.kv_type,
        };
        my_st = ts_forward_create_rank(m, b, &cfg, reg, comm, &f, &mine);
    }
    st = exchange_status(comm, my_st, &mine, err);
    if (st == TS_OK) {
        st = follow_loop(f, comm, h.max_blocks_per_seq, err);
    }
    ts_forward_destroy(f);
    return st;
}

static void *follower_main(void *arg) {
    follower *a = arg;
    a->st = ts_tp_follow(a->m, a->b, a->reg, a->comm, NULL, &a->err);
    return NULL;
}

/* ---- leader ---- */

static void join_followers(ts_tp_lead *l) {
    for (int i = 0; i < l->n_threads; i++) {
        pthread_join(l->threads[i], NULL);
    }
    l->n_threads = 0;
}

static void lead_free(ts_tp_lead *l) {
    join_followers(l);
    free(l->threads);
    free(l->args);
    free(l->payload);
    free(l);
}

ts_status ts_tp_lead_start(const ts_model *m, ts_backend *b, const ts_forward_config *cfg,
                           ts_registry *reg, ts_forward **out, ts_tp_lead **lead, ts_error *err) {
    const ts_tp_config *tp = cfg->tp;
    *out = NULL;
    *lead = NULL;
    if (tp->comm == NULL || tp->comm->rank != 0 || tp->comm->size != tp->size) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tp: the leader needs the communicator of rank 0 of %d ranks",
                            tp->size);
    }
    ts_comm *comm = tp->comm;
    ts_tp_lead *l = calloc(1, sizeof *l);
    if (l == NULL) {
        ts_comm_fail(comm, "leader out of memory");
        return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory");
    }
    l->comm = comm;
    l->max_blk = cfg->max_blocks_per_seq;
    if (tp->peers != NULL) {
        l->threads = calloc((size_t)tp->size, sizeof *l->threads);
        l->args = calloc((size_t)tp->size, sizeof *l->args);
        if (l->threads == NULL || l->args == NULL) {
            ts_comm_fail(comm, "leader out of memory");
            lead_free(l);
            return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory");
        }
        for (int k = 1; k < tp->size; k++) {
            follower *a = &l->args[k - 1];
            *a = (follower){
                .m = m, .b = tp->peers[k - 1], .reg = reg, .comm = tp->peer_comms[k - 1]};
            if (pthread_create(&l->threads[l->n_threads], NULL, follower_main, a) != 0) {
                ts_comm_fail(comm, "cannot start a follower thread");
                lead_free(l);
                return ts_error_set(err, TS_ERR_INTERNAL, "tp: cannot start follower thread %d", k);
            }
            l->n_threads++;
        }
    }
    tp_hello h = {
        .magic = TP_MAGIC,
        .version = TP_VERSION,
        .size = tp->size,
        .kv_type = (int32_t)cfg->kv_type,
        .max_tokens = cfg->max_tokens,
        .max_seqs = cfg->max_seqs,
        .max_outputs = cfg->max_outputs,
        .n_blocks = cfg->n_blocks,
        .block_size = cfg->block_size,
        .max_blocks_per_seq = cfg->max_blocks_per_seq,
    };
    ts_status st = ts_tp_model_hash(m, h.hash, err);
    if (st == TS_OK) {
        st = ts_comm_broadcast(comm, &h, sizeof h, 0, 0, err);
    }
    if (st != TS_OK) {
        ts_comm_fail(comm, err->msg);
        lead_free(l);
        return st;
    }
    ts_forward *f = NULL;
    ts_error mine = {0};
    ts_status my_st = ts_forward_create_rank(m, b, cfg, reg, comm, &f, &mine);
    st = exchange_status(comm, my_st, &mine, err);
    if (st != TS_OK) {
        ts_forward_destroy(f);
        ts_comm_fail(comm, err->msg);
        lead_free(l);
        return st;
    }
    *out = f;
    *lead = l;
    return TS_OK;
}

ts_status ts_tp_lead_send_run(ts_tp_lead *l, const ts_batch *bt, ts_error *err) {
    tp_cmd c = {.kind = CMD_RUN,
                .n_tokens = bt->n_tokens,
                .n_seqs = bt->n_seqs,
                .n_outputs = bt->n_outputs};
    size_t n = payload_len(&c, l->max_blk);
    if (n > l->payload_cap) {
        int32_t *p = realloc(l->payload, n * sizeof *p);
        if (p == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tp: out of memory for a batch");
        }
        l->payload = p;
        l->payload_cap = n;
    }
    size_t T = (size_t)bt->n_tokens, S = (size_t)bt->n_seqs;
    int32_t *p = l->payload;
    memcpy(p, bt->tokens, T * 4);
    memcpy(p + T, bt->pos, T * 4);
    memcpy(p + 2 * T, bt->seq, T * 4);
    memcpy(p + 3 * T, bt->slots, T * 4);
    memcpy(p + 4 * T, bt->seq_len, S * 4);
    memcpy(p + 4 * T + S, bt->block_table, S * (size_t)l->max_blk * 4);
    memcpy(p + 4 * T + S + S * (size_t)l->max_blk, bt->outputs, (size_t)bt->n_outputs * 4);
    ts_status st = ts_comm_broadcast(l->comm, &c, sizeof c, 0, 0, err);
    if (st == TS_OK) {
        st = ts_comm_broadcast(l->comm, p, n * sizeof *p, 0, 0, err);
    }
    return st;
}

ts_status ts_tp_lead_send_copy(ts_tp_lead *l, int32_t src, int32_t dst, ts_error *err) {
    tp_cmd c = {.kind = CMD_COPY, .src = src, .dst = dst};
    return ts_comm_broadcast(l->comm, &c, sizeof c, 0, 0, err);
}

void ts_tp_lead_stop(ts_tp_lead *l) {
    if (l == NULL) {
        return;
    }
    tp_cmd c = {.kind = CMD_QUIT};
    ts_error e = {0};
    if (ts_comm_broadcast(l->comm, &c, sizeof c, 0, 0, &e) != TS_OK) {
        /* A broken group: make sure every follower stops waiting. */
        ts_comm_fail(l->comm, "leader stopped");
    }
    lead_free(l);
}
