/*
 * fuzz_schema.c — libFuzzer harness for the JSON Schema compiler.
 *
 * Input: any bytes as a schema. ts_schema_to_gbnf must return (bounded time and memory: the
 * compiler's limits), and when it succeeds the GBNF must be readable by ts_grammar_from_gbnf
 * (the only accepted refusals: a limit of the reader, or a recursion with no base case that
 * only the reader detects); then a few fixed documents are matched through it. A GBNF the
 * reader rejects otherwise aborts: the compiler wrote a malformed grammar.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const char *const DOCS[] = {
    "{}",
    "[]",
    "null",
    "true",
    "0",
    "-12.5e3",
    "\"\"",
    "\"abc\"",
    "{\"a\":1,\"b\":[null]}",
    "[1,\"x\",{\"k\":false}]",
    "\"2024-02-29\"",
    "{\"a\":{\"a\":{\"a\":null}}}",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *g = NULL;
    ts_error err;
    if (ts_schema_to_gbnf((const char *)data, size, &g, &err) != TS_OK)
        return 0;
    ts_grammar *gr = NULL;
    ts_status st = ts_grammar_from_gbnf(g, strlen(g), "root", &gr, &err);
    free(g);
    if (st != TS_OK) {
        if (st == TS_ERR_LIMIT || strstr(err.msg, "never finish"))
            return 0;
        abort();
    }
    for (size_t i = 0; i < sizeof DOCS / sizeof DOCS[0]; i++) {
        ts_gmatch *m = ts_gmatch_create(gr);
        if (!m)
            break;
        if (ts_gmatch_accept_bytes(m, DOCS[i], strlen(DOCS[i])))
            (void)ts_gmatch_is_accepting(m);
        ts_gmatch_free(m);
    }
    ts_grammar_free(gr);
    return 0;
}
