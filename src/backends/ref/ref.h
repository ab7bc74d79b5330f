/*
 * ref.h — the reference backend: plain scalar C, one obvious loop nest per op, f64
 * accumulation for reductions, quantized weights dequantized row by row through the scalar
 * to_float of src/quant. It is the executable specification of ir.h and the oracle every
 * other backend is tested against; it is not meant to be fast.
 *
 * Buffers are host memory. Single-threaded; one graph at a time per backend.
 */
#ifndef TS_BACKENDS_REF_REF_H
#define TS_BACKENDS_REF_REF_H

#include "ir/backend.h"

/* Creates a reference backend; free it with ts_backend_destroy. */
ts_status ts_ref_backend_create(ts_backend **out, ts_error *err);

#endif /* TS_BACKENDS_REF_REF_H */
