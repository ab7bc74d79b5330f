/*
 * draft_model.c — speculative decoding's drafts from a smaller model of the same vocabulary.
 *
 * The draft model runs through its own runner (made by the caller on the target's backend)
 * over its own paged KV cache: each sequence that drafts holds a draft KV sequence, whose
 * committed tokens are a prefix of the sequence's tokens (draft_n_computed of them). Before the
 * target's step (ts_engine_draft_run):
 *  1. reconcile: the draft tokens appended last step (uncommitted) are kept as far as the
 *     sequence's tokens now agree with them (the target accepted them) and dropped after;
 *  2. catch up: one runner call per chunk of at most max_batch_tokens tokens computes the
 *     tokens the draft cache lacks (the prompt the first time, then the token sampled after
 *     the accepted drafts), batched over the drafting sequences; each sequence's last row
 *     gives its first draft token, the argmax of the draft's logits (ties: lowest id);
 *  3. draft: single-token steps, batched over the sequences still drafting, append the
 *     previous draft token (uncommitted) and take the argmax again, up to each sequence's
 *     draft length (or while its argmax probability reaches p_min, when set).
 * propose_drafts (sched.c) then takes these tokens instead of an n-gram lookup; verification
 * is unchanged, so outputs are those of plain decoding whatever the draft proposes. Drafts are
 * optional: a draft cache that runs out of blocks or a failing draft step ends the drafting of
 * the sequences concerned for this step (their draft caches start over), never a request.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "util/error.h"

struct ts_draft {
    const ts_model *model;
    ts_runner *runner; /* borrowed */
    ts_kv *kv;
    int64_t max_blk;
    int64_t max_tokens; /* per runner call */
    int64_t max_seqs;
    int32_t n_vocab;
    float p_min;
    double cost; /* a draft token's cost in target decoding steps (draft_len) */
    int32_t *b_tokens, *b_pos, *b_seq, *b_slots, *b_table, *b_len, *b_out;
    int32_t *row_of; /* [max_seqs] candidate -> output row this call, or -1 */
    int32_t *chunk;  /* [max_seqs] candidate -> tokens it has in this call */
    seq **cand;      /* [max_seqs] the sequences drafting this step */
    int32_t *want;   /* [max_seqs] their draft lengths */
    bool *alive;     /* [max_seqs] still drafting */
    float *logits;   /* [max_seqs, n_vocab] */
};

/* The draft engine's configuration: the target's, without speculation, prefix caching or a
 * separate sliding-window pool, and with an F16 cache. */
static ts_engine_config draft_config(const ts_engine_config *cfg) {
    ts_engine_config c = *cfg;
    c.draft_max = 0;
    c.prefix_cache = false;
    c.swa_full = true;
    c.kv_type_k = TS_TYPE_F16;
    c.kv_type_v = TS_TYPE_F16;
    return c;
}

ts_status ts_engine_draft_forward_config(const ts_model *dm, const ts_engine_config *cfg,
                                         ts_forward_config *out, ts_error *err) {
    ts_engine_config c = draft_config(cfg);
    ts_status st = ts_engine_forward_config(dm, &c, out, err);
    if (st != TS_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return ts_error_set(err, st, "draft model: %s", msg);
    }
    return TS_OK;
}

void ts_engine_draft_destroy(struct ts_draft *d) {
    if (d == NULL) {
        return;
    }
    ts_kv_destroy(d->kv);
    free(d->b_tokens);
    free(d->b_pos);
    free(d->b_seq);
    free(d->b_slots);
    free(d->b_table);
    free(d->b_len);
    free(d->b_out);
    free(d->row_of);
    free(d->chunk);
    free(d->cand);
    free(d->want);
    free(d->alive);
    free(d->logits);
    free(d);
}

ts_status ts_engine_set_draft(ts_engine *e, const ts_model *dm, ts_runner *runner, float p_min,
                              ts_error *err) {
    if (e->draft != NULL || e->n_running > 0 || e->n_waiting > 0) {
        return ts_error_set(err, TS_ERR_STATE,
                            "engine: a draft model is set once, before the first request");
    }
    if (dm->hp.n_vocab != e->n_vocab) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "draft model: it has %lld tokens where the target has %d",
                            (long long)dm->hp.n_vocab, e->n_vocab);
    }
    if (!(p_min >= 0.0f && p_min <= 1.0f)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "draft-p-min %g is outside 0..1",
                            (double)p_min);
    }
    ts_forward_config fc;
    ts_status st = ts_engine_draft_forward_config(dm, &e->cfg, &fc, err);
    if (st == TS_OK) {
        st = ts_engine_check_runner(runner, &fc, err);
    }
    if (st != TS_OK) {
        return st;
    }
    struct ts_draft *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "draft model: out of memory");
    }
    d->model = dm;
    d->runner = runner;
    d->max_blk = fc.max_blocks_per_seq;
    d->max_tokens = fc.max_tokens;
    d->max_seqs = fc.max_seqs;
    d->n_vocab = e->n_vocab;
    d->p_min = p_min;
    d->cost = e->model->active_bytes > 0 ? (double)dm->active_bytes / (double)e->model->active_bytes
                                         : 1.0;
    ts_kv_config kc = {
        .n_blocks = (uint32_t)fc.n_blocks,
        .block_size = (uint32_t)fc.block_size,
        .max_seqs = (uint32_t)fc.max_seqs,
        .max_seq_len = (uint32_t)e->cfg.n_ctx,
        .prefix_cache = false,
    };
    st = ts_kv_create(&kc, &d->kv, err);
    size_t T = (size_t)fc.max_tokens, S = (size_t)fc.max_seqs;
    if (st == TS_OK) {
        d->b_tokens = malloc(T * sizeof(int32_t));
        d->b_pos = malloc(T * sizeof(int32_t));
        d->b_seq = malloc(T * sizeof(int32_t));
        d->b_slots = malloc(T * sizeof(int32_t));
        d->b_table = malloc(S * (size_t)d->max_blk * sizeof(int32_t));
        d->b_len = malloc(S * sizeof(int32_t));
        d->b_out = malloc(S * sizeof(int32_t));
        d->row_of = malloc(S * sizeof(int32_t));
        d->chunk = malloc(S * sizeof(int32_t));
        d->cand = malloc(S * sizeof(seq *));
        d->want = malloc(S * sizeof(int32_t));
        d->alive = malloc(S * sizeof(bool));
        d->logits = malloc(S * (size_t)d->n_vocab * sizeof(float));
        if (!d->b_tokens || !d->b_pos || !d->b_seq || !d->b_slots || !d->b_table || !d->b_len ||
            !d->b_out || !d->row_of || !d->chunk || !d->cand || !d->want || !d->alive ||
            !d->logits) {
            st = ts_error_set(err, TS_ERR_NOMEM, "draft model: out of memory for batch buffers");
        }
    }
    if (st != TS_OK) {
        ts_engine_draft_destroy(d);
        return st;
    }
    e->draft = d;
    return TS_OK;
}

void ts_engine_draft_release(ts_engine *e, seq *s) {
    if (s->has_dkv) {
        /* Closing a sequence the engine holds cannot fail. */
        ts_error ignored;
        ts_kv_seq_close(e->draft->kv, s->dkv_id, &ignored);
        s->has_dkv = false;
    }
    s->d_n_computed = 0;
    s->d_n_pending = 0;
    s->d_n_ready = 0;
}

int32_t ts_engine_draft_take(ts_engine *e, seq *s, int32_t *out, int32_t want) {
    (void)e;
    int32_t n = s->d_n_ready < want ? s->d_n_ready : want;
    if (n > 0) {
        memcpy(out, s->d_tokens, (size_t)n * sizeof *out);
    }
    return n;
}

/* The draft length with the most tokens per unit of time, at most cap (and at least
 * draft_min). Decoding one token reads the weights once, so a draft token costs c = the draft
 * model's bytes over the target's (in target steps), and verifying k drafts costs about one
 * step plus VERIFY_ROW of one per extra row. With each draft accepted with probability a (the
 * sequence's decayed acceptance), a draft of k gives (1 - a^(k+1)) / (1 - a) tokens for
 * k c + 1 + VERIFY_ROW k steps. Measured (Gemma 3 270M BF16 with its Q4_0 drafting, c 0.29,
 * 86% accepted): 1.57x at k 4, 1.41x at k 6, 1.46x at 8 — the doubling rule alone went to 8. */
#define VERIFY_ROW 0.05

int32_t ts_draft_len_best(double cost, double accepted, double refused, int32_t min, int32_t cap) {
    const double n = accepted + refused;
    const double a = n > 0.0 ? accepted / n : 0.5;
    int32_t best = cap;             /* below min: not drafted (the caller checks) */
    double best_rate = 0.0, ak = a; /* ak = a^(k+1) */
    for (int32_t k = 1; k <= cap; k++) {
        ak *= a;
        double gain = a < 1.0 ? (1.0 - ak) / (1.0 - a) : (double)(k + 1);
        double rate = gain / ((double)k * cost + 1.0 + VERIFY_ROW * (double)k);
        if (k >= min && rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

/* The draft length (<= cap) with the most tokens per unit of time for s's acceptance so far. */
static int32_t draft_len(const ts_engine *e, const seq *s, int32_t cap) {
    return ts_draft_len_best(e->draft->cost, s->spec_acc, s->spec_rej, e->cfg.draft_min, cap);
}

void ts_engine_draft_note(seq *s, int32_t drafted, int32_t accepted) {
    s->spec_acc = 0.8f * s->spec_acc + (float)accepted;
    s->spec_rej = 0.8f * s->spec_rej + (accepted < drafted ? 1.0f : 0.0f);
}

/* Keeps the draft tokens appended last step that the sequence's tokens now hold (accepted by
 * the target) and drops the rest: the draft cache is again a prefix of the tokens. */
static void reconcile(ts_engine *e, seq *s) {
    if (!s->has_dkv || s->d_n_pending == 0) {
        return;
    }
    /* The last token stays out: computing it again gives the logits of the next draft. */
    int32_t keep = 0;
    while (keep < s->d_n_pending && s->d_n_computed + keep < s->n_tokens - 1 &&
           s->tokens[s->d_n_computed + keep] == s->d_tokens[keep]) {
        keep++;
    }
    /* Both act on tokens appended and not yet committed, so neither can fail. */
    ts_error ignored;
    ts_kv_seq_commit(e->draft->kv, s->dkv_id, (uint32_t)keep, &ignored);
    ts_kv_seq_drop(e->draft->kv, s->dkv_id, (uint32_t)(s->d_n_pending - keep), &ignored);
    s->d_n_computed += keep;
    s->d_n_pending = 0;
}

/* The token the draft proposes from a row of its logits: the argmax (lowest id on ties).
 * *confident is false when p_min is set and the token's softmax probability is below it (the
 * draft ends before it). */
static int32_t pick(const struct ts_draft *d, const float *row, bool *confident) {
    int32_t best = 0;
    for (int32_t v = 1; v < d->n_vocab; v++) {
        if (row[v] > row[best]) {
            best = v;
        }
    }
    *confident = true;
    if (d->p_min > 0.0f) {
        double sum = 0.0;
        for (int32_t v = 0; v < d->n_vocab; v++) {
            sum += exp((double)row[v] - (double)row[best]);
        }
        *confident = 1.0 / sum >= (double)d->p_min;
    }
    return best;
}

/* Whether s may draft this step: as propose_drafts decides (not while its drafts are paused
 * after failures), before the step's room. */
static bool may_draft(const seq *s) {
    const request *r = s->req;
    return s->ngram != NULL && s->finish == TS_FINISH_NONE && s->n_tokens - s->n_computed == 1 &&
           !(s->index == 0 && r->n > 1 && !r->forked) && s->spec_pause == 0;
}

/* Appends n tokens of s at tokens (the sequence's or its drafts) to the draft batch. */
static ts_status add_rows(struct ts_draft *d, seq *s, const int32_t *tokens, int32_t n,
                          int32_t pos0, int64_t *nb, int64_t ns, ts_error *err) {
    ts_status st = ts_kv_append(d->kv, s->dkv_id, tokens, (uint32_t)n, d->b_slots + *nb, err);
    if (st != TS_OK) {
        return st;
    }
    uint32_t n_copies = 0;
    const ts_kv_copy *c = ts_kv_copies(d->kv, &n_copies);
    for (uint32_t i = 0; i < n_copies && st == TS_OK; i++) {
        st = ts_runner_copy_block(d->runner, c[i].pool, c[i].src, c[i].dst, err);
    }
    if (st != TS_OK) {
        return st;
    }
    for (int32_t t = 0; t < n; t++) {
        d->b_tokens[*nb] = tokens[t];
        d->b_pos[*nb] = pos0 + t;
        d->b_seq[*nb] = (int32_t)ns;
        (*nb)++;
    }
    uint32_t n_blk = 0;
    const int32_t *table = ts_kv_seq_block_table(d->kv, TS_KV_POOL_FULL, s->dkv_id, &n_blk);
    int32_t *row = d->b_table + ns * d->max_blk;
    memcpy(row, table, n_blk * sizeof(int32_t));
    for (int64_t j = n_blk; j < d->max_blk; j++) {
        row[j] = -1;
    }
    d->b_len[ns] = pos0 + n;
    return TS_OK;
}

static ts_status run_batch(struct ts_draft *d, int64_t nb, int64_t ns, int64_t no, ts_error *err) {
    if (no == 0) {
        d->b_out[0] = (int32_t)(nb - 1); /* the graph needs one output row */
        no = 1;
    }
    ts_batch batch = {
        .n_tokens = nb,
        .tokens = d->b_tokens,
        .pos = d->b_pos,
        .seq = d->b_seq,
        .slots = d->b_slots,
        .n_seqs = ns,
        .block_table = d->b_table,
        .seq_len = d->b_len,
        .n_outputs = no,
        .outputs = d->b_out,
    };
    return ts_runner_run(d->runner, &batch, d->logits, NULL, err);
}

/* Ends candidate i's drafting this step; its draft cache starts over unless keep. */
static void stop_cand(ts_engine *e, int64_t i, bool keep) {
    struct ts_draft *d = e->draft;
    d->alive[i] = false;
    if (!keep) {
        ts_engine_draft_release(e, d->cand[i]);
    }
}

/* Brings the candidates' draft caches up to their tokens; each one's first draft token. */
static void catch_up(ts_engine *e, int64_t n_cand) {
    struct ts_draft *d = e->draft;
    for (;;) {
        int64_t nb = 0, ns = 0, no = 0;
        int32_t *chunk_of = d->chunk;
        for (int64_t i = 0; i < n_cand; i++) {
            d->row_of[i] = -1;
            chunk_of[i] = 0;
        }
        for (int64_t i = 0; i < n_cand && nb < d->max_tokens; i++) {
            seq *s = d->cand[i];
            if (!d->alive[i] || s->d_n_ready > 0 || s->d_n_computed >= s->n_tokens) {
                continue;
            }
            int32_t left = s->n_tokens - s->d_n_computed;
            int32_t chunk = left < d->max_tokens - nb ? left : (int32_t)(d->max_tokens - nb);
            ts_error kerr;
            if (add_rows(d, s, s->tokens + s->d_n_computed, chunk, s->d_n_computed, &nb, ns,
                         &kerr) != TS_OK) {
                stop_cand(e, i, false); /* out of draft blocks: no drafts this step */
                continue;
            }
            chunk_of[i] = chunk;
            if (chunk == left) {
                d->row_of[i] = (int32_t)no;
                d->b_out[no++] = (int32_t)(nb - 1);
            }
            ns++;
        }
        if (nb == 0) {
            return;
        }
        ts_error rerr;
        bool failed = run_batch(d, nb, ns, no, &rerr) != TS_OK;
        for (int64_t i = 0; i < n_cand; i++) {
            seq *s = d->cand[i];
            if (chunk_of[i] == 0) {
                continue;
            }
            if (failed) {
                stop_cand(e, i, false);
                continue;
            }
            ts_error ignored; /* appended this call: committing cannot fail */
            ts_kv_seq_commit(d->kv, s->dkv_id, (uint32_t)chunk_of[i], &ignored);
            s->d_n_computed += chunk_of[i];
            if (d->row_of[i] >= 0) {
                bool confident;
                s->d_tokens[0] =
                    pick(d, d->logits + (size_t)d->row_of[i] * (size_t)d->n_vocab, &confident);
                s->d_n_ready = confident ? 1 : 0;
                if (!confident || d->want[i] <= 1) {
                    d->alive[i] = false;
                }
            }
        }
        if (failed) {
            return;
        }
    }
}

/* Extends the candidates' drafts one token per runner call. */
static void extend(ts_engine *e, int64_t n_cand) {
    struct ts_draft *d = e->draft;
    for (;;) {
        int64_t nb = 0, ns = 0;
        for (int64_t i = 0; i < n_cand; i++) {
            seq *s = d->cand[i];
            d->row_of[i] = -1;
            if (!d->alive[i] || s->d_n_ready == 0) {
                continue;
            }
            ts_error kerr;
            int32_t pos = s->d_n_computed + s->d_n_pending;
            if (add_rows(d, s, s->d_tokens + s->d_n_pending, 1, pos, &nb, ns, &kerr) != TS_OK) {
                stop_cand(e, i, true); /* keeps the drafts it has */
                continue;
            }
            s->d_n_pending++;
            d->row_of[i] = (int32_t)ns;
            d->b_out[ns] = (int32_t)(nb - 1);
            ns++;
        }
        if (ns == 0) {
            return;
        }
        ts_error rerr;
        bool failed = run_batch(d, nb, ns, ns, &rerr) != TS_OK;
        for (int64_t i = 0; i < n_cand; i++) {
            seq *s = d->cand[i];
            if (d->row_of[i] < 0) {
                continue;
            }
            if (failed) {
                s->d_n_ready = 0;
                stop_cand(e, i, false);
                continue;
            }
            bool confident;
            int32_t t = pick(d, d->logits + (size_t)d->row_of[i] * (size_t)d->n_vocab, &confident);
            if (confident) {
                s->d_tokens[s->d_n_ready++] = t;
            }
            if (!confident || s->d_n_ready >= d->want[i]) {
                d->alive[i] = false;
            }
        }
        if (failed) {
            return;
        }
    }
}

void ts_engine_draft_run(ts_engine *e) {
    struct ts_draft *d = e->draft;
    for (int64_t i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        reconcile(e, s);
        s->d_n_ready = 0;
    }
    int64_t budget = e->spec_left, n_cand = 0;
    for (int64_t i = 0; i < e->n_running && budget >= e->cfg.draft_min; i++) {
        seq *s = e->running[i];
        if (!may_draft(s)) {
            continue;
        }
        int64_t want = draft_len(e, s, s->draft_len);
        int64_t left = (int64_t)s->req->max_tokens - s->n_generated - 1;
        int64_t ctx_left = e->cfg.n_ctx - s->n_tokens;
        want = want < budget ? want : budget;
        want = want < left ? want : left;
        want = want < ctx_left ? want : ctx_left;
        if (want < e->cfg.draft_min || want < 1) {
            continue;
        }
        if (s->d_tokens == NULL) {
            s->d_tokens = malloc((size_t)e->cfg.draft_max * sizeof *s->d_tokens);
            if (s->d_tokens == NULL) {
                continue;
            }
        }
        if (!s->has_dkv) {
            ts_error kerr;
            if (ts_kv_seq_open(d->kv, NULL, 0, &s->dkv_id, &kerr) != TS_OK) {
                continue;
            }
            s->has_dkv = true;
            s->d_n_computed = 0;
            s->d_n_pending = 0;
        }
        d->cand[n_cand] = s;
        d->want[n_cand] = (int32_t)want;
        d->alive[n_cand] = true;
        n_cand++;
        budget -= want;
    }
    if (n_cand == 0) {
        return;
    }
    catch_up(e, n_cand);
    extend(e, n_cand);
}

ts_status ts_engine_draft_check(const ts_engine *e, ts_error *err) {
    const struct ts_draft *d = e->draft;
    if (d == NULL) {
        return TS_OK;
    }
    ts_status st = ts_kv_check(d->kv, err);
    if (st != TS_OK) {
        return st;
    }
    uint32_t n_open = 0;
    for (int64_t i = 0; i < e->n_running; i++) {
        const seq *s = e->running[i];
        if (!s->has_dkv) {
            continue;
        }
        n_open++;
        ts_kv_seq_info info;
        st = ts_kv_seq_get_info(d->kv, s->dkv_id, &info, err);
        if (st != TS_OK) {
            return st;
        }
        if (info.n_committed != (uint32_t)s->d_n_computed ||
            info.n_tokens != (uint32_t)(s->d_n_computed + s->d_n_pending) ||
            s->d_n_computed > s->n_tokens || s->d_n_ready > e->cfg.draft_max) {
            return ts_error_set(err, TS_ERR_STATE,
                                "draft cache of sequence %d of request %llu: %u tokens, %u "
                                "committed, where the sequence says %d computed + %d pending "
                                "(of its %d tokens)",
                                s->index, (unsigned long long)s->req->id, info.n_tokens,
                                info.n_committed, s->d_n_computed, s->d_n_pending, s->n_tokens);
        }
    }
    for (const seq *s = e->wait_head; s != NULL; s = s->next) {
        if (s->has_dkv) {
            return ts_error_set(err, TS_ERR_STATE,
                                "a waiting sequence of request %llu holds a draft cache",
                                (unsigned long long)s->req->id);
        }
    }
    ts_kv_stats ks;
    ts_kv_get_stats(d->kv, &ks);
    if (ks.n_seqs != n_open || (n_open == 0 && ks.n_used != 0)) {
        return ts_error_set(err, TS_ERR_STATE,
                            "the draft cache has %u sequences open and %u blocks used where %u "
                            "running sequences hold one",
                            ks.n_seqs, ks.n_used, n_open);
    }
    return TS_OK;
}
