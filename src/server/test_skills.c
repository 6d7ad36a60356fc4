/*
 * Skills for testing the transports, registered only when
 * SKILLD_TEST_SKILLS=true (never by default): debug_sleep waits, reports
 * progress and honours cancellation through a cancel hook, the same way a
 * sandbox skill kills its run. Integration tests and benchmarks use it to
 * exercise progress notifications, notifications/cancelled and graceful
 * shutdown without depending on the sandbox.
 */
#include "server/test_skills.h"

#include <errno.h>
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

int skd__test_skills_register(skd_engine *e, skd_err *err)
{
    if (!skd_config_bool(skd_engine_config(e), "SKILLD_TEST_SKILLS"))
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
    return skd_config_bool(skd_engine_config(e), "SKILLD_TEST_SKILLS");
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
