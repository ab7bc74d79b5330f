/*
 * tessera.h — the public C API of tessera, an LLM inference engine.
 *
 * Conventions (see docs/ and STYLE.md):
 *  - Every fallible function returns ts_status: TS_OK (0) on success, a negative code on
 *    failure. Results come back through out-parameters. ts_status_str() names each code.
 *  - Objects are opaque handles created and destroyed in symmetric pairs
 *    (ts_x_open / ts_x_close, ts_x_create / ts_x_destroy). The caller owns what it creates.
 *  - Detail about a failure goes into a caller-provided ts_error (what was wrong and where);
 *    functions accept NULL when the caller does not want the message.
 *  - The library never exits the process and never asserts on input.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_VERSION_MAJOR 0
#define TS_VERSION_MINOR 1
#define TS_VERSION_PATCH 0

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_INVALID_ARG = -1, /* a caller passed a bad argument (NULL, out of range) */
    TS_ERR_NOMEM = -2,       /* an allocation failed */
    TS_ERR_IO = -3,          /* open/read/write/mmap failed; the message has errno's text */
    TS_ERR_FORMAT = -4,      /* input data is malformed (file, JSON, vocabulary, template) */
    TS_ERR_UNSUPPORTED = -5, /* well-formed but not supported (type, architecture, version) */
    TS_ERR_NOT_FOUND = -6,   /* a key, tensor, token or name does not exist */
    TS_ERR_TYPE = -7,        /* a value exists but has a different type than asked for */
    TS_ERR_RANGE = -8,       /* a value is outside the allowed range (index, length, size) */
    TS_ERR_OVERFLOW = -9,    /* a size computation would overflow */
    TS_ERR_STATE = -10,      /* the object is not in a state that allows the call */
    TS_ERR_LIMIT = -11,      /* a configured limit was reached (context, queue, blocks) */
    TS_ERR_ABORTED = -12,    /* the operation was cancelled */
    TS_ERR_INTERNAL = -13,   /* a bug in tessera: please report it */
} ts_status;

/* Returns a static, human-readable name for a status ("TS_ERR_FORMAT: malformed input"). */
const char *ts_status_str(ts_status status);

/* Error detail. Fixed-size so that reporting an error never needs an allocation; messages
 * longer than the buffer are truncated with "...". */
#define TS_ERROR_MSG_MAX 512
typedef struct ts_error {
    ts_status status;
    char msg[TS_ERROR_MSG_MAX];
} ts_error;

/* Returns "major.minor.patch". */
const char *ts_version(void);

/* ---- models and generation ------------------------------------------------------------------
 *
 * A ts_llm is a model file opened for use: its weights (used in place from the mapped file),
 * hyperparameters, tokenizer and chat template. A ts_session runs a ts_llm on a compute backend
 * with a paged KV cache and the continuous-batching engine; ts_session_generate submits one
 * request and runs it to completion, calling back with each token's text as it is produced.
 *
 * Ownership: the caller owns every handle it opens or creates and closes/destroys it once; a
 * ts_session borrows its ts_llm, which must outlive it. Buffers returned through `char **` or
 * `int32_t **` are malloc'd and released with ts_free.
 * Thread safety: a ts_llm may be shared by sessions on several threads; a ts_session is used by
 * one thread at a time.
 */

typedef struct ts_llm ts_llm;
typedef struct ts_session ts_session;

/* Opens a GGUF model. Errors name the file and what was wrong (malformed file, unknown
 * architecture with the supported list, missing tensor, wrong shape, unsupported type). */
ts_status ts_llm_open(const char *path, ts_llm **out, ts_error *err);
void ts_llm_close(ts_llm *llm);

/* Vocabulary size, training context length, and architecture name ("llama", "gemma3", ...). */
int32_t ts_llm_n_vocab(const ts_llm *llm);
int64_t ts_llm_n_ctx_train(const ts_llm *llm);
const char *ts_llm_arch(const ts_llm *llm);

/* Text -> token ids. add_special adds BOS/EOS as the model wants; parse_special turns text such
 * as "<|im_start|>" into its special token (otherwise it is literal text). */
ts_status ts_llm_tokenize(const ts_llm *llm, const char *text, size_t len, int add_special,
                          int parse_special, int32_t **ids, size_t *n_ids, ts_error *err);
/* Token ids -> text (special tokens rendered when render_special). NUL-terminated. */
ts_status ts_llm_detokenize(const ts_llm *llm, const int32_t *ids, size_t n_ids,
                            int render_special, char **text, size_t *len, ts_error *err);

/* A conversation turn for ts_llm_chat_prompt. */
typedef struct ts_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated UTF-8 */
} ts_message;

/* Renders a conversation with the model's chat template (or the built-in template `name`
 * when not NULL, e.g. "chatml", "llama3", "gemma"), ending with the opening of the
 * assistant's turn. Tokenize the result with add_special and parse_special. */
ts_status ts_llm_chat_prompt(const ts_llm *llm, const char *name, const ts_message *msgs,
                             size_t n_msgs, char **text, ts_error *err);

typedef struct ts_session_params {
    int n_threads;            /* 0: physical cores */
    int64_t n_ctx;            /* tokens per sequence; 0: min(training context, 4096) */
    int64_t kv_tokens;        /* KV cache capacity in tokens; 0: n_ctx */
    int64_t max_seqs;         /* sequences decoded together; 0: 16 */
    int64_t max_batch_tokens; /* tokens per forward step; 0: 512 */
    int reference_backend;    /* nonzero: the scalar reference backend (slow; for checking) */
} ts_session_params;

/* Zero-initialised parameters mean defaults; this returns them spelled out. */
ts_session_params ts_session_params_default(void);

ts_status ts_session_create(ts_llm *llm, const ts_session_params *params, ts_session **out,
                            ts_error *err);
void ts_session_destroy(ts_session *s);

typedef struct ts_generate_params {
    int32_t max_tokens;  /* 0: up to the context */
    float temperature;   /* 0: greedy */
    int32_t top_k;       /* 0: off */
    float top_p;         /* 1: off */
    float min_p;         /* 0: off */
    float repetition_penalty; /* 1: off */
    uint64_t seed;
    int has_seed;        /* 0: a fresh random seed */
    const char *const *stop; /* stop strings (not included in the output) */
    int32_t n_stop;
    int parse_special;   /* parse special-token text in the prompt */
} ts_generate_params;

/* Greedy decoding, no stop strings, up to the context. */
ts_generate_params ts_generate_params_default(void);

/* Called with each generated token and its text (UTF-8, never a partial character; may be
 * empty while a character or a possible stop string is incomplete). Return nonzero to stop. */
typedef int (*ts_token_callback)(void *user, int32_t token, const char *text, size_t len);

typedef struct ts_generate_result {
    int32_t prompt_tokens;
    int32_t completion_tokens;
    const char *finish_reason; /* "stop", "length" or "abort" (static string) */
    double prompt_ms;          /* time to the first generated token */
    double generate_ms;        /* time from the first to the last generated token */
} ts_generate_result;

/* Tokenizes `prompt` (BOS as the model wants), generates, and calls cb (may be NULL) per token.
 * Errors: prompt + max_tokens beyond the context (with the counts), bad parameters. */
ts_status ts_session_generate(ts_session *s, const char *prompt, const ts_generate_params *gp,
                              ts_token_callback cb, void *user, ts_generate_result *result,
                              ts_error *err);

/* Releases a buffer returned by this API. */
void ts_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
