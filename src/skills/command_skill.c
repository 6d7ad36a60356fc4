/*
 * The handler of command skills (manifests and Agent Skills folders): run
 * the manifest's command in the sandbox with the validated input as JSON on
 * stdin and the caller's workspace at /workspace, and turn what it printed
 * into a skill result.
 *
 * Trust: the manifest was checked at registration (skd_manifest_check); the
 * command and everything it prints are untrusted. stdout becomes the result
 * only when it parses (bounded, skd_json_parse) as a JSON object; a
 * "success" the command sets is kept, so a command can report its own
 * failure. The sandbox enforces every limit; this file only chooses them
 * from the manifest over the server defaults.
 */
#include "skilld/custom.h"
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/sandbox.h"
#include "skilld/skilld.h"
#include "skilld/workspace.h"

#include <stdlib.h>
#include <string.h>

/* What a registered command skill keeps: the manifest (own reference) and
 * the folder mounted at /skill (owned copy, or NULL). */
struct command_skill {
    json_t *manifest;
    char *skill_dir;
};

static void command_skill_free(void *p)
{
    struct command_skill *c = p;
    if (!c)
        return;
    json_decref(c->manifest);
    free(c->skill_dir);
    free(c);
}

/* Limits: server defaults, overridden by the manifest's run fields, then
 * lowered to the operator's ceilings. A manifest above a ceiling was
 * refused when it was registered; one stored before the ceiling was
 * lowered runs clamped, and *clamped receives the bits (1u << row) of the
 * fields lowered (the result says so). networkEnabled is never clamped:
 * the runner's ceiling check refuses it (forbidden) unless the operator
 * allows network access. */
static int limits(const skd_ctx *ctx, const json_t *run, skd_sandbox_config *sc, unsigned *clamped,
                  skd_err *err)
{
    const skd_config *cfg = ctx->cfg;
    skd_sandbox_ceilings ceil;
    int rc = skd__manifest_limits(run, cfg, sc, err);
    if (rc)
        return rc;
    skd_sandbox_ceilings_from_config(&ceil, cfg);
    *clamped = skd_sandbox_config_clamp(sc, &ceil);
    return 0;
}

/* Add "clamped": [names] to res (borrowed) when bits is not 0. */
static json_t *with_clamped(json_t *res, unsigned bits)
{
    if (res && bits)
        json_object_set_new(res, "clamped", skd_sandbox_clamped_json(bits));
    return res;
}

static void tick(void *arg, int64_t elapsed_ms)
{
    const skd_ctx *ctx = arg;
    if (ctx->progress)
        ctx->progress(ctx->progress_arg, (double)elapsed_ms / 1000.0, 0, "running");
}

/* The result for a command that ran. */
static json_t *outcome(const json_t *manifest, const skd_sandbox_result *r, int cancelled)
{
    if (r->timed_out)
        return skd_result_error(SKD_ETIMEOUT, "the command did not finish within its time limit");
    if (cancelled)
        return skd_result_error(SKD_ECANCELLED, "the call was cancelled");
    if (r->oom_killed)
        return skd_result_error(SKD_ETOOBIG, "the command exceeded its memory limit");
    if (r->ws_checked && r->ws_error) /* its workspace changes were not kept */
        return skd_result_error(r->ws_error, "%s", r->ws_message);
    if (!r->exited || r->exit_code != 0) {
        json_t *res =
            r->exited
                ? skd_result_error(SKD_ECOMMAND, "the command exited with status %d", r->exit_code)
                : skd_result_error(SKD_ECOMMAND, "the command was killed by signal %d", r->signal);
        json_t *sr = skd_sandbox_result_to_json(r);
        if (res && sr) {
            json_object_set(res, "exitCode", json_object_get(sr, "exitCode"));
            json_object_set(res, "stderr", json_object_get(sr, "stderr"));
        }
        json_decref(sr);
        return res;
    }
    skd_err err = {0};
    json_t *v = r->out_len ? skd_json_parse(r->out, r->out_len, &err) : NULL;
    if (json_is_object(v)) {
        if (!json_object_get(v, "success"))
            json_object_set_new(v, "success", json_true());
        json_t *os = json_object_get(manifest, "outputSchema");
        if (os && skd_result_success(v) && skd_schema_validate(os, v, &err)) {
            json_decref(v);
            return skd_result_error(SKD_ECOMMAND, "the output does not match outputSchema: %s",
                                    skd_err_msg(&err));
        }
        return v;
    }
    json_decref(v);
    json_t *sr = skd_sandbox_result_to_json(r); /* stdout made valid UTF-8 there */
    json_t *res = json_pack("{s:b, s:O}", "success", 1, "output",
                            sr ? json_object_get(sr, "stdout") : json_string(""));
    if (res && r->truncated)
        json_object_set_new(res, "truncated", json_true());
    json_decref(sr);
    return res;
}

static json_t *run_command(const skd_ctx *ctx, const json_t *input, void *udata)
{
    struct command_skill *c = udata;
    const json_t *run = json_object_get(c->manifest, "run");
    skd_err err = {0};
    skd_sandbox_config cfg;
    skd_sandbox_result res;
    const char **argv = NULL;
    char *in = NULL;
    json_t *out = NULL;
    memset(&res, 0, sizeof(res));

    unsigned clamped = 0;
    if (limits(ctx, run, &cfg, &clamped, &err))
        return skd_result_from_err(&err);
    skd_runner *runner = ctx->runner(ctx, &err);
    if (!runner)
        return skd_result_from_err(&err);
    json_t *cmd = json_object_get(run, "command");
    size_t n = json_array_size(cmd);
    if (!(argv = calloc(n + 1, sizeof(*argv))))
        return skd_result_error(SKD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        argv[i] = json_string_value(json_array_get(cmd, i));
    if (strcmp(skd_json_str(run, "stdin", "input"), "input") == 0 && !(in = skd_json_dump(input))) {
        out = skd_result_error(SKD_ENOMEM, "out of memory");
        goto done;
    }
    skd_sandbox_spec spec = {
        .image = skd_json_str(run, "image", "host"),
        .argv = argv,
        .stdin_data = in,
        .stdin_len = in ? strlen(in) : 0,
        .config = &cfg,
        .workspace = ctx->ws ? skd_workspace_path(ctx->ws) : NULL,
        .key_id = ctx->key_id,
        .cancel = ctx->cancel,
        .tick = tick,
        .tick_arg = (void *)ctx,
        .skill_dir = c->skill_dir,
        .egress_allow = skd_json_str(run, "egressAllowHosts", NULL),
        .egress_deny = skd_json_str(run, "egressDenyHosts", NULL),
    };
    if (skd_sandbox_run(runner, &spec, &res, &err)) {
        out = skd_result_from_err(&err);
        goto done;
    }
    skd_sandbox_usage_add(ctx->usage, &res);
    if (res.error)
        out = skd_result_error(res.error, "%s", res.message);
    else
        out = outcome(c->manifest, &res, skd_cancel_is_set(ctx->cancel) && res.killed);
    if (out && res.egress) /* networkEnabled: what the proxy let by */
        json_object_set(out, "egress", res.egress);
    skd_sandbox_result_free(&res);
done:
    free(in);
    free(argv);
    return with_clamped(out, clamped);
}

int skd__command_skill_def(const json_t *m, const char *skill_dir, const char *owner,
                           skd_skill_def *d, skd_err *err)
{
    struct command_skill *c = calloc(1, sizeof(*c));
    if (!c || (skill_dir && !(c->skill_dir = strdup(skill_dir)))) {
        free(c);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    c->manifest = json_incref((json_t *)m);
    memset(d, 0, sizeof(*d));
    d->name = skd_json_str(m, "name", "");
    d->version = skd_json_str(m, "version", "");
    d->description = skd_json_str(m, "description", "");
    d->input_schema = json_object_get(m, "inputSchema");
    d->output_schema = json_object_get(m, "outputSchema");
    d->tags = json_object_get(m, "tags");
    d->manifest = (json_t *)m;
    d->mode = SKD_MODE_SANDBOX;
    d->handler = run_command;
    d->udata = c;
    d->udata_free = command_skill_free;
    d->owner = owner;
    return 0;
}
