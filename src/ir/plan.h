/*
 * plan.h — the activation memory planner.
 *
 * ts_graph_build() places every input and activation of a graph in ONE arena. Walking the
 * nodes in execution order, each tensor that owns storage gets an interval of the arena when
 * its node runs and gives it back after its last reader (views extend their owner's life).
 * Freed intervals are reused best-fit and merged with free neighbours; an elementwise or
 * row-wise node whose first source dies at that node may take over the source's interval
 * (in place). Inputs and outputs stay live for the whole run, so a graph can be run again
 * (by a second backend, for comparison) with the same inputs. Offsets are 64-byte aligned.
 *
 * The plan is owned by the graph and valid until it is destroyed.
 */
#ifndef TS_IR_PLAN_H
#define TS_IR_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

#define TS_PLAN_ALIGN 64

typedef struct ts_plan_entry {
    int32_t tensor;     /* tensor id (ts_graph_tensor) */
    size_t offset;      /* byte offset in the arena */
    size_t size;        /* bytes reserved (aligned) */
    int32_t first;      /* node index that writes it; -1 for inputs */
    int32_t last;       /* last node index that reads it; n_nodes for inputs and outputs */
    int32_t inplace_of; /* tensor id whose interval it took over, or -1 */
} ts_plan_entry;

typedef struct ts_plan {
    size_t peak_bytes;  /* arena size */
    size_t naive_bytes; /* sum of all entries' sizes (no reuse) */
    int32_t n_entries;
    ts_plan_entry *entries; /* owned by the graph */
} ts_plan;

/* The plan made by ts_graph_build, or NULL before. */
const ts_plan *ts_graph_plan(const ts_graph *g);

#endif /* TS_IR_PLAN_H */
