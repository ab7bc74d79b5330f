/*
 * cuda_plan.c — the CUDA backend's host-side decisions, in plain C so that they are built and
 * tested without a GPU: which nodes have kernels (and why not, in words), how much device
 * scratch a node needs, how ATTENTION splits its keys, and the "does not fit" check.
 *
 * supports_op and graph_prepare (cuda_backend.c) both come here, so what the backend claims
 * and what it runs cannot drift apart.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kernels.h"
#include "util/error.h"

static bool is_float(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16;
}

bool ts_cuda_weight_type_supported(ts_type type) {
    switch (type) {
    case TS_TYPE_F32:
    case TS_TYPE_F16:
    case TS_TYPE_BF16:
    case TS_TYPE_Q4_0:
    case TS_TYPE_Q4_1:
    case TS_TYPE_Q5_0:
    case TS_TYPE_Q5_1:
    case TS_TYPE_Q8_0:
    case TS_TYPE_Q2_K:
    case TS_TYPE_Q3_K:
    case TS_TYPE_Q4_K:
    case TS_TYPE_Q5_K:
    case TS_TYPE_Q6_K:
    case TS_TYPE_IQ4_NL:
    case TS_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

static bool is_block(ts_type t) {
    return ts_type_block_size(t) > 1;
}

/* A weight-like source: a supported type whose rows are whole blocks and dense. */
static bool readable_rows(const ts_tensor *t) {
    return ts_cuda_weight_type_supported(t->type) &&
           (!is_block(t->type) || (ts_tensor_rows_contiguous(t) &&
                                   t->ne_max[0] % (int64_t)ts_type_block_size(t->type) == 0));
}

static bool all_float(const ts_tensor *node) {
    if (!is_float(node->type)) {
        return false;
    }
    for (int k = 0; k < TS_MAX_SRC; k++) {
        if (node->src[k] != NULL && !is_float(node->src[k]->type) &&
            !(node->op == TS_OP_ROPE && k == 1)) {
            return false;
        }
    }
    return true;
}

static bool copy_supported(const ts_tensor *node) {
    ts_type s = node->src[0]->type, d = node->type;
    if (s == d && (is_block(s) || s == TS_TYPE_I32)) {
        return readable_rows(node->src[0]) || s == TS_TYPE_I32;
    }
    if (is_float(d)) {
        return is_float(s) || readable_rows(node->src[0]);
    }
    return d == TS_TYPE_Q8_0 && is_float(s) && ts_tensor_rows_contiguous(node) &&
           node->ne_max[0] % 32 == 0;
}

static bool kv_type_ok(ts_type t, int64_t hd) {
    return is_float(t) || (t == TS_TYPE_Q8_0 && hd % 32 == 0);
}

/* The reason for the ops with sources beyond plain floats; NULL when supported. */
static const char *special_reason(const ts_tensor *n) {
    const ts_tensor *a = n->src[0];
    switch (n->op) {
    case TS_OP_GET_ROWS:
        return readable_rows(a) && n->type == TS_TYPE_F32 ? NULL : "source type";
    case TS_OP_MUL_MAT:
        return !readable_rows(a)                ? "weight type"
               : n->src[1]->type != TS_TYPE_F32 ? "activation type"
                                                : NULL;
    case TS_OP_MUL_MAT_ID:
        return !readable_rows(a) || a->ne_max[3] != 1 ? "weight type"
               : n->src[1]->type != TS_TYPE_F32       ? "activation type"
               : a->ne_max[2] > 65535                 ? "expert count (at most 65535)"
                                                      : NULL;
    case TS_OP_CPY:
    case TS_OP_CAST:
    case TS_OP_CONT:
        return copy_supported(n) ? NULL : "conversion";
    case TS_OP_KV_STORE:
        return kv_type_ok(a->type, n->src[1]->ne_max[0]) && is_float(n->src[1]->type)
                   ? NULL
                   : "cache type";
    case TS_OP_ATTENTION:
        return a->ne_max[0] > CU_ATTN_MAX_HD ? "head dimension"
               : !kv_type_ok(n->src[1]->type, a->ne_max[0]) ||
                       !kv_type_ok(n->src[2]->type, a->ne_max[0])
                   ? "cache type"
               : a->ne_max[1] > 65535 ? "head count"
                                      : NULL;
    case TS_OP_ATTN_MASK:
        return is_float(n->type) ? NULL : "output type";
    case TS_OP_ARGMAX:
        return is_float(a->type) ? NULL : "source type";
    case TS_OP_TOPK:
        return !is_float(a->type)    ? "source type"
               : a->ne_max[0] > 4096 ? "row length (at most 4096)"
                                     : NULL;
    case TS_OP_GATHER:
        return is_float(a->type) && is_float(n->type) ? NULL : "source type";
    default:
        return all_float(n) ? NULL : "type";
    }
}

/* The source whose type the reason is about (the weight of a MUL_MAT, the cache of
 * KV_STORE/ATTENTION, else the first source). */
static const ts_tensor *subject(const ts_tensor *n) {
    if (n->op == TS_OP_ATTENTION && n->src[1] != NULL) {
        return n->src[1];
    }
    return n->src[0] != NULL ? n->src[0] : n;
}

static bool op_has_kernel(ts_op op) {
    return op > TS_OP_NONE && op < TS_OP_COUNT && !ts_op_is_collective(op);
}

bool ts_cuda_supports_node(const ts_tensor *node) {
    return ts_op_is_view(node->op) || (op_has_kernel(node->op) && special_reason(node) == NULL);
}

const char *ts_cuda_unsupported_reason(const ts_tensor *n, char *buf, size_t size) {
    buf[0] = '\0';
    if (ts_op_is_view(n->op)) {
        return buf;
    }
    if (!op_has_kernel(n->op)) {
        snprintf(buf, size,
                 "cuda: node '%s': op %s has no CUDA kernel (tensor parallelism on GPUs is not "
                 "wired to this backend yet)",
                 n->name, ts_op_name(n->op));
        return buf;
    }
    const char *why = special_reason(n);
    if (why != NULL) {
        const ts_tensor *s = subject(n);
        const char *tn = ts_type_name((uint32_t)s->type);
        snprintf(buf, size,
                 "cuda: node '%s' (%s): no CUDA kernel for this %s: tensor '%s' is %s, output "
                 "%s",
                 n->name, ts_op_name(n->op), why, s->name, tn != NULL ? tn : "?",
                 ts_type_name((uint32_t)n->type) ? ts_type_name((uint32_t)n->type) : "?");
    }
    return buf;
}

int64_t ts_cuda_attn_splits(int64_t cap) {
    return cap <= 0 ? 0 : (cap + CU_ATTN_SPLIT - 1) / CU_ATTN_SPLIT;
}

size_t ts_cuda_scratch_bytes(const ts_tensor *n, int cublas_min_cols) {
    if (n->op == TS_OP_ATTENTION) {
        const ts_tensor *q = n->src[0], *k = n->src[1], *tab = n->src[3];
        int64_t splits = ts_cuda_attn_splits(tab->ne_max[0] * k->ne_max[2]);
        return (size_t)(q->ne_max[2] * q->ne_max[1] * splits * (q->ne_max[0] + 2)) * sizeof(float);
    }
    if (n->op == TS_OP_MUL_MAT_ID) {
        int64_t n_exp = n->src[0]->ne_max[2];
        int64_t pairs = n->src[2]->ne_max[0] * n->src[2]->ne_max[1];
        return (size_t)(n_exp + n_exp * pairs) * sizeof(int32_t);
    }
    if (n->op == TS_OP_MUL_MAT && cublas_min_cols > 0 && n->ne_max[1] >= cublas_min_cols &&
        n->ne_max[2] * n->ne_max[3] == 1) {
        const ts_tensor *w = n->src[0];
        return (size_t)(w->ne_max[0] * (w->ne_max[1] + n->ne_max[1])) * 2;
    }
    return 0;
}

static double gib(size_t b) {
    return (double)b / (1024.0 * 1024.0 * 1024.0);
}

ts_status ts_cuda_check_fit(size_t need, size_t free_bytes, size_t total_bytes, const char *what,
                            int device, const char *device_name, ts_error *err) {
    if (need <= free_bytes) {
        return TS_OK;
    }
    return ts_error_set(err, TS_ERR_NOMEM,
                        "cuda: device %d (%s): %s need %.2f GiB (%zu bytes) but only %.2f GiB "
                        "(%zu bytes) of its %.2f GiB are free",
                        device, device_name != NULL ? device_name : "?", what, gib(need), need,
                        gib(free_bytes), free_bytes, gib(total_bytes));
}
