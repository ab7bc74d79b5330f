/*
 * conn.c — connections around libmicrohttpd's event loop: limits, the header deadline, request
 * workers and parked streams.
 *
 * libmicrohttpd runs ONE event thread (epoll) for every socket, so a connection that has sent
 * half a header, or a client that reads slowly, costs a socket and a little memory but no
 * thread. Nothing may block that thread, hence:
 *
 *  - Request workers. A request whose handler can block (generation, embeddings, tokenizing a
 *    large body, /metrics) is suspended and handed to a thread of its own (ts_conns_spawn); when
 * the handler has built its reply the worker resumes the connection and the event thread queues the
 * reply. Threads exist only for requests whose body has fully arrived, and those are bounded by the
 * connection limit and by admission (503 when the queue is full).
 *  - Parked streams. An SSE stream's reader (stream.c) runs on the event thread. When no event
 *    is ready it parks the connection (ts_conns_park): suspends it and registers the job's
 *    eventfd and the client socket with this file's helper thread, which resumes the
 *    connection when a token arrives, the client hangs up or the keep-alive comment is due.
 *  - The header deadline. A connection must deliver a complete request header within
 *    header_timeout seconds of connecting (or of finishing its previous request); the helper
 *    thread shuts the socket down otherwise, so that neither a silent client nor one that
 *    trickles a byte at a time (which an idle timeout never catches) keeps its slot.
 *  - Body probes. A request announcing a body over the limit is suspended until its first body
 *    byte arrives (then http.c reads and drops the body before its 413) or PROBE_MS pass (the
 *    client waits for an answer: the 413 is queued at once); see ts_conns_probe_body.
 *  - Limits answered in HTTP. libmicrohttpd's own limit is set above max_connections so that a
 *    client over max_connections, or over the per-address cap, is still accepted and answered
 *    503 with a JSON body when its header arrives (ts_conns_request_begin) instead of being
 *    reset.
 *
 * Slow readers: libmicrohttpd closes a connection that makes no progress (nothing sent or
 * received) for conn_timeout_s; a suspended connection (a running request, a parked stream)
 * does not time out, so only a client that stops reading while bytes wait for it is cut.
 *
 * Locking: cs->mu guards the slot list, the park list and the counters. libmicrohttpd's
 * functions (suspend, resume) are never called with cs->mu held by the helper thread, and the
 * event thread's callbacks take cs->mu briefly, so the two locks never nest in both orders.
 * A slot is removed in the CLOSED notification, which libmicrohttpd sends before it closes the
 * socket; so while the helper thread holds cs->mu and sees the slot, its descriptor is still
 * the client's and shutdown() cannot hit a reused descriptor.
 */
#include "server/server_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* How often the helper thread looks at header deadlines when nothing else wakes it. */
#define TICK_MS 100

typedef struct conn_slot {
    struct conn_slot *prev, *next;
    struct MHD_Connection *c;
    int fd;
    unsigned char addr[16]; /* the client's address (IPv4 or IPv4-mapped: 4 bytes) */
    size_t addr_len;
    double t_wait;   /* since when it waits for a request header */
    bool in_request; /* a header has arrived; the request is not complete */
    bool cut;        /* shut down by the header deadline */
    ts_conn_refusal refusal;
} conn_slot;

typedef struct park {
    struct park *next;
    uint64_t id; /* epoll data of its descriptors */
    struct MHD_Connection *c;
    int efd, sock; /* efd -1 for a body probe */
    double deadline;
    bool woken;
    void (*expire)(void *arg); /* a probe's, called when the deadline passed unwoken */
    void *arg;
} park;

struct ts_conns {
    pthread_mutex_t mu;
    conn_slot *slots;
    int64_t n_slots;
    int64_t n_workers;
    park *parks;
    uint64_t next_id;
    int ep;      /* epoll of parked descriptors and wake_fd */
    int wake_fd; /* eventfd: stop the helper thread */
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    double header_timeout_s;
    int64_t n_cut, n_refused; /* for the log at shutdown */
};

static void addr_key(const struct sockaddr *sa, unsigned char out[16], size_t *len) {
    static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    *len = 0;
    if (sa == NULL) {
        return;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        memcpy(out, &in->sin_addr, 4);
        *len = 4;
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        const unsigned char *b = (const unsigned char *)&in6->sin6_addr;
        /* A v4 client of a dual-stack socket is the same client as over IPv4. */
        if (memcmp(b, v4_mapped, 12) == 0) {
            memcpy(out, b + 12, 4);
            *len = 4;
        } else {
            memcpy(out, b, 16);
            *len = 16;
        }
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    ts_server *s = cls;
    ts_conns *cs = s->conns;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_slot *slot = calloc(1, sizeof *slot);
        *socket_context = slot;
        if (slot == NULL) {
            return; /* unlimited and untimed, but served: better than refusing on OOM */
        }
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        slot->c = c;
        slot->fd = fd != NULL ? fd->connect_fd : -1;
        addr_key(ad != NULL ? ad->client_addr : NULL, slot->addr, &slot->addr_len);
        slot->t_wait = ts_server_now();
        pthread_mutex_lock(&cs->mu);
        int64_t same = 1;
        for (conn_slot *o = cs->slots; o != NULL && s->cfg.max_conns_per_ip > 0; o = o->next) {
            same += o->addr_len == slot->addr_len && memcmp(o->addr, slot->addr, o->addr_len) == 0;
        }
        cs->n_slots++;
        /* Decided once, at connect: the newest connections are the ones turned away, never a
         * keep-alive client that was here first. */
        if (cs->n_slots > s->cfg.max_connections) {
            slot->refusal = TS_CONN_REFUSED_FULL;
        } else if (s->cfg.max_conns_per_ip > 0 && same > s->cfg.max_conns_per_ip) {
            slot->refusal = TS_CONN_REFUSED_PER_IP;
        }
        cs->n_refused += slot->refusal != TS_CONN_ACCEPTED;
        slot->next = cs->slots;
        if (cs->slots != NULL) {
            cs->slots->prev = slot;
        }
        cs->slots = slot;
        pthread_mutex_unlock(&cs->mu);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_slot *slot = *socket_context;
        if (slot == NULL) {
            return;
        }
        pthread_mutex_lock(&cs->mu);
        if (slot->prev != NULL) {
            slot->prev->next = slot->next;
        } else {
            cs->slots = slot->next;
        }
        if (slot->next != NULL) {
            slot->next->prev = slot->prev;
        }
        cs->n_slots--;
        pthread_mutex_unlock(&cs->mu);
        free(slot);
        *socket_context = NULL;
    }
}

static conn_slot *slot_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

ts_conn_refusal ts_conns_request_begin(ts_server *s, struct MHD_Connection *c) {
    conn_slot *slot = slot_of(c);
    if (slot == NULL || s->conns == NULL) {
        return TS_CONN_ACCEPTED;
    }
    pthread_mutex_lock(&s->conns->mu);
    slot->in_request = true;
    ts_conn_refusal r = slot->refusal;
    pthread_mutex_unlock(&s->conns->mu);
    return r;
}

void ts_conns_request_end(ts_server *s, struct MHD_Connection *c) {
    conn_slot *slot = slot_of(c);
    if (slot == NULL || s->conns == NULL) {
        return;
    }
    pthread_mutex_lock(&s->conns->mu);
    slot->in_request = false;
    slot->t_wait = ts_server_now(); /* the next request's header is due from now */
    pthread_mutex_unlock(&s->conns->mu);
}

/* ---- request workers ------------------------------------------------------------------- */

typedef struct worker {
    ts_server *s;
    struct MHD_Connection *c;
    void (*fn)(void *arg);
    void *arg;
} worker;

static void worker_done(ts_conns *cs) {
    pthread_mutex_lock(&cs->mu);
    cs->n_workers--;
    pthread_mutex_unlock(&cs->mu);
}

static void *worker_main(void *arg) {
    worker w = *(worker *)arg;
    free(arg);
    w.fn(w.arg);
    /* After the resume the connection (and whatever fn's argument lives in) belongs to the
     * event thread again; only the server-lifetime counter is touched afterwards. Shutdown
     * waits for the counter, so the daemon never stops with this connection suspended. */
    MHD_resume_connection(w.c);
    worker_done(w.s->conns);
    return NULL;
}

bool ts_conns_spawn(ts_server *s, struct MHD_Connection *c, void (*fn)(void *), void *arg) {
    ts_conns *cs = s->conns;
    worker *w = malloc(sizeof *w);
    if (w == NULL) {
        return false;
    }
    *w = (worker){.s = s, .c = c, .fn = fn, .arg = arg};
    pthread_mutex_lock(&cs->mu);
    cs->n_workers++;
    pthread_mutex_unlock(&cs->mu);
    /* Suspended before the thread exists: a worker that finishes at once must find the
     * connection suspended when it resumes it. */
    MHD_suspend_connection(c);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(w);
        MHD_resume_connection(c);
        worker_done(cs);
        return false;
    }
    return true;
}

/* ---- parked streams -------------------------------------------------------------------- */

/* Suspends c (the caller is its access handler or content reader) and hands it to the helper
 * thread, which resumes it when efd (unless -1) is readable, when sock shows sock_events, or
 * at the deadline, where it first calls expire(arg) (when set). */
static bool add_park(ts_conns *cs, struct MHD_Connection *c, int efd, int sock,
                     uint32_t sock_events, int timeout_ms, void (*expire)(void *), void *arg) {
    park *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return false;
    }
    MHD_suspend_connection(c);
    pthread_mutex_lock(&cs->mu);
    p->id = ++cs->next_id;
    p->c = c;
    p->efd = efd;
    p->sock = sock;
    p->deadline = ts_server_now() + timeout_ms / 1e3;
    p->expire = expire;
    p->arg = arg;
    /* Level-triggered: an event that arrived between the caller's last look and this
     * registration wakes the helper at once. */
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = p->id};
    struct epoll_event se = {.events = sock_events, .data.u64 = p->id};
    if ((efd >= 0 && epoll_ctl(cs->ep, EPOLL_CTL_ADD, efd, &ev) != 0) ||
        epoll_ctl(cs->ep, EPOLL_CTL_ADD, sock, &se) != 0) {
        p->woken = true; /* resumed at the next tick; the caller then looks again */
    }
    p->next = cs->parks;
    cs->parks = p;
    pthread_mutex_unlock(&cs->mu);
    return true;
}

bool ts_conns_park(ts_server *s, int sock, int efd, int timeout_ms) {
    ts_conns *cs = s->conns;
    if (cs == NULL || sock < 0 || atomic_load(&cs->stop)) {
        return false;
    }
    struct MHD_Connection *c = NULL;
    pthread_mutex_lock(&cs->mu);
    for (conn_slot *o = cs->slots; o != NULL; o = o->next) {
        if (o->fd == sock) {
            c = o->c;
            break;
        }
    }
    pthread_mutex_unlock(&cs->mu);
    /* Only hang-ups of the socket count: a pipelined request must not wake it forever. */
    return c != NULL && add_park(cs, c, efd, sock, EPOLLRDHUP, timeout_ms, NULL, NULL);
}

bool ts_conns_probe_body(ts_server *s, struct MHD_Connection *c, int timeout_ms,
                         void (*expire)(void *), void *arg) {
    ts_conns *cs = s->conns;
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (cs == NULL || fd == NULL || atomic_load(&cs->stop)) {
        return false;
    }
    return add_park(cs, c, -1, fd->connect_fd, EPOLLIN | EPOLLRDHUP, timeout_ms, expire, arg);
}

/* Takes the parks to resume off the list (cs->mu held): woken ones, those past their
 * deadline, or all of them. */
static park *take_parks(ts_conns *cs, double now, bool all) {
    park *out = NULL;
    for (park **pp = &cs->parks; *pp != NULL;) {
        park *p = *pp;
        if (all || p->woken || now >= p->deadline) {
            *pp = p->next;
            if (p->efd >= 0) {
                epoll_ctl(cs->ep, EPOLL_CTL_DEL, p->efd, NULL);
            }
            epoll_ctl(cs->ep, EPOLL_CTL_DEL, p->sock, NULL);
            if (all || p->woken) {
                p->expire = NULL; /* woken (or shutting down): nothing expired */
            }
            p->next = out;
            out = p;
        } else {
            pp = &p->next;
        }
    }
    return out;
}

static void resume_parks(park *p) {
    while (p != NULL) {
        park *next = p->next;
        if (p->expire != NULL) {
            p->expire(p->arg); /* may queue a response: allowed while suspended */
        }
        MHD_resume_connection(p->c);
        free(p);
        p = next;
    }
}

static void *helper_main(void *arg) {
    ts_server *s = arg;
    ts_conns *cs = s->conns;
    struct epoll_event evs[64];
    while (!atomic_load(&cs->stop)) {
        int n = epoll_wait(cs->ep, evs, 64, TICK_MS);
        double now = ts_server_now();
        pthread_mutex_lock(&cs->mu);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) {
                uint64_t v;
                ssize_t r = read(cs->wake_fd, &v, sizeof v);
                (void)r;
                continue;
            }
            for (park *p = cs->parks; p != NULL; p = p->next) {
                if (p->id == evs[i].data.u64) {
                    p->woken = true;
                    break;
                }
            }
        }
        park *wake = take_parks(cs, now, false);
        for (conn_slot *o = cs->slots; o != NULL; o = o->next) {
            if (!o->in_request && !o->cut && o->fd >= 0 &&
                now - o->t_wait >= cs->header_timeout_s) {
                /* The event thread sees end-of-file and closes the connection itself. */
                shutdown(o->fd, SHUT_RDWR);
                o->cut = true;
                cs->n_cut++;
            }
        }
        pthread_mutex_unlock(&cs->mu);
        resume_parks(wake);
    }
    return NULL;
}

void ts_conns_stats(ts_server *s, ts_conns_counts *out) {
    ts_conns *cs = s->conns;
    *out = (ts_conns_counts){0};
    if (cs == NULL) {
        return;
    }
    pthread_mutex_lock(&cs->mu);
    out->open = cs->n_slots;
    out->workers = cs->n_workers;
    for (park *p = cs->parks; p != NULL; p = p->next) {
        out->parked++;
    }
    out->cut = cs->n_cut;
    out->refused = cs->n_refused;
    pthread_mutex_unlock(&cs->mu);
}

/* ---- lifetime -------------------------------------------------------------------------- */

ts_status ts_conns_create(ts_server *s) {
    ts_conns *cs = calloc(1, sizeof *cs);
    if (cs == NULL) {
        return TS_ERR_NOMEM;
    }
    pthread_mutex_init(&cs->mu, NULL);
    atomic_init(&cs->stop, false);
    double ht = s->cfg.header_timeout_s > 0 ? s->cfg.header_timeout_s : 1e9;
    /* An idle timeout shorter than the header deadline applies to headers as well. */
    if (s->cfg.conn_timeout_s > 0 && s->cfg.conn_timeout_s < ht) {
        ht = s->cfg.conn_timeout_s;
    }
    cs->header_timeout_s = ht;
    cs->ep = epoll_create1(EPOLL_CLOEXEC);
    cs->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->conns = cs;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (cs->ep < 0 || cs->wake_fd < 0 || epoll_ctl(cs->ep, EPOLL_CTL_ADD, cs->wake_fd, &ev) != 0 ||
        pthread_create(&cs->thread, NULL, helper_main, s) != 0) {
        ts_conns_destroy(s);
        return TS_ERR_IO;
    }
    cs->thread_started = true;
    return TS_OK;
}

MHD_NotifyConnectionCallback ts_conns_notify_fn(void) {
    return on_connection;
}

void ts_conns_stop(ts_server *s, int wait_ms) {
    ts_conns *cs = s->conns;
    if (cs == NULL) {
        return;
    }
    pthread_mutex_lock(&cs->mu);
    double deadline = ts_server_now() + wait_ms / 1e3;
    while (cs->n_workers > 0 && ts_server_now() < deadline) {
        pthread_mutex_unlock(&cs->mu);
        struct timespec d = {0, 10 * 1000000L};
        nanosleep(&d, NULL);
        pthread_mutex_lock(&cs->mu);
    }
    int64_t left = cs->n_workers;
    pthread_mutex_unlock(&cs->mu);
    if (left > 0 && s->cfg.log != NULL) {
        fprintf(s->cfg.log, "http: %lld request worker(s) still running at shutdown\n",
                (long long)left);
    }
    if (cs->thread_started) {
        atomic_store(&cs->stop, true);
        uint64_t one = 1;
        ssize_t r = write(cs->wake_fd, &one, sizeof one);
        (void)r;
        pthread_join(cs->thread, NULL);
        cs->thread_started = false;
    }
    /* libmicrohttpd must not be stopped with suspended connections: wake every parked stream
     * (its reader then ends it, the job having been aborted by then). */
    pthread_mutex_lock(&cs->mu);
    park *all = take_parks(cs, 0, true);
    pthread_mutex_unlock(&cs->mu);
    resume_parks(all);
    if (s->cfg.log != NULL && (cs->n_cut > 0 || cs->n_refused > 0)) {
        fprintf(s->cfg.log,
                "http: %lld connection(s) cut for want of a request header, %lld refused (503)\n",
                (long long)cs->n_cut, (long long)cs->n_refused);
    }
}

void ts_conns_destroy(ts_server *s) {
    ts_conns *cs = s->conns;
    if (cs == NULL) {
        return;
    }
    if (cs->thread_started) {
        ts_conns_stop(s, 0);
    }
    while (cs->slots != NULL) { /* the daemon is stopped: these are stale */
        conn_slot *next = cs->slots->next;
        free(cs->slots);
        cs->slots = next;
    }
    if (cs->ep >= 0) {
        close(cs->ep);
    }
    if (cs->wake_fd >= 0) {
        close(cs->wake_fd);
    }
    pthread_mutex_destroy(&cs->mu);
    free(cs);
    s->conns = NULL;
}
