/*
 * The pause, resume and fork skills of live sandboxes (DESIGN.md, "Live
 * sandboxes"): sandbox_pause, sandbox_resume, sandbox_fork, beside the
 * live sandbox skills of sandbox_live.c. A filesystem snapshot, not a
 * process checkpoint: a pause keeps the sandbox's root layer and /tmp and
 * ends its processes; a resume starts new ones on those files; a fork is
 * a new sandbox with a copy of them. The resource, its ownership and its
 * caps are src/sandbox/live.c's: another key's sandbox is not_found.
 */
#include "builtins/builtins.h"
#include "skilld/sandbox.h"

#include <string.h>

static const char id_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"sandboxId\"],"
    " \"properties\": {"
    "  \"sandboxId\": {\"type\": \"string\", \"maxLength\": 64,"
    "                 \"description\": \"the id sandbox_create returned\"}"
    "}}";

static skd_runner *runner_of(const skd_ctx *ctx, json_t **res)
{
    skd_err err = {0};
    skd_runner *r = ctx->runner(ctx, &err);
    if (!r)
        *res = skd_result_from_err(&err);
    return r;
}

/* {success, sandboxId, state, changed, message, sandbox}. */
static json_t *answer(const char *id, json_t *sb, int changed, const char *message)
{
    json_t *o = skd_result_ok();
    json_t *state = json_object_get(sb, "state");
    if (!o || !sb || json_object_set_new(o, "sandboxId", json_string(id)) ||
        json_object_set(o, "state", state ? state : json_null()) ||
        json_object_set_new(o, "changed", json_boolean(changed)) ||
        json_object_set_new(o, "message", json_string(message)) ||
        json_object_set_new(o, "sandbox", sb)) {
        json_decref(o);
        return skd_result_error(SKD_ENOMEM, "out of memory");
    }
    return o;
}

static json_t *pause_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = runner_of(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *sb = NULL;
    int changed = 0;
    const char *id = skd_json_str(input, "sandboxId", "");
    if (skd_live_pause(r, ctx->key_id, id, &changed, &sb, &err) != 0)
        return skd_result_from_err(&err);
    return answer(id, sb, changed,
                  changed ? "paused: its root layer and /tmp are saved, its processes ended; "
                            "sandbox_resume starts it again"
                          : "already paused: nothing was done");
}

static json_t *resume_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = runner_of(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *sb = NULL;
    int changed = 0;
    const char *id = skd_json_str(input, "sandboxId", "");
    if (skd_live_resume(r, ctx->key_id, id, &changed, &sb, &err) != 0)
        return skd_result_from_err(&err);
    return answer(id, sb, changed,
                  changed ? "resumed: its files are as they were at the pause; its processes "
                            "are new"
                          : "already running: nothing was done");
}

static json_t *fork_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = runner_of(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *sb = NULL;
    const char *id = skd_json_str(input, "sandboxId", "");
    if (skd_live_fork(r, ctx->key_id, id, &sb, &err) != 0)
        return skd_result_from_err(&err);
    json_object_set_new(sb, "forkedFrom", json_string(id));
    json_t *o = skd_result_ok();
    if (!o || json_object_set_new(o, "sandbox", sb)) {
        json_decref(o);
        return skd_result_error(SKD_ENOMEM, "out of memory");
    }
    return o;
}

void skd__builtin_sandbox_pause_def(skd_skill_def *d)
{
    d->name = "sandbox_pause";
    d->version = "1.0.0";
    d->description = "Pause one of your live sandboxes: its root layer and /tmp are saved and "
                     "every process of it ends, so it holds no memory (a filesystem snapshot, "
                     "not a process checkpoint). An exec in it is refused until sandbox_resume. "
                     "Pausing a paused one does nothing and says so.";
    d->input_schema = json_loads(id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = pause_handler;
}

void skd__builtin_sandbox_resume_def(skd_skill_def *d)
{
    d->name = "sandbox_resume";
    d->version = "1.0.0";
    d->description = "Resume one of your paused live sandboxes: the same id, its files as they "
                     "were at the pause, new processes (memory is not kept). Resuming a running "
                     "one does nothing and says so.";
    d->input_schema = json_loads(id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = resume_handler;
}

void skd__builtin_sandbox_fork_def(skd_skill_def *d)
{
    d->name = "sandbox_fork";
    d->version = "1.0.0";
    d->description = "Fork one of your live sandboxes (running or paused): a new sandbox whose "
                     "root layer and /tmp are a copy of this one's now; the two are independent "
                     "afterwards. Processes and memory are not copied.";
    d->input_schema = json_loads(id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = fork_handler;
}
