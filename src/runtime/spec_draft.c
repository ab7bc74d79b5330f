/*
 * spec_draft.c — a context's draft model for speculative decoding (docs/speculative.md):
 * opening it, checking that it speaks the target's vocabulary, and giving the engine a runner
 * for it on the context's backend.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "util/error.h"

/* Writes at most 40 bytes of a piece as a quoted, escaped string. */
static void quote_piece(char *out, size_t size, const char *piece, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && i < 40 && o + 5 < size; i++) {
        unsigned char c = (unsigned char)piece[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out[o++] = (char)c;
        } else {
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
        }
    }
    out[o] = '\0';
}

/* Whether the draft's tokenizer is the target's: the same size, pieces and BOS/EOS ids. */
static ts_status check_vocab(const ts_llm *target, const ts_llm *draft, const char *path,
                             ts_error *err) {
    const ts_tokenizer *ta = target->tok, *tb = draft->tok;
    int64_t na = target->model->hp.n_vocab, nb = draft->model->hp.n_vocab;
    uint32_t ka = ts_tokenizer_n_vocab(ta), kb = ts_tokenizer_n_vocab(tb);
    if (na != nb || ka != kb) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "draft model %s: it has %lld tokens (%u in its tokenizer) where the "
                            "target %s has %lld (%u); a draft model must share the target's "
                            "vocabulary",
                            path, (long long)nb, kb, target->name, (long long)na, ka);
    }
    const ts_tokenizer_special *sa = ts_tokenizer_get_special(ta);
    const ts_tokenizer_special *sb = ts_tokenizer_get_special(tb);
    if (sa->bos != sb->bos || sa->eos != sb->eos) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "draft model %s: BOS %d and EOS %d where the target %s has %d and %d",
                            path, (int)sb->bos, (int)sb->eos, target->name, (int)sa->bos,
                            (int)sa->eos);
    }
    for (uint32_t id = 0; id < ka; id++) {
        const char *pa = NULL, *pb = NULL;
        size_t la = 0, lb = 0;
        ts_error ea = {0}, eb = {0};
        ts_status st_a = ts_tokenizer_token_to_piece(ta, (ts_token)id, true, &pa, &la, &ea);
        ts_status st_b = ts_tokenizer_token_to_piece(tb, (ts_token)id, true, &pb, &lb, &eb);
        bool same =
            st_a == st_b && (st_a != TS_OK || (la == lb && memcmp(pa, pb, la) == 0)) &&
            ts_tokenizer_token_type(ta, (ts_token)id) == ts_tokenizer_token_type(tb, (ts_token)id);
        if (!same) {
            char qa[200], qb[200];
            quote_piece(qa, sizeof qa, st_a == TS_OK ? pa : "", st_a == TS_OK ? la : 0);
            quote_piece(qb, sizeof qb, st_b == TS_OK ? pb : "", st_b == TS_OK ? lb : 0);
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "draft model %s: token %u is '%s' (type %d) where the target %s "
                                "has '%s' (type %d); a draft model must share the target's "
                                "vocabulary",
                                path, id, qb, (int)ts_tokenizer_token_type(tb, (ts_token)id),
                                target->name, qa, (int)ts_tokenizer_token_type(ta, (ts_token)id));
        }
    }
    return TS_OK;
}

ts_status rt_draft_open(ts_context *ctx, const char *path, ts_error *err) {
    ctx->draft_path = malloc(strlen(path) + 1);
    if (ctx->draft_path == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "draft model: out of memory");
    }
    memcpy(ctx->draft_path, path, strlen(path) + 1);
    ts_status st = ts_llm_open(path, NULL, &ctx->draft_llm, err);
    if (st != TS_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return strstr(msg, path) != NULL ? ts_error_set(err, st, "draft model: %s", msg)
                                         : ts_error_set(err, st, "draft model %s: %s", path, msg);
    }
    if (ctx->draft_llm->model == NULL) {
        return ts_error_set(err, TS_ERR_FORMAT, "draft model %s: the file holds no weights", path);
    }
    if (ctx->draft_llm->model->hp.enc != NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "draft model %s: an encoder has no next-token logits to draft with",
                            path);
    }
    return check_vocab(ctx->llm, ctx->draft_llm, path, err);
}

ts_status rt_draft_attach(ts_context *ctx, const ts_context_params *p, ts_error *err) {
    const ts_model *dm = ctx->draft_llm->model;
    ts_forward_config fc;
    ts_status st = ts_engine_draft_forward_config(dm, &ctx->ec, &fc, err);
    if (st == TS_OK) {
        st = ts_forward_runner_create(dm, ctx->backend, &fc, ctx->reg, &ctx->draft_runner, err);
    }
    if (st == TS_OK) {
        st = ts_engine_set_draft(ctx->engine, dm, ctx->draft_runner, p->draft_p_min, err);
    }
    if (st != TS_OK && strstr(err->msg, ctx->draft_path) == NULL) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return ts_error_set(err, st, "draft model %s: %s", ctx->draft_path, msg);
    }
    return st;
}
