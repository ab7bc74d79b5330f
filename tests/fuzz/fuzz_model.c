/*
 * fuzz_model.c — libFuzzer entry for the model loader on hostile GGUF files: hyperparameters
 * (huge, zero or negative sizes, head counts that do not divide, layer and expert counts),
 * tensor shapes that disagree with them, missing or misnamed tensors, odd metadata types.
 *
 * Each input is a GGUF file. When the reader accepts it, ts_model_from_gguf must either fail
 * with a message (and no model) or give a model whose every resolved tensor has the shape its
 * role implies and lies inside the file; the per-layer predicates are asked of every layer.
 * A broken invariant traps; a crash, leak, huge allocation or hang is reported by libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static volatile uint8_t g_sink;

static void touch(const ts_gguf_tensor *t) {
    if (t != NULL && t->nbytes > 0) {
        const uint8_t *b = t->data;
        g_sink ^= b[0] ^ b[t->nbytes - 1];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_gguf *g = NULL;
    ts_error err = {0};
    if (ts_gguf_open_memory(data, size, &g, &err) != TS_OK) {
        return 0;
    }
    ts_model *m = NULL;
    /* ts_model_from_gguf owns g from here on, loaded or not. */
    if (ts_model_from_gguf(g, &m, &err) != TS_OK) {
        CHECK(m == NULL && err.msg[0] != '\0');
        return 0;
    }
    const ts_hparams *hp = &m->hp;
    CHECK(hp->n_layer > 0 && hp->n_embd > 0 && hp->n_head > 0 && hp->n_head_kv > 0);
    CHECK(hp->n_head % hp->n_head_kv == 0 && hp->head_dim > 0 && hp->n_vocab > 0);
    CHECK(hp->n_expert == 0 || (hp->n_expert_used > 0 && hp->n_expert_used <= hp->n_expert));
    for (int r = 0; r < TS_ROLE_FIRST_LAYER; r++) {
        touch(ts_model_tensor(m, (ts_role)r, 0));
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        (void)ts_hparams_layer_is_swa(hp, il);
        (void)ts_hparams_layer_has_rope(hp, il);
        for (int r = TS_ROLE_FIRST_LAYER; r < TS_ROLE_COUNT; r++) {
            touch(ts_model_tensor(m, (ts_role)r, il));
        }
    }
    const ts_gguf_tensor *embd = ts_model_tensor(m, TS_ROLE_TOKEN_EMBD, 0);
    CHECK(embd != NULL && embd->ne[0] == hp->n_embd && embd->ne[1] == hp->n_vocab);
    for (int64_t i = 0; i < m->n_unused; i++) {
        CHECK(m->unused[i] != NULL && m->unused[i]->name != NULL);
    }
    ts_model_close(m);
    return 0;
}
