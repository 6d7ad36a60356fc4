/*
 * Internals shared by mcp.c (sessions, lifecycle, progress, cancellation)
 * and mcp_tools.c (the tool catalogue and tools/call). Not for transports.
 */
#ifndef SKILLD_SERVER_MCP_INT_H
#define SKILLD_SERVER_MCP_INT_H

#include "server/mcp.h"

#include <pthread.h>
#include <stdatomic.h>

struct skd_mcp_session {
    atomic_int refs;
    skd_mcp *m;
    char id[SKD_UUID_LEN + 1];
    char key_id[64];
    unsigned scopes;
    char version[16];             /* negotiated; "" before initialize */
    atomic_int log_level;         /* index into the MCP level names; -1: no messages */
    int initialized;              /* guarded by m->mu */
    int closed;                   /* guarded by m->mu */
    int64_t last_used_ms;         /* guarded by m->mu */
    int modern;                   /* a 2026-07-28 request: lives for one request only */
    struct skd_mcp_session *conn; /* modern: the transport's session (stdio), or NULL */
    skd_mcp_send_fn sink;         /* guarded by m->mu */
    void *sink_arg;
    void (*sink_release)(void *);
};

/* One tools/call in flight; lives on the caller's stack. */
struct mcp_call {
    struct mcp_call *next;
    skd_mcp_session *s;
    const json_t *id;             /* borrowed from the request */
    const json_t *progress_token; /* borrowed; NULL: no progress wanted */
    skd_cancel *cancel;
    skd_mcp_io *io;
    double last_progress;
    int handler_progress; /* the handler reports progress itself */
    int cancelled;
    int64_t started_ms, last_tick_ms;
};

/* One subscriptions/listen stream (2026-07-28). */
struct mcp_listener {
    struct mcp_listener *next;
    json_t *id;             /* the listen request's id, own reference */
    int tools;              /* toolsListChanged asked for */
    skd_mcp_session *owner; /* stdio: its session; NULL for an HTTP stream */
    skd_mcp_send_fn send;
    void *arg;
    void (*release)(void *);
    int (*gone)(void *);
};

struct skd_mcp {
    skd_engine *e;
    skd_calls *calls;
    pthread_mutex_t mu; /* sessions, in-flight calls, sinks */
    skd_mcp_session **sessions;
    size_t nsess, capsess;
    struct mcp_call *inflight;
    struct mcp_listener *listeners; /* guarded by mu */
    pthread_cond_t tick_cv;
    pthread_t ticker;
    int ticker_running, stopping;
    size_t page_size, max_sessions;
    int expose_skills;
    int64_t ttl_ms, progress_ms;
};

/* Register / unregister a call (in m->inflight and the tracker). */
int skd__mcp_call_begin(skd_mcp *m, struct mcp_call *c);
void skd__mcp_call_end(skd_mcp *m, struct mcp_call *c);
/* The engine's progress callback; arg is the struct mcp_call. */
void skd__mcp_progress_cb(void *arg, double progress, double total, const char *message);
void skd__mcp_output_cb(void *arg, const char *stream, const char *data, size_t len);
/* Send notifications/message at level (MCP level index) when the session
 * asked for it, on io (may be NULL). */
void skd__mcp_log(skd_mcp_session *s, skd_mcp_io *io, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

enum { MCP_LOG_DEBUG, MCP_LOG_INFO, MCP_LOG_NOTICE, MCP_LOG_WARNING, MCP_LOG_ERROR };

/* tools/list and tools/call (mcp_tools.c). Return the reply. */
json_t *skd__mcp_tools_list(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_tools_call(skd_mcp_session *s, const json_t *id, const json_t *params,
                            skd_mcp_io *io);

#define SKD_MCP_INSTRUCTIONS                                                                       \
    "skilld runs skills (file access in your own workspace, web requests, sandboxed "              \
    "commands) and serves SKILL.md bundles. Call skills_list to see the skills, then call a "      \
    "skill's tool or skills_execute; skill_run runs a bundle's scripts."

/* What the server offers and who it is, in both eras (mcp.c). New
 * references. */
json_t *skd__mcp_capabilities(void);
json_t *skd__mcp_server_info(void);
/* The index of an MCP log level name, or -1. */
int skd__mcp_log_level(const char *name);
/* The methods both eras share (tools, skills, resources); NULL when method
 * is none of them. */
json_t *skd__mcp_common_method(skd_mcp_session *s, const char *method, const json_t *id,
                               const json_t *params, skd_mcp_io *io);

/* 2026-07-28 (mcp_modern.c). handle_modern answers a request that claims
 * that era (claimed: the envelope's revision, "" when not a string) for the
 * transport's session conn (its identity; stdio's session, or a made-up one
 * for HTTP). The listener functions want m->mu held, except
 * skd__mcp_drop_listeners (the dispatcher is being freed). */
json_t *skd__mcp_handle_modern(skd_mcp_session *conn, const json_t *msg, const char *claimed,
                               skd_mcp_io *io);
/* Remove owner's listeners (owner NULL: the HTTP streams'), only the one
 * opened by request id when id is not NULL. */
void skd__mcp_remove_listeners(skd_mcp *m, const skd_mcp_session *owner, const json_t *id);
void skd__mcp_drop_listeners(skd_mcp *m);
/* Tell every listener that asked for it that the tool list changed. */
void skd__mcp_notify_listeners(skd_mcp *m);

/* The Skills extension and resources (mcp_skills.c). Return the reply. */
json_t *skd__mcp_skills_list(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_skills_get(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_resources_list(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_resources_read(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_resources_dir(skd_mcp_session *s, const json_t *id, const json_t *params);
json_t *skd__mcp_templates_list(skd_mcp_session *s, const json_t *id, const json_t *params);

/* 1 when the negotiated version has structured tool output (2025-06-18+). */
int skd__mcp_has_structured(const skd_mcp_session *s);

#endif
