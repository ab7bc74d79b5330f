/*
 * cuda_backend.c — the CUDA backend's vtable (cuda.h): device buffers, uploads through pinned
 * staging, the node loop that hands each node to its kernel launcher (cuda_kernels.h), and
 * the reports of what went wrong (a CUDA error, a fault a kernel found in the data, an
 * unsupported node), each naming the node.
 *
 * Without TS_HAVE_CUDA (a build without -DTS_CUDA=ON) only the functions that say so are
 * compiled: ts_cuda_backend_create fails with "built without CUDA", and no device is seen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kernels.h"
#include "util/error.h"

ts_cuda_params ts_cuda_params_default(void) {
    ts_cuda_params p;
    memset(&p, 0, sizeof p);
    p.device = 0;
    p.staging_bytes = (size_t)64 << 20;
    const char *env = getenv("TS_CUDA_CUBLAS_MIN_COLS");
    if (env != NULL) {
        long v = strtol(env, NULL, 10);
        p.cublas_min_cols = v > 0 && v < 1000000 ? (int)v : 0;
    }
    return p;
}

#ifndef TS_HAVE_CUDA

bool ts_cuda_built(void) {
    return false;
}

int ts_cuda_device_count(void) {
    return 0;
}

ts_status ts_cuda_backend_create(const ts_cuda_params *params, ts_backend **out, ts_error *err) {
    (void)params;
    if (out != NULL) {
        *out = NULL;
    }
    return ts_error_set(err, TS_ERR_UNSUPPORTED,
                        "cuda: this tessera was built without CUDA (configure with -DTS_CUDA=ON "
                        "on a machine with the CUDA toolkit)");
}

#else /* TS_HAVE_CUDA */

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

/* The kernels' type ids are ts_type's. */
#define SAME_ID(cu, ts) ((int)(cu) == (int)(ts))
_Static_assert(SAME_ID(CU_F32, TS_TYPE_F32) && SAME_ID(CU_F16, TS_TYPE_F16) &&
                   SAME_ID(CU_BF16, TS_TYPE_BF16) && SAME_ID(CU_Q4_0, TS_TYPE_Q4_0) &&
                   SAME_ID(CU_Q4_1, TS_TYPE_Q4_1) && SAME_ID(CU_Q5_0, TS_TYPE_Q5_0) &&
                   SAME_ID(CU_Q5_1, TS_TYPE_Q5_1) && SAME_ID(CU_Q8_0, TS_TYPE_Q8_0) &&
                   SAME_ID(CU_Q2_K, TS_TYPE_Q2_K) && SAME_ID(CU_Q3_K, TS_TYPE_Q3_K) &&
                   SAME_ID(CU_Q4_K, TS_TYPE_Q4_K) && SAME_ID(CU_Q5_K, TS_TYPE_Q5_K) &&
                   SAME_ID(CU_Q6_K, TS_TYPE_Q6_K) && SAME_ID(CU_IQ4_NL, TS_TYPE_IQ4_NL) &&
                   SAME_ID(CU_MXFP4, TS_TYPE_MXFP4) && SAME_ID(CU_I32, TS_TYPE_I32),
               "cuda_kernels.h type ids match ts_type");
_Static_assert(CU_MAX_SRC == TS_MAX_SRC, "cu_node holds every source");

typedef struct cuda_ctx {
    int device;
    char device_name[256];
    cudaStream_t stream;
    cublasHandle_t cublas; /* NULL unless cublas_min_cols > 0 */
    int cublas_min_cols;
    cu_fault *fault; /* device error record */
    void *scratch;   /* device scratch, grown to the largest node's need */
    size_t scratch_size;
    void *staging; /* pinned host memory for uploads (NULL: plain copies) */
    size_t staging_size;
} cuda_ctx;

static ts_status cuda_fail(ts_error *err, cudaError_t ce, const char *what) {
    return ts_error_set(err, ce == cudaErrorMemoryAllocation ? TS_ERR_NOMEM : TS_ERR_IO,
                        "cuda: %s: %s (%s)", what, cudaGetErrorString(ce), cudaGetErrorName(ce));
}

static const char *cuda_name(void *vctx) {
    (void)vctx;
    return "cuda";
}

bool ts_cuda_built(void) {
    return true;
}

int ts_cuda_device_count(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static ts_status use_device(cuda_ctx *c, ts_error *err) {
    cudaError_t ce = cudaSetDevice(c->device);
    return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "select the device");
}

/* Allocates `size` device bytes after checking they fit; what names them for the error. */
static ts_status device_alloc(cuda_ctx *c, size_t size, const char *what, ts_buffer **out,
                              ts_error *err) {
    size_t free_b = 0, total_b = 0;
    ts_status st = use_device(c, err);
    if (st != TS_OK) {
        return st;
    }
    cudaError_t ce = cudaMemGetInfo(&free_b, &total_b);
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "query free memory");
    }
    if ((st = ts_cuda_check_fit(size, free_b, total_b, what, c->device, c->device_name, err)) !=
        TS_OK) {
        return st;
    }
    ts_buffer *buf = calloc(1, sizeof *buf);
    if (buf == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "cuda: out of host memory for a buffer");
    }
    void *dev = NULL;
    ce = cudaMalloc(&dev, size > 0 ? size : 256);
    if (ce != cudaSuccess) {
        /* Free memory is fragmented or was taken meanwhile: say what is free now. */
        free(buf);
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        return ts_error_set(err, TS_ERR_NOMEM,
                            "cuda: device %d (%s): cannot allocate %zu bytes for %s (%zu bytes "
                            "free of %zu): %s",
                            c->device, c->device_name, size, what, free_b, total_b,
                            cudaGetErrorString(ce));
    }
    buf->priv = dev;
    buf->size = size;
    buf->owned = true;
    buf->backend_name = "cuda";
    *out = buf;
    return TS_OK;
}

static ts_status cuda_buffer_alloc(void *vctx, size_t size, ts_buffer **out, ts_error *err) {
    return device_alloc(vctx, size, "a buffer (KV cache or activations)", out, err);
}

/* Copies host bytes to device memory through the pinned staging buffer: its two halves take
 * turns, so filling one overlaps the copy of the other. */
static ts_status upload(cuda_ctx *c, char *dev, const char *src, size_t size, ts_error *err) {
    if (c->staging == NULL) {
        cudaError_t ce = cudaMemcpy(dev, src, size, cudaMemcpyHostToDevice);
        return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "upload");
    }
    size_t half = c->staging_size / 2;
    cudaEvent_t done[2];
    cudaError_t ce = cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming);
    if (ce == cudaSuccess) {
        ce = cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming);
        if (ce != cudaSuccess) {
            cudaEventDestroy(done[0]);
        }
    }
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "upload: create events");
    }
    bool used[2] = {false, false};
    for (size_t off = 0, k = 0; off < size && ce == cudaSuccess; off += half, k ^= 1) {
        size_t n = size - off < half ? size - off : half;
        char *stage = (char *)c->staging + k * half;
        if (used[k]) {
            ce = cudaEventSynchronize(done[k]);
        }
        if (ce == cudaSuccess) {
            memcpy(stage, src + off, n);
            ce = cudaMemcpyAsync(dev + off, stage, n, cudaMemcpyHostToDevice, c->stream);
        }
        if (ce == cudaSuccess) {
            ce = cudaEventRecord(done[k], c->stream);
            used[k] = true;
        }
    }
    if (ce == cudaSuccess) {
        ce = cudaStreamSynchronize(c->stream);
    }
    cudaEventDestroy(done[0]);
    cudaEventDestroy(done[1]);
    return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "upload");
}

/* The wrapped bytes are a model's (the caller promises they never change): they are copied to
 * the device once and the buffer is device memory from then on. */
static ts_status cuda_buffer_wrap(void *vctx, void *host, size_t size, ts_buffer **out,
                                  ts_error *err) {
    cuda_ctx *c = vctx;
    ts_status st = device_alloc(c, size, "the model's weights", out, err);
    if (st == TS_OK && size > 0) {
        st = upload(c, (*out)->priv, host, size, err);
        if (st != TS_OK) {
            cudaFree((*out)->priv);
            free(*out);
            *out = NULL;
        }
    }
    return st;
}

static void cuda_buffer_free(void *vctx, ts_buffer *buf) {
    cuda_ctx *c = vctx;
    if (buf == NULL) {
        return;
    }
    cudaSetDevice(c->device);
    cudaFree(buf->priv);
    free(buf);
}

static ts_status cuda_buffer_set(void *vctx, ts_buffer *buf, size_t offset, const void *src,
                                 size_t size, ts_error *err) {
    cuda_ctx *c = vctx;
    ts_status st = use_device(c, err);
    if (st != TS_OK || size == 0) {
        return st;
    }
    cudaError_t ce =
        cudaMemcpyAsync((char *)buf->priv + offset, src, size, cudaMemcpyHostToDevice, c->stream);
    if (ce == cudaSuccess) {
        ce = cudaStreamSynchronize(c->stream);
    }
    return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "copy to the device");
}

static ts_status cuda_buffer_get(void *vctx, ts_buffer *buf, size_t offset, void *dst, size_t size,
                                 ts_error *err) {
    cuda_ctx *c = vctx;
    ts_status st = use_device(c, err);
    if (st != TS_OK || size == 0) {
        return st;
    }
    cudaError_t ce = cudaMemcpyAsync(dst, (const char *)buf->priv + offset, size,
                                     cudaMemcpyDeviceToHost, c->stream);
    if (ce == cudaSuccess) {
        ce = cudaStreamSynchronize(c->stream);
    }
    return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "copy from the device");
}

static bool cuda_supports_op(void *vctx, const ts_tensor *node) {
    (void)vctx;
    return ts_cuda_supports_node(node);
}

/* ---- graph execution ---- */

static cu_op op_of(ts_op op) {
    switch (op) {
    case TS_OP_GET_ROWS:
        return CU_OP_GET_ROWS;
    case TS_OP_MUL_MAT:
        return CU_OP_MUL_MAT;
    case TS_OP_ADD:
        return CU_OP_ADD;
    case TS_OP_MUL:
        return CU_OP_MUL;
    case TS_OP_SCALE:
        return CU_OP_SCALE;
    case TS_OP_RMS_NORM:
        return CU_OP_RMS_NORM;
    case TS_OP_NORM:
        return CU_OP_NORM;
    case TS_OP_ROPE:
        return CU_OP_ROPE;
    case TS_OP_SOFTMAX:
        return CU_OP_SOFTMAX;
    case TS_OP_SILU:
        return CU_OP_SILU;
    case TS_OP_GELU:
        return CU_OP_GELU;
    case TS_OP_SWIGLU:
        return CU_OP_SWIGLU;
    case TS_OP_GEGLU:
        return CU_OP_GEGLU;
    case TS_OP_SWIGLU_OAI:
        return CU_OP_SWIGLU_OAI;
    case TS_OP_CONCAT:
        return CU_OP_CONCAT;
    case TS_OP_ARGMAX:
        return CU_OP_ARGMAX;
    case TS_OP_KV_STORE:
        return CU_OP_KV_STORE;
    case TS_OP_ATTENTION:
        return CU_OP_ATTENTION;
    case TS_OP_ATTN_MASK:
        return CU_OP_ATTN_MASK;
    case TS_OP_SIGMOID:
        return CU_OP_SIGMOID;
    case TS_OP_LOG:
        return CU_OP_LOG;
    case TS_OP_TOPK:
        return CU_OP_TOPK;
    case TS_OP_GATHER:
        return CU_OP_GATHER;
    case TS_OP_MUL_MAT_ID:
        return CU_OP_MUL_MAT_ID;
    default:
        return CU_OP_COPY; /* CPY, CAST, CONT */
    }
}

/* A tensor's descriptor; false when its storage is not this backend's device memory. */
static bool describe(const ts_tensor *t, cu_tensor *d) {
    memset(d, 0, sizeof *d);
    if (t == NULL) {
        return true;
    }
    if (t->res_buffer == NULL || t->res_buffer->backend_name == NULL ||
        strcmp(t->res_buffer->backend_name, "cuda") != 0) {
        return false;
    }
    d->data = (char *)t->res_buffer->priv + t->res_offset;
    d->type = (int32_t)t->type;
    for (int i = 0; i < 4; i++) {
        d->ne[i] = t->ne[i];
        d->nb[i] = (int64_t)t->nb[i];
    }
    return true;
}

static ts_status make_node(const ts_tensor *t, int index, cu_node *n, ts_error *err) {
    memset(n, 0, sizeof *n);
    n->op = op_of(t->op);
    n->index = index;
    memcpy(n->ip, t->ip, sizeof n->ip);
    memcpy(n->fp, t->fp, sizeof n->fp);
    const ts_tensor *bad = describe(t, &n->dst) ? NULL : t;
    for (int k = 0; k < TS_MAX_SRC && bad == NULL; k++) {
        bad = describe(t->src[k], &n->src[k]) ? NULL : t->src[k];
    }
    if (bad != NULL) {
        return ts_error_set(err, TS_ERR_STATE,
                            "cuda: node %d '%s': tensor '%s' is not in this backend's device "
                            "memory (buffer of '%s')",
                            index, t->name, bad->name,
                            bad->res_buffer != NULL && bad->res_buffer->backend_name != NULL
                                ? bad->res_buffer->backend_name
                                : "none");
    }
    return TS_OK;
}

static int launch(const cu_env *env, const cu_node *n) {
    switch (n->op) {
    case CU_OP_MUL_MAT:
        return cu_launch_mul_mat(env, n);
    case CU_OP_MUL_MAT_ID:
        return cu_launch_mul_mat_id(env, n);
    case CU_OP_RMS_NORM:
    case CU_OP_NORM:
    case CU_OP_SOFTMAX:
    case CU_OP_ARGMAX:
    case CU_OP_TOPK:
        return cu_launch_rows(env, n);
    case CU_OP_ROPE:
        return cu_launch_rope(env, n);
    case CU_OP_COPY:
    case CU_OP_CONCAT:
    case CU_OP_GET_ROWS:
    case CU_OP_GATHER:
        return cu_launch_copy(env, n);
    case CU_OP_KV_STORE:
        return cu_launch_kv_store(env, n);
    case CU_OP_ATTENTION:
        return cu_launch_attention(env, n);
    case CU_OP_ATTN_MASK:
        return cu_launch_attn_mask(env, n);
    default:
        return cu_launch_elementwise(env, n);
    }
}

/* Grows the scratch to the largest need of g's nodes. */
static ts_status ensure_scratch(cuda_ctx *c, ts_graph *g, ts_error *err) {
    size_t need = 0;
    for (int i = 0; i < ts_graph_n_nodes(g); i++) {
        size_t b = ts_cuda_scratch_bytes(ts_graph_node(g, i), c->cublas_min_cols);
        need = b > need ? b : need;
    }
    if (need <= c->scratch_size) {
        return TS_OK;
    }
    cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_size = 0;
    size_t free_b = 0, total_b = 0;
    cudaError_t ce = cudaMemGetInfo(&free_b, &total_b);
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "query free memory");
    }
    ts_status st = ts_cuda_check_fit(need, free_b, total_b, "the kernels' scratch", c->device,
                                     c->device_name, err);
    if (st != TS_OK) {
        return st;
    }
    if ((ce = cudaMalloc(&c->scratch, need)) != cudaSuccess) {
        return cuda_fail(err, ce, "allocate the kernels' scratch");
    }
    c->scratch_size = need;
    return TS_OK;
}

/* The fault a kernel recorded, as an error naming the node; TS_OK when none. */
static ts_status check_fault(cuda_ctx *c, ts_graph *g, ts_error *err) {
    cu_fault f;
    cudaError_t ce = cudaMemcpy(&f, c->fault, sizeof f, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "read the fault record");
    }
    if (f.code == CU_FAULT_NONE) {
        return TS_OK;
    }
    const ts_tensor *n =
        f.node >= 0 && f.node < ts_graph_n_nodes(g) ? ts_graph_node(g, f.node) : NULL;
    static const char *const what[] = {
        "",
        "row index %lld at position %lld is past the %lld rows",
        "slot %lld of token %lld is past the %lld slots of the cache",
        "sequence %lld of token %lld is outside the %lld sequences",
        "length %lld of sequence %lld is outside 0..%lld",
        "block %lld of sequence %lld (table row %lld) is not a block of the cache",
        "index %lld at position %lld is outside the %lld elements of a row",
        "expert id %lld at slot %lld of token %lld is outside the experts",
    };
    char detail[160];
    int code = f.code >= 1 && f.code <= CU_FAULT_EXPERT ? f.code : 0;
    snprintf(detail, sizeof detail, what[code], (long long)f.a[0], (long long)f.a[1],
             (long long)f.a[2]);
    return ts_error_set(err, TS_ERR_RANGE, "cuda: node %d '%s' (%s): %s", (int)f.node,
                        n != NULL ? n->name : "?", n != NULL ? ts_op_name(n->op) : "?", detail);
}

/* Waits for the stream and reports an asynchronous CUDA error or a data fault. */
static ts_status finish(cuda_ctx *c, ts_graph *g, const char *where, ts_error *err) {
    cudaError_t ce = cudaStreamSynchronize(c->stream);
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, where);
    }
    return check_fault(c, g, err);
}

static ts_status run_node(cuda_ctx *c, const cu_env *env, ts_tensor *t, int i, ts_error *err) {
    cu_node n;
    ts_status st = make_node(t, i, &n, err);
    if (st != TS_OK) {
        return st;
    }
    int rc = launch(env, &n);
    if (rc != 0) {
        (void)c;
        return ts_error_set(err, TS_ERR_IO, "cuda: node %d '%s' (%s): launch failed: %s", i,
                            t->name, ts_op_name(t->op), cu_error_string(rc));
    }
    return TS_OK;
}

static ts_status cuda_graph_compute(void *vctx, ts_graph *g, const ts_eval_cb *cb, ts_error *err) {
    cuda_ctx *c = vctx;
    ts_status st = use_device(c, err);
    if (st == TS_OK) {
        st = ensure_scratch(c, g, err);
    }
    cudaError_t ce =
        st == TS_OK ? cudaMemsetAsync(c->fault, 0, sizeof(cu_fault), c->stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "reset the fault record");
    }
    cu_env env = {c->stream, c->fault, c->scratch, c->scratch_size, c->cublas, c->cublas_min_cols};
    int n = ts_graph_n_nodes(g);
    for (int i = 0; i < n && st == TS_OK; i++) {
        ts_tensor *t = ts_graph_node(g, i);
        if (cb != NULL && cb->before != NULL &&
            ((st = finish(c, g, "before a node", err)) != TS_OK || !cb->before(t, cb->user))) {
            return st != TS_OK ? st
                               : ts_error_set(err, TS_ERR_ABORTED,
                                              "cuda: stopped before node %d '%s'", i, t->name);
        }
        st = run_node(c, &env, t, i, err);
        if (st == TS_OK && cb != NULL && cb->after != NULL) {
            if ((st = finish(c, g, "node", err)) == TS_OK && !cb->after(t, cb->user)) {
                return ts_error_set(err, TS_ERR_ABORTED, "cuda: stopped after node %d '%s'", i,
                                    t->name);
            }
        }
    }
    ts_status done = finish(c, g, "graph", err);
    return st != TS_OK ? st : done;
}

static ts_status cuda_synchronize(void *vctx, ts_error *err) {
    cuda_ctx *c = vctx;
    cudaError_t ce = cudaStreamSynchronize(c->stream);
    return ce == cudaSuccess ? TS_OK : cuda_fail(err, ce, "synchronize");
}

/* Every node must have a kernel: the one that does not is a load-time error naming it, its
 * tensor and type. Then the scratch is sized for the graph. */
static ts_status cuda_graph_prepare(void *vctx, ts_graph *g, ts_error *err) {
    cuda_ctx *c = vctx;
    char why[512];
    for (int i = 0; i < ts_graph_n_nodes(g); i++) {
        if (ts_cuda_unsupported_reason(ts_graph_node(g, i), why, sizeof why)[0] != '\0') {
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s", why);
        }
    }
    ts_status st = use_device(c, err);
    return st == TS_OK ? ensure_scratch(c, g, err) : st;
}

static void cuda_destroy(void *vctx) {
    cuda_ctx *c = vctx;
    if (c == NULL) {
        return;
    }
    cudaSetDevice(c->device);
    if (c->cublas != NULL) {
        cublasDestroy(c->cublas);
    }
    cudaFree(c->scratch);
    cudaFree(c->fault);
    cudaFreeHost(c->staging);
    if (c->stream != NULL) {
        cudaStreamDestroy(c->stream);
    }
    free(c);
}

static const ts_backend_iface k_cuda_iface = {
    .name = cuda_name,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_wrap = cuda_buffer_wrap,
    .buffer_free = cuda_buffer_free,
    .buffer_set = cuda_buffer_set,
    .buffer_get = cuda_buffer_get,
    .supports_op = cuda_supports_op,
    .graph_compute = cuda_graph_compute,
    .synchronize = cuda_synchronize,
    .graph_prepare = cuda_graph_prepare,
    .destroy = cuda_destroy,
};

/* Stream, fault record, staging and (when asked for) cuBLAS on the chosen device. */
static ts_status open_device(cuda_ctx *c, const ts_cuda_params *p, ts_error *err) {
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess) {
        return cuda_fail(err, ce, "no usable CUDA device (driver or device missing)");
    }
    if (p->device < 0 || p->device >= count) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "cuda: device %d does not exist (%d device%s)",
                            p->device, count, count == 1 ? "" : "s");
    }
    struct cudaDeviceProp prop;
    if ((ce = cudaSetDevice(p->device)) != cudaSuccess ||
        (ce = cudaGetDeviceProperties(&prop, p->device)) != cudaSuccess) {
        return cuda_fail(err, ce, "open the device");
    }
    snprintf(c->device_name, sizeof c->device_name, "%s", prop.name);
    if ((ce = cudaStreamCreate(&c->stream)) != cudaSuccess ||
        (ce = cudaMalloc((void **)&c->fault, sizeof(cu_fault))) != cudaSuccess ||
        (ce = cudaMemset(c->fault, 0, sizeof(cu_fault))) != cudaSuccess) {
        return cuda_fail(err, ce, "set up the stream");
    }
    if (p->staging_bytes >= 2 && cudaMallocHost(&c->staging, p->staging_bytes) == cudaSuccess) {
        c->staging_size = p->staging_bytes;
    } else {
        c->staging = NULL; /* uploads fall back to plain copies */
        cudaGetLastError();
    }
    if (p->cublas_min_cols > 0) {
        if (cublasCreate(&c->cublas) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(c->cublas, c->stream) != CUBLAS_STATUS_SUCCESS) {
            return ts_error_set(err, TS_ERR_IO, "cuda: cannot create the cuBLAS handle");
        }
    }
    return TS_OK;
}

ts_status ts_cuda_backend_create(const ts_cuda_params *params, ts_backend **out, ts_error *err) {
    if (out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "cuda: create: out is NULL");
    }
    *out = NULL;
    ts_cuda_params p = params != NULL ? *params : ts_cuda_params_default();
    cuda_ctx *c = calloc(1, sizeof *c);
    ts_backend *b = calloc(1, sizeof *b);
    if (c == NULL || b == NULL) {
        free(c);
        free(b);
        return ts_error_set(err, TS_ERR_NOMEM, "cuda: create: out of memory");
    }
    c->device = p.device;
    c->cublas_min_cols = p.cublas_min_cols;
    ts_status st = open_device(c, &p, err);
    if (st != TS_OK) {
        cuda_destroy(c);
        free(b);
        return st;
    }
    b->iface = &k_cuda_iface;
    b->ctx = c;
    *out = b;
    return TS_OK;
}

#endif /* TS_HAVE_CUDA */
