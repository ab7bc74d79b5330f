/*
 * ref_backend.c — the reference backend's vtable: host buffers and a node-by-node compute
 * loop that dispatches each op to its scalar kernel.
 */
#include <stdlib.h>

#include "backends/ref/ref.h"
#include "backends/ref/ref_internal.h"
#include "util/error.h"

static const char *ref_name(void *ctx) {
    (void)ctx;
    return "ref";
}

static ts_status ref_buffer_alloc(void *ctx, size_t size, ts_buffer **out, ts_error *err) {
    (void)ctx;
    return ts_host_buffer_alloc(size, "ref", out, err);
}

static ts_status ref_buffer_wrap(void *ctx, void *host, size_t size, ts_buffer **out,
                                 ts_error *err) {
    (void)ctx;
    return ts_host_buffer_wrap(host, size, "ref", out, err);
}

static void ref_buffer_free(void *ctx, ts_buffer *buf) {
    (void)ctx;
    ts_host_buffer_free(buf);
}

static ts_status ref_buffer_set(void *ctx, ts_buffer *buf, size_t offset, const void *src,
                                size_t size, ts_error *err) {
    (void)ctx;
    return ts_host_buffer_set(buf, offset, src, size, err);
}

static ts_status ref_buffer_get(void *ctx, ts_buffer *buf, size_t offset, void *dst, size_t size,
                                ts_error *err) {
    (void)ctx;
    return ts_host_buffer_get(buf, offset, dst, size, err);
}

static bool ref_supports_op(void *ctx, const ts_tensor *node) {
    (void)ctx;
    /* Every op and type the IR accepts (ts_op_check) has a reference kernel. */
    return node->op > TS_OP_NONE && node->op < TS_OP_COUNT;
}

static ts_status run_node(ts_tensor *n, ts_error *err) {
    switch (n->op) {
    case TS_OP_GET_ROWS: return ref_get_rows(n, err);
    case TS_OP_MUL_MAT: return ref_mul_mat(n, err);
    case TS_OP_ADD:
    case TS_OP_MUL: return ref_binary(n, err);
    case TS_OP_SCALE:
    case TS_OP_SILU:
    case TS_OP_GELU:
    case TS_OP_SIGMOID:
    case TS_OP_LOG:
        return ref_unary(n, err);
    case TS_OP_TOPK:
        return ref_topk(n, err);
    case TS_OP_GATHER:
        return ref_gather(n, err);
    case TS_OP_MUL_MAT_ID:
        return ref_mul_mat_id(n, err);
    case TS_OP_SWIGLU:
    case TS_OP_SWIGLU_OAI:
    case TS_OP_GEGLU: return ref_glu(n, err);
    case TS_OP_RMS_NORM:
    case TS_OP_NORM: return ref_norm(n, err);
    case TS_OP_ROPE: return ref_rope(n, err);
    case TS_OP_SOFTMAX: return ref_softmax(n, err);
    case TS_OP_CPY:
    case TS_OP_CAST:
    case TS_OP_CONT: return ref_copy(n, err);
    case TS_OP_CONCAT: return ref_concat(n, err);
    case TS_OP_ARGMAX: return ref_argmax(n, err);
    case TS_OP_KV_STORE: return ref_kv_store(n, err);
    case TS_OP_ATTENTION: return ref_attention(n, err);
    case TS_OP_ATTN_MASK: return ref_attn_mask(n, err);
    case TS_OP_VIEW:
    case TS_OP_RESHAPE:
    case TS_OP_PERMUTE:
    case TS_OP_TRANSPOSE: return TS_OK;
    default: break;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED, "ref: node '%s': op %s has no kernel", n->name,
                        ts_op_name(n->op));
}

static ts_status ref_graph_compute(void *ctx, ts_graph *g, const ts_eval_cb *cb, ts_error *err) {
    (void)ctx;
    int n = ts_graph_n_nodes(g);
    for (int i = 0; i < n; i++) {
        ts_tensor *node = ts_graph_node(g, i);
        if (node->data == NULL) {
            return ts_error_set(err, TS_ERR_STATE, "ref: node '%s' is not in host memory",
                                node->name);
        }
        if (cb != NULL && cb->before != NULL && !cb->before(node, cb->user)) {
            return ts_error_set(err, TS_ERR_ABORTED, "ref: stopped before node %d '%s'", i,
                                node->name);
        }
        ts_status st = ts_op_is_collective(node->op) ? ref_collective(g, node, err)
                                                     : run_node(node, err);
        if (st != TS_OK) {
            return ts_error_prefix(err, "ref: node %d: ", i);
        }
        if (cb != NULL && cb->after != NULL && !cb->after(node, cb->user)) {
            return ts_error_set(err, TS_ERR_ABORTED, "ref: stopped after node %d '%s'", i,
                                node->name);
        }
    }
    return TS_OK;
}

static void ref_destroy(void *ctx) {
    (void)ctx;
}

static const ts_backend_iface k_ref_iface = {
    .name = ref_name,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_wrap = ref_buffer_wrap,
    .buffer_free = ref_buffer_free,
    .buffer_set = ref_buffer_set,
    .buffer_get = ref_buffer_get,
    .supports_op = ref_supports_op,
    .graph_compute = ref_graph_compute,
    .synchronize = NULL,
    .destroy = ref_destroy,
};

ts_status ts_ref_backend_create(ts_backend **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "ref: create: out is NULL");
    }
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "ref: create: out of memory");
    }
    (*out)->iface = &k_ref_iface;
    (*out)->ctx = NULL;
    return TS_OK;
}
