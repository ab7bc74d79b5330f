/*
 * test_vocab.c — every ggml-vocab-*.gguf in TS_TESTDATA_DIR/vocab/ against its .inp/.out.
 *
 * Format: the .inp file holds test strings each followed by "\n__ggml_vocab_test__\n" (the
 * newline before the marker is not part of the string); line i of the .out file holds the
 * expected ids of string i, space-separated, tokenized without adding or parsing special
 * tokens. The expected ids were produced by the models' Hugging Face tokenizers.
 *
 * Also checked: detokenize(tokenize(x)) == x for the byte-level BPE and SentencePiece files,
 * and the streaming detokenizer agrees with detokenize.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tokenizer.h"

#include "common/skip.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

static const char k_sep[] = "\n__ggml_vocab_test__\n";

/* Checks one vocabulary; returns the number of failures (printed). */
static int check_vocab(const char *dir, const char *name) {
    char path[2048];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path - 8) {
        printf("%s: path too long\n", name);
        return 1;
    }
    ts_error err = {0};
    ts_gguf *g = NULL;
    ts_tokenizer *t = NULL;
    if (ts_gguf_open(path, &g, &err) != TS_OK || ts_tokenizer_create(g, &t, &err) != TS_OK) {
        printf("%s: %s\n", name, err.msg);
        ts_gguf_close(g);
        return 1;
    }
    size_t inp_len = 0, out_len = 0;
    char inp_path[2100], out_path[2100];
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    char *inp = read_file(inp_path, &inp_len);
    char *out = read_file(out_path, &out_len);
    assert_non_null(inp);
    assert_non_null(out);
    bool roundtrip = ts_tokenizer_get_kind(t) != TS_TOKENIZER_WPM;
    int failures = 0, n_tests = 0;
    char *pos = inp, *line = out;
    while (pos < inp + inp_len) {
        char *end = strstr(pos, k_sep);
        assert_non_null(end);
        size_t len = (size_t)(end - pos);
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        /* Expected ids. */
        ts_token want[512];
        size_t n_want = 0;
        for (char *p = line; *p;) {
            char *q;
            long v = strtol(p, &q, 10);
            if (q == p) {
                p++;
                continue;
            }
            want[n_want++] = (ts_token)v;
            p = q;
        }
        ts_token *ids = NULL;
        size_t n = 0;
        ts_status st = ts_tokenizer_tokenize(t, pos, len, false, false, &ids, &n, &err);
        bool ok = st == TS_OK && n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
        if (!ok) {
            failures++;
            printf("%s: test %d '%.*s': got", name, n_tests, (int)len, pos);
            for (size_t i = 0; i < n; i++) {
                printf(" %d", ids[i]);
            }
            printf(" want %s%s%s\n", line, st ? " error: " : "", st ? err.msg : "");
        }
        if (st == TS_OK && roundtrip) {
            char *text = NULL;
            size_t text_len = 0;
            assert_int_equal(ts_tokenizer_detokenize(t, ids, n, false, &text, &text_len, &err),
                             TS_OK);
            if (text_len != len || memcmp(text, pos, len) != 0) {
                failures++;
                printf("%s: test %d round trip: '%.*s' -> '%s'\n", name, n_tests, (int)len, pos,
                       text);
            }
            /* The stream must produce the same bytes. */
            ts_detok_stream *s = NULL;
            assert_int_equal(ts_detok_stream_create(t, false, &s, &err), TS_OK);
            char streamed[4096];
            size_t sl = 0;
            for (size_t i = 0; i < n; i++) {
                const char *piece;
                size_t pl;
                assert_int_equal(ts_detok_stream_push(s, ids[i], &piece, &pl, &err), TS_OK);
                assert_true(sl + pl < sizeof streamed);
                memcpy(streamed + sl, piece, pl);
                sl += pl;
            }
            const char *rest;
            size_t rl;
            assert_int_equal(ts_detok_stream_flush(s, &rest, &rl, &err), TS_OK);
            assert_int_equal(rl, 0);
            if (sl != text_len || memcmp(streamed, text, sl) != 0) {
                failures++;
                printf("%s: test %d stream differs from detokenize\n", name, n_tests);
            }
            ts_detok_stream_destroy(s);
            free(text);
        }
        free(ids);
        n_tests++;
        pos = end + strlen(k_sep);
        line = nl + 1;
    }
    printf("%s: %d tests, %d failures (pre '%s')\n", name, n_tests, failures,
           ts_tokenizer_pre_name(t));
    free(inp);
    free(out);
    ts_tokenizer_destroy(t);
    ts_gguf_close(g);
    return failures;
}

static void test_all_vocabs(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/vocab", TS_TESTDATA_DIR);
    DIR *d = opendir(dir);
    if (d == NULL) {
        TS_SKIP("no test vocabularies in %s", dir);
        return;
    }
    int failures = 0, files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0 && n > 5 &&
            strcmp(e->d_name + n - 5, ".gguf") == 0) {
            failures += check_vocab(dir, e->d_name);
            files++;
        }
    }
    closedir(d);
    printf("%d vocabularies checked\n", files);
    assert_true(files > 0);
    assert_int_equal(failures, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_vocabs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
