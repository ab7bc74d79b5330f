/* tensor.c — tensor descriptor helpers: sizes, layouts, names. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "ir/ir.h"

static const char *const k_op_names[TS_OP_COUNT] = {
    [TS_OP_NONE] = "NONE",
    [TS_OP_GET_ROWS] = "GET_ROWS",
    [TS_OP_MUL_MAT] = "MUL_MAT",
    [TS_OP_ADD] = "ADD",
    [TS_OP_MUL] = "MUL",
    [TS_OP_SCALE] = "SCALE",
    [TS_OP_RMS_NORM] = "RMS_NORM",
    [TS_OP_NORM] = "NORM",
    [TS_OP_ROPE] = "ROPE",
    [TS_OP_SOFTMAX] = "SOFTMAX",
    [TS_OP_SILU] = "SILU",
    [TS_OP_GELU] = "GELU",
    [TS_OP_SWIGLU] = "SWIGLU",
    [TS_OP_SWIGLU_OAI] = "SWIGLU_OAI",
    [TS_OP_GEGLU] = "GEGLU",
    [TS_OP_CPY] = "CPY",
    [TS_OP_CAST] = "CAST",
    [TS_OP_CONT] = "CONT",
    [TS_OP_VIEW] = "VIEW",
    [TS_OP_RESHAPE] = "RESHAPE",
    [TS_OP_PERMUTE] = "PERMUTE",
    [TS_OP_TRANSPOSE] = "TRANSPOSE",
    [TS_OP_CONCAT] = "CONCAT",
    [TS_OP_ARGMAX] = "ARGMAX",
    [TS_OP_KV_STORE] = "KV_STORE",
    [TS_OP_ATTENTION] = "ATTENTION",
    [TS_OP_ATTN_MASK] = "ATTN_MASK",
    [TS_OP_ALL_REDUCE_SUM] = "ALL_REDUCE_SUM",
    [TS_OP_ALL_GATHER] = "ALL_GATHER",
    [TS_OP_REDUCE_SCATTER_SUM] = "REDUCE_SCATTER_SUM",
    [TS_OP_SIGMOID] = "SIGMOID",
    [TS_OP_TOPK] = "TOPK",
    [TS_OP_GATHER] = "GATHER",
    [TS_OP_MUL_MAT_ID] = "MUL_MAT_ID",
    [TS_OP_LOG] = "LOG",
};

const char *ts_op_name(ts_op op) {
    if ((int)op < 0 || op >= TS_OP_COUNT) {
        return "?";
    }
    return k_op_names[op];
}

bool ts_op_is_view(ts_op op) {
    return op == TS_OP_VIEW || op == TS_OP_RESHAPE || op == TS_OP_PERMUTE ||
           op == TS_OP_TRANSPOSE;
}

size_t ts_type_unit_bytes(ts_type type) {
    return ts_type_block_bytes((uint32_t)type);
}

int64_t ts_tensor_nelements(const ts_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t ts_tensor_nrows(const ts_tensor *t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t ts_tensor_nbytes_max(const ts_tensor *t) {
    size_t row = (size_t)(t->ne_max[0] / (int64_t)ts_type_block_size(t->type)) *
                 ts_type_block_bytes(t->type);
    return row * (size_t)(t->ne_max[1] * t->ne_max[2] * t->ne_max[3]);
}

size_t ts_tensor_span(const ts_tensor *t) {
    int64_t bs = (int64_t)ts_type_block_size(t->type);
    for (int d = 0; d < TS_MAX_DIMS; d++) {
        if (t->ne_max[d] == 0) {
            return 0;
        }
    }
    size_t span = (size_t)(t->ne_max[0] / bs - 1) * t->nb[0] + ts_type_block_bytes(t->type);
    for (int d = 1; d < TS_MAX_DIMS; d++) {
        span += (size_t)(t->ne_max[d] - 1) * t->nb[d];
    }
    return span;
}

bool ts_tensor_rows_contiguous(const ts_tensor *t) {
    return t->nb[0] == ts_type_block_bytes(t->type);
}

bool ts_tensor_is_contiguous(const ts_tensor *t) {
    if (!ts_tensor_rows_contiguous(t)) {
        return false;
    }
    size_t expect = t->nb[0] * (size_t)(t->ne_max[0] / (int64_t)ts_type_block_size(t->type));
    for (int d = 1; d < TS_MAX_DIMS; d++) {
        if (t->ne_max[d] != 1 && t->nb[d] != expect) {
            return false;
        }
        expect *= (size_t)t->ne_max[d];
    }
    return true;
}

const char *ts_tensor_shape_str(const ts_tensor *t, char *buf, size_t size) {
    int n = t->n_dims < 1 ? 1 : t->n_dims;
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < n && used < size; d++) {
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)t->ne[d]);
    }
    if (used < size) {
        snprintf(buf + used, size - used, "]");
    }
    return buf;
}

void ts_tensor_set_name(ts_tensor *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

ts_tensor *ts_tensor_owner(ts_tensor *t) {
    while (t->view_src != NULL) {
        t = t->view_src;
    }
    return t;
}
