/*
 * cmd_run.c — `tessera run`: generate text from a prompt (or a file of prompts, one per line,
 * generated together as one batch), streaming it as it comes, then a timing summary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "common.h"

typedef struct run_opts {
    ts_cli_opts cli;
    const char *prompt;
    const char *prompt_file;
    const char *system;
    int32_t n_predict;
    bool chat;
    bool ignore_eos;
    ts_request_params req;
    char *grammar; /* --grammar / --json-schema file contents (owned) */
} run_opts;

typedef struct job {
    int index;
    uint64_t id;
    int32_t n_prompt;
    char *text;
    size_t len, cap;
    bool done;
    ts_finish_reason finish;
    int32_t n_gen;
} job;

typedef struct run_state {
    job *jobs;
    int n_jobs;
    int n_done;
    bool stream;
    double t_first; /* first generated token (ms) */
    int64_t n_generated;
} run_state;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: tessera run -m MODEL (-p PROMPT | -f PROMPTS_FILE) [options]\n\n"
            "generation options:\n"
            "  -p, --prompt TEXT         the prompt\n"
            "  -f, --file FILE           prompts, one per line, generated as one batch\n"
            "                            (--max-seqs defaults to the number of prompts, <= 16)\n"
            "  -n, --n-predict N         tokens to generate (default 256; 0: up to the context)\n"
            "      --chat                wrap the prompt in the model's chat template\n"
            "      --system TEXT         system message (with --chat)\n"
            "      --temp T              temperature (default 0.8; 0: greedy)\n"
            "      --top-k K             (default 40; 0: off)\n"
            "      --top-p P             (default 0.95)\n"
            "      --min-p P             (default 0.05)\n"
            "      --typical-p P         (default 1: off)\n"
            "      --repeat-penalty R    (default 1: off)\n"
            "      --presence-penalty P  --frequency-penalty P\n"
            "      --seed S              random seed (default: random)\n"
            "      --ignore-eos          keep going past end-of-generation tokens\n"
            "      --grammar FILE        the output follows this GBNF grammar (root rule "
            "\"root\")\n"
            "      --json-schema FILE    the output is JSON that this JSON Schema accepts\n"
            "      --json                the output is a JSON object\n\n");
    ts_cli_print_common_help(f);
}

static bool parse_float(const char *s, float *out) {
    char *end = NULL;
    double v = s ? strtod(s, &end) : 0;
    if (s == NULL || end == s || *end != '\0') {
        return false;
    }
    *out = (float)v;
    return true;
}

static int parse_args(run_opts *o, int argc, char **argv) {
    *o = (run_opts){0};
    ts_cli_opts_init(&o->cli);
    o->n_predict = 256;
    o->req = ts_request_params_default();
    ts_sampler_params *sp = &o->req.sampling;
    sp->temperature = 0.8f;
    sp->top_k = 40;
    sp->top_p = 0.95f;
    sp->min_p = 0.05f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = ts_cli_parse_common(&o->cli, argc, argv, &i);
        if (r < 0) {
            return 2;
        }
        if (r > 0) {
            continue;
        }
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool needs = true;
        bool ok = true;
        float f = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--chat") == 0) {
            o->chat = true, needs = false;
        } else if (strcmp(a, "--ignore-eos") == 0) {
            o->req.ignore_eos = true, needs = false;
        } else if (strcmp(a, "--json") == 0) {
            if (o->req.grammar_kind != TS_GRAMMAR_NONE) {
                fprintf(stderr, "error: give one of --grammar, --json-schema and --json\n");
                return 2;
            }
            o->req.grammar_kind = TS_GRAMMAR_JSON_OBJECT, needs = false;
        } else if ((strcmp(a, "--grammar") == 0 || strcmp(a, "--json-schema") == 0) &&
                   val != NULL) {
            if (o->req.grammar_kind != TS_GRAMMAR_NONE) {
                fprintf(stderr, "error: give one of --grammar, --json-schema and --json\n");
                return 2;
            }
            size_t len = 0;
            o->grammar = ts_cli_read_file(val, &len);
            if (o->grammar == NULL) {
                fprintf(stderr, "error: %s: cannot read the file\n", val);
                return 2;
            }
            o->req.grammar_kind = a[2] == 'g' ? TS_GRAMMAR_GBNF : TS_GRAMMAR_JSON_SCHEMA;
            o->req.grammar = o->grammar;
            o->req.grammar_len = len;
        } else if (val == NULL) {
            fprintf(stderr, "error: unknown option or missing value: %s\n", a);
            return 2;
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            o->prompt = val;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
            o->prompt_file = val;
        } else if (strcmp(a, "--system") == 0) {
            o->system = val;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) {
            char *end = NULL;
            long v = strtol(val, &end, 10);
            ok = *end == '\0' && v >= 0 && v < (1L << 24);
            o->n_predict = (int32_t)v;
        } else if (strcmp(a, "--seed") == 0) {
            char *end = NULL;
            o->req.seed = strtoull(val, &end, 10);
            o->req.has_seed = true;
            ok = *end == '\0';
        } else if (strcmp(a, "--top-k") == 0) {
            char *end = NULL;
            long v = strtol(val, &end, 10);
            ok = *end == '\0' && v >= 0 && v < (1L << 30);
            sp->top_k = (int32_t)v;
        } else {
            float *dst = NULL;
            if (strcmp(a, "--temp") == 0) {
                dst = &sp->temperature;
            } else if (strcmp(a, "--top-p") == 0) {
                dst = &sp->top_p;
            } else if (strcmp(a, "--min-p") == 0) {
                dst = &sp->min_p;
            } else if (strcmp(a, "--typical-p") == 0) {
                dst = &sp->typical_p;
            } else if (strcmp(a, "--repeat-penalty") == 0) {
                dst = &sp->repetition_penalty;
            } else if (strcmp(a, "--presence-penalty") == 0) {
                dst = &sp->presence_penalty;
            } else if (strcmp(a, "--frequency-penalty") == 0) {
                dst = &sp->frequency_penalty;
            } else {
                fprintf(stderr, "error: unknown option: %s\n", a);
                return 2;
            }
            ok = parse_float(val, &f);
            *dst = f;
        }
        if (!ok) {
            fprintf(stderr, "error: %s: bad value '%s'\n", a, val);
            return 2;
        }
        if (needs) {
            i++;
        }
    }
    if ((o->prompt == NULL) == (o->prompt_file == NULL)) {
        fprintf(stderr, "error: give exactly one of -p PROMPT or -f FILE\n\n");
        usage(stderr);
        return 2;
    }
    o->req.max_tokens = o->n_predict;
    return 0;
}

static void on_event(const ts_engine_event *ev, void *user) {
    run_state *rs = user;
    job *j = NULL;
    for (int i = 0; i < rs->n_jobs; i++) {
        if (rs->jobs[i].id == ev->request_id) {
            j = &rs->jobs[i];
        }
    }
    if (j == NULL) {
        return;
    }
    if (ev->token >= 0 && rs->t_first == 0) {
        rs->t_first = now_ms();
    }
    if (ev->token >= 0) {
        rs->n_generated++;
    }
    if (rs->stream) {
        fwrite(ev->text, 1, ev->text_len, stdout);
        fflush(stdout);
    } else if (ev->text_len > 0) {
        if (j->len + ev->text_len + 1 > j->cap) {
            size_t cap = (j->len + ev->text_len + 1) * 2;
            char *t = realloc(j->text, cap);
            if (t == NULL) {
                return;
            }
            j->text = t;
            j->cap = cap;
        }
        memcpy(j->text + j->len, ev->text, ev->text_len);
        j->len += ev->text_len;
        j->text[j->len] = '\0';
    }
    if (ev->finish != TS_FINISH_NONE) {
        j->finish = ev->finish;
        j->n_gen = ev->completion_tokens;
        if (ev->finish == TS_FINISH_ERROR) {
            fprintf(stderr, "\nerror: request %d: %s\n", j->index,
                    ev->message ? ev->message : "failed");
        }
    }
    if (ev->request_done) {
        j->done = true;
        rs->n_done++;
    }
}

/* Splits a prompts file into non-empty lines (in place). */
static char **read_lines(const char *path, int *n_out) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return NULL;
    }
    char **lines = NULL;
    int n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0) {
            continue;
        }
        bool ok = true;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **l = realloc(lines, (size_t)cap * sizeof *l);
            ok = l != NULL;
            lines = ok ? l : lines;
        }
        if (!ok || (lines[n] = strdup(line)) == NULL) {
            fprintf(stderr, "error: %s: out of memory at prompt %d\n", path, n + 1);
            for (int i = 0; i < n; i++) {
                free(lines[i]);
            }
            free(lines);
            free(line);
            fclose(f);
            *n_out = 0;
            return NULL;
        }
        n++;
    }
    free(line);
    fclose(f);
    *n_out = n;
    return lines;
}

/* Builds the text to tokenize: the prompt itself, or the chat template around it. */
static char *render_prompt(const run_opts *o, const ts_cli *cli, const char *prompt) {
    if (!o->chat) {
        return strdup(prompt);
    }
    if (!ts_cli_has_chat_template(cli)) {
        fprintf(stderr, "error: the model has no usable chat template; pass "
                        "--chat-template-file F or --chat-template NAME\n");
        return NULL;
    }
    ts_message msgs[2];
    size_t n = 0;
    if (o->system != NULL) {
        msgs[n++] = (ts_message){"system", o->system};
    }
    msgs[n++] = (ts_message){"user", prompt};
    char *text = NULL;
    size_t len = 0;
    ts_error err = {0};
    if (ts_context_chat_prompt(cli->ctx, msgs, n, 1, &text, &len, &err) != TS_OK) {
        fprintf(stderr, "error: chat template: %s\n", err.msg);
        return NULL;
    }
    return text;
}

int ts_cmd_run(int argc, char **argv) {
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(&o, argc, argv);
    if (rc != 0) {
        return rc;
    }
    char **prompts = NULL;
    int n_prompts = 0;
    if (o.prompt_file != NULL) {
        prompts = read_lines(o.prompt_file, &n_prompts);
        if (prompts == NULL || n_prompts == 0) {
            fprintf(stderr, "error: %s holds no prompts\n", o.prompt_file);
            free(prompts);
            return 1;
        }
    }
    int n_jobs = prompts ? n_prompts : 1;
    if (o.cli.ctx.max_seqs == 0) {
        /* No more sequences than prompts: the sliding-window layers' cache is sized by it. */
        o.cli.ctx.max_seqs = n_jobs < 16 ? n_jobs : 16;
    }
    ts_cli cli;
    rc = ts_cli_open(&o.cli, &cli);
    if (rc != 0) {
        for (int i = 0; i < n_prompts; i++) {
            free(prompts[i]);
        }
        free(prompts);
        return rc;
    }
    run_state rs = {.jobs = calloc((size_t)n_jobs, sizeof(job)), .n_jobs = n_jobs};
    rs.stream = n_jobs == 1;
    int64_t total_prompt = 0;
    int n_failed = 0;
    double t_start = now_ms();
    for (int i = 0; i < n_jobs && rc == 0; i++) {
        const char *p = prompts ? prompts[i] : o.prompt;
        char *text = render_prompt(&o, &cli, p);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        ts_error err = {0};
        if (text == NULL) {
            rc = 1;
            break;
        }
        ts_status st = ts_cli_tokenize(&cli, text, &ids, &n_ids, &err);
        if (st == TS_OK) {
            rs.jobs[i].index = i;
            rs.jobs[i].n_prompt = (int32_t)n_ids;
            total_prompt += (int64_t)n_ids;
            st = ts_context_submit(cli.ctx, ids, (int32_t)n_ids, &o.req, on_event, &rs,
                                   &rs.jobs[i].id, &err);
        }
        if (st != TS_OK && n_jobs > 1) {
            /* One bad prompt of a file does not cost the others their answers. */
            fprintf(stderr, "error: prompt %d: %s (skipped)\n", i, err.msg);
            total_prompt -= rs.jobs[i].n_prompt;
            rs.jobs[i].n_prompt = 0;
            rs.jobs[i].done = true;
            rs.n_done++;
            n_failed++;
        } else if (st != TS_OK) {
            fprintf(stderr, "error: prompt %d: %s\n", i, err.msg);
            rc = 1;
        } else if (rs.stream && !o.chat) {
            fputs(p, stdout);
            fflush(stdout);
        }
        ts_free(ids);
        ts_free(text);
    }
    while (rc == 0 && rs.n_done < n_jobs) {
        ts_error err = {0};
        bool busy = false;
        if (ts_context_step(cli.ctx, &busy, &err) != TS_OK) {
            fprintf(stderr, "\nerror: %s\n", err.msg);
            rc = 1;
        } else if (ts_cli_check_compare(&cli)) {
            rc = 1;
        } else if (!busy && rs.n_done < n_jobs && !ts_context_has_work(cli.ctx)) {
            break;
        }
    }
    double t_end = now_ms();
    if (rs.stream) {
        printf("\n");
    } else {
        for (int i = 0; i < n_jobs; i++) {
            const char *out = rs.jobs[i].text ? rs.jobs[i].text : "";
            printf("--- [%d] %s\n%s\n", i, prompts[i],
                   rs.jobs[i].done && rs.jobs[i].n_prompt == 0 ? "(skipped: see the error above)"
                                                               : out);
        }
    }
    ts_engine_stats es;
    ts_context_get_stats(cli.ctx, &es);
    double t_prompt = (rs.t_first > 0 ? rs.t_first : t_end) - t_start;
    double t_gen = t_end - (rs.t_first > 0 ? rs.t_first : t_end);
    fprintf(stderr,
            "\nload: %.0f ms (model %.0f + context %.0f, of which repacking %.0f MB: %.0f ms), "
            "resident %.0f MB | prompt: %lld tokens "
            "in %.0f ms (%.1f t/s) | generation: %lld tokens in %.0f ms (%.1f t/s) | %lld "
            "sequence%s, %llu preemptions\n",
            cli.open_ms + cli.info.load_ms, cli.open_ms, cli.info.load_ms,
            (double)cli.info.repacked_bytes / 1e6, cli.info.repack_ms, ts_cli_rss_mb(true),
            (long long)total_prompt, t_prompt,
            t_prompt > 0 ? total_prompt * 1000.0 / t_prompt : 0.0, (long long)rs.n_generated, t_gen,
            t_gen > 0 && rs.n_generated > 1 ? (rs.n_generated - n_jobs) * 1000.0 / t_gen : 0.0,
            (long long)n_jobs, n_jobs == 1 ? "" : "s", (unsigned long long)es.n_preemptions);
    char kv[256];
    ts_cli_format_kv(&cli.info, kv, sizeof kv);
    fprintf(stderr, "%s\n", kv);
    if (rc == 0 && o.cli.ctx.profile && cli.info.kernels[0] != '\0') {
        fprintf(stderr, "kernels (one row / several): %s (measured in %.0f ms this load)\n",
                cli.info.kernels, cli.info.tune_ms);
    }
    if (es.spec_steps > 0) {
        const char *dm = cli.info.draft_model != NULL ? cli.info.draft_model : "";
        const char *base = strrchr(dm, '/') != NULL ? strrchr(dm, '/') + 1 : dm;
        fprintf(stderr,
                "speculative (%s%s%s, draft-max %d): %llu drafted, %llu accepted (%.1f%%) in %llu "
                "verifications, %llu steps for %lld tokens\n",
                cli.info.spec_type, base[0] != '\0' ? " " : "", base, cli.info.draft_max,
                (unsigned long long)es.spec_drafted, (unsigned long long)es.spec_accepted,
                es.spec_drafted > 0 ? 100.0 * (double)es.spec_accepted / (double)es.spec_drafted
                                    : 0.0,
                (unsigned long long)es.spec_steps, (unsigned long long)es.n_steps,
                (long long)rs.n_generated);
    }
    if (es.grammar_masks > 0) {
        fprintf(stderr,
                "grammar: %llu token masks, %.1f ms computing them (%.1f us each), %.1f ms of "
                "steps waiting for them after the forward pass\n",
                (unsigned long long)es.grammar_masks, es.grammar_mask_ms,
                es.grammar_mask_ms * 1e3 / (double)es.grammar_masks, es.grammar_wait_ms);
    }
    if (rc == 0) {
        ts_context_report(cli.ctx, stderr);
    }
    if (n_failed > 0) {
        fprintf(stderr, "error: %d of %d prompts were skipped\n", n_failed, n_jobs);
        rc = 1;
    }
    for (int i = 0; i < n_jobs; i++) {
        free(rs.jobs[i].text);
    }
    free(rs.jobs);
    for (int i = 0; i < n_prompts; i++) {
        free(prompts[i]);
    }
    free(prompts);
    ts_cli_close(&cli);
    free(o.grammar);
    return rc;
}
