/* server.c — server lifetime: create, the engine thread, start, graceful shutdown, destroy. */
#include "server/server_internal.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"

ts_server_config ts_server_config_default(void) {
    ts_server_config c = {
        .host = "127.0.0.1",
        .port = 8080,
        .api_key = NULL,
        .model_name = "model",
        .max_body = 1u << 20,
        .max_queue = 256,
        .conn_timeout_s = 60,
        .header_timeout_s = 5,
        .max_connections = 1024,
        .max_conns_per_ip = 0,
        .cors_origins = NULL,
        .log = NULL,
        .render_memory = (size_t)512 << 20,
        .render_timeout_ms = 10000,
        .grammar_timeout_ms = 5000,
        .responses_max = 1000,
        .responses_max_bytes = (size_t)64 << 20,
    };
    return c;
}

static char *dup_or_null(const char *s) {
    return s != NULL ? strdup(s) : NULL;
}

ts_status ts_server_create(const ts_server_config *cfg, ts_context *ctx, ts_server **out,
                           ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "server: NULL out");
    }
    *out = NULL;
    if (cfg == NULL || ctx == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "server: %s is NULL",
                            cfg == NULL ? "the configuration" : "the context");
    }
    /* The limits that bound admission and requests are the context's own. */
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    if (cfg->port < 0 || cfg->port > 65535 || cfg->max_body < 64 || cfg->max_queue < 0 ||
        info.max_seqs < 1 || info.n_ctx < 1 || cfg->conn_timeout_s < 0 ||
        cfg->header_timeout_s < 0 || cfg->max_connections < 1 || cfg->max_conns_per_ip < 0 ||
        cfg->model_name == NULL || cfg->model_name[0] == '\0') {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "server: invalid configuration (port %d, max body %zu, max queue %d, "
                            "max seqs %lld, ctx %lld, timeout %d s, header timeout %d s, "
                            "connections %d, per address %d)",
                            cfg->port, cfg->max_body, cfg->max_queue, (long long)info.max_seqs,
                            (long long)info.n_ctx, cfg->conn_timeout_s, cfg->header_timeout_s,
                            cfg->max_connections, cfg->max_conns_per_ip);
    }
    if (cfg->render_timeout_ms < 0 || cfg->grammar_timeout_ms < 0 ||
        (cfg->render_memory != 0 && cfg->render_memory < ((size_t)1 << 20))) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "server: invalid render limits (render memory %zu bytes, at least "
                            "1 MiB; render timeout %d ms, grammar timeout %d ms, not negative)",
                            cfg->render_memory, cfg->render_timeout_ms, cfg->grammar_timeout_ms);
    }
    if (cfg->api_key != NULL && cfg->api_key[0] == '\0') {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "server: the API key is empty");
    }
    ts_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "server: out of memory");
    }
    s->cfg = *cfg;
    ts_server_config defaults = ts_server_config_default();
    s->cfg.render_memory = cfg->render_memory ? cfg->render_memory : defaults.render_memory;
    s->cfg.render_timeout_ms =
        cfg->render_timeout_ms ? cfg->render_timeout_ms : defaults.render_timeout_ms;
    s->cfg.grammar_timeout_ms =
        cfg->grammar_timeout_ms ? cfg->grammar_timeout_ms : defaults.grammar_timeout_ms;
    s->host = dup_or_null(cfg->host ? cfg->host : "127.0.0.1");
    s->api_key = dup_or_null(cfg->api_key);
    s->model_name = dup_or_null(cfg->model_name);
    s->cors_origins = dup_or_null(cfg->cors_origins);
    if (s->host == NULL || s->model_name == NULL || (cfg->api_key && s->api_key == NULL) ||
        (cfg->cors_origins && s->cors_origins == NULL)) {
        ts_server_destroy(s);
        return ts_error_set(err, TS_ERR_NOMEM, "server: out of memory");
    }
    s->cfg.host = s->host;
    s->cfg.api_key = s->api_key;
    s->cfg.model_name = s->model_name;
    s->cfg.cors_origins = s->cors_origins;
    s->api_key_len = s->api_key ? strlen(s->api_key) : 0;
    s->ctx = ctx;
    s->llm = ts_context_llm(ctx);
    s->n_ctx = info.n_ctx;
    s->max_seqs = info.max_seqs;
    snprintf(s->spec_type, sizeof s->spec_type, "%s",
             info.spec_type != NULL ? info.spec_type : "none");
    s->draft_max = info.draft_max;
    s->draft_min = info.draft_min;
    s->spec_ngram_min = info.spec_ngram_min;
    s->spec_ngram_max = info.spec_ngram_max;
    s->spec_step_tokens = info.spec_step_tokens;
    s->n_vocab = ts_llm_n_vocab(s->llm);
    s->created = (int64_t)time(NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->id_salt = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^
                 (uint64_t)getpid() << 32;
    atomic_init(&s->id_counter, 1);
    atomic_init(&s->engine_stop, false);
    s->listen_fd_after_quiesce = -1;
    pthread_mutex_init(&s->mu, NULL);
    s->responses = ts_resp_store_create(cfg->responses_max > 0 ? (size_t)cfg->responses_max : 0,
                                        cfg->responses_max_bytes);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->embed_cv, NULL);
    pthread_cond_init(&s->render_cv, NULL);
    atomic_init(&s->stopping, false);
    ts_llm_info mi;
    ts_llm_get_info(s->llm, &mi);
    s->n_embd = mi.n_embd;
    s->encoder = mi.encoder != 0;
    s->embed_max_tokens =
        s->encoder && info.max_batch_tokens < info.n_ctx ? info.max_batch_tokens : info.n_ctx;
    const char *labels[TS_METRICS_MAX_ROUTES];
    for (int i = 0; i < ts_n_endpoints && i < TS_METRICS_MAX_ROUTES; i++) {
        labels[i] = ts_endpoints[i].label;
    }
    ts_metrics_init(&s->metrics, labels, ts_n_endpoints);
    ts_server_render_init(s);
    *out = s;
    return TS_OK;
}

/* The one thread that runs the model: every admitted request advances here, together. */
static void *engine_main(void *arg) {
    ts_server *s = arg;
    while (!atomic_load(&s->engine_stop)) {
        ts_server_run_embed_jobs(s, false);
        if (!ts_context_has_work(s->ctx)) {
            ts_context_wait(s->ctx, 100);
            continue;
        }
        bool busy = false;
        ts_error err = {0};
        if (ts_context_step(s->ctx, &busy, &err) != TS_OK && s->cfg.log != NULL) {
            fprintf(s->cfg.log, "engine: step failed: %s\n", err.msg);
            fflush(s->cfg.log);
        }
        if (!busy) {
            struct timespec d = {0, 1000000};
            nanosleep(&d, NULL);
        }
    }
    ts_server_run_embed_jobs(s, true);
    return NULL;
}

ts_status ts_server_start(ts_server *s, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->host, port, &hints, &res);
    if (gai != 0 || res == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "server: cannot resolve host '%s': %s",
                            s->host, gai_strerror(gai));
    }
    if (pthread_create(&s->engine_thread, NULL, engine_main, s) != 0) {
        freeaddrinfo(res);
        return ts_error_set(err, TS_ERR_NOMEM, "server: cannot start the engine thread");
    }
    s->engine_started = true;
    if (ts_conns_create(s) == TS_OK) {
        s->daemon = ts_http_start(s, res->ai_addr, res->ai_family == AF_INET6);
    }
    freeaddrinfo(res);
    if (s->daemon == NULL) {
        ts_conns_destroy(s);
        atomic_store(&s->engine_stop, true);
        ts_context_wake(s->ctx);
        pthread_join(s->engine_thread, NULL);
        s->engine_started = false;
        return ts_error_set(err, TS_ERR_IO,
                            "server: cannot listen on %s:%d (address in use or not local?)",
                            s->host, s->cfg.port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL ? info->port : s->cfg.port;
    return TS_OK;
}

int ts_server_port(const ts_server *s) {
    return s->port;
}

static void deadline_after(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits (s->mu held) until *counter is 0 or ms pass. */
static void wait_zero(ts_server *s, const int64_t *counter, int ms) {
    struct timespec dl;
    deadline_after(&dl, ms);
    while (*counter > 0) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0) {
            break;
        }
    }
}

void ts_server_shutdown(ts_server *s, int grace_ms) {
    if (s == NULL || s->shut_down) {
        return;
    }
    s->shut_down = true;
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    atomic_store(&s->stopping, true); /* renders and compiles before admission stop now */
    pthread_cond_broadcast(&s->render_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->daemon != NULL) {
        s->listen_fd_after_quiesce = MHD_quiesce_daemon(s->daemon);
    }
    pthread_mutex_lock(&s->mu);
    wait_zero(s, &s->in_flight, grace_ms);
    if (s->in_flight > 0) {
        /* Out of patience: end what is left; each client gets an error event or a 503. */
        for (ts_job *j = s->jobs; j != NULL; j = j->next) {
            pthread_mutex_lock(&j->mu);
            j->shutdown = true;
            for (int32_t k = 0; k < TS_API_MAX_PROMPTS; k++) {
                if (j->subs[k].added && !j->subs[k].done) {
                    ts_context_abort(s->ctx, j->subs[k].request_id);
                }
            }
            pthread_mutex_unlock(&j->mu);
        }
        wait_zero(s, &s->in_flight, 10000);
    }
    /* Let the HTTP threads write their last bytes before the daemon closes the sockets. */
    wait_zero(s, &s->n_requests_open, 2000);
    pthread_mutex_unlock(&s->mu);
    if (s->engine_started) {
        atomic_store(&s->engine_stop, true);
        ts_context_wake(s->ctx);
        pthread_join(s->engine_thread, NULL);
        s->engine_started = false;
    }
    /* Request workers end once the engine has stopped (their jobs are aborted or done); parked
     * streams are woken. Half-open connections hold no thread and close with the daemon. */
    ts_conns_stop(s, 10000);
    if (s->daemon != NULL) {
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
    }
    ts_conns_destroy(s);
    if (s->listen_fd_after_quiesce >= 0) {
        close(s->listen_fd_after_quiesce);
        s->listen_fd_after_quiesce = -1;
    }
}

void ts_server_destroy(ts_server *s) {
    if (s == NULL) {
        return;
    }
    if (s->daemon != NULL || s->engine_started) {
        ts_server_shutdown(s, 0);
    }
    ts_metrics_destroy(&s->metrics);
    ts_resp_store_destroy(s->responses);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->embed_cv);
    pthread_cond_destroy(&s->render_cv);
    pthread_mutex_destroy(&s->mu);
    free(s->host);
    free(s->api_key);
    free(s->model_name);
    free(s->cors_origins);
    free(s);
}
