/*
 * job.c — the queue between the engine thread and one HTTP request.
 *
 * The request callback (on the engine thread, inside ts_context_step) copies each event into
 * the job's list, records latency metrics and writes the job's eventfd; the HTTP thread polls
 * that eventfd together with its client socket, so it wakes for new tokens and for a
 * disconnect alike. The callback never blocks on the client: it takes one short mutex and
 * appends.
 *
 * "Finished" (all context requests reported request_done) is decided once, by whichever side
 * sees it last, and releases the job's admission slot.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/server_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

double ts_server_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

ts_job *ts_job_create(ts_server *s, int32_t n_subs, int32_t n_per) {
    ts_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        return NULL;
    }
    j->t_last = calloc((size_t)n_subs * (size_t)n_per, sizeof *j->t_last);
    j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->t_last == NULL || j->efd < 0) {
        if (j->efd >= 0) {
            close(j->efd);
        }
        free(j->t_last);
        free(j);
        return NULL;
    }
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 1;
    j->srv = s;
    j->n_subs = n_subs;
    j->n_per = n_per;
    j->t_arrival = ts_server_now();
    for (int32_t k = 0; k < n_subs; k++) {
        j->subs[k].job = j;
        j->subs[k].index = k;
    }
    return j;
}

void ts_job_events_free(ts_job_event *ev) {
    while (ev != NULL) {
        ts_job_event *next = ev->next;
        free(ev->message);
        free(ev);
        ev = next;
    }
}

static void job_unref(ts_job *j) {
    pthread_mutex_lock(&j->mu);
    int refs = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (refs > 0) {
        return;
    }
    ts_job_events_free(j->head);
    close(j->efd);
    free(j->t_last);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void wake(ts_job *j) {
    uint64_t one = 1;
    ssize_t r = write(j->efd, &one, sizeof one);
    (void)r; /* EAGAIN means the counter is already non-zero: the reader wakes anyway */
}

/* Releases the admission slot once every context request has finished. */
static void job_finalize(ts_job *j, bool aborted) {
    ts_server *s = j->srv;
    ts_metrics_observe(&s->metrics, TS_HIST_E2E, ts_server_now() - j->t_arrival);
    ts_metrics_add_usage(&s->metrics, j->usage_prompt, j->usage_completion, aborted);
    pthread_mutex_lock(&s->mu);
    if (j->admitted) {
        if (j->prev != NULL) {
            j->prev->next = j->next;
        } else {
            s->jobs = j->next;
        }
        if (j->next != NULL) {
            j->next->prev = j->prev;
        }
        j->next = j->prev = NULL;
        j->admitted = false;
        s->in_flight--;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

static void on_event(const ts_engine_event *ev, void *user) {
    ts_job_sub *sub = user;
    ts_job *j = sub->job;
    ts_server *s = j->srv;
    double now = ts_server_now();
    int32_t choice = sub->index * j->n_per + ev->index;
    if (ev->token >= 0 && ev->finish != TS_FINISH_ABORT && choice < j->n_subs * j->n_per) {
        double *last = &j->t_last[choice];
        ts_metrics_observe(&s->metrics, *last == 0 ? TS_HIST_TTFT : TS_HIST_ITL,
                           now - (*last == 0 ? j->t_arrival : *last));
        *last = now;
    }
    ts_job_event *e = NULL;
    pthread_mutex_lock(&j->mu);
    if (!j->abandoned) {
        e = malloc(sizeof *e + ev->text_len + 1);
    }
    if (e != NULL) {
        e->next = NULL;
        e->choice = choice;
        e->token = ev->token;
        e->finish = ev->finish;
        e->stop_index = ev->stop_index;
        e->prompt_tokens = ev->prompt_tokens;
        e->cached_tokens = ev->cached_tokens;
        e->completion_tokens = ev->completion_tokens;
        e->has_logprobs = ev->logprobs != NULL;
        if (e->has_logprobs) {
            e->logprobs = *ev->logprobs;
        }
        e->message = ev->message != NULL ? strdup(ev->message) : NULL;
        e->text_len = ev->text_len;
        memcpy(e->text, ev->text, ev->text_len);
        e->text[ev->text_len] = '\0';
        if (j->tail != NULL) {
            j->tail->next = e;
        } else {
            j->head = e;
        }
        j->tail = e;
    }
    /* Out of memory (e == NULL while not abandoned) loses this event's text only; the finish
     * is still counted below and the HTTP side sees the request end. */
    if (ev->finish != TS_FINISH_NONE) {
        j->usage_completion += (uint64_t)ev->completion_tokens;
    }
    bool finalize = false, aborted = ev->finish == TS_FINISH_ABORT;
    if (ev->request_done) {
        sub->done = true;
        j->usage_prompt += (uint64_t)ev->prompt_tokens;
        j->n_subs_done++;
        finalize = j->n_subs_done == j->n_subs;
    }
    pthread_mutex_unlock(&j->mu);
    /* Release the admission slot before waking the HTTP side: a client that has read the
     * last byte of its response may send the next request at once, and must find room. */
    if (finalize) {
        job_finalize(j, aborted);
    }
    wake(j);
    if (ev->request_done) {
        job_unref(j); /* the context request's reference */
    }
}

ts_status ts_job_add(ts_job *j, int32_t k, const int32_t *ids, int32_t n_ids,
                     const ts_request_params *params, ts_error *err) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    ts_job_sub *sub = &j->subs[k];
    ts_status st =
        ts_context_submit(j->srv->ctx, ids, n_ids, params, on_event, sub, &sub->request_id, err);
    pthread_mutex_lock(&j->mu);
    if (st == TS_OK) {
        sub->added = true;
        j->n_added++;
    } else {
        j->refs--;
    }
    pthread_mutex_unlock(&j->mu);
    return st;
}

int ts_job_wait(ts_job *j, int sock, int timeout_ms) {
    struct pollfd fds[2] = {
        {.fd = j->efd, .events = POLLIN},
        /* Only hang-ups: a client that sends more bytes (a pipelined request) must not make
         * this poll return at once forever. */
        {.fd = sock, .events = POLLRDHUP},
    };
    int nfds = sock >= 0 ? 2 : 1;
    int r = poll(fds, (nfds_t)nfds, timeout_ms);
    if (r < 0) {
        return errno == EINTR ? 0 : 1;
    }
    if (nfds == 2 && (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
        return -1;
    }
    if (fds[0].revents & POLLIN) {
        uint64_t v;
        ssize_t n = read(j->efd, &v, sizeof v);
        (void)n;
        return 1;
    }
    return 0;
}

ts_job_event *ts_job_take(ts_job *j, bool *all_done) {
    pthread_mutex_lock(&j->mu);
    ts_job_event *ev = j->head;
    j->head = j->tail = NULL;
    *all_done = j->n_subs_done == j->n_subs;
    pthread_mutex_unlock(&j->mu);
    return ev;
}

bool ts_job_was_shutdown(ts_job *j) {
    pthread_mutex_lock(&j->mu);
    bool v = j->shutdown;
    pthread_mutex_unlock(&j->mu);
    return v;
}

void ts_job_release(ts_job *j) {
    if (j == NULL) {
        return;
    }
    uint64_t abort_ids[TS_API_MAX_PROMPTS];
    int n_abort = 0;
    pthread_mutex_lock(&j->mu);
    j->abandoned = true;
    ts_job_events_free(j->head);
    j->head = j->tail = NULL;
    /* Prompts that never reached the context count as finished. */
    bool finalize = false;
    if (j->n_subs != j->n_added) {
        j->n_subs = j->n_added;
        finalize = j->n_subs_done == j->n_subs;
    }
    for (int32_t k = 0; k < TS_API_MAX_PROMPTS; k++) {
        if (j->subs[k].added && !j->subs[k].done) {
            abort_ids[n_abort++] = j->subs[k].request_id;
        }
    }
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < n_abort; i++) {
        ts_context_abort(j->srv->ctx, abort_ids[i]);
    }
    if (finalize) {
        job_finalize(j, n_abort > 0);
    }
    job_unref(j);
}

bool ts_server_admit(ts_server *s, ts_job *j, const char **why) {
    pthread_mutex_lock(&s->mu);
    bool ok = false;
    if (s->draining) {
        *why = "the server is shutting down";
    } else if (s->in_flight >= s->max_seqs + s->cfg.max_queue) {
        *why = "the server is overloaded: the request queue is full";
    } else {
        ok = true;
        s->in_flight++;
        j->admitted = true;
        j->next = s->jobs;
        j->prev = NULL;
        if (s->jobs != NULL) {
            s->jobs->prev = j;
        }
        s->jobs = j;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}
