/* metrics.c — Prometheus counters, gauges and histograms of the server. */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int k_statuses[TS_METRICS_N_STATUS] = {200, 400, 401, 404, 405, 413,
                                                    422, 429, 499, 500, 503};

/* Bucket bounds in seconds. TTFT spans queueing behind long prompts on a slow CPU; ITL is the
 * per-step time of a batch. */
static const double k_ttft_bounds[] = {0.01, 0.025, 0.05, 0.1,  0.25, 0.5,  0.75, 1.0,
                                       2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
static const double k_itl_bounds[] = {0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1,
                                      0.15,  0.2,  0.3,  0.5,  0.75, 1.0,   2.5};
static const double k_e2e_bounds[] = {0.1,  0.25, 0.5,  1.0,  2.5,   5.0,
                                      10.0, 20.0, 40.0, 80.0, 160.0, 320.0};

static const char *const k_hist_names[TS_HIST_COUNT] = {
    "tessera_time_to_first_token_seconds",
    "tessera_inter_token_latency_seconds",
    "tessera_request_duration_seconds",
};
static const char *const k_hist_help[TS_HIST_COUNT] = {
    "Time from request arrival to its first generated token.",
    "Time between consecutive generated tokens of one sequence.",
    "Time from request arrival to its last token.",
};

void ts_metrics_init(ts_metrics *m, const char *const *labels, int n_routes) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->n_routes = n_routes < TS_METRICS_MAX_ROUTES ? n_routes : TS_METRICS_MAX_ROUTES;
    for (int i = 0; i < m->n_routes; i++) {
        m->labels[i] = labels[i];
    }
    m->hist[TS_HIST_TTFT].bounds = k_ttft_bounds;
    m->hist[TS_HIST_TTFT].n_bounds = (int)(sizeof k_ttft_bounds / sizeof *k_ttft_bounds);
    m->hist[TS_HIST_ITL].bounds = k_itl_bounds;
    m->hist[TS_HIST_ITL].n_bounds = (int)(sizeof k_itl_bounds / sizeof *k_itl_bounds);
    m->hist[TS_HIST_E2E].bounds = k_e2e_bounds;
    m->hist[TS_HIST_E2E].n_bounds = (int)(sizeof k_e2e_bounds / sizeof *k_e2e_bounds);
}

void ts_metrics_destroy(ts_metrics *m) {
    pthread_mutex_destroy(&m->mu);
}

void ts_metrics_count_request(ts_metrics *m, int route, int status) {
    int col = TS_METRICS_N_STATUS;
    for (int i = 0; i < TS_METRICS_N_STATUS; i++) {
        if (k_statuses[i] == status) {
            col = i;
        }
    }
    if (route < 0 || route >= m->n_routes) {
        route = m->n_routes; /* other */
    }
    pthread_mutex_lock(&m->mu);
    m->requests[route][col]++;
    pthread_mutex_unlock(&m->mu);
}

void ts_metrics_observe(ts_metrics *m, ts_hist_id id, double seconds) {
    if (id < 0 || id >= TS_HIST_COUNT) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    ts_histogram *h = &m->hist[id];
    int b = 0;
    while (b < h->n_bounds && seconds > h->bounds[b]) {
        b++;
    }
    h->counts[b]++;
    h->count++;
    h->sum += seconds;
    pthread_mutex_unlock(&m->mu);
}

void ts_metrics_add_usage(ts_metrics *m, uint64_t prompt, uint64_t completion, bool aborted) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->completion_tokens += completion;
    m->aborted += aborted;
    pthread_mutex_unlock(&m->mu);
}

typedef struct text {
    char *s;
    size_t len, cap;
    bool failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->failed) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *s = realloc(t->s, cap);
        if (s == NULL) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void gauge(text *t, const char *name, const char *type, const char *help, double v) {
    put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

char *ts_metrics_render(ts_metrics *m, const ts_engine_stats *es, int64_t in_flight, size_t *len) {
    text t = {.s = malloc(8192), .cap = 8192};
    if (t.s == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&m->mu);
    ts_metrics c = *m; /* a consistent copy; the mutex member is not used */
    pthread_mutex_unlock(&m->mu);

    put(&t, "# HELP tessera_http_requests_total HTTP requests by endpoint and status.\n"
            "# TYPE tessera_http_requests_total counter\n");
    for (int r = 0; r <= c.n_routes; r++) {
        const char *label = r < c.n_routes ? c.labels[r] : "other";
        bool seen = false; /* counted with an earlier route of the same label */
        for (int q = 0; q < r && r < c.n_routes; q++) {
            seen |= strcmp(c.labels[q], label) == 0;
        }
        for (int s = 0; s <= TS_METRICS_N_STATUS && !seen; s++) {
            uint64_t n = c.requests[r][s];
            for (int q = r + 1; q < c.n_routes && r < c.n_routes; q++) {
                n += strcmp(c.labels[q], label) == 0 ? c.requests[q][s] : 0;
            }
            if (n == 0) {
                continue;
            }
            char status[16];
            if (s < TS_METRICS_N_STATUS) {
                snprintf(status, sizeof status, "%d", k_statuses[s]);
            } else {
                snprintf(status, sizeof status, "other");
            }
            put(&t, "tessera_http_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", label,
                status, (unsigned long long)n);
        }
    }
    gauge(&t, "tessera_prompt_tokens_total", "counter",
          "Prompt tokens of finished requests (usage.prompt_tokens).", (double)c.prompt_tokens);
    gauge(&t, "tessera_generation_tokens_total", "counter",
          "Generated tokens of finished requests (usage.completion_tokens).",
          (double)c.completion_tokens);
    gauge(&t, "tessera_requests_aborted_total", "counter",
          "Requests aborted because the client went away or the server shut down.",
          (double)c.aborted);
    gauge(&t, "tessera_prompt_tokens_computed_total", "counter",
          "Prompt tokens the engine computed (prefix-cache hits excluded).",
          (double)es->prompt_tokens);
    gauge(&t, "tessera_engine_generated_tokens_total", "counter",
          "Tokens the engine generated (aborted requests included).", (double)es->generated_tokens);
    gauge(&t, "tessera_engine_steps_total", "counter", "Engine steps run.", (double)es->n_steps);
    gauge(&t, "tessera_preemptions_total", "counter", "Sequences preempted for KV blocks.",
          (double)es->n_preemptions);
    gauge(&t, "tessera_requests_in_flight", "gauge", "Requests admitted and not finished.",
          (double)in_flight);
    gauge(&t, "tessera_num_requests_running", "gauge", "Sequences in the running batch.",
          (double)es->n_running);
    gauge(&t, "tessera_num_requests_waiting", "gauge", "Sequences waiting (new or preempted).",
          (double)es->n_waiting);
    gauge(&t, "tessera_kv_blocks_used", "gauge", "KV cache blocks referenced by sequences.",
          (double)es->kv_blocks_used);
    gauge(&t, "tessera_kv_blocks_total", "gauge", "KV cache blocks in the pool.",
          (double)es->kv_blocks_total);
    gauge(&t, "tessera_kv_cache_usage_ratio", "gauge", "Fraction of KV blocks in use.",
          es->kv_blocks_total ? (double)es->kv_blocks_used / es->kv_blocks_total : 0.0);
    gauge(&t, "tessera_kv_swa_blocks_used", "gauge",
          "Blocks of the sliding-window layers' KV pool referenced by sequences.",
          (double)es->kv_swa_blocks_used);
    gauge(&t, "tessera_kv_swa_blocks_total", "gauge",
          "Blocks in the sliding-window layers' KV pool (0: none).",
          (double)es->kv_swa_blocks_total);
    gauge(&t, "tessera_prefix_cache_queries_total", "counter",
          "Prompt tokens looked up in the prefix cache.", (double)es->prefix_query_tokens);
    gauge(&t, "tessera_prefix_cache_hits_total", "counter",
          "Prompt tokens the prefix cache supplied.", (double)es->prefix_hit_tokens);
    gauge(&t, "tessera_prefix_cache_hit_rate", "gauge",
          "Prefix-cache hits over queries, in tokens, since start.",
          es->prefix_query_tokens ? (double)es->prefix_hit_tokens / es->prefix_query_tokens : 0.0);
    gauge(&t, "tessera_grammar_masks_total", "counter",
          "Token masks computed for constrained sequences (response_format, grammar, tools).",
          (double)es->grammar_masks);
    gauge(&t, "tessera_grammar_mask_seconds_total", "counter",
          "Time spent computing token masks, summed over the mask threads.",
          es->grammar_mask_ms / 1e3);
    gauge(&t, "tessera_grammar_wait_seconds_total", "counter",
          "Time engine steps waited for token masks after their forward pass.",
          es->grammar_wait_ms / 1e3);
    gauge(&t, "tessera_spec_drafted_tokens_total", "counter",
          "Speculative decoding: drafted tokens verified by the model.", (double)es->spec_drafted);
    gauge(&t, "tessera_spec_accepted_tokens_total", "counter",
          "Speculative decoding: drafted tokens accepted (each a token without its own step).",
          (double)es->spec_accepted);
    gauge(&t, "tessera_spec_verifications_total", "counter",
          "Speculative decoding: drafts verified (one sequence's draft checked in one step).",
          (double)es->spec_steps);
    for (int h = 0; h < TS_HIST_COUNT; h++) {
        const ts_histogram *hg = &c.hist[h];
        const char *name = k_hist_names[h];
        put(&t, "# HELP %s %s\n# TYPE %s histogram\n", name, k_hist_help[h], name);
        uint64_t cum = 0;
        for (int b = 0; b < hg->n_bounds; b++) {
            cum += hg->counts[b];
            put(&t, "%s_bucket{le=\"%g\"} %llu\n", name, hg->bounds[b], (unsigned long long)cum);
        }
        cum += hg->counts[hg->n_bounds];
        put(&t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
            (unsigned long long)cum, name, hg->sum, name, (unsigned long long)hg->count);
    }
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    *len = t.len;
    return t.s;
}
