/*
 * The HTTP layer shared by every HTTP route (REST, MCP, A2A, health,
 * metrics): the request a handler sees, how it answers, and the one route
 * table (routes.c). To add an endpoint, write a handler and add one row.
 *
 * Before a handler runs, http.c has: checked Host and Origin against the
 * allow lists (403), matched the route (404/405), and, for routes with
 * auth, checked the bearer secret (401), the route's scope (403) and the
 * key's rate limit (429) -- all before reading the body -- and then read
 * the body up to SKILLD_MAX_BODY_BYTES (413). req->key is then the caller's
 * identity; handlers never take an identity from the request body.
 *
 * Handlers run on a worker thread (the connection is suspended meanwhile)
 * unless their route is SKD_ROUTE_INLINE, so they may block for as long as
 * a skill runs. req->cancel fires when the client hangs up before the
 * reply is out.
 */
#ifndef SKILLD_SERVER_HTTP_H
#define SKILLD_SERVER_HTTP_H

#include <microhttpd.h>

#include "server/calls.h"
#include "server/mcp.h"
#include "skilld/server.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

typedef struct skd_http_req {
    skd_server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;    /* without the query string */
    const char *param;   /* the "{}" path segment of the route (decoded), or NULL */
    const char *param2;  /* the second "{}" segment ("/v1/sandboxes/{}/processes/{}"), or NULL */
    char param_buf[260]; /* where param and param2 are copied */
    char param2_buf[260];
    const char *body; /* NUL-terminated; body_len bytes */
    size_t body_len;
    int authed;      /* 1 when key is valid */
    int via_session; /* authenticated by the console's session cookie (console.c) */
    skd_key_info key;
    skd_cancel *cancel; /* fired when the client goes away (borrowed) */
    void *priv;         /* http.c's request state */
    json_t *parsed;     /* the body parsed by a SKD_ROUTE_QUICK check (owned; a
                         * handler may take it and set NULL), else NULL */
} skd_http_req;

/* What a handler produces: a status and a response (owned; http.c queues
 * and destroys it). A handler that leaves resp NULL gets a 500. */
typedef struct skd_http_reply {
    unsigned status;
    struct MHD_Response *resp;
    struct skd_sse *sse; /* set when resp streams this SSE queue (borrowed) */
} skd_http_reply;

typedef void (*skd_route_fn)(skd_http_req *req, skd_http_reply *out);

typedef struct skd_route {
    const char *method;  /* "GET", "POST", "DELETE", ... */
    const char *pattern; /* "/v1/skills", "/v1/skills/{}" or "/v1/sandboxes/{}/exec" ({} = one
                            segment) */
    int auth;            /* 1: a valid bearer secret is required */
    unsigned scope;      /* SKD_SCOPE_* bits the key must have (with auth) */
    skd_route_fn fn;
    unsigned flags; /* SKD_ROUTE_* */
} skd_route;

/* The handler never blocks: it runs on the event thread. */
#define SKD_ROUTE_INLINE 1u
/* A JSON-RPC endpoint: refusals made before the handler are JSON-RPC
 * errors (id null) with the HTTP status. */
#define SKD_ROUTE_JSONRPC 2u
/* The handler runs on the event thread when skd__rest_execute_quick says
 * the call cannot block (a file_read: no lock, no process, no network),
 * else on a worker: a worker's hand-off and the connection's suspend and
 * resume cost more than such a call itself. */
#define SKD_ROUTE_QUICK 4u

/* The route table (routes.c), terminated by a row with method NULL. */
extern const skd_route skd__routes[];

/* Route handlers (rest.c, mcp_http.c, ...). */
void skd__rest_healthz(skd_http_req *req, skd_http_reply *out);
void skd__rest_runs(skd_http_req *req, skd_http_reply *out);
void skd__rest_usage(skd_http_req *req, skd_http_reply *out);
/* The operator console (console.c). */
void skd__ui_index(skd_http_req *req, skd_http_reply *out);
void skd__ui_file(skd_http_req *req, skd_http_reply *out);
void skd__ui_signin(skd_http_req *req, skd_http_reply *out);
void skd__ui_whoami(skd_http_req *req, skd_http_reply *out);
void skd__ui_signout(skd_http_req *req, skd_http_reply *out);
/* Authenticate by the console's session cookie: SKD_ENOENT when the
 * request has none (or the path does not take it: /v1/... and /ui/session
 * only), 0 when req->key is its key, else the refusal is in out (401; 403
 * for a state-changing request from another origin or without the CSRF
 * token). */
int skd__ui_auth(skd_http_req *req, skd_http_reply *out);
void skd__rest_run_cancel(skd_http_req *req, skd_http_reply *out);
void skd__rest_metrics(skd_http_req *req, skd_http_reply *out);
void skd__rest_skills(skd_http_req *req, skd_http_reply *out);
void skd__rest_skill(skd_http_req *req, skd_http_reply *out);
void skd__rest_execute(skd_http_req *req, skd_http_reply *out);
/* 1 when the body names a skill that skd_engine_skill_is_quick; keeps the
 * parsed body in req->parsed for the handler. */
int skd__rest_execute_quick(skd_http_req *req);
void skd__rest_executions(skd_http_req *req, skd_http_reply *out);
void skd__rest_execution(skd_http_req *req, skd_http_reply *out);
void skd__rest_keys_list(skd_http_req *req, skd_http_reply *out);
void skd__rest_keys_create(skd_http_req *req, skd_http_reply *out);
void skd__rest_keys_revoke(skd_http_req *req, skd_http_reply *out);
void skd__rest_secret_set(skd_http_req *req, skd_http_reply *out);
void skd__rest_secret_list(skd_http_req *req, skd_http_reply *out);
void skd__rest_secret_delete(skd_http_req *req, skd_http_reply *out);
/* rest_sandboxes.c: live sandboxes. */
void skd__rest_sandbox_create(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_list(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_get(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_delete(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_exec(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_processes(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_process_output(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_process_kill(skd_http_req *req, skd_http_reply *out);
/* rest_sandboxes.c too: pause, resume, fork of live sandboxes. */
/* Run skill with input (stolen) as key_id with scopes and answer an SSE
 * stream: "stdout"/"stderr" events as the command writes, "progress" too
 * when forwarded (a call another replica forwarded: replica_http.c), then
 * "result". A client that goes away cancels the call. */
void skd__rest_stream_call(skd_http_req *req, skd_http_reply *out, const char *key_id,
                           unsigned scopes, const char *skill, json_t *in, int forwarded);
/* POST /v1/replica/call: a call another replica forwarded (replica_http.c). */
void skd__replica_call(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_pause(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_resume(skd_http_req *req, skd_http_reply *out);
void skd__rest_sandbox_fork(skd_http_req *req, skd_http_reply *out);
void skd__mcp_http_post(skd_http_req *req, skd_http_reply *out);
void skd__mcp_http_get(skd_http_req *req, skd_http_reply *out);
void skd__mcp_http_delete(skd_http_req *req, skd_http_reply *out);

/* Server state handlers use (borrowed). */
skd_engine *skd__server_engine(skd_server *s);
skd_mcp *skd__server_mcp(skd_server *s);
skd_calls *skd__server_calls(skd_server *s);
/* 1 once a graceful stop began (long streams end). */
int skd__server_stopping(skd_server *s);

/* Answer with JSON (v stolen) and status. */
void skd__http_json(skd_http_reply *out, unsigned status, json_t *v);
/* Answer {"error":{"code","message"}} with status. */
void skd__http_error(skd_http_reply *out, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer with a skd error: the HTTP status that fits err->code. */
void skd__http_from_err(skd_http_reply *out, const skd_err *err);
/* An empty body with status. */
void skd__http_empty(skd_http_reply *out, unsigned status);
/* Request header (case-insensitive) or NULL; query argument or NULL. */
const char *skd__http_header(const skd_http_req *req, const char *name);
const char *skd__http_query(const skd_http_req *req, const char *name);
/* The HTTP status that fits an SKD_E* code. */
unsigned skd__http_status_for(int code);
/* Parse the request body as a JSON object; on failure answers 400 and
 * returns NULL. New reference. */
json_t *skd__http_body_object(skd_http_req *req, skd_http_reply *out);

/* Run fn(arg) once if the client hangs up before the reply is out (it
 * fires req->cancel); free_fn(arg) runs when the request ends, whatever
 * happened. For handlers whose work is not driven by req->cancel itself. */
void skd__http_on_hangup(skd_http_req *req, void (*fn)(void *), void *arg, void (*free_fn)(void *));

/* auth.c: check "Authorization: Bearer <secret>"; 0 with req->key set, or
 * an answer already in out (401). */
int skd__auth_bearer(skd_http_req *req, skd_http_reply *out);
/* auth.c: add the RFC 6750 insufficient_scope challenge naming scope to
 * the 403 answer already in out, so that an OAuth client can step up. */
void skd__auth_scope_challenge(skd_http_req *req, skd_http_reply *out, const char *scope);
/* auth.c: GET /.well-known/oauth-protected-resource[/mcp] (RFC 9728); 404
 * when OAuth is off. */
void skd__auth_resource_metadata(skd_http_req *req, skd_http_reply *out);
/* auth.c: Host and Origin against the allow lists; 0, or 403 in out. */
int skd__auth_host_origin(skd_http_req *req, skd_http_reply *out);
/* auth.c: 1 when value (host[:port]) names an allowed host in the CSV list. */
int skd__auth_host_allowed(const char *csv, const char *value);
/* auth.c: 1 when origin is allowed (local origins always; csv adds). */
int skd__auth_origin_allowed(const char *csv, const char *origin);

#endif
