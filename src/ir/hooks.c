/*
 * hooks.c — dump, profile and compare wrappers around any backend (hooks.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/hooks.h"
#include "util/error.h"

typedef enum hook_kind { HOOK_DUMP, HOOK_PROFILE, HOOK_COMPARE } hook_kind;

typedef struct node_time {
    uint64_t ns;
    int32_t node;
    ts_op op;
    char name[TS_NAME_MAX];
} node_time;

typedef struct hook {
    hook_kind kind;
    ts_backend *inner; /* borrowed */
    ts_backend *other; /* compare: oracle, borrowed */
    char name[64];
    const ts_eval_cb *outer; /* caller's callbacks during a run */
    /* dump */
    FILE *out;
    int64_t max_values;
    int32_t index;
    /* profile */
    uint64_t op_ns[TS_OP_COUNT], op_count[TS_OP_COUNT];
    node_time *nodes;
    int32_t n_nodes, cap_nodes;
    struct timespec start;
    /* compare */
    double tol;
    float **snap; /* per node output of `other` */
    int32_t n_snap;
    ts_compare_result result;
    ts_status cb_status;
    ts_error cb_err;
} hook;

static const char *h_name(void *ctx) {
    return ((hook *)ctx)->name;
}
static ts_status h_alloc(void *ctx, size_t size, ts_buffer **out, ts_error *err) {
    return ts_backend_buffer_alloc(((hook *)ctx)->inner, size, out, err);
}
static ts_status h_wrap(void *ctx, void *host, size_t size, ts_buffer **out, ts_error *err) {
    return ts_backend_buffer_wrap(((hook *)ctx)->inner, host, size, out, err);
}
static void h_free_buf(void *ctx, ts_buffer *buf) {
    ts_backend_buffer_free(((hook *)ctx)->inner, buf);
}
static ts_status h_set(void *ctx, ts_buffer *buf, size_t off, const void *src, size_t size,
                       ts_error *err) {
    return ts_backend_buffer_set(((hook *)ctx)->inner, buf, off, src, size, err);
}
static ts_status h_get(void *ctx, ts_buffer *buf, size_t off, void *dst, size_t size,
                       ts_error *err) {
    return ts_backend_buffer_get(((hook *)ctx)->inner, buf, off, dst, size, err);
}
static bool h_supports(void *ctx, const ts_tensor *node) {
    hook *h = ctx;
    return ts_backend_supports_op(h->inner, node) &&
           (h->other == NULL || ts_backend_supports_op(h->other, node));
}
static ts_status h_sync(void *ctx, ts_error *err) {
    return ts_backend_synchronize(((hook *)ctx)->inner, err);
}
static ts_status h_prepare(void *ctx, ts_graph *g, ts_error *err) {
    return ts_backend_graph_prepare(((hook *)ctx)->inner, g, err);
}

static void free_snaps(hook *h) {
    for (int32_t i = 0; i < h->n_snap; i++) {
        free(h->snap[i]);
    }
    free(h->snap);
    h->snap = NULL;
    h->n_snap = 0;
}

static void h_destroy(void *ctx) {
    hook *h = ctx;
    free_snaps(h);
    free(h->nodes);
    free(h);
}

static bool outer_before(hook *h, ts_tensor *n) {
    return h->outer == NULL || h->outer->before == NULL || h->outer->before(n, h->outer->user);
}
static bool outer_after(hook *h, ts_tensor *n) {
    return h->outer == NULL || h->outer->after == NULL || h->outer->after(n, h->outer->user);
}

/* Reads node n through backend b into a new f32 array (NULL on failure, with cb_err set). */
static float *read_node(hook *h, ts_backend *b, ts_tensor *n) {
    int64_t count = ts_tensor_nelements(n);
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    if (v == NULL) {
        h->cb_status = ts_error_set(&h->cb_err, TS_ERR_NOMEM, "hook: out of memory");
        return NULL;
    }
    ts_status st = ts_backend_tensor_get_f32(b, n, v, count, &h->cb_err);
    if (st != TS_OK) {
        h->cb_status = st;
        free(v);
        return NULL;
    }
    return v;
}

/* ---- dump ---- */

static bool dump_after(ts_tensor *n, void *user) {
    hook *h = user;
    float *v = read_node(h, h->inner, n);
    if (v == NULL) {
        return false;
    }
    int64_t count = ts_tensor_nelements(n);
    double sum = 0.0, asum = 0.0;
    for (int64_t i = 0; i < count; i++) {
        sum += v[i];
        asum += fabs(v[i]);
    }
    char shape[96];
    fprintf(h->out, "%4d %-28s %-10s %-5s %-22s sum=%.6g abs=%.6g", (int)h->index++, n->name,
            ts_op_name(n->op), ts_type_name(n->type), ts_tensor_shape_str(n, shape, sizeof shape),
            sum, asum);
    for (int64_t i = 0; i < count && i < h->max_values; i++) {
        fprintf(h->out, "%s%.6g", i ? " " : " [", v[i]);
    }
    fprintf(h->out, "%s\n", h->max_values > 0 && count > 0 ? "]" : "");
    free(v);
    return outer_after(h, n);
}

static bool pass_before(ts_tensor *n, void *user) {
    return outer_before(user, n);
}

/* ---- profile ---- */

static uint64_t elapsed_ns(const struct timespec *a, const struct timespec *b) {
    return (uint64_t)((b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec));
}

static bool prof_before(ts_tensor *n, void *user) {
    hook *h = user;
    if (!outer_before(h, n)) {
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &h->start);
    return true;
}

static bool prof_after(ts_tensor *n, void *user) {
    hook *h = user;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t ns = elapsed_ns(&h->start, &now);
    h->op_ns[n->op] += ns;
    h->op_count[n->op]++;
    int32_t i = h->index++;
    if (i >= h->cap_nodes) {
        int32_t cap = h->cap_nodes ? h->cap_nodes * 2 : 256;
        node_time *p = realloc(h->nodes, (size_t)cap * sizeof *p);
        if (p == NULL) {
            h->cb_status = ts_error_set(&h->cb_err, TS_ERR_NOMEM, "profile: out of memory");
            return false;
        }
        memset(p + h->cap_nodes, 0, (size_t)(cap - h->cap_nodes) * sizeof *p);
        h->nodes = p;
        h->cap_nodes = cap;
    }
    if (i >= h->n_nodes) {
        h->n_nodes = i + 1;
    }
    h->nodes[i].ns += ns;
    h->nodes[i].node = i;
    h->nodes[i].op = n->op;
    snprintf(h->nodes[i].name, sizeof h->nodes[i].name, "%s", n->name);
    return outer_after(h, n);
}

/* ---- compare ---- */

static bool snap_after(ts_tensor *n, void *user) {
    hook *h = user;
    float *v = read_node(h, h->other, n);
    if (v == NULL) {
        return false;
    }
    h->snap[h->index++] = v;
    h->n_snap = h->index;
    return true;
}

static bool cmp_after(ts_tensor *n, void *user) {
    hook *h = user;
    int32_t i = h->index++;
    if (!h->result.diverged && i < h->n_snap) {
        float *v = read_node(h, h->inner, n);
        if (v == NULL) {
            return false;
        }
        const float *want = h->snap[i];
        int64_t count = ts_tensor_nelements(n), worst = -1;
        double max_abs = 0.0, max_rel = 0.0;
        bool bad = false;
        for (int64_t k = 0; k < count; k++) {
            double a = v[k], b = want[k];
            if (a == b || (isnan(a) && isnan(b))) {
                continue;
            }
            double d = fabs(a - b);
            if (isnan(d)) {
                d = INFINITY;
            }
            double rel = d / fmax(fabs(b), 1e-30);
            if (worst < 0 || d > max_abs) {
                max_abs = d;
                worst = k;
            }
            max_rel = rel > max_rel ? rel : max_rel;
            bad = bad || !(d <= h->tol * (1.0 + fabs(b)));
        }
        h->result.compared = i + 1;
        if (bad) {
            h->result.diverged = true;
            h->result.node = i;
            h->result.op = n->op;
            h->result.index = worst;
            h->result.max_abs = max_abs;
            h->result.max_rel = max_rel;
            snprintf(h->result.name, sizeof h->result.name, "%s", n->name);
        }
        free(v);
    }
    return outer_after(h, n);
}

static ts_status h_compute(void *ctx, ts_graph *g, const ts_eval_cb *cb, ts_error *err) {
    hook *h = ctx;
    h->outer = cb;
    h->index = 0;
    h->cb_status = TS_OK;
    ts_status st;
    if (h->kind == HOOK_DUMP) {
        ts_eval_cb mine = {pass_before, dump_after, h};
        st = h->inner->iface->graph_compute(h->inner->ctx, g, &mine, err);
    } else if (h->kind == HOOK_PROFILE) {
        ts_eval_cb mine = {prof_before, prof_after, h};
        st = h->inner->iface->graph_compute(h->inner->ctx, g, &mine, err);
    } else {
        free_snaps(h);
        memset(&h->result, 0, sizeof h->result);
        h->result.node = -1;
        h->snap = calloc((size_t)ts_graph_n_nodes(g) + 1, sizeof *h->snap);
        if (h->snap == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "compare: out of memory");
        }
        ts_eval_cb oracle = {NULL, snap_after, h};
        st = h->other->iface->graph_compute(h->other->ctx, g, &oracle, err);
        if (st != TS_OK) {
            h->outer = NULL;
            if (h->cb_status != TS_OK) {
                *err = h->cb_err;
                return h->cb_status;
            }
            return ts_error_prefix(err, "compare: oracle '%s': ", ts_backend_name(h->other));
        }
        h->index = 0;
        ts_eval_cb mine = {pass_before, cmp_after, h};
        st = h->inner->iface->graph_compute(h->inner->ctx, g, &mine, err);
    }
    h->outer = NULL;
    if (st != TS_OK && h->cb_status != TS_OK) {
        *err = h->cb_err;
        return h->cb_status;
    }
    return st;
}

static const ts_backend_iface k_hook_iface = {
    .name = h_name,
    .buffer_alloc = h_alloc,
    .buffer_wrap = h_wrap,
    .buffer_free = h_free_buf,
    .buffer_set = h_set,
    .buffer_get = h_get,
    .supports_op = h_supports,
    .graph_compute = h_compute,
    .synchronize = h_sync,
    .graph_prepare = h_prepare,
    .destroy = h_destroy,
};

static ts_status make(hook_kind kind, ts_backend *inner, ts_backend *other, ts_backend **out,
                      hook **hp, ts_error *err) {
    if (inner == NULL || out == NULL || (kind == HOOK_COMPARE && other == NULL)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "hook: NULL backend");
    }
    hook *h = calloc(1, sizeof *h);
    ts_backend *b = calloc(1, sizeof *b);
    if (h == NULL || b == NULL) {
        free(h);
        free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "hook: out of memory");
    }
    h->kind = kind;
    h->inner = inner;
    h->other = other;
    const char *k = kind == HOOK_DUMP ? "dump" : kind == HOOK_PROFILE ? "profile" : "compare";
    if (other != NULL) {
        snprintf(h->name, sizeof h->name, "%s(%s,%s)", k, ts_backend_name(inner),
                 ts_backend_name(other));
    } else {
        snprintf(h->name, sizeof h->name, "%s(%s)", k, ts_backend_name(inner));
    }
    b->iface = &k_hook_iface;
    b->ctx = h;
    *out = b;
    *hp = h;
    return TS_OK;
}

ts_status ts_hook_dump_create(ts_backend *inner, FILE *out, int64_t max_values, ts_backend **hookp,
                              ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "dump hook: NULL stream");
    }
    hook *h = NULL;
    ts_status st = make(HOOK_DUMP, inner, NULL, hookp, &h, err);
    if (st == TS_OK) {
        h->out = out;
        h->max_values = max_values;
    }
    return st;
}

ts_status ts_hook_profile_create(ts_backend *inner, ts_backend **hookp, ts_error *err) {
    hook *h = NULL;
    return make(HOOK_PROFILE, inner, NULL, hookp, &h, err);
}

static hook *as_hook(ts_backend *b, hook_kind kind) {
    if (b == NULL || b->iface != &k_hook_iface || ((hook *)b->ctx)->kind != kind) {
        return NULL;
    }
    return b->ctx;
}

void ts_hook_profile_op(ts_backend *b, ts_op op, uint64_t *ns, uint64_t *count) {
    hook *h = as_hook(b, HOOK_PROFILE);
    bool ok = h != NULL && (int)op >= 0 && op < TS_OP_COUNT;
    *ns = ok ? h->op_ns[op] : 0;
    *count = ok ? h->op_count[op] : 0;
}

void ts_hook_profile_reset(ts_backend *b) {
    hook *h = as_hook(b, HOOK_PROFILE);
    if (h != NULL) {
        memset(h->op_ns, 0, sizeof h->op_ns);
        memset(h->op_count, 0, sizeof h->op_count);
        h->n_nodes = 0;
        if (h->nodes != NULL) {
            memset(h->nodes, 0, (size_t)h->cap_nodes * sizeof *h->nodes);
        }
    }
}

static int by_time_desc(const void *a, const void *b) {
    uint64_t x = ((const node_time *)a)->ns, y = ((const node_time *)b)->ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

void ts_hook_profile_report(ts_backend *b, FILE *out) {
    hook *h = as_hook(b, HOOK_PROFILE);
    if (h == NULL || out == NULL) {
        return;
    }
    node_time ops[TS_OP_COUNT];
    uint64_t total = 0;
    int n_ops = 0;
    for (int op = 0; op < TS_OP_COUNT; op++) {
        total += h->op_ns[op];
        if (h->op_count[op] > 0) {
            ops[n_ops] = (node_time){h->op_ns[op], (int32_t)h->op_count[op], (ts_op)op, ""};
            n_ops++;
        }
    }
    qsort(ops, (size_t)n_ops, sizeof *ops, by_time_desc);
    fprintf(out, "| op type | count | total ms | share |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < n_ops; i++) {
        fprintf(out, "| %s | %d | %.3f | %.1f%% |\n", ts_op_name(ops[i].op), (int)ops[i].node,
                (double)ops[i].ns / 1e6, total ? 100.0 * (double)ops[i].ns / (double)total : 0.0);
    }
    node_time *sorted = malloc((size_t)(h->n_nodes > 0 ? h->n_nodes : 1) * sizeof *sorted);
    if (sorted == NULL) {
        return;
    }
    memcpy(sorted, h->nodes, (size_t)h->n_nodes * sizeof *sorted);
    qsort(sorted, (size_t)h->n_nodes, sizeof *sorted, by_time_desc);
    fprintf(out, "\n| node | name | op | total ms |\n|---:|---|---|---:|\n");
    for (int32_t i = 0; i < h->n_nodes && i < 20; i++) {
        fprintf(out, "| %d | %s | %s | %.3f |\n", (int)sorted[i].node, sorted[i].name,
                ts_op_name(sorted[i].op), (double)sorted[i].ns / 1e6);
    }
    free(sorted);
}

ts_status ts_hook_compare_create(ts_backend *primary, ts_backend *other, double tol,
                                 ts_backend **hookp, ts_error *err) {
    if (!(tol >= 0.0)) {
        return ts_error_set(err, TS_ERR_RANGE, "compare hook: tolerance %g < 0", tol);
    }
    hook *h = NULL;
    ts_status st = make(HOOK_COMPARE, primary, other, hookp, &h, err);
    if (st == TS_OK) {
        h->tol = tol;
        h->result.node = -1;
    }
    return st;
}

const ts_compare_result *ts_hook_compare_result(ts_backend *b) {
    hook *h = as_hook(b, HOOK_COMPARE);
    return h != NULL ? &h->result : NULL;
}
