/*
 * The pause, resume and fork skills of live sandboxes (DESIGN.md, "Live
 * sandboxes"): sandbox_pause, sandbox_resume, sandbox_fork, beside the
 * live sandbox skills of sandbox_live.c. A filesystem snapshot, not a
 * process checkpoint: a pause keeps the sandbox's files (its root layer
 * and /tmp; a container's root is read-only) and ends its processes; a
 * resume starts new ones on those files; a fork is a new sandbox with a
 * copy of them. The resource, its ownership and its
 * caps are src/sandbox/live.c's: another key's sandbox is not_found.
 */
#include "builtins/builtins.h"
#include "skilld/sandbox.h"
#include "skilld/store.h"

#include <string.h>

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

/* A pause or a resume: the call, and what the answer says when it
 * changed the sandbox and when it was already so. */
struct move {
    int (*fn)(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
              skd_err *err);
    const char *done, *already;
};

static const struct move pause_move = {
    skd_live_pause,
    "paused: its files (root layer, /tmp) are saved, its processes ended; sandbox_resume "
    "starts it again",
    "already paused: nothing was done"};
static const struct move resume_move = {
    skd_live_resume, "resumed: its files are as they were at the pause; its processes are new",
    "already running: nothing was done"};

static json_t *move_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    const struct move *m = udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *sb = NULL;
    int changed = 0;
    const char *id = skd_json_str(input, "sandboxId", "");
    json_t *before = NULL;
    int placed = 0;
    /* A resume counts against the per-key live cap over every replica:
     * the row is placed first, and when the resume fails it is set to what
     * the runner holds then. */
    if (m == &resume_move && skd_live_get(r, ctx->key_id, id, &before, NULL) == 0 &&
        json_is_string(json_object_get(before, "state")) &&
        strcmp(json_string_value(json_object_get(before, "state")), "paused") == 0) {
        if (skd_store_live_resume_place(
                ctx->store, ctx->key_id, id,
                (int)skd_config_int(ctx->cfg, "SKILLS_SANDBOX_MAX_LIVE_PER_KEY"), &err) != 0) {
            json_decref(before);
            return skd_result_from_err(&err);
        }
        placed = 1;
    }
    json_decref(before);
    if (m->fn(r, ctx->key_id, id, &changed, &sb, &err) != 0) {
        json_t *now = NULL;
        if (placed && skd_live_get(r, ctx->key_id, id, &now, NULL) == 0) {
            /* "resuming" or "pausing" is what another call is doing: it
             * writes the row when it is done. */
            const char *st = json_string_value(json_object_get(now, "state"));
            if (st && (strcmp(st, "paused") == 0 || strcmp(st, "running") == 0))
                skd__builtin_live_row_set(ctx, now);
        }
        json_decref(now);
        return skd_result_from_err(&err);
    }
    if (changed)
        skd__builtin_live_row_set(ctx, sb);
    return answer(id, sb, changed, changed ? m->done : m->already);
}

static json_t *fork_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *res = NULL;
    skd_runner *r = skd__builtin_runner(ctx, &res);
    if (!r)
        return res;
    skd_err err = {0};
    json_t *sb = NULL;
    const char *id = skd_json_str(input, "sandboxId", "");
    char new_id[SKD_UUID_LEN + 1];
    if (skd__builtin_live_row_begin(ctx, new_id, &err) != 0)
        return skd_result_from_err(&err);
    if (skd_live_fork(r, ctx->key_id, id, new_id, &sb, &err) != 0) {
        skd__builtin_live_row_end(ctx, new_id);
        return skd_result_from_err(&err);
    }
    skd__builtin_live_row_set(ctx, sb);
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
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "Pause one of your live sandboxes: its files (root layer, /tmp) are saved and "
                     "every process of it ends, so it holds no memory (a filesystem snapshot, "
                     "not a process checkpoint). An exec in it is refused until sandbox_resume. "
                     "Pausing a paused one does nothing and says so.";
    d->input_schema = json_loads(skd__builtin_sandbox_id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = move_handler;
    d->udata = (void *)&pause_move;
}

void skd__builtin_sandbox_resume_def(skd_skill_def *d)
{
    d->name = "sandbox_resume";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description = "Resume one of your paused live sandboxes: the same id, its files as they "
                     "were at the pause, new processes (memory is not kept). Resuming a running "
                     "one does nothing and says so.";
    d->input_schema = json_loads(skd__builtin_sandbox_id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = move_handler;
    d->udata = (void *)&resume_move;
}

void skd__builtin_sandbox_fork_def(skd_skill_def *d)
{
    d->name = "sandbox_fork";
    d->live_bound = 1;
    d->version = "1.0.0";
    d->description =
        "Fork one of your live sandboxes (running or paused): a new sandbox whose "
        "files (root layer, /tmp) are a copy of this one's now; the two are independent "
        "afterwards. Processes and memory are not copied.";
    d->input_schema = json_loads(skd__builtin_sandbox_id_schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = fork_handler;
}
