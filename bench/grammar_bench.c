/*
 * grammar_bench.c — how long a token mask takes with a real vocabulary.
 *
 *   grammar_bench -m MODEL.gguf [-g GRAMMAR.gbnf] [-d DOCUMENT] [-r REPEAT] [--json]
 *
 * Reads the model's vocabulary (vocab_only), compiles the grammar (default:
 * tests/data/grammar/json.gbnf from the source tree) and tokenizes the document (default: a
 * built-in JSON object with nesting, numbers, escapes and non-ASCII text). Then it walks the
 * document token by token, computing the mask before each token, and checks that the token the
 * document really has next is allowed (a mask that forbids it is an error, exit 1). Each mask is
 * timed twice:
 *   warm  on the matcher that has followed the document (its transition cache holds what the
 *         earlier masks computed: what a generating sequence sees);
 *   cold  on a fresh clone of it (empty caches: the first mask in a new state).
 * Prints p50 / p90 / p99 / max in microseconds and the number of allowed tokens, as a table or
 * one JSON object (--json). Single thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "tessera.h"

static const char DEFAULT_DOC[] =
    "{\n  \"name\": \"Ada Lovelace\",\n  \"born\": 1815,\n  \"height_m\": 1.65,\n"
    "  \"languages\": [\"English\", \"Français\", \"日本語\"],\n"
    "  \"notes\": \"Wrote the first \\\"program\\\"\\nfor the Analytical Engine \\u2014 1843.\",\n"
    "  \"works\": [\n    {\"title\": \"Sketch of the Analytical Engine\", \"year\": 1843, "
    "\"pages\": 65, \"translated\": true},\n    {\"title\": \"Letters\", \"year\": null, "
    "\"score\": -2.5e-3, \"tags\": []}\n  ],\n  \"address\": {\"city\": \"London\", "
    "\"zip\": \"W1\", \"geo\": {\"lat\": 51.5072, \"lon\": -0.1276}},\n  \"active\": false\n}";

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[got] = 0;
    *len = got;
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, size_t n, double p) {
    if (n == 0)
        return 0;
    size_t k = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[k < n ? k : n - 1];
}

int main(int argc, char **argv) {
    const char *model = NULL, *gpath = "tests/data/grammar/json.gbnf", *dpath = NULL;
    int repeat = 1, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "-g") && i + 1 < argc)
            gpath = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc)
            dpath = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr,
                    "usage: %s -m MODEL.gguf [-g GRAMMAR.gbnf] [-d DOCUMENT] [-r N] "
                    "[--json]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!model || repeat < 1) {
        fprintf(stderr, "grammar_bench: -m MODEL is required\n");
        return 2;
    }
    ts_error err = {0};
    ts_llm *llm = NULL;
    ts_llm_params lp = {.vocab_only = 1};
    if (ts_llm_open(model, &lp, &llm, &err) != TS_OK) {
        fprintf(stderr, "grammar_bench: %s\n", err.msg);
        return 1;
    }
    int32_t nv = ts_llm_n_vocab(llm);
    const char **pieces = calloc((size_t)nv, sizeof *pieces);
    size_t *lens = calloc((size_t)nv, sizeof *lens);
    for (int32_t t = 0; t < nv; t++)
        if (ts_llm_token_to_piece(llm, t, 0, &pieces[t], &lens[t], &err) != TS_OK) {
            fprintf(stderr, "grammar_bench: token %d: %s\n", t, err.msg);
            return 1;
        }
    ts_llm_info info;
    ts_llm_get_info(llm, &info);
    int32_t eog[1] = {info.eos};
    ts_gvocab *voc = NULL;
    double t0 = now_us();
    if (ts_gvocab_create(pieces, lens, nv, eog, info.eos >= 0 ? 1 : 0, &voc, &err) != TS_OK) {
        fprintf(stderr, "grammar_bench: %s\n", err.msg);
        return 1;
    }
    double vocab_ms = (now_us() - t0) / 1e3;

    size_t glen = 0, dlen = 0;
    char *gtext = read_all(gpath, &glen);
    if (!gtext) {
        fprintf(stderr, "grammar_bench: cannot read %s\n", gpath);
        return 1;
    }
    char *doc = dpath ? read_all(dpath, &dlen) : NULL;
    if (dpath && !doc) {
        fprintf(stderr, "grammar_bench: cannot read %s\n", dpath);
        return 1;
    }
    if (!doc) {
        doc = strdup(DEFAULT_DOC);
        dlen = strlen(doc);
    }
    ts_grammar *g = NULL;
    t0 = now_us();
    if (ts_grammar_from_gbnf(gtext, glen, "root", &g, &err) != TS_OK) {
        fprintf(stderr, "grammar_bench: %s: %s\n", gpath, err.msg);
        return 1;
    }
    double compile_us = now_us() - t0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (ts_llm_tokenize(llm, doc, dlen, 0, 0, &ids, &n_ids, &err) != TS_OK) {
        fprintf(stderr, "grammar_bench: %s\n", err.msg);
        return 1;
    }
    size_t n_masks = (n_ids + 1) * (size_t)repeat;
    double *warm = malloc(n_masks * sizeof *warm), *cold = malloc(n_masks * sizeof *cold);
    uint32_t *allowed = malloc(((size_t)nv + 31) / 32 * sizeof *allowed);
    double allowed_sum = 0;
    size_t nm = 0;
    int bad = 0;
    for (int r = 0; r < repeat && !bad; r++) {
        ts_gmatch *m = ts_gmatch_create(g);
        for (size_t i = 0; i <= n_ids && !bad; i++) {
            ts_gmatch *c = ts_gmatch_clone(m);
            t0 = now_us();
            ts_gmatch_mask(c, voc, allowed);
            cold[nm] = now_us() - t0;
            ts_gmatch_free(c);
            t0 = now_us();
            int32_t count = ts_gmatch_mask(m, voc, allowed);
            warm[nm] = now_us() - t0;
            allowed_sum += count;
            nm++;
            int32_t want = i < n_ids ? ids[i] : info.eos;
            if (want >= 0 && !(allowed[want >> 5] >> (want & 31) & 1u)) {
                fprintf(stderr, "grammar_bench: token %zu (%d) of the document is not allowed\n", i,
                        want);
                bad = 1;
            }
            if (i < n_ids && !ts_gmatch_accept_token(m, voc, ids[i])) {
                fprintf(stderr, "grammar_bench: token %zu (%d) rejected\n", i, ids[i]);
                bad = 1;
            }
        }
        ts_gmatch_free(m);
    }
    qsort(warm, nm, sizeof *warm, cmp_double);
    qsort(cold, nm, sizeof *cold, cmp_double);
    if (json) {
        printf("{\"model\":\"%s\",\"n_vocab\":%d,\"grammar\":\"%s\",\"masks\":%zu,"
               "\"vocab_ms\":%.1f,\"compile_us\":%.1f,\"allowed_mean\":%.0f,"
               "\"warm_us\":{\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"max\":%.1f},"
               "\"cold_us\":{\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"max\":%.1f}}\n",
               model, nv, gpath, nm, vocab_ms, compile_us, nm ? allowed_sum / (double)nm : 0,
               pct(warm, nm, .5), pct(warm, nm, .9), pct(warm, nm, .99), pct(warm, nm, 1),
               pct(cold, nm, .5), pct(cold, nm, .9), pct(cold, nm, .99), pct(cold, nm, 1));
    } else {
        printf("model %s: %d tokens (trie built in %.1f ms); grammar %s compiled in %.1f us\n",
               model, nv, vocab_ms, gpath, compile_us);
        printf("%zu masks over a %zu-byte document, %.0f tokens allowed on average\n", nm, dlen,
               nm ? allowed_sum / (double)nm : 0);
        printf("| mask   | p50 us | p90 us | p99 us | max us |\n|--------|-------:|-------:|"
               "-------:|-------:|\n");
        printf("| warm   | %6.1f | %6.1f | %6.1f | %6.1f |\n", pct(warm, nm, .5), pct(warm, nm, .9),
               pct(warm, nm, .99), pct(warm, nm, 1));
        printf("| cold   | %6.1f | %6.1f | %6.1f | %6.1f |\n", pct(cold, nm, .5), pct(cold, nm, .9),
               pct(cold, nm, .99), pct(cold, nm, 1));
    }
    free(warm);
    free(cold);
    free(allowed);
    ts_free(ids);
    free(doc);
    free(gtext);
    ts_grammar_free(g);
    ts_gvocab_free(voc);
    free(pieces);
    free(lens);
    ts_llm_close(llm);
    return bad;
}
