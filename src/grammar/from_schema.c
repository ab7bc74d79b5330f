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
    return ts_grammar_from_schema_ex(schema_json, len, NULL, out, err);
}

ts_status ts_grammar_from_schema_ex(const char *schema_json, size_t len, const ts_stop *stop,
                                    ts_grammar **out, ts_error *err) {
    ts_error local;
    if (!err) {
        err = &local;
    }
    if (out) {
        *out = NULL;
    }
    char *gbnf = NULL;
    ts_status st = ts_schema_to_gbnf_ex(schema_json, len, stop, &gbnf, err);
    if (st != TS_OK) {
        return st;
    }
    st = ts_grammar_from_gbnf_ex(gbnf, strlen(gbnf), "root", stop, out, err);
    free(gbnf);
    /* A stop or a limit of the reader is the request's; any other refusal of the compiler's own
     * output is a bug in the compiler. */
    if (st == TS_ERR_FORMAT && strstr(err->msg, "can never finish") != NULL) {
        /* The schema's own doing: a '$ref' cycle that every value must go round again. */
        ts_error_prefix(err, "schema: no finite JSON value fits the schema (a '$ref' cycle that "
                             "every value must follow again, e.g. through a required property "
                             "or minItems): ");
    } else if (st == TS_ERR_FORMAT || st == TS_ERR_UNSUPPORTED) {
        ts_error_prefix(err, "schema: the generated grammar does not compile (a bug): ");
    } else if (st == TS_ERR_LIMIT && strncmp(err->msg, "grammar: time", 13) != 0) {
        ts_error_prefix(err, "schema: ");
    }
    return st;
}
