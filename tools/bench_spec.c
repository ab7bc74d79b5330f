/*
 * bench_spec.c — `tessera bench --draft N`: how much n-gram speculative decoding speeds up one
 * sequence's generation, and a check that it changes nothing else.
 *
 * Each repetition runs the same request twice on fresh contexts (an empty prefix cache, so both
 * runs prefill the whole prompt): plain decoding (spec_type "none") and speculative decoding
 * (--spec-type, default n-gram, with draft-max N), greedy, alternating plain / speculative so
 * that a loaded machine's drift falls on both alike. Generation speed is the tokens after the
 * first over the time from the first token to the last (prefill excluded, as bench's tg). The
 * two outputs must be the same tokens; a difference is an error (exit status 1), as
 * speculation may only change the speed. Drafted and accepted tokens come from the
 * speculative context's statistics (ts_engine_stats), summed over the timed repetitions.
 *
 * The built-in prompt asks to repeat a code text with one change, the task n-gram drafts are
 * made for; -p TEXT or -f FILE gives another (both as the user's turn of the chat template
 * when the model has one, else as they are).
 */
#include "bench_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char k_prompt[] =
    "Rewrite the following C code, renaming the function `sum_positive` to `total_positive`. "
    "Change nothing else and answer with the code only.\n\n"
    "```c\n"
    "#include <stddef.h>\n"
    "\n"
    "/* Adds the positive values of v[0..n). */\n"
    "long sum_positive(const int *v, size_t n) {\n"
    "    long total = 0;\n"
    "    for (size_t i = 0; i < n; i++) {\n"
    "        if (v[i] > 0) {\n"
    "            total += v[i];\n"
    "        }\n"
    "    }\n"
    "    return total;\n"
    "}\n"
    "\n"
    "/* The index of the largest value of v[0..n), or -1 when n is 0. */\n"
    "long index_of_max(const int *v, size_t n) {\n"
    "    if (n == 0) {\n"
    "        return -1;\n"
    "    }\n"
    "    size_t best = 0;\n"
    "    for (size_t i = 1; i < n; i++) {\n"
    "        if (v[i] > v[best]) {\n"
    "            best = i;\n"
    "        }\n"
    "    }\n"
    "    return (long)best;\n"
    "}\n"
    "\n"
    "/* Mean of the positive values, 0 when there are none. */\n"
    "double mean_positive(const int *v, size_t n) {\n"
    "    size_t count = 0;\n"
    "    for (size_t i = 0; i < n; i++) {\n"
    "        count += v[i] > 0;\n"
    "    }\n"
    "    return count > 0 ? (double)sum_positive(v, n) / (double)count : 0.0;\n"
    "}\n"
    "```\n";

typedef struct run_state {
    int32_t *tokens; /* [cap] generated tokens */
    int64_t n, cap;
    double t_first, t_end; /* seconds: the first token's event, the request's last event */
    bool done, failed;
    char message[256]; /* the engine's error, when failed */
} run_state;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_event(const ts_engine_event *ev, void *user) {
    run_state *rs = user;
    if (ev->token >= 0) {
        if (rs->n == 0) {
            rs->t_first = now_s();
        }
        if (rs->n < rs->cap) {
            rs->tokens[rs->n] = ev->token;
        }
        rs->n++;
    }
    if (ev->finish == TS_FINISH_ERROR) {
        rs->failed = true;
        snprintf(rs->message, sizeof rs->message, "%s",
                 ev->message != NULL ? ev->message : "(no message)");
    }
    if (ev->request_done) {
        rs->t_end = now_s();
        rs->done = true;
    }
}

/* A context for one sequence of the prompt and n_gen tokens, with or without speculation. */
static ts_status make_ctx(ts_llm *llm, const ts_bench_spec_opts *o, int threads, int64_t n_prompt,
                          bool spec, ts_context **ctx, ts_error *err) {
    ts_context_params p = o->co->ctx;
    int draft = o->co->ctx.draft_max;
    p.n_threads = threads;
    p.max_seqs = 1;
    p.n_ctx = n_prompt + o->n_gen + draft + 16;
    p.kv_tokens = p.n_ctx;
    p.max_batch_tokens = n_prompt > draft + 1 ? n_prompt : draft + 1;
    if (spec) {
        p.spec_type = o->co->ctx.spec_type != NULL     ? o->co->ctx.spec_type
                      : o->co->ctx.draft_model != NULL ? "draft"
                                                       : "ngram";
    } else {
        p.spec_type = "none";
        p.draft_model = NULL;
        p.draft_max = 0;
        p.draft_min = 0;
        p.spec_ngram_min = 0;
        p.spec_ngram_max = 0;
        p.spec_step_tokens = 0;
    }
    return ts_context_create(llm, &p, ctx, err);
}

/* The prompt's token ids: the text as the user's turn of the chat template when the model
 * has one (rendered by ctx, so --chat-template applies), else the text as it is. */
static ts_status prompt_ids(ts_context *ctx, const char *text, int32_t **ids, size_t *n,
                            ts_error *err) {
    ts_message msg = {"user", text};
    char *chat = NULL;
    size_t len = 0;
    ts_status st = ts_context_chat_prompt(ctx, &msg, 1, 1, &chat, &len, err);
    if (st == TS_ERR_NOT_FOUND) {
        st = TS_OK; /* no template: the raw text */
    } else if (st == TS_OK) {
        text = chat;
    }
    if (st == TS_OK) {
        st = ts_llm_tokenize(ts_context_llm(ctx), text, strlen(text), 1, 1, ids, n, err);
    }
    ts_free(chat);
    return st;
}

/* One run: submit, step until done. On success rs holds the tokens and times; s the
 * context's statistics. */
static ts_status run_once(ts_context *ctx, const int32_t *ids, int64_t n_ids, int64_t n_gen,
                          run_state *rs, ts_engine_stats *s, ts_error *err) {
    ts_request_params rp = ts_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = (int32_t)n_gen;
    rs->n = 0;
    rs->done = rs->failed = false;
    rs->t_first = rs->t_end = 0;
    ts_status st = ts_context_submit(ctx, ids, (int32_t)n_ids, &rp, on_event, rs, NULL, err);
    while (st == TS_OK && !rs->done) {
        st = ts_context_step(ctx, NULL, err);
    }
    if (st == TS_OK && rs->failed) {
        snprintf(err->msg, sizeof err->msg, "bench --draft: the request failed: %s", rs->message);
        st = TS_ERR_INVALID_ARG;
    }
    ts_context_get_stats(ctx, s);
    return st;
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

/* The figures of one thread count. */
typedef struct spec_row {
    int threads;
    int64_t n_prompt, n_gen; /* prompt tokens; tokens generated (the same in every run) */
    double plain, plain_sd, spec, spec_sd; /* generation t/s */
    uint64_t drafted, accepted, steps;     /* summed over the timed repetitions */
} spec_row;

/* Runs warm-up + reps of plain and speculative decoding with `threads` threads on the prompt
 * ids[0..n_ids). */
static ts_status bench_threads(ts_llm *llm, const ts_bench_spec_opts *o, int threads,
                               const int32_t *ids, size_t n_ids, spec_row *row, ts_error *err) {
    run_state rs[2] = {0};
    double ts[2][64];
    memset(row, 0, sizeof *row);
    row->threads = threads;
    ts_status st = TS_OK;
    for (int k = 0; k < 2 && st == TS_OK; k++) {
        rs[k].cap = o->n_gen;
        rs[k].tokens = malloc((size_t)o->n_gen * sizeof(int32_t));
        if (rs[k].tokens == NULL) {
            snprintf(err->msg, sizeof err->msg, "bench --draft: out of memory");
            st = TS_ERR_NOMEM;
        }
    }
    for (int rep = -1; st == TS_OK && rep < o->reps; rep++) { /* rep -1: warm-up */
        for (int k = 0; k < 2 && st == TS_OK; k++) {          /* 0 plain, 1 speculative */
            ts_context *ctx = NULL;
            st = make_ctx(llm, o, threads, (int64_t)n_ids, k == 1, &ctx, err);
            ts_engine_stats s = {0};
            if (st == TS_OK) {
                st = run_once(ctx, ids, (int64_t)n_ids, o->n_gen, &rs[k], &s, err);
            }
            ts_context_destroy(ctx);
            if (st != TS_OK) {
                break;
            }
            double dt = rs[k].t_end - rs[k].t_first;
            if (rep >= 0) {
                ts[k][rep] = rs[k].n > 1 && dt > 0 ? (double)(rs[k].n - 1) / dt : 0;
            }
            if (rep >= 0 && k == 1) {
                row->drafted += s.spec_drafted;
                row->accepted += s.spec_accepted;
                row->steps += s.spec_steps;
            }
        }
        /* Speculation may only change the speed: the same tokens, or an error. */
        for (int64_t i = 0; st == TS_OK && i < rs[0].n && i < rs[1].n && i < o->n_gen; i++) {
            if (rs[0].tokens[i] != rs[1].tokens[i]) {
                snprintf(err->msg, sizeof err->msg,
                         "bench --draft: the outputs differ at generated token %lld: plain "
                         "decoding %d, speculative %d (threads %d)",
                         (long long)i, (int)rs[0].tokens[i], (int)rs[1].tokens[i], threads);
                st = TS_ERR_INVALID_ARG;
            }
        }
        if (st == TS_OK && rs[0].n != rs[1].n) {
            snprintf(err->msg, sizeof err->msg,
                     "bench --draft: the outputs differ in length: plain decoding %lld tokens, "
                     "speculative %lld (threads %d)",
                     (long long)rs[0].n, (long long)rs[1].n, threads);
            st = TS_ERR_INVALID_ARG;
        }
    }
    if (st == TS_OK) {
        row->n_prompt = (int64_t)n_ids;
        row->n_gen = rs[0].n;
        row->plain = mean_sd(ts[0], o->reps, &row->plain_sd);
        row->spec = mean_sd(ts[1], o->reps, &row->spec_sd);
    }
    free(rs[0].tokens);
    free(rs[1].tokens);
    return st;
}

static void print_header(const ts_bench_spec_opts *o) {
    if (strcmp(o->format, "md") == 0) {
        printf(
            "| model | drafter | backend | threads | prompt | generated | draft-max | plain t/s | "
            "speculative t/s | speed-up | drafted | accepted | acceptance |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    } else if (strcmp(o->format, "csv") == 0) {
        printf("model,drafter,backend,threads,prompt_tokens,gen_tokens,draft_max,plain_ts,plain_sd,"
               "spec_ts,spec_sd,speedup,drafted,accepted,acceptance,verifications,identical\n");
    } else {
        printf("[\n");
    }
}

static void print_row(const ts_bench_spec_opts *o, const spec_row *r, bool first) {
    double speedup = r->plain > 0 ? r->spec / r->plain : 0;
    double acc = r->drafted > 0 ? (double)r->accepted / (double)r->drafted : 0;
    const char *backend = o->co->ctx.backend != NULL ? o->co->ctx.backend : "auto";
    int draft = o->co->ctx.draft_max;
    /* the drafter: the draft model's file name, or the n-gram lookup */
    const char *dm = o->co->ctx.draft_model;
    const char *slash = dm != NULL ? strrchr(dm, '/') : NULL;
    const char *drafter = dm == NULL ? "ngram" : slash != NULL ? slash + 1 : dm;
    if (strcmp(o->format, "md") == 0) {
        printf(
            "| %s | %s | %s | %d | %lld | %lld | %d | %.2f ± %.2f | %.2f ± %.2f | %.2fx | %llu | "
            "%llu | %.1f%% |\n",
            o->name, drafter, backend, r->threads, (long long)r->n_prompt, (long long)r->n_gen,
            draft, r->plain, r->plain_sd, r->spec, r->spec_sd, speedup,
            (unsigned long long)r->drafted, (unsigned long long)r->accepted, 100 * acc);
    } else if (strcmp(o->format, "csv") == 0) {
        printf("%s,%s,%s,%d,%lld,%lld,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%llu,%llu,%.4f,%llu,true\n",
               o->name, drafter, backend, r->threads, (long long)r->n_prompt, (long long)r->n_gen,
               draft, r->plain, r->plain_sd, r->spec, r->spec_sd, speedup,
               (unsigned long long)r->drafted, (unsigned long long)r->accepted, acc,
               (unsigned long long)r->steps);
    } else {
        printf("%s  {\"model\": \"%s\", \"drafter\": \"%s\", \"backend\": \"%s\", "
               "\"threads\": %d, \"test\": "
               "\"spec\", \"prompt_tokens\": %lld, \"gen_tokens\": %lld, \"draft_max\": %d, "
               "\"plain_ts\": %.3f, \"plain_sd\": %.3f, \"spec_ts\": %.3f, \"spec_sd\": %.3f, "
               "\"speedup\": %.4f, \"drafted\": %llu, \"accepted\": %llu, \"acceptance\": %.4f, "
               "\"verifications\": %llu, \"identical\": true}",
               first ? "" : ",\n", o->name, drafter, backend, r->threads, (long long)r->n_prompt,
               (long long)r->n_gen, draft, r->plain, r->plain_sd, r->spec, r->spec_sd, speedup,
               (unsigned long long)r->drafted, (unsigned long long)r->accepted, acc,
               (unsigned long long)r->steps);
    }
    fflush(stdout);
}

int ts_bench_spec(ts_llm *llm, const ts_bench_spec_opts *o) {
    const char *text = o->prompt != NULL ? o->prompt : k_prompt;
    /* The prompt is rendered and tokenized once, with a small context of the same settings
     * (its chat template: --chat-template applies). */
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_context *ctx = NULL;
    ts_error err = {0};
    ts_status st = make_ctx(llm, o, o->threads[0], 64, false, &ctx, &err);
    if (st == TS_OK) {
        st = prompt_ids(ctx, text, &ids, &n_ids, &err);
    }
    ts_context_destroy(ctx);
    if (st != TS_OK) {
        fprintf(stderr, "error: bench --draft: the prompt: %s\n", err.msg);
        return 1;
    }
    print_header(o);
    int rc = 0;
    for (int k = 0; k < o->n_threads && rc == 0; k++) {
        spec_row row;
        if (bench_threads(llm, o, o->threads[k], ids, n_ids, &row, &err) != TS_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            rc = 1;
        } else {
            print_row(o, &row, k == 0);
        }
    }
    ts_free(ids);
    if (strcmp(o->format, "json") == 0) {
        printf("\n]\n");
    } else if (strcmp(o->format, "md") == 0 && rc == 0) {
        printf("\nplain and speculative decoding generated the same tokens (greedy); t/s: "
               "generated tokens after the first over the time from the first to the last\n");
    }
    return rc;
}
