/*
 * The MCP dispatcher, independent of the transport: sessions, the
 * lifecycle (initialize, version negotiation), tools/list with cursors,
 * tools/call through skd_engine_execute, logging, progress, cancellation
 * and tools/list_changed. A transport parses bytes into messages, hands
 * them to skd__mcp_handle and writes what comes back.
 */
#ifndef SKILLD_SERVER_MCP_H
#define SKILLD_SERVER_MCP_H

#include "server/calls.h"
#include "server/jsonrpc.h"
#include "skilld/skilld.h"

#define SKD_MCP_LATEST "2025-11-25" /* newest revision negotiated by initialize */
#define SKD_MCP_MODERN "2026-07-28" /* the stateless revision: server/discover, _meta */
#define SKD_MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define SKD_MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define SKD_MCP_META_LOGLEVEL "io.modelcontextprotocol/logLevel"
#define SKD_MCP_META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"
#define SKD_MCP_SKILLS_EXT "io.modelcontextprotocol/skills"
#define SKD_RPC_HEADER_MISMATCH -32020
#define SKD_RPC_MISSING_CAPABILITY -32021
#define SKD_RPC_UNSUPPORTED_VERSION -32022

typedef struct skd_mcp skd_mcp;
typedef struct skd_mcp_session skd_mcp_session;

/* Deliver one outgoing message (borrowed) on a transport. Must not block
 * for long and must not call back into the dispatcher. */
typedef void (*skd_mcp_send_fn)(void *arg, const json_t *msg);

/* Per-message I/O: where notifications tied to this request go
 * (notifications/progress, notifications/message). send may be NULL (then
 * they are dropped). */
typedef struct skd_mcp_io {
    skd_mcp_send_fn send;
    void *arg;
    int cancelled; /* out: the client cancelled this request */
} skd_mcp_io;

/* New dispatcher over engine e (borrowed) and tracker calls (borrowed; both
 * outlive it). Reads its settings from the engine's configuration and
 * subscribes to registry changes (it takes the registry's single
 * skd_registry_on_change slot and fans out to every dispatcher over that
 * registry; at most 64 dispatchers live at once). Starts the progress
 * ticker thread. NULL when out of resources. */
skd_mcp *skd__mcp_new(skd_engine *e, skd_calls *calls);
void skd__mcp_free(skd_mcp *m); /* NULL ok; sessions still referenced live on */

/* Close every session (graceful stop: their streams end). */
void skd__mcp_close_all(skd_mcp *m);

/* New session for key_id with scopes; the dispatcher keeps it in its table
 * (found by id) until skd__mcp_session_close. Returns a new reference or
 * NULL (out of memory, or SKD_EBUSY: too many sessions). */
skd_mcp_session *skd__mcp_session_new(skd_mcp *m, const char *key_id, unsigned scopes);
/* Find a live session by id that belongs to key_id; new reference or NULL. */
skd_mcp_session *skd__mcp_session_find(skd_mcp *m, const char *id, const char *key_id);
/* Remove from the table, cancel its in-flight calls, detach its sink. */
void skd__mcp_session_close(skd_mcp_session *s);
void skd__mcp_session_ref(skd_mcp_session *s);
void skd__mcp_session_unref(skd_mcp_session *s); /* NULL ok */

const char *skd__mcp_session_id(const skd_mcp_session *s);
/* Negotiated protocol version ("" before initialize). Borrowed. */
const char *skd__mcp_session_version(const skd_mcp_session *s);
/* 1 when the session asked for log messages (logging/setLevel). */
int skd__mcp_session_logging(const skd_mcp_session *s);

/* Session-level sink for notifications not tied to a request
 * (notifications/tools/list_changed). NULL detaches. The old sink is no
 * longer called once this returns. release (may be NULL) is called on arg
 * when the sink is replaced or the session closes: the session owns arg. */
void skd__mcp_session_set_sink(skd_mcp_session *s, skd_mcp_send_fn send, void *arg,
                               void (*release)(void *arg));

/* 1 when v is a 2025-era protocol revision this server speaks. */
int skd__mcp_version_supported(const char *v);

/* The protocol revision a request claims in its _meta envelope
 * (params._meta["io.modelcontextprotocol/protocolVersion"]), or NULL when
 * it carries none (2025-era traffic). Borrowed from msg. */
const char *skd__mcp_claimed_version(const json_t *msg);

/* 1 when v names the 2026-07-28 era or later ("2026-07-28" <= v). */
int skd__mcp_is_modern(const char *v);

/* Open a subscriptions/listen stream for a 2026-07-28 request msg
 * (borrowed) on a transport that keeps it open: send (arg)
 * receives notifications/subscriptions/acknowledged at once, then the
 * change notifications asked for, each with the subscriptionId. gone (may
 * be NULL) tells when the transport's end went away; release (may be
 * NULL) is called on arg when the stream is dropped (dispatcher freed,
 * gone). Returns NULL, or a JSON-RPC error reply (new reference) to
 * send instead. */
json_t *skd__mcp_listen(skd_mcp *m, const json_t *msg, skd_mcp_send_fn send, void *arg,
                        void (*release)(void *), int (*gone)(void *));

/* Handle one parsed message (borrowed). Returns a new reference to the
 * reply, or NULL when none is due (a notification, a response). A request
 * the client cancelled gets a -32800 reply and io->cancelled set; a
 * transport that can stay silent (stdio, SSE) drops it, as the spec asks.
 * Thread-safe: a session may handle many messages concurrently. */
json_t *skd__mcp_handle(skd_mcp_session *s, const json_t *msg, skd_mcp_io *io);

/* A session for one 2026-07-28 request of key_id with scopes: not in the
 * session table (nothing finds it, nothing of it outlives the request).
 * The transport hands it to skd__mcp_handle, and to a hang-up that cancels
 * the request, then drops it with skd__mcp_session_unref. NULL when out of
 * memory. */
skd_mcp_session *skd__mcp_session_transient(skd_mcp *m, const char *key_id, unsigned scopes);

/* The checks of a 2026-07-28 request's _meta envelope, made before any
 * dispatch: NULL when it is fine, else the error reply (new reference):
 * -32602 for a malformed envelope, -32022 (data.supported, data.requested)
 * for a revision this server does not speak. */
json_t *skd__mcp_check_envelope(const json_t *msg);

/* Parse len bytes and handle them (parse errors yield -32700/-32600). */
json_t *skd__mcp_handle_raw(skd_mcp_session *s, const char *data, size_t len, skd_mcp_io *io);

/* The input schema of the tool name as key_id sees it (a fixture tool, or
 * a skill exposed as a tool), or NULL. New reference. For the HTTP
 * transport's Mcp-Param-* header check (SEP-2243). */
json_t *skd__mcp_tool_schema(skd_mcp *m, const char *key_id, const char *name);

/* 1 when msg is a 2026-07-28 subscriptions/listen request. */
int skd__mcp_is_listen(const json_t *msg);

/* 1 when msg is a tools/call request that carries a progress token. */
int skd__mcp_wants_progress(const json_t *msg);

#endif
