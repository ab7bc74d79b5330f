/*
 * cpu_backend.c — the CPU backend's vtable, the op lookup, scratch sizing and the threaded
 * graph loop.
 *
 * Op knowledge lives in the op files' descriptor tables (cpu_internal.h); at creation the
 * backend indexes them by op, and dispatch, scratch sizing and supports_op all go through
 * that index. A graph run is one threadpool task: every thread walks the node list, runs its
 * share of each node and meets the others at a barrier after it (only where the schedule
 * needs one, cpu_sched.c). A failing kernel records its node (cpu_exec.c); after a node's
 * barrier all threads compare the failed index with the node they finished, so they all stop
 * at the same place (no thread can be left waiting at a barrier).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_pack.h"
#include "util/error.h"

typedef struct cpu_ctx {
    ts_threadpool *pool;
    ts_isa isa;
    cpu_kernels kernels; /* MUL_MAT's gemm level per weight type and shape class */
    char name[32];
    void *scratch; /* grown when a graph needs more; reused across runs */
    size_t scratch_size;
    uint8_t *sched;      /* per-node CPU_SCHED_* flags of the running graph; grown as needed */
    atomic_int *work;    /* per-node shared work counters (cpu_take), zeroed per run */
    const void **packed; /* per-node repacked weight of a MUL_MAT, or NULL */
    int sched_cap;
    cpu_pack_store pack;                 /* repacked weights (cpu_pack.h) */
    const cpu_op_desc *ops[TS_OP_COUNT]; /* by op, into the static tables; NULL: no kernel */
} cpu_ctx;

typedef struct cpu_run {
    cpu_exec exec; /* barrier, failure record and the graph */
    cpu_ctx *ctx;
    const ts_eval_cb *cb;
    size_t shared_size, local_size;
} cpu_run;

/* The op files' tables; each op appears in one of them. */
static const cpu_op_table *const k_tables[] = {
    &cpu_rowwise_ops, &cpu_copy_ops,       &cpu_matmul_ops, &cpu_kv_ops,
    &cpu_attn_ops,    &cpu_collective_ops, &cpu_moe_ops,
};

static void index_ops(cpu_ctx *ctx) {
    for (size_t t = 0; t < sizeof k_tables / sizeof k_tables[0]; t++) {
        for (int i = 0; i < k_tables[t]->n_ops; i++) {
            const cpu_op_desc *d = &k_tables[t]->ops[i];
            assert(d->op > TS_OP_NONE && d->op < TS_OP_COUNT && ctx->ops[d->op] == NULL);
            ctx->ops[d->op] = d;
        }
    }
}

static const cpu_op_desc *op_desc(const cpu_ctx *ctx, ts_op op) {
    return op > TS_OP_NONE && op < TS_OP_COUNT ? ctx->ops[op] : NULL;
}

/* Thread 0 asks the callback; a refusal fails node c->node for every thread. */
static bool ask(const cpu_op_ctx *c, bool (*fn)(ts_tensor *, void *), ts_tensor *node, void *user,
                const char *when) {
    if (c->ith == 0 && !fn(node, user)) {
        cpu_fail(c, TS_ERR_ABORTED, "stopped by callback %s '%s'", when, node->name);
    }
    cpu_barrier(c);
    return !cpu_exec_failed_by(c->exec, c->node);
}

static void graph_task(void *arg, int ith, int nth) {
    cpu_run *r = arg;
    cpu_ctx *ctx = r->ctx;
    cpu_op_ctx c = {
        .ith = ith,
        .nth = nth,
        .isa = ctx->isa,
        .kernels = &ctx->kernels,
        .shared = ctx->scratch,
        .shared_size = r->shared_size,
        .local = (char *)ctx->scratch + r->shared_size + (size_t)ith * r->local_size,
        .local_size = r->local_size,
        .exec = &r->exec,
    };
    const ts_graph *g = r->exec.graph;
    int n_nodes = ts_graph_n_nodes(g);
    const ts_eval_cb *cb = r->cb;
    for (int i = 0; i < n_nodes; i++) {
        ts_tensor *node = ts_graph_node(g, i);
        c.node = i;
        if (cb != NULL && cb->before != NULL && !ask(&c, cb->before, node, cb->user, "before")) {
            return;
        }
        c.reuse_conversion = cb == NULL && (ctx->sched[i] & CPU_SCHED_REUSE) != 0;
        c.packed = ctx->packed[i];
        c.work = &ctx->work[i];
        ctx->ops[node->op]->run(&c, node);
        /* Without callbacks, only the barriers the schedule needs (cpu_sched.c); a failure
         * is seen by every thread at the same barrier. */
        if (cb == NULL && !(ctx->sched[i] & CPU_SCHED_BARRIER)) {
            continue;
        }
        cpu_barrier(&c);
        /* Only failures of nodes up to i: a thread already past this barrier may be
         * recording one of a later node, which the others must not see yet. */
        if (cpu_exec_failed_by(&r->exec, i)) {
            return;
        }
        if (cb != NULL && cb->after != NULL && !ask(&c, cb->after, node, cb->user, "after")) {
            return;
        }
    }
}

static size_t align64(size_t n) {
    return (n + 63) / 64 * 64;
}

/* Measures the kernel choice of the weight types of g's MUL_MATs (and MUL_MAT_IDs) not chosen yet
 * (once per type for the backend's life, or never with a usable cache file), or stale (retune). */
static ts_status tune_graph(cpu_ctx *ctx, const ts_graph *g, ts_error *err) {
    bool want[TS_TYPE_COUNT] = {false};
    int n_nodes = ts_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) {
        const ts_tensor *node = ts_graph_node(g, i);
        bool mm = node->op == TS_OP_MUL_MAT || node->op == TS_OP_MUL_MAT_ID;
        ts_type t = mm ? node->src[0]->type : TS_TYPE_COUNT;
        if (cpu_kernels_needs(&ctx->kernels, t)) {
            want[t] = true;
        }
    }
    return cpu_kernels_tune(&ctx->kernels, want, err);
}

/* The repacked copy of each MUL_MAT's (and MUL_MAT_ID's) weights where the kernel choice reads
 * repacked weights (made on first sight, cpu_pack.h), into packed[i] when packed is not NULL. A
 * copy that cannot be made (out of memory) leaves the node on the original rows, which gives the
 * same bits. */
static void pack_graph(cpu_ctx *ctx, const ts_graph *g, const void **packed) {
    int n_nodes = ts_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) {
        const ts_tensor *node = ts_graph_node(g, i);
        const void *p = NULL;
        bool mm = node->op == TS_OP_MUL_MAT || node->op == TS_OP_MUL_MAT_ID;
        if (mm && cpu_kernels_packed(&ctx->kernels, node->src[0]->type) &&
            cpu_pack_eligible(node->src[0])) {
            /* One level per type for both shape classes, so either tells whether it has a
             * packed gemm. */
            const ts_quant_ops *ops = ts_quant_ops_get(
                node->src[0]->type, cpu_kernels_isa(&ctx->kernels, node->src[0]->type, 1));
            ts_error ignored = {0};
            if (ops != NULL && ops->gemm_packed != NULL &&
                cpu_pack_get(&ctx->pack, ctx->pool, node->src[0], &p, &ignored) != TS_OK) {
                p = NULL;
            }
        }
        if (packed != NULL) {
            packed[i] = p;
        }
    }
}

static ts_status cpu_graph_prepare(void *vctx, ts_graph *g, ts_error *err) {
    cpu_ctx *ctx = vctx;
    ts_status st = tune_graph(ctx, g, err);
    if (st == TS_OK) {
        pack_graph(ctx, g, NULL);
    }
    return st;
}

static ts_status cpu_graph_compute(void *vctx, ts_graph *g, const ts_eval_cb *cb, ts_error *err) {
    cpu_ctx *ctx = vctx;
    int nth = ts_threadpool_size(ctx->pool);
    size_t shared = 0, local = 0;
    int n_nodes = ts_graph_n_nodes(g);
    for (int i = 0; i < n_nodes; i++) {
        ts_tensor *node = ts_graph_node(g, i);
        if (node->data == NULL) {
            return ts_error_set(err, TS_ERR_STATE, "cpu: node '%s' is not in host memory",
                                node->name);
        }
        const cpu_op_desc *d = op_desc(ctx, node->op);
        if (d == NULL) {
            const char *op = ts_op_name(node->op);
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "cpu: node %d '%s' (%s): op %s has no CPU kernel", i, node->name,
                                op, op);
        }
        size_t s = 0, l = 0;
        if (d->scratch != NULL) {
            d->scratch(node, ctx->isa, &s, &l);
        }
        shared = s > shared ? s : shared;
        local = l > local ? l : local;
    }
    shared = align64(shared);
    local = align64(local);
    size_t need = shared + (size_t)nth * local;
    if (need > ctx->scratch_size) {
        void *p = aligned_alloc(64, align64(need));
        if (p == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "cpu: scratch of %zu bytes", need);
        }
        free(ctx->scratch);
        ctx->scratch = p;
        ctx->scratch_size = need;
    }
    if (n_nodes > ctx->sched_cap) {
        uint8_t *p = realloc(ctx->sched, (size_t)n_nodes);
        if (p == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "cpu: schedule of %d nodes", n_nodes);
        }
        ctx->sched = p;
        atomic_int *w = realloc(ctx->work, (size_t)n_nodes * sizeof *w);
        if (w == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "cpu: work counters of %d nodes", n_nodes);
        }
        ctx->work = w;
        const void **pk = realloc(ctx->packed, (size_t)n_nodes * sizeof *pk);
        if (pk == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "cpu: packed weights of %d nodes", n_nodes);
        }
        ctx->packed = pk;
        ctx->sched_cap = n_nodes;
    }
    for (int i = 0; i < n_nodes; i++) {
        atomic_init(&ctx->work[i], 0);
    }
    ts_status st = tune_graph(ctx, g, err);
    if (st != TS_OK) {
        return st;
    }
    pack_graph(ctx, g, ctx->packed);
    cpu_schedule(g, ctx->isa, ctx->sched);
    cpu_run r = {.ctx = ctx, .cb = cb, .shared_size = shared, .local_size = local};
    cpu_exec_init(&r.exec, ctx->pool, g);
    ts_threadpool_run(ctx->pool, graph_task, &r);
    return cpu_exec_status(&r.exec, err);
}

static const char *cpu_name(void *vctx) {
    return ((cpu_ctx *)vctx)->name;
}

static ts_status cpu_buffer_alloc(void *ctx, size_t size, ts_buffer **out, ts_error *err) {
    (void)ctx;
    return ts_host_buffer_alloc(size, "cpu", out, err);
}

static ts_status cpu_buffer_wrap(void *ctx, void *host, size_t size, ts_buffer **out,
                                 ts_error *err) {
    (void)ctx;
    return ts_host_buffer_wrap(host, size, "cpu", out, err);
}

static void cpu_buffer_free(void *vctx, ts_buffer *buf) {
    cpu_pack_forget(&((cpu_ctx *)vctx)->pack, buf);
    ts_host_buffer_free(buf);
}

static ts_status cpu_buffer_set(void *ctx, ts_buffer *buf, size_t offset, const void *src,
                                size_t size, ts_error *err) {
    (void)ctx;
    return ts_host_buffer_set(buf, offset, src, size, err);
}

static ts_status cpu_buffer_get(void *ctx, ts_buffer *buf, size_t offset, void *dst, size_t size,
                                ts_error *err) {
    (void)ctx;
    return ts_host_buffer_get(buf, offset, dst, size, err);
}

/* Ops without a descriptor (the view ops, which are never graph nodes) are not supported. */
static bool cpu_supports_op(void *vctx, const ts_tensor *node) {
    cpu_ctx *ctx = vctx;
    const cpu_op_desc *d = op_desc(ctx, node->op);
    return d != NULL && (d->supports == NULL || d->supports(node, ctx->isa));
}

static void cpu_destroy(void *vctx) {
    cpu_ctx *ctx = vctx;
    if (ctx == NULL) {
        return;
    }
    ts_threadpool_destroy(ctx->pool);
    free(ctx->scratch);
    free(ctx->sched);
    free(ctx->work);
    free(ctx->packed);
    cpu_pack_store_free(&ctx->pack);
    free(ctx);
}

static const ts_backend_iface k_cpu_iface = {
    .name = cpu_name,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_wrap = cpu_buffer_wrap,
    .buffer_free = cpu_buffer_free,
    .buffer_set = cpu_buffer_set,
    .buffer_get = cpu_buffer_get,
    .supports_op = cpu_supports_op,
    .graph_compute = cpu_graph_compute,
    .synchronize = NULL,
    .graph_prepare = cpu_graph_prepare,
    .destroy = cpu_destroy,
};

int ts_cpu_physical_cores(void) {
    /* Count distinct (package, core) pairs; fall back to online CPUs. */
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpu < 1) {
        return 1;
    }
    int n_found = 0, cores = 0;
    long *seen = calloc((size_t)n_cpu, sizeof *seen);
    if (seen == NULL) {
        return (int)n_cpu;
    }
    for (long cpu = 0; cpu < n_cpu; cpu++) {
        char path[128];
        long ids[2] = {0, 0};
        const char *files[2] = {"physical_package_id", "core_id"};
        bool ok = true;
        for (int k = 0; k < 2 && ok; k++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/%s", cpu,
                     files[k]);
            FILE *f = fopen(path, "r");
            ok = f != NULL && fscanf(f, "%ld", &ids[k]) == 1;
            if (f != NULL) {
                fclose(f);
            }
        }
        if (!ok) {
            continue;
        }
        n_found++;
        long key = ids[0] * 65536 + ids[1];
        bool dup = false;
        for (int i = 0; i < cores; i++) {
            dup = dup || seen[i] == key;
        }
        if (!dup) {
            seen[cores++] = key;
        }
    }
    free(seen);
    return n_found == n_cpu && cores > 0 ? cores : (int)n_cpu;
}

ts_cpu_params ts_cpu_params_default(void) {
    ts_cpu_params p = {.n_threads = ts_cpu_physical_cores(), .isa = -1};
    return p;
}

ts_status ts_cpu_backend_create(const ts_cpu_params *params, ts_backend **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "cpu: create: out is NULL");
    }
    *out = NULL;
    ts_cpu_params p = params != NULL ? *params : (ts_cpu_params){.n_threads = 0, .isa = -1};
    if (p.n_threads == 0) {
        p.n_threads = ts_cpu_physical_cores();
    }
    /* An explicit level, or TS_ISA, fixes every kernel; otherwise MUL_MAT's are measured. */
    bool forced = p.isa >= 0 || getenv("TS_ISA") != NULL;
    if (p.isa < 0) {
        p.isa = (int)ts_quant_detect_isa();
    }
    if (!ts_quant_isa_supported((ts_isa)p.isa)) {
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "cpu: this CPU cannot run ISA level %s",
                            ts_isa_name((ts_isa)p.isa));
    }
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    ts_backend *b = calloc(1, sizeof *b);
    if (ctx == NULL || b == NULL) {
        free(ctx);
        free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "cpu: create: out of memory");
    }
    ts_status st = ts_threadpool_create(p.n_threads, &ctx->pool, err);
    if (st != TS_OK) {
        free(ctx);
        free(b);
        return ts_error_prefix(err, "cpu: ");
    }
    ctx->isa = (ts_isa)p.isa;
    cpu_kernels_init(&ctx->kernels, ctx->isa, forced, p.retune, !p.no_repack);
    index_ops(ctx);
    snprintf(ctx->name, sizeof ctx->name, "cpu");
    b->iface = &k_cpu_iface;
    b->ctx = ctx;
    *out = b;
    return TS_OK;
}

static cpu_ctx *cpu_of(const ts_backend *b) {
    return b != NULL && b->iface == &k_cpu_iface ? b->ctx : NULL;
}

ts_status ts_cpu_backend_tune(ts_backend *b, const ts_type *types, int n_types, ts_error *err) {
    cpu_ctx *ctx = cpu_of(b);
    if (ctx == NULL || (types == NULL && n_types > 0) || n_types < 0) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "cpu: tune: not a CPU backend, or %d types without a list", n_types);
    }
    bool want[TS_TYPE_COUNT] = {false};
    for (int i = 0; i < n_types; i++) {
        if ((unsigned)types[i] < TS_TYPE_COUNT) {
            want[types[i]] = true;
        }
    }
    return cpu_kernels_tune(&ctx->kernels, want, err);
}

bool ts_cpu_backend_kernels(const ts_backend *b, const ts_type *types, int n_types, char *buf,
                            size_t size, const char **notice, double *tune_ms) {
    const cpu_ctx *ctx = cpu_of(b);
    if (size > 0) {
        buf[0] = '\0';
    }
    if (notice != NULL) {
        *notice = ctx != NULL ? ctx->kernels.notice : "";
    }
    if (tune_ms != NULL) {
        *tune_ms = ctx != NULL ? ctx->kernels.tune_ms : 0;
    }
    if (ctx == NULL || size == 0) {
        return ctx != NULL;
    }
    bool want[TS_TYPE_COUNT] = {false};
    for (int i = 0; types != NULL && i < n_types; i++) {
        if ((unsigned)types[i] < TS_TYPE_COUNT) {
            want[types[i]] = true;
        }
    }
    cpu_kernels_describe(&ctx->kernels, types != NULL ? want : NULL, buf, size);
    return true;
}

bool ts_cpu_backend_repacked(const ts_backend *b, size_t *bytes, double *ms) {
    const cpu_ctx *ctx = cpu_of(b);
    *bytes = ctx != NULL ? ctx->pack.bytes : 0;
    *ms = ctx != NULL ? ctx->pack.ms : 0;
    return ctx != NULL;
}
