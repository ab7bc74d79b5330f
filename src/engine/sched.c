/*
 * sched.c — one engine step: pick the work, run one forward pass, sample.
 *
 * Budget per step: max_batch_tokens tokens and max_seqs sequences.
 *  1. Running sequences, oldest admission first: each gets its remaining tokens (1 when
 *     decoding, a chunk when its prompt is still being prefilled) within the budget. When the
 *     KV pool cannot take them, the most recently admitted running sequence is preempted
 *     (blocks released, sequence back to the front of the waiting queue) until it can — or
 *     the sequence itself is the most recent one and waits.
 *  2. Waiting sequences, first come first served, while the budget, the sequence limit and
 *     the KV pool allow: open a KV sequence, take the longest cached prefix, schedule the
 *     first chunk of the rest.
 *  3. One runner step over all scheduled tokens; commit their K/V; sequences that reached the
 *     end of their known tokens sample one token (a request with n > 1 forks its n - 1
 *     siblings at its first sample, sharing the prompt's blocks).
 *
 * Speculative decoding (docs/speculative.md): a decoding sequence may add drafted tokens after
 * its one token (n-gram lookup in its own tokens), while the step has room (spec_step_tokens);
 * they are rows of the same step, each with its logits. Sampling then walks the rows in order
 * exactly as plain decoding would sample token after token, and stops at the first sampled
 * token that differs from the draft: the drafts before it are accepted (their K/V committed),
 * the rest are dropped from the cache (ts_kv_seq_drop) as if never appended.
 */
#include "engine/engine_internal.h"

#include <string.h>

#include "util/error.h"

typedef struct step {
    int64_t nb; /* tokens */
    int64_t ns; /* sequences */
    int64_t no; /* outputs */
} step;

static void waiting_push_front(ts_engine *e, seq *s) {
    s->next = e->wait_head;
    e->wait_head = s;
    if (e->wait_tail == NULL) {
        e->wait_tail = s;
    }
    e->n_waiting++;
}

static seq *waiting_pop(ts_engine *e) {
    seq *s = e->wait_head;
    e->wait_head = s->next;
    if (e->wait_head == NULL) {
        e->wait_tail = NULL;
    }
    s->next = NULL;
    e->n_waiting--;
    return s;
}

static void preempt(ts_engine *e, seq *s) {
    request *r = s->req;
    ts_engine_unlink_seq(e, s);
    ts_engine_release_kv(e, s);
    if (r->fork_reserved && !r->forked) {
        e->n_pending_forks -= r->n - 1;
        r->fork_reserved = false;
    }
    waiting_push_front(e, s);
    e->n_preemptions++;
}

/* Performs the copy-on-write copies the last append asked for. */
static ts_status do_copies(ts_engine *e, ts_error *err) {
    uint32_t n = 0;
    const ts_kv_copy *c = ts_kv_copies(e->kv, &n);
    for (uint32_t i = 0; i < n; i++) {
        ts_status st = ts_runner_copy_block(e->runner, c[i].pool, c[i].src, c[i].dst, err);
        if (st != TS_OK) {
            return st;
        }
    }
    return TS_OK;
}

/* Copies seq's block table of pool into row (max_blk entries, -1 padded). */
static void copy_table(const ts_engine *e, ts_kv_pool pool, uint32_t kv_id, int32_t *row) {
    uint32_t n_blk = 0;
    const int32_t *table = ts_kv_seq_block_table(e->kv, pool, kv_id, &n_blk);
    memcpy(row, table, n_blk * sizeof(int32_t));
    for (int64_t j = n_blk; j < e->max_blk; j++) {
        row[j] = -1;
    }
}

/* Adds s's next `chunk` tokens (just appended; their slots already in b_slots[nb..]) to the
 * batch; the last s->n_draft of them are drafts, each with an output row. */
static void add_to_batch(ts_engine *e, step *b, seq *s, int32_t chunk) {
    int64_t si = b->ns++;
    e->b_seqs[si] = s;
    s->batch_chunk = chunk;
    for (int32_t t = 0; t < chunk; t++) {
        int32_t pos = s->n_computed + t;
        e->b_tokens[b->nb] = s->tokens[pos];
        e->b_pos[b->nb] = pos;
        e->b_seq[b->nb] = (int32_t)si;
        if (e->swa_pool) {
            /* An appended position is inside the window, so it has a slot. */
            ts_error ignored;
            ts_kv_seq_slot(e->kv, TS_KV_POOL_SWA, s->kv_id, (uint32_t)pos, &e->b_slots_swa[b->nb],
                           &ignored);
        }
        b->nb++;
    }
    copy_table(e, TS_KV_POOL_FULL, s->kv_id, e->b_table + si * e->max_blk);
    if (e->swa_pool) {
        copy_table(e, TS_KV_POOL_SWA, s->kv_id, e->b_table_swa + si * e->max_blk);
    }
    e->b_len[si] = s->n_computed + chunk;
    if (s->n_computed + chunk - s->n_draft == s->n_tokens) {
        s->batch_out = (int32_t)b->no;
        for (int32_t j = s->n_draft; j >= 0; j--) {
            e->b_out[b->no++] = (int32_t)(b->nb - 1 - j);
        }
    } else {
        s->batch_out = -1;
    }
}

/* Drafts for s, a decoding sequence, written after its tokens: at most `room` of them (and what
 * the step's speculation budget, the request and the sequence's own limits allow); 0 when none
 * is worth verifying. A draft stops before a token its grammar refuses. */
static int32_t propose_drafts(ts_engine *e, seq *s, int64_t room) {
    const request *r = s->req;
    if (s->ngram == NULL || (s->index == 0 && r->n > 1 && !r->forked)) {
        return 0;
    }
    if (s->spec_pause > 0) { /* its last drafts failed: plain steps for a while */
        s->spec_pause--;
        return 0;
    }
    int64_t want = s->draft_len;
    int64_t left = (int64_t)r->max_tokens - s->n_generated - 1; /* the last token is sampled */
    int64_t ctx_left = e->cfg.n_ctx - s->n_tokens;
    want = want < room ? want : room;
    want = want < e->spec_left ? want : e->spec_left;
    want = want < left ? want : left;
    want = want < ctx_left ? want : ctx_left;
    if (want < e->cfg.draft_min) {
        return 0;
    }
    int32_t *out = s->tokens + s->n_tokens;
    int32_t n = e->draft != NULL
                    ? ts_engine_draft_take(e, s, out, (int32_t)want)
                    : ts_ngram_propose(s->ngram, s->tokens, s->n_tokens, out, (int32_t)want);
    if (n > 0 && s->gm != NULL) {
        ts_gmatch *g = ts_gmatch_clone(s->gm);
        int32_t ok = 0;
        while (g != NULL && ok < n && ts_gmatch_accept_token(g, e->gvocab, out[ok])) {
            ok++;
        }
        ts_gmatch_free(g);
        n = ok;
    }
    if (n < e->cfg.draft_min) {
        return 0;
    }
    e->spec_left -= n;
    return n;
}

static ts_status schedule_running(ts_engine *e, step *b, ts_error *err) {
    int64_t budget_left = e->cfg.max_batch_tokens - b->nb;
    for (int64_t i = 0; i < e->n_running && budget_left > 0;) {
        seq *s = e->running[i];
        int32_t remaining = s->n_tokens - s->n_computed;
        int32_t chunk = remaining < budget_left ? remaining : (int32_t)budget_left;
        s->n_draft = remaining == 1 ? propose_drafts(e, s, budget_left - 1) : 0;
        for (;;) {
            ts_error kerr;
            ts_status st = ts_kv_append(e->kv, s->kv_id, s->tokens + s->n_computed,
                                        (uint32_t)(chunk + s->n_draft), e->b_slots + b->nb, &kerr);
            if (st == TS_OK) {
                break;
            }
            if (st == TS_ERR_LIMIT && s->n_draft > 0) { /* drafts never preempt anyone */
                e->spec_left += s->n_draft;
                s->n_draft = 0;
                continue;
            }
            if (st != TS_ERR_LIMIT) {
                *err = kerr;
                return st;
            }
            seq *victim = e->running[e->n_running - 1];
            preempt(e, victim);
            if (victim == s) {
                s = NULL;
                break;
            }
        }
        if (s == NULL) {
            break;
        }
        ts_status st = do_copies(e, err);
        if (st != TS_OK) {
            return st;
        }
        add_to_batch(e, b, s, chunk + s->n_draft);
        budget_left -= chunk + s->n_draft;
        i++;
    }
    return TS_OK;
}

static ts_status admit_waiting(ts_engine *e, step *b, ts_error *err) {
    const ts_engine_config *c = &e->cfg;
    while (e->wait_head != NULL && b->nb < c->max_batch_tokens && b->ns < c->max_seqs) {
        seq *s = e->wait_head;
        request *r = s->req;
        bool reserve = s->index == 0 && r->n > 1 && !r->forked && !r->fork_reserved;
        int64_t need = 1 + (reserve ? r->n - 1 : 0);
        if (e->n_running + e->n_pending_forks + need > c->max_seqs) {
            break;
        }
        int64_t budget_left = c->max_batch_tokens - b->nb;
        bool ok = false;
        uint32_t n_cached = 0;
        ts_status st =
            ts_kv_can_admit(e->kv, r->params.cache_salt, r->params.cache_salt_len, s->tokens,
                            (uint32_t)s->n_tokens, (uint32_t)s->n_tokens, &ok, &n_cached, err);
        if (st == TS_OK && !ok) {
            /* Not the whole prompt: is there room for its first chunk? */
            int64_t first = n_cached + budget_left;
            uint32_t n_alloc = (uint32_t)(first < s->n_tokens ? first : s->n_tokens);
            st = ts_kv_can_admit(e->kv, r->params.cache_salt, r->params.cache_salt_len, s->tokens,
                                 (uint32_t)s->n_tokens, n_alloc, &ok, NULL, err);
        }
        if (st != TS_OK) {
            return st;
        }
        if (!ok) {
            break; /* first come, first served: wait for blocks */
        }
        waiting_pop(e);
        st = ts_kv_seq_open(e->kv, r->params.cache_salt, r->params.cache_salt_len, &s->kv_id, err);
        if (st == TS_OK) {
            s->has_kv = true;
            st = ts_kv_seq_match_prefix(e->kv, s->kv_id, s->tokens, (uint32_t)s->n_tokens,
                                        &n_cached, err);
        }
        int32_t chunk = 0;
        if (st == TS_OK) {
            s->n_computed = (int32_t)n_cached;
            if (s->index == 0 && s->n_generated == 0 && r->cached_tokens == 0) {
                r->cached_tokens = (int32_t)n_cached;
            }
            int32_t remaining = s->n_tokens - s->n_computed;
            chunk = remaining < budget_left ? remaining : (int32_t)budget_left;
            st = ts_kv_append(e->kv, s->kv_id, s->tokens + s->n_computed, (uint32_t)chunk,
                              e->b_slots + b->nb, err);
        }
        if (st == TS_OK) {
            st = do_copies(e, err);
        }
        if (st == TS_ERR_LIMIT) {
            /* The estimate was optimistic; undo and wait. */
            ts_engine_release_kv(e, s);
            waiting_push_front(e, s);
            break;
        }
        if (st != TS_OK) {
            ts_engine_release_kv(e, s);
            waiting_push_front(e, s);
            return st;
        }
        s->admit_order = ++e->admit_counter;
        s->n_draft = 0;
        e->running[e->n_running++] = s;
        if (reserve) {
            e->n_pending_forks += r->n - 1;
            r->fork_reserved = true;
        }
        add_to_batch(e, b, s, chunk);
    }
    return TS_OK;
}

/* Makes the n - 1 siblings of a request's first sequence, sharing its blocks. */
static ts_status fork_siblings(ts_engine *e, seq *parent, ts_error *err) {
    request *r = parent->req;
    for (int32_t i = 1; i < r->n; i++) {
        seq *c = ts_engine_seq_new(e, r, i, parent->tokens, parent->n_tokens, err);
        if (c == NULL) {
            return err->status;
        }
        r->seqs[i] = c;
        ts_status st = ts_kv_seq_fork(e->kv, parent->kv_id, &c->kv_id, err);
        if (st != TS_OK) {
            return st;
        }
        c->has_kv = true;
        c->n_computed = parent->n_computed;
        c->admit_order = ++e->admit_counter;
        e->running[e->n_running++] = c;
    }
    r->forked = true;
    if (r->fork_reserved) {
        e->n_pending_forks -= r->n - 1;
        r->fork_reserved = false;
    }
    return TS_OK;
}

/* Samples one token for s from logits row `row`, masked here with the mask computed for `from`
 * when s is constrained (s itself, or for the siblings of a fork their parent, whose grammar
 * state they share; masking twice changes nothing); true when s's request was freed. The token
 * goes to *picked (-1 when none was emitted). */
static bool sample_one(ts_engine *e, seq *s, float *row, const seq *from, int32_t draft,
                       int32_t *picked) {
    ts_sample_info info;
    int32_t token = -1;
    *picked = -1;
    ts_error err;
    if (s->gm != NULL && from->g_job >= 0 && ts_engine_mask_apply(e, from, row) == 0) {
        if (ts_gmatch_is_accepting(s->gm) && !ts_gmatch_mask_gave_up(from->gm)) {
            /* Complete, and the model has no end-of-generation token to say so. */
            return ts_engine_finish_seq(e, s, TS_FINISH_STOP, NULL);
        }
        if (ts_gmatch_hit_limit(from->gm)) {
            /* Not the grammar's dead end: every way on opens more parser stacks than the
             * matcher holds (a large anyOf / alternation open at one point), or the mask took
             * more work than one token may (and was given up, even where the output could end
             * here). */
            char msg[320];
            ts_gmatch_limit_message(msg, sizeof msg);
            return ts_engine_finish_seq(e, s, TS_FINISH_ERROR, msg);
        }
        return ts_engine_finish_seq(e, s, TS_FINISH_ERROR,
                                    "grammar: no token of the vocabulary can continue the output");
    }
    /* The log-softmax facts cost a pass of exp over the vocabulary (about 1 ms per token at
     * 262k tokens): only for requests that report them. */
    ts_sample_info *want = s->req->params.logprobs ? &info : NULL;
    if (ts_sampler_sample_draft(s->sampler, row, draft, &token, want, &err) != TS_OK) {
        return ts_engine_finish_seq(e, s, TS_FINISH_ERROR, err.msg);
    }
    if (s->gm != NULL && !ts_gmatch_accept_token(s->gm, e->gvocab, token)) {
        return ts_engine_finish_seq(e, s, TS_FINISH_ERROR,
                                    "grammar: the sampled token leaves the grammar");
    }
    *picked = token;
    return ts_engine_emit_token(e, s, token, want);
}

/* Samples s's rows for its n_draft drafts as plain decoding would sample token after token,
 * until a sampled token differs from the draft (or the sequence finishes); keeps the K/V of the
 * accepted drafts and drops the rest. True when s's request was freed. */
static bool verify_drafts(ts_engine *e, seq *s) {
    int32_t k = s->n_draft;
    s->n_draft = 0;
    int32_t *draft = e->draft_buf;
    memcpy(draft, s->tokens + s->n_tokens, (size_t)k * sizeof *draft); /* emitting overwrites */
    int32_t accepted = 0;
    e->spec_steps++;
    e->spec_drafted += (uint64_t)k;
    for (int32_t i = 0; i <= k; i++) {
        float *row = e->logits + (size_t)(s->batch_out + i) * (size_t)e->n_vocab;
        if (i > 0 && s->gm != NULL) {
            ts_engine_mask_recompute(e, s);
        }
        int32_t token;
        /* Rejection sampling (spec_rejection) takes the draft with its probability instead of
         * drawing exactly what plain decoding draws. */
        int32_t d = e->cfg.spec_rejection && i < k ? draft[i] : -1;
        if (sample_one(e, s, row, s, d, &token)) {
            e->spec_accepted += (uint64_t)accepted;
            return true; /* s is freed */
        }
        if (s->finish != TS_FINISH_NONE || i == k || token != draft[i]) {
            break;
        }
        /* Accepted: its K/V (computed this step, appended, so this cannot fail) joins the
         * sequence now, before the next row may finish it, as plain decoding commits a token
         * in the step that samples its successor. */
        ts_error ignored;
        ts_kv_seq_commit(e->kv, s->kv_id, 1, &ignored);
        s->n_computed++;
        accepted++;
    }
    e->spec_accepted += (uint64_t)accepted;
    if (e->draft != NULL) {
        ts_engine_draft_note(s, k, accepted);
    }
    if (s->finish != TS_FINISH_NONE) {
        return false; /* its blocks are released already */
    }
    ts_error ignored;
    ts_kv_seq_drop(e->kv, s->kv_id, (uint32_t)(k - accepted), &ignored);
    /* The next draft: longer after a fully accepted one, as long as was accepted otherwise. */
    int32_t cap = s->req->params.draft_max > 0 && s->req->params.draft_max < e->cfg.draft_max
                      ? s->req->params.draft_max
                      : e->cfg.draft_max;
    int32_t next = accepted == k ? 2 * k : accepted + 1;
    s->draft_len = next < e->cfg.draft_min ? e->cfg.draft_min : next > cap ? cap : next;
    /* A draft that gained nothing cost a step several tokens wide: after failures in a row,
     * wait 2, 4, ... 64 plain steps before drafting again (text that does not repeat its
     * input stays within a few percent of plain decoding). */
    if (accepted == 0) {
        s->spec_fails = s->spec_fails < 6 ? s->spec_fails + 1 : 6;
        s->spec_pause = 1 << s->spec_fails;
    } else {
        s->spec_fails = 0;
    }
    return false;
}

static void sample_outputs(ts_engine *e, const step *b) {
    for (int64_t si = 0; si < b->ns; si++) {
        seq *s = e->b_seqs[si];
        if (s == NULL || s->batch_out < 0) {
            continue;
        }
        float *row = e->logits + (size_t)s->batch_out * (size_t)e->n_vocab;
        request *r = s->req;
        if (s->index == 0 && r->n > 1 && !r->forked) {
            ts_error err;
            if (fork_siblings(e, s, &err) != TS_OK) {
                /* The request ends with the error: it now has only the sequences that
                 * were made, and each of them finishes. */
                int32_t made = 0;
                while (made < r->n && r->seqs[made] != NULL) {
                    made++;
                }
                if (r->fork_reserved) {
                    e->n_pending_forks -= r->n - 1;
                    r->fork_reserved = false;
                }
                r->n = made;
                r->forked = true;
                bool done = false;
                for (int32_t i = 0; i < made && !done; i++) {
                    if (r->seqs[i]->finish == TS_FINISH_NONE) {
                        done = ts_engine_finish_seq(e, r->seqs[i], TS_FINISH_ERROR, err.msg);
                    }
                }
                continue;
            }
            int32_t n = r->n;
            int32_t picked;
            for (int32_t i = 0; i < n; i++) {
                if (sample_one(e, r->seqs[i], row, s, -1, &picked)) {
                    break; /* request freed: it was the last live sequence */
                }
            }
            continue;
        }
        if (s->n_draft > 0) {
            verify_drafts(e, s);
            continue;
        }
        int32_t picked;
        sample_one(e, s, row, s, -1, &picked);
    }
}

/* Draft tokens the coming step may hold: what spec_step_tokens leaves after the running
 * sequences' own tokens and the waiting ones' (a full batch leaves none). */
static int64_t step_spec_room(const ts_engine *e) {
    int64_t base = e->n_waiting > 0 ? e->cfg.max_batch_tokens : 0;
    for (int64_t i = 0; i < e->n_running && base < e->cfg.spec_step_tokens; i++) {
        base += e->running[i]->n_tokens - e->running[i]->n_computed;
    }
    int64_t room = e->cfg.spec_step_tokens - base;
    int64_t out_room = e->max_out - e->n_running;
    room = room < out_room ? room : out_room;
    return room > 0 ? room : 0;
}

ts_status ts_engine_schedule_and_run(ts_engine *e, bool *busy, ts_error *err) {
    step b = {0, 0, 0};
    e->spec_left = e->cfg.draft_max > 0 ? step_spec_room(e) : 0;
    if (e->draft != NULL) {
        ts_engine_draft_run(e); /* the draft model's proposals, before the step takes them */
    }
    ts_status st = schedule_running(e, &b, err);
    if (st == TS_OK) {
        st = admit_waiting(e, &b, err);
    }
    if (busy != NULL) {
        *busy = b.nb > 0;
    }
    if (st == TS_OK && b.nb == 0) {
        return TS_OK;
    }
    if (st == TS_OK) {
        st = ts_engine_masks_begin(e, b.ns, err);
    }
    if (st == TS_OK) {
        ts_batch batch = {
            .n_tokens = b.nb,
            .tokens = e->b_tokens,
            .pos = e->b_pos,
            .seq = e->b_seq,
            .slots = e->b_slots,
            .n_seqs = b.ns,
            .block_table = e->b_table,
            .seq_len = e->b_len,
            .n_outputs = b.no,
            .outputs = e->b_out,
            .slots_swa = e->swa_pool ? e->b_slots_swa : NULL,
            .block_table_swa = e->swa_pool ? e->b_table_swa : NULL,
        };
        if (b.no == 0) {
            /* Prefill chunks only: the graph still needs one output row. */
            batch.n_outputs = 1;
            e->b_out[0] = (int32_t)(b.nb - 1);
        }
        st = ts_runner_run(e->runner, &batch, e->logits, NULL, err);
        ts_engine_masks_wait(e);
    }
    if (st != TS_OK) {
        /* Every sequence of this step fails; the engine itself goes on. */
        for (int64_t si = 0; si < b.ns; si++) {
            seq *s = e->b_seqs[si];
            if (s != NULL && s->finish == TS_FINISH_NONE) {
                request *r = s->req;
                for (int64_t sj = si + 1; sj < b.ns; sj++) {
                    if (e->b_seqs[sj] != NULL && e->b_seqs[sj]->req == r) {
                        e->b_seqs[sj] = NULL; /* freed with its request below */
                    }
                }
                bool done = false;
                for (int32_t i = 0; !done && i < r->n; i++) {
                    if (r->seqs[i] != NULL && r->seqs[i]->finish == TS_FINISH_NONE) {
                        done = ts_engine_finish_seq(e, r->seqs[i], TS_FINISH_ERROR, err->msg);
                    }
                }
            }
        }
        return st;
    }
    e->n_steps++;
    for (int64_t si = 0; si < b.ns; si++) {
        seq *s = e->b_seqs[si];
        /* The chunk was appended this step, so committing it cannot fail. */
        ts_error ignored;
        int32_t real = s->batch_chunk - s->n_draft; /* drafts are committed once verified */
        ts_kv_seq_commit(e->kv, s->kv_id, (uint32_t)real, &ignored);
        s->n_computed += real;
        if (s->n_generated == 0) {
            e->prompt_computed += (uint64_t)real;
        }
    }
    sample_outputs(e, &b);
    return TS_OK;
}
