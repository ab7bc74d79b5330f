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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- models ----------------------------------------------------------------------------------
 *
 * A ts_llm is a model file opened for use: its weights (used in place from the mapped file),
 * hyperparameters, tokenizer and chat template. A vocabulary-only file (no tensors, as the
 * tokenizer test vocabularies) opens with ts_llm_params.vocab_only: tokenizing works, making a
 * context does not.
 *
 * Ownership: the caller owns every handle it opens or creates and closes/destroys it once; a
 * ts_context borrows its ts_llm, which must outlive it. Buffers returned through `char **` or
 * `int32_t **` are malloc'd and released with ts_free.
 * Thread safety: a ts_llm is read-only after open and may be shared by contexts on several
 * threads.
 */

typedef struct ts_llm ts_llm;

/* How serious a message from the library is. */
typedef enum ts_log_level {
    TS_LOG_WARN = 1, /* something is probably wrong but the call went on (an unused tensor) */
} ts_log_level;

/* Receives the library's warnings: one line of UTF-8, no trailing newline, valid for the call
 * only. Called on the thread that made the call that found the problem. */
typedef void (*ts_log_callback)(void *user, ts_log_level level, const char *msg);

typedef struct ts_llm_params {
    int vocab_only;      /* nonzero: read the tokenizer only (no weights, no context) */
    ts_log_callback log; /* warnings while opening (tensors the architecture does not use, see
                            ts_llm_info.unused_tensors); NULL: none */
    void *log_user;      /* passed to log */
} ts_llm_params;

/* Opens a GGUF model. Errors name the file and what was wrong (malformed file, unknown
 * architecture with the supported list, missing tensor, wrong shape, unsupported type).
 * params may be NULL (defaults: the whole model). */
ts_status ts_llm_open(const char *path, const ts_llm_params *params, ts_llm **out, ts_error *err);
void ts_llm_close(ts_llm *llm);

/* What a model is. Strings are owned by the ts_llm. Fields a vocabulary-only file lacks are 0
 * (and "" for strings). */
typedef struct ts_llm_info {
    const char *arch;      /* "llama", "gemma3", ... */
    const char *name;      /* general.name, or the file's base name */
    const char *file_type; /* weight type of the bulk of the model, "Q4_1", "Q4_K_M"... */
    uint64_t n_params;     /* parameters in all weight tensors */
    uint64_t weight_bytes; /* bytes of all weight tensors (what a token reads) */
    uint64_t file_bytes;
    int32_t n_vocab;
    int64_t n_ctx_train;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int encoder;     /* nonzero: a bidirectional encoder (BERT family): it gives embeddings
                        (ts_context_embed), not text */
    int32_t pooling; /* the model's pooling (ts_pooling): <arch>.pooling_type, else an
                        encoder's own default, else TS_POOLING_LAST */
    /* Tensors of the file that the architecture does not use (no tensor pattern of it names
     * them): the forward pass ignores them, which usually means a feature tessera lacks.
     * Their names, ", "-separated (control bytes as '?'), "" when none. */
    int64_t n_unused_tensors;
    const char *unused_tensors;
    /* The tokenizer's special tokens (vocabulary-only files too): ids, -1 when the vocabulary
     * has none, and whether ts_llm_tokenize with add_special puts bos first / eos last (a tool
     * that builds token windows itself, as perplexity does, starts each one with bos when
     * add_bos is set). */
    int32_t bos, eos;
    int add_bos, add_eos;
    /* Mixture of experts: experts per layer and per token (0 for a dense model), and the
     * bytes one decoding token reads (weight_bytes with only the used experts' share of the
     * expert tensors; weight_bytes for a dense model). */
    int64_t n_expert, n_expert_used;
    uint64_t active_bytes;
} ts_llm_info;

void ts_llm_get_info(const ts_llm *llm, ts_llm_info *out);

/* Shorthands for ts_llm_get_info's fields. */
int32_t ts_llm_n_vocab(const ts_llm *llm);
int64_t ts_llm_n_ctx_train(const ts_llm *llm);
const char *ts_llm_arch(const ts_llm *llm);

/* Text -> token ids. add_special adds BOS/EOS as the model wants; parse_special turns text such
 * as "<|im_start|>" into its special token (otherwise it is literal text). */
ts_status ts_llm_tokenize(const ts_llm *llm, const char *text, size_t len, int add_special,
                          int parse_special, int32_t **ids, size_t *n_ids, ts_error *err);
/* Token ids -> text (special tokens rendered when render_special). NUL-terminated. */
ts_status ts_llm_detokenize(const ts_llm *llm, const int32_t *ids, size_t n_ids, int render_special,
                            char **text, size_t *len, ts_error *err);
/* One token's text as it appears in output (byte tokens decoded, SentencePiece's U+2581 as a
 * space; special tokens as their text when render_special, else empty). *piece is owned by the
 * ts_llm and valid until it is closed; it is not NUL-terminated. */
ts_status ts_llm_token_to_piece(const ts_llm *llm, int32_t token, int render_special,
                                const char **piece, size_t *len, ts_error *err);

/* A conversation turn for the chat templates. */
typedef struct ts_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated UTF-8 */
} ts_message;

/* Renders a conversation with the model's chat template (or the built-in template `name`
 * when not NULL, e.g. "chatml", "llama3", "gemma"), ending with the opening of the
 * assistant's turn when add_generation_prompt. Tokenize the result with add_special and
 * parse_special. TS_ERR_NOT_FOUND: the model has no template and name is NULL. */
ts_status ts_llm_chat_prompt(const ts_llm *llm, const char *name, const ts_message *msgs,
                             size_t n_msgs, int add_generation_prompt, char **text, size_t *len,
                             ts_error *err);

/* The model's own chat template (its tokenizer.chat_template, Jinja source), NUL-terminated and
 * owned by the ts_llm; NULL when the file has none. */
const char *ts_llm_chat_template(const ts_llm *llm);

/* Which template renders a chat request and how. Zero-initialised: the model's own. */
typedef struct ts_chat_options {
    const char *name;   /* a built-in family ("chatml", "llama3", ...; C renderers, role and
                           content only); NULL: none */
    const char *source; /* Jinja template text used instead of the model's; NULL: the model's */
    int keep_special;   /* nonzero: keep a leading BOS / trailing EOS text that tokenizing with
                           add_special would add again (the template's exact bytes) */
    int64_t now;        /* strftime_now's clock in Unix seconds; 0: the current time */
    /* Limits of one render of an untrusted template (0: the engine's defaults, docs/templates.md).
     * The render stops with TS_ERR_LIMIT naming the limit, or TS_ERR_ABORTED when
     * cancel(cancel_user) returns nonzero (checked every few thousand steps; may be NULL). */
    int64_t timeout_ms; /* wall-clock time of the render */
    size_t max_memory;  /* bytes the render may hold at once (values, text, the output) */
    uint64_t max_work;  /* work units: every operation charges the bytes / items it touches */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
} ts_chat_options;

/* Renders a chat request with a chat template. request_json is a JSON object: "messages" (as
 * OpenAI's API shapes them: role, content as a string or a list of text parts, tool_calls,
 * tool_call_id, name, reasoning_content), optional "tools", "add_generation_prompt" (default
 * true), and any other keys, which become template variables (e.g. "enable_thinking");
 * "bos_token" and "eos_token" default to the model's. The template is, in order: the built-in
 * family opt->name, the Jinja opt->source, or the model's own template run by the Jinja engine
 * (sandboxed; docs/templates.md). Unless keep_special, the result holds no BOS/EOS text the
 * tokenizer adds itself: tokenize it with add_special and parse_special. opt may be NULL;
 * llm may be NULL when opt->name or opt->source is given (a Jinja template's bos_token and
 * eos_token are then "" unless the request gives them).
 * A model whose file has no template renders with the built-in family its architecture or
 * turn-marker tokens name (gemma, llama3, chatml, phi3, deepseek3, mistral).
 * Errors: TS_ERR_NOT_FOUND (no template), TS_ERR_FORMAT (malformed request or template,
 * "template:LINE: ..."), TS_ERR_UNSUPPORTED (a construct the engine lacks), TS_ERR_ABORTED
 * (the template's raise_exception: "template raised: MESSAGE"), TS_ERR_LIMIT. */
ts_status ts_llm_chat_render(const ts_llm *llm, const ts_chat_options *opt,
                             const char *request_json, size_t request_len, char **text, size_t *len,
                             ts_error *err);

/* ---- sampling and requests (the engine's vocabulary) ----------------------------------------- */

/* Temperatures below this are greedy (as in vLLM, whose threshold is the same 1e-5). */
#define TS_SAMPLER_GREEDY_TEMP 1e-5f
/* Most alternatives ts_sample_info reports (OpenAI's top_logprobs allows 0..20). */
#define TS_SAMPLER_MAX_LOGPROBS 20
/* Longest penalty window; a window is a ring buffer of this many int32 at most. */
#define TS_SAMPLER_MAX_WINDOW (1 << 20)
/* Presence and frequency penalties are limited to OpenAI's range [-2, 2]. */
#define TS_SAMPLER_MAX_PENALTY 2.0f

typedef enum ts_logprobs_mode {
    TS_LOGPROBS_PROCESSED = 0, /* after bias and penalties, before temperature and filters */
    TS_LOGPROBS_RAW = 1,       /* the logits as passed in */
} ts_logprobs_mode;

/* One logit bias entry. Entries for the same token add up; -inf bans the token. */
typedef struct ts_logit_bias {
    int32_t token; /* in [0, n_vocab) */
    float bias;    /* finite, or -INFINITY */
} ts_logit_bias;

/* How the next token is chosen (order of operations: see src/engine/sampler.h). */
typedef struct ts_sampler_params {
    float temperature;        /* >= 0, finite; < TS_SAMPLER_GREEDY_TEMP is greedy. Default 1 */
    int32_t top_k;            /* >= 0; 0 or >= n_vocab is off. Default 0 */
    float top_p;              /* (0, 1]; 1 is off. Default 1 */
    float min_p;              /* [0, 1]; 0 is off. Default 0 */
    float typical_p;          /* (0, 1]; 1 is off. Default 1 */
    float repetition_penalty; /* > 0, finite; 1 is off. Default 1 */
    float presence_penalty;   /* [-2, 2]; 0 is off. Default 0 */
    float frequency_penalty;  /* [-2, 2]; 0 is off. Default 0 */
    /* Penalty window: -1 or 0 = every accepted token, N > 0 = the last N accepted tokens
     * (at most TS_SAMPLER_MAX_WINDOW). Default 0. Which tokens count as history is the
     * caller's choice: OpenAI penalises generated tokens only, llama.cpp also the prompt. */
    int32_t penalty_last_n;
    /* Sparse bias, borrowed only while the request is submitted (it is copied). May be NULL
     * when n_logit_bias is 0. */
    const ts_logit_bias *logit_bias; /* [n_logit_bias] */
    int32_t n_logit_bias;
    int32_t n_logprobs;             /* alternatives to report, 0..TS_SAMPLER_MAX_LOGPROBS */
    ts_logprobs_mode logprobs_mode; /* default TS_LOGPROBS_PROCESSED */
    bool temperature_last;          /* true: llama.cpp order (filters, then temperature) */
} ts_sampler_params;

/* The defaults listed above (vLLM/OpenAI neutral settings: plain sampling at temperature 1). */
ts_sampler_params ts_sampler_params_default(void);

typedef struct ts_token_logprob {
    int32_t token;
    float logprob; /* natural log, <= 0 */
} ts_token_logprob;

/* The chosen token's log-probability and the best alternatives. */
typedef struct ts_sample_info {
    int32_t token; /* the chosen token */
    float logprob; /* its logprob */
    int32_t rank;  /* 1 + number of tokens with a strictly larger logit (vLLM's rank) */
    int32_t n_top; /* entries in top: min(n_logprobs, tokens with finite logit) */
    ts_token_logprob top[TS_SAMPLER_MAX_LOGPROBS]; /* by logprob descending, then id */
} ts_sample_info;

typedef enum ts_finish_reason {
    TS_FINISH_NONE = 0,   /* still generating */
    TS_FINISH_STOP = 1,   /* end-of-generation token or a stop string */
    TS_FINISH_LENGTH = 2, /* max_tokens or the context was reached */
    TS_FINISH_ABORT = 3,  /* ts_context_abort */
    TS_FINISH_ERROR = 4,  /* see the event's message */
} ts_finish_reason;

const char *ts_finish_reason_name(ts_finish_reason r); /* "stop", "length", ... */

/* How a TS_FINISH_ERROR message begins when the output stopped because the request's grammar
 * or schema keeps more alternatives open at once than the matcher holds (its stack limit). */
#define TS_GRAMMAR_LIMIT_PREFIX "grammar limit: "

/* What a request's callback receives. Pointers are valid during the callback only. */
typedef struct ts_engine_event {
    uint64_t request_id;
    int32_t index;    /* which of the request's n sequences (0..n-1) */
    int32_t token;    /* the token generated, or -1 for a final event without one */
    const char *text; /* new text of this sequence (UTF-8, never a partial character,
                         held back while it could begin a stop string); may be empty */
    size_t text_len;
    const ts_sample_info *logprobs; /* when the request asked for logprobs, else NULL */
    ts_finish_reason finish;        /* set on the last event of this sequence */
    bool request_done;              /* last event of the whole request */
    int32_t prompt_tokens;          /* usage: prompt length */
    int32_t cached_tokens;          /* prompt tokens the prefix cache supplied */
    int32_t completion_tokens;      /* tokens generated so far by this sequence */
    const char *message;            /* error text when finish == TS_FINISH_ERROR */
    /* (an error message beginning with TS_GRAMMAR_LIMIT_PREFIX: the output stopped at the
     * grammar matcher's limit, the request's constraint being too wide; a client error) */
    int32_t stop_index; /* finish == TS_FINISH_STOP by a stop string: its index in
                           ts_request_params.stop; -1 otherwise (an end-of-generation token) */
} ts_engine_event;

typedef void (*ts_engine_callback)(const ts_engine_event *ev, void *user);

#define TS_ENGINE_MAX_STOP 16
/* The most tokens speculative decoding drafts for a sequence in one step. */
#define TS_ENGINE_MAX_DRAFT 64

/* What constrains a request's output (docs/grammar.md). The output is a sentence of the
 * grammar: before each token the tokens that would leave it are masked (also for greedy
 * decoding, after logit bias and penalties), and end-of-generation tokens are allowed only
 * where the output is complete; one ends the sequence even with ignore_eos. Stop strings and
 * max_tokens still cut the output short. */
typedef enum ts_grammar_kind {
    TS_GRAMMAR_NONE = 0,
    TS_GRAMMAR_GBNF = 1,        /* grammar: GBNF text (llama.cpp's format), start rule "root" */
    TS_GRAMMAR_JSON_SCHEMA = 2, /* grammar: a JSON Schema (JSON text); the output is compact or
                                   whitespace-separated JSON that the schema accepts */
    TS_GRAMMAR_JSON_OBJECT = 3, /* any JSON object (grammar unused) */
} ts_grammar_kind;

typedef struct ts_request_params {
    ts_sampler_params sampling;
    uint64_t seed; /* used when has_seed; otherwise a fresh seed per request */
    bool has_seed;
    int32_t max_tokens;      /* 0: up to the context */
    int32_t n;               /* parallel samples, >= 1 */
    bool ignore_eos;         /* keep generating past end-of-generation tokens */
    bool render_special;     /* include special tokens' text in the output text */
    const char *const *stop; /* stop strings (copied at submit), n_stop <= TS_ENGINE_MAX_STOP */
    int32_t n_stop;
    bool logprobs;          /* report ts_sample_info with each token */
    const void *cache_salt; /* prefix-cache namespace (copied), may be NULL */
    size_t cache_salt_len;
    ts_grammar_kind grammar_kind; /* TS_GRAMMAR_NONE: unconstrained */
    const char *grammar;          /* GBNF or JSON Schema text (compiled at submit, not kept);
                                     a grammar that does not compile fails the submit with
                                     TS_ERR_FORMAT, TS_ERR_UNSUPPORTED or TS_ERR_LIMIT and the
                                     compiler's message */
    size_t grammar_len;           /* bytes of grammar; 0: strlen(grammar) */
    /* Stopping the grammar compile at submit (untrusted grammars and schemas can be costly):
     * cancel(cancel_user) returning nonzero stops it (TS_ERR_ABORTED, e.g. the client left or
     * the server shuts down); past compile_timeout_ms it stops with TS_ERR_LIMIT. cancel may
     * be NULL; compile_timeout_ms 0: no time limit. */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
    int64_t compile_timeout_ms;
    /* Speculative decoding for this request (docs/speculative.md): 0 = the context's setting,
     * < 0 = none, > 0 = at most this many drafted tokens a step (never more than the context's
     * draft_max; a context without speculation drafts nothing). The output is the same either
     * way: only the speed changes. */
    int32_t draft_max;
} ts_request_params;

/* Default sampling, n = 1, no limits beyond the context. */
ts_request_params ts_request_params_default(void);

/* ---- constraints on their own ---------------------------------------------------------------
 *
 * What a constrained request does inside the engine, by hand: a grammar compiled against a
 * model's vocabulary, a position in it, the mask of tokens that may come next. For tools that
 * measure or test grammars (`tessera grammar bench`) and for callers that sample themselves
 * (with ts_context_decode). The first ts_constraint_create of an llm builds its vocabulary's
 * token trie (tens of ms for 50k tokens, about 0.1 s for 262k), which later calls share.
 *
 * Thread safety: a ts_constraint is used by one thread at a time; different constraints of one
 * llm may be used on different threads. */

typedef struct ts_constraint ts_constraint;

/* Compiles text (GBNF or a JSON Schema by kind, len bytes, 0: strlen; unused for
 * TS_GRAMMAR_JSON_OBJECT) for llm's vocabulary, positioned at the start. Errors as for a
 * constrained ts_context_submit: TS_ERR_FORMAT, TS_ERR_UNSUPPORTED (a schema keyword the
 * compiler does not handle, named with its JSON pointer), TS_ERR_LIMIT. The llm must outlive
 * the constraint. */
ts_status ts_constraint_create(ts_llm *llm, ts_grammar_kind kind, const char *text, size_t len,
                               ts_constraint **out, ts_error *err);
void ts_constraint_destroy(ts_constraint *c);
/* Back to the start (and the matcher's caches emptied, as for a new sequence). */
ts_status ts_constraint_reset(ts_constraint *c, ts_error *err);
/* Sets bit t of allowed[(ts_llm_n_vocab + 31) / 32] exactly when token t may come next
 * (end-of-generation tokens when the output so far is complete). Returns how many may. */
int32_t ts_constraint_mask(ts_constraint *c, uint32_t *allowed);
/* Advances over a token; 0 (and the position unchanged) when the grammar does not allow it. */
int ts_constraint_accept(ts_constraint *c, int32_t token);
/* Nonzero when the output so far is a complete sentence of the grammar. */
int ts_constraint_is_accepting(const ts_constraint *c);

/* The GBNF text (NUL-terminated, released with ts_free) that a JSON Schema compiles to, start
 * rule "root", for building larger grammars around a schema: its other rules are named "ws",
 * "value", "object", "string", ... and "s-..." / "ref-..."; only the definition of "root" names
 * root, so renaming that one line makes the schema a rule of another grammar. Errors as for
 * TS_GRAMMAR_JSON_SCHEMA. */
ts_status ts_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, ts_error *err);

typedef struct ts_engine_stats {
    int64_t n_running;  /* sequences in the running set */
    int64_t n_waiting;  /* sequences waiting (new or preempted) */
    int64_t n_requests; /* requests not finished */
    uint64_t n_steps;
    uint64_t n_preemptions;
    uint64_t prompt_tokens; /* prompt tokens computed (excluding prefix-cache hits) */
    uint64_t generated_tokens;
    uint32_t kv_blocks_total;
    uint32_t kv_blocks_used;
    uint64_t prefix_query_tokens;
    uint64_t prefix_hit_tokens;
    uint32_t kv_swa_blocks_total; /* the sliding-window layers' pool (0: none, see swa_full) */
    uint32_t kv_swa_blocks_used;
    uint64_t grammar_masks; /* token masks computed for constrained sequences */
    double grammar_mask_ms; /* their computing time, summed over the mask threads */
    double grammar_wait_ms; /* time steps waited for masks after the forward pass (what
                               constraints added to step time) */
    uint64_t spec_drafted;  /* speculative decoding: draft tokens verified */
    uint64_t spec_accepted; /* of them, accepted (each one a token gained without its own step) */
    uint64_t spec_steps;    /* verifications: one sequence's drafts checked in one step */
} ts_engine_stats;

/* ---- contexts --------------------------------------------------------------------------------
 *
 * A ts_context runs a ts_llm: a compute backend chosen by name, functional overrides, the
 * debugging hooks, tensor parallelism (threads in this process or one MPI process per shard),
 * the paged KV cache and the continuous-batching engine. It is used in one of two ways, chosen
 * by the first call (mixing them is TS_ERR_STATE):
 *
 *  - requests: ts_context_submit queues a prompt with sampling parameters, stop conditions and
 *    n; ts_context_step runs one scheduler step for every queued and running request together
 *    (chunked prefill, preemption, prefix caching) and reports tokens through each request's
 *    callback. ts_context_generate wraps this for one prompt.
 *  - batches: ts_context_decode computes a batch of {token, pos, seq, logits wanted} over the
 *    context's KV cache, as llama_decode does; ts_context_logits / ts_context_embeddings read
 *    the rows asked for; sequences are dropped, forked and cleared by id.
 *
 * Thread safety: ts_context_submit, ts_context_abort, ts_context_wait, ts_context_wake,
 * ts_context_has_work, ts_context_get_stats and the read-only ts_context_get_info,
 * ts_context_llm and ts_context_chat_prompt may be called from any thread; everything else from
 * one thread at a time (the one that steps). Callbacks run inside ts_context_step on the
 * stepping thread; they may submit or abort but must not step. The ts_llm_* text functions
 * (tokenize, detokenize, token pieces, chat prompts) read the model only and may run on any
 * thread at any time.
 */

typedef struct ts_context ts_context;

typedef struct ts_context_params {
    /* compute */
    const char *backend;          /* "cpu" (default), "ref" (the scalar reference), "cuda" (an
                                     NVIDIA GPU; needs a build with -DTS_CUDA=ON) or "auto" (cuda
                                     when a CUDA device is present, else cpu) */
    int device;                   /* cuda: the device ordinal (0 = the first GPU) */
    int n_threads;                /* CPU threads, all shards together; 0: physical cores */
    int retune;                   /* nonzero: measure the CPU's matrix kernels again instead of
                                     reading the cached choice (see ts_context_info.kernels) */
    int no_repack;                /* nonzero: never repack weights into the layout the CPU's fast
                                     kernels read; they stay in the file mapping (less load time,
                                     same results, slower where repacking measured faster) */
    const char *const *overrides; /* [n_overrides] "family=name", applied after the model's own
                                     tessera.overrides (borrowed during create) */
    int n_overrides;
    /* tensor parallelism */
    int tp;     /* shards in this process, each with n_threads / tp (0, 1: off) */
    int tp_mpi; /* nonzero: one shard per MPI process (run under mpirun) */
    /* KV cache and batching */
    int64_t n_ctx;             /* tokens per sequence; 0: min(training context, 4096) */
    int64_t kv_tokens;         /* KV cache capacity in tokens; 0: from kv_bytes, else n_ctx */
    int64_t kv_bytes;          /* KV memory budget (all shards together); 0: see kv_tokens */
    const char *kv_type;       /* KV cache type of K and V both: "f16" (default), "bf16", "f32",
                                  "q8_0", "q5_0" or "q4_0" (the block types quantize each
                                  [head_dim] row in blocks of 32: head_dim must be a multiple) */
    const char *kv_type_k;     /* K cache type, the same names; NULL: kv_type. Quantized K costs
                                  more accuracy than quantized V (q8_0 K with q4_0 V is a common
                                  choice) */
    const char *kv_type_v;     /* V cache type; NULL: kv_type. An unknown name, a block type the
                                  model's head_dim does not allow, or a type the backend cannot
                                  run fails ts_context_create naming the option (kv-type,
                                  cache-type-k, cache-type-v), the type and the head size */
    int64_t max_seqs;          /* sequences computed together; 0: 16 */
    int64_t max_batch_tokens;  /* tokens per step; 0: 512 */
    int64_t max_outputs;       /* rows of logits per step; 0: max_seqs (ts_context_decode of a
                                  whole window for perplexity wants max_batch_tokens) */
    int64_t max_queue;         /* requests waiting before submit says TS_ERR_LIMIT; 0: none */
    int no_prefix_cache;       /* nonzero: never reuse cached prompt prefixes */
    int swa_full;              /* nonzero: sliding-window layers (Gemma 2/3) keep the whole
                                  context like the others. By default they get a cache sized by
                                  their window, where a sequence keeps only its window's blocks
                                  (same results, far less memory at long contexts) */
    const char *chat_template; /* built-in template name instead of the model's; NULL: model's */
    const char *chat_template_source; /* Jinja template text instead of the model's (copied);
                                         NULL: model's. chat_template wins when both are set */
    /* speculative decoding (docs/speculative.md): the same output, faster where it repeats */
    const char *spec_type; /* "ngram" (drafts from the sequence's own tokens, no extra model),
                              "draft" (drafts from draft_model) or "none"; NULL: "draft" when
                              draft_model is set, else "ngram" when draft_max > 0, else "none" */
    int draft_max;         /* tokens drafted per sequence and step; 0: 16 with spec_type
                              "ngram" or "draft", else off (<= TS_ENGINE_MAX_DRAFT) */
    int draft_min;         /* a shorter draft is not verified; 0: 3 (or draft_max) */
    int spec_ngram_min;    /* n-gram sizes looked up, longest first; 0: 3 and 4 (<= 16) */
    int spec_ngram_max;
    int64_t spec_step_tokens; /* drafts only while a step holds at most this many tokens,
                                 drafts included (a full batch gains nothing from them); 0: 32 */
    const char *draft_model;  /* GGUF file of a smaller model with the target's vocabulary (the
                                 same tokens, texts and BOS/EOS, else TS_ERR_INVALID_ARG naming
                                 the first difference) that drafts greedily on the same backend,
                                 with its own KV cache; NULL: none. Not with tp > 1 */
    float draft_p_min;        /* a model draft ends before a token the draft model gives a
                                 probability below this (0: off, the default) */
    const char *spec_accept;  /* "exact" (default; NULL too): a draft is accepted when it is the
                                 token plain decoding samples there, so outputs are identical
                                 with and without speculation. "rejection": classic rejection
                                 sampling, each token from the same distribution and more drafts
                                 accepted, but sampled outputs differ from plain decoding's */
    /* debugging hooks */
    const char *dump;    /* every node's name, op, shape, checksum to this file ("-":
                            stdout); NULL: off */
    int64_t dump_values; /* ... and its first N values */
    int profile;         /* time per op type and node (ts_context_report) */
    const char *compare; /* "ref": run the reference backend alongside and find the first
                            node whose outputs differ; NULL: off */
    double compare_tol;  /* relative tolerance of compare; 0: 0.05 */
} ts_context_params;

/* Threads a context uses when n_threads is 0: the machine's physical cores. */
int ts_default_threads(void);

/* Zero-initialised parameters mean defaults (ts_context_get_info reports the values chosen);
 * this returns the defaults with the strings spelled out. */
ts_context_params ts_context_params_default(void);

/* Makes the backend, hooks, shards, KV cache and engine. Errors name the parameter and its
 * value (unknown backend or KV type, a context longer than the model allows, a KV budget below
 * one block, an override naming no implementation, a vocabulary-only ts_llm).
 * With tp_mpi, every process of the job calls this: rank 0 gets the context; on ranks > 0 the
 * call serves as a follower shard until rank 0 destroys its context, then returns TS_OK with
 * *out == NULL (the process has nothing more to do). When a rank fails the whole job ends. */
ts_status ts_context_create(ts_llm *llm, const ts_context_params *params, ts_context **out,
                            ts_error *err);
void ts_context_destroy(ts_context *ctx);

/* What a context was made with (after defaults). */
typedef struct ts_context_info {
    const char *backend; /* "cpu", "ref" or "cuda" */
    int n_threads;       /* threads of all shards */
    int tp;              /* shards (1: none) */
    int64_t n_ctx, kv_tokens, max_seqs, max_batch_tokens, max_outputs, block_size;
    const char *kv_type;       /* K and V type: "f16", or "K/V" ("q8_0/q4_0") when they differ */
    const char *kv_type_k;     /* K cache type ("f16", "bf16", "f32", "q8_0", "q5_0", "q4_0") */
    const char *kv_type_v;     /* V cache type */
    uint64_t kv_bytes;         /* KV cache memory of all shards this process holds */
    int64_t kv_swa_tokens;     /* capacity of the sliding-window layers' own cache in tokens,
                                  shared by all sequences (0: none; kv_tokens is then every
                                  layer's) */
    uint64_t kv_swa_bytes;     /* the part of kv_bytes in that cache */
    const char *chat_template; /* the built-in family's name when one is used instead of a
                                  Jinja template, else NULL */
    const char *chat_template_source; /* the Jinja template in use (the model's or
                                   params.chat_template_source), NULL when none; owned by the
                                   context. Tool-call and reasoning formats are read from it */
    const char *chat_template_notice; /* why the model's own template cannot be used (it does
                                   not compile, or the file has none) and what renders instead,
                                   one line; "" when nothing is wrong. Owned by the context */
    double load_ms;                   /* time ts_context_create took */
    /* CPU backend: the instruction-set level of the matrix kernel per weight type of the model,
     * with one activation row / with several (one level per type), e.g. "Q4_1 avx2/avx2"
     * (chosen by measurement, cached per CPU model under the cache directory, TS_CACHE_DIR or
     * XDG_CACHE_HOME/tessera or ~/.cache/tessera; TS_ISA forces one level); "" on other
     * backends. Owned by the context. */
    const char *kernels;
    const char *kernel_notice; /* why the kernel cache file was ignored or not written, one
                                  line; "" when nothing went wrong. Owned by the context. */
    double tune_ms;            /* time spent measuring kernels (0 when all came from cache) */
    uint64_t repacked_bytes;   /* weights repacked at load (all shards; 0: none) */
    double repack_ms;          /* time spent repacking them */
    const char *spec_type;     /* "ngram", "draft" or "none" */
    const char *spec_accept;   /* "exact" or "rejection" */
    const char *draft_model;   /* spec_type "draft": the draft model's file; else NULL */
    int draft_max, draft_min, spec_ngram_min, spec_ngram_max; /* 0s when spec_type is "none" */
    int64_t spec_step_tokens;
} ts_context_info;

void ts_context_get_info(const ts_context *ctx, ts_context_info *out);
const ts_llm *ts_context_llm(const ts_context *ctx);

/* Renders a conversation with the context's chat template (params.chat_template or the
 * model's; for a model whose file has none, the built-in family its architecture or turn-marker
 * tokens name, e.g. gemma for Gemma 3, reported in ts_context_info.chat_template and
 * chat_template_notice). TS_ERR_NOT_FOUND when there is none. */
ts_status ts_context_chat_prompt(const ts_context *ctx, const ts_message *msgs, size_t n_msgs,
                                 int add_generation_prompt, char **text, size_t *len,
                                 ts_error *err);

/* ts_llm_chat_render with the context's template (params.chat_template, then
 * params.chat_template_source, then the model's). */
ts_status ts_context_chat_render(const ts_context *ctx, const char *request_json,
                                 size_t request_len, char **text, size_t *len, ts_error *err);
/* ts_context_chat_render with a render's limits and cancel from opt (timeout_ms, max_memory,
 * max_work, cancel, cancel_user, keep_special, now; name and source must be NULL: the context's
 * template is fixed). For untrusted requests (the server renders every chat request this way).
 * opt may be NULL (the engine's default limits). */
ts_status ts_context_chat_render_opt(const ts_context *ctx, const ts_chat_options *opt,
                                     const char *request_json, size_t request_len, char **text,
                                     size_t *len, ts_error *err);

/* The chat profile of a context: what its chat template is and how the model writes tool
 * calls and reasoning, read once from the template when the context is created (the Jinja
 * source is the only description of a model's conventions a GGUF carries). A server or an
 * embedder reads the answer's tool calls and reasoning by it. The tool-call formats:
 *   generic      the whole answer is {"name", "arguments"} (any template not listed below)
 *   hermes       <tool_call>{"name", "arguments"}</tool_call> (Hermes, Qwen 2.5/3, ...)
 *   llama3       {"name", "parameters"} or <|python_tag|> (Llama 3.1-3.3)
 *   mistral      [TOOL_CALLS] ...; deepseek <｜tool▁calls▁begin｜>...; functionary
 *                <function=N>{...}</function>; command-r <|START_ACTION|>...; granite and phi4
 *                <|tool_call|>[...]; firefunction functools[...]; kimi
 *                <|tool_calls_section_begin|>...; harmony (gpt-oss channels)
 * and the reasoning formats: <think>...</think>, [THINK]...[/THINK],
 * <|START_THINKING|>...<|END_THINKING|>, harmony's analysis channel. */
typedef enum ts_chat_tool_format {
    TS_CHAT_TOOLS_GENERIC = 0,
    TS_CHAT_TOOLS_HERMES,
    TS_CHAT_TOOLS_LLAMA3,
    TS_CHAT_TOOLS_MISTRAL,
    TS_CHAT_TOOLS_DEEPSEEK,
    TS_CHAT_TOOLS_FUNCTIONARY,
    TS_CHAT_TOOLS_COMMAND_R,
    TS_CHAT_TOOLS_GRANITE,
    TS_CHAT_TOOLS_PHI4,
    TS_CHAT_TOOLS_FIREFUNCTION,
    TS_CHAT_TOOLS_KIMI,
    TS_CHAT_TOOLS_HARMONY, /* gpt-oss; with TS_CHAT_REASONING_HARMONY */
    TS_CHAT_TOOLS_COUNT,
} ts_chat_tool_format;

typedef enum ts_chat_reasoning_format {
    TS_CHAT_REASONING_NONE = 0,
    TS_CHAT_REASONING_THINK,     /* <think> ... </think> */
    TS_CHAT_REASONING_MISTRAL,   /* [THINK] ... [/THINK] */
    TS_CHAT_REASONING_COMMAND_R, /* <|START_THINKING|> ... <|END_THINKING|> */
    TS_CHAT_REASONING_HARMONY,   /* gpt-oss channels: analysis is reasoning, final content */
    TS_CHAT_REASONING_COUNT,
} ts_chat_reasoning_format;

typedef struct ts_chat_profile {
    const char *renderer; /* "jinja", the built-in family's name ("gemma", ...) or NULL when the
                             context has no chat template; static or owned by the context */
    ts_chat_tool_format tool_format;
    ts_chat_reasoning_format reasoning_format;
    bool renders_tools; /* the Jinja template reads `tools`, so offered tools reach the prompt
                           (otherwise a caller describes them in a system turn) */
} ts_chat_profile;

/* The profile of a Jinja template source (renderer "jinja"; NULL: renderer NULL, generic tool
 * calls, no reasoning). */
ts_chat_profile ts_chat_profile_detect(const char *template_source);
/* The context's profile (computed once at ts_context_create). */
void ts_context_chat_profile(const ts_context *ctx, ts_chat_profile *out);

/* Reading a chat answer back: its content, its reasoning and its tool calls, in the formats of
 * a chat profile, fed incrementally (a stream and the whole answer give the same result, and
 * text that may begin a marker is held back until it is known). Nothing in the text can make
 * it fail other than memory: a call that does not parse stays content. */
typedef enum ts_chat_event_kind {
    TS_CHAT_EVENT_CONTENT = 0,
    TS_CHAT_EVENT_REASONING,
    TS_CHAT_EVENT_TOOL_CALL,
} ts_chat_event_kind;

/* One piece of the answer. Pointers are owned by the parser and valid until its next call. */
typedef struct ts_chat_event {
    ts_chat_event_kind kind;
    const char *text; /* content / reasoning delta: [len] bytes (not NUL-terminated) */
    size_t len;
    int32_t index;         /* tool call: its position in tool_calls */
    const char *id;        /* tool call: "call_<24 alphanumerics>" (mistral: 9 alphanumerics) */
    const char *name;      /* tool call: the function's name */
    const char *arguments; /* tool call: compact JSON text of the arguments */
} ts_chat_event;

typedef struct ts_chat_tool_call {
    char *id, *name, *arguments; /* NUL-terminated, owned by the parser; arguments: compact
                                    JSON text of an object */
} ts_chat_tool_call;

typedef struct ts_chat_parser ts_chat_parser;

typedef struct ts_chat_parser_params {
    ts_chat_tool_format tool_format; /* a profile's (ts_context_chat_profile) */
    ts_chat_reasoning_format reasoning_format;
    const char *tools_json;   /* the offered tools, OpenAI's "tools" array as JSON text (names
                                 for the answer-is-JSON formats, parameter types for the XML
                                 ones); NULL: tool calls are not parsed */
    bool parallel_tool_calls; /* false: only the first call is kept */
    bool reasoning_open;      /* the prompt ends inside the reasoning (see below) */
    uint64_t id_seed;         /* tool-call ids are derived from it */
} ts_chat_parser_params;

/* A parser (tools_json must be a JSON array: TS_ERR_FORMAT otherwise). */
ts_status ts_chat_parser_create(const ts_chat_parser_params *params, ts_chat_parser **out,
                                ts_error *err);
void ts_chat_parser_destroy(ts_chat_parser *p);
/* The next piece of generated text (UTF-8 characters may be split across pieces). */
ts_status ts_chat_parser_feed(ts_chat_parser *p, const char *text, size_t len, ts_error *err);
/* The answer ended: held-back text is released, an open tool call is parsed as it stands. */
ts_status ts_chat_parser_finish(ts_chat_parser *p, ts_error *err);
/* Events since the last ts_chat_parser_clear (what a stream sends). */
size_t ts_chat_parser_events(ts_chat_parser *p, const ts_chat_event **events);
void ts_chat_parser_clear(ts_chat_parser *p);
/* The answer so far (NUL-terminated, "" when none; valid until the parser's next call). */
const char *ts_chat_parser_content(const ts_chat_parser *p, size_t *len);
const char *ts_chat_parser_reasoning(const ts_chat_parser *p, size_t *len);
size_t ts_chat_parser_tool_calls(const ts_chat_parser *p, const ts_chat_tool_call **calls);
/* Whether a rendered prompt ends (whitespace aside) with the format's opening reasoning tag, so
 * the answer starts inside the reasoning (DeepSeek R1's generation prompt adds "<think>\n"). */
bool ts_chat_prompt_opens_reasoning(ts_chat_reasoning_format f, const char *prompt, size_t len);

/* -- requests -- */

/* Queues a request. The prompt is copied. Errors (the request is not queued): empty prompt,
 * token ids out of range, prompt + max_tokens beyond the context or beyond what the whole
 * KV cache could ever hold (TS_ERR_LIMIT, with the numbers), invalid sampling parameters,
 * queue full (TS_ERR_LIMIT). On success *id (may be NULL) identifies the request. */
ts_status ts_context_submit(ts_context *ctx, const int32_t *prompt, int32_t n_prompt,
                            const ts_request_params *params, ts_engine_callback cb, void *user,
                            uint64_t *id, ts_error *err);
/* Asks for a request to stop; its callback gets a final TS_FINISH_ABORT event during the next
 * step. Unknown or finished ids are ignored. */
void ts_context_abort(ts_context *ctx, uint64_t id);
/* Runs one step. *busy (may be NULL) tells whether there was anything to do. An error here
 * is the engine's own (the requests in the step are finished with TS_FINISH_ERROR). */
ts_status ts_context_step(ts_context *ctx, bool *busy, ts_error *err);
/* Blocks until a request or abort arrives, or timeout_ms passes (< 0: forever). */
void ts_context_wait(ts_context *ctx, int timeout_ms);
/* Wakes a thread blocked in ts_context_wait. */
void ts_context_wake(ts_context *ctx);
/* True when requests are queued or running. */
bool ts_context_has_work(ts_context *ctx);
/* A snapshot taken at the end of the last step (zeros in batch use). */
void ts_context_get_stats(ts_context *ctx, ts_engine_stats *out);

typedef struct ts_generate_params {
    int32_t max_tokens;       /* 0: up to the context */
    float temperature;        /* 0: greedy */
    int32_t top_k;            /* 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    float repetition_penalty; /* 1: off */
    uint64_t seed;
    int has_seed;            /* 0: a fresh random seed */
    const char *const *stop; /* stop strings (not included in the output) */
    int32_t n_stop;
    int parse_special; /* parse special-token text in the prompt */
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

/* Tokenizes `prompt` (BOS as the model wants), submits it, steps until it is done and calls cb
 * (may be NULL) per token. result may be NULL. Errors: as ts_context_submit. */
ts_status ts_context_generate(ts_context *ctx, const char *prompt, const ts_generate_params *gp,
                              ts_token_callback cb, void *user, ts_generate_result *result,
                              ts_error *err);

/* -- batches -- */

/* One decode call's tokens, as parallel arrays (borrowed for the call). Within a sequence the
 * positions continue where its cache ends (pos == ts_context_seq_len before the call, then +1
 * for each later token of the same sequence in the batch). */
typedef struct ts_decode_batch {
    int32_t n_tokens;      /* 1..max_batch_tokens */
    const int32_t *tokens; /* [n_tokens] token ids */
    const int32_t *pos;    /* [n_tokens] positions; NULL: each sequence's next positions */
    const int32_t *seq;    /* [n_tokens] sequence ids in [0, max_seqs); NULL: all sequence 0 */
    const int8_t *logits;  /* [n_tokens] nonzero: logits of this token wanted (at most
                              max_outputs); NULL: the last token's only */
} ts_decode_batch;

/* Computes the batch, appending every token to its sequence's KV cache. Errors leave the
 * cache as it was: a position that does not continue its sequence, a sequence id out of range,
 * more tokens or outputs than the context was made for, a sequence past n_ctx, the KV cache
 * full (TS_ERR_LIMIT). */
ts_status ts_context_decode(ts_context *ctx, const ts_decode_batch *batch, ts_error *err);
/* Logits [n_vocab] of token i of the last decoded batch (i < 0 counts from the end), or NULL
 * when that token's logits were not asked for. Valid until the next decode. */
const float *ts_context_logits(ts_context *ctx, int32_t i);
/* The final hidden state [n_embd] (after the output norm) of token i, as ts_context_logits. */
const float *ts_context_embeddings(ts_context *ctx, int32_t i);
/* Tokens in sequence seq's cache (0 for an empty or unknown sequence). */
int32_t ts_context_seq_len(const ts_context *ctx, int32_t seq);
/* Removes sequence seq (its blocks return to the pool unless another sequence shares them). */
ts_status ts_context_seq_drop(ts_context *ctx, int32_t seq, ts_error *err);
/* Makes dst a copy of src sharing src's blocks (copy-on-write); dst must be empty. */
ts_status ts_context_seq_fork(ts_context *ctx, int32_t src, int32_t dst, ts_error *err);
/* Drops every sequence of batch use; the context may then serve requests or batches again.
 * Does nothing to a context used for requests. */
void ts_context_clear(ts_context *ctx);

/* -- embeddings -- */

/* How token vectors become one vector per input (the values of GGUF's <arch>.pooling_type). */
typedef enum ts_pooling {
    TS_POOLING_MODEL = -1, /* the model's (ts_llm_info.pooling) */
    TS_POOLING_NONE = 0,   /* no pooling: one vector per token */
    TS_POOLING_MEAN = 1,   /* the mean of the input's token vectors */
    TS_POOLING_CLS = 2,    /* the first token's ([CLS] for BERT) */
    TS_POOLING_LAST = 3,   /* the last token's (decoder embedding models) */
} ts_pooling;

/* "none", "mean", "cls", "last" ("model" for TS_POOLING_MODEL); NULL for other values. */
const char *ts_pooling_name(ts_pooling p);
/* The pooling named name (as ts_pooling_name); TS_ERR_INVALID_ARG for another name. */
ts_status ts_pooling_parse(const char *name, ts_pooling *out, ts_error *err);

typedef struct ts_embed_params {
    ts_pooling pooling; /* default TS_POOLING_MODEL */
    int normalize;      /* nonzero (default): each vector divided by its L2 norm */
} ts_embed_params;

ts_embed_params ts_embed_params_default(void);

/* The final hidden state of every token of each input (an encoder's last block, a decoder's
 * after its output norm), pooled. inputs[i] holds n_tokens[i] token ids (tokenize with
 * add_special: BERT's [CLS] ... [SEP]); n_inputs >= 1. out (caller-owned) receives
 * [n_inputs][n_embd] floats, or for TS_POOLING_NONE [n_tokens[0] + ... ][n_embd] (every
 * token's vector, inputs in order). Inputs are computed together in steps of the context's
 * batch size; an encoder's input must fit one step (max_batch_tokens) and its position table.
 * Uses the request engine's KV cache between steps: call it on the stepping thread (the one
 * that calls ts_context_step), never in a callback; running requests keep their blocks, and
 * when too few are free the call fails with TS_ERR_LIMIT (retry after steps). Errors: empty
 * input, ids out of range, an input longer than the context (TS_ERR_LIMIT), a context used
 * for batches (TS_ERR_STATE). */
ts_status ts_context_embed(ts_context *ctx, const int32_t *const *inputs, const int32_t *n_tokens,
                           int32_t n_inputs, const ts_embed_params *params, float *out,
                           ts_error *err);

/* -- debugging -- */

/* The first node where the compare hook saw the backend differ from the reference. */
typedef struct ts_divergence {
    int node;       /* graph node index (nodes before it agreed) */
    char name[64];  /* the node's tensor name */
    const char *op; /* the op's name (static) */
    double max_abs, max_rel;
    int64_t index; /* element with the largest relative error */
    int compared;  /* nodes compared in the last step */
} ts_divergence;

/* Traffic of this process's rank 0 in the tensor-parallel group (zeros without one). */
typedef struct ts_tp_stats {
    int size;              /* ranks (1: no tensor parallelism) */
    const char *transport; /* "local", "mpi", ... (static); NULL without a group */
    uint64_t all_reduce_calls, all_gather_calls;
    uint64_t payload_bytes; /* bytes rank 0 contributed to reductions and gathers */
    uint64_t wire_bytes;    /* ring-algorithm bytes per rank for the same collectives */
} ts_tp_stats;

void ts_context_get_tp_stats(const ts_context *ctx, ts_tp_stats *out);

/* True (and *out filled, when not NULL) once a compare context has seen a divergence. */
bool ts_context_diverged(const ts_context *ctx, ts_divergence *out);
/* Prints what the hooks gathered (profile tables, the compare verdict) and, under tensor
 * parallelism, the collectives' traffic. Nothing when no hook is on. */
void ts_context_report(const ts_context *ctx, FILE *f);

/* ---- the OpenAI-compatible HTTP server ------------------------------------------------------
 *
 * Serves one context (borrowed; it must outlive the server) over HTTP: POST /v1/completions,
 * POST /v1/chat/completions (JSON or SSE streams), GET /v1/models, GET /health, GET /metrics,
 * POST /tokenize, POST /detokenize and GET / (the chat page). HTTP threads parse, tokenize and
 * submit; one engine thread owned by the server steps the context for all requests together.
 * A client that disconnects has its request aborted. See docs/server.md.
 *
 * Lifecycle: create -> start -> (serve) -> shutdown -> destroy, from one controlling thread.
 */

typedef struct ts_server_config {
    const char *host;         /* address to bind (default "127.0.0.1"); copied */
    int port;                 /* 0: any free port (see ts_server_port) */
    const char *api_key;      /* NULL: no authentication; copied */
    const char *model_name;   /* id reported by /v1/models and expected in bodies; copied */
    size_t max_body;          /* bytes; larger bodies are 413 (default 1 MiB) */
    int max_queue;            /* requests admitted beyond max_seqs before 503 (default 256) */
    int conn_timeout_s;       /* a connection making no progress (a stalled upload, a client not
                                 reading its answer) is closed after this (default 60) */
    int header_timeout_s;     /* a request header must arrive within this many seconds of the
                                 connect or of the previous answer (default 5; 0: only
                                 conn_timeout_s) */
    int max_connections;      /* open connections; beyond it a client is answered 503 (default
                                 1024) */
    int max_conns_per_ip;     /* open connections per client address beyond which it is answered
                                 503 (default 0: no cap) */
    const char *cors_origins; /* origins allowed cross-origin access, comma-separated, "*" for
                                 any; NULL: no CORS headers (default); copied */
    FILE *log;                /* one line per request; NULL: silent */
    /* Chat-template renders and grammar compiles run on the request's thread before
     * admission; these bound them (0: the default). */
    size_t render_memory;   /* bytes all renders in flight may hold together; each reserves
                               min(render_memory, 64 MiB) or waits up to 2 s, then 503
                               (default 512 MiB) */
    int render_timeout_ms;  /* wall-clock limit of one render (default 10000) */
    int grammar_timeout_ms; /* wall-clock limit of one grammar / schema compile (default
                               5000) */
    /* OpenAI Responses: responses kept for GET /v1/responses/{id} and previous_response_id,
     * the oldest dropped first beyond either bound (0 count: none kept). */
    int responses_max;          /* stored responses (default 1000) */
    size_t responses_max_bytes; /* bytes they hold together (default 64 MiB) */
} ts_server_config;

ts_server_config ts_server_config_default(void);

typedef struct ts_server ts_server;

/* Creates a server for a context used for requests (see ts_context). Binds nothing yet. */
ts_status ts_server_create(const ts_server_config *cfg, ts_context *ctx, ts_server **out,
                           ts_error *err);
/* Binds the socket and starts the engine thread and the HTTP threads. */
ts_status ts_server_start(ts_server *s, ts_error *err);
/* The bound port (useful with port 0); 0 before start. */
int ts_server_port(const ts_server *s);
/* Stops accepting, waits up to grace_ms for admitted requests, aborts the rest, stops the
 * engine thread and the HTTP daemon. Safe to call once after start. */
void ts_server_shutdown(ts_server *s, int grace_ms);
/* Frees the server (shuts it down first when still running). NULL is a no-op. */
void ts_server_destroy(ts_server *s);

/* ---- GGUF files and quantization ------------------------------------------------------------
 *
 * The GGUF reader: a file's header, metadata and tensor table, read straight from the mapped
 * file. The format and the checks made on it are described in src/gguf/gguf.h; the reader
 * treats every file as untrusted, so a malformed one is answered with a status and a message
 * naming the item and its byte offset, never a crash.
 *
 * Ownership: a ts_gguf owns its mapping (or borrows the caller's buffer, for
 * ts_gguf_open_memory) and every pointer it hands out (keys, strings, arrays, tensor
 * descriptions and data); they stay valid until ts_gguf_close.
 * Thread safety: a ts_gguf is immutable after open and may be read from several threads. The
 * type tables (ts_type_*, ts_gguf_type_name) are constant data.
 */

/* Tensor element types: the ids GGUF files store (ggml's enumeration; ids ggml retired are
 * absent and rejected). A row of ne[0] elements is packed in blocks of ts_type_block_size
 * elements of ts_type_block_bytes bytes each, so ne[0] must be a multiple of the block size. */
typedef enum ts_type {
    TS_TYPE_F32 = 0,
    TS_TYPE_F16 = 1,
    TS_TYPE_Q4_0 = 2,
    TS_TYPE_Q4_1 = 3,
    TS_TYPE_Q5_0 = 6,
    TS_TYPE_Q5_1 = 7,
    TS_TYPE_Q8_0 = 8,
    TS_TYPE_Q8_1 = 9,
    TS_TYPE_Q2_K = 10,
    TS_TYPE_Q3_K = 11,
    TS_TYPE_Q4_K = 12,
    TS_TYPE_Q5_K = 13,
    TS_TYPE_Q6_K = 14,
    TS_TYPE_Q8_K = 15,
    TS_TYPE_IQ2_XXS = 16,
    TS_TYPE_IQ2_XS = 17,
    TS_TYPE_IQ3_XXS = 18,
    TS_TYPE_IQ1_S = 19,
    TS_TYPE_IQ4_NL = 20,
    TS_TYPE_IQ3_S = 21,
    TS_TYPE_IQ2_S = 22,
    TS_TYPE_IQ4_XS = 23,
    TS_TYPE_I8 = 24,
    TS_TYPE_I16 = 25,
    TS_TYPE_I32 = 26,
    TS_TYPE_I64 = 27,
    TS_TYPE_F64 = 28,
    TS_TYPE_IQ1_M = 29,
    TS_TYPE_BF16 = 30,
    TS_TYPE_TQ1_0 = 34,
    TS_TYPE_TQ2_0 = 35,
    TS_TYPE_MXFP4 = 39,
    TS_TYPE_COUNT = 40, /* one past the largest id; not every id below it is valid */
} ts_type;

/* True when id names a type in the table above. */
bool ts_type_valid(uint32_t id);
/* Name as users know it ("Q4_K", "F16"; static), or NULL for an invalid id. */
const char *ts_type_name(uint32_t id);
/* Looks a type up by name, case-insensitively; false when unknown. */
bool ts_type_from_name(const char *name, ts_type *out);
/* Elements per block (1 for plain scalar types); 0 for an invalid id. */
size_t ts_type_block_size(uint32_t id);
/* Bytes per block; 0 for an invalid id. */
size_t ts_type_block_bytes(uint32_t id);
/* Bytes of a row of n elements. False when n is not a multiple of the block size, the id is
 * invalid, or the size does not fit size_t. */
bool ts_type_row_bytes(uint32_t id, uint64_t n, size_t *out);

#define TS_GGUF_MAX_DIMS 4

/* Metadata value types. */
typedef enum ts_gguf_type {
    TS_GGUF_UINT8 = 0,
    TS_GGUF_INT8 = 1,
    TS_GGUF_UINT16 = 2,
    TS_GGUF_INT16 = 3,
    TS_GGUF_UINT32 = 4,
    TS_GGUF_INT32 = 5,
    TS_GGUF_FLOAT32 = 6,
    TS_GGUF_BOOL = 7,
    TS_GGUF_STRING = 8,
    TS_GGUF_ARRAY = 9,
    TS_GGUF_UINT64 = 10,
    TS_GGUF_INT64 = 11,
    TS_GGUF_FLOAT64 = 12,
    TS_GGUF_TYPE_COUNT = 13,
} ts_gguf_type;

/* Name of a value type ("uint32", "string", ...; static), or "invalid". */
const char *ts_gguf_type_name(uint32_t type);

/* A string inside the file: not NUL-terminated, may hold any bytes. */
typedef struct ts_gguf_str {
    const char *ptr; /* points into the file's bytes; owned by the ts_gguf */
    uint64_t len;
} ts_gguf_str;

/* An array value. For fixed-size element types, `data` holds `n` packed little-endian
 * elements (possibly unaligned: read them with ts_gguf_array_int/float or memcpy). For STRING
 * and ARRAY elements use ts_gguf_array_str / ts_gguf_array_arr. */
typedef struct ts_gguf_array {
    ts_gguf_type type; /* element type */
    uint64_t n;        /* element count */
    const void *data;  /* first element's bytes in the file; owned by the ts_gguf */
    const void *index; /* reader-private lookup for variable-size elements; do not touch */
} ts_gguf_array;

/* One tensor's description, in file order. */
typedef struct ts_gguf_tensor {
    const char *name;             /* NUL-terminated copy, owned by the ts_gguf */
    ts_type type;                 /* element type (validated) */
    uint32_t n_dims;              /* 1..TS_GGUF_MAX_DIMS */
    int64_t ne[TS_GGUF_MAX_DIMS]; /* [ne0 (fastest), ne1, ne2, ne3]; unused dims are 1 */
    uint64_t n_elements;          /* product of ne */
    uint64_t offset;              /* byte offset relative to the data section */
    size_t nbytes;                /* bytes the tensor's data occupies */
    const void *data;             /* zero-copy pointer into the mapping, owned by the ts_gguf */
} ts_gguf_tensor;

typedef struct ts_gguf ts_gguf;

/* Maps and parses a file. On failure *out is NULL and err says what and where. */
ts_status ts_gguf_open(const char *path, ts_gguf **out, ts_error *err);
/* Parses a buffer the caller owns; the buffer must outlive the returned ts_gguf. */
ts_status ts_gguf_open_memory(const void *data, size_t size, ts_gguf **out, ts_error *err);
/* Releases the mapping and everything handed out; NULL is allowed. */
void ts_gguf_close(ts_gguf *g);

uint32_t ts_gguf_version(const ts_gguf *g);
size_t ts_gguf_alignment(const ts_gguf *g);
size_t ts_gguf_file_size(const ts_gguf *g);
size_t ts_gguf_data_offset(const ts_gguf *g); /* byte offset of the data section in the file */

/* -- metadata -- */

uint64_t ts_gguf_kv_count(const ts_gguf *g);
/* Key of entry i (NUL-terminated copy owned by g), or NULL when i is out of range. */
const char *ts_gguf_kv_key(const ts_gguf *g, uint64_t i);
/* Value type of entry i, or TS_GGUF_TYPE_COUNT when i is out of range. */
ts_gguf_type ts_gguf_kv_type(const ts_gguf *g, uint64_t i);
/* Index of `key`; TS_ERR_NOT_FOUND when absent. */
ts_status ts_gguf_find_key(const ts_gguf *g, const char *key, uint64_t *index);

/* Typed getters by key. Each returns TS_ERR_NOT_FOUND when the key is absent and TS_ERR_TYPE
 * (message: key, expected and actual type) when the stored type differs. */
ts_status ts_gguf_get_u8(const ts_gguf *g, const char *key, uint8_t *out, ts_error *err);
ts_status ts_gguf_get_i8(const ts_gguf *g, const char *key, int8_t *out, ts_error *err);
ts_status ts_gguf_get_u16(const ts_gguf *g, const char *key, uint16_t *out, ts_error *err);
ts_status ts_gguf_get_i16(const ts_gguf *g, const char *key, int16_t *out, ts_error *err);
ts_status ts_gguf_get_u32(const ts_gguf *g, const char *key, uint32_t *out, ts_error *err);
ts_status ts_gguf_get_i32(const ts_gguf *g, const char *key, int32_t *out, ts_error *err);
ts_status ts_gguf_get_u64(const ts_gguf *g, const char *key, uint64_t *out, ts_error *err);
ts_status ts_gguf_get_i64(const ts_gguf *g, const char *key, int64_t *out, ts_error *err);
ts_status ts_gguf_get_f32(const ts_gguf *g, const char *key, float *out, ts_error *err);
ts_status ts_gguf_get_f64(const ts_gguf *g, const char *key, double *out, ts_error *err);
ts_status ts_gguf_get_bool(const ts_gguf *g, const char *key, bool *out, ts_error *err);
ts_status ts_gguf_get_str(const ts_gguf *g, const char *key, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_get_array(const ts_gguf *g, const char *key, ts_gguf_array *out, ts_error *err);

/* Lenient getters for model hyperparameters, whose integer width varies between writers: any
 * integer type whose value fits is accepted (TS_ERR_RANGE when it does not); the float getter
 * accepts float32 and float64. */
ts_status ts_gguf_get_int(const ts_gguf *g, const char *key, int64_t *out, ts_error *err);
ts_status ts_gguf_get_float(const ts_gguf *g, const char *key, double *out, ts_error *err);

/* Getters by entry index (for iteration). */
ts_status ts_gguf_kv_str(const ts_gguf *g, uint64_t i, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_kv_array(const ts_gguf *g, uint64_t i, ts_gguf_array *out, ts_error *err);
/* Raw bytes of the scalar value of entry i (1..8 bytes, little-endian, owned by g);
 * TS_ERR_TYPE for strings and arrays. */
ts_status ts_gguf_kv_scalar(const ts_gguf *g, uint64_t i, const void **bytes, ts_error *err);

/* Array element access; TS_ERR_RANGE for i >= n, TS_ERR_TYPE for the wrong element type. */
ts_status ts_gguf_array_str(const ts_gguf_array *a, uint64_t i, ts_gguf_str *out, ts_error *err);
ts_status ts_gguf_array_arr(const ts_gguf_array *a, uint64_t i, ts_gguf_array *out, ts_error *err);
/* Element i of a numeric or bool array converted to int64/double (TS_ERR_TYPE for strings,
 * arrays, and for float elements in the int accessor). */
ts_status ts_gguf_array_int(const ts_gguf_array *a, uint64_t i, int64_t *out, ts_error *err);
ts_status ts_gguf_array_float(const ts_gguf_array *a, uint64_t i, double *out, ts_error *err);

/* -- tensors -- */

uint64_t ts_gguf_tensor_count(const ts_gguf *g);
/* Tensor i in file order (owned by g), or NULL when out of range. */
const ts_gguf_tensor *ts_gguf_tensor_at(const ts_gguf *g, uint64_t i);
/* Tensor by name (owned by g); TS_ERR_NOT_FOUND when absent. */
ts_status ts_gguf_find_tensor(const ts_gguf *g, const char *name, const ts_gguf_tensor **out);

/* -- quantization -- */

/* How ts_quantize_file converts a model. Everything is borrowed for the call. */
typedef struct ts_quantize_params {
    /* Target, case-insensitive: a tensor type (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL
     * IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K MXFP4) or a mix (Q4_K_M, Q5_K_M); ts_quantize_type_name lists
     * them. */
    const char *type;
    /* Nonzero: every quantizable matrix gets exactly `type` (no per-tensor rules, no fallback;
     * a row the block size does not divide is an error naming the tensor). */
    int pure;
    /* Called after each tensor is written with the tensor's name and the input bytes done so
     * far out of the total; may be NULL. */
    void (*progress)(void *user, const char *tensor, uint64_t done_bytes, uint64_t total_bytes);
    /* Called with a one-line note (no newline) when a tensor gets another type than the rules
     * asked for, before anything is written; may be NULL. */
    void (*note)(void *user, const char *msg);
    void *user; /* passed to progress and note */
    /* Out, may be NULL: [TS_TYPE_COUNT] tensors written per ts_type, filled on success. */
    uint64_t *n_by_type;
    /* Threads converting each tensor's rows (0: ts_default_threads()). The output's bytes do not
     * depend on it: every row is converted on its own. */
    int n_threads;
} ts_quantize_params;

/* Writes a copy of the F32/F16/BF16 model at in_path to out_path with its weights converted
 * as params asks, by llama-quantize's rules (the tensor data is byte-identical to its output
 * without an importance matrix):
 *  - 1-D tensors (norms, biases) are written as F32; tensors whose name does not end in
 *    "weight", "*_norm.weight" and "ffn_gate_inp.weight" keep their type;
 *  - output.weight (or token_embd.weight when the embeddings are tied) becomes Q6_K for any
 *    K-quant or 4/5-bit target, Q8_0 when 256 does not divide its rows (a Q8_0 target stays
 *    Q8_0, float targets stay float);
 *  - Q4_K_M / Q5_K_M: attn_v and ffn_down become Q6_K in the first and last eighth of the
 *    layers and in every third layer between; a fused attn_qkv becomes Q5_K / Q6_K;
 *  - IQ4_XS (llama-quantize's IQ4_XS file type, general.file_type 30): attn_v (or a fused
 *    attn_qkv) becomes Q5_K when four or more attention heads share a K/V head, ffn_down Q5_K in
 *    the first eighth of the layers; with eight experts attn_v and attn_k become Q8_0 and
 *    attn_output Q5_K; every other matrix IQ4_XS;
 *  - a row length the chosen 256-element type's block does not divide falls back to Q5_0
 *    (Q4_K), Q5_1 (Q5_K), Q8_0 (Q6_K) or IQ4_NL (Q2_K, Q3_K, IQ4_XS);
 *  - MXFP4 follows these rules like the other 4-bit targets (every other matrix MXFP4,
 *    general.file_type 38). llama-quantize knows MXFP4 only as its MXFP4_MOE mix (MoE experts
 *    MXFP4, everything else Q8_0), so for MXFP4 files only the MXFP4 tensors' bytes match it.
 * Metadata (and the data alignment) is copied, except general.file_type and
 * general.quantization_version, which are set for the target. The output is written to a
 * temporary name and renamed, so a failure leaves no file at out_path. The callbacks run on
 * the calling thread; calls on different files may run concurrently. Errors:
 * TS_ERR_INVALID_ARG for an unknown type, the reader's error for a bad input file,
 * TS_ERR_UNSUPPORTED for an input tensor that is not F32/F16/BF16 or a row that does not fit
 * the block size, TS_ERR_IO for the output. */
ts_status ts_quantize_file(const char *in_path, const char *out_path,
                           const ts_quantize_params *params, ts_error *err);

/* Name of the i-th target ts_quantize_file accepts ("F32", ..., "Q5_K_M", "MXFP4"; static), or
 * NULL past the last. */
const char *ts_quantize_type_name(size_t i);

/* Releases a buffer returned by this API. */
void ts_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
