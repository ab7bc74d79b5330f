/*
 * embed.c — embeddings between steps: inputs computed through the engine's runner over its KV
 * cache, their final hidden states pooled on the host.
 *
 * Each input gets a KV sequence of its own for the call (no prefix-cache lookup, never
 * committed, so nothing it computed is offered to later requests) and gives it back before the
 * call returns. Inputs are packed in order into steps under the runner's bucket (tokens,
 * sequences, output rows) and the blocks the cache has free now: requests that are running keep
 * theirs. An encoder's input must be whole in one step (its tokens see every key of the input);
 * a decoder's may span steps, its causal K/V of a prefix not depending on what follows.
 * Output rows: CLS the input's first token, LAST its last, MEAN and NONE every token. Pooled
 * sums are kept in double.
 *
 * Step thread only (it uses the runner and the KV books between steps).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "util/error.h"

typedef struct embed_scratch {
    int32_t *tok, *pos, *seq, *slots;     /* [max_tokens] step inputs */
    int32_t *slots_swa, *table_swa;       /* the sliding-window pool's slots and tables */
    int32_t *outs, *row_in;               /* [max_outputs] output token, its input (-1: none) */
    int32_t *table, *len, *users, *chunk; /* [max_seqs * width], [max_seqs] x 3 */
    int32_t *done;                        /* [n_inputs] tokens computed */
    int64_t *kv_id;                       /* [n_inputs] open KV sequence, -1 when none */
    int64_t *row0;                        /* [n_inputs] first output row (pooling NONE) */
    double *acc;                          /* [n_inputs * n_embd] mean sums (pooling MEAN) */
    float *embd;                          /* [max_outputs * n_embd] the step's hidden states */
} embed_scratch;

static void scratch_free(embed_scratch *s) {
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->slots);
    free(s->slots_swa);
    free(s->table_swa);
    free(s->outs);
    free(s->row_in);
    free(s->table);
    free(s->len);
    free(s->users);
    free(s->chunk);
    free(s->done);
    free(s->kv_id);
    free(s->row0);
    free(s->acc);
    free(s->embd);
}

static bool scratch_alloc(embed_scratch *s, const ts_forward_config *fc, int32_t n_inputs,
                          int64_t n_embd, bool mean) {
    size_t T = (size_t)fc->max_tokens, O = (size_t)fc->max_outputs, S = (size_t)fc->max_seqs;
    size_t N = (size_t)n_inputs, E = (size_t)n_embd;
    s->tok = malloc(T * sizeof(int32_t));
    s->pos = malloc(T * sizeof(int32_t));
    s->seq = malloc(T * sizeof(int32_t));
    s->slots = malloc(T * sizeof(int32_t));
    s->slots_swa = malloc(T * sizeof(int32_t));
    s->table_swa = malloc(S * (size_t)fc->max_blocks_per_seq * sizeof(int32_t));
    s->outs = malloc(O * sizeof(int32_t));
    s->row_in = malloc(O * sizeof(int32_t));
    s->table = malloc(S * (size_t)fc->max_blocks_per_seq * sizeof(int32_t));
    s->len = malloc(S * sizeof(int32_t));
    s->users = malloc(S * sizeof(int32_t));
    s->chunk = malloc(S * sizeof(int32_t));
    s->done = calloc(N, sizeof(int32_t));
    s->kv_id = malloc(N * sizeof(int64_t));
    s->row0 = malloc(N * sizeof(int64_t));
    s->acc = mean ? calloc(N * E, sizeof(double)) : NULL;
    s->embd = malloc(O * E * sizeof(float));
    return s->tok && s->pos && s->seq && s->slots && s->slots_swa && s->table_swa && s->outs &&
           s->row_in && s->table && s->len && s->users && s->chunk && s->done && s->kv_id &&
           s->row0 && (s->acc || !mean) && s->embd;
}

static ts_status check_inputs(ts_engine *e, const int32_t *const *inputs, const int32_t *n_tokens,
                              int32_t n_inputs, ts_pool_kind pool, ts_error *err) {
    const ts_forward_config *fc = &e->runner->cfg;
    bool whole = e->model->hp.enc != NULL;
    bool all_rows = pool == TS_POOL_MEAN || pool == TS_POOL_NONE;
    for (int32_t i = 0; i < n_inputs; i++) {
        int32_t n = n_tokens[i];
        if (inputs[i] == NULL || n < 1) {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "embed: input %d is empty", i);
        }
        if (n > e->cfg.n_ctx) {
            return ts_error_set(err, TS_ERR_LIMIT,
                                "embed: input %d has %d tokens; the context holds %lld per "
                                "sequence",
                                i, n, (long long)e->cfg.n_ctx);
        }
        int64_t step =
            all_rows && fc->max_outputs < fc->max_tokens ? fc->max_outputs : fc->max_tokens;
        if (whole && n > step) {
            return ts_error_set(err, TS_ERR_LIMIT,
                                "embed: input %d has %d tokens; an encoder computes each input in "
                                "one step of at most %lld tokens (max_batch_tokens)",
                                i, n, (long long)step);
        }
        for (int32_t k = 0; k < n; k++) {
            if (inputs[i][k] < 0 || inputs[i][k] >= e->n_vocab) {
                return ts_error_set(err, TS_ERR_RANGE,
                                    "embed: input %d token %d has id %d (vocabulary of %d)", i, k,
                                    inputs[i][k], e->n_vocab);
            }
        }
    }
    return TS_OK;
}

static void close_all(ts_engine *e, embed_scratch *s, int32_t n_inputs) {
    for (int32_t i = 0; i < n_inputs; i++) {
        if (s->kv_id[i] >= 0) {
            ts_error ignored;
            ts_kv_seq_close(e->kv, (uint32_t)s->kv_id[i], &ignored);
            s->kv_id[i] = -1;
        }
    }
}

static bool wants_row(ts_pool_kind pool, int32_t p, int32_t n) {
    switch (pool) {
    case TS_POOL_CLS:
        return p == 0;
    case TS_POOL_LAST:
        return p == n - 1;
    case TS_POOL_MEAN:
    case TS_POOL_NONE:
        return true;
    }
    return false;
}

typedef struct step_fill {
    int32_t nt, ns, no;
} step_fill;

/* Places as much of input i as fits into the step. *placed: false when nothing of it could
 * be (the step is full, the cache has no room, or an encoder's input would be split). */
static ts_status place(ts_engine *e, embed_scratch *s, const int32_t *in, int32_t n, int32_t i,
                       ts_pool_kind pool, step_fill *f, bool *placed, ts_error *err) {
    const ts_forward_config *fc = &e->runner->cfg;
    bool all_rows = pool == TS_POOL_MEAN || pool == TS_POOL_NONE;
    int32_t rem = n - s->done[i];
    int64_t c = rem < fc->max_tokens - f->nt ? rem : fc->max_tokens - f->nt;
    if (all_rows && c > fc->max_outputs - f->no) {
        c = fc->max_outputs - f->no;
    }
    int32_t rows = 0;
    for (int32_t p = s->done[i]; !all_rows && p < s->done[i] + (int32_t)c; p++) {
        rows += wants_row(pool, p, n);
    }
    if (!all_rows && f->no + rows > fc->max_outputs) {
        c = 0;
    }
    *placed = false;
    if (c <= 0 || f->ns >= fc->max_seqs || (e->model->hp.enc != NULL && c < rem)) {
        return TS_OK;
    }
    ts_error kerr;
    if (s->kv_id[i] < 0) {
        uint32_t id = 0;
        ts_status st = ts_kv_seq_open(e->kv, NULL, 0, &id, &kerr);
        if (st == TS_ERR_LIMIT) {
            return TS_OK;
        }
        if (st != TS_OK) {
            *err = kerr;
            return st;
        }
        s->kv_id[i] = id;
    }
    uint32_t kv = (uint32_t)s->kv_id[i];
    ts_status st = ts_kv_append(e->kv, kv, in + s->done[i], (uint32_t)c, s->slots + f->nt, &kerr);
    if (st == TS_ERR_LIMIT) {
        if (s->done[i] == 0) {
            ts_kv_seq_close(e->kv, kv, &kerr);
            s->kv_id[i] = -1;
        }
        return TS_OK;
    }
    if (st != TS_OK) {
        *err = kerr;
        return st;
    }
    uint32_t n_copies = 0;
    const ts_kv_copy *cp = ts_kv_copies(e->kv, &n_copies);
    for (uint32_t k = 0; st == TS_OK && k < n_copies; k++) {
        st = ts_runner_copy_block(e->runner, cp[k].pool, cp[k].src, cp[k].dst, err);
    }
    if (st != TS_OK) {
        return st;
    }
    int64_t width = fc->max_blocks_per_seq;
    for (int pl = 0; pl < (e->swa_pool ? 2 : 1); pl++) {
        ts_kv_pool kp = pl == 0 ? TS_KV_POOL_FULL : TS_KV_POOL_SWA;
        int32_t *dst = (pl == 0 ? s->table : s->table_swa) + f->ns * width;
        uint32_t n_blk = 0;
        const int32_t *row = ts_kv_seq_block_table(e->kv, kp, kv, &n_blk);
        for (int64_t j = 0; j < width; j++) {
            dst[j] = row != NULL && j < (int64_t)n_blk ? row[j] : -1;
        }
    }
    s->len[f->ns] = s->done[i] + (int32_t)c;
    for (int32_t k = 0; k < (int32_t)c; k++) {
        int32_t t = f->nt + k, p = s->done[i] + k;
        s->tok[t] = in[p];
        s->pos[t] = p;
        if (e->swa_pool) {
            /* An appended position is inside the window, so it has a slot there. */
            ts_error ignored;
            ts_kv_seq_slot(e->kv, TS_KV_POOL_SWA, kv, (uint32_t)p, &s->slots_swa[t], &ignored);
        }
        s->seq[t] = f->ns;
        if (wants_row(pool, p, n)) {
            s->outs[f->no] = t;
            s->row_in[f->no++] = i;
        }
    }
    s->users[f->ns] = i;
    s->chunk[f->ns++] = (int32_t)c;
    f->nt += (int32_t)c;
    *placed = true;
    return TS_OK;
}

/* Adds the step's hidden states to the inputs' results. */
static void gather(const embed_scratch *s, const step_fill *f, ts_pool_kind pool, int64_t E,
                   float *out) {
    for (int32_t r = 0; r < f->no; r++) {
        int32_t i = s->row_in[r];
        const float *h = s->embd + (size_t)r * (size_t)E;
        if (i < 0) {
            continue;
        }
        if (pool == TS_POOL_MEAN) {
            double *a = s->acc + (size_t)i * (size_t)E;
            for (int64_t k = 0; k < E; k++) {
                a[k] += h[k];
            }
        } else {
            int64_t row = pool == TS_POOL_NONE ? s->row0[i] + s->pos[s->outs[r]] : i;
            memcpy(out + (size_t)row * (size_t)E, h, (size_t)E * sizeof(float));
        }
    }
}

static void normalize_rows(float *out, int64_t rows, int64_t E) {
    for (int64_t r = 0; r < rows; r++) {
        float *v = out + (size_t)r * (size_t)E;
        double ss = 0;
        for (int64_t k = 0; k < E; k++) {
            ss += (double)v[k] * v[k];
        }
        if (ss > 0) {
            double inv = 1.0 / sqrt(ss);
            for (int64_t k = 0; k < E; k++) {
                v[k] = (float)(v[k] * inv);
            }
        }
    }
}

ts_status ts_engine_embed(ts_engine *e, const int32_t *const *inputs, const int32_t *n_tokens,
                          int32_t n_inputs, ts_pool_kind pool, bool normalize, float *out,
                          ts_error *err) {
    if (n_inputs < 1 || inputs == NULL || n_tokens == NULL || out == NULL || pool < TS_POOL_NONE ||
        pool > TS_POOL_LAST) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "embed: %d inputs, pooling %d (need at least one input, pooling "
                            "none, mean, cls or last, and an output array)",
                            n_inputs, (int)pool);
    }
    ts_status st = check_inputs(e, inputs, n_tokens, n_inputs, pool, err);
    if (st != TS_OK) {
        return st;
    }
    const ts_forward_config *fc = &e->runner->cfg;
    int64_t E = e->model->hp.n_embd;
    embed_scratch s = {0};
    if (!scratch_alloc(&s, fc, n_inputs, E, pool == TS_POOL_MEAN)) {
        scratch_free(&s);
        return ts_error_set(err, TS_ERR_NOMEM, "embed: out of memory for %d inputs", n_inputs);
    }
    int64_t rows = 0;
    for (int32_t i = 0; i < n_inputs; i++) {
        s.kv_id[i] = -1;
        s.row0[i] = rows;
        rows += n_tokens[i];
    }
    int32_t next = 0;
    while (st == TS_OK && next < n_inputs) {
        step_fill f = {0};
        for (int32_t i = next; st == TS_OK && i < n_inputs; i++) {
            bool placed = false;
            st = place(e, &s, inputs[i], n_tokens[i], i, pool, &f, &placed, err);
            if (!placed) {
                break; /* inputs go in order: the rest wait for the next step */
            }
        }
        if (st == TS_OK && f.ns == 0) {
            st = ts_error_set(err, TS_ERR_LIMIT,
                              "embed: the KV cache has no room for input %d (%d tokens) now: "
                              "running requests hold its blocks, or it is smaller than the "
                              "input (make the context with more KV memory)",
                              next, n_tokens[next]);
        }
        if (st != TS_OK) {
            break;
        }
        if (f.no == 0) {
            s.outs[0] = f.nt - 1; /* the forward computes at least one row; nobody reads it */
            s.row_in[0] = -1;
            f.no = 1;
        }
        ts_batch b = {
            .n_tokens = f.nt,
            .tokens = s.tok,
            .pos = s.pos,
            .seq = s.seq,
            .slots = s.slots,
            .n_seqs = f.ns,
            .block_table = s.table,
            .seq_len = s.len,
            .n_outputs = f.no,
            .outputs = s.outs,
            .slots_swa = e->swa_pool ? s.slots_swa : NULL,
            .block_table_swa = e->swa_pool ? s.table_swa : NULL,
        };
        st = ts_runner_run(e->runner, &b, NULL, s.embd, err);
        if (st != TS_OK) {
            break;
        }
        gather(&s, &f, pool, E, out);
        for (int32_t u = 0; u < f.ns; u++) {
            int32_t i = s.users[u];
            s.done[i] += s.chunk[u];
            if (s.done[i] == n_tokens[i]) {
                ts_error ignored;
                ts_kv_seq_close(e->kv, (uint32_t)s.kv_id[i], &ignored);
                s.kv_id[i] = -1;
            }
        }
        while (next < n_inputs && s.done[next] == n_tokens[next]) {
            next++;
        }
    }
    close_all(e, &s, n_inputs);
    if (st == TS_OK && pool == TS_POOL_MEAN) {
        for (int32_t i = 0; i < n_inputs; i++) {
            for (int64_t k = 0; k < E; k++) {
                out[(size_t)i * (size_t)E + (size_t)k] =
                    (float)(s.acc[(size_t)i * (size_t)E + (size_t)k] / n_tokens[i]);
            }
        }
    }
    if (st == TS_OK && normalize) {
        normalize_rows(out, pool == TS_POOL_NONE ? rows : n_inputs, E);
    }
    scratch_free(&s);
    return st;
}
