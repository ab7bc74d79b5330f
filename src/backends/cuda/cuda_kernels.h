/*
 * cuda_kernels.h — the boundary between the CUDA backend's C side (cuda_backend.c: buffers,
 * the vtable, dispatch) and its kernels (the .cu files). Plain C, read by both compilers, so
 * the kernels never see IR headers and the C side never sees CUDA C++.
 *
 * A node reaches a kernel as a cu_node: the output and sources as cu_tensor descriptors
 * (device address of element 0 after views are resolved, type id, extents, byte strides)
 * plus the op's integer and float parameters copied from the IR node. Type ids are ts_type's
 * (cuda_backend.c checks the values agree at compile time).
 *
 * Launchers enqueue work on the context's stream and return a cudaError_t as int (0 = ok);
 * they never synchronize. A kernel that finds bad data (an index out of range) records the
 * first such fault in the device error record (cu_fault) and skips the element; the C side
 * reads the record after the graph and reports it with the node's name.
 *
 * Batch invariance: every reduction has a fixed order that depends only on the element it
 * computes (its row length, its keys), never on how many rows or tokens share the launch:
 * MUL_MAT gives each output one warp whose lanes walk 32-element groups in a fixed stride
 * and meet in a fixed shuffle tree, whatever the number of activation columns; ATTENTION
 * splits keys into chunks of CU_ATTN_SPLIT keys and combines the chunks in order. No atomics
 * take part in any sum.
 */
#ifndef TS_BACKENDS_CUDA_CUDA_KERNELS_H
#define TS_BACKENDS_CUDA_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Type ids (ts_type's values). */
enum {
    CU_F32 = 0,
    CU_F16 = 1,
    CU_Q4_0 = 2,
    CU_Q4_1 = 3,
    CU_Q5_0 = 6,
    CU_Q5_1 = 7,
    CU_Q8_0 = 8,
    CU_Q2_K = 10,
    CU_Q3_K = 11,
    CU_Q4_K = 12,
    CU_Q5_K = 13,
    CU_Q6_K = 14,
    CU_IQ4_NL = 20,
    CU_I32 = 26,
    CU_BF16 = 30,
    CU_MXFP4 = 39,
};

/* The op of a node, as the kernels name them (cuda_backend.c maps ts_op onto these). */
typedef enum cu_op {
    CU_OP_GET_ROWS,
    CU_OP_MUL_MAT,
    CU_OP_ADD,
    CU_OP_MUL,
    CU_OP_SCALE,
    CU_OP_RMS_NORM,
    CU_OP_NORM,
    CU_OP_ROPE,
    CU_OP_SOFTMAX,
    CU_OP_SILU,
    CU_OP_GELU,
    CU_OP_SWIGLU,
    CU_OP_GEGLU,
    CU_OP_SWIGLU_OAI,
    CU_OP_COPY, /* CPY, CAST, CONT: dst gets src's elements in row-major order */
    CU_OP_CONCAT,
    CU_OP_ARGMAX,
    CU_OP_KV_STORE,
    CU_OP_ATTENTION,
    CU_OP_ATTN_MASK,
    CU_OP_SIGMOID,
    CU_OP_LOG,
    CU_OP_TOPK,
    CU_OP_GATHER,
    CU_OP_MUL_MAT_ID,
} cu_op;

typedef struct cu_tensor {
    char *data;    /* device address of element (0, 0, 0, 0); NULL for an absent source */
    int32_t type;  /* ts_type id */
    int64_t ne[4]; /* extents of this run */
    int64_t nb[4]; /* byte strides (nb[0] is the block size in bytes for block types) */
} cu_tensor;

#define CU_MAX_SRC 8

typedef struct cu_node {
    cu_op op;
    int32_t index; /* position in the graph's node list, for fault reports */
    cu_tensor dst;
    cu_tensor src[CU_MAX_SRC];
    int32_t ip[8];
    float fp[8];
} cu_node;

/* Faults a kernel can find in the data of a run (the first one wins). */
enum {
    CU_FAULT_NONE = 0,
    CU_FAULT_ROW_INDEX = 1, /* GET_ROWS: a[0] = index, a[1] = position, a[2] = rows */
    CU_FAULT_KV_SLOT = 2,   /* KV_STORE: a[0] = slot, a[1] = token, a[2] = slots */
    CU_FAULT_SEQ = 3,       /* ATTENTION/ATTN_MASK: a[0] = sequence, a[1] = token */
    CU_FAULT_SEQ_LEN = 4,   /* a[0] = length, a[1] = sequence, a[2] = capacity */
    CU_FAULT_BLOCK = 5,     /* ATTENTION: a[0] = block, a[1] = sequence, a[2] = table row */
    CU_FAULT_GATHER = 6,    /* a[0] = index, a[1] = position, a[2] = row length */
    CU_FAULT_EXPERT = 7,    /* MUL_MAT_ID: a[0] = expert id, a[1] = slot, a[2] = token */
};

/* The device error record: written by the first kernel that finds a fault. */
typedef struct cu_fault {
    int32_t code;
    int32_t node;
    int64_t a[3];
} cu_fault;

/* What the kernels may use besides their tensors; owned by the backend context. */
typedef struct cu_env {
    void *stream;    /* cudaStream_t */
    cu_fault *fault; /* device address of the error record */
    void *scratch;   /* device scratch, scratch_size bytes (see cu_scratch_bytes) */
    size_t scratch_size;
    void *cublas;        /* cublasHandle_t bound to stream, or NULL */
    int cublas_min_cols; /* MUL_MAT with at least this many columns uses cuBLAS (0: never) */
} cu_env;

/* Keys per chunk of ATTENTION's split (fixed: see the batch-invariance note). */
#define CU_ATTN_SPLIT 512
/* Largest head dimension ATTENTION takes (16 accumulators per lane). */
#define CU_ATTN_MAX_HD 512
/* Activation columns one MUL_MAT warp handles at once. */
#define CU_MM_COLS 8

/* Launchers, by op family (cuda_ops.cu, cuda_matmul.cu, cuda_attn.cu). */
int cu_launch_elementwise(const cu_env *env, const cu_node *n); /* unary, binary, glu */
int cu_launch_rows(const cu_env *env, const cu_node *n);        /* norms, softmax, argmax, topk */
int cu_launch_rope(const cu_env *env, const cu_node *n);
int cu_launch_copy(const cu_env *env, const cu_node *n); /* copy, concat, get_rows, gather */
int cu_launch_mul_mat(const cu_env *env, const cu_node *n);
int cu_launch_mul_mat_id(const cu_env *env, const cu_node *n);
int cu_launch_kv_store(const cu_env *env, const cu_node *n);
int cu_launch_attention(const cu_env *env, const cu_node *n);
int cu_launch_attn_mask(const cu_env *env, const cu_node *n);

/* The name of a cudaError_t (cudaGetErrorString). */
const char *cu_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* TS_BACKENDS_CUDA_CUDA_KERNELS_H */
