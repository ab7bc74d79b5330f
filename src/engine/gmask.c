/*
 * gmask.c — grammars in the engine: compiling a request's grammar at submit, the vocabulary
 * trie the masks walk, and computing a step's token masks while its forward pass runs.
 *
 * Each constrained sequence has its own matcher (seq.gm), advanced by every token it samples;
 * a preempted sequence keeps it (its tokens are recomputed, its grammar state is still right),
 * and the n - 1 siblings of a request start from the grammar's initial state, which is the
 * parent's at the fork (the fork comes before the first sample).
 *
 * Overlap: a sequence's next mask depends only on the tokens it has already accepted, so the
 * masks of a step are known before its forward pass. ts_engine_masks_begin hands them to a
 * small pool of mask threads and returns; the step thread runs the forward pass; then
 * ts_engine_masks_wait takes any mask no thread has started yet and waits for the rest. Masks
 * are per sequence and the grammar and vocabulary are read only, so the threads share nothing
 * but the job counter. The time the step thread waits after its forward pass is what grammars
 * add to a step (ts_engine_stats.grammar_wait_ms).
 */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"

/* Mask threads: at most this many, and never more than the machine's cores minus one. */
#define GPOOL_MAX_THREADS 4

typedef struct gpool {
    ts_engine *e;
    pthread_t th[GPOOL_MAX_THREADS];
    int n_th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t epoch; /* bumped per batch of jobs */
    bool quit;
    int32_t next, n_done; /* jobs taken / finished of e->n_g_jobs */
    uint64_t ns;          /* mask time of this batch, all threads */
} gpool;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

ts_status ts_engine_gvocab_build(const ts_tokenizer *tok, int32_t n_vocab, ts_gvocab **out,
                                 ts_error *err) {
    int32_t n_tok = (int32_t)ts_tokenizer_n_vocab(tok);
    const char **pieces = malloc((size_t)n_vocab * sizeof *pieces);
    size_t *lens = malloc((size_t)n_vocab * sizeof *lens);
    int32_t *eog = malloc((size_t)n_vocab * sizeof *eog);
    if (pieces == NULL || lens == NULL || eog == NULL) {
        free(pieces);
        free(lens);
        free(eog);
        return ts_error_set(err, TS_ERR_NOMEM, "grammar: out of memory for the vocabulary");
    }
    int32_t n_eog = 0;
    ts_status st = TS_OK;
    for (int32_t t = 0; t < n_vocab && st == TS_OK; t++) {
        pieces[t] = "";
        lens[t] = 0;
        if (t >= n_tok) {
            continue;
        }
        if (ts_tokenizer_is_eog(tok, t)) {
            eog[n_eog++] = t;
        }
        ts_token_type type = ts_tokenizer_token_type(tok, t);
        if (type == TS_TOKEN_TYPE_CONTROL || type == TS_TOKEN_TYPE_UNKNOWN ||
            type == TS_TOKEN_TYPE_UNUSED) {
            continue; /* never text a grammar could match */
        }
        st = ts_tokenizer_token_to_piece(tok, t, false, &pieces[t], &lens[t], err);
    }
    if (st == TS_OK) {
        st = ts_gvocab_create(pieces, lens, n_vocab, eog, n_eog, out, err);
    }
    free(pieces);
    free(lens);
    free(eog);
    return st;
}

ts_status ts_engine_grammar_compile(ts_engine *e, const ts_request_params *p, ts_grammar **out,
                                    ts_error *err) {
    *out = NULL;
    if (p->grammar_kind == TS_GRAMMAR_NONE) {
        return TS_OK;
    }
    const char *text = p->grammar;
    size_t len = p->grammar_len;
    ts_status st;
    ts_grammar *g = NULL;
    /* Grammars and schemas come from clients: the compile stops when the caller's cancel says
     * so (the client left, the server shuts down) or after compile_timeout_ms (0: no limit). */
    ts_stop stop = {.cancel = p->cancel, .user = p->cancel_user};
    if (p->compile_timeout_ms > 0) {
        const int64_t max_ms = INT64_MAX / 4000000; /* far past any real limit, no overflow */
        int64_t ms = p->compile_timeout_ms < max_ms ? p->compile_timeout_ms : max_ms;
        stop.deadline_ns = ts_now_ns() + ms * 1000000;
    }
    switch (p->grammar_kind) {
    case TS_GRAMMAR_GBNF:
    case TS_GRAMMAR_JSON_SCHEMA:
        if (text == NULL) {
            return ts_error_set(err, TS_ERR_INVALID_ARG, "engine: grammar_kind %d without grammar",
                                (int)p->grammar_kind);
        }
        if (len == 0) {
            len = strlen(text);
        }
        st = p->grammar_kind == TS_GRAMMAR_GBNF
                 ? ts_grammar_from_gbnf_ex(text, len, "root", &stop, &g, err)
                 : ts_grammar_from_schema_ex(text, len, &stop, &g, err);
        break;
    case TS_GRAMMAR_JSON_OBJECT:
        st = ts_grammar_from_schema_ex("{\"type\":\"object\"}", 17, &stop, &g, err);
        break;
    default:
        return ts_error_set(err, TS_ERR_INVALID_ARG, "engine: unknown grammar_kind %d",
                            (int)p->grammar_kind);
    }
    if (st != TS_OK) {
        return st;
    }
    pthread_mutex_lock(&e->gmu);
    if (e->gvocab == NULL) {
        st = ts_engine_gvocab_build(e->tok, e->n_vocab, &e->gvocab, err);
    }
    pthread_mutex_unlock(&e->gmu);
    if (st != TS_OK) {
        ts_grammar_free(g);
        return st;
    }
    *out = g;
    return TS_OK;
}

/* Runs jobs until none is left; called with p->mu held, returns with it held. */
static void run_jobs(gpool *p) {
    ts_engine *e = p->e;
    while (p->next < e->n_g_jobs) {
        int32_t k = p->next++;
        pthread_mutex_unlock(&p->mu);
        seq *s = e->g_jobs[k];
        uint64_t t0 = now_ns();
        e->g_counts[k] = ts_gmatch_mask(s->gm, e->gvocab, e->g_masks + (size_t)k * e->g_words);
        uint64_t dt = now_ns() - t0;
        pthread_mutex_lock(&p->mu);
        p->ns += dt;
        if (++p->n_done == e->n_g_jobs) {
            pthread_cond_broadcast(&p->done);
        }
    }
}

static void *gpool_main(void *arg) {
    gpool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->epoch == seen) {
            pthread_cond_wait(&p->go, &p->mu);
        }
        if (p->quit) {
            break;
        }
        seen = p->epoch;
        run_jobs(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void gpool_destroy(gpool *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_th; i++) {
        pthread_join(p->th[i], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p);
}

/* The pool and the mask buffers, made by the first step that needs them. */
static ts_status gpool_start(ts_engine *e, ts_error *err) {
    size_t S = (size_t)e->cfg.max_seqs;
    e->g_words = ((size_t)e->n_vocab + 31) / 32;
    e->g_masks = malloc(S * e->g_words * sizeof(uint32_t));
    e->g_counts = malloc(S * sizeof(int32_t));
    e->g_jobs = malloc(S * sizeof(seq *));
    gpool *p = calloc(1, sizeof *p);
    if (e->g_masks == NULL || e->g_counts == NULL || e->g_jobs == NULL || p == NULL) {
        free(p);
        return ts_error_set(err, TS_ERR_NOMEM, "engine: out of memory for grammar masks");
    }
    p->e = e;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cores > 1 ? (int)(cores - 1) : 1;
    want = want < GPOOL_MAX_THREADS ? want : GPOOL_MAX_THREADS;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&p->th[i], NULL, gpool_main, p) != 0) {
            break; /* fewer threads: the step thread takes what they leave */
        }
        p->n_th++;
    }
    e->gpool = p;
    return TS_OK;
}

ts_status ts_engine_masks_begin(ts_engine *e, int64_t ns, ts_error *err) {
    int32_t n = 0;
    for (int64_t si = 0; si < ns; si++) {
        seq *s = e->b_seqs[si];
        s->g_job = -1;
        if (s->gm != NULL && s->batch_out >= 0) {
            n++;
        }
    }
    e->n_g_jobs = 0;
    if (n == 0) {
        return TS_OK;
    }
    if (e->gpool == NULL) {
        ts_status st = gpool_start(e, err);
        if (st != TS_OK) {
            return st;
        }
    }
    gpool *p = e->gpool;
    pthread_mutex_lock(&p->mu);
    for (int64_t si = 0; si < ns; si++) {
        seq *s = e->b_seqs[si];
        if (s->gm != NULL && s->batch_out >= 0) {
            s->g_job = e->n_g_jobs;
            e->g_jobs[e->n_g_jobs++] = s;
        }
    }
    p->next = 0;
    p->n_done = 0;
    p->ns = 0;
    p->epoch++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    return TS_OK;
}

void ts_engine_masks_wait(ts_engine *e) {
    if (e->n_g_jobs == 0) {
        return;
    }
    gpool *p = e->gpool;
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&p->mu);
    run_jobs(p);
    while (p->n_done < e->n_g_jobs) {
        pthread_cond_wait(&p->done, &p->mu);
    }
    e->g_mask_ns += p->ns;
    pthread_mutex_unlock(&p->mu);
    e->g_wait_ns += now_ns() - t0;
    e->g_n_masks += (uint64_t)e->n_g_jobs;
}

void ts_engine_mask_recompute(ts_engine *e, seq *s) {
    uint64_t t0 = now_ns();
    e->g_counts[s->g_job] =
        ts_gmatch_mask(s->gm, e->gvocab, e->g_masks + (size_t)s->g_job * e->g_words);
    uint64_t dt = now_ns() - t0;
    e->g_mask_ns += dt;
    e->g_wait_ns += dt;
    e->g_n_masks++;
}

int32_t ts_engine_mask_apply(ts_engine *e, const seq *s, float *row) {
    const uint32_t *bits = e->g_masks + (size_t)s->g_job * e->g_words;
    for (size_t w = 0; w < e->g_words; w++) {
        uint32_t m = bits[w];
        if (m == 0xFFFFFFFFu) {
            continue;
        }
        size_t base = w * 32;
        size_t end = base + 32 < (size_t)e->n_vocab ? base + 32 : (size_t)e->n_vocab;
        for (size_t t = base; t < end; t++) {
            if (!(m >> (t - base) & 1u)) {
                row[t] = -INFINITY;
            }
        }
    }
    return e->g_counts[s->g_job];
}

void ts_engine_grammar_destroy(ts_engine *e) {
    gpool_destroy(e->gpool);
    e->gpool = NULL;
    ts_gvocab_free(e->gvocab);
    e->gvocab = NULL;
    free(e->g_masks);
    free(e->g_counts);
    free(e->g_jobs);
    pthread_mutex_destroy(&e->gmu);
}
