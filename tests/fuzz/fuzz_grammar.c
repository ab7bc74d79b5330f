/*
 * fuzz_grammar.c — libFuzzer harness for the GBNF reader and the matcher.
 *
 * Input: GBNF text, optionally followed by a line "%%" and bytes (up to 96) to feed the
 * matcher. The text is compiled; when it compiles, the bytes are fed in chunks of 1 to 3 and
 * after every chunk the trie mask over a small vocabulary (ASCII, whole and split UTF-8, an empty
 * special token, an eog token) is compared with the per-token reference (a clone of the matcher
 * per token), unless the mask was given up for its work budget (then it must be empty). A
 * mismatch aborts, so the fuzzer finds wrong masks as well as crashes, leaks and hangs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const char *const PIECES[] = {
    "a",    "b",  "x",     "0",     "1",        " ",    "\n",   "\"",
    "{",    "}",  "[",     "]",     ",",        ":",    "-",    ".",
    "\\",   "ab", "true",  "null",  "aa",       "{\"",  "\":",  "é",
    "日",   "𝄞",  "\xc3",  "\xa9",  "\xe6\x97", "\xa5", "\xf0", "\x9d\x84\x9e",
    "\xff", "",   "<eos>", "a\xc3", "ba",       "  ",   "xyz",  "01"};
#define N_PIECES ((int32_t)(sizeof PIECES / sizeof PIECES[0]))
#define EOG      34

static void check_mask(ts_gmatch *m, const ts_gvocab *v, size_t *lens) {
    uint32_t fast[(N_PIECES + 31) / 32];
    int32_t n = ts_gmatch_mask(m, v, fast);
    if (ts_gmatch_mask_gave_up(m)) { /* past the mask's work budget: empty, nothing to compare */
        if (n != 0 || fast[0] != 0 || fast[1] != 0 || !ts_gmatch_hit_limit(m)) {
            abort();
        }
        return;
    }
    int32_t count = 0;
    for (int32_t t = 0; t < N_PIECES; t++) {
        int ok;
        if (t == EOG) {
            ok = ts_gmatch_is_accepting(m);
        } else if (lens[t] == 0) {
            ok = 0;
        } else {
            ts_gmatch *c = ts_gmatch_clone(m);
            if (!c)
                abort();
            ok = ts_gmatch_accept_bytes(c, PIECES[t], lens[t]);
            ts_gmatch_free(c);
        }
        if (ok != (int)(fast[t >> 5] >> (t & 31) & 1u))
            abort();
        count += ok;
    }
    if (count != n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192)
        return 0;
    const char *text = (const char *)data;
    size_t glen = size;
    const uint8_t *input = NULL;
    size_t ilen = 0;
    for (size_t i = 0; i + 3 <= size; i++) {
        if (data[i] == '%' && data[i + 1] == '%' && (i == 0 || data[i - 1] == '\n') &&
            data[i + 2] == '\n') {
            glen = i;
            input = data + i + 3;
            ilen = size - i - 3;
            break;
        }
    }
    if (ilen > 96) /* each chunk costs a mask and a clone per token: keep a run short */
        ilen = 96;
    ts_grammar *g = NULL;
    ts_error err;
    if (ts_grammar_from_gbnf(text, glen, "root", &g, &err) != TS_OK)
        return 0;
    size_t lens[N_PIECES];
    for (int32_t t = 0; t < N_PIECES; t++)
        lens[t] = strlen(PIECES[t]);
    int32_t eog = EOG;
    ts_gvocab *v = NULL;
    if (ts_gvocab_create(PIECES, lens, N_PIECES, &eog, 1, &v, &err) != TS_OK)
        abort();
    ts_gmatch *m = ts_gmatch_create(g);
    if (m) {
        check_mask(m, v, lens);
        for (size_t i = 0; i < ilen;) {
            size_t n = 1 + input[i] % 3;
            if (n > ilen - i)
                n = ilen - i;
            ts_gmatch_accept_bytes(m, (const char *)input + i, n);
            check_mask(m, v, lens);
            i += n;
        }
        ts_gmatch *c = ts_gmatch_clone(m);
        ts_gmatch_is_accepting(c);
        ts_gmatch_free(c);
        ts_gmatch_free(m);
    }
    ts_gvocab_free(v);
    ts_grammar_free(g);
    return 0;
}
