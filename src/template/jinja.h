/*
 * jinja.h — a sandboxed Jinja engine for chat templates.
 *
 * Chat templates are untrusted text: a template is compiled once into a tree and rendered
 * against variables given as one JSON object (its keys become the template's top-level
 * names). Rendering runs under limits (steps, recursion depth, output size) and has no I/O;
 * anything the engine does not support is an error naming the line and the construct.
 *
 * Semantics follow Python's jinja2 as Hugging Face's apply_chat_template configures it:
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
 * extension, tojson with ensure_ascii=False, raise_exception(msg) and strftime_now(fmt).
 * Undefined values behave as jinja2's default Undefined (print as "", falsy, iterate as
 * empty; attribute access on them or calling them is an error).
 *
 *     ts_tpl *t;
 *     if (ts_tpl_compile(src, len, &t, err) != TS_OK) ...   // "template:12: ..." messages
 *     ts_tpl_render(t, "{\"messages\":[...],\"add_generation_prompt\":true}", n, NULL,
 *                   &text, &text_len, err);
 *     ts_tpl_free(t);
 */
#ifndef TS_TEMPLATE_JINJA_H
#define TS_TEMPLATE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "tessera.h"
#include "util/stop.h"

typedef struct ts_tpl ts_tpl;

/* Zero fields mean the defaults given. The defaults stop a hostile template within a few
 * seconds and under 256 MiB; real chat templates use a tiny fraction of each (a 20-message
 * conversation: ~2k steps, ~100k work units, < 1 MiB). docs/templates.md lists what each
 * refusal says. */
typedef struct ts_tpl_options {
    size_t max_output;    /* bytes of rendered text, and the longest string a render may build;
                             0: 4 MiB */
    uint64_t max_steps;   /* evaluation steps (nodes, loop iterations, filter items); 0: 50M */
    int max_depth;        /* nesting of macro calls / includes of expressions; 0: 128 */
    int64_t now;          /* strftime_now's clock, Unix seconds UTC; 0: the current time */
    int no_trim_blocks;   /* nonzero: trim_blocks off (Hugging Face turns it on) */
    int no_lstrip_blocks; /* nonzero: lstrip_blocks off (Hugging Face turns it on) */
    uint64_t max_work;    /* work units: each operation charges the bytes / items it touches
                             (compared, searched, hashed, counted, allocated); 0: 1e9 (about a
                             second of work) */
    size_t max_memory;    /* bytes the render may allocate (its arena is freed only when it
                             ends, so this bounds everything it builds, the variables
                             included); 0: 224 MiB */
    const ts_stop *stop;  /* cancel and deadline (util/stop.h), checked every 4096 steps and
                             every 1M work units; NULL or a zero deadline: a deadline of 5 s
                             from the start of the render. Borrowed for the call. */
} ts_tpl_options;

/* Compiles template source (need not be NUL-terminated; may not contain a NUL byte). Syntax
 * errors are TS_ERR_FORMAT and unsupported constructs TS_ERR_UNSUPPORTED, both
 * "template:LINE: what" (e.g. "template:3: unknown tag 'include'"); a NUL byte is
 * TS_ERR_FORMAT ("template:LINE: NUL byte at offset N"). Sources over 2 MiB, nesting deeper
 * than 256 and trees over 256 MiB are TS_ERR_LIMIT naming the limit. */
ts_status ts_tpl_compile(const char *src, size_t len, ts_tpl **out, ts_error *err);
void ts_tpl_free(ts_tpl *t);

/* Renders with the variables of vars_json (a JSON object; integers stay integers, floats
 * floats, key order kept). *out is malloc'd and NUL-terminated. Errors: the JSON is malformed
 * or not an object (TS_ERR_FORMAT), a limit was reached (TS_ERR_LIMIT), a runtime error such
 * as calling an unknown filter or an attribute of undefined (TS_ERR_FORMAT / TS_ERR_UNSUPPORTED
 * / TS_ERR_TYPE, or TS_ERR_RANGE for a division by zero or an integer overflow;
 * "template:LINE: ..."), and the template's own raise_exception(msg)
 * (TS_ERR_ABORTED; the message is exactly "template raised: " + msg). opt may be NULL. */
ts_status ts_tpl_render(const ts_tpl *t, const char *vars_json, size_t vars_len,
                        const ts_tpl_options *opt, char **out, size_t *out_len, ts_error *err);

#endif /* TS_TEMPLATE_JINJA_H */
