/*
 * registry.h — the functional registry: named implementations per functional family.
 *
 * A family ("attention", "matmul", "norm", "glu", ...) has one or more implementations,
 * each a function pointer with the family's signature (see functional.h). The first one
 * registered is the default. Selection, from lowest to highest precedence by the order the
 * caller applies them: the default; GGUF metadata (`tessera.overrides`, "attention=decomposed,
 * norm=separate") through ts_registry_apply(); the CLI (`--override attention=decomposed`)
 * through ts_registry_parse_args(); and programmatic scopes: ts_registry_push() saves the
 * selection, ts_registry_select() changes it, ts_registry_pop() restores it.
 *
 * The registry is an object passed explicitly (graphs borrow it while building); there is
 * no global instance. Not thread-safe: configure it before building graphs on other threads.
 * Names are copied; the registry owns all of its memory.
 */
#ifndef TS_IR_REGISTRY_H
#define TS_IR_REGISTRY_H

#include <stddef.h>

#include "tessera.h"

typedef struct ts_registry ts_registry;
typedef void (*ts_impl_fn)(void); /* cast to the family's signature */

/* Creates a registry holding the built-in families and implementations (functional.h). */
ts_status ts_registry_create(ts_registry **out, ts_error *err);
/* Creates a registry with no families (for tests and custom setups). */
ts_status ts_registry_create_empty(ts_registry **out, ts_error *err);
void ts_registry_destroy(ts_registry *r);

/* Registers implementation `name` of `family` (creating the family; the first
 * implementation becomes its default). Duplicate names are an error. */
ts_status ts_registry_add(ts_registry *r, const char *family, const char *name, ts_impl_fn fn,
                          ts_error *err);
/* Makes `name` the active implementation of `family`. Unknown family or name: an error that
 * lists the choices. */
ts_status ts_registry_select(ts_registry *r, const char *family, const char *name,
                             ts_error *err);
/* Applies "family=name" pairs separated by commas, semicolons or spaces (all or nothing).
 * `origin` names the source for messages ("GGUF tessera.overrides", "--override"). */
ts_status ts_registry_apply(ts_registry *r, const char *spec, const char *origin,
                            ts_error *err);
/* Consumes every "--override SPEC" and "--override=SPEC" from argv[1..], applies them in
 * order and compacts argv (updating *argc). Other arguments are left in place. */
ts_status ts_registry_parse_args(ts_registry *r, int *argc, char **argv, ts_error *err);
/* Saves / restores the whole selection (scopes nest). pop without push is an error. */
ts_status ts_registry_push(ts_registry *r, ts_error *err);
ts_status ts_registry_pop(ts_registry *r, ts_error *err);

/* Active implementation of family and its name; NULL when the family is unknown. */
ts_impl_fn ts_registry_get(const ts_registry *r, const char *family, const char **name);
/* Writes "family: impl1* impl2, ..." lines (active marked with *) into buf. */
void ts_registry_describe(const ts_registry *r, char *buf, size_t size);

#endif /* TS_IR_REGISTRY_H */
