/*
 * The HTTP server on libmicrohttpd (see include/skilld/server.h, http.h).
 *
 * Thread model: MHD runs a listening thread and one thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION), so a handler may block for as long as a
 * skill runs without holding up anyone else; MHD_OPTION_CONNECTION_LIMIT
 * caps the threads and MHD_OPTION_CONNECTION_TIMEOUT drops idle and
 * slow-sending clients (slowloris). Request bodies are collected into a
 * capped buffer (SKILLD_MAX_BODY_BYTES, 413 past it; a Content-Length over
 * the cap is refused before any of the body is read).
 *
 * Trust: nothing in a request is trusted. The order of checks is fixed:
 * Host/Origin, route, body size, bearer secret, scope; only then does a
 * handler see the request.
 */
#include "server/custom_http.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/test_skills.h"
#include "skilld/net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct skd_server {
    skd_engine *e;
    struct MHD_Daemon *d;
    skd_calls *calls;
    skd_mcp *mcp;
    skd_a2a *a2a; /* A2A tasks (a2a.c) */
    unsigned port;
    size_t max_body;
    atomic_int stopping;
    atomic_int active; /* requests between their first byte and their last reply byte */
    int stopped;
};

/* Per-request state kept by MHD between calls of the access handler. */
struct conn_req {
    skd_buf body;
    int too_big;
    size_t discarded;
};

skd_engine *skd__server_engine(skd_server *s)
{
    return s->e;
}

skd_a2a *skd__server_a2a(skd_server *s)
{
    return s->a2a;
}

skd_mcp *skd__server_mcp(skd_server *s)
{
    return s->mcp;
}

skd_calls *skd__server_calls(skd_server *s)
{
    return s->calls;
}

int skd__server_stopping(skd_server *s)
{
    return atomic_load(&s->stopping);
}

unsigned skd_server_port(const skd_server *s)
{
    return s->port;
}

/* ---- replies ---------------------------------------------------------- */

static struct MHD_Response *text_response(char *data, size_t len, const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    return r;
}

void skd__http_json(skd_http_reply *out, unsigned status, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (out->resp)
        MHD_destroy_response(out->resp);
    out->resp = NULL;
    out->status = status;
    if (s)
        out->resp = text_response(s, strlen(s), "application/json");
}

void skd__http_error(skd_http_reply *out, unsigned status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    skd__http_json(out, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg));
}

unsigned skd__http_status_for(int code)
{
    switch (code) {
    case SKD_EINVAL:
    case SKD_EPATH:
    case SKD_EISDIR:
    case SKD_ENOTDIR:
    case SKD_ENOTEMPTY:
    case SKD_ESPECIAL:
    case SKD_EUNSUPPORTED:
    case SKD_ECONFIG:
        return MHD_HTTP_BAD_REQUEST;
    case SKD_EUNAUTH:
        return MHD_HTTP_UNAUTHORIZED;
    case SKD_EFORBIDDEN:
    case SKD_EBLOCKED:
        return MHD_HTTP_FORBIDDEN;
    case SKD_ENOENT:
        return MHD_HTTP_NOT_FOUND;
    case SKD_EEXISTS:
    case SKD_EDISABLED:
        return MHD_HTTP_CONFLICT;
    case SKD_ETOOBIG:
        return MHD_HTTP_CONTENT_TOO_LARGE;
    case SKD_EUNSUPPORTED_MEDIA:
        return MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
    case SKD_EQUOTA:
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    case SKD_EBUSY:
        return MHD_HTTP_TOO_MANY_REQUESTS;
    case SKD_ETIMEOUT:
        return MHD_HTTP_GATEWAY_TIMEOUT;
    case SKD_EUPSTREAM:
    case SKD_ENETWORK:
        return MHD_HTTP_BAD_GATEWAY;
    case SKD_ESANDBOX:
    case SKD_ECANCELLED:
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    default:
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

void skd__http_from_err(skd_http_reply *out, const skd_err *err)
{
    skd__http_error(out, skd__http_status_for(err->code), skd_errcode(err->code), "%s",
                    skd_err_msg(err));
}

void skd__http_empty(skd_http_reply *out, unsigned status)
{
    if (out->resp)
        MHD_destroy_response(out->resp);
    out->status = status;
    out->resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}

const char *skd__http_header(const skd_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *skd__http_query(const skd_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

json_t *skd__http_body_object(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    json_t *v = skd_json_parse(req->body, req->body_len, &err);
    if (!v) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_json", "%s", skd_err_msg(&err));
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "the request body must be a JSON object");
        return NULL;
    }
    return v;
}

/* ---- routing ---------------------------------------------------------- */

/* Does path match pattern? Sets *param to the "{}" segment (in path). */
static int path_match(const char *pattern, const char *path, const char **param)
{
    const char *brace = strstr(pattern, "{}");
    *param = NULL;
    if (!brace)
        return strcmp(pattern, path) == 0;
    size_t pre = (size_t)(brace - pattern);
    if (strncmp(pattern, path, pre) != 0)
        return 0;
    const char *seg = path + pre;
    if (!*seg || strchr(seg, '/') || strlen(seg) > 256)
        return 0;
    *param = seg;
    return 1;
}

/* Find the route; NULL with *path_known set when only the method differs
 * (allow then lists the methods). */
static const skd_route *route_find(const char *method, const char *path, const char **param,
                                   int *path_known, char *allow, size_t allow_cap)
{
    *path_known = 0;
    allow[0] = '\0';
    for (const skd_route *r = skd__routes; r->method; r++) {
        const char *p;
        if (!path_match(r->pattern, path, &p))
            continue;
        if (strcmp(r->method, method) == 0) {
            *param = p;
            return r;
        }
        *path_known = 1;
        size_t n = strlen(allow);
        snprintf(allow + n, allow_cap - n, "%s%s", n ? ", " : "", r->method);
    }
    return NULL;
}

static const char *route_label(const skd_route *r)
{
    return r ? r->pattern : "unmatched";
}

/* Run the checks and the handler; fills out. Returns the route. */
static const skd_route *dispatch(skd_http_req *req, struct conn_req *cr, skd_http_reply *out)
{
    char allow[64];
    int path_known;
    if (skd__auth_host_origin(req, out) != 0)
        return NULL;
    const skd_route *r =
        route_find(req->method, req->path, &req->param, &path_known, allow, sizeof(allow));
    if (!r) {
        if (path_known) {
            skd__http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                            "%s is not served on %s", req->method, req->path);
            if (out->resp)
                MHD_add_response_header(out->resp, MHD_HTTP_HEADER_ALLOW, allow);
        } else {
            skd__http_error(out, MHD_HTTP_NOT_FOUND, "not_found", "no such endpoint");
        }
        return NULL;
    }
    if (cr->too_big) {
        skd__http_error(out, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                        "the request body is larger than %zu bytes", req->srv->max_body);
        return r;
    }
    if (r->auth && skd__auth_bearer(req, out) != 0)
        return r;
    if (r->auth && (req->key.scopes & r->scope) != r->scope) {
        skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden", "this API key lacks the %s scope",
                        r->scope & SKD_SCOPE_ADMIN     ? "skills:admin"
                        : r->scope & SKD_SCOPE_EXECUTE ? "skills:execute"
                                                       : "skills:read");
        return r;
    }
    r->fn(req, out);
    return r;
}

static enum MHD_Result send_reply(skd_server *srv, struct MHD_Connection *conn, const skd_route *r,
                                  skd_http_reply *out)
{
    if (!out->resp) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error",
                        "the server could not build a response");
        if (!out->resp)
            return MHD_NO;
    }
    skd__metrics_request(route_label(r), out->status);
    if (atomic_load(&srv->stopping))
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, out->status, out->resp);
    MHD_destroy_response(out->resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    skd_server *srv = cls;
    struct conn_req *cr = *con_cls;
    skd_http_reply out = {0, NULL};
    if (!cr) {
        if (!(cr = calloc(1, sizeof(*cr))))
            return MHD_NO;
        skd_buf_init(&cr->body, srv->max_body);
        *con_cls = cr;
        atomic_fetch_add(&srv->active, 1);
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        int64_t n = 0;
        if (cl && (skd_parse_i64(cl, 0, INT64_MAX, &n) != 0 || (uint64_t)n > srv->max_body)) {
            /* Refuse before reading a byte of the body; MHD closes the
             * connection afterwards since the body was not consumed. */
            skd__http_error(&out, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                            "the request body is larger than %zu bytes", srv->max_body);
            return send_reply(srv, conn, NULL, &out);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cr->too_big && skd_buf_append(&cr->body, upload_data, *upload_size) != 0)
            cr->too_big = 1;
        if (cr->too_big && (cr->discarded += *upload_size) > 4 * srv->max_body)
            return MHD_NO; /* a chunked flood: drop the connection */
        *upload_size = 0;
        return MHD_YES;
    }
    skd_http_req req = {
        .srv = srv,
        .conn = conn,
        .method = method,
        .path = url,
        .body = cr->body.data ? cr->body.data : "",
        .body_len = cr->body.len,
    };
    const skd_route *r = dispatch(&req, cr, &out);
    return send_reply(srv, conn, r, &out);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    skd_server *srv = cls;
    struct conn_req *cr = *con_cls;
    if (cr) {
        skd_buf_free(&cr->body);
        free(cr);
        atomic_fetch_sub(&srv->active, 1);
    }
    *con_cls = NULL;
}

/* ---- start and stop --------------------------------------------------- */

/* Parse "host:port", "[v6]:port" or ":port" into addr. */
static int parse_listen(const char *listen, struct sockaddr_storage *addr, socklen_t *len, int *v6,
                        skd_err *err)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen + strlen(listen) - 1)
        return skd_err_set(err, SKD_ECONFIG, "listen address %s: expected host:port", listen);
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof(host))
        return skd_err_set(err, SKD_ECONFIG, "listen address %s is too long", listen);
    memcpy(host, listen, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    int64_t port;
    if (skd_parse_i64(colon + 1, 0, 65535, &port))
        return skd_err_set(err, SKD_ECONFIG, "listen address %s: bad port", listen);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    int g = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (g != 0 || !res)
        return skd_err_set(err, SKD_ECONFIG, "listen address %s: %s", listen, gai_strerror(g));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    skd_debug("http: %s", msg);
}

/* The outbound guard's refusal counter, in the type the metrics hook takes. */
static unsigned long outbound_rejected(void)
{
    return (unsigned long)skd_net_blocked_total();
}

int skd_server_start(skd_engine *e, const char *listen, skd_server **out, skd_err *err)
{
    *out = NULL;
    const skd_config *cfg = skd_engine_config(e);
    struct sockaddr_storage addr;
    socklen_t alen = 0;
    int v6 = 0, rc = parse_listen(listen, &addr, &alen, &v6, err);
    if (rc)
        return rc;
    if ((rc = skd__test_skills_register(e, (const struct sockaddr *)&addr, err)) != 0)
        return rc;
    skd_metrics_set_outbound_rejected_fn(outbound_rejected);
    skd_server *s = calloc(1, sizeof(*s));
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    s->e = e;
    s->max_body = (size_t)skd_config_int(cfg, "SKILLD_MAX_BODY_BYTES");
    s->calls = skd__calls_new();
    s->mcp = s->calls ? skd__mcp_new(e, s->calls) : NULL;
    s->a2a = skd__a2a_new(e);
    if (!s->mcp || !s->a2a) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)skd_config_int(cfg, "SKILLD_CONNECTION_TIMEOUT_S"), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)skd_config_int(cfg, "SKILLD_MAX_CONNECTIONS"), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U, MHD_OPTION_END);
    if (!s->d) {
        rc =
            skd_err_set(err, SKD_EIO, "cannot listen on %s (address in use or not local?)", listen);
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return 0;
out:
    skd_server_free(s);
    return rc;
}

void skd_server_stop(skd_server *s, int grace_ms)
{
    if (!s || s->stopped)
        return;
    s->stopped = 1;
    atomic_store(&s->stopping, 1);
    if (s->d) {
        MHD_socket fd = MHD_quiesce_daemon(s->d); /* stop accepting */
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
    skd__mcp_close_all(s->mcp);  /* ends GET streams */
    skd__a2a_cancel_all(s->a2a); /* running A2A tasks end; their streams follow */
    int64_t deadline = skd_mono_ms() + grace_ms;
    if (skd__calls_stop(s->calls, grace_ms) != 0)
        skd_warn("server stop: calls still running after %d ms", grace_ms);
    /* Let the cancelled calls' replies go out before connections close. */
    while (atomic_load(&s->active) > 0 && skd_mono_ms() < deadline)
        usleep(10 * 1000);
    if (s->d)
        MHD_stop_daemon(s->d); /* closes connections, joins their threads */
    s->d = NULL;
}

void skd_server_free(skd_server *s)
{
    if (!s)
        return;
    skd_server_stop(s, 5000);
    /* Stream workers are detached and use s->mcp: outlive them. */
    while (s->calls && skd__calls_drain(s->calls, 1000) != 0)
        skd_warn("server: waiting for stream workers to end");
    skd__mcp_free(s->mcp);
    skd__a2a_free(s->a2a);
    skd__calls_free(s->calls);
    free(s);
}
