/*
 * Server-Sent Events responses: a queue one side fills with JSON messages
 * and libmicrohttpd drains as "event: message" / "data: ..." frames. Used by
 * MCP Streamable HTTP (and by anything else that streams, such as A2A).
 * The reader runs on an MHD event thread and never blocks: with nothing to
 * send it suspends the connection it is bound to (skd__sse_bind), and a new
 * message, the end of the stream or a poke from the connection watcher
 * (conns.c) resumes it.
 */
#ifndef SKILLD_SERVER_SSE_H
#define SKILLD_SERVER_SSE_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>

typedef struct skd_sse skd_sse;
struct skd_conns;
struct skd_conn;

/* Silence after which a keep-alive comment is sent. */
#define SKD__SSE_KEEPALIVE_MS 15000

/* New stream holding at most max_bytes unsent. stopping (borrowed, may be
 * NULL) ends the stream when it becomes non-zero. Returns a reference. */
skd_sse *skd__sse_new(size_t max_bytes, const atomic_int *stopping);
void skd__sse_ref(skd_sse *s);
void skd__sse_unref(skd_sse *s); /* NULL ok */

/* Queue one message (borrowed). Dropped when the client is gone or the
 * stream is closed; a message that would overflow the cap ends the stream.
 * Matches skd_mcp_send_fn (arg is the skd_sse). */
void skd__sse_send(void *sse, const json_t *msg);
/* The same as an "event: <event>" frame (event: a word without newline). */
void skd__sse_send_event(void *sse, const char *event, const json_t *msg);

/* No more messages: the response ends once the queue is drained. */
void skd__sse_close(skd_sse *s);

/* 1 once the client went away or the stream ended. */
int skd__sse_gone(skd_sse *s);

/* Copy up to max queued bytes into buf; a keep-alive comment after 15 s of
 * silence. With nothing to send, returns 0 and (when bound) suspends the
 * connection. Returns the byte count or MHD_CONTENT_READER_END_OF_STREAM
 * once closed or gone. This is the response's reader, exposed for tests. */
ssize_t skd__sse_read(skd_sse *s, char *buf, size_t max);

/* The stream goes out on conn of conns (both borrowed; conns outlives the
 * connection's requests). Called by http.c when it queues the response. */
void skd__sse_bind(skd_sse *s, struct skd_conns *conns, struct skd_conn *conn);

/* From the connection watcher: end the stream (end: hang-up or stop), or
 * resume a suspended reader whose keep-alive is due. */
void skd__sse_poke(skd_sse *s, int64_t now_ms, int end);

/* A response that streams s (takes its own reference). Content-Type is
 * text/event-stream. NULL when out of memory. */
struct MHD_Response *skd__sse_response(skd_sse *s);

struct skd_calls;
/* Answer a request with a stream fed by a worker thread: make a stream of
 * at most max_bytes unsent, run run(arg, stream) on a thread counted by
 * calls (at most workers at once), and hand back the streaming response in
 * *resp, the stream in *stream (borrowed: the response's reference). run
 * owns arg; the stream is closed and released after run returns. On
 * failure nothing runs, arg stays the caller's, and the result is
 * SKD_ENOMEM or SKD_EBUSY (too many workers, or stopping). */
int skd__sse_spawn(struct skd_calls *calls, size_t workers, size_t max_bytes,
                   void (*run)(void *arg, skd_sse *sse), void *arg, struct MHD_Response **resp,
                   skd_sse **stream);

#endif
