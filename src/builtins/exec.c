/*
 * exec: the operator's command, as `skilld exec` runs it. Input {argv[],
 * runtime?, image?, timeout, memory, cpu, pids, outputLimit,
 * workspaceReadOnly}: the command and every limit it runs with, so the
 * audit row's digest covers both. The run is the caller's workspace at
 * /workspace in the sandbox of the runtime asked for; the runner checks the
 * operator's ceilings as for any run. The result carries the sandbox result
 * as it is (sandbox: id, runtime, exitCode, stdout, stderr, ...);
 * success when the command exited 0.
 *
 * Not in the built-ins' list: no agent can call it. skilld exec registers
 * it in its one-call engine (SKD_ENGINE_NO_SKILLS) and calls it through
 * skd_engine_execute like every other call.
 */
#include "builtins/builtins.h"
#include "skilld/sandbox.h"
#include "skilld/workspace.h"

#include <stdlib.h>

static const char schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"argv\"],"
    " \"properties\": {"
    "  \"argv\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 1,"
    "            \"maxItems\": 4096},"
    "  \"runtime\": {\"type\": [\"string\", \"null\"]},"
    "  \"image\": {\"type\": [\"string\", \"null\"]},"
    "  \"timeout\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"memory\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"cpu\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"pids\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"outputLimit\": {\"type\": \"integer\", \"minimum\": 0},"
    "  \"workspaceReadOnly\": {\"type\": \"boolean\"}}}";

/* The skill result of a run that took place. */
static json_t *shape(const skd_sandbox_result *res)
{
    json_t *out = json_object(), *err = NULL;
    int ok = !res->error && res->exited && res->exit_code == 0;
    if (!out)
        return NULL;
    json_object_set_new(out, "success", json_boolean(ok));
    json_object_set_new(out, "sandbox", skd_sandbox_result_to_json(res));
    if (res->error)
        err = json_pack("{s:s, s:s}", "code", skd_errcode(res->error), "message", res->message);
    else if (res->timed_out)
        err = json_pack("{s:s, s:s}", "code", skd_errcode(SKD_ETIMEOUT), "message",
                        "the command did not finish before the timeout and was killed");
    else if (!ok)
        err = json_pack("{s:s, s:s}", "code", skd_errcode(SKD_ECOMMAND), "message",
                        "the command did not exit 0");
    if (err)
        json_object_set_new(out, "error", err);
    return out;
}

static json_t *handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    const json_t *args = json_object_get(input, "argv");
    size_t n = json_array_size(args);
    const char **argv = calloc(n + 1, sizeof(*argv));
    if (!argv)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        argv[i] = json_string_value(json_array_get(args, i));
    skd_sandbox_config cfg;
    skd_sandbox_config_defaults(&cfg, ctx->cfg);
    cfg.timeout_ms = skd_json_int(input, "timeout", cfg.timeout_ms);
    cfg.memory_limit = skd_json_int(input, "memory", cfg.memory_limit);
    cfg.cpu_limit = skd_json_int(input, "cpu", cfg.cpu_limit);
    cfg.pids_limit = skd_json_int(input, "pids", cfg.pids_limit);
    cfg.output_limit = skd_json_int(input, "outputLimit", cfg.output_limit);
    cfg.workspace_read_only = skd_json_bool(input, "workspaceReadOnly", cfg.workspace_read_only);
    skd_sandbox_spec spec = {
        .runtime = skd_json_str(input, "runtime", NULL),
        .image = skd_json_str(input, "image", NULL),
        .argv = argv,
        .config = &cfg,
        .workspace = ctx->ws ? skd_workspace_path(ctx->ws) : NULL,
        .key_id = ctx->key_id,
        .cancel = ctx->cancel,
    };
    skd_sandbox_result res;
    skd_runner *r = ctx->runner(ctx, &err);
    json_t *out = NULL;
    if (!r || skd_sandbox_run(r, &spec, &res, &err) != 0) {
        out = skd_result_from_err(&err);
    } else {
        skd_sandbox_usage_add(ctx->usage, &res);
        out = shape(&res);
        skd_sandbox_result_free(&res);
    }
    free(argv);
    return out ? out : skd_result_error(SKD_ENOMEM, "out of memory");
}

void skd__builtin_exec_def(skd_skill_def *d)
{
    d->name = "exec";
    d->version = "1.0.0";
    d->description = "The operator's command (skilld exec) in a sandbox with the given limits.";
    d->input_schema = json_loads(schema, 0, NULL);
    d->mode = SKD_MODE_SANDBOX;
    d->handler = handler;
}
