/*
 * MCP Streamable HTTP at /mcp (protocol 2025-11-25, 2025-06-18,
 * 2025-03-26), on top of the transport-neutral dispatcher in mcp.c.
 *
 *   POST   one JSON-RPC message. initialize creates a session (its id goes
 *          back in Mcp-Session-Id); every other message must carry that
 *          header (400 without, 404 for an unknown or expired session or one
 *          that belongs to another key). Notifications and responses get
 *          202. A request gets application/json, or an SSE stream when the
 *          client accepts one and the call will send notifications
 *          (progress token, or logging enabled): the call then runs on a
 *          worker thread that feeds the stream. A client that hangs up
 *          before its reply is out cancels the request.
 *   GET    an SSE stream for the session's own notifications
 *          (notifications/tools/list_changed).
 *   DELETE ends the session (its running calls are cancelled).
 *
 * Trust: the caller's identity is the bearer key checked by http.c; the
 * session id only selects state of that same key. MCP-Protocol-Version,
 * when sent, must be one this server speaks (400 otherwise).
 */
#include "server/http.h"
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SESSION_HEADER "Mcp-Session-Id"
#define VERSION_HEADER "MCP-Protocol-Version"
#define MAX_STREAM_BYTES (64u * 1024 * 1024)

/* A client that hangs up before its reply is out cancels its request, as
 * notifications/cancelled would: no one could receive the result (this
 * server keeps no streams to resume). */
struct hangup {
    skd_mcp_session *s;
    json_t *id;
};

static void hangup_fire(void *arg)
{
    struct hangup *h = arg;
    json_t *n =
        json_pack("{s:s, s:s, s:{s:O, s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled",
                  "params", "requestId", h->id, "reason", "the client disconnected");
    skd_mcp_io io = {0};
    if (n)
        json_decref(skd__mcp_handle(h->s, n, &io));
    json_decref(n);
}

static void hangup_free(void *arg)
{
    struct hangup *h = arg;
    skd__mcp_session_unref(h->s);
    json_decref(h->id);
    free(h);
}

static void cancel_on_hangup(skd_http_req *req, skd_mcp_session *s, const json_t *msg)
{
    const json_t *id = json_object_get(msg, "id");
    struct hangup *h = id ? malloc(sizeof(*h)) : NULL;
    if (!h)
        return;
    skd__mcp_session_ref(s);
    *h = (struct hangup){s, json_deep_copy(id)};
    skd__http_on_hangup(req, hangup_fire, h, hangup_free);
}

static void rpc_reply(skd_http_reply *out, unsigned status, json_t *msg)
{
    skd__http_json(out, status, msg);
}

static int accepts(const skd_http_req *req, const char *type)
{
    const char *a = skd__http_header(req, MHD_HTTP_HEADER_ACCEPT);
    return a && strcasestr(a, type) != NULL;
}

/* Check MCP-Protocol-Version; 0 or an answer in out. */
static int check_version(skd_http_req *req, skd_http_reply *out)
{
    const char *v = skd__http_header(req, VERSION_HEADER);
    if (v && !skd__mcp_version_supported(v)) {
        rpc_reply(out, MHD_HTTP_BAD_REQUEST,
                  skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST,
                                 "unsupported MCP-Protocol-Version %.40s (supported: "
                                 "2025-11-25, 2025-06-18, 2025-03-26)",
                                 v));
        return -1;
    }
    return 0;
}

/* The session named by the header, or an answer in out (400/404). */
static skd_mcp_session *find_session(skd_http_req *req, skd_http_reply *out)
{
    const char *id = skd__http_header(req, SESSION_HEADER);
    if (!id) {
        rpc_reply(out, MHD_HTTP_BAD_REQUEST,
                  skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST,
                                 "Mcp-Session-Id header is required; send initialize first"));
        return NULL;
    }
    skd_mcp_session *s = skd__mcp_session_find(skd__server_mcp(req->srv), id, req->key.id);
    if (!s)
        rpc_reply(out, MHD_HTTP_NOT_FOUND,
                  skd__rpc_error(NULL, -32001, "session not found; initialize a new one"));
    return s;
}

static void do_initialize(skd_http_req *req, const json_t *msg, skd_http_reply *out)
{
    skd_mcp_session *s =
        skd__mcp_session_new(skd__server_mcp(req->srv), req->key.id, req->key.scopes);
    if (!s) {
        rpc_reply(out, MHD_HTTP_SERVICE_UNAVAILABLE,
                  skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR,
                                 "too many MCP sessions"));
        return;
    }
    skd_mcp_io io = {0};
    json_t *reply = skd__mcp_handle(s, msg, &io);
    int ok = reply && json_object_get(reply, "result");
    rpc_reply(out, MHD_HTTP_OK, reply);
    if (ok && out->resp)
        MHD_add_response_header(out->resp, SESSION_HEADER, skd__mcp_session_id(s));
    else
        skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

struct sse_job {
    skd_mcp_session *sess;
    json_t *msg;
};

static void sse_job_run(void *arg, skd_sse *sse)
{
    struct sse_job *job = arg;
    skd_mcp_io io = {skd__sse_send, sse, 0};
    json_t *reply = skd__mcp_handle(job->sess, job->msg, &io);
    if (reply && !io.cancelled)
        skd__sse_send(sse, reply);
    json_decref(reply);
    json_decref(job->msg);
    skd__mcp_session_unref(job->sess);
    free(job);
}

/* Answer a request with an SSE stream fed by a worker thread. */
static void request_sse(skd_http_req *req, skd_mcp_session *s, json_t *msg, skd_http_reply *out)
{
    struct MHD_Response *resp = NULL;
    skd_sse *sse = NULL;
    struct sse_job *job = calloc(1, sizeof(*job));
    int rc = SKD_ENOMEM;
    if (job) {
        skd__mcp_session_ref(s);
        *job = (struct sse_job){s, json_incref(msg)};
        rc = skd__sse_spawn(skd__server_calls(req->srv), SKD__CALLS_MAX_JOBS, MAX_STREAM_BYTES,
                            sse_job_run, job, &resp, &sse);
        if (rc) {
            skd__mcp_session_unref(s);
            json_decref(msg);
            free(job);
        }
    }
    if (rc == SKD_EBUSY) {
        rpc_reply(out, MHD_HTTP_SERVICE_UNAVAILABLE,
                  skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR,
                                 "too many calls in flight; retry later"));
        return;
    }
    if (rc) {
        rpc_reply(
            out, MHD_HTTP_INTERNAL_SERVER_ERROR,
            skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    out->status = MHD_HTTP_OK;
    out->resp = resp;
    out->sse = sse;
}

/* A request: JSON, or SSE when the client accepts it and will get
 * notifications during the call. */
static void do_request(skd_http_req *req, skd_mcp_session *s, json_t *msg, skd_http_reply *out)
{
    int sse_ok = accepts(req, "text/event-stream");
    int json_ok = accepts(req, "application/json") || accepts(req, "*/*") ||
                  !skd__http_header(req, MHD_HTTP_HEADER_ACCEPT);
    cancel_on_hangup(req, s, msg);
    int streams =
        skd__mcp_wants_progress(msg) ||
        (skd__mcp_session_logging(s) && strcmp(skd_json_str(msg, "method", ""), "tools/call") == 0);
    if (sse_ok && (streams || !json_ok)) {
        request_sse(req, s, msg, out);
        return;
    }
    skd_mcp_io io = {0};
    json_t *reply = skd__mcp_handle(s, msg, &io);
    if (!reply) {
        skd__http_empty(out, MHD_HTTP_ACCEPTED);
        return;
    }
    rpc_reply(out, MHD_HTTP_OK, reply);
}

void skd__mcp_http_post(skd_http_req *req, skd_http_reply *out)
{
    const char *ct = skd__http_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct || strncasecmp(ct, "application/json", 16) != 0) {
        rpc_reply(
            out, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
            skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST, "Content-Type must be application/json"));
        return;
    }
    if (check_version(req, out))
        return;
    json_t *err = NULL;
    json_t *msg = skd__rpc_parse(req->body, req->body_len, &err);
    if (!msg) {
        rpc_reply(out, MHD_HTTP_BAD_REQUEST, err);
        return;
    }
    enum skd_rpc_kind kind = skd__rpc_classify(msg, &err);
    if (kind == SKD_RPC_INVALID) {
        rpc_reply(out, MHD_HTTP_BAD_REQUEST, err);
        goto out;
    }
    if (kind == SKD_RPC_REQUEST && strcmp(skd_json_str(msg, "method", ""), "initialize") == 0) {
        do_initialize(req, msg, out);
        goto out;
    }
    skd_mcp_session *s = find_session(req, out);
    if (!s)
        goto out;
    if (kind == SKD_RPC_REQUEST) {
        do_request(req, s, msg, out);
    } else {
        skd_mcp_io io = {0};
        json_decref(skd__mcp_handle(s, msg, &io));
        skd__http_empty(out, MHD_HTTP_ACCEPTED);
    }
    skd__mcp_session_unref(s);
out:
    json_decref(msg);
}

static void release_sse(void *arg)
{
    skd_sse *sse = arg;
    skd__sse_close(sse);
    skd__sse_unref(sse);
}

void skd__mcp_http_get(skd_http_req *req, skd_http_reply *out)
{
    if (!accepts(req, "text/event-stream")) {
        skd__http_error(out, MHD_HTTP_NOT_ACCEPTABLE, "not_acceptable",
                        "GET /mcp serves text/event-stream only");
        return;
    }
    if (check_version(req, out))
        return;
    skd_mcp_session *s = find_session(req, out);
    if (!s)
        return;
    skd_sse *sse = skd__sse_new(MAX_STREAM_BYTES, NULL);
    struct MHD_Response *resp = sse ? skd__sse_response(sse) : NULL;
    if (!resp) {
        skd__sse_unref(sse);
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error", "out of memory");
    } else {
        /* The session keeps the stream's first reference; a newer GET
         * replaces (and ends) this one. */
        skd__mcp_session_set_sink(s, skd__sse_send, sse, release_sse);
        out->status = MHD_HTTP_OK;
        out->resp = resp;
        out->sse = sse;
    }
    skd__mcp_session_unref(s);
}

void skd__mcp_http_delete(skd_http_req *req, skd_http_reply *out)
{
    if (check_version(req, out))
        return; /* the version rule holds for every request, DELETE too */
    skd_mcp_session *s = find_session(req, out);
    if (!s)
        return;
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
    skd__http_empty(out, MHD_HTTP_NO_CONTENT);
}
