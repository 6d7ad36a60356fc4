/*
 * MCP dispatcher: sessions, lifecycle, logging, progress and cancellation
 * (see mcp.h). The tool catalogue and tools/call live in mcp_tools.c, the
 * Skills extension and resources in mcp_skills.c, the 2026-07-28 era (a
 * request that claims it in its _meta envelope) in mcp_modern.c.
 *
 * Trust: every message comes from a client and is checked before use
 * (jsonrpc.c for framing, here for params). The session's key id and scopes
 * come from the transport's authentication and are never taken from a
 * message. One mutex (m->mu) guards the session table, the in-flight calls
 * and the sinks; sinks are called with it held, so a sink never sees a call
 * or session that is being torn down, and sinks must not call back in.
 */
#include "server/mcp_int.h"
#include "skilld/store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const versions[] = {SKD_MCP_LATEST, "2025-06-18", "2025-03-26"};
static const char *const log_levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
#define NLEVELS (sizeof(log_levels) / sizeof(log_levels[0]))

int skd__mcp_log_level(const char *name)
{
    for (size_t i = 0; name && i < NLEVELS; i++)
        if (strcmp(name, log_levels[i]) == 0)
            return (int)i;
    return -1;
}

int skd__mcp_version_supported(const char *v)
{
    for (size_t i = 0; v && i < sizeof(versions) / sizeof(versions[0]); i++)
        if (strcmp(v, versions[i]) == 0)
            return 1;
    return 0;
}

int skd__mcp_has_structured(const skd_mcp_session *s)
{
    return s->version[0] == '\0' || strcmp(s->version, "2025-03-26") != 0;
}

/* Detach the sink (m->mu held). */
static void drop_sink(skd_mcp_session *s)
{
    if (s->sink_release && s->sink_arg)
        s->sink_release(s->sink_arg);
    s->sink = NULL;
    s->sink_arg = NULL;
    s->sink_release = NULL;
}

/* ---- session-level notifications ------------------------------------ */

/* Every live dispatcher, so one registry callback (the registry has a
 * single slot) reaches all dispatchers over that registry. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static skd_mcp *live[64];
static size_t nlive;

static void notify_sessions(skd_mcp *m, const json_t *n)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nsess; i++) {
        skd_mcp_session *s = m->sessions[i];
        if (s->sink && s->initialized)
            s->sink(s->sink_arg, n);
    }
    skd__mcp_notify_listeners(m); /* 2026-07-28 subscriptions */
    pthread_mutex_unlock(&m->mu);
}

static void on_registry_change(void *arg)
{
    skd_registry *reg = arg;
    json_t *n = skd__rpc_notification("notifications/tools/list_changed", NULL);
    if (!n)
        return;
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < nlive; i++)
        if (skd_engine_registry(live[i]->e) == reg)
            notify_sessions(live[i], n);
    pthread_mutex_unlock(&live_mu);
    json_decref(n);
}

static int live_add(skd_mcp *m)
{
    int ok = 0;
    pthread_mutex_lock(&live_mu);
    if (nlive < sizeof(live) / sizeof(live[0])) {
        live[nlive++] = m;
        ok = 1;
    }
    pthread_mutex_unlock(&live_mu);
    if (ok)
        skd_registry_on_change(skd_engine_registry(m->e), on_registry_change,
                               skd_engine_registry(m->e));
    return ok ? 0 : SKD_EBUSY;
}

static void live_remove(skd_mcp *m)
{
    skd_registry *reg = skd_engine_registry(m->e);
    int others = 0, found = 0;
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < nlive;) {
        if (live[i] == m) {
            live[i] = live[--nlive];
            found = 1;
            continue;
        }
        others |= skd_engine_registry(live[i]->e) == reg;
        i++;
    }
    pthread_mutex_unlock(&live_mu);
    if (found && !others)
        skd_registry_on_change(reg, NULL, NULL);
}

/* ---- progress ticker ------------------------------------------------- */

/* Send progress for c (m->mu held). Values must increase (MCP requires
 * monotonic progress per token), so a smaller one is dropped. */
static void send_progress(struct mcp_call *c, double progress, double total, const char *msg)
{
    if (!c->progress_token || !c->io || !c->io->send || progress <= c->last_progress)
        return;
    json_t *p = json_pack("{s:O, s:f}", "progressToken", c->progress_token, "progress", progress);
    if (!p)
        return;
    if (total > 0)
        json_object_set_new(p, "total", json_real(total));
    if (msg && *msg)
        json_object_set_new(p, "message", json_string(msg));
    json_t *n = skd__rpc_notification("notifications/progress", p);
    if (n)
        c->io->send(c->io->arg, n);
    json_decref(n);
    c->last_progress = progress;
}

void skd__mcp_progress_cb(void *arg, double progress, double total, const char *message)
{
    struct mcp_call *c = arg;
    skd_mcp *m = c->s->m;
    pthread_mutex_lock(&m->mu);
    c->handler_progress = 1;
    send_progress(c, progress, total, message);
    pthread_mutex_unlock(&m->mu);
}

/* A running command's output (sandbox_exec, execute_command, ...) as
 * progress notifications, one per chunk, the chunk as the message: only
 * for a call with a progress token, as any progress. */
void skd__mcp_output_cb(void *arg, const char *stream, const char *data, size_t len)
{
    (void)stream;
    struct mcp_call *c = arg;
    skd_mcp *m = c->s->m;
    char *text = malloc(len + 1);
    if (!text)
        return;
    memcpy(text, data, len);
    text[len] = '\0';
    if (!skd_utf8_valid(text, len)) { /* the result carries it, with U+FFFD */
        free(text);
        return;
    }
    pthread_mutex_lock(&m->mu);
    c->handler_progress = 1;
    send_progress(c, c->last_progress + 1, 0, text);
    pthread_mutex_unlock(&m->mu);
    free(text);
}

/* While a call whose handler reports nothing runs, tell the client it is
 * alive: elapsed seconds as progress, every progress_ms. */
static void *ticker_main(void *arg)
{
    skd_mcp *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += 200 * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&m->tick_cv, &m->mu, &dl);
        int64_t now = skd_mono_ms();
        for (struct mcp_call *c = m->inflight; c; c = c->next) {
            if (c->handler_progress || !c->progress_token || now - c->last_tick_ms < m->progress_ms)
                continue;
            char msg[64];
            snprintf(msg, sizeof(msg), "running for %lld ms", (long long)(now - c->started_ms));
            send_progress(c, c->last_progress + 1, 0, msg);
            c->last_tick_ms = now;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int skd__mcp_call_begin(skd_mcp *m, struct mcp_call *c)
{
    c->started_ms = c->last_tick_ms = skd_mono_ms();
    int rc = skd__calls_begin(m->calls, c->cancel);
    if (rc)
        return rc;
    pthread_mutex_lock(&m->mu);
    c->next = m->inflight;
    m->inflight = c;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

void skd__mcp_call_end(skd_mcp *m, struct mcp_call *c)
{
    pthread_mutex_lock(&m->mu);
    for (struct mcp_call **pp = &m->inflight; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    skd__calls_end(m->calls, c->cancel);
}

/* ---- lifecycle ------------------------------------------------------- */

skd_mcp *skd__mcp_new(skd_engine *e, skd_calls *calls)
{
    skd_mcp *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    const skd_config *cfg = skd_engine_config(e);
    m->e = e;
    m->calls = calls;
    m->page_size = (size_t)skd_config_int(cfg, "SKILLD_MCP_PAGE_SIZE");
    m->max_sessions = (size_t)skd_config_int(cfg, "SKILLD_MCP_MAX_SESSIONS");
    m->expose_skills = skd_config_bool(cfg, "SKILLD_MCP_EXPOSE_SKILLS");
    m->ttl_ms = skd_config_int(cfg, "SKILLD_MCP_SESSION_TTL_S") * 1000;
    m->progress_ms = skd_config_int(cfg, "SKILLD_MCP_PROGRESS_INTERVAL_MS");
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->tick_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&m->ticker, NULL, ticker_main, m) == 0)
        m->ticker_running = 1;
    if (!m->ticker_running || live_add(m) != 0) {
        skd__mcp_free(m);
        return NULL;
    }
    return m;
}

void skd__mcp_free(skd_mcp *m)
{
    if (!m)
        return;
    live_remove(m);
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    pthread_cond_broadcast(&m->tick_cv);
    pthread_mutex_unlock(&m->mu);
    if (m->ticker_running)
        pthread_join(m->ticker, NULL);
    for (size_t i = 0; i < m->nsess; i++) {
        m->sessions[i]->closed = 1;
        drop_sink(m->sessions[i]);
        skd__mcp_session_unref(m->sessions[i]);
    }
    skd__mcp_drop_listeners(m);
    free(m->sessions);
    pthread_cond_destroy(&m->tick_cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void skd__mcp_close_all(skd_mcp *m)
{
    pthread_mutex_lock(&m->mu);
    while (m->nsess > 0) {
        skd_mcp_session *s = m->sessions[--m->nsess];
        s->closed = 1;
        drop_sink(s);
        skd__mcp_session_unref(s);
    }
    pthread_mutex_unlock(&m->mu);
}

/* Drop sessions idle past the TTL (m->mu held). */
static void expire_sessions(skd_mcp *m, int64_t now)
{
    for (size_t i = 0; i < m->nsess;) {
        skd_mcp_session *s = m->sessions[i];
        if (m->ttl_ms > 0 && now - s->last_used_ms > m->ttl_ms) {
            s->closed = 1;
            drop_sink(s);
            m->sessions[i] = m->sessions[--m->nsess];
            skd__mcp_session_unref(s);
        } else {
            i++;
        }
    }
}

/* One key may hold at most a quarter of the session table (at least one),
 * so a client that never ends its sessions cannot lock other keys out: past
 * that, its least recently used session goes (m->mu held). */
static void evict_key_lru(skd_mcp *m, const char *key_id)
{
    size_t per_key = m->max_sessions / 4 ? m->max_sessions / 4 : 1, n = 0, lru = 0;
    for (size_t i = 0; i < m->nsess; i++) {
        if (strcmp(m->sessions[i]->key_id, key_id) != 0)
            continue;
        if (n++ == 0 || m->sessions[i]->last_used_ms < m->sessions[lru]->last_used_ms)
            lru = i;
    }
    if (n < per_key)
        return;
    skd_mcp_session *old = m->sessions[lru];
    old->closed = 1;
    drop_sink(old);
    for (struct mcp_call *c = m->inflight; c; c = c->next)
        if (c->s == old)
            skd_cancel_fire(c->cancel);
    m->sessions[lru] = m->sessions[--m->nsess];
    skd__mcp_session_unref(old);
}

/* Add a session to the table: a new id, or (from the store) a given one. */
static skd_mcp_session *session_add(skd_mcp *m, const char *id, const char *key_id, unsigned scopes)
{
    skd_mcp_session *s = calloc(1, sizeof(*s));
    if (!s || (id ? skd_strlcpy(s->id, id, sizeof(s->id)) : skd_uuid(s->id)) ||
        skd_strlcpy(s->key_id, key_id, sizeof(s->key_id))) {
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 2); /* the table's and the caller's */
    atomic_init(&s->log_level, -1);
    s->m = m;
    s->scopes = scopes;
    pthread_mutex_lock(&m->mu);
    int64_t now = skd_mono_ms();
    s->last_used_ms = now;
    expire_sessions(m, now);
    evict_key_lru(m, key_id);
    int ok = m->nsess < m->max_sessions;
    if (ok && m->nsess == m->capsess) {
        size_t cap = m->capsess ? m->capsess * 2 : 16;
        skd_mcp_session **p = realloc(m->sessions, cap * sizeof(*p));
        if (p) {
            m->sessions = p;
            m->capsess = cap;
        } else {
            ok = 0;
        }
    }
    if (ok)
        m->sessions[m->nsess++] = s;
    pthread_mutex_unlock(&m->mu);
    if (!ok) {
        free(s);
        return NULL;
    }
    return s;
}

skd_mcp_session *skd__mcp_session_new(skd_mcp *m, const char *key_id, unsigned scopes)
{
    return session_add(m, NULL, key_id, scopes);
}

/* Keep the session's protocol state in the store, so that another replica
 * continues it (docs/store.md). A store that fails leaves the session
 * local to this replica. */
static void session_save(skd_mcp_session *s)
{
    skd_session_row row = {.scopes = s->scopes, .log_level = atomic_load(&s->log_level)};
    skd_strlcpy(row.id, s->id, sizeof(row.id));
    skd_strlcpy(row.key_id, s->key_id, sizeof(row.key_id));
    pthread_mutex_lock(&s->m->mu);
    row.initialized = s->initialized;
    skd_strlcpy(row.version, s->version, sizeof(row.version));
    pthread_mutex_unlock(&s->m->mu);
    skd_err err = {0};
    if (skd_store_session_put(skd_engine_store(s->m->e), &row, s->m->ttl_ms, &err))
        skd_warn("MCP session %s not saved in the store: %s", s->id, skd_err_msg(&err));
}

/* A session another replica began, rebuilt from the store; NULL when the
 * store has none for this key. */
static skd_mcp_session *session_from_store(skd_mcp *m, const char *id, const char *key_id)
{
    skd_session_row row;
    if (skd_store_session_get(skd_engine_store(m->e), key_id, id, m->ttl_ms, &row, NULL) != 0)
        return NULL;
    skd_mcp_session *s = session_add(m, row.id, row.key_id, row.scopes);
    if (!s)
        return NULL;
    pthread_mutex_lock(&m->mu);
    s->initialized = row.initialized;
    skd_strlcpy(s->version, row.version, sizeof(s->version));
    pthread_mutex_unlock(&m->mu);
    atomic_store(&s->log_level, row.log_level);
    return s;
}

skd_mcp_session *skd__mcp_session_find(skd_mcp *m, const char *id, const char *key_id)
{
    skd_mcp_session *found = NULL;
    pthread_mutex_lock(&m->mu);
    int64_t now = skd_mono_ms();
    expire_sessions(m, now);
    for (size_t i = 0; id && i < m->nsess; i++) {
        skd_mcp_session *s = m->sessions[i];
        if (strcmp(s->id, id) == 0 && strcmp(s->key_id, key_id) == 0) {
            s->last_used_ms = now;
            atomic_fetch_add(&s->refs, 1);
            found = s;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (!found && id)
        found = session_from_store(m, id, key_id);
    return found;
}

void skd__mcp_session_close(skd_mcp_session *s)
{
    skd_mcp *m = s->m;
    skd_mcp_session *drop = NULL;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nsess; i++) {
        if (m->sessions[i] == s) {
            m->sessions[i] = m->sessions[--m->nsess];
            drop = s;
            break;
        }
    }
    s->closed = 1;
    drop_sink(s);
    skd__mcp_remove_listeners(m, s, NULL);
    for (struct mcp_call *c = m->inflight; c; c = c->next)
        if (c->s == s || c->s->conn == s)
            skd_cancel_fire(c->cancel);
    pthread_mutex_unlock(&m->mu);
    skd_store_session_delete(skd_engine_store(m->e), s->id, NULL); /* ended on every replica */
    skd__mcp_session_unref(drop);
}

void skd__mcp_session_ref(skd_mcp_session *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void skd__mcp_session_unref(skd_mcp_session *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

const char *skd__mcp_session_id(const skd_mcp_session *s)
{
    return s->id;
}

const char *skd__mcp_session_version(const skd_mcp_session *s)
{
    return s->version;
}

int skd__mcp_session_logging(const skd_mcp_session *s)
{
    return atomic_load(&((skd_mcp_session *)s)->log_level) >= 0;
}

void skd__mcp_session_set_sink(skd_mcp_session *s, skd_mcp_send_fn send, void *arg,
                               void (*release)(void *arg))
{
    pthread_mutex_lock(&s->m->mu);
    drop_sink(s);
    if (s->closed) {
        if (release && arg)
            release(arg);
    } else {
        s->sink = send;
        s->sink_arg = arg;
        s->sink_release = release;
    }
    pthread_mutex_unlock(&s->m->mu);
}

void skd__mcp_log(skd_mcp_session *s, skd_mcp_io *io, int level, const char *fmt, ...)
{
    int min = atomic_load(&s->log_level);
    if (min < 0 || level < min || !io || !io->send)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *n = skd__rpc_notification(
        "notifications/message",
        json_pack("{s:s, s:s, s:s}", "level", log_levels[level], "logger", "skilld", "data", msg));
    if (!n)
        return;
    pthread_mutex_lock(&s->m->mu);
    io->send(io->arg, n);
    pthread_mutex_unlock(&s->m->mu);
    json_decref(n);
}

/* ---- methods --------------------------------------------------------- */

/* What the server offers, in both eras. New reference. */
json_t *skd__mcp_capabilities(void)
{
    return json_pack("{s:{s:b}, s:{}, s:{s:b}, s:{s:{s:b}}}", "tools", "listChanged", 1, "logging",
                     "resources", "listChanged", 0, "extensions", SKD_MCP_SKILLS_EXT,
                     "directoryRead", 1);
}

json_t *skd__mcp_server_info(void)
{
    return json_pack("{s:s, s:s, s:s}", "name", "skilld", "title", "skilld skills server",
                     "version", SKD_VERSION);
}

static json_t *do_initialize(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    const char *asked = skd_json_str(params, "protocolVersion", NULL);
    if (!asked || !json_is_object(json_object_get(params, "capabilities")))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                              "initialize needs protocolVersion (string) and capabilities "
                              "(object)");
    const char *chosen = skd__mcp_version_supported(asked) ? asked : SKD_MCP_LATEST;
    pthread_mutex_lock(&s->m->mu);
    int again = s->initialized;
    if (!again) {
        s->initialized = 1;
        skd_strlcpy(s->version, chosen, sizeof(s->version));
    }
    pthread_mutex_unlock(&s->m->mu);
    if (again)
        return skd__rpc_error(id, SKD_RPC_INVALID_REQUEST, "the session is already initialized");
    session_save(s);
    json_t *r = json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion", chosen, "capabilities",
                          skd__mcp_capabilities(), "serverInfo", skd__mcp_server_info(),
                          "instructions", SKD_MCP_INSTRUCTIONS);
    return skd__rpc_result(id, r);
}

static json_t *do_set_level(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    int level = skd__mcp_log_level(skd_json_str(params, "level", NULL));
    if (level >= 0) {
        atomic_store(&s->log_level, level);
        session_save(s);
        return skd__rpc_result(id, json_object());
    }
    return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                          "level must be one of debug, info, notice, warning, error, critical, "
                          "alert, emergency");
}

static void do_cancelled(skd_mcp_session *s, const json_t *params)
{
    const json_t *rid = json_object_get(params, "requestId");
    if (!rid)
        return;
    skd_mcp *m = s->m;
    pthread_mutex_lock(&m->mu);
    for (struct mcp_call *c = m->inflight; c; c = c->next) {
        if ((c->s == s || c->s->conn == s) && json_equal((json_t *)c->id, (json_t *)rid)) {
            c->cancelled = 1;
            skd_cancel_fire(c->cancel);
        }
    }
    skd__mcp_remove_listeners(m, s, rid); /* ends a stdio subscriptions/listen */
    pthread_mutex_unlock(&m->mu);
}

/* The methods both eras share. NULL: not one of them. */
json_t *skd__mcp_common_method(skd_mcp_session *s, const char *method, const json_t *id,
                               const json_t *params, skd_mcp_io *io)
{
    static const struct {
        const char *name;
        json_t *(*fn)(skd_mcp_session *, const json_t *, const json_t *);
    } table[] = {
        {"tools/list", skd__mcp_tools_list},
        {"skills/list", skd__mcp_skills_list},
        {"skills/get", skd__mcp_skills_get},
        {"resources/list", skd__mcp_resources_list},
        {"resources/read", skd__mcp_resources_read},
        {"resources/directory/read", skd__mcp_resources_dir},
        {"resources/templates/list", skd__mcp_templates_list},
    };
    if (strcmp(method, "ping") == 0 && !s->modern) /* 2026-07-28 removed ping */
        return skd__rpc_result(id, json_object());
    if (strcmp(method, "tools/call") == 0)
        return skd__mcp_tools_call(s, id, params, io);
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(method, table[i].name) == 0)
            return table[i].fn(s, id, params);
    return NULL;
}

static json_t *handle_request(skd_mcp_session *s, const json_t *msg, skd_mcp_io *io)
{
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *params = json_object_get(msg, "params");
    if (strcmp(method, "initialize") == 0)
        return do_initialize(s, id, params);
    if (strcmp(method, "logging/setLevel") == 0)
        return do_set_level(s, id, params);
    json_t *r = skd__mcp_common_method(s, method, id, params, io);
    return r ? r : skd__rpc_error(id, SKD_RPC_METHOD_NOT_FOUND, "method not found: %s", method);
}

json_t *skd__mcp_handle(skd_mcp_session *s, const json_t *msg, skd_mcp_io *io)
{
    json_t *err = NULL;
    switch (skd__rpc_classify(msg, &err)) {
    case SKD_RPC_INVALID:
        return err;
    case SKD_RPC_RESPONSE:
        return NULL; /* this server sends no requests, so nothing waits for one */
    case SKD_RPC_NOTIFICATION: {
        const char *method = json_string_value(json_object_get(msg, "method"));
        if (strcmp(method, "notifications/cancelled") == 0) {
            do_cancelled(s, json_object_get(msg, "params"));
        } else if (strcmp(method, "notifications/initialized") == 0) {
            pthread_mutex_lock(&s->m->mu);
            s->initialized = s->initialized ? 2 : s->initialized;
            pthread_mutex_unlock(&s->m->mu);
        }
        return NULL; /* unknown notifications are ignored, as JSON-RPC asks */
    }
    case SKD_RPC_REQUEST:
        break;
    }
    const char *claimed = skd__mcp_claimed_version(msg);
    if (claimed && (!*claimed || skd__mcp_is_modern(claimed)))
        return skd__mcp_handle_modern(s, msg, claimed, io);
    return handle_request(s, msg, io);
}

json_t *skd__mcp_handle_raw(skd_mcp_session *s, const char *data, size_t len, skd_mcp_io *io)
{
    json_t *err = NULL;
    json_t *msg = skd__rpc_parse(data, len, &err);
    if (!msg)
        return err;
    json_t *reply = skd__mcp_handle(s, msg, io);
    json_decref(msg);
    return reply;
}

int skd__mcp_wants_progress(const json_t *msg)
{
    const char *method = skd_json_str(msg, "method", "");
    const json_t *params = json_object_get(msg, "params");
    const json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
    return strcmp(method, "tools/call") == 0 && (json_is_string(tok) || json_is_integer(tok));
}
