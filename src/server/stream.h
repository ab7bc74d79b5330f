/*
 * stream.h — a streamed answer (stream.c) as the dialects' frame writers see it: the buffer of
 * bytes not yet sent, the answer's parsers, and what the dialects keep between frames.
 *
 * stream.c owns the loop (taking the job's events, parking the connection while there is
 * nothing to send, keep-alives, the client leaving); a dialect (dialect.h) turns events into
 * frames with the helpers below. Everything here runs on the event thread of the connection.
 */
#ifndef TS_SERVER_STREAM_H
#define TS_SERVER_STREAM_H

#include "server/server_internal.h"

struct ts_stream {
    ts_server *s;
    ts_job *j; /* NULL once released */
    const ts_dialect *d;
    ts_api_kind kind;
    bool include_usage;
    int sock;
    char id[64];
    double created;
    int32_t n_choices;
    size_t *text_off;   /* [n_choices] bytes of text sent so far (completions text_offset) */
    ts_chat_out **chat; /* [n_choices] answer parsers, or NULL when chat answers are not parsed */
    uint64_t prompt_tokens; /* known at the start (rendered and tokenized) */
    uint64_t prompt_sub[TS_API_MAX_PROMPTS], cached_sub[TS_API_MAX_PROMPTS];
    uint64_t completion;
    bool error_sent;
    char *buf; /* bytes not yet handed to MHD: buf[off..len) */
    size_t len, off, cap;
    bool finished; /* the last frame is in buf */
    double t_out;  /* when bytes were last handed to MHD (for the keep-alive) */

    /* Content blocks (Anthropic): the open block's index and kind (-1: none open). */
    int32_t block_index;
    int block_kind;
    /* How choice 0 ended: finish, the stop string (copies of the request's), tool calls. */
    ts_finish_reason finish;
    int32_t stop_index;
    bool tool_calls;
    char *stops[TS_ENGINE_MAX_STOP];
    int32_t n_stops;
    double t_first; /* ts_server_now() of the first token (0: none yet) */

    /* The dialect's own: a copy of its request's stream_keeps member (NULL when none) and its
     * state between frames (freed with dialect_data_free). */
    cJSON *dialect_req;
    void *dialect_data;
    void (*dialect_data_free)(void *);
};

/* Appends bytes; false when out of memory. */
bool ts_stream_put_raw(ts_stream *st, const char *data, size_t n);
/* Appends `data: <json>\n\n` and deletes obj. */
bool ts_stream_put_data(ts_stream *st, cJSON *obj);
/* Appends `event: <name>\ndata: <json>\n\n` and deletes obj. */
bool ts_stream_put_event(ts_stream *st, const char *name, cJSON *obj);

/* Sums of the prompts' usage so far. */
void ts_stream_usage(const ts_stream *st, uint64_t *prompt, uint64_t *cached);

/* Feeds an event's text to the stream's answer parser of choice 0 (finished with the event's
 * finish) and hands each parsed piece to on, stopping once an error frame was sent; without a
 * parser the text is one content piece. False when the parser ran out of memory (nothing was
 * handed on; the caller sends its error). */
bool ts_stream_chat_pieces(ts_stream *st, const ts_job_event *ev,
                           void (*on)(ts_stream *st, const ts_chat_event *piece));

/* The OpenAI rows' frames (stream.c). */
void ts_openai_stream_open(ts_stream *st);
void ts_openai_stream_event(ts_stream *st, const ts_job_event *ev);
void ts_openai_stream_end(ts_stream *st);
void ts_openai_stream_error(ts_stream *st, int status, const char *code, const char *message);

/* The Anthropic row's frames (anthropic.c). */
void ts_anthropic_stream_open(ts_stream *st);
void ts_anthropic_stream_event(ts_stream *st, const ts_job_event *ev);
void ts_anthropic_stream_end(ts_stream *st);
void ts_anthropic_stream_error(ts_stream *st, int status, const char *code, const char *message);

/* The Ollama rows' frames (ollama.c): NDJSON lines. */
void ts_ollama_stream_open(ts_stream *st);
void ts_ollama_stream_event(ts_stream *st, const ts_job_event *ev);
void ts_ollama_stream_end(ts_stream *st);
void ts_ollama_stream_error(ts_stream *st, int status, const char *code, const char *message);
/* The OpenAI Responses row's frames (responses.c). */
void ts_responses_stream_open(ts_stream *st);
void ts_responses_stream_event(ts_stream *st, const ts_job_event *ev);
void ts_responses_stream_end(ts_stream *st);
void ts_responses_stream_error(ts_stream *st, int status, const char *code, const char *message);

#endif /* TS_SERVER_STREAM_H */
