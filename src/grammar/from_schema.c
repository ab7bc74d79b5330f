/*
 * from_schema.c — JSON Schema to a compiled grammar: the schema compiler's GBNF text
 * (ts_schema_to_gbnf, schema*.c) read by the GBNF reader. In a file of its own so that
 * programs that use only GBNF do not pull the schema compiler in.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"

ts_status ts_grammar_from_schema(const char *schema_json, size_t len, ts_grammar **out,
                                 ts_error *err) {
    ts_error local;
    if (!err)
        err = &local;
    char *gbnf = NULL;
    ts_status st = ts_schema_to_gbnf(schema_json, len, &gbnf, err);
    if (st != TS_OK)
        return st;
    st = ts_grammar_from_gbnf(gbnf, strlen(gbnf), "root", out, err);
    if (st != TS_OK)
        ts_error_prefix(err, "schema: the generated grammar does not compile (a bug): ");
    free(gbnf);
    return st;
}
