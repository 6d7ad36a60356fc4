/*
 * MCP Streamable HTTP at /mcp, on top of the transport-neutral dispatcher
 * in mcp.c: the 2025 revisions (2025-11-25, 2025-06-18, 2025-03-26) with
 * sessions, and 2026-07-28 without any, chosen per request by the body's
 * _meta envelope claim (see post_modern below).
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
 * 2026-07-28 (a request whose params._meta claims that revision or a later
 * one): no session at all. MCP-Protocol-Version and Mcp-Method must be sent
 * and agree with the body, Mcp-Name with params.name/uri, Mcp-Param-* with
 * the arguments a tool mirrors (-32020, 400); the envelope is checked
 * (-32602 or -32022, 400); the call runs with the key's identity only and
 * nothing of it is kept; an unknown method is 404. subscriptions/listen
 * answers with an SSE stream that stays open for change notifications.
 *
 * Trust: the caller's identity is the bearer key checked by http.c; the
 * session id only selects state of that same key. MCP-Protocol-Version,
 * when sent, must be one this server speaks (400 otherwise).
 */
#include "server/http.h"
#include "builtins/fileskill.h"
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

/* A call answered on an SSE stream, with the session it runs on (a 2025
 * session, or a 2026-07-28 request's transient one). */
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

/* ---- 2026-07-28 ------------------------------------------------------ */

#define METHOD_HEADER "Mcp-Method"
#define NAME_HEADER "Mcp-Name"

static void header_mismatch(skd_http_reply *out, const json_t *id, const char *why)
{
    rpc_reply(out, MHD_HTTP_BAD_REQUEST,
              skd__rpc_error(id, SKD_RPC_HEADER_MISMATCH,
                             "Bad Request: the request headers and body disagree: %s", why));
}

/* A header value without the optional white space around it (RFC 9110).
 * Returns a malloc'd string or NULL. */
static char *ows_trimmed(const char *h)
{
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    return strndup(h, n);
}

/* 1 when header name is present and (OWS trimmed) equal to want; -1 when
 * absent. */
static int header_is(skd_http_req *req, const char *name, const char *want)
{
    const char *h = skd__http_header(req, name);
    if (!h)
        return -1;
    char *t = ows_trimmed(h);
    int same = t && strcmp(t, want) == 0;
    free(t);
    return same;
}

/* Mcp-Name as sent: plain, or the =?base64?...?= form. Returns a malloc'd
 * string, or NULL when the encoding is invalid. */
static char *decode_name(const char *raw)
{
    char *h = ows_trimmed(raw);
    if (!h)
        return NULL;
    size_t n = strlen(h);
    if (n >= 11 && strncmp(h, "=?base64?", 9) == 0 && strcmp(h + n - 2, "?=") == 0) {
        unsigned char *out = NULL;
        size_t len = 0;
        char *s =
            skd__base64_decode(h + 9, n - 11, 8192, &out, &len, NULL) == 0 ? malloc(len + 1) : NULL;
        if (s) {
            memcpy(s, out, len);
            s[len] = '\0';
        }
        free(out);
        free(h);
        return s;
    }
    return h;
}

/* The standard headers of a 2026-07-28 request: MCP-Protocol-Version and
 * Mcp-Method are required and must agree with the body, Mcp-Name with
 * params.name (tools/call, prompts/get) or params.uri (resources/read).
 * 0, or -32020 on HTTP 400 in out. */
static int check_modern_headers(skd_http_req *req, const json_t *msg, const char *claimed,
                                int request, skd_http_reply *out)
{
    const json_t *id = json_object_get(msg, "id");
    const char *method = skd_json_str(msg, "method", "");
    int hv = header_is(req, VERSION_HEADER, claimed);
    int hm = header_is(req, METHOD_HEADER, method);
    if (hv == 0) {
        header_mismatch(out, id, "the MCP-Protocol-Version header names another revision");
        return -1;
    }
    if (hm == 0) {
        header_mismatch(out, id, "the Mcp-Method header names another method");
        return -1;
    }
    if (!request)
        return 0;
    if (hv < 0 || hm < 0) {
        header_mismatch(out, id,
                        hv < 0 ? "the required MCP-Protocol-Version header is absent"
                               : "the required Mcp-Method header is absent");
        return -1;
    }
    const json_t *params = json_object_get(msg, "params");
    const char *field = strcmp(method, "resources/read") == 0 ? "uri"
                        : strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0
                            ? "name"
                            : NULL;
    const char *body = field ? skd_json_str(params, field, NULL) : NULL;
    if (!body)
        return 0;
    const char *hn = skd__http_header(req, NAME_HEADER);
    char *dec = hn ? decode_name(hn) : NULL;
    int bad = !dec || strcmp(dec, body) != 0;
    free(dec);
    if (bad) {
        header_mismatch(out, id,
                        !hn ? "the required Mcp-Name header is absent"
                            : "the Mcp-Name header does not name the body's tool or resource");
        return -1;
    }
    return 0;
}

/* The text an argument value is carried as in its Mcp-Param-* header:
 * strings as they are, integers in decimal, booleans as true/false. NULL
 * for other types (the schema extension allows no others). */
static char *param_text(const json_t *v)
{
    char num[32];
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
        return strdup(num);
    }
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    return NULL;
}

/* SEP-2243: a tool whose input schema marks a top-level property with
 * "x-mcp-header": NAME has that argument mirrored in Mcp-Param-NAME. When
 * the body carries the argument, the header must be there and (after the
 * =?base64?...?= decoding) equal to it; a header without the argument, or
 * one that does not decode, disagrees too. 0, or -32020 on HTTP 400. */
static int check_param_headers(skd_http_req *req, const json_t *msg, skd_http_reply *out)
{
    const json_t *params = json_object_get(msg, "params");
    const json_t *id = json_object_get(msg, "id");
    json_t *schema = skd__mcp_tool_schema(skd__server_mcp(req->srv), req->key.id,
                                          skd_json_str(params, "name", NULL));
    const json_t *args = json_object_get(params, "arguments");
    const char *prop;
    json_t *def;
    int rc = 0;
    json_object_foreach (json_object_get(schema, "properties"), prop, def) {
        const char *h = skd_json_str(def, "x-mcp-header", NULL);
        char hname[128];
        if (!h || snprintf(hname, sizeof(hname), "Mcp-Param-%s", h) >= (int)sizeof(hname))
            continue;
        const char *sent = skd__http_header(req, hname);
        const json_t *v = json_object_get(args, prop);
        char *want = v ? param_text(v) : NULL, *got = sent ? decode_name(sent) : NULL;
        const char *why = NULL;
        if (sent && !got)
            why = "an Mcp-Param header is not valid (=?base64?...?= that does not decode)";
        else if (v && !sent)
            why = "an argument the tool mirrors in an Mcp-Param header was sent without it";
        else if (!v && sent)
            why = "an Mcp-Param header was sent without its argument";
        else if (v && (!want || strcmp(want, got) != 0))
            why = "an Mcp-Param header does not match its argument";
        free(want);
        free(got);
        if (why) {
            header_mismatch(out, id, why);
            rc = -1;
            break;
        }
    }
    json_decref(schema);
    return rc;
}

static void release_listen(void *arg)
{
    skd_sse *sse = arg;
    skd__sse_close(sse);
    skd__sse_unref(sse);
}

static int listen_gone(void *arg)
{
    return skd__sse_gone(arg);
}

/* subscriptions/listen: an SSE stream that stays open; the dispatcher owns
 * its first reference. */
static void do_listen(skd_http_req *req, const json_t *msg, skd_http_reply *out)
{
    skd_sse *sse = skd__sse_new(MAX_STREAM_BYTES, NULL);
    struct MHD_Response *resp = sse ? skd__sse_response(sse) : NULL;
    if (!resp) {
        skd__sse_unref(sse);
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error", "out of memory");
        return;
    }
    json_t *err = skd__mcp_listen(skd__server_mcp(req->srv), msg, skd__sse_send, sse,
                                  release_listen, listen_gone);
    if (err) {
        MHD_destroy_response(resp);
        release_listen(sse);
        rpc_reply(out, MHD_HTTP_OK, err);
        return;
    }
    out->status = MHD_HTTP_OK;
    out->resp = resp;
    out->sse = sse;
}

/* One 2026-07-28 message: no session, nothing kept between requests. */
static void post_modern(skd_http_req *req, json_t *msg, enum skd_rpc_kind kind, const char *claimed,
                        skd_http_reply *out)
{
    if (check_modern_headers(req, msg, claimed, kind == SKD_RPC_REQUEST, out))
        return;
    if (kind == SKD_RPC_REQUEST && strcmp(skd_json_str(msg, "method", ""), "tools/call") == 0 &&
        check_param_headers(req, msg, out))
        return;
    if (kind != SKD_RPC_REQUEST) {
        /* Notifications of this revision change nothing here: a request is
         * cancelled by hanging up, and there is no session to tell. */
        skd__http_empty(out, MHD_HTTP_ACCEPTED);
        return;
    }
    json_t *bad = skd__mcp_check_envelope(msg);
    if (bad) {
        rpc_reply(out, MHD_HTTP_BAD_REQUEST, bad);
        return;
    }
    if (skd__mcp_is_listen(msg)) {
        do_listen(req, msg, out);
        return;
    }
    const json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    int streams = skd__mcp_wants_progress(msg) ||
                  (json_object_get(meta, SKD_MCP_META_LOGLEVEL) &&
                   strcmp(skd_json_str(msg, "method", ""), "tools/call") == 0);
    skd_mcp_session *conn =
        skd__mcp_session_transient(skd__server_mcp(req->srv), req->key.id, req->key.scopes);
    if (!conn) {
        rpc_reply(
            out, MHD_HTTP_INTERNAL_SERVER_ERROR,
            skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    cancel_on_hangup(req, conn, msg); /* hanging up is how this revision cancels */
    if (accepts(req, "text/event-stream") && streams) {
        request_sse(req, conn, msg, out);
        skd__mcp_session_unref(conn);
        return;
    }
    skd_mcp_io io = {0};
    json_t *reply = skd__mcp_handle(conn, msg, &io);
    skd__mcp_session_unref(conn);
    /* The revision's statuses: an unknown method is 404, a capability the
     * client did not declare 400; every other answer is in-band. */
    json_int_t code = json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
    rpc_reply(out,
              code == SKD_RPC_METHOD_NOT_FOUND     ? MHD_HTTP_NOT_FOUND
              : code == SKD_RPC_MISSING_CAPABILITY ? MHD_HTTP_BAD_REQUEST
                                                   : MHD_HTTP_OK,
              reply);
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
    /* An OAuth token without skills:execute gets the HTTP challenge that
     * lets its client ask for that scope (RFC 6750, 3.1) instead of a
     * tool error it cannot act on. */
    if (kind == SKD_RPC_REQUEST && skd_key_is_oauth(&req->key) &&
        !(req->key.scopes & SKD_SCOPE_EXECUTE) &&
        strcmp(skd_json_str(msg, "method", ""), "tools/call") == 0) {
        rpc_reply(out, MHD_HTTP_FORBIDDEN,
                  skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INVALID_REQUEST,
                                 "this access token lacks the skills:execute scope"));
        skd__auth_scope_challenge(req, out, "skills:execute");
        goto out;
    }
    /* The era is the body's (its _meta envelope claim); the header only
     * cross-checks it, as the 2026-07-28 revision asks. */
    const char *claimed = kind == SKD_RPC_RESPONSE ? NULL : skd__mcp_claimed_version(msg);
    const char *hv = skd__http_header(req, VERSION_HEADER);
    if (claimed && (!*claimed || skd__mcp_is_modern(claimed))) {
        post_modern(req, msg, kind, claimed, out);
        goto out;
    }
    if (hv && skd__mcp_is_modern(hv)) {
        if (kind == SKD_RPC_NOTIFICATION) {
            post_modern(req, msg, kind, hv, out);
        } else if (strcmp(skd_json_str(msg, "method", ""), "initialize") == 0) {
            header_mismatch(out, json_object_get(msg, "id"),
                            "an initialize request (2025 handshake) was sent with a "
                            "2026-07-28 MCP-Protocol-Version header");
        } else {
            rpc_reply(out, MHD_HTTP_BAD_REQUEST, skd__mcp_check_envelope(msg));
        }
        goto out;
    }
    if (check_version(req, out))
        goto out;
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
