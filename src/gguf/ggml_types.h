/*
 * ggml_types.h — the tensor element types a GGUF file can hold, and their block layouts.
 *
 * The table (ts_type and the ts_type_* functions, implemented in ggml_types.c) is part of the
 * public API and declared in include/tessera.h; this header stays so that the layers that need
 * only the type table (quant, ir, parallel) name the layer they take it from. Type ids are the
 * numbers GGUF files store; src/quant/ adds the arithmetic on the blocks (dequantize, quantize,
 * dot products). Constant data only; thread-safe.
 */
#ifndef TS_GGUF_GGML_TYPES_H
#define TS_GGUF_GGML_TYPES_H

#include "tessera.h"

#endif /* TS_GGUF_GGML_TYPES_H */
