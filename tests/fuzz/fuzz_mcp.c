/* libFuzzer driver for the MCP dispatcher (src/server/jsonrpc.c, mcp*.c):
 * the input is fed as one message and then line by line, as the stdio
 * transport would, to a fresh session of an engine over a temporary
 * DATA_DIR (built-in skills only, so no input can make a call wait). Every
 * reply must be a JSON-RPC 2.0 object with exactly one of result or error,
 * and a notification must get none. */
#include "server/mcp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static skd_engine *engine;
static skd_calls *calls;
static skd_mcp *mcp;
static skd_config *cfg;

static char dir[] = "/tmp/skilld-fuzz-mcp-XXXXXX";

static void cleanup(void)
{
    char cmd[128];
    skd__mcp_free(mcp);
    skd__calls_free(calls);
    skd_engine_close(engine);
    skd_config_free(cfg);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void setup(void)
{
    skd_err err = {0};
    cfg = skd_config_new();
    if (!cfg || !mkdtemp(dir) || skd_config_set(cfg, "DATA_DIR", dir, &err) ||
        skd_config_set(cfg, "SKILLD_MCP_PAGE_SIZE", "2", &err) ||
        skd_engine_open(cfg, &engine, &err))
        abort();
    calls = skd__calls_new();
    mcp = skd__mcp_new(engine, calls);
    if (!mcp)
        abort();
    skd_log_set_level(SKD_LOG_OFF);
    atexit(cleanup);
}

static void sink(void *arg, const json_t *msg)
{
    (void)arg;
    if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "method")))
        abort();
}

static void check_reply(const json_t *msg, json_t *reply)
{
    if (!reply)
        return;
    int has_result = json_object_get(reply, "result") != NULL;
    int has_error = json_object_get(reply, "error") != NULL;
    const char *v = json_string_value(json_object_get(reply, "jsonrpc"));
    if (!v || strcmp(v, "2.0") != 0 || has_result == has_error || !json_object_get(reply, "id"))
        abort();
    /* A well-formed notification never gets a reply. */
    if (msg && json_is_object(msg) && json_string_length(json_object_get(msg, "method")) &&
        !json_object_get(msg, "id") && json_object_size(msg) <= 3 &&
        json_is_string(json_object_get(msg, "jsonrpc")) &&
        strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") == 0 &&
        (!json_object_get(msg, "params") || json_is_object(json_object_get(msg, "params"))))
        abort();
    json_decref(reply);
}

static void feed(skd_mcp_session *s, const char *p, size_t n)
{
    skd_mcp_io io = {sink, NULL, 0};
    skd_err err = {0};
    json_t *msg = skd_json_parse(p, n, &err);
    check_reply(msg, skd__mcp_handle_raw(s, p, n, &io));
    json_decref(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    if (!mcp)
        setup();
    skd_mcp_session *s = skd__mcp_session_new(mcp, "fuzz", SKD_SCOPE_ALL);
    if (!s)
        abort();
    const char *p = (const char *)data, *end = p + size;
    feed(s, p, size);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n)
            feed(s, p, n);
        p += n + 1;
    }
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
    return 0;
}
