/*
 * cmd_bench.c — `tessera bench`: prompt-processing and generation speed, llama-bench style.
 *
 * Timing rules (as llama-bench): random token ids; one warm-up run; the KV cache is cleared
 * between repetitions; the prompt test (pp N) is ONE forward pass over N tokens; the
 * generation test (tg N) is N single-token forward passes; t/s = tokens / seconds, reported
 * as mean ± standard deviation over the repetitions. Sampling is not timed (as llama-bench).
 *
 * Depth (-d / --n-depth 4096,16384, llama-bench's option): the pp and tg tests run after a
 * context of d tokens, so that attention reads d cached keys per token (what long contexts
 * cost, and where the KV cache type matters). The d tokens are prefilled once per test, not
 * timed, into sequence 0; each repetition forks it (sharing its blocks, copy-on-write), times
 * the test on the fork at positions d.., and drops the fork. Tests are named "tg128 @ d4096".
 *
 * Batched mode (--batch 1,4,16,32) follows llama-batched-bench: B sequences each prefill PP
 * tokens (one pass per sequence, as B requests arriving together would be chunked), then
 * decode TG tokens together (B tokens per pass); it reports prompt, generation and total t/s.
 *
 * Generation is memory-bound: each token reads every weight once, so GB/s = weight bytes x
 * t/s, shown as a share of the machine's read bandwidth measured right after the test with the
 * test's threads (a shared host's bandwidth drifts from minute to minute, so a figure taken once
 * at the start can make a test look faster or slower than the memory allowed). A mixture of experts
 * reads only its tokens' experts: the bytes are the model's active bytes (n_expert_used of n_expert
 * of the expert tensors), a lower bound for one sequence.
 *
 * Tensor parallelism (--tp N): the forward is a group of N in-process shards set up as for
 * `tessera run --tp` (tp_setup.h), each with threads / N CPU threads; the tables add the
 * collectives' payload per token and rank (KiB a rank contributed to all-reduces and
 * all-gathers, warm-up included, divided by the tokens computed). One process per rank
 * (--tp-mpi) is not offered here: measure it with `mpirun ... tessera run --tp-mpi`.
 *
 * Speculative decoding (--draft N, or --draft-max N): instead of the pp/tg tests, the same
 * greedy generation of a real prompt without and with n-gram drafts of up to N tokens,
 * tokens/s of both, the speed-up, drafted / accepted tokens, and a check that both outputs are
 * the same tokens (bench_spec.c). -p TEXT / -f FILE give the prompt (default: a code text to
 * repeat with one change), -n N the tokens generated (default 256).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_spec.h"
#include "commands.h"
#include "common.h"

#define MAX_LIST 16

typedef struct bench_opts {
    ts_cli_opts co; /* the model options (backend, overrides, --tp, KV type, ...) */
    int64_t pp[MAX_LIST];
    int n_pp;
    int64_t tg[MAX_LIST];
    int n_tg;
    int64_t batch[MAX_LIST];
    int n_batch;
    int64_t depth[MAX_LIST]; /* -d: context depths of the pp/tg tests (default one: 0) */
    int n_depth;
    int reps;
    int threads[MAX_LIST];
    int n_threads;
    const char *format;    /* md, json, csv */
    bool engine;           /* --engine: batched runs through the scheduler */
    char kernels[512];     /* the CPU kernel choice (ts_context_info.kernels) */
    char kv_k[8], kv_v[8]; /* the KV cache types (ts_context_info.kv_type_k / _v) */
    double bandwidth;      /* measured read bandwidth, GB/s (md output; 0: not measured) */
} bench_opts;

typedef struct result {
    const char *test_kind; /* "pp", "tg", "batch" */
    int64_t n;
    int64_t depth; /* pp / tg: cached tokens before the test */
    int64_t pp, tg, b;
    int threads;
    double mean, sd;            /* t/s */
    double mean2, sd2;          /* batch: generation t/s */
    double total;               /* batch: total t/s */
    double hit_rate;            /* engine: prefix-cache hit rate */
    uint32_t kv_peak, kv_total; /* engine: peak KV blocks used, blocks allocated */
    int tp;                     /* shards */
    double coll_kib;            /* tp > 1: collective payload KiB per token per rank */
    double bandwidth;           /* tg, md output: read GB/s measured right after (0: none) */
} result;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tessera bench -m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS[,..]]\n"
               "                     [--batch 1,4,16,32 [--pp 128] [--tg 128]] [-o md|json|csv]\n"
               "                     [--backend cpu|ref|cuda|auto] [--device N]\n"
               "                     [--override F=NAME] [--tp N]\n"
               "  -p N[,N..]   prompt lengths (0 to skip)      -n N[,N..]  generation lengths\n"
               "  -r N         repetitions (default 5)          -t N[,N..]  thread counts\n"
               "  -d N[,N..]   --n-depth: run pp/tg after N cached tokens (default 0),\n"
               "               e.g. -d 4096,16384 -n 64 with -ctk/-ctv for the KV cache types\n"
               "  --batch B,.. batched generation (llama-batched-bench style) instead of pp/tg\n"
               "  --engine     with --batch: B requests through the scheduler (half of each\n"
               "               prompt shared), adding prefix-cache hit rate and KV blocks used\n"
               "  --tp N       tensor parallelism: N shards in this process, each with 1/N of\n"
               "               the -t threads; adds collective KiB per token per rank\n"
               "               (in-process only: for MPI use mpirun ... tessera run --tp-mpi)\n"
               "  --draft N    speculative decoding instead of pp/tg: greedy generation of a\n"
               "               prompt that repeats its input, without and with n-gram drafts of\n"
               "               up to N tokens; t/s of both, speed-up, acceptance, and a check\n"
               "               that the outputs are identical. Here -p TEXT / -f FILE is the\n"
               "               prompt (default: a built-in code rewrite), -n N tokens (256)\n");
}

static int parse_list(const char *s, int64_t *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p != '\0' && n < max) {
        char *end = NULL;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > (1 << 20)) {
            return -1;
        }
        out[n++] = v;
        p = end;
        if (*p == ',') {
            p++;
        } else if (*p != '\0') {
            return -1;
        }
    }
    return *p == '\0' ? n : -1;
}

/* ---- memory bandwidth ---- */

typedef struct bw_arg {
    const char *data;
    size_t bytes; /* a multiple of 128 */
    uint64_t sum;
} bw_arg;

/* 32-byte lanes (GCC / Clang vector extension): the read goes through vector loads, as the
 * kernels' do; a scalar loop reads measurably slower on some hosts and would flatter the
 * percentages. */
typedef uint64_t bw_vec __attribute__((vector_size(32)));

static void *bw_worker(void *p) {
    bw_arg *a = p;
    bw_vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (size_t i = 0; i < a->bytes; i += 128) {
        bw_vec v[4];
        memcpy(v, a->data + i, sizeof v);
        s0 += v[0];
        s1 += v[1];
        s2 += v[2];
        s3 += v[3];
    }
    const bw_vec s = s0 + s1 + s2 + s3;
    a->sum = s[0] + s[1] + s[2] + s[3];
    return NULL;
}

/* Read bandwidth in GB/s with n_threads threads over a buffer much larger than the caches. The
 * buffer is asked for in 2 MiB pages, as the weights are read (a model's file mapping gets them
 * from the page cache's large folios, repacked copies by the same advice): in 4 KiB pages the
 * read pays a TLB miss every 4 KiB and measures low, which would flatter the percentages. */
static double measure_bandwidth(int n_threads) {
    const size_t bytes = (size_t)512 << 20;
    char *buf = aligned_alloc((size_t)2 << 20, bytes);
    if (buf == NULL) {
        return 0;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(buf, bytes, MADV_HUGEPAGE); /* advice: without it the read is still measured */
#endif
    memset(buf, 1, bytes);
    if (n_threads > 64) {
        n_threads = 64;
    }
    const size_t share = bytes / (size_t)n_threads / 128 * 128;
    double best = 0;
    pthread_t th[64];
    bw_arg args[64];
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (int t = 0; t < n_threads; t++) {
            args[t] = (bw_arg){buf + share * (size_t)t, share, 0};
            pthread_create(&th[t], NULL, bw_worker, &args[t]);
        }
        uint64_t total = 0;
        for (int t = 0; t < n_threads; t++) {
            pthread_join(th[t], NULL);
            total += args[t].sum;
        }
        double gbs = (double)(share * (size_t)n_threads) / (now_s() - t0) / 1e9;
        if (gbs > best && total != 1) { /* the sum is used, so the reads are not dropped */
            best = gbs;
        }
    }
    free(buf);
    return best;
}

/* ---- one context per test ---- */

typedef struct bench_ctx {
    ts_context *ctx;
    int32_t *tokens, *seq; /* [max_tokens] one step's inputs */
    int8_t *want;          /* [max_tokens] logits wanted */
    int32_t n_vocab;
    uint64_t rng;
} bench_ctx;

static uint32_t next_rand(uint64_t *rng) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return (uint32_t)(*rng >> 11);
}

/* The most resident memory seen while a test's context lived (MB): the weights as the runs
 * hold them, repacked copies included, which the figure taken after the runs, with every
 * context gone, leaves out. */
static double g_run_rss_mb;

static void note_run_rss(void) {
    const double mb = ts_cli_rss_mb(false);
    g_run_rss_mb = mb > g_run_rss_mb ? mb : g_run_rss_mb;
}

/* A context for sequences of up to seq_len tokens, max_seqs of them, steps of max_tokens. The
 * KV cache holds every sequence whole, so nothing is ever evicted. */
static ts_status bench_ctx_create(bench_ctx *r, ts_llm *llm, const bench_opts *o, int threads,
                                  int64_t max_tokens, int64_t max_seqs, int64_t seq_len,
                                  ts_error *err) {
    memset(r, 0, sizeof *r);
    r->n_vocab = ts_llm_n_vocab(llm);
    r->rng = 0x2545F4914F6CDD1Dull;
    ts_context_params p = o->co.ctx;
    p.n_threads = threads;
    p.n_ctx = seq_len;
    p.max_seqs = max_seqs;
    p.max_batch_tokens = max_tokens;
    p.max_outputs = max_seqs;
    p.kv_tokens = (seq_len + 15) / 16 * 16 * max_seqs;
    ts_status st = ts_context_create(llm, &p, &r->ctx, err);
    r->tokens = malloc((size_t)max_tokens * sizeof *r->tokens);
    r->seq = malloc((size_t)max_tokens * sizeof *r->seq);
    r->want = malloc((size_t)max_tokens);
    if (st == TS_OK && (!r->tokens || !r->seq || !r->want)) {
        snprintf(err->msg, sizeof err->msg, "bench: out of memory");
        st = TS_ERR_NOMEM;
    }
    return st;
}

static void bench_ctx_destroy(bench_ctx *r) {
    if (r->ctx != NULL) {
        note_run_rss();
    }
    ts_context_destroy(r->ctx);
    free(r->tokens);
    free(r->seq);
    free(r->want);
}

/* One step: sequences first..first+n_seqs-1 each add `per_seq` random tokens; the logits of
 * each sequence's last token are computed (as a sampler would need them). */
static ts_status run_pass(bench_ctx *r, int64_t first, int64_t n_seqs, int64_t per_seq,
                          ts_error *err) {
    int64_t T = n_seqs * per_seq;
    for (int64_t s = 0; s < n_seqs; s++) {
        for (int64_t t = 0; t < per_seq; t++) {
            int64_t i = s * per_seq + t;
            r->tokens[i] = (int32_t)(next_rand(&r->rng) % (uint32_t)r->n_vocab);
            r->seq[i] = (int32_t)(first + s);
            r->want[i] = t == per_seq - 1;
        }
    }
    ts_decode_batch b = {
        .n_tokens = (int32_t)T, .tokens = r->tokens, .seq = r->seq, .logits = r->want};
    return ts_context_decode(r->ctx, &b, err);
}

static double mean_sd(const double *v, int n, double *sd) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        s += v[i];
    }
    double mean = s / n;
    for (int i = 0; i < n; i++) {
        s2 += (v[i] - mean) * (v[i] - mean);
    }
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
    return mean;
}

/* Collective payload rank 0 contributed so far (0 without tensor parallelism). Taken after a
 * context is made, so that the group's handshake is not counted. */
static uint64_t coll_bytes(const ts_context *ctx) {
    ts_tp_stats s;
    ts_context_get_tp_stats(ctx, &s);
    return s.payload_bytes;
}

static double kib_per_token(uint64_t bytes, double tokens) {
    return tokens > 0 ? (double)bytes / 1024.0 / tokens : 0;
}

/* Prefills `depth` random tokens into sequence 0 in passes of at most `chunk` (not timed). */
static ts_status prefill_depth(bench_ctx *r, int64_t depth, int64_t chunk, ts_error *err) {
    ts_status st = TS_OK;
    for (int64_t done = 0; done < depth && st == TS_OK; done += chunk) {
        st = run_pass(r, 0, 1, depth - done < chunk ? depth - done : chunk, err);
    }
    return st;
}

/* Steps of the depth prefill: big enough to be quick, small enough for the activations. */
#define DEPTH_CHUNK 512

/* pp: one pass of n tokens. tg: n passes of one token. Both after `depth` cached tokens (a
 * fork of sequence 0, dropped after each repetition). Returns t/s per repetition. */
static ts_status bench_single(ts_llm *llm, const bench_opts *o, int threads, const char *kind,
                              int64_t n, int64_t depth, result *out, ts_error *err) {
    bench_ctx r;
    bool pp = strcmp(kind, "pp") == 0;
    int64_t step = pp ? n : 1;
    if (depth > 0 && step < DEPTH_CHUNK) {
        step = DEPTH_CHUNK;
    }
    /* With a depth, sequence 0 holds it and sequence 1 each repetition's fork. */
    ts_status st =
        bench_ctx_create(&r, llm, o, threads, step, depth > 0 ? 2 : 1, depth + n + 1, err);
    if (st == TS_OK && depth > 0) {
        st = prefill_depth(&r, depth, DEPTH_CHUNK, err);
    }
    int32_t seq = depth > 0 ? 1 : 0;
    uint64_t c0 = st == TS_OK ? coll_bytes(r.ctx) : 0;
    double ts[64];
    for (int rep = -1; st == TS_OK && rep < o->reps; rep++) { /* rep -1: warm-up */
        if (depth > 0) {
            st = ts_context_seq_fork(r.ctx, 0, seq, err);
        } else {
            ts_context_clear(r.ctx);
        }
        double t0 = now_s();
        if (pp) {
            st = st == TS_OK ? run_pass(&r, seq, 1, n, err) : st;
        } else {
            for (int64_t i = 0; i < n && st == TS_OK; i++) {
                st = run_pass(&r, seq, 1, 1, err);
            }
        }
        double dt = now_s() - t0;
        if (st == TS_OK && depth > 0) {
            st = ts_context_seq_drop(r.ctx, seq, err);
        }
        if (rep >= 0) {
            ts[rep] = n / dt;
        }
    }
    if (st == TS_OK) {
        out->test_kind = kind;
        out->n = n;
        out->depth = depth;
        out->coll_kib = kib_per_token(coll_bytes(r.ctx) - c0, (double)(o->reps + 1) * (double)n);
        out->mean = mean_sd(ts, o->reps, &out->sd);
    }
    bench_ctx_destroy(&r);
    return st;
}

static ts_status bench_batch(ts_llm *llm, const bench_opts *o, int threads, int64_t pp, int64_t tg,
                             int64_t B, result *out, ts_error *err) {
    bench_ctx r;
    int64_t max_tokens = pp > B ? pp : B;
    ts_status st = bench_ctx_create(&r, llm, o, threads, max_tokens, B, pp + tg + 1, err);
    uint64_t c0 = st == TS_OK ? coll_bytes(r.ctx) : 0;
    double pps[64], tgs[64], tot[64];
    for (int rep = -1; st == TS_OK && rep < o->reps; rep++) {
        ts_context_clear(r.ctx);
        double t0 = now_s();
        for (int64_t s = 0; s < B && st == TS_OK; s++) {
            st = run_pass(&r, s, 1, pp, err); /* one prefill pass per sequence */
        }
        double t1 = now_s();
        for (int64_t i = 0; i < tg && st == TS_OK; i++) {
            st = run_pass(&r, 0, B, 1, err);
        }
        double t2 = now_s();
        if (rep >= 0) {
            pps[rep] = B * pp / (t1 - t0);
            tgs[rep] = B * tg / (t2 - t1);
            tot[rep] = B * (pp + tg) / (t2 - t0);
        }
    }
    if (st == TS_OK) {
        out->test_kind = "batch";
        out->pp = pp;
        out->tg = tg;
        out->b = B;
        out->coll_kib =
            kib_per_token(coll_bytes(r.ctx) - c0, (double)(o->reps + 1) * (double)(B * (pp + tg)));
        out->mean = mean_sd(pps, o->reps, &out->sd);
        out->mean2 = mean_sd(tgs, o->reps, &out->sd2);
        double sd;
        out->total = mean_sd(tot, o->reps, &sd);
    }
    bench_ctx_destroy(&r);
    return st;
}

/* ---- batched generation through the engine ---- */

typedef struct eng_state {
    int done;
    int first; /* requests that produced their first token */
} eng_state;

static void eng_event(const ts_engine_event *ev, void *user) {
    eng_state *st = user;
    if (ev->token >= 0 && ev->completion_tokens == 1) {
        st->first++;
    }
    if (ev->request_done) {
        st->done++;
    }
}

/* One repetition: B requests of pp prompt tokens (the first half shared by all, as a common
 * system prompt) and tg generated tokens each, submitted together and run by the scheduler on
 * a fresh context (an empty prefix cache). */
static ts_status engine_rep(ts_llm *llm, const bench_opts *o, int threads, int64_t pp, int64_t tg,
                            int64_t B, int32_t *prompt, uint64_t *rng, double *t,
                            ts_engine_stats *s, uint64_t *coll, ts_error *err) {
    ts_context_params p = o->co.ctx;
    p.n_threads = threads;
    p.max_seqs = B;
    p.n_ctx = pp + tg + 16;
    p.kv_tokens = B * (pp + tg + 16);
    p.max_batch_tokens = pp > B ? pp : B;
    ts_context *ctx = NULL;
    ts_status st = ts_context_create(llm, &p, &ctx, err);
    if (st != TS_OK) {
        return st;
    }
    uint64_t c0 = coll_bytes(ctx);
    ts_request_params rp = ts_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = (int32_t)tg;
    rp.ignore_eos = true;
    eng_state es = {0};
    uint32_t n_vocab = (uint32_t)ts_llm_n_vocab(llm);
    t[0] = now_s();
    t[1] = 0;
    for (int64_t r = 0; r < B && st == TS_OK; r++) {
        for (int64_t k = 0; k < pp; k++) {
            if (k < pp / 2 && r > 0) {
                continue; /* shared prefix: same ids as request 0 */
            }
            prompt[k] = (int32_t)(next_rand(rng) % n_vocab);
        }
        st = ts_context_submit(ctx, prompt, (int32_t)pp, &rp, eng_event, &es, NULL, err);
    }
    uint32_t peak = 0;
    while (st == TS_OK && es.done < B) {
        st = ts_context_step(ctx, NULL, err);
        ts_context_get_stats(ctx, s);
        peak = s->kv_blocks_used > peak ? s->kv_blocks_used : peak;
        if (t[1] == 0 && es.first == B) {
            t[1] = now_s();
        }
    }
    t[2] = now_s();
    ts_context_get_stats(ctx, s);
    s->kv_blocks_used = peak;
    *coll = coll_bytes(ctx) - c0;
    note_run_rss();
    ts_context_destroy(ctx);
    return st;
}

static ts_status bench_engine(ts_llm *llm, const bench_opts *o, int threads, int64_t pp, int64_t tg,
                              int64_t B, result *out, ts_error *err) {
    double pps[64], tgs[64], tot[64], hits[64];
    uint32_t peak = 0, total_blocks = 0;
    uint64_t coll = 0; /* collective payload bytes over all repetitions */
    double tokens = 0; /* tokens computed over all repetitions */
    int32_t *prompt = malloc((size_t)pp * sizeof(int32_t));
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    ts_status st = prompt != NULL ? TS_OK : TS_ERR_NOMEM;
    for (int rep = -1; st == TS_OK && rep < o->reps; rep++) {
        double t[3] = {0};
        ts_engine_stats s = {0};
        uint64_t c = 0;
        st = engine_rep(llm, o, threads, pp, tg, B, prompt, &rng, t, &s, &c, err);
        tokens += (double)(s.prompt_tokens + s.generated_tokens);
        coll += c;
        peak = s.kv_blocks_used > peak ? s.kv_blocks_used : peak;
        total_blocks = s.kv_blocks_total;
        if (rep >= 0 && st == TS_OK) {
            pps[rep] = B * pp / (t[1] - t[0]);
            tgs[rep] = B * (tg - 1) / (t[2] - t[1]);
            tot[rep] = B * (pp + tg) / (t[2] - t[0]);
            hits[rep] = s.prefix_query_tokens
                            ? (double)s.prefix_hit_tokens / (double)s.prefix_query_tokens
                            : 0;
        }
    }
    if (st == TS_OK) {
        out->test_kind = "engine";
        out->pp = pp;
        out->tg = tg;
        out->b = B;
        double sd;
        out->mean = mean_sd(pps, o->reps, &out->sd);
        out->mean2 = mean_sd(tgs, o->reps, &out->sd2);
        out->total = mean_sd(tot, o->reps, &sd);
        out->hit_rate = mean_sd(hits, o->reps, &sd);
        out->kv_peak = peak;
        out->kv_total = total_blocks;
        out->coll_kib = kib_per_token(coll, tokens);
    } else if (st == TS_ERR_NOMEM && prompt == NULL) {
        snprintf(err->msg, sizeof err->msg, "bench: out of memory");
    }
    free(prompt);
    return st;
}

/* Makes a small context once before the tests, so that measuring the CPU kernels (first load
 * or --retune) is not timed as part of a test, and reports the choice. The tests' contexts then
 * read the cached choice; --retune applies to this one only. */
/* Makes the small context that measures the kernels (when they are measured) and reads what it
 * reports. *rss_mb gets the process's resident memory while that context lives: the weights as
 * every run holds them (repacked copies included, mapped pages handed back), not what is left
 * once the context is gone. */
static ts_status probe_kernels(ts_llm *llm, bench_opts *o, double *tune_ms, double *load_ms,
                               ts_context_info *out, double *rss_mb, ts_error *err) {
    ts_context_params p = o->co.ctx;
    p.n_threads = o->threads[0];
    p.n_ctx = 64;
    p.max_seqs = 1;
    p.max_batch_tokens = 64;
    p.max_outputs = 1;
    p.kv_tokens = 64;
    ts_context *ctx = NULL;
    ts_status st = ts_context_create(llm, &p, &ctx, err);
    if (st == TS_OK && ctx != NULL) {
        ts_context_info info;
        ts_context_get_info(ctx, &info);
        snprintf(o->kernels, sizeof o->kernels, "%s", info.kernels);
        snprintf(o->kv_k, sizeof o->kv_k, "%s", info.kv_type_k);
        snprintf(o->kv_v, sizeof o->kv_v, "%s", info.kv_type_v);
        *tune_ms = info.tune_ms;
        *load_ms = info.load_ms;
        *out = info;
        *rss_mb = ts_cli_rss_mb(false);
        if (info.kernel_notice[0] != '\0') {
            fprintf(stderr, "notice: %s\n", info.kernel_notice);
        }
    }
    ts_context_destroy(ctx);
    o->co.ctx.retune = 0;
    return st;
}

static void print_header(const bench_opts *o, bool batch) {
    if (strcmp(o->format, "md") == 0) {
        /* With --tp two more columns: shards and collective KiB per token per rank. */
        const char *tp_head = o->co.ctx.tp > 1 ? " tp | coll. KiB/token |" : "";
        const char *tp_rule = o->co.ctx.tp > 1 ? "---:|---:|" : "";
        if (batch && o->engine) {
            printf("| model | backend | threads | PP | TG | B | prompt t/s | generation t/s | "
                   "total t/s | prefix hit rate | KV blocks peak / allocated |%s\n"
                   "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n",
                   tp_head, tp_rule);
        } else if (batch) {
            printf("| model | backend | threads | PP | TG | B | prompt t/s | generation t/s | "
                   "total t/s |%s\n|---|---|---:|---:|---:|---:|---:|---:|---:|%s\n",
                   tp_head, tp_rule);
        } else {
            printf("| model | size | params | backend | threads | test | t/s | GB/s |%s\n"
                   "|---|---:|---:|---|---:|---|---:|---:|%s\n",
                   tp_head, tp_rule);
        }
    } else if (strcmp(o->format, "csv") == 0) {
        if (batch) {
            printf("model,backend,threads,pp,tg,b,prompt_ts,prompt_sd,gen_ts,gen_sd,total_ts,tp,"
                   "coll_kib\n");
        } else {
            printf("model,size_bytes,params,backend,threads,test,ts,ts_sd,gbs,tp,coll_kib\n");
        }
    } else {
        printf("[\n");
    }
}

static void print_result(const bench_opts *o, const ts_llm_info *m, const char *name,
                         const result *r, bool *first_json) {
    double gib = m->weight_bytes / (1024.0 * 1024 * 1024);
    double gbs = strcmp(r->test_kind, "tg") == 0 ? r->mean * m->active_bytes / 1e9 : 0;
    char test[48];
    if (r->depth > 0) {
        snprintf(test, sizeof test, "%s%lld @ d%lld", r->test_kind, (long long)r->n,
                 (long long)r->depth);
    } else {
        snprintf(test, sizeof test, "%s%lld", r->test_kind, (long long)r->n);
    }
    if (strcmp(o->format, "md") == 0) {
        if (strcmp(r->test_kind, "engine") == 0) {
            printf("| %s | %s | %d | %lld | %lld | %lld | %.2f ± %.2f | %.2f ± %.2f | %.2f | "
                   "%.1f%% | %u / %u |",
                   name, o->co.ctx.backend, r->threads, (long long)r->pp, (long long)r->tg,
                   (long long)r->b, r->mean, r->sd, r->mean2, r->sd2, r->total, 100 * r->hit_rate,
                   r->kv_peak, r->kv_total);
        } else if (strcmp(r->test_kind, "batch") == 0) {
            printf("| %s | %s | %d | %lld | %lld | %lld | %.2f ± %.2f | %.2f ± %.2f | %.2f |", name,
                   o->co.ctx.backend, r->threads, (long long)r->pp, (long long)r->tg,
                   (long long)r->b, r->mean, r->sd, r->mean2, r->sd2, r->total);
        } else {
            char gb[32] = "-";
            if (gbs > 0 && r->bandwidth > 0) {
                snprintf(gb, sizeof gb, "%.1f (%.0f%% of %.1f)", gbs, 100 * gbs / r->bandwidth,
                         r->bandwidth);
            } else if (gbs > 0) {
                snprintf(gb, sizeof gb, "%.1f", gbs);
            }
            printf("| %s | %.2f GiB | %.2f M | %s | %d | %s | %.2f ± %.2f | %s |", name, gib,
                   m->n_params / 1e6, o->co.ctx.backend, r->threads, test, r->mean, r->sd, gb);
        }
        if (o->co.ctx.tp > 1) {
            printf(" %d | %.1f |", r->tp, r->coll_kib);
        }
        printf("\n");
    } else if (strcmp(o->format, "csv") == 0) {
        if (strcmp(r->test_kind, "batch") == 0 || strcmp(r->test_kind, "engine") == 0) {
            printf("%s,%s,%d,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%.3f\n", name,
                   o->co.ctx.backend, r->threads, (long long)r->pp, (long long)r->tg,
                   (long long)r->b, r->mean, r->sd, r->mean2, r->sd2, r->total, r->tp, r->coll_kib);
        } else {
            printf("%s,%llu,%llu,%s,%d,%s,%.3f,%.3f,%.3f,%d,%.3f\n", name,
                   (unsigned long long)m->weight_bytes, (unsigned long long)m->n_params,
                   o->co.ctx.backend, r->threads, test, r->mean, r->sd, gbs, r->tp, r->coll_kib);
        }
    } else {
        printf("%s  {\"model\": \"%s\", \"backend\": \"%s\", \"kernels\": \"%s\", \"threads\": %d, "
               "\"tp\": %d, \"coll_kib_per_token\": %.3f, \"kv_type_k\": \"%s\", "
               "\"kv_type_v\": \"%s\", \"n_depth\": %lld, ",
               *first_json ? "" : ",\n", name, o->co.ctx.backend, o->kernels, r->threads, r->tp,
               r->coll_kib, o->kv_k, o->kv_v, (long long)r->depth);
        if (strcmp(r->test_kind, "batch") == 0 || strcmp(r->test_kind, "engine") == 0) {
            printf("\"pp\": %lld, \"tg\": %lld, \"b\": %lld, \"prompt_ts\": %.3f, \"prompt_sd\": "
                   "%.3f, \"gen_ts\": %.3f, \"gen_sd\": %.3f, \"total_ts\": %.3f, "
                   "\"engine\": %s, \"prefix_hit_rate\": %.4f, \"kv_blocks_peak\": %u, "
                   "\"kv_blocks_total\": %u}",
                   (long long)r->pp, (long long)r->tg, (long long)r->b, r->mean, r->sd, r->mean2,
                   r->sd2, r->total, strcmp(r->test_kind, "engine") == 0 ? "true" : "false",
                   r->hit_rate, r->kv_peak, r->kv_total);
        } else {
            printf("\"size_bytes\": %llu, \"params\": %llu, \"test\": \"%s\", \"ts\": %.3f, "
                   "\"ts_sd\": %.3f, \"gbs\": %.3f}",
                   (unsigned long long)m->weight_bytes, (unsigned long long)m->n_params, test,
                   r->mean, r->sd, gbs);
        }
        *first_json = false;
    }
    fflush(stdout);
}

/* --draft N: the speculative decoding comparison (bench_spec.c) on -p TEXT, -f FILE or the
 * built-in prompt. Returns the exit code. */
static int run_spec(ts_llm *llm, const bench_opts *o, const char *name, const char *text,
                    const char *file) {
    char *owned = NULL;
    if (file != NULL) {
        size_t len = 0;
        owned = ts_cli_read_file(file, &len);
        if (owned == NULL) {
            fprintf(stderr, "error: -f %s: cannot read it\n", file);
            return 1;
        }
        text = owned;
    }
    ts_bench_spec_opts so = {.co = &o->co,
                             .name = name,
                             .threads = o->threads,
                             .n_threads = o->n_threads,
                             .reps = o->reps,
                             .n_gen = o->tg[0],
                             .prompt = text,
                             .format = o->format};
    int rc = ts_bench_spec(llm, &so);
    free(owned);
    return rc;
}

int ts_cmd_bench(int argc, char **argv) {
    bench_opts o;
    memset(&o, 0, sizeof o);
    ts_cli_opts_init(&o.co);
    o.pp[0] = 512;
    o.n_pp = 1;
    o.tg[0] = 128;
    o.n_tg = 1;
    o.reps = 5;
    o.format = "md";
    int64_t bpp = 128, btg = 128;
    const char *p_arg = NULL, *f_arg = NULL, *n_arg = NULL; /* read once the mode is known */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t tmp[MAX_LIST] = {0};
        int n = 1; /* list options set the count they parsed */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--engine") == 0) {
            o.engine = true;
            continue;
        }
        if (strcmp(a, "--tp-mpi") == 0) {
            fprintf(stderr, "error: --tp-mpi: bench runs its shards in one process (--tp N); "
                            "measure MPI with mpirun -np N tessera run ... --tp-mpi\n");
            return 2;
        }
        bool own = strcmp(a, "-p") == 0 || strcmp(a, "-n") == 0 || strcmp(a, "--batch") == 0 ||
                   strcmp(a, "-f") == 0 || strcmp(a, "-d") == 0 || strcmp(a, "--n-depth") == 0 ||
                   strcmp(a, "--pp") == 0 || strcmp(a, "--tg") == 0 || strcmp(a, "-r") == 0 ||
                   strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0 || strcmp(a, "-o") == 0;
        if (!own) {
            int r = ts_cli_parse_common(&o.co, argc, argv, &i);
            if (r < 0) {
                return 2;
            }
            if (r == 0) {
                fprintf(stderr, "error: unknown option: %s\n", a);
                return 2;
            }
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "error: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "-p") == 0) {
            p_arg = v; /* prompt lengths, or with --draft the prompt's text */
        } else if (strcmp(a, "-f") == 0) {
            f_arg = v;
        } else if (strcmp(a, "-n") == 0) {
            n_arg = v;
        } else if (strcmp(a, "--batch") == 0) {
            n = o.n_batch = parse_list(v, o.batch, MAX_LIST);
        } else if (strcmp(a, "-d") == 0 || strcmp(a, "--n-depth") == 0) {
            n = o.n_depth = parse_list(v, o.depth, MAX_LIST);
        } else if (strcmp(a, "--pp") == 0) {
            n = parse_list(v, tmp, 1);
            bpp = tmp[0];
        } else if (strcmp(a, "--tg") == 0) {
            n = parse_list(v, tmp, 1);
            btg = tmp[0];
        } else if (strcmp(a, "-r") == 0) {
            n = parse_list(v, tmp, 1);
            o.reps = (int)tmp[0];
            if (o.reps < 1 || o.reps > 64) {
                n = -1;
            }
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            n = o.n_threads = parse_list(v, tmp, MAX_LIST);
            for (int k = 0; k < n; k++) {
                o.threads[k] = (int)tmp[k];
                if (tmp[k] < 1 || tmp[k] > 1024) {
                    n = -1;
                }
            }
        } else {
            o.format = v;
            n = strcmp(v, "md") == 0 || strcmp(v, "json") == 0 || strcmp(v, "csv") == 0 ? 1 : -1;
        }
        if (n <= 0) {
            fprintf(stderr, "error: %s: bad value '%s'\n", a, v);
            return 2;
        }
    }
    if (o.co.model == NULL) {
        usage(stderr);
        return 2;
    }
    bool spec = o.co.ctx.draft_max > 0;
    if (!spec && f_arg != NULL) {
        fprintf(stderr, "error: -f FILE (a prompt) applies to --draft N only\n");
        return 2;
    }
    if (spec && (o.n_batch > 0 || o.n_depth > 0 || o.engine || o.co.ctx.tp > 1)) {
        fprintf(stderr, "error: --draft N runs one sequence: not with --batch, -d, --engine "
                        "or --tp\n");
        return 2;
    }
    if (spec && p_arg != NULL && f_arg != NULL) {
        fprintf(stderr, "error: give the prompt with -p TEXT or -f FILE, not both\n");
        return 2;
    }
    if (!spec && p_arg != NULL && (o.n_pp = parse_list(p_arg, o.pp, MAX_LIST)) <= 0) {
        fprintf(stderr, "error: -p: bad value '%s' (prompt lengths, e.g. 512,1024)\n", p_arg);
        return 2;
    }
    if (n_arg != NULL && (o.n_tg = parse_list(n_arg, o.tg, spec ? 1 : MAX_LIST)) <= 0) {
        fprintf(stderr, "error: -n: bad value '%s'\n", n_arg);
        return 2;
    }
    if (spec && (n_arg == NULL || o.tg[0] < 1)) {
        o.tg[0] = n_arg == NULL ? 256 : 0;
        if (o.tg[0] < 1) {
            fprintf(stderr, "error: -n: --draft needs at least 1 generated token\n");
            return 2;
        }
    }

    if (o.n_depth > 0 && o.n_batch > 0) {
        fprintf(stderr, "error: -d/--n-depth applies to the pp/tg tests, not to --batch\n");
        return 2;
    }
    if (o.n_depth == 0) {
        o.n_depth = 1; /* depth[0] == 0 */
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    double t_open = ts_cli_now_ms();
    ts_llm_params lp = ts_cli_llm_params();
    if (ts_llm_open(o.co.model, &lp, &llm, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    t_open = ts_cli_now_ms() - t_open;
    ts_llm_info mi;
    ts_llm_get_info(llm, &mi);
    if (o.n_threads == 0) {
        o.threads[0] = ts_default_threads();
        o.n_threads = 1;
    }
    const char *name = strrchr(o.co.model, '/') ? strrchr(o.co.model, '/') + 1 : o.co.model;
    bool batch = o.n_batch > 0;
    if (!batch && !spec && strcmp(o.format, "md") == 0) {
        int max_t = 1;
        for (int k = 0; k < o.n_threads; k++) {
            max_t = o.threads[k] > max_t ? o.threads[k] : max_t;
        }
        o.bandwidth = measure_bandwidth(max_t);
        printf("memory read bandwidth: %.1f GB/s (%d threads; the GB/s column's percentages "
               "are of a measurement right after each test); weights: %.1f MB\n",
               o.bandwidth, max_t, (double)mi.weight_bytes / 1e6);
        if (mi.n_expert > 0) {
            printf("mixture of experts: %lld of %lld experts per token; a token reads %.1f MB\n",
                   (long long)mi.n_expert_used, (long long)mi.n_expert,
                   (double)mi.active_bytes / 1e6);
        }
    }
    double tune_ms = 0, load_ms = 0, rss_mb = 0;
    ts_context_info probe = {0};
    if (probe_kernels(llm, &o, &tune_ms, &load_ms, &probe, &rss_mb, &err) != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        ts_llm_close(llm);
        return 1;
    }
    if (strcmp(o.format, "md") == 0) {
        if (o.kernels[0] != '\0') {
            printf("kernels (one row / several): %s (measured %.0f ms this run)\n", o.kernels,
                   tune_ms);
        }
        /* The context here is the small one made to measure the kernels, so its load time
         * is mostly that measurement (when there was one). */
        printf("load: model %.0f ms, context %.0f ms (of which repacking %.0f MB of weights: "
               "%.0f ms); resident memory %.0f MB (mapped weights count once read)\n",
               t_open, load_ms, (double)probe.repacked_bytes / 1e6, probe.repack_ms, rss_mb);
        printf("KV cache: K %s, V %s\n", o.kv_k, o.kv_v);
        printf("\n");
    }
    bool first_json = true;
    int rc = 0;
    if (spec) {
        rc = run_spec(llm, &o, name, p_arg, f_arg);
    } else {
        print_header(&o, batch);
    }
    for (int k = 0; !spec && k < o.n_threads && rc == 0; k++) {
        result r;
        ts_status st = TS_OK;
        /* Depth outer, test inner: each depth's pp and tg tests together. */
        int n_single = o.n_pp + o.n_tg;
        for (int jj = 0; st == TS_OK && jj < (batch ? o.n_batch : n_single * o.n_depth); jj++) {
            memset(&r, 0, sizeof r);
            int j = batch ? jj : jj % n_single;
            int64_t depth = batch ? 0 : o.depth[jj / n_single];
            bool is_pp = !batch && j < o.n_pp;
            int64_t n = batch ? o.batch[j] : is_pp ? o.pp[j] : o.tg[j - o.n_pp];
            if (!batch && n == 0) {
                continue;
            }
            int t = o.threads[k];
            if (batch) {
                st = o.engine ? bench_engine(llm, &o, t, bpp, btg, n, &r, &err)
                              : bench_batch(llm, &o, t, bpp, btg, n, &r, &err);
            } else {
                st = bench_single(llm, &o, t, is_pp ? "pp" : "tg", n, depth, &r, &err);
            }
            r.threads = t;
            r.tp = o.co.ctx.tp > 1 ? o.co.ctx.tp : 1;
            if (st == TS_OK && !batch && !is_pp && o.bandwidth > 0) {
                r.bandwidth = measure_bandwidth(t);
            }
            if (st == TS_OK) {
                print_result(&o, &mi, name, &r, &first_json);
            }
        }
        if (st != TS_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            rc = 1;
        }
    }
    if (!spec && strcmp(o.format, "json") == 0) {
        printf("\n]\n");
    } else if (strcmp(o.format, "md") == 0 && rc == 0) {
        /* Mapped weights become resident as the runs read them, so the load line's figure can
         * be far below what a run holds: the first figure is the one to compare with `tessera
         * run`. The peak includes the bandwidth measurement's buffer. */
        printf("\nresident memory during the runs: %.0f MB (after them %.0f MB, peak %.0f MB)\n",
               g_run_rss_mb, ts_cli_rss_mb(false), ts_cli_rss_mb(true));
    }
    ts_llm_close(llm);
    return rc;
}
