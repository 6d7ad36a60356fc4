/*
 * The A2A server, transport-neutral (A2A protocol 1.0 with the 0.3 method
 * names and shapes for older clients). The HTTP layer authenticates the
 * caller, parses the JSON-RPC body and hands it here; it serves the agent
 * card from skd__a2a_card. Nothing here knows about HTTP except that a
 * streaming method produces a sequence of JSON-RPC responses (SSE events).
 *
 * Tasks run one skill each: the message names it in a data part
 * {"skill": "...", "input": {...}}. A task is owned by the key that created
 * it, kept in the store (table a2a_tasks) and pruned after
 * SKILLD_A2A_TASK_RETENTION_S seconds.
 */
#ifndef SKILLD_SERVER_A2A_H
#define SKILLD_SERVER_A2A_H

#include <jansson.h>

#include "skilld/skilld.h"

/* A2A JSON-RPC error codes (spec section 5.4, as @a2a-js/sdk 1.x uses them). */
#define SKD_A2A_TASK_NOT_FOUND -32001
#define SKD_A2A_TASK_NOT_CANCELABLE -32002
#define SKD_A2A_PUSH_NOT_SUPPORTED -32003
#define SKD_A2A_UNSUPPORTED_OPERATION -32004
#define SKD_A2A_CONTENT_TYPE_NOT_SUPPORTED -32005
#define SKD_A2A_VERSION_NOT_SUPPORTED -32009

typedef struct skd_a2a skd_a2a;

/* New A2A service over e (borrowed; must outlive it). NULL when out of
 * memory. */
skd_a2a *skd__a2a_new(skd_engine *e);

/* Refuse new tasks and cancel the running ones (a server stop). NULL ok. */
void skd__a2a_cancel_all(skd_a2a *a);

/* Cancel every running task, wait for their threads, free. NULL ok. */
void skd__a2a_free(skd_a2a *a);

/* The agent card. base_url is how clients reach this server
 * ("http://127.0.0.1:8080", no trailing slash). key_id (may be NULL: an
 * anonymous fetch) adds that key's private skills. legacy != 0 gives the
 * 0.3 shape served at /.well-known/agent.json. New reference. */
json_t *skd__a2a_card(skd_a2a *a, const char *base_url, const char *key_id, int legacy);

/* 1 when the parsed JSON-RPC request (borrowed) is a streaming method
 * (SendStreamingMessage, SubscribeToTask, message/stream,
 * tasks/resubscribe): its answer is a text/event-stream. */
int skd__a2a_is_stream(const json_t *req);
/* 1 when req is a method that runs a skill (message/send, message/stream). */
int skd__a2a_executes(const json_t *req);

/* Sends one JSON-RPC response object (borrowed) as an SSE event. Returns 0,
 * or -1 when the client is gone (the stream then ends; the task goes on). */
typedef int (*skd_a2a_emit_fn)(void *arg, const json_t *msg);

/* Handle one JSON-RPC request (borrowed) from an authenticated key.
 * version is the A2A-Version header (NULL: absent, meaning 0.3). For a
 * plain method the response is returned (new reference). For a streaming
 * method emit is called for each event until the stream ends and NULL is
 * returned — unless the request is refused before the stream starts, in
 * which case the error response is returned and emit never called. May
 * block for as long as the skill runs. */
json_t *skd__a2a_handle(skd_a2a *a, const char *key_id, unsigned scopes, const char *version,
                        const json_t *req, skd_a2a_emit_fn emit, void *arg);

#endif
