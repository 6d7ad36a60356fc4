/*
 * MCP 2026-07-28, the stateless revision (see mcp.h): the era of a request
 * is its _meta envelope's claim; the envelope is checked; the request runs
 * on a session made for it alone from the transport's identity (key id,
 * scopes) and dropped with the answer, so nothing of it is kept between
 * requests; results are stamped with resultType, the cache hints and the
 * server's identity; subscriptions/listen streams change notifications.
 *
 * Trust: everything in the envelope is the client's and is checked before
 * use; the identity never comes from it.
 */
#include "server/mcp_int.h"

#include <stdlib.h>
#include <string.h>

static json_t *listen_owned(skd_mcp *m, skd_mcp_session *owner, const json_t *msg,
                            skd_mcp_send_fn send, void *arg, void (*release)(void *),
                            int (*gone)(void *));

int skd__mcp_is_modern(const char *v)
{
    /* Revisions are dates: any claim that sorts at or after the first
     * stateless revision belongs to that era (and an unknown one there is
     * answered with -32022, not read as 2025 traffic). */
    return v && strcmp(v, SKD_MCP_MODERN) >= 0;
}

const char *skd__mcp_claimed_version(const json_t *msg)
{
    const json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    const json_t *v = json_object_get(meta, SKD_MCP_META_VERSION);
    return v ? (json_is_string(v) ? json_string_value(v) : "") : NULL;
}

int skd__mcp_is_listen(const json_t *msg)
{
    return strcmp(skd_json_str(msg, "method", ""), "subscriptions/listen") == 0 &&
           skd__mcp_is_modern(skd__mcp_claimed_version(msg));
}

/* ---- subscriptions/listen ------------------------------------------- */

static void drop_listener(struct mcp_listener *l)
{
    if (l->release && l->arg)
        l->release(l->arg);
    json_decref(l->id);
    free(l);
}

void skd__mcp_remove_listeners(skd_mcp *m, const skd_mcp_session *owner, const json_t *id)
{
    for (struct mcp_listener **pp = &m->listeners; *pp;) {
        struct mcp_listener *l = *pp;
        if (l->owner == owner && (!id || json_equal(l->id, (json_t *)id))) {
            *pp = l->next;
            drop_listener(l);
        } else {
            pp = &l->next;
        }
    }
}

void skd__mcp_drop_listeners(skd_mcp *m)
{
    while (m->listeners) {
        struct mcp_listener *l = m->listeners;
        m->listeners = l->next;
        drop_listener(l);
    }
}

void skd__mcp_notify_listeners(skd_mcp *m)
{
    /* The change, tagged with the stream's subscription id. A listener
     * whose transport went away is dropped. */
    for (struct mcp_listener **pp = &m->listeners; *pp;) {
        struct mcp_listener *l = *pp;
        if (l->gone && l->gone(l->arg)) {
            *pp = l->next;
            drop_listener(l);
            continue;
        }
        if (l->tools) {
            json_t *t = skd__rpc_notification(
                "notifications/tools/list_changed",
                json_pack("{s:{s:O}}", "_meta", SKD_MCP_META_SUBSCRIPTION, l->id));
            if (t)
                l->send(l->arg, t);
            json_decref(t);
        }
        pp = &l->next;
    }
}

json_t *skd__mcp_listen(skd_mcp *m, const json_t *msg, skd_mcp_send_fn send, void *arg,
                        void (*release)(void *), int (*gone)(void *))
{
    /* The change signal names nothing of any key: like the 2025 sessions'
     * tools/list_changed, every listener gets it and lists again. */
    return listen_owned(m, NULL, msg, send, arg, release, gone);
}

/* ---- one request, no session ---------------------------------------- */

/* server/discover (2026-07-28): what initialize tells, without a session. */
static json_t *do_discover(const json_t *id)
{
    json_t *r = json_pack("{s:[s], s:o, s:s}", "supportedVersions", SKD_MCP_MODERN, "capabilities",
                          skd__mcp_capabilities(), "instructions", SKD_MCP_INSTRUCTIONS);
    return skd__rpc_result(id, r);
}

static int cacheable(const char *method)
{
    static const char *const list[] = {
        "tools/list",     "resources/list",          "resources/templates/list",
        "resources/read", "server/discover",         "skills/list",
        "skills/get",     "resources/directory/read"};
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        if (strcmp(method, list[i]) == 0)
            return 1;
    return 0;
}

/* Stamp a 2026-07-28 result: resultType, and ttlMs/cacheScope on cacheable
 * results. Every answer depends on the key (its skills, its bundles), and
 * a bundle may change on disk at any time, so nothing is to be cached:
 * ttlMs 0, cacheScope private. */
static void stamp_modern(const char *method, json_t *reply)
{
    json_t *r = json_object_get(reply, "result");
    if (!json_is_object(r))
        return;
    json_object_set_new(r, "resultType", json_string("complete"));
    if (cacheable(method)) {
        json_object_set_new(r, "ttlMs", json_integer(0));
        json_object_set_new(r, "cacheScope", json_string("private"));
    }
    json_t *meta = json_object_get(r, "_meta");
    if (!meta)
        json_object_set_new(r, "_meta", meta = json_object());
    json_object_set_new(meta, "io.modelcontextprotocol/serverInfo", skd__mcp_server_info());
}

/* Check the request's envelope. NULL, or the error reply. */
static json_t *check_envelope(const json_t *id, const char *claimed, const json_t *meta)
{
    if (!*claimed)
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                              "Invalid _meta envelope: " SKD_MCP_META_VERSION " must be a string");
    if (strcmp(claimed, SKD_MCP_MODERN) != 0) {
        json_t *e = skd__rpc_error(id, SKD_RPC_UNSUPPORTED_VERSION,
                                   "unsupported protocol version %.40s (supported: " SKD_MCP_MODERN
                                   ", or 2025-11-25, 2025-06-18, 2025-03-26 through initialize)",
                                   claimed);
        json_object_set_new(
            json_object_get(e, "error"), "data",
            json_pack("{s:[s], s:s}", "supported", SKD_MCP_MODERN, "requested", claimed));
        return e;
    }
    if (!json_is_object(json_object_get(meta, SKD_MCP_META_CAPS)))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                              "Invalid _meta envelope: " SKD_MCP_META_CAPS
                              " (object) is required on protocol revision " SKD_MCP_MODERN);
    const json_t *lvl = json_object_get(meta, SKD_MCP_META_LOGLEVEL);
    if (lvl) {
        if (skd__mcp_log_level(json_string_value(lvl)) < 0)
            return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                                  "Invalid _meta envelope: " SKD_MCP_META_LOGLEVEL
                                  " must be a log level");
    }
    return NULL;
}

json_t *skd__mcp_handle_modern(skd_mcp_session *conn, const json_t *msg, const char *claimed,
                               skd_mcp_io *io)
{
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *params = json_object_get(msg, "params");
    const json_t *meta = json_object_get(params, "_meta");
    json_t *reply = check_envelope(id, claimed, meta);
    if (reply)
        return reply;
    if (strcmp(method, "server/discover") == 0) {
        reply = do_discover(id);
        stamp_modern(method, reply);
        return reply;
    }
    if (strcmp(method, "subscriptions/listen") == 0) {
        if (!io || !io->send)
            return skd__rpc_error(id, SKD_RPC_INVALID_REQUEST,
                                  "subscriptions/listen needs a stream (SSE over HTTP)");
        return listen_owned(conn->m, conn, msg, io->send, io->arg, NULL, NULL);
    }
    skd_mcp_session *s = calloc(1, sizeof(*s));
    if (!s)
        return skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    atomic_init(&s->refs, 1);
    s->m = conn->m;
    s->conn = conn;
    s->modern = 1;
    s->initialized = 2;
    s->scopes = conn->scopes;
    memcpy(s->key_id, conn->key_id, sizeof(s->key_id));
    skd_strlcpy(s->version, SKD_MCP_MODERN, sizeof(s->version));
    atomic_init(&s->log_level, skd__mcp_log_level(skd_json_str(meta, SKD_MCP_META_LOGLEVEL, NULL)));
    reply = skd__mcp_common_method(s, method, id, params, io);
    if (!reply)
        reply =
            skd__rpc_error(id, SKD_RPC_METHOD_NOT_FOUND,
                           "method not found on protocol revision " SKD_MCP_MODERN ": %s", method);
    else
        stamp_modern(method, reply);
    skd__mcp_session_unref(s);
    return reply;
}

json_t *skd__mcp_check_envelope(const json_t *msg)
{
    const char *claimed = skd__mcp_claimed_version(msg);
    if (!claimed)
        return skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INVALID_PARAMS,
                              "Invalid params: the request is missing the required per-request "
                              "envelope key(s): " SKD_MCP_META_VERSION ", " SKD_MCP_META_CAPS);
    return check_envelope(json_object_get(msg, "id"), claimed,
                          json_object_get(json_object_get(msg, "params"), "_meta"));
}

skd_mcp_session *skd__mcp_session_transient(skd_mcp *m, const char *key_id, unsigned scopes)
{
    /* The caller's identity, for one request only: not in the session
     * table, so nothing finds it afterwards and nothing of it is kept. */
    skd_mcp_session *conn = calloc(1, sizeof(*conn));
    if (!conn)
        return NULL;
    atomic_init(&conn->refs, 1);
    atomic_init(&conn->log_level, -1);
    conn->m = m;
    conn->scopes = scopes;
    skd_strlcpy(conn->key_id, key_id, sizeof(conn->key_id));
    return conn;
}

static json_t *listen_owned(skd_mcp *m, skd_mcp_session *owner, const json_t *msg,
                            skd_mcp_send_fn send, void *arg, void (*release)(void *),
                            int (*gone)(void *))
{
    const json_t *id = json_object_get(msg, "id");
    const json_t *filter = json_object_get(json_object_get(msg, "params"), "notifications");
    if (!json_is_object(filter))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                              "subscriptions/listen needs params.notifications (object)");
    struct mcp_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    l->id = json_deep_copy(id);
    l->tools = json_is_true(json_object_get(filter, "toolsListChanged"));
    l->owner = owner;
    l->send = send;
    l->arg = arg;
    l->release = release;
    l->gone = gone;
    /* What will be delivered: tool list changes. Resource and prompt
     * changes are never announced (bundles are checked on every read). */
    json_t *ack =
        skd__rpc_notification("notifications/subscriptions/acknowledged",
                              json_pack("{s:{s:O}, s:{s:b}}", "_meta", SKD_MCP_META_SUBSCRIPTION,
                                        id, "notifications", "toolsListChanged", l->tools));
    pthread_mutex_lock(&m->mu);
    if (ack)
        send(arg, ack);
    l->next = m->listeners;
    m->listeners = l;
    pthread_mutex_unlock(&m->mu);
    json_decref(ack);
    return NULL;
}
