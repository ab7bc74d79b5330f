/*
 * cpu_collective.h — the CPU backend's collective kernels (cpu_collective.c).
 */
#ifndef TS_BACKENDS_CPU_CPU_COLLECTIVE_H
#define TS_BACKENDS_CPU_CPU_COLLECTIVE_H

#include "backends/cpu/cpu_internal.h"

/* ALL_REDUCE_SUM, ALL_GATHER, REDUCE_SCATTER_SUM: thread 0 calls g's communicator, the other
 * threads return at once (the node's barrier holds them). Failures go through cpu_fail. */
void cpu_collective(const cpu_op_ctx *c, ts_tensor *n, ts_graph *g);
/* Shared scratch bytes the node may need for staging (at its maximum extents). */
void cpu_collective_scratch(const ts_tensor *n, size_t *shared);

#endif /* TS_BACKENDS_CPU_CPU_COLLECTIVE_H */
