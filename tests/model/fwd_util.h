/*
 * fwd_util.h — helpers for the forward-pass tests: open a tiny model, make backends and
 * forward contexts, run one step of several sequences over hand-built block tables (on a
 * forward or on a runner), compare logits. Header-only static helpers shared by the tests/model
 * programs (each program is one translation unit).
 */
#ifndef TS_TESTS_MODEL_FWD_UTIL_H
#define TS_TESTS_MODEL_FWD_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "common/tiny_model.h"
#include "ir/registry.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/runner.h"

#define FU_BLOCK 16
#define FU_MAX_BLK 8 /* 128 tokens per sequence */

/* Writes a tiny model and opens it (NULL with a printed message on failure). */
static inline ts_model *fu_open_tiny(const ts_tiny_spec *s) {
    char path[512];
    if (ts_tiny_temp_path(path, sizeof path, s->arch) == NULL) {
        fprintf(stderr, "cannot make a temporary file\n");
        return NULL;
    }
    ts_error err = {0};
    ts_model *m = NULL;
    ts_status st = ts_tiny_write(s, path, &err);
    if (st == TS_OK) {
        st = ts_model_open(path, &m, &err);
    }
    unlink(path);
    if (st != TS_OK) {
        fprintf(stderr, "%s: %s\n", s->arch, err.msg);
        return NULL;
    }
    return m;
}

static inline ts_backend *fu_backend(bool cpu) {
    ts_backend *b = NULL;
    ts_error err = {0};
    ts_status st;
    if (cpu) {
        ts_cpu_params p = ts_cpu_params_default();
        p.n_threads = 2;
        st = ts_cpu_backend_create(&p, &b, &err);
    } else {
        st = ts_ref_backend_create(&b, &err);
    }
    if (st != TS_OK) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return NULL;
    }
    return b;
}

static inline ts_forward_config fu_config(int64_t max_tokens, int64_t n_blocks) {
    ts_forward_config c = {
        .max_tokens = max_tokens,
        .max_seqs = 4,
        .max_outputs = max_tokens,
        .n_blocks = n_blocks,
        .block_size = FU_BLOCK,
        .max_blocks_per_seq = FU_MAX_BLK,
        .kv_type_k = TS_TYPE_F16, .kv_type_v = TS_TYPE_F16,
    };
    return c;
}

static inline ts_forward *fu_forward(const ts_model *m, ts_backend *b, ts_registry *reg,
                                     const ts_forward_config *c) {
    ts_forward *f = NULL;
    ts_error err = {0};
    if (ts_forward_create(m, b, c, reg, &f, &err) != TS_OK) {
        fprintf(stderr, "forward: %s\n", err.msg);
        return NULL;
    }
    return f;
}

/* One sequence's part of a step: count tokens starting at position start. */
typedef struct fu_part {
    const int32_t *tokens; /* [count] */
    int32_t start;
    int32_t count;
    int32_t table[FU_MAX_BLK]; /* block ids; entries past the length are ignored */
} fu_part;

/* One step's batch and the arrays it points into. */
typedef struct fu_batch {
    int32_t tok[512], pos[512], seq[512], slots[512], out[512];
    int32_t table[4 * FU_MAX_BLK], len[4];
    ts_batch b;
} fu_batch;

/* The batch of n parts (sequence i = part i) with every token an output, in batch order. */
static inline void fu_make_batch(const fu_part *parts, int n, fu_batch *fb) {
    int64_t nt = 0;
    for (int s = 0; s < n; s++) {
        for (int32_t i = 0; i < parts[s].count; i++) {
            int32_t p = parts[s].start + i;
            fb->tok[nt] = parts[s].tokens[i];
            fb->pos[nt] = p;
            fb->seq[nt] = s;
            fb->slots[nt] = parts[s].table[p / FU_BLOCK] * FU_BLOCK + p % FU_BLOCK;
            fb->out[nt] = (int32_t)nt;
            nt++;
        }
        int32_t l = parts[s].start + parts[s].count;
        fb->len[s] = l;
        for (int j = 0; j < FU_MAX_BLK; j++) {
            fb->table[s * FU_MAX_BLK + j] = j * FU_BLOCK < l ? parts[s].table[j] : -1;
        }
    }
    fb->b = (ts_batch){
        .n_tokens = nt,
        .tokens = fb->tok,
        .pos = fb->pos,
        .seq = fb->seq,
        .slots = fb->slots,
        .n_seqs = n,
        .block_table = fb->table,
        .seq_len = fb->len,
        .n_outputs = nt,
        .outputs = fb->out,
    };
}

/* Runs one step over n parts; logits of every token, in batch order, go to logits
 * [sum(count)][n_vocab]. */
static inline ts_status fu_step(ts_forward *f, const fu_part *parts, int n, float *logits,
                                ts_error *err) {
    fu_batch fb;
    fu_make_batch(parts, n, &fb);
    return ts_forward_run(f, &fb.b, logits, NULL, err);
}

/* The same on a runner; embd (may be NULL) gets every token's embedding [sum(count)][n_embd]. */
static inline ts_status fu_run(ts_runner *r, const fu_part *parts, int n, float *logits,
                               float *embd, ts_error *err) {
    fu_batch fb;
    fu_make_batch(parts, n, &fb);
    return ts_runner_run(r, &fb.b, logits, embd, err);
}

/* Deterministic prompt of n ids in [3, n_vocab) (no special tokens). */
static inline void fu_prompt(int32_t *ids, int n, int32_t n_vocab, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 3 + (int32_t)((x >> 8) % (uint32_t)(n_vocab - 3));
    }
}

/* Relative RMS error of got against want over n values. */
static inline double fu_nrmse(const float *got, const float *want, size_t n) {
    double se = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        se += d * d;
        ss += (double)want[i] * (double)want[i];
    }
    return ss > 0 ? sqrt(se / ss) : sqrt(se);
}

static inline double fu_max_abs(const float *got, const float *want, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= m)) {
            m = d;
        }
    }
    return m;
}

static inline int32_t fu_argmax(const float *v, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++) {
        if (v[i] > v[best]) {
            best = (int32_t)i;
        }
    }
    return best;
}

#endif /* TS_TESTS_MODEL_FWD_UTIL_H */
