/*
 * What only tests get, each behind a setting that is off by default and
 * refused for a server listening on anything but loopback:
 *
 *   SKILLD_TEST_SKILLS=true: debug_sleep waits, reports progress and
 *   honours cancellation through a cancel hook, the same way a sandbox
 *   skill kills its run. Integration tests and benchmarks use it to
 *   exercise progress notifications, notifications/cancelled and graceful
 *   shutdown without depending on the sandbox.
 *
 *   SKILLD_MCP_TEST_FIXTURES=true: the MCP conformance suite's fixture tools
 *   (test_simple_text, test_tool_with_progress, json_schema_2020_12_tool,
 *   ...) and resources (test://static-text, ...), served by the MCP layer
 *   itself because they are protocol fixtures (image, audio and embedded
 *   resource content, log and progress notifications), not skills.
 */
#include "server/test_skills.h"

#include "server/mcp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fired;
};

static void wake(void *arg)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->fired = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Wait ms or until cancelled; returns 1 when cancelled. */
static int wait_ms(struct waiter *w, long long ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->fired && pthread_cond_timedwait(&w->cv, &w->mu, &dl) != ETIMEDOUT) {
    }
    int fired = w->fired;
    pthread_mutex_unlock(&w->mu);
    return fired;
}

static json_t *sleep_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    long long ms = skd_json_int(input, "ms", 0);
    long long steps = skd_json_int(input, "steps", 1);
    struct waiter w = {.fired = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);
    skd_cancel_set_hook(ctx->cancel, wake, &w);
    int cancelled = 0;
    for (long long i = 0; i < steps && !cancelled; i++) {
        cancelled = wait_ms(&w, ms / steps);
        if (!cancelled && ctx->progress && skd_json_bool(input, "report", 1))
            ctx->progress(ctx->progress_arg, (double)(i + 1), (double)steps, "step done");
    }
    skd_cancel_set_hook(ctx->cancel, NULL, NULL); /* waits for a running hook */
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (cancelled)
        return skd_result_error(SKD_ECANCELLED, "debug_sleep was cancelled");
    if (skd_json_bool(input, "fail", 0))
        return skd_result_error(SKD_EIO, "debug_sleep failed as asked");
    json_t *r = skd_result_ok();
    if (r)
        json_object_set_new(r, "slept", json_integer(ms));
    return r;
}

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
static int loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

int skd__test_skills_register(skd_engine *e, const struct sockaddr *listen, skd_err *err)
{
    const skd_config *cfg = skd_engine_config(e);
    int skills = skd_config_bool(cfg, "SKILLD_TEST_SKILLS");
    if ((skills || skd_config_bool(cfg, "SKILLD_MCP_TEST_FIXTURES")) && listen && !loopback(listen))
        return skd_err_set(err, SKD_ECONFIG,
                           "SKILLD_TEST_SKILLS and SKILLD_MCP_TEST_FIXTURES are for tests and are "
                           "refused unless skilld listens on a loopback address");
    if (!skills)
        return 0;
    json_t *schema =
        json_pack("{s:s, s:{s:{s:s, s:i, s:i}, s:{s:s, s:i, s:i}, s:{s:s}, s:{s:s}}, s:b}", "type",
                  "object", "properties", "ms", "type", "integer", "minimum", 0, "maximum", 600000,
                  "steps", "type", "integer", "minimum", 1, "maximum", 1000, "fail", "type",
                  "boolean", "report", "type", "boolean", "additionalProperties", 0);
    skd_skill_def d = {
        .name = "debug_sleep",
        .version = "1.0.0",
        .description = "Test skill: wait ms milliseconds in steps, reporting progress; "
                       "cancellable. Registered only with SKILLD_TEST_SKILLS=true.",
        .input_schema = schema,
        .mode = SKD_MODE_DIRECT,
        .handler = sleep_handler,
    };
    int rc = schema ? skd_registry_add(skd_engine_registry(e), &d, 0, err)
                    : skd_err_set(err, SKD_ENOMEM, "out of memory");
    json_decref(schema);
    return rc == SKD_EEXISTS ? 0 : rc;
}

/* ---- fixture resources (the conformance suite's) --------------------- */

static int test_mode(skd_engine *e)
{
    return skd_config_bool(skd_engine_config(e), "SKILLD_MCP_TEST_FIXTURES");
}

json_t *skd__test_resources_list(skd_engine *e)
{
    if (!test_mode(e))
        return json_array();
    return json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]", "uri",
                     "test://static-text", "name", "static-text", "mimeType", "text/plain", "uri",
                     "test://static-binary", "name", "static-binary", "mimeType", "image/png",
                     "uri", "test://watched-resource", "name", "watched-resource", "mimeType",
                     "text/plain");
}

json_t *skd__test_resource_templates(skd_engine *e)
{
    if (!test_mode(e))
        return json_array();
    return json_pack("[{s:s, s:s, s:s, s:s}]", "uriTemplate", "test://template/{id}/data", "name",
                     "template", "description", "A resource template with an id parameter",
                     "mimeType", "application/json");
}

/* A 1x1 PNG. */
static const char png_b64[] = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/"
                              "x8AAwMCAO+ip1sAAAAASUVORK5CYII=";

json_t *skd__test_resource_read(skd_engine *e, const char *uri)
{
    if (!uri || !test_mode(e) || strncmp(uri, "test://", 7) != 0)
        return NULL;
    if (strcmp(uri, "test://static-text") == 0 || strcmp(uri, "test://watched-resource") == 0)
        return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", "text/plain",
                         "text", "This is the content of the static text resource.");
    if (strcmp(uri, "test://static-binary") == 0)
        return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", "image/png",
                         "blob", png_b64);
    const char *id = uri + strlen("test://template/"), *slash = NULL;
    if (strncmp(uri, "test://template/", 16) == 0 && (slash = strchr(id, '/')) != NULL &&
        slash > id && strcmp(slash, "/data") == 0) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"id\":\"%.*s\",\"templateTest\":true,\"data\":\"Data for ID: %.*s\"}",
                 (int)(slash - id), id, (int)(slash - id), id);
        return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                         "application/json", "text", text);
    }
    return NULL;
}

/* ---- fixture tools (the conformance suite's) ------------------------- */

/* A 1x1 WAV (8 kHz, 8-bit mono, one sample). */
static const char wav_b64[] = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA";

static const char schema2020[] =
    "{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"type\": \"object\","
    " \"$defs\": {\"address\": {\"$anchor\": \"addressDef\", \"type\": \"object\","
    "   \"properties\": {\"street\": {\"type\": \"string\"}, \"city\": {\"type\": \"string\"}}}},"
    " \"properties\": {\"name\": {\"type\": \"string\"}, \"address\": {\"$ref\": "
    "\"#/$defs/address\"},"
    "   \"contactMethod\": {\"type\": \"string\", \"enum\": [\"phone\", \"email\"]},"
    "   \"phone\": {\"type\": \"string\"}, \"email\": {\"type\": \"string\"}},"
    " \"allOf\": [{\"anyOf\": [{\"required\": [\"phone\"]}, {\"required\": [\"email\"]}]}],"
    " \"if\": {\"properties\": {\"contactMethod\": {\"const\": \"phone\"}},"
    "   \"required\": [\"contactMethod\"]},"
    " \"then\": {\"required\": [\"phone\"]}, \"else\": {\"required\": [\"email\"]},"
    " \"additionalProperties\": false}";

static const char *const fixtures[][2] = {
    {"test_simple_text", "Returns simple text (conformance fixture)"},
    {"test_image_content", "Returns a PNG image (conformance fixture)"},
    {"test_audio_content", "Returns a WAV sound (conformance fixture)"},
    {"test_embedded_resource", "Returns an embedded resource (conformance fixture)"},
    {"test_multiple_content_types", "Returns text, image and resource (conformance fixture)"},
    {"test_tool_with_logging", "Sends three log messages (conformance fixture)"},
    {"test_error_handling", "Always fails (conformance fixture)"},
    {"test_tool_with_progress", "Reports progress 0, 50, 100 of 100 (conformance fixture)"},
    {"test_logging_tool", "Logs one message when the request asked for logs (fixture)"},
    {"test_missing_capability", "Needs the client's sampling capability (fixture)"},
    {"test_trigger_tool_change", "Adds or removes a tool, so the tool list changes (fixture)"},
    {"test_header_param", "Echoes region, which clients mirror in Mcp-Param-Region (fixture)"},
    {"json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features"},
};
#define NFIX (sizeof(fixtures) / sizeof(fixtures[0]))

json_t *skd__test_fixture_tools(skd_engine *e)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && test_mode(e) && i < NFIX; i++) {
        json_t *schema = i == NFIX - 1 ? json_loads(schema2020, 0, NULL)
                         : strcmp(fixtures[i][0], "test_header_param") == 0
                             ? json_pack("{s:s, s:{s:{s:s, s:s}}, s:[s]}", "type", "object",
                                         "properties", "region", "type", "string", "x-mcp-header",
                                         "Region", "required", "region")
                             : json_pack("{s:s, s:{}}", "type", "object", "properties");
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "name", fixtures[i][0],
                                             "description", fixtures[i][1], "inputSchema", schema));
    }
    return arr;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void progress(skd_mcp_session *s, skd_mcp_io *io, const json_t *token, int value)
{
    if (!io || !io->send || !token)
        return;
    json_t *n = skd__rpc_notification(
        "notifications/progress",
        json_pack("{s:O, s:i, s:i}", "progressToken", token, "progress", value, "total", 100));
    if (!n)
        return;
    pthread_mutex_lock(&s->m->mu); /* sinks are called with the lock held */
    io->send(io->arg, n);
    pthread_mutex_unlock(&s->m->mu);
    json_decref(n);
}

static json_t *text_block(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

static json_t *changed_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)ctx;
    (void)input;
    (void)udata;
    return skd_result_ok();
}

/* Add debug_changed_tool, or remove it when it is there: either way the
 * registry announces a change. */
static void toggle_tool(skd_engine *e)
{
    skd_registry *reg = skd_engine_registry(e);
    if (skd_registry_remove(reg, "debug_changed_tool", "1.0.0", NULL, NULL) == 0)
        return;
    json_t *schema = json_pack("{s:s}", "type", "object");
    skd_skill_def d = {
        .name = "debug_changed_tool",
        .version = "1.0.0",
        .description = "Added by test_trigger_tool_change (conformance fixture)",
        .input_schema = schema,
        .mode = SKD_MODE_DIRECT,
        .handler = changed_handler,
    };
    if (schema)
        skd_registry_add(reg, &d, 0, NULL);
    json_decref(schema);
}

json_t *skd__test_fixture_call(skd_mcp_session *s, const json_t *id, const json_t *params,
                               skd_mcp_io *io)
{
    const char *name = skd_json_str(params, "name", "");
    size_t i = 0;
    while (i < NFIX && strcmp(name, fixtures[i][0]) != 0)
        i++;
    if (i == NFIX || !test_mode(s->m->e))
        return NULL;
    json_t *content = json_array();
    int is_error = 0;
    if (strcmp(name, "test_simple_text") == 0) {
        json_array_append_new(content, text_block("This is a simple text response for testing."));
    } else if (strcmp(name, "test_image_content") == 0) {
        json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                 png_b64, "mimeType", "image/png"));
    } else if (strcmp(name, "test_audio_content") == 0) {
        json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "audio", "data",
                                                 wav_b64, "mimeType", "audio/wav"));
    } else if (strcmp(name, "test_embedded_resource") == 0) {
        json_array_append_new(content,
                              json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource", "resource",
                                        "uri", "test://embedded-resource", "mimeType", "text/plain",
                                        "text", "This is an embedded resource content."));
    } else if (strcmp(name, "test_multiple_content_types") == 0) {
        json_array_append_new(content, text_block("Multiple content types test:"));
        json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                 png_b64, "mimeType", "image/png"));
        json_array_append_new(content, json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource",
                                                 "resource", "uri", "test://mixed-content-resource",
                                                 "mimeType", "application/json", "text",
                                                 "{\"test\":\"data\",\"value\":123}"));
    } else if (strcmp(name, "test_tool_with_logging") == 0) {
        skd__mcp_log(s, io, MCP_LOG_INFO, "Tool execution started");
        pause_ms(50);
        skd__mcp_log(s, io, MCP_LOG_INFO, "Tool processing data");
        pause_ms(50);
        skd__mcp_log(s, io, MCP_LOG_INFO, "Tool execution completed");
        json_array_append_new(content, text_block("Tool with logging executed successfully"));
    } else if (strcmp(name, "test_error_handling") == 0) {
        json_array_append_new(content,
                              text_block("This tool intentionally returns an error for testing"));
        is_error = 1;
    } else if (strcmp(name, "test_tool_with_progress") == 0) {
        const json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
        for (int v = 0; v <= 100; v += 50) {
            progress(s, io, tok, v);
            if (v < 100)
                pause_ms(50);
        }
        json_array_append_new(content, text_block("Tool with progress executed successfully"));
    } else if (strcmp(name, "test_logging_tool") == 0) {
        skd__mcp_log(s, io, MCP_LOG_INFO, "test_logging_tool ran"); /* only when asked for */
        json_array_append_new(content, text_block("test_logging_tool executed"));
    } else if (strcmp(name, "test_missing_capability") == 0) {
        const json_t *caps = json_object_get(json_object_get(params, "_meta"), SKD_MCP_META_CAPS);
        if (s->modern && !json_object_get(caps, "sampling")) {
            json_decref(content);
            json_t *e = skd__rpc_error(id, SKD_RPC_MISSING_CAPABILITY,
                                       "test_missing_capability needs the client's sampling "
                                       "capability, which this request did not declare");
            json_object_set_new(json_object_get(e, "error"), "data",
                                json_pack("{s:{s:{}}}", "requiredCapabilities", "sampling"));
            return e;
        }
        json_array_append_new(content, text_block("the sampling capability was declared"));
    } else if (strcmp(name, "test_header_param") == 0) {
        json_array_append_new(content, text_block(skd_json_str(json_object_get(params, "arguments"),
                                                               "region", "(none)")));
    } else if (strcmp(name, "test_trigger_tool_change") == 0) {
        toggle_tool(s->m->e);
        json_array_append_new(content, text_block("the tool list changed"));
    } else {
        json_array_append_new(content, text_block("json_schema_2020_12_tool called"));
    }
    return skd__rpc_result(id, json_pack("{s:o, s:b}", "content", content, "isError", is_error));
}
