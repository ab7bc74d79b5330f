/*
 * plan.c — liveness-based placement of inputs and activations in one arena (see plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "util/error.h"

typedef struct free_block {
    size_t offset, size;
} free_block;

typedef struct allocator {
    free_block *blocks; /* sorted by offset, non-adjacent */
    int32_t n, cap;
    size_t top;  /* end of the highest block in use */
    size_t peak; /* largest top seen */
} allocator;

static size_t align_up(size_t n) {
    return (n + TS_PLAN_ALIGN - 1) / TS_PLAN_ALIGN * TS_PLAN_ALIGN;
}

static size_t alloc_take(allocator *a, size_t size) {
    int32_t best = -1;
    for (int32_t i = 0; i < a->n; i++) {
        if (a->blocks[i].size >= size && (best < 0 || a->blocks[i].size < a->blocks[best].size)) {
            best = i;
        }
    }
    size_t off;
    if (best >= 0) {
        off = a->blocks[best].offset;
        a->blocks[best].offset += size;
        a->blocks[best].size -= size;
        if (a->blocks[best].size == 0) {
            memmove(&a->blocks[best], &a->blocks[best + 1],
                    (size_t)(a->n - best - 1) * sizeof *a->blocks);
            a->n--;
        }
        return off;
    }
    /* Grow at the top, absorbing a free block that ends there. */
    if (a->n > 0 && a->blocks[a->n - 1].offset + a->blocks[a->n - 1].size == a->top) {
        off = a->blocks[a->n - 1].offset;
        a->n--;
    } else {
        off = a->top;
    }
    a->top = off + size;
    if (a->top > a->peak) {
        a->peak = a->top;
    }
    return off;
}

static bool alloc_give(allocator *a, size_t off, size_t size) {
    if (off + size == a->top) {
        a->top = off;
        /* A free block now touching the top also retreats. */
        if (a->n > 0 && a->blocks[a->n - 1].offset + a->blocks[a->n - 1].size == a->top) {
            a->top = a->blocks[a->n - 1].offset;
            a->n--;
        }
        return true;
    }
    int32_t i = 0;
    while (i < a->n && a->blocks[i].offset < off) {
        i++;
    }
    bool merge_prev = i > 0 && a->blocks[i - 1].offset + a->blocks[i - 1].size == off;
    bool merge_next = i < a->n && off + size == a->blocks[i].offset;
    if (merge_prev && merge_next) {
        a->blocks[i - 1].size += size + a->blocks[i].size;
        memmove(&a->blocks[i], &a->blocks[i + 1], (size_t)(a->n - i - 1) * sizeof *a->blocks);
        a->n--;
    } else if (merge_prev) {
        a->blocks[i - 1].size += size;
    } else if (merge_next) {
        a->blocks[i].offset = off;
        a->blocks[i].size += size;
    } else {
        if (a->n == a->cap) {
            int32_t cap = a->cap ? a->cap * 2 : 32;
            free_block *p = realloc(a->blocks, (size_t)cap * sizeof *p);
            if (p == NULL) {
                return false;
            }
            a->blocks = p;
            a->cap = cap;
        }
        memmove(&a->blocks[i + 1], &a->blocks[i], (size_t)(a->n - i) * sizeof *a->blocks);
        a->blocks[i] = (free_block){off, size};
        a->n++;
    }
    return true;
}

/* Ops whose output element i depends only on source elements of the same row, read before
 * the row is written: these may overwrite their first source. */
static bool inplace_op(ts_op op) {
    switch (op) {
    case TS_OP_ADD:
    case TS_OP_MUL:
    case TS_OP_SCALE:
    case TS_OP_SILU:
    case TS_OP_GELU:
    case TS_OP_SIGMOID:
    case TS_OP_LOG:
    case TS_OP_SWIGLU:
    case TS_OP_SWIGLU_OAI:
    case TS_OP_GEGLU:
    case TS_OP_RMS_NORM:
    case TS_OP_NORM:
    case TS_OP_ROPE:
    case TS_OP_SOFTMAX:
        return true;
    default:
        return false;
    }
}

const ts_plan *ts_graph_plan(const ts_graph *g) {
    return g->built ? &g->plan : NULL;
}

ts_status ts_plan_graph(ts_graph *g, ts_error *err) {
    int32_t n = g->n_tensors, n_nodes = g->n_nodes;
    int32_t *last = malloc((size_t)n * sizeof *last);
    int32_t *entry_of = malloc((size_t)n * sizeof *entry_of);
    g->plan.entries = calloc((size_t)n + 1, sizeof *g->plan.entries);
    allocator al = {0};
    if (last == NULL || entry_of == NULL || g->plan.entries == NULL) {
        free(last);
        free(entry_of);
        return ts_error_set(err, TS_ERR_NOMEM, "plan: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        last[i] = -2; /* unused */
        entry_of[i] = -1;
    }
    for (int32_t i = 0; i < n_nodes; i++) {
        ts_tensor *node = g->nodes[i];
        for (int k = 0; k < TS_MAX_SRC; k++) {
            if (node->src[k] != NULL) {
                last[ts_tensor_owner(node->src[k])->id] = i;
            }
        }
        if (node->view_src != NULL) {
            last[ts_tensor_owner(node)->id] = i;
        }
        if (node->view_src == NULL && last[node->id] < i) {
            last[node->id] = i; /* written here even if nobody reads it */
        }
    }
    for (int32_t i = 0; i < n; i++) {
        ts_tensor *t = g->tensors[i];
        if ((t->flags & TS_TENSOR_OUTPUT) != 0) {
            last[ts_tensor_owner(t)->id] = n_nodes;
        }
    }
    ts_plan *p = &g->plan;
    p->n_entries = 0;
    p->naive_bytes = 0;
    ts_status st = TS_OK;
    /* Inputs first: live for the whole run. */
    for (int32_t i = 0; i < n; i++) {
        ts_tensor *t = g->tensors[i];
        if (t->flags & TS_TENSOR_INPUT) { /* even when unused: callers set every input */
            size_t size = align_up(ts_tensor_nbytes_max(t));
            ts_plan_entry *e = &p->entries[p->n_entries];
            *e = (ts_plan_entry){i, alloc_take(&al, size), size, -1, n_nodes, -1};
            entry_of[i] = p->n_entries++;
            p->naive_bytes += size;
        }
    }
    for (int32_t i = 0; i < n_nodes && st == TS_OK; i++) {
        ts_tensor *node = g->nodes[i];
        if (node->view_src == NULL) {
            size_t size = align_up(ts_tensor_nbytes_max(node));
            ts_plan_entry e = {node->id, 0, size, i, last[node->id], -1};
            ts_tensor *s0 = node->src[0];
            bool shared = false;
            for (int k = 1; k < TS_MAX_SRC && s0 != NULL; k++) {
                if (node->src[k] != NULL && ts_tensor_owner(node->src[k]) == s0) {
                    shared = true;
                }
            }
            if (inplace_op(node->op) && s0 != NULL && !shared && s0->view_src == NULL &&
                entry_of[s0->id] >= 0 && p->entries[entry_of[s0->id]].first >= 0 &&
                last[s0->id] == i && p->entries[entry_of[s0->id]].size == size &&
                s0->type == node->type && ts_tensor_is_contiguous(s0)) {
                e.offset = p->entries[entry_of[s0->id]].offset;
                e.inplace_of = s0->id;
            } else {
                e.offset = alloc_take(&al, size);
            }
            p->entries[p->n_entries] = e;
            entry_of[node->id] = p->n_entries++;
            p->naive_bytes += size;
        }
        /* Release what dies here (not what the node took over in place). */
        for (int k = 0; k < TS_MAX_SRC + 1; k++) {
            ts_tensor *s = k < TS_MAX_SRC ? node->src[k] : node;
            if (s == NULL) {
                continue;
            }
            ts_tensor *o = ts_tensor_owner(s);
            int32_t ei = entry_of[o->id];
            if (ei < 0 || last[o->id] != i || p->entries[ei].first < 0) {
                continue;
            }
            bool taken = node->view_src == NULL &&
                         p->entries[entry_of[node->id]].inplace_of == o->id;
            /* Mark it released so a second reference from this node skips it. */
            last[o->id] = -3;
            if (!taken && !alloc_give(&al, p->entries[ei].offset, p->entries[ei].size)) {
                st = ts_error_set(err, TS_ERR_NOMEM, "plan: out of memory");
                break;
            }
        }
    }
    p->peak_bytes = al.peak;
    free(al.blocks);
    free(last);
    free(entry_of);
    return st;
}
