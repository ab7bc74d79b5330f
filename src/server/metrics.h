/*
 * metrics.h — counters and latency histograms for GET /metrics (Prometheus text format 0.0.4).
 *
 * HTTP threads count requests by endpoint and status; the engine thread observes
 * time-to-first-token, inter-token latency and request duration. The engine's own gauges
 * (running / waiting sequences, KV blocks, prefix-cache hits) are read from a
 * ts_engine_stats snapshot (ts_context_get_stats) when the page is rendered.
 *
 * Thread safety: every function may be called from any thread (one mutex per ts_metrics).
 */
#ifndef TS_SERVER_METRICS_H
#define TS_SERVER_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

/* Requests are counted by route: an index into the labels given to ts_metrics_init (the
 * server's route table, http.c); any other index counts as "other" (unknown paths, 404). */
#define TS_METRICS_MAX_ROUTES 64

/* Statuses counted one by one; any other lands in "other". 499: the client went away. */
#define TS_METRICS_N_STATUS 11

typedef enum ts_hist_id {
    TS_HIST_TTFT = 0, /* seconds from arrival to the first generated token */
    TS_HIST_ITL,      /* seconds between consecutive tokens of one sequence */
    TS_HIST_E2E,      /* seconds from arrival to the last event of a request */
    TS_HIST_COUNT,
} ts_hist_id;

#define TS_HIST_MAX_BOUNDS 20

typedef struct ts_histogram {
    const double *bounds; /* [n_bounds] upper bounds, ascending (le="..."), +Inf implied */
    int n_bounds;
    uint64_t counts[TS_HIST_MAX_BOUNDS + 1]; /* per bucket, not cumulative; last is +Inf */
    uint64_t count;
    double sum;
} ts_histogram;

typedef struct ts_metrics {
    pthread_mutex_t mu;
    const char *labels[TS_METRICS_MAX_ROUTES]; /* the endpoint label of each route (rows may
                                                  share one: they are counted together) */
    int n_routes;
    uint64_t requests[TS_METRICS_MAX_ROUTES + 1][TS_METRICS_N_STATUS + 1]; /* last: other */
    uint64_t prompt_tokens;     /* usage.prompt_tokens of finished requests */
    uint64_t completion_tokens; /* usage.completion_tokens of finished requests */
    uint64_t aborted;           /* requests aborted (client gone or shutdown) */
    ts_histogram hist[TS_HIST_COUNT];
} ts_metrics;

/* labels: [n_routes] static strings (at most TS_METRICS_MAX_ROUTES are kept). */
void ts_metrics_init(ts_metrics *m, const char *const *labels, int n_routes);
void ts_metrics_destroy(ts_metrics *m);
void ts_metrics_count_request(ts_metrics *m, int route, int status);
void ts_metrics_observe(ts_metrics *m, ts_hist_id h, double seconds);
void ts_metrics_add_usage(ts_metrics *m, uint64_t prompt, uint64_t completion, bool aborted);

/* Renders the whole page; *len gets its length. The caller frees the string; NULL when out of
 * memory. in_flight: requests admitted and not finished. */
char *ts_metrics_render(ts_metrics *m, const ts_engine_stats *es, int64_t in_flight, size_t *len);

#endif /* TS_SERVER_METRICS_H */
