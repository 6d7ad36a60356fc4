/*
 * Shared body of the sandbox skills (see sandbox_skill.h). Input was
 * validated against the skill's schema by the engine; environment names are
 * checked again here because the schema cannot express them.
 */
#include "builtins/sandbox_skill.h"
#include "sandbox/env.h"
#include "skilld/sandbox.h"
#include "skilld/workspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENV 256

static int env_name_ok(const char *k)
{
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
        return 0;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return 0;
    return strlen(k) <= 128;
}

/* Build "NAME=value" strings: the defaults, then the caller's (which
 * replace a default of the same name). *out is NULL-terminated, malloc'd
 * strings; free with free_env. */
void skd__sandbox_skill_env_free(char **env)
{
    for (char **p = env; p && *p; p++)
        free(*p);
    free(env);
}

json_t *skd__sandbox_skill_env(const json_t *extra, char ***out)
{
    size_t n = json_is_object(extra) ? json_object_size(extra) : 0;
    if (n > MAX_ENV)
        return skd_result_error(SKD_EINVAL, "env: at most %d variables", MAX_ENV);
    size_t nbase = 0;
    while (skd__sandbox_env_base[nbase])
        nbase++;
    char **env = calloc(nbase + n + 1, sizeof(*env));
    size_t k = 0;
    if (!env)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    const char *key;
    json_t *v;
    for (const char *const *b = skd__sandbox_env_base; *b; b++) {
        if (n && json_object_getn(extra, *b, strcspn(*b, "=")))
            continue;
        if (!(env[k++] = strdup(*b)))
            goto nomem;
    }
    json_object_foreach ((json_t *)extra, key, v) {
        if (!env_name_ok(key) || !json_is_string(v)) {
            skd__sandbox_skill_env_free(env);
            return skd_result_error(SKD_EINVAL, "env: '%.64s' must be a NAME with a string value",
                                    key);
        }
        size_t len = strlen(key) + json_string_length(v) + 2;
        if (strlen(json_string_value(v)) != json_string_length(v)) {
            skd__sandbox_skill_env_free(env);
            return skd_result_error(SKD_EINVAL, "env: %s contains a NUL byte", key);
        }
        if (!(env[k] = malloc(len)))
            goto nomem;
        snprintf(env[k++], len, "%s=%s", key, json_string_value(v));
    }
    *out = env;
    return NULL;
nomem:
    skd__sandbox_skill_env_free(env);
    return skd_result_error(SKD_ENOMEM, "out of memory");
}

struct progress {
    const skd_ctx *ctx;
    long long timeout_ms;
};

static void tick(void *arg, int64_t elapsed)
{
    struct progress *p = arg;
    char msg[64];
    snprintf(msg, sizeof(msg), "running for %lld ms", (long long)elapsed);
    p->ctx->progress(p->ctx->progress_arg, (double)elapsed, (double)p->timeout_ms, msg);
}

/* The run's output to the transport as it arrives (ctx->output). */
static void to_transport(void *arg, int stream, const char *data, size_t len)
{
    const skd_ctx *ctx = arg;
    ctx->output(ctx->output_arg, stream == 1 ? "stdout" : "stderr", data, len);
}

/* "output": stdout, then stderr, as one text (OmniRoute's combined view).
 * The streams may hold NUL bytes: lengths come from jansson, not strlen. */
static json_t *combined(json_t *res)
{
    const json_t *oj = json_object_get(res, "stdout"), *ej = json_object_get(res, "stderr");
    const char *o = json_string_value(oj), *e = json_string_value(ej);
    size_t ol = o ? json_string_length(oj) : 0, el = e ? json_string_length(ej) : 0;
    char *buf = malloc(ol + el + 2);
    if (!buf)
        return NULL;
    memcpy(buf, o ? o : "", ol);
    size_t n = ol;
    if (ol && el && o[ol - 1] != '\n')
        buf[n++] = '\n';
    memcpy(buf + n, e ? e : "", el);
    n += el;
    json_t *s = json_stringn(buf, n);
    free(buf);
    return s;
}

/* The skill result from a finished run. */
static json_t *shape(const skd_sandbox_result *r, int cancelled)
{
    json_t *j = skd_sandbox_result_to_json(r);
    if (!j)
        return NULL;
    json_t *out = json_object();
    /* A run whose workspace changes were not kept did not do its work. */
    int ok = !r->error && r->exited && r->exit_code == 0 && !(r->ws_checked && r->ws_error);
    json_object_set_new(out, "success", json_boolean(ok));
    json_object_set(out, "exitCode", json_object_get(j, "exitCode"));
    json_object_set(out, "stdout", json_object_get(j, "stdout"));
    json_object_set(out, "stderr", json_object_get(j, "stderr"));
    json_object_set_new(out, "output", combined(j));
    json_object_set(out, "truncated", json_object_get(j, "truncated"));
    json_object_set(out, "durationMs", json_object_get(j, "duration"));
    json_object_set(out, "killed", json_object_get(j, "killed"));
    json_object_set(out, "timedOut", json_object_get(j, "timedOut"));
    json_object_set(out, "oomKilled", json_object_get(j, "oomKilled"));
    json_object_set(out, "signal", json_object_get(j, "signal"));
    json_object_set(out, "sandboxId", json_object_get(j, "id"));
    json_object_set(out, "runtime", json_object_get(j, "runtime"));
    if (json_object_get(j, "egress")) /* networkEnabled: what the proxy let by */
        json_object_set(out, "egress", json_object_get(j, "egress"));
    json_t *err = NULL;
    if (r->error)
        err = json_pack("{s:s, s:s}", "code", skd_errcode(r->error), "message", r->message);
    else if (r->timed_out)
        err = json_pack("{s:s, s:s}", "code", "timeout", "message",
                        "the command did not finish before the timeout and was killed");
    else if (cancelled)
        err = json_pack("{s:s, s:s}", "code", "cancelled", "message", "the call was cancelled");
    else if (r->ws_checked && r->ws_error)
        err = json_pack("{s:s, s:s}", "code", skd_errcode(r->ws_error), "message", r->ws_message);
    if (json_object_get(j, "workspace"))
        json_object_set(out, "workspace", json_object_get(j, "workspace"));
    if (err)
        json_object_set_new(out, "error", err);
    json_decref(j);
    return out;
}

json_t *skd__sandbox_skill_run(const skd_ctx *ctx, const skd__sbx_call *call)
{
    skd_err err = {0};
    const skd_config *cfg = ctx->cfg;
    char **env = NULL;
    json_t *bad = skd__sandbox_skill_env(call->env, &env);
    if (bad)
        return bad;
    skd_runner *runner = ctx->runner(ctx, &err);
    if (!runner) {
        skd__sandbox_skill_env_free(env);
        return skd_result_from_err(&err);
    }
    skd_sandbox_config sc;
    skd_sandbox_config_defaults(&sc, cfg);
    sc.timeout_ms = call->timeout_ms > 0 ? call->timeout_ms : sc.timeout_ms;
    if (call->network_enabled >= 0)
        sc.network_enabled = call->network_enabled;
    /* The caller narrows the operator's limits, never widens them: the
     * runner checks the ceilings as the run enters (skd_sandbox_run). */
    struct progress pr = {ctx, sc.timeout_ms};
    skd_sandbox_spec spec = {
        .image = call->image,
        .argv = call->argv,
        .env = (const char *const *)env,
        .stdin_data = call->stdin_data,
        .stdin_len = call->stdin_len,
        .config = &sc,
        .workspace = ctx->ws ? skd_workspace_path(ctx->ws) : NULL,
        .skill_dir = call->skill_dir,
        .key_id = ctx->key_id,
        .cancel = ctx->cancel,
        .tick = ctx->progress ? tick : NULL,
        .tick_arg = &pr,
        .cwd = call->cwd,
        .on_output = ctx->output ? to_transport : NULL,
        .output_arg = (void *)ctx,
        .output_on_caller = 1,
    };
    skd_sandbox_result res;
    int rc;
    if (call->live_id) {
        skd_live_exec_opts lo = {.spec = &spec, .timeout_ms = call->timeout_ms};
        rc = skd_live_exec(runner, ctx->key_id, call->live_id, &lo, &res, &err);
    } else {
        rc = skd_sandbox_run(runner, &spec, &res, &err);
    }
    skd__sandbox_skill_env_free(env);
    if (rc)
        return skd_result_from_err(&err);
    skd_sandbox_usage_add(ctx->usage, &res);
    json_t *out = shape(&res, skd_cancel_is_set(ctx->cancel));
    skd_sandbox_result_free(&res);
    if (out && call->live_id) { /* the live sandbox's id; the run's apart */
        json_object_set(out, "runId", json_object_get(out, "sandboxId"));
        json_object_set_new(out, "sandboxId", json_string(call->live_id));
    }
    return out ? out : skd_result_error(SKD_ENOMEM, "out of memory");
}

json_t *skd__sandbox_skill_schema(const char *text)
{
    return skd_sandbox_limit_schema(
        skd_sandbox_limit_schema(json_loads(text, 0, NULL), SKD_LIMIT_TIMEOUT), SKD_LIMIT_NETWORK);
}
