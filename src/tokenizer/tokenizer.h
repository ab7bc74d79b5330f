/*
 * tokenizer.h — text <-> token ids for the tokenizers stored in GGUF files, and chat templates.
 *
 * A tokenizer is built from the `tokenizer.*` metadata of an open GGUF file:
 *
 *   tokenizer.ggml.model        "llama" (SentencePiece BPE: scores + <0xNN> byte fallback),
 *                               "gpt2"  (byte-level BPE: merges), "bert" (WordPiece)
 *   tokenizer.ggml.pre          pre-tokenizer name for "gpt2" vocabularies (the regexes that
 *                               split text into words before merging); see docs/tokenizer.md
 *   tokenizer.ggml.tokens       [n_vocab] strings; token_type [n_vocab] ints (1 normal,
 *                               2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte);
 *                               scores [n_vocab] floats; merges [n_merges] "left right"
 *   tokenizer.ggml.*_token_id   bos, eos, eot, eom, unknown, seperator, padding, mask
 *   tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix, tokenizer.chat_template
 *
 * Everything is validated when the tokenizer is created (array lengths agree, ids in range,
 * byte tokens are "<0xNN>", merges name existing tokens, the pre-tokenizer is known); a bad
 * vocabulary is an error naming what is wrong, never a crash.
 *
 * Special tokens in text: control and unknown tokens written literally in the text (such as
 * "<|im_start|>") are recognised only when parse_special is set; otherwise they are ordinary
 * text. User-defined tokens are always recognised, as in the reference tokenizers.
 *
 * Ownership and lifetime: the tokenizer borrows the ts_gguf it was created from (token strings
 * are views into its mapping); the ts_gguf must stay open until ts_tokenizer_destroy. A created
 * tokenizer is immutable: every function taking a const ts_tokenizer * is safe to call from
 * several threads at once. A ts_detok_stream is owned by one thread at a time.
 */
#ifndef TS_TOKENIZER_TOKENIZER_H
#define TS_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "tessera.h"

typedef int32_t ts_token;
#define TS_TOKEN_NULL ((ts_token)-1)

typedef enum ts_tokenizer_kind {
    TS_TOKENIZER_SPM = 0, /* "llama" */
    TS_TOKENIZER_BPE = 1, /* "gpt2" */
    TS_TOKENIZER_WPM = 2, /* "bert" */
} ts_tokenizer_kind;

/* Token types as stored in tokenizer.ggml.token_type. */
typedef enum ts_token_type {
    TS_TOKEN_TYPE_UNDEFINED = 0,
    TS_TOKEN_TYPE_NORMAL = 1,
    TS_TOKEN_TYPE_UNKNOWN = 2,
    TS_TOKEN_TYPE_CONTROL = 3,
    TS_TOKEN_TYPE_USER_DEFINED = 4,
    TS_TOKEN_TYPE_UNUSED = 5,
    TS_TOKEN_TYPE_BYTE = 6,
} ts_token_type;

/* Special ids (TS_TOKEN_NULL when the vocabulary has none) and the model's defaults for
 * tokenizing with add_special. */
typedef struct ts_tokenizer_special {
    ts_token bos, eos, eot, eom, unk, sep, pad, mask;
    bool add_bos;          /* add_special prepends bos */
    bool add_eos;          /* add_special appends eos */
    bool add_sep;          /* add_special appends sep (WordPiece) */
    bool add_space_prefix; /* SentencePiece: a space is put before text that starts a run */
} ts_tokenizer_special;

typedef struct ts_tokenizer ts_tokenizer;

/* Builds a tokenizer from g's metadata. g must outlive the tokenizer. On failure *out is NULL
 * and err names the key or token that is wrong ("tokenizer: token 7 '<0xZZ>': ..."). */
ts_status ts_tokenizer_create(const ts_gguf *g, ts_tokenizer **out, ts_error *err);

/* Frees the tokenizer; NULL is allowed. */
void ts_tokenizer_destroy(ts_tokenizer *t);

ts_tokenizer_kind ts_tokenizer_get_kind(const ts_tokenizer *t);
/* Pre-tokenizer name as stored (or "default"); a static or g-owned NUL-terminated string. */
const char *ts_tokenizer_pre_name(const ts_tokenizer *t);
uint32_t ts_tokenizer_n_vocab(const ts_tokenizer *t);
const ts_tokenizer_special *ts_tokenizer_get_special(const ts_tokenizer *t);

/* Type of a token; TS_TOKEN_TYPE_UNDEFINED for an id out of range. */
ts_token_type ts_tokenizer_token_type(const ts_tokenizer *t, ts_token id);
/* True when generating `id` ends a turn (eos, eot, eom and tokens such as "<|im_end|>"). */
bool ts_tokenizer_is_eog(const ts_tokenizer *t, ts_token id);

/* The vocabulary string of a token (not NUL-terminated; a view into the GGUF file). */
ts_status ts_tokenizer_token_text(const ts_tokenizer *t, ts_token id, const char **text,
                                  size_t *len, ts_error *err);
/* Id of the token whose vocabulary string is exactly text[0..len); TS_ERR_NOT_FOUND if none. */
ts_status ts_tokenizer_find(const ts_tokenizer *t, const char *text, size_t len, ts_token *id);

/*
 * Tokenizes text[0..len) (any bytes: NUL, invalid UTF-8 and long inputs are handled; invalid
 * UTF-8 becomes byte tokens in BPE and SentencePiece vocabularies, and is dropped by
 * WordPiece, which only knows characters). add_special adds bos/eos/sep as the model asks;
 * parse_special recognises control tokens written in the text. On success *ids is a malloc'd
 * array of *n_ids ids that the caller releases with free() (NULL when *n_ids is 0).
 */
ts_status ts_tokenizer_tokenize(const ts_tokenizer *t, const char *text, size_t len,
                                bool add_special, bool parse_special, ts_token **ids, size_t *n_ids,
                                ts_error *err);

/* The bytes a token stands for when decoded on its own: spaces for "▁", the byte of a
 * "<0xNN>" token, raw bytes for byte-level BPE. Control and unknown tokens give their text
 * only when `special` is set (otherwise an empty piece). The piece is owned by t. */
ts_status ts_tokenizer_token_to_piece(const ts_tokenizer *t, ts_token id, bool special,
                                      const char **piece, size_t *len, ts_error *err);

/*
 * Turns ids back into text: the exact inverse of ts_tokenizer_tokenize for byte-level BPE,
 * and for SentencePiece up to its whitespace escaping (the space that tokenizing puts before
 * a run of text is removed again). Control tokens are written only when render_special is
 * set. *text is malloc'd, NUL-terminated (not counted in *len), and released with free().
 * An id out of range is TS_ERR_RANGE.
 */
ts_status ts_tokenizer_detokenize(const ts_tokenizer *t, const ts_token *ids, size_t n_ids,
                                  bool render_special, char **text, size_t *len, ts_error *err);

/*
 * Streaming detokenizer: feed ids one at a time as they are generated and get text out. The
 * text handed out is always valid UTF-8: bytes of a character split across tokens are held
 * back until the character is complete, and bytes that can never form a character become
 * U+FFFD. Feeding a whole sequence gives the same text as ts_tokenizer_detokenize whenever
 * that text is valid UTF-8.
 */
typedef struct ts_detok_stream ts_detok_stream;

ts_status ts_detok_stream_create(const ts_tokenizer *t, bool render_special, ts_detok_stream **out,
                                 ts_error *err);
void ts_detok_stream_destroy(ts_detok_stream *s);
/* Adds one id; *text and *len receive the newly completed text (valid until the next call on s). */
ts_status ts_detok_stream_push(ts_detok_stream *s, ts_token id, const char **text, size_t *len,
                               ts_error *err);
/* Ends the stream: held-back bytes of an unfinished character come out as U+FFFD. The stream
 * can then be reused for a new sequence. */
ts_status ts_detok_stream_flush(ts_detok_stream *s, const char **text, size_t *len, ts_error *err);

/* ---- chat templates ------------------------------------------------------------------------ */

typedef enum ts_chat_family {
    TS_CHAT_CHATML = 0,        /* <|im_start|>role\n...<|im_end|>\n (Qwen, SmolLM) */
    TS_CHAT_LLAMA2,            /* [INST] ... [/INST], system as plain first-turn prefix */
    TS_CHAT_LLAMA2_SYS,        /* with <<SYS>> blocks */
    TS_CHAT_LLAMA2_SYS_BOS,    /* <<SYS>>, and <s> before every later [INST] */
    TS_CHAT_LLAMA2_SYS_STRIP,  /* <<SYS>>, message contents stripped */
    TS_CHAT_LLAMA3,            /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    TS_CHAT_MISTRAL_V1,        /* " [INST] ... [/INST]" */
    TS_CHAT_MISTRAL_V3,        /* "[INST] ...[/INST]", assistant replies stripped */
    TS_CHAT_MISTRAL_V3_TEKKEN, /* "[INST]...[/INST]" */
    TS_CHAT_MISTRAL_V7,        /* [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ... [/INST] */
    TS_CHAT_GEMMA,             /* <start_of_turn>user|model ... <end_of_turn>; system folded */
    TS_CHAT_PHI3,              /* <|role|>\n...<|end|>\n */
    TS_CHAT_ZEPHYR,            /* <|role|>\n...<|endoftext|>\n */
    TS_CHAT_DEEPSEEK,          /* ### Instruction: / ### Response: (DeepSeek Coder) */
    TS_CHAT_DEEPSEEK2,         /* User: / Assistant: (DeepSeek V2) */
    TS_CHAT_DEEPSEEK3,         /* <｜User｜> / <｜Assistant｜> (DeepSeek V3, R1) */
    TS_CHAT_FAMILY_COUNT,
} ts_chat_family;

/* A chosen template: its family plus, for templates that insert a default system prompt
 * when the conversation has none (SmolLM, Qwen 2.5), that prompt. */
typedef struct ts_chat_template {
    ts_chat_family family;
    const char *default_system; /* NULL or a view into the template text it was detected from */
    size_t default_system_len;
} ts_chat_template;

/* A conversation turn: the public ts_message (role "system", "user" or "assistant"). */
typedef ts_message ts_chat_message;

/* Built-in template by name: chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip,
 * llama3, mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7, gemma, phi3, zephyr,
 * deepseek, deepseek2, deepseek3. An unknown name is TS_ERR_NOT_FOUND listing the names. */
ts_status ts_chat_template_from_name(const char *name, ts_chat_template *out, ts_error *err);
/* Name of a family ("chatml", ...), or "unknown". */
const char *ts_chat_family_name(ts_chat_family family);

/* Recognises a Jinja chat template by its distinctive markers. A template that matches no
 * family is TS_ERR_UNSUPPORTED (the message quotes its beginning). The text must outlive
 * *out when the template has a default system prompt. */
ts_status ts_chat_template_detect(const char *tmpl, size_t len, ts_chat_template *out,
                                  ts_error *err);

/* The tokenizer.chat_template text (a view into the file, not NUL-terminated); false when the
 * file has none. */
bool ts_tokenizer_chat_template_source(const ts_tokenizer *t, const char **src, size_t *len);

/* Detects the template stored in the tokenizer's GGUF (tokenizer.chat_template);
 * TS_ERR_NOT_FOUND when the file has none. */
ts_status ts_tokenizer_chat_template(const ts_tokenizer *t, ts_chat_template *out, ts_error *err);

/* Renders a conversation as the model expects it, without the leading bos (tokenize the
 * result with add_special and parse_special). add_generation_prompt appends the opening of
 * the assistant's turn. *text is malloc'd, NUL-terminated, released with free(). Roles other
 * than system/user/assistant are TS_ERR_INVALID_ARG. */
ts_status ts_chat_apply(const ts_chat_template *tmpl, const ts_chat_message *msgs, size_t n_msgs,
                        bool add_generation_prompt, char **text, size_t *len, ts_error *err);

#endif /* TS_TOKENIZER_TOKENIZER_H */
