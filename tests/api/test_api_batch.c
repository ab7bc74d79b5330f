/*
 * test_api_batch.c — the batch API of include/tessera.h (ts_context_decode, logits and
 * embeddings, sequences by id) on the tiny llama:
 *  - decoding a prompt and its greedy continuation token by token picks the tokens that
 *    ts_context_generate picks (the batch path against the engine's);
 *  - sequences decoded together equal sequences decoded alone (also for the granite, smollm3,
 *    olmo2, exaone4, cohere2 and ernie4_5 layouts);
 *  - a forked sequence continues like its source and is independent of it;
 *  - every refused batch leaves the cache as it was;
 *  - which rows come back (logits wanted or not, negative indices), the embeddings (against
 *    the output matrix read from the file, and against the reference backend);
 *  - a context serves batches or requests, and ts_context_clear lets it change.
 *
 * Tolerances: the same computation in another batch shape differs only in the order of f32
 * additions, so logits agree to 1e-4 of their largest magnitude; sequences decoded together
 * use the same kernels row by row and agree to 1e-5.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_util.h"

/* A fixed token pattern: ordinary tokens of the tiny vocabulary (above the byte tokens). */
static void pattern(int32_t *out, int32_t n, int32_t salt) {
    for (int32_t i = 0; i < n; i++) {
        out[i] = 260 + (i * 7 + salt * 13) % 60;
    }
}

/* Logits rows a and b (n values) agree within tol of b's largest magnitude. */
static void assert_close(const float *a, const float *b, int64_t n, double tol, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    double d = api_max_abs_diff(a, b, n), scale = api_max_abs(b, n);
    if (!(d <= tol * (1.0 + scale))) {
        fail_msg("%s: max abs difference %.3g (largest value %.3g, tolerance %.1e)", what, d, scale,
                 tol);
    }
}

static ts_context_params small_params(void) {
    ts_context_params p = api_params();
    p.n_ctx = 64;
    p.max_seqs = 4;
    return p;
}

typedef struct token_log {
    int32_t tokens[64];
    int n;
} token_log;

static int log_token(void *user, int32_t token, const char *text, size_t len) {
    token_log *l = user;
    (void)text;
    (void)len;
    if (l->n < 64) {
        l->tokens[l->n++] = token;
    }
    return 0;
}

/* (a) The batch path and the engine pick the same greedy tokens. */
static void test_decode_matches_generate(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = small_params();
    ts_context *gen = api_context(m->llm, &p);
    ts_context *dec = api_context(m->llm, &p);
    ts_context *one = api_context(m->llm, &p);
    int32_t V = ts_llm_n_vocab(m->llm);

    const char *prompt = "the quick brown fox";
    token_log want = {0};
    ts_generate_params gp = ts_generate_params_default();
    gp.max_tokens = 12;
    ts_generate_result r;
    assert_int_equal(ts_context_generate(gen, prompt, &gp, log_token, &want, &r, &err), TS_OK);
    assert_int_equal(want.n, r.completion_tokens);
    assert_true(want.n >= 1);

    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ts_llm_tokenize(m->llm, prompt, strlen(prompt), 1, 0, &ids, &n, &err), TS_OK);
    assert_int_equal((int32_t)n, r.prompt_tokens);
    if (api_decode_seq(dec, ids, (int32_t)n, 0, &err) != TS_OK) {
        fail_msg("decode: %s", err.msg);
    }
    assert_int_equal(ts_context_seq_len(dec, 0), (int32_t)n);

    /* The prompt token by token gives the same last logits as the whole prompt at once. */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(api_decode_seq(one, ids + i, 1, 0, &err), TS_OK);
    }
    assert_close(ts_context_logits(one, 0), ts_context_logits(dec, -1), V, 1e-4,
                 "prompt token by token vs at once");

    for (int k = 0; k < want.n; k++) {
        int32_t next = api_argmax(ts_context_logits(dec, -1), V);
        if (next != want.tokens[k]) {
            fail_msg("greedy token %d: decode picks %d, generate picked %d", k, next,
                     want.tokens[k]);
        }
        assert_int_equal(api_decode_seq(dec, &next, 1, 0, &err), TS_OK);
        assert_int_equal(ts_context_seq_len(dec, 0), (int32_t)n + k + 1);
    }
    /* Generation stopped at the length limit or at an end-of-generation token. */
    assert_true(want.n == 12 || want.tokens[want.n - 1] == TS_TINY_EOS);
    ts_free(ids);

    /* Batch use keeps no engine statistics. */
    ts_engine_stats st;
    ts_context_get_stats(dec, &st);
    assert_int_equal(st.n_steps, 0);
    assert_int_equal(st.generated_tokens, 0);
    ts_context_destroy(one);
    ts_context_destroy(dec);
    ts_context_destroy(gen);
}

/* (b) Two sequences in one batch (tokens interleaved) give the logits each gives alone. */
static void two_sequences(const api_model *m) {
    ts_error err = {0};
    ts_context_params p = small_params();
    int32_t V = ts_llm_n_vocab(m->llm);
    int32_t a[5], b[7];
    pattern(a, 5, 1);
    pattern(b, 7, 2);

    ts_context *both = api_context(m->llm, &p);
    int32_t toks[12], seqs[12];
    int8_t want[12] = {0};
    int32_t last_a = -1, last_b = -1;
    for (int32_t i = 0, ia = 0, ib = 0; i < 12; i++) { /* b a b a ... then the rest of b */
        bool take_a = ia < 5 && (i % 2 == 1 || ib == 7);
        toks[i] = take_a ? a[ia++] : b[ib++];
        seqs[i] = take_a ? 0 : 3;
        last_a = take_a ? i : last_a;
        last_b = take_a ? last_b : i;
    }
    want[last_a] = want[last_b] = 1;
    ts_decode_batch batch = {.n_tokens = 12, .tokens = toks, .seq = seqs, .logits = want};
    if (ts_context_decode(both, &batch, &err) != TS_OK) {
        fail_msg("decode: %s", err.msg);
    }
    assert_int_equal(ts_context_seq_len(both, 0), 5);
    assert_int_equal(ts_context_seq_len(both, 3), 7);
    assert_int_equal(ts_context_seq_len(both, 1), 0);

    ts_context *alone_a = api_context(m->llm, &p);
    ts_context *alone_b = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(alone_a, a, 5, 0, &err), TS_OK);
    assert_int_equal(api_decode_seq(alone_b, b, 7, 0, &err), TS_OK);
    assert_close(ts_context_logits(both, last_a), ts_context_logits(alone_a, -1), V, 1e-5,
                 "sequence 0 in a batch vs alone");
    assert_close(ts_context_logits(both, last_b), ts_context_logits(alone_b, -1), V, 1e-5,
                 "sequence 3 in a batch vs alone");

    /* One decode step of both together, with explicit positions. */
    int32_t na = api_argmax(ts_context_logits(alone_a, -1), V);
    int32_t nb = api_argmax(ts_context_logits(alone_b, -1), V);
    int32_t step_toks[2] = {nb, na}, step_seq[2] = {3, 0}, step_pos[2] = {7, 5};
    int8_t step_want[2] = {1, 1};
    batch = (ts_decode_batch){
        .n_tokens = 2, .tokens = step_toks, .pos = step_pos, .seq = step_seq, .logits = step_want};
    assert_int_equal(ts_context_decode(both, &batch, &err), TS_OK);
    assert_int_equal(api_decode_seq(alone_a, &na, 1, 0, &err), TS_OK);
    assert_int_equal(api_decode_seq(alone_b, &nb, 1, 0, &err), TS_OK);
    assert_close(ts_context_logits(both, 1), ts_context_logits(alone_a, 0), V, 1e-5,
                 "decode step of sequence 0");
    assert_close(ts_context_logits(both, 0), ts_context_logits(alone_b, 0), V, 1e-5,
                 "decode step of sequence 3");
    /* And the two sequences really differ (the comparison above can fail). */
    assert_true(api_max_abs_diff(ts_context_logits(both, 0), ts_context_logits(both, 1), V) > 1e-3);
    ts_context_destroy(alone_b);
    ts_context_destroy(alone_a);
    ts_context_destroy(both);
}

static void test_two_sequences(void **state) {
    two_sequences(*state);
}

/* The same for the families whose blocks differ from llama's: Granite's multipliers, SmolLM3's
 * NoPE layer, OLMo 2's and EXAONE 4's post-norms and Q/K norms, Cohere 2's parallel blocks
 * and its window (8 tokens, shorter than the 12 decoded together) and global NoPE layers. */
static void test_two_sequences_families(void **state) {
    (void)state;
    const char *archs[] = {"granite", "smollm3", "olmo2", "exaone4", "cohere2", "ernie4_5"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        api_model m;
        ts_tiny_spec spec = ts_tiny_spec_default(archs[i]);
        api_model_open(&m, &spec, archs[i]);
        printf("  %s\n", archs[i]);
        two_sequences(&m);
        api_model_close(&m);
    }
}

/* (c) A fork continues like its source, independently of it. */
static void test_fork(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = small_params();
    int32_t V = ts_llm_n_vocab(m->llm);
    int32_t prompt[10]; /* not a whole block: the shared last block is copied on write */
    pattern(prompt, 10, 3);
    const int32_t x = 300, y = 301, z = 302, w = 303;

    ts_context *ctx = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(ctx, prompt, 10, 0, &err), TS_OK);
    if (ts_context_seq_fork(ctx, 0, 2, &err) != TS_OK) {
        fail_msg("fork: %s", err.msg);
    }
    assert_int_equal(ts_context_seq_len(ctx, 2), 10);
    assert_int_equal(ts_context_seq_len(ctx, 0), 10);

    /* The same token on both: the same logits. */
    int32_t toks[2] = {x, x}, seqs[2] = {0, 2};
    int8_t want[2] = {1, 1};
    ts_decode_batch b = {.n_tokens = 2, .tokens = toks, .seq = seqs, .logits = want};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_close(ts_context_logits(ctx, 0), ts_context_logits(ctx, 1), V, 1e-5,
                 "source and fork after the same token");

    /* Different tokens: different logits. */
    toks[0] = y;
    toks[1] = z;
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_true(api_max_abs_diff(ts_context_logits(ctx, 0), ts_context_logits(ctx, 1), V) > 1e-3);

    /* Dropping the source leaves the fork as it was: its next logits are those of a context
     * that decoded the fork's tokens (prompt x z) alone. The last batch's rows stay readable
     * until the next decode. */
    float fork_row[512];
    assert_true(V <= 512);
    memcpy(fork_row, ts_context_logits(ctx, 1), (size_t)V * sizeof *fork_row);
    assert_int_equal(ts_context_seq_drop(ctx, 0, &err), TS_OK);
    assert_non_null(ts_context_logits(ctx, 1));
    assert_memory_equal(ts_context_logits(ctx, 1), fork_row, (size_t)V * sizeof *fork_row);
    assert_int_equal(ts_context_seq_len(ctx, 0), 0);
    assert_int_equal(ts_context_seq_len(ctx, 2), 12);
    assert_int_equal(api_decode_seq(ctx, &w, 1, 2, &err), TS_OK);

    ts_context *ref = api_context(m->llm, &p);
    int32_t all[13];
    memcpy(all, prompt, sizeof prompt);
    all[10] = x;
    all[11] = z;
    all[12] = w;
    assert_int_equal(api_decode_seq(ref, all, 13, 1, &err), TS_OK);
    assert_close(ts_context_logits(ctx, 0), ts_context_logits(ref, -1), V, 1e-4,
                 "fork after its source was dropped");
    /* The source's own history (prompt x y) gives something else. */
    all[11] = y;
    ts_context *src = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(src, all, 13, 0, &err), TS_OK);
    assert_true(api_max_abs_diff(ts_context_logits(src, -1), ts_context_logits(ref, -1), V) > 1e-3);

    /* Forking an empty sequence gives an empty one. */
    assert_int_equal(ts_context_seq_fork(ctx, 1, 3, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 3), 0);
    ts_context_destroy(src);
    ts_context_destroy(ref);
    ts_context_destroy(ctx);
}

/* The refused batch `b` must fail with `want` (a message naming `needle`) and leave every
 * sequence's length as it was. */
static void expect_refused(ts_context *ctx, const ts_decode_batch *b, ts_status want,
                           const char *needle) {
    int32_t before[8];
    for (int32_t s = 0; s < 8; s++) {
        before[s] = ts_context_seq_len(ctx, s);
    }
    ts_error err = {0};
    ts_status st = ts_context_decode(ctx, b, &err);
    if (st != want || strstr(err.msg, needle) == NULL) {
        fail_msg("want %s with '%s', got %s: '%s'", ts_status_str(want), needle, ts_status_str(st),
                 err.msg);
    }
    for (int32_t s = 0; s < 8; s++) {
        if (ts_context_seq_len(ctx, s) != before[s]) {
            fail_msg("after '%s': sequence %d has %d tokens, had %d", err.msg, s,
                     ts_context_seq_len(ctx, s), before[s]);
        }
    }
}

/* Decodes one token on seq, which must work (a batch after a refused one). */
static void expect_valid(ts_context *ctx, int32_t token, int32_t seq) {
    ts_error err = {0};
    int32_t before = ts_context_seq_len(ctx, seq);
    if (api_decode_seq(ctx, &token, 1, seq, &err) != TS_OK) {
        fail_msg("a valid batch after a refused one: %s", err.msg);
    }
    assert_int_equal(ts_context_seq_len(ctx, seq), before + 1);
}

/* (d) Refused batches change nothing. */
static void test_refused_batches(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = api_params();
    p.n_ctx = 32;
    p.kv_tokens = 4 * 32; /* the default is one sequence's worth */
    p.max_seqs = 4;       /* so max_outputs is 4 */
    int32_t V = ts_llm_n_vocab(m->llm);
    int32_t a[32], bt[16];
    pattern(a, 32, 4);
    pattern(bt, 16, 5);
    ts_context *ctx = api_context(m->llm, &p);
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    assert_int_equal(info.max_outputs, 4);
    assert_int_equal(api_decode_seq(ctx, a, 20, 0, &err), TS_OK);
    assert_int_equal(api_decode_seq(ctx, bt, 5, 1, &err), TS_OK);

    /* A position that does not continue the sequence, after a valid token of another. */
    int32_t toks[13] = {bt[5], a[20]}, seqs[13] = {1, 0}, pos[13] = {5, 21};
    ts_decode_batch b = {.n_tokens = 2, .tokens = toks, .pos = pos, .seq = seqs};
    expect_refused(ctx, &b, TS_ERR_INVALID_ARG, "position 21");
    expect_valid(ctx, bt[5], 1);

    /* A sequence id out of range, after a token that would open a new sequence. */
    seqs[0] = 2;
    seqs[1] = 4;
    b = (ts_decode_batch){.n_tokens = 2, .tokens = toks, .seq = seqs};
    expect_refused(ctx, &b, TS_ERR_RANGE, "sequence 4");
    seqs[1] = -1;
    expect_refused(ctx, &b, TS_ERR_RANGE, "sequence -1");
    expect_valid(ctx, bt[6], 1);

    /* More rows of logits than max_outputs. */
    int8_t all[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        seqs[i] = 2;
    }
    b = (ts_decode_batch){.n_tokens = 5, .tokens = a, .seq = seqs, .logits = all};
    expect_refused(ctx, &b, TS_ERR_LIMIT, "max_outputs");
    all[4] = 0; /* four rows are allowed */
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 2), 5);
    expect_valid(ctx, bt[7], 1);

    /* The cache still holds what was decoded: next logits as in a context that never saw the
     * refused batches. */
    ts_context *ref = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(ref, a, 20, 0, &err), TS_OK);
    assert_int_equal(api_decode_seq(ref, bt, 8, 1, &err), TS_OK);
    int32_t next[2] = {a[20], bt[8]}, next_seq[2] = {0, 1};
    int8_t both[2] = {1, 1};
    b = (ts_decode_batch){.n_tokens = 2, .tokens = next, .seq = next_seq, .logits = both};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_int_equal(ts_context_decode(ref, &b, &err), TS_OK);
    assert_close(ts_context_logits(ctx, 0), ts_context_logits(ref, 0), V, 1e-4, "sequence 0");
    assert_close(ts_context_logits(ctx, 1), ts_context_logits(ref, 1), V, 1e-4, "sequence 1");
    ts_context_destroy(ref);

    /* Past n_ctx: sequence 0 holds 21 tokens; 12 more would be 33. */
    for (int i = 0; i < 12; i++) {
        seqs[i] = 0;
    }
    b = (ts_decode_batch){.n_tokens = 12, .tokens = a + 20, .seq = seqs};
    expect_refused(ctx, &b, TS_ERR_LIMIT, "holds 32 per sequence");
    b.n_tokens = 11; /* exactly the context */
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 0), 32);
    b.n_tokens = 1;
    expect_refused(ctx, &b, TS_ERR_LIMIT, "sequence 0");
    expect_valid(ctx, bt[9], 1);
    ts_context_destroy(ctx);
}

/* (d) The KV cache full: a small pool shared by many sequences. */
static void test_kv_full(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = api_params();
    p.n_ctx = 32;
    p.kv_tokens = 48;
    p.max_seqs = 8;
    ts_context *ctx = api_context(m->llm, &p);
    ts_context_info info;
    ts_context_get_info(ctx, &info);
    assert_int_equal(info.kv_tokens, 48);
    assert_int_equal(info.block_size, 16);
    int32_t t[32];
    pattern(t, 32, 6);
    assert_int_equal(api_decode_seq(ctx, t, 16, 0, &err), TS_OK);
    assert_int_equal(api_decode_seq(ctx, t, 16, 1, &err), TS_OK);
    assert_int_equal(api_decode_seq(ctx, t, 8, 2, &err), TS_OK); /* every block in use */

    /* Sequence 2 has room in its block, sequence 3 needs a new one: refused as a whole. */
    int32_t toks[2] = {t[8], t[0]}, seqs[2] = {2, 3};
    ts_decode_batch b = {.n_tokens = 2, .tokens = toks, .seq = seqs};
    expect_refused(ctx, &b, TS_ERR_LIMIT, "KV cache is full");
    /* A sequence grown past its block needs one too. */
    seqs[0] = 0;
    b.n_tokens = 1;
    expect_refused(ctx, &b, TS_ERR_LIMIT, "KV cache is full");
    expect_valid(ctx, t[8], 2);

    /* Dropping a sequence frees its block. */
    assert_int_equal(ts_context_seq_drop(ctx, 1, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 1), 0);
    expect_valid(ctx, t[0], 3);
    /* A fork shares blocks: it fits although no block is free. */
    assert_int_equal(ts_context_seq_fork(ctx, 0, 5, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 5), 16);
    ts_context_destroy(ctx);
}

/* (e) Which rows come back. */
static void test_logits_rows(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = small_params();
    int32_t V = ts_llm_n_vocab(m->llm);
    int32_t t[4];
    pattern(t, 4, 7);
    ts_context *ctx = api_context(m->llm, &p);
    assert_null(ts_context_logits(ctx, 0)); /* nothing decoded yet */
    assert_null(ts_context_embeddings(ctx, -1));

    int8_t want[4] = {1, 0, 1, 0};
    ts_decode_batch b = {.n_tokens = 4, .tokens = t, .logits = want};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_non_null(ts_context_logits(ctx, 0));
    assert_null(ts_context_logits(ctx, 1));
    assert_non_null(ts_context_logits(ctx, 2));
    assert_null(ts_context_logits(ctx, 3));
    assert_null(ts_context_logits(ctx, 4));
    assert_null(ts_context_logits(ctx, -1));
    assert_ptr_equal(ts_context_logits(ctx, -2), ts_context_logits(ctx, 2));
    assert_ptr_equal(ts_context_logits(ctx, -4), ts_context_logits(ctx, 0));
    assert_null(ts_context_logits(ctx, -5));
    assert_null(ts_context_logits(ctx, INT32_MIN));

    /* Row 2 holds the logits of the first three tokens. */
    float row0[512], row2[512];
    assert_true(V <= 512);
    memcpy(row0, ts_context_logits(ctx, 0), (size_t)V * sizeof *row0);
    memcpy(row2, ts_context_logits(ctx, 2), (size_t)V * sizeof *row2);
    assert_true(api_max_abs_diff(row0, row2, V) > 1e-3);
    ts_context *ref = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(ref, t, 3, 0, &err), TS_OK);
    assert_close(row2, ts_context_logits(ref, -1), V, 1e-4, "row 2 vs three tokens alone");
    assert_int_equal(api_decode_seq(ref, t, 1, 1, &err), TS_OK);
    assert_close(row0, ts_context_logits(ref, 0), V, 1e-4, "row 0 vs one token alone");
    ts_context_destroy(ref);

    /* Without flags only the last token's logits come back. */
    b = (ts_decode_batch){.n_tokens = 2, .tokens = t};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_null(ts_context_logits(ctx, 0));
    assert_non_null(ts_context_logits(ctx, 1));
    assert_ptr_equal(ts_context_logits(ctx, -1), ts_context_logits(ctx, 1));
    assert_null(ts_context_logits(ctx, 2)); /* beyond this batch, though the last had 4 */

    /* No row at all is allowed too. */
    int8_t none[1] = {0};
    b = (ts_decode_batch){.n_tokens = 1, .tokens = t, .logits = none};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_OK);
    assert_null(ts_context_logits(ctx, 0));
    assert_null(ts_context_logits(ctx, -1));
    assert_null(ts_context_embeddings(ctx, 0));
    assert_int_equal(ts_context_seq_len(ctx, 0), 7);
    ts_context_destroy(ctx);
}

/* (f) Embeddings: the final hidden state, which the output matrix turns into the logits. */
static void test_embeddings(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_llm_info li;
    ts_llm_get_info(m->llm, &li);
    int32_t V = li.n_vocab;
    int64_t E = li.n_embd;
    int32_t t[6];
    pattern(t, 6, 8);
    int8_t want[6] = {0, 1, 0, 0, 1, 1};
    ts_decode_batch b = {.n_tokens = 6, .tokens = t, .logits = want};

    ts_context_params p = small_params();
    ts_context *cpu = api_context(m->llm, &p);
    p.backend = "ref";
    ts_context *ref = api_context(m->llm, &p);
    assert_int_equal(ts_context_decode(cpu, &b, &err), TS_OK);
    assert_int_equal(ts_context_decode(ref, &b, &err), TS_OK);

    ts_gguf *g = NULL;
    const ts_gguf_tensor *out = NULL;
    assert_int_equal(ts_gguf_open(m->path, &g, &err), TS_OK);
    assert_int_equal(ts_gguf_find_tensor(g, "output.weight", &out), TS_OK);
    assert_int_equal(out->type, TS_TYPE_F32);
    assert_int_equal(out->ne[0], E);
    assert_int_equal(out->ne[1], V);
    const float *W = out->data; /* [n_embd, n_vocab] */

    for (int32_t i = 0; i < 6; i++) {
        const float *e = ts_context_embeddings(cpu, i);
        if (!want[i]) {
            assert_null(e);
            assert_null(ts_context_embeddings(ref, i));
            continue;
        }
        assert_non_null(e);
        assert_ptr_equal(e, ts_context_embeddings(cpu, i - 6));
        for (int64_t k = 0; k < E; k++) {
            assert_true(isfinite(e[k]));
        }
        assert_true(api_max_abs(e, E) > 0.0);
        /* logits = output · embedding */
        float expect[512];
        assert_true(V <= 512);
        for (int32_t v = 0; v < V; v++) {
            double acc = 0.0;
            for (int64_t k = 0; k < E; k++) {
                acc += (double)W[(size_t)v * (size_t)E + (size_t)k] * e[k];
            }
            expect[v] = (float)acc;
        }
        assert_close(ts_context_logits(cpu, i), expect, V, 1e-4, "logits from embeddings");
        /* The CPU backend against the reference, to 1e-3 relative. */
        const float *er = ts_context_embeddings(ref, i);
        assert_close(e, er, E, 1e-3, "embeddings cpu vs ref");
        assert_close(ts_context_logits(cpu, i), ts_context_logits(ref, i), V, 1e-3,
                     "logits cpu vs ref");
    }
    /* Different tokens, different states. */
    assert_true(api_max_abs_diff(ts_context_embeddings(cpu, 4), ts_context_embeddings(cpu, 5), E) >
                1e-3);
    ts_gguf_close(g);
    ts_context_destroy(ref);
    ts_context_destroy(cpu);
}

static void on_event(const ts_engine_event *ev, void *user) {
    int *n = user;
    *n += ev->token >= 0;
}

/* (g) Batches or requests, and ts_context_clear between them. */
static void test_modes(void **state) {
    api_model *m = *state;
    ts_error err = {0};
    ts_context_params p = small_params();
    ts_context *ctx = api_context(m->llm, &p);
    int32_t t[4];
    pattern(t, 4, 9);
    assert_int_equal(api_decode_seq(ctx, t, 4, 1, &err), TS_OK);

    ts_request_params rp = ts_request_params_default();
    rp.max_tokens = 3;
    rp.ignore_eos = true;
    int generated = 0;
    assert_int_equal(ts_context_submit(ctx, t, 4, &rp, on_event, &generated, NULL, &err),
                     TS_ERR_STATE);
    assert_non_null(strstr(err.msg, "ts_context_submit"));
    assert_non_null(strstr(err.msg, "batches"));
    assert_false(ts_context_has_work(ctx));
    assert_int_equal(ts_context_seq_len(ctx, 1), 4); /* the refused call changed nothing */

    /* Clear: every sequence goes, and the context may serve requests. */
    ts_context_clear(ctx);
    assert_int_equal(ts_context_seq_len(ctx, 1), 0);
    assert_null(ts_context_logits(ctx, -1));
    assert_int_equal(ts_context_submit(ctx, t, 4, &rp, on_event, &generated, NULL, &err), TS_OK);
    for (int i = 0; i < 20 && ts_context_has_work(ctx); i++) {
        assert_int_equal(ts_context_step(ctx, NULL, &err), TS_OK);
    }
    assert_int_equal(generated, 3);

    /* Now it serves requests: batches are refused, and clear does not change that. */
    ts_decode_batch b = {.n_tokens = 1, .tokens = t};
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_ERR_STATE);
    assert_non_null(strstr(err.msg, "requests"));
    ts_context_clear(ctx);
    assert_int_equal(ts_context_decode(ctx, &b, &err), TS_ERR_STATE);
    assert_int_equal(ts_context_seq_drop(ctx, 0, &err), TS_ERR_STATE);
    assert_int_equal(ts_context_seq_len(ctx, 0), 0);
    ts_context_destroy(ctx);

    /* Batches again after a clear: the cache starts empty and computes as a fresh one. */
    ctx = api_context(m->llm, &p);
    ts_context *fresh = api_context(m->llm, &p);
    assert_int_equal(api_decode_seq(ctx, t, 4, 0, &err), TS_OK);
    ts_context_clear(ctx);
    assert_int_equal(api_decode_seq(ctx, t + 1, 3, 0, &err), TS_OK);
    assert_int_equal(ts_context_seq_len(ctx, 0), 3);
    assert_int_equal(api_decode_seq(fresh, t + 1, 3, 0, &err), TS_OK);
    assert_close(ts_context_logits(ctx, -1), ts_context_logits(fresh, -1), ts_llm_n_vocab(m->llm),
                 1e-6, "after clear vs fresh");
    ts_context_destroy(fresh);
    ts_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_matches_generate),
        cmocka_unit_test(test_two_sequences),
        cmocka_unit_test(test_two_sequences_families),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_refused_batches),
        cmocka_unit_test(test_kv_full),
        cmocka_unit_test(test_logits_rows),
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_modes),
    };
    return cmocka_run_group_tests(tests, api_group_setup, api_group_teardown);
}
