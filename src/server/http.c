/*
 * The HTTP server on libmicrohttpd (see include/skilld/server.h, http.h).
 *
 * Thread model: a small pool of MHD event threads (epoll, one per core by
 * default, SKILLD_HTTP_THREADS) serves every connection; no thread is held
 * per connection, so thousands of idle or slow clients cost memory only
 * (MHD_OPTION_CONNECTION_MEMORY_LIMIT per connection), and conns.c caps
 * them (SKILLD_MAX_CONNECTIONS, the longest-idle one is closed first) and
 * times their headers and bodies. Event threads never run a handler that
 * may block: once a request is read, its connection is suspended and the
 * handler runs on a worker of the server's pool (calls.c); the worker
 * resumes the connection with the reply. The one exception is a call that
 * cannot block (SKD_ROUTE_QUICK: a file_read, which takes no lock and
 * starts nothing), run on the event thread: handing it to a worker
 * cost more than the call. SSE replies are fed by workers and
 * suspend their connection while they have nothing to send (sse.c). A
 * client that hangs up while its connection is suspended fires the
 * request's cancel token (conns.c): a REST call's sandbox is killed, an MCP
 * call is cancelled.
 *
 * Trust: nothing in a request is trusted. Every check that needs only the
 * headers runs when they arrive, before a byte of the body is read: Host
 * and Origin, route, declared body size, bearer secret, scope, the key's
 * rate limit. A request refused there gets its answer at once and its body
 * is never read into memory (MHD discards it and closes the connection).
 * Bodies of accepted requests are collected into a capped buffer
 * (SKILLD_MAX_BODY_BYTES, 413 past it), and all buffered bodies together
 * are capped too (503 past it).
 */
#include "server/conns.h"
#include "server/custom_http.h"
#include "server/http.h"
#include "server/jsonrpc.h"
#include "server/metrics.h"
#include "server/ratelimit.h"
#include "server/sse.h"
#include "server/test_hooks.h"
#include "skilld/net.h"
#include "skilld/oauth.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes of MHD memory per connection: request line, headers, read buffer. */
#define CONN_MEMORY (16u * 1024)
/* Buffered request bodies, all connections together, in max-size bodies. */
#define BODY_BUDGET_BODIES 64
/* JSON-RPC error code of a request refused before it was read (MCP, A2A). */
#define RPC_REFUSED -32000

struct skd_server {
    skd_engine *e;
    struct MHD_Daemon *d;
    skd_calls *calls;
    skd_conns *conns;
    skd_ratelimit *rl;
    skd_mcp *mcp;
    skd_a2a *a2a; /* A2A tasks (a2a.c) */
    unsigned port;
    size_t max_body;
    size_t body_budget;       /* cap of body_bytes */
    atomic_size_t body_bytes; /* request bodies buffered now */
    atomic_int stopping;
    atomic_int active; /* requests between their first byte and their last reply byte */
    int stopped;
};

enum req_state {
    R_READING, /* headers in, body arriving */
    R_WORKING, /* a worker runs the handler; the connection is suspended */
    R_DONE,    /* the worker answered in out */
};

/* Per-request state kept by MHD between calls of the access handler. */
struct conn_req {
    skd_http_req req; /* what the handler sees (stable: a worker reads it) */
    skd_http_reply out;
    const skd_route *route;
    skd_conn *sc; /* the connection's entry in the table */
    skd_cancel *cancel;
    void (*hook_free)(void *); /* frees hook_arg when the request ends */
    void *hook_arg;
    skd_buf body;
    size_t counted; /* bytes of body counted in srv->body_bytes */
    size_t discarded;
    int too_big, over_budget;
    enum req_state state;
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
    size_t n = 0;
    char *s = skd_json_dump_fast(v, &n); /* json_dumps' bytes, faster */
    json_decref(v);
    if (out->resp)
        MHD_destroy_response(out->resp);
    out->resp = NULL;
    out->status = status;
    if (s)
        out->resp = text_response(s, n, "application/json");
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
    case SKD_EPAUSED:
        return MHD_HTTP_CONFLICT;
    case SKD_ELOST:
        return MHD_HTTP_GONE;
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
    case SKD_ESTORE:
    case SKD_EREPLICA:
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

/* Does path match pattern? Each "{}" matches one non-empty segment: the
 * first is copied into buf (as *param), the second into buf2 (*param2),
 * each at most cap - 1 bytes. */
static int path_match(const char *pattern, const char *path, const char **param, char *buf,
                      const char **param2, char *buf2, size_t cap)
{
    int n = 0;
    *param = *param2 = NULL;
    while (*pattern) {
        const char *brace = strstr(pattern, "{}");
        if (!brace)
            return strcmp(pattern, path) == 0;
        size_t pre = (size_t)(brace - pattern);
        if (strncmp(pattern, path, pre) != 0 || n >= 2)
            return 0;
        const char *seg = path + pre;
        size_t len = strcspn(seg, "/");
        if (!len || len >= cap || len > 256)
            return 0;
        char *b = n == 0 ? buf : buf2;
        memcpy(b, seg, len);
        b[len] = '\0';
        *(n == 0 ? param : param2) = b;
        n++;
        pattern = brace + 2;
        path = seg + len;
    }
    return *path == '\0';
}

/* Find the route; NULL with *path_known set when only the method differs
 * (allow then lists the methods). */
static const skd_route *route_find(skd_http_req *req, int *path_known, char *allow,
                                   size_t allow_cap)
{
    *path_known = 0;
    allow[0] = '\0';
    for (const skd_route *r = skd__routes; r->method; r++) {
        const char *p, *p2;
        if (!path_match(r->pattern, req->path, &p, req->param_buf, &p2, req->param2_buf,
                        sizeof(req->param_buf)))
            continue;
        if (strcmp(r->method, req->method) == 0) {
            req->param = p;
            req->param2 = p2;
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

/* Answer a refusal in the dialect of the route: JSON-RPC for /mcp and /a2a,
 * the REST error object elsewhere. */
static void refuse(const skd_route *r, skd_http_reply *out, unsigned status, const char *code,
                   const char *msg, unsigned retry_after_s)
{
    if (r && (r->flags & SKD_ROUTE_JSONRPC)) {
        json_t *e = skd__rpc_error(NULL, RPC_REFUSED, "%s", msg);
        json_t *eo = json_object_get(e, "error");
        if (eo)
            json_object_set_new(eo, "data",
                                json_pack("{s:s, s:i}", "code", code, "retryAfter", retry_after_s));
        skd__http_json(out, status, e);
    } else {
        skd__http_error(out, status, code, "%s", msg);
    }
}

/* The checks that need only the headers. Returns the route; a refusal is
 * left in out (out->resp set). */
static const skd_route *check_headers(skd_server *srv, skd_http_req *req, skd_http_reply *out)
{
    char allow[64], msg[256];
    int path_known;
    if (skd__auth_host_origin(req, out) != 0)
        return NULL;
    const skd_route *r = route_find(req, &path_known, allow, sizeof(allow));
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
    const char *cl = skd__http_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t n = 0;
    if (cl && (skd_parse_i64(cl, 0, INT64_MAX, &n) != 0 || (uint64_t)n > srv->max_body)) {
        skd__http_error(out, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                        "the request body is larger than %zu bytes", srv->max_body);
        return r;
    }
    if (!r->auth)
        return r;
    if (skd__auth_bearer(req, out) != 0)
        return r;
    if ((req->key.scopes & r->scope) != r->scope) {
        const char *need = r->scope & SKD_SCOPE_ADMIN     ? "skills:admin"
                           : r->scope & SKD_SCOPE_EXECUTE ? "skills:execute"
                                                          : "skills:read";
        skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden", "this API key lacks the %s scope",
                        need);
        if (skd_key_is_oauth(&req->key))
            skd__auth_scope_challenge(req, out, need);
        return r;
    }
    unsigned retry = 0;
    if (skd__ratelimit_take(srv->rl, req->key.id, skd_mono_ms(), &retry) != 0) {
        const skd_config *cfg = skd_engine_config(srv->e);
        char ra[16];
        snprintf(msg, sizeof(msg),
                 "this API key is over its rate limit of %lld requests a second "
                 "(SKILLD_RATE_LIMIT_PER_KEY); retry after %u s",
                 (long long)skd_config_int(cfg, "SKILLD_RATE_LIMIT_PER_KEY"), retry);
        refuse(r, out, MHD_HTTP_TOO_MANY_REQUESTS, skd_errcode(SKD_EBUSY), msg, retry);
        snprintf(ra, sizeof(ra), "%u", retry);
        if (out->resp)
            MHD_add_response_header(out->resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    return r;
}

static enum MHD_Result send_reply(skd_server *srv, struct MHD_Connection *conn, struct conn_req *cr)
{
    skd_http_reply *out = &cr->out;
    if (!out->resp) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error",
                        "the server could not build a response");
        if (!out->resp)
            return MHD_NO;
    }
    skd__metrics_request(route_label(cr->route), out->status);
    const char *replica = skd_store_replica_id(skd_engine_store(skd__server_engine(srv)));
    if (*replica) /* which replica answered, behind a load balancer (docs/store.md) */
        MHD_add_response_header(out->resp, "Skilld-Replica", replica);
    if (atomic_load(&srv->stopping))
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (out->sse && cr->sc) {
        skd__sse_bind(out->sse, srv->conns, cr->sc);
        skd__conn_request_stream(srv->conns, cr->sc, out->sse);
    }
    enum MHD_Result ret = MHD_queue_response(conn, out->status, out->resp);
    MHD_destroy_response(out->resp);
    out->resp = NULL;
    out->sse = NULL;
    return ret;
}

static void run_handler(void *p)
{
    struct conn_req *cr = p;
    cr->route->fn(&cr->req, &cr->out);
    cr->state = R_DONE;
    skd__conn_resume(cr->req.srv->conns, cr->sc); /* the event thread sends out */
}

/* The whole request is in: answer, or hand the handler to a worker. */
static enum MHD_Result on_complete(skd_server *srv, struct MHD_Connection *conn,
                                   struct conn_req *cr)
{
    skd__conn_request_read(srv->conns, cr->sc);
    cr->req.body = cr->body.data ? cr->body.data : "";
    cr->req.body_len = cr->body.len;
    if (cr->too_big) {
        skd__http_error(&cr->out, MHD_HTTP_CONTENT_TOO_LARGE, "too_large",
                        "the request body is larger than %zu bytes", srv->max_body);
        return send_reply(srv, conn, cr);
    }
    if (cr->over_budget || !cr->sc) {
        refuse(cr->route, &cr->out, MHD_HTTP_SERVICE_UNAVAILABLE, skd_errcode(SKD_EBUSY),
               "the server holds too many request bodies; retry later", 1);
        if (cr->out.resp)
            MHD_add_response_header(cr->out.resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        return send_reply(srv, conn, cr);
    }
    if ((cr->route->flags & SKD_ROUTE_INLINE) ||
        ((cr->route->flags & SKD_ROUTE_QUICK) && skd__rest_execute_quick(&cr->req))) {
        cr->route->fn(&cr->req, &cr->out);
        return send_reply(srv, conn, cr);
    }
    cr->state = R_WORKING;
    skd__conn_suspend(srv->conns, cr->sc);
    if (skd__calls_spawn(srv->calls, SKD__CALLS_MAX_JOBS, run_handler, cr) != 0) {
        refuse(cr->route, &cr->out, MHD_HTTP_SERVICE_UNAVAILABLE, skd_errcode(SKD_EBUSY),
               "too many requests in flight; retry later", 1);
        if (cr->out.resp)
            MHD_add_response_header(cr->out.resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        cr->state = R_DONE;
        skd__conn_resume(srv->conns, cr->sc);
    }
    return MHD_YES;
}

/* Headers are in: set up the request and run every check that needs no
 * body. A refusal goes out at once; MHD then drops the body unread. */
static enum MHD_Result on_headers(skd_server *srv, struct MHD_Connection *conn, const char *url,
                                  const char *method, void **con_cls)
{
    struct conn_req *cr = calloc(1, sizeof(*cr));
    if (!cr)
        return MHD_NO;
    skd_buf_init(&cr->body, srv->max_body);
    *con_cls = cr;
    atomic_fetch_add(&srv->active, 1);
    cr->cancel = skd_cancel_new();
    cr->sc = skd__conns_of(conn);
    cr->req = (skd_http_req){
        .srv = srv,
        .conn = conn,
        .method = method,
        .path = url,
        .body = "",
        .cancel = cr->cancel,
        .priv = cr,
    };
    skd__conn_request_begin(srv->conns, cr->sc, cr->cancel);
    if (!cr->cancel) {
        skd__http_error(&cr->out, MHD_HTTP_INTERNAL_SERVER_ERROR, "out_of_memory", "out of memory");
        return send_reply(srv, conn, cr);
    }
    cr->route = check_headers(srv, &cr->req, &cr->out);
    if (cr->out.resp)
        return send_reply(srv, conn, cr);
    return MHD_YES;
}

/* A piece of the body: keep it within the caps, or count and drop it. */
static enum MHD_Result on_body(skd_server *srv, struct conn_req *cr, const char *data, size_t n)
{
    if (!cr->too_big && !cr->over_budget) {
        size_t now = atomic_fetch_add(&srv->body_bytes, n) + n;
        cr->counted += n;
        if (now > srv->body_budget)
            cr->over_budget = 1;
        else if (skd_buf_append(&cr->body, data, n) != 0)
            cr->too_big = 1;
    }
    if (cr->too_big || cr->over_budget) {
        atomic_fetch_sub(&srv->body_bytes, cr->counted);
        cr->counted = 0;
        skd_buf_free(&cr->body);
        skd_buf_init(&cr->body, srv->max_body);
        if ((cr->discarded += n) > 4 * srv->max_body)
            return MHD_NO; /* a chunked flood: drop the connection */
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    skd_server *srv = cls;
    struct conn_req *cr = *con_cls;
    if (!cr)
        return on_headers(srv, conn, url, method, con_cls);
    if (cr->state == R_DONE) /* resumed by the worker that answered */
        return send_reply(srv, conn, cr);
    if (cr->state == R_WORKING)
        return MHD_YES; /* cannot happen: the connection is suspended */
    if (*upload_size) {
        enum MHD_Result r = on_body(srv, cr, upload_data, *upload_size);
        *upload_size = 0;
        return r;
    }
    return on_complete(srv, conn, cr);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    skd_server *srv = cls;
    struct conn_req *cr = *con_cls;
    if (cr) {
        /* The client left before its reply ended: what runs for it stops. */
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            skd_cancel_fire(cr->cancel);
        skd__conn_request_end(srv->conns, cr->sc);
        skd_cancel_set_hook(cr->cancel, NULL, NULL);
        if (cr->hook_free)
            cr->hook_free(cr->hook_arg);
        skd_cancel_free(cr->cancel);
        json_decref(cr->req.parsed);
        if (cr->out.resp)
            MHD_destroy_response(cr->out.resp);
        atomic_fetch_sub(&srv->body_bytes, cr->counted);
        skd_buf_free(&cr->body);
        free(cr);
        atomic_fetch_sub(&srv->active, 1);
    }
    *con_cls = NULL;
}

void skd__http_on_hangup(skd_http_req *req, void (*fn)(void *), void *arg, void (*free_fn)(void *))
{
    struct conn_req *cr = req->priv;
    void (*old_free)(void *) = cr->hook_free;
    void *old_arg = cr->hook_arg;
    skd_cancel_set_hook(cr->cancel, fn, arg); /* waits for a running hook */
    cr->hook_free = free_fn;
    cr->hook_arg = arg;
    if (old_free)
        old_free(old_arg);
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

/* Descriptors for cap connections and the rest of the server: raise the
 * soft limit towards the hard one; returns the cap that fits. */
static size_t fit_fd_limit(size_t cap)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)cap + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return cap;
    if (rl.rlim_cur < want) {
        rlim_t cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        rl.rlim_cur = cur;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return cap;
    }
    if (rl.rlim_cur < want) {
        /* 256 for the rest of the server, or half of a small limit. */
        size_t fit = rl.rlim_cur > 512 ? (size_t)rl.rlim_cur - 256 : (size_t)rl.rlim_cur / 2;
        skd_warn("SKILLD_MAX_CONNECTIONS=%zu needs %llu descriptors, the limit is %llu: "
                 "serving at most %zu connections (raise ulimit -n)",
                 cap, (unsigned long long)want, (unsigned long long)rl.rlim_cur, fit);
        return fit < cap ? fit : cap;
    }
    return cap;
}

static unsigned event_threads(const skd_config *cfg)
{
    int64_t n = skd_config_int(cfg, "SKILLD_HTTP_THREADS");
    if (n == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores < 2 ? 2 : cores > 16 ? 16 : cores;
    }
    return (unsigned)n;
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
    s->body_budget = s->max_body * BODY_BUDGET_BODIES;
    size_t cap = fit_fd_limit((size_t)skd_config_int(cfg, "SKILLD_MAX_CONNECTIONS"));
    unsigned threads = event_threads(cfg);
    skd_conns_opts co = {
        .cap = cap,
        .header_ms = skd_config_int(cfg, "SKILLD_HEADER_TIMEOUT_S") * 1000,
        .body_ms = skd_config_int(cfg, "SKILLD_BODY_TIMEOUT_S") * 1000,
        .keepalive_ms = SKD__SSE_KEEPALIVE_MS,
    };
    int64_t rate = skd_config_int(cfg, "SKILLD_RATE_LIMIT_PER_KEY");
    if ((rc = skd__conns_new(&co, &s->conns, err)) != 0)
        goto out;
    /* Replicas on one PostgreSQL share each key's bucket (docs/store.md). */
    int64_t burst = skd_config_int(cfg, "SKILLD_RATE_LIMIT_BURST");
    s->rl = strcmp(skd_store_backend(skd_engine_store(e)), "postgresql") == 0
                ? skd__ratelimit_store_new(skd_engine_store(e), rate, burst)
                : skd__ratelimit_new(rate, burst, 1u << 16);
    s->calls = skd__calls_new();
    s->mcp = s->calls ? skd__mcp_new(e, s->calls) : NULL;
    s->a2a = skd__a2a_new(e);
    if (!s->mcp || !s->a2a || (rate > 0 && !s->rl)) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    /* MHD's own limit sits a little above the cap so that a connection past
     * the cap is accepted and the longest-idle one closed (conns.c), not
     * left waiting in the listen backlog. */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (v6 ? MHD_USE_IPv6 : 0);
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)skd_config_int(cfg, "SKILLD_CONNECTION_TIMEOUT_S"),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(cap + 2 * threads + 16),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, skd__conns_notify, s->conns,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U, MHD_OPTION_END);
    if (!s->d) {
        rc =
            skd_err_set(err, SKD_EIO, "cannot listen on %s (address in use or not local?)", listen);
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    skd_oauth_warm(skd_engine_oauth(e)); /* the issuers' keys, off the event threads */
    *out = s;
    return 0;
out:
    skd_server_free(s);
    return rc;
}

size_t skd_server_in_flight(skd_server *s)
{
    return s && s->calls ? skd__calls_count(s->calls) : 0;
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
    if (s->mcp)
        skd__mcp_close_all(s->mcp); /* ends GET streams */
    if (s->a2a)
        skd__a2a_cancel_all(s->a2a); /* running A2A tasks end; their streams follow */
    int64_t deadline = skd_mono_ms() + grace_ms;
    if (s->calls && skd__calls_stop(s->calls, grace_ms) != 0)
        skd_warn("server stop: calls still running after %d ms", grace_ms);
    /* Suspended streams end; MHD must not stop with a connection suspended,
     * so wait for the cancelled calls' workers to resume theirs. */
    int64_t left = deadline - skd_mono_ms();
    if (s->conns && skd__conns_quiesce(s->conns, left > 1000 ? (int)left : 1000) > 0)
        skd_warn("server stop: connections still suspended");
    /* Let the cancelled calls' replies go out before connections close. */
    while (atomic_load(&s->active) > 0 && skd_mono_ms() < deadline)
        usleep(10 * 1000);
    if (s->d)
        MHD_stop_daemon(s->d); /* closes connections, joins the event threads */
    s->d = NULL;
}

void skd_server_free(skd_server *s)
{
    if (!s)
        return;
    skd_server_stop(s, 5000);
    /* Stream workers use s->mcp: outlive them. */
    while (s->calls && skd__calls_drain(s->calls, 1000) != 0)
        skd_warn("server: waiting for stream workers to end");
    skd__mcp_free(s->mcp);
    skd__a2a_free(s->a2a);
    skd__calls_free(s->calls);
    skd__conns_free(s->conns);
    skd__ratelimit_free(s->rl);
    free(s);
}
