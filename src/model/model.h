/*
 * model.h — a loaded model: hyperparameters plus the weights, used where they lie.
 *
 * ts_model_open maps the GGUF file, reads the hyperparameters through the architecture
 * registry (arch.h, hparams.h), and resolves every tensor pattern of the architecture to a
 * tensor of the file, checking presence (required or probed), shape (expected vs found) and
 * type (one the quant layer can compute with). Nothing is copied, transposed or dequantized:
 * a weight is a pointer into the mapping, and token_embd stays [n_embd, n_vocab] to be read
 * with GET_ROWS. Load time is the time the page cache needs.
 *
 * Ownership: the model owns the mapping; every pointer it returns lives until ts_model_close.
 * A model is immutable after open and may be shared by several forward contexts and threads.
 */
#ifndef TS_MODEL_MODEL_H
#define TS_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "tessera.h"

typedef struct ts_model {
    ts_gguf *gguf; /* owned */
    ts_hparams hp;
    /* Tensors by role: global roles (< TS_ROLE_FIRST_LAYER) in slot 0 of `global`, per-layer
     * roles in layers[il * TS_ROLE_COUNT + role]; NULL where the file has none. */
    const ts_gguf_tensor *global[TS_ROLE_COUNT];
    const ts_gguf_tensor **layers; /* [n_layer * TS_ROLE_COUNT], owned */
    bool tied_output;              /* no output.weight: logits use token_embd */
    uint64_t n_params;             /* elements of all resolved tensors */
    size_t weight_bytes;           /* bytes of all resolved tensors */
    double load_ms;                /* wall time of ts_model_open */
    /* The file's tensors that no pattern of the architecture resolved, in file order: the
     * forward pass does not use them (ts_llm reports them as a warning). Owned array of
     * pointers into the file's tensor table. */
    const ts_gguf_tensor **unused;
    int64_t n_unused;
    size_t active_bytes; /* bytes one decoding token reads: weight_bytes with n_expert_used of
                            each layer's n_expert experts (weight_bytes for a dense model) */
} ts_model;

/* Opens and validates a model file. Errors name the file and what was wrong: unknown
 * architecture (with the supported list), missing tensor (its name), wrong shape (expected vs
 * found), unsupported tensor type. */
ts_status ts_model_open(const char *path, ts_model **out, ts_error *err);
/* Same for a GGUF already opened (takes ownership of g, also on failure). */
ts_status ts_model_from_gguf(ts_gguf *g, ts_model **out, ts_error *err);
void ts_model_close(ts_model *m);

/* Tensor of a role (layer ignored for global roles); NULL when absent. */
const ts_gguf_tensor *ts_model_tensor(const ts_model *m, ts_role role, int64_t layer);

/* Calls fn for every resolved tensor with its stable GGUF name, in registry order. */
void ts_model_each_param(const ts_model *m,
                         void (*fn)(const char *name, const ts_gguf_tensor *t, void *user),
                         void *user);

#endif /* TS_MODEL_MODEL_H */
