/*
 * cmd_serve.c — `tessera serve`: the OpenAI-compatible HTTP server (src/server/).
 *
 * Loads the model through the common options, starts the server and waits for SIGINT or
 * SIGTERM (delivered to this thread only: every thread the server starts inherits the
 * blocked mask). On a signal it stops accepting, lets running requests finish for up to
 * --shutdown-grace seconds, ends the rest with an error, and exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tessera serve -m MODEL [--host ADDR] [--port N] [--api-key KEY | "
            "--api-key-file F] [options]\n\n"
            "server options:\n"
            "      --host ADDR           address to listen on (default 127.0.0.1)\n"
            "      --port N              port (default 8080; 0: any free port, printed)\n"
            "      --api-key KEY         require 'Authorization: Bearer KEY' (not on /health, /)\n"
            "      --api-key-file F      read the key from the first line of F\n"
            "      --model-name NAME     model id in the API (default: file name without .gguf)\n"
            "      --max-queue N         requests waiting beyond --max-seqs before 503 (default "
            "256)\n"
            "      --max-body SIZE       largest request body (default 1M)\n"
            "      --timeout S           close a connection that makes no progress for S seconds:\n"
            "                            a stalled upload, a client not reading its answer "
            "(default 60)\n"
            "      --header-timeout S    a request header must arrive within S seconds of the "
            "connect\n"
            "                            or of the previous answer (default 5; 0: --timeout "
            "only)\n"
            "      --max-connections N   open connections; more are answered 503 (default 1024)\n"
            "      --max-connections-per-ip N\n"
            "                            open connections per client address; more are answered "
            "503\n"
            "                            (default 0: no cap)\n"
            "      --cors-origin ORIGIN  allow browser pages from ORIGIN (e.g. "
            "https://app.example.com;\n"
            "                            repeatable or a comma list; '*' for any); default: no "
            "CORS headers\n"
            "      --shutdown-grace S    on SIGTERM/SIGINT, seconds running requests may finish "
            "(default 10)\n"
            "      --render-memory MIB   memory all chat-template renders in flight share; each "
            "takes\n"
            "                            min(MIB, 64) or waits up to 2 s, then 503 (default 512; "
            "suffixes K, M, G)\n"
            "      --render-timeout S    time limit of one chat-template render (default 10; "
            "decimals allowed)\n"
            "      --grammar-timeout S   time limit of one grammar / JSON-schema compile "
            "(default 5)\n"
            "      --responses-max N     OpenAI Responses kept for previous_response_id and GET "
            "(default 1000; 0: none)\n"
            "      --responses-max-bytes MIB  memory those responses hold together, oldest "
            "dropped first (default 64)\n"
            "      --quiet               no per-request log lines\n\n");
    ts_cli_print_common_help(f);
}

/* Seconds (decimals allowed) in (0, hi] as milliseconds. */
static bool parse_ms(const char *s, double hi, int *out) {
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0 || !(v >= 0.001) || v > hi) {
        return false;
    }
    *out = (int)(v * 1000.0 + 0.5);
    return true;
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

/* First line of a file, surrounding whitespace removed; malloc'd, NULL after printing why. */
static char *read_key_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "error: --api-key-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char buf[4096];
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    size_t n = line ? strlen(buf) : 0;
    while (n > 0 &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
        buf[--n] = '\0';
    }
    size_t start = 0;
    while (start < n && (buf[start] == ' ' || buf[start] == '\t')) {
        start++;
    }
    if (start == n) {
        fprintf(stderr, "error: --api-key-file %s: the first line is empty\n", path);
        return NULL;
    }
    return strdup(buf + start);
}

/* Each connection is a descriptor: lift the soft limit towards the hard one so that
 * --max-connections (plus the 503 reserve and the model's own files) fits. */
static void raise_fd_limit(const ts_server_config *sc) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    /* The server accepts max(256, N/2) connections beyond N to answer them 503 (http.c),
     * and the model and the process keep a few files of their own. */
    rlim_t n = (rlim_t)sc->max_connections;
    rlim_t want = n + (n / 2 > 256 ? n / 2 : 256) + 256;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < want) {
            fprintf(stderr,
                    "warning: at most %llu open files (ulimit -n): fewer than --max-connections "
                    "%d clients can connect\n",
                    (unsigned long long)rl.rlim_cur, sc->max_connections);
        }
    }
}

static char *default_model_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *name = strdup(base);
    size_t n = name ? strlen(name) : 0;
    if (n > 5 && strcmp(name + n - 5, ".gguf") == 0) {
        name[n - 5] = '\0';
    }
    return name;
}

/* Appends a --cors-origin value (one origin, a comma list or "*") to *list. False after
 * printing why when an origin is malformed: an origin is "*" or scheme://host[:port], with no
 * path, which is what a browser sends in its Origin header. */
static bool add_origins(char **list, const char *val) {
    const char *p = val;
    while (*p != '\0') {
        while (*p == ' ' || *p == ',') {
            p++;
        }
        const char *end = p;
        while (*end != '\0' && *end != ',') {
            end++;
        }
        size_t n = (size_t)(end - p);
        while (n > 0 && p[n - 1] == ' ') {
            n--;
        }
        if (n == 0) {
            break;
        }
        bool ok = n == 1 && p[0] == '*';
        if (!ok) {
            const char *sep = memchr(p, ':', n);
            size_t rest = sep != NULL ? (size_t)(p + n - sep) : 0; /* from the ':' on */
            ok = rest > 3 && memcmp(sep, "://", 3) == 0 && memchr(sep + 3, '/', rest - 3) == NULL &&
                 memchr(p, ' ', n) == NULL;
        }
        if (!ok) {
            fprintf(stderr,
                    "error: --cors-origin: '%.*s' is not an origin (scheme://host[:port], no "
                    "path; or '*')\n",
                    (int)n, p);
            return false;
        }
        p = end;
    }
    size_t old = *list ? strlen(*list) : 0;
    char *l = realloc(*list, old + strlen(val) + 2);
    if (l == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return false;
    }
    if (old > 0) {
        l[old++] = ',';
    }
    strcpy(l + old, val);
    *list = l;
    return true;
}

int ts_cmd_serve(int argc, char **argv) {
    ts_cli_opts co;
    ts_cli_opts_init(&co);
    ts_server_config sc = ts_server_config_default();
    const char *key = NULL, *key_file = NULL, *model_name = NULL;
    long grace_s = 10;
    bool quiet = false;
    char *cors = NULL; /* every --cors-origin, comma-separated */
    for (int i = 1; i < argc; i++) {
        int r = ts_cli_parse_common(&co, argc, argv, &i);
        if (r < 0) {
            goto usage_error;
        }
        if (r > 0) {
            continue;
        }
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v = 0;
        int64_t size = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(cors);
            return 0;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        } else if (val == NULL) {
            fprintf(stderr, "error: unknown option or missing value: %s\n", a);
            goto usage_error;
        } else if (strcmp(a, "--host") == 0) {
            sc.host = val;
        } else if (strcmp(a, "--port") == 0) {
            if (!parse_int(val, 0, 65535, &v)) {
                fprintf(stderr, "error: --port: '%s' is not a port (0..65535)\n", val);
                goto usage_error;
            }
            sc.port = (int)v;
        } else if (strcmp(a, "--api-key") == 0) {
            key = val;
        } else if (strcmp(a, "--api-key-file") == 0) {
            key_file = val;
        } else if (strcmp(a, "--model-name") == 0) {
            model_name = val;
        } else if (strcmp(a, "--max-queue") == 0) {
            if (!parse_int(val, 0, 1 << 20, &v)) {
                fprintf(stderr, "error: --max-queue: '%s' is out of range (0..1048576)\n", val);
                goto usage_error;
            }
            sc.max_queue = (int)v;
        } else if (strcmp(a, "--max-body") == 0) {
            if (!ts_cli_parse_size(val, &size) || size < 64 || size > ((int64_t)1 << 30)) {
                fprintf(stderr, "error: --max-body: '%s' is not a size in 64..1G\n", val);
                goto usage_error;
            }
            sc.max_body = (size_t)size;
        } else if (strcmp(a, "--timeout") == 0) {
            if (!parse_int(val, 1, 86400, &v)) {
                fprintf(stderr, "error: --timeout: '%s' is out of range (1..86400 s)\n", val);
                goto usage_error;
            }
            sc.conn_timeout_s = (int)v;
        } else if (strcmp(a, "--render-memory") == 0) {
            /* A bare number is MiB. */
            bool bare = val[0] != '\0' && strspn(val, "0123456789") == strlen(val);
            if (!ts_cli_parse_size(val, &size) || (bare && size > ((int64_t)1 << 20))) {
                size = -1;
            }
            size = bare && size >= 0 ? size << 20 : size;
            if (size < ((int64_t)1 << 20) || size > ((int64_t)1 << 40)) {
                fprintf(stderr,
                        "error: --render-memory: '%s' is not a size in 1M..1T (a bare "
                        "number is MiB)\n",
                        val);
                goto usage_error;
            }
            sc.render_memory = (size_t)size;
        } else if (strcmp(a, "--render-timeout") == 0) {
            if (!parse_ms(val, 3600, &sc.render_timeout_ms)) {
                fprintf(stderr, "error: --render-timeout: '%s' is out of range (0.001..3600 s)\n",
                        val);
                goto usage_error;
            }
        } else if (strcmp(a, "--grammar-timeout") == 0) {
            if (!parse_ms(val, 3600, &sc.grammar_timeout_ms)) {
                fprintf(stderr, "error: --grammar-timeout: '%s' is out of range (0.001..3600 s)\n",
                        val);
                goto usage_error;
            }
        } else if (strcmp(a, "--responses-max") == 0) {
            if (!parse_int(val, 0, 1000000, &v)) {
                fprintf(stderr, "error: --responses-max: '%s' is out of range (0..1000000)\n", val);
                goto usage_error;
            }
            sc.responses_max = (int)v;
        } else if (strcmp(a, "--responses-max-bytes") == 0) {
            if (!parse_int(val, 1, 1 << 20, &v)) {
                fprintf(stderr,
                        "error: --responses-max-bytes: '%s' is out of range (1..1048576 MiB)\n",
                        val);
                goto usage_error;
            }
            sc.responses_max_bytes = (size_t)v << 20;
        } else if (strcmp(a, "--header-timeout") == 0) {
            if (!parse_int(val, 0, 86400, &v)) {
                fprintf(stderr, "error: --header-timeout: '%s' is out of range (0..86400 s)\n",
                        val);
                goto usage_error;
            }
            sc.header_timeout_s = (int)v;
        } else if (strcmp(a, "--max-connections") == 0) {
            if (!parse_int(val, 1, 1 << 20, &v)) {
                fprintf(stderr, "error: --max-connections: '%s' is out of range (1..1048576)\n",
                        val);
                goto usage_error;
            }
            sc.max_connections = (int)v;
        } else if (strcmp(a, "--max-connections-per-ip") == 0) {
            if (!parse_int(val, 0, 1 << 20, &v)) {
                fprintf(stderr,
                        "error: --max-connections-per-ip: '%s' is out of range (0..1048576)\n",
                        val);
                goto usage_error;
            }
            sc.max_conns_per_ip = (int)v;
        } else if (strcmp(a, "--cors-origin") == 0) {
            if (!add_origins(&cors, val)) {
                goto usage_error;
            }
        } else if (strcmp(a, "--shutdown-grace") == 0) {
            if (!parse_int(val, 0, 3600, &grace_s)) {
                fprintf(stderr, "error: --shutdown-grace: '%s' is out of range (0..3600 s)\n", val);
                goto usage_error;
            }
        } else {
            fprintf(stderr, "error: unknown option: %s\n", a);
            goto usage_error;
        }
        i++;
    }
    if (key != NULL && key_file != NULL) {
        fprintf(stderr, "error: give --api-key or --api-key-file, not both\n");
        goto usage_error;
    }
    if (key != NULL && key[0] == '\0') {
        fprintf(stderr, "error: --api-key is empty\n");
        goto usage_error;
    }
    if (co.model == NULL) {
        fprintf(stderr, "error: no model given (-m FILE)\n\n");
        usage(stderr);
        goto usage_error;
    }
    char *key_owned = key_file ? read_key_file(key_file) : NULL;
    if (key_file != NULL && key_owned == NULL) {
        goto usage_error;
    }
    sc.cors_origins = cors;
    raise_fd_limit(&sc);
    char *name_owned = model_name ? NULL : default_model_name(co.model);

    /* Signals go to the thread that waits for them; threads created from here on inherit
     * the mask. A client that hangs up must not kill the process with SIGPIPE. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    ts_cli cli;
    int rc = ts_cli_open(&co, &cli);
    if (rc != 0) {
        free(key_owned);
        free(name_owned);
        free(cors);
        return rc;
    }
    sc.api_key = key_owned ? key_owned : key;
    sc.model_name = model_name ? model_name : name_owned;
    sc.log = quiet ? NULL : stderr;
    ts_server *srv = NULL;
    ts_error err = {0};
    ts_status st = ts_server_create(&sc, cli.ctx, &srv, &err);
    if (st == TS_OK) {
        st = ts_server_start(srv, &err);
    }
    if (st != TS_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        ts_server_destroy(srv);
        ts_cli_close(&cli);
        free(key_owned);
        free(name_owned);
        free(cors);
        return 1;
    }
    const char *host = sc.host;
    bool v6 = strchr(host, ':') != NULL;
    printf("tessera serve: listening on http://%s%s%s:%d (model %s, ctx %lld, max-seqs %lld, "
           "chat template %s%s)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", ts_server_port(srv), sc.model_name,
           (long long)cli.info.n_ctx, (long long)cli.info.max_seqs,
           cli.info.chat_template != NULL          ? cli.info.chat_template
           : cli.info.chat_template_source != NULL ? "Jinja"
                                                   : "none",
           sc.api_key ? ", API key required" : "");
    char kv[256];
    ts_cli_format_kv(&cli.info, kv, sizeof kv);
    printf("tessera serve: %s\n", kv);
    if (cli.info.draft_max > 0) {
        printf("tessera serve: speculative decoding %s: draft-max %d, draft-min %d, n-grams "
               "%d..%d, while a step holds <= %lld tokens (per request: speculative.n_max)\n",
               cli.info.spec_type, cli.info.draft_max, cli.info.draft_min, cli.info.spec_ngram_min,
               cli.info.spec_ngram_max, (long long)cli.info.spec_step_tokens);
    } else {
        printf("tessera serve: speculative decoding off (--draft-max N turns it on)\n");
    }
    fflush(stdout);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {
    }
    fprintf(stderr, "tessera serve: %s received; finishing running requests (up to %ld s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", grace_s);
    ts_server_shutdown(srv, (int)grace_s * 1000);
    ts_server_destroy(srv);
    ts_cli_close(&cli);
    free(key_owned);
    free(name_owned);
    free(cors);
    fprintf(stderr, "tessera serve: stopped\n");
    return 0;
usage_error:
    free(cors);
    return 2;
}
