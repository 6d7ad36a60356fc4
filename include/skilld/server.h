/*
 * The skilld server: HTTP (libmicrohttpd) with MCP Streamable HTTP at /mcp,
 * REST under /v1, /healthz and /metrics; and MCP over stdio. Transports only
 * translate between the wire and skd_engine_execute; they hold no skill
 * logic (DESIGN.md, "The path of one call").
 */
#ifndef SKILLD_SERVER_H
#define SKILLD_SERVER_H

#include "skilld/skilld.h"

typedef struct skd_server skd_server;

/* Start serving on listen ("host:port", "[v6]:port"; port 0 picks a free
 * one) with a thread per connection, so a long skill run never blocks
 * another request. engine is borrowed and must outlive the server. On
 * success *out is the running server (stop with skd_server_stop, then free
 * with skd_server_free). */
int skd_server_start(skd_engine *e, const char *listen, skd_server **out, skd_err *err);

/* The TCP port actually bound. */
unsigned skd_server_port(const skd_server *s);

/* Graceful stop: stop accepting connections, cancel every in-flight skill
 * call (their sandboxes are killed through the cancel hooks), wait up to
 * grace_ms for them to finish, then close every connection. Idempotent. */
void skd_server_stop(skd_server *s, int grace_ms);
/* Skill calls running now (a drain waits for 0 before the stop). */
size_t skd_server_in_flight(skd_server *s);
void skd_server_free(skd_server *s); /* stops first when still running; NULL ok */

/* Serve MCP over stdio: one JSON-RPC message per line read from in_fd,
 * replies and notifications written one per line to out_fd, nothing else
 * written there. key_id (borrowed) is the identity of every call. Requests
 * run concurrently (a worker thread per in-flight call, capped), so a long
 * tools/call never blocks ping or notifications/cancelled. At end of input
 * the calls still running finish and their replies are written; when
 * stop_fd (-1: none) becomes readable, running calls are cancelled instead.
 * Returns 0, or an SKD_E* code. */
int skd_mcp_stdio_run(skd_engine *e, const char *key_id, unsigned scopes, int in_fd, int out_fd,
                      int stop_fd, skd_err *err);

/*
 * Metrics hooks for parts that keep their own counters (the sandbox runner,
 * the outbound guard). Whoever owns the counter installs a getter once at
 * start-up; /metrics reads it on every scrape. NULL removes the hook (the
 * metric then reads 0).
 */
void skd_metrics_set_running_sandboxes_fn(long (*fn)(void));
void skd_metrics_set_outbound_rejected_fn(unsigned long (*fn)(void));

#endif
