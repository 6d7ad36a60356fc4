/*
 * Fixture for the server unit tests: an engine over a temporary DATA_DIR
 * with the test skills (debug_sleep) and an "echo" skill registered, a
 * dispatcher, and a helper that feeds one message to a session and collects
 * the notifications it sends. Header-only so each test program stays one
 * file; every function is static.
 */
#ifndef SKILLD_TESTS_SERVER_FIXTURE_H
#define SKILLD_TESTS_SERVER_FIXTURE_H

#include "server/mcp.h"
#include "server/test_hooks.h"
#include "skilld/skilld.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fixture {
    char dir[64];
    skd_config *cfg;
    skd_engine *e;
    skd_calls *calls;
    skd_mcp *m;
};

/* Notifications collected by a sink; the dispatcher calls sinks under its
 * own lock, but a test thread reads concurrently, hence the mutex. */
struct sink {
    pthread_mutex_t mu;
    json_t *msgs;
};

static inline void sink_init(struct sink *s)
{
    pthread_mutex_init(&s->mu, NULL);
    s->msgs = json_array();
}

static inline void sink_free(struct sink *s)
{
    json_decref(s->msgs);
    pthread_mutex_destroy(&s->mu);
}

static inline void sink_send(void *arg, const json_t *msg)
{
    struct sink *s = arg;
    pthread_mutex_lock(&s->mu);
    json_array_append_new(s->msgs, json_deep_copy(msg));
    pthread_mutex_unlock(&s->mu);
}

/* Number of collected messages whose method is method. */
static inline size_t sink_count(struct sink *s, const char *method)
{
    size_t n = 0, i;
    json_t *m;
    pthread_mutex_lock(&s->mu);
    json_array_foreach(s->msgs, i, m) if (strcmp(skd_json_str(m, "method", ""), method) == 0) n++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static inline json_t *echo_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *r = skd_result_ok();
    json_object_set_new(r, "key", json_string(ctx->key_id));
    json_object_set(r, "echo", (json_t *)input);
    return r;
}

static inline int fixture_add_echo(struct fixture *f, const char *name)
{
    json_t *schema = json_pack("{s:s, s:{s:{s:s, s:i}}, s:[s], s:b}", "type", "object",
                               "properties", "msg", "type", "string", "maxLength", 16,
                               "required", "msg", "additionalProperties", 0);
    skd_skill_def d = {.name = name,
                       .version = "1.0.0",
                       .description = "echo the input",
                       .input_schema = schema,
                       .mode = SKD_MODE_DIRECT,
                       .handler = echo_handler};
    skd_err err = {0};
    int rc = skd_registry_add(skd_engine_registry(f->e), &d, 0, &err);
    json_decref(schema);
    return rc;
}

/* Remove the built-in skills so the catalogue is exactly what tests add. */
static inline int fixture_clear(struct fixture *f)
{
    size_t n = 0;
    skd_registry *reg = skd_engine_registry(f->e);
    skd_skill **list = skd_registry_list(reg, NULL, 0, 1, &n);
    for (size_t i = 0; i < n; i++)
        skd_registry_remove(reg, skd_skill_name(list[i]), NULL, NULL, NULL);
    skd_skill_list_free(list, n);
    return 0;
}

static inline int fixture_open(struct fixture *f, const char *page_size)
{
    skd_err err = {0};
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/skilld-srv-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    f->cfg = skd_config_new();
    if (skd_config_set(f->cfg, "DATA_DIR", f->dir, &err) ||
        skd_config_set(f->cfg, "SKILLD_TEST_SKILLS", "true", &err) ||
        skd_config_set(f->cfg, "SKILLD_MCP_PAGE_SIZE", page_size, &err) ||
        skd_config_set(f->cfg, "SKILLD_MCP_PROGRESS_INTERVAL_MS", "50", &err) ||
        skd_engine_open(f->cfg, &f->e, &err) || fixture_clear(f) ||
        skd__test_skills_register(f->e, NULL, &err) ||
        fixture_add_echo(f, "echo")) {
        fprintf(stderr, "fixture: %s\n", skd_err_msg(&err));
        return -1;
    }
    f->calls = skd__calls_new();
    f->m = skd__mcp_new(f->e, f->calls);
    return f->m ? 0 : -1;
}

static inline void fixture_close(struct fixture *f)
{
    skd__calls_stop(f->calls, 5000);
    skd__mcp_free(f->m);
    skd__calls_free(f->calls);
    skd_engine_close(f->e);
    skd_config_free(f->cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fixture: could not remove %s\n", f->dir);
}

/* Send text to s; returns the reply (new reference or NULL). Notifications
 * go to sk (may be NULL). */
static inline json_t *rpc(skd_mcp_session *s, const char *text, struct sink *sk)
{
    skd_mcp_io io = {sk ? sink_send : NULL, sk, 0};
    return skd__mcp_handle_raw(s, text, strlen(text), &io);
}

/* The error code of a reply, or 0. */
static inline long long rpc_code(const json_t *reply)
{
    return skd_json_int(json_object_get(reply, "error"), "code", 0);
}

static inline skd_mcp_session *fixture_session(struct fixture *f, const char *key, unsigned scopes,
                                        const char *version)
{
    skd_mcp_session *s = skd__mcp_session_new(f->m, key, scopes);
    char init[256];
    snprintf(init, sizeof(init),
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
             "\"version\":\"1\"}}}",
             version);
    json_decref(rpc(s, init, NULL));
    json_decref(rpc(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL));
    return s;
}

#endif
