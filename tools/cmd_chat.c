/*
 * cmd_chat.c — `tessera chat`: an interactive conversation with the model's chat template.
 *
 * Each turn renders the whole conversation through the template and submits it as one
 * request; the engine's prefix cache finds the earlier turns already computed, so only the new
 * message is prefilled. When the conversation no longer fits the context, the oldest turns
 * (after the system message) are dropped. Commands: /reset clears the history, /exit quits
 * (so does end of input).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "common.h"

typedef struct turn_state {
    char *reply;
    size_t len, cap;
    bool done;
    ts_finish_reason finish;
    int32_t n_gen;
    char error[256];
} turn_state;

static void usage(FILE *f) {
    fprintf(f, "usage: tessera chat -m MODEL [--system TEXT] [-n N] [--temp T] [--seed S] "
               "[options]\n\n"
               "  --system TEXT    system message\n"
               "  -n N             reply length limit in tokens (default 1024)\n"
               "  --temp T         temperature (default 0.7; 0: greedy)\n"
               "  --seed S         random seed\n\n"
               "In the chat: /reset clears the history, /exit quits.\n\n");
    ts_cli_print_common_help(f);
}

static void on_event(const ts_engine_event *ev, void *user) {
    turn_state *t = user;
    fwrite(ev->text, 1, ev->text_len, stdout);
    fflush(stdout);
    if (t->len + ev->text_len + 1 > t->cap) {
        size_t cap = (t->len + ev->text_len + 1) * 2;
        char *r = realloc(t->reply, cap);
        if (r == NULL) {
            return;
        }
        t->reply = r;
        t->cap = cap;
    }
    memcpy(t->reply + t->len, ev->text, ev->text_len);
    t->len += ev->text_len;
    t->reply[t->len] = '\0';
    if (ev->finish != TS_FINISH_NONE) {
        t->finish = ev->finish;
        t->n_gen = ev->completion_tokens;
        if (ev->message != NULL) {
            snprintf(t->error, sizeof t->error, "%s", ev->message);
        }
    }
    if (ev->request_done) {
        t->done = true;
    }
}

typedef struct history {
    ts_message *msgs;
    char **owned; /* contents we allocated, parallel to msgs */
    size_t n, cap;
} history;

static bool history_push(history *h, const char *role, const char *content) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        ts_message *m = realloc(h->msgs, cap * sizeof *m);
        if (m == NULL) {
            return false;
        }
        h->msgs = m;
        char **o = realloc(h->owned, cap * sizeof *o);
        if (o == NULL) {
            return false;
        }
        h->owned = o;
        h->cap = cap;
    }
    char *copy = strdup(content);
    if (copy == NULL) {
        return false;
    }
    h->owned[h->n] = copy;
    h->msgs[h->n] = (ts_message){role, copy};
    h->n++;
    return true;
}

/* Drops the oldest user/assistant pair after an optional system message. */
static bool history_drop_oldest(history *h) {
    size_t first = h->n > 0 && strcmp(h->msgs[0].role, "system") == 0 ? 1 : 0;
    if (h->n < first + 2) {
        return false;
    }
    free(h->owned[first]);
    free(h->owned[first + 1]);
    memmove(&h->msgs[first], &h->msgs[first + 2], (h->n - first - 2) * sizeof *h->msgs);
    memmove(&h->owned[first], &h->owned[first + 2], (h->n - first - 2) * sizeof *h->owned);
    h->n -= 2;
    return true;
}

static void history_clear(history *h, size_t keep) {
    while (h->n > keep) {
        free(h->owned[--h->n]);
    }
}

int ts_cmd_chat(int argc, char **argv) {
    ts_cli_opts co;
    ts_cli_opts_init(&co);
    ts_request_params req = ts_request_params_default();
    req.sampling.temperature = 0.7f;
    req.sampling.top_p = 0.95f;
    req.sampling.min_p = 0.05f;
    req.max_tokens = 1024;
    const char *system = NULL;
    for (int i = 1; i < argc; i++) {
        int r = ts_cli_parse_common(&co, argc, argv, &i);
        if (r < 0) {
            return 2;
        }
        if (r > 0) {
            continue;
        }
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (val == NULL) {
            fprintf(stderr, "error: unknown option or missing value: %s\n", a);
            return 2;
        } else if (strcmp(a, "--system") == 0) {
            system = val;
        } else if (strcmp(a, "-n") == 0) {
            long v = strtol(val, &end, 10);
            if (*end != '\0' || v < 1 || v > (1L << 24)) {
                fprintf(stderr, "error: -n: bad value '%s'\n", val);
                return 2;
            }
            req.max_tokens = (int32_t)v;
        } else if (strcmp(a, "--temp") == 0) {
            req.sampling.temperature = strtof(val, &end);
            if (*end != '\0') {
                fprintf(stderr, "error: --temp: bad value '%s'\n", val);
                return 2;
            }
        } else if (strcmp(a, "--seed") == 0) {
            req.seed = strtoull(val, &end, 10);
            req.has_seed = *end == '\0';
        } else {
            fprintf(stderr, "error: unknown option: %s\n", a);
            return 2;
        }
        i++;
    }
    ts_cli cli;
    int rc = ts_cli_open(&co, &cli);
    if (rc != 0) {
        return rc;
    }
    if (!ts_cli_has_chat_template(&cli)) {
        fprintf(stderr, "error: the model has no usable chat template; pass "
                        "--chat-template-file F or --chat-template NAME\n");
        ts_cli_close(&cli);
        return 1;
    }
    history h = {0};
    if (system != NULL) {
        history_push(&h, "system", system);
    }
    size_t keep = h.n;
    int64_t n_ctx = cli.info.n_ctx; /* the engine's, after its defaults */
    fprintf(stderr, "tessera chat (%s template) — /reset clears, /exit quits\n",
            cli.info.chat_template != NULL ? cli.info.chat_template : "Jinja");
    char *line = NULL;
    size_t lcap = 0;
    for (;;) {
        fprintf(stderr, "\n> ");
        ssize_t len = getline(&line, &lcap, stdin);
        if (len < 0) {
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0) {
            continue;
        }
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0) {
            break;
        }
        if (strcmp(line, "/reset") == 0) {
            history_clear(&h, keep);
            fprintf(stderr, "(history cleared)\n");
            continue;
        }
        if (!history_push(&h, "user", line)) {
            rc = 1;
            break;
        }
        /* Render; drop old turns while the prompt leaves less than a quarter of the context. */
        int32_t *ids = NULL;
        size_t n_ids = 0;
        ts_error err = {0};
        ts_status st;
        for (;;) {
            char *text = NULL;
            size_t tlen = 0;
            st = ts_context_chat_prompt(cli.ctx, h.msgs, h.n, 1, &text, &tlen, &err);
            if (st == TS_OK) {
                ts_free(ids);
                ids = NULL;
                st = ts_cli_tokenize(&cli, text, &ids, &n_ids, &err);
            }
            ts_free(text);
            if (st != TS_OK || (int64_t)n_ids * 4 < n_ctx * 3 || !history_drop_oldest(&h)) {
                break;
            }
        }
        turn_state t = {0};
        int32_t room = (int32_t)(n_ctx - (int64_t)n_ids);
        req.max_tokens = req.max_tokens < room ? req.max_tokens : room;
        if (st == TS_OK && room <= 0) {
            snprintf(err.msg, sizeof err.msg, "the message (%zu tokens) does not fit the "
                     "context (%lld)", n_ids, (long long)n_ctx);
            st = TS_ERR_LIMIT;
        }
        if (st == TS_OK) {
            st = ts_context_submit(cli.ctx, ids, (int32_t)n_ids, &req, on_event, &t, NULL, &err);
        }
        ts_free(ids);
        if (st != TS_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            history_clear(&h, h.n - 1); /* forget the message that failed */
            continue;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!t.done) {
            bool busy = false;
            if (ts_context_step(cli.ctx, &busy, &err) != TS_OK) {
                fprintf(stderr, "\nerror: %s\n", err.msg);
                break;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        fprintf(stderr, "\n[%d tokens, %.1f t/s%s%s]\n", t.n_gen, s > 0 ? t.n_gen / s : 0.0,
                t.error[0] ? ", error: " : "", t.error);
        history_push(&h, "assistant", t.reply ? t.reply : "");
        free(t.reply);
    }
    free(line);
    history_clear(&h, 0);
    free(h.msgs);
    free(h.owned);
    ts_cli_close(&cli);
    return rc;
}
