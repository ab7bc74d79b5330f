/* tok_merge.c — the merge queue shared by the BPE and SentencePiece merge loops. */
#include <stdlib.h>

#include "tokenizer/tok_internal.h"
#include "util/error.h"

static bool merge_before(const tok_merge *a, const tok_merge *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

ts_status tok_merge_push(tok_merge_queue *q, const tok_merge *m, ts_error *err) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        tok_merge *v = realloc(q->v, cap * sizeof *v);
        if (v == NULL) {
            return ts_error_set(err, TS_ERR_NOMEM, "tokenizer: no memory for the merge queue");
        }
        q->v = v;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0 && merge_before(m, &q->v[(i - 1) / 2])) {
        q->v[i] = q->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->v[i] = *m;
    return TS_OK;
}

tok_merge tok_merge_pop(tok_merge_queue *q) {
    tok_merge top = q->v[0];
    tok_merge last = q->v[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) {
            break;
        }
        if (c + 1 < q->n && merge_before(&q->v[c + 1], &q->v[c])) {
            c++;
        }
        if (!merge_before(&q->v[c], &last)) {
            break;
        }
        q->v[i] = q->v[c];
        i = c;
    }
    if (q->n > 0) {
        q->v[i] = last;
    }
    return top;
}

void tok_merge_queue_free(tok_merge_queue *q) {
    free(q->v);
    q->v = NULL;
    q->n = q->cap = 0;
}
